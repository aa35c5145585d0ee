"""`jaxacct calibrate --checkpoint`: killed with SIGKILL mid-phase (a sweep, verification,
the replay of finished phases, the report curve) and rerun, it goes on from the saved block
and gives the uninterrupted run's JSON (issues 13, 29), also on another device count; the user's
attempt ledger charges or refuses a second calibration with a new seed, in the same report
folder or another one, and a report whose ledger was deleted refuses to go on (issue 29).

Each run is a subprocess (the CLI as a user runs it); the kill comes when the checkpoint file
shows the phase of interest in progress.
"""

import json
import os
import pathlib
import signal
import subprocess
import sys
import time

import pytest

import jaxacct

pytestmark = [pytest.mark.multiprocess, pytest.mark.slow]

ROOT = pathlib.Path(__file__).resolve().parents[1]
CONFIG = ROOT / 'configs' / 'quickstart.yaml'
# Small budgets (δ = 0.02) with long enough phases to be caught mid-way by the poller: a call
# holds 8 blocks of 1,024 samples per device, so on 2 devices an estimation sweep and the report
# curve take 2 calls per direction, the verification 4 (twice that on 1 device). 16 candidates:
# the verification's K σ program is then the estimation sweeps' (16 σ), one program fewer for
# every run to compile (or read from the persistent cache) and time in its plan; the
# verification's extra σ cost little at these sample counts.
NUM_SAMPLES = 60000
SETTINGS = ['--set', 'calibration.delta=0.02', '--set', 'calibration.epsilon=1.0',
            '--set', 'calibration.estimation_samples=24000',
            '--set', f'calibration.num_samples={NUM_SAMPLES}',
            '--set', 'calibration.num_candidates=16']
# Timings and paths differ between runs (plan_check: the plan's projected and measured seconds).
VOLATILE = ('seconds', 'report', 'ledger', 'charge', 'plan_check')


def _command(out, *extra):
  return [sys.executable, '-m', 'jaxacct.cli', 'calibrate', str(CONFIG), '--json', '--out',
          str(out), *SETTINGS, *extra]


def _env(devices: int) -> dict:
  env = dict(os.environ)
  env['XLA_FLAGS'] = f'--xla_force_host_platform_device_count={devices}'
  return env


def _run(out, *extra, devices=1, env=None) -> dict:
  done = subprocess.run(_command(out, *extra), env=dict(_env(devices), **(env or {})),
                        capture_output=True, text=True, timeout=900, check=False)
  assert done.returncode == 0, done.stderr
  payload = json.loads(done.stdout)
  return {k: v for k, v in payload.items() if k not in VOLATILE}


def _kill_when(out, checkpoint: pathlib.Path, ready, devices: int,
               file: str = 'checkpoint.json') -> dict:
  """Starts the run and SIGKILLs it once ``ready(text)`` holds for the text of the checkpoint
  file ``checkpoint/file``; returns that file's body as it was killed."""
  path = checkpoint / file
  errors = out.parent / 'stderr.txt'
  with open(errors, 'w') as stderr:
    process = subprocess.Popen(_command(out, '--checkpoint', str(checkpoint),
                                        '--checkpoint-interval', '0.000001'),
                               env=_env(devices), stdout=subprocess.DEVNULL, stderr=stderr)
    deadline = time.monotonic() + 600
    try:
      while time.monotonic() < deadline and process.poll() is None:
        try:
          text = path.read_text()
        except OSError:
          text = None
        if ready(text):
          process.send_signal(signal.SIGKILL)
          break
        time.sleep(0.005)
    finally:
      if process.poll() is None:
        process.kill()
      process.wait()
  assert process.returncode == -signal.SIGKILL, (
      f'the run ended before it could be killed: {errors.read_text()}')
  return json.loads(path.read_text())['body']


def _in_phase(prefix: str):
  """``ready`` for ``_kill_when``: the checkpoint shows a phase named ``prefix``… in progress."""
  def ready(text):
    try:
      current = json.loads(text)['body']['current']
    except (TypeError, ValueError, KeyError):
      return False
    return current is not None and current['phase'].startswith(prefix)
  return ready


def _changed(path: pathlib.Path):
  """``ready`` for ``_kill_when``: the file differs from what it holds now (the resumed run's
  first save, right after its replay of the finished phases)."""
  before = path.read_text()
  return lambda text: text is not None and text != before


def _position(body) -> tuple:
  stream = body['current']['stream']
  return stream['program'], stream['direction'], stream['block'] or 0


