"""Exact Binomial draws in 32-bit code (``montecarlo/engine/binomial32.py``).

Oracles: exact rational pmfs (``fractions``) for counts ≤ 128, 60-digit mpmath for a row of
count 2²⁰ and for count 2²⁵ − 1 at p = 10⁻⁷, scipy for the χ² laws, and a pure-Python
inversion (``bisect`` on the 64-bit thresholds as Python ints) for the device draws. The law
of a draw is the convolution of its rows' implied laws (integer masses over 2⁶⁴ per row),
computed exactly. Compiled programs: one per table shape (six), small lane counts.
"""

from __future__ import annotations

import bisect
import fractions
import math
import re

import jax
import jax.numpy as jnp
import numpy as np
import pytest
from scipy import stats

from jaxacct.montecarlo.engine import binomial32, program32

try:
  import mpmath
except ImportError:  # pragma: no cover - mpmath ships with dp_accounting
  mpmath = None

TWO64 = 1 << 64
SENTINEL = TWO64 - 1


# ---- host reference: which rows a draw reads, their implied laws --------------------------

def _thresholds(hi_row, lo_row) -> list[int]:
  """The stored T − 1 of a row as Python ints (sentinels included)."""
  return [(int(h) << 32) | int(l) for h, l in zip(np.asarray(hi_row), np.asarray(lo_row))]


def _reads(tables, count):
  """[(word column, v₀, stored T − 1 list)] of the rows a draw of ``count`` reads (the spec)."""
  windowed = bool(tables.base_hi)
  extra = count - int(tables.base_count)
  if windowed and 0 <= extra <= int(tables.max_extra):
    rows = [(0, int(tables.base_first[0]), _thresholds(tables.base_hi[0], tables.base_lo[0]))]
    if tables.remainder_hi:
      bits = tables.remainder_hi[0].shape[0].bit_length() - 1
      for k, (hi, lo) in enumerate(zip(tables.remainder_hi, tables.remainder_lo)):
        d = (extra >> (bits * k)) & ((1 << bits) - 1)
        rows.append((1 + k, int(tables.remainder_first[k][d]), _thresholds(hi[d], lo[d])))
    return rows
  column = 1 if windowed else 0
  return [(column + i, int(tables.digit_first[i]), _thresholds(hi, lo))
          for i, (hi, lo) in enumerate(zip(tables.digit_hi, tables.digit_lo)) if count >> i & 1]


def _reference_draw(tables, count, words) -> int:
  """X = Σ_rows v₀ + #{i : W > T_i − 1}, flipped for p > 1/2; −1 out of range."""
  if not 0 <= count < 1 << len(tables.digit_hi):
    return -1
  draw = sum(first + bisect.bisect_left(stored, words[column])
             for column, first, stored in _reads(tables, count))
  return count - draw if int(tables.flip) else draw


def _row_law(first, stored):
  """(v₀, integer masses summing to 2⁶⁴) implied by a row."""
  edges = [0] + [t + 1 for t in stored if t != SENTINEL] + [TWO64]
  return first, [b - a for a, b in zip(edges, edges[1:])]


def _implied_law(tables, count):
  """(v₀, masses, denominator) of a draw of ``count``: the exact convolution of its rows."""
  first, masses, denominator = 0, [1], 1
  for _, row_first, stored in _reads(tables, count):
    v0, row = _row_law(row_first, stored)
    out = [0] * (len(masses) + len(row) - 1)
    for i, a in enumerate(masses):
      if a:
        for j, b in enumerate(row):
          out[i + j] += a * b
    first, masses, denominator = first + v0, out, denominator * TWO64
  if int(tables.flip):  # count − X
    first, masses = count - (first + len(masses) - 1), masses[::-1]
  return first, masses, denominator


def _exact_pmf(count, prob) -> list[fractions.Fraction]:
  p = fractions.Fraction(prob)
  return [math.comb(count, k) * p**k * (1 - p)**(count - k) for k in range(count + 1)]


