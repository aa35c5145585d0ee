"""An estimated σ (``calibrate_noise_multiplier(..., estimate_only=True)``, ``jaxacct calibrate
--estimate-only``), the upfront projection of a long calibration, and progress over a whole
calibration.

The mechanism is tests/montecarlo/test_checkpoint_and_ledger.py's (b-min-sep n = 24, b = 4,
warm, 3 bands) with its calibration's options (ε = 1, δ = 0.05, N = 30,000, 2,000 estimation
samples, 2 candidates), so the programs compiled are of shapes that file compiles too; the
estimate and the verified calibration of the same key are made once (module fixtures).
"""

import dataclasses
import json
import logging

import jax
import pytest

import jaxacct
from jaxacct import cli
from jaxacct import progress as progress_lib
from jaxacct import report
from jaxacct.montecarlo.evr import calibration as calibration_lib
from jaxacct.montecarlo.evr import ledger as ledger_lib
from jaxacct.montecarlo.evr import plan as plan_lib

MECHANISM = jaxacct.MatrixMechanism(
    jaxacct.BMinSep(sampling_prob=0.3, iterations=24, min_sep=4, warm_start=True),
    jaxacct.BandedToeplitz([1.0, 0.5, 0.25]), 1.1)
SCHEME, MATRIX = MECHANISM.scheme, MECHANISM.matrix
# grid_ratio 1.05: the range's ends are grid points, so a finer grid makes the bracket test
# mean more than test_checkpoint_and_ledger.py's 1.2 would (σ is traced: the same programs).
RUN = dict(epsilon=1.0, delta=0.05, key=jax.random.key(5))
MONTE_CARLO = jaxacct.MonteCarloOptions(num_samples=30_000, estimation_samples=2000,
                                        num_candidates=2, grid_ratio=1.05)
ESTIMATE = dataclasses.replace(MONTE_CARLO, estimate_only=True)
LOGGER = 'jaxacct'


class Recorder:
  """A progress callback that also listens to ``progress.expect``."""

  def __init__(self):
    self.calls, self.expected = [], []

  def __call__(self, done, total, stage):
    self.calls.append((done, total, stage))

  def expect(self, phases):
    self.expected.append(phases)


@pytest.fixture(scope='module')
def estimated(tmp_path_factory):
  """(the estimate, its progress recorder, the ledger file it was given)."""
  ledger = tmp_path_factory.mktemp('ledger') / 'ledger.json'
  recorder = Recorder()
  result = jaxacct.calibrate_noise_multiplier(
      SCHEME, MATRIX, **RUN, monte_carlo=ESTIMATE,
      run=jaxacct.RunOptions(progress=recorder, ledger=ledger_lib.FileLedger(ledger)))
  return result, recorder, ledger


@pytest.fixture(scope='module')
def verified():
  """The verified calibration of the same key and options (an in-memory ledger)."""
  recorder = Recorder()
  result = jaxacct.calibrate_noise_multiplier(
      SCHEME, MATRIX, **RUN, monte_carlo=MONTE_CARLO,
      run=jaxacct.RunOptions(progress=recorder, ledger=ledger_lib.VerificationLedger()))
  return result, recorder


def test_the_estimate_is_labelled_everywhere_and_never_a_guarantee(estimated):
  result, _, _ = estimated
  estimate, g = result.estimate, result.guarantee
  assert result.estimate_only and g.method == 'estimate' and not g.verified
  assert g.noise_multiplier == estimate.noise_multiplier == result.mechanism.noise_multiplier
  assert result.candidates == () and result.charge is None and g.attempts_checked is None
  assert 'estimate, not a guarantee' in repr(result)
  record = json.loads(json.dumps(result.to_dict()))  # JSON-ready
  assert record['verified'] is False and record['estimate_only'] is True
  assert record['method'] == 'estimate' and record['label'] == 'estimate, not a guarantee'
  assert record['estimate']['label'] == 'estimate, not a guarantee'
  # The verification plan: N per direction and candidate, its draws, its time here, the hint.
  plan = estimate.verification
  assert (plan.num_samples, plan.candidates, plan.draws) == (30_000, 2, 60_000)
  assert 0 < plan.seconds_here < plan.calibration_seconds_here
  assert plan.accelerator_hint == calibration_lib.ACCELERATOR_HINT
  assert plan.base_delta == estimate.base_delta == result.record.base_delta < RUN['delta']
  # The plan check: the projection of this estimate (sweeps, compiles, starting points) beside
  # the call's own seconds, in the result and its JSON; a run nobody planned has none.
  check = record['plan_check']
  assert check['projected_seconds'] == estimate.seconds_here > 0
  assert check['measured_seconds'] > 0 and result.plan_check == check


