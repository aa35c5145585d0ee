"""The 32-bit program for truncated b-min-sep and truncated Poisson (issue 28, seed 000 App. D).

Oracles: exact rational arithmetic for the survival test; the float64 sampler's law for the
batch sizes (exact binomial pmf where the rounds are independent, the float64 program's
moments where they are not); the float64 loss of the real-valued sample the 32-bit draws
define (same participation and noise words, the 32-bit batch sizes) for the margin.
"""

from __future__ import annotations

import dataclasses
import fractions
import functools

import jax
import jax.numpy as jnp
import numpy as np
import pytest
from scipy import stats

import jaxacct
from jaxacct.conventions import Stream
from jaxacct import BandedToeplitz, square_root_coefficients
from jaxacct.montecarlo.engine import binomial32, kernels, keys, noise, program32, sampling
from jaxacct.montecarlo.engine.kernels import _common, bminsep, truncated

import _shapes32 as shapes32
from _shapes32 import BLOCK_SIZE, BLOCKS_PER_CALL, SIGMAS
from test_program32 import EPS, _WIDE, _compiled_texts


def _mechanism(scheme, bands, sigma=1.0):
  return jaxacct.MatrixMechanism(scheme, BandedToeplitz(square_root_coefficients(bands)), sigma)


# Pools of ~25 with r ~ Binomial(25, 0.2): B = 6 truncates a round in ~20 % of rounds.
T_WARM = _mechanism(jaxacct.BMinSep(sampling_prob=0.2, iterations=64, min_sep=8, warm_start=True,
                                    truncated_batch_size=6, dataset_size=60), 8)
T_COLD = _mechanism(jaxacct.BMinSep(sampling_prob=0.2, iterations=64, min_sep=8, warm_start=False,
                                    truncated_batch_size=6, dataset_size=60), 8)
T_POISSON = _mechanism(jaxacct.Poisson(sampling_prob=0.2, iterations=64, truncated_batch_size=7,
                                       dataset_size=30), 1)
FAMILIES = {'truncated-warm': T_WARM, 'truncated-cold': T_COLD, 'truncated-poisson': T_POISSON}


def _kernel32(mechanism):
  return kernels.kernel_for(mechanism, np.dtype(np.float32))


# ---- exact integer survival and batch sizes of the right law -----------------------------

def test_survival_test_is_the_exact_rational_one():
  """W ≤ T(r) ⟺ (W + ½)(r + 1) < B·2⁶⁴, at words on both sides of every threshold."""
  rng = np.random.default_rng(0)
  bounds = np.array([1, 6, 2048, 2048, 7, 1 << 30], np.int64)
  rests = np.array([1, 6, 2048, 5000, (1 << 31) - 2, (1 << 30) + 3], np.int64)
  with program32.scope():
    t_hi, t_lo = jax.jit(truncated._survival_thresholds)(jnp.asarray(rests, jnp.int32),
                                                         jnp.asarray(bounds, jnp.int32))
  words, rows = [], []
  for j, (b, r) in enumerate(zip(bounds, rests)):
    threshold = (int(t_hi[j]) << 32) | int(t_lo[j])
    for w in (threshold - 1, threshold, threshold + 1, int(rng.integers(0, 2**63)) * 2):
      words.append(w % 2**64)
      rows.append(j)
  words = np.array(words, np.uint64)
  rows = np.array(rows)
  hi = jnp.asarray((words >> np.uint64(32)).astype(np.uint32))
  lo = jnp.asarray((words & np.uint64(0xFFFFFFFF)).astype(np.uint32))
  with program32.scope():
    kept = np.asarray(_common.words_at_most(hi, lo, t_hi[rows], t_lo[rows]))
  for w, j, k in zip(words.tolist(), rows, kept):
    exact = fractions.Fraction(2 * w + 1, 2) * int(rests[j] + 1) < int(bounds[j]) * 2**64
    assert bool(k) == exact, (w, bounds[j], rests[j])


