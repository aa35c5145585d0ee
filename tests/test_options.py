"""``RunOptions`` and ``MonteCarloOptions``: one object for how a Monte Carlo run executes
(issue 30) and one for how its answer is formed (issue 44); the keywords they replaced are
refused naming the new place."""

from __future__ import annotations

import jax
import numpy as np
import pytest

import jaxacct
from jaxacct import options as options_lib

MECHANISM = jaxacct.MatrixMechanism(jaxacct.BMinSep(sampling_prob=0.25, iterations=4, min_sep=2),
                                    jaxacct.BandedToeplitz([1.0, 0.5]), 1.0)


def test_run_options_give_the_bits_of_the_keywords(tmp_path):
  calls = []
  run = jaxacct.RunOptions(blocks_per_call=2, progress=lambda *a: calls.append(a),
                           checkpoint=tmp_path / 'ckpt', devices=jax.devices()[:1])
  by_options = jaxacct.estimate_delta(jax.random.key(3), MECHANISM, [0.5, 1.0], 512,
                                      monte_carlo=jaxacct.MonteCarloOptions(block_size=128),
                                      run=run)
  by_keywords = jaxacct.estimate_delta(jax.random.key(3), MECHANISM, [0.5, 1.0], 512,
                                       monte_carlo=jaxacct.MonteCarloOptions(block_size=128),
                                       run=jaxacct.RunOptions(blocks_per_call=4))
  for direction in ('remove', 'add'):
    np.testing.assert_array_equal(by_options.delta_hat[direction],
                                  by_keywords.delta_hat[direction])
  # Two calls of two blocks per direction; counts run over both directions.
  assert [c[2] for c in calls] == ['estimate'] * 4 and calls[-1][:2] == (1024, 1024)
  assert (tmp_path / 'ckpt' / 'checkpoint.json').is_file()


@pytest.mark.parametrize('call', ['estimate', 'verify', 'calibrate', 'plan', 'account'])
@pytest.mark.parametrize('keyword, place', [
    ('devices', 'run=jaxacct.RunOptions(devices=...)'),
    ('num_samples', 'monte_carlo=jaxacct.MonteCarloOptions(num_samples=...)'),
    ('dtype', "monte_carlo=jaxacct.MonteCarloOptions(precision='float32' or 'float64')")])
def test_a_moved_keyword_is_refused_naming_its_new_place_before_compute(call, keyword, place):
  key, given = jax.random.key(0), {keyword: 1}
  if call == 'estimate' and keyword == 'num_samples':
    given = {'num_samples': 100}  # a real argument of estimate_delta: no refusal
    return
  with pytest.raises(jaxacct.InputTypeError) as refusal:
    if call == 'estimate':
      jaxacct.estimate_delta(key, MECHANISM, [1.0], 100, **given)
    elif call == 'verify':
      jaxacct.verify(key, [MECHANISM], epsilon=1.0, delta=1e-3, **given)
    elif call == 'calibrate':
      jaxacct.calibrate_noise_multiplier(MECHANISM.scheme, MECHANISM.matrix, epsilon=1.0,
                                         delta=1e-3, key=key, **given)
    elif call == 'account':
      jaxacct.account(MECHANISM, epsilon=1.0, delta=1e-3, key=key, **given)
    else:
      from jaxacct.montecarlo.evr import plan
      plan.capacity_plan(MECHANISM, epsilon=1.0, delta=1e-3, **given)
  assert f'{keyword}= moved to {place}' in str(refusal.value)
  assert 'CHANGELOG 0.2.0' in str(refusal.value)


def test_an_accountant_option_as_a_keyword_names_accountant_options():
  with pytest.raises(jaxacct.InputTypeError, match=r"accountant_options=\{'bandwidths'"):
    jaxacct.account(MECHANISM, epsilon=1.0, accountant='renyi', bandwidths=4)


