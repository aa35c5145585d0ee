"""Exact Binomial(count, p) draws in 32-bit device code: uint32 words, int32 counts, no 64-bit type.

For the 32-bit device program (``program32.py``): every value on device is uint32 or int32,
so the sampler runs on accelerators without 64-bit types and lowers under
``program32.scope()``. Where the code runs: ``binomial32`` is un-jitted device code (JAX) for
callers to compose inside their scans; ``binomial32_tables``, ``total_variation_bound``,
``table_bytes`` and the word counts are host code (Python ``decimal``, NumPy).

Method (Devroye 1986, §III.2, inversion by sequential search, here by a binary search over
tabulated thresholds; §X.4, a sum of independent binomials with one p is binomial):

- p′ = min(p, 1 − p); for p > 1/2 a draw is count − Binomial(count, 1 − p) (1 − p is exact in
  float64 for p ≥ 1/2), decided on the host and stored as data (``flip``).
- A *row* is the law Binomial(c, p′) of one count c, tabulated on [v₀, v₁] with
  Pr[X < v₀] < 2⁻⁶⁴ and Pr[X > v₁] < 2⁻⁶⁴ (v₀ largest, v₁ smallest such), by the 64-bit
  integer thresholds T_i = ⌈F(v₀ + i)·2⁶⁴⌉, i = 0 … n − 1 (n = v₁ − v₀), F the CDF computed on
  the host in 50-digit ``decimal`` arithmetic (absolute error < 10⁻⁴⁰). A draw takes one
  uniform 64-bit word W, carried as a (hi, lo) pair of uint32 (``keys.word_pairs``), and
  returns X = v₀ + #{i : W ≥ T_i}, the smallest value whose threshold exceeds W. A row stores
  T_i − 1 (so "W ≥ T_i" is "W > T_i − 1" and T = 2⁶⁴, a value never left, is
  0xFFFFFFFF_FFFFFFFF), padded with that sentinel to a power-of-two length L_j > n; a
  straight-line binary search of log₂ L_j steps finds X (``binomial._search`` explains why not
  ``jnp.searchsorted``).
- Digits: Binomial(c, p′) = Σ over the set bits i of c of independent Binomial(2^i, p′), so
  rows for 2^i, i < D = bit_length(max_count), serve every count in [0, 2^D). Row i reads word
  pair i (plus one if there is a window) whether or not bit i is set: word use is static.
- Window (optional): one base row Binomial(K, p′); a count c = K + e with 0 ≤ e ≤ E draws the
  base row plus, for each base-2^r digit d_k of e (k < P = ⌈bit_length(E)/r⌉), the row
  Binomial(d_k·2^{rk}, p′): 1 + P searches and words instead of D. r = 1 is the binary digit
  decomposition; every lane runs every row of its path (SIMD), so the cost is 1 + P, not
  1 + popcount(e), and the default r (⌈bit_length(E)/8⌉ positions) keeps P at 2 for E ~ 10⁴.
  Which path a lane takes depends on its count only, so the law is the same either way.

Certified deviation. A row's implied law puts mass (T_i − T_{i−1})·2⁻⁶⁴ on v₀ + i (T_{−1} = 0,
T_n = 2⁶⁴). With G the implied CDF, e(v) = G(v) − F(v) ∈ [0, 2⁻⁶⁴) on [v₀, v₁), −e(v₀ − 1) and
e(v₁) the two tails (each < 2⁻⁶⁴), the total variation is
½(a + b + Σ_{v=v₀}^{v₁} |e(v) − e(v − 1)|) < ½(n + 4)·2⁻⁶⁴ ≤ (n + 2)·2⁻⁶⁴ (n = 0: a + b;
the slack, ≥ n/2 units of 2⁻⁶⁴, also absorbs the host's 10⁻⁴⁰ error in F). The rows a draw
reads are independent, so the law of their sum is within the sum of their bounds (coupling),
and count − X is within the same bound as X. ``total_variation_bound`` returns
Σ (n_j + 2)·2⁻⁶⁴ over the rows of the costlier path (every row, read or not), rounded up: a
bound τ per draw, whatever the count.

Why adding it to δ̂ is conservative: a hockey-stick term (1 − e^{ε − L})₊ lies in [0, 1], and
for two laws within total variation τ the expectations of a [0, 1]-valued function differ by
at most τ. A sample making T draws, each within τ of its exact law for every count (a later
count may depend on earlier draws), has a law within T·τ of the exact one (replace the draws
one at a time), so the exact E[term] ≤ E[term] under the sampled law + T·τ: δ̂ + T·τ
estimates an upper bound of the exact δ. At the Dong & Ganesh (2026) §7.4 shape (count ≈ 1.4·10⁷,
p = 1.3·10⁻⁴, window E = 10⁴) τ = 1.15·10⁻¹⁶ per draw (the digit path's; the window path's is
4.4·10⁻¹⁷), 8.3·10⁻¹³ for 7,200 rounds.

Shapes and conventions: words are batch-major (N, words) uint32 pairs (hi, lo), counts (N,)
int32, draws (N,) int32; a count outside [0, 2^D) draws −1 (no exception inside jit).

References:
  L. Devroye, *Non-Uniform Random Variate Generation*, Springer (1986): §III.2 (the inversion
  method for discrete laws), §X.4 (the binomial distribution; sums of independent binomials).
  Andy Dong and Arun Ganesh, "Privacy Amplification for BandMF via b-Min-Sep Subsampling",
  arXiv:2602.09338 (v2): §7.4 (the production shape) (docs/references.md).
"""

