"""jaxacct.interop.jax_privacy.calibrated_plan: a jax_privacy DPExecutionPlan with jaxacct's σ
(issue 32 item 2).

Checked: the plan's pieces (the caller's batch strategy; the privatizer adds C⁻¹Z with stddev
σ·Δ, by whitening its noise with C; the clipped sum's sensitivity); σ equal bit for bit to
calling jaxacct directly (deterministic and Monte Carlo); the dp_event refused by
dp_accounting's PLD and RDP accountants; jax_privacy's own σ side by side where it has an
accountant (and the reason where it has none); the refusals.

Tiny shapes everywhere; the Monte Carlo and truncated-PLD cases are ``slow`` (each well under
a minute on an idle 2-core machine).
"""

import dataclasses

import jax
import jax.numpy as jnp
import numpy as np
import pytest

import jaxacct
from jaxacct.deterministic.accountant import calibrate_deterministic
from jaxacct.montecarlo.evr.calibration import calibrate_noise_multiplier

jax_privacy = pytest.importorskip('jax_privacy')

import dp_accounting  # noqa: E402
from jax_privacy import batch_selection as bs  # noqa: E402
from jax_privacy.experimental import execution_plan  # noqa: E402
from jax_privacy.matrix_factorization import banded  # noqa: E402
from jaxacct.interop import jax_privacy as interop  # noqa: E402

COEFS = np.array([1.0, 0.4])
BALLS = bs.BallsInBinsSampling(iterations=8, cycle_length=2)
# A closed-form accountant that supports every scheme: the plan's pieces, not σ, are tested.
QUICK = dict(accountant='unamplified_gaussian', plan=interop.PlanOptions(compare=False))
CLIPPED = interop.PlanOptions(l2_clip_norm=3.0, rescale_to_unit_norm=False, normalize_by=2.0,
                              compare=False)
# Whitening test: d coordinates are d independent draws of the n-step noise sequence.
DIMENSION = 8192
# 6 standard errors: a sample std's relative s.e. is 1/√(2d), a sample correlation's 1/√d.
STD_TOLERANCE = 6 / np.sqrt(2 * DIMENSION)
CORRELATION_TOLERANCE = 6 / np.sqrt(DIMENSION)


def _noise(plan, steps: int, dimension: int = DIMENSION) -> np.ndarray:
  """The privatizer's output on zero clipped sums: a steps × dimension array."""
  privatizer = plan.noise_addition_transform
  zero = jnp.zeros((dimension,), jnp.float32)
  state = privatizer.init(zero)
  rows = []
  for _ in range(steps):
    noisy, state = privatizer.update(zero, state)
    rows.append(np.asarray(noisy, dtype=np.float64))
  return np.stack(rows)


def _assert_white(result, steps: int):
  """C · noise is i.i.d. N(0, (σΔ)²): the noise is C⁻¹Z with the stated stddev."""
  c = np.asarray(result.strategy.materialize(steps), dtype=np.float64)
  white = c @ _noise(result.plan, steps)
  std = white.std(axis=1)
  np.testing.assert_allclose(std, result.noise_stddev, rtol=STD_TOLERANCE)
  correlation = np.corrcoef(white)
  off_diagonal = correlation[~np.eye(steps, dtype=bool)]
  assert np.max(np.abs(off_diagonal)) < CORRELATION_TOLERANCE
  return white


@pytest.fixture(scope='module')
def balls_auto():
  """Balls-in-bins, accountant "auto" (deterministic: renyi / conditional composition)."""
  return interop.calibrated_plan(batch_selection_strategy=BALLS, strategy=COEFS, epsilon=2.0,
                                 delta=1e-5, noise_seed=3)


# ------------------------------------------------------------------------------ the plan
def test_plan_pieces_and_noise_of_a_banded_toeplitz_strategy():
  result = interop.calibrated_plan(batch_selection_strategy=BALLS, strategy=COEFS, epsilon=2.0,
                                   delta=1e-5, noise_seed=11, accountant='unamplified_gaussian',
                                   plan=CLIPPED)
  plan = result.plan
  assert isinstance(plan, execution_plan.DPExecutionPlan)
  assert plan.batch_selection_strategy is BALLS
  assert result.scheme == jaxacct.BallsInBins(iterations=8, cycle_length=2)
  assert result.sensitivity == 1.5  # l2_clip_norm / normalize_by, as jax_privacy computes it
  assert plan.clipped_grad(lambda p, x: jnp.sum(p * x)).sensitivity() == 1.5
  assert result.noise_stddev == result.guarantee.noise_multiplier * 1.5
  assert result.guarantee.accountant == 'unamplified_gaussian'
  white = _assert_white(result, steps=8)
  # The same seed gives the same noise; another seed other noise.
  again = interop.calibrated_plan(batch_selection_strategy=BALLS, strategy=COEFS, epsilon=2.0,
                                  delta=1e-5, noise_seed=11, accountant='unamplified_gaussian',
                                  plan=CLIPPED)
  np.testing.assert_array_equal(_noise(again.plan, 2), _noise(plan, 2))
  other = dataclasses.replace(result, plan=interop.calibrated_plan(
      batch_selection_strategy=BALLS, strategy=COEFS, epsilon=2.0, delta=1e-5, noise_seed=12,
      accountant='unamplified_gaussian', plan=CLIPPED).plan)
  assert not np.array_equal(_noise(other.plan, 2), _noise(plan, 2))
  assert white.shape == (8, DIMENSION)


