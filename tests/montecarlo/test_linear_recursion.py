"""The linear-domain b-min-sep recursion (issue 18) against the log-space one, and its range check.

``bminsep.linear_log_ratio`` evaluates seed 000 Eq. (1) in chunks of s ≤ b rounds with exact
power-of-two rescaling; ``log_space_log_ratio`` is the reference (each round's logaddexp never
leaves the float range; it is also the brute-force-checked path of the earlier kernels, and
tests/montecarlo/test_losses.py checks ``log_ratio`` against the pattern enumerator).

Tolerances: both are float64 evaluations of the same positive recursion, each with ≲ n·u
relative error in f₀ (u = 2⁻⁵³), so |ΔL| ≤ 4n·u + 1e-14 is a justified bound (observed
≤ 3e-14 at n = 1000). float32: 4n·2⁻²⁴ (observed 3e-5 at n = 1000).
"""

import hypothesis
import hypothesis.strategies as st
import jax
import jax.numpy as jnp
import numpy as np
import pytest

from jaxacct.montecarlo.engine.kernels import bminsep

# (b, n): one chunk (b ≤ 32), n < b, n not a multiple of the chunk, b > 32 with a dividing
# chunk (b = 64: s = 32; b = 40: s = 20) and without one (b = 33: s = 32, f_{i+b} straddles
# two chunks), n < s.
SHAPES = [(2, 9), (5, 3), (16, 100), (16, 7), (33, 150), (40, 130), (64, 300)]


def _tolerance(n, dtype):
  unit = 2.0**-53 if dtype == jnp.float64 else 2.0**-24
  return 4 * n * unit + 1e-14


# The reference is jitted too: run op by op it compiled ~15 small programs per shape, b and
# start (0.5–1 s per case on the CI machine); its tolerance covers either evaluation's rounding.
_linear_log_ratio = jax.jit(bminsep.linear_log_ratio, static_argnums=(2, 3))
_log_space_log_ratio = jax.jit(bminsep.log_space_log_ratio, static_argnums=(2, 3))


def _compare(ell, p, b, warm, dtype):
  with jax.enable_x64(True):
    ell = jnp.asarray(ell, dtype)
    p = jnp.asarray(p, jnp.float64)
    linear, in_range = _linear_log_ratio(ell, p, b, warm)
    reference = _log_space_log_ratio(ell, p, b, warm)
    return np.asarray(linear, np.float64), np.asarray(in_range), np.asarray(reference, np.float64)


@pytest.mark.parametrize('dtype', [jnp.float64, jnp.float32], ids=['f64', 'f32'])
@pytest.mark.parametrize('b, n', SHAPES, ids=[f'{b=},{n=}' for b, n in SHAPES])
def test_linear_recursion_matches_log_space(b, n, dtype):
  rng = np.random.default_rng(b * 1000 + n)
  ell = rng.normal(-0.4, 2.0, size=(5, n))
  for p, warm in ((0.3, True), (0.05, False), (1.0, True)):
    linear, in_range, reference = _compare(ell, p, b, warm, dtype)
    assert in_range.all(), (p, warm)
    np.testing.assert_array_less(np.abs(linear - reference),
                                 _tolerance(n, dtype) * np.maximum(1.0, np.abs(reference)))


@hypothesis.given(scale=st.floats(0.1, 400.0), shift=st.floats(-300.0, 300.0),
                  p=st.floats(1e-6, 1.0), seed=st.integers(0, 2**31 - 1))
def test_in_range_implies_agreement(scale, shift, p, seed):
  # Property: wherever the range check passes the linear result is within the round-off
  # bound of the log-space one, for ℓ of any size (losses up to ~10⁴ here).
  rng = np.random.default_rng(seed)
  ell = rng.normal(shift, scale, size=(6, 70))
  linear, in_range, reference = _compare(ell, p, 33, True, jnp.float64)
  ok = in_range
  np.testing.assert_array_less(np.abs(linear - reference)[ok],
                               _tolerance(70, jnp.float64) * np.maximum(1.0, np.abs(reference[ok])))


