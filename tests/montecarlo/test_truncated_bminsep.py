"""Truncated b-min-sep Monte Carlo (seed 000 App. D): losses, sampler laws, full pipeline.

Oracles:
- ``tests/oracles/truncated_brute_force.py`` enumerates every participation
  and survival outcome of the sensitive example given r (not the recursion),
  and gives the exact joint law of (r, x^P, x^Q) by a DP over state counts.
- jax_privacy's asserted values (reference-values §1, four truncated rows).
- A one-round case whose δ is a finite sum over r of 1-D integrals (quadrature).
Tolerances: losses 1e-10·max(1, |L|) (float64 sums of ≤ 2ⁿ terms; observed
~1e-15); frequencies by χ² at p > 1e-3 and means within 5 standard errors
(fixed seeds, so each check is deterministic and fails on a wrong law).
"""

import dataclasses

import jax
import numpy as np
import pytest
from scipy import integrate, stats

import jaxacct
from jaxacct.montecarlo.engine import binomial, sampling
from jaxacct.montecarlo.evr import candidates, estimator
from jaxacct.montecarlo.engine.keys import sample_keys
from oracles import brute_force, chi_square
from oracles import truncated_brute_force as tbf

TOL = 1e-10


def _mechanism(*, p=0.5, n=3, b=2, warm=False, batch=1, dataset=100, c_col=(1.0, 0.5), sigma=1.0):
  scheme = jaxacct.BMinSep(sampling_prob=p, iterations=n, min_sep=b, warm_start=warm,
                           truncated_batch_size=batch, dataset_size=dataset)
  return jaxacct.MatrixMechanism(scheme, jaxacct.BandedToeplitz(np.asarray(c_col)), sigma)


@pytest.mark.parametrize('warm, rest, batch, want', [
    (False, [1, 0, 0], 1, 0.8407396632949528),
    (False, [2, 0, 1], 1, 0.6833726274094434),
    (False, [2, 0, 1], 2, 0.978400107545793),
    (True, [2, 0, 1], 1, 0.6643184939690996),
])
def test_reference_losses(warm, rest, batch, want):
  # reference-values §1 [jp-test]: p = .5, b = 2, n = 3, y = 1, c = [1, .5], σ = 1.
  mech = _mechanism(warm=warm, batch=batch)
  got = jaxacct.privacy_loss(mech, np.ones((1, 3)), 'remove', rest_batch_sizes=np.array([rest]))
  assert abs(float(got[0]) - want) <= 1e-12


def _random_case(seed):
  rng = np.random.default_rng(seed)
  n = int(rng.integers(2, 8))
  b = int(rng.integers(1, 5))
  m = int(rng.integers(1, b + 1))
  c_col = np.concatenate([[rng.uniform(0.3, 1.0)], rng.uniform(0.0, 1.0, m - 1)])
  batch = int(rng.integers(1, 6))
  dataset = 12
  rest = rng.integers(0, dataset, size=(16, n))  # many rounds with r ≥ B (truncation)
  sigma = float(rng.uniform(0.4, 2.0))
  mech = _mechanism(p=float(rng.uniform(0.05, 1.0)), n=n, b=b, warm=bool(rng.integers(2)),
                    batch=batch, dataset=dataset, c_col=c_col, sigma=sigma)
  # Outputs near every kind of mean (x^P up to 2, x^Q = -1) plus noise.
  y = rng.normal(size=(16, n)) * sigma + rng.choice([-1.0, 0.0, 1.0, 2.0], size=(16, n))
  return mech, y, rest


# The add loss is the negated remove loss of the same (y, r). ``direction`` is a static
# argument of the loss program (a compile per direction and shape) and reaches the truncated
# kernel only through the view's charge, which a ``BandedToeplitz`` view ignores (asserted for
# every seed without compiling): the add program is compiled and compared in two seeds, a warm
# (4: b = 4, 4 bands) and a cold start (9: b = 4, 4 bands), not in all twelve.
ADD_SEEDS = (4, 9)


