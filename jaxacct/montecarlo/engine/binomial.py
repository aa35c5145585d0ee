"""Exact Binomial(count, p) draws for many counts at once (device, JAX).

The truncated b-min-sep sampler draws one binomial per sample and round
(n·N draws per block), so this is its hot path. ``jax.random.binomial`` runs
both of its algorithms on every element inside ``while`` loops and measured
~260–500 ns per draw on a 2-core CPU (benchmarks/RESULTS.md). Here:

- mean count·q > 10 (q = min(p, 1 − p)): BTRS, the transformed rejection
  method with squeeze of Hörmann (1993), with ``ATTEMPTS`` proposals unrolled
  (branch-free, vectorised) and a ``while`` loop only for the rare lanes that
  rejected all of them (probability < 10⁻³ per lane);
- mean ≤ 10: inversion of the CDF by the pmf recurrence, in a ``while`` loop
  that only runs when some lane needs it;
- p > 1/2 draws count − Binomial(count, 1 − p);
- optionally (``InversionTable``), when the counts stay in a known window:
  inversion of host-built CDF tables of Binomial(K + j, p), one row per count
  (a narrow window), or one row plus Y ~ Binomial(count − K, p) of small mean
  by the pmf recurrence (small p, e.g. the production shape of Dong & Ganesh
  (2026) §7.4).
  Lanes outside the window fall back to the exact general sampler;
- ``InversionRows``: the one-row form with a row per kind of draw (the same row
  for every round of the §7.4 batch sizes, a row per state of the warm-start
  history): X does not depend on the count, so a run's X are all inverted before
  its sequential scan (``row_inputs``), which drafts X + Y without branches
  (``row_draft``) and reruns the exact draws (``row_binomial``) only if some
  draft was unsure.

Both methods are exact samplers given exact arithmetic. In float64 the law
deviates from Binomial(count, p) only by rounding and by the Stirling series
of log k! in the BTRS acceptance test, truncated after the k⁻⁷ term (error
< 1/(1188·(k+1)⁹) ≤ 4·10⁻¹³; k ≤ 9 use exact table values). Together they
perturb the log of the acceptance bound by η, measured against 40-digit
mpmath at ±5 s.d.: 10⁻¹³ at count 3000, 4·10⁻¹³ at the §7.4 shape (count
1.4·10⁷, mean 1.8·10³), 3·10⁻¹¹ at mean 4.4·10⁵ (the (count + 1)·log(·)
term uses ``log1p``; without it η reached 10⁻⁹). The sampled pmf is then
within a factor e^{±η} of the exact one and a sequence of T draws within
e^{±Tη}, so δ̂ of a T = 10⁴-round run moves by a relative 10⁻⁶ at most (and
~10⁻⁹ at realistic means), far under its Monte Carlo error. The inversion
stops at the float CDF's rounding plateau (mass ≲ 10⁻¹⁵ per draw).

Uniforms are (W + ½)·2⁻⁵³ from the top 53 bits of 64-bit words W (never 0 or
1), drawn from per-element keys, so every lane's draw depends only on its key.
The table covers Binomial(K, p) outside tails of mass < 2⁻⁵⁶ each, which such
a uniform can only reach with probability < 2⁻⁵⁵: the same order as its own
discretisation.

References:
  W. Hörmann, "The generation of binomial random variates", J. Statist.
  Comput. Simul. 46 (1993), algorithm BTRS; also TensorFlow's and JAX's
  ``binomial`` (same algorithm; not the code).
  Andy Dong and Arun Ganesh, "Privacy Amplification for BandMF via b-Min-Sep Subsampling",
  arXiv:2602.09338 (v2): §7.4 (the production shape), App. D (truncated b-min-sep)
  (docs/references.md).
"""

from __future__ import annotations

from typing import Callable, NamedTuple

import jax
import jax.numpy as jnp
import numpy as np
from jax import lax
from jaxacct.errors import InputError

ATTEMPTS = 3  # unrolled BTRS proposals per draw (each accepted w.p. ≳ 0.9 when the mean is > 10)
INVERSION_MAX_MEAN = 10.0
_FALLBACK_TAG = 1 << 20  # fold_in offset of the keys of the rare extra BTRS rounds
# fc(k) = log k! − [½ log 2π + (k + ½) log(k + 1) − (k + 1)] for k = 0 … 9, to double precision
# (40-digit mpmath; float64 lgamma differences lose ~3 digits to cancellation).
_STIRLING_TABLE = np.array([
    0.08106146679532726, 0.0413406959554093, 0.02767792568499834, 0.020790672103765093,
    0.016644691189821193, 0.013876128823070748, 0.01189670994589177, 0.010411265261972096,
    0.009255462182712733, 0.00833056343336287])


