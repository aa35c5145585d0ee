"""Checkpoint files and the persistent attempt ledger (issue 13): resume bitwise, refuse
another run's or a corrupt checkpoint, charge attempts across ledger objects on one file."""

import json
import os
import threading

import jax
import pytest

import jaxacct
from jaxacct.montecarlo import checkpoint as checkpoint_lib
from jaxacct.montecarlo import ledger as ledger_lib

MECHANISM = jaxacct.MatrixMechanism(
    jaxacct.BMinSep(sampling_prob=0.3, iterations=24, min_sep=4, warm_start=True),
    jaxacct.BandedToeplitz([1.0, 0.5, 0.25]), 1.1)
EPSILONS = [0.5, 1.0, 2.0]


class Stop(Exception):
  pass


def _stop_after(calls: int):
  seen = []
  def progress(done, total, stage):
    seen.append(done)
    if len(seen) == calls:
      raise Stop
  return progress


@pytest.mark.slow
def test_estimate_resumes_bitwise_after_an_interruption(tmp_path):
  kwargs = dict(blocks_per_call=1, checkpoint_interval=1e-9)
  reference = jaxacct.estimate_delta(jax.random.key(3), MECHANISM, EPSILONS, 9000,
                                     blocks_per_call=2)
  with pytest.raises(Stop):  # 9 blocks per direction, one per call: stop in "add"
    jaxacct.estimate_delta(jax.random.key(3), MECHANISM, EPSILONS, 9000, checkpoint=tmp_path,
                           progress=_stop_after(12), **kwargs)
  saved = json.loads((tmp_path / 'checkpoint.json').read_text())['body']['current']
  assert saved['stream']['direction'] == 1 and saved['stream']['block'] == 3
  resumed = jaxacct.estimate_delta(jax.random.key(3), MECHANISM, EPSILONS, 9000,
                                   checkpoint=tmp_path, **kwargs)
  for d in ('remove', 'add'):
    assert resumed.delta_hat[d].tolist() == reference.delta_hat[d].tolist()
    assert resumed.standard_error[d].tolist() == reference.standard_error[d].tolist()
  # A finished run is returned from the checkpoint without computing.
  again = jaxacct.estimate_delta(jax.random.key(3), MECHANISM, EPSILONS, 9000,
                                 checkpoint=tmp_path, progress=_stop_after(1), **kwargs)
  assert again.delta_hat['add'].tolist() == reference.delta_hat['add'].tolist()


def test_checkpoint_of_another_run_is_refused_naming_what_differs(tmp_path):
  jaxacct.estimate_delta(jax.random.key(3), MECHANISM, EPSILONS, 2000, checkpoint=tmp_path)
  with pytest.raises(checkpoint_lib.CheckpointError, match='num_samples differs'):
    jaxacct.estimate_delta(jax.random.key(3), MECHANISM, EPSILONS, 3000, checkpoint=tmp_path)
  with pytest.raises(checkpoint_lib.CheckpointError, match='estimator differs'):
    jaxacct.estimate_delta(jax.random.key(4), MECHANISM, EPSILONS, 2000, checkpoint=tmp_path)


@pytest.mark.parametrize('damage', ['truncate', 'edit'])
def test_corrupt_checkpoint_is_refused_and_kept(tmp_path, damage):
  jaxacct.estimate_delta(jax.random.key(3), MECHANISM, EPSILONS, 2000, checkpoint=tmp_path)
  path = tmp_path / 'checkpoint.json'
  text = path.read_text()
  damaged = text[:len(text) // 2] if damage == 'truncate' else text.replace('"block"', '"blok"')
  path.write_text(damaged)
  with pytest.raises(checkpoint_lib.CheckpointError, match='corrupt'):
    jaxacct.estimate_delta(jax.random.key(3), MECHANISM, EPSILONS, 2000, checkpoint=tmp_path)
  assert path.read_text() == damaged  # never silently restarted


def test_unwritable_checkpoint_directory_is_refused_before_compute(tmp_path):
  blocker = tmp_path / 'file'
  blocker.write_text('')
  with pytest.raises(checkpoint_lib.CheckpointError, match='cannot be created'):
    jaxacct.estimate_delta(jax.random.key(3), MECHANISM, EPSILONS, 2000,
                           checkpoint=blocker / 'sub', progress=_stop_after(1))
  with pytest.raises(ValueError, match='interval_seconds must be > 0'):
    jaxacct.estimate_delta(jax.random.key(3), MECHANISM, EPSILONS, 2000, checkpoint=tmp_path,
                           checkpoint_interval=0, progress=_stop_after(1))


def test_file_ledger_charges_attempts_across_objects_and_survives_a_crash(tmp_path):
  path = tmp_path / 'ledger.json'
  first, second = ledger_lib.FileLedger(path), ledger_lib.FileLedger(path)
  ok = lambda attempts: None
  assert first.charge('g', 'run-a', 1, ok) == 1
  assert second.charge('g', 'run-a', 1, ok) == 1  # the same run again: not a new attempt
  with pytest.raises(ValueError, match='attempt=2'):
    second.charge('g', 'run-b', 1, ok)
  def refuse(attempts):
    raise ValueError(f'refused at {attempts}')
  with pytest.raises(ValueError, match='refused at 2'):
    second.charge('g', 'run-b', 2, refuse)
  assert first.runs('g') == ('run-a',)  # a refused run is not recorded
  assert first.charge('g', 'run-b', 2, ok) == 2
  # A crash mid-write leaves a temporary file beside an intact ledger.
  (tmp_path / '.ledger.json.99999.tmp').write_text('{"body": {"trunc')
  assert ledger_lib.FileLedger(path).runs('g') == ('run-a', 'run-b')
  path.write_text(path.read_text()[:-10])
  with pytest.raises(ledger_lib.LedgerError, match='corrupt'):
    ledger_lib.FileLedger(path)


def test_file_ledger_lets_one_of_two_racing_processes_take_an_attempt(tmp_path):
  path = tmp_path / 'ledger.json'
  ledger_lib.FileLedger(path).charge('g', 'run-a', 1, lambda attempts: None)
  outcomes = []
  def take(run):
    try:
      outcomes.append(ledger_lib.FileLedger(path).charge('g', run, 2, lambda a: None))
    except ValueError as error:
      outcomes.append(str(error))
  threads = [threading.Thread(target=take, args=(f'run-{i}',)) for i in 'bc']
  for t in threads:
    t.start()
  for t in threads:
    t.join()
  assert sorted(map(str, outcomes))[0] == '2' and 'attempt=3' in sorted(map(str, outcomes))[1]


def test_ledger_lock_timeout_and_bad_paths(tmp_path):
  import fcntl
  path = tmp_path / 'ledger.json'
  ledger = ledger_lib.FileLedger(path, lock_timeout=0.2)
  with open(tmp_path / 'ledger.json.lock', 'a+') as holder:
    fcntl.flock(holder.fileno(), fcntl.LOCK_EX)
    with pytest.raises(ledger_lib.LedgerError, match='could not be locked within 0.2 s'):
      ledger.charge('g', 'run-a', 1, lambda attempts: None)
  with pytest.raises(ledger_lib.LedgerError, match='is a directory'):
    ledger_lib.FileLedger(tmp_path)
  with pytest.raises(TypeError, match='ledger must be'):
    ledger_lib.ledger_from(3)
  if os.geteuid() != 0:  # root writes anywhere
    locked = tmp_path / 'ro'
    locked.mkdir(mode=0o500)
    with pytest.raises(ledger_lib.LedgerError, match='not writable'):
      ledger_lib.FileLedger(locked / 'ledger.json')
