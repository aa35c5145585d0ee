"""Tests for jaxacct.strategies.banded_toeplitz (``matrices`` here, its old name) against NumPy
brute force and reference values.

Oracles: dense NumPy matrices built entry by entry from the definition
C[i + k, i] = c[k] (never via the code under test), ``np.linalg.solve`` for
A·C⁻¹, exhaustive enumeration of participation patterns for small n, and the
reference values of /work/shared/spec/reference-values.md §12 (jax_privacy run
in float64). Nothing here changes global JAX config; the ``x64`` fixture sets
``jax_enable_x64`` in a scoped context, both ways.
"""

from __future__ import annotations

import importlib
import itertools
import math
import sys

import chex
import jax
import jax.numpy as jnp
import numpy as np
import pytest

import jaxacct
from jaxacct import BandedToeplitz
from jaxacct.strategies import banded_toeplitz as matrices

# reference-values.md §12: (n, bands, loss(FHU), loss(optimised)).
_REFERENCE_LOSSES = [
    (16, 4, 3.768239497, 3.754023566),
    (64, 8, 7.395300832, 7.096761917),
    (128, 16, 8.67949974, 8.251567183),
    (1000, 16, 50.94206688, 39.41531727),
]


@pytest.fixture(params=[False, True], ids=['x64_off', 'x64_on'])
def x64(request):
  """Runs the test with jax_enable_x64 off and on, scoped (never global)."""
  with jax.enable_x64(request.param):
    yield request.param


@pytest.fixture
def strict_promotion():
  with jax.numpy_dtype_promotion('strict'), jax.numpy_rank_promotion('raise'):
    yield


def _dense_numpy(c, n):
  """C from the definition C[i + k, i] = c[k], entry by entry."""
  c = np.asarray(c, dtype=np.float64)
  dense = np.zeros((n, n))
  for i in range(n):
    for k in range(len(c)):
      if i + k < n:
        dense[i + k, i] = c[k]
  return dense


def _dense_prefix_sum_mse(c, n):
  """(1/n)‖A C⁻¹‖_F² · max column norm² by a dense solve (seed 000 §7.1)."""
  dense = _dense_numpy(c, n)
  prefix = np.tril(np.ones((n, n)))
  workload_over_c = np.linalg.solve(dense.T, prefix.T).T  # A C⁻¹
  return np.mean(np.sum(workload_over_c**2, axis=1)) * np.max(np.sum(dense**2, axis=0))


def _brute_force_min_sep_sensitivity_squared(c, min_sep, n):
  """max ‖Cx‖² over all x ∈ {0,1}ⁿ whose ones are >= min_sep apart."""
  patterns = np.array(list(itertools.product((0.0, 1.0), repeat=n)))  # (2ⁿ, n)
  valid = [np.all(np.diff(np.flatnonzero(x)) >= min_sep) for x in patterns]
  images = patterns[valid] @ _dense_numpy(c, n).T  # rows are (C x)ᵀ
  return float(np.max(np.sum(images**2, axis=1)))


def _random_band(rng, bands):
  c = rng.uniform(0.0, 1.0, size=bands)
  c[0] += 0.1  # keep C well conditioned
  return c


# ---------------------------------------------------------------- construction


def test_construct_positionally_and_by_keyword():
  values = np.array([1.0, 0.5, 0.25])
  by_position = BandedToeplitz(values)
  by_keyword = BandedToeplitz(c_col=[1, 0.5, 0.25])
  assert by_position == by_keyword
  assert by_position.num_bands == 3 and isinstance(by_position.num_bands, int)
  assert by_position.c_col.dtype == np.float64
  assert not by_position.c_col.flags.writeable
  values[1] = 7.0  # the object holds its own copy
  # Expected: the values passed at construction, before the mutation above.
  np.testing.assert_array_equal(by_position.c_col, [1.0, 0.5, 0.25])


def test_equality_and_hash():
  a = BandedToeplitz([1.0, 0.5])
  assert a == BandedToeplitz(np.array([1.0, 0.5]))
  assert hash(a) == hash(BandedToeplitz([1.0, 0.5]))
  assert a != BandedToeplitz([1.0, 0.25])
  assert a != BandedToeplitz([1.0, 0.5, 0.0])
  assert a != (1.0, 0.5)
  assert {a: 'x'}[BandedToeplitz([1.0, 0.5])] == 'x'


