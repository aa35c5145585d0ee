"""The 32-bit device program (issue 28): same draws as float64, no 64-bit type on device, and a
certified margin η with |L̂₃₂ − L(y)| ≤ η that makes float32 verification sound.

Oracles: the float64 program on the same keys (itself checked against brute force in
test_losses.py / oracles/), exact rational arithmetic for the participation thresholds, and
scipy/NumPy float64 for the elementary functions the margin's proof assumes.
"""

from __future__ import annotations

import dataclasses
import fractions
import math
import re

import jax
import jax.numpy as jnp
import numpy as np
import pytest
from scipy import special

import jaxacct
from jaxacct import BandedToeplitz, square_root_coefficients
from jaxacct.montecarlo.engine import kernels, keys, margin, noise, program32, sampling, sharding
from jaxacct.montecarlo.evr import candidates, estimator, precision
from jaxacct.montecarlo.engine.kernels import _common, bminsep

import _shapes32 as shapes32
from _shapes32 import BLOCK_SIZE, BLOCKS_PER_CALL, SIGMAS

U = 2.0**-24
EPS = [0.0, 0.5, 1.0, 2.0, 4.0]


def _mechanism(scheme, bands, sigma=1.0):
  return jaxacct.MatrixMechanism(scheme, BandedToeplitz(square_root_coefficients(bands)), sigma)


# warm_start defaults to True: cold start is asked for.
COLD = _mechanism(jaxacct.BMinSep(sampling_prob=0.2, iterations=64, min_sep=8, warm_start=False),
                  8)
WARM = _mechanism(jaxacct.BMinSep(sampling_prob=0.2, iterations=64, min_sep=8, warm_start=True), 8)
POISSON = _mechanism(jaxacct.Poisson(sampling_prob=0.2, iterations=64), 1)
CYCLIC = _mechanism(jaxacct.CyclicPoisson(sampling_prob=0.3, iterations=64, cycle_length=8,
                                          partition='equal_split'), 4)  # independent: slow tier
BALLS = _mechanism(jaxacct.BallsInBins(iterations=64, cycle_length=4), 10)  # overlapping modes
MULTI = _mechanism(jaxacct.MultiAttributionBMinSep(sampling_prob=0.1, iterations=64, min_sep=8,
                                                   max_examples_per_user=3), 8)


def _dense(scheme, bands, sigma=1.0):
  """LowerTriangular: a band plus a dense tail (every column overlaps every later one)."""
  banded = np.asarray(BandedToeplitz(square_root_coefficients(bands)).materialize(
      scheme.iterations))
  return jaxacct.MatrixMechanism(
      scheme, jaxacct.LowerTriangular(banded + 0.02 * np.tril(np.ones_like(banded))), sigma)


DENSE = _dense(WARM.scheme, 8)  # App. B bounds (r-min-sep view)
DENSE_BALLS = _dense(jaxacct.BallsInBins(iterations=64, cycle_length=8), 4)  # exact, dense modes
FAMILIES = {'cold': COLD, 'warm': WARM, 'poisson': POISSON, 'cyclic': CYCLIC, 'balls': BALLS,
            'multi': MULTI, 'dense': DENSE, 'dense-balls': DENSE_BALLS}


# ---- same random words, keys and participation as the float64 program -------------------

@pytest.mark.parametrize('partitionable', [True, False])
def test_word_pairs_are_the_64_bit_words(partitionable):
  with jax.threefry_partitionable(partitionable):
    with jax.enable_x64(True):
      key = jax.random.fold_in(jax.random.key(5), 3)
      words = np.asarray(jax.random.bits(key, (37,), jnp.uint64))
      single = int(np.asarray(jax.random.bits(key, (), jnp.uint64)))
    with jax.enable_x64(False):
      hi, lo = (np.asarray(w, np.uint64) for w in keys.word_pairs(key, 37))
      hi1, lo1 = (int(np.asarray(w)[0]) for w in keys.word_pairs(key, 1))
  np.testing.assert_array_equal((hi << np.uint64(32)) | lo, words)
  assert (hi1 << 32) | lo1 == single  # shape () draws (the warm start) use the pair (0, 0)


def test_block_keys_carry_into_the_next_key_block():
  block_size = 96  # does not divide 2²⁰: some blocks straddle a key block
  first_block = (1 << 20) // block_size  # the block holding g = 2²⁰ − 64 … 2²⁰ + 31
  with jax.enable_x64(True):
    stream = jax.random.key(9)
    expected = jax.random.key_data(keys.sample_keys(stream, jnp.int64(first_block * block_size),
                                                    block_size))
  coordinates = keys.block_coordinates([first_block], block_size)[0]
  with jax.enable_x64(False):
    got = jax.random.key_data(keys.block_keys32(stream, jnp.asarray(coordinates), block_size))
  np.testing.assert_array_equal(np.asarray(got), np.asarray(expected))


def test_normals_are_the_float64_normals_within_the_stated_error():
  rng = np.random.default_rng(0)
  words = rng.integers(0, 2**64, 200_000, dtype=np.uint64)
  # Far tails: the 63-bit magnitude W near 0 (|z| up to 9.35) and near 2^63 (z near 0).
  tails = np.concatenate([np.arange(64, dtype=np.uint64), np.uint64(1) << np.arange(63,
                                                                                   dtype=np.uint64)])
  words = np.concatenate([words, tails, tails | (np.uint64(1) << np.uint64(63)),
                          np.uint64(2**63 - 1) - tails])
  # Jitted, as in the programs (one compile each, not one per operation).
  with jax.enable_x64(True):
    exact = np.asarray(jax.jit(lambda w: noise.normals_from_bits(w, jnp.float64))(
        jnp.asarray(words)))
  with jax.enable_x64(False):
    got = np.asarray(jax.jit(noise.normals_from_word_pairs)(
        jnp.asarray((words >> np.uint64(32)).astype(np.uint32)),
        jnp.asarray((words & np.uint64(0xFFFFFFFF)).astype(np.uint32)))).astype(np.float64)
  bound = noise.NORMAL32_ERROR_ULPS * U * (1.0 + np.abs(got))
  assert np.all(np.abs(got - exact) <= bound)
  assert np.max(np.abs(exact)) > 9.15  # Φ⁻¹(1 − 2⁻⁶⁵): the far tail, no truncation at ~5σ
  assert noise.NORMAL32_ERROR_ULPS == margin.NOISE_ULPS


