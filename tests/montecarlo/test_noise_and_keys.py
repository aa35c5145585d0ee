"""Exact-tail Gaussian noise and the key discipline."""

import jax
import jax.numpy as jnp
import numpy as np
import pytest
import scipy.stats

from jaxacct.montecarlo.engine import keys as keys_lib
from jaxacct.montecarlo.engine import noise


def _normals_from_words(words, dtype):
  with jax.enable_x64(True):
    return np.asarray(noise.normals_from_bits(jnp.asarray(words, jnp.uint64), dtype))


@pytest.mark.parametrize('dtype', [jnp.float64, jnp.float32])
def test_extreme_bit_patterns_reach_nine_sigma(dtype):
  # All magnitude bits zero -> tail probability 2^-65 -> |z| = Φ⁻¹(1 − 2⁻⁶⁵) ≈ 9.35 (scipy).
  z = _normals_from_words(np.array([0, 1 << 63], np.uint64), dtype)
  assert z[0] >= 9.0 and z[1] <= -9.0
  np.testing.assert_allclose(np.abs(z), scipy.stats.norm.isf(2.0**-65), rtol=1e-6)


@pytest.mark.parametrize('dtype, rtol', [(jnp.float64, 1e-13), (jnp.float32, 2e-6)])
def test_tail_transform_matches_scipy_inverse_survival(dtype, rtol):
  # W = 2^k − 1 and 3·2^k cover tail probabilities from 2^-65 to ~1/2; expected value is
  # scipy's inverse survival function at the same u = (W + ½)·2⁻⁶⁴ (computed in float64).
  magnitudes = np.array([(1 << k) - 1 for k in range(63)] + [3 << k for k in range(61)],
                        dtype=np.uint64)
  u = (magnitudes.astype(np.float64) + 0.5) * 2.0**-64
  expected = scipy.stats.norm.isf(u)
  np.testing.assert_allclose(_normals_from_words(magnitudes, dtype), expected, rtol=rtol)
  # The sign bit mirrors the value exactly.
  np.testing.assert_array_equal(_normals_from_words(magnitudes | np.uint64(1 << 63), dtype),
                                -_normals_from_words(magnitudes, dtype))


@pytest.mark.parametrize('dtype', [jnp.float64, jnp.float32])
def test_normals_pass_kolmogorov_smirnov(dtype):
  with jax.enable_x64(True):
    z = np.asarray(noise.standard_normal(jax.random.key(20261122), (1_000_000,), dtype))
  assert z.dtype == np.dtype(dtype)
  # Fixed key: deterministic. A KS p-value below 1e-3 would flag a wrong transform.
  assert scipy.stats.kstest(z.astype(np.float64), 'norm').pvalue > 1e-3


def test_tail_quantile_at_its_branch_points():
  # Issue 18's rearranged Cephes evaluation (one division, reversed tail polynomials) against
  # scipy's inverse survival function, densely around u = e^-2 (central/tail) and e^-32 (the
  # far-tail branch, run under lax.cond), at ½ and at the smallest u of the transform. Both
  # sides are float64 evaluations of accurate approximations: 2e-15 relative.
  centres = [np.exp(-2.0), np.exp(-32.0), 0.5, 2.0**-65]
  u = np.unique(np.concatenate([c * (1.0 + np.linspace(-1e-3, 1e-3, 41)) for c in centres]
                               + [np.geomspace(2.0**-65, 0.5, 400)]))
  u = u[(u > 0) & (u <= 0.5)]
  with jax.enable_x64(True):
    got = np.asarray(noise.tail_quantile(jnp.asarray(u)))
  np.testing.assert_allclose(got, scipy.stats.norm.isf(u), rtol=2e-15, atol=0.0)


def test_far_tail_branch_does_not_change_other_draws():
  # One far-tail word (u < e^-32) in an array switches on the lax.cond branch; every other
  # draw must be bitwise what it is in an array without it.
  rng = np.random.default_rng(3)
  words = rng.integers(1 << 40, (1 << 63) - 1, size=64, dtype=np.int64).astype(np.uint64)
  with_far = words.copy()
  with_far[10] = np.uint64(12345)  # u ≈ 6.7e-16 → z ≈ 8.0
  plain, mixed = _normals_from_words(words, jnp.float64), _normals_from_words(with_far,
                                                                              jnp.float64)
  keep = np.arange(64) != 10
  np.testing.assert_array_equal(plain[keep], mixed[keep])
  assert mixed[10] == pytest.approx(scipy.stats.norm.isf((12345 + 0.5) * 2.0**-64), rel=2e-15)


@pytest.mark.parametrize('dtype', [jnp.float64, jnp.float32])
def test_normals_per_key_equal_one_key_at_a_time(dtype):
  with jax.enable_x64(True):
    keys = jax.random.split(jax.random.key(9), 5)
    batched = np.asarray(noise.standard_normals_per_key(keys, 33, dtype))
    single = np.stack([np.asarray(noise.standard_normal(k, (33,), dtype)) for k in keys])
  np.testing.assert_array_equal(batched, single)


def test_sample_keys_do_not_wrap_at_two_to_the_32():
  with jax.enable_x64(True):
    stream = jax.random.key(3)
    around = keys_lib.sample_keys(stream, jnp.asarray(2**32 - 2, jnp.int64), 4)
    start = keys_lib.sample_keys(stream, jnp.asarray(0, jnp.int64), 2)
    data = np.asarray(jax.random.key_data(jnp.concatenate([around, start])))
  # Indices 2³² − 2 … 2³² + 1 and 0, 1: a single 32-bit fold of g would map 2³² to 0.
  assert len({tuple(row) for row in data}) == 6


def test_keys_are_a_function_of_the_index_only():
  with jax.enable_x64(True):
    stream = jax.random.key(11)
    whole = keys_lib.sample_keys(stream, jnp.asarray(5, jnp.int64), 10)
    part = keys_lib.sample_keys(stream, jnp.asarray(9, jnp.int64), 3)
    np.testing.assert_array_equal(jax.random.key_data(whole[4:7]), jax.random.key_data(part))


def test_canonicalize_key():
  legacy = jax.random.PRNGKey(0)
  typed = keys_lib.canonicalize_key(legacy)
  np.testing.assert_array_equal(jax.random.key_data(typed), legacy)
  for bad in (0, np.zeros(3, np.uint32), 'key'):
    with pytest.raises(TypeError, match=r'jax.random.key\(seed\)'):
      keys_lib.canonicalize_key(bad)
