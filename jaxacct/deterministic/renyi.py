"""The ``"renyi"`` accountant of fixed-bin balls-in-bins (host code).

Schuchardt & Kalinin (2026) §3, Algorithms 1–3. For the pair P = (1/b) Σ_i N(m_i, σ²I),
Q = N(0, σ²I) of ``random_allocation`` with Gram matrix G:

- **remove**, R_α(P‖Q) for integer α ≥ 2 (Lemma 3.2, eq. (5) with the sign of the log b term
  corrected: an erratum of the printed Eq. (5), whose last term reads −α log b/(1 − α)): with
  S(α) = Σ_{r ∈ ℕ^b, |r| = α} Π_i (1/r_i!) ·
  exp(Σ_i G_ii r_i(r_i − 1)/(2σ²) + Σ_{i<j} G_ij r_i r_j/σ²),

      R_α(P‖Q) = (ln S(α) + ln α! − α ln b)/(α − 1).

  ``RemoveRecursion`` evaluates ln S by Algorithm 1's dynamic programme over slots for a
  cyclically p-banded G (exact), with the printed errata fixed (line 28's accumulation,
  line 38's log-sum-exp, and line 37's closing term restricted to the wrap-around pairs —
  linear distance ≥ p — which the printed version double-counts when b ≤ 3p − 4). For any
  other G it runs on the truncation G^(p) (entries inside the cyclic p-band minus τ, the
  largest entry outside it) and adds α·τ/(2σ²): an upper bound (§3, Algorithm 1 lines 3–4),
  so every bandwidth p gives a valid ρ(α) and the accountant keeps the smallest over the
  bandwidths it ran.
  One run for the largest order gives every smaller order too (the recursion's terms do not
  depend on α, only its truncation m ≤ α does).
- **add**, R_α(Q‖P) ≤ tr(G)/(2bσ²) + (α − 1)·ΣG/(2b²σ²) for real α > 1 (Lemma 3.4).
- **conversion** (Theorem 3.1 = Canonne, Kamath & Steinke 2020, Prop. 12):
  δ ≤ exp((α − 1)(ρ − ε))/(α − 1)·(1 − 1/α)^α, minimised over the orders, per direction; the
  (ε, δ) statement is the maximum over directions (tighter than Algorithm 3's conversion of
  max(ρ_remove, ρ_add), and as valid).

Cost: the recursion performs C(α + 2p, 2p) transitions per slot (jaxacct's exact count; the
paper's Lemma 3.3 states O(b·p·α^{2p}) time), i.e. b·C(α + 2p, 2p) in all; ``max_transitions``
bounds the per-slot count (memory and time), so the default bandwidth ladder runs each
bandwidth up to the largest order that fits.

References:
  Jan Schuchardt and Nikita Kalinin, "Sampling-Free Privacy Accounting for Matrix Mechanisms under
  Random Allocation", arXiv:2601.21636: §3 (Theorem 3.1, Lemmas 3.2–3.4, Algorithms 1–3), Lemma 2.8,
  App. C (docs/references.md).
  Canonne, Kamath & Steinke, "The Discrete Gaussian for Differential Privacy", NeurIPS 2020,
  Prop. 12.
"""

from __future__ import annotations

import dataclasses
import math
import typing

import numpy as np
from scipy import optimize, special

from jaxacct import _validate
from jaxacct.conventions import Direction
from jaxacct.deterministic import random_allocation
from jaxacct.deterministic._search import smallest_passing_sigma
from jaxacct.deterministic.base import (DeterministicAccountant, Option, PrivacyCurve, check_delta,
                                        register)
from jaxacct.errors import InputError, InputTypeError

DEFAULT_ALPHA_MAX = 256
DEFAULT_MAX_TRANSITIONS = 300_000
_LADDER = (1, 2, 3, 4, 6, 8, 12, 16, 24, 32, 48, 64, 96, 128)
_ALPHA_LIMIT = 4096  # counts are int16; far beyond any useful order
_LADDER_WORK = 300_000_000  # transitions of the intermediate bandwidths (~3 s here)
_BUILD_COST = 10
_STORED_TRANSITIONS = 8_000_000  # transition tables kept per recursion (~150 MB)


