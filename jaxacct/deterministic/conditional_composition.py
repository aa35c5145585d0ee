"""The ``"conditional_composition"`` accountant of fixed-bin balls-in-bins (seed 002 §4, App. D–F).

The pair P = (1/b) Σ_i N(m_i, σ²I), Q = N(0, σ²I) of ``random_allocation`` does not factorise
over steps. Conditional composition (seed 002 Lemma 4.1, a special case of Choquette-Choo et
al. 2024, Thm 3.1) bounds it by a product of one-dimensional pairs that hold together except
on a bad event of probability δ_E:

    H_γ(P‖Q) ≤ H_γ(×_n P^(n) ‖ ×_n Q^(n)) + δ_E,

with, at step n, P^(n) = Σ_i p_i^(n) N(c_i, σ²), Q^(n) = N(0, σ²) ("remove"; "add" swaps
them), c_1 ≤ … ≤ c_b the step-n slot means sorted, and weights from upper bounds λ̄_i on the
reverse hazard P(z = i | z ≤ i, y_{1:n−1}) (Corollary 4.4, with the product index of the
printed text corrected to j): p_i = λ̄_i Π_{j>i}(1 − λ̄_j), λ̄_1 = 1. By Lemma 4.5,
λ̄_i = 1/(1 + (i − 1)·e^{τ_i}) for a lower tail bound τ_i on the "ternary" loss

    L_i(y) = ln[(1/(i−1)) Σ_{j<i} N(y | μ_j, σ²I) / N(y | μ_i, σ²I)]     (μ: prefix means),

Pr[L_i < τ_i] ≤ β under y ~ P (remove: the mixture of *all* b components — the printed
k = i … b sums a sub-probability measure, an erratum) or y ~ Q (add). The tail bounds are
the variational ones of §4.2 (Theorem 4.8, Theorem D.3): for a distribution ψ on j < i,
L_i ≥ E_ψ[L_{i,j}] − KL(ψ‖uniform), which is Gaussian under each Gaussian component; ψ ranges
over App. F's family (Option 3: softmax(−‖μ_i − μ_j‖²/t), t ∈ {∞ (uniform), 10^−1, 10^−½,
1, 10^½, 10}), the pointwise best Φ term kept. Components identical to μ_i get ψ_j = 0
(Remark D.5); their terms are exactly 1, so with s of them L_i ≥ ln(s/(i − 1) + e^{τ'}) for
the bound τ' on the others' share (not in the paper; tighter than its KL offset, which gives
τ' alone).

Only the bounds that matter are taken (not in the paper; exact): the slots of the lowest group
of equal step means share one Gaussian and their total weight is Π_{j above}(1 − λ̄_j)
whatever their own λ̄, and a slot whose predecessors all share its prefix has L_i ≡ 0. The
failure probability δ_E is split by the union bound over the bounds taken, at most
N(b − 1) (App. E's allocation; for DP-SGD one per step instead of b − 1); App. E's "hybrid"
max-bound allocation has no proof and is not offered.

Each step pair's PLD PMF is dp_accounting's own pessimistic connect-the-dots construction of
``MixtureGaussianPrivacyLoss`` (``mixture_pld``, with its inverse loss vectorised). The
N PMFs are composed by dp_accounting (``DensePLDPmf.compose``, FFT convolution) in a balanced
tree, and δ(ε) = δ_PLD(ε) + δ_E per direction.

References:
  Schuchardt & Kalinin, "Sampling-Free Privacy Accounting for Matrix Mechanisms under Random
  Allocation", arXiv 2601.21636, Lemmas 4.1–4.5, Corollary 4.4, Theorems 4.6, 4.8, D.3,
  Algorithm 4, Remark D.5, App. E–F; Choquette-Choo et al., "Privacy Amplification for
  Matrix Mechanisms", ICLR 2024, Thm 3.1, Cor. 4.4; spec 002 §2.7, §3.5, §7.
"""

from __future__ import annotations

import functools
import math
import typing

import numpy as np
from scipy import special

from jaxacct.conventions import DIRECTIONS, Direction
from jaxacct.deterministic import mixture_pld, random_allocation, renyi
from jaxacct.deterministic._search import smallest_passing_sigma
from jaxacct.deterministic.base import DeterministicAccountant, Option, register
from jaxacct.errors import InputError

TEMPERATURES = (math.inf, 10**-1, 10**-0.5, 1.0, 10**0.5, 10.0)
_BISECTIONS = 60


