"""The add-direction partition function Z'_α of product mechanisms, certified from both sides.

The add direction tilts Q (the output without the example) by the loss L' = ln Q/P:
Q'_α ∝ Q^α P^{1−α}, with normaliser

    Z'_α = ∫ Q^α P^{1−α} = E_Q[(P/Q)^{−(α−1)}] = e^{(α−1)·D_α(Q‖P)},

weight w' = Z'_α e^{−(α−1)L'} and the same support bound as the remove direction,
M'(α, ε) = Z'_α e^{−(α−1)ε}(α − 1)^{α−1}/α^α (``tilt_bound.log_support_bound``;
docs/proofs/tilting.md (b), (e)). Any value ≥ Z'_α keeps the weights and M' conservative.

**Product mechanisms.** For Poisson sampling with C = c·I, and for cyclic Poisson with a fixed
partition (the example in phase 0) and bands ≤ the cycle, P and Q factor over independent
blocks of outputs, one per round t in which the example can take part: on its block P is
(1 − p)N(0, σ²I) + pN(c_t, σ²I) and Q is N(0, σ²I), with c_t the round's column (cut at row n),
and elsewhere P = Q. Then Q^α P^{1−α} factors too and ln Z'_α = Σ_t ln B(p, μ_t, α) with
μ_t = ‖c_t‖/σ and the one-dimensional moment (u = ⟨c_t, y⟩/(‖c_t‖σ) ~ N(0, 1) under Q)

    B(p, μ, α) = E_{u~N(0,1)}[ ((1 − p) + p·e^{μu − μ²/2})^{−(α−1)} ].

**No closed form.** The remove-direction moment E_Q[(P/Q)^α] is the finite binomial sum of
Mironov, Talwar & Zhang (2019), arXiv:1908.10530, §3.3, because α is a positive integer. Here
the power is −(α − 1) < 0: the binomial series of (1 + r)^{−(α−1)}, r = p e^{μu−μ²/2}/(1 − p),
converges only where r < 1, and split at r = 1 as MTZ split their fractional-order series its
integrated terms grow like i^{α−3} (the coefficients C(α + i − 2, i) against the ~1/i Gaussian
mass next to the split), so for α ≥ 3 it diverges. MTZ compute only the remove moment (they
compare the two directions for one round and find the remove one dominates; here that is
checked numerically, never assumed). So B is computed by quadrature, **bracketed**:

**Certified bracket.** ψ(u) = ln φ(u) − (α − 1)[ln(1 − p) + softplus(t(u))],
t(u) = μu − μ²/2 + ln(p/(1 − p)), is the log of the integrand. It is concave: −u²/2 is, and
softplus is convex with a positive factor in front of its negation; indeed
ψ'' = −1 − (α − 1)μ²·s(1 − s) ∈ [−1 − (α − 1)μ²/4, −1], s = expit(t). Hence on every interval
the chord of ψ lies below ψ and the tangent at the midpoint above it, and e^{chord},
e^{tangent} integrate in closed form:

    h·e^{ψ(a)}·(e^x − 1)/x, x = ψ(b) − ψ(a)   ≤  ∫_a^b e^ψ  ≤   h·e^{ψ(c)}·sinh(y)/y, y = ψ'(c)h/2.

The interior is a uniform grid of K intervals on [u* − 12, u* + 12] around the maximiser u* of
ψ (found by bisection of ψ' = −u − (α − 1)μ·expit(t(u)), which lies in (−(α − 1)μ, 0)); the
two tails are ≥ 0 and, by the tangent at the window's ends (concavity again), at most
e^{ψ(a₀)}/ψ'(a₀) and e^{ψ(b_K)}/|ψ'(b_K)|, where |ψ'| ≥ 12 and ψ ≤ ψ(u*) − 72. So
ln B ∈ [lower, upper] is a theorem about the exact integrand; the relative width of the
bracket is ≈ h²/4·max|ψ''| (K is chosen for ≈ 2e-9, at most 2²⁰ intervals). Floating point:
every log term is a few correctly rounded operations on numbers of magnitude ≤ Ψ (the largest
u²/2 + (α − 1)(|ln(1 − p)| + softplus(t)) + |ln h| + 1 on the grid), so it is off by at most
a few·u·Ψ (u = 2⁻⁵³), and the pairwise sum of the shifted exponentials adds at most
(log₂K + 32)·u relatively; the returned upper end adds 64·u·(Ψ + |ln B| + 1) + (log₂K + 32)·u,
the lower end subtracts it — a stated margin, many times the worst rounding of the terms, not
a machine proof.
Rounds share their bracket when their column norms are equal; a sum over rounds adds the ends,
and 4·u·(distinct norms + 1)·(|upper| + |lower| + 1) for the products and sums.

Closed-form cases: μ = 0 (the round carries nothing) gives ln B = 0; p = 1 (no subsampling)
gives ln B = α(α − 1)μ²/2, the Gaussian's, in both directions.

Where the code runs: host NumPy/SciPy, float64, log space.

References:
  Ilya Mironov, Kunal Talwar and Li Zhang, "Rényi Differential Privacy of the Sampled Gaussian
  Mechanism", arXiv:1908.10530 (2019), §3.3.
  Andy Dong and Arun Ganesh, "Privacy Amplification for BandMF via b-Min-Sep Subsampling",
  arXiv:2602.09338 (v2): §3 (cyclic Poisson), §4 (docs/references.md).
  Clément Canonne, Gautam Kamath and Thomas Steinke, "The Discrete Gaussian for Differential
  Privacy", NeurIPS 2020, arXiv:2004.00010, Prop. 12.
"""