from __future__ import annotations

import decimal
import fractions
import functools
import math
from typing import Callable, NamedTuple

import jax
import jax.numpy as jnp
import numpy as np
from jax import lax

from jaxacct import _validate
from jaxacct.errors import InputError, InputTypeError

MAX_COUNT = (1 << 31) - 1  # counts are int32 on device
MAX_TABLE_BYTES = 64 << 20
_SENTINEL = 0xFFFFFFFF  # both halves of the stored T − 1 = 2⁶⁴ − 1: "never advance"
_TWO64 = 1 << 64
# Decimal digits of the host CDF, and the relative mass left outside the walked support:
# the CDF's absolute error stays < 10⁻⁴⁰, twenty orders under the 2⁻⁶⁴ ≈ 5.4·10⁻²⁰ grid.
_DIGITS = 50
_WALK_TAIL = decimal.Decimal('1e-45')
_CDF_ERROR = decimal.Decimal('1e-40')


class Binomial32Tables(NamedTuple):
  """Host-built inversion tables of Binomial(count, p) for ``binomial32`` (a pytree of NumPy
  arrays; tuple lengths and array shapes are static, the values are traced).

  A row stores T_i − 1 (i < n) as uint32 halves, then the sentinel 2⁶⁴ − 1 up to its
  power-of-two length L > n (module docstring).

  Attributes:
    flip: int32 scalar, 1 when p > 1/2 (the draw is count − Binomial(count, 1 − p)).
    digit_first: v₀ of the digit rows Binomial(2^i, p′), int32 (D,).
    digit_hi, digit_lo: the D digit rows, uint32 (L_i,) each.
    base_first: v₀ of the window's base row Binomial(K, p′), int32 (1,); (0,) without a window.
    base_hi, base_lo: the base row, uint32 (L_b,), in a 1-tuple; () without a window.
    remainder_first: per digit position k of e = count − K (base 2^r), int32 (2^r,): v₀ of
      the rows Binomial(d·2^{rk}, p′), d < 2^r.
    remainder_hi, remainder_lo: per position, uint32 (2^r, L_k): row d (rows d beyond the
      top digit of E, never read, are point masses at 0).
    base_count: K, int32 scalar (0 without a window).
    max_extra: E, int32 scalar: counts K … K + E take the window (−1: no window).
  """

  flip: np.ndarray
  digit_first: np.ndarray
  digit_hi: tuple
  digit_lo: tuple
  base_first: np.ndarray
  base_hi: tuple
  base_lo: tuple
  remainder_first: tuple
  remainder_hi: tuple
  remainder_lo: tuple
  base_count: np.ndarray
  max_extra: np.ndarray


