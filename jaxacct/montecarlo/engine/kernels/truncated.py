"""Kernel of truncated b-min-sep and truncated Poisson sampling (Dong & Ganesh (2026) App. D).

Batches larger than B = ``truncated_batch_size`` are cut to a uniformly random subset of
size B. The adversary of App. D also sees the other examples' pre-truncation batch sizes r
(their law is the same under D and D′), so every loss is conditioned on its own r, which
the kernel draws and returns as its ``Info``. Given r the pair of Corollary D.2 is
P = N(C·x^P, σ²I), Q = N(C·x^Q, σ²I), where a participation in a truncated round survives
w.p. t_i = B/(r_i + 1) and then has x^P = 2, x^Q = −1 (else x^P = 1, x^Q = 0 in untruncated
rounds). Both directions have a signal.

Random sub-streams of a sample key (``conventions.Stream``): ``TRIALS`` and ``START`` (the
sensitive example's chain, as ``bminsep``), ``REST_BATCH_SIZES`` (then ``RestStream.TABLE``
for the table path's uniforms and ``RestStream.ROUNDS`` + round for the general sampler),
``SURVIVAL`` (survival of a cut batch), ``HISTORY`` (the warm-start history, then state k
for the general sampler's draw of state k, and 0 for the uniforms of its table rows; the
32-bit program's history uses its own tags under it, ``history32.py``). The 32-bit program
(``precision="float32"``, section at the end) draws from the same sub-streams with exact
integer samplers (``binomial32.py``), so its batch sizes have the float64 law but other values.

Cost (benchmarks/RESULTS.md, "Monte Carlo cost"): at the Dong & Ganesh (2026) §7.4 shape the
batch sizes are one Binomial(k_i, p) per round, sequential in the pool sizes k_i. Everything that
does not depend on k_i is done for all rounds at once before the scan (table inversions, uniforms);
the scan drafts each round branch-free and the exact sampler reruns only for a block with
an unsure draft. Blocks without truncation draw no survival words, and ``add`` blocks
without truncation form no mean.

References:
  Andy Dong and Arun Ganesh, "Privacy Amplification for BandMF via b-Min-Sep Subsampling",
  arXiv:2602.09338 (v2): App. D (the adversary that sees r; D.1: Lemma D.1, Corollary D.2, the P/R
  and Q/R recursions and the sampling of (x, r)), §7.4 (docs/references.md).
"""

from __future__ import annotations

import dataclasses
import functools
from typing import Any, NamedTuple

import jax
import jax.numpy as jnp
import numpy as np
from jax import lax

from jaxacct import schemes
from jaxacct.conventions import Direction, RestStream, Stream
from jaxacct.montecarlo.engine.binomial import (INVERSION_MAX_MEAN, InversionRows, InversionTable,
                                         binomial, inversion_rows, inversion_table, row_binomial,
                                         row_draft, row_inputs, table_binomial, table_uniforms)
from jaxacct.montecarlo.engine import binomial32, margin
from jaxacct.montecarlo.engine.keys import word_pairs
from jaxacct.montecarlo.engine.kernels import _common, bminsep, history32
from jaxacct.montecarlo.engine.kernels.base import SchemeKernel, register


class TruncatedParams(NamedTuple):
  """Traced parameters of a truncated scheme.

  Attributes:
    sampling_prob: p, float64 scalar.
    truncated_batch_size: B, int64 scalar.
    dataset_size: m, int64 scalar.
    batch_size_table: the fast path of the other examples' batch-size draws
      (``binomial.InversionTable`` or, one row, ``binomial.InversionRows``) or None;
      its shape is static.
    history_rows: the fast path of the warm-start history (``binomial.InversionRows``,
      a row per state) or None.
  """

  sampling_prob: jax.Array
  truncated_batch_size: jax.Array
  dataset_size: jax.Array
  batch_size_table: Any = None
  history_rows: Any = None


class TruncatedInfo(NamedTuple):
  """rest_batch_sizes: r_i, the other examples' pre-truncation batch sizes, int32 (N, n)."""

  rest_batch_sizes: jax.Array


# Table fast path for the batch-size draws: the pool size k is covered to 8 s.d., by one CDF row
# per count if that takes at most _TABLE_MAX_ENTRIES entries, else by one row plus a remainder
# Binomial(k − K, p) of mean at most _TABLE_MAX_EXTRA_MEAN (small p).
_TABLE_WINDOW_SD = 8.0
_TABLE_MAX_EXTRA_MEAN = 4.0
_TABLE_MAX_ENTRIES = 1 << 20