def _require_x64() -> None:
  # Without x64, uint64 words silently become uint32 and BTRS would never accept.
  if not jax.config.jax_enable_x64:
    raise RuntimeError('jaxacct binomial draws need 64-bit types: call them inside a '
                       'jax.enable_x64(True) scope (the public samplers do this themselves)')


def _words(keys: jax.Array, count: int, tag) -> jax.Array:
  """(N, count) uint64 words from the lanes' keys folded with ``tag``."""
  return jax.vmap(lambda k: jax.random.bits(jax.random.fold_in(k, tag), (count,), jnp.uint64))(
      keys)


def _to_uniforms(words: jax.Array) -> jax.Array:
  """Uniforms (W + ½)·2⁻⁵³ in (0, 1) from the top 53 bits of 64-bit words, float64."""
  return ((words >> 11).astype(jnp.float64) + 0.5) * 2.0**-53


def _uniforms(keys: jax.Array, count: int, tag) -> jax.Array:
  """(N, count) float64 uniforms in (0, 1) from the lanes' keys folded with ``tag``."""
  return _to_uniforms(_words(keys, count, tag))


def _stirling_tail(k: jax.Array) -> jax.Array:
  """fc(k) for k ≥ 0 (float64): table for k ≤ 9, else the series in 1/(k + 1) to the k⁻⁷ term."""
  z = jnp.maximum(k, 9.0) + 1.0
  z2 = z * z
  series = (1.0 / 12.0 - (1.0 / 360.0 - (1.0 / 1260.0 - 1.0 / (1680.0 * z2)) / z2) / z2) / z
  table = jnp.asarray(_STIRLING_TABLE)[jnp.clip(k, 0, 9).astype(jnp.int32)]
  return jnp.where(k <= 9, table, series)


def _btrs(keys: jax.Array, count: jax.Array, q: jax.Array) -> jax.Array:
  """BTRS draws (float64, integral values) for lanes with count·q > 10 and q ≤ 1/2.

  Other lanes get a finite dummy setup (count 100, q 1/2) and their result is
  discarded by the caller.
  """
  spq = jnp.sqrt(count * q * (1.0 - q))
  b = 1.15 + 2.53 * spq
  a = -0.0873 + 0.0248 * b + 0.01 * q
  c = count * q + 0.5
  v_r = 0.92 - 4.2 / b
  r = q / (1.0 - q)
  alpha = (2.83 + 5.1 / b) * spq
  m = jnp.floor((count + 1.0) * q)
  # The part of the log acceptance bound that does not depend on the proposal k.
  bound_m = ((m + 0.5) * jnp.log((m + 1.0) / (r * (count - m + 1.0)))
             + _stirling_tail(m) + _stirling_tail(count - m))

  def attempt(u, v):
    u = u - 0.5
    us = 0.5 - jnp.abs(u)
    k = jnp.floor((2.0 * a / us + b) * u + c)
    quick = (us >= 0.07) & (v <= v_r)
    in_range = (k >= 0.0) & (k <= count)
    safe_k = jnp.clip(k, 0.0, count)
    log_v = jnp.log(v * alpha / (a / (us * us) + b))
    # log1p: (count + 1)·log(ratio ≈ 1) would lose ~1e-9 to rounding at counts ~10⁷.
    bound = (bound_m + (count + 1.0) * jnp.log1p((safe_k - m) / (count - safe_k + 1.0))
             + (safe_k + 0.5) * jnp.log(r * (count - safe_k + 1.0) / (safe_k + 1.0))
             - _stirling_tail(safe_k) - _stirling_tail(count - safe_k))
    return k, quick | (in_range & (log_v <= bound))

  uniforms = _uniforms(keys, 2 * ATTEMPTS, 0)
  result = jnp.zeros_like(count)
  done = jnp.zeros(count.shape, bool)
  for j in range(ATTEMPTS):
    k, accepted = attempt(uniforms[:, 2 * j], uniforms[:, 2 * j + 1])
    result = jnp.where(accepted & ~done, k, result)
    done = done | accepted

  def more(carry):
    round_, result, done = carry
    extra = _uniforms(keys, 2, _FALLBACK_TAG + round_)
    k, accepted = attempt(extra[:, 0], extra[:, 1])
    return round_ + 1, jnp.where(accepted & ~done, k, result), done | accepted

  _, result, _ = lax.while_loop(lambda carry: jnp.any(~carry[2]), more,
                                (jnp.uint32(0), result, done))
  return result