from __future__ import annotations

import math
import typing

import numpy as np
from scipy import optimize, special

from jaxacct import _validate
from jaxacct.errors import InputError

_UNIT = 2.0**-53
_WINDOW = 12.0  # half-width of the interior grid around the maximiser of ψ
_TARGET_WIDTH = 2e-9  # aimed relative width of one round's bracket
_MIN_INTERVALS = 1 << 12
_MAX_INTERVALS = 1 << 20
_MARGIN = 64.0 * _UNIT
_LOG_SQRT_2PI = 0.5 * math.log(2.0 * math.pi)


class MomentBracket(typing.NamedTuple):
  """ln Z'_α (or one round's ln B) with its certified bracket.

  Attributes:
    lower: a lower bound (quadrature bracket minus the floating-point margin).
    upper: an upper bound (bracket plus the margin): the value to use wherever Z' may only be
      overestimated (weights, support bound).
    estimate: composite Simpson value of the same grid (accurate, but not a bound).
    intervals: grid intervals per distinct round (0 for the closed-form cases).
  """

  lower: float
  upper: float
  estimate: float
  intervals: int


def _log_exprel(x: np.ndarray) -> np.ndarray:
  """ln((e^x − 1)/x) (0 at x = 0), accurate in absolute terms for every real x."""
  x = np.asarray(x, np.float64)
  ax = np.abs(x)
  safe = np.where(ax > 0.0, ax, 1.0)
  with np.errstate(divide='ignore'):
    # x > 0: x + ln(1 − e^{−x}) − ln x;  x < 0: ln(1 − e^{x}) − ln(−x).
    value = np.log(-np.expm1(-safe)) - np.log(safe) + np.where(x > 0.0, x, 0.0)
  return np.where(ax > 0.0, value, 0.0)


def _log_sinhc(y: np.ndarray) -> np.ndarray:
  """ln(sinh(y)/y) (0 at y = 0) = |y| + ln(1 − e^{−2|y|}) − ln(2|y|)."""
  ay = np.abs(np.asarray(y, np.float64))
  safe = np.where(ay > 0.0, ay, 1.0)
  value = safe + np.log(-np.expm1(-2.0 * safe)) - np.log(2.0 * safe)
  return np.where(ay > 0.0, value, 0.0)


def _log_sum(logs: np.ndarray) -> float:
  """ln Σ e^{logs}: the exponentials shifted by the largest log, summed by NumPy's pairwise
  summation (relative error ≤ (log₂ K + 32)·u for K positive terms)."""
  logs = np.asarray(logs, np.float64).ravel()
  peak = float(np.max(logs))
  if peak == -math.inf:
    return -math.inf
  return peak + math.log(float(np.sum(np.exp(logs - peak))))