def _row_length(count: float, prob: float) -> float:
  """The span of a CDF row of Binomial(count, prob) (±9 s.d. and a margin)."""
  return 2 * (9.0 * (count * prob * (1.0 - prob)) ** 0.5 + 2.0) + 1.0


@functools.lru_cache(maxsize=32)  # schemes are frozen and hashable; building takes ~0.1 s
def batch_size_table(scheme) -> InversionTable | InversionRows | None:
  """Host: the table for a truncated scheme's batch-size draws, or None.

  Under warm start each other example is barred independently w.p. (b − 1)p₀,
  so the pool size is k = (m − 1) − Binomial(m − 1, (b − 1)p₀), mean μ and
  s.d. s; the table covers k ∈ [μ − 8s, μ + 8s] (b = 1: k = m − 1 exactly), by an
  ``InversionTable`` row per count, or else by one ``InversionRows`` row of
  Binomial(⌊μ − 8s⌋, p) and a remainder of mean ≤ 4. Counts outside (cold-start
  rounds, far tails) fall back to the exact general sampler, so the table only
  affects speed. None when p > 1/2 or no table of at most 2²⁰ entries covers the
  window.
  """
  p = float(scheme.sampling_prob)
  others = scheme.dataset_size - 1
  if p > 0.5 or others < 1:
    return None
  barred = (scheme.min_sep - 1) * scheme.expected_participation_rate
  mean = others * (1.0 - barred)
  spread = _TABLE_WINDOW_SD * (others * barred * (1.0 - barred)) ** 0.5
  base = max(0, int(mean - spread))
  top = min(others, int(mean + spread) + 1)
  if (top - base + 1) * _row_length(top, p) <= _TABLE_MAX_ENTRIES:
    return inversion_table(base, top - base + 1, p, 0)
  max_extra = int(_TABLE_MAX_EXTRA_MEAN / p)
  if base + max_extra < top:
    return None
  return inversion_rows([base], [p], [max_extra])


@functools.lru_cache(maxsize=32)
def history_rows(scheme) -> InversionRows | None:
  """Host: ``InversionRows`` for the warm-start history's draws (a row per state), or None.

  Draw k of ``stationary_history`` is Binomial(R_k, c_k) with
  c_k = π/(1 − (k − 1)π), π = p/(1 + (b − 1)p), and R_k = (m − 1) − (h₁ + … + h_{k−1}),
  i.e. (m − 1) − Binomial(m − 1, (k − 1)π): mean μ_k, s.d. s_k. Row k covers
  R_k ∈ [μ_k − 8s_k, μ_k + 8s_k]. None (the general draws are used) for cold start,
  b = 1, some c_k > 1/2, a remainder mean over 4, rows over 2²⁰ entries, or draws of
  mean ≤ 10 (which the general sampler inverts directly, as cheaply; the rows replace
  its rejection sampler).
  """
  b = scheme.min_sep
  others = scheme.dataset_size - 1
  if not scheme.warm_start or b < 2 or others < 1:
    return None
  p = float(scheme.sampling_prob)
  state_prob = p / (1.0 + (b - 1) * p)
  earlier = np.arange(b - 1) * state_prob  # (k − 1)π for k = 1 … b − 1
  conditional = np.minimum(state_prob / (1.0 - earlier), 1.0)
  mean = others * (1.0 - earlier)
  spread = _TABLE_WINDOW_SD * np.sqrt(others * earlier * (1.0 - earlier))
  base = np.maximum(0, np.floor(mean - spread)).astype(np.int64)
  max_extra = np.minimum(others, np.floor(mean + spread) + 1).astype(np.int64) - base
  length = max(_row_length(c, q) for c, q in zip(base, conditional))
  if (np.any(conditional > 0.5) or np.any(max_extra * conditional > _TABLE_MAX_EXTRA_MEAN)
      or (b - 1) * 2 ** int(length).bit_length() > _TABLE_MAX_ENTRIES
      or np.min(mean * conditional) <= INVERSION_MAX_MEAN):
    return None
  return inversion_rows(base, conditional, max_extra)


def _drafted(run, draft, exact):
  """``run(draw, dtype)`` with the branch-free ``draft`` (``binomial.row_draft``), rerun
  with the ``exact`` draws only if some draft was unsure (−1); same draws either way.

  The draft runs on integral float64 counts (exact below 2⁵³), which XLA vectorised
  better than int64 in a scan (1.6 against 2.2 µs per round at 128 lanes).
  """
  drafted = run(draft, jnp.float64).astype(jnp.int64)
  return lax.cond(jnp.any(drafted < 0), lambda: run(exact, jnp.int64), lambda: drafted)