def _prefix_labels(labels: np.ndarray, column: np.ndarray) -> np.ndarray:
  """Class labels of the slots' prefix vectors after appending ``column`` (equal prefixes ⇔
  equal labels, decided exactly)."""
  _, relabelled = np.unique(np.stack([labels.astype(np.float64), column], axis=1), axis=0,
                            return_inverse=True)
  return relabelled.ravel()


def _variational_terms(gram: np.ndarray, rows: np.ndarray, ranks: np.ndarray,
                       below: np.ndarray, distance: np.ndarray, noise_multiplier: float,
                       temperature: float):
  """For the slots ``rows`` (ranks ``ranks``) and ψ^(i) = softmax(−‖μ_i − μ_j‖²/t) over the
  allowed j (``below``: μ_j ranked before μ_i and ≠ μ_i; uniform at t = ∞): (ξ_i, the ν part
  common to every component, ψK) — Theorem D.3 / Corollary D.4 written with the prefix Gram
  matrix K, and KL(ψ^(i)‖uniform on the i − 1 predecessors)."""
  logits = np.zeros(below.shape) if math.isinf(temperature) else -distance / temperature
  logits = np.where(below, logits, -np.inf)
  has = below.any(axis=1)
  top = np.where(has, np.max(logits, axis=1, initial=-np.inf), 0.0)
  shifted = logits - top[:, None]
  weights = np.exp(shifted)  # 0 where not allowed
  total = np.where(has, weights.sum(axis=1), 1.0)
  weights /= total[:, None]
  log_weights_ = np.where(below, shifted - np.log(total)[:, None], 0.0)
  # KL(ψ‖uniform on the i − 1 predecessors) = Σ_j ψ_j (ln ψ_j + ln(i − 1)).
  predecessors = np.log(np.maximum(ranks.astype(np.float64), 1.0))
  kl = (weights * (log_weights_ + predecessors[:, None])).sum(axis=1)
  diagonal = np.diag(gram)
  own = diagonal[rows]
  mixed = weights @ gram  # row r: Σ_j ψ_j K_{j,·}
  cross = mixed[np.arange(rows.size), rows]
  spread = np.maximum(own - 2.0 * cross + (mixed * weights).sum(axis=1), 0.0)
  xi = np.sqrt(spread) / noise_multiplier
  common = (own - weights @ diagonal) / (2.0 * noise_multiplier**2) - kl
  return xi, common, mixed


def _tail_bounds(gram: np.ndarray, identical: np.ndarray, rank: np.ndarray, rows: np.ndarray,
                 noise_multiplier: float, significance: float, direction: str,
                 temperatures) -> np.ndarray:
  """τ of the slots ``rows`` (``tail_bounds``), slots in any order: ``rank`` gives each slot's
  place in the step's sorted order, ``identical`` (rows, b) whether μ_j = μ_row exactly."""
  b = gram.shape[0]
  variance = noise_multiplier**2
  quantile = special.ndtri(significance)
  ranks = rank[rows]
  earlier = rank[None, :] < ranks[:, None]
  below = earlier & ~identical
  has = below.any(axis=1)
  diagonal = np.diag(gram)
  distance = np.maximum(diagonal[rows][:, None] + diagonal[None, :] - 2.0 * gram[rows], 0.0)
  terms = [_variational_terms(gram, rows, ranks, below, distance, noise_multiplier, t)
           for t in temperatures]
  if direction == Direction.ADD:
    tau = np.max([common + xi * quantile for xi, common, _ in terms], axis=0)
  else:
    # ν_{t,i,k} = (Σ_j ψ_j K_jk − K_ik)/σ² + common_{t,i} for component k; ξ_{t,i} as for add.
    means = np.stack([(mixed - gram[rows]) / variance + common[:, None]
                      for _, common, mixed in terms])
    spreads = np.stack([xi for xi, _, _ in terms])[:, :, None]  # (T, rows, 1)
    positive = spreads > 0
    inverse = np.where(positive, 1.0 / np.where(positive, spreads, 1.0), 0.0)
    log_beta = math.log(significance)

    def log_cdf(tau):
      # log[(1/b) Σ_k min_t Φ((τ_i − ν_{t,i,k})/ξ_{t,i})]: min over t inside Φ (monotone);
      # ξ = 0 makes that term a step at ν.
      gap = tau[None, :, None] - means
      z = np.where(positive, gap * inverse, np.where(gap >= 0, np.inf, -np.inf)).min(axis=0)
      logs = special.log_ndtr(z)
      peak = np.max(logs, axis=1)
      finite = np.isfinite(peak)
      safe = np.where(finite, peak, 0.0)
      with np.errstate(divide='ignore'):  # rows with every term −∞ stay −∞
        total = safe + np.log(np.exp(logs - safe[:, None]).sum(axis=1))
      return np.where(finite, total, peak) - math.log(b)

    # Bracket: below every component's β-quantile F ≤ β; above every (bβ)-quantile F > β.
    low = np.min(means + spreads * quantile, axis=(0, 2)) - 1.0
    high = np.max(means + spreads * special.ndtri(min(1.0, b * significance)),
                  axis=(0, 2)) + 1.0
    for _ in range(_BISECTIONS):
      middle = 0.5 * (low + high)
      passes = log_cdf(middle) <= log_beta
      low, high = np.where(passes, middle, low), np.where(passes, high, middle)
      if np.all(high - low <= 1e-10 * np.maximum(1.0, np.abs(low))):
        break
    tau = low  # F(low) ≤ β holds at every step of the bisection
  # The s identical predecessors add exactly s/(i − 1) to the mean ratio, and τ bounds the
  # log of the others' share (ψ on them, KL against uniform on all i − 1), so
  # L_i ≥ ln(s/(i − 1) + e^τ); one ulp down so that rounding cannot lift it above the truth.
  same = (identical & earlier).sum(axis=1)
  with np.errstate(divide='ignore'):
    share = np.log(same / np.maximum(ranks, 1))  # −inf without identical predecessors
  tau = np.where(same > 0, np.nextafter(np.logaddexp(share, tau), -np.inf), tau)
  return np.where(has, tau, 0.0)  # no non-identical predecessor: L_i ≡ 0


