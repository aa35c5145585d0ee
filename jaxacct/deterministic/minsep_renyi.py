"""The ``"minsep_renyi"`` accountant: sampling-free (ε, δ) for b-min-sep from exact Rényi orders.

The pair (Dong & Ganesh (2026) §2.4): P = Σ_x p_x N(Cx, σ²I), Q = N(0, σ²I), x the sensitive
example's participation pattern drawn by the scheme, g_x(y) = dN(Cx, σ²I)/dQ(y) =
exp(⟨Cx, y⟩/σ² − ‖Cx‖²/(2σ²)), so P/Q = E_p[g_x]. ``remove`` is H_{e^ε}(P‖Q) (y ~ P, loss
L = ln P/Q), ``add`` is H_{e^ε}(Q‖P) = E_Q[(1 − e^ε P/Q)₊] (y ~ Q, loss −L). The (ε, δ)
statement is the maximum over both directions, each bounded on its own (δ_add ≤ δ_remove is not
assumed anywhere).

**Remove: exact integer orders.** For α = 2 … ``alpha_max``, ln Z_α = (α − 1)·D_α(P‖Q) exactly
(``tilt_bound.partition``: the α-tuple chain of ``minsep_chain`` for b-min-sep and
random-phase cyclic Poisson, closed forms for Poisson with C = c·I and fixed-phase cyclic
Poisson, Schuchardt & Kalinin (2026) Algorithm 1 for balls-in-bins; rounded up). Orders whose
recursion exceeds ``state_budget`` are skipped (``explain`` lists them). D_α is the Rényi
divergence of Mironov (2017) Def. 3, converted by Canonne, Kamath & Steinke (2020) Prop. 12
(= Schuchardt & Kalinin (2026) Theorem 3.1; ``renyi.remove_delta`` / ``renyi.remove_epsilon``):
δ_remove(ε) ≤ min_α e^{(α−1)(D_α − ε)}(1 − 1/α)^α/(α − 1) = min_α M(α, ε)
(``tilt_bound.log_support_bound``), and ε(δ) is the same formula solved for ε.

**Add: proven bounds, no exact order.** No finite expansion of ∫Q^α P^{1−α} is known for these
mixtures (docs/proofs/tilting.md (e)). Three bounds, each valid on its own; δ_add(ε) is their
minimum and ε_add(δ) the minimum of their ε:

- (A1) *never participating.* g_x > 0 and g_0 ≡ 1, so P/Q ≥ p₀ := Pr[x = 0] pointwise, and
  t ↦ (1 − e^ε t)₊ is non-increasing: δ_add(ε) ≤ (1 − e^ε p₀)₊, which is 0 for ε ≥ −ln p₀.
  (Pr[x = 0] ≤ Pr[Cx = 0], so this is conservative when a participation can leave Cx = 0.)
  Balls-in-bins with every bin in some round has p₀ = 0: (A1) never applies.
- (A2) *a reference law (Gibbs' variational inequality).* For any law r on patterns with
  r ≪ p, Jensen's inequality for the concave logarithm gives, for every y,

      ln E_p[g_x(y)] = ln E_r[g_x(y)·p_x/r_x] ≥ E_r[ln g_x(y)] − KL(r‖p)
                     = ⟨Cμ_r, y⟩/σ² − E_r‖Cx‖²/(2σ²) − KL(r‖p),    μ_r = E_r[x]

  (the variational formula of Donsker & Varadhan (1975) read as an inequality). Under Q,
  W := ⟨Cμ_r, y⟩/(σ‖Cμ_r‖) ~ N(0, 1); with s = ‖Cμ_r‖/σ and
  Δ_r = (E_r‖Cx‖² − ‖Cμ_r‖²)/(2σ²) + KL(r‖p) ≥ 0 the bound reads
  P/Q ≥ e^{−Δ_r}·e^{sW − s²/2}, and e^{sW − s²/2} = dN(s, 1)/dN(0, 1)(W). Hence

      δ_add(ε) ≤ E[(1 − e^{ε − Δ_r} e^{sW − s²/2})₊] = H_{e^{ε − Δ_r}}(N(0, 1) ‖ N(s, 1)),

  the analytic Gaussian δ of Balle & Wang (2018) Thm 8 with sensitivity ‖Cμ_r‖ at ε − Δ_r
  (``pld.gaussian_delta``, valid at any real argument). r = (point mass at x = 0) gives s = 0,
  Δ = −ln p₀: exactly (A1). The reference laws used: the scheme's own chain with participation
  probability λp (same initial law) for a grid of λ ∈ (0, 1] (``SCALES``; every λ is valid,
  the grid only costs tightness). Its statistics come from one forward pass over the chain
  (``reference_moments``): μ_t = Pr_r[x_t = 1]; E_r‖Cx‖² = Σ_t μ_t·G[t, t] because bands ≤ the
  separation keeps one example's participations ≥ bands apart, so ⟨Ce_s, Ce_t⟩ = 0 between
  them (G = CᵀC of the finite n×n C: truncated column norms); KL(r‖p) = Σ_t Pr_r[eligible at
  t]·kl(λp‖p) by the chain rule (the eligible state is the only random transition; this path
  KL is ≥ the pattern KL, hence conservative for a warm start). Balls-in-bins: r = p (the bin is
  uniform, x is determined by it): E‖Cx‖² = tr(G)/T and ‖Cμ‖² = ΣG/T² with G the T×T Gram of the
  bin means — the Rényi form of (A2) is then exactly Schuchardt & Kalinin (2026) Lemma 3.4
  (``renyi.add_divergence_terms``), and (A2) converts it without Prop. 12's loss.
- (A3) *unamplified Gaussian*: Δ = √(max_x ‖Cx‖²) (``pld.max_sensitivity_squared``), both
  directions (Balle & Wang (2018) Thm 8; the ``unamplified_gaussian`` accountant). The remove
  direction takes it too.

*A Jensen bound: proven, and dominated by (A2).* For real α > 1, t ↦ t^{−(α−1)} is convex on
t > 0, so (E_p g_x)^{1−α} ≤ E_p[g_x^{1−α}], and E_Q[g_x^{1−α}] = e^{(α−1)‖Cx‖²/(2σ²)}·
E_Q e^{−(α−1)⟨Cx, y⟩/σ²} = e^{α(α−1)‖Cx‖²/(2σ²)} (the Gaussian moment generating function):

    e^{(α−1)·D_α(Q‖P)} ≤ J_α := E_p[exp(α(α − 1)‖Cx‖²/(2σ²))].

(A2) with r = p is never looser. Its pointwise lower bound R := e^{−Δ_p}e^{sW − s²/2} ≤ P/Q has
ln E_Q[R^{1−α}] = (α − 1)·(E‖Cx‖² + (α − 1)‖Cμ‖²)/(2σ²) (the moment generating function of
W), which is ≤ (α − 1)·α·E‖Cx‖²/(2σ²) (‖C·E x‖² ≤ E‖Cx‖²) ≤ ln J_α (Jensen for exp). And (A2)'s
δ = E_Q[(1 − e^ε R)₊] is at most Prop. 12's conversion of that moment, because the conversion
bounds the integrand pointwise: (1 − u)₊ ≤ u^{1−α}(α − 1)^{α−1}/α^α for u = e^ε R > 0 (the
maximum of u^{α−1}(1 − u) is at u = (α − 1)/α). So at every ε and α the Jensen bound gives a δ
at least (A2)'s; it is not computed. The tests compare both with the exact add moment.

**Calibration.** Every bound is non-increasing in σ, so ``calibrate`` bisects on ln σ
(``_search.smallest_passing_sigma``), starting at the σ the add side alone needs (closed
forms). What a calibration reuses across σ (``Plan``, cached per scheme, matrix and options; σ
is not in the key): the admissible orders, the reference-law statistics (σ-free: σ enters (A2)
only through 1/σ²), p₀, max‖Cx‖², and every ln Z_α computed so far, which bounds ln Z_α at a new
σ: with θ = 1/σ², ln Z_α = ln E[e^{θJ}] (J = Σ_{j<l}⟨Cx_j, Cx_l⟩ ≥ 0 for C ≥ 0, over i.i.d.
patterns x_1 … x_α) is convex and non-decreasing in θ and 0 at θ = 0, so it lies below the
chord of the two computed θ around it and above the lines of the chords beside them. A probe
(``Plan.meets``) checks the add side, the unamplified Gaussian and these upper bounds, then
computes orders from the cheapest, stopping at the first that meets the target and skipping an
order whose lower bound (in θ, or in α: ln Z_α is convex in α with ln Z_1 = 0) already misses
it. Its decision is the full curve's at every σ (the tests check it); the chain's forward pass
itself (``minsep_chain.TupleChain``) depends on σ and is not shared.

Rounding (toward safety): ln Z_α as ``tilt_bound.partition`` rounds it up; the reference
laws' E_r‖Cx‖² and KL rounded up and ln p₀ down by 16·u·(n + 1)·(1 + |value|) (u = 2⁻⁵³),
an allowance for float64 sums of positive terms, not a proved error bound.

Notation (API ↔ paper): ``min_sep`` ↔ b, ``sampling_prob`` ↔ p, ``c_col`` ↔ the band of C,
``noise_multiplier`` ↔ σ (not normalised by ‖c_col‖), ``alpha_max`` ↔ the largest order α,
``SCALES`` ↔ λ.

Where the code runs: host NumPy/SciPy, float64.

References:
  Andy Dong and Arun Ganesh, "Privacy Amplification for BandMF via b-Min-Sep Subsampling",
  arXiv:2602.09338 (v2): §2.4 (the pair), §3–§4 (the schemes), §5 (b-banded C)
  (docs/references.md).
  Ilya Mironov, "Rényi Differential Privacy", CSF 2017, arXiv:1702.07476 (v3): Def. 3 (the
  Rényi divergence of order α).
  Clément Canonne, Gautam Kamath and Thomas Steinke, "The Discrete Gaussian for Differential
  Privacy", NeurIPS 2020, arXiv:2004.00010 (v4): Prop. 12.
  Jan Schuchardt and Nikita Kalinin, "Sampling-Free Privacy Accounting for Matrix Mechanisms under
  Random Allocation", arXiv:2601.21636: Theorem 3.1, Lemmas 3.2 and 3.4, Algorithm 1
  (docs/references.md).
  Borja Balle and Yu-Xiang Wang, "Improving the Gaussian Mechanism for Differential Privacy",
  ICML 2018, Theorem 8.
  Monroe D. Donsker and S. R. Srinivasa Varadhan, "Asymptotic evaluation of certain Markov
  process expectations for large time, I", Comm. Pure Appl. Math. 28 (1975) (the variational
  formula of the log moment).
"""

