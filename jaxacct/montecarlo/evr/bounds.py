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

**Support bound M** (keyword ``support`` of every function that bounds a false acceptance,
an overall δ or a sample size; default 1, which reproduces the plain-sampling numbers bit
for bit). With the Rényi-tilted estimator (docs/proofs/tilting.md (b)) every verification
term lies in [0, M], M = Z_α e^{−(α−1)ε}(α − 1)^{α−1}/α^α, and every candidate's δ is ≤ M
(the Canonne–Kamath–Steinke conversion of its Rényi divergence). ``support`` is that M, in
(0, 1]: a candidate whose bound exceeds 1 must be verified with plain terms (range 1) — on
[0, M] with M > 1, Fact 4.2 gives exp(−N·KL(δ_b/M ‖ L/M)) ≥ exp(−N·KL(δ_b ‖ L)), since
s ↦ KL(sa ‖ sb) is non-decreasing (convex, 0 at s = 0), so the tilt could only lose. The
three changed formulas, each proven here:

1. *Fact 4.2 on [0, M].* X/M ∈ [0, 1] has mean δ/M and δ̂ ≤ δ_b ⇔ mean(X/M) ≤ δ_b/M, so
   Pr[δ̂ ≤ δ_b] ≤ exp(−N·KL(δ_b/M ‖ δ/M)) for δ_b < δ ≤ M; no law on [0, M] has a mean
   > M (bound 0). The bound holds for every true mean ≥ δ (KL(a ‖ b) increases in b > a).
2. *Levels at or above M cost nothing.* A candidate with terms in [0, M] has δ ≤ M, so at a
   level L ≥ M none is "not (ε, L)-DP": its false-acceptance charge is q = 0 (not the KL
   expression, whose argument L/M ≥ 1 is meaningless). In particular M ≤ δ_b certifies every
   candidate at δ_b with **no sample** (``num_samples = 0`` is then accepted and
   ``minimum_samples`` returns 0).
3. *The released level.* Runs j ∈ B (this one, and the ``earlier`` runs that could back the
   claim, as ``ledger.py`` charges them) verify with N_j terms in [0, M_j] at threshold
   δ_b,j, each with a fallback that is (ε, δ_b,j)-DP. For a level L fix, with
   q_j(L) = 1 if δ_b,j ≥ L (its fallback need not be (ε, L)-DP), 0 if L ≥ M_j (> δ_b,j),
   exp(−N_j·KL(δ_b,j/M_j ‖ L/M_j)) otherwise, and D := max_j max(M_j, δ_b,j):

     δ_overall = min_{L ∈ (δ_b, D]} L + min(1, Σ_j q_j(L))·(D − L)    (capped at D).

   Proof. Let E be the event that the released candidate is not (ε, L)-DP. Inside run j,
   Theorem A.1's argument gives {run j releases a bad candidate} ⊆ {run j accepted its
   candidate i_min − 1}, of probability ≤ q_j(L) by 1. and 2. (the outcomes never depend on
   the data, so the bound holds given the past runs; a union over the runs in B and optional
   stopping give Pr[E] ≤ Σ_j q_j(L)). The released mechanism m is chosen without looking at
   the data, so for every output set S, Pr_D[(m, o) ∈ S] = Σ_m Pr[m]·Pr[m(D) ∈ S_m]; a
   good m adds ≤ e^ε Pr[m(D') ∈ S_m] + L, a bad one ≤ e^ε Pr[m(D') ∈ S_m] + δ_m with
   δ_m ≤ D (a verified candidate of run j has δ ≤ M_j, a fallback δ ≤ δ_b,j). Summing:
   Pr_D[·] ≤ e^ε Pr_{D'}[·] + L + (D − L)·Pr[E]. ∎ (Theorem A.1 is the case B = {one run},
   M = 1, D = 1: factor 1 − L; per direction, and the released δ is the maximum over the
   directions.) With one support M > δ_b,j for every run j (strictly: a run with
   δ_b,j ≥ M makes D > M), L = τδ_b and the substitution δ_b → δ_b/M turn the objective into M·[τδ'_b + Q(τ)(1 − τδ'_b)] with Fact 4.2 at δ'_b:
   δ_overall(N, δ_b; M) = M·δ_overall(N, δ_b/M; 1) (docs/proofs/tilting.md (c)), and the
   sample size for a target t is today's at (δ_b/M, t/M): ~M/δ instead of ~1/δ.

M = 1 is today's computation operation for operation (the scaled quantities δ_b/1 and τδ_b/1
are the same floats), so every pinned number keeps its bits.

All functions are deterministic and take/return Python floats and ints
(``bernoulli_kl`` also broadcasts over arrays). Sample counts are Python ints
and may be as large as ~1e12 and beyond.

References:
  Andy Dong and Arun Ganesh, "Privacy Amplification for BandMF via b-Min-Sep Subsampling",
  arXiv:2602.09338 (v2): App. A (Algorithm 5, Theorem A.1, the overall parameter δ_o and its minimum
  over δ) (docs/references.md).
  Clément Canonne, Gautam Kamath and Thomas Steinke, "The Discrete Gaussian for Differential
  Privacy", NeurIPS 2020, arXiv:2004.00010, Prop. 12 (the support bound M as a δ).