def stationary_history(keys: jax.Array, params: TruncatedParams, min_sep: int) -> jax.Array:
  """Warm-start history of the m − 1 other examples: (N, b − 1) counts, column k − 1 = state k.

  Under Algorithm 2 every example is independently in state 0 (available) w.p.
  1/(1 + (b−1)p) and in each barred state k ∈ {1, …, b−1} (it joined in virtual
  round −k) w.p. p/(1 + (b−1)p) (Dong & Ganesh (2026) Algorithm 2); the counts are
  one multinomial draw, taken as b − 1 conditional binomials: draw k uses the key
  fold_in(history key, k), or, with ``params.history_rows``, row k − 1 of those ``InversionRows``
  (their uniforms from fold_in(history key, 0); drafted, exact where unsure).
  """
  b = min_sep
  p = params.sampling_prob
  others = params.dataset_size - 1
  state_prob = p / (1.0 + (b - 1) * p)
  history_keys = _common.fold(keys, Stream.HISTORY)
  rows = params.history_rows
  states = jnp.arange(1, b, dtype=jnp.uint32)
  remaining = jnp.broadcast_to(others, keys.shape[:1]).astype(jnp.int64)
  if rows is not None:
    index, uniforms = row_inputs(_common.fold(history_keys, 0), rows, np.arange(b - 1))

    def run(state_draw, dtype):
      def step(remaining, xs):
        count = state_draw(xs, remaining)
        return remaining - count, count
      return lax.scan(step, remaining.astype(dtype), (states, index, uniforms))[1]

    def draft(xs, remaining):
      k, index_k, uniform_k = xs
      return row_draft(index_k, uniform_k, remaining, rows, k - 1)

    def exact(xs, remaining):
      k, index_k, uniform_k = xs
      return row_binomial(index_k, uniform_k, remaining, rows, k - 1,
                          lambda: jax.vmap(lambda key: jax.random.fold_in(key, k))(history_keys))
    return _drafted(run, draft, exact).T

  def draw(remaining, k):
    # Pr[state k | not in states 1 … k − 1] for categories in the order 1, …, b − 1, 0.
    conditional = jnp.minimum(
        state_prob * _common.reciprocal(1.0 - (k.astype(jnp.float64) - 1) * state_prob), 1.0)
    count = binomial(jax.vmap(lambda key: jax.random.fold_in(key, k))(history_keys), remaining,
                      conditional)
    return remaining - count, count

  _, counts = lax.scan(draw, remaining, states)
  return counts.T