@pytest.mark.parametrize('form', ['dense', 'column_normalized_banded', 'config_normalized'])
def test_noise_of_dense_and_column_normalised_strategies(form):
  n = 4
  if form == 'dense':
    strategy = np.array([[1.0, 0, 0, 0], [0.5, 1.0, 0, 0], [0.2, 0.5, 0.8, 0], [0.1, 0.0, 0.3, 1]])
  elif form == 'column_normalized_banded':
    strategy = banded.ColumnNormalizedBanded.from_banded_toeplitz(n, jnp.asarray([1.0, 0.6]))
  else:
    strategy = execution_plan.BandMFExecutionPlanConfig(
        iterations=n, strategy=np.array([0.8, 0.6]), noise_multiplier=1.0, epsilon=None,
        delta=None, column_normalize=True, l2_clip_norm=2.0, rescale_to_unit_norm=False)
  scheme = bs.BallsInBinsSampling(iterations=n, cycle_length=n)
  result = interop.calibrated_plan(batch_selection_strategy=scheme, strategy=strategy,
                                   epsilon=2.0, delta=1e-5, noise_seed=5, **QUICK)
  assert isinstance(result.strategy, jaxacct.LowerTriangular)
  if form == 'config_normalized':  # the config's clipping fields are the defaults here
    assert result.sensitivity == 2.0
  _assert_white(result, steps=n)


def test_sigma_is_jaxaccts_deterministic_calibration_bit_for_bit(balls_auto):
  mechanism, direct = calibrate_deterministic(
      jaxacct.BallsInBins(iterations=8, cycle_length=2), jaxacct.BandedToeplitz(COEFS),
      epsilon=2.0, delta=1e-5)
  assert balls_auto.guarantee == direct
  assert balls_auto.guarantee.noise_multiplier == mechanism.noise_multiplier
  assert balls_auto.guarantee.method == 'deterministic' and balls_auto.calibration.record is None
  assert balls_auto.calibration.choice.name == 'auto'
  assert balls_auto.comparison.jax_privacy_sigma is None
  assert 'no accountant for balls-in-bins' in balls_auto.comparison.reason
  text = balls_auto.summary()
  assert f'{balls_auto.guarantee.noise_multiplier:.6g}' in text and 'balls-in-bins' in text
  assert str(balls_auto) == text


# ---------------------------------------------------------------------------- dp_event
def test_dp_event_records_the_statement_and_dp_accounting_refuses_it(balls_auto):
  event = balls_auto.plan.dp_event
  g = balls_auto.guarantee
  assert isinstance(event, interop.JaxacctVerifiedEvent)
  assert isinstance(event, dp_accounting.DpEvent)
  assert (event.noise_multiplier, event.epsilon, event.delta) == (
      g.noise_multiplier, g.epsilon, g.delta)
  assert event.method == 'deterministic' and event.accountant == g.accountant
  assert event.adjacency == 'zero_out' and event.num_samples == 0
  assert 'BallsInBins' in event.scheme and '2 bands' in event.strategy
  assert event.jaxacct_version == jaxacct.__version__
  with pytest.raises(AttributeError):  # frozen, like dp_accounting's own events
    event.noise_multiplier = 0.0
  assert hash(event) == hash(dataclasses.replace(balls_auto).plan.dp_event)
  composed = dp_accounting.ComposedDpEvent([dp_accounting.GaussianDpEvent(1.0), event])
  for accountant in (dp_accounting.pld.PLDAccountant(), dp_accounting.rdp.RdpAccountant()):
    for wrapped in (event, composed, dp_accounting.SelfComposedDpEvent(event, 3)):
      assert not accountant.supports(wrapped)
      with pytest.raises(dp_accounting.UnsupportedEventError):
        accountant.compose(wrapped)