def test_the_estimate_lies_in_its_range_and_the_range_brackets_the_verified_sigma(
    estimated, verified):
  estimate = estimated[0].estimate
  assert estimate.low <= estimate.noise_multiplier <= estimate.high
  assert estimate.low_resolved and estimate.high_resolved and estimate.needed_samples is None
  # Both runs drew the same estimation samples (common random numbers, same key and options),
  # so their sweeps agree bitwise and σ̂ is the boundary the verified run centred on.
  assert estimated[0].record.sweeps == verified[0].record.sweeps
  released = verified[0].guarantee
  assert released.method == 'verified_mc'
  # Measured: σ̂ = released σ = 1.93842, range [1.846, 2.035] (grid 1.05; the verification's
  # N = 30,000 is 15× the estimation's, so it releases near where the true δ(ε) = δ_b).
  assert estimate.low <= released.noise_multiplier <= estimate.high
  # Each end is a swept σ where the band δ̂ ± 2 s.e. leaves (or enters) δ_b's side.
  swept = {s: (m, e) for sweep in estimated[0].record.sweeps
           for s, m, e in zip(sweep.sigmas, sweep.delta_hat, sweep.standard_error)}
  mean, error = swept[estimate.high]
  assert mean + 2 * error < estimate.base_delta
  below_low = max(s for s in swept if s < estimate.low)
  mean, error = swept[below_low]
  assert mean - 2 * error > estimate.base_delta


def test_an_unresolved_range_ends_at_the_fallback_and_says_how_many_samples_resolve_it():
  sweeps = (calibration_lib.SweepRecord((1.0, 1.1, 1.2), (0.2, 0.09, 0.05), (0.01, 0.01, 0.0)),)
  # 3/N = 0.3 > δ_b = 0.1: no σ can be shown to pass with 10 samples (the rule of three).
  low, high, low_resolved, high_resolved, needed = calibration_lib.sigma_range(
      sweeps, base_delta=0.1, estimation_samples=10, sigma_hat=1.1, sigma_up=3.0)
  assert (low, high, low_resolved, high_resolved) == (1.1, 3.0, True, False)
  assert needed == 31  # ⌈3/δ_b⌉ + 1: the s.e. scaling asks for fewer
  low, high, *_ = calibration_lib.sigma_range(
      sweeps, base_delta=0.1, estimation_samples=1000, sigma_hat=1.1, sigma_up=3.0)
  assert (low, high) == (1.1, 1.2)  # 0.09 + 2·0.01 > δ_b: 1.1 does not surely pass


def test_an_unplanned_calibration_has_no_plan_check(verified):
  assert verified[0].plan_check is None and 'plan_check' not in verified[0].to_dict()


def test_an_estimate_is_never_charged_in_the_ledger(estimated, verified):
  _, _, ledger = estimated
  assert not ledger.exists()  # not even opened
  # The same file does record a verification (so the check above could fail).
  jaxacct.calibrate_noise_multiplier(SCHEME, MATRIX, **RUN, monte_carlo=MONTE_CARLO,
                                     run=jaxacct.RunOptions(ledger=ledger_lib.FileLedger(ledger)))
  assert len(ledger_lib.FileLedger(ledger).runs(MECHANISM)) == 1