# ---------------------------------------------------------------- remove direction
def transitions_per_slot(bandwidth: int, alpha_max: int) -> int:
  """C(α + 2p, 2p): the recursion's transitions per slot at bandwidth p, order α.

  An exact count of this implementation's states (not in the paper, whose Lemma 3.3 gives
  O(b·p·α^{2p}) time).
  """
  return math.comb(alpha_max + 2 * bandwidth, 2 * bandwidth)


def largest_order(bandwidth: int, alpha_max: int, max_transitions: int) -> int:
  """The largest α ≤ ``alpha_max`` with C(α + 2p, 2p) ≤ ``max_transitions`` (1 if none ≥ 2)."""
  alpha = 1
  while alpha < alpha_max and transitions_per_slot(bandwidth, alpha + 1) <= max_transitions:
    alpha += 1
  return alpha


def truncated_gram(gram: np.ndarray, bandwidth: int) -> tuple[np.ndarray, float]:
  """(G^(p), τ): τ = max G_ij over cyclic distance ≥ p (0 if none), G^(p) = (G − τ)₊ inside
  the cyclic p-band and 0 outside (Schuchardt & Kalinin (2026) Alg. 1 lines 3–4). G ≤ G^(p) + τ
  entrywise."""
  distance = random_allocation.cyclic_distance(gram.shape[0])
  outside = distance >= bandwidth
  tau = float(gram[outside].max()) if outside.any() else 0.0
  return np.where(outside, 0.0, np.maximum(gram - tau, 0.0)), max(tau, 0.0)


def _compositions(length: int, total: int) -> np.ndarray:
  """Every vector of ``length`` non-negative integers with sum ≤ ``total``: (C(total + length,
  length), length) int64, lexicographic."""
  rows = np.zeros((1, 0), np.int64)
  for _ in range(length):
    room = total - rows.sum(axis=1)
    repeat = room + 1
    base = np.repeat(rows, repeat, axis=0)
    values = np.arange(repeat.sum()) - np.repeat(np.cumsum(repeat) - repeat, repeat)
    rows = np.concatenate([base, values[:, None]], axis=1)
  return rows


@dataclasses.dataclass(frozen=True)
class _Step:
  """One slot's transitions, sorted by destination state (σ-free, reused across σ)."""

  suffixes: np.ndarray  # (S, p − 1) float64: the source states' suffix counts
  source: np.ndarray    # (T,) int32: the source state of each transition
  count: np.ndarray     # (T,) float64: t, this slot's count
  count_index: np.ndarray  # (T,) int16: t, as an index
  target: np.ndarray    # (T,) int32: the destination state of each transition
  starts: np.ndarray    # (S',) int64: the first transition of each destination state
  states: np.ndarray    # (S', 2p − 1) int16: the destination states


_ROW_HASH = np.random.default_rng(20260121).integers(1, 2**62, size=4096, dtype=np.int64) | 1


def _unique_rows(rows: np.ndarray) -> tuple[np.ndarray, np.ndarray]:
  """(distinct rows, index of each row's distinct row).

  Rows are grouped by a 64-bit multiplicative hash (fast for wide rows) and the grouping is
  then checked row by row; on a collision (never seen) it falls back to comparing bytes.
  """
  rows = np.ascontiguousarray(rows)
  keys = np.zeros(rows.shape[0], np.int64)
  with np.errstate(over='ignore'):
    for column in range(rows.shape[1]):  # Σ_j row_j·h_j, wrapping modulo 2⁶⁴
      keys += rows[:, column].astype(np.int64) * _ROW_HASH[column]
  _, first, inverse = np.unique(keys, return_index=True, return_inverse=True)
  inverse = inverse.ravel()
  if np.array_equal(rows[first][inverse], rows):
    return rows[first], inverse
  keys = rows.view(np.dtype((np.void, rows.dtype.itemsize * rows.shape[1]))).ravel()
  _, first, inverse = np.unique(keys, return_index=True, return_inverse=True)
  return rows[first], inverse.ravel()