def _batch_sizes(mechanism, num, dtype):
  """r (num, n) of samples 0 … num − 1 of the estimation stream, from the 32-bit kernel
  (``truncated.rest_batch_sizes32`` in the draw program of ``Program32``, whose blocks of the
  shared shapes the margin tests compile too) or the float64 kernel (same keys)."""
  stream = keys.direction_key(keys.purpose_key(jax.random.key(9), 'estimation'), 'remove')
  if dtype == np.float32:
    draws = shapes32.components(shapes32.program_of(mechanism, [1.0]), stream, num // BLOCK_SIZE,
                                'remove')
    return np.concatenate([np.asarray(info.rest_batch_sizes) for _, _, info in draws]).reshape(
        num, mechanism.iterations)
  kernel = kernels.kernel_for(mechanism, np.dtype(dtype))
  with jax.enable_x64(True):
    params = kernel.params(mechanism)
    sample_keys = keys.sample_keys(stream, jnp.int64(0), num)
    run = jax.jit(lambda k, p: truncated.rest_batch_sizes(
        k, p, kernel.iterations, kernel.min_sep, kernel.warm_start))
    return np.asarray(run(sample_keys, params))


def test_truncated_poisson_batch_sizes_are_binomial():
  """b = 1: every r_i ~ Binomial(m − 1, p) independently; χ² of 4096 × 64 draws against the
  exact pmf (cells with expected count ≥ 5 pooled), p-value > 10⁻⁶."""
  rest = _batch_sizes(T_POISSON, 4096, np.float32)
  law = stats.binom(29, 0.2)
  counts = np.bincount(rest.ravel(), minlength=30)[:30]
  expected = law.pmf(np.arange(30)) * rest.size
  keep = expected >= 5
  observed = np.append(counts[keep], counts[~keep].sum())
  wanted = np.append(expected[keep], rest.size - expected[keep].sum())
  assert stats.chisquare(observed, wanted).pvalue > 1e-6


@pytest.mark.parametrize('family', ['truncated-warm', 'truncated-cold'])
def test_b_min_sep_batch_sizes_have_the_float64_law(family):
  """Per round (cold start's transient included), the mean and variance of r from the 32-bit
  and float64 samplers agree within 5 standard errors over 4096 samples each."""
  mechanism = FAMILIES[family]
  r32 = _batch_sizes(mechanism, 4096, np.float32)
  r64 = _batch_sizes(mechanism, 4096, np.float64)
  for round_ in (0, 1, 3, 7, 8, 20, 63):
    a, b = r32[:, round_].astype(float), r64[:, round_].astype(float)
    spread = np.sqrt(a.var() / a.size + b.var() / b.size)
    assert abs(a.mean() - b.mean()) <= 5 * spread + 1e-12, (round_, a.mean(), b.mean())
    # Variance: the sample variances' standard error ≈ s²·√(2/(N − 1)) (plus kurtosis).
    assert abs(a.var() - b.var()) <= 5 * 2 * max(a.var(), b.var()) * np.sqrt(2 / a.size)
  assert (r32 >= 0).all() and r32.dtype == np.int32


def test_law_error_is_the_tables_certified_bound():
  for mechanism in FAMILIES.values():
    kernel = _kernel32(mechanism)
    params = kernel.params(mechanism)
    expected = mechanism.iterations * binomial32.total_variation_bound(params.batch_tables)
    assert expected <= kernel.law_error(params) <= expected * (1 + 1e-9) + (
        0 if params.history is None else 1e-12)
    assert 0 < kernel.law_error(params) < 1e-12
    assert kernels.kernel_for(mechanism, np.dtype(np.float64)).law_error(None) == 0.0


# ---- no 64-bit type; the margin holds against the float64 loss of the same sample ---------