def test_a_verified_calibration_resumes_after_the_sweeps_of_an_estimate(verified, tmp_path):
  estimate = jaxacct.calibrate_noise_multiplier(SCHEME, MATRIX, **RUN, monte_carlo=ESTIMATE,
                                                run=jaxacct.RunOptions(checkpoint=tmp_path))
  recorder = Recorder()
  resumed = jaxacct.calibrate_noise_multiplier(
      SCHEME, MATRIX, **RUN, monte_carlo=MONTE_CARLO, run=jaxacct.RunOptions(
          checkpoint=tmp_path, progress=recorder, ledger=ledger_lib.VerificationLedger()))
  assert {stage for _, _, stage in recorder.calls} == {'verification'}  # sweeps replayed
  assert resumed.record.to_dict() == verified[0].record.to_dict()
  assert resumed.guarantee.noise_multiplier == verified[0].guarantee.noise_multiplier
  assert estimate.record.sweeps == resumed.record.sweeps


def test_progress_sees_every_stage_with_its_total_and_the_phases_ahead(estimated, verified):
  for result, recorder in (estimated[:2], verified):
    stages = list(dict.fromkeys(stage for _, _, stage in recorder.calls))
    sweeps = len(result.record.sweeps)
    final = f'estimation sweep {sweeps}' if result.estimate_only else 'verification'
    assert stages == [f'estimation sweep {i}' for i in range(1, sweeps + 1)] + (
        [] if result.estimate_only else ['verification'])
    for stage in stages:  # each stage counts up to its total, which the announcement gave
      counts = [(done, total) for done, total, s in recorder.calls if s == stage]
      assert counts[-1][0] == counts[-1][1]
      announced = [p.total for phases in recorder.expected for p in phases if p.stage == stage]
      assert set(announced) == {counts[-1][1]}
    assert stages[-1] == final
    # Each announcement starts with the stage beginning, labelled with the sweeps expected,
    # and runs to the end of the run (the verification too unless it is an estimate).
    first = recorder.expected[0]
    assert first[0].label.startswith('estimation sweep 1/')
    assert recorder.expected[sweeps - 1][0].label == f'estimation sweep {sweeps}/{sweeps}'
    assert first[-1].stage == final and all(p.cost > 0 for p in first)


def test_a_reporter_gives_the_whole_run_eta_off_a_terminal(capsys):
  reporter = progress_lib.Reporter(terminal=False, interval=1e-9, quiet_seconds=0.0)
  progress_lib.expect(reporter, [progress_lib.Phase('a', 10, 1.0, 'a 1/2'),
                                 progress_lib.Phase('b', 10, 3.0, 'b 2/2')])
  for done in (2, 6, 10):
    reporter(done, 10, 'a')
  progress_lib.expect(reporter, [progress_lib.Phase('b', 10, 3.0, 'b 2/2')])
  reporter(5, 10, 'b')
  reporter(10, 10, 'b')
  reporter(3, 4, 'later')  # not announced: no whole-run figure
  lines = capsys.readouterr().err.splitlines()
  assert lines[0].startswith('jaxacct: a 1/2: 2/10 samples') and 'whole run' not in lines[0]
  assert all('whole run: ETA' in line for line in lines[1:5]), lines
  assert lines[4].startswith('jaxacct: b 2/2: 10/10') and lines[4].endswith('ETA 0.0 s')
  assert lines[5].startswith('jaxacct: later: 3/4') and 'whole run' not in lines[5]