def _exact_gap_thresholds(p: float, n: int):
  q = 1 - fractions.Fraction(p)
  rows = []
  for k in range(1, n + 2):
    value = q**k * 2**64 - fractions.Fraction(1, 2)
    if value < 0:
      break
    rows.append(min(math.floor(value), 2**64 - 1))
  return rows


@pytest.mark.parametrize('p', [1e-9, 0.03, 0.5, 0.999999, 1.0])
def test_gap_thresholds_are_exact(p):
  n = 40
  table, count = bminsep.gap_thresholds(p, n)
  exact = _exact_gap_thresholds(p, n)
  assert count == len(exact)
  got = [(int(table[0, k]) << 32) | int(table[1, k]) for k in range(count)]
  assert got == exact


def test_start_thresholds_are_exact():
  p, b = 0.07, 6
  rows = bminsep.start_thresholds(p, b)
  available = 1 / (1 + (b - 1) * fractions.Fraction(p))
  for j in range(1, b):
    tau = available + (j - 1) * (1 - available) / (b - 1)
    assert (int(rows[0, j - 1]) << 20) | int(rows[1, j - 1]) == math.ceil(tau * 2**52)


@pytest.mark.parametrize('scheme', [
    jaxacct.BMinSep(sampling_prob=0.2, iterations=300, min_sep=7, warm_start=False),
    jaxacct.BMinSep(sampling_prob=0.03, iterations=300, min_sep=16, warm_start=True),
    jaxacct.BMinSep(sampling_prob=1e-7, iterations=300, min_sep=3, warm_start=True),
    jaxacct.BMinSep(sampling_prob=0.999, iterations=300, min_sep=2),
    jaxacct.BMinSep(sampling_prob=1.0, iterations=300, min_sep=5, warm_start=True),
    jaxacct.Poisson(sampling_prob=0.3, iterations=300),
], ids=['cold', 'warm', 'tiny-p', 'p-near-1', 'p-1', 'poisson'])
def test_participation_is_the_float64_participation(scheme):
  mechanism = jaxacct.MatrixMechanism(scheme, BandedToeplitz([1.0]), 1.0)
  n, b, warm = scheme.iterations, scheme.min_sep, scheme.warm_start and scheme.min_sep > 1
  with jax.enable_x64(True):
    sample_keys = jax.random.split(jax.random.key(3), 4096)
    # Jitted as in the float64 program (one program, not one per operation).
    x64 = np.asarray(jax.jit(lambda k, p: bminsep.participation(k, p, n, b, warm))(
        sample_keys, jnp.float64(scheme.sampling_prob)))
    params = kernels.kernel_for(mechanism, np.dtype(np.float32)).params(mechanism)
  with program32.scope():
    x32 = np.asarray(jax.jit(lambda k, prm: bminsep.participation32(k, prm, n, b, warm))(
        sample_keys, params))
  np.testing.assert_array_equal(x32, x64)


@pytest.mark.parametrize('partitionable', [True, False])
def test_uniform_index_is_jax_randint_of_the_float64_program(partitionable):
  spans = (1, 3, 64, 1000, (1 << 19) - 1, (1 << 24) - 1)
  with jax.threefry_partitionable(partitionable):
    sample_keys = jax.random.split(jax.random.key(8), 3000)
    # One program per side for all spans (a span is a constant of the 32-bit code).
    with jax.enable_x64(True):
      expected = jax.jit(lambda k: [jax.vmap(lambda one: jax.random.randint(one, (), 0, span))(k)
                                    for span in spans])(sample_keys)
    with program32.scope():
      got = jax.jit(lambda k: [_common.uniform_index32(k, span) for span in spans])(sample_keys)
    for span, got_span, expected_span in zip(spans, got, expected):
      np.testing.assert_array_equal(np.asarray(got_span), np.asarray(expected_span), str(span))
  with pytest.raises(ValueError, match='span must be in'):
    _common.uniform_index32(sample_keys, 1 << 24)


def _patterns_agree(mechanism, draw64, draw32, num_keys=4096):
  """The float64 program's draw and the 32-bit one from the same keys, compared exactly."""
  sample_keys = jax.random.split(jax.random.key(3), num_keys)
  with jax.enable_x64(True):
    params64 = kernels.kernel_for(mechanism, np.dtype(np.float64)).params(mechanism)
    expected = np.asarray(jax.jit(draw64)(sample_keys, params64))
    params32 = kernels.kernel_for(mechanism, np.dtype(np.float32)).params(mechanism)
  with program32.scope():
    got = np.asarray(jax.jit(draw32)(sample_keys, params32))
  np.testing.assert_array_equal(got, expected)
  return expected