def rest_batch_sizes(keys: jax.Array, params: TruncatedParams, iterations: int, min_sep: int,
                     warm_start: bool) -> jax.Array:
  """The other examples' pre-truncation batch sizes r, batch-major int32 (N, n).

  r_i ~ Binomial(k_i, p) with k_i = (m − 1) − Σ_{j=i−b+1}^{i−1} r_j: examples
  sampled in the last b − 1 rounds are barred, including those truncated away
  (Dong & Ganesh (2026) App. D). Cold start has no history; warm start
  starts from ``stationary_history``. A ``lax.scan`` over rounds keeps the last
  b − 1 counts in a circular buffer (before round i, slot i mod (b − 1) holds
  r_{i−b+1}, the count leaving the window after round i; it is carried
  alongside). With a one-row table (``InversionRows``; small p, large m: Dong & Ganesh
  (2026) §7.4) the table inversion does not depend on the pool size, so it is done for all
  rounds before the scan, and the scan first drafts every round without branches
  (``binomial.row_draft``); only a block with an unsure draft (a pool outside the
  table's window or a remainder of ≥ 12, ~10⁻³ of blocks there) runs the exact
  sampler, which gives the same draws wherever the draft was sure.
  """
  n, b = iterations, min_sep
  num = keys.shape[0]
  p = params.sampling_prob
  table = params.batch_size_table
  others = jnp.broadcast_to(params.dataset_size - 1, (num,)).astype(jnp.int64)
  rest_keys = _common.fold(keys, Stream.REST_BATCH_SIZES)
  # Separate subtrees: the table path's uniforms (all rounds, drawn up front), and one key
  # per round for the general sampler (the table path's rare fallback).
  table_keys = _common.fold(rest_keys, RestStream.TABLE)
  round_keys = _common.fold(rest_keys, RestStream.ROUNDS)
  one_row = isinstance(table, InversionRows)
  if one_row:
    index, uniforms = row_inputs(table_keys, table, np.zeros(n, np.int64))
  else:
    uniforms = table_uniforms(table_keys, n) if table is not None else jnp.zeros((n, 0))
    index = jnp.zeros((n, 0), jnp.int32)

  def keys_of_round(i):
    return jax.vmap(lambda k: jax.random.fold_in(k, i))(round_keys)

  def draw(inputs, counts):
    i, u, index_i = inputs
    if one_row:
      return row_binomial(index_i, u, counts, table, 0, lambda: keys_of_round(i))
    if table is None:
      return binomial(keys_of_round(i), counts, p)
    return table_binomial(u, counts, p, table, lambda: keys_of_round(i))

  def draft(inputs, counts):
    _, u, index_i = inputs
    return row_draft(index_i, u, counts, table, 0)

  rounds = (jnp.arange(n, dtype=jnp.uint32), uniforms, index)
  if b == 1:
    def independent(round_draw, dtype=jnp.int64):
      return lax.scan(lambda _, xs: (None, round_draw(xs, others.astype(dtype))), None,
                      rounds)[1]
    rest = _drafted(independent, draft, draw) if one_row else independent(draw)
    return rest.T.astype(jnp.int32)
  if warm_start:
    history = stationary_history(keys, params, b)  # column k − 1: joined in round −k
    # Round −k lives in slot (−k) mod (b − 1).
    slots = (-jnp.arange(1, b)) % (b - 1)
    buffer = jnp.zeros((b - 1, num), jnp.int64).at[slots].set(history.T)
  else:
    buffer = jnp.zeros((b - 1, num), jnp.int64)

  def chain(round_draw, dtype=jnp.int64):
    def step(carry, xs):
      buffer, blocked, leaving = carry
      i = xs[0]
      draws = round_draw(xs, others.astype(dtype) - blocked)
      buffer = lax.dynamic_update_index_in_dim(buffer, draws, i % (b - 1), axis=0)
      # Read the draws back from the buffer: with three consumers (buffer, window sum,
      # output) XLA fused the draw's arithmetic into each of them and computed it three times.
      draws = lax.dynamic_index_in_dim(buffer, i % (b - 1), keepdims=False)
      # Read the next leaving count *after* the write: reading the slot before overwriting
      # it made XLA copy the whole (b − 1, N) buffer every round (6× slower at b = 256).
      upcoming = lax.dynamic_index_in_dim(buffer, (i + 1) % (b - 1), keepdims=False)
      return (buffer, blocked + draws - leaving, upcoming), draws
    start = buffer.astype(dtype)
    return lax.scan(step, (start, jnp.sum(start, axis=0), start[0]), rounds)[1]

  rest = _drafted(chain, draft, draw) if one_row else chain(draw)
  return rest.T.astype(jnp.int32)


def truncated_weights(x: jax.Array, rest: jax.Array, keys: jax.Array, params: TruncatedParams,
                      direction: str) -> jax.Array:
  """The coefficients x^P (``remove``) or x^Q (``add``) of Corollary D.2, (N, n) int8.

  In a round where the sensitive example participates and r_i ≥ B (truncation),
  it survives w.p. t_i = B/(r_i + 1); then x^P = 2 and x^Q = −1. Without
  truncation x^P = 1, x^Q = 0; otherwise both are 0. The survival words are drawn only
  for a block in which the example takes part in some truncated round (they decide
  nothing elsewhere; at Dong & Ganesh (2026) §7.4 almost no block has one).
  """
  n = x.shape[1]
  bound = params.truncated_batch_size
  truncation = rest >= bound
  candidates = x & truncation

  def survivors():
    words = _common.stream_words(keys, Stream.SURVIVAL, n)
    uniform = (words.astype(jnp.float64) + 0.5) * 2.0**-64
    return candidates & (uniform * (rest.astype(jnp.float64) + 1.0) < bound.astype(jnp.float64))

  kept = lax.cond(jnp.any(candidates), survivors, lambda: candidates)
  if direction == Direction.ADD:
    return jnp.where(kept, -1, 0).astype(jnp.int8)
  return jnp.where(kept, 2, jnp.where(x & ~truncation, 1, 0)).astype(jnp.int8)