def test_identity_is_the_one_band_strategy_in_every_accounting_sense():
  """``BandedToeplitz.identity()`` (DP-SGD's C = I) is ``BandedToeplitz([1.0])``: the same
  object for equality, hashing, checkpoints (fingerprint), the attempt ledger (its sketch up
  to scale), every sensitivity, the Monte Carlo view and the schemes' fallback Δ²."""
  identity, one_band = BandedToeplitz.identity(), BandedToeplitz([1.0])
  assert identity is not BandedToeplitz.identity()  # a fresh object each call
  assert isinstance(identity, BandedToeplitz) and identity.num_bands == 1
  assert identity == one_band and hash(identity) == hash(one_band)
  assert identity.fingerprint == one_band.fingerprint == (1.0,)
  assert identity.scale_free_sketch() == one_band.scale_free_sketch() == (
      'banded_toeplitz', (1.0,))
  # C and 3·C are one strategy up to scale for the ledger (σ rescales with it).
  assert BandedToeplitz([3.0]).scale_free_sketch() == identity.scale_free_sketch()
  assert identity.summary == one_band.summary == 'C = I'
  n = 10
  np.testing.assert_array_equal(identity.materialize(n), np.eye(n))
  np.testing.assert_array_equal(identity.column_squared_norms(n), np.ones(n))
  assert float(identity.max_column_norm()) == 1.0
  for min_sep in (1, 3, n):
    # C = I: ‖C·x‖² is the number of participations, at most ⌈n/b⌉ b apart.
    expected = math.ceil(n / min_sep)
    assert identity.separated_sensitivity_squared(min_sep, n) == expected
    assert one_band.separated_sensitivity_squared(min_sep, n) == expected
  scheme = jaxacct.BMinSep(sampling_prob=0.2, iterations=n, min_sep=3)
  assert scheme.max_sensitivity_squared(identity) == scheme.max_sensitivity_squared(one_band)
  identity.check_scheme(jaxacct.Poisson(sampling_prob=0.1, iterations=n))  # no refusal
  np.testing.assert_array_equal(identity.kernel_view(scheme).c_col, [1.0])
  assert identity.noise_bands()[0].tolist() == [1.0]
  assert jaxacct.BandedToeplitz.identity() == identity  # reachable from the top level


# ---------------------------------------------------------------- column norms


@pytest.mark.parametrize('c,n', [
    ([3.0, 2.0, 1.0], 6),
    ([1.0, 0.0, 2.0, 0.5], 9),
    ([0.7, 0.1, 0.4, 0.9, 0.3], 3),  # more bands than iterations
    ([2.0], 4),
], ids=lambda v: f'{v}')
def test_column_squared_norms_match_dense_brute_force(c, n, x64):
  got = np.asarray(BandedToeplitz(c).column_squared_norms(n))
  # Expected: squared column norms of the dense NumPy C built from the definition.
  np.testing.assert_allclose(got, np.sum(_dense_numpy(c, n)**2, axis=0), rtol=1e-15)
  assert got.dtype == np.float64  # eager calls compute in float64 either way


def test_column_squared_norms_decrease_towards_the_end():
  # Spec 000 §4.3 / §11 pitfall 2: s_{n−1−k} = Σ_{j≤k} c_j²; jax_privacy gets the
  # order of the last m − 1 values wrong, so spell them out for m = 3.
  s = np.asarray(BandedToeplitz([3.0, 2.0, 1.0]).column_squared_norms(6))
  # Expected by hand: ‖c‖² = 9 + 4 + 1 = 14 for columns 0..3, then 9 + 4, then 9.
  np.testing.assert_array_equal(s, [14.0, 14.0, 14.0, 14.0, 13.0, 9.0])
  assert s[-1] == 3.0**2  # s_{n−1} = c₀²
  assert s[-2] == 3.0**2 + 2.0**2  # s_{n−2} = c₀² + c₁²
  assert np.all(np.diff(s) <= 0)