from __future__ import annotations

import bisect
import collections
import dataclasses
import math
import typing

import numpy as np

from jaxacct import _validate
from jaxacct.conventions import Adjacency, Direction
from jaxacct.deterministic import minsep_chain, pld, random_allocation, renyi, tilt_bound
from jaxacct.deterministic._search import smallest_passing_sigma
from jaxacct.deterministic.base import (DeterministicAccountant, Option, PrivacyCurve, check_delta,
                                        register)
from jaxacct.errors import InputError
from jaxacct.mechanism import MatrixMechanism
from jaxacct.schemes.participation import FixedBins

DEFAULT_ALPHA_MAX = tilt_bound.DEFAULT_ALPHA_MAX
DEFAULT_STATE_BUDGET = tilt_bound.DEFAULT_STATE_BUDGET
ALPHA_LIMIT = 256  # the largest alpha_max accepted (orders beyond are never useful here)
SCALES = np.arange(1, 65) / 64.0
"""λ of the reference laws r_λ of (A2): the scheme's chain with participation probability λp."""
_ROUNDING = 16.0 * 2.0**-53
_PLAN_CACHE = 8  # plans kept (mechanisms without σ); each keeps its ln Z_α per (σ, α)
_PARTITION_CACHE = 4096  # ln Z_α values kept per plan
_SKIP_MARGIN = 1e-6  # an order is skipped only if its lower bound misses ln δ by this much