class RemoveRecursion:
  """Algorithm 1 of Schuchardt & Kalinin (2026) (corrected) for b slots, bandwidth p, every order
  up to α_max.

  A state is a row (l, r, m) of int16: the counts of the first p − 1 slots (the prefix),
  of the last p − 1 slots seen (the suffix) and the total so far, m ≤ α_max. All prefixes
  run at once. The transitions depend only on (b, p, α_max), so they are built once and
  every σ reuses them (``log_sums``); after the first 2(p − 1) slots the state set no longer
  changes and one table serves every later slot.

  Args:
    slots: b ≥ 1.
    bandwidth: p with 1 ≤ p ≤ ⌊b/2⌋ + 1 (larger p cover every pair already).
    alpha_max: the largest order α ≥ 2 (≤ 32,767).
  """

  def __init__(self, slots: int, bandwidth: int, alpha_max: int):
    if not 1 <= bandwidth <= slots // 2 + 1:
      raise InputError(f'bandwidth must be in [1, {slots // 2 + 1}] for b = {slots}, '
                       f'got {bandwidth}')
    self.slots, self.bandwidth, self.alpha_max = slots, bandwidth, alpha_max
    width = bandwidth - 1
    prefixes = _compositions(width, alpha_max).astype(np.int16)
    # Initial states: the prefix is also the first suffix; m = |l|.
    self.initial_states = np.concatenate(
        [prefixes, prefixes, prefixes.sum(axis=1, dtype=np.int16)[:, None]], axis=1)
    # Tables are kept while they fit _STORED_TRANSITIONS (a step whose state set repeats is
    # stored once); the others are rebuilt on the fly by ``log_sums`` (None here).
    self.steps: list[_Step | None] = []
    states, cache, stored = self.initial_states, {}, 0
    for _ in range(width, slots):
      key = states.tobytes()
      step = cache.get(key)
      if step is None:
        step = self._successors(states)
        if stored + step.source.size <= _STORED_TRANSITIONS:
          cache[key] = step
          stored += step.source.size
      self.steps.append(cache.get(key))
      states = step.states
    self.final_states = states

  def _successors(self, states: np.ndarray) -> _Step:
    width = self.bandwidth - 1
    totals = states[:, -1].astype(np.int64)
    repeat = self.alpha_max - totals + 1
    source = np.repeat(np.arange(states.shape[0]), repeat)
    count = np.arange(repeat.sum()) - np.repeat(np.cumsum(repeat) - repeat, repeat)
    # The new suffix drops the oldest slot and appends this one (empty when p = 1).
    rows = np.concatenate([states[source, :width], states[source, width + 1:2 * width],
                           count[:, None].astype(np.int16),
                           (totals[source] + count)[:, None].astype(np.int16)], axis=1) \
        if width else (totals[source] + count)[:, None].astype(np.int16)
    distinct, target = _unique_rows(rows)
    order = np.argsort(target, kind='stable')
    target = target[order]
    starts = np.flatnonzero(np.concatenate([[True], target[1:] != target[:-1]]))
    return _Step(states[:, width:2 * width].astype(np.float64), source[order].astype(np.int32),
                 count[order].astype(np.float64), count[order].astype(np.int16),
                 target.astype(np.int32), starts, distinct)

  def log_sums(self, scaled_gram: np.ndarray) -> np.ndarray:
    """ln S(α) for α = 0 … α_max, with ``scaled_gram`` = G^(p)/σ² (entries outside the cyclic
    p-band are not read)."""
    width, b, alpha_max = self.bandwidth - 1, self.slots, self.alpha_max
    log_factorial = special.gammaln(np.arange(alpha_max + 1) + 1.0)
    prefixes = self.initial_states[:, :width].astype(np.int64)
    # Prefix weights (Alg. 1 line 9): pairs inside the first p − 1 slots, all in the band.
    block = scaled_gram[:width, :width]
    values = (-log_factorial[prefixes].sum(axis=1)
              + np.einsum('si,ij,sj->s', prefixes, np.triu(block, 1), prefixes)
              + 0.5 * (prefixes * (prefixes - 1)) @ np.diag(block))
    counts = np.arange(alpha_max + 1.0)
    states = self.initial_states
    for slot, step in zip(range(width, b), self.steps):
      step = self._successors(states) if step is None else step
      states = step.states
      # Δ = G_kk t(t − 1)/(2σ²) + t Σ_j G_{k, k−p+1+j} r_j/σ² − ln t!   (eq. 19)
      per_count = 0.5 * scaled_gram[slot, slot] * counts * (counts - 1.0) - log_factorial
      terms = per_count[step.count_index]
      terms += values[step.source]
      if width:
        linear = step.suffixes @ scaled_gram[slot, slot - width:slot]
        terms += linear[step.source] * step.count
      values = _segment_logsumexp(terms, step.starts, step.target)
    states = self.final_states
    totals = states[:, -1].astype(np.int64)
    if width:
      # Close the cycle (eq. 17) with the pairs (i in the prefix, j in the last p − 1 slots)
      # that wrap around: linear distance ≥ p (nearer pairs were counted by the recursion).
      first = np.arange(width)[:, None]
      last = b - width + np.arange(width)[None, :]
      wrap = np.where(last - first >= self.bandwidth, scaled_gram[:width, b - width:], 0.0)
      values = values + np.einsum('si,ij,sj->s', states[:, :width].astype(np.float64), wrap,
                                  states[:, width:2 * width].astype(np.float64))
    result = np.full(alpha_max + 1, -np.inf)
    order = np.argsort(totals, kind='stable')
    totals, values = totals[order], values[order]
    starts = np.flatnonzero(np.concatenate([[True], totals[1:] != totals[:-1]]))
    result[totals[starts]] = _segment_logsumexp(values, starts)
    return result


