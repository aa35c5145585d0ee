"""Deterministic accountant for truncated Poisson sampling (Ganesh (2025)).

Poisson sampling with probability p over a public dataset of n examples; a
batch larger than B is cut to a uniformly random subset of size B; the sum gets
N(0, σ²) noise (σ is the noise multiplier). Ganesh (2025) dominates one
round by a public regime r ∈ {1, 2} (r = 2: the batch would be truncated if the
sensitive example were in it) and 1-D Gaussian mixtures given r:

===========  =========================================  ===============================================
adjacency    r = 1 (weight w₁)                          r = 2 (weight w₂, rate q)
===========  =========================================  ===============================================
add_remove   (1−p)N(0)+pN(1)  vs  N(0)                  (1−q)N(0)+qN(2)  vs  N(0)
zero_out     (1−p)N(0)+pN(1)  vs  N(0)                  (1−q)N(0)+qN(2)  vs  (1−q)N(0)+qN(−1)
replace_one  (1−p)N(0)+pN(1)  vs  (1−p)N(0)+pN(−1)      (1−q)N(0)+qN(2)  vs  (1−q)N(0)+qN(−2)
===========  =========================================  ===============================================

Directions: "remove" = H(P‖Q) (y ~ P, the mixture holding the example) and
"add" = H(Q‖P); dp_accounting's ``pmf_remove`` / ``pmf_add`` hold exactly these
(its decreasing-loss orientation is a reflection y → −y, which does not change
a hockey-stick divergence; we build both PMFs from δ(ε) curves, so no
orientation enters). Every loss ln P/Q above is strictly increasing in y, so
each divergence is a single-threshold tail difference.

Composition: the per-round PLD is the w₁/w₂ mixture of the two conditional
PLDs (public choice), each discretised by dp_accounting's pessimistic
connect-the-dots builder from our exact δ(ε) on the grid; dp_accounting then
self-composes it (FFT). This is at least as tight as dp_accounting's
``TruncatedSubsampledGaussianDpEvent``, which uses the replace-one r = 2 pair for
every adjacency (a property of dp_accounting's code, not of the paper).

References:
  Arun Ganesh, "Tighter Privacy Analysis for Truncated Poisson Sampling", arXiv:2508.15089: Def.
  2.1, Thms 3.1, 3.3, 3.4; §3.1 (the remarks after Thm 3.1: the public dataset size, cyclic-Poisson
  BandMF); §3.4 (PLD mixture, closed form for q) (docs/references.md).
  Doroshenko et al., "Connect the Dots", arXiv 2207.04380, Alg. 1 (pessimistic
  discretisation).
"""

from __future__ import annotations

import dataclasses
import math
from typing import Iterable

import numpy as np
from scipy import optimize, special, stats

from jaxacct import _validate, schemes
from jaxacct.conventions import ADJACENCIES as ADJACENCIES
from jaxacct.deterministic import pld_pmfs
from jaxacct.deterministic._search import smallest_passing_sigma
from jaxacct.schemes.participation import Cyclic
from jaxacct.strategies.banded_toeplitz import BandedToeplitz
from jaxacct.errors import InputError, InputTypeError

DIRECTIONS = ('remove', 'add', 'max')  # one_step_delta's direction argument ('max': both)
# Grid ends: beyond mean ± Z·σ each component has mass 0.5·e⁻⁵⁰ (dp_accounting's default truncation).
_Z_GRID = float(-special.ndtri(0.5 * math.exp(-50.0)))
# Thresholds are searched within mean ± 60σ; outside, every tail is < 1e-780 (exactly 0 in float64).
_Z_SEARCH = 60.0
SIGMA_FLOOR = 0.05  # lowest σ a calibration tries: the PLD grid grows like 1/σ²


def _pld_lib():
  from dp_accounting.pld import pld_pmf, privacy_loss_distribution  # local: heavy import
  return pld_pmf, privacy_loss_distribution


# ---------------------------------------------------------------- argument checks
def _check_sigma(value) -> float:
  value = _validate.real_number('noise_multiplier', value)
  if value == 0.0:
    raise InputError('noise_multiplier σ = 0 is not differentially private (no noise); pass σ > 0')
  return _validate.positive_finite('noise_multiplier', value)


def _check_population(dataset_size, sampling_prob, truncated_batch_size) -> tuple[int, float, int]:
  return (_validate.integer_at_least('dataset_size', dataset_size, 1),
          _validate.probability('sampling_prob', sampling_prob),
          _validate.integer_at_least('truncated_batch_size', truncated_batch_size, 1))