@pytest.mark.parametrize('seed', range(12))
def test_losses_match_brute_force(seed):
  mech, y, rest = _random_case(seed)
  s = mech.scheme
  got = np.asarray(jaxacct.privacy_loss(mech, y, 'remove', rest_batch_sizes=rest))
  want = tbf.truncated_privacy_loss(y, rest, np.asarray(mech.matrix.c_col), s.sampling_prob,
                                    s.min_sep, s.truncated_batch_size, mech.noise_multiplier,
                                    s.warm_start)
  np.testing.assert_array_less(np.abs(got - want), TOL * np.maximum(1.0, np.abs(want)))
  view = mech.matrix.kernel_view(s)
  np.testing.assert_array_equal(np.asarray(view.charge('add', s.iterations)),
                                np.asarray(view.charge('remove', s.iterations)))
  if seed in ADD_SEEDS:
    add = np.asarray(jaxacct.privacy_loss(mech, y, 'add', rest_batch_sizes=rest))
    np.testing.assert_array_equal(add, -got)


@pytest.mark.parametrize('warm', [False, True])
def test_losses_match_forward_oracle_at_longer_horizons(warm):
  # The forward (transfer-matrix) oracle has no 2ⁿ cost: n = 40 with 4 bands.
  rng = np.random.default_rng(7)
  mech = _mechanism(p=0.4, n=40, b=4, warm=warm, batch=3, dataset=9,
                    c_col=[1.0, 0.7, 0.4, 0.2], sigma=0.8)
  rest = rng.integers(0, 9, size=(8, 40))
  y = rng.normal(size=(8, 40)) + 0.5
  s = mech.scheme
  got = np.asarray(jaxacct.privacy_loss(mech, y, 'remove', rest_batch_sizes=rest))
  want = tbf.truncated_privacy_loss_forward(y, rest, np.asarray(mech.matrix.c_col),
                                            s.sampling_prob, s.min_sep, s.truncated_batch_size,
                                            mech.noise_multiplier, s.warm_start)
  np.testing.assert_array_less(np.abs(got - want), TOL * np.maximum(1.0, np.abs(want)))


def test_rounds_without_truncation_equal_the_untruncated_engine():
  rng = np.random.default_rng(3)
  mech = _mechanism(p=0.3, n=12, b=3, warm=True, batch=50, dataset=100, c_col=[1.0, 0.6, 0.3])
  plain = dataclasses.replace(mech, scheme=dataclasses.replace(
      mech.scheme, truncated_batch_size=None, dataset_size=None))
  y = rng.normal(size=(20, 12)) + 0.5
  rest = rng.integers(0, 50, size=(20, 12))  # all r < B
  got = np.asarray(jaxacct.privacy_loss(mech, y, 'remove', rest_batch_sizes=rest))
  want = np.asarray(jaxacct.privacy_loss(plain, y, 'remove'))
  np.testing.assert_allclose(got, want, rtol=1e-12, atol=1e-12)
  exact = brute_force.loss_for('bminsep', np.asarray(mech.matrix.c_col), y[:3], 1.0,
                               sampling_prob=0.3, min_sep=3, warm_start=True)
  np.testing.assert_allclose(got[:3], exact, rtol=1e-10)


def test_batch_size_at_least_dataset_size_is_untruncated():
  mech = _mechanism(p=0.3, n=10, b=3, batch=100, dataset=100)
  assert not mech.scheme.truncates
  plain = dataclasses.replace(mech, scheme=dataclasses.replace(
      mech.scheme, truncated_batch_size=None, dataset_size=None))
  key = jax.random.key(4)
  np.testing.assert_array_equal(jaxacct.sample_privacy_losses(key, mech, 300, 'remove'),
                                jaxacct.sample_privacy_losses(key, plain, 300, 'remove'))
  with pytest.raises(ValueError, match='rest_batch_sizes is required for truncated schemes'):
    jaxacct.privacy_loss(mech, np.zeros((1, 10)), 'remove', rest_batch_sizes=np.zeros((1, 10)))


@pytest.mark.slow
@pytest.mark.parametrize('warm', [False, True])
@pytest.mark.parametrize('direction', ['remove', 'add'])
def test_joint_law_of_batch_sizes_and_coefficients(warm, direction):
  # C = I and σ ≈ 0, so y reads x^P (remove) or x^Q (add) exactly; r is returned with it.
  mech = _mechanism(p=0.5, n=3, b=2, warm=warm, batch=1, dataset=4, c_col=[1.0], sigma=1e-9)
  total = 20_000
  y, rest = sampling.sample_outputs(jax.random.key(5), mech, total, direction)
  x = np.rint(np.asarray(y)).astype(int)
  rest = np.asarray(rest)
  law = {}
  for (r, x_p, x_q), prob in tbf.truncated_sample_law(4, 0.5, 2, 1, 3, warm).items():
    coefficient = x_p if direction == 'remove' else x_q
    law[(r, coefficient)] = law.get((r, coefficient), 0.0) + prob
  assert chi_square.p_value(zip(map(tuple, rest), map(tuple, x)), law) > 1e-3