def test_max_column_norm():
  strategy = BandedToeplitz([3.0, 2.0, 1.0])
  # Expected: sqrt(9 + 4 + 1) by hand (untruncated ‖c‖₂), and for n = 2 only the
  # first two entries fit in column 0: sqrt(9 + 4).
  assert float(strategy.max_column_norm()) == pytest.approx(math.sqrt(14.0), rel=1e-15)
  assert float(strategy.max_column_norm(10)) == pytest.approx(math.sqrt(14.0), rel=1e-15)
  assert float(strategy.max_column_norm(2)) == pytest.approx(math.sqrt(13.0), rel=1e-15)


# ---------------------------------------------------------------- materialize


@pytest.mark.parametrize('n', [1, 2, 5, 8])
def test_materialize_matches_definition(n, x64):
  c = [1.0, 0.5, 0.375, 0.3125]
  got = np.asarray(BandedToeplitz(c).materialize(n))
  # Expected: C[i + k, i] = c[k] filled entry by entry (seed 000 §2.3 definition).
  np.testing.assert_array_equal(got, _dense_numpy(c, n))
  assert got.dtype == np.float64
  np.testing.assert_array_equal(got, np.tril(got))


# ---------------------------------------------------------------- square root


def test_square_root_coefficients():
  got = matrices.square_root_coefficients(6)
  # Expected: Π_{j≤k}(2j−1)/(2j) by hand = binom(2k, k)/4^k:
  # 1, 1/2, 3/8, 5/16, 35/128, 63/256.
  np.testing.assert_array_equal(got, [1.0, 0.5, 0.375, 0.3125, 35 / 128, 63 / 256])
  assert got.dtype == np.float64
  # Identity: ((1 − z)^{−1/2})² = 1/(1 − z), so c * c (convolution) is all ones.
  np.testing.assert_allclose(np.convolve(got, got)[:6], np.ones(6), rtol=1e-15)


# ---------------------------------------------------------------- prefix-sum MSE


@pytest.mark.parametrize('n,bands', [(1, 1), (1, 3), (7, 1), (7, 3), (12, 5), (20, 4), (6, 9)])
def test_prefix_sum_mse_matches_dense_solve(n, bands, x64):
  rng = np.random.default_rng(1000 * n + bands)
  for _ in range(3):
    c = _random_band(rng, bands)
    got = float(matrices.prefix_sum_mse(c, n))
    # Expected: dense NumPy (1/n)‖A C⁻¹‖_F²·(max column norm)² via np.linalg.solve.
    assert got == pytest.approx(_dense_prefix_sum_mse(c, n), rel=1e-11)


@pytest.mark.parametrize('n,bands,fhu_loss,_', _REFERENCE_LOSSES, ids=lambda v: f'{v}')
def test_prefix_sum_mse_square_root_reference_values(n, bands, fhu_loss, _):
  c = matrices.square_root_coefficients(bands)
  # Expected: loss(FHU) column of reference-values.md §12 (jax_privacy, float64,
  # independently confirmed); tolerance 1e-9 relative as stated there.
  assert float(matrices.prefix_sum_mse(c, n)) == pytest.approx(fhu_loss, rel=1e-9)
  # The loss is scale-invariant in c (reference-values.md §12).
  assert float(matrices.prefix_sum_mse(3.0 * c, n)) == pytest.approx(fhu_loss, rel=1e-9)


def test_prefix_sum_mse_accepts_banded_toeplitz():
  c = matrices.square_root_coefficients(4)
  # Expected: the array form of the same band (same function, same input).
  assert float(matrices.prefix_sum_mse(BandedToeplitz(c), 16)) == float(
      matrices.prefix_sum_mse(c, 16))


def test_prefix_sum_mse_gradient_matches_finite_differences():
  c = np.array([1.0, 0.6, 0.2, 0.3])
  n, h = 10, 1e-6
  with jax.enable_x64(True):
    grad = np.asarray(jax.grad(lambda v: matrices.prefix_sum_mse(v, n))(jnp.asarray(c)))
  for k in range(len(c)):
    step = np.zeros_like(c)
    step[k] = h
    # Expected: central difference of the dense NumPy loss (error ~ h² ≈ 1e-12).
    expected = (_dense_prefix_sum_mse(c + step, n) - _dense_prefix_sum_mse(c - step, n)) / (2 * h)
    assert grad[k] == pytest.approx(expected, rel=1e-6, abs=1e-8)