def _check_run(dataset_size, sampling_prob, truncated_batch_size, noise_multiplier, iterations,
               adjacency, discretization):
  n, p, b = _check_population(dataset_size, sampling_prob, truncated_batch_size)
  return (n, p, b, _check_sigma(noise_multiplier),
          _validate.integer_at_least('iterations', iterations, 1),
          _validate.one_of('adjacency', adjacency, ADJACENCIES),
          _validate.positive_finite('value_discretization_interval', discretization))


# ---------------------------------------------------------------- regime probabilities
@dataclasses.dataclass(frozen=True)
class TruncationRegimes:
  """Public regime law of one round, seen from the sensitive example (Ganesh (2025) Thm 3.1).

  Attributes:
    log_w1, log_w2: natural logs of w₁ and w₂ (finite even where w₂ underflows).
    w1: w₁ = Pr[Bin(n−1, p) ≤ B−1] (no truncation).
    w2: w₂ = Pr[Bin(n−1, p) ≥ B] (truncation if the example were sampled).
    q: Pr[sampled and kept | r = 2] = (B/n)·Pr[Bin(n, p) ≥ B+1] / w₂; 0.0 when
      w₂ = 0 exactly (B ≥ n: the branch does not exist).
  """

  log_w1: float
  log_w2: float
  w1: float
  w2: float
  q: float


def _log_binom_pmf(s: np.ndarray, trials: int, p: float) -> np.ndarray:
  # ln C(N, s) = −ln(N+1) − ln B(N−s+1, s+1): betaln keeps relative accuracy for large N.
  return (-math.log1p(trials) - special.betaln(trials - s + 1, s + 1)
          + s * math.log(p) + (trials - s) * math.log1p(-p))


def _log_tail_by_summation(start: int, trials: int, p: float, step: int) -> float:
  """ln Σ pmf(s) from ``start`` outwards (step ±1); used only where scipy's tail underflows.

  That happens only far from the mean, where the terms fall geometrically, so
  the sum stops once a term is e⁻⁵⁰ below the running total.
  """
  total, s, chunk, end_of_support = -math.inf, start, 256, trials if step > 0 else 0
  while True:
    stop = min(end_of_support, s + chunk - 1) if step > 0 else max(end_of_support, s - chunk + 1)
    terms = _log_binom_pmf(np.arange(s, stop + step, step, dtype=np.float64), trials, p)
    total = float(np.logaddexp(total, special.logsumexp(terms)))
    if stop == end_of_support or terms[-1] < total - 50.0:
      return total
    s, chunk = stop + step, 2 * chunk


def _log_upper_tail(k: int, trials: int, p: float) -> float:
  """ln Pr[Bin(trials, p) ≥ k] via the log survival function (never 1 − CDF, which underflows)."""
  if k > trials:
    return -math.inf
  if k <= 0:
    return 0.0
  value = float(stats.binom.logsf(k - 1, trials, p))
  return value if math.isfinite(value) else _log_tail_by_summation(k, trials, p, +1)


def _log_lower_tail(k: int, trials: int, p: float) -> float:
  """ln Pr[Bin(trials, p) ≤ k]."""
  if k < 0:
    return -math.inf
  if k >= trials:
    return 0.0
  value = float(stats.binom.logcdf(k, trials, p))
  return value if math.isfinite(value) else _log_tail_by_summation(k, trials, p, -1)


def truncation_regimes(dataset_size: int, sampling_prob: float,
                       truncated_batch_size: int) -> TruncationRegimes:
  """Regime weights w₁, w₂ and the conditional inclusion rate q of Ganesh (2025), computed stably.

  Uses the closed form q = (B/n)·Pr[Bin(n,p) ≥ B+1] / Pr[Bin(n−1,p) ≥ B] with
  log survival functions; where both tails underflow float64 (e.g. n = 10⁴,
  p = 0.1, B = 2500: w₂ ≈ 1.2e-403) the log tails are log-sum-exps of log-pmf
  terms, so q stays exact. Degenerate cases: B ≥ n ⇒ w₂ = 0 (untruncated
  Poisson); p = 1, B < n ⇒ w₂ = 1, q = B/n.

  Args:
    dataset_size: n ≥ 1 (public).
    sampling_prob: p ∈ (0, 1].
    truncated_batch_size: B ≥ 1.

  Returns:
    A ``TruncationRegimes``.

  Raises:
    ValueError: bad arguments; ArithmeticError if q violates 0 < q ≤ pB/(B+1).

  References:
    Ganesh, arXiv 2508.15089, Thm 3.1 (regimes, q) and §3.4 (closed form for q).
  """
  n, p, b = _check_population(dataset_size, sampling_prob, truncated_batch_size)
  if b >= n:  # Bin(n−1, p) ≤ n−1 < B: a batch with the example is never cut
    return TruncationRegimes(0.0, -math.inf, 1.0, 0.0, 0.0)
  if p == 1.0:  # always truncated: fixed batches of B out of n
    return TruncationRegimes(-math.inf, 0.0, 0.0, 1.0, b / n)
  log_w2 = _log_upper_tail(b, n - 1, p)
  log_w1 = _log_lower_tail(b - 1, n - 1, p)
  q = math.exp(math.log(b / n) + _log_upper_tail(b + 1, n, p) - log_w2)
  bound = p * b / (b + 1)  # B/(s+1) ≤ B/(B+1) for every s ≥ B
  if not 0.0 < q <= bound * (1.0 + 1e-9):
    raise ArithmeticError(f'q = {q} outside (0, pB/(B+1) = {bound}] for n={n}, p={p}, B={b}')
  return TruncationRegimes(log_w1, log_w2, math.exp(log_w1), math.exp(log_w2), min(q, bound))