def log_ratio(d: jax.Array, norms: jax.Array, rest: jax.Array, params: TruncatedParams,
              noise_multiplier: jax.Array, min_sep: int, warm_start: bool) -> jax.Array:
  """ln P(y)/Q(y) of truncated b-min-sep given the other examples' batch sizes r.

  The pair of Corollary D.2 is compared through the reference R = N(0, σ²I)
  (Dong & Ganesh (2026) App. D.1, in log space): with ℓ_i(μ) = (2μ d_i − μ² s_i)/(2σ²) and
  t_i = B/(r_i + 1),

    a^P_i = ℓ_i(1) if r_i < B else logaddexp(log t_i + ℓ_i(2), log(1 − t_i)),
    a^Q_i = 0      if r_i < B else logaddexp(log t_i + ℓ_i(−1), log(1 − t_i)),

  each runs the recursion of Eq. (1) (``bminsep.log_ratio``: the b − 1 barred
  rounds after a participation hold also for Q/R and for truncated-away
  participations), the warm-start combination is applied to P/R and to Q/R
  separately, and ln P/Q = ln P/R − ln Q/R. Both recursions run as one scan of
  2N rows. A block of samples without any truncated round takes the
  untruncated recursion instead (a^Q ≡ 0 makes Q/R ≡ 1), which is exact and
  avoids the mixture terms' transcendentals.

  Args:
    d: sliding dot products Cᵀy, (N, n).
    norms: truncated column squared norms s, (1, n).
    rest: r, (N, n) integers.
    params: p and B (traced).
    noise_multiplier: σ (traced).
    min_sep, warm_start: static.
  """
  truncation = rest >= params.truncated_batch_size

  def untruncated():
    ell = (2.0 * d - norms) * _common.inverse_two_variance(noise_multiplier, d.dtype)
    return bminsep.log_ratio(ell, params.sampling_prob, min_sep, warm_start)

  # Without a truncated round, a^Q ≡ 0 gives Q/R = 1 exactly and a^P = ℓ(1): the untruncated
  # recursion. Realistic truncation is rare (~10⁻⁹ per round at Dong & Ganesh (2026) §7.4), so
  # a block almost never pays for the mixture terms below (their transcendentals on every entry).
  return lax.cond(jnp.any(truncation), lambda: _mixture_log_ratio(
      d, norms, rest, truncation, params, noise_multiplier, min_sep, warm_start), untruncated)


def _mixture_log_ratio(d, norms, rest, truncation, params, noise_multiplier, min_sep,
                       warm_start):
  dtype = d.dtype
  scale = _common.inverse_two_variance(noise_multiplier, dtype)
  survival = (params.truncated_batch_size.astype(jnp.float64)
              / (rest.astype(jnp.float64) + 1.0))
  log_t = jnp.log(jnp.minimum(survival, 1.0)).astype(dtype)
  log_not_t = jnp.log1p(-jnp.minimum(survival, 1.0)).astype(dtype)  # finite when r ≥ B
  ell_one = (2.0 * d - norms) * scale
  ell_two = (4.0 * d - 4.0 * norms) * scale
  ell_minus_one = (-2.0 * d - norms) * scale
  a_p = jnp.where(truncation, jnp.logaddexp(log_t + ell_two, log_not_t), ell_one)
  a_q = jnp.where(truncation, jnp.logaddexp(log_t + ell_minus_one, log_not_t), 0.0)
  both = bminsep.log_ratio(jnp.concatenate([a_p, a_q.astype(dtype)]), params.sampling_prob,
                           min_sep, warm_start)
  num = d.shape[0]
  return both[:num] - both[num:]


# ---- The 32-bit program (precision="float32"): exact integer batch sizes and survival
# (``montecarlo/engine/binomial32.py``), the participation of ``bminsep.participation32``, and the
# certified margin of ``montecarlo/engine/margin.py`` through the P/R and Q/R mixtures.


class TruncatedParams32(NamedTuple):
  """Traced parameters of the 32-bit truncated program (host-built, 32-bit types only).

  Attributes:
    base: the b-min-sep ``bminsep.Params32`` (participation thresholds, ``Chain32``);
    margin: ``margin.MarginConstants`` with entries of C·x up to twice a coefficient (x^P = 2);
    batch_tables: ``binomial32.Binomial32Tables`` of r_i ~ Binomial(k_i, p), k_i ≤ m − 1, with a
      window around the stationary pool size;
    history: ``history32.HistoryTables32`` (warm start) or None;
    truncated_batch_size: B, int32; others: m − 1, int32;
    log_truncated_batch_size: ln B rounded to nearest, float32.
  """

  base: Any
  margin: Any
  batch_tables: Any
  history: Any
  truncated_batch_size: Any
  others: Any
  log_truncated_batch_size: Any