def _round_up(value: float, operations: int) -> float:
  return value + _ROUNDING * (operations + 1) * (1.0 + abs(value))


# ---------------------------------------------------------------- the add side: statistics
class ReferenceMoments(typing.NamedTuple):
  """σ-free statistics of the reference laws r of (A2), one entry per law.

  Attributes:
    scales: λ of r_λ (1.0: r = p).
    second_moments: E_r‖Cx‖² (rounded up).
    mean_norms_squared: ‖C·E_r[x]‖².
    divergences: KL(r‖p) (rounded up; path KL of the chain, ≥ the pattern KL).
    log_never: ln p₀ = ln Pr_p[x = 0] (rounded down; −inf when p₀ = 0).
  """

  scales: np.ndarray
  second_moments: np.ndarray
  mean_norms_squared: np.ndarray
  divergences: np.ndarray
  log_never: float


def _bernoulli_kl(a: np.ndarray, b: float) -> np.ndarray:
  """kl(a‖b) of Bernoulli laws, a ∈ (0, 1], b ∈ (0, 1] (inf when b = 1 > a)."""
  a = np.asarray(a, np.float64)
  with np.errstate(divide='ignore', invalid='ignore'):
    first = a * np.log(a / b)
    if b < 1.0:
      second = np.where(a < 1.0, (1.0 - a) * (np.log1p(-a) - math.log1p(-b)), 0.0)
    else:
      second = np.where(a < 1.0, np.inf, 0.0)
  return first + second


