"""The warm-start history in 32-bit code (``montecarlo/engine/kernels/history32.py``; seed 000 App. D).

Oracles: the exact multinomial pmf (``fractions``); the exact law implied by the tables (each
draw's rows' integer masses over 2⁶⁴, convolved; the split tree re-derived here by recursion);
scipy for the χ² laws. A second set of tables with narrow windows makes most split draws take
the digit path (``fallback_words``), which must give the same law and lane independence.
Compiled programs: small tables (counts ≤ 60) except the medium case (m = 4000, slow).
"""

from __future__ import annotations

import fractions
import functools
import math
import re

import jax
import numpy as np
import pytest
from scipy import stats

from jaxacct.montecarlo.engine import binomial32, program32
from jaxacct.montecarlo.engine.kernels import history32

TWO64 = 1 << 64
SENTINEL = TWO64 - 1


# ---- host reference: the law implied by the tables ---------------------------------------

def _level_sizes(states):
  """Node sizes per level of the split tree, derived independently of the module."""
  levels, sizes = [], [states]
  while max(sizes) > 1:
    levels.append(sizes)
    sizes = [c for s in sizes for c in ([s // 2, s - s // 2] if s > 1 else [1])]
  return levels


def _table_of(tables, states, level, size):
  groups = sorted({s for s in _level_sizes(states)[level] if s > 1})
  return tables.splits[level][groups.index(size)]


def _stored(hi, lo):
  return [(int(h) << 32) | int(l) for h, l in zip(np.asarray(hi), np.asarray(lo))]


def _rows_read(table, count):
  """[(v₀, stored T − 1)] of the rows a draw of ``count`` reads (binomial32's spec)."""
  extra = count - int(table.base_count)
  if table.base_hi and 0 <= extra <= int(table.max_extra):
    rows = [(int(table.base_first[0]), _stored(table.base_hi[0], table.base_lo[0]))]
    if table.remainder_hi:
      bits = table.remainder_hi[0].shape[0].bit_length() - 1
      for k, (hi, lo) in enumerate(zip(table.remainder_hi, table.remainder_lo)):
        d = (extra >> (bits * k)) & ((1 << bits) - 1)
        rows.append((int(table.remainder_first[k][d]), _stored(hi[d], lo[d])))
    return rows
  return [(int(table.digit_first[i]), _stored(hi, lo))
          for i, (hi, lo) in enumerate(zip(table.digit_hi, table.digit_lo)) if count >> i & 1]


def _draw_law(table, count):
  """{value: probability} of one draw of ``count``: the exact convolution of its rows."""
  law = {0: fractions.Fraction(1)}
  for first, stored in _rows_read(table, count):
    edges = [0] + [t + 1 for t in stored if t != SENTINEL] + [TWO64]
    row = {first + i: fractions.Fraction(b - a, TWO64)
           for i, (a, b) in enumerate(zip(edges, edges[1:])) if b > a}
    new = {}
    for x, px in law.items():
      for y, py in row.items():
        new[x + y] = new.get(x + y, 0) + px * py
    law = new
  if int(table.flip):
    law = {count - v: q for v, q in law.items()}
  return law


def _implied_history_law(tables, min_sep, dataset_size):
  """{(h₁, …, h_M): probability} implied by the tables: total, then recursive halving."""
  states = min_sep - 1

  @functools.lru_cache(maxsize=None)
  def node(level, size, count):
    if size == 1:
      return {(count,): fractions.Fraction(1)}
    out = {}
    for left, p_left in _draw_law(_table_of(tables, states, level, size), count).items():
      for a, pa in node(level + 1, size // 2, left).items():
        for b, pb in node(level + 1, size - size // 2, count - left).items():
          out[a + b] = out.get(a + b, 0) + p_left * pa * pb
    return out

  law = {}
  for total, p_total in _draw_law(tables.total, dataset_size - 1).items():
    for counts, q in node(0, states, total).items():
      law[counts] = law.get(counts, 0) + p_total * q
  return law


def _state_prob(p, min_sep):
  p = fractions.Fraction(p)
  return p / (1 + (min_sep - 1) * p)


def _multinomial_pmf(p, min_sep, dataset_size):
  """{(h₁, …, h_M): exact probability} of the stationary history (seed 000 App. D)."""
  others, states, pi = dataset_size - 1, min_sep - 1, _state_prob(p, min_sep)
  pmf = {}

  def walk(prefix, left):
    if len(prefix) == states:
      barred = sum(prefix)
      coefficient = math.factorial(others) // math.factorial(others - barred)
      for h in prefix:
        coefficient //= math.factorial(h)
      pmf[prefix] = coefficient * pi**barred * (1 - states * pi)**(others - barred)
      return
    for h in range(left + 1):
      walk(prefix + (h,), left - h)
  walk((), others)
  return pmf


def _with_windows(tables, p, min_sep, dataset_size, sds):
  """The same probabilities with each split window the parent count's mean ± ``sds`` s.d.
  (sds = 0: the single count ⌊mean⌋, so most split draws take the digit path). Same law; the
  certified bound covers both paths."""
  states, others = min_sep - 1, dataset_size - 1
  pi = _state_prob(p, min_sep)

  def table(size):
    mean = float(others * size * pi)
    spread = sds * math.sqrt(mean * float(1 - size * pi))
    base = max(0, math.floor(mean - spread))
    return binomial32.binomial32_tables(float(fractions.Fraction(size // 2, size)), others,
                                        base_count=base,
                                        max_extra=min(2 * math.ceil(spread), others - base))
  return tables._replace(splits=tuple(tuple(table(s) for s in sorted({s for s in sizes if s > 1}))
                                      for sizes in _level_sizes(states)))


SMALL = [(0.2, 4, 7), (0.45, 4, 7), (0.3, 6, 7)]  # m − 1 = 6; M = 3 (flip at 0.45), M = 5


@pytest.mark.parametrize('narrow', [False, True], ids=['window', 'digits'])
@pytest.mark.parametrize('p, b, m', SMALL, ids=lambda v: repr(v))
def test_implied_law_is_within_the_certified_bound(p, b, m, narrow):
  tables = history32.history_tables32(p, b, m)
  if narrow:
    tables = _with_windows(tables, p, b, m, 0)
  implied = _implied_history_law(tables, b, m)
  exact = _multinomial_pmf(p, b, m)
  assert sum(implied.values()) == 1 and sum(exact.values()) == 1
  assert set(implied) <= set(exact)
  distance = sum(abs(implied.get(h, 0) - q) for h, q in exact.items()) / 2
  bound = history32.history_total_variation(tables)
  assert 0 < distance <= fractions.Fraction(bound), (float(distance), bound)
  assert bound < 1e-15  # ~(rows + 2)·2⁻⁶⁴ per draw, plus ~1e-17 from rounding 1/3, 2/5


def test_total_variation_adds_rounding_to_the_rows():
  # p = 1, b = 3: π = 1/3, Mπ = 2/3 (rounded), the one split is 1/2 (exact).
  tables = history32.history_tables32(1.0, 3, 11)
  rows = binomial32.total_variation_bound(tables.total) + binomial32.total_variation_bound(
      tables.splits[0][0])
  assert float(tables.probability_rounding) > 0
  assert rows < history32.history_total_variation(tables) <= rows + 1.001 * float(
      tables.probability_rounding)
  # b = 2 and p = 1: the total is Binomial(m − 1, 1/2), exact; no split.
  tables = history32.history_tables32(1.0, 2, 11)
  assert tables.splits == () and float(tables.probability_rounding) == 0


# ---- device draws ------------------------------------------------------------------------

def _draw(tables, min_sep, keys):
  with program32.scope():
    fn = jax.jit(history32.stationary_history32, static_argnames='min_sep')
    return np.asarray(fn(keys, tables, min_sep=min_sep))


def _keys(seed, num):
  with program32.scope():
    return jax.random.split(jax.random.key(seed), num)


def _chi_square_pvalue(observed_counts, expected_probs):
  """χ² of observed counts against probabilities; cells of expectation < 5 pooled into one."""
  observed = np.asarray(observed_counts, float)
  expected = np.asarray(expected_probs, float) * observed.sum()
  small = expected < 5
  if small.any():
    observed = np.append(observed[~small], observed[small].sum())
    expected = np.append(expected[~small], expected[small].sum())
  return stats.chisquare(observed, expected * observed.sum() / expected.sum()).pvalue


N_SMALL = 1 << 15


@pytest.mark.parametrize('p, b, m', SMALL[:2], ids=lambda v: repr(v))
def test_device_draws_follow_the_multinomial(p, b, m):
  # Fixed keys: deterministic. p-value > 1e-6: under the exact law (the implied law is within
  # 1e-15 of it) a χ² this small has probability 1e-6, while a wrong split probability, leaf
  # order or word reuse moves 2¹⁵ draws of ~80 cells far more.
  draws = _draw(history32.history_tables32(p, b, m), b, _keys(round(100 * p), N_SMALL))
  assert draws.shape == (N_SMALL, b - 1) and draws.dtype == np.int32
  exact = _multinomial_pmf(p, b, m)
  cells = sorted(exact)
  index = {h: i for i, h in enumerate(cells)}
  observed = np.bincount([index[tuple(row)] for row in draws.tolist()], minlength=len(cells))
  assert _chi_square_pvalue(observed, [float(exact[h]) for h in cells]) > 1e-6


def test_digit_path_draws_follow_the_multinomial_and_do_not_depend_on_lanes():
  # Narrow windows: most splits read the digit rows (the fallback words). The law is still
  # the multinomial, and a lane's draws do not depend on which other lanes needed the fallback.
  p, b, m = 0.3, 6, 7
  tables = _with_windows(history32.history_tables32(p, b, m), p, b, m, 0)
  draws = _draw(tables, b, _keys(3, N_SMALL))
  exact = _multinomial_pmf(p, b, m)
  cells = sorted(exact)
  index = {h: i for i, h in enumerate(cells)}
  observed = np.bincount([index[tuple(row)] for row in draws.tolist()], minlength=len(cells))
  assert _chi_square_pvalue(observed, [float(exact[h]) for h in cells]) > 1e-6
  keys = _keys(3, N_SMALL)[:8]
  np.testing.assert_array_equal(_draw(tables, b, keys[3:6]), draws[3:6])


def _outside_window(tables, b, draws):
  """Per lane: whether some split draw's count fell outside its table's window (the lane
  needed the fallback words), from the drawn leaves."""
  states, outside = b - 1, np.zeros(draws.shape[0], bool)
  for level, sizes in enumerate(_level_sizes(states)):
    # The leaves under each node of this level, left to right.
    ends = np.cumsum([0] + [s for s in sizes])
    for j, size in enumerate(sizes):
      if size > 1:
        table = _table_of(tables, states, level, size)
        count = draws[:, ends[j]:ends[j + 1]].sum(axis=1)
        extra = count - int(table.base_count)
        outside |= (extra < 0) | (extra > int(table.max_extra))
  return outside


def test_same_keys_same_counts_whatever_the_number_of_lanes():
  # m − 1 = 60 with windows of ±1 s.d.: lanes 0 and 7 need the fallback (digit path) at some
  # split while lanes 3..5 do not, so the two calls take different branches of binomial32's
  # cond (seed 9 chosen for that; asserted below).
  p, b, m = 0.3, 4, 61
  tables = _with_windows(history32.history_tables32(p, b, m), p, b, m, 1)
  keys = _keys(9, 8)
  full = _draw(tables, b, keys)
  part = _draw(tables, b, keys[3:6])
  np.testing.assert_array_equal(part, full[3:6])
  outside = _outside_window(tables, b, full)
  assert outside.any() and not outside[3:6].any(), outside  # the mixed case is exercised
  assert np.all(full.sum(axis=1) <= m - 1) and np.all(full >= 0)


@pytest.mark.parametrize('p, b, m', [
    (1.0, 2, 10),      # b = 2: no split, H ~ Binomial(9, 1/2)
    (1.0, 6, 50),      # p = 1, M = 5 (not a power of two)
    (1e-12, 5, 1000),  # tiny p: all zero but for ~10⁻⁹
    (0.3, 4, 1),       # m − 1 = 0: no other example
])
def test_edge_cases(p, b, m):
  draws = _draw(history32.history_tables32(p, b, m), b, _keys(5, 64))
  assert draws.shape == (64, b - 1) and draws.dtype == np.int32
  assert np.all(draws >= 0) and np.all(draws.sum(axis=1) <= m - 1)
  if m == 1 or p < 1e-9:
    assert not draws.any()
  if p == 1.0:  # π = 1/b per state: the mean is (m − 1)/b
    assert abs(draws.mean() - (m - 1) / b) < 5 * math.sqrt((m - 1) / b / draws.size)


@pytest.mark.slow
def test_medium_case_marginals_and_total():
  # m = 4000, b = 8, p = 0.025 (the small configuration): each h_k ~ Binomial(m − 1, π), mean
  # within 5 standard errors and χ² (p > 1e-6); Σ h_k ~ Binomial(m − 1, 7π) by χ².
  p, b, m = 0.025, 8, 4000
  num = 1 << 13
  draws = _draw(history32.history_tables32(p, b, m), b, _keys(23, num))
  pi = float(_state_prob(p, b))
  others = m - 1
  error = math.sqrt(others * pi * (1 - pi) / num)
  np.testing.assert_array_less(np.abs(draws.mean(axis=0) - others * pi), 5 * error)
  support = np.arange(others + 1)
  for k in range(b - 1):
    observed = np.bincount(draws[:, k], minlength=others + 1)
    assert _chi_square_pvalue(observed, stats.binom.pmf(support, others, pi)) > 1e-6, k
  total = draws.sum(axis=1)
  observed = np.bincount(total, minlength=others + 1)
  assert _chi_square_pvalue(observed, stats.binom.pmf(support, others, (b - 1) * pi)) > 1e-6
  # Negative correlation of two states, −π/(1 − π) ≈ −0.022, within 5/√N.
  assert abs(np.corrcoef(draws[:, 0], draws[:, -1])[0, 1] + pi / (1 - pi)) < 5 / math.sqrt(num)


# ---- no 64-bit type in the program ---------------------------------------------------------

_WIDE_LOWERED = re.compile(r'(?<!array<)\b(f64|i64|ui64)\b')
_WIDE_COMPILED = re.compile(r'\b(f64|s64|u64|c128)\[')


def test_lowered_history_holds_no_64_bit_type():
  # M = 5: two tables at a level, leaves passing through; the shapes of test_edge_cases[1.0-6-50]
  # (its compiled program is reused).
  b = 6
  tables = history32.history_tables32(1.0, b, 50)
  keys = _keys(5, 64)
  with program32.scope():
    lowered = jax.jit(history32.stationary_history32, static_argnames='min_sep').lower(
        keys, tables, min_sep=b)
    text, compiled = lowered.as_text(), lowered.compile().as_text()
  assert 'stablehlo.gather' in text and 'threefry' in text.lower()
  assert not _WIDE_LOWERED.findall(text)
  assert 'u32[' in compiled and not _WIDE_COMPILED.findall(compiled)
  leaves = jax.tree_util.tree_leaves(tables)
  assert all(np.asarray(leaf).dtype.itemsize <= 4 for leaf in leaves)


# ---- bad inputs --------------------------------------------------------------------------

@pytest.mark.parametrize('args, error, name', [
    ((0.0, 4, 10), ValueError, 'sampling_prob'),
    ((1.5, 4, 10), ValueError, 'sampling_prob'),
    ((float('nan'), 4, 10), ValueError, 'sampling_prob'),
    (('0.1', 4, 10), TypeError, 'sampling_prob'),
    ((0.1, 1, 10), ValueError, 'min_sep'),
    ((0.1, 4.0, 10), TypeError, 'min_sep'),
    ((0.1, 0, 10), ValueError, 'min_sep'),
    ((0.1, 4, 0), ValueError, 'dataset_size'),
    ((0.1, 4, 2**31 + 1), ValueError, 'dataset_size'),
    ((0.1, 4, np.array([10])), TypeError, 'dataset_size'),
])
def test_bad_table_arguments_are_refused(args, error, name):
  with pytest.raises(error, match=name):
    history32.history_tables32(*args)


def test_bad_device_arguments_are_refused():
  tables = history32.history_tables32(0.2, 4, 7)
  keys = _keys(0, 4)
  with pytest.raises(ValueError, match='min_sep'):
    history32.stationary_history32(keys, tables, 5)
  with pytest.raises(ValueError, match='min_sep'):
    history32.stationary_history32(keys, tables, 1)
  with pytest.raises(TypeError, match='min_sep'):
    history32.stationary_history32(keys, tables, 4.0)
  with pytest.raises(TypeError, match='tables'):
    history32.stationary_history32(keys, tables.total, 4)
  with pytest.raises(ValueError, match='keys'):
    history32.stationary_history32(keys[0], tables, 4)
