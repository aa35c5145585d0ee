"""Self-checks of the seed 002 oracle (``random_allocation.py``): eq. (5) against closed forms
and against a Monte Carlo estimate of the Rényi divergence (the sign of the log b term)."""

import math

import numpy as np
import pytest
from scipy import special

from . import random_allocation as oracle


def test_renyi2_closed_form_and_one_slot():
  for epochs, slots, sigma in ((1, 5, 0.8), (3, 4, 1.5)):
    gram = oracle.gram(np.eye(epochs * slots), slots)
    np.testing.assert_array_equal(gram, epochs * np.eye(slots))
    assert oracle.renyi_remove_by_tuples(gram, sigma, 2) == pytest.approx(
        oracle.dpsgd_renyi2(epochs, slots, sigma), rel=1e-12)
  # b = 1: the Gaussian mechanism, α‖m‖²/(2σ²) in both directions.
  entries = np.tril(np.full((4, 4), 0.5)) + np.eye(4) * 0.5
  gram = oracle.gram(entries, 1)
  for alpha in (2, 3, 5):
    expected = alpha * gram[0, 0] / (2 * 1.3**2)
    assert oracle.renyi_remove_by_tuples(gram, 1.3, alpha) == pytest.approx(expected, rel=1e-12)
    assert oracle.renyi_add_bound(gram, 1.3, alpha) == pytest.approx(expected, rel=1e-12)


def test_eq5_matches_monte_carlo_and_the_printed_sign_does_not():
  # b = 3, k = 2, n = 6, σ = 3, α = 3 (spec 002 §8): R_α = ln E_Q[(p/q)^α]/(α − 1) from 400,000
  # draws y ~ Q, with a delta-method standard error; the corrected eq. (5) lies within 4 s.e.
  rng = np.random.default_rng(0)
  entries = np.tril(rng.uniform(0.2, 1.0, (6, 6)))
  sigma, alpha, draws = 3.0, 3, 400_000
  means = oracle.slot_means(entries, 3)
  y = sigma * rng.standard_normal((draws, 6))
  log_ratio = special.logsumexp((2 * y @ means.T - (means**2).sum(axis=1)) / (2 * sigma**2),
                                axis=1) - math.log(3)
  moments = np.exp(alpha * log_ratio)
  estimate = math.log(moments.mean()) / (alpha - 1)
  error = moments.std() / math.sqrt(draws) / moments.mean() / (alpha - 1)
  exact = oracle.renyi_remove_by_tuples(oracle.gram(entries, 3), sigma, alpha)
  assert abs(exact - estimate) <= 4 * error
  printed = exact + 2 * alpha * math.log(3) / (alpha - 1)  # "− α log b/(1 − α)" as printed
  assert abs(printed - estimate) > 100 * error
  # The add bound (Lemma 3.4) is above the Monte Carlo R_α(Q‖P) = ln E_P[(q/p)^α]/(α − 1).
  component = rng.integers(0, 3, draws)
  x = means[component] + sigma * rng.standard_normal((draws, 6))
  log_inverse = -(special.logsumexp((2 * x @ means.T - (means**2).sum(axis=1)) / (2 * sigma**2),
                                    axis=1) - math.log(3))
  add_moments = np.exp(alpha * log_inverse)
  add_estimate = math.log(add_moments.mean()) / (alpha - 1)
  add_error = add_moments.std() / math.sqrt(draws) / add_moments.mean() / (alpha - 1)
  assert oracle.renyi_add_bound(oracle.gram(entries, 3), sigma, alpha) >= add_estimate - 4 * add_error


def test_conversion_round_trips():
  for rho, alpha in ((0.2, 2), (1.5, 7), (0.01, 64)):
    for delta in (1e-3, 1e-9):
      epsilon = oracle.epsilon_from_renyi(rho, alpha, delta)
      assert oracle.delta_from_renyi(rho, alpha, epsilon) == pytest.approx(delta, rel=1e-10)