# ---------------------------------------------------------------- dominating pairs
def _logsumexp_rows(terms: np.ndarray) -> np.ndarray:
  # Row-by-row logaddexp: mixtures here have 1 or 2 components, and this is far
  # faster than a reduction along axis 0.
  total = terms[0]
  for row in terms[1:]:
    total = np.logaddexp(total, row)
  return total


@dataclasses.dataclass(frozen=True, eq=False)  # array fields: no elementwise ==
class GaussianMixturePair:
  """A pair (P, Q) of 1-D Gaussian mixtures with common std σ and increasing loss ln P/Q.

  P = Σ_k exp(p_log_weights[k])·N(p_means[k], σ²), Q likewise.

  Attributes:
    p_means, p_log_weights, q_means, q_log_weights: 1-D float64 arrays (no zero weights).
    sigma: the common standard deviation (the noise multiplier).
  """

  p_means: np.ndarray
  p_log_weights: np.ndarray
  q_means: np.ndarray
  q_log_weights: np.ndarray
  sigma: float

  def _log_ratio_to_standard(self, means, log_weights, y):
    # ln Σ_k w_k φ_{μ_k}(y)/φ₀(y), exponents (2μy − μ²)/(2σ²) kept in log space.
    y = np.asarray(y, dtype=np.float64)
    exponents = (log_weights[:, None] + (2.0 * means[:, None] * y.reshape(1, -1) - means[:, None]**2)
                 / (2.0 * self.sigma**2))
    return _logsumexp_rows(exponents).reshape(y.shape)

  def privacy_loss(self, y):
    """ln P(y)/Q(y) (difference of two log-mixtures, never a ratio of mixtures)."""
    return (self._log_ratio_to_standard(self.p_means, self.p_log_weights, y)
            - self._log_ratio_to_standard(self.q_means, self.q_log_weights, y))

  def _log_survival(self, means, log_weights, y):
    # ln Pr[Y > y] = ln Σ_k w_k Φ((μ_k − y)/σ): survival functions by log_ndtr, no 1 − CDF.
    y = np.asarray(y, dtype=np.float64)
    terms = log_weights[:, None] + special.log_ndtr((means[:, None] - y.reshape(1, -1)) / self.sigma)
    return _logsumexp_rows(terms).reshape(y.shape)

  def _delta_at(self, y, epsilon):
    log_p = self._log_survival(self.p_means, self.p_log_weights, y)
    log_q = self._log_survival(self.q_means, self.q_log_weights, y)
    with np.errstate(invalid='ignore'):  # −inf − (−inf) where both tails are empty
      gap = np.where(np.isneginf(log_p), 0.0, np.minimum(0.0, epsilon + log_q - log_p))
    return np.where(np.isneginf(log_p), 0.0, np.exp(log_p) * -np.expm1(gap))

  def loss_limits(self) -> tuple[float, float]:
    """(inf_y L, sup_y L): set by the components with the extreme means (±inf if they differ)."""
    def limit(pick):
      mp, mq = pick(self.p_means), pick(self.q_means)
      if mp != mq:
        return -math.inf if pick is np.min else math.inf
      return float(special.logsumexp(self.p_log_weights[self.p_means == mp])
                   - special.logsumexp(self.q_log_weights[self.q_means == mq]))
    return limit(np.min), limit(np.max)

  def _search_range(self) -> tuple[float, float]:
    means = np.concatenate([self.p_means, self.q_means])
    return float(means.min()) - _Z_SEARCH * self.sigma, float(means.max()) + _Z_SEARCH * self.sigma

  def hockey_stick(self, epsilon: float) -> float:
    """H_{e^ε}(P‖Q) = P(Y > y*) − e^ε Q(Y > y*) with L(y*) = ε, y* by brentq.

    The bracket is grown from the centre of the means by doubling steps; a
    root beyond ±60σ of every mean is replaced by that point (tails < 1e-780).
    """
    epsilon = float(epsilon)
    low_limit, high_limit = self.loss_limits()
    if epsilon <= low_limit:  # every outcome has loss > ε
      return float(-math.expm1(epsilon))
    if epsilon >= high_limit:
      return 0.0
    f = lambda y: float(self.privacy_loss(y)) - epsilon  # noqa: E731
    y_min, y_max = self._search_range()
    centre = 0.5 * (y_min + y_max)
    a = b = centre
    step = self.sigma
    while f(a) > 0.0 and a > y_min:
      a, step = max(y_min, a - step), 2 * step
    step = self.sigma
    while f(b) < 0.0 and b < y_max:
      b, step = min(y_max, b + step), 2 * step
    if f(a) > 0.0:
      root = a
    elif f(b) < 0.0:
      root = b
    else:
      root = optimize.brentq(f, a, b, xtol=1e-14 * self.sigma, rtol=4 * np.finfo(float).eps,
                             maxiter=500)
    return float(max(0.0, self._delta_at(root, epsilon)))

  def hockey_stick_grid(self, epsilons) -> np.ndarray:
    """Vectorised ``hockey_stick`` on many ε: bracket on a y-grid, then 32 bisection steps.

    A threshold error Δy changes δ only at second order (y* maximises
    P(Y>y) − e^ε Q(Y>y)), and 32 halvings of a ~0.03σ bracket leave Δy < 1e-11σ.
    """
    epsilons = np.asarray(epsilons, dtype=np.float64)
    y_min, y_max = self._search_range()
    ys = np.linspace(y_min, y_max, 4097)
    losses = np.maximum.accumulate(self.privacy_loss(ys))  # monotone despite round-off
    index = np.clip(np.searchsorted(losses, epsilons), 1, ys.size - 1)
    low, high = ys[index - 1], ys[index]
    for _ in range(32):
      mid = 0.5 * (low + high)
      above = self.privacy_loss(mid) > epsilons
      low, high = np.where(above, low, mid), np.where(above, mid, high)
    return np.clip(self._delta_at(0.5 * (low + high), epsilons), 0.0, 1.0)

  def reversed(self) -> GaussianMixturePair:
    """The pair for the other direction, (Q, P) reflected by y → −y so its loss increases too."""
    return GaussianMixturePair(-self.q_means, self.q_log_weights, -self.p_means,
                               self.p_log_weights, self.sigma)