def batch_tables32(scheme) -> binomial32.Binomial32Tables:
  """Host: the ``binomial32`` tables of the batch-size draws r_i ~ Binomial(k_i, p), k_i ≤ m − 1,
  with the window of ``batch_size_table`` (k within 8 s.d. of the stationary pool size; b = 1:
  k = m − 1 exactly): a window draw reads 1 + ⌈bits(E)/r⌉ rows, others every digit row."""
  others = scheme.dataset_size - 1
  barred = (scheme.min_sep - 1) * scheme.expected_participation_rate
  mean = others * (1.0 - barred)
  spread = _TABLE_WINDOW_SD * (others * barred * (1.0 - barred)) ** 0.5
  base = max(0, int(mean - spread))
  top = min(others, int(mean + spread) + 1)
  return binomial32.binomial32_tables(float(scheme.sampling_prob), others, base_count=base,
                                      max_extra=top - base)


def rest_batch_sizes32(keys: jax.Array, params: TruncatedParams32, iterations: int,
                       min_sep: int, warm_start: bool) -> jax.Array:
  """``rest_batch_sizes`` in 32-bit code: r, int32 (N, n), of the same law (within the tables'
  certified total variation per draw, ``binomial32``), from the same sub-streams.

  The window path's words of every round are drawn before the scan (``RestStream.TABLE``); a
  round with a pool outside the window (cold-start rounds, far tails) draws the digit path's
  words from its round key (``RestStream.ROUNDS`` + round), under the sampler's ``lax.cond``.
  """
  n, b = iterations, min_sep
  num = keys.shape[0]
  tables = params.batch_tables
  rest_keys = _common.fold(keys, Stream.REST_BATCH_SIZES)
  width = binomial32.window_words_per_draw(tables)
  hi, lo = _common.stream_word_pairs(rest_keys, RestStream.TABLE, n * width)
  hi, lo = (jnp.moveaxis(w.reshape(num, n, width), 1, 0) for w in (hi, lo))
  round_keys = _common.fold(rest_keys, RestStream.ROUNDS)
  full = binomial32.words_per_draw(tables)
  others = jnp.broadcast_to(params.others, (num,)).astype(jnp.int32)

  def draw(xs, pools):
    i, hi_i, lo_i = xs
    return binomial32.binomial32(
        hi_i, lo_i, pools, tables,
        fallback_words=lambda: jax.vmap(lambda k: word_pairs(jax.random.fold_in(k, i), full))(
            round_keys))

  rounds = (jnp.arange(n, dtype=jnp.uint32), hi, lo)
  if b == 1:
    return lax.scan(lambda _, xs: (None, draw(xs, others)), None, rounds)[1].T
  if warm_start:
    history = history32.stationary_history32(keys, params.history, b)  # column k − 1: round −k
    slots = (-jnp.arange(1, b)) % (b - 1)
    buffer = jnp.zeros((b - 1, num), jnp.int32).at[slots].set(history.T)
  else:
    buffer = jnp.zeros((b - 1, num), jnp.int32)

  def step(carry, xs):
    buffer, blocked, leaving = carry
    i = xs[0].astype(jnp.int32)
    draws = draw(xs, others - blocked)
    buffer = lax.dynamic_update_index_in_dim(buffer, draws, i % (b - 1), axis=0)
    upcoming = lax.dynamic_index_in_dim(buffer, (i + 1) % (b - 1), keepdims=False)
    return (buffer, blocked + draws - leaving, upcoming), draws
  return lax.scan(step, (buffer, jnp.sum(buffer, axis=0), buffer[0]), rounds)[1].T


def _survival_thresholds(rest: jax.Array, bound: jax.Array) -> tuple[jax.Array, jax.Array]:
  """(hi, lo) uint32 of T(r) = ⌊Y − ½⌋ rounded so that W ≤ T(r) ⟺ (W + ½)·(r + 1) < B·2⁶⁴,
  Y = B·2⁶⁴/(r + 1), for r ≥ B (so Y < 2⁶⁴): the float64 program's survival test
  (W + ½)·2⁻⁶⁴·(r + 1) < B in exact integers.

  Y = q + f with q = ⌊Y⌋ by 64 steps of binary long division (the remainder stays below
  r + 1 < 2³¹, so 2·remainder fits in uint32); W + ½ < Y ⟺ W ≤ q − 1 + [f > ½], f > ½ ⟺
  2·remainder > r + 1.
  """
  divisor = (rest + 1).astype(jnp.uint32)
  remainder = jnp.broadcast_to(bound.astype(jnp.uint32), divisor.shape)
  quotient = [jnp.zeros_like(divisor), jnp.zeros_like(divisor)]  # hi, lo
  for half in range(2):
    word = quotient[half]
    for _ in range(32):
      remainder = remainder * jnp.uint32(2)
      bit = remainder >= divisor
      remainder = jnp.where(bit, remainder - divisor, remainder)
      word = word * jnp.uint32(2) + bit.astype(jnp.uint32)
    quotient[half] = word
  q_hi, q_lo = quotient
  round_up = (remainder * jnp.uint32(2) > divisor).astype(jnp.uint32)
  # T = q − 1 + round_up, a 64-bit subtraction of (1 − round_up) ∈ {0, 1} with borrow (q ≥ 2³³).
  borrow = ((q_lo == 0) & (round_up == 0)).astype(jnp.uint32)
  return q_hi - borrow, q_lo - (jnp.uint32(1) - round_up)


