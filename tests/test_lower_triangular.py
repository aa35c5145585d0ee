"""Dense lower-triangular strategies and the r-min-sep bounds of seed 000 App. B.

Oracles: every r-separated index set (cross-term bound M_i and the sensitivity
bound) and every participation pattern with its exact probability
(``oracles.brute_force.participation_law``) for the exact ln P/Q of a dense C.
Tolerances: 1e-10·max(1, |L|) where the bound must be exact (banded C with
r = b; floating point differences observed ≤ 1e-13), 1e-12 slack on the
inequalities (the bound and the oracle sum the same terms in different orders).
"""

import itertools

import jax
import numpy as np
import pytest

import jaxacct
from jaxacct.strategies import lower_triangular as lt
from jaxacct.deterministic import pld
from jaxacct.montecarlo.engine import sampling
from oracles import brute_force, chi_square


def _separated_sets(indices, r):
  """All subsets of ``indices`` (sorted) with consecutive gaps >= r, including the empty set."""
  for size in range(len(indices) + 1):
    for subset in itertools.combinations(indices, size):
      if all(b - a >= r for a, b in zip(subset, subset[1:])):
        yield subset


def _random_dense(rng, n, density=1.0):
  c = np.tril(rng.uniform(0.0, 1.0, (n, n)) * (rng.uniform(size=(n, n)) < density))
  np.fill_diagonal(c, rng.uniform(0.5, 1.5, n))
  return c


@pytest.mark.parametrize('message, entries', [
    ('square', np.ones((2, 3))),
    ('square', np.ones(3)),
    ('non-negative', [[1.0, 0.0], [-0.1, 1.0]]),
    ('lower-triangular', [[1.0, 0.2], [0.1, 1.0]]),
    ('positive diagonal', [[1.0, 0.0], [0.3, 0.0]]),
    ('finite', [[1.0, 0.0], [np.nan, 1.0]]),
])
def test_bad_matrices_are_rejected_with_a_named_reason(message, entries):
  with pytest.raises(ValueError, match=message):
    jaxacct.LowerTriangular(entries)


def test_bad_arguments_are_rejected():
  with pytest.raises(ValueError, match='inverse_band'):
    jaxacct.LowerTriangular.from_inverse_band([1.0, 0.5], 4)  # h_1 > 0: C would be negative
  with pytest.raises(ValueError, match='bands'):
    jaxacct.banded_inverse_square_root(4, 5)
  with pytest.raises(ValueError, match='min_sep'):
    lt.later_cross_term_bounds(np.eye(3), 0)
  with pytest.raises(ValueError, match='non-negative'):
    lt.sensitivity_bound_squared([[1.0, 0.0], [-1.0, 1.0]], 1)
  with pytest.raises(TypeError, match='tracer'):
    jax.jit(lambda c: jaxacct.LowerTriangular(c))(np.eye(2))
  dense = jaxacct.LowerTriangular(np.eye(4))
  with pytest.raises(ValueError, match='iterations'):
    dense.column_squared_norms(5)
  with pytest.raises(ValueError, match='iterations'):
    jaxacct.MatrixMechanism(jaxacct.BMinSep(sampling_prob=0.1, iterations=5, min_sep=2), dense, 1.0)
  with pytest.raises(ValueError, match='App. B'):
    jaxacct.MatrixMechanism(jaxacct.CyclicPoisson(sampling_prob=0.5, iterations=4,
                                                  cycle_length=2), dense, 1.0)
  with pytest.raises(ValueError, match='truncat'):
    jaxacct.MatrixMechanism(jaxacct.BMinSep(sampling_prob=0.1, iterations=4, min_sep=2,
                                            truncated_batch_size=3, dataset_size=40), dense, 1.0)
  with pytest.raises(TypeError, match='Monte Carlo'):
    jaxacct.mechanism_pld(jaxacct.MatrixMechanism(
        jaxacct.Poisson(sampling_prob=0.1, iterations=4), dense, 1.0))


def test_bisr_with_all_bands_is_the_square_root_of_the_prefix_sum_matrix():
  c = np.asarray(jaxacct.banded_inverse_square_root(9, 9).entries)
  np.testing.assert_allclose(c @ c, np.tril(np.ones((9, 9))), atol=1e-13)


def test_bisr_inverse_is_banded_with_the_square_root_inverse_band():
  n, m = 10, 3
  c = jaxacct.banded_inverse_square_root(n, m).entries
  assert np.all(c >= 0)
  inverse = np.linalg.inv(c)
  want = brute_force.strategy_matrix(lt.square_root_inverse_band(m), n)
  np.testing.assert_allclose(inverse, want, atol=1e-12)
  np.testing.assert_allclose(lt.square_root_inverse_band(5), [1, -1 / 2, -1 / 8, -1 / 16, -5 / 128])