# ------------------------------------------------------------------- jax_privacy side by side
@pytest.mark.slow
def test_comparison_on_cyclic_poisson_reads_jax_privacys_own_plan():
  """Cyclic Poisson with cycle_length = bands: jaxacct's pld (tolerance 1e-7) and jax_privacy's
  amplified_bandmf_event under PLD are the same reduction (Choquette-Choo et al. 2023), so the
  σ agree to the discretisation (measured 1.87865 vs 1.87866); the comparison's σ is the
  stddev of jax_privacy's own plan for the same config, read from its privatizer with the same
  seed (the first step of both is stddev · z₀ / c₀)."""
  sampler = bs.CyclicPoissonSampling(sampling_prob=0.5, iterations=16, cycle_length=2)
  result = interop.calibrated_plan(batch_selection_strategy=sampler, strategy=COEFS,
                                   epsilon=2.0, delta=1e-2, noise_seed=9, accountant='pld',
                                   accountant_options={'tolerance': 1e-7})
  c = result.comparison
  assert c.reason is None and c.jaxacct_accountant == 'pld' == result.guarantee.accountant
  assert np.isfinite(c.jaxacct_sigma) and np.isfinite(c.jax_privacy_sigma)
  assert c.jaxacct_sigma <= c.jax_privacy_sigma * (1 + 1e-5)
  assert abs(c.ratio - 1) < 1e-4
  assert 'amplified_bandmf_event' in c.jax_privacy_accountant
  assert c.jax_privacy_sigma == c.jax_privacy_noise_multiplier * np.linalg.norm(COEFS)
  own = execution_plan.BandMFExecutionPlanConfig(
      iterations=16, strategy=COEFS, epsilon=2.0, delta=1e-2, sampling_prob=0.5,
      noise_seed=9).plan
  assert own.batch_selection_strategy == sampler
  ratio = _noise(own, 1, 64) / _noise(result.plan, 1, 64)
  np.testing.assert_allclose(ratio, c.jax_privacy_sigma / result.noise_stddev, rtol=1e-5)
  assert 'jaxacct/jax_privacy' in result.summary()


@pytest.mark.slow
def test_comparison_on_truncated_cyclic_poisson_jaxacct_is_tighter():
  """Equal-split truncated cyclic Poisson: "auto" is jaxacct's pld (Ganesh (2025), zero-out);
  jax_privacy's is truncated_amplified_bandmf_event (TruncatedSubsampledGaussianDpEvent over
  groups of ⌊m/T⌋) under PLD. Measured 2.84499 vs 3.26297 (ratio 0.872)."""
  sampler = bs.CyclicPoissonSampling(sampling_prob=0.5, iterations=16, cycle_length=2,
                                     truncated_batch_size=2,
                                     partition_type=bs.PartitionType.EQUAL_SPLIT)
  result = interop.calibrated_plan(batch_selection_strategy=sampler, strategy=COEFS,
                                   epsilon=2.0, delta=1e-2, dataset_size=8, noise_seed=9)
  c = result.comparison
  assert c.reason is None and c.jaxacct_accountant == 'pld' == result.guarantee.accountant
  assert 'truncated_amplified_bandmf_event' in c.jax_privacy_accountant
  assert np.isfinite(c.jaxacct_sigma) and np.isfinite(c.jax_privacy_sigma)
  assert c.jaxacct_sigma < c.jax_privacy_sigma


def test_no_comparison_where_jax_privacys_config_differs():
  """INDEPENDENT bins with truncation: BandMFExecutionPlanConfig refuses the configuration;
  cycle_length ≠ bands: the config cannot express it. Each is reported with its reason."""
  independent = bs.CyclicPoissonSampling(sampling_prob=0.5, iterations=8, cycle_length=2,
                                         truncated_batch_size=4,
                                         partition_type=bs.PartitionType.INDEPENDENT)
  jp = interop._jax_privacy()
  c = interop._comparison(independent, COEFS, False, sigma=1.0, name='pld', epsilon=2.0,
                          delta=1e-5, adjacency='zero_out', dataset_size=10, jax_privacy=jp)
  assert c.jax_privacy_sigma is None and 'BandMFExecutionPlanConfig refuses it' in c.reason
  longer = bs.CyclicPoissonSampling(sampling_prob=0.5, iterations=8, cycle_length=4)
  c = interop._comparison(longer, COEFS, False, sigma=1.0, name='pld', epsilon=2.0,
                          delta=1e-5, adjacency='zero_out', dataset_size=None, jax_privacy=jp)
  assert c.jax_privacy_sigma is None and 'cycle_length = len(strategy) = 2' in c.reason
  c = interop._comparison(longer, None, False, sigma=1.0, name='pld', epsilon=2.0,
                          delta=1e-5, adjacency='zero_out', dataset_size=None, jax_privacy=jp)
  assert 'Toeplitz coefficients' in c.reason


