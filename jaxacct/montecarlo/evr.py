"""Estimate-Verify-Release (EVR) failure-bound arithmetic (host code, float64).

Pure numpy/scipy maths behind Algorithm 5 / Theorem A.1 of Dong & Ganesh
(2026), App. A. The verification driver that draws Monte Carlo samples is
``verification.py`` and only needs the functions below.

Setting. A candidate mechanism is *verified* at level δ_b ("base delta") by
drawing N i.i.d. terms in [0, 1] (the integrands max{1 − e^{ε−L}, 0}) whose mean
is the hockey-stick divergence δ, and accepting iff the empirical mean δ̂ ≤ δ_b.
Fact 4.2 of L. Chua, B. Ghazi, C. Harrison, P. Kamath, R. Kumar, E. J. Leeman,
P. Manurangsi, A. Sinha, C. Zhang, "Balls-and-bins sampling for DP-SGD",
AISTATS 2025 (arXiv 2412.16802), a Chernoff–Hoeffding bound in KL form, bounds
the false-acceptance probability:

  Pr[δ̂ ≤ δ_b] ≤ exp(−N · KL(δ_b ‖ δ))   for δ_b < δ,

and Theorem A.1 turns "every candidate that is not (ε, δ)-DP is accepted with
probability ≤ q" into an (ε, δ + q(1 − δ))-DP guarantee for the released
mechanism. Any δ = τ·δ_b with τ ∈ [1, 1/δ_b] may be used (the choice does not
depend on the data), so the reported level is the minimum over τ
(``overall_delta``; jax_privacy's ``get_overall_delta``).

All functions are deterministic and take/return Python floats and ints
(``bernoulli_kl`` also broadcasts over arrays). Sample counts are Python ints
and may be as large as ~1e12 and beyond.

References:
  Andy Dong and Arun Ganesh, "Privacy Amplification for BandMF via b-Min-Sep Subsampling",
  arXiv:2602.09338 (v2): App. A (Algorithm 5, Theorem A.1, the overall parameter δ_o and its minimum
  over δ) (docs/references.md).
"""

from __future__ import annotations

import dataclasses
import math
from typing import Any

import jax
import numpy as np
import scipy.optimize
import scipy.special

from jaxacct import _validate
from jaxacct.montecarlo import keys as keys_lib
from jaxacct.errors import InputError

# ---------------------------------------------------------------------------
# Bernoulli KL divergence
# ---------------------------------------------------------------------------

# φ(1 + t) = (1 + t)·ln(1 + t) − t = Σ_{k≥2} (−1)^k t^k / (k(k − 1)). The series is
# used for |t| ≤ _SERIES_RADIUS, where the closed form cancels; with 64 terms the
# truncation error at |t| = 1/2 is below 1e-21 relative.
_SERIES_RADIUS = 0.5
_SERIES_TERMS = 64
_SERIES_COEFFS = np.array(
    [(-1.0) ** k / (k * (k - 1)) for k in range(2, _SERIES_TERMS + 2)], dtype=np.float64)


def _phi(r: np.ndarray, t: np.ndarray) -> np.ndarray:
  """φ(r) = r·ln r − r + 1 ≥ 0, given both r and t = r − 1 (each computed accurately).

  r may be +inf only where the caller masks the result; r = 0 gives φ = 1.
  """
  small = np.abs(t) <= _SERIES_RADIUS
  ts = np.where(small, t, 0.0)
  series = np.zeros_like(ts)
  for coeff in _SERIES_COEFFS[::-1]:  # Horner in t for Σ c_k t^{k−2}
    series = series * ts + coeff
  series = series * ts * ts
  with np.errstate(invalid='ignore', over='ignore'):
    direct = scipy.special.xlogy(r, r) - t
  return np.where(small, series, direct)