def reference_moments(law: minsep_chain.ChainLaw, coefficients, iterations: int,
                      scales=SCALES) -> ReferenceMoments:
  """(A2)'s statistics of the reference laws r_λ (``law`` with p → λp) and ln p₀ of ``law``.

  One forward pass of the single-example chain (probabilities, float64), every λ at once.

  Args:
    law: one example's chain (``minsep_chain.law_for``); its bands must not exceed its
      separation (``law_for`` checks it), so E_r‖Cx‖² = Σ_t μ_t G[t, t].
    coefficients: c_0 … c_{m−1} of the banded Toeplitz C.
    iterations: n ≥ 1.
    scales: λ ∈ (0, 1]; with p = 1 only λ = 1 is kept (kl(λ‖1) = ∞ otherwise).

  Returns:
    ``ReferenceMoments``.
  """
  c = _validate.band_coefficients('coefficients', coefficients)
  n = _validate.integer_at_least('iterations', iterations, 1)
  scales = np.asarray(scales, np.float64).reshape(-1)
  if scales.size == 0 or np.any(~(scales > 0.0)) or np.any(scales > 1.0):
    raise InputError(f'scales must be a non-empty array of values in (0, 1], got {scales}')
  p = math.exp(law.log_p)
  step_kl = _bernoulli_kl(scales * p, p)
  keep = np.isfinite(step_kl)
  scales, step_kl = scales[keep], step_kl[keep]
  q = scales * p  # the reference laws' participation probabilities
  e, join = law.eligible, law.join
  # skip is a function S → S: sum the states sharing a successor (reduceat over sorted runs).
  order = np.argsort(law.skip, kind='stable')
  targets = law.skip[order]
  starts = np.flatnonzero(np.concatenate([[True], targets[1:] != targets[:-1]]))
  successors = targets[starts]
  initial = np.exp(law.log_initial)
  message = np.tile(initial, (scales.size, 1))
  never = initial.copy()  # Pr_p[state, no participation yet], renormalised each round
  log_never = 0.0  # ln of the normalisers so far (−inf once no mass is left: p₀ = 0)
  marginals = np.empty((scales.size, n))
  eligible = np.zeros(scales.size)
  for t in range(n):
    pe = message[:, e].copy()
    eligible += pe
    marginals[:, t] = pe * q
    source = message.copy()
    source[:, e] = pe * (1.0 - q)
    message = np.zeros_like(message)
    message[:, successors] = np.add.reduceat(source[:, order], starts, axis=1)
    message[:, join] += pe * q
    if log_never > -math.inf:
      source = never.copy()
      source[e] *= 1.0 - p
      never = np.zeros_like(never)
      never[successors] = np.add.reduceat(source[order], starts)
      total = never.sum()
      log_never = log_never + math.log(total) if total > 0.0 else -math.inf
      if total > 0.0:
        never /= total
  second = marginals @ minsep_chain.gram_diagonals(c, n)[0]
  mean = minsep_chain.apply_band(c, marginals)
  divergences = eligible * step_kl
  allowance = _ROUNDING * (n + 1)
  if log_never > -math.inf:
    log_never -= allowance * (1.0 + abs(log_never))
  return ReferenceMoments(scales, second + allowance * (1.0 + np.abs(second)),
                          np.einsum('jt,jt->j', mean, mean),
                          divergences + allowance * (1.0 + np.abs(divergences)), float(log_never))


def balls_in_bins_moments(scheme, matrix) -> ReferenceMoments:
  """(A2)'s statistics of r = p for fixed-bin balls-in-bins (any band count) and ln p₀.

  With G the T×T Gram of the bin means m_j (``random_allocation.gram_matrix``): E‖Cx‖² =
  tr(G)/T, ‖C·E[x]‖² = ΣG/T², KL = 0; p₀ = (bins with no round)/T = max(T − n, 0)/T.
  """
  gram = random_allocation.gram_matrix(scheme, matrix)
  slots = gram.shape[0]
  empty = max(slots - scheme.iterations, 0)
  log_never = math.log(empty / slots) if empty else -math.inf
  return ReferenceMoments(np.ones(1), np.array([_round_up(float(np.trace(gram)) / slots, slots)]),
                          np.array([float(gram.sum()) / slots**2]), np.zeros(1), log_never)


# ---------------------------------------------------------------- the add side: bounds
class AddBound(typing.NamedTuple):
  """One add-direction bound's answer: the value (δ or ε) and what gave it.

  Attributes:
    value: δ_add(ε) or ε_add(δ).
    bound: ``"reference_law"`` (A2), ``"never_participates"`` (A1),
      ``"unamplified_gaussian"`` (A3) or ``"trivial"`` (δ = 1, ε = ∞: none applies).
    scale: λ of the reference law (A2), else None.
  """

  value: float
  bound: str
  scale: float | None = None


def _reference_terms(moments: ReferenceMoments, sigma: float):
  """(sensitivity ‖Cμ_r‖, shift Δ_r) of every reference law with ‖Cμ_r‖ > 0."""
  variance = sigma * sigma
  use = moments.mean_norms_squared > 0.0
  sensitivity = np.sqrt(moments.mean_norms_squared[use])
  shift = (np.maximum(moments.second_moments[use] - moments.mean_norms_squared[use], 0.0)
           / (2.0 * variance) + moments.divergences[use])
  return moments.scales[use], sensitivity, shift


