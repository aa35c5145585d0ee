"""Many σ candidates from shared draws (common random numbers; spec 000 §8.5)."""

import dataclasses

import jax
import numpy as np
import pytest

import jaxacct
from jaxacct.montecarlo.evr import candidates, estimator

MECH = jaxacct.MatrixMechanism(
    jaxacct.BMinSep(sampling_prob=0.3, iterations=30, min_sep=3, warm_start=False),
    jaxacct.BandedToeplitz([1.0, 0.6, 0.3]), 1.0)
SIGMAS = [0.7, 1.0, 1.6]
EPS = [0.5, 1.0]


@pytest.mark.slow
def test_shared_draws_equal_the_estimator_at_each_sigma():
  # Same stream, same (x, z): y(σ) = C·x + σ·z, so each candidate's δ̂ is the plain
  # estimator's at that σ up to float round-off (d = Cᵀ(Cx) + σCᵀz vs Cᵀ(Cx + σz)).
  key = jax.random.key(1)
  sweep = candidates.estimate_delta_for_sigmas(key, MECH, SIGMAS, EPS, 1500,
                                               monte_carlo=jaxacct.MonteCarloOptions(
                                                   block_size=256))
  for j, sigma in enumerate(SIGMAS):
    single = estimator.estimate_delta(key, dataclasses.replace(MECH, noise_multiplier=sigma), EPS,
                                      1500, monte_carlo=jaxacct.MonteCarloOptions(block_size=256))
    for direction in ('remove', 'add'):
      np.testing.assert_allclose(sweep.delta_hat[direction][j], single.delta_hat[direction],
                                 rtol=1e-10, atol=1e-14)
  # δ̂ decreases in σ for this monotone family (same draws: exact ordering up to round-off).
  assert np.all(np.diff(sweep.delta_hat_max, axis=0) <= 1e-12)


@pytest.mark.slow
def test_independent_keys_give_independent_estimates():
  key = jax.random.key(2)
  shared = candidates.estimate_delta_for_sigmas(key, MECH, SIGMAS, EPS, 1024,
                                                monte_carlo=jaxacct.MonteCarloOptions(
                                                    block_size=256))
  calls = []
  independent = candidates.estimate_delta_for_sigmas(key, MECH, SIGMAS, EPS, 1024,
                                                     monte_carlo=jaxacct.MonteCarloOptions(
                                                         block_size=256, shared_draws=False),
                                                     run=jaxacct.RunOptions(
                                                         blocks_per_call=2, progress=lambda done,
                                                         total, stage: calls.append((done, total,
                                                                                     stage))))
  assert shared.shared_draws and not independent.shared_draws
  # Progress counts every candidate's program and both directions: 3 × 2 × 2 calls.
  total = len(SIGMAS) * 2 * 1024
  assert calls == [(512 * i, total, 'estimation sweep') for i in range(1, 13)]
  for j in range(len(SIGMAS)):
    assert not np.array_equal(shared.delta_hat['remove'][j], independent.delta_hat['remove'][j])
    # ... but they estimate the same quantity: within 5 combined standard errors.
    gap = np.abs(shared.delta_hat['remove'][j] - independent.delta_hat['remove'][j])
    se = np.hypot(shared.standard_error['remove'][j], independent.standard_error['remove'][j])
    assert np.all(gap <= 5 * se + 1e-12)


@pytest.mark.parametrize('sigmas', [[], [1.0, 0.0], [1.0, float('nan')]])
def test_bad_sigma_lists(sigmas):
  with pytest.raises(ValueError, match='noise_multipliers'):
    candidates.estimate_delta_for_sigmas(jax.random.key(0), MECH, sigmas, EPS, 10)