def _kl_unchecked(a: np.ndarray, b: np.ndarray) -> np.ndarray:
  """Bernoulli KL(a ‖ b) for arrays with 0 ≤ a ≤ 1, 0 ≤ b ≤ 1 (no validation).

  Written as KL = b·φ(a/b) + (1 − b)·φ((1 − a)/(1 − b)) with φ(r) = r ln r − r + 1:
  the two terms are each ≥ 0 (the linear parts −a + b and −(1−a) + (1−b) cancel
  exactly), so nothing cancels between them, and each φ is evaluated from its
  argument r and from t = r − 1 computed as (a − b)/b resp. (b − a)/(1 − b),
  which keeps full relative precision for a, b ~ 1e-10, near 1 and for a ≈ b.
  """
  a, b = np.broadcast_arrays(np.asarray(a, np.float64), np.asarray(b, np.float64))
  interior = (b > 0.0) & (b < 1.0)
  bi = np.where(interior, b, 0.5)
  ai = np.where(interior, a, 0.5)
  one_minus_b = 1.0 - bi
  with np.errstate(over='ignore'):
    lower = bi * _phi(ai / bi, (ai - bi) / bi)
  upper = one_minus_b * _phi((1.0 - ai) / one_minus_b, (bi - ai) / one_minus_b)
  value = lower + upper
  # b ∈ {0, 1}: KL is 0 if a = b and +inf otherwise.
  boundary = np.where(a == b, 0.0, np.inf)
  value = np.where(interior, value, boundary)
  return np.where(a == b, 0.0, value)


def _check_unit_interval_array(name: str, value: Any) -> np.ndarray:
  array = np.asarray(value, dtype=np.float64)
  if not np.all((array >= 0.0) & (array <= 1.0)):  # also rejects NaN
    raise InputError(f'{name} must be in [0, 1], got {value!r}')
  return array


def bernoulli_kl(a: Any, b: Any) -> float | np.ndarray:
  """KL divergence between Bernoulli(a) and Bernoulli(b).

  KL(a ‖ b) = a·ln(a/b) + (1 − a)·ln((1 − a)/(1 − b)), with 0·ln 0 = 0, so
  KL(a ‖ a) = 0, KL(0 ‖ b) = −ln(1 − b), KL(1 ‖ b) = −ln b, and KL = +inf when
  b ∈ {0, 1} and a ≠ b. This is the exponent of the Chernoff–Hoeffding bound in
  Fact 4.2 of Chua et al., "Balls-and-bins sampling for DP-SGD", AISTATS 2025
  (as used in Dong & Ganesh (2026) App. A).

  Evaluated as b·φ(a/b) + (1 − b)·φ((1 − a)/(1 − b)), φ(r) = r ln r − r + 1,
  with a power series for φ near r = 1: accurate to a few ulps relative for
  a, b ~ 1e-10, for a, b near 1 and for a ≈ b (where KL ≈ (a − b)²/(2b(1 − b))).

  Args:
    a: first parameter(s), in [0, 1]; broadcasts against ``b``.
    b: second parameter(s), in [0, 1].

  Returns:
    A Python float for scalar inputs, else a float64 array.

  Raises:
    ValueError: if an entry of ``a`` or ``b`` lies outside [0, 1] or is NaN.
  """
  a_arr = _check_unit_interval_array('a', a)
  b_arr = _check_unit_interval_array('b', b)
  value = _kl_unchecked(a_arr, b_arr)
  return float(value) if value.ndim == 0 else value


# ---------------------------------------------------------------------------
# Verifier bound (Fact 4.2)
# ---------------------------------------------------------------------------


def _num_samples(value: Any) -> int:
  return _validate.integer_at_least('num_samples', value, 1)


def _open_unit(name: str, value: Any) -> float:
  value = _validate.real_number(name, value)
  if not (math.isfinite(value) and 0.0 < value < 1.0):
    raise InputError(f'{name} must be in (0, 1), got {value}')
  return value