def _total_variation(first, masses, denominator, pmf) -> fractions.Fraction:
  implied = {first + i: fractions.Fraction(m, denominator) for i, m in enumerate(masses) if m}
  support = set(implied) | set(range(len(pmf)))
  return sum(abs(implied.get(v, 0) - (pmf[v] if 0 <= v < len(pmf) else 0))
             for v in support) / 2


# ---- 1. host exactness ---------------------------------------------------------------------

WINDOW = dict(base_count=60, max_extra=20)


@pytest.mark.parametrize('prob, max_count, window, counts', [
    (0.3, 100, {}, (0, 1, 37, 64, 100, 127)),
    (0.7, 100, {}, (1, 37, 100)),                         # p > 1/2: count − Binomial(count, 0.3)
    (0.5, 128, {}, (77, 128)),
    (1e-7, 100, {}, (1, 99)),
    (0.0, 50, {}, (0, 33)),
    (1.0, 50, {}, (0, 33)),
    (0.3, 100, WINDOW, (59, 60, 71, 80, 81)),            # window and its edges (r = 5)
    (0.3, 100, dict(WINDOW, window_digit_bits=1), (60, 71, 80)),  # binary remainder digits
    (0.7, 100, dict(WINDOW, window_digit_bits=2), (60, 79)),
], ids=lambda value: repr(value))
def test_implied_law_is_within_the_certified_bound(prob, max_count, window, counts):
  tables = binomial32.binomial32_tables(prob, max_count, **window)
  bound = fractions.Fraction(binomial32.total_variation_bound(tables))
  for count in counts:
    first, masses, denominator = _implied_law(tables, count)
    assert sum(masses) == denominator
    distance = _total_variation(first, masses, denominator, _exact_pmf(count, prob))
    assert distance <= bound, (count, float(distance), float(bound))
    if prob in (0.0, 1.0):  # a point mass, exactly
      assert distance == 0 and first == (count if prob == 1.0 else 0)


@pytest.mark.parametrize('prob', [0.3, 0.7])
def test_thresholds_are_ceilings_of_the_exact_cdf(prob):
  # Every row: 0 ≤ T_i − F(v₀ + i)·2⁶⁴ < 1, tails below 2⁻⁶⁴ (exact rationals).
  tables = binomial32.binomial32_tables(prob, 100, **WINDOW)
  q = min(prob, 1 - prob)
  bits = tables.remainder_hi[0].shape[0].bit_length() - 1
  rows = [(1 << i, tables.digit_first[i], tables.digit_hi[i], tables.digit_lo[i])
          for i in range(len(tables.digit_hi))]
  rows.append((60, tables.base_first[0], tables.base_hi[0], tables.base_lo[0]))
  rows += [(d, tables.remainder_first[0][d], tables.remainder_hi[0][d],
            tables.remainder_lo[0][d]) for d in range(21)]
  assert len(tables.remainder_hi) == 1 and bits == 5
  for count, first, hi, lo in rows:
    pmf = _exact_pmf(count, q)
    cdf = np.cumsum(np.array(pmf, dtype=object))
    finite = [t + 1 for t in _thresholds(hi, lo) if t != SENTINEL]
    v0, v1 = int(first), int(first) + len(finite)
    assert (cdf[v0 - 1] if v0 > 0 else 0) < fractions.Fraction(1, TWO64)
    assert 1 - cdf[v1] < fractions.Fraction(1, TWO64)
    for i, threshold in enumerate(finite):
      assert 0 <= threshold - cdf[v0 + i] * TWO64 < 1, (count, i)


def _mp_pmf(count, prob, k):
  return mpmath.binomial(count, k) * prob**k * (1 - prob)**(count - k)