# ---------------------------------------------------------------- min-sep sensitivity


def test_min_sep_sensitivity_squared_matches_brute_force():
  rng = np.random.default_rng(7)
  cases = 0
  for n in range(1, 11):
    for min_sep, bands in [(1, 1), (2, 2), (3, 3), (4, 2), (4, 4), (7, 3)]:
      for _ in range(2):
        c = _random_band(rng, bands)  # not monotone in general
        got = float(matrices.min_sep_sensitivity_squared(c, min_sep, n))
        # Expected: maximum of ‖Cx‖² over all 2ⁿ patterns with gaps >= min_sep.
        expected = _brute_force_min_sep_sensitivity_squared(c, min_sep, n)
        assert got == pytest.approx(expected, rel=1e-13), (n, min_sep, c)
        cases += 1
  assert cases == 120


def test_min_sep_sensitivity_squared_closed_form():
  c = [3.0, 2.0, 1.0]
  # Expected by hand: participations {0, 3, 6, 9} of n = 10, columns 0, 3, 6 have
  # ‖c‖² = 14 and column 9 is truncated to c₀² = 9: 3·14 + 9 = 51.
  assert float(matrices.min_sep_sensitivity_squared(c, 3, 10)) == pytest.approx(51.0, rel=1e-15)
  # Expected: min_sep >= n allows one participation, so the result is s_0 = ‖c‖² = 14.
  assert float(matrices.min_sep_sensitivity_squared(c, 10, 10)) == pytest.approx(14.0, rel=1e-15)


# ---------------------------------------------------------------- optimiser


@pytest.mark.parametrize('n,bands,_,optimised_loss', _REFERENCE_LOSSES[:3], ids=lambda v: f'{v}')
def test_optimize_banded_toeplitz_reaches_reference_loss(n, bands, _, optimised_loss):
  c = matrices.optimize_banded_toeplitz(n, bands)
  assert isinstance(c, np.ndarray) and c.dtype == np.float64 and c.shape == (bands,)
  assert np.all(c >= 0) and c[0] > 0
  assert np.linalg.norm(c) == pytest.approx(1.0, rel=1e-14)
  # Expected: loss(optimised) column of reference-values.md §12 (jax_privacy,
  # 250 L-BFGS steps); jaxacct must reach at most reference·(1 + 1e-4).
  assert float(matrices.prefix_sum_mse(c, n)) <= optimised_loss * (1 + 1e-4)
  if (n, bands) == (16, 4):
    # Expected: optimised c of reference-values.md §12 (printed to 8 decimals; the
    # optimum is unique up to scale, 1e-6 allows for optimiser differences).
    np.testing.assert_allclose(c, [0.79487528, 0.43843304, 0.32927408, 0.25986215], atol=1e-6)


def test_optimize_banded_toeplitz_n1000_and_min_sep_sensitivity_reference():
  n, bands, fhu_loss, optimised_loss = _REFERENCE_LOSSES[3]
  c = matrices.optimize_banded_toeplitz(n, bands)
  loss = float(matrices.prefix_sum_mse(c, n))
  # Expected: reference-values.md §12, loss(optimised) for n = 1000, 16 bands.
  assert loss <= optimised_loss * (1 + 1e-4)
  assert loss < fhu_loss
  # Expected: reference-values.md §12, minsep_sensitivity_squared(opt, 16, n=1000)
  # = 62.69106396 (k = 63, last column truncated); 1e-5 relative allows for the
  # optimiser reaching a slightly different c (loss agrees to 1e-4).
  assert float(matrices.min_sep_sensitivity_squared(c, 16, n)) == pytest.approx(62.69106396, rel=1e-5)