def false_acceptance_bound(num_samples: int, threshold: float, true_delta: float) -> float:
  """Bound on the probability that the verifier accepts a too-large δ.

  Fact 4.2 of Chua, Ghazi, Harrison, Kamath, Kumar, Leeman, Manurangsi, Sinha,
  Zhang, "Balls-and-bins sampling for DP-SGD", AISTATS 2025: for N i.i.d.
  terms in [0, 1] with mean δ (= ``true_delta``) and empirical mean δ̂,

    Pr[δ̂ ≤ threshold] ≤ exp(−N · KL(threshold ‖ δ))   if threshold < δ,

  and the trivial bound 1 otherwise. Used as q in Theorem A.1 of Dong & Ganesh
  (2026), App. A. It is also valid for any true mean ≥ δ, since KL(a ‖ b)
  increases in b for b > a.

  Args:
    num_samples: N, an integer ≥ 1.
    threshold: acceptance threshold on δ̂, in [0, 1].
    true_delta: the hypothesised mean δ, in (0, 1].

  Returns:
    The bound, in [0, 1].
  """
  n = _num_samples(num_samples)
  threshold = _validate.probability('threshold', threshold, allow_zero=True)
  true_delta = _validate.probability('true_delta', true_delta)
  if threshold >= true_delta:
    return 1.0
  kl = float(_kl_unchecked(np.float64(threshold), np.float64(true_delta)))
  return float(math.exp(-n * kl)) if math.isfinite(kl) else 0.0


def hoeffding(num_samples: int, tau: float, delta: float) -> float:
  """Verifier bound in jax_privacy's parameterisation: exp(−N · KL(δ ‖ τ·δ)).

  The probability that the mean of N i.i.d. [0, 1] terms with true mean τ·δ
  (τ ≥ 1) is at most δ (Fact 4.2 of Chua et al., "Balls-and-bins sampling for
  DP-SGD", AISTATS 2025; jax_privacy's ``_hoeffding_bound``).
  Equals ``false_acceptance_bound(N, δ, τ·δ)``; τ = 1 gives 1.

  Args:
    num_samples: N, an integer ≥ 1.
    tau: ratio τ of the true mean to the threshold, with 1 ≤ τ ≤ 1/δ.
    delta: the threshold δ, in (0, 1].

  Returns:
    exp(−N · KL(δ ‖ τδ)), in [0, 1].
  """
  n = _num_samples(num_samples)
  delta = _validate.probability('delta', delta)
  tau = _validate.finite_real('tau', tau)
  if not 1.0 <= tau <= 1.0 / delta:
    raise InputError(f'tau must be in [1, 1/delta] = [1, {1.0 / delta}], got {tau}')
  kl = float(_kl_unchecked(np.float64(delta), np.float64(min(tau * delta, 1.0))))
  return float(math.exp(-n * kl)) if math.isfinite(kl) else 0.0


# ---------------------------------------------------------------------------
# Overall δ of Algorithm 5 (Theorem A.1)
# ---------------------------------------------------------------------------

# Pre-scan grid for the minimisation over τ, in v = ln(τ − 1).
_GRID_POINTS = 2049
_GRID_LOWEST_EXCESS = -30.0  # τ − 1 down to e^-30 ≈ 1e-13


def _objective(n: float, base: float, excess: np.ndarray, attempts: int = 1,
               earlier: tuple[tuple[int, float], ...] = ()) -> np.ndarray:
  """f(τ) = τδ_b + Q(τ)(1 − τδ_b) at τ = 1 + excess, with Q the union bound over attempts.

  Q = min(1, (attempts − len(earlier))·q(τ) + Σ_j q_j(τ)), q(τ) = exp(−N·KL(δ_b ‖ τδ_b)) for
  this run and q_j(τ) = exp(−N_j·KL(δ_b,j ‖ τδ_b)) for each earlier run j = (N_j, δ_b,j) that
  could back the claim (1 when δ_b,j ≥ τδ_b: its acceptance says nothing at that level). An
  earlier run with this run's (N, δ_b) is counted as q itself, so identical retries give
  exactly today's attempts·q. The KL terms are formed from ``excess`` directly (t = (a − b)/b
  etc.), so τ close to 1 keeps full precision.
  """
  excess = np.asarray(excess, np.float64)
  tau = 1.0 + excess
  delta = base * tau  # the hypothesised true level, in (δ_b, 1]
  one_minus_delta = np.maximum(1.0 - delta, 0.0)
  interior = one_minus_delta > 0.0
  safe_omd = np.where(interior, one_minus_delta, 1.0)
  lower = delta * _phi(1.0 / tau, -excess / tau)
  upper = safe_omd * _phi((1.0 - base) / safe_omd, base * excess / safe_omd)
  kl = np.where(interior, lower + upper, np.inf)
  # Union bound over verification attempts: Pr[some attempt falsely accepts] ≤ Σ its bounds.
  different = [(n_j, base_j) for n_j, base_j in earlier if (float(n_j), base_j) != (n, base)]
  own = attempts - len(different)
  charged = own * np.exp(-n * kl)
  for n_j, base_j in different:
    with np.errstate(over='ignore', invalid='ignore'):
      kl_j = _kl_unchecked(np.full_like(delta, base_j), np.minimum(delta, 1.0))
    charged = charged + np.where(base_j < delta, np.exp(-float(n_j) * kl_j), 1.0)
  q = np.minimum(1.0, charged)
  return delta + q * one_minus_delta