def add_delta(moments: ReferenceMoments, sensitivity_squared: float, sigma: float,
              epsilon: float) -> AddBound:
  """min of (A1), (A2) over the reference laws and (A3): a bound on H_{e^ε}(Q‖P)."""
  best = AddBound(1.0, 'trivial')
  if moments.log_never > -math.inf:
    best = AddBound(max(-math.expm1(epsilon + moments.log_never), 0.0), 'never_participates')
  for scale, sensitivity, shift in zip(*_reference_terms(moments, sigma)):
    value = pld.gaussian_delta(sigma, float(sensitivity), epsilon - float(shift))
    if value < best.value:
      best = AddBound(value, 'reference_law', float(scale))
  if sensitivity_squared > 0.0:
    value = pld.gaussian_delta(sigma, math.sqrt(sensitivity_squared), epsilon)
    if value < best.value:
      best = AddBound(value, 'unamplified_gaussian')
  return best


def add_epsilon(moments: ReferenceMoments, sensitivity_squared: float, sigma: float,
                delta: float) -> AddBound:
  """The smallest ε any one add bound proves at δ (each bound's own ε, minimised)."""
  best = AddBound(math.inf, 'trivial')
  if moments.log_never > -math.inf:
    # (1 − e^ε p₀)₊ ≤ δ ⟺ ε ≥ ln(1 − δ) − ln p₀; one ulp up so that δ(ε) ≤ δ survives rounding.
    value = math.nextafter(max(math.log1p(-delta) - moments.log_never, 0.0), math.inf)
    best = AddBound(value, 'never_participates')
  for scale, sensitivity, shift in zip(*_reference_terms(moments, sigma)):
    value = float(shift) + pld.gaussian_epsilon(sigma, float(sensitivity), delta)
    if value < best.value:
      best = AddBound(value, 'reference_law', float(scale))
  if sensitivity_squared > 0.0:
    value = pld.gaussian_epsilon(sigma, math.sqrt(sensitivity_squared), delta)
    if value < best.value:
      best = AddBound(value, 'unamplified_gaussian')
  return best