def truncated_weights32(x: jax.Array, rest: jax.Array, keys: jax.Array,
                        params: TruncatedParams32, direction: str) -> jax.Array:
  """``truncated_weights`` in 32-bit code: the same survival words, compared exactly (int8)."""
  n = x.shape[1]
  bound = params.truncated_batch_size
  truncation = rest >= bound
  candidates = x & truncation

  def survivors():
    hi, lo = _common.stream_word_pairs(keys, Stream.SURVIVAL, n)
    t_hi, t_lo = _survival_thresholds(jnp.maximum(rest, bound), bound)
    return candidates & _common.words_at_most(hi, lo, t_hi, t_lo)

  kept = lax.cond(jnp.any(candidates), survivors, lambda: candidates)
  if direction == Direction.ADD:
    return jnp.where(kept, -1, 0).astype(jnp.int8)
  return jnp.where(kept, 2, jnp.where(x & ~truncation, 1, 0)).astype(jnp.int8)


def log_ratio_with_margin32(d: jax.Array, norms: jax.Array, rest: jax.Array,
                            params: TruncatedParams32, noise_multiplier: jax.Array,
                            kappa: jax.Array, product_error: jax.Array, min_sep: int,
                            warm_start: bool) -> tuple[jax.Array, jax.Array]:
  """32-bit program: (L̂, η) of truncated b-min-sep with |L̂ − L| ≤ η (``margin`` step 10).

  As ``log_ratio``: a^P_i and a^Q_i (mixtures in truncated rounds) run the recursion of Eq. (1)
  separately and L = ln P/R − ln Q/R; each recursion's margin is ``bminsep.log_ratio_with_margin``
  with the per-round δ of its a_i (``margin.truncated_round_errors``), plus the subtraction's
  rounding. A block without a truncated round takes the untruncated recursion (a^Q ≡ 0, exact).
  """
  base, constants = params.base, params.margin
  truncation = rest >= params.truncated_batch_size
  # The values use the device's 1/(2σ̂²), as every kernel; κ ≥ 1/(2σ²) enters only the bounds.
  scale = _common.inverse_two_variance(noise_multiplier, d.dtype)
  ell_one = (2.0 * d - norms) * scale

  def untruncated():
    delta, ratio_max = margin.ratio_bounds(d, product_error, kappa, constants)
    return bminsep.log_ratio_with_margin(ell_one, delta, ratio_max, base.chain, constants,
                                         min_sep, warm_start)

  def mixtures():
    # r + 1 formed in float32 (r ≤ m − 1 may be 2³¹ − 1, where int32 r + 1 wraps); r + 1 − B
    # as (r − B) + 1 in int32, exact for r ≥ B (the rounds where it is used).
    count = rest.astype(jnp.float32) + 1.0
    log_t = params.log_truncated_batch_size - jnp.log(count)
    log_not_t = jnp.log(((rest - params.truncated_batch_size) + 1).astype(jnp.float32) / count)
    ell_two = (4.0 * d - 4.0 * norms) * scale
    ell_minus_one = (-2.0 * d - norms) * scale
    a_p = jnp.where(truncation, jnp.logaddexp(log_t + ell_two, log_not_t), ell_one)
    a_q = jnp.where(truncation, jnp.logaddexp(log_t + ell_minus_one, log_not_t), 0.0)
    (delta_p, max_p), (delta_q, max_q) = margin.truncated_round_errors(
        d, product_error, kappa, constants, truncation, params.log_truncated_batch_size,
        log_t, log_not_t, a_p, a_q)
    loss_p, eta_p = bminsep.log_ratio_with_margin(a_p, delta_p, max_p, base.chain, constants,
                                                  min_sep, warm_start)
    loss_q, eta_q = bminsep.log_ratio_with_margin(a_q, delta_q, max_q, base.chain, constants,
                                                  min_sep, warm_start)
    losses = loss_p - loss_q
    return losses, eta_p + eta_q + 1.01 * margin.UNIT_ROUNDOFF * jnp.abs(losses)

  return lax.cond(jnp.any(truncation), mixtures, untruncated)