@pytest.mark.skipif(mpmath is None, reason='mpmath not installed')
def test_large_rows_against_mpmath():
  with mpmath.workdps(60):
    # Row 2²⁰ of p = 0.01 (~2,000 thresholds): ceilings of the 60-digit CDF, tails < 2⁻⁶⁴.
    tables = binomial32.binomial32_tables(0.01, 1 << 20)
    count, first = 1 << 20, int(tables.digit_first[20])
    p = mpmath.mpf(0.01)
    finite = [t + 1 for t in _thresholds(tables.digit_hi[20], tables.digit_lo[20]) if t != SENTINEL]
    # F(v₀ − 1): the lower tail, summed down until the terms (falling geometrically, ratio < 0.99
    # here) are below 10⁻⁶⁰ of it.
    cdf, k = mpmath.mpf(0), first - 1
    while True:
      term = _mp_pmf(count, p, k)
      cdf += term
      if term < cdf * mpmath.mpf(10)**-62:
        break
      k -= 1
    assert cdf < mpmath.mpf(2)**-64
    for i, threshold in enumerate(finite):
      cdf += _mp_pmf(count, p, first + i)
      assert 0 <= threshold - cdf * TWO64 < 1, i
    assert 1 - cdf - _mp_pmf(count, p, first + len(finite)) < mpmath.mpf(2)**-64
    # A second opinion on the centre of the row (scipy, float64).
    centre = len(finite) // 2 + np.arange(-20, 20)
    np.testing.assert_allclose(np.diff(finite)[centre - 1] / 2.0**64,
                               stats.binom.pmf(first + centre, count, 0.01), rtol=1e-9)

    # Count 2²⁵ − 1 at p = 10⁻⁷ (25 rows): the convolution against the 60-digit pmf.
    tables = binomial32.binomial32_tables(1e-7, (1 << 25) - 1)
    count = (1 << 25) - 1
    first, masses, denominator = _implied_law(tables, count)
    p = mpmath.mpf(1e-7)
    distance, covered = mpmath.mpf(0), mpmath.mpf(0)
    for i, mass in enumerate(masses):
      exact = _mp_pmf(count, p, first + i)
      covered += exact
      distance += abs(mpmath.mpf(mass) / denominator - exact)
    distance = (distance + (1 - covered)) / 2
    assert distance <= binomial32.total_variation_bound(tables)


def test_tables_are_cached_read_only_and_sized():
  tables = binomial32.binomial32_tables(1.3e-4, 14_005_000, base_count=13_995_000,
                                        max_extra=10_000)
  assert binomial32.binomial32_tables(1.3e-4, 14_005_000, base_count=13_995_000,
                                      max_extra=10_000) is tables
  assert not tables.digit_hi[3].flags.writeable
  # The seed 000 §7.4 shape: 24 digit rows, a base row, two base-2⁷ remainder positions.
  assert binomial32.words_per_draw(tables) == 25
  assert binomial32.window_words_per_draw(tables) == 3
  assert binomial32.table_bytes(tables) < 1 << 20
  assert 1e-17 < binomial32.total_variation_bound(tables) < 1e-15


# ---- 2. device = host at and around every threshold ------------------------------------------

def _lanes_at_thresholds(tables, max_count, rng):
  """(words (N, W) as Python ints, counts): for each row, each stored t: W ∈ {t, t + 1, t + 2}
  in that row's column, with a count that reads the row; other columns uniform."""
  width = binomial32.words_per_draw(tables)
  counts_by_row = {}
  for count in range(max_count + 1):
    for column, first, stored in _reads(tables, count):
      counts_by_row.setdefault((column, first, tuple(stored)), []).append(count)
  words, counts = [], []
  for (column, _, stored), candidates in counts_by_row.items():
    for t in stored:
      if t == SENTINEL:
        continue
      for w in (t, t + 1, t + 2):
        row = [int(x) for x in rng.integers(0, TWO64, width, dtype=np.uint64)]
        row[column] = min(w, SENTINEL)
        words.append(row)
        counts.append(int(rng.choice(candidates)))
  for count in (0, max_count, -1, (1 << len(tables.digit_hi))):  # edges and out of range
    for w in (0, SENTINEL):
      words.append([w] * width)
      counts.append(count)
  return words, counts


def _device_draws(tables, words, counts, lanes, fallback=False):
  padded = words + [[0] * len(words[0])] * (lanes - len(words))
  array = np.array(padded, dtype=np.uint64)
  hi, lo = (array >> np.uint64(32)).astype(np.uint32), array.astype(np.uint32)
  counts = np.array(counts + [0] * (lanes - len(counts)), np.int32)
  with program32.scope():
    if fallback:  # only the window's columns, the rest from the callback
      narrow = binomial32.window_words_per_draw(tables)
      fn = jax.jit(lambda h, l, c, t: binomial32.binomial32(
          h[:, :narrow], l[:, :narrow], c, t, fallback_words=lambda: (h, l)))
    else:
      fn = jax.jit(binomial32.binomial32)
    return np.asarray(fn(hi, lo, counts, tables))