class _Integrand:
  """ψ(u) = ln φ(u) − m[ln(1 − p) + softplus(μu − μ²/2 + logit p)] and ψ'(u), m = α − 1."""

  def __init__(self, p: float, mu: float, m: float):
    self.mu, self.m = mu, m
    self.log_q = math.log1p(-p)
    self.shift = math.log(p) - self.log_q - 0.5 * mu * mu  # t(u) = μu + shift

  def t(self, u):
    return self.mu * u + self.shift

  def value(self, u):
    return -0.5 * u * u - _LOG_SQRT_2PI - self.m * (self.log_q + np.logaddexp(0.0, self.t(u)))

  def slope(self, u):
    return -u - self.m * self.mu * special.expit(self.t(u))

  def magnitude(self, u):
    """An upper bound on the magnitudes the value at u is summed from."""
    return 0.5 * u * u + _LOG_SQRT_2PI + self.m * (abs(self.log_q) + np.logaddexp(0.0, self.t(u)))


def _intervals(mu: float, m: float) -> int:
  """K with h²/4·max|ψ''| ≈ the target width on the window (powers of two, capped)."""
  curvature = 1.0 + m * mu * mu / 4.0
  wanted = 2.0 * _WINDOW * math.sqrt(curvature / (4.0 * _TARGET_WIDTH))
  return int(min(max(1 << math.ceil(math.log2(wanted)), _MIN_INTERVALS), _MAX_INTERVALS))


def _check(sampling_prob, noise_multiplier, alpha) -> tuple[float, float, float]:
  p = _validate.probability('sampling_prob', sampling_prob)
  sigma = _validate.positive_finite('noise_multiplier', noise_multiplier)
  alpha = _validate.finite_real('alpha', alpha)
  if not alpha > 1.0:
    raise InputError(f'alpha must be > 1, got {alpha}')
  return p, sigma, alpha


def round_add_log_moment(sampling_prob: float, squared_norm: float, noise_multiplier: float,
                         alpha: float) -> MomentBracket:
  """ln B(p, μ, α) = ln E_{u~N(0,1)}[((1 − p) + p e^{μu − μ²/2})^{−(α−1)}], μ = √s/σ: the
  add-direction moment ln ∫Q^αP^{1−α} of one round with squared column norm s (module
  docstring: bracket, margin; closed forms for μ = 0 and p = 1).

  Args:
    sampling_prob: p ∈ (0, 1].
    squared_norm: s ≥ 0, the round's squared column norm.
    noise_multiplier: σ > 0.
    alpha: the order, real > 1 (the tilt uses integers ≥ 2).

  Returns:
    A ``MomentBracket``.
  """
  p, sigma, alpha = _check(sampling_prob, noise_multiplier, alpha)
  s = _validate.finite_real('squared_norm', squared_norm)
  if s < 0.0:
    raise InputError(f'squared_norm must be >= 0, got {s}')
  mu, m = math.sqrt(s) / sigma, alpha - 1.0
  if mu == 0.0:
    return MomentBracket(0.0, 0.0, 0.0, 0)
  if p == 1.0:  # N(0) against N(μ): D_α = αμ²/2 in both directions
    value = alpha * m * mu * mu / 2.0
    slack = 4.0 * _UNIT * value
    return MomentBracket(value - slack, value + slack, value, 0)
  psi = _Integrand(p, mu, m)
  # The maximiser of the concave ψ: ψ'(u) = −u − mμ·expit(t(u)) is ≥ 1 at −mμ − 1 and
  # ≤ −1 at 1.
  peak = optimize.brentq(lambda u: float(psi.slope(u)), -m * mu - 1.0, 1.0, xtol=1e-12,
                         maxiter=500)
  k = _intervals(mu, m)
  nodes = np.linspace(peak - _WINDOW, peak + _WINDOW, k + 1)
  h = float(nodes[1] - nodes[0])
  middles = 0.5 * (nodes[:-1] + nodes[1:])
  at_nodes, at_middles = psi.value(nodes), psi.value(middles)
  log_h = math.log(h)
  chords = log_h + at_nodes[:-1] + _log_exprel(at_nodes[1:] - at_nodes[:-1])
  tangents = log_h + at_middles + _log_sinhc(0.5 * h * psi.slope(middles))
  # Tails: ∫_{−∞}^{a} e^ψ ≤ e^{ψ(a)}/ψ'(a), ∫_b^∞ e^ψ ≤ e^{ψ(b)}/(−ψ'(b)) (tangents of ψ).
  left, right = float(psi.slope(nodes[0])), float(psi.slope(nodes[-1]))
  if not (left > 0.0 > right):
    raise InputError(f'internal: the window around u* = {peak} misses the maximum of psi')
  tails = [float(at_nodes[0]) - math.log(left), float(at_nodes[-1]) - math.log(-right)]
  lower = _log_sum(chords)
  upper = _log_sum(np.concatenate([tangents, tails]))
  simpson = _log_sum(np.concatenate([at_nodes[:-1], at_nodes[1:], at_middles + math.log(4.0)])
                      + log_h - math.log(6.0))
  magnitude = float(np.max(psi.magnitude(nodes))) + abs(log_h) + 1.0
  margin = _MARGIN * (magnitude + abs(upper) + 1.0) + (math.log2(k) + 32.0) * _UNIT
  estimate = min(max(simpson, lower), upper)
  return MomentBracket(lower - margin, upper + margin, estimate, k)