@pytest.mark.parametrize('scheme', [
    jaxacct.CyclicPoisson(sampling_prob=0.3, iterations=300, cycle_length=7),
    jaxacct.CyclicPoisson(sampling_prob=1.0, iterations=300, cycle_length=16),
    jaxacct.CyclicPoisson(sampling_prob=1e-7, iterations=300, cycle_length=5,
                          partition='equal_split'),
], ids=['independent', 'p-1', 'equal-split-tiny-p'])
def test_cyclic_participation_is_the_float64_participation(scheme):
  from jaxacct.montecarlo.engine.kernels import cyclic_poisson
  mechanism = jaxacct.MatrixMechanism(scheme, BandedToeplitz([1.0]), 1.0)
  n, cycle, partition = scheme.iterations, scheme.cycle_length, scheme.partition
  x = _patterns_agree(
      mechanism,
      lambda k, prm: cyclic_poisson.participation(k, prm.sampling_prob, n, cycle, partition),
      lambda k, prm: cyclic_poisson.participation32(k, prm, n, cycle, partition))
  if partition == 'independent':  # every phase is drawn (the phase draw is exercised)
    assert len({int(np.flatnonzero(row)[0]) % cycle for row in x if row.any()}) == cycle


def test_balls_in_bins_bins_and_modes_are_the_float64_ones():
  from jaxacct.montecarlo.engine.kernels import balls_in_bins
  mechanism = BALLS  # four bins, ten bands: every mode entry sums up to three coefficients
  kernel64 = kernels.kernel_for(mechanism, np.dtype(np.float64))
  kernel32 = kernels.kernel_for(mechanism, np.dtype(np.float32))
  view = mechanism.matrix.kernel_view(mechanism.scheme)
  with jax.enable_x64(True):
    modes = np.asarray(view.phase_modes(64, 4))
  params = balls_in_bins.params32(mechanism)
  # Host modes and norms rounded to nearest float32, within the margin's stated errors.
  assert np.all(np.abs(params.modes - modes) <= params.margin.mean_error)
  assert np.all(np.abs(params.norms - np.sum(modes**2, axis=1)) <= params.norm_error)
  assert params.margin.c_max >= np.max(modes)
  sample_keys = jax.random.split(jax.random.key(3), 2048)
  with jax.enable_x64(True):
    mean64 = np.asarray(jax.jit(lambda k, prm, v: kernel64.sample_mean(k, prm, v, 'remove')[0])(
        sample_keys, kernel64.params(mechanism), view))
  with program32.scope():
    mean32 = np.asarray(jax.jit(lambda k, prm: kernel32.sample_mean(k, prm, None, 'remove')[0])(
        sample_keys, params))
  assert np.all(np.abs(mean32 - mean64) <= U * np.abs(mean64) + 1e-15)


@pytest.mark.parametrize('p, multiplicity', [(0.1, 3), (1e-6, 5), (0.7, 2), (1.0, 4)])
def test_multi_attribution_counts_are_the_float64_counts(p, multiplicity):
  from jaxacct.montecarlo.engine.kernels import multi_attribution
  scheme = jaxacct.MultiAttributionBMinSep(sampling_prob=p, iterations=200, min_sep=4,
                                           max_examples_per_user=multiplicity)
  mechanism = jaxacct.MatrixMechanism(scheme, BandedToeplitz([1.0]), 1.0)
  x = _patterns_agree(
      mechanism,
      lambda k, prm: multi_attribution.participation(k, prm.sampling_prob, 200, 4, multiplicity),
      lambda k, prm: multi_attribution.participation32(k, prm, 200, 4, multiplicity))
  if p == 1.0:
    assert set(np.unique(x)) == {0, multiplicity}
  elif p >= 0.1:
    assert set(np.unique(x)) == set(range(multiplicity + 1))


def test_count_thresholds_are_exact():
  from jaxacct.montecarlo.engine.kernels import multi_attribution
  p, k = 0.3, 4
  rows = multi_attribution.count_thresholds(p, k)
  exact_p = fractions.Fraction(p)
  pmf = [math.comb(k, j) * exact_p**j * (1 - exact_p)**(k - j) for j in range(k + 1)]
  for j in range(1, k):
    cdf = sum(pmf[1:j + 1]) / (1 - pmf[0])
    threshold = (int(rows[0, j - 1]) << 21) | int(rows[1, j - 1])
    # The smallest 53-bit M with (M + ½)·2⁻⁵³ > F_j.
    assert fractions.Fraction(2 * threshold + 1, 2**54) > cdf
    assert fractions.Fraction(2 * threshold - 1, 2**54) <= cdf


# ---- no 64-bit type anywhere in the compiled device programs ----------------------------

_WIDE = re.compile(r'\b(f64|s64|u64|c128)\[')


def _compiled_texts(mechanism, num_candidates):
  """The compiled texts of the 32-bit programs of ``mechanism`` at the shapes the other tests
  run (``_shapes32``: the same programs, compiled once)."""
  mesh = sharding.SampleMesh.over(jax.local_devices()[:1])
  kernel = kernels.kernel_for(mechanism, np.dtype(np.float32))
  program = program32.Program32(mechanism, kernel, np.linspace(1.0, 2.0, num_candidates),
                                BLOCK_SIZE, mesh)
  params, view, sigmas, kappas = program._inputs
  stream = keys.direction_key(keys.purpose_key(jax.random.key(0), 'estimation'), 'remove')
  texts = []
  with program32.scope():
    coordinates = program._coordinates(0, BLOCKS_PER_CALL)
    for direction in ('remove', 'add'):
      texts.append(program32.block_components.lower(
          coordinates, stream, params, view, kernel=kernel, direction=direction,
          block_size=BLOCK_SIZE, mesh=mesh.mesh).compile().as_text())
      mean, z, info = program._components(stream, 0, BLOCKS_PER_CALL, direction)
      if num_candidates == 1:
        texts.append(program32.block_losses.lower(
            mean, z, info, sigmas[0], kappas[0], params, view, kernel=kernel,
            direction=direction, mesh=mesh.mesh).compile().as_text())
      else:
        texts.append(program32.block_losses_for_sigmas.lower(
            mean, z, info, sigmas, kappas, params, view, kernel=kernel, direction=direction,
            mesh=mesh.mesh).compile().as_text())
    losses = jnp.zeros((BLOCKS_PER_CALL, BLOCK_SIZE), jnp.float32)
    # The estimator's: len(EPS) ε, no histogram (one edge).
    texts.append(program32.block_sums.lower(
        losses, losses, mesh.place(np.zeros(BLOCKS_PER_CALL, np.int32)),
        np.zeros(len(EPS), np.float32), np.zeros(1, np.float32), mesh=mesh.mesh
    ).compile().as_text())
  return texts