def tail_bounds(gram: np.ndarray, identical: np.ndarray, noise_multiplier: float,
                significance: float, direction: str,
                temperatures=TEMPERATURES) -> np.ndarray:
  """τ_i (slots in sorted order) with Pr[L_i < τ_i] ≤ ``significance`` (Theorem 4.8 / D.3).

  Args:
    gram: K_jk = ⟨μ_j, μ_k⟩ of the prefix means, rows and columns in the step's sorted order.
    identical: identical[i, j] when μ_i = μ_j exactly.
    noise_multiplier: σ.
    significance: β per bound.
    direction: ``"add"`` (y ~ N(0, σ²I): closed form) or ``"remove"`` (y ~ (1/b) Σ_k
      N(μ_k, σ²I): bisection on the mixture of the per-component Gaussian bounds).
    temperatures: the variational family's temperatures (App. F, Option 3; ∞ = uniform ψ).

  Returns:
    τ (b,) with τ_1 = 0 unused (λ̄_1 = 1); τ_i = 0 when every predecessor equals μ_i
    (L_i ≡ 0); s identical predecessors add s/(i − 1) to e^τ (Remark D.5).
  """
  b = gram.shape[0]
  rows = np.arange(b)
  return _tail_bounds(gram, identical, rows, rows, noise_multiplier, significance, direction,
                      temperatures)


def log_weights(tau: np.ndarray) -> np.ndarray:
  """ln p_i = ln λ̄_i + Σ_{j>i} ln(1 − λ̄_j), λ̄_i = 1/(1 + (i−1)e^{τ_i}), λ̄_1 = 1 (Cor. 4.4,
  Lemma 4.5), in log space; τ_i = −∞ gives λ̄_i = 1 (always a valid upper bound)."""
  b = tau.size
  ranks = np.arange(b, dtype=np.float64)  # i − 1
  with np.errstate(divide='ignore'):
    odds = np.log(ranks) + tau  # ln((i − 1) e^τ); −inf at i = 1
  log_hazard = -np.logaddexp(0.0, odds)          # ln λ̄_i
  log_survive = -np.logaddexp(0.0, -odds)         # ln(1 − λ̄_i) (−inf at i = 1)
  later = np.concatenate([np.cumsum(log_survive[::-1])[::-1][1:], [0.0]])
  return log_hazard + later