def add_log_partition(sampling_prob: float, squared_norms, noise_multiplier: float,
                      alpha: float) -> MomentBracket:
  """ln Z'_α = Σ_t ln B(p, √s_t/σ, α) of a product of rounds with squared column norms s_t
  (module docstring, "Product mechanisms"); equal norms share one bracket."""
  p, sigma, alpha = _check(sampling_prob, noise_multiplier, alpha)
  norms = np.asarray(squared_norms, np.float64).ravel()
  if norms.size == 0:
    raise InputError('squared_norms must not be empty')
  values, counts = np.unique(norms, return_counts=True)
  lower = upper = estimate = 0.0
  intervals = 0
  for value, count in zip(values.tolist(), counts.tolist()):
    bracket = round_add_log_moment(p, value, sigma, alpha)
    lower += count * bracket.lower
    upper += count * bracket.upper
    estimate += count * bracket.estimate
    intervals = max(intervals, bracket.intervals)
  # The products and sums above round too: one more margin per distinct norm.
  slack = 4.0 * _UNIT * (values.size + 1) * (abs(upper) + abs(lower) + 1.0)
  return MomentBracket(lower - slack, upper + slack, estimate, intervals)


def poisson_add_log_partition(sampling_prob: float, iterations: int, coefficient: float,
                              noise_multiplier: float, alpha: float) -> MomentBracket:
  """ln Z'_α of Poisson sampling with C = c·I: n rounds of squared norm c²."""
  n = _validate.integer_at_least('iterations', iterations, 1)
  c = _validate.positive_finite('coefficient', coefficient)
  return add_log_partition(sampling_prob, np.full(n, c * c), noise_multiplier, alpha)


def phase_zero_squared_norms(iterations: int, cycle_length: int, coefficients) -> np.ndarray:
  """s_t of the rounds t = 0, T, 2T, … < n of cyclic Poisson's phase 0: the squared norm of
  column t of the banded Toeplitz C, cut at row n (Σ_{k < min(bands, n − t)} c_k²).

  Raises:
    InputError: more bands than the cycle (the rounds would share outputs: no product).
  """
  n = _validate.integer_at_least('iterations', iterations, 1)
  t = _validate.integer_at_least('cycle_length', cycle_length, 1)
  c = _validate.band_coefficients('coefficients', coefficients)
  if c.size > t:
    raise InputError(f'coefficients: {c.size} bands > cycle_length = {t}: the rounds of one '
                     'phase would share outputs and Z_α, Z\'_α are no products')
  rounds = np.arange(0, n, t)
  return np.cumsum(c * c)[np.minimum(c.size, n - rounds) - 1]


def fixed_phase_add_log_partition(sampling_prob: float, iterations: int, cycle_length: int,
                                  coefficients, noise_multiplier: float,
                                  alpha: float) -> MomentBracket:
  """ln Z'_α of cyclic Poisson with the example in phase 0 and bands ≤ T: the sum over its
  rounds of ln B at their truncated squared column norms."""
  norms = phase_zero_squared_norms(iterations, cycle_length, coefficients)
  return add_log_partition(sampling_prob, norms, noise_multiplier, alpha)
