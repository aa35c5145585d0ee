"""Brute-force oracle for multi-attribution b-min-sep (seed 000 §6, Theorem 6.1), numpy only.

Theorem 6.1's participation model: x_i = 0 if any of x_{i−1}, …, x_{i−b+1} is
positive, otherwise x_i ~ Binomial(k_u, p) (cold start: rounds before the first
are empty). P = Σ_x Pr[x]·N(C·x, σ²I), Q = N(0, σ²I). This module enumerates
every x ∈ {0, …, k_u}ⁿ the model can produce, with its probability, straight
from that definition (no recursion), and evaluates ln P(y)/Q(y) by logsumexp
with a dense C. Feasible for (k_u + 1)ⁿ up to ~10⁵.
"""

from __future__ import annotations

import numpy as np
from scipy import special, stats

from . import brute_force


def pattern_law(iterations: int, min_sep: int, sampling_prob: float,
                max_examples_per_user: int) -> tuple[np.ndarray, np.ndarray]:
  """Every reachable x with its probability: (patterns (K, n) int, probabilities (K,))."""
  counts = stats.binom.pmf(np.arange(max_examples_per_user + 1), max_examples_per_user,
                           sampling_prob)
  patterns, probabilities = [], []

  def extend(prefix: list[int], probability: float) -> None:
    i = len(prefix)
    if i == iterations:
      patterns.append(list(prefix))
      probabilities.append(probability)
      return
    barred = any(v > 0 for v in prefix[max(0, i - min_sep + 1):i])
    if barred:
      extend(prefix + [0], probability)
      return
    for j, weight in enumerate(counts):
      if weight > 0:
        extend(prefix + [j], probability * weight)

  extend([], 1.0)
  return np.asarray(patterns, int), np.asarray(probabilities)


def privacy_loss(y: np.ndarray, c_col, noise_multiplier: float, sampling_prob: float,
                 min_sep: int, max_examples_per_user: int) -> np.ndarray:
  """ln P(y)/Q(y) for outputs y (N, n) by enumeration of ``pattern_law``."""
  y = np.atleast_2d(np.asarray(y, float))
  n = y.shape[1]
  patterns, probabilities = pattern_law(n, min_sep, sampling_prob, max_examples_per_user)
  means = patterns @ brute_force.strategy_matrix(np.asarray(c_col, float), n).T  # (K, n)
  sigma2 = noise_multiplier**2
  exponents = (2.0 * y @ means.T - np.sum(means**2, axis=1)[None, :]) / (2.0 * sigma2)
  return special.logsumexp(exponents + np.log(probabilities)[None, :], axis=1)