def test_optimize_with_min_sep_at_least_n_equals_single_participation(strict_promotion):
  # Also runs the optimiser under strict dtype/rank promotion (STYLE.md §4).
  # With min_sep >= n at most one participation fits, the min-sep sensitivity is
  # s_0 = ‖c‖² and the objective equals the single-participation one, so both
  # runs must find the same optimum (the reference c of reference-values.md §12).
  single = matrices.optimize_banded_toeplitz(16, 4)
  np.testing.assert_allclose(matrices.optimize_banded_toeplitz(16, 4, min_sep=16), single, atol=1e-8)


def test_optimize_with_min_sep_improves_its_objective():
  n, bands, min_sep = 40, 4, 6  # 40 = 6·6 + 4: the last participation is truncated

  def objective(c):  # MSE at the b-min-sep sensitivity (seed 000 §7.1)
    return float(matrices.prefix_sum_mse(c, n)) / float(np.sum(c**2)) * float(
        matrices.min_sep_sensitivity_squared(c, min_sep, n))

  c = matrices.optimize_banded_toeplitz(n, bands, min_sep=min_sep)
  assert np.all(c >= 0) and c[0] > 0
  assert np.linalg.norm(c) == pytest.approx(1.0, rel=1e-14)
  # Expected: no worse than the start (square root) or the single-participation
  # optimum, both evaluated under the same objective.
  assert objective(c) < objective(matrices.square_root_coefficients(bands))
  assert objective(c) <= objective(matrices.optimize_banded_toeplitz(n, bands)) * (1 + 1e-12)


def test_optimize_one_band():
  # Expected: with one band C = c₀·I and the only unit-norm choice is c = [1].
  np.testing.assert_array_equal(matrices.optimize_banded_toeplitz(5, 1), [1.0])


# ---------------------------------------------------------------- pytree and jit


def test_pytree_has_c_col_as_only_leaf():
  strategy = BandedToeplitz([1.0, 0.5, 0.25])
  leaves, treedef = jax.tree.flatten(strategy)
  assert len(leaves) == 1 and leaves[0] is strategy.c_col
  paths = [jax.tree_util.keystr(path) for path, _ in jax.tree_util.tree_flatten_with_path(strategy)[0]]
  assert paths == ['.c_col']
  # Unflattening skips validation (leaves may be tracers or placeholders).
  rebuilt = jax.tree.unflatten(treedef, [np.array([-1.0, 2.0])])
  assert isinstance(rebuilt, BandedToeplitz)
  np.testing.assert_array_equal(rebuilt.c_col, [-1.0, 2.0])


def test_jit_round_trip_does_not_retrace_for_new_values(x64, strict_promotion):
  chex.clear_trace_counter()

  @jax.jit
  @chex.assert_max_traces(n=1)
  def evaluate(strategy):
    return (strategy, strategy.column_squared_norms(5), strategy.materialize(5),
            strategy.max_column_norm(), matrices.prefix_sum_mse(strategy, 5),
            matrices.min_sep_sensitivity_squared(strategy, 3, 5))

  for c in ([1.0, 0.5, 0.25], [2.0, 0.25, 0.75]):  # exactly representable in float32
    strategy = BandedToeplitz(c)
    returned, norms, dense, max_norm, mse, sensitivity = evaluate(strategy)
    assert returned == strategy  # pytree round trip through jit
    expected_dtype = np.float64 if x64 else np.float32  # traced leaves keep their dtype
    assert norms.dtype == expected_dtype and mse.dtype == expected_dtype
    rtol = 1e-12 if x64 else 1e-5
    # Expected: the dense NumPy oracles above, on the same band.
    np.testing.assert_allclose(norms, np.sum(_dense_numpy(c, 5)**2, axis=0), rtol=rtol)
    np.testing.assert_allclose(dense, _dense_numpy(c, 5), rtol=rtol)
    np.testing.assert_allclose(max_norm, np.linalg.norm(c), rtol=rtol)
    np.testing.assert_allclose(mse, _dense_prefix_sum_mse(c, 5), rtol=rtol)
    np.testing.assert_allclose(
        sensitivity, _brute_force_min_sep_sensitivity_squared(c, 3, 5), rtol=rtol)


