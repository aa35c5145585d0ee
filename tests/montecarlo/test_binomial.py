"""Exact Binomial draws (``montecarlo/engine/binomial.py``): law, lane independence, Stirling tail.

The law is checked by χ² against scipy's pmf over the central 1 − 2·10⁻⁷ of
the support (cells with expected count < 5 pooled), at p > 10⁻³ with fixed
keys: deterministic, and a wrong acceptance test (or a wrong flip, or an
off-by-one in the inversion) shifts the law by far more than the test's
resolution at 10⁵ draws. One call shape (N = 10⁵) serves all cases: one compile.
"""

import jax
import jax.numpy as jnp
import numpy as np
import pytest
from scipy import stats

from jaxacct._precision import scoped_x64
from jaxacct.montecarlo.engine import binomial
from jaxacct.montecarlo.engine import keys as keys_lib

try:
  import mpmath
except ImportError:  # pragma: no cover - mpmath ships with dp_accounting
  mpmath = None

N = 100_000


@scoped_x64
def _draw(seed, counts, prob):
  keys = keys_lib.sample_keys(jax.random.key(seed), jnp.asarray(0, jnp.int64), N)
  return np.asarray(jax.jit(binomial.binomial)(keys, jnp.asarray(counts, jnp.int64),
                                                jnp.asarray(prob, jnp.float64)))


def _chi_square(draws, count, prob):
  lo, hi = stats.binom.ppf([1e-7, 1 - 1e-7], count, prob).astype(int)
  support = np.arange(lo, hi + 1)
  expected = stats.binom.pmf(support, count, prob) * draws.size
  observed = np.array([(draws == k).sum() for k in support], float)
  keep = expected >= 5
  expected = np.append(expected[keep], draws.size - expected[keep].sum())
  observed = np.append(observed[keep], draws.size - observed[keep].sum())
  if expected[-1] < 5:  # merge the pooled rest into the last kept cell
    expected[-2] += expected[-1]
    observed[-2] += observed[-1]
    expected, observed = expected[:-1], observed[:-1]
  return stats.chisquare(observed, expected).pvalue


@pytest.mark.parametrize('count, prob', [
    (5, 0.3),               # inversion (mean ≤ 10)
    (37, 0.27),             # inversion at the switch (mean 9.99)
    (200, 0.051),           # BTRS just above the switch (mean 10.2)
    (20, 0.5),              # p = 1/2 (no flip)
    (100, 0.9),             # p > 1/2: count − Binomial(count, 0.1)
    (3000, 0.5),            # BTRS, moderate
    (14_300_000, 1.25e-4),  # the production shape of seed 000 §7.4 (mean ~1,790)
])
def test_law_matches_scipy(count, prob):
  draws = _draw(count % 101, np.full(N, count), prob)
  assert draws.min() >= 0 and draws.max() <= count
  assert _chi_square(draws, count, prob) > 1e-3
  assert abs(draws.mean() - count * prob) < 5 * np.sqrt(count * prob * (1 - prob) / N)


def test_degenerate_counts_and_probabilities():
  counts = np.arange(N) % 7
  np.testing.assert_array_equal(_draw(1, counts, 1.0), counts)
  np.testing.assert_array_equal(_draw(1, np.zeros(N, int), 0.4), 0)


def test_each_lane_depends_only_on_its_key_and_count():
  # Mixed lanes: half need inversion, half BTRS; a lane's draw must not change with the others'.
  mixed = np.where(np.arange(N) % 2 == 0, 12, 5000)
  together = _draw(2, mixed, 0.3)
  alone_small = _draw(2, np.full(N, 12), 0.3)
  alone_large = _draw(2, np.full(N, 5000), 0.3)
  np.testing.assert_array_equal(together[::2], alone_small[::2])
  np.testing.assert_array_equal(together[1::2], alone_large[1::2])
  assert _chi_square(together[1::2], 5000, 0.3) > 1e-3


@pytest.mark.skipif(mpmath is None, reason='mpmath not installed')
def test_stirling_tail_against_mpmath():
  ks = np.array([0, 1, 5, 9, 10, 11, 30, 1000, 10**6, 10**9], float)
  got = np.asarray(scoped_x64(lambda k: binomial._stirling_tail(jnp.asarray(k)))(ks))
  with mpmath.workdps(40):
    for k, value in zip(ks, got):
      z = mpmath.mpf(k) + 1
      exact = mpmath.loggamma(z) - (mpmath.log(2 * mpmath.pi) / 2 + (z - 0.5) * mpmath.log(z) - z)
      # Series truncated after the k⁻⁷ term: error < 1/(1188 z⁹) (≤ 4e-13 at z = 11).
      bound = 0.0 if k <= 9 else 1.0 / (1188.0 * float(z) ** 9)
      assert abs(float(exact) - value) <= bound + 2e-17, k


