"""Gaussian differential privacy of one example: δ(ε), ε(δ), budgets and fully adaptive
composition (Koskela et al. (2022); host code, float64 NumPy).

μ-GDP is the (ε, δ(ε)) curve of the Gaussian pair (N(μ, 1), N(0, 1)) (Dong, Roth & Su, Cor. 2.13;
Koskela et al. (2022) Lemma 1):

    δ_μ(ε) = Φ(−ε/μ + μ/2) − e^ε Φ(−ε/μ − μ/2),

symmetric in the two orderings. Gaussian mechanisms compose in squares: a fully adaptive
sequence whose conditional GDP parameters satisfy Σ_m μ_m² ≤ B² almost surely is B-GDP
(Koskela et al. (2022) Thm 2, App. B), which is what the individual GDP filter
(``filter.GDPFilter``, Alg. 1) enforces.
For DP-GD with clip norm C and noise multiplier σ (noise std σC on the sum of clipped
gradients), example i's step-t parameter is μ_{i,t} = c_{i,t}/(σC) with c_{i,t} its clipped
gradient norm (App. C.2, whose σ is the absolute noise std, in jaxacct's noise-multiplier
convention).

References:
  Antti Koskela, Marlon Tobaben and Antti Honkela, "Individual Privacy Accounting with Gaussian
  Differential Privacy", arXiv:2209.15596: §3.2 (Lemma 1), §3.3 (Thm 2), App. B, App. C.1 (Cor. 2,
  Eq. (C.2)), App. C.2 (docs/references.md).
"""

from __future__ import annotations

import numpy as np
from scipy import special

from jaxacct import _validate
from jaxacct.deterministic.base import check_delta
from jaxacct.errors import InputError

_BISECTIONS = 200  # far more than float64 needs: the loops stop at 1e-12 relative


def _check_mu(mu) -> np.ndarray:
  values = np.asarray(mu, dtype=np.float64)
  if not np.all(np.isfinite(values)) or np.any(values < 0):
    raise InputError(f'mu must be finite and >= 0, got {mu!r}')
  return values


def check_ratio_values(ratios) -> np.ndarray:
  """Clipped-norm ratios c/C as float64: finite and in [0, 1] (any shape)."""
  try:
    values = np.asarray(ratios, dtype=np.float64)
  except (TypeError, ValueError):
    raise InputError(f'clipped_norm_ratios must be an array of numbers in [0, 1], got '
                     f'{type(ratios).__name__} of dtype {np.asarray(ratios).dtype}') from None
  if not np.all(np.isfinite(values)):
    raise InputError('clipped_norm_ratios contains NaN or inf')
  if np.any(values < 0) or np.any(values > 1):
    raise InputError(f'clipped_norm_ratios must be in [0, 1] (clip before accounting: c = '
                     f'min(‖g‖, C), ratio c/C), got values in [{values.min()}, {values.max()}]')
  return values


def _log_delta(mu: np.ndarray, epsilon: np.ndarray) -> np.ndarray:
  """ln δ_μ(ε) for μ > 0, from log Φ (no cancellation: δ = Φ(a)(1 − e^{ε + ln Φ(b) − ln Φ(a)}))."""
  upper = special.log_ndtr(-epsilon / mu + mu / 2)
  lower = epsilon + special.log_ndtr(-epsilon / mu - mu / 2)
  with np.errstate(divide='ignore'):
    return upper + np.log(-np.expm1(np.minimum(lower - upper, 0.0)))


def gdp_delta(mu, epsilon) -> np.ndarray:
  """δ_μ(ε) of μ-GDP (Dong et al. Cor. 2.13; Koskela et al. (2022) Eq. (C.2)); 0 where μ = 0.
  Broadcasts.

  Raises:
    ValueError: μ negative or not finite, ε negative or not finite.
  """
  mu = _check_mu(mu)
  epsilon = np.asarray(epsilon, dtype=np.float64)
  if not np.all(np.isfinite(epsilon)) or np.any(epsilon < 0):
    raise InputError(f'epsilon must be finite and >= 0, got {epsilon!r}')
  mu, epsilon = np.broadcast_arrays(mu, epsilon)
  safe = np.where(mu > 0, mu, 1.0)
  return np.where(mu > 0, np.exp(_log_delta(safe, epsilon)), 0.0)


def gdp_epsilon(mu, delta: float) -> np.ndarray:
  """The smallest ε ≥ 0 with δ_μ(ε) ≤ δ, for each μ (float64, the shape of ``mu``).

  ε(δ) has no closed form; δ_μ(ε) decreases in ε, so a vectorised bisection on [0, ε_max]
  (ε_max = μ²/2 + μ·Φ⁻¹(1 − δ), where the first term alone is ≤ δ, doubled while it does not
  pass) returns the upper end: each ε returned satisfies δ_μ(ε) ≤ δ (rounded up, to 1e-12
  relative). μ = 0 gives 0.

  Raises:
    ValueError: μ negative or not finite; δ outside (0, 1).
  """
  mu = _check_mu(mu)
  delta = check_delta(delta)
  shape = mu.shape
  mu = mu.ravel()
  safe = np.where(mu > 0, mu, 1.0)
  log_target = np.log(delta)
  # The Gaussian tail: δ_μ(ε) ≤ Φ(−ε/μ + μ/2) ≤ δ once ε ≥ μ²/2 + μ·z_δ.
  high = np.maximum(safe * safe / 2 + safe * -special.ndtri(delta), 1e-300)
  while np.any(bad := _log_delta(safe, high) > log_target):
    high = np.where(bad, 2 * high, high)
  low = np.zeros_like(high)
  passes_at_zero = _log_delta(safe, low) <= log_target
  for _ in range(_BISECTIONS):
    middle = 0.5 * (low + high)
    passes = _log_delta(safe, middle) <= log_target
    low, high = np.where(passes, low, middle), np.where(passes, middle, high)
    if np.all(high - low <= 1e-12 * high):
      break
  result = np.where(passes_at_zero | (mu == 0), 0.0, high)
  return result.reshape(shape)


def gdp_budget(epsilon: float, delta: float) -> float:
  """The largest μ with μ-GDP ⇒ (ε, δ)-DP: the GDP budget B of a target (rounded down, to
  1e-12 relative). δ_μ(ε) increases in μ, so a bisection on μ.

  Raises:
    ValueError: ε not finite and > 0, δ outside (0, 1).
  """
  epsilon = _validate.positive_finite('epsilon', epsilon)
  delta = check_delta(delta)
  low, high = 0.0, 1.0
  while gdp_delta(high, epsilon) <= delta:
    low, high = high, 2 * high
  for _ in range(_BISECTIONS):
    middle = 0.5 * (low + high)
    if gdp_delta(middle, epsilon) <= delta:
      low = middle
    else:
      high = middle
    if high - low <= 1e-12 * high:
      break
  return low


def composed_mu(clipped_norm_ratios, noise_multiplier: float) -> np.ndarray:
  """μ_i = √(Σ_t r_{i,t}²)/σ of full-batch DP-GD (GDP composes in squares: Koskela et al.
  (2022) Thm 2), r = c/C the clipped norm ratios (…, iterations); float64 (…,)."""
  ratios = check_ratio_values(clipped_norm_ratios)
  sigma = _validate.positive_finite('noise_multiplier', noise_multiplier)
  return np.sqrt(np.sum(ratios * ratios, axis=-1)) / sigma