# Cold start's program is warm start's without the history.
@pytest.mark.parametrize('family', ['truncated-warm', 'truncated-poisson'])
def test_compiled_truncated_programs_hold_no_64_bit_type(family):
  for text in _compiled_texts(FAMILIES[family], 1):
    assert not _WIDE.findall(text)


@functools.partial(jax.jit, static_argnames=('iterations', 'min_sep', 'warm_start', 'direction'))
def _sample_mean64(sample_keys, params, view, rest, *, iterations, min_sep, warm_start, direction):
  """(C·x, z) in float64 of the samples ``sample_keys`` given their batch sizes ``rest``: the
  float64 kernel's participation (``bminsep.participation``), survival and noise words. Jitted,
  one compile per family and direction: run op by op (117 small compiles for warm start), its
  ``lax.cond`` (the survival words) recompiled on every call, a new closure each time."""
  noise_keys = jax.vmap(lambda k: jax.random.fold_in(k, int(Stream.NOISE)))(sample_keys)
  z = noise.standard_normals_per_key(noise_keys, iterations, jnp.float64)
  x = bminsep.participation(sample_keys, params.sampling_prob, iterations, min_sep, warm_start)
  weights = truncated.truncated_weights(x, rest, sample_keys, params, direction)
  return view.separated_mean(weights, 'float64'), z


def _exact_losses(mechanism, sigma, num, direction, rest):
  """L(y) in float64 of the samples whose 32-bit batch sizes are ``rest``: the same keys,
  participation (``bminsep.participation``) and noise words, survival by the float64 test
  (equal to the exact one except at its rounding, ~10⁻¹⁶ per draw)."""
  with jax.enable_x64(True):
    kernel = kernels.kernel_for(mechanism, np.dtype(np.float64))
    params = kernel.params(mechanism)
    view = mechanism.matrix.kernel_view(mechanism.scheme)
    stream = keys.direction_key(keys.purpose_key(jax.random.key(2), 'sampling'), direction)
    sample_keys = keys.sample_keys(stream, jnp.int64(0), num)
    mean, z = _sample_mean64(sample_keys, params, view, jnp.asarray(rest),
                             iterations=kernel.iterations, min_sep=kernel.min_sep,
                             warm_start=kernel.warm_start, direction=direction)
    y = mean + sigma * z
    candidate = dataclasses.replace(mechanism, noise_multiplier=float(sigma))
    return np.asarray(sampling.privacy_loss(candidate, y, direction,
                                            rest_batch_sizes=np.asarray(rest)))


def _check_margin(mechanism, sigmas, num_blocks):
  worst = 0.0
  for direction in ('remove', 'add'):
    stream = keys.direction_key(keys.purpose_key(jax.random.key(2), 'sampling'), direction)
    with jax.enable_x64(True):
      one = shapes32.losses_and_margins(shapes32.program_of(mechanism, sigmas[:1]), stream,
                                        num_blocks, direction)
      _, losses, margins = one if len(sigmas) == 1 else shapes32.losses_and_margins(
          shapes32.program_of(mechanism, sigmas), stream, num_blocks, direction)
    rest = np.concatenate([np.asarray(info.rest_batch_sizes) for _, info in one[0]]).reshape(
        -1, mechanism.iterations)
    assert (rest >= mechanism.scheme.truncated_batch_size).any()  # the mixtures are exercised
    losses = np.asarray(losses, np.float64).transpose(1, 0, 2).reshape(len(sigmas), -1)
    margins = np.asarray(margins, np.float64).transpose(1, 0, 2).reshape(len(sigmas), -1)
    for j, sigma in enumerate(sigmas):
      exact = _exact_losses(mechanism, sigma, rest.shape[0], direction, rest)
      error = np.abs(losses[j] - exact)
      assert np.all(error <= margins[j]), (direction, sigma, np.max(error / margins[j]))
      worst = max(worst, float(np.max(error / margins[j])))
      for epsilon in EPS:
        narrow = np.mean(-np.expm1(np.minimum(epsilon - (losses[j] + margins[j]), 0.0)))
        assert narrow >= np.mean(-np.expm1(np.minimum(epsilon - exact, 0.0)))
  return worst


