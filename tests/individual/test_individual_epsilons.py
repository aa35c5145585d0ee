"""``individual_epsilons``: every example's ε from its realised clipped-norm ratios (seed 004)."""

from __future__ import annotations

import math

import numpy as np
import pytest

from jaxacct import individual
from jaxacct.individual import epsilons as epsilons_lib

DELTA = 1e-5
SMALL_GRID = {'grid_size': 12, 'inflation': 4.0}  # keeps the RDP table cheap


def _poisson_pld(q, sigmas, discretization=1e-4):
  """dp_accounting's composition of the given per-step noise multipliers (no grid)."""
  from dp_accounting.pld import privacy_loss_distribution
  composed = None
  for sigma, count in zip(*np.unique(sigmas, return_counts=True)):
    part = privacy_loss_distribution.from_gaussian_mechanism(
        float(sigma), sampling_prob=q, value_discretization_interval=discretization
    ).self_compose(int(count))
    composed = part if composed is None else composed.compose(part)
  return composed


@pytest.mark.slow
def test_all_ones_equal_the_worst_case_accountants():
  ratios = np.ones((3, 40))
  q, sigma = 0.05, 1.5
  pld = individual.individual_epsilons(ratios, sampling_prob=q, noise_multiplier=sigma,
                                        delta=DELTA)
  assert np.all(pld == pld[0])
  # the FFT products compose the same lattice PMFs as dp_accounting's chain; ours adds the
  # upper-tail bound (≤ 1e-6 δ) and the round-off allowance (1e-11) to δ, which moves ε by
  # ~1e-6 δ / |dδ/dε| ≈ 1e-7 relative here: never below, and within 1e-6
  reference = _poisson_pld(q, np.full(40, sigma)).get_epsilon_for_delta(DELTA)
  assert reference <= pld[0] <= reference * (1 + 1e-6)
  import dp_accounting
  rdp_accountant = dp_accounting.rdp.RdpAccountant(list(epsilons_lib.ORDERS))
  rdp_accountant.compose(dp_accounting.PoissonSampledDpEvent(
      q, dp_accounting.GaussianDpEvent(sigma)), 40)
  rdp = individual.individual_epsilons(ratios, sampling_prob=q, noise_multiplier=sigma,
                                       delta=DELTA, method='rdp', **SMALL_GRID)
  assert rdp[0] == pytest.approx(rdp_accountant.get_epsilon(DELTA), rel=1e-9)
  gdp = individual.individual_epsilons(ratios, sampling_prob=1.0, noise_multiplier=sigma * 4,
                                       delta=DELTA, method='gdp')
  assert gdp[0] == pytest.approx(float(individual.gdp_epsilon(math.sqrt(40) / 6.0, DELTA)),
                                 rel=1e-12)


def test_full_batch_heterogeneous_composition_is_exact_gdp():
  # q = 1: the composition of Gaussian steps is exactly √(Σ r²)/σ-GDP. Ratios on the grid make
  # the PLD route exact up to its discretisation (pessimistic: never below).
  sigma = 20.0
  grid = epsilons_lib.bucket_ratios(12, 4.0)
  rng = np.random.default_rng(1)
  ratios = grid[rng.integers(0, grid.size, (4, 300))]
  exact = individual.individual_epsilons(ratios, sampling_prob=1.0, noise_multiplier=sigma,
                                         delta=DELTA, method='gdp')
  pld = individual.individual_epsilons(ratios, sampling_prob=1.0, noise_multiplier=sigma,
                                       delta=DELTA, method='pld', **SMALL_GRID)
  assert np.all(pld >= exact - 1e-9)
  np.testing.assert_allclose(pld, exact, rtol=2e-3)
  rdp = individual.individual_epsilons(ratios, sampling_prob=1.0, noise_multiplier=sigma,
                                       delta=DELTA, method='rdp')
  assert np.all(rdp >= exact)  # RDP's conversion is looser than the exact GDP curve


@pytest.mark.slow
def test_bucketing_is_pessimistic_against_the_exact_sequence():
  # σ̃ rounded down to the grid: the bucketed ε is at least dp_accounting's composition of the
  # realised σ̃ = σ/r themselves; and not far above it with a fine grid.
  q, sigma = 0.1, 1.2
  rng = np.random.default_rng(2)
  ratios = rng.choice(rng.uniform(0.3, 1.0, 5), (3, 25))  # few distinct σ̃: a cheap reference
  ours = individual.individual_epsilons(ratios, sampling_prob=q, noise_multiplier=sigma,
                                        delta=DELTA, grid_size=200, inflation=4.0,
                                        value_discretization_interval=1e-3)
  for row, value in zip(ratios, ours):
    exact = _poisson_pld(q, sigma / row, 1e-3).get_epsilon_for_delta(DELTA)
    assert exact - 1e-9 <= value <= exact * 1.05