@register
@dataclasses.dataclass(frozen=True)
class TruncatedBMinSepKernel(SchemeKernel):
  """Truncated b-min-sep (b = 1: truncated Poisson), banded C only (App. D).

  Attributes: iterations n, min_sep b, warm_start (False when b = 1), dtype.
  """

  schemes = (schemes.Poisson, schemes.BMinSep)
  releases_batch_sizes = True

  iterations: int
  min_sep: int
  warm_start: bool
  dtype: str

  @classmethod
  def refusal(cls, scheme) -> str | None:
    return None if scheme.truncates else 'untruncated schemes use the b-min-sep kernel'

  @classmethod
  def build(cls, mechanism, dtype: np.dtype) -> 'TruncatedBMinSepKernel':
    b, warm = bminsep.chain_of(mechanism.scheme)
    return cls(mechanism.iterations, b, warm, dtype.name)



  def params(self, mechanism) -> TruncatedParams | TruncatedParams32:
    scheme = mechanism.scheme
    if self.dtype == 'float32':
      p = float(scheme.sampling_prob)
      base = bminsep.BMinSepKernel(self.iterations, self.min_sep, self.warm_start,
                                   self.dtype).params(mechanism)
      return TruncatedParams32(
          base, margin.margin_constants(_common.rounding_shape(mechanism), p, multiplicity=2),
          batch_tables32(scheme),
          history32.history_tables32(p, self.min_sep, scheme.dataset_size)
          if self.warm_start else None,
          np.int32(scheme.truncated_batch_size), np.int32(scheme.dataset_size - 1),
          np.float32(np.log(scheme.truncated_batch_size)))
    return TruncatedParams(
        jnp.asarray(float(scheme.sampling_prob), jnp.float64),
        jnp.asarray(scheme.truncated_batch_size, jnp.int64),
        jnp.asarray(scheme.dataset_size, jnp.int64), batch_size_table(scheme),
        history_rows(scheme) if self.warm_start else None)

  def has_signal(self, direction: str) -> bool:
    del direction  # C·x^Q ≠ 0 in truncated rounds
    return True

  def info_from_batch_sizes(self, rest_batch_sizes) -> TruncatedInfo:
    return TruncatedInfo(rest_batch_sizes)

  def batch_sizes_of(self, info) -> jax.Array:
    return info.rest_batch_sizes

  def law_error(self, params) -> float:
    """Host: the certified total variation per sample of the 32-bit program's batch sizes
    (n draws) and history (``binomial32``, ``history32``); 0 in float64."""
    if self.dtype != 'float32':
      return 0.0
    error = self.iterations * binomial32.total_variation_bound(params.batch_tables)
    if params.history is not None:
        error += history32.history_total_variation(params.history)
    return float(np.nextafter(error * (1.0 + 2.0**-40), np.inf))

  def sample_mean(self, keys, params, view, direction):
    if self.dtype == 'float32':
      rest = rest_batch_sizes32(keys, params, self.iterations, self.min_sep, self.warm_start)
      x = bminsep.participation32(keys, params.base, self.iterations, self.min_sep,
                                  self.warm_start)
      weights = truncated_weights32(x, rest, keys, params, direction)
    else:
      rest = rest_batch_sizes(keys, params, self.iterations, self.min_sep, self.warm_start)
      x = bminsep.participation(keys, params.sampling_prob, self.iterations, self.min_sep,
                                self.warm_start)
      weights = truncated_weights(x, rest, keys, params, direction)
    if direction == Direction.REMOVE:
      return view.separated_mean(weights, self.dtype), TruncatedInfo(rest)
    # x^Q is 0 outside truncated rounds: most blocks of ``add`` have no mean at all.
    def mean():
      return view.separated_mean(weights, self.dtype)
    zero = jax.eval_shape(mean)
    return (lax.cond(jnp.any(weights != 0), mean, lambda: jnp.zeros(zero.shape, zero.dtype)),
            TruncatedInfo(rest))

  def log_ratio_with_margin(self, d, params, noise_multiplier, kappa, view, info, direction,
                            product_error):
    """32-bit program: (L̂, η) per sample (``margin`` proof step 10)."""
    norms = view.charge(direction, self.iterations).astype(d.dtype)[None, :]
    return log_ratio_with_margin32(d, norms, info.rest_batch_sizes, params, noise_multiplier,
                                   kappa, product_error, self.min_sep, self.warm_start)

  def log_ratio(self, d, params, noise_multiplier, view, info, direction):
    norms = view.charge(direction, self.iterations).astype(d.dtype)[None, :]
    return log_ratio(d, norms, info.rest_batch_sizes, params, noise_multiplier, self.min_sep,
                     self.warm_start)