@pytest.mark.slow
@pytest.mark.parametrize('warm', [False, True])
def test_batch_size_means_at_scale(warm):
  # 10⁵ examples: E[r_i] = (m − 1)·p₀ in every round under warm start (Alg. 2's stationary
  # law); under cold start round 0 is Binomial(m − 1, p) and later rounds fall towards p₀.
  # r as drawn with the losses (``sample_outputs``: the same draws, one program fewer).
  mech = _mechanism(p=0.2, n=24, b=4, warm=warm, batch=30_000, dataset=100_000, c_col=[1.0])
  _, rest = sampling.sample_outputs(jax.random.key(6), mech, 2000, 'remove')
  rest = np.asarray(rest, float)
  p0 = mech.scheme.expected_participation_rate
  means, errors = rest.mean(axis=0), rest.std(axis=0, ddof=1) / np.sqrt(rest.shape[0])
  if warm:
    np.testing.assert_array_less(np.abs(means - 99_999 * p0), 5 * errors)
  else:
    assert abs(means[0] - 99_999 * 0.2) < 5 * errors[0]
    # Round 1: the round-0 participants are barred: E = (m − 1)·p·(1 − p).
    assert abs(means[1] - 99_999 * 0.2 * 0.8) < 5 * errors[1]


@pytest.mark.slow
@pytest.mark.parametrize('warm', [False, True])
def test_one_row_table_chain_drafts_the_exact_draws(warm, monkeypatch):
  # 10⁶ examples, p = 10⁻³, b = 32: the batch-size table is one row plus a remainder, as at
  # seed 000 §7.4. The branch-free draft must give the exact sampler's draws: forcing every
  # draft to be unsure runs the exact chain. Cold start is unsure from round 0 (the pool
  # m − 1 is above the table's window), so it also checks the fallback end to end. The
  # batch sizes are compared directly (the losses are a function of them and of the keys;
  # compiling only the batch-size program keeps this test cheap). One program serves both
  # runs: a traced flag makes every draft unsure (the exact chain everywhere).
  from jaxacct.montecarlo.engine.kernels import truncated
  mech = _mechanism(p=1e-3, n=40, b=32, warm=warm, batch=1100, dataset=1_000_000, c_col=[1.0])
  assert isinstance(truncated.batch_size_table(mech.scheme), binomial.InversionRows)
  assert (truncated.history_rows(mech.scheme) is not None) == warm
  real_draft, calls, forced = truncated.row_draft, [], []

  def recorded(*args):
    """The real draft, or every draw unsure if ``forced``; each call records (unsure drafts,
    unsure draws returned, draws)."""
    draws = real_draft(*args)
    returned = jax.numpy.where(forced[-1], jax.numpy.full(draws.shape, -1, draws.dtype), draws)
    jax.debug.callback(lambda *counts: calls.append(tuple(map(int, counts))),
                       jax.numpy.sum(draws < 0), jax.numpy.sum(returned < 0), draws.size)
    return returned

  def rest_batch_sizes(keys, params, force):
    forced.append(force)  # read while tracing (the drafts run inside the sampler's scans)
    try:
      return truncated.rest_batch_sizes(keys, params, 40, 32, warm)
    finally:
      forced.pop()

  monkeypatch.setattr(truncated, 'row_draft', recorded)
  with jax.enable_x64(True):
    kernel = truncated.TruncatedBMinSepKernel.build(mech, np.dtype('float64'))
    keys = sample_keys(jax.random.key(11), jax.numpy.int64(0), 256)  # the samplers' key rule
    batch_sizes = jax.jit(rest_batch_sizes)
    drafted = np.asarray(batch_sizes(keys, kernel.params(mech), False))
    jax.effects_barrier()
    drafted_calls, calls[:] = list(calls), []
    exact = np.asarray(batch_sizes(keys, kernel.params(mech), True))
    jax.effects_barrier()
  unsure_draws = [unsure for unsure, returned, _ in drafted_calls if unsure == returned]
  # Warm start: every draft sure (no fallback; the history's 31 drafts too); cold start: the
  # first rounds are unsure.
  assert len(unsure_draws) == len(drafted_calls) >= 40 + 31 * warm
  assert (sum(unsure_draws) > 0) == (not warm)
  assert len(calls) == len(drafted_calls) and all(returned == size for _, returned, size in calls)
  np.testing.assert_array_equal(drafted, exact)
  rest = drafted.astype(float)
  p0 = mech.scheme.expected_participation_rate
  if warm:  # Alg. 2's stationary law: E[r_i] = (m − 1)·p₀ in every round
    errors = rest.std(axis=0, ddof=1) / np.sqrt(rest.shape[0])
    np.testing.assert_array_less(np.abs(rest.mean(axis=0) - 999_999 * p0), 5 * errors)
  else:
    assert abs(rest[:, 0].mean() - 999_999e-3) < 5 * rest[:, 0].std() / 16