@pytest.mark.parametrize('prob, window', [
    (0.3, {}),
    (0.3, WINDOW),
    (0.7, dict(WINDOW, window_digit_bits=2)),
], ids=['digits', 'window', 'window-r2-flip'])
def test_device_draws_equal_the_reference_inversion(prob, window):
  tables = binomial32.binomial32_tables(prob, 100, **window)
  words, counts = _lanes_at_thresholds(tables, 127, np.random.default_rng(7))
  lanes = 1 << (len(counts) - 1).bit_length()
  got = _device_draws(tables, words, counts, lanes)[:len(counts)]
  want = [_reference_draw(tables, c, w) for c, w in zip(counts, words)]
  np.testing.assert_array_equal(got, want)
  if window:  # the fallback_words form reads the same words, so draws the same
    np.testing.assert_array_equal(
        _device_draws(tables, words, counts, lanes, fallback=True)[:len(counts)], want)


@pytest.mark.parametrize('prob', [0.0, 1.0])
def test_degenerate_probabilities_on_device(prob):
  tables = binomial32.binomial32_tables(prob, 100)
  counts = [0, 1, 37, 100, 127]
  words = [[SENTINEL] * binomial32.words_per_draw(tables)] * len(counts)
  got = _device_draws(tables, words, counts, 8)[:len(counts)]
  np.testing.assert_array_equal(got, np.array(counts) if prob == 1.0 else 0)


# ---- 3. random draws: χ² against the exact law ---------------------------------------------

N = 1 << 16


def _chi_square_pvalue(draws, count, prob):
  """χ² of the draws against scipy's Binomial(count, prob), cells of expectation < 5 pooled
  into their neighbours at each end."""
  support = np.arange(count + 1)
  expected = stats.binom.pmf(support, count, prob) * draws.size
  observed = np.bincount(draws, minlength=count + 1).astype(float)
  keep = np.flatnonzero(expected >= 5)
  low, high = keep[0], keep[-1]
  expected = np.concatenate([[expected[:low + 1].sum()], expected[low + 1:high],
                             [expected[high:].sum()]])
  observed = np.concatenate([[observed[:low + 1].sum()], observed[low + 1:high],
                             [observed[high:].sum()]])
  return stats.chisquare(observed, expected * observed.sum() / expected.sum()).pvalue


@pytest.mark.parametrize('prob, max_count, window, cases', [
    (0.3, 63, {}, (37,)),
    (0.7, 63, {}, (37,)),
    (0.01, 1200, dict(base_count=950, max_extra=100), (1000, 1100)),  # window lane, digit lane
], ids=['37-0.3', '37-0.7-flip', '1000-0.01-window'])
def test_random_draws_follow_the_binomial_law(prob, max_count, window, cases):
  # Fixed host words: deterministic. p-value > 1e-6: the four tests would wrongly fail with
  # probability < 4e-6 under the exact law (the implied law is within 1e-16 of it), while an
  # off-by-one threshold, a wrong row or flip moves 2^16 draws by far more.
  tables = binomial32.binomial32_tables(prob, max_count, **window)
  rng = np.random.default_rng(max_count + round(100 * prob))
  width = binomial32.words_per_draw(tables)
  hi = rng.integers(0, 2**32, (N, width), dtype=np.uint64).astype(np.uint32)
  lo = rng.integers(0, 2**32, (N, width), dtype=np.uint64).astype(np.uint32)
  counts = np.array(cases, np.int32)[np.arange(N) % len(cases)]
  with program32.scope():
    draws = np.asarray(jax.jit(binomial32.binomial32)(hi, lo, counts, tables))
  for j, count in enumerate(cases):
    lane_draws = draws[j::len(cases)]
    assert lane_draws.min() >= 0 and lane_draws.max() <= count
    assert _chi_square_pvalue(lane_draws, count, prob) > 1e-6, count