# Families whose K σ program has code of its own (b-min-sep's in-scan recursion, Poisson's
# per-round bounds); the others' K σ path is the shared per-σ wrapper of the one-σ code.
SHARED_DRAWS_CODE = ('warm', 'poisson')


@pytest.mark.parametrize('family', sorted(FAMILIES))
def test_compiled_32_bit_programs_hold_no_64_bit_type(family):
  for num_candidates in ((1, 3) if family in SHARED_DRAWS_CODE else (1,)):
    for text in _compiled_texts(FAMILIES[family], num_candidates):
      assert not _WIDE.findall(text)
  # The check can fail: the float64 program's text holds 64-bit types (the program of
  # ``sample_privacy_losses``, which the margin tests compile: its block shapes).
  with jax.enable_x64(True):
    mesh = sharding.SampleMesh.over(jax.local_devices()[:1])
    mechanism = FAMILIES[family]
    kernel = kernels.kernel_for(mechanism, np.dtype(np.float64))
    params, sigma, view = sampling.traced_params(mechanism, kernel)
    block_size = sampling.default_block_size(kernel.iterations)
    # The margin tests' 256 or 512 samples: one block, in the sampler's call of one block.
    ids = mesh.place(np.zeros(sampling.capped_blocks_per_call(1, block_size, kernel.iterations, 1),
                              np.int64))
    text = sampling.block_outputs.lower(
        ids, jax.random.key(0), params, sigma, view, kernel=kernel, direction='remove',
        block_size=block_size, mesh=mesh.mesh).compile().as_text()
  assert _WIDE.findall(text)


# ---- the margin holds, and float32 δ̂ is never below the exact-loss δ̂ ------------------

def _losses_and_margins(mechanism, sigmas, num_blocks, direction, block_size=BLOCK_SIZE):
  """(losses, margins) (K, num_blocks · block_size) of the sampling stream's first blocks, in
  calls of the shared shape (``_shapes32``)."""
  with jax.enable_x64(True):
    stream = keys.direction_key(keys.purpose_key(jax.random.key(2), 'sampling'), direction)
    _, losses, margins = shapes32.losses_and_margins(
        shapes32.program_of(mechanism, sigmas, block_size), stream, num_blocks, direction)
  return (np.asarray(losses, np.float64).transpose(1, 0, 2).reshape(len(sigmas), -1),
          np.asarray(margins, np.float64).transpose(1, 0, 2).reshape(len(sigmas), -1))


def _exact_losses(mechanism, sigma, num_samples, direction):
  candidate = dataclasses.replace(mechanism, noise_multiplier=float(sigma))
  return np.asarray(sampling.sample_privacy_losses(jax.random.key(2), candidate, num_samples,
                                                   direction))


def _check_margin(mechanism, sigmas, num_blocks, block_size=BLOCK_SIZE):
  """|L̂₃₂ − L₆₄| ≤ η on every sample, and δ̂₃₂(ε − η) ≥ δ̂₆₄(ε) of the same draws (host sums)."""
  worst = 0.0
  for direction in ('remove', 'add'):
    losses, margins = _losses_and_margins(mechanism, sigmas, num_blocks, direction, block_size)
    for j, sigma in enumerate(sigmas):
      exact = _exact_losses(mechanism, sigma, losses.shape[1], direction)
      error = np.abs(losses[j] - exact)
      assert np.all(error <= margins[j]), (direction, sigma, np.max(error / margins[j]))
      worst = max(worst, float(np.max(error)))
      for epsilon in EPS:
        narrow = np.mean(-np.expm1(np.minimum(epsilon - (losses[j] + margins[j]), 0.0)))
        assert narrow >= np.mean(-np.expm1(np.minimum(epsilon - exact, 0.0)))
  return worst


@pytest.mark.parametrize('family', sorted(FAMILIES))
def test_margin_bounds_the_float32_error(family):
  # One σ (y formed per sample: b-min-sep's families here, every family in the hard settings
  # below); three σ sharing the draws (d = d_m + σ·d_z) for every family but cold (warm's code).
  if family in ('cold', 'warm', 'poisson'):
    assert _check_margin(FAMILIES[family], [0.7], 2 * BLOCKS_PER_CALL) > 0.0
  if family != 'cold':
    assert _check_margin(FAMILIES[family], list(SIGMAS), BLOCKS_PER_CALL) > 0.0