def _mixture(*components: tuple[float, float]) -> tuple[np.ndarray, np.ndarray]:
  kept = [(mean, weight) for mean, weight in components if weight > 0.0]
  return (np.array([m for m, _ in kept], dtype=np.float64),
          np.log(np.array([w for _, w in kept], dtype=np.float64)))


def dominating_pair(adjacency: str, regime: int, rate: float,
                    noise_multiplier: float) -> GaussianMixturePair:
  """The conditional dominating pair (P_r, Q_r) of Ganesh (2025) for one regime.

  Args:
    adjacency: ``"add_remove"`` (Thm 3.1), ``"zero_out"`` (Thm 3.3) or
      ``"replace_one"`` (Thm 3.4).
    regime: 1 (no truncation; ``rate`` = p) or 2 (truncation; ``rate`` = q).
    rate: the Bernoulli rate in (0, 1].
    noise_multiplier: σ > 0.

  Returns:
    A ``GaussianMixturePair`` (P = mixture holding the example).

  References:
    Ganesh (2025), Thms 3.1, 3.3, 3.4.
  """
  adjacency = _validate.one_of('adjacency', adjacency, ADJACENCIES)
  if regime not in (1, 2):
    raise InputError(f'regime must be 1 or 2, got {regime!r}')
  rate = _validate.probability('rate', rate)
  sigma = _check_sigma(noise_multiplier)
  shift = float(regime)  # the example moves the sum by 1 (r = 1) or by x₁ − π(B), norm ≤ 2 (r = 2)
  p_mix = _mixture((0.0, 1.0 - rate), (shift, rate))
  if adjacency == 'add_remove':
    q_mix = _mixture((0.0, 1.0))
  elif adjacency == 'zero_out':
    q_mix = _mixture((0.0, 1.0)) if regime == 1 else _mixture((0.0, 1.0 - rate), (-1.0, rate))
  else:
    q_mix = _mixture((0.0, 1.0 - rate), (-shift, rate))
  return GaussianMixturePair(*p_mix, *q_mix, sigma)