def _minimise(n: int, base: float, attempts: int = 1,
              earlier: tuple[tuple[int, float], ...] = ()) -> tuple[float, float]:
  """Returns (min_τ f(τ), argmin τ − 1) for overall_delta, both at a feasible τ."""
  nf = float(n)
  highest = math.log((1.0 - base) / base)  # ln(1/δ_b − 1): τ = 1/δ_b
  lowest = min(_GRID_LOWEST_EXCESS, highest - 1.0)
  grid = np.linspace(lowest, highest, _GRID_POINTS)
  values = _objective(nf, base, np.exp(grid), attempts, earlier)
  i = int(np.argmin(values))
  best_v, best_f = float(grid[i]), float(values[i])
  # Refine in w = v − v_i on the neighbouring grid cells. Centring matters: Brent's
  # bounded method stops at a tolerance of sqrt(eps)·|w|, which would be ~1e-5 in v
  # for v ~ 700 (δ_b ~ 1e-300) if the raw v were used.
  lo, hi = grid[max(i - 1, 0)] - best_v, grid[min(i + 1, _GRID_POINTS - 1)] - best_v
  if hi > lo:
    result = scipy.optimize.minimize_scalar(
        lambda w: float(_objective(nf, base, np.exp(best_v + w), attempts, earlier)),
        bounds=(float(lo), float(hi)), method='bounded',
        options={'xatol': 1e-12, 'maxiter': 500})
    v = best_v + float(result.x)
    f = float(_objective(nf, base, np.exp(v), attempts, earlier))  # the value at a feasible τ
    if f < best_f:
      best_v, best_f = v, f
  return min(best_f, 1.0), math.exp(best_v)


def check_earlier(earlier, attempts: int) -> tuple[tuple[int, float], ...]:
  """``earlier`` as a tuple of (N_j, δ_b,j) pairs (Python int, float), checked: each N_j ≥ 1,
  δ_b,j in (0, 1), and at most attempts − 1 of them (each is one of the attempts)."""
  try:
    pairs = tuple((_validate.integer_at_least('earlier num_samples', n_j, 1),
                   _open_unit('earlier base_delta', base_j)) for n_j, base_j in earlier)
  except (TypeError, ValueError) as error:
    if isinstance(error, InputError):
      raise
    raise InputError(f'earlier must be (num_samples, base_delta) pairs, got {earlier!r}') from None
  if len(pairs) > attempts - 1:
    raise InputError(f'earlier lists {len(pairs)} runs, but attempts = {attempts} counts only '
                     f'{attempts - 1} besides this one')
  return pairs


def overall_delta_at(num_samples: int, base_delta: float, tau: float) -> float:
  """Theorem A.1 level for one hypothesised true level δ = τ·δ_b.

  δ_o = τδ_b + q·(1 − τδ_b),  q = exp(−N · KL(δ_b ‖ τδ_b)),

  the paper's δ_o(δ, δ′, s) = δ + q(δ, δ′, s)(1 − δ) with δ = τδ_b, δ′ = δ_b,
  s = N (Dong & Ganesh, arXiv 2602.09338v2, App. A, Theorem A.1; q from Fact 4.2
  of Chua et al., AISTATS 2025). Every τ ∈ [1, 1/δ_b] gives a valid guarantee.

  Args:
    num_samples: N, an integer ≥ 1.
    base_delta: verification threshold δ_b, in (0, 1).
    tau: τ ∈ [1, 1/δ_b].

  Returns:
    δ_o, in [δ_b, 1].
  """
  n = _num_samples(num_samples)
  base = _open_unit('base_delta', base_delta)
  tau = _validate.finite_real('tau', tau)
  if not 1.0 <= tau <= 1.0 / base:
    raise InputError(f'tau must be in [1, 1/base_delta] = [1, {1.0 / base}], got {tau}')
  return min(float(_objective(float(n), base, np.float64(tau - 1.0))), 1.0)