@pytest.mark.slow
@pytest.mark.parametrize('mechanism', [
    _mechanism(jaxacct.BMinSep(sampling_prob=0.05, iterations=1000, min_sep=16,
                               warm_start=True), 16, 0.4),
    _mechanism(jaxacct.BMinSep(sampling_prob=0.9, iterations=1000, min_sep=16,
                               warm_start=False), 16, 5.0),
    # p → 0 with warm-small-sigma's b, bands and n: the same compiled programs (p and σ are
    # traced), one setting's compiles fewer.
    _mechanism(jaxacct.BMinSep(sampling_prob=1e-6, iterations=1000, min_sep=16), 16, 1.0),
    _mechanism(jaxacct.BMinSep(sampling_prob=0.5, iterations=2000, min_sep=2,
                               warm_start=True), 2, 0.3),
    _mechanism(jaxacct.Poisson(sampling_prob=0.999, iterations=1000), 1, 0.5),
    _mechanism(jaxacct.Poisson(sampling_prob=0.01, iterations=1000), 1, 2.0),
    _mechanism(jaxacct.CyclicPoisson(sampling_prob=0.999, iterations=1000, cycle_length=16), 16,
               0.5),
    _mechanism(jaxacct.BallsInBins(iterations=1000, cycle_length=10), 64, 0.3),
    _mechanism(jaxacct.MultiAttributionBMinSep(sampling_prob=0.02, iterations=1000, min_sep=16,
                                               max_examples_per_user=5), 16, 0.6),
    _mechanism(jaxacct.MultiAttributionBMinSep(sampling_prob=0.5, iterations=1000, min_sep=1,
                                               max_examples_per_user=3), 1, 2.0),
    _dense(jaxacct.BMinSep(sampling_prob=0.05, iterations=400, min_sep=8, warm_start=True), 8,
           0.4),
], ids=['warm-small-sigma', 'cold-p-near-1', 'p-near-0', 'long-chain-b2', 'poisson-p-near-1',
        'poisson', 'cyclic-p-near-1', 'balls-overlap-small-sigma', 'multi-k5', 'multi-poisson',
        'dense-warm-small-sigma'])
def test_margin_holds_over_hard_settings(mechanism):
  """24,576 samples per setting and direction (11 settings, 540,672 in all; the sessions that
  built the margins ran ≥ 10⁶ per family, benchmarks/RESULTS.md)."""
  _check_margin(mechanism, [float(mechanism.noise_multiplier)], 24, block_size=1024)


@pytest.mark.slow
def test_margin_holds_at_the_production_shape():
  production = _mechanism(jaxacct.BMinSep(sampling_prob=0.03, iterations=7200, min_sep=256,
                                          warm_start=True), 256, 0.8)
  _check_margin(production, [0.8], 16, block_size=128)


@pytest.mark.parametrize('family', ['cold', 'warm', 'poisson'])  # others: ``_check_margin``
def test_float32_delta_hat_is_at_least_the_float64_one_on_the_same_draws(family):
  mechanism = FAMILIES[family]
  runs = [estimator.estimate_delta(jax.random.key(4), mechanism, EPS, 1500,
                                   monte_carlo=jaxacct.MonteCarloOptions(
                                       precision=p, block_size=BLOCK_SIZE),
                                   run=jaxacct.RunOptions(blocks_per_call=BLOCKS_PER_CALL))
          for p in ('float32', 'float64')]
  for d in ('remove', 'add'):
    wide, narrow = runs[1].delta_hat[d], runs[0].delta_hat[d]
    assert np.all(narrow >= wide)
    # …and not by much: the margin costs little (relative 2 % here at δ̂ ≳ 10⁻²).
    assert np.all(narrow <= wide * 1.02 + 1e-4)


def test_float32_sweep_is_at_least_the_float64_one_on_the_same_draws():
  sigmas = [0.8, 1.0, 1.2]  # K = len(SIGMAS): the margin test's program
  assert len(sigmas) == len(SIGMAS)
  sweeps = [candidates.estimate_delta_for_sigmas(jax.random.key(4), WARM, sigmas, EPS, 1000,
                                                 monte_carlo=jaxacct.MonteCarloOptions(
                                                     precision=p, block_size=BLOCK_SIZE),
                                                 run=jaxacct.RunOptions(
                                                     blocks_per_call=BLOCKS_PER_CALL))
            for p in ('float32', 'float64')]
  for d in ('remove', 'add'):
    assert np.all(sweeps[0].delta_hat[d] >= sweeps[1].delta_hat[d])
    assert np.all(sweeps[0].delta_hat[d] <= sweeps[1].delta_hat[d] * 1.02 + 1e-4)


def test_tiny_noise_gives_an_infinite_margin_never_nan():
  """σ = 10⁻⁴: e^δ overflows where posteriors underflow; η must be +inf (every term counted at
  its maximum), not inf·0 = NaN."""
  for mechanism in (POISSON,):  # the margin test's compiled program (σ is traced)
    tiny = dataclasses.replace(mechanism, noise_multiplier=1e-4)
    losses, margins = _losses_and_margins(tiny, [1e-4], 2 * BLOCKS_PER_CALL, 'remove')
    assert not np.any(np.isnan(margins)) and not np.any(np.isnan(losses))
    assert np.all(margins >= 0.0)


def test_float32_histogram_counts_every_loss_at_an_edge_above_its_exact_value():
  """Histogram counts of the 32-bit program bin L̂ + η against edges rounded down, so for
  every edge at least as many samples lie above it as exact losses do (conservative, like
  float64's), also for edges between L̂ and L̂ + η."""
  mechanism = WARM
  num_blocks = 2 * BLOCKS_PER_CALL
  with jax.enable_x64(True):
    program = shapes32.program_of(mechanism, [0.7])
    stream = keys.direction_key(keys.purpose_key(jax.random.key(2), 'sampling'), 'remove')
    _, losses, margins = shapes32.losses_and_margins(program, stream, num_blocks, 'remove')
    losses = np.asarray(losses, np.float64)[:, 0].ravel()
    margins = np.asarray(margins, np.float64)[:, 0].ravel()
    exact = _exact_losses(dataclasses.replace(mechanism, noise_multiplier=0.7), 0.7,
                          num_blocks * BLOCK_SIZE, 'remove')
    # Edges at the next float32 above L̂ where the exact loss is higher still (binning L̂ alone
    # would count those samples below the edge), inside (L̂, L̂ + η), and at exact losses.
    above_next = np.nextafter(losses.astype(np.float32), np.float32(np.inf)).astype(np.float64)
    between = above_next[exact > above_next]
    assert between.size > 0
    edges = np.unique(np.concatenate([between, losses[::9] + margins[::9] / 3, exact[::11]]))
    counts = np.concatenate([program.block_sums(
        stream, first, BLOCKS_PER_CALL, 'remove', num_blocks * BLOCK_SIZE, np.asarray([0.0]),
        edges)[0][2] for first in shapes32.calls(num_blocks)])
  above = np.cumsum(np.sum(counts, axis=0)[::-1])[::-1]  # above[k]: samples in bins ≥ k
  for k, edge in enumerate(edges):
    assert above[k + 1] >= np.sum(exact > edge), edge