def _schedule(means: np.ndarray):
  """Per step: (the slots in sorted order of the step's means, each slot's rank, the prefix
  class labels, the size of the lowest group of equal means, the slots whose reverse hazard
  must be bounded).

  Only the slots ranked above the lowest group of equal step means need a bound: the lowest
  group's total weight is Π_{j above}(1 − λ̄_j) whatever its own λ̄ (λ̄_1 = 1 telescopes),
  and its members share one Gaussian, so λ̄ = 1 at its top rank (the trivial upper bound) is
  exact for the mixture. Slots whose predecessors all have their prefix (L_i ≡ 0) need no
  tail bound either. The union bound then runs over the bounds actually taken.
  """
  b, steps = means.shape
  labels = np.zeros(b, np.int64)
  plan = []
  for n in range(steps):
    column = means[:, n]
    order = np.argsort(column, kind='stable')
    rank = np.empty(b, np.int64)
    rank[order] = np.arange(b)
    sorted_column = column[order]
    lowest = int(np.searchsorted(sorted_column, sorted_column[0], side='right'))
    # A bound is needed unless every earlier-ranked slot shares the slot's prefix class:
    # from the first rank whose class differs from rank 1's on.
    sorted_labels = labels[order]
    changes = np.flatnonzero(sorted_labels != sorted_labels[0])
    first = max(lowest, int(changes[0]) if changes.size else b)
    plan.append((order, rank, labels, lowest, order[first:]))
    labels = _prefix_labels(labels, column)
  return plan


def step_pairs(means: np.ndarray, noise_multiplier: float, bad_event_delta: float,
               direction: str, temperatures=TEMPERATURES):
  """The per-step mixtures of Algorithm 4 for every step: (c (N, b) sorted step means,
  ln p (N, b)), with the union bound β = δ_E / ``bound_count(means)`` per tail bound.

  The prefix Gram matrix and the classes of identical prefixes are updated step by step;
  each step costs O(R·b²) for the R bounds it takes (``_schedule``: R ≤ b − 1, and R is the
  number of distinct nonzero step coefficients' slots for a banded C, e.g. 1 for DP-SGD).
  """
  b, steps = means.shape
  plan = _schedule(means)
  significance = bad_event_delta / max(sum(rows.size for *_, rows in plan), 1)
  gram = np.zeros((b, b))
  sorted_means = np.empty((steps, b))
  weights = np.zeros((steps, b))
  for n, (order, rank, labels, lowest, rows) in enumerate(plan):
    column = means[:, n]
    sorted_means[n] = column[order]
    if b > 1:
      tau = np.zeros(b)  # sorted order; 0 is exact where every predecessor is identical
      tau[lowest - 1] = -np.inf  # λ̄ = 1 atop the lowest group (see _schedule)
      if rows.size:
        identical = labels[rows][:, None] == labels[None, :]
        tau[rank[rows]] = _tail_bounds(gram, identical, rank, rows, noise_multiplier,
                                       significance, direction, temperatures)
      weights[n] = log_weights(tau)
    support = np.flatnonzero(column)
    gram[np.ix_(support, support)] += np.outer(column[support], column[support])
  return sorted_means, weights


def bound_count(means: np.ndarray) -> int:
  """The number of tail bounds conditional composition takes over all steps (``_schedule``):
  the union bound gives each δ_E divided by it."""
  return sum(rows.size for *_, rows in _schedule(means))


# ---------------------------------------------------------------- curve and accountant
DEFAULT_DISCRETIZATION = 1e-3


@typing.final
class ConditionalCompositionCurve(mixture_pld.BadEventCurve):
  """δ(ε) = δ_PLD(ε) + δ_E and ε(δ) = ε_PLD(δ − δ_E) per direction (seed 002 Lemma 4.1), the
  PLD composing the N step pairs of ``step_pairs`` (``mixture_pld.BadEventCurve``).

  Attributes:
    means: the slot means (b, N); noise_multiplier: σ; bad_event_delta: δ_E or None (δ/2);
    discretization: the PLD grid step.
  """

  def __init__(self, means: np.ndarray, noise_multiplier: float, bad_event_delta: float | None,
               discretization: float):
    super().__init__(bad_event_delta)
    self.means = means
    self.noise_multiplier = float(noise_multiplier)
    self.discretization = float(discretization)

  @functools.cached_property
  def tail_bound_count(self) -> int:
    """The number of tail bounds taken over all steps (``bound_count``; at most N(b − 1))."""
    return bound_count(self.means)

  def significance(self, bad_event_delta: float) -> float:
    """β = δ_E / ``bounds``, the failure probability allowed to each tail bound (union bound)."""
    return bad_event_delta / max(self.tail_bound_count, 1)

  def _compose(self, direction: str, bad_event_delta: float):
    sorted_means, log_p = step_pairs(self.means, self.noise_multiplier, bad_event_delta,
                                     direction)
    return mixture_pld.compose([
        mixture_pld.mixture_pmf(sorted_means[n], log_p[n], self.noise_multiplier, direction,
                                self.discretization) for n in range(self.means.shape[1])])

  def explain(self, delta: float) -> dict:
    """δ_E, the per-bound significance β, the number of tail bounds and composed steps."""
    bad_event = self.bad_event_for(delta)
    return {'bad_event_delta': bad_event, 'significance': self.significance(bad_event),
            'tail_bounds': self.tail_bound_count, 'steps': int(self.means.shape[1]),
            'allocation': 'union bound'}