# ---- 4. no 64-bit type in the program ------------------------------------------------------

# Element types of values (not the i64 of MLIR attributes such as ``slice_sizes = array<i64: 1>``).
_WIDE_LOWERED = re.compile(r'(?<!array<)\b(f64|i64|ui64)\b')
_WIDE_COMPILED = re.compile(r'\b(f64|s64|u64|c128)\[')


def test_lowered_sampler_holds_no_64_bit_type():
  tables = binomial32.binomial32_tables(0.3, 1000, base_count=600, max_extra=300)
  lanes = 64
  narrow = binomial32.window_words_per_draw(tables)
  hi = np.zeros((lanes, binomial32.words_per_draw(tables)), np.uint32)
  counts = np.zeros(lanes, np.int32)

  def sample(hi, lo, counts, tables):
    def step(carry, _):  # as a kernel uses it: a scan over rounds, counts from the last draw
      draws = binomial32.binomial32(hi[:, :narrow], lo[:, :narrow], carry, tables,
                                    fallback_words=lambda: (hi, lo))
      return draws, draws
    return jax.lax.scan(step, counts, None, length=3)[1]

  with program32.scope():
    lowered = jax.jit(sample).lower(hi, hi, counts, tables)
    text, compiled = lowered.as_text(), lowered.compile().as_text()
  assert 'stablehlo.gather' in text and not _WIDE_LOWERED.findall(text)
  assert not _WIDE_COMPILED.findall(compiled)
  with jax.enable_x64(True):  # the check can fail
    wide = jax.jit(lambda c: c.astype(jnp.int64) + 1).lower(counts).as_text()
  assert _WIDE_LOWERED.findall(wide)


# ---- 5. bad inputs -------------------------------------------------------------------------

@pytest.mark.parametrize('kwargs, error, name', [
    (dict(prob=1.5, max_count=10), ValueError, 'prob'),
    (dict(prob=float('nan'), max_count=10), ValueError, 'prob'),
    (dict(prob='0.3', max_count=10), TypeError, 'prob'),
    (dict(prob=0.3, max_count=-1), ValueError, 'max_count'),
    (dict(prob=0.3, max_count=2**31), ValueError, 'max_count'),
    (dict(prob=0.3, max_count=10.0), TypeError, 'max_count'),
    (dict(prob=0.3, max_count=10, base_count=3), ValueError, 'max_extra'),
    (dict(prob=0.3, max_count=10, base_count=8, max_extra=3), ValueError, 'max_extra'),
    (dict(prob=0.3, max_count=10, base_count=-1, max_extra=3), ValueError, 'base_count'),
    (dict(prob=0.3, max_count=10, base_count=2, max_extra=3, window_digit_bits=13), ValueError,
     'window_digit_bits'),
    (dict(prob=0.3, max_count=10, window_digit_bits=2), ValueError, 'window_digit_bits'),
    (dict(prob=0.5, max_count=1 << 20, max_table_bytes=1 << 16), ValueError, 'max_table_bytes'),
])
def test_bad_table_arguments_are_refused(kwargs, error, name):
  with pytest.raises(error, match=name):
    binomial32.binomial32_tables(**kwargs)


def test_bad_device_arguments_are_refused():
  tables = binomial32.binomial32_tables(0.3, 100)
  width = binomial32.words_per_draw(tables)
  words = np.zeros((4, width), np.uint32)
  counts = np.zeros(4, np.int32)
  with pytest.raises(TypeError, match='hi'):
    binomial32.binomial32(words.astype(np.int32), words, counts, tables)
  with pytest.raises(TypeError, match='counts'):
    binomial32.binomial32(words, words, counts.astype(np.int64), tables)
  with pytest.raises(ValueError, match='hi and lo'):
    binomial32.binomial32(words[:, 1:], words[:, 1:], counts, tables)
  with pytest.raises(ValueError, match='fallback_words'):
    binomial32.binomial32(words, words, counts, tables, fallback_words=lambda: (words, words))