def test_the_public_signatures_show_only_the_new_parameters():
  import inspect
  for function in (jaxacct.estimate_delta, jaxacct.verify, jaxacct.calibrate_noise_multiplier,
                   jaxacct.account):
    parameters = inspect.signature(function).parameters
    assert 'monte_carlo' in parameters and 'run' in parameters
    assert not {'devices', 'dtype', 'progress', 'attempt', 'checkpoint'} & set(parameters)


@pytest.mark.parametrize('call, field', [('estimate', 'attempt'), ('sweep', 'num_candidates'),
                                         ('verify', 'estimation_samples'),
                                         ('account', 'grid_ratio'), ('plan', 'shared_draws')])
def test_an_unused_monte_carlo_field_is_refused_not_dropped(call, field):
  value = {'attempt': 2, 'num_candidates': 3, 'estimation_samples': 5000, 'grid_ratio': 1.05,
           'shared_draws': False}[field]
  options = jaxacct.MonteCarloOptions(**{field: value})
  key = jax.random.key(0)
  with pytest.raises(jaxacct.InputError, match=rf'does not use monte_carlo\.{field}'):
    if call == 'estimate':
      jaxacct.estimate_delta(key, MECHANISM, [1.0], 100, monte_carlo=options)
    elif call == 'sweep':
      from jaxacct.montecarlo.evr import candidates
      candidates.estimate_delta_for_sigmas(key, MECHANISM, [1.0], [1.0], 100,
                                           monte_carlo=options)
    elif call == 'verify':
      jaxacct.verify(key, [MECHANISM], epsilon=1.0, delta=1e-3, monte_carlo=options)
    elif call == 'account':
      jaxacct.account(MECHANISM, epsilon=1.0, delta=1e-3, key=key, monte_carlo=options)
    else:
      from jaxacct.montecarlo.evr import plan
      plan.capacity_plan(MECHANISM, epsilon=1.0, delta=1e-3, monte_carlo=options)


def test_an_explicit_deterministic_accountant_refuses_monte_carlo_arguments():
  for extra, name in (({'key': jax.random.key(0)}, 'key'),
                      ({'monte_carlo': jaxacct.MonteCarloOptions(attempt=2)}, 'monte_carlo'),
                      ({'run': jaxacct.RunOptions(ledger=jaxacct.VerificationLedger())},
                       'run.ledger')):
    with pytest.raises(jaxacct.InputError, match=rf'account: {name} is for Monte Carlo'):
      jaxacct.account(MECHANISM, epsilon=1.0, accountant='unamplified_gaussian', **extra)


@pytest.mark.parametrize('fields, message', [
    ({'num_samples': 0}, 'num_samples must be an integer >= 1'),
    ({'attempt': 0}, 'attempt must be an integer >= 1'),
    ({'precision': 'float16'}, 'precision must be one of'),
    ({'grid_ratio': 1.0}, r'grid_ratio must be in \(1, 2\]'),
    ({'shared_draws': 'no'}, 'shared_draws must be'),
    ({'fallback': 3}, 'fallback must be a registered accountant name'),
])
def test_bad_monte_carlo_options_are_named(fields, message):
  with pytest.raises(jaxacct.InputError, match=message):
    jaxacct.MonteCarloOptions(**fields)


def test_a_ledger_path_is_refused_naming_file_ledger(tmp_path):
  with pytest.raises(jaxacct.InputTypeError, match=r'jaxacct\.FileLedger\('):
    jaxacct.RunOptions(ledger=tmp_path / 'ledger.json')
  with pytest.raises(jaxacct.InputTypeError, match='checkpoint must be a folder path'):
    jaxacct.RunOptions(checkpoint=object())
  assert jaxacct.RunOptions(checkpoint=str(tmp_path)).checkpoint == tmp_path


@pytest.mark.parametrize('fields, message', [
    ({'blocks_per_call': 1}, 'blocks_per_call must be an integer >= 2'),
    ({'checkpoint_interval': 0.0}, 'checkpoint_interval must be'),
    ({'max_seconds': -1.0}, 'max_seconds must be'),
    ({'progress': 'tqdm'}, 'progress must be callable'),
])
def test_bad_run_options_are_named(fields, message):
  with pytest.raises(jaxacct.InputError, match=message):
    jaxacct.RunOptions(**fields)