def test_history_rows_have_the_multinomial_law():
  # With ``history_rows`` the warm-start history is drawn by table rows: the counts must
  # still be one multinomial draw over the b − 1 barred states (each Binomial(m − 1, π)
  # marginally, negatively correlated: Cov = −(m − 1)π², total Binomial(m − 1, (b − 1)π)).
  from jaxacct.montecarlo.engine.kernels import truncated
  mech = _mechanism(p=1e-3, n=40, b=32, warm=True, batch=1100, dataset=1_000_000, c_col=[1.0])
  kernel = truncated.TruncatedBMinSepKernel.build(mech, np.dtype(np.float64))
  keys = jax.random.split(jax.random.key(12), 8000)
  with jax.enable_x64(True):
    params = kernel.params(mech)
    assert params.history_rows is not None
    history = np.asarray(jax.jit(truncated.stationary_history, static_argnums=2)(
        keys, params, 32), float)
  others, state = 999_999, mech.scheme.expected_participation_rate
  error = np.sqrt(others * state * (1 - state) / len(keys))
  np.testing.assert_array_less(np.abs(history.mean(axis=0) - others * state), 5 * error)
  assert chi_square.p_value(((int(h),) for h in history[:, 30]),
                            {(k,): stats.binom.pmf(k, others, state)
                             for k in range(int(others * state) - 300,
                                            int(others * state) + 300)}) > 1e-3
  total = history.sum(axis=1)
  barred = 31 * state
  variance = others * barred * (1 - barred)
  assert abs(total.var(ddof=1) / variance - 1) < 5 * np.sqrt(2 / len(keys))
  covariance = np.cov(history[:, 0], history[:, 30])[0, 1]
  assert abs(covariance + others * state**2) < 5 * others * state / np.sqrt(len(keys))


def _one_round_delta(epsilon, direction, *, dataset, p, batch, sigma):
  """Exact δ of the one-round (n = 1, b = 1) App. D pair: Σ_r Pr[r]·H(P_r ‖ Q_r) by quadrature."""
  total = 0.0
  for r in range(dataset):
    weight = stats.binom.pmf(r, dataset - 1, p)
    if r < batch:
      mix_p, mix_q = [(1 - p, 0.0), (p, 1.0)], [(1.0, 0.0)]
    else:
      w = p * batch / (r + 1)
      mix_p, mix_q = [(1 - w, 0.0), (w, 2.0)], [(1 - w, 0.0), (w, -1.0)]
    if direction == 'add':
      mix_p, mix_q = mix_q, mix_p

    def density(mix, y):
      return sum(a * stats.norm.pdf(y, mu, sigma) for a, mu in mix)

    def integrand(y, mix_p=mix_p, mix_q=mix_q):
      return max(density(mix_p, y) - np.exp(epsilon) * density(mix_q, y), 0.0)

    value, _ = integrate.quad(integrand, -12 * sigma - 2, 12 * sigma + 3, points=[0.0, 1.0],
                              limit=200, epsabs=1e-13)
    total += weight * value
  return total


@pytest.mark.slow
def test_one_round_estimate_matches_exact_delta():
  # Poisson with truncation is b-min-sep with b = 1; one round makes the δ of the App. D
  # pair a finite sum of 1-D integrals, an independent check of sampler + loss + estimator.
  scheme = jaxacct.Poisson(sampling_prob=0.3, iterations=1, truncated_batch_size=5,
                           dataset_size=20)
  mech = jaxacct.MatrixMechanism(scheme, jaxacct.BandedToeplitz([1.0]), 0.7)
  eps = [0.2, 0.6]
  # 49 blocks per call: 4 calls cover the 196 blocks (the default call holds 1,024).
  result = jaxacct.estimate_delta(jax.random.key(8), mech, eps, 200_000,
                                  run=jaxacct.RunOptions(blocks_per_call=49))
  for direction in ('remove', 'add'):
    for i, e in enumerate(eps):
      exact = _one_round_delta(e, direction, dataset=20, p=0.3, batch=5, sigma=0.7)
      gap = abs(result.delta_hat[direction][i] - exact)
      assert gap <= 5 * result.standard_error[direction][i], (direction, e, exact)


