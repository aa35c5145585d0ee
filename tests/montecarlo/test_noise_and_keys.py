"""Exact-tail Gaussian noise and the key discipline."""

import jax
import jax.numpy as jnp
import numpy as np
import pytest
import scipy.stats

from jaxacct.montecarlo import keys as keys_lib
from jaxacct.montecarlo import noise


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