def test_run_must_be_run_options():
  with pytest.raises(jaxacct.InputTypeError, match='run must be a jaxacct.RunOptions'):
    options_lib.run_options({'devices': None})
  with pytest.raises(jaxacct.InputTypeError, match='monte_carlo must be a jaxacct.MonteCarlo'):
    options_lib.monte_carlo_options({'attempt': 2}, 'f', {'attempt'})


class _Stop(Exception):
  pass


def _stopping_after(calls: int):
  seen = []

  def progress(done, total, stage):
    seen.append(stage)
    if len(seen) == calls:
      raise _Stop
  return progress


def test_a_sigma_sweep_resumes_from_its_checkpoint_bitwise_and_refuses_another_run(tmp_path):
  from jaxacct.montecarlo.evr import candidates
  key, sigmas = jax.random.key(5), [0.8, 1.0, 1.25]
  whole = candidates.estimate_delta_for_sigmas(key, MECHANISM, sigmas, [0.5], 512,
                                               monte_carlo=jaxacct.MonteCarloOptions(
                                                   block_size=128))
  folder = tmp_path / 'sweep'
  with pytest.raises(_Stop):
    candidates.estimate_delta_for_sigmas(key, MECHANISM, sigmas, [0.5], 512,
                                         monte_carlo=jaxacct.MonteCarloOptions(block_size=128),
                                         run=jaxacct.RunOptions(
                                             blocks_per_call=2, checkpoint=folder,
                               checkpoint_interval=1e-9, progress=_stopping_after(3)))
  seen = []
  resumed = candidates.estimate_delta_for_sigmas(key, MECHANISM, sigmas, [0.5], 512,
                                                 monte_carlo=jaxacct.MonteCarloOptions(
                                                     block_size=128),
                                                 run=jaxacct.RunOptions(
                                                     blocks_per_call=2, checkpoint=folder,
                             progress=lambda done, total, stage: seen.append(done)))
  assert seen[0] > 128 * len(sigmas)  # it went on from the saved blocks, not from 0
  for direction in ('remove', 'add'):
    np.testing.assert_array_equal(resumed.delta_hat[direction], whole.delta_hat[direction])
  with pytest.raises(jaxacct.InputError, match='sigmas'):
    candidates.estimate_delta_for_sigmas(key, MECHANISM, [0.8, 1.0], [0.5], 512,
                                         monte_carlo=jaxacct.MonteCarloOptions(block_size=128),
                                         run=jaxacct.RunOptions(checkpoint=folder))
  with pytest.raises(jaxacct.InputError, match='run.ledger must be None'):
    candidates.estimate_delta_for_sigmas(key, MECHANISM, sigmas, [0.5], 512,
                                         run=jaxacct.RunOptions(
                                             ledger=jaxacct.VerificationLedger()))