def overall_delta(num_samples: int, base_delta: float, *, attempts: int = 1,
                  earlier=()) -> float:
  """δ reported after verifying (ε, δ_b) with N samples (jax_privacy's get_overall_delta).

  δ_overall(N, δ_b) = min_{τ ∈ [1, 1/δ_b]} [ τδ_b + q(τ)·(1 − τδ_b) ],  capped at 1,
  q(τ) = exp(−N · KL(δ_b ‖ τδ_b))

  (the minimum over δ of δ_o(δ, δ′, N) in Dong & Ganesh (2026) App. A, written
  in jax_privacy's base-δ form): Theorem A.1 of Dong & Ganesh (2026), App. A,
  with δ = τδ_b and the false-acceptance bound q of Fact 4.2 of Chua, Ghazi,
  Harrison, Kamath, Kumar, Leeman, Manurangsi, Sinha, Zhang, "Balls-and-bins
  sampling for DP-SGD", AISTATS 2025. τ = 1 and τ = 1/δ_b both give 1.

  With several verification attempts of the mechanism (``attempts``, the ledger's count) the
  false-acceptance probability is a union bound: each attempt j that could back the released
  claim adds its own bound at the released level τδ_b — exp(−N_j·KL(δ_b,j ‖ τδ_b)) for the
  ``earlier`` runs with their own (N_j, δ_b,j), this run's q for the others — so
  ``attempts = k`` with no ``earlier`` (k identical runs) charges k·q as before
  (``ledger.py`` explains which runs can back a claim).

  The minimum is found by a scan over a 2049-point grid in ln(τ − 1) followed
  by a bounded Brent refinement around the best grid point; the returned value
  is the objective evaluated at the chosen feasible τ, hence always a valid
  bound. It is non-decreasing in δ_b, non-increasing in N, and lies in [δ_b, 1].

  Args:
    num_samples: N, the number of Monte Carlo samples per direction (the
      minimum over candidates if they differ), an integer ≥ 1.
    base_delta: δ_b, the verification threshold, in (0, 1).
    attempts: how many verification runs of the mechanism are charged, this one included.
      Default 1.
    earlier: (N_j, δ_b,j) of the earlier runs (at most attempts − 1) that could back the
      claim and are charged at their own settings; the other attempts are charged as this
      run. Default none.

  Returns:
    δ_overall as a Python float.
  """
  n = _num_samples(num_samples)
  base = _open_unit('base_delta', base_delta)
  attempts = _validate.integer_at_least('attempts', attempts, 1)
  return _minimise(n, base, attempts, check_earlier(earlier, attempts))[0]


# ---------------------------------------------------------------------------
# Inverses: base δ for a target, and sample counts
# ---------------------------------------------------------------------------

_BISECTION_RTOL = 1e-7  # relative width of the final base-δ bracket (≤ 1e-6 required)
_MAX_SAMPLES = 1 << 62


def _infimum_overall_delta(n: int) -> float:
  """lim_{δ_b → 0} δ_overall(N, δ_b) = min_x [x + (1 − x)^{N+1}] (KL(0 ‖ x) = −ln(1 − x)).

  The minimiser is 1 − x = (N + 1)^{−1/N}; no δ_b achieves a target at or below
  this value.
  """
  log_one_minus_x = -math.log1p(n) / n
  x = -math.expm1(log_one_minus_x)
  return x + math.exp((n + 1) * log_one_minus_x)


