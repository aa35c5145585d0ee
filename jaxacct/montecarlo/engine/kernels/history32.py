"""The warm-start stationary history of truncated b-min-sep in 32-bit device code.

Under warm start (Dong & Ganesh (2026) Algorithm 2; App. D.1) each of the m − 1 other examples
is independently in state 0 (available) w.p. 1/(1 + (b − 1)p) and in each barred state
k ∈ {1, …, b − 1} (it joined in virtual round −k) w.p. π = p/(1 + (b − 1)p); the counts
(h₁, …, h_{b−1}) are one multinomial draw. ``truncated.stationary_history`` (float64) takes them
as b − 1 conditional binomials with b − 1 distinct probabilities; the exact 32-bit sampler
(``binomial32``) needs one host table per probability and row shapes that depend on it, so here
the same law is drawn by a decomposition with few distinct probabilities.

Method (M = b − 1 barred states; Devroye 1986, Ch. XI §1, the multinomial by conditional
binomials; Ch. III §2 and Ch. X §4 for each binomial, ``binomial32``):

1. Total. H = h₁ + … + h_M ~ Binomial(m − 1, Mπ).
2. Split. A node holds S states and a count c; it splits into a left node of ⌊S/2⌋ states and
   a right node of S − ⌊S/2⌋ states, the left count ~ Binomial(c, ⌊S/2⌋/S), the right count
   c − left. Nodes of one state (leaves) pass through. The root holds the M states and H.
3. Leaves, left to right, are the states 1, …, M (column k − 1 = state k).

Proof that the law is the multinomial. (i) Grouping: the state of each example is an
independent categorical draw, so H, the number of examples in a barred state, is
Binomial(m − 1, Mπ), and given H = c the c barred examples are independent and each uniform
over the M barred states (the conditional law of one example given "barred" is π/(Mπ) = 1/M
per state, and the examples are independent): (h₁, …, h_M) | H = c ~ Multinomial(c; 1/M, …).
(ii) Splitting: if c balls are independent and uniform over a set A of S cells and A = L ∪ R
with |L| = ⌊S/2⌋, then the number in L is Binomial(c, |L|/S); given which balls fall in L
(hence given that number c_L), those balls are independent and uniform over L and the others
independent and uniform over R, independently of each other: the counts in L are
Multinomial(c_L; uniform over L), those in R Multinomial(c − c_L; uniform over R), conditionally
independent. By induction on S every node's count vector is the uniform multinomial over its
states, so the leaves are (h₁, …, h_M) in law. (iii) The multinomial with equal probabilities is
exchangeable in the M states, so any fixed bijection from leaves to states gives the same law;
the left-to-right order is used. Which table row a draw reads (window or digit path) depends
on its count only and both give the same law (``binomial32``), so the windows below affect
speed, never the law.

Few probabilities. The tree is static (it depends on M only) and at every level the node sizes
take at most two consecutive values (splitting sizes {s, s + 1} gives sizes among ⌊s/2⌋ … ⌈(s +
1)/2⌉, at most two consecutive values), so a level needs at most two split probabilities
⌊S/2⌋/S: one ``Binomial32Tables`` per (level, parent size S ≥ 2), its window around that
parent count's mean: the count of a node of S states is the sum of S cells of the multinomial,
marginally Binomial(m − 1, Sπ), and the window covers its mean ± 8 s.d. (as
``truncated.batch_size_table``); outside it, a draw reads the digit rows (``fallback_words``,
drawn only when some lane needs them). The root's count is m − 1 always, so its table's window
is that one count (a single row, one word). Nodes are grouped statically by size, so each
table draws only for its own nodes (all lanes × nodes of that size at once); M − 1 split draws
and one total per sample.

Certified deviation (``history_total_variation``): a binomial32 draw is within
``total_variation_bound`` τ of Binomial(c, q̃) for every count c, with q̃ the float64 probability
its table was built for; q̃ is the correctly rounded value of the exact q (Mπ for the total,
⌊S/2⌋/S for a split; exact when S is even). Rounding adds, per draw of count c,
TV(Bin(c, q), Bin(c, q̃)) ≤ min(c·|q − q̃|, |q − q̃|·√(c/(2q̃(1 − q̃)))) (a coupling of the c
trials; Pinsker with KL ≤ c·(q − q̃)²/(q̃(1 − q̃)), the χ² bound of the Bernoulli KL). Replacing
the draws of one sample by exact ones one at a time, the exact draws first (hybrid argument),
each step costs the expectation of its deviation over the exact law of its count, so c may be
replaced by its exact mean (concavity of √c): the rounding part is at most
Σ_draws min(δ·E[c], δ·√(E[c]/(2q̃(1 − q̃)))), computed exactly on the host (``fractions``) and
stored rounded up as float32. The total bound is Σ τ over the M draws plus the rounding part.
At the Dong & Ganesh (2026) §7.4 shape (p = 1793/14745600, b = 256, m = 14745600) it is
1.3·10⁻¹² per sample: τ ≈ 5·10⁻¹⁵ per split (the digit path's, which τ covers whatever the
count) times 254, and 5·10⁻¹⁴ of rounding.

Random sub-streams (``conventions.Stream.HISTORY``, then the tags below): the total draw's key
is fold_in(history key, 0), level ℓ's fold_in(history key, 1 + ℓ); under a draw site key, the
window words (all of its nodes, every table) are ``keys.word_pairs(fold_in(site, 0), …)`` and
table g's fallback words ``word_pairs(fold_in(site, 1 + g), …)``. Words are never drawn from a
key that is also folded (fold_in(k, i) is word pair i of k under the partitionable threefry).
Every lane's draws depend on its own key only, so the result does not depend on the number of
lanes, the chunking or the device count. These draws differ from the float64 kernel's (a
different decomposition): the 32-bit program has the same law, not the same draws.

Where the code runs: ``history_tables32`` and ``history_total_variation`` are host code (NumPy,
``fractions``); ``stationary_history32`` is un-jitted 32-bit device code (uint32 words, int32
counts) for use inside ``jax.jit`` under ``program32.scope()``.

References:
  Andy Dong and Arun Ganesh, "Privacy Amplification for BandMF via b-Min-Sep Subsampling",
  arXiv:2602.09338 (v2): Algorithm 2 and App. D.1 (the stationary history of the other examples)
  (docs/references.md).
  L. Devroye, *Non-Uniform Random Variate Generation*, Springer (1986): Ch. XI §1 (the
  conditional distribution method; the multinomial by conditional binomials), §III.2, §X.4.
"""