def test_an_extended_estimate_holds_the_sums_a_checkpoint_of_the_same_run_holds(tmp_path):
  """``EstimatorState`` is one candidate's ``BlockSums``: extending in memory, resuming
  from the checkpoint folder and one uninterrupted run give the same bits."""
  key = jax.random.key(9)
  half = jaxacct.estimate_delta(key, MECHANISM, [0.5, 1.0], 256,
                                monte_carlo=jaxacct.MonteCarloOptions(block_size=128))
  extended = jaxacct.estimate_delta(key, MECHANISM, [0.5, 1.0], 512, state=half.state,
                                    monte_carlo=jaxacct.MonteCarloOptions(block_size=128))
  folder = tmp_path / 'estimate'
  with pytest.raises(_Stop):
    jaxacct.estimate_delta(key, MECHANISM, [0.5, 1.0], 512,
                           monte_carlo=jaxacct.MonteCarloOptions(block_size=128),
                           run=jaxacct.RunOptions(blocks_per_call=2, checkpoint=folder,
                                                  checkpoint_interval=1e-9,
                                                  progress=_stopping_after(3)))
  resumed = jaxacct.estimate_delta(key, MECHANISM, [0.5, 1.0], 512,
                                   monte_carlo=jaxacct.MonteCarloOptions(block_size=128),
                                   run=jaxacct.RunOptions(checkpoint=folder))
  whole = jaxacct.estimate_delta(key, MECHANISM, [0.5, 1.0], 512,
                                 monte_carlo=jaxacct.MonteCarloOptions(block_size=128))
  for result in (extended, resumed):
    assert result.state.sums == whole.state.sums
    assert result.state.sums_of_squares == whole.state.sums_of_squares
  totals = whole.state.totals()
  assert type(whole.state).of_totals(
      totals, **{f: getattr(whole.state, f) for f in ('fingerprint', 'key_data', 'purpose',
                                                      'epsilons', 'block_size', 'num_samples',
                                                      'histogram_edges')}) == whole.state


def test_an_estimate_writes_its_own_json_rows():
  result = jaxacct.estimate_delta(jax.random.key(2), MECHANISM, [0.5, 1.0, 2.0], 256,
                                  monte_carlo=jaxacct.MonteCarloOptions(block_size=128))
  whole, rows = result.to_dict(), result.to_dict([2.0, 0.5])
  assert whole['epsilons'] == [0.5, 1.0, 2.0] and whole['num_samples'] == 256
  assert rows['epsilons'] == [2.0, 0.5]
  for direction in ('remove', 'add'):
    assert rows['delta_hat'][direction] == [whole['delta_hat'][direction][2],
                                            whole['delta_hat'][direction][0]]
    assert rows['standard_error'][direction][1] == whole['standard_error'][direction][0]
  with pytest.raises(jaxacct.InputError, match=r'epsilons \[0.75\] are not on'):
    result.to_dict([0.75])
  scheme = MECHANISM.scheme.to_dict()
  assert (scheme['type'], scheme['sampling_prob'], scheme['iterations'], scheme['min_sep']) == (
      'BMinSep', 0.25, 4, 2)
  assert jaxacct.BMinSep(**{k: v for k, v in scheme.items() if k != 'type'}) == MECHANISM.scheme


def test_progress_is_shown_where_a_person_watches_and_off_by_a_flag(monkeypatch):
  from jaxacct import progress as progress_lib
  assert options_lib.run_options(None).progress is None  # under pytest: silent
  monkeypatch.setenv(progress_lib.ENVIRONMENT_VARIABLE, '1')
  assert isinstance(options_lib.run_options(None).progress, progress_lib.Reporter)
  assert options_lib.run_options(jaxacct.RunOptions(progress=False)).progress is None
  mine = lambda *call: None  # noqa: E731
  assert options_lib.run_options(jaxacct.RunOptions(progress=mine)).progress is mine
  monkeypatch.setenv(progress_lib.ENVIRONMENT_VARIABLE, '0')
  assert options_lib.run_options(None).progress is None
  with pytest.raises(jaxacct.InputTypeError, match='or False'):
    jaxacct.RunOptions(progress='yes')


def test_results_print_as_one_short_line():
  estimate = jaxacct.estimate_delta(jax.random.key(2), MECHANISM, [0.5, 1.0], 256,
                                    monte_carlo=jaxacct.MonteCarloOptions(block_size=128))
  text = repr(estimate)
  assert '\n' not in text and len(text) < 200 and 'EstimatorState' not in text
  assert text.startswith('DeltaEstimate(num_samples=256 per direction, δ̂(0.5)=')
  guarantee = jaxacct.Guarantee(epsilon=2.0, delta=1e-5, method='deterministic',
                                noise_multiplier=1.25, accountant='pld')
  assert repr(guarantee) == ("Guarantee(noise_multiplier=1.25, epsilon=2, delta=1e-05, "
                             "method='deterministic', accountant='pld')")