def test_a_long_calibration_says_so_before_it_starts_and_a_small_one_pays_nothing(
    verified, monkeypatch, caplog):
  del verified  # its compiled programs and starting points make these runs quick
  ledger = ledger_lib.VerificationLedger
  with caplog.at_level(logging.WARNING, logger=LOGGER):
    # Small (every test, the quickstart): decided from the sample counts, no plan is made.
    monkeypatch.setattr(plan_lib, 'capacity_plan', _no_plan)
    jaxacct.calibrate_noise_multiplier(SCHEME, MATRIX, **RUN, monte_carlo=MONTE_CARLO,
                                       run=jaxacct.RunOptions(ledger=ledger()))
    assert not caplog.records
    monkeypatch.undo()
    monkeypatch.setattr(calibration_lib, 'LONG_RUN_SECONDS', 1e-6)
    jaxacct.calibrate_noise_multiplier(SCHEME, MATRIX, **RUN, monte_carlo=MONTE_CARLO,
                                       run=jaxacct.RunOptions(ledger=ledger()))
    with calibration_lib.planned_by_caller():  # the CLI printed its own plan
      jaxacct.calibrate_noise_multiplier(SCHEME, MATRIX, **RUN, monte_carlo=MONTE_CARLO,
                                       run=jaxacct.RunOptions(ledger=ledger()))
  [line] = [r for r in caplog.records if r.name.startswith(LOGGER)]
  assert line.levelno == logging.WARNING
  text = line.getMessage()
  assert 'this calibration is projected to take' in text and 'max_seconds=' in text
  assert 'estimate_only=True' in text and '\n' not in text


def _no_plan(*args, **kwargs):
  raise AssertionError('a small calibration made a capacity plan')


def test_the_command_writes_a_labelled_estimate_in_its_own_folder_never_over_a_calibration(
    estimated, tmp_path, capsys, monkeypatch):
  del estimated
  config = tmp_path / 'small.yaml'
  config.write_text(
      'scheme: {type: bminsep, iterations: 24, sampling_prob: 0.3, min_sep: 4, '
      'warm_start: true}\nstrategy: {c_col: [1.0, 0.5, 0.25]}\n'
      'calibration: {epsilon: 1.0, delta: 0.05, num_samples: 30000, estimation_samples: 2000, '
      'num_candidates: 2, grid_ratio: 1.05, seed: 0}\n')
  texts = []
  save = report._save_figure  # pylint: disable=protected-access

  def record_texts(fig, path):
    texts.append((path.name, [t.get_text() for t in fig.texts]
                  + [t.get_text() for ax in fig.axes for t in ax.get_legend().get_texts()]))
    save(fig, path)
  monkeypatch.setattr(report, '_save_figure', record_texts)
  out, ledger = tmp_path / 'out', tmp_path / 'ledger.json'
  assert cli.main(['calibrate', str(config), '--estimate-only', '--out', str(out),
                   '--ledger', str(ledger)]) == 0
  printed = capsys.readouterr().out
  assert sorted(p.name for p in (out / 'calibrate-estimate').iterdir()) == [
      'calibration_estimate.json', 'candidates_estimate.png', 'delta_hat_estimate.png']
  assert not ledger.exists()
  lines = printed.splitlines()
  assert lines[0].startswith('estimated noise_multiplier σ̂ = ')
  assert 'estimate, not a guarantee' in lines[0] and 'verified=False' in lines[0]
  assert lines[1].startswith('to verify it') and '30,000 samples per direction × 2' in lines[1]
  assert '`jaxacct plan ' + str(config) in lines[2]  # the accelerator hint, for this config
  payload = json.loads((out / 'calibrate-estimate' / 'calibration_estimate.json').read_text())
  assert payload['verified'] is False and payload['estimate_only'] is True
  assert payload['label'] == 'estimate, not a guarantee' and payload['charge'] is None
  assert payload['record']['verification']['sigmas'] == []
  for name, shown in texts:
    assert 'ESTIMATE, NOT A GUARANTEE' in shown, name
  assert any('estimate, not a guarantee' in t for t in dict(texts)['candidates_estimate.png'])
  # The budget is the estimate's: refused from the library's projection, before any sweep.
  assert cli.main(['calibrate', str(config), '--estimate-only', '--out', str(tmp_path / 'x'),
                   '--ledger', str(ledger), '--max-minutes', '1e-5']) == 2
  error = capsys.readouterr().err.strip().splitlines()[-1]
  assert 'the σ estimate' in error and '--force' in error and 'estimation_samples' in error
  assert not (tmp_path / 'x').exists() and not ledger.exists()
