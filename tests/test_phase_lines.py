"""No long phase without a line (issue 43 item 6): phases without progress calls of their own
(compiles, a plan's replay of a report's queries) are announced through ``progress.announce``
before they start, a slow stage's first line comes early, the library stays quiet without a
listener, and ``jaxacct plan`` times the run's precision only unless asked.

No timing here: the reporter's clock is a fake one where seconds matter (the longest gaps of
the real commands are measured by ``benchmarks/silent_phases.py``, benchmarks/RESULTS.md)."""

from __future__ import annotations

import json
import logging
import pathlib

import numpy as np
import pytest

import jaxacct
from jaxacct import cli
from jaxacct import progress as progress_lib
from jaxacct.conventions import DIRECTIONS
from jaxacct.deterministic import accountant, curve_plan
from jaxacct.montecarlo.evr import plan as plan_lib
from jaxacct.strategies import banded_toeplitz

CONFIGS = pathlib.Path(__file__).resolve().parents[1] / 'configs'


class _Clock:
  """``time.perf_counter`` of ``jaxacct.progress``, moved by hand."""

  def __init__(self):
    self.now = 1000.0

  def __call__(self) -> float:
    return self.now


@pytest.fixture
def clock(monkeypatch):
  fake = _Clock()
  monkeypatch.setattr(progress_lib.time, 'perf_counter', fake)
  return fake


def _lines(text: str) -> list[str]:
  return [line for line in text.splitlines() if line.startswith('jaxacct: ')]


def test_a_reporter_prints_an_announcement_at_once(capsys):
  reporter = progress_lib.Reporter(terminal=False)
  progress_lib.announce(reporter, 'compiling the float64 program of 16 σ…')
  assert _lines(capsys.readouterr().err) == ['jaxacct: compiling the float64 program of 16 σ…']


def test_a_plain_callable_and_false_hear_nothing(capsys, caplog):
  calls = []
  with caplog.at_level(logging.INFO, logger='jaxacct'):
    progress_lib.announce(lambda *args: calls.append(args), 'compiling…')
    progress_lib.announce(False, 'compiling…')
  assert calls == [] and capsys.readouterr().err == '' and caplog.records == []


def test_no_callback_logs_at_info_and_is_quiet_by_default(capsys, caplog):
  # Under pytest nobody watches (progress.interactive): the line goes to the jaxacct logger,
  # which shows nothing at the default WARNING level (the CLI shows its INFO lines).
  progress_lib.announce(None, 'planning…')
  assert capsys.readouterr().err == ''
  with caplog.at_level(logging.INFO, logger='jaxacct'):
    progress_lib.announce(None, 'planning…')
  assert [record.getMessage() for record in caplog.records] == ['jaxacct: planning…']


def test_a_slow_stage_says_so_after_prompt_seconds_then_every_interval(clock, capsys):
  reporter = progress_lib.Reporter(terminal=False, interval=30.0, prompt_seconds=10.0)
  printed = []

  def call(done, seconds):
    clock.now += seconds
    reporter(done, 100, 'report curve')
    printed.append(len(_lines(capsys.readouterr().err)))

  call(1, 4.0)   # 4 s without a line: quiet
  call(2, 7.0)   # 11 s: the stage's first line
  call(3, 12.0)  # 12 s after it: quiet (interval 30 s from now on)
  call(4, 19.0)  # 31 s after it: a line
  assert printed == [0, 1, 0, 1]
  clock.now += 11.0
  reporter(1, 10, 'δ(ε) table')  # a new stage after 11 s of silence: its first line at once
  assert len(_lines(capsys.readouterr().err)) == 1


def test_a_stage_shows_no_rate_before_its_second_call(clock, capsys):
  # The first call of a stage carries its compile or host tables: "0.0/s, ETA unknown" said
  # nothing; the rate is shown once a call after it has been timed.
  reporter = progress_lib.Reporter(terminal=False, interval=1.0, prompt_seconds=1.0)
  clock.now += 60.0
  reporter(256, 1000, 'tilted search 5')
  clock.now += 2.0
  reporter(512, 1000, 'tilted search 5')
  first, second = _lines(capsys.readouterr().err)
  assert first.endswith('256/1,000 samples (26 %), rate and ETA after the next call'), first
  assert second.endswith('512/1,000 samples (51 %), 128.0/s, ETA 3.8 s'), second


def test_an_announcement_counts_as_a_line(clock, capsys):
  reporter = progress_lib.Reporter(terminal=False, prompt_seconds=10.0)
  clock.now += 9.0
  reporter.announce('timing…')
  clock.now += 9.0  # 9 s after the announcement: still quiet
  reporter(1, 100, 'estimate')
  assert _lines(capsys.readouterr().err) == ['jaxacct: timing…']


def test_a_stage_reported_done_twice_prints_one_done_line(clock, capsys):
  # A σ search reports its last probe again when it finishes: one "done" line, not two.
  reporter = progress_lib.Reporter(terminal=False)
  reporter(0, 15, 'σ search')
  clock.now += 6.0  # longer than quiet_seconds: the finished stage prints its line
  reporter(15, 15, 'σ search')
  reporter(15, 15, 'σ search')
  lines = _lines(capsys.readouterr().err)
  assert len(lines) == 1 and lines[0].endswith('done'), lines
  reporter(0, 4, 'next')  # a new stage that finishes the same way still gets its line
  clock.now += 6.0
  reporter(4, 4, 'next')
  assert len(_lines(capsys.readouterr().err)) == 1