# The next two tests' mechanism. Its runs need a few blocks each; the estimator's calls hold
# two blocks (a call of the default size, 64 blocks at n = 16, would compute ~20 times the
# samples asked for), the call ``sample_privacy_losses`` makes for 500 samples: its compiled
# programs are the samplers' (compiled once).
PIPELINE = _mechanism(p=0.4, n=16, b=3, warm=True, batch=4, dataset=12, c_col=[1.0, 0.5, 0.2])
PIPELINE_BLOCKS_PER_CALL = 2


@pytest.mark.slow
def test_shared_draws_sweep_equals_the_estimator():
  mech = PIPELINE
  num_samples = 2 * sampling.default_block_size(mech.iterations) + 600  # a partial last block
  sweep = candidates.estimate_delta_for_sigmas(jax.random.key(9), mech, [0.8, 1.5], [0.5, 1.0],
                                               num_samples,
                                               run=jaxacct.RunOptions(
                                                   blocks_per_call=PIPELINE_BLOCKS_PER_CALL))
  for j, sigma in enumerate([0.8, 1.5]):
    single = estimator.estimate_delta(jax.random.key(9),
                                      dataclasses.replace(mech, noise_multiplier=sigma), [0.5, 1.0],
                                      num_samples,
                                      run=jaxacct.RunOptions(
                                          blocks_per_call=PIPELINE_BLOCKS_PER_CALL))
    for direction in ('remove', 'add'):
      np.testing.assert_allclose(sweep.delta_hat[direction][j], single.delta_hat[direction],
                                 rtol=1e-10, atol=1e-14)


@pytest.mark.slow
def test_truncated_samples_match_plain_losses_and_outputs():
  mech = PIPELINE
  key = jax.random.key(10)
  for direction in ('remove', 'add'):
    losses, rest = sampling.sample_truncated_privacy_losses(key, mech, 500, direction)
    np.testing.assert_array_equal(losses, jaxacct.sample_privacy_losses(key, mech, 500, direction))
    y, rest_again = sampling.sample_outputs(key, mech, 500, direction)
    np.testing.assert_array_equal(rest, rest_again)
    np.testing.assert_allclose(
        jaxacct.privacy_loss(mech, y, direction, rest_batch_sizes=rest), losses, atol=1e-12)
  # Truncation makes Q a mixture: negative samples are not pure noise (spec 000 §5.5).
  y_add, _ = sampling.sample_outputs(key, mech, 500, 'add')
  assert np.asarray(y_add).mean() < -0.01


def test_bad_truncated_inputs():
  mech = _mechanism()
  y = np.ones((2, 3))
  with pytest.raises(ValueError, match='rest_batch_sizes is required'):
    jaxacct.privacy_loss(mech, y, 'remove')
  with pytest.raises(ValueError, match=r'rest_batch_sizes must have shape \(num_samples, '
                     r'iterations\) = \(2, 3\)'):
    jaxacct.privacy_loss(mech, y, 'remove', rest_batch_sizes=np.zeros((1, 3), int))
  with pytest.raises(TypeError, match='rest_batch_sizes must be an integer array'):
    jaxacct.privacy_loss(mech, y, 'remove', rest_batch_sizes=np.zeros((2, 3)))
  with pytest.raises(ValueError, match=r'rest_batch_sizes must be in \[0, dataset_size - 1 = 99\]'):
    jaxacct.privacy_loss(mech, y, 'remove', rest_batch_sizes=np.full((2, 3), 100))
  untruncated = jaxacct.MatrixMechanism(
      jaxacct.BMinSep(sampling_prob=0.5, iterations=3, min_sep=2), jaxacct.BandedToeplitz([1.0]),
      1.0)
  with pytest.raises(ValueError, match='needs a truncated scheme'):
    sampling.sample_truncated_privacy_losses(jax.random.key(0), untruncated, 4, 'remove')
  cyclic = jaxacct.MatrixMechanism(
      jaxacct.CyclicPoisson(sampling_prob=0.5, iterations=4, cycle_length=2,
                            partition='equal_split', truncated_batch_size=3, dataset_size=10),
      jaxacct.BandedToeplitz([1.0]), 1.0)
  with pytest.raises(ValueError, match='no Monte Carlo accountant for truncated CyclicPoisson'):
    jaxacct.sample_privacy_losses(jax.random.key(0), cyclic, 4, 'remove')