def test_optimized_banded_inverse_is_non_negative_and_beats_its_bisr_start():
  n, m, r = 24, 3, 4
  optimized = jaxacct.optimize_banded_inverse(n, m, min_sep=r)
  start = jaxacct.banded_inverse_square_root(n, m)
  assert np.all(optimized.entries >= 0)
  assert np.max(np.sum(optimized.entries**2, axis=0)) == pytest.approx(1.0, rel=1e-12)
  inverse = np.linalg.inv(optimized.entries)
  assert np.max(np.abs(np.tril(inverse, -m))) < 1e-10  # C⁻¹ is m-banded

  def objective(c):  # (1/n)‖A C⁻¹‖_F² · ‖C x₀‖², x₀ = rounds 0, r, 2r, …
    prefix = np.tril(np.ones((n, n))) @ np.linalg.inv(c)
    return np.sum(prefix**2) / n * np.sum((c @ (np.arange(n) % r == 0)) ** 2)

  assert objective(optimized.entries) < objective(start.entries) * (1 - 1e-3)


@pytest.mark.parametrize('r', [1, 2, 3])
@pytest.mark.parametrize('density', [1.0, 0.5])
def test_cross_term_bounds_equal_the_maximum_over_separated_sets(r, density):
  n = 7
  c = _random_dense(np.random.default_rng(10 * r + int(4 * density)), n, density)
  gram = c.T @ c
  got = lt.later_cross_term_bounds(c, r)
  for i in range(n):
    want = max(sum(gram[i, j] for j in subset)
               for subset in _separated_sets(range(i + r, n), r))
    assert want <= got[i] <= want * (1 + 1e-12) + 1e-300


@pytest.mark.parametrize('r', [1, 2, 3])
def test_sensitivity_bound_is_an_upper_bound_and_exact_where_it_should_be(r):
  n = 7
  c = _random_dense(np.random.default_rng(r), n)
  exact = max(np.sum((c @ np.isin(np.arange(n), subset)) ** 2)
              for subset in _separated_sets(range(n), r))
  bound = lt.sensitivity_bound_squared(c, r)
  assert bound >= exact * (1 - 1e-12)
  if r == 1:
    assert bound == pytest.approx(exact, rel=1e-12)  # every round: ‖C𝟏‖²
  banded = jaxacct.BandedToeplitz([1.0, 0.6, 0.3][:r])
  assert lt.sensitivity_bound_squared(banded.materialize(n), r) == pytest.approx(
      float(pld.max_sensitivity_squared(jaxacct.BMinSep(sampling_prob=0.5, iterations=n,
                                                        min_sep=r), banded)), rel=1e-12)


def _law(n, p, r, warm):
  if r == 1:
    return brute_force.participation_law('poisson', iterations=n, sampling_prob=p)
  return brute_force.participation_law('bminsep', iterations=n, sampling_prob=p, min_sep=r,
                                       warm_start=warm)


def _scheme(n, p, r, warm):
  if r == 1:
    return jaxacct.Poisson(sampling_prob=p, iterations=n)
  return jaxacct.BMinSep(sampling_prob=p, iterations=n, min_sep=r, warm_start=warm)


@pytest.mark.parametrize('r, warm', [(1, False), (2, False), (3, False), (3, True)])
def test_remove_bound_is_above_and_add_bound_below_the_exact_loss(r, warm):
  n, p, sigma = 7, 0.4, 0.8
  rng = np.random.default_rng(7 * r + warm)
  c = _random_dense(rng, n)
  mech = jaxacct.MatrixMechanism(_scheme(n, p, r, warm), jaxacct.LowerTriangular(c), sigma)
  patterns, log_probs = _law(n, p, r, warm)
  # y from P (signal plus noise), from Q (noise) and far in the tails.
  x = patterns[rng.choice(len(patterns), 24, p=np.exp(log_probs) / np.exp(log_probs).sum())]
  y = np.concatenate([x @ c.T + sigma * rng.normal(size=(24, n)),
                      sigma * rng.normal(size=(24, n)), 4 * rng.normal(size=(8, n))])
  exact = brute_force.privacy_loss(patterns, log_probs, c, y, sigma)
  upper = np.asarray(jaxacct.privacy_loss(mech, y, 'remove'))
  add_loss = np.asarray(jaxacct.privacy_loss(mech, y, 'add'))
  slack = 1e-12 * np.maximum(1.0, np.abs(exact))
  assert np.all(upper >= exact - slack)
  assert np.all(add_loss >= -exact - slack)  # ln Q/P over-stated: ln P/Q under-stated
  assert np.mean(upper - exact) > 1e-3 and np.mean(add_loss + exact) > 1e-3  # C overlaps: loose