# The fallback keys are an argument of one jitted program (per table shape), returned by the
# thunk the library calls: a new ``lambda: fallback`` as a static argument would retrace on
# every call and compile the (N,) keys into the program as a constant, once per seed.
@jax.jit
def _table_binomial(uniforms, counts, prob, table, fallback):
  return binomial.table_binomial(uniforms, counts, prob, table, lambda: fallback)


@jax.jit
def _row_binomial(index, uniform, counts, rows, row, fallback):
  return binomial.row_binomial(index, uniform, counts, rows, row, lambda: fallback)


@scoped_x64
def _table_draw(seed, counts, prob, table):
  keys = keys_lib.sample_keys(jax.random.key(seed), jnp.asarray(0, jnp.int64), N)
  uniforms = binomial.table_uniforms(keys, 1)[0]
  fallback = keys_lib.sample_keys(jax.random.key(seed + 1000), jnp.asarray(0, jnp.int64), N)
  return np.asarray(_table_binomial(uniforms, jnp.asarray(counts, jnp.int64),
                                    jnp.asarray(prob, jnp.float64), table, fallback))


@scoped_x64
def _table(*args):
  return binomial.inversion_table(*args)


def test_table_rows_cover_all_but_negligible_tails():
  table = _table(400, 50, 0.3, 0)
  cdf = np.asarray(table.cdf)
  assert cdf.shape[0] == 50 and np.all(np.diff(cdf, axis=1) >= 0) and np.all(cdf[:, -1] == 1.0)
  for j in (0, 49):
    count, first = 400 + j, int(table.first_values[j])
    assert stats.binom.cdf(first - 1, count, 0.3) < 2.0**-56
    np.testing.assert_allclose(cdf[j, :40], stats.binom.cdf(first + np.arange(40), count, 0.3),
                               rtol=1e-13, atol=1e-300)


@pytest.mark.parametrize('rows, max_extra, count', [
    (50, 0, 431),     # a row per count
    (1, 40, 425),     # one row (K = 400) plus a Binomial(25, p) remainder
    (1, 40, 390),     # below the window: exact fallback
    (1, 40, 460),     # above the window: exact fallback
])
@pytest.mark.slow
def test_table_draws_match_scipy(rows, max_extra, count):
  table = _table(400, rows, 0.1, max_extra)
  draws = _table_draw(3, np.full(N, count), 0.1, table)
  assert _chi_square(draws, count, 0.1) > 1e-3


def test_table_lanes_are_independent_of_other_lanes():
  table = _table(400, 1, 0.1, 40)
  mixed = np.where(np.arange(N) % 2 == 0, 420, 470)  # in the window / fallback
  together = _table_draw(4, mixed, 0.1, table)
  np.testing.assert_array_equal(together[::2], _table_draw(4, np.full(N, 420), 0.1, table)[::2])
  np.testing.assert_array_equal(together[1::2], _table_draw(4, np.full(N, 470), 0.1, table)[1::2])


@scoped_x64
def test_unrolled_inversion_equals_the_loop():
  # The straight-line count must give the loop's answer bit for bit: small and large means,
  # counts below the unrolled length (stop at k = count), u above the float CDF's plateau.
  rng = np.random.default_rng(7)
  u = np.concatenate([rng.uniform(size=4000), 1.0 - rng.uniform(size=200) * 1e-15,
                      rng.uniform(size=200) * 1e-12])
  counts = np.concatenate([rng.integers(0, 5, 1400), rng.integers(0, 40_000, 3000)])
  invert = jax.jit(binomial._invert, static_argnums=3)
  for q in (1e-4, 0.02, 0.3):
    args = (jnp.asarray(u), jnp.asarray(counts, jnp.float64), jnp.asarray(q))
    looped = np.asarray(invert(*args, 0))
    assert looped.max() > 8  # some lanes need the loop after the unrolled steps
    for unrolled in (1, 8):
      np.testing.assert_array_equal(np.asarray(invert(*args, unrolled)), looped)