def _invert(u: jax.Array, count: jax.Array, q: jax.Array, unrolled: int = 0) -> jax.Array:
  """Smallest k with CDF(k) ≥ u by the pmf recurrence f(k+1) = f(k)·(count−k)/(k+1)·q/(1−q).

  For means count·q ≤ 10 or so (f(0) = (1 − q)^count must not underflow).

  ``unrolled`` > 0 first counts, in straight-line code, the k < ``unrolled`` with
  CDF(k) < u (the CDF is non-decreasing, so that count is the answer when it is below
  ``unrolled``); the ``while`` loop then runs only for a call where some lane reached
  ``unrolled`` (also where the loop would have stopped at k = count or at the
  plateau). The terms are the loop's own, so the result does not depend on
  ``unrolled``; inside a ``lax.scan`` over rounds the loop's per-iteration cost was
  most of a draw's.
  """
  pmf = jnp.exp(count * jnp.log1p(-q))
  ratio = q / (1.0 - q)
  mean = count * q

  def active(k, pmf, cdf):
    # Past the mean, a next term that no longer changes the float CDF means the CDF has
    # reached its rounding plateau (≈ 1 − 10⁻¹⁶); stop there instead of walking to k = count.
    following = pmf * (count - k) / (k + 1.0) * ratio
    plateau = (k > mean) & (cdf + following == cdf)
    return (u > cdf) & (k < count) & ~plateau

  def step(carry):
    k, pmf, cdf = carry
    move = active(k, pmf, cdf)
    pmf = jnp.where(move, pmf * (count - k) / (k + 1.0) * ratio, pmf)
    return jnp.where(move, k + 1.0, k), pmf, jnp.where(move, cdf + pmf, cdf)

  def loop():
    k, _, _ = lax.while_loop(lambda carry: jnp.any(active(*carry)), step,
                             (jnp.zeros_like(count), pmf, pmf))
    return k

  if not unrolled:
    return loop()
  below = _count_below(u, count, q, unrolled)
  return lax.cond(jnp.any(below >= unrolled), loop, lambda: below)


def _count_below(u: jax.Array, count: jax.Array, q: jax.Array, terms: int) -> jax.Array:
  """#{k < terms : CDF(k) < u}, straight-line, with ``_invert``'s terms and rounding.

  The CDF is non-decreasing, so a result below ``terms`` is ``_invert``'s answer (which
  then stopped at CDF(k) ≥ u before any k = count or plateau stop); ``terms`` means
  "ask ``_invert``".
  """
  term = jnp.exp(count * jnp.log1p(-q))
  ratio = q / (1.0 - q)
  cdf = term
  below = (cdf < u).astype(count.dtype)
  for k in range(terms - 1):
    term = term * (count - k) / (k + 1.0) * ratio  # _invert's recurrence, same rounding
    cdf = cdf + term
    below = below + (cdf < u)
  return below


def _search(cdf_at: Callable[[jax.Array], jax.Array], length: int, u: jax.Array) -> jax.Array:
  """Smallest i with cdf_at(i) ≥ u (cdf_at(length − 1) = 1 ≥ u), a straight-line binary search.

  ``jnp.searchsorted`` runs its halvings in a loop, whose per-iteration cost
  dominates at the small lane counts of one round (measured ~10× slower here).
  """
  low = jnp.zeros(u.shape, jnp.int32)  # invariant: answer in [low, low + width)
  width = length  # a power of two
  while width > 1:
    width //= 2
    low = jnp.where(cdf_at(low + width - 1) < u, low + width, low)
  return low


class InversionTable(NamedTuple):
  """CDFs of Binomial(K + j, p), j = 0 … R − 1, for the table fast path (host-built, traced).

  Attributes:
    base_count: K, int64 scalar.
    first_values: v₀(j), int64 (R,): ``cdf[j, i]`` = Pr[X_j ≤ v₀(j) + i].
    cdf: float64 (R, L), each row non-decreasing and ending at 1;
      Pr[X_j < v₀(j)] < 2⁻⁵⁶.
    max_extra: the largest count − (K + R − 1) drawn by the recurrence, int64
      scalar (counts outside K … K + R − 1 + ``max_extra``: exact fallback).
  """

  base_count: jax.Array
  first_values: jax.Array
  cdf: jax.Array
  max_extra: jax.Array