def test_a_heartbeat_says_a_long_phase_is_still_running(capsys):
  # A phase without counts of its own gets a line every `every` seconds until it ends.
  import threading  # pylint: disable=import-outside-toplevel
  finished, done = threading.Event(), [0]
  reporter = progress_lib.Reporter(terminal=False)
  with progress_lib.heartbeat(reporter, 'the replay', every=0.01, count=lambda: done[0]):
    done[0] = 7
    finished.wait(0.2)  # the block's work: long enough for a few beats
  beats = _lines(capsys.readouterr().err)
  assert len(beats) >= 2 and beats[-1].startswith('jaxacct: the replay: still running after ')
  assert beats[-1].endswith(', 7 so far…')
  finished.wait(0.05)  # after the block: silent
  assert not _lines(capsys.readouterr().err)
  with progress_lib.heartbeat(False, 'x', every=0.01):
    finished.wait(0.05)
  assert not _lines(capsys.readouterr().err)


def test_deterministic_plan_announces_its_replay_and_timed_compositions(capsys):
  # The MMCC curve of tests/deterministic/test_curve_plan.py on a coarse grid (cheap).
  mechanism = jaxacct.MatrixMechanism(
      jaxacct.Poisson(sampling_prob=0.1, iterations=12),
      jaxacct.BandedToeplitz(banded_toeplitz.square_root_coefficients(3)), 1.5)
  curve = accountant.privacy_curve(mechanism, accountant='mmcc',
                                   value_discretization_interval=5e-3)
  plan = curve_plan.plan_queries(
      curve, lambda replayed: [replayed.delta_for_epsilon(2.0, direction=d) for d in DIRECTIONS],
      progress=progress_lib.Reporter(terminal=False))
  lines = _lines(capsys.readouterr().err)
  assert plan is not None and len(lines) == 2
  assert lines[0].startswith("jaxacct: planning the report's PLD compositions: its queries "
                             'replayed on a coarse copy of the curve')
  assert f'the replay made {plan.compositions} compositions in ' in lines[1]
  assert 'timing full ones at δ_E = ' in lines[1]
  # Without a listener the plan is silent (tests, scripts).
  curve_plan.plan_queries(accountant.privacy_curve(mechanism, accountant='mmcc',
                                                   value_discretization_interval=5e-3),
                          lambda replayed: replayed.epsilon_for_delta(1e-3))
  assert capsys.readouterr().err == ''


def test_a_compile_is_announced_before_it_starts(capsys):
  mechanism = jaxacct.MatrixMechanism(
      jaxacct.BMinSep(sampling_prob=0.25, iterations=8, min_sep=2),
      jaxacct.BandedToeplitz([1.0, 0.5]), 1.0)
  seconds = plan_lib.seconds_per_sample(mechanism, np.dtype(np.float64), calls=1,
                                        role='a test', progress=progress_lib.Reporter(
                                            terminal=False))
  assert seconds > 0
  assert _lines(capsys.readouterr().err) == [
      'jaxacct: compiling and timing the float64 program of one σ (a test; n = 8)…']


def test_plan_times_the_runs_precision_unless_asked(tmp_path, capsys):
  # --samples-per-second: nothing compiled; the precisions planned are what the flag decides.
  common = ['--json', '--samples-per-second', '1000', '--out']
  assert cli.main(['plan', str(CONFIGS / 'quickstart.yaml'), *common, str(tmp_path / 'a')]) == 0
  captured = capsys.readouterr()
  payload = json.loads(captured.out)
  assert payload['precision'] == 'float64' and list(payload['plans']) == ['float64']
  # The plan announced its starting points on stderr (the CLI shows the library's INFO lines).
  assert any('planning the calibration in float64' in line for line in _lines(captured.err))
  written = json.loads((tmp_path / 'a' / 'plan' / 'plan.json').read_text())
  assert list(written['plans']) == ['float64']
  assert cli.main(['plan', str(CONFIGS / 'quickstart.yaml'), *common, str(tmp_path / 'b'),
                   '--precision', 'both']) == 0
  assert list(json.loads(capsys.readouterr().out)['plans']) == ['float64', 'float32']
  # The run's precision is always among them (calibration.precision: float32 here).
  assert cli.main(['plan', str(CONFIGS / 'quickstart.yaml'), *common, str(tmp_path / 'c'),
                   '--set', 'calibration.precision=float32']) == 0
  payload = json.loads(capsys.readouterr().out)
  assert payload['precision'] == 'float32' and list(payload['plans']) == ['float32']


def test_plan_says_which_precision_it_did_not_time(tmp_path, capsys):
  assert cli.main(['plan', str(CONFIGS / 'quickstart.yaml'), '--samples-per-second', '1000',
                   '--out', str(tmp_path)]) == 0
  out = capsys.readouterr().out
  assert '  float64: ' in out and 'float32: not timed (--precision both times it too' in out


def test_a_small_cli_estimate_announces_its_compile(tmp_path, capsys):
  # Not timed first (small): the line before the first call, which compiles the program.
  assert cli.main(['estimate', str(CONFIGS / 'quickstart.yaml'), '--out', str(tmp_path),
                   '--set', 'monte_carlo.num_samples=1000', '--set', 'scheme.iterations=32',
                   '--set', 'strategy.square_root_bands=2']) == 0
  lines = _lines(capsys.readouterr().err)
  assert lines[0] == ('jaxacct: estimate: 1,000 samples per direction of n = 32 rounds, '
                      'starting (its first call may compile the program)…')