"""

from __future__ import annotations

import dataclasses
import functools
import math
import typing
from typing import Any

import jax
import numpy as np
import scipy.optimize
import scipy.special

from jaxacct import _validate
from jaxacct.conventions import DIRECTIONS
from jaxacct.montecarlo.engine import keys as keys_lib
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


def _num_samples(value: Any, minimum: int = 1) -> int:
  return _validate.integer_at_least('num_samples', value, minimum)


def _open_unit(name: str, value: Any) -> float:
  value = _validate.real_number(name, value)
  if not (math.isfinite(value) and 0.0 < value < 1.0):
    raise InputError(f'{name} must be in (0, 1), got {value}')
  return value


def check_support(value: Any, name: str = 'support') -> float:
  """The support bound M as a float in (0, 1] (module docstring, "Support bound M").

  Raises:
    InputError: M ≤ 0, NaN, or M > 1 — a candidate whose tilted terms can exceed 1 is verified
      with plain terms (support 1): on [0, M] with M > 1 Fact 4.2 only gets weaker.
  """
  value = _validate.real_number(name, value)
  if not (math.isfinite(value) and value > 0.0):
    raise InputError(f'{name} must be in (0, 1], got {value}')
  if value > 1.0:
    raise InputError(
        f'{name} = {value} > 1: terms on [0, {value}] give a weaker Fact 4.2 bound than plain '
        'terms on [0, 1] (KL(a/M || b/M) decreases in M); verify this candidate without the '
        'tilt, with support = 1')
  return value


def _samples_for(value: Any, base: float, support: float) -> int:
  """N ≥ 1, or N ≥ 0 when the support bound certifies without samples (M ≤ δ_b)."""
  return _num_samples(value, 0 if support <= base else 1)


def needs_samples(base_delta: float, *, support: float = 1.0) -> bool:
  """False when M ≤ δ_b: every candidate is then certified at δ_b by its support bound alone
  (formula 2 of the module docstring) and verification draws no sample."""
  return check_support(support) > _validate.probability('base_delta', base_delta)


def false_acceptance_bound(num_samples: int, threshold: float, true_delta: float, *,
                           support: float = 1.0) -> float:
  """Bound on the probability that the verifier accepts a too-large δ.

  Fact 4.2 of Chua, Ghazi, Harrison, Kamath, Kumar, Leeman, Manurangsi, Sinha,
  Zhang, "Balls-and-bins sampling for DP-SGD", AISTATS 2025: for N i.i.d.
  terms in [0, M] (M = ``support``, 1 for plain sampling) with mean δ (= ``true_delta``) and
  empirical mean δ̂,

    Pr[δ̂ ≤ threshold] ≤ exp(−N · KL(threshold/M ‖ δ/M))   if threshold < δ ≤ M,

  (Fact 4.2 for the terms X/M ∈ [0, 1]), 0 if δ > M (no law on [0, M] has that mean), and the
  trivial bound 1 if threshold ≥ δ. Used as q in Theorem A.1 of Dong & Ganesh (2026), App. A.
  It is also valid for any true mean ≥ δ, since KL(a ‖ b) increases in b for b > a.

  Args:
    num_samples: N, an integer ≥ 1.
    threshold: acceptance threshold on δ̂, in [0, 1].
    true_delta: the hypothesised mean δ, in (0, 1].
    support: M ∈ (0, 1] (``check_support``).

  Returns:
    The bound, in [0, 1].
  """
  n = _num_samples(num_samples)
  threshold = _validate.probability('threshold', threshold, allow_zero=True)
  true_delta = _validate.probability('true_delta', true_delta)
  support = check_support(support)
  if threshold >= true_delta:
    return 1.0
  if true_delta > support:
    return 0.0
  kl = float(_kl_unchecked(np.float64(threshold / support), np.float64(true_delta / support)))
  return float(math.exp(-n * kl)) if math.isfinite(kl) else 0.0


def hoeffding(num_samples: int, tau: float, delta: float, *, support: float = 1.0) -> float:
  """Verifier bound in jax_privacy's parameterisation: exp(−N · KL(δ/M ‖ τ·δ/M)).

  The probability that the mean of N i.i.d. [0, M] terms (M = ``support``) with true mean τ·δ
  (τ ≥ 1) is at most δ (Fact 4.2 of Chua et al., "Balls-and-bins sampling for DP-SGD",
  AISTATS 2025, for the terms divided by M; jax_privacy's ``_hoeffding_bound`` at M = 1):
  0 when τδ exceeds M (no such law) and 1 when τ = 1.
  Equals ``false_acceptance_bound(N, δ, τ·δ, support=M)``.

  Args:
    num_samples: N, an integer ≥ 1.
    tau: ratio τ of the true mean to the threshold, with 1 ≤ τ ≤ 1/δ.
    delta: the threshold δ, in (0, 1].
    support: M ∈ (0, 1].

  Returns:
    exp(−N · KL(δ/M ‖ τδ/M)), in [0, 1].
  """
  n = _num_samples(num_samples)
  delta = _validate.probability('delta', delta)
  tau = _validate.finite_real('tau', tau)
  support = check_support(support)
  if not 1.0 <= tau <= 1.0 / delta:
    raise InputError(f'tau must be in [1, 1/delta] = [1, {1.0 / delta}], got {tau}')
  if delta >= support:  # every term is ≤ M ≤ δ: δ̂ ≤ δ surely, if a mean τδ ≤ M exists at all
    return 1.0 if tau * delta <= support else 0.0
  kl = float(_kl_unchecked(np.float64(delta / support),
                           np.float64(min(tau * delta / support, 1.0))))
  return float(math.exp(-n * kl)) if math.isfinite(kl) else 0.0


# ---------------------------------------------------------------------------
# Overall δ of Algorithm 5 (Theorem A.1)
# ---------------------------------------------------------------------------

# Pre-scan grid for the minimisation over τ, in v = ln(τ − 1).
_GRID_POINTS = 2049
_GRID_LOWEST_EXCESS = -30.0  # τ − 1 down to e^-30 ≈ 1e-13

Earlier = tuple[tuple[int, float, float], ...]


def _top(base: float, support: float, earlier: Earlier) -> float:
  """D = max over the charged runs of max(M_j, δ_b,j): the δ a released candidate can have
  (formula 3 of the module docstring); 1 whenever every support is 1."""
  return max([support, base] + [max(m_j, base_j) for _, base_j, m_j in earlier])


def _objective(n: float, base: float, excess: np.ndarray, attempts: int = 1,
               earlier: Earlier = (), support: float = 1.0, top: float = 1.0) -> np.ndarray:
  """f(τ) = τδ_b + Q(τ)(D − τδ_b) at τ = 1 + excess, with Q the union bound over attempts.

  Q = min(1, (attempts − len(earlier))·q(τ) + Σ_j q_j(τ)) (formula 3 of the module
  docstring): q(τ) = exp(−N·KL(δ_b/M ‖ τδ_b/M)) for this run (0 when τδ_b ≥ M) and, for each
  earlier run j = (N_j, δ_b,j, M_j) that could back the claim, q_j(τ) = 1 when δ_b,j ≥ τδ_b,
  0 when τδ_b ≥ M_j, else exp(−N_j·KL(δ_b,j/M_j ‖ τδ_b/M_j)). An earlier run with this run's
  (N, δ_b, M) is counted as q itself, so identical retries give exactly attempts·q. The KL
  terms are formed from ``excess`` directly (t = (a − b)/b etc.), so τ close to 1 keeps full
  precision; with M = 1 and D = 1 every operation is the plain-sampling one (δ_b/1 = δ_b).
  """
  excess = np.asarray(excess, np.float64)
  tau = 1.0 + excess
  delta = base * tau  # the hypothesised true level L, in (δ_b, D]
  headroom = np.maximum(top - delta, 0.0)
  different = [(n_j, base_j, m_j) for n_j, base_j, m_j in earlier
               if (float(n_j), base_j, m_j) != (n, base, support)]
  own = attempts - len(different)
  if base < support:
    # Fact 4.2 for X/M: KL(δ_b/M ‖ L/M), written as b·φ(a/b) + (1 − b)·φ((1 − a)/(1 − b))
    # with a/b = 1/τ; infinite (q = 0) once L ≥ M.
    scaled_base = base / support
    scaled = scaled_base * tau
    one_minus_scaled = np.maximum(1.0 - scaled, 0.0)
    interior = one_minus_scaled > 0.0
    safe = np.where(interior, one_minus_scaled, 1.0)
    with np.errstate(invalid='ignore', divide='ignore'):
      lower = scaled * _phi(1.0 / tau, -excess / tau)
      upper = safe * _phi((1.0 - scaled_base) / safe, scaled_base * excess / safe)
    kl = np.where(interior, lower + upper, np.inf)
    charged = own * np.exp(-n * kl)
  else:  # M ≤ δ_b < L: every candidate of this run is certified at L
    charged = np.zeros_like(delta)
  # Union bound over verification attempts: Pr[some attempt falsely accepts] ≤ Σ its bounds.
  for n_j, base_j, m_j in different:
    with np.errstate(over='ignore', invalid='ignore', divide='ignore'):
      kl_j = _kl_unchecked(np.full_like(delta, min(base_j / m_j, 1.0)),
                           np.minimum(delta / m_j, 1.0))
      q_j = np.where(delta >= m_j, 0.0, np.exp(-float(n_j) * kl_j))
    charged = charged + np.where(base_j < delta, q_j, 1.0)
  q = np.minimum(1.0, charged)
  return delta + q * headroom


def _minimise(n: int, base: float, attempts: int = 1, earlier: Earlier = (),
              support: float = 1.0) -> tuple[float, float]:
  """Returns (min_τ f(τ), argmin τ − 1) for overall_delta, both at a feasible τ."""
  top = _top(base, support, earlier)
  if top <= base:  # every candidate of every charged run is certified at δ_b: no failure
    return base, 0.0
  nf = float(n)
  highest = math.log((top - base) / base)  # ln(D/δ_b − 1): τ = D/δ_b
  lowest = min(_GRID_LOWEST_EXCESS, highest - 1.0)
  grid = np.linspace(lowest, highest, _GRID_POINTS)
  values = _objective(nf, base, np.exp(grid), attempts, earlier, support, top)
  i = int(np.argmin(values))
  best_v, best_f = float(grid[i]), float(values[i])
  # Refine in w = v − v_i on the neighbouring grid cells. Centring matters: Brent's
  # bounded method stops at a tolerance of sqrt(eps)·|w|, which would be ~1e-5 in v
  # for v ~ 700 (δ_b ~ 1e-300) if the raw v were used.
  lo, hi = grid[max(i - 1, 0)] - best_v, grid[min(i + 1, _GRID_POINTS - 1)] - best_v
  if hi > lo:
    result = scipy.optimize.minimize_scalar(
        lambda w: float(_objective(nf, base, np.exp(best_v + w), attempts, earlier, support,
                                   top)),
        bounds=(float(lo), float(hi)), method='bounded',
        options={'xatol': 1e-12, 'maxiter': 500})
    v = best_v + float(result.x)
    # The value at a feasible τ.
    f = float(_objective(nf, base, np.exp(v), attempts, earlier, support, top))
    if f < best_f:
      best_v, best_f = v, f
  return min(best_f, top), math.exp(best_v)


def check_earlier(earlier, attempts: int) -> Earlier:
  """``earlier`` as a tuple of (N_j, δ_b,j, M_j) triples (Python int, float, float), checked:
  each N_j ≥ 1 (≥ 0 when M_j ≤ δ_b,j), δ_b,j in (0, 1), M_j in (0, 1] (a pair (N_j, δ_b,j)
  is a plain run, M_j = 1), and at most attempts − 1 of them (each is one of the attempts)."""
  def triple(entry):
    entry = tuple(entry)
    if len(entry) not in (2, 3):
      raise TypeError
    base_j = _open_unit('earlier base_delta', entry[1])
    m_j = check_support(entry[2] if len(entry) == 3 else 1.0, 'earlier support')
    n_j = _validate.integer_at_least('earlier num_samples', entry[0], 0 if m_j <= base_j else 1)
    return n_j, base_j, m_j

  try:
    runs = tuple(triple(entry) for entry in earlier)
  except (TypeError, ValueError) as error:
    if isinstance(error, InputError):
      raise
    raise InputError('earlier must be (num_samples, base_delta) pairs or (num_samples, '
                     f'base_delta, support) triples, got {earlier!r}') from None
  if len(runs) > attempts - 1:
    raise InputError(f'earlier lists {len(runs)} runs, but attempts = {attempts} counts only '
                     f'{attempts - 1} besides this one')
  return runs


def overall_delta_at(num_samples: int, base_delta: float, tau: float, *,
                     support: float = 1.0) -> float:
  """Theorem A.1 level for one hypothesised true level δ = τ·δ_b.

  δ_o = τδ_b + q·(D − τδ_b),  q = exp(−N · KL(δ_b/M ‖ τδ_b/M))  (0 when τδ_b ≥ M),

  with D = max(M, δ_b) and M = ``support`` (1: the paper's δ_o(δ, δ′, s) = δ + q(δ, δ′, s)(1 − δ)
  with δ = τδ_b, δ′ = δ_b, s = N; Dong & Ganesh, arXiv 2602.09338v2, App. A, Theorem A.1;
  q from Fact 4.2 of Chua et al., AISTATS 2025; the support bound: module docstring, formula
  3), capped at D. Every τ ∈ [1, 1/δ_b] gives a valid guarantee.

  Args:
    num_samples: N, an integer ≥ 1 (≥ 0 when M ≤ δ_b).
    base_delta: verification threshold δ_b, in (0, 1).
    tau: τ ∈ [1, 1/δ_b].
    support: M ∈ (0, 1].

  Returns:
    δ_o, in [δ_b, D].
  """
  base = _open_unit('base_delta', base_delta)
  support = check_support(support)
  n = _samples_for(num_samples, base, support)
  tau = _validate.finite_real('tau', tau)
  if not 1.0 <= tau <= 1.0 / base:
    raise InputError(f'tau must be in [1, 1/base_delta] = [1, {1.0 / base}], got {tau}')
  top = _top(base, support, ())
  return min(float(_objective(float(n), base, np.float64(tau - 1.0), support=support,
                              top=top)), top)


def overall_delta(num_samples: int, base_delta: float, *, attempts: int = 1,
                  earlier=(), support: float = 1.0) -> float:
  """δ reported after verifying (ε, δ_b) with N samples (jax_privacy's get_overall_delta).

  δ_overall(N, δ_b) = min_{τ ∈ [1, 1/δ_b]} [ τδ_b + q(τ)·(1 − τδ_b) ],  capped at 1,
  q(τ) = exp(−N · KL(δ_b ‖ τδ_b))

  (the minimum over δ of δ_o(δ, δ′, N) in Dong & Ganesh (2026) App. A, written
  in jax_privacy's base-δ form): Theorem A.1 of Dong & Ganesh (2026), App. A,
  with δ = τδ_b and the false-acceptance bound q of Fact 4.2 of Chua, Ghazi,
  Harrison, Kamath, Kumar, Leeman, Manurangsi, Sinha, Zhang, "Balls-and-bins
  sampling for DP-SGD", AISTATS 2025. τ = 1 and τ = 1/δ_b both give 1.

  With a support bound M < 1 (``support``; module docstring, formula 3) the terms are in
  [0, M], q(τ) = exp(−N·KL(δ_b/M ‖ τδ_b/M)) (0 for τδ_b ≥ M) and the top factor is D − τδ_b,
  D = max(M, δ_b): δ_overall = M·δ_overall(N, δ_b/M) for δ_b < M, and δ_b when M ≤ δ_b (no
  sample needed; ``num_samples`` may then be 0).

  With several verification attempts of the mechanism (``attempts``, the ledger's count) the
  false-acceptance probability is a union bound: each attempt j that could back the released
  claim adds its own bound at the released level τδ_b — q_j of formula 3 for the ``earlier``
  runs with their own (N_j, δ_b,j[, M_j]), this run's q for the others — so
  ``attempts = k`` with no ``earlier`` (k identical runs) charges k·q as before
  (``ledger.py`` explains which runs can back a claim); D is then the maximum of
  max(M_j, δ_b,j) over this run and the ``earlier`` ones.

  The minimum is found by a scan over a 2049-point grid in ln(τ − 1) followed
  by a bounded Brent refinement around the best grid point; the returned value
  is the objective evaluated at the chosen feasible τ, hence always a valid
  bound. It is non-decreasing in δ_b, non-increasing in N, and lies in [δ_b, D].

  Args:
    num_samples: N, the number of Monte Carlo samples per direction (the
      minimum over candidates if they differ), an integer ≥ 1 (≥ 0 when M ≤ δ_b).
    base_delta: δ_b, the verification threshold, in (0, 1).
    attempts: how many verification runs of the mechanism are charged, this one included.
      Default 1.
    earlier: (N_j, δ_b,j) or (N_j, δ_b,j, M_j) of the earlier runs (at most attempts − 1) that
      could back the claim and are charged at their own settings; the other attempts are
      charged as this run. Default none.
    support: M ∈ (0, 1], the bound on this run's terms and candidates' δ (``check_support``):
      the maximum over its Monte Carlo candidates, in this direction. Default 1 (plain terms).

  Returns:
    δ_overall as a Python float.
  """
  base = _open_unit('base_delta', base_delta)
  support = check_support(support)
  n = _samples_for(num_samples, base, support)
  attempts = _validate.integer_at_least('attempts', attempts, 1)
  return _minimise(n, base, attempts, check_earlier(earlier, attempts), support)[0]


# ---------------------------------------------------------------------------
# Inverses: base δ for a target, and sample counts
# ---------------------------------------------------------------------------

_BISECTION_RTOL = 1e-7  # relative width of the final base-δ bracket (≤ 1e-6 required)
_MAX_SAMPLES = 1 << 62


def _infimum_overall_delta(n: int) -> float:
  """lim_{δ_b → 0} δ_overall(N, δ_b) = min_x [x + (1 − x)^{N+1}] (KL(0 ‖ x) = −ln(1 − x)).

  The minimiser is 1 − x = (N + 1)^{−1/N}; no δ_b achieves a target at or below
  this value. With a support bound M the limit is M times this (the substitution δ_b → δ_b/M).
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
               earlier=(), support: float = 1.0) -> float:
  """Largest verification threshold δ_b with δ_overall(N, δ_b) ≤ target (get_base_delta).

  Inverse of ``overall_delta`` in δ_b (Theorem A.1 of Dong & Ganesh (2026),
  App. A, with q from Fact 4.2 of Chua et al., "Balls-and-bins sampling for
  DP-SGD", AISTATS 2025; jax_privacy's ``get_base_delta``). δ_overall is
  non-decreasing in δ_b, so a bisection in ln δ_b is used; it always returns the
  lower (conservative) end of a bracket of relative width ≤ 1e-7, so
  ``overall_delta(N, base_delta(N, t)) ≤ t`` holds exactly as evaluated.

  With a support bound (``support`` = M, module docstring) the search is the same; when M
  and every earlier run's max(M_j, δ_b,j) are ≤ target, no sample is needed and δ_b = target
  is returned (δ_overall = δ_b then).

  Args:
    num_samples: N, an integer ≥ 0 (0 only when the support bound certifies the target).
    target_delta: the δ to be reported, in (0, 1).
    attempts / earlier / support: as in ``overall_delta``.

  Returns:
    δ_b ∈ (0, target_delta), or target_delta when the support bound certifies it.

  Raises:
    ValueError: if no δ_b works for this N, i.e. target ≤ lim_{δ_b→0}
      δ_overall(N, δ_b) = M·min_x [x + (1 − x)^{N+1}] (one attempt); the message gives the
      sample count at which some δ_b starts to work and the count needed for
      δ_b = target/2.
  """
  target = _open_unit('target_delta', target_delta)
  support = check_support(support)
  attempts = _validate.integer_at_least('attempts', attempts, 1)
  earlier = check_earlier(earlier, attempts)
  n = _samples_for(num_samples, target, support)
  if _top(target, support, earlier) <= target:
    return target  # every candidate of every charged run is certified at the target
  if n == 0:
    raise InputError(f'num_samples = 0 verifies nothing: it needs support = {support} and every '
                     f'earlier run\'s max(support, base_delta) to be <= target_delta = {target}')

  def fits(base: float) -> bool:
    return _minimise(n, base, attempts, earlier, support)[0] <= target

  single = attempts == 1
  if not single or support * _infimum_overall_delta(n) < target:
    # A feasible lower end: step down from target/2 (overall_delta → the infimum
    # as δ_b → 0, so this terminates unless the infimum is within rounding of target).
    lo = target / 2.0
    lo_fits = fits(lo)
    while not lo_fits and lo > 1e-300:
      lo /= 16.0
      lo_fits = fits(lo)
    if lo_fits:
      hi = target  # infeasible: δ_overall(N, δ_b) > δ_b for δ_b < D
      while hi / lo > 1.0 + _BISECTION_RTOL:
        mid = math.sqrt(lo * hi)
        if not lo < mid < hi:
          break
        if fits(mid):
          lo = mid
        else:
          hi = mid
      return lo
  half = minimum_samples(target / 2.0, target, attempts=attempts, earlier=earlier,
                         support=support)
  if not single:
    raise InputError(
        f'num_samples={n} is too small for target_delta={target} with {attempts} attempts: no '
        f'base_delta in (0, {target}) gives overall_delta <= target_delta; {half} samples are '
        'needed for base_delta = target_delta/2 (see minimum_samples)')
  any_base = _smallest_n(lambda m: support * _infimum_overall_delta(m) < target,
                         math.floor(support / target))
  raise InputError(
      f'num_samples={n} is too small for target_delta={target}: no base_delta in (0, '
      f'{target}) gives overall_delta <= target_delta (the infimum over base_delta is '
      f'{support * _infimum_overall_delta(n):.6g}). At least {any_base} samples are needed '
      f'for any base_delta to work, and {half} for base_delta = target_delta/2 '
      f'(see minimum_samples).')


def minimum_samples(base_delta: float, target_delta: float, *, attempts: int = 1,
                    earlier=(), support: float = 1.0) -> int:
  """Smallest N with δ_overall(N, δ_b) ≤ target (jax_privacy's minimum_samples_to_calibrate).

  δ_overall (``overall_delta``; Theorem A.1 of Dong & Ganesh, arXiv
  2602.09338v2, App. A, with q from Fact 4.2 of Chua et al., "Balls-and-bins
  sampling for DP-SGD", AISTATS 2025) is non-increasing in N, so the search
  doubles from ⌊M/target⌋ (M = ``support``) until the condition holds and then bisects on
  the integers. Because δ_overall is non-decreasing in δ_b, the condition also
  guarantees that ``base_delta(N, target)`` succeeds (with a value ≥ δ_b).
  Returns a Python int (counts far beyond 1e12 are handled). With one support M for every
  run this is today's count at (δ_b/M, target/M) (module docstring, formula 3), and 0 when
  M ≤ δ_b (the support bound certifies every candidate).

  Args:
    base_delta: δ_b, the verification threshold, in (0, 1).
    target_delta: the δ to be reported, in (0, 1), with δ_b < target.
    attempts / earlier / support: the attempts charged and the support bound
      (``overall_delta``): the minimum for the k-th attempt (a declared retry needs more
      samples than a first run).

  Returns:
    The minimal N ≥ 0 (0 only when M ≤ δ_b).

  Raises:
    InputError: when no N reaches the target: δ_b too close to it, or the ``earlier`` runs'
      own bounds alone already exceed it at every level.
  """
  base = _open_unit('base_delta', base_delta)
  target = _open_unit('target_delta', target_delta)
  support = check_support(support)
  attempts = _validate.integer_at_least('attempts', attempts, 1)
  earlier = check_earlier(earlier, attempts)
  if not base < target:
    raise InputError(
        f'base_delta must be < target_delta (overall_delta >= base_delta always), got '
        f'base_delta={base}, target_delta={target}')
  if earlier and _minimise(_MAX_SAMPLES, base, attempts, earlier, support)[0] > target:
    raise InputError(
        f'the {len(earlier)} earlier verification run(s) of this mechanism that could back '
        f'the claim (their own num_samples, base_delta and support) already charge more than '
        f'delta = {target} at base_delta = {base}: no num_samples suffices; choose a larger '
        'delta or a smaller base_delta')
  if support <= base:  # this run's candidates are certified: its N does not matter
    return 0
  try:
    return _smallest_n(lambda n: _minimise(n, base, attempts, earlier, support)[0] <= target,
                       math.floor(support / target))
  except ValueError as error:
    raise InputError(
        f'base_delta={base} is too close to target_delta={target}: {error}') from None


class DirectionSize(typing.NamedTuple):
  """One direction of a verification: N terms in [0, M] (M = ``support``; N = 0 with M ≤ δ_b:
  certified without samples)."""

  num_samples: int
  support: float = 1.0


def direction_sizes(sizes) -> dict:
  """``sizes`` as a mapping direction → ``DirectionSize``: an int N is N terms in [0, 1] in
  every direction (plain sampling)."""
  if isinstance(sizes, dict):
    return {d: DirectionSize(*sizes[d]) for d in DIRECTIONS}
  return {d: DirectionSize(int(sizes), 1.0) for d in DIRECTIONS}


def overall_delta_by_direction(sizes, base_delta: float, *, attempts: int = 1,
                               earlier=None) -> float:
  """The released δ of a verification whose directions have their own N_d and support M_d:
  max over d of ``overall_delta(N_d, δ_b, support=M_d, earlier=earlier[d])``.

  A candidate is accepted iff δ̂_d ≤ δ_b in both directions; a candidate that is not (ε, L)-DP
  is so in some direction d, where it must be accepted — an event of probability ≤ direction
  d's Fact 4.2 bound (formula 1) whatever the other direction drew, so Theorem A.1's argument
  runs per direction and the release is (ε, max_d δ_overall,d)-DP
  (docs/proofs/review-per-direction.md). With one (N, 1) in both directions and the same
  ``earlier`` it is ``overall_delta(N, δ_b)`` bit for bit.

  Args:
    sizes: ``direction_sizes``' argument. earlier: None, or a mapping direction → the earlier
      runs' (N_j, δ_b,j, M_j) of that direction (``ledger.Charge.earlier``).
  """
  sizes = direction_sizes(sizes)
  earlier = {d: () for d in DIRECTIONS} if earlier is None else earlier
  return max(overall_delta(sizes[d].num_samples, base_delta, attempts=attempts,
                           earlier=earlier[d], support=sizes[d].support) for d in DIRECTIONS)


class DirectionProposal(typing.NamedTuple):
  """What one direction of a verification would draw, and what is proven without drawing.

  Attributes:
    support: the range [0, M] of the terms it would draw (1: plain sampling; M(α, ε): tilted).
      M bounds every candidate's δ too, so at δ_b ≥ M the direction is charged nothing
      (formula 2 of the module docstring), but N samples are still drawn if N is given.
    bound: a proven bound on every candidate's δ in this direction at ε (None: none known; 0:
      exactly 0, (A1); a Rényi bound M'(α', ε)). The direction is certified without samples
      when bound ≤ δ_b (formula 2 of the module docstring with the bound as its M): it then
      draws none, whatever N is given.
  """

  support: float = 1.0
  bound: float | None = None


def resolve_direction_sizes(target_delta: float, num_samples: int | None,
                            base_delta_value: float | None, proposals: dict, *,
                            attempts: int = 1, earlier=None) -> tuple[dict, float]:
  """(per direction ``DirectionSize``, δ_b) for a target overall δ when each direction has its
  own ``DirectionProposal`` (``overall_delta_by_direction``). This is where N and δ_b are
  decided; ``resolve_sample_size`` is the case of one proposal (M, None) in every direction.

  A direction whose ``bound`` is ≤ δ_b draws no sample and is recorded as N_d = 0 with support
  δ_b (every candidate's δ is ≤ δ_b in it: certified, charged nothing); the others draw N_d
  terms in [0, ``support``]. The missing one of N and δ_b is filled in per direction, with its
  support and earlier runs (``overall_delta``: Theorem A.1 of Dong & Ganesh (2026), App. A,
  with q from Fact 4.2 of Chua et al., AISTATS 2025):

  - neither given: when every direction is certified at δ (its bound or its support ≤ δ) and
    so is every earlier run (max(M_j, δ_b,j) ≤ δ), no samples and δ_b = δ (the fallback must
    then be (ε, δ)-DP); otherwise δ_b = δ/2;
  - N given, δ_b not: δ_b = the smallest, over the directions not certified at δ/2 by their
    bound, of the largest δ_b that N supports (``base_delta``; δ/2 if there are none);
  - N_d, in every direction not certified by its bound: the given N, or else the minimum for
    δ_b (``minimum_samples``; 0 when M_d ≤ δ_b).

  A given N may be 0 only when every direction is certified (bound or support) at δ_b, or at
  δ when δ_b is to be found. With ``attempts`` = k (and each direction's ``earlier`` runs of
  ``overall_delta``) the defaults are those of the k-th attempt, so a declared retry can pass.

  Raises:
    InputError: before any compute, when the given N and δ_b cannot reach the target, naming
      the ``num_samples`` that can, or when the earlier runs alone exceed it.
  """
  target = _open_unit('delta', target_delta)
  attempts = _validate.integer_at_least('attempts', attempts, 1)
  earlier = {d: check_earlier(() if earlier is None else earlier[d], attempts)
             for d in DIRECTIONS}
  proposals = {d: DirectionProposal(check_support(proposals[d].support), proposals[d].bound)
               for d in DIRECTIONS}

  def certified(d: str, base: float) -> bool:
    bound = proposals[d].bound
    return bound is not None and bound <= base

  def no_sample_needed(d: str, base: float) -> bool:  # terms in [0, M] have mean ≤ M
    return certified(d, base) or proposals[d].support <= base

  if base_delta_value is not None:
    base = _open_unit('base_delta', base_delta_value)
    if base >= target:
      raise InputError(f'base_delta must be < delta = {target}, got {base}')
  given = None
  if num_samples is not None:
    level = target if base_delta_value is None else base
    free = all(no_sample_needed(d, level) for d in DIRECTIONS)
    given = _num_samples(num_samples, 0 if free else 1)
    if given:
      keys_lib.check_num_samples(given)  # beyond 2⁵² samples the keys would repeat
  # functools.cache: directions alike in support and earlier runs (plain: both) search once.
  if base_delta_value is None:
    if given is not None:
      # The largest δ_b every sampled direction supports with N (a direction certified at δ/2
      # by its bound is left out: whether it is certified at the δ_b chosen is checked below).
      largest = functools.cache(lambda support, runs: base_delta(
          given, target, attempts=attempts, earlier=runs, support=support))
      base = min([largest(proposals[d].support, earlier[d])
                  for d in DIRECTIONS if not certified(d, target / 2)] or [target / 2])
    elif all(no_sample_needed(d, target) and _top(target, target, earlier[d]) <= target
             for d in DIRECTIONS):
      return {d: DirectionSize(0, target) for d in DIRECTIONS}, target
    else:
      base = target / 2
  smallest = functools.cache(lambda support, runs: minimum_samples(
      base, target, attempts=attempts, earlier=runs, support=support))
  sizes = {}
  for d in DIRECTIONS:
    if certified(d, base):
      sizes[d] = DirectionSize(0, base)
      continue
    n = given
    if n is None:
      n = smallest(proposals[d].support, earlier[d])
      if n:
        keys_lib.check_num_samples(n)
    sizes[d] = DirectionSize(n, proposals[d].support)
  if overall_delta_by_direction(sizes, base, attempts=attempts, earlier=earlier) > target:
    # Every direction is asked: a certified one fails only by its earlier runs, and
    # minimum_samples then refuses, saying so.
    needed = max(smallest(sizes[d].support, earlier[d]) for d in DIRECTIONS)
    raise InputError(
        f'num_samples = {given} is too small to verify base_delta = {base} at delta = '
        f'{target}' + (f' with attempt = {attempts}' if attempts > 1 else '')
        + f': at least {needed} samples are needed (num_samples={needed})')
  return sizes, base


def resolve_sample_size(target_delta: float, num_samples: int | None,
                        base_delta_value: float | None, *, attempts: int = 1,
                        earlier=(), support: float = 1.0) -> tuple[int, float]:
  """(N, δ_b) for a target overall δ: fills in whichever is missing (δ_b = δ/2 if both are).

  With ``attempts`` = k (and the ``earlier`` runs of ``overall_delta``) the defaults are those
  of the k-th attempt, so a declared retry can pass: N is the minimum for k attempts, δ_b the
  largest that N supports with k attempts. With a support bound M (``support``) the defaults
  are the same searches at M; when M and every earlier run's max(M_j, δ_b,j) are ≤ the target
  and neither N nor δ_b is given, the answer is (0, target): no sample, δ_b = δ (the fallback
  must then be (ε, δ)-DP). A given N is returned as given (it may be 0 when M ≤ δ_b, or M ≤ δ
  with δ_b to be found).

  ``resolve_direction_sizes`` with the proposal (M, None) and these ``earlier`` runs in every
  direction: the support is then the only bound, so a given N is kept.

  Raises:
    InputError: if the given N and δ_b cannot reach the target with these attempts, naming
      the ``num_samples`` that can — before any compute.
  """
  # Checked here first, in this order, so that a bad argument is reported as it always was and
  # ``earlier`` (any iterable) is read once for both directions.
  target = _open_unit('delta', target_delta)
  proposal = DirectionProposal(check_support(support))
  attempts = _validate.integer_at_least('attempts', attempts, 1)
  runs = check_earlier(earlier, attempts)
  sizes, base = resolve_direction_sizes(
      target, num_samples, base_delta_value, {d: proposal for d in DIRECTIONS},
      attempts=attempts, earlier={d: runs for d in DIRECTIONS})
  return sizes[DIRECTIONS[0]].num_samples, base  # the directions are alike


def default_estimation_samples(num_samples: int, base_delta: float, *,
                               support: float = 1.0) -> int:
  """Estimation samples per direction when none are given: min(⌊N/4⌋, ⌈50·M/δ_b⌉), at least
  1000 (the estimate only places candidates, so a ~15–30 % relative error on δ̂ at δ_b is
  enough, and the search stays no dearer than the verification of N samples; with terms in
  [0, M] the relative standard error is ≤ √(M/(N·δ)), docs/proofs/tilting.md (b))."""
  support = check_support(support)
  return max(1000, min(num_samples // 4, math.ceil(50 * support / base_delta)))