from __future__ import annotations

import fractions
import functools
import math
from typing import NamedTuple

import jax
import jax.numpy as jnp
import numpy as np

from jaxacct import _validate
from jaxacct.conventions import Stream
from jaxacct.montecarlo.engine import binomial32 as b32
from jaxacct.montecarlo.engine.kernels import _common
from jaxacct.montecarlo.engine.keys import word_pairs
from jaxacct.errors import InputError, InputTypeError

# Tags under the history key: the total, then one site per level.
_TOTAL_TAG = 0
_LEVEL_TAG = 1
# Tags under a draw site's key: the window words, then table g's fallback words at 1 + g.
_WINDOW_TAG = 0
_FALLBACK_TAG = 1
# Window of a split table's counts: the parent count's mean ± 8 s.d. (speed only).
_WINDOW_SD = 8.0


class HistoryTables32(NamedTuple):
  """Host tables of ``stationary_history32`` (a pytree of NumPy arrays, 32-bit dtypes only;
  tuple lengths and array shapes are static, values traced).

  Attributes:
    total: ``Binomial32Tables`` of H ~ Binomial(m − 1, (b − 1)π), window the count m − 1.
    splits: per level of the split tree, one ``Binomial32Tables`` per distinct parent size
      S ≥ 2 of that level, in increasing S: Binomial(c, ⌊S/2⌋/S), window around the mean
      of Binomial(m − 1, Sπ).
    others: m − 1, int32 scalar.
    min_sep: b, int32 scalar (fixes the tree; checked against ``stationary_history32``'s).
    probability_rounding: float32 scalar, rounded up: the certified total variation added by
      rounding the draws' probabilities to float64 (module docstring).
  """

  total: b32.Binomial32Tables
  splits: tuple
  others: np.ndarray
  min_sep: np.ndarray
  probability_rounding: np.ndarray