def _segment_logsumexp(values: np.ndarray, starts: np.ndarray,
                       segment: np.ndarray | None = None) -> np.ndarray:
  """log Σ exp over the contiguous segments beginning at ``starts`` (all values finite);
  ``segment`` is each value's segment index (computed if not given)."""
  peaks = np.maximum.reduceat(values, starts)
  if segment is None:
    segment = np.repeat(np.arange(starts.size), np.diff(np.append(starts, values.size)))
  values = values - peaks[segment]
  np.exp(values, out=values)
  return peaks + np.log(np.add.reduceat(values, starts))


def remove_divergences(log_sums: np.ndarray, slots: int, noise_multiplier: float,
                       tau: float) -> np.ndarray:
  """ρ(α) = (ln S(α) + ln α! − α ln b)/(α − 1) + α·τ/(2σ²) for α = 2 … len(log_sums) − 1
  (Schuchardt & Kalinin (2026) Alg. 1 line 43)."""
  alphas = np.arange(2, log_sums.size, dtype=np.float64)
  return ((log_sums[2:] + special.gammaln(alphas + 1.0) - alphas * math.log(slots))
          / (alphas - 1.0) + alphas * tau / (2.0 * noise_multiplier**2))


# ---------------------------------------------------------------- add direction and conversion
def add_divergence_terms(gram: np.ndarray, noise_multiplier: float) -> tuple[float, float]:
  """(a, c) with R_α(Q‖P) ≤ a + (α − 1)·c for every real α > 1: a = tr(G)/(2bσ²),
  c = ΣG/(2b²σ²) (Schuchardt & Kalinin (2026) Lemma 3.4, eq. (6))."""
  b, variance = gram.shape[0], noise_multiplier**2
  return float(np.trace(gram)) / (2.0 * b * variance), float(gram.sum()) / (2.0 * b * b * variance)


def epsilon_from_divergence(rho, alpha, delta: float):
  """ε with H_{e^ε} ≤ δ given R_α ≤ ρ: ρ + ln(1 − 1/α) − (ln δ + ln α)/(α − 1) (Thm 3.1 solved
  for ε; may be negative, then ε = 0 holds)."""
  alpha = np.asarray(alpha, np.float64)
  return rho + np.log1p(-1.0 / alpha) - (math.log(delta) + np.log(alpha)) / (alpha - 1.0)


def log_delta_from_divergence(rho, alpha, epsilon: float):
  """ln of Theorem 3.1's bound: (α − 1)(ρ − ε) − ln(α − 1) + α ln(1 − 1/α)."""
  alpha = np.asarray(alpha, np.float64)
  return ((alpha - 1.0) * (rho - epsilon) - np.log(alpha - 1.0)
          + alpha * np.log1p(-1.0 / alpha))


def _minimise_over_real_orders(objective) -> tuple[float, float]:
  """(min, argmin α) of ``objective(α)`` over real α > 1: a log grid of α − 1, then a bounded
  refinement around the best point. Any α gives a valid bound, so an inexact minimum is
  only less tight, never unsound."""
  excess = np.logspace(-4.0, 7.0, 1101)
  values = objective(1.0 + excess)
  best = int(np.argmin(values))
  low, high = math.log(excess[max(best - 1, 0)]), math.log(excess[min(best + 1, excess.size - 1)])
  refined = optimize.minimize_scalar(lambda x: float(objective(1.0 + math.exp(x))),
                                     bounds=(low, high), method='bounded',
                                     options={'xatol': 1e-10})
  if refined.success and refined.fun < values[best]:
    return float(refined.fun), 1.0 + math.exp(refined.x)
  return float(values[best]), float(1.0 + excess[best])