# ---- the elementary-function assumptions of the proof, on this backend --------------------

def _relative_ulps(fn32, fn64, x):
  x = np.asarray(x, np.float32)
  with jax.enable_x64(False):
    got = np.asarray(jax.jit(fn32)(x)).astype(np.float64)
  exact = fn64(x.astype(np.float64))
  return np.max(np.abs(got - exact) / np.abs(exact)) / U


def test_float32_elementary_functions_meet_the_margin_assumptions():
  rng = np.random.default_rng(0)
  x = rng.uniform(-87.0, 88.0, 2_000_000)
  assert _relative_ulps(jnp.exp, np.exp, x) <= margin.EXP_ULPS
  negative = -np.abs(x[np.abs(x) > 1e-30])
  assert _relative_ulps(jnp.expm1, np.expm1, negative) <= margin.EXPM1_ULPS
  positive = np.exp(rng.uniform(-80.0, 80.0, 2_000_000))
  positive = positive[np.abs(np.log(positive)) > 1e-2]
  assert _relative_ulps(jnp.log, np.log, positive) <= margin.LOG_ULPS
  # Near 1 (the log of a logsumexp's sum in [1, T]): absolute error ≤ LOG_ULPS·u.
  near_one = rng.uniform(1.0, 3.0, 2_000_000).astype(np.float32)
  with jax.enable_x64(False):
    logs = np.asarray(jax.jit(jnp.log)(near_one)).astype(np.float64)
  assert np.max(np.abs(logs - np.log(near_one.astype(np.float64)))) <= margin.LOG_ULPS * U
  # Just below 1 (ln(1 − t) of a truncated round with r ≫ B): relative error ≤ LOG_ULPS.
  below_one = np.concatenate([rng.uniform(0.999, 1.0, 1_000_000),
                              1.0 - np.arange(1, 4097) * 2.0**-24]).astype(np.float32)
  below_one = below_one[below_one < 1.0]
  assert _relative_ulps(jnp.log, np.log, below_one) <= margin.LOG_ULPS
  small = rng.uniform(0.0, 0.5, 2_000_000)
  assert _relative_ulps(lambda v: jnp.log1p(-v), lambda v: np.log1p(-v), small[small > 1e-30]) \
      <= margin.LOG_ULPS
  reciprocal = _relative_ulps(lambda v: 1.0 / v, lambda v: 1.0 / v, positive)
  assert reciprocal <= margin.DIVIDE_ULPS
  # p down to 2.4·10⁻⁶: where g ≈ 0 by cancellation, the internal difference's rounding
  # (u|Δ|π) exceeds the other terms (an independent review measured 1.185× without it).
  for p in (2.4e-6, 1e-5, 1e-6, 0.05, 0.5, 0.999999):
    log_q = np.float32(np.log1p(-p))
    v = np.concatenate([rng.uniform(-60.0, 30.0, 500_000),
                        np.log(p) + rng.uniform(-0.5, 0.5, 200_000)]).astype(np.float32)
    with jax.enable_x64(False):
      got = np.asarray(jax.jit(jnp.logaddexp)(log_q, v)).astype(np.float64)
    exact = np.logaddexp(np.float64(log_q), v.astype(np.float64))
    posterior = np.exp(v - exact)
    gap = np.abs(v.astype(np.float64) - np.float64(log_q))
    bound = (margin.LOGADDEXP_ULPS * U * (np.abs(exact) + np.minimum(1.0, 2.0 * posterior))
             + U * gap * posterior)
    assert np.all(np.abs(got - exact) <= bound)


def test_float32_dense_products_meet_the_any_order_bound():
  """``LowerTriangular`` views: jnp.matmul(…, HIGHEST) in float32 is within γ_n Σ|y||C| of the
  exact product (Higham §3.1), the margin's assumption for dense C (proof step 4)."""
  rng = np.random.default_rng(1)
  for n in (64, 1000):
    c = np.tril(rng.uniform(0.0, 1.0, (n, n))).astype(np.float32)
    y = (rng.standard_normal((256, n)) * np.exp(rng.uniform(-8, 8, (256, 1)))).astype(np.float32)
    with jax.enable_x64(False):
      got = np.asarray(jax.jit(lambda a, b: jnp.matmul(
          a, b, precision=jax.lax.Precision.HIGHEST))(y, c)).astype(np.float64)
    exact = y.astype(np.float64) @ c.astype(np.float64)  # float64: error ≪ float32's bound
    bound = margin.gamma(n) * (np.abs(y).astype(np.float64) @ c.astype(np.float64))
    assert np.all(np.abs(got - exact) <= bound)
    assert np.max(np.abs(got - exact) / bound) > 1e-4  # the check reads real rounding