def one_step_delta(dataset_size: int, sampling_prob: float, truncated_batch_size: int,
                   noise_multiplier: float, epsilon: float, adjacency: str, *,
                   direction: str = 'max') -> float:
  """Exact one-round δ(ε) = w₁·H_{e^ε}(P₁‖Q₁) + w₂·H_{e^ε}(P₂‖Q₂) of truncated Poisson.

  Args:
    dataset_size, sampling_prob, truncated_batch_size, noise_multiplier: n, p, B, σ.
    epsilon: ε (any finite real).
    adjacency: one of ``ADJACENCIES``.
    direction: ``"remove"`` = H(P‖Q), ``"add"`` = H(Q‖P), ``"max"`` (default) = both.

  Returns:
    δ for one round (linear mixing is valid for one round only; compose with
    ``truncated_poisson_pld``).

  References:
    Ganesh, arXiv 2508.15089, Thms 3.1/3.3/3.4 and §3.4 (public regime mixture).
  """
  n, p, b = _check_population(dataset_size, sampling_prob, truncated_batch_size)
  sigma = _check_sigma(noise_multiplier)
  epsilon = _validate.finite_real('epsilon', epsilon)
  adjacency = _validate.one_of('adjacency', adjacency, ADJACENCIES)
  direction = _validate.one_of('direction', direction, DIRECTIONS)
  regimes = truncation_regimes(n, p, b)
  flips = {'remove': (False,), 'add': (True,), 'max': (False, True)}[direction]
  pairs = [(weight, dominating_pair(adjacency, regime, rate, sigma))
           for regime, weight, rate in ((1, regimes.w1, p), (2, regimes.w2, regimes.q)) if weight > 0]
  return max(sum(weight * (pair.reversed() if flip else pair).hockey_stick(epsilon)
                 for weight, pair in pairs) for flip in flips)


# ---------------------------------------------------------------- PLD composition
def _connect_dots_pmf(pair: GaussianMixturePair, discretization: float):
  """Pessimistic connect-the-dots PMF of one direction, from exact δ on the ε grid."""
  pld_pmf, _ = _pld_lib()
  ends = np.array([min(pair.p_means.min(), pair.q_means.min()) - _Z_GRID * pair.sigma,
                   max(pair.p_means.max(), pair.q_means.max()) + _Z_GRID * pair.sigma])
  loss_low, loss_high = pair.privacy_loss(ends)
  low, high = math.floor(loss_low / discretization), math.ceil(loss_high / discretization)
  deltas = pair.hockey_stick_grid(np.arange(low, high + 1) * discretization)
  return pld_pmf.create_pmf_pessimistic_connect_dots_fixed_gap(discretization, low, high, deltas)


def _regime_pld(adjacency: str, regime: int, rate: float, sigma: float, discretization: float):
  _, pld_lib = _pld_lib()
  pair = dominating_pair(adjacency, regime, rate, sigma)
  remove = _connect_dots_pmf(pair, discretization)
  if adjacency == 'replace_one':  # symmetric under y → −y: one PMF serves both directions
    return pld_lib.PrivacyLossDistribution(remove)
  return pld_lib.PrivacyLossDistribution(remove, _connect_dots_pmf(pair.reversed(), discretization))


def _round_pld(n, p, b, sigma, adjacency, discretization, cache=None):
  """The one-round mixture PLD w₂·PLD₂ + w₁·PLD₁ (``cache`` may hold PLD₁, which ignores B)."""
  regimes = truncation_regimes(n, p, b)
  if regimes.w1 > 0.0:
    first = cache.get('r1') if cache is not None else None
    if first is None:
      first = _regime_pld(adjacency, 1, p, sigma, discretization)
      if cache is not None:
        cache['r1'] = first
  if regimes.w2 == 0.0:  # B ≥ n, or w₂ < 1e-308: the branch moves δ by less than that
    return first
  second = _regime_pld(adjacency, 2, regimes.q, sigma, discretization)
  return second if regimes.w1 == 0.0 else second.compute_mixture(first, regimes.w2)


def _composed(single, iterations: int):
  return single if iterations == 1 else single.self_compose(iterations)


def _meets(pld, epsilon: float, delta: float) -> bool:
  # δ(ε_target) ≤ δ_target ⇔ ε(δ_target) ≤ ε_target (δ(ε) is non-increasing); δ is vectorised
  # in dp_accounting, ε(δ) is a Python loop.
  return float(pld.get_delta_for_epsilon(epsilon)) <= delta