def test_inside_callers_jit_results_follow_callers_precision(x64, strict_promotion):
  c = np.array([1.0, 0.5, 0.25])
  # A constant band inside jit is computed at the caller's precision, so that it
  # mixes with the caller's arrays without dtype-promotion errors.
  mse = jax.jit(lambda scale: scale * matrices.prefix_sum_mse(c, 5))(jnp.ones(()))
  assert mse.dtype == (np.float64 if x64 else np.float32)
  # Expected: dense NumPy oracle on the same band.
  np.testing.assert_allclose(mse, _dense_prefix_sum_mse(c, 5), rtol=1e-12 if x64 else 1e-5)
  integer_band = jax.jit(lambda v: matrices.prefix_sum_mse(v, 5))(jnp.array([2, 1, 1]))
  assert integer_band.dtype == (np.float64 if x64 else np.float32)
  # Expected: dense NumPy oracle on the same (integer-valued) band.
  np.testing.assert_allclose(
      integer_band, _dense_prefix_sum_mse([2.0, 1.0, 1.0], 5), rtol=1e-12 if x64 else 1e-5)


def test_vmap_over_stacked_bands(x64):
  a, b = BandedToeplitz([1.0, 0.5, 0.25]), BandedToeplitz([2.0, 1.0, 0.5])
  stacked = jax.tree.map(lambda *leaves: np.stack(leaves), a, b)  # unflatten, no validation
  norms = np.asarray(jax.vmap(lambda s: s.column_squared_norms(4))(stacked))
  # Expected: each band's own squared column norms (dense NumPy oracle).
  np.testing.assert_allclose(norms[0], np.sum(_dense_numpy(a.c_col, 4)**2, axis=0), rtol=1e-6)
  np.testing.assert_allclose(norms[1], np.sum(_dense_numpy(b.c_col, 4)**2, axis=0), rtol=1e-6)


def test_eager_results_are_float64_under_strict_promotion(x64, strict_promotion):
  c = matrices.square_root_coefficients(3)
  strategy = BandedToeplitz(c)
  for result in (strategy.column_squared_norms(4), strategy.materialize(4),
                 strategy.max_column_norm(4), matrices.prefix_sum_mse(c, 4),
                 matrices.min_sep_sensitivity_squared(c, 3, 4)):
    assert result.dtype == np.float64


def test_constructing_inside_jit_is_a_type_error():
  with pytest.raises(TypeError, match='c_col'):
    jax.jit(lambda v: BandedToeplitz(v).num_bands)(jnp.ones(2))


# ---------------------------------------------------------------- bad input


_BAD_BANDS = {
    'empty': [],
    'nan': [1.0, float('nan')],
    'inf': [1.0, float('inf')],
    'negative': [1.0, -0.5],
    'zero_first': [0.0, 1.0],
    'two_d': [[1.0, 0.5]],
}


@pytest.mark.parametrize('bad', list(_BAD_BANDS.values()), ids=list(_BAD_BANDS))
def test_bad_band_raises_value_error_naming_c_col(bad):
  with pytest.raises(ValueError, match='c_col'):
    BandedToeplitz(bad)
  with pytest.raises(ValueError, match='c_col'):
    BandedToeplitz(c_col=bad)
  with pytest.raises(ValueError, match='c_col'):
    matrices.prefix_sum_mse(bad, 4)
  with pytest.raises(ValueError, match='c_col'):
    matrices.min_sep_sensitivity_squared(bad, 4, 4)


def test_bands_exceeding_min_sep_raises():
  with pytest.raises(ValueError, match=r'len\(c_col\).*min_sep'):
    matrices.min_sep_sensitivity_squared([1.0, 0.5, 0.25], 2, 10)


def test_bad_traced_shape_raises():
  with pytest.raises(ValueError, match='c_col'):
    jax.jit(lambda v: matrices.prefix_sum_mse(v, 4))(jnp.ones((2, 2)))