@pytest.mark.slow
def test_float32_ndtri_meets_the_noise_bound_on_float32_inputs():
  """Every 8th float32 tail probability in (2⁻⁶⁶, ½] (6.7·10⁷ inputs, every binade; the
  exhaustive sweep of all 5.4·10⁸, 3.90 ulp at most, is ``benchmarks/accelerator.py
  --exhaustive``, ~30 s)."""
  transform = jax.jit(lambda u: -jax.scipy.special.ndtri(u))
  low = int(np.float32(2.0**-66).view(np.uint32))
  high = int(np.float32(0.5).view(np.uint32))
  worst = 0.0
  with jax.enable_x64(False):
    for start in range(low, high + 1, 1 << 24):
      u = np.arange(start, min(start + (1 << 24), high + 1), 8,
                    dtype=np.uint32).view(np.float32)
      z = np.asarray(transform(u)).astype(np.float64)
      exact = -special.ndtri(u.astype(np.float64))
      worst = max(worst, float(np.max(np.abs(z - exact) / (U * (1.0 + np.abs(z))))))
  # noise.py: ndtri ≤ 3.9 measured, plus ≤ 3.8 from rounding the tail probability.
  assert worst + 3.8 <= noise.NORMAL32_ERROR_ULPS


def test_block_sum_factor_and_rounding_helpers():
  assert margin.block_sum_factor(1024) == pytest.approx(1.0 + 1031 * U, rel=1e-3)
  values = np.asarray([0.1, 1.0 / 3.0, -2.0 / 3.0, 1e-30, 7.0])
  down, up = margin.round_down32(values), margin.round_up32(values)
  assert np.all(down.astype(np.float64) <= values) and np.all(up.astype(np.float64) >= values)
  assert np.all(np.nextafter(down, np.float32(np.inf)).astype(np.float64) > values)
  assert margin.linear_recursion_error(1000, 16) == pytest.approx(
      -math.log(1 - ((1 + margin.gamma(19) + U) ** 64 * (1 + 1000 * 2.0**-26) - 1)), rel=1e-9)


# ---- the API: precision everywhere a run is chosen, refusals before compute -------------

def test_precision_names_and_refusals():
  with pytest.raises(ValueError, match="precision must be one of 'auto', 'float32', 'float64'"):
    estimator.estimate_delta(jax.random.key(0), COLD, EPS, 10,
                             monte_carlo=jaxacct.MonteCarloOptions(precision='float16'))
  with pytest.raises(jaxacct.InputTypeError, match='dtype= moved to monte_carlo='):
    estimator.estimate_delta(jax.random.key(0), COLD, EPS, 10, dtype=np.float32)
  # Every family is served now; a run of 2¹⁹ rounds or more is not (the participation
  # draft's error bound needs fewer).
  long = jaxacct.MatrixMechanism(jaxacct.BMinSep(sampling_prob=0.2, iterations=1 << 19,
                                                 min_sep=8), BandedToeplitz([1.0, 0.5]), 1.0)
  with pytest.raises(ValueError, match='needs iterations < 524288'):
    estimator.estimate_delta(jax.random.key(0), long, EPS, 10,
                             monte_carlo=jaxacct.MonteCarloOptions(precision='float32'))
  with pytest.raises(ValueError, match='needs iterations < 524288'):
    jaxacct.verify(jax.random.key(0), [long], epsilon=1.0, delta=1e-3,
                   monte_carlo=jaxacct.MonteCarloOptions(precision='float32'))
  with pytest.raises(ValueError, match='precision must be one of'):
    jaxacct.calibrate_noise_multiplier(COLD.scheme, COLD.matrix, epsilon=1.0, delta=1e-3,
                                       key=jax.random.key(0),
                                       monte_carlo=jaxacct.MonteCarloOptions(precision='fp32'))
  assert precision.choose('auto', long).precision == 'float64'
  assert 'iterations < 524288' in precision.choose('auto', long).reason
  assert precision.choose('float64', long).reason == 'requested'
  # On a CPU: the faster program, measured. Poisson's programs (b = 1, one band) compile in
  # half the time of warm start's, and the choice's code is the same for every family.
  measured = precision.choose('auto', POISSON)
  assert measured.precision in ('float32', 'float64') and 'measured here' in measured.reason


def test_checkpoint_resumes_bitwise_and_refuses_another_precision(tmp_path):
  from test_checkpoint_and_ledger import Stop
  from test_checkpoint_and_ledger import _stop_after as stop_after
  options = jaxacct.MonteCarloOptions(precision='float32', block_size=BLOCK_SIZE)
  run = jaxacct.RunOptions(blocks_per_call=2, checkpoint_interval=1e-9, checkpoint=tmp_path)
  reference = estimator.estimate_delta(jax.random.key(6), WARM, EPS, 640, monte_carlo=options,
                                       run=jaxacct.RunOptions(blocks_per_call=BLOCKS_PER_CALL))
  with pytest.raises(Stop):  # 10 blocks per direction, two per call: stop in "add"
    estimator.estimate_delta(jax.random.key(6), WARM, EPS, 640, monte_carlo=options,
                             run=dataclasses.replace(run, progress=stop_after(7)))
  resumed = estimator.estimate_delta(jax.random.key(6), WARM, EPS, 640, monte_carlo=options,
                                     run=run)
  for d in ('remove', 'add'):
    assert resumed.delta_hat[d].tolist() == reference.delta_hat[d].tolist()
  from jaxacct.montecarlo.evr import checkpoint as checkpoint_lib
  with pytest.raises(checkpoint_lib.CheckpointError, match='precision'):
    estimator.estimate_delta(jax.random.key(6), WARM, EPS, 640,
                             monte_carlo=dataclasses.replace(options, precision='float64'),
                             run=jaxacct.RunOptions(checkpoint=tmp_path))