# ---------------------------------------------------------------- curve and accountant
@dataclasses.dataclass(frozen=True)
class Rung:
  """The remove-direction bound of one bandwidth: ρ_p(α) for α = 2 … alpha_max.

  Attributes:
    bandwidth: p (exact when G is cyclically p-banded, i.e. ``tau`` = 0).
    tau: the largest Gram entry outside the cyclic p-band (the bound adds α·τ/(2σ²)).
    alpha_max: the largest order run at this bandwidth.
    divergences: ρ_p(α), α = 2 … alpha_max.
  """

  bandwidth: int
  tau: float
  alpha_max: int
  divergences: np.ndarray


def remove_epsilon(divergences: np.ndarray, orders: np.ndarray, delta: float) -> float:
  """min over the integer orders of Theorem 3.1's ε (≥ 0)."""
  return max(float(np.min(epsilon_from_divergence(divergences, orders, delta))), 0.0)


def remove_delta(divergences: np.ndarray, orders: np.ndarray, epsilon: float) -> float:
  """min over the integer orders of Theorem 3.1's δ (≤ 1)."""
  log_delta = float(np.min(log_delta_from_divergence(divergences, orders, epsilon)))
  return math.exp(min(log_delta, 0.0))


def add_epsilon(add_terms: tuple[float, float], delta: float) -> tuple[float, float]:
  """(ε ≥ 0, the real order giving it) of the add bound a + (α − 1)c (Lemma 3.4, Thm 3.1)."""
  a, c = add_terms
  value, alpha = _minimise_over_real_orders(
      lambda alpha: epsilon_from_divergence(a + (alpha - 1.0) * c, alpha, delta))
  return max(value, 0.0), alpha


def add_delta(add_terms: tuple[float, float], epsilon: float) -> float:
  """δ ≤ 1 of the add bound at ε, minimised over real orders α > 1."""
  a, c = add_terms
  log_delta, _ = _minimise_over_real_orders(
      lambda alpha: log_delta_from_divergence(a + (alpha - 1.0) * c, alpha, epsilon))
  return math.exp(min(log_delta, 0.0))


@typing.final
class RenyiCurve(PrivacyCurve):
  """δ(ε) and ε(δ) of the Rényi accountant (Schuchardt & Kalinin (2026) Alg. 3, per direction).

  Attributes:
    rungs: the remove-direction bounds, one per bandwidth run.
    remove_orders / remove_divergences: α = 2, 3, … and min over rungs of ρ_p(α).
    add_terms: (a, c) of the add bound a + (α − 1)·c (Lemma 3.4).
  """

  def __init__(self, rungs: tuple[Rung, ...], add_terms: tuple[float, float]):
    self.rungs = rungs
    orders = max(r.alpha_max for r in rungs) - 1
    table = np.full((len(rungs), orders), np.inf)
    for row, rung in enumerate(rungs):
      table[row, :rung.divergences.size] = rung.divergences
    self._table = table
    self.remove_orders = np.arange(2, orders + 2)
    self.remove_divergences = table.min(axis=0)
    self.add_terms = add_terms

  def _epsilon(self, delta: float, direction: str) -> float:
    if direction == Direction.REMOVE:
      return remove_epsilon(self.remove_divergences, self.remove_orders, delta)
    return add_epsilon(self.add_terms, delta)[0]

  def _delta(self, epsilon: float, direction: str) -> float:
    if direction == Direction.REMOVE:
      return remove_delta(self.remove_divergences, self.remove_orders, epsilon)
    return add_delta(self.add_terms, epsilon)

  def explain(self, delta: float) -> dict:
    """Per direction, the ε(δ) and the order giving it; for remove also its bandwidth p and τ
    (τ = 0: exact Rényi divergence; τ > 0: the bound of Schuchardt & Kalinin (2026) §3)."""
    delta = check_delta(delta)
    eps = epsilon_from_divergence(self._table, self.remove_orders[None, :], delta)
    row, column = np.unravel_index(int(np.argmin(eps)), eps.shape)
    rung = self.rungs[row]
    add_eps, add_alpha = add_epsilon(self.add_terms, delta)
    a, c = self.add_terms
    return {'remove': {'epsilon': max(float(eps[row, column]), 0.0),
                       'alpha': int(self.remove_orders[column]), 'bandwidth': rung.bandwidth,
                       'tau': rung.tau, 'rho': float(self._table[row, column])},
            'add': {'epsilon': add_eps, 'alpha': add_alpha, 'rho': a + (add_alpha - 1.0) * c}}