def _smallest_n(predicate, start: int) -> int:
  """Smallest integer N ≥ 1 with ``predicate(N)``, for a predicate monotone in N."""
  lo, hi = 0, max(int(start), 1)  # predicate(lo) is taken as false
  while not predicate(hi):
    lo, hi = hi, 2 * hi
    if hi > _MAX_SAMPLES:
      raise InputError(f'more than {_MAX_SAMPLES} samples would be needed')
  while hi - lo > 1:
    mid = (lo + hi) // 2
    if predicate(mid):
      hi = mid
    else:
      lo = mid
  return hi


def base_delta(num_samples: int, target_delta: float, *, attempts: int = 1,
               earlier=()) -> float:
  """Largest verification threshold δ_b with δ_overall(N, δ_b) ≤ target (get_base_delta).

  Inverse of ``overall_delta`` in δ_b (Theorem A.1 of Dong & Ganesh (2026),
  App. A, with q from Fact 4.2 of Chua et al., "Balls-and-bins sampling for
  DP-SGD", AISTATS 2025; jax_privacy's ``get_base_delta``). δ_overall is
  non-decreasing in δ_b, so a bisection in ln δ_b is used; it always returns the
  lower (conservative) end of a bracket of relative width ≤ 1e-7, so
  ``overall_delta(N, base_delta(N, t)) ≤ t`` holds exactly as evaluated.

  Args:
    num_samples: N, an integer ≥ 1.
    target_delta: the δ to be reported, in (0, 1).
    attempts / earlier: the attempts charged, as in ``overall_delta``.

  Returns:
    δ_b ∈ (0, target_delta).

  Raises:
    ValueError: if no δ_b works for this N, i.e. target ≤ lim_{δ_b→0}
      δ_overall(N, δ_b) = min_x [x + (1 − x)^{N+1}] (one attempt); the message gives the
      sample count at which some δ_b starts to work and the count needed for
      δ_b = target/2.
  """
  n = _num_samples(num_samples)
  target = _open_unit('target_delta', target_delta)
  attempts = _validate.integer_at_least('attempts', attempts, 1)
  earlier = check_earlier(earlier, attempts)

  def fits(base: float) -> bool:
    return _minimise(n, base, attempts, earlier)[0] <= target

  single = attempts == 1
  if not single or _infimum_overall_delta(n) < target:
    # A feasible lower end: step down from target/2 (overall_delta → the infimum
    # as δ_b → 0, so this terminates unless the infimum is within rounding of target).
    lo = target / 2.0
    lo_fits = fits(lo)
    while not lo_fits and lo > 1e-300:
      lo /= 16.0
      lo_fits = fits(lo)
    if lo_fits:
      hi = target  # infeasible: δ_overall(N, δ_b) > δ_b for δ_b < 1
      while hi / lo > 1.0 + _BISECTION_RTOL:
        mid = math.sqrt(lo * hi)
        if not lo < mid < hi:
          break
        if fits(mid):
          lo = mid
        else:
          hi = mid
      return lo
  half = minimum_samples(target / 2.0, target, attempts=attempts, earlier=earlier)
  if not single:
    raise InputError(
        f'num_samples={n} is too small for target_delta={target} with {attempts} attempts: no '
        f'base_delta in (0, {target}) gives overall_delta <= target_delta; {half} samples are '
        'needed for base_delta = target_delta/2 (see minimum_samples)')
  any_base = _smallest_n(lambda m: _infimum_overall_delta(m) < target, math.floor(1.0 / target))
  raise InputError(
      f'num_samples={n} is too small for target_delta={target}: no base_delta in (0, '
      f'{target}) gives overall_delta <= target_delta (the infimum over base_delta is '
      f'{_infimum_overall_delta(n):.6g}). At least {any_base} samples are needed for any '
      f'base_delta to work, and {half} for base_delta = target_delta/2 '
      f'(see minimum_samples).')