@register
@typing.final
class ConditionalCompositionAccountant(DeterministicAccountant):
  """Seed 002's conditional-composition accountant for ``BallsInBins`` (module docstring).

  Options:
    bad_event_delta: δ_E, the probability of the bad event on which the per-step pairs may
      fail. Default None: half the δ asked for (seed 002 App. B.2, e.g. 5e-6 at δ = 1e-5);
      δ(ε) then inverts ε(δ) (``ConditionalCompositionCurve``). A fixed δ_E makes ε(δ) = +∞
      for δ ≤ δ_E, and calibration needs δ > δ_E.
    value_discretization_interval: the PLD grid step (default 1e-3; pessimistic).
  Adjacency: ``zero_out`` and ``add_remove`` (the same pair: seed 002 Lemma 2.8).
  """

  name = 'conditional_composition'
  references = (
      'Schuchardt & Kalinin, "Sampling-Free Privacy Accounting for Matrix Mechanisms under '
      'Random Allocation", arXiv 2601.21636, Lemmas 4.1-4.5, Theorems 4.6, 4.8, D.3, '
      'Algorithm 4, Remark D.5, App. E-F',
      'Choquette-Choo et al., "Privacy Amplification for Matrix Mechanisms", ICLR 2024, Thm 3.1',
      'Doroshenko et al., "Connect the Dots", arXiv 2207.04380 (pessimistic PLD)',
  )
  adjacencies = random_allocation.ADJACENCIES
  options = {'bad_event_delta': Option(None, mixture_pld.check_bad_event_delta),
             'value_discretization_interval': Option(DEFAULT_DISCRETIZATION,
                                                     mixture_pld.check_discretization)}
  sigma_floor = 0.05

  def _refusal(self, mechanism, options):
    return random_allocation.refusal(mechanism.scheme, mechanism.matrix, options['adjacency'],
                                     self.name)

  def _curve(self, mechanism, options):
    means = random_allocation.slot_means(mechanism.scheme, mechanism.matrix)
    return ConditionalCompositionCurve(means, mechanism.noise_multiplier,
                                       options['bad_event_delta'],
                                       options['value_discretization_interval'])

  def _sigma(self, probe, epsilon, delta, tolerance, options, progress=None):
    bad_event = delta / 2 if options['bad_event_delta'] is None else options['bad_event_delta']
    if delta <= bad_event:
      raise InputError(f'delta = {delta} must exceed bad_event_delta = {bad_event} (the bad '
                       'event alone may cost δ_E); seed 002 takes δ_E = δ/2')
    means = random_allocation.slot_means(probe.scheme, probe.matrix)

    def meets(sigma: float) -> bool:
      curve = ConditionalCompositionCurve(means, sigma, bad_event,
                                          options['value_discretization_interval'])
      return all(curve.epsilon_for_delta(delta, direction=d) <= epsilon for d in DIRECTIONS)

    # The bracket starts at the Rényi accountant's σ for the same target (seconds; the two
    # are usually within tens of per cent) and grows by 1.25: each probe composes N pairs,
    # and a σ far below the answer would make the PLD grids huge.
    guess = renyi.RenyiAccountant().sigma(probe.scheme, probe.matrix, epsilon=epsilon,
                                          delta=delta, tolerance=1e-2)
    return smallest_passing_sigma(meets, tolerance=tolerance, floor=self.sigma_floor,
                                  start=guess, step=1.25, progress=progress)

  def _supersedes_monte_carlo(self, mechanism):
    # Monte Carlo bounds the same pair only with high probability, after hours of sampling at
    # small δ; this proves a bound in seconds to minutes. Monte Carlo stays a choice.
    del mechanism
    return True