@functools.lru_cache(maxsize=None)
def _tree(states: int) -> tuple[tuple[int, ...], ...]:
  """The split tree of ``states`` leaves: per level, the node sizes left to right before it
  splits (levels until every node is a leaf; () for one state)."""
  levels, sizes = [], (states,)
  while any(s > 1 for s in sizes):
    levels.append(sizes)
    sizes = tuple(c for s in sizes for c in ((s // 2, s - s // 2) if s > 1 else (1,)))
  return tuple(levels)


def _split_sizes(sizes: tuple[int, ...]) -> list[int]:
  """The distinct sizes ≥ 2 of a level, increasing: the order of its tables."""
  return sorted({s for s in sizes if s > 1})


def _window(others: int, prob: float) -> tuple[int, int]:
  """(K, E): counts [K, K + E] cover the mean ± 8 s.d. of Binomial(others, prob)."""
  mean = others * prob
  spread = _WINDOW_SD * math.sqrt(others * prob * (1.0 - prob))
  base = max(0, math.floor(mean - spread))
  top = min(others, math.floor(mean + spread) + 1)
  return base, max(0, top - base)


def _sqrt_up(value: fractions.Fraction) -> fractions.Fraction:
  """An upper bound on √value to 2⁻¹²⁸ (exact integer square root of a rounded-up scaling)."""
  scale = 1 << 128
  n = math.ceil(value * scale * scale)
  root = math.isqrt(n)
  return fractions.Fraction(root + (root * root < n), scale)


def _rounding_deviation(mean_count: fractions.Fraction, exact: fractions.Fraction,
                        used: float) -> fractions.Fraction:
  """A bound on E TV(Bin(c, exact), Bin(c, used)) over counts of mean ``mean_count`` (module
  docstring): min(δ·E[c], δ·√(E[c]/(2q̃(1 − q̃)))), δ = |exact − used|."""
  delta = abs(fractions.Fraction(used) - exact)
  if delta == 0:
    return fractions.Fraction(0)
  linear = delta * mean_count
  if not 0.0 < used < 1.0:
    return linear
  q = fractions.Fraction(used)
  return min(linear, _sqrt_up(delta * delta * mean_count / (2 * q * (1 - q))))


def _round_up(value: fractions.Fraction) -> float:
  """The least float ≥ ``value`` (float(Fraction) rounds to nearest)."""
  result = float(value)
  return math.nextafter(result, math.inf) if fractions.Fraction(result) < value else result


def _checked_min_sep(min_sep) -> int:
  try:
    return _validate.integer_at_least('min_sep', min_sep, 2)
  except InputError as error:  # the same type (InputTypeError for a float)
    raise type(error)(f'{error} (b = 1 has no warm-start history)') from None


def _read_only(array: np.ndarray) -> np.ndarray:
  array.flags.writeable = False  # cached tables are shared by every caller
  return array


def history_tables32(sampling_prob, min_sep, dataset_size) -> HistoryTables32:
  """Host: the ``HistoryTables32`` of the warm-start history of truncated b-min-sep.

  One ``binomial32_tables`` per draw site and distinct probability (module docstring): the
  total, and per level of the split tree one per distinct parent size; every table serves
  counts up to m − 1. Built once per argument tuple (``functools.lru_cache``; arrays
  read-only).

  Args:
    sampling_prob: p in (0, 1].
    min_sep: b ≥ 2 (b = 1 has no warm-start history).
    dataset_size: m ≥ 1, with m − 1 ≤ 2³¹ − 1 (counts are int32 on device).

  Raises:
    ValueError / TypeError naming the argument; ValueError from ``binomial32_tables`` if a
    table would exceed its size limit.
  """
  p = _validate.probability('sampling_prob', sampling_prob)
  b = _checked_min_sep(min_sep)
  m = _validate.integer_at_least('dataset_size', dataset_size, 1)
  if m - 1 > b32.MAX_COUNT:
    raise InputError(f'dataset_size must be at most 2**31 = {b32.MAX_COUNT + 1} (counts are '
                     f'int32 on device), got {m}')
  return _history_tables(p, b, m)


@functools.lru_cache(maxsize=4)  # ~8 s and 23 MiB at the Dong & Ganesh (2026) §7.4 shape
def _history_tables(p: float, b: int, m: int) -> HistoryTables32:
  states, others = b - 1, m - 1
  exact_p = fractions.Fraction(p)
  state_prob = exact_p / (1 + states * exact_p)  # π, exact
  total_prob = states * state_prob
  total_used = float(total_prob)  # correctly rounded; 1 − q̃ is exact for q̃ ≥ 1/2 (binomial32)
  total = b32.binomial32_tables(total_used, others, base_count=others, max_extra=0)
  rounding = _rounding_deviation(fractions.Fraction(others), total_prob, total_used)
  splits = []
  for sizes in _tree(states):
    level = []
    for size in _split_sizes(sizes):
      exact = fractions.Fraction(size // 2, size)
      used = float(exact)
      base, extra = _window(others, float(size * state_prob))
      level.append(b32.binomial32_tables(used, others, base_count=base, max_extra=extra))
      rounding += sizes.count(size) * _rounding_deviation(others * size * state_prob, exact, used)
    splits.append(tuple(level))
  upper = _round_up(rounding)
  bound = np.float32(upper)
  if float(bound) < upper:  # float32 rounds to nearest: one step up
    bound = np.nextafter(bound, np.float32(np.inf))
  return HistoryTables32(total, tuple(splits), _read_only(np.array(others, np.int32)),
                         _read_only(np.array(b, np.int32)),
                         _read_only(np.array(bound, np.float32)))


def history_total_variation(tables: HistoryTables32) -> float:
  """Host: a certified bound on the total variation distance between the law of one sample's
  ``stationary_history32`` and the exact multinomial (π = p/(1 + (b − 1)p) exactly, p the float).

  Σ over the sample's draws (the total and M − 1 splits) of its table's
  ``binomial32.total_variation_bound``, plus ``tables.probability_rounding`` (module
  docstring); rounded up. Add it to δ̂ per sample as ``binomial32`` explains.
  """
  plan = _tree(int(tables.min_sep) - 1)
  total = fractions.Fraction(b32.total_variation_bound(tables.total))
  for sizes, level in zip(plan, tables.splits):
    for size, table in zip(_split_sizes(sizes), level):
      total += sizes.count(size) * fractions.Fraction(b32.total_variation_bound(table))
  total += fractions.Fraction(float(tables.probability_rounding))
  return _round_up(total)


def table_bytes(tables: HistoryTables32) -> int:
  """Host: bytes of all thresholds (what a device holds)."""
  return b32.table_bytes(tables.total) + sum(b32.table_bytes(t) for level in tables.splits
                                             for t in level)


# ---- device -------------------------------------------------------------------------------

def _words(keys: jax.Array, tag: int, length: int) -> tuple[jax.Array, jax.Array]:
  """(hi, lo) uint32 (N, length): ``word_pairs`` of fold_in(key, tag) per lane."""
  return jax.vmap(lambda key: word_pairs(jax.random.fold_in(key, tag), length))(keys)


def _site_draws(site_keys: jax.Array, groups) -> list[jax.Array]:
  """One site's binomial draws: ``groups`` is [(tables_g, counts_g int32 (N, K_g))]; returns
  [draws_g int32 (N, K_g)].

  All groups' window words come from one ``word_pairs`` call (node-major within a lane);
  group g's fallback words (the digit path, every node of the group) only when some lane needs
  them. Lane j of a group reads words of its own key only.
  """
  widths = [b32.window_words_per_draw(t) for t, _ in groups]
  hi, lo = _words(site_keys, _WINDOW_TAG,
                  sum(w * counts.shape[1] for w, (_, counts) in zip(widths, groups)))
  draws, start = [], 0
  for g, ((table, counts), width) in enumerate(zip(groups, widths)):
    num, nodes = counts.shape
    stop = start + width * nodes
    window = (hi[:, start:stop].reshape(num * nodes, width),
              lo[:, start:stop].reshape(num * nodes, width))
    start = stop
    full = b32.words_per_draw(table)

    def fallback(g=g, nodes=nodes, full=full, num=num):
      fhi, flo = _words(site_keys, _FALLBACK_TAG + g, nodes * full)
      return fhi.reshape(num * nodes, full), flo.reshape(num * nodes, full)
    draws.append(b32.binomial32(*window, counts.reshape(num * nodes), table,
                                fallback_words=fallback).reshape(num, nodes))
  return draws


def _check_structure(tables: HistoryTables32, min_sep) -> tuple[tuple[int, ...], ...]:
  b = _checked_min_sep(min_sep)
  if not isinstance(tables, HistoryTables32):
    raise InputTypeError(f'tables must be a HistoryTables32 (history_tables32), got {type(tables)}')
  plan = _tree(b - 1)
  stored = tables.min_sep
  mismatch = (isinstance(stored, (np.ndarray, np.generic)) and int(stored) != b) or (
      len(tables.splits) != len(plan)
      or any(len(level) != len(_split_sizes(sizes))
             for level, sizes in zip(tables.splits, plan)))
  if mismatch:
    raise InputError(f'min_sep = {b} does not match the tables (built for min_sep = '
                     f'{stored if isinstance(stored, (np.ndarray, np.generic)) else "?"})')
  return plan


def stationary_history32(keys: jax.Array, tables: HistoryTables32, min_sep: int) -> jax.Array:
  """Warm-start history of the m − 1 other examples in 32-bit code: int32 (N, b − 1) counts,
  column k − 1 = state k (Dong & Ganesh (2026) App. D.1).

  The total H ~ Binomial(m − 1, (b − 1)π), then the split tree of the module docstring (exact
  multinomial law, within ``history_total_variation(tables)``). Device code, un-jitted: call
  it inside ``jax.jit`` under ``program32.scope()`` (no 64-bit type); ``tables`` may be passed
  as a jit argument or closed over.

  Args:
    keys: (N,) sample keys; the draws use fold_in(key, ``Stream.HISTORY``) and its sub-keys.
    tables: ``history_tables32(p, min_sep, m)``.
    min_sep: b ≥ 2, static, equal to the tables' (checked against ``tables.min_sep`` when the
      tables are host arrays, i.e. closed over or un-jitted; as jit arguments only their
      structure can be checked, which some b share).

  Returns:
    int32 (N, b − 1); lane j depends on keys[j] only.
  """
  plan = _check_structure(tables, min_sep)
  if not hasattr(keys, 'shape') or len(keys.shape) < 1:
    raise InputError(f'keys must be an (N,) array of keys, got {keys!r}')
  num = keys.shape[0]
  history = _common.fold(keys, Stream.HISTORY)
  others = jnp.broadcast_to(jnp.asarray(tables.others, jnp.int32), (num, 1))
  counts = _site_draws(_common.fold(history, _TOTAL_TAG), [(tables.total, others)])[0]
  for level, (sizes, level_tables) in enumerate(zip(plan, tables.splits)):
    width = len(sizes)
    members = [np.flatnonzero(np.array(sizes) == size) for size in _split_sizes(sizes)]
    lefts = _site_draws(_common.fold(history, _LEVEL_TAG + level),
                        [(t, counts[:, idx]) for t, idx in zip(level_tables, members)])
    # Column of each node's left count in [counts | lefts…]: a leaf keeps its count.
    left_column = np.arange(width)
    start = width
    for idx in members:
      left_column[idx] = start + np.arange(idx.size)
      start += idx.size
    left = jnp.concatenate([counts, *lefts], axis=1)[:, left_column]
    right = counts - left
    children = [c for j, s in enumerate(sizes) for c in ((j, width + j) if s > 1 else (j,))]
    counts = jnp.concatenate([left, right], axis=1)[:, np.array(children)]
  return counts