@pytest.mark.parametrize('kwargs, error, match', [
    (dict(truncated_batch_size=0, dataset_size=10), ValueError,
     'truncated_batch_size must be an integer >= 1, got 0'),
    (dict(truncated_batch_size=5), ValueError, 'dataset_size is required when truncated_batch_size'),
    (dict(dataset_size=10), ValueError, 'dataset_size is public information of BMinSep only when'),
    (dict(truncated_batch_size=5, dataset_size=0), ValueError,
     'dataset_size must be an integer >= 1, got 0'),
    (dict(truncated_batch_size=2.0, dataset_size=10), TypeError,
     'truncated_batch_size must be an integer'),
])
def test_bad_truncation_fields(kwargs, error, match):
  with pytest.raises(error, match=match):
    jaxacct.BMinSep(sampling_prob=0.5, iterations=3, min_sep=2, **kwargs)


def test_schemes_without_a_truncated_accountant_refuse_truncation():
  with pytest.raises(ValueError, match="needs partition='equal_split'"):
    jaxacct.CyclicPoisson(sampling_prob=0.5, iterations=4, cycle_length=2,
                          truncated_batch_size=3, dataset_size=10)
  with pytest.raises(ValueError, match='BallsInBins has no truncated accountant'):
    jaxacct.BallsInBins(iterations=4, cycle_length=2, truncated_batch_size=3,  # type: ignore
                        dataset_size=10)
  with pytest.raises(ValueError, match='σ = 0 is not differentially private'):
    jaxacct.MatrixMechanism(_mechanism().scheme, jaxacct.BandedToeplitz([1.0]), 0.0)
  # from_expected_batch_size keeps the dataset size only when truncating.
  kept = jaxacct.BMinSep.from_expected_batch_size(expected_batch_size=10, dataset_size=1000,
                                                  iterations=5, min_sep=2, truncated_batch_size=12)
  assert kept.dataset_size == 1000 and kept.truncates
  assert jaxacct.BMinSep.from_expected_batch_size(
      expected_batch_size=10, dataset_size=1000, iterations=5, min_sep=2).dataset_size is None


def test_batch_size_table_regimes():
  # Speed only (exactness is tested in test_binomial.py), but the regimes must be the intended
  # ones: a row per pool size for moderate pools, one row plus a small-mean remainder for the
  # §7.4 production shape, none when no table of ≤ 2²⁰ entries covers the pool's 8-s.d. window.
  from jaxacct.montecarlo.engine.kernels import truncated as participation
  rows = participation.batch_size_table(jaxacct.BMinSep(
      sampling_prob=0.5, iterations=10, min_sep=16, truncated_batch_size=110, dataset_size=3200))
  assert rows.cdf.shape[0] > 100 and int(rows.max_extra) == 0
  production_scheme = jaxacct.BMinSep.from_expected_batch_size(
      expected_batch_size=1793, dataset_size=14_745_600, iterations=10, min_sep=256,
      truncated_batch_size=2048)
  production = participation.batch_size_table(production_scheme)
  assert isinstance(production, binomial.InversionRows) and production.cdf.shape[0] == 1
  assert int(production.max_extras[0]) * 1.25e-4 <= 4.0
  history = participation.history_rows(production_scheme)  # a row per state, remainders ≤ 4
  assert history.cdf.shape[0] == 255
  assert np.all(np.asarray(history.max_extras) * np.asarray(history.probs) <= 4.0)
  assert participation.history_rows(dataclasses.replace(production_scheme, warm_start=False)) is None
  assert participation.batch_size_table(jaxacct.BMinSep(
      sampling_prob=0.2, iterations=10, min_sep=4, truncated_batch_size=30_000,
      dataset_size=100_000)) is None
  assert participation.batch_size_table(jaxacct.BMinSep(
      sampling_prob=0.7, iterations=10, min_sep=2, truncated_batch_size=3, dataset_size=50)) is None