_TABLE_TAIL = 2.0**-56
_TABLE_TAG = 7  # fold_in tag of the table path's uniforms (independent of the fallback's)


def _support(law, mean: float, sd: float, count: int) -> tuple[int, int]:
  """[v₀, v₁] with Pr[X < v₀] < 2⁻⁵⁶ and Pr[X > v₁] < 2⁻⁵⁶ (exact ends, from ±9 s.d.)."""
  v0 = max(0, int(mean - 9.0 * sd - 2.0))
  while v0 > 0 and law.cdf(v0 - 1) >= _TABLE_TAIL:
    v0 -= 1
  while law.cdf(v0) < _TABLE_TAIL:
    v0 += 1
  v1 = min(count, int(mean + 9.0 * sd + 2.0))
  while v1 < count and law.sf(v1) >= _TABLE_TAIL:
    v1 += 1
  while v1 > v0 and law.sf(v1 - 1) < _TABLE_TAIL:
    v1 -= 1
  return v0, v1


def _cdf_rows(counts: np.ndarray, probs: np.ndarray) -> tuple[np.ndarray, np.ndarray]:
  """(v₀ (R,), CDF rows (R, L)) of Binomial(counts[j], probs[j]) on the host (scipy).

  Row j spans [v₀(j), v₁(j)] with tails of mass < 2⁻⁵⁶ outside; the row length
  is the widest span padded to a power of two (a static shape: few compilations).
  """
  from scipy import stats  # host only
  spans = []
  for count, prob in zip(counts, probs):
    mean, sd = count * prob, (count * prob * (1.0 - prob)) ** 0.5
    spans.append(_support(stats.binom(int(count), prob), mean, sd, int(count)))
  first = np.array([v0 for v0, _ in spans])
  length = 1 << max(v1 - v0 for v0, v1 in spans).bit_length()
  values = first[:, None] + np.arange(length)[None, :]
  cdf = stats.binom.cdf(values, counts[:, None], probs[:, None])
  last = np.array([v1 for _, v1 in spans])[:, None]
  cdf = np.where(values >= last, 1.0, cdf)  # beyond v₁(j): mass < 2⁻⁵⁶, folded into v₁(j)
  return first.astype(np.int64), np.maximum.accumulate(cdf, axis=1)


def inversion_table(base_count: int, rows: int, prob: float, max_extra: int) -> InversionTable:
  """Builds the ``InversionTable`` of Binomial(K + j, prob), j < ``rows``, on the host (scipy)."""
  first, cdf = _cdf_rows(base_count + np.arange(rows), np.full(rows, float(prob)))
  # NumPy arrays: they become float64 / int64 device values inside the kernels' x64 scope.
  return InversionTable(np.int64(base_count), first, cdf, np.int64(max_extra))


class InversionRows(NamedTuple):
  """Rows of draws X + Y by inversion (host-built, traced): row j draws Binomial(c, p_j) for
  counts c in [K_j, K_j + E_j] as X ~ Binomial(K_j, p_j) from a CDF row and Y ~
  Binomial(c − K_j, p_j) of small mean by the pmf recurrence.

  X does not depend on the count, so every draw of a run is inverted at once before a
  sequential scan over the draws (``row_inputs``), which then only adds Y
  (``row_draft``, ``row_binomial``). One row serves all rounds of the truncated
  batch sizes at the Dong & Ganesh (2026) §7.4 shape; the warm-start history has a row per
  state.

  Attributes:
    base_counts: K_j, int64 (R,).
    probs: p_j, float64 (R,).
    first_values: v₀(j), int64 (R,): ``cdf[j, i]`` = Pr[X_j ≤ v₀(j) + i].
    cdf: float64 (R, L), each row non-decreasing and ending at 1;
      Pr[X_j < v₀(j)] < 2⁻⁵⁶.
    max_extras: E_j, int64 (R,) (counts outside the window: exact fallback).
  """

  base_counts: jax.Array
  probs: jax.Array
  first_values: jax.Array
  cdf: jax.Array
  max_extras: jax.Array