# ---------------------------------------------------------------- σ-free plan
@dataclasses.dataclass(eq=False)
class Plan:
  """Everything a mechanism's curves share across σ (built once per mechanism without σ).

  Attributes:
    scheme, matrix: the mechanism without σ.
    orders: the orders α ≤ alpha_max whose recursion fits the state budget, ascending.
    skipped: {α: states} of the orders above the budget.
    states: {α: states} of the admissible orders.
    moments: the add side's ``ReferenceMoments``.
    sensitivity_squared: max_x ‖Cx‖² (A3).
    state_budget: the budget the orders were checked against.
  """

  scheme: typing.Any
  matrix: typing.Any
  orders: tuple[int, ...]
  skipped: dict
  states: dict
  moments: ReferenceMoments
  sensitivity_squared: float
  state_budget: int
  _partitions: collections.OrderedDict = dataclasses.field(
      default_factory=collections.OrderedDict, repr=False)

  @classmethod
  def build(cls, mechanism, alpha_max: int, state_budget: int) -> 'Plan':
    scheme, matrix = mechanism.scheme, mechanism.matrix
    orders, skipped, states = [], {}, {}
    for alpha in range(2, alpha_max + 1):
      count, _ = tilt_bound.state_space(mechanism, alpha)
      if count > state_budget:
        skipped[alpha] = count
      else:
        orders.append(alpha)
        states[alpha] = count
    if isinstance(scheme.participation.model, FixedBins):
      moments = balls_in_bins_moments(scheme, matrix)
    else:
      coefficients = matrix.banded_coefficients()
      law = minsep_chain.law_for(scheme, coefficients.size)
      moments = reference_moments(law, coefficients, scheme.iterations)
    return cls(scheme, matrix, tuple(orders), skipped, states, moments,
               float(pld.max_sensitivity_squared(scheme, matrix)), state_budget)

  def log_partition(self, sigma: float, alpha: int) -> tilt_bound.LogPartition:
    """ln Z_α at σ (``tilt_bound.partition``), computed once per (σ, α)."""
    key = (float(sigma), alpha)
    value = self._partitions.get(key)
    if value is None:
      mechanism = MatrixMechanism(self.scheme, self.matrix, float(sigma))
      value = tilt_bound.partition(mechanism, alpha, state_budget=self.state_budget)
      self._partitions[key] = value
      while len(self._partitions) > _PARTITION_CACHE:
        self._partitions.popitem(last=False)
    else:
      self._partitions.move_to_end(key)
    return value

  def curve(self, sigma: float) -> 'MinSepRenyiCurve':
    log_z = np.array([self.log_partition(sigma, alpha).log_z for alpha in self.orders])
    return MinSepRenyiCurve(self, float(sigma), log_z)

  def add_delta(self, sigma: float, epsilon: float) -> AddBound:
    """The add direction's proven δ at (σ, ε): the least of (A1), (A2), (A3) (``add_delta``)."""
    return add_delta(self.moments, self.sensitivity_squared, sigma, epsilon)

  def add_meets(self, sigma: float, epsilon: float, delta: float) -> bool:
    return self.add_delta(sigma, epsilon).value <= delta

  def meets(self, sigma: float, epsilon: float, delta: float) -> bool:
    """δ(ε) ≤ δ at σ in both directions — the curve's answer, computing as few orders as
    possible (module docstring, "Calibration")."""
    if not self.add_meets(sigma, epsilon, delta):
      return False
    if (self.sensitivity_squared > 0.0 and pld.gaussian_delta(
        sigma, math.sqrt(self.sensitivity_squared), epsilon) <= delta):
      return True
    bounds = {alpha: self._bounds(sigma, alpha) for alpha in self.orders}
    if any(_passes(upper, alpha, epsilon, delta) for alpha, (_, upper) in bounds.items()):
      return True  # an upper bound on some ln Z_α already meets the target
    known: list[tuple[int, float, float]] = []  # (α, ln Z_α down, up) of the orders computed
    for alpha in self.orders:
      lower = bounds[alpha][0]
      if known:
        lower = max(lower, _convex_extension(known, alpha))
      if _log_delta(lower, alpha, epsilon) > math.log(delta) + _SKIP_MARGIN:
        continue  # this order misses the target whatever its exact value
      value = self.log_partition(sigma, alpha)
      if _passes(value.log_z, alpha, epsilon, delta):
        return True
      known.append((alpha, value.computed - (value.log_z - value.computed), value.log_z))
    return False

  def _bounds(self, sigma: float, alpha: int) -> tuple[float, float]:
    """(lower, upper) bounds on ln Z_α at σ from its values at the σ computed so far.

    ln Z_α = ln E[e^{θ·J}] with θ = 1/σ² and J = Σ_{j<l}⟨Cx_j, Cx_l⟩ ≥ 0 (C ≥ 0) over i.i.d.
    patterns: a log moment generating function, convex and non-decreasing in θ, 0 at θ = 0.
    Between two computed θ it is below their chord; outside a chord's interval it is above the
    chord's line (and never below 0). Computed values enter rounded up in upper bounds and
    rounded down (``computed`` minus the same allowance) where a lower bound increases with
    them; (upper, lower) = (inf, 0) with nothing computed beyond σ.
    """
    theta = 1.0 / (sigma * sigma)
    points = sorted((1.0 / (s * s), v.log_z, v.computed - (v.log_z - v.computed))
                    for (s, a), v in self._partitions.items() if a == alpha)
    xs = [0.0] + [p[0] for p in points]
    ups = [0.0] + [p[1] for p in points]
    downs = [0.0] + [p[2] for p in points]
    i = bisect.bisect_right(xs, theta)  # xs[i − 1] ≤ θ < xs[i]
    upper, lower = math.inf, max(downs[i - 1], 0.0)
    if i < len(xs):
      upper = ups[i - 1] + (theta - xs[i - 1]) * (ups[i] - ups[i - 1]) / (xs[i] - xs[i - 1])
      if i + 1 < len(xs):  # the right-hand chord's line, extended leftwards
        slope = (ups[i + 1] - downs[i]) / (xs[i + 1] - xs[i])
        lower = max(lower, downs[i] - (xs[i] - theta) * slope)
    if i >= 2:  # the left-hand chord's line, extended rightwards
      slope = (downs[i - 1] - ups[i - 2]) / (xs[i - 1] - xs[i - 2])
      lower = max(lower, downs[i - 1] + (theta - xs[i - 1]) * slope)
    return lower, upper


def _log_delta(log_z: float, alpha: int, epsilon: float) -> float:
  """ln of Prop. 12's δ at ε for ln Z_α (``renyi.log_delta_from_divergence``)."""
  return float(renyi.log_delta_from_divergence(log_z / (alpha - 1), alpha, epsilon))


def _passes(log_z: float, alpha: int, epsilon: float, delta: float) -> bool:
  """Prop. 12's δ at ε for ln Z_α is ≤ δ, evaluated as the curve evaluates it."""
  return log_z < math.inf and renyi.remove_delta(
      np.array([log_z / (alpha - 1)]), np.array([alpha]), epsilon) <= delta