def minimum_samples(base_delta: float, target_delta: float, *, attempts: int = 1,
                    earlier=()) -> int:
  """Smallest N with δ_overall(N, δ_b) ≤ target (jax_privacy's minimum_samples_to_calibrate).

  δ_overall (``overall_delta``; Theorem A.1 of Dong & Ganesh, arXiv
  2602.09338v2, App. A, with q from Fact 4.2 of Chua et al., "Balls-and-bins
  sampling for DP-SGD", AISTATS 2025) is non-increasing in N, so the search
  doubles from ⌊1/target⌋ until the condition holds and then bisects on the
  integers. Because δ_overall is non-decreasing in δ_b, the condition also
  guarantees that ``base_delta(N, target)`` succeeds (with a value ≥ δ_b).
  Returns a Python int (counts far beyond 1e12 are handled).

  Args:
    base_delta: δ_b, the verification threshold, in (0, 1).
    target_delta: the δ to be reported, in (0, 1), with δ_b < target.
    attempts / earlier: the attempts charged (``overall_delta``): the minimum for the k-th
      attempt (a declared retry needs more samples than a first run).

  Returns:
    The minimal N ≥ 1.

  Raises:
    InputError: when no N reaches the target: δ_b too close to it, or the ``earlier`` runs'
      own bounds alone already exceed it at every level.
  """
  base = _open_unit('base_delta', base_delta)
  target = _open_unit('target_delta', target_delta)
  attempts = _validate.integer_at_least('attempts', attempts, 1)
  earlier = check_earlier(earlier, attempts)
  if not base < target:
    raise InputError(
        f'base_delta must be < target_delta (overall_delta >= base_delta always), got '
        f'base_delta={base}, target_delta={target}')
  if earlier and _minimise(_MAX_SAMPLES, base, attempts, earlier)[0] > target:
    raise InputError(
        f'the {len(earlier)} earlier verification run(s) of this mechanism that could back '
        f'the claim (their own num_samples and base_delta) already charge more than '
        f'delta = {target} at base_delta = {base}: no num_samples suffices; choose a larger '
        'delta or a smaller base_delta')
  try:
    return _smallest_n(lambda n: _minimise(n, base, attempts, earlier)[0] <= target,
                       math.floor(1.0 / target))
  except ValueError as error:
    raise InputError(
        f'base_delta={base} is too close to target_delta={target}: {error}') from None


def resolve_sample_size(target_delta: float, num_samples: int | None,
                        base_delta_value: float | None, *, attempts: int = 1,
                        earlier=()) -> tuple[int, float]:
  """(N, δ_b) for a target overall δ: fills in whichever is missing (δ_b = δ/2 if both are).

  With ``attempts`` = k (and the ``earlier`` runs of ``overall_delta``) the defaults are those
  of the k-th attempt, so a declared retry can pass: N is the minimum for k attempts, δ_b the
  largest that N supports with k attempts.

  Raises:
    InputError: if the given N and δ_b cannot reach the target with these attempts, naming
      the ``num_samples`` that can — before any compute.
  """
  target = _open_unit('delta', target_delta)
  attempts = _validate.integer_at_least('attempts', attempts, 1)
  earlier = check_earlier(earlier, attempts)
  if base_delta_value is not None:
    base = _open_unit('base_delta', base_delta_value)
    if base >= target:
      raise InputError(f'base_delta must be < delta = {target}, got {base}')
  if num_samples is None:
    base = target / 2 if base_delta_value is None else base
    n = minimum_samples(base, target, attempts=attempts, earlier=earlier)
    keys_lib.check_num_samples(n)  # beyond 2⁵² samples the keys would repeat
    return n, base
  n = keys_lib.check_num_samples(num_samples)
  if base_delta_value is None:
    return n, base_delta(n, target, attempts=attempts, earlier=earlier)
  if overall_delta(n, base, attempts=attempts, earlier=earlier) > target:
    needed = minimum_samples(base, target, attempts=attempts, earlier=earlier)
    raise InputError(
        f'num_samples = {n} is too small to verify base_delta = {base} at delta = {target}'
        + (f' with attempt = {attempts}' if attempts > 1 else '')
        + f': at least {needed} samples are needed (num_samples={needed})')
  return n, base


def default_estimation_samples(num_samples: int, base_delta: float) -> int:
  """Estimation samples per direction when none are given: min(⌊N/4⌋, ⌈50/δ_b⌉), at least
  1000 (the estimate only places candidates, so a ~15–30 % relative error on δ̂ at δ_b is
  enough, and the search stays no dearer than the verification of N samples)."""
  return max(1000, min(num_samples // 4, math.ceil(50 / base_delta)))