# ---- host: rows of thresholds ----------------------------------------------------------------

def _row_thresholds(count: int, prob: float) -> tuple[int, list[int]]:
  """(v₀, [T_i]) of Binomial(count, prob), prob ≤ 1/2 (the module docstring's row), in 50-digit
  ``decimal``.

  The pmf is walked from the mode m = ⌊(count + 1)p⌋ with unnormalised weight w(m) = 1 by the
  ratios w(k + 1)/w(k) = (count − k)/(k + 1) · p/(1 − p) outward, until the rest of each tail is
  below 10⁻⁴⁵ (the ratios fall monotonically away from the mode, so the rest is at most
  w·r/(1 − r) with r the last ratio); then normalised by the walked total. Summing pmfs
  directly avoids log-gamma: the only errors are the 10⁻⁴⁵ tails and 50-digit rounding.
  """
  if count == 0 or prob == 0.0:
    return 0, []
  with decimal.localcontext(decimal.Context(prec=_DIGITS, rounding=decimal.ROUND_HALF_EVEN)):
    p = decimal.Decimal(prob)
    ratio = p / (1 - p)
    mode = min(count, math.floor(fractions.Fraction(prob) * (count + 1)))
    above, weight, k = [], decimal.Decimal(1), mode
    while k < count:
      step = (count - k) * ratio / (k + 1)
      weight *= step
      k += 1
      above.append(weight)
      if step < 1 and weight * step / (1 - step) < _WALK_TAIL:
        break
    below, weight, k = [], decimal.Decimal(1), mode
    while k > 0:
      step = k / ((count - k + 1) * ratio)
      weight *= step
      k -= 1
      below.append(weight)
      if step < 1 and weight * step / (1 - step) < _WALK_TAIL:
        break
    low = mode - len(below)
    weights = below[::-1] + [decimal.Decimal(1)] + above
    total = sum(weights, decimal.Decimal(0))
    # Cumulative from below (CDF) and from above (upper tails U(v) = Pr[X > v]).
    cumulative, running = [], decimal.Decimal(0)
    for w in weights:
      running += w
      cumulative.append(running / total)
    upper, running = [decimal.Decimal(0)] * len(weights), decimal.Decimal(0)
    for i in range(len(weights) - 1, -1, -1):
      upper[i] = running / total
      running += weights[i]
    tail = decimal.Decimal(2) ** -64
    # v₀: the first v with F(v) + error ≥ 2⁻⁶⁴, so the true Pr[X < v₀] < 2⁻⁶⁴.
    first = next(i for i, f in enumerate(cumulative) if f + _CDF_ERROR >= tail)
    # v₁: the first v ≥ v₀ with U(v) + error < 2⁻⁶⁴.
    last = next(i for i in range(first, len(weights)) if upper[i] + _CDF_ERROR < tail)
    scale = decimal.Decimal(_TWO64)
    thresholds = [min(_TWO64 - 1, int((cumulative[i] * scale).to_integral_value(
        rounding=decimal.ROUND_CEILING))) for i in range(first, last)]
  return low + first, thresholds


def _row_arrays(thresholds: list[int], length: int = 0) -> tuple[np.ndarray, np.ndarray]:
  """T_i − 1 as uint32 (hi, lo), padded with the sentinel to ``length`` (default: the least
  power of two > n)."""
  length = max(length, 1 << len(thresholds).bit_length())
  stored = [t - 1 for t in thresholds]
  hi = np.full(length, _SENTINEL, np.uint32)
  lo = np.full(length, _SENTINEL, np.uint32)
  hi[:len(stored)] = [t >> 32 for t in stored]
  lo[:len(stored)] = [t & 0xFFFFFFFF for t in stored]
  return hi, lo


def _read_only(array: np.ndarray) -> np.ndarray:
  array.flags.writeable = False  # cached tables are shared by every caller
  return array