def inversion_rows(base_counts, probs, max_extras) -> InversionRows:
  """Builds ``InversionRows`` on the host (scipy); every p_j must be ≤ 1/2."""
  base_counts = np.asarray(base_counts, np.int64)
  probs = np.asarray(probs, np.float64)
  if np.any(probs > 0.5):
    raise InputError('inversion rows need probabilities <= 1/2')
  first, cdf = _cdf_rows(base_counts, probs)
  return InversionRows(base_counts, probs, first, cdf, np.asarray(max_extras, np.int64))


def table_uniforms(keys: jax.Array, rounds: int) -> jax.Array:
  """The table path's uniforms for ``rounds`` draws per lane, (rounds, N, 2), in one call.

  Generating them for all rounds at once costs a fraction of per-round key
  derivation inside a ``lax.scan`` (measured ~4× at 128 lanes on CPU).
  """
  _require_x64()
  return jnp.moveaxis(_uniforms(keys, 2 * rounds, _TABLE_TAG).reshape(-1, rounds, 2), 1, 0)


def row_inputs(keys: jax.Array, rows: InversionRows,
               row_of_draw: np.ndarray) -> tuple[jax.Array, jax.Array]:
  """(X indices, remainder uniforms) of D draws per lane, time-major (D, N) each.

  Draw d uses row ``row_of_draw[d]`` (static) and the uniforms 2d (for X) and 2d + 1
  (for Y) of the lane's table words (key folded with the table tag, as
  ``table_uniforms``). All X are inverted at once, batch-major (measured cheaper
  than the (D, N, 2) layout), through the flattened CDF rows: a 1-D gather measured
  ~7× faster on CPU than gathering from the 2-D table.
  """
  _require_x64()
  draws = len(row_of_draw)
  words = _words(keys, 2 * draws, _TABLE_TAG)
  length = rows.cdf.shape[1]
  flat = rows.cdf.reshape(-1)
  if np.all(row_of_draw == row_of_draw[0]):
    offset = int(row_of_draw[0]) * length
    index = _search(lambda i: flat[offset + i], length, _to_uniforms(words[:, 0::2]))
  else:
    offsets = jnp.asarray(np.asarray(row_of_draw, np.int32) * length)[None, :]
    index = _search(lambda i: flat[offsets + i], length, _to_uniforms(words[:, 0::2]))
  return index.T, _to_uniforms(words[:, 1::2]).T


# Unrolled steps of the remainder's inversion in ``row_binomial``: its mean is ≤ 4, so eight
# steps settle nearly every lane and the loop after them rarely runs.
_REMAINDER_UNROLLED = 8
# Terms of the remainder's CDF in ``row_draft``: a lane needs more w.p. ~10⁻⁹ at the §7.4
# shape (remainder mean ~1), i.e. about once per 10³ blocks of 128 × 7200 draws.
_DRAFT_TERMS = 12


def _remainder(counts, rows: InversionRows, row):
  """(count − K_j as float64 where the count is in row j's window else 0, in the window)."""
  offset = counts - rows.base_counts[row].astype(counts.dtype)
  usable = (offset >= 0) & (offset <= rows.max_extras[row].astype(counts.dtype))
  return jnp.where(usable, offset, 0).astype(jnp.float64), usable


def row_draft(index: jax.Array, uniform: jax.Array, counts: jax.Array, rows: InversionRows,
              row) -> jax.Array:
  """``row_binomial`` without branches: the draws, or −1 where unsure.

  A lane gets ``row_binomial``'s draw when its count is in the row's window and the
  remainder is below ``_DRAFT_TERMS`` (its inversion is then ``_count_below``, with
  ``_invert``'s terms and rounding); −1 otherwise. A caller running many draws in a
  ``lax.scan`` drafts them all without a ``lax.cond`` per draw and reruns the exact
  sampler only if some draft is −1.

  Args:
    index, uniform: one draw of ``row_inputs``, (N,) each.
    counts: (N,) non-negative integers, as integers or as integral float64 (exact
      below 2⁵³; the draft is then float64 too, which a scan vectorises better).
    rows: the ``InversionRows``; row: the draw's row (traced scalar).
  """
  dtype = counts.dtype
  extra, usable = _remainder(counts, rows, row)
  rest = _count_below(uniform, extra, rows.probs[row], _DRAFT_TERMS)
  drafted = rows.first_values[row].astype(dtype) + index.astype(dtype) + rest.astype(dtype)
  return jnp.where(usable & (rest < _DRAFT_TERMS), drafted, -1)