@scoped_x64
def _row_draws(seed, counts, rows, row, draft=False):
  keys = keys_lib.sample_keys(jax.random.key(seed), jnp.asarray(0, jnp.int64), N)
  index, uniform = (v[row] for v in binomial.row_inputs(keys, rows, np.arange(rows.cdf.shape[0])))
  counts = jnp.asarray(counts)
  if draft:
    return np.asarray(jax.jit(binomial.row_draft)(index, uniform, counts, rows, row))
  fallback = keys_lib.sample_keys(jax.random.key(seed + 1000), jnp.asarray(0, jnp.int64), N)
  return np.asarray(_row_binomial(index, uniform, counts.astype(jnp.int64), rows, row, fallback))


@scoped_x64
def _rows():
  # Row 0: Binomial(400 + e, 0.1), e ≤ 40; row 1: Binomial(2000 + e, 0.01), e ≤ 300.
  return binomial.inversion_rows([400, 2000], [0.1, 0.01], [40, 300])


@pytest.mark.parametrize('row, count', [
    (0, 425),    # X ~ Binomial(400, 0.1) plus a Binomial(25, 0.1) remainder
    (1, 2000),   # no remainder
    (1, 2290),   # remainder of mean 2.9
    (0, 390),    # below the window: exact fallback
    (1, 2400),   # above the window: exact fallback
])
@pytest.mark.slow
def test_row_draws_match_scipy(row, count):
  prob = (0.1, 0.01)[row]
  draws = _row_draws(9 + row, np.full(N, count), _rows(), row)
  assert _chi_square(draws, count, prob) > 1e-3
  assert abs(draws.mean() - count * prob) < 5 * np.sqrt(count * prob * (1 - prob) / N)


@pytest.mark.slow
def test_row_draft_is_the_exact_draw_or_unsure():
  # In the window the draft equals ``row_binomial`` unless the remainder reaches the
  # draft's 12 terms; outside it is −1. Integer and float64 counts draft alike.
  rows = _rows()
  counts = np.random.default_rng(8).integers(380, 460, N)
  exact = _row_draws(8, counts, rows, 0)
  offset = counts - 400
  in_window = (offset >= 0) & (offset <= 40)
  for dtype in (np.int64, np.float64):
    draft = _row_draws(8, counts.astype(dtype), rows, 0, draft=True).astype(np.int64)
    sure = draft >= 0
    np.testing.assert_array_equal(draft[sure], exact[sure])
    assert not np.any(sure & ~in_window)
    first = _row_draws(8, np.full(N, 400), rows, 0)  # X alone: the remainder is empty
    np.testing.assert_array_equal(sure[in_window], (exact - first)[in_window] < 12)
    assert 0 < np.sum(~sure & in_window) < np.sum(in_window)


@scoped_x64
def test_row_inputs_are_the_table_uniforms():
  # The same words as ``table_uniforms``: draw d uses uniforms 2d (X) and 2d + 1 (remainder).
  rows = _rows()
  keys = keys_lib.sample_keys(jax.random.key(3), jnp.asarray(0, jnp.int64), 64)
  uniforms = np.asarray(binomial.table_uniforms(keys, 3))
  index, remainder = binomial.row_inputs(keys, rows, np.array([1, 0, 1]))
  np.testing.assert_array_equal(np.asarray(remainder), uniforms[:, :, 1])
  cdf, first = np.asarray(rows.cdf), np.asarray(rows.first_values)
  for d, row in enumerate([1, 0, 1]):
    want = np.searchsorted(cdf[row], uniforms[d, :, 0], side='left')
    np.testing.assert_array_equal(np.asarray(index[d]), want)
    assert np.all(first[row] + want >= 0)


def test_inversion_stops_at_the_cdf_rounding_plateau():
  # u above the float CDF's plateau (≈ 1 − 4e-16) must not walk to k = count (1e5 steps).
  u = jnp.asarray([1.0 - 2.0**-54, 0.5])
  k = scoped_x64(lambda: binomial._invert(u, jnp.asarray([1e5, 1e5]), jnp.asarray(1e-4)))()
  assert 10 < float(k[0]) < 60 and float(k[1]) == stats.binom.ppf(0.5, 100_000, 1e-4)


def test_binomial_refuses_to_run_without_x64():
  keys = jax.random.split(jax.random.key(0), 4)
  with jax.enable_x64(False):
    with pytest.raises(RuntimeError, match='need 64-bit types'):
      binomial.binomial(keys, jnp.asarray([5, 5, 5, 5]), 0.3)