def _convex_extension(known, alpha: int) -> float:
  """A lower bound on ln Z_α from ln Z at smaller orders at the same σ: f(α) = ln Z_α is convex
  in α with f(1) = 0, so f(α) ≥ f(a₂) + (α − a₂)(f(a₂) − f(a₁))/(a₂ − a₁) for a₁ < a₂ < α
  (a₁ = 1 when only one order is known); ``known`` holds (α, rounded down, rounded up), and
  the bound takes f(a₂) rounded down and f(a₁) rounded up (it decreases in f(a₁))."""
  points = [(1, 0.0, 0.0)] + known
  (a1, _, f1), (a2, f2, _) = points[-2], points[-1]
  return f2 + (alpha - a2) * (f2 - f1) / (a2 - a1)


_PLANS: collections.OrderedDict = collections.OrderedDict()


def plan_for(mechanism, alpha_max: int = DEFAULT_ALPHA_MAX,
             state_budget: int = DEFAULT_STATE_BUDGET) -> Plan:
  """The cached ``Plan`` of ``mechanism``'s scheme and matrix (σ is not part of the key)."""
  key = (mechanism.scheme, mechanism.matrix, alpha_max, state_budget)
  plan = _PLANS.get(key)
  if plan is None:
    plan = Plan.build(mechanism, alpha_max, state_budget)
    _PLANS[key] = plan
    while len(_PLANS) > _PLAN_CACHE:
      _PLANS.popitem(last=False)
  else:
    _PLANS.move_to_end(key)
  return plan


# ---------------------------------------------------------------- curve and accountant
@typing.final
class MinSepRenyiCurve(PrivacyCurve):
  """δ(ε) and ε(δ) of one mechanism at one σ (module docstring).

  Attributes:
    orders: the integer orders computed (remove).
    divergences: D_α(P‖Q) = ln Z_α/(α − 1) at those orders (ln Z_α rounded up).
    skipped: {α: states} of the orders above the state budget.
    noise_multiplier: σ.
  """

  def __init__(self, plan: Plan, noise_multiplier: float, log_z: np.ndarray):
    self._plan = plan
    self.noise_multiplier = noise_multiplier
    self.orders = np.array(plan.orders, np.int64)
    self.divergences = np.asarray(log_z, np.float64) / (self.orders - 1.0)
    self.skipped = dict(plan.skipped)

  def _gaussian(self):
    squared = self._plan.sensitivity_squared
    return math.sqrt(squared) if squared > 0.0 else None

  def _delta(self, epsilon: float, direction: str) -> float:
    sigma = self.noise_multiplier
    if direction == Direction.ADD:
      return self._plan.add_delta(sigma, epsilon).value
    value = renyi.remove_delta(self.divergences, self.orders, epsilon)
    sensitivity = self._gaussian()
    if sensitivity is not None:
      value = min(value, pld.gaussian_delta(sigma, sensitivity, epsilon))
    return value

  def _epsilon(self, delta: float, direction: str) -> float:
    if direction == Direction.REMOVE:
      return self._remove_epsilon(delta)[0]
    return add_epsilon(self._plan.moments, self._plan.sensitivity_squared, self.noise_multiplier,
                       delta).value

  def _remove_epsilon(self, delta: float) -> tuple[float, str, int | None]:
    values = renyi.epsilon_from_divergence(self.divergences, self.orders, delta)
    index = int(np.argmin(values))
    best = (max(float(values[index]), 0.0), 'renyi', int(self.orders[index]))
    sensitivity = self._gaussian()
    if sensitivity is not None:
      gaussian = pld.gaussian_epsilon(self.noise_multiplier, sensitivity, delta)
      if gaussian < best[0]:
        best = (gaussian, 'unamplified_gaussian', None)
    return best

  def explain(self, delta: float) -> dict:
    """Per direction, ε(δ) and the bound that gave it: remove — the order α and D_α (or the
    unamplified Gaussian), the orders computed and those skipped over the state budget; add —
    (A1) ``never_participates``, (A2) ``reference_law`` with its λ, Δ_r and ‖Cμ_r‖, or (A3)
    ``unamplified_gaussian``, and p₀."""
    delta = check_delta(delta)
    epsilon, bound, alpha = self._remove_epsilon(delta)
    remove = {'epsilon': epsilon, 'bound': bound, 'alpha': alpha,
              'rho': (float(self.divergences[list(self.orders).index(alpha)])
                      if alpha is not None else None),
              'orders': [int(a) for a in self.orders],
              'skipped_orders': {int(a): int(s) for a, s in self.skipped.items()},
              'state_budget': self._plan.state_budget}
    moments = self._plan.moments
    answer = add_epsilon(moments, self._plan.sensitivity_squared, self.noise_multiplier, delta)
    add = {'epsilon': answer.value, 'bound': answer.bound, 'p0': math.exp(moments.log_never)}
    if answer.scale is not None:
      scales, sensitivity, shift = _reference_terms(moments, self.noise_multiplier)
      index = int(np.flatnonzero(scales == answer.scale)[0])
      add.update(scale=answer.scale, shift=float(shift[index]),
                 sensitivity=float(sensitivity[index]))
    return {'remove': remove, 'add': add}