@pytest.mark.parametrize('call,name', [
    (lambda: BandedToeplitz([1.0]).column_squared_norms(0), 'iterations'),
    (lambda: BandedToeplitz([1.0]).materialize(0), 'iterations'),
    (lambda: BandedToeplitz([1.0]).max_column_norm(0), 'iterations'),
    (lambda: matrices.prefix_sum_mse([1.0], 0), 'iterations'),
    (lambda: matrices.min_sep_sensitivity_squared([1.0], 0, 4), 'min_sep'),
    (lambda: matrices.min_sep_sensitivity_squared([1.0], 1, 0), 'iterations'),
    (lambda: matrices.square_root_coefficients(0), 'bands'),
    (lambda: matrices.optimize_banded_toeplitz(0, 1), 'iterations'),
    (lambda: matrices.optimize_banded_toeplitz(4, 0), 'bands'),
    (lambda: matrices.optimize_banded_toeplitz(4, 5), 'bands'),
    (lambda: matrices.optimize_banded_toeplitz(8, 4, min_sep=3), 'min_sep'),
    (lambda: matrices.optimize_banded_toeplitz(8, 4, min_sep=0), 'min_sep'),
    (lambda: matrices.optimize_banded_toeplitz(8, 4, max_steps=0), 'max_steps'),
], ids=lambda v: v if isinstance(v, str) else '')
def test_out_of_range_arguments_raise_value_error_naming_them(call, name):
  with pytest.raises(ValueError, match=name):
    call()


def test_non_integer_arguments_raise_type_error_naming_them():
  with pytest.raises(TypeError, match='iterations'):
    matrices.optimize_banded_toeplitz(2.5, 1)
  with pytest.raises(TypeError, match='min_sep'):
    matrices.min_sep_sensitivity_squared([1.0], 1.5, 4)


def test_strategies_are_config_keys_registered_by_their_modules(monkeypatch, tmp_path):
  """Issue 30: a strategy module registers its config keys; config.py does not list them."""
  from jaxacct import config, strategy
  assert list(strategy.config_keys()) == ['c_col', 'square_root_bands', 'optimized_bands',
                                          'inverse_square_root_bands', 'optimized_inverse_bands']
  monkeypatch.setattr(strategy, '_CONFIG_KEYS', dict(strategy._CONFIG_KEYS))

  @strategy.config_key('flat_bands', 'count', options={'height': 'reals'})
  def flat(value, *, iterations, min_sep, height=(1.0,)):
    del iterations, min_sep
    return jaxacct.BandedToeplitz(np.full(value, height[0]))

  path = tmp_path / 'flat.yaml'
  path.write_text('scheme: {type: bminsep, iterations: 8, sampling_prob: 0.5, min_sep: 3}\n'
                  'strategy: {flat_bands: 3, height: [0.5]}\n')
  raw = config.load(path)
  assert config.matrix_from(raw, 8) == jaxacct.BandedToeplitz([0.5, 0.5, 0.5])
  with pytest.raises(config.ConfigError, match='strategy.flat_bands must be an integer >= 1'):
    config.load(path, ['strategy.flat_bands=0'])
  raw = config.load(path, ['strategy.normalize=true'])
  with pytest.raises(config.ConfigError, match='strategy.normalize does not apply to '
                                               'strategy.flat_bands'):
    config.matrix_from(raw, 8)
  with pytest.raises(jaxacct.InputError, match="'flat_bands' is already registered"):
    strategy.config_key('flat_bands', 'count')(flat)


@pytest.mark.parametrize('old, new', [('matrices', 'banded_toeplitz'),
                                      ('lower_triangular', 'lower_triangular')])
def test_the_old_module_paths_are_deprecated_aliases(old, new):
  # Issue 44: jaxacct.matrices / jaxacct.lower_triangular, read or imported, are the same module
  # objects after a DeprecationWarning saying where their names are now.
  module = importlib.import_module(f'jaxacct.strategies.{new}')
  message = (rf'jaxacct\.{old} is deprecated: import .+ from jaxacct, other names from '
             rf'{module.__name__}')
  def forget():  # an import caches the alias (and then never warns again in this process)
    sys.modules.pop(f'jaxacct.{old}', None)
    vars(jaxacct).pop(old, None)
  forget()
  try:
    with pytest.warns(DeprecationWarning, match=message):
      assert getattr(jaxacct, old) is module
    with pytest.warns(DeprecationWarning, match=message):
      assert importlib.import_module(f'jaxacct.{old}') is module
  finally:
    forget()