def truncated_poisson_pld(dataset_size: int, sampling_prob: float, truncated_batch_size: int,
                          noise_multiplier: float, iterations: int, adjacency: str, *,
                          value_discretization_interval: float = 1e-4):
  """PLD of T rounds of truncated-Poisson-sampled Gaussian sums (DP-SGD with truncation).

  One round is the w₁/w₂ mixture of the conditional PLDs of the dominating
  pairs (public regime), each built with dp_accounting's pessimistic
  connect-the-dots PMF from the exact δ(ε) on the grid; the mixture is then
  self-composed T times by dp_accounting (the regimes are i.i.d. per round, so
  this is the composition of the mixture, Ganesh (2025) §3.4). B ≥ n gives the untruncated
  Poisson-subsampled Gaussian PLD (replace-one version for ``replace_one``).
  For ``add_remove`` the guarantee is for datasets of the fixed public size n
  (Ganesh (2025) Def. 2.1 and the remark after Thm 3.1).

  Args:
    dataset_size: n ≥ 1 (public).
    sampling_prob: p ∈ (0, 1].
    truncated_batch_size: B ≥ 1.
    noise_multiplier: σ > 0 (noise std for unit sensitivity).
    iterations: T ≥ 1.
    adjacency: ``"add_remove"``, ``"zero_out"`` or ``"replace_one"``.
    value_discretization_interval: PLD grid step (pessimistic).

  Returns:
    A ``dp_accounting.pld.privacy_loss_distribution.PrivacyLossDistribution``
    with ``pmf_remove`` = H(P‖Q) and ``pmf_add`` = H(Q‖P) (one symmetric PMF
    for ``replace_one``); ``get_epsilon_for_delta`` / ``get_delta_for_epsilon``
    report the maximum over both directions.

  References:
    Ganesh, arXiv 2508.15089, Thms 3.1, 3.3, 3.4 and §3.4; Doroshenko et al.,
    arXiv 2207.04380, Alg. 1.
  """
  n, p, b, sigma, t, adjacency, d = _check_run(dataset_size, sampling_prob, truncated_batch_size,
                                               noise_multiplier, iterations, adjacency,
                                               value_discretization_interval)
  return _composed(_round_pld(n, p, b, sigma, adjacency, d), t)


def truncated_poisson_epsilon(dataset_size: int, sampling_prob: float, truncated_batch_size: int,
                              noise_multiplier: float, iterations: int, adjacency: str,
                              delta: float, *, value_discretization_interval: float = 1e-4) -> float:
  """ε(δ) of ``truncated_poisson_pld`` (max over directions; pessimistic).

  References:
    Ganesh, arXiv 2508.15089, Thms 3.1, 3.3, 3.4.
  """
  delta = _validate.probability('delta', delta)
  return float(truncated_poisson_pld(
      dataset_size, sampling_prob, truncated_batch_size, noise_multiplier, iterations, adjacency,
      value_discretization_interval=value_discretization_interval).get_epsilon_for_delta(delta))


def truncated_poisson_delta(dataset_size: int, sampling_prob: float, truncated_batch_size: int,
                            noise_multiplier: float, iterations: int, adjacency: str,
                            epsilon: float, *, value_discretization_interval: float = 1e-4) -> float:
  """δ(ε) of ``truncated_poisson_pld`` (max over directions; pessimistic).

  References:
    Ganesh, arXiv 2508.15089, Thms 3.1, 3.3, 3.4.
  """
  epsilon = _validate.finite_real('epsilon', epsilon)
  return float(truncated_poisson_pld(
      dataset_size, sampling_prob, truncated_batch_size, noise_multiplier, iterations, adjacency,
      value_discretization_interval=value_discretization_interval).get_delta_for_epsilon(epsilon))


# ---------------------------------------------------------------- calibration
def _check_target(epsilon, delta) -> tuple[float, float]:
  epsilon = _validate.finite_real('epsilon', epsilon)
  if epsilon < 0:
    raise InputError(f'epsilon must be >= 0, got {epsilon}')
  return epsilon, _validate.probability('delta', delta)