def _check_alpha_max(value) -> int:
  value = _validate.integer_at_least('alpha_max', value, 2)
  if value > ALPHA_LIMIT:
    raise InputError(f'alpha_max must be in [2, {ALPHA_LIMIT}], got {value}')
  return value


def _check_state_budget(value) -> int:
  return _validate.integer_at_least('state_budget', value, 1)


@register
@typing.final
class MinSepRenyiAccountant(DeterministicAccountant):
  """Exact remove-direction Rényi orders and proven add-direction bounds (module docstring).

  Mechanisms: b-min-sep (cold or warm start; bands ≤ b), Poisson with C = c·I, cyclic Poisson
  (bands ≤ the cycle length, either partition) and fixed-bin balls-in-bins (any bands); not
  truncated, multi-attribution or a dense ``LowerTriangular`` C (``tilt_bound.refusal``).

  Options:
    alpha_max: the largest integer order of the remove direction (default 8; ≤ 256).
    state_budget: the largest recursion an order may need (``tilt_bound``: multiset states of
      the α-tuple chain, transitions per slot for balls-in-bins; default 2,000,000); orders
      above it are skipped and ``explain`` lists them.
  Adjacency: ``zero_out`` and ``add_remove`` (the same pair without truncation).

  Monte Carlo stays the default for b-min-sep (``supersedes_monte_carlo`` is False): this is a
  proven, looser candidate of ``"auto"`` for deterministic queries and a ``fallback=``.
  """

  name = 'minsep_renyi'

  tie_order = 60
  references = (
      'Dong & Ganesh, "Privacy Amplification for BandMF via b-Min-Sep Subsampling", arXiv '
      '2602.09338v2, Sections 2.4, 4, 5 (the pair and the schemes)',
      'Mironov, "Renyi Differential Privacy", CSF 2017, arXiv 1702.07476v3, Def. 3',
      'Canonne, Kamath & Steinke, "The Discrete Gaussian for Differential Privacy", NeurIPS '
      '2020, arXiv 2004.00010v4, Prop. 12 (Renyi to (eps, delta))',
      'Schuchardt & Kalinin, "Sampling-Free Privacy Accounting for Matrix Mechanisms under '
      'Random Allocation", arXiv 2601.21636, Theorem 3.1, Lemmas 3.2 and 3.4, Algorithm 1',
      'Balle & Wang, "Improving the Gaussian Mechanism for Differential Privacy", ICML 2018, '
      'Theorem 8 (analytic Gaussian)',
      'Donsker & Varadhan, "Asymptotic evaluation of certain Markov process expectations for '
      'large time, I", Comm. Pure Appl. Math. 28 (1975) (the variational inequality of the add '
      'bound)',
  )
  adjacencies = (Adjacency.ZERO_OUT.value, Adjacency.ADD_REMOVE.value)
  options = {'alpha_max': Option(DEFAULT_ALPHA_MAX, _check_alpha_max),
             'state_budget': Option(DEFAULT_STATE_BUDGET, _check_state_budget)}
  sigma_floor = 0.05

  def _refusal(self, mechanism, options):
    if options['adjacency'] not in self.adjacencies:
      return (f"minsep_renyi covers zero_out and add_remove adjacency (the same pair without "
              f"truncation), not {options['adjacency']}")
    reason = tilt_bound.refusal(mechanism)
    if reason is not None:
      return reason
    count, _ = tilt_bound.state_space(mechanism, 2)
    if count > options['state_budget']:
      return (f'even alpha = 2 needs {count} recursion states, above state_budget = '
              f"{options['state_budget']}; raise state_budget")
    return None

  def _plan(self, mechanism, options) -> Plan:
    return plan_for(mechanism, options['alpha_max'], options['state_budget'])

  def _curve(self, mechanism, options):
    return self._plan(mechanism, options).curve(mechanism.noise_multiplier)

  def _sigma(self, probe, epsilon, delta, tolerance, options, progress=None):
    plan = self._plan(probe, options)
    # The add side is closed-form given the plan: its own σ is the search's start (a probe
    # below it fails without touching a chain).
    start = smallest_passing_sigma(lambda sigma: plan.add_meets(sigma, epsilon, delta),
                                   tolerance=tolerance, floor=self.sigma_floor)
    return smallest_passing_sigma(lambda sigma: plan.meets(sigma, epsilon, delta),
                                  tolerance=tolerance, floor=self.sigma_floor, start=start,
                                  progress=progress)

  def _supersedes_monte_carlo(self, mechanism):
    del mechanism  # verified Monte Carlo stays the default for b-min-sep (a tighter pair)
    return False