def _check_bandwidths(value):
  if value is None:
    return None
  if isinstance(value, (int, np.integer)):
    value = [value]
  try:
    values = [_validate.integer_at_least('bandwidths', v, 1) for v in value]
  except TypeError:
    raise InputTypeError(f'bandwidths must be None or a sequence of integers >= 1, got {value!r}') \
        from None
  if not values:
    raise InputError('bandwidths must not be empty (None picks a ladder)')
  return tuple(sorted(set(values)))


def _check_alpha_max(value):
  if value is None:
    return None
  value = _validate.integer_at_least('alpha_max', value, 2)
  if value > _ALPHA_LIMIT:
    raise InputError(f'alpha_max must be in [2, {_ALPHA_LIMIT}], got {value}')
  return value


def _check_max_transitions(value):
  return _validate.integer_at_least('max_transitions', value, 6)


def _default_ladder(exact: int, slots: int, ceiling: int, max_transitions: int) -> list[int]:
  """Bandwidths 1 and ``exact`` (the cyclic bandwidth of G: exact) and, between them, the
  ladder's steps while their recursions together stay within _LADDER_WORK transitions."""
  ladder = [p for p in _LADDER if 1 < p < exact]
  chosen, work = {1, exact}, 0
  for p in ladder:
    per_slot = transitions_per_slot(p, largest_order(p, ceiling, max_transitions))
    # One evaluation runs every slot; building the tables (~10× dearer per transition) runs
    # only the first 2p − 1 slots, whose state sets differ.
    work += per_slot * (slots + _BUILD_COST * min(slots, 2 * p - 1))
    if work > _LADDER_WORK:
      break
    chosen.add(p)
  return sorted(chosen)