# The device check's families: the file's own where it has them (their programs are compiled
# by the tests above), independent cyclic Poisson and truncated b-min-sep besides. Cold's code is
# warm's, balls-in-bins' key use is cyclic Poisson's (uniform_index32).
DEVICE_FAMILIES = {
    'warm': WARM, 'poisson': POISSON,
    'cyclic': _mechanism(jaxacct.CyclicPoisson(sampling_prob=0.3, iterations=64, cycle_length=8),
                         4),
    'multi': MULTI,
    'truncated': _mechanism(jaxacct.BMinSep(sampling_prob=0.2, iterations=64, min_sep=8,
                                            warm_start=True, truncated_batch_size=6,
                                            dataset_size=60), 8)}


def device_runs() -> dict:
  """Bit patterns of each ``DEVICE_FAMILIES`` mechanism's 32-bit δ̂ (2,300 samples: 36 blocks)
  and of a K-σ verification sweep with its margins (700 samples: 11 blocks) on all of this
  process's devices, in calls of this file's ``BLOCKS_PER_CALL`` blocks per device (on one
  device the programs the tests above compiled; on 4, calls of 16 blocks: the blocks are
  chunked differently too)."""
  runs = {}
  for name, mechanism in DEVICE_FAMILIES.items():
    estimate = estimator.estimate_delta(jax.random.key(11), mechanism, EPS, 2300,
                                        monte_carlo=jaxacct.MonteCarloOptions(
                                            precision='float32', block_size=BLOCK_SIZE),
                                        run=jaxacct.RunOptions(blocks_per_call=BLOCKS_PER_CALL))
    run = runs[name] = {d: [float(v).hex() for v in estimate.delta_hat[d]]
                        for d in ('remove', 'add')}
    # Truncated's K σ path is the shared per-σ wrapper: the estimate suffices. Cyclic's and
    # multi's sweeps stay: the wrapper is a ``lax.map``, whose fusion (and so FMA contraction)
    # depends on the call's shape, and multi-attribution's bits once moved with it.
    if name == 'truncated':
      continue
    sweep = candidates.sweep_sigmas(jax.random.key(11), mechanism, list(SIGMAS), EPS, 700,
                                    purpose='verification', precision='float32',
                                    block_size=BLOCK_SIZE,
                                    run=jaxacct.RunOptions(blocks_per_call=BLOCKS_PER_CALL))
    for d in ('remove', 'add'):
      run[d] += ([float(v).hex() for v in sweep.delta_hat[d].ravel()]
                 + [float(v).hex() for v in sweep.sums.margins[d]])
  return {'devices': len(jax.devices()), 'runs': runs}


_DEVICE_SCRIPT = '''
import json, sys
sys.path[:0] = sys.argv[1:3]
import test_program32
print(json.dumps(test_program32.device_runs()))
'''


@pytest.mark.multiprocess
@pytest.mark.slow
def test_32_bit_program_is_bitwise_identical_on_one_and_four_devices():
  """This process's device (one, in the suite: the reference, on the programs the tests above
  compiled) against 4 in a subprocess (2 if this process has 4). Other call sizes of the
  32-bit program: on one device, the checkpoint test (calls of 2 and of 4 blocks, bitwise); on
  several, the calls here (16 blocks against 4). One call size per side: each compiles every
  family's programs for the subprocess's devices, the cost of this test."""
  import pathlib
  from devices import run_on_devices
  here = pathlib.Path(__file__).resolve().parent
  local = device_runs()
  count = 2 if local['devices'] == 4 else 4
  remote = run_on_devices(_DEVICE_SCRIPT, count, str(here.parent), str(here))
  assert remote['devices'] == count != local['devices']
  for name in DEVICE_FAMILIES:
    assert remote['runs'][name] == local['runs'][name], name


@pytest.mark.slow
def test_quickstart_calibrates_alike_in_both_precisions_and_the_float32_release_holds():
  from jaxacct import config as config_lib
  import pathlib
  root = pathlib.Path(__file__).resolve().parents[2]
  raw = config_lib.load(root / 'configs' / 'quickstart.yaml')
  scheme = config_lib.scheme_from(raw)
  matrix = config_lib.matrix_from(raw, scheme.iterations)
  cal = raw['calibration']
  # Two precisions of one mechanism are two attempts: each compared run keeps its own
  # (in-memory) ledger, so both are first attempts with the same N.
  results = {p: jaxacct.calibrate_noise_multiplier(scheme, matrix, epsilon=cal['epsilon'],
                                                   delta=cal['delta'], key=jax.random.key(0),
                                                   monte_carlo=jaxacct.MonteCarloOptions(
                                                       grid_ratio=cal['grid_ratio'], precision=p),
                                                   run=jaxacct.RunOptions(
                                                       ledger=jaxacct.montecarlo.evr.ledger.VerificationLedger()))
      for p in ('float32', 'float64')}
  sigma32 = results['float32'].guarantee.noise_multiplier
  sigma64 = results['float64'].guarantee.noise_multiplier
  assert abs(math.log(sigma32 / sigma64)) <= math.log(cal['grid_ratio']) * (1 + 1e-9)
  g = results['float32'].guarantee
  assert g.precision == 'float32' and 0.0 < g.margin < 1e-2
  assert results['float64'].guarantee.margin is None
  # A fresh float64 re-estimate on new keys at the float32 release's (ε, δ): within 4 s.e.
  check = estimator.estimate_delta(jax.random.key(99), results['float32'].mechanism,
                                   [g.epsilon], 200_000)
  for d in ('remove', 'add'):
    assert check.delta_hat[d][0] <= g.delta + 4.0 * check.standard_error[d][0]