def calibrate_truncated_poisson_noise_multiplier(
    dataset_size: int, sampling_prob: float, truncated_batch_size: int, iterations: int,
    adjacency: str, *, epsilon: float, delta: float, value_discretization_interval: float = 1e-4,
    tolerance: float = 1e-4) -> float:
  """Smallest σ (rounded up, to ``tolerance`` relative) with ε(δ) ≤ ``epsilon``.

  δ(ε) decreases in σ (each conditional pair at a larger σ is a post-processing,
  by added noise, of the pair at a smaller σ), so a bisection on ln σ suffices.
  The search does not go below σ = 0.05 (the PLD grid grows like 1/σ²); that
  value is returned if it already meets the target (still a valid, conservative
  answer).

  Returns:
    σ_high of the final bracket: the mechanism meets (ε, δ) at it.

  References:
    Ganesh, arXiv 2508.15089, Thms 3.1, 3.3, 3.4.
  """
  n, p, b, _, t, adjacency, d = _check_run(dataset_size, sampling_prob, truncated_batch_size, 1.0,
                                           iterations, adjacency, value_discretization_interval)
  epsilon, delta = _check_target(epsilon, delta)
  tolerance = _validate.positive_finite('tolerance', tolerance)

  def meets(sigma: float) -> bool:
    return _meets(_composed(_round_pld(n, p, b, sigma, adjacency, d), t), epsilon, delta)

  return smallest_passing_sigma(meets, tolerance=tolerance, floor=SIGMA_FLOOR)


def calibrate_truncated_poisson_iterations(
    dataset_size: int, sampling_prob: float, truncated_batch_size: int, noise_multiplier: float,
    adjacency: str, *, epsilon: float, delta: float, value_discretization_interval: float = 1e-4,
    max_iterations: int = 100_000) -> int:
  """Largest T ≤ ``max_iterations`` with ε(δ) ≤ ``epsilon`` (0 if even T = 1 fails).

  δ(ε) of a T-fold composition increases with T (the extra rounds can be
  simulated by the adversary), so an exponential search then an integer
  bisection finds it; the one-round PLD is built once.

  References:
    Ganesh, arXiv 2508.15089, Thms 3.1, 3.3, 3.4 and §3.4.
  """
  n, p, b, sigma, _, adjacency, d = _check_run(dataset_size, sampling_prob, truncated_batch_size,
                                               noise_multiplier, 1, adjacency,
                                               value_discretization_interval)
  epsilon, delta = _check_target(epsilon, delta)
  cap = _validate.integer_at_least('max_iterations', max_iterations, 1)
  single = _round_pld(n, p, b, sigma, adjacency, d)

  def meets(t: int) -> bool:
    return _meets(_composed(single, t), epsilon, delta)

  if not meets(1):
    return 0
  good, bad = 1, None
  while bad is None:
    trial = min(2 * good, cap)
    if trial == good:
      return good
    good, bad = (trial, None) if meets(trial) else (good, trial)
  while bad - good > 1:
    mid = (good + bad) // 2
    good, bad = (mid, bad) if meets(mid) else (good, mid)
  return good


def calibrate_truncated_batch_size(
    dataset_size: int, sampling_prob: float, noise_multiplier: float, iterations: int,
    adjacency: str, *, epsilon: float, delta: float, candidates: Iterable[int],
    value_discretization_interval: float = 1e-4) -> int:
  """Smallest B among ``candidates`` with ε(δ) ≤ ``epsilon``.

  ε is not proven monotone in B (w₂ falls but q rises with B), so no bisection:
  candidates are tried in increasing order and the first that meets the target
  is returned, i.e. every smaller candidate was evaluated and failed. The r = 1
  PLD does not depend on B and is built once.

  Raises:
    ValueError: if no candidate meets the target.

  References:
    Ganesh, arXiv 2508.15089, Thms 3.1, 3.3, 3.4.
  """
  n, p, _, sigma, t, adjacency, d = _check_run(dataset_size, sampling_prob, 1, noise_multiplier,
                                               iterations, adjacency, value_discretization_interval)
  epsilon, delta = _check_target(epsilon, delta)
  ordered = sorted({_validate.integer_at_least('candidates', b, 1) for b in candidates})
  if not ordered:
    raise InputError('candidates must contain at least one batch size')
  cache: dict = {}
  for b in ordered:
    if _meets(_composed(_round_pld(n, p, b, sigma, adjacency, d, cache), t), epsilon, delta):
      return b
  raise InputError(f'no truncated_batch_size in candidates ({ordered[0]}..{ordered[-1]}) meets '
                   f'epsilon = {epsilon} at delta = {delta}')


