"""The σ-grid FFT products (seed 004 App. D) against dp_accounting's composition chain and
brute force: the same lattice convolution, never below, aliasing accounted for."""

from __future__ import annotations

import numpy as np
import pytest

from jaxacct.individual import grid_composition

Q = 0.02
SIGMAS = (1.0, 1.6, 3.0)
DISCRETIZATION = 1e-3
DELTA = 1e-6


def _table(direction):
  return grid_composition.bucket_pmfs(Q, SIGMAS, DISCRETIZATION, direction)


def _chain(counts, direction):
  """dp_accounting: self-compose each bucket, compose across buckets; ε of one direction."""
  from jaxacct.deterministic import pld_pmfs
  from dp_accounting.pld import privacy_loss_distribution
  composed = None
  for sigma, count in zip(SIGMAS, counts):
    if count:
      part = privacy_loss_distribution.from_gaussian_mechanism(
          sigma, sampling_prob=Q, value_discretization_interval=DISCRETIZATION
      ).self_compose(int(count))
      composed = part if composed is None else composed.compose(part)
  return 0.0 if composed is None else max(
      0.0, pld_pmfs.direction_pmf(composed, direction).get_epsilon_for_delta(DELTA))


COUNTS = np.array([[400, 0, 0], [0, 0, 400], [130, 70, 200], [1, 0, 0], [0, 3, 1], [0, 0, 0],
                   [2000, 1000, 7]])


@pytest.mark.parametrize('direction', ['remove', 'add'])
def test_products_equal_the_composition_chain_from_above(direction):
  # The same lattice PMFs, so the only differences are the upper-tail bound (≤ 1e-6 δ here),
  # the round-off allowance (1e-11) and dp_accounting's own tail truncation (≤ 1e-15):
  # ε moves by ~(1e-6 δ + 1e-11)/|dδ/dε| — below 1e-5 relative at these ε.
  ours = grid_composition.composed_epsilons(COUNTS, _table(direction), DELTA,
                                            tail_bound=1e-6 * DELTA, max_fft_size=1 << 22)
  reference = np.array([_chain(row, direction) for row in COUNTS])
  assert np.all(ours >= reference - 1e-12)
  np.testing.assert_allclose(ours, reference, rtol=1e-5, atol=1e-9)


def test_narrow_windows_stay_sound():
  # Windows sized for a tail of δ/4 fold real mass around: the result must still be ≥ the
  # exact composition (the folded upper tail is added to δ as its Chernoff bound).
  table = _table('remove')
  wide = grid_composition.composed_epsilons(COUNTS, table, DELTA, tail_bound=1e-12,
                                            max_fft_size=1 << 22)
  narrow = grid_composition.composed_epsilons(COUNTS, table, DELTA, tail_bound=DELTA / 4,
                                              max_fft_size=1 << 22)
  assert np.all(narrow >= wide - 1e-9)  # one-step rows: no tail, FFT round-off of other sizes
  assert np.max(narrow - wide) > 0  # the tail allowance is really charged


def test_chernoff_tail_bounds_the_exact_tail():
  table = _table('remove')
  counts = np.array([[30, 10, 5]])
  # exact composed PMF by direct convolution of the bucket PMFs
  from scipy import signal
  pmf, lower = np.ones(1), 0
  for b, count in enumerate(counts[0]):
    for _ in range(count):
      pmf = np.maximum(signal.fftconvolve(pmf, table.probs[b]), 0.0)
      lower += int(table.lower[b])
  psi_up = (counts @ table.log_mgf.reshape(len(SIGMAS), -1))[:, :grid_composition._LAMBDAS.size]
  tails = np.cumsum(pmf[::-1])[::-1]
  for target in (1e-3, 1e-6, 1e-9, 1e-12):
    index = int(np.argmax(tails < target))
    bound = grid_composition._upper_tail(
        psi_up, np.array([(lower + index) * DISCRETIZATION]), np.array([False]))[0]
    # a bound, and a useful one: Chernoff is loose by a polynomial factor (measured 25–90×)
    assert tails[index] <= bound <= 1e3 * tails[index]


def _brute_epsilon(pmf, start, discretization, delta_left):
  losses = (start + np.arange(pmf.size)) * discretization

  def delta(eps):
    return np.sum(np.where(losses > eps, pmf * -np.expm1(eps - losses), 0.0))

  if delta(0.0) <= delta_left:
    return 0.0
  low, high = 0.0, losses[-1]
  for _ in range(200):
    middle = (low + high) / 2
    low, high = (middle, high) if delta(middle) > delta_left else (low, middle)
  return high


def test_epsilon_search_matches_bisection_on_random_windows():
  rng = np.random.default_rng(5)
  n, discretization, rows = 900, 1e-2, 60
  starts = -rng.integers(0, n, rows)
  pmfs = rng.exponential(size=(rows, n)) ** 3
  pmfs /= pmfs.sum(axis=1, keepdims=True) * rng.uniform(1, 3, (rows, 1))
  targets = 10 ** rng.uniform(-6, -0.5, rows)
  got = grid_composition._epsilons_from_window(pmfs.copy(), starts, targets, discretization)
  expected = [_brute_epsilon(p, s, discretization, d) for p, s, d in zip(pmfs, starts, targets)]
  np.testing.assert_allclose(got, expected, rtol=1e-12, atol=1e-12)


def test_a_window_that_cannot_fit_names_the_parameters():
  with pytest.raises(ValueError, match='max_fft_size or value_discretization_interval'):
    grid_composition.composed_epsilons(COUNTS, _table('remove'), DELTA, tail_bound=1e-12,
                                       max_fft_size=256)


@pytest.mark.parametrize('discretization', [0.25, 1.0])
def test_coarse_lattices_never_fall_below_exact_gdp(discretization):
  # q = 1: the composition of Gaussian steps is exactly √(Σ k_b/σ_b²)-GDP. On a coarse lattice
  # the weights e^{−ℓ} spread by e^{128Δ} inside one search block; the in-block sums must not
  # lose δ to cancellation (a review found ε 6.9 below exact at Δ = 0.25 before).
  from jaxacct.individual import gdp
  sigmas = (0.4, 0.6, 1.0, 2.0, 4.0)
  rng = np.random.default_rng(11)
  counts = rng.integers(0, 12, (120, len(sigmas))) * (rng.random((120, len(sigmas))) < 0.6)
  exact = gdp.gdp_epsilon(np.sqrt(counts @ (1 / np.array(sigmas) ** 2)), 1e-9)
  for direction in ('remove', 'add'):
    table = grid_composition.bucket_pmfs(1.0, sigmas, discretization, direction)
    ours = grid_composition.composed_epsilons(counts, table, 1e-9, tail_bound=1e-15,
                                              max_fft_size=1 << 22)
    assert np.all(ours >= exact - 1e-9), np.min(ours - exact)