def test_range_check_flags_overflow_and_underflow():
  with jax.enable_x64(True):
    n, b = 64, 16
    ell = np.zeros((4, n))
    ell[0, 5] = 320.0       # a = p·e^ℓ > 2^450: a factor out of range
    ell[1, :] = -400.0      # with p near 1 every f_i ≈ (1 − p)·f_{i+1}: f drops below 2^−450
    ell[2, 10:40] = 40.0    # large but representable: in range
    p = 1.0 - 1e-9
    linear, in_range, reference = _compare(ell, p, b, True, jnp.float64)
  assert in_range.tolist() == [False, False, True, True]
  np.testing.assert_allclose(linear[2:], reference[2:], rtol=1e-13)


def test_log_ratio_falls_back_per_sample():
  # A block with one sample out of range: that sample gets the log-space value bitwise, the
  # others the linear value bitwise (what ``linear_log_ratio`` returns on its own).
  with jax.enable_x64(True):
    rng = np.random.default_rng(7)
    ell = jnp.asarray(rng.normal(0.0, 1.0, size=(4, 50)))
    ell = ell.at[1, 3].set(1000.0)
    p = jnp.asarray(0.2)
    combined = np.asarray(bminsep.log_ratio(ell, p, 8, True))
    linear, in_range = bminsep.linear_log_ratio(ell, p, 8, True)
    reference = np.asarray(bminsep.log_space_log_ratio(ell, p, 8, True))
  assert np.asarray(in_range).tolist() == [True, False, True, True]
  assert combined[1] == reference[1] and np.isfinite(combined[1])
  np.testing.assert_array_equal(combined[[0, 2, 3]], np.asarray(linear)[[0, 2, 3]])


@pytest.mark.parametrize('b, expected', [(8, 8), (32, 32), (33, 32), (40, 20), (100, 25),
                                         (256, 32), (37, 32)])
def test_chunk_rounds(b, expected):
  assert bminsep.chunk_rounds(b) == expected


@pytest.mark.parametrize('b, n, with_mean', [(16, 70, True), (33, 100, False), (4, 9, True)],
                         ids=['b=16,n=70', 'b=33,n=100,no-signal', 'b=4,n=9'])
@pytest.mark.slow
def test_shared_draw_scan_matches_one_sigma_at_a_time(b, n, with_mean):
  # ``linear_log_ratios_for_sigmas`` (all σ in one scan, ℓ formed inside it) against the
  # log-space recursion of each σ on d = d_m + σ·d_z. σ = 0.02 with a signal makes some
  # losses leave the range (ℓ ~ 10³): those pairs must come back through the fallback.
  rng = np.random.default_rng(b + n)
  with jax.enable_x64(True):
    kernel = bminsep.BMinSepKernel(n, b, True, 'float64')
    params = bminsep.SamplingProbParams(jnp.asarray(0.3))
    noise = jnp.asarray(rng.normal(size=(4, n)))
    mean = jnp.asarray(rng.uniform(0.0, 2.0, size=(4, n))) if with_mean else None
    charge = jnp.asarray(rng.uniform(0.5, 1.5, size=n))
    sigmas = jnp.asarray([0.02, 0.7, 1.0, 2.5])

    class View:  # the one view method the kernel uses
      @staticmethod
      def charge(direction, iterations):
        del direction, iterations
        return charge

    shared = np.asarray(kernel.log_ratios_for_sigmas(mean, noise, params, sigmas, View, None,
                                                     'remove'))
    _, in_range = bminsep.linear_log_ratios_for_sigmas(mean, noise, charge, sigmas,
                                                       params.sampling_prob, b, True)
    for k, sigma in enumerate(np.asarray(sigmas)):
      d = sigma * noise if mean is None else mean + sigma * noise
      ell = (2.0 * d - charge[None, :]) / (2.0 * sigma**2)
      reference = np.asarray(_log_space_log_ratio(ell, params.sampling_prob, b, True))
      np.testing.assert_allclose(shared[k], reference,
                                 rtol=_tolerance(n, jnp.float64) * 10, atol=1e-13)
  assert np.asarray(in_range)[1:].all()
  if with_mean:  # large positive ℓ at σ = 0.02 (without a signal ℓ ≪ 0 there: in range)
    assert not np.asarray(in_range)[0].all()