# ---------------------------------------------------------------- cyclic Poisson BandMF
@dataclasses.dataclass(frozen=True)
class WorstCasePLD:
  """The worst of several PLDs: each query returns the maximum over ``plds``.

  Attributes:
    plds: the PLDs (``PrivacyLossDistribution``), one per case.
    labels: what each PLD is for (here: the group sizes).
  """

  plds: tuple
  labels: tuple

  def get_epsilon_for_delta(self, delta: float, *, direction: str | None = None) -> float:
    """max over ``plds`` of ε(δ): of ``direction`` (``"remove"``/``"add"``), or of both (None)."""
    if direction is None:
      return max(float(pld.get_epsilon_for_delta(delta)) for pld in self.plds)
    return max(float(pld_pmfs.direction_pmf(pld, direction).get_epsilon_for_delta(delta))
               for pld in self.plds)

  def get_delta_for_epsilon(self, epsilon, *, direction: str | None = None):
    """max over ``plds`` of δ(ε): of ``direction`` (``"remove"``/``"add"``), or of both (None)."""
    if direction is None:
      return np.max(np.stack([np.asarray(pld.get_delta_for_epsilon(epsilon), dtype=np.float64)
                              for pld in self.plds]), axis=0)[()]
    return np.max(np.stack([
        np.asarray(pld_pmfs.direction_pmf(pld, direction).get_delta_for_epsilon(epsilon),
                   dtype=np.float64) for pld in self.plds]), axis=0)[()]


def truncated_cyclic_poisson_pld(scheme, matrix: BandedToeplitz, noise_multiplier: float, *,
                                 adjacency: str = 'zero_out',
                                 value_discretization_interval: float = 1e-4):
  """PLD of BandMF with truncated cyclic Poisson sampling (equal-split groups).

  The m examples are split into T = ``cycle_length`` fixed, public groups of
  ⌊m/T⌋ or ⌈m/T⌉ examples; with ``len(c_col) ≤ T`` the rounds of one phase
  have disjoint output windows, so the sensitive example sees ⌈n/T⌉ rounds
  (phase 0, the worst) of truncated Poisson sampling in a population of its
  group's size, at σ_eff = σ / (max column norm of C). The bound is not
  monotone in the group size (jaxacct's finding, not in the paper), so every
  distinct size is evaluated and the worst is reported.

  Args:
    scheme: ``jaxacct.CyclicPoisson`` with ``partition="equal_split"`` and
      ``truncated_batch_size`` / ``dataset_size`` set.
    matrix: ``jaxacct.BandedToeplitz`` with ``len(c_col) ≤ cycle_length``.
    noise_multiplier: σ > 0 (not normalised by ‖c_col‖).
    adjacency: ``"zero_out"`` (default) or ``"replace_one"``. ``"add_remove"``
      is refused: removing an example changes m and hence the group sizes,
      which the reduction needs public and fixed.
    value_discretization_interval: PLD grid step.

  Returns:
    A ``PrivacyLossDistribution`` if all groups have one size, else a
    ``WorstCasePLD`` over the two sizes (same query methods).

  References:
    Ganesh, arXiv 2508.15089, remark after Thm 3.1 (n → group size); Thms 3.3,
    3.4. Choquette-Choo et al., "(Amplified) banded matrix factorization",
    NeurIPS 2023 (cyclic-Poisson reduction).
  """
  if not (isinstance(scheme, schemes.SamplingScheme)
          and isinstance(scheme.participation.model, Cyclic)):
    raise InputTypeError(f'scheme must be a jaxacct.CyclicPoisson, got {scheme!r}')
  participation = scheme.participation
  model, truncation = participation.model, participation.truncation
  adjacency = _validate.one_of('adjacency', adjacency, ADJACENCIES)
  if adjacency == 'add_remove':
    raise InputError(
        "adjacency='add_remove' is not supported for truncated cyclic Poisson: removing an example "
        'changes the dataset size and hence the group sizes, which this reduction needs public and '
        "fixed; use 'zero_out' or 'replace_one'")
  if model.partition != 'equal_split':
    raise InputError("truncated cyclic Poisson needs partition='equal_split' (fixed, public group "
                     f'sizes), got partition={model.partition!r}')
  if truncation is None:
    raise InputError('scheme has no truncated_batch_size; use jaxacct.deterministic.pld.'
                     'cyclic_poisson_pld for untruncated cyclic Poisson')
  if matrix.num_bands > model.cycle_length:
    raise InputError(f'c_col must have at most cycle_length = {model.cycle_length} entries, '
                     f'got {matrix.num_bands}')
  sigma = _check_sigma(noise_multiplier)
  d = _validate.positive_finite('value_discretization_interval', value_discretization_interval)
  m, groups = truncation.dataset_size, model.cycle_length
  sizes = sorted({size for size in (m // groups, -(-m // groups)) if size >= 1})
  rounds = -(-participation.iterations // groups)
  sigma_eff = sigma / float(matrix.max_column_norm(participation.iterations))
  plds = tuple(truncated_poisson_pld(size, float(model.sampling_prob), truncation.batch_size,
                                     sigma_eff, rounds, adjacency, value_discretization_interval=d)
               for size in sizes)
  return plds[0] if len(plds) == 1 else WorstCasePLD(plds, tuple(sizes))