# Cold start's programs (32-bit and float64) are compiled only here: over ~10 s on the CI
# machine, slow tier.
@pytest.mark.parametrize('family, sigmas', [
    ('truncated-warm', [0.7]), ('truncated-warm', list(SIGMAS)),
    pytest.param('truncated-cold', [0.7], marks=pytest.mark.slow),
    ('truncated-poisson', list(SIGMAS))])
def test_margin_bounds_the_truncated_float32_error(family, sigmas):
  # One σ (y formed per sample) and three σ sharing the draws (the per-σ wrapper).
  assert 0.0 < _check_margin(FAMILIES[family], sigmas, BLOCKS_PER_CALL) <= 1.0


@pytest.mark.slow
def test_float32_estimate_of_a_truncated_scheme_is_close_to_float64_and_carries_the_law_error():
  """End to end (stream driver, block sums): the same law in both precisions, so the estimates
  agree within Monte Carlo error; at ε = 60 every exact term is 0, and the float32 δ̂ is the
  certified law error it adds to every term (``SchemeKernel.law_error``)."""
  grid = EPS + [60.0]
  runs = [jaxacct.estimate_delta(jax.random.key(4), T_POISSON, grid, 2048,
                                 monte_carlo=jaxacct.MonteCarloOptions(
                                     precision=p, block_size=BLOCK_SIZE),
                                 run=jaxacct.RunOptions(blocks_per_call=BLOCKS_PER_CALL))
          for p in ('float32', 'float64')]
  params = _kernel32(T_POISSON).params(T_POISSON)
  law_error = _kernel32(T_POISSON).law_error(params)
  for d in ('remove', 'add'):
    f32, f64 = runs[0], runs[1]
    spread = np.sqrt(f32.standard_error[d] ** 2 + f64.standard_error[d] ** 2)
    assert np.all(np.abs(f32.delta_hat[d] - f64.delta_hat[d]) <= 5 * spread + 1e-3)
    assert f64.delta_hat[d][-1] == 0.0
    assert law_error <= f32.delta_hat[d][-1] <= law_error * (1 + 1e-6)


def test_the_largest_batch_sizes_give_finite_losses_within_the_margin():
  """r up to 2³¹ − 1 (m = 2³¹, p = 1): r + 1 must not wrap in int32 (it made L̂ and η NaN)."""
  mechanism = T_POISSON
  kernel = _kernel32(mechanism)
  params = kernel.params(mechanism)
  rng = np.random.default_rng(3)
  d = rng.normal(size=(4, 64)).astype(np.float32)
  rest = np.full((4, 64), 3, np.int32)
  rest[:, ::3] = 2**31 - 1
  rest[1, ::5] = 2**24 + 1
  rest[2, ::7] = 2**31 - 2
  norms = np.ones((1, 64), np.float32)
  sigma = np.float32(1.0)
  kappa = np.float32(np.nextafter(np.float32(0.5), np.float32(1.0)))
  error = np.full((4, 1), 1e-6, np.float32)
  with program32.scope():
    losses, margins = jax.jit(lambda d, r: truncated.log_ratio_with_margin32(
        d, norms, r, params, sigma, kappa, error, 1, False))(d, rest)
  assert np.all(np.isfinite(losses)) and np.all(np.isfinite(margins))
  with jax.enable_x64(True):
    params64 = kernels.kernel_for(mechanism, np.dtype(np.float64)).params(mechanism)
    exact = np.asarray(truncated.log_ratio(
        jnp.asarray(d, jnp.float64), jnp.asarray(norms, jnp.float64), jnp.asarray(rest),
        params64, jnp.float64(1.0), 1, False))
  assert np.all(np.abs(np.asarray(losses, np.float64) - exact) <= margins)