@pytest.fixture(scope='module')
def first_attempt(tmp_path_factory):
  """The uninterrupted run, a user's first attempt: (its JSON, its report folder, the user's
  ledger that recorded it). test_second_calibration_… goes on from that folder and ledger."""
  folder = tmp_path_factory.mktemp('reference')
  out, ledger = folder / 'out', folder / 'user-state' / 'ledger.json'
  return _run(out, env={'JAXACCT_LEDGER': str(ledger)}), out, ledger


@pytest.fixture
def uninterrupted(first_attempt):
  return first_attempt[0]


def test_killed_in_every_phase_and_its_replay_resumes_where_it_stopped_bitwise(
    tmp_path, uninterrupted):
  """Issue 29: kill -9 in a sweep, in verification, twice in a row at the resumed run's first
  save (right after the replay of the finished sweeps, which must not touch the phase in
  progress), and in the report curve; each resume goes on from the saved block, and the final
  JSON equals the uninterrupted run's, on other device counts: the runs alternate between 2
  devices and 1 (the uninterrupted run's, whose compiled programs they read from the
  persistent cache), so every resume after the first starts on another device count than the
  one that saved."""
  checkpoint, out = tmp_path / 'checkpoint', tmp_path / 'out'
  saved = _kill_when(out, checkpoint, _in_phase('estimation-sweep'), devices=2)
  assert 'verification' not in saved['completed'] and saved['current']['stream']['block']
  saved = _kill_when(out, checkpoint, _in_phase('verification'), devices=2)
  for devices in (1, 2):
    stopped = _position(saved)
    saved = _kill_when(out, checkpoint, _changed(checkpoint / 'checkpoint.json'), devices=devices)
    assert saved['current'] is not None and saved['current']['phase'] == 'verification'
    assert _position(saved) > stopped  # one call past the saved block, not from block 0
  curve = 'report-curve/checkpoint.json'
  saved = _kill_when(out, checkpoint, _in_phase('estimate'), devices=1, file=curve)
  main = json.loads((checkpoint / 'checkpoint.json').read_text())['body']
  assert 'verification' in main['completed'] and main['current'] is None
  stopped = _position(saved)
  saved = _kill_when(out, checkpoint, _changed(checkpoint / curve), devices=2, file=curve)
  assert _position(saved) > stopped
  resumed = _run(out, '--checkpoint', str(checkpoint), devices=1)
  assert resumed == uninterrupted


def _refused(out, *extra) -> str:
  done = subprocess.run(_command(out, *extra), env=_env(1), capture_output=True, text=True,
                        timeout=900, check=False)
  assert done.returncode == 2, done.stderr
  return done.stderr


def _ledger_runs(path) -> list[int]:
  """The number of runs of each mechanism the ledger file holds."""
  body = json.loads(path.read_text())['body']
  return [len(entry['runs']) for entry in body['mechanisms'].values()]


def test_second_calibration_with_a_new_seed_is_refused_or_charged(tmp_path, first_attempt,
                                                                 monkeypatch):
  # The first attempt is the fixture's run, recorded in its user's ledger (every run below
  # charges that one): one CLI run fewer than running it here again.
  uninterrupted, out, ledger_path = first_attempt
  monkeypatch.setenv('JAXACCT_LEDGER', str(ledger_path))
  assert _ledger_runs(ledger_path) == [1]
  assert _run(out) == uninterrupted  # the same run again is not a new attempt
  assert 'attempt=2' in _refused(out, '--set', 'calibration.seed=1')
  # Another report folder shares the user's ledger: still the second attempt.
  assert 'attempt=2' in _refused(tmp_path / 'other', '--set', 'calibration.seed=1')
  # Declared, the second attempt is charged: δ_overall = δ_b + union bound over 2 attempts
  # (a smaller δ_b leaves room for it under the same target δ).
  charged = _run(out, '--set', 'calibration.seed=1', '--set', 'calibration.attempt=2',
                 '--set', 'calibration.base_delta=0.015')
  # The first run could back this claim and is charged at its own δ_b.
  assert charged['attempts'] == 2 and charged['delta'] <= 0.02
  assert charged['delta'] == pytest.approx(jaxacct.overall_delta(
      NUM_SAMPLES, 0.015, attempts=2, earlier=[(NUM_SAMPLES, uninterrupted['base_delta'])]),
      rel=1e-12)
  assert _ledger_runs(ledger_path) == [2]
  # A deleted ledger cannot let a retry pass as a first attempt: the report records the charge.
  ledger_path.unlink()
  message = _refused(out, '--set', 'calibration.seed=2')
  assert 'no longer has it' in message and str(out / 'calibrate' / 'calibration.json') in message
  assert not ledger_path.exists() or _ledger_runs(ledger_path) == []