def row_binomial(index: jax.Array, uniform: jax.Array, counts: jax.Array, rows: InversionRows,
                 row, fallback_keys: Callable[[], jax.Array]) -> jax.Array:
  """One exact Binomial(counts[j], p_row) draw per lane, int64 (N,).

  X + Y (``InversionRows``) for the lanes whose count is in the row's window; the
  others (the choice depends on the count only, so the law stays exact) use
  ``binomial`` with the keys from ``fallback_keys``, called only when needed.

  Args: as ``row_draft``, and fallback_keys: returns the (N,) keys for the general sampler.
  """
  _require_x64()
  prob = rows.probs[row]
  extra, usable = _remainder(counts, rows, row)
  rest = _invert(uniform, extra, prob, _REMAINDER_UNROLLED)
  fast = rows.first_values[row] + index.astype(jnp.int64) + rest.astype(jnp.int64)
  general = lax.cond(jnp.all(usable), lambda: jnp.zeros_like(fast),
                     lambda: binomial(fallback_keys(), counts, prob))
  return jnp.where(usable, fast, general)


def table_binomial(uniforms: jax.Array, counts: jax.Array, prob: jax.Array, table: InversionTable,
                   fallback_keys: Callable[[], jax.Array]) -> jax.Array:
  """One Binomial(counts[j], prob) draw per lane from an ``InversionTable``, int64 (N,).

  A lane with count c = K + j + e, 0 ≤ j < R, 0 ≤ e ≤ ``max_extra`` (j as
  large as possible) returns X + Y: X ~ Binomial(K + j, p) by inverting table
  row j at ``uniforms[:, 0]``, Y ~ Binomial(e, p) by the pmf recurrence at
  ``uniforms[:, 1]`` (independent, so X + Y is exactly Binomial(c, p)). Other
  lanes (the choice depends on the count only, so the law stays exact) use
  ``binomial`` with the keys from ``fallback_keys``, called only when needed.

  Args:
    uniforms: (N, 2) uniforms in (0, 1), independent of the fallback keys' draws.
    counts: (N,) non-negative integers.
    prob: p ≤ 1/2 (the table's), traced scalar.
    table: the ``InversionTable``.
    fallback_keys: returns the (N,) keys for the general sampler.
  """
  _require_x64()
  rows, length = table.cdf.shape
  offset = counts - table.base_count
  row = jnp.clip(offset, 0, rows - 1)
  extra = offset - row
  usable = (offset >= 0) & (extra <= table.max_extra)
  row = row.astype(jnp.int32)
  index = _search(lambda i: table.cdf[row, i], length, uniforms[:, 0])
  rest = _invert(uniforms[:, 1], jnp.where(usable, extra, 0).astype(jnp.float64),
                 jnp.asarray(prob, jnp.float64), _REMAINDER_UNROLLED)
  fast = table.first_values[row] + index.astype(jnp.int64) + rest.astype(jnp.int64)
  general = lax.cond(jnp.all(usable), lambda: jnp.zeros_like(fast),
                     lambda: binomial(fallback_keys(), counts, prob))
  return jnp.where(usable, fast, general)


def binomial(keys: jax.Array, counts: jax.Array, prob: jax.Array) -> jax.Array:
  """One Binomial(counts[j], prob) draw per key, int64 (N,).

  Args:
    keys: (N,) typed keys, one per lane (the draw depends only on its key).
    counts: (N,) non-negative integers.
    prob: p ∈ [0, 1], traced scalar.
  """
  _require_x64()
  count = counts.astype(jnp.float64)
  prob = jnp.asarray(prob, jnp.float64)
  flip = prob > 0.5
  q = jnp.where(flip, 1.0 - prob, prob)
  small = count * q <= INVERSION_MAX_MEAN
  btrs = lax.cond(jnp.all(small), lambda: jnp.zeros_like(count),
                  lambda: _btrs(keys, jnp.where(small, 100.0, count), jnp.where(small, 0.5, q)))
  inverted = lax.cond(jnp.any(small),
                      lambda: _invert(_uniforms(keys, 1, 0)[:, 0], jnp.where(small, count, 0.0), q),
                      lambda: jnp.zeros_like(count))
  draws = jnp.where(small, inverted, btrs)
  return jnp.where(flip, count - draws, draws).astype(jnp.int64)