@dataclasses.dataclass(frozen=True)
class RenyiPlan:
  """Everything σ-free about a mechanism: G, the rungs' truncations and recursions.

  Attributes:
    gram: G (b × b).
    exact_bandwidth: the cyclic bandwidth of G (capped at ⌊b/2⌋ + 1, where every pair is in).
    rungs: (bandwidth p, τ_p, G^(p), recursion) per bandwidth run.
  """

  gram: np.ndarray
  exact_bandwidth: int
  rungs: tuple
  _last_proof: list = dataclasses.field(default_factory=lambda: [0], repr=False, compare=False)

  @classmethod
  def build(cls, scheme, matrix, bandwidths, alpha_max, max_transitions) -> 'RenyiPlan':
    gram = random_allocation.gram_matrix(scheme, matrix)
    slots = gram.shape[0]
    exact = random_allocation.cyclic_bandwidth(gram)
    ceiling = DEFAULT_ALPHA_MAX if alpha_max is None else alpha_max
    explicit = bandwidths is not None
    if explicit:
      chosen = sorted({min(p, slots // 2 + 1) for p in bandwidths})
    else:
      chosen = _default_ladder(exact, slots, ceiling, max_transitions)
    rungs = []
    for p in chosen:
      top = largest_order(p, ceiling, max_transitions)
      if top < 2 or (explicit and alpha_max is not None and top < alpha_max):
        if explicit:
          order = 2 if top < 2 else alpha_max
          need = transitions_per_slot(p, order)
          raise InputError(
              f'bandwidth {p} at alpha = {order} needs C({order + 2 * p}, {2 * p}) = {need:.3g} '
              f'recursion transitions per slot (about {need * 26 / 2**20:.3g} MiB), above '
              f'max_transitions = {max_transitions}; use a smaller alpha_max, a smaller '
              f'bandwidth (the τ bound of Schuchardt & Kalinin (2026) §3 keeps it valid) or '
              f'raise max_transitions')
        continue
      truncated, tau = truncated_gram(gram, p)
      rungs.append((p, tau, truncated, RemoveRecursion(slots, p, top)))
    return cls(gram, exact, tuple(rungs))

  def rung(self, index: int, noise_multiplier: float) -> Rung:
    """The remove bound of the ``index``-th bandwidth at σ."""
    p, tau, truncated, recursion = self.rungs[index]
    sigma = float(noise_multiplier)
    sums = recursion.log_sums(truncated / sigma**2)
    return Rung(p, tau, recursion.alpha_max,
                remove_divergences(sums, self.gram.shape[0], sigma, tau))

  def curve(self, noise_multiplier: float) -> RenyiCurve:
    rungs = tuple(self.rung(i, noise_multiplier) for i in range(len(self.rungs)))
    return RenyiCurve(rungs, add_divergence_terms(self.gram, float(noise_multiplier)))

  def meets(self, noise_multiplier: float, epsilon: float, delta: float) -> bool:
    """ε(δ) ≤ ``epsilon`` at σ, stopping at the first bandwidth that proves the remove side
    (the add side, a closed form, is checked first: failing it needs no recursion)."""
    if add_epsilon(add_divergence_terms(self.gram, float(noise_multiplier)), delta)[0] > epsilon:
      return False
    for index in sorted(range(len(self.rungs)), key=lambda i: i != self._last_proof[0]):
      rung = self.rung(index, noise_multiplier)
      orders = np.arange(2, rung.alpha_max + 1)
      if remove_epsilon(rung.divergences, orders, delta) <= epsilon:
        self._last_proof[0] = index  # the next σ tries this bandwidth first
        return True
    return False


@register
@typing.final
class RenyiAccountant(DeterministicAccountant):
  """The Rényi accountant of Schuchardt & Kalinin (2026) for ``BallsInBins`` (module docstring).

  Options:
    bandwidths: the bandwidths p of the remove recursion (None: a ladder 1, 2, 3, 4, 6, 8, …
      up to the cyclic bandwidth of G, which is exact; a larger p is capped at ⌊b/2⌋ + 1).
      Each gives a valid bound; the curve keeps the smallest per order.
    alpha_max: the largest integer order (None: 256, lowered per bandwidth to fit
      ``max_transitions``; an explicit value with explicit bandwidths must fit).
    max_transitions: the recursion's budget of transitions per slot, C(α + 2p, 2p)
      (default 300,000: ~8 MiB of transition tables per slot kind, ~0.3 s per bandwidth at
      b = 100 on the project's CPU).
  Adjacency: ``zero_out`` and ``add_remove`` (the same pair: Schuchardt & Kalinin (2026)
  Lemma 2.8).
  """

  name = 'renyi'

  tie_order = 30
  references = (
      'Schuchardt & Kalinin, "Sampling-Free Privacy Accounting for Matrix Mechanisms under '
      'Random Allocation", arXiv 2601.21636, Lemmas 2.8, 3.2-3.4, Theorem 3.1, Algorithms 1-3',
      'Canonne, Kamath & Steinke, "The Discrete Gaussian for Differential Privacy", NeurIPS '
      '2020, Prop. 12 (Rényi to (eps, delta))',
  )
  adjacencies = random_allocation.ADJACENCIES
  options = {'bandwidths': Option(None, _check_bandwidths),
             'alpha_max': Option(None, _check_alpha_max),
             'max_transitions': Option(DEFAULT_MAX_TRANSITIONS, _check_max_transitions)}
  sigma_floor = 0.05

  def _refusal(self, mechanism, options):
    return random_allocation.refusal(mechanism.scheme, mechanism.matrix, options['adjacency'],
                                     self.name)

  def _plan(self, mechanism, options) -> RenyiPlan:
    return RenyiPlan.build(mechanism.scheme, mechanism.matrix, options['bandwidths'],
                           options['alpha_max'], options['max_transitions'])

  def _curve(self, mechanism, options):
    return self._plan(mechanism, options).curve(mechanism.noise_multiplier)

  def _sigma(self, probe, epsilon, delta, tolerance, options, progress=None):
    plan = self._plan(probe, options)
    return smallest_passing_sigma(lambda sigma: plan.meets(sigma, epsilon, delta),
                                  tolerance=tolerance, floor=self.sigma_floor, progress=progress)

  def _supersedes_monte_carlo(self, mechanism):
    # Monte Carlo bounds the same pair only with high probability, after hours of sampling at
    # small δ; this proves a bound in seconds to minutes. Monte Carlo stays a choice.
    del mechanism
    return True