@pytest.mark.slow
def test_zero_ratios_cost_nothing_and_epsilon_is_monotone_in_each_ratio():
  q, sigma = 0.1, 1.0
  rng = np.random.default_rng(3)
  base = rng.uniform(0.2, 0.9, 30)
  padded = np.concatenate([base, np.zeros(20)])
  grown = base.copy()
  grown[7] = min(1.0, grown[7] * 1.5)
  for method, options in (('pld', {}), ('rdp', SMALL_GRID)):
    zeros = individual.individual_epsilons(np.zeros((2, 5)), sampling_prob=q,
                                           noise_multiplier=sigma, delta=DELTA, method=method,
                                           **options)
    assert np.all(zeros == 0.0)
    same = individual.individual_epsilons(
        np.stack([base, padded[:30]]), sampling_prob=q, noise_multiplier=sigma, delta=DELTA,
        method=method, **options)
    with_zeros = individual.individual_epsilons(
        padded[None], sampling_prob=q, noise_multiplier=sigma, delta=DELTA, method=method,
        **options)
    # appending zero-ratio steps changes nothing (up to the order of a matrix product's sums)
    assert with_zeros[0] == pytest.approx(same[0], rel=1e-13)
    larger = individual.individual_epsilons(
        np.stack([base, grown]), sampling_prob=q, noise_multiplier=sigma, delta=DELTA,
        method=method, **options)
    assert larger[1] >= larger[0], method


@pytest.mark.slow
def test_bad_input_is_named():
  good = np.full((2, 3), 0.5)
  kwargs = {'sampling_prob': 0.1, 'noise_multiplier': 1.0, 'delta': DELTA}
  with pytest.raises(ValueError, match='clip before accounting'):
    individual.individual_epsilons(np.array([[0.5, 1.2]]), **kwargs)
  with pytest.raises(ValueError, match='NaN'):
    individual.individual_epsilons(np.array([[0.5, np.nan]]), **kwargs)
  with pytest.raises(ValueError, match='shape'):
    individual.individual_epsilons(np.ones(4), **kwargs)
  with pytest.raises(ValueError, match='noise_multiplier'):
    individual.individual_epsilons(good, **{**kwargs, 'noise_multiplier': 0.0})
  with pytest.raises(ValueError, match='sampling_prob'):
    individual.individual_epsilons(good, **{**kwargs, 'sampling_prob': 1.5})
  with pytest.raises(ValueError, match='delta'):
    individual.individual_epsilons(good, **{**kwargs, 'delta': 0.0})
  with pytest.raises(ValueError, match='method'):
    individual.individual_epsilons(good, **kwargs, method='prv')
  with pytest.raises(ValueError, match='sampling_prob = 1'):
    individual.individual_epsilons(good, **kwargs, method='gdp')
  with pytest.raises(ValueError, match='inflation'):
    individual.individual_epsilons(good, **kwargs, inflation=1.0)
  with pytest.raises(ValueError, match='raise max_fft_size or value_discretization_interval'):
    individual.individual_epsilons(np.ones((2, 400)), **kwargs, max_fft_size=64)
  with pytest.raises(ValueError, match='max_fft_size'):
    individual.individual_epsilons(good, **kwargs, max_fft_size=2)
  with pytest.raises(ValueError, match='counts must be'):
    individual.epsilons_from_counts(np.ones((2, 5), np.int64), sampling_prob=0.1,
                                    noise_multiplier=1.0, delta=DELTA, grid_size=6)


def test_inputs_that_a_library_would_refuse_are_named_first():
  """Issue 29: σ too small for the PLD lattice, bucket counts too large for memory, and a
  non-numeric array are refused before any work, naming the argument."""
  kwargs = {'sampling_prob': 0.1, 'delta': DELTA}
  for sigma in (1e-8, 1e-3):
    with pytest.raises(ValueError, match='noise_multiplier = .* too small for method="pld"'):
      individual.individual_epsilons(np.full((2, 3), 0.5), noise_multiplier=sigma, **kwargs)
  many = np.lib.stride_tricks.as_strided(np.zeros(1), shape=(10**8, 1), strides=(0, 8))
  with pytest.raises(ValueError, match='clipped_norm_ratios has 100,000,000 examples'):
    individual.individual_epsilons(many, noise_multiplier=1.0, **kwargs)
  with pytest.raises(ValueError, match='clipped_norm_ratios must be an array of numbers'):
    individual.individual_epsilons(np.array([[0.5, 'x']], dtype=object), noise_multiplier=1.0,
                                   **kwargs)


def test_vectorised_rdp_conversion_equals_dp_accounting():
  from dp_accounting.rdp import rdp_privacy_accountant
  rng = np.random.default_rng(4)
  orders = epsilons_lib.ORDERS
  rows = [s * orders for s in 10 ** rng.uniform(-6, 1, 30)]  # Gaussian-like ρ(α) = α s
  rows += [np.where(orders > 20, np.inf, 0.3 * orders), np.zeros(orders.size)]
  for delta in (1e-5, 1e-9, 0.3):
    ours = epsilons_lib._rdp_epsilons(np.array(rows), delta)
    theirs = [max(0.0, rdp_privacy_accountant.compute_epsilon(orders, row, delta)[0])
              for row in rows]
    np.testing.assert_allclose(ours, theirs, rtol=1e-12, atol=0)