# ----------------------------------------------------------------------------- Monte Carlo
@pytest.mark.slow
def test_bminsep_calibrates_by_monte_carlo_bit_for_bit():
  sampler = bs.BMinSepSampling(sampling_prob=0.5, iterations=8, min_sep=2)
  result = interop.calibrated_plan(batch_selection_strategy=sampler, strategy=COEFS,
                                   epsilon=2.0, delta=1e-2, noise_seed=1, key=7,
                                   run=jaxacct.RunOptions(progress=False))
  direct = calibrate_noise_multiplier(jaxacct.BMinSep(sampling_prob=0.5, iterations=8,
                                                      min_sep=2),
                                      jaxacct.BandedToeplitz(COEFS), epsilon=2.0, delta=1e-2,
                                      key=jax.random.key(7), run=jaxacct.RunOptions(progress=False))
  assert result.guarantee == direct.guarantee
  assert result.guarantee.method == 'verified_mc' and result.guarantee.num_samples > 0
  assert result.plan.dp_event.accountant == 'monte_carlo'
  assert result.comparison.jax_privacy_sigma is None
  assert 'b-min-sep' in result.comparison.reason
  assert result.calibration.guarantee == direct.guarantee


# ------------------------------------------------------------------------------ refusals
def _call(**changes):
  arguments = dict(batch_selection_strategy=BALLS, strategy=COEFS, epsilon=2.0, delta=1e-5,
                   noise_seed=0, **QUICK)
  arguments.update(changes)
  return interop.calibrated_plan(**arguments)


REFUSALS = {
    'band_beyond_min_sep': (dict(batch_selection_strategy=bs.BMinSepSampling(
        sampling_prob=0.5, iterations=8, min_sep=2), strategy=np.array([1.0, 0.5, 0.2]),
                                 key=0), 'strategy: '),
    'no_key_for_monte_carlo': (dict(batch_selection_strategy=bs.BMinSepSampling(
        sampling_prob=0.5, iterations=8, min_sep=2), accountant='auto'), 'key: '),
    'epsilon_zero': (dict(epsilon=0.0), 'epsilon must be'),
    'epsilon_inf': (dict(epsilon=float('inf')), 'epsilon must be'),
    'delta_one': (dict(delta=1.0), 'delta must be'),
    'delta_zero': (dict(delta=0.0), 'delta must be'),
    'no_noise_seed': (dict(noise_seed=None), 'noise_seed: '),
    'big_noise_seed': (dict(noise_seed=2**32), 'noise_seed must be'),
    'bool_key': (dict(accountant='monte_carlo', key=True), 'key must be'),
    'replace_one': (dict(adjacency='replace_one'), 'adjacency: '),
    'unknown_accountant': (dict(accountant='nope'), 'accountant must be'),
    'truncated_without_dataset_size': (dict(batch_selection_strategy=bs.CyclicPoissonSampling(
        sampling_prob=0.5, iterations=8, cycle_length=2, truncated_batch_size=4)),
                                       'dataset_size'),
    'monte_carlo_option_to_deterministic': (
        dict(monte_carlo=jaxacct.MonteCarloOptions(num_samples=100)),
        'calibrate: monte_carlo is for Monte Carlo calibration'),
    'clip_norm_zero': (dict(plan=interop.PlanOptions(l2_clip_norm=0.0,
                                                      rescale_to_unit_norm=False)),
                       'l2_clip_norm'),
    'moved_clip_keyword': (dict(l2_clip_norm=2.0), r'l2_clip_norm= moved to plan=jaxacct\.interop'),
    'moved_monte_carlo_keyword': (dict(num_samples=10), 'num_samples= moved to monte_carlo='),
    'moved_accountant_option': (dict(tolerance=1e-6), r"accountant_options=\{'tolerance'"),
    'config_iterations': (dict(strategy=execution_plan.BandMFExecutionPlanConfig(
        iterations=6, strategy=COEFS, noise_multiplier=1.0, epsilon=None, delta=None)),
                          'iterations=6'),
}


@pytest.mark.parametrize('case', sorted(REFUSALS))
def test_refusals_name_the_argument(case):
  changes, message = REFUSALS[case]
  with pytest.raises(jaxacct.InputError, match=message):
    _call(**changes)


def test_missing_jax_privacy_is_refused(monkeypatch):
  monkeypatch.setattr(jax_privacy, '__version__', '2.1.0')
  with pytest.raises(jaxacct.MissingExtraError, match='found jax_privacy 2.1.0'):
    _call()