@pytest.mark.parametrize('warm', [False, True])
def test_bounds_are_exact_for_banded_c_with_r_equal_to_b(warm):
  n, p, sigma, b = 8, 0.3, 0.7, 3
  banded = jaxacct.BandedToeplitz([1.0, 0.7, 0.4])
  scheme = jaxacct.BMinSep(sampling_prob=p, iterations=n, min_sep=b, warm_start=warm)
  dense = jaxacct.MatrixMechanism(scheme, jaxacct.LowerTriangular(banded.materialize(n)), sigma)
  engine = jaxacct.MatrixMechanism(scheme, banded, sigma)
  rng = np.random.default_rng(3)
  y = rng.normal(size=(16, n)) + rng.choice([0.0, 1.0], size=(16, n))
  want = np.asarray(jaxacct.privacy_loss(engine, y, 'remove'))
  tolerance = 1e-10 * np.maximum(1.0, np.abs(want))
  np.testing.assert_array_less(np.abs(np.asarray(jaxacct.privacy_loss(dense, y, 'remove')) - want),
                               tolerance)
  np.testing.assert_array_less(np.abs(np.asarray(jaxacct.privacy_loss(dense, y, 'add')) + want),
                               tolerance)


def test_sampler_draws_c_x_with_the_r_min_sep_law():
  # With tiny σ, C⁻¹y recovers x; its law must be the exact cold-start chain's (χ²).
  n, p, r = 6, 0.35, 2
  c = _random_dense(np.random.default_rng(0), n)
  mech = jaxacct.MatrixMechanism(_scheme(n, p, r, False), jaxacct.LowerTriangular(c), 1e-6)
  with jax.enable_x64(True):
    y, _ = sampling.sample_outputs(jax.random.key(5), mech, 4000, 'remove')
  x = np.rint(np.linalg.solve(c, np.asarray(y).T).T).astype(int)
  patterns, log_probs = _law(n, p, r, False)
  law = {tuple(pattern): float(np.exp(lp)) for pattern, lp in zip(patterns.astype(int), log_probs)}
  assert chi_square.p_value(map(tuple, x), law) > 1e-3


@pytest.mark.slow
def test_verified_guarantee_is_labelled_bounded():
  n = 6
  mech_args = (_scheme(n, 0.2, 2, False), jaxacct.banded_inverse_square_root(n, 2))
  result = jaxacct.calibrate_noise_multiplier(*mech_args, epsilon=2.0, delta=1e-3,
                                              key=jax.random.key(0),
                                              monte_carlo=jaxacct.MonteCarloOptions(
                                                  num_samples=20_000, num_candidates=3))
  g = result.guarantee
  assert g.verified and g.bounded == (g.method == 'verified_mc')
  assert g.noise_multiplier <= pld.unamplified_sigma(*mech_args, epsilon=2.0,
                                                     delta=g.base_delta) * (1 + 1e-12)


def test_prefix_error_of_dense_and_banded_forms_agree():
  n = 12
  banded = jaxacct.BandedToeplitz([1.0, 0.5, 0.375])
  dense = jaxacct.LowerTriangular(banded.materialize(n))
  assert dense.prefix_error(n) == pytest.approx(banded.prefix_error(n), rel=1e-12)
  a = np.tril(np.ones((n, n)))
  c = jaxacct.banded_inverse_square_root(n, 3).entries
  assert jaxacct.banded_inverse_square_root(n, 3).prefix_error() == pytest.approx(
      np.sum((a @ np.linalg.inv(c)) ** 2) / n, rel=1e-12)


@pytest.mark.parametrize('direction', ['remove', 'add'])
def test_balls_in_bins_with_dense_c_is_exact_and_equals_the_banded_kernel(direction):
  # A Toeplitz C stored densely must give the banded kernel's losses (the balls-in-bins loss is
  # a mixture over the T modes m_j = C·1[i ≡ j], exact for any C: seed 000 §2.3), to rounding.
  column = np.asarray(jaxacct.banded_inverse_square_root(12, 2).entries)[:, 0]
  scheme = jaxacct.BallsInBins(iterations=12, cycle_length=5)
  dense = jaxacct.MatrixMechanism(scheme, jaxacct.LowerTriangular(
      np.tril(np.array([[column[i - j] if i >= j else 0.0 for j in range(12)]
                        for i in range(12)]))), 1.3)
  banded = jaxacct.MatrixMechanism(scheme, jaxacct.BandedToeplitz(column), 1.3)
  assert not dense.bounded and not banded.bounded
  key = jax.random.key(4)
  np.testing.assert_allclose(jaxacct.sample_privacy_losses(key, dense, 64, direction),
                             jaxacct.sample_privacy_losses(key, banded, 64, direction),
                             rtol=1e-12, atol=1e-12)