def _estimated_row_bytes(count: int, prob: float) -> int:
  """A pre-build estimate of a row's bytes (±11 s.d. + 30 values; the exact check follows)."""
  span = min(count, 2 * (11.0 * math.sqrt(count * prob * (1.0 - prob)) + 30.0))
  return 8 << int(span).bit_length()


def default_window_digit_bits(max_extra: int) -> int:
  """r for e ≤ E: ⌈S/P⌉ with S = bit_length(E) and P = ⌈S/8⌉ positions (at most 256 rows each)."""
  bits = max(1, max_extra.bit_length())
  return -(-bits // -(-bits // 8))


def binomial32_tables(prob, max_count, *, base_count=None, max_extra=None,
                      window_digit_bits=None,
                      max_table_bytes: int = MAX_TABLE_BYTES) -> Binomial32Tables:
  """Host: the ``Binomial32Tables`` of Binomial(count, prob) for counts in [0, max_count].

  Digit rows Binomial(2^i, p′) for i < D = bit_length(max_count) (every count up to 2^D − 1 is
  served); with ``base_count`` K and ``max_extra`` E also the window: the base row
  Binomial(K, p′) and, per base-2^r digit position k of e ≤ E, the rows Binomial(d·2^{rk}, p′),
  d < 2^r. Built once per argument tuple (``functools.lru_cache``; arrays are read-only).

  Args:
    prob: p in [0, 1] (a float; the law is Binomial(count, p) for that exact binary value).
    max_count: the largest count, an integer in [0, 2³¹ − 1].
    base_count, max_extra: the window K, E (both or neither), integers ≥ 0 with
      K + E ≤ max_count.
    window_digit_bits: r in [1, 12], the window remainder's digit width (default
      ``default_window_digit_bits(E)``: ⌈bit_length(E)/8⌉ positions). r = 1 is the binary
      digit decomposition; a larger r reads fewer rows (1 + ⌈S/r⌉ words per window draw) from
      more rows in memory.
    max_table_bytes: refuse tables larger than this (default 64 MiB).

  Raises:
    ValueError / TypeError naming the argument.

  References: Devroye (1986), §III.2 (inversion), §X.4 (sums of independent binomials).
  """
  prob = _validate.probability('prob', prob, allow_zero=True)
  max_count = _validate.integer_at_least('max_count', max_count, 0)
  if max_count > MAX_COUNT:
    raise InputError(f'max_count must be at most 2**31 - 1 = {MAX_COUNT} (counts are int32 on '
                     f'device), got {max_count}')
  if (base_count is None) != (max_extra is None):
    raise InputError('base_count and max_extra must be given together (a window) or not at all, '
                     f'got base_count={base_count!r}, max_extra={max_extra!r}')
  if base_count is None:
    if window_digit_bits is not None:
      raise InputError('window_digit_bits needs a window (base_count and max_extra)')
  else:
    base_count = _validate.integer_at_least('base_count', base_count, 0)
    max_extra = _validate.integer_at_least('max_extra', max_extra, 0)
    if base_count + max_extra > max_count:
      raise InputError(f'base_count + max_extra must be at most max_count = {max_count}, got '
                       f'{base_count} + {max_extra}')
    if window_digit_bits is None:
      window_digit_bits = default_window_digit_bits(max_extra)
    window_digit_bits = _validate.integer_at_least('window_digit_bits', window_digit_bits, 1)
    if window_digit_bits > 12:
      raise InputError(f'window_digit_bits must be in [1, 12], got {window_digit_bits}')
  max_table_bytes = _validate.integer_at_least('max_table_bytes', max_table_bytes, 1)
  return _tables(prob, max_count, base_count, max_extra, window_digit_bits, max_table_bytes)


@functools.lru_cache(maxsize=16)
def _tables(prob: float, max_count: int, base_count: int | None, max_extra: int | None,
            bits: int | None, max_table_bytes: int) -> Binomial32Tables:
  q = min(prob, 1.0 - prob)  # 1 − p is exact for p ≥ 1/2 (Sterbenz)
  digits = max_count.bit_length()
  windowed = base_count is not None
  # Window remainder rows: position k holds Binomial(d·2^{rk}) for d up to its largest digit.
  positions = -(-max_extra.bit_length() // bits) if windowed else 0
  tops = [min((1 << bits) - 1, max_extra >> (bits * k)) for k in range(positions)]
  counts = ([1 << i for i in range(digits)] + ([base_count] if windowed else [])
            + [d << (bits * k) for k in range(positions) for d in range(tops[k] + 1)])
  unique = sorted(set(counts))

  def refuse(size):
    raise InputError(
        f'tables for prob={prob}, max_count={max_count}, base_count={base_count}, '
        f'max_extra={max_extra} would take {size} bytes, over max_table_bytes={max_table_bytes}: '
        'lower max_count (or max_extra, window_digit_bits)')
  estimate = sum(_estimated_row_bytes(c, q) for c in unique)
  if estimate > 2 * max_table_bytes:  # fail before a long build; the exact check follows
    refuse(f'about {estimate}')
  rows = {c: _row_thresholds(c, q) for c in unique}  # a count shared by two parts: built once
  digit_rows = [_row_arrays(rows[1 << i][1]) for i in range(digits)]
  size = sum(hi.nbytes + lo.nbytes for hi, lo in digit_rows)
  base, remainder = ((), ()), ([], [], [])
  if windowed:
    base = tuple(zip(_row_arrays(rows[base_count][1])))
    size += base[0][0].nbytes * 2
    for k in range(positions):
      members = [rows[d << (bits * k)] for d in range(tops[k] + 1)]
      length = 1 << max(len(t) for _, t in members).bit_length()
      pairs = [_row_arrays(t, length) for _, t in members]
      filler = (1 << bits) - len(pairs)  # digits above E's top digit: never read
      hi = np.concatenate([np.stack([h for h, _ in pairs]),
                           np.full((filler, length), _SENTINEL, np.uint32)])
      lo = np.concatenate([np.stack([l for _, l in pairs]),
                           np.full((filler, length), _SENTINEL, np.uint32)])
      remainder[0].append(np.array([v0 for v0, _ in members] + [0] * filler, np.int32))
      remainder[1].append(hi)
      remainder[2].append(lo)
      size += hi.nbytes + lo.nbytes
  if size > max_table_bytes:
    refuse(size)
  ro = _read_only
  return Binomial32Tables(
      flip=ro(np.array(int(prob > 0.5), np.int32)),
      digit_first=ro(np.array([rows[1 << i][0] for i in range(digits)], np.int32)),
      digit_hi=tuple(ro(hi) for hi, _ in digit_rows),
      digit_lo=tuple(ro(lo) for _, lo in digit_rows),
      base_first=ro(np.array([rows[base_count][0]] if windowed else [], np.int32)),
      base_hi=tuple(ro(a) for a in base[0]), base_lo=tuple(ro(a) for a in base[1]),
      remainder_first=tuple(ro(a) for a in remainder[0]),
      remainder_hi=tuple(ro(a) for a in remainder[1]),
      remainder_lo=tuple(ro(a) for a in remainder[2]),
      base_count=ro(np.array(base_count if windowed else 0, np.int32)),
      max_extra=ro(np.array(max_extra if windowed else -1, np.int32)))


def _finite_counts(hi: np.ndarray, lo: np.ndarray) -> np.ndarray:
  """n of each row (last axis): the entries before the first sentinel (the last one is)."""
  sentinel = (np.asarray(hi) == _SENTINEL) & (np.asarray(lo) == _SENTINEL)
  return np.argmax(sentinel, axis=-1)


def total_variation_bound(tables: Binomial32Tables) -> float:
  """Host: a certified bound τ on the total variation distance between the law of one
  ``binomial32`` draw and Binomial(count, p), for every count the tables serve.

  Per row (n + 2)·2⁻⁶⁴ (module docstring); a draw sums independent rows, so τ is the larger
  of the two paths' sums: every digit row (set bit or not), or the base row plus, per
  remainder position, its longest row. Rounded up to a float; T draws of a sample: T·τ.
  """
  full = sum(int(_finite_counts(h, l)) + 2 for h, l in zip(tables.digit_hi, tables.digit_lo))
  window = sum(int(_finite_counts(h, l)) + 2 for h, l in zip(tables.base_hi, tables.base_lo))
  window += sum(int(np.max(_finite_counts(h, l))) + 2
                for h, l in zip(tables.remainder_hi, tables.remainder_lo))
  return math.nextafter(max(full, window) * 2.0**-64, math.inf)  # exact product, one ulp up


def table_bytes(tables: Binomial32Tables) -> int:
  """Host: bytes of the thresholds (what a device holds for the tables)."""
  return sum(a.nbytes for a in (*tables.digit_hi, *tables.digit_lo, *tables.base_hi,
                                *tables.base_lo, *tables.remainder_hi, *tables.remainder_lo))


def words_per_draw(tables: Binomial32Tables) -> int:
  """Word pairs a draw reads: column 0 for the window's base row (with a window), then one per
  digit row (the full path) or per remainder position (the window path)."""
  windowed = bool(tables.base_hi)
  return int(windowed) + max(len(tables.digit_hi), len(tables.remainder_hi))


def window_words_per_draw(tables: Binomial32Tables) -> int:
  """Word pairs of the window path: columns 0 … P (P remainder positions); 0 without a window."""
  return len(tables.base_hi) + len(tables.remainder_hi) if tables.base_hi else 0


# ---- device -------------------------------------------------------------------------------

def _advance(hi, lo, t_hi, t_lo):
  """W > t for 64-bit W = (hi, lo) and t = (t_hi, t_lo), elementwise (i.e. W ≥ T = t + 1)."""
  return (hi > t_hi) | ((hi == t_hi) & (lo > t_lo))


def _search(hi, lo, t_hi, t_lo, width, offset=None):
  """#{i < width : W > t_{offset + i}}, int32 (N,): a straight-line binary search over sorted
  entries whose last (index width − 1) is the sentinel.

  ``t_hi``, ``t_lo`` are flat; ``offset`` (uint32 (N,), a row start per lane) or None (one row
  for every lane, whose first probe is then a scalar comparison). Indices are uint32 so the
  gathers skip negative-index wrapping.
  """
  t_hi, t_lo = jnp.asarray(t_hi), jnp.asarray(t_lo)  # NumPy tables may be closed over
  low = jnp.zeros(hi.shape, jnp.uint32) if offset is None else offset
  if width > 1 and offset is None:
    width //= 2
    low = jnp.where(_advance(hi, lo, t_hi[width - 1], t_lo[width - 1]), jnp.uint32(width), low)
  while width > 1:
    width //= 2
    probe = low + jnp.uint32(width - 1)
    low = jnp.where(_advance(hi, lo, t_hi[probe], t_lo[probe]), low + jnp.uint32(width), low)
  found = low if offset is None else low - offset
  return found.astype(jnp.int32)


def _full_path(hi, lo, counts, tables, column):
  """Σ over the set bits i of the counts of digit row i's draw (word column ``column + i``)."""
  total = jnp.zeros(counts.shape, jnp.int32)
  for i, (t_hi, t_lo) in enumerate(zip(tables.digit_hi, tables.digit_lo)):
    draw = tables.digit_first[i] + _search(hi[:, column + i], lo[:, column + i], t_hi, t_lo,
                                           t_hi.shape[0])
    total = total + jnp.where(((counts >> i) & 1) == 1, draw, jnp.int32(0))
  return total


def _window_path(hi, lo, extra, tables):
  """The base row's draw (column 0) plus, per base-2^r digit d_k of ``extra``, row d_k of
  remainder position k (column 1 + k)."""
  t_hi, t_lo = tables.base_hi[0], tables.base_lo[0]
  total = tables.base_first[0] + _search(hi[:, 0], lo[:, 0], t_hi, t_lo, t_hi.shape[0])
  if not tables.remainder_hi:
    return total
  bits = tables.remainder_hi[0].shape[0].bit_length() - 1
  for k, (t_hi, t_lo) in enumerate(zip(tables.remainder_hi, tables.remainder_lo)):
    digit = (extra >> (bits * k)) & ((1 << bits) - 1)
    length = t_hi.shape[1]
    offset = digit.astype(jnp.uint32) * jnp.uint32(length)
    draw = _search(hi[:, 1 + k], lo[:, 1 + k], jnp.ravel(t_hi), jnp.ravel(t_lo), length, offset)
    total = total + jnp.asarray(tables.remainder_first[k])[digit] + draw
  return total


def binomial32(hi: jax.Array, lo: jax.Array, counts: jax.Array, tables: Binomial32Tables, *,
               fallback_words: Callable[[], tuple[jax.Array, jax.Array]] | None = None
               ) -> jax.Array:
  """One Binomial(counts[j], p) draw per lane from uniform 64-bit words, 32-bit code, int32 (N,).

  Inversion (Devroye 1986, §III.2) of independent rows whose counts add up to the count (§X.4):
  the binary digit rows of the count, or, for a count K + e in the window, the base row
  Binomial(K, p′) and one row per base-2^r digit of e. The law is within
  ``total_variation_bound(tables)`` of Binomial(count, p). Un-jitted: compose it in scans.

  Args:
    hi, lo: uint32 (N, words_per_draw(tables)), the halves of uniform 64-bit words, independent
      across columns, lanes and draws. With a window, column 0 is the base row's and column
      1 + k remainder position k's (window path) or digit row k's (full path); without, column
      i is digit row i's. With ``fallback_words``: only the window path's columns,
      (N, window_words_per_draw(tables)).
    counts: int32 (N,), each in [0, 2^D) (D = len(tables.digit_hi)); others draw −1.
    tables: from ``binomial32_tables``.
    fallback_words: optional; returns (hi, lo) uint32 (N, words_per_draw(tables)) for the
      lanes outside the window, called only when some lane is (inside ``lax.cond``). Its words
      must be independent of ``hi``, ``lo`` and of every other draw's words.

  Returns:
    int32 (N,) draws (−1 where the count is out of range).
  """
  digits = len(tables.digit_hi)
  windowed = bool(tables.base_hi)
  for name, value in (('hi', hi), ('lo', lo)):
    if value.dtype != jnp.uint32 or value.ndim != 2:
      raise InputTypeError(f'{name} must be a uint32 (N, words) array, got {value.dtype} '
                      f'{value.shape}')
  if counts.dtype != jnp.int32 or counts.ndim != 1:
    raise InputTypeError(f'counts must be an int32 (N,) array, got {counts.dtype} {counts.shape}')
  if fallback_words is not None and not windowed:
    raise InputError('fallback_words needs tables with a window (base_count, max_extra)')
  width = window_words_per_draw(tables) if fallback_words is not None else words_per_draw(tables)
  if hi.shape != lo.shape or hi.shape != (counts.shape[0], width):
    raise InputError(f'hi and lo must have shape (N, {width}) with N = counts.shape[0] = '
                     f'{counts.shape[0]}, got hi {hi.shape}, lo {lo.shape}')
  valid = counts >= 0
  if digits < 31:
    valid = valid & (counts < jnp.int32(1 << digits))
  if not windowed:
    draws = _full_path(hi, lo, counts, tables, 0)
  else:
    extra = counts - tables.base_count
    inside = (extra >= 0) & (extra <= tables.max_extra)
    zeros = jnp.zeros(counts.shape, jnp.int32)

    def outside():
      words = fallback_words() if fallback_words is not None else (hi, lo)
      return _full_path(*words, counts, tables, 1)
    # The window path always runs (cheap); the full one only when some lane needs it. The
    # path depends on the count only, so the law does not depend on the other lanes.
    fast = _window_path(hi, lo, extra, tables)
    slow = lax.cond(jnp.all(inside | ~valid), lambda: zeros, outside)
    draws = jnp.where(inside, fast, slow)
  draws = jnp.where(tables.flip == 1, counts - draws, draws)
  return jnp.where(valid, draws, jnp.int32(-1))
