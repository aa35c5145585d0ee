"""The fused sampler: pattern laws, reproducibility, precision, recompiles, PLD agreement."""

from fractions import Fraction as F

import jax
import jax.numpy as jnp
import numpy as np
import pytest

import jaxacct
from jaxacct.montecarlo.engine import sampling
from oracles import brute_force

# Low-noise mode-frequency test (reference-values.md §2; spec 000 §10): at σ = 1e-9 every
# output sits on its mode C·x; the counts of 10⁴ samples must be within 6 binomial standard
# deviations of the exact pattern probabilities.
MODE_SAMPLES = 10_000


def _pattern_counts(mechanism, patterns, key=0):
  c_dense = brute_force.strategy_matrix(np.asarray(mechanism.matrix.c_col), mechanism.iterations)
  modes = patterns @ c_dense.T
  y = np.asarray(sampling.sample_outputs(jax.random.key(key), mechanism, MODE_SAMPLES, 'remove')[0])
  nearest = np.argmin(((y[:, None, :] - modes[None]) ** 2).sum(-1), axis=1)
  assert np.abs(y - modes[nearest]).max() < 1e-6  # every sample is on a mode
  return np.bincount(nearest, minlength=len(patterns))


def _assert_binomially_close(counts, probabilities):
  sd = np.sqrt(MODE_SAMPLES * probabilities * (1 - probabilities))
  assert np.all(np.abs(counts - MODE_SAMPLES * probabilities) <= 6 * sd + 1e-9), (
      counts, MODE_SAMPLES * probabilities)


# reference-values.md §2: patterns 101, 100, 010, 001, 000 for n = 3, b/cycle = 2.
REFERENCE_PATTERNS = np.array([[1, 0, 1], [1, 0, 0], [0, 1, 0], [0, 0, 1], [0, 0, 0]], float)
REFERENCE_LAWS = [
    (jaxacct.BMinSep(sampling_prob=.5, iterations=3, min_sep=2, warm_start=False),
     [F(1, 4), F(1, 4), F(1, 4), F(1, 8), F(1, 8)]),
    (jaxacct.BMinSep(sampling_prob=.5, iterations=3, min_sep=2, warm_start=True),
     [F(1, 6), F(1, 6), F(1, 3), F(1, 6), F(1, 6)]),
    (jaxacct.BMinSep(sampling_prob=.25, iterations=3, min_sep=2, warm_start=False),
     [F(1, 16), F(3, 16), F(3, 16), F(9, 64), F(27, 64)]),
    (jaxacct.CyclicPoisson(sampling_prob=.5, iterations=3, cycle_length=2),
     [F(1, 8), F(1, 8), F(1, 4), F(1, 8), F(3, 8)]),
    (jaxacct.CyclicPoisson(sampling_prob=1 / 3, iterations=3, cycle_length=2),
     [F(1, 18), F(1, 9), F(1, 6), F(1, 9), F(5, 9)]),
]


@pytest.mark.parametrize('scheme, law', REFERENCE_LAWS)
def test_reference_pattern_frequencies(scheme, law):
  mechanism = jaxacct.MatrixMechanism(scheme, jaxacct.BandedToeplitz([1.0]), 1e-9)
  counts = _pattern_counts(mechanism, REFERENCE_PATTERNS)
  _assert_binomially_close(counts, np.array([float(f) for f in law]))


ORACLE_LAWS = [
    ('bminsep', jaxacct.BMinSep(sampling_prob=.4, iterations=7, min_sep=3, warm_start=True),
     dict(sampling_prob=.4, min_sep=3, warm_start=True)),
    ('bminsep', jaxacct.BMinSep(sampling_prob=.4, iterations=7, min_sep=3, warm_start=False),
     dict(sampling_prob=.4, min_sep=3, warm_start=False)),
    ('poisson', jaxacct.Poisson(sampling_prob=.3, iterations=4), dict(sampling_prob=.3)),
    ('balls_in_bins', jaxacct.BallsInBins(iterations=7, cycle_length=3), dict(cycle_length=3)),
    ('cyclic_poisson', jaxacct.CyclicPoisson(sampling_prob=.6, iterations=7, cycle_length=3,
                                             partition='equal_split'),
     dict(sampling_prob=.6, cycle_length=3, partition='equal_split')),
]


@pytest.mark.parametrize('kind, scheme, kwargs', ORACLE_LAWS, ids=[str(s) for _, s, _ in ORACLE_LAWS])
def test_pattern_frequencies_match_oracle_with_three_bands(kind, scheme, kwargs):
  c_col = [1.0, 0.6, 0.3][:scheme.max_band_length or 3]
  mechanism = jaxacct.MatrixMechanism(scheme, jaxacct.BandedToeplitz(c_col), 1e-9)
  patterns, log_probs = brute_force.participation_law(kind, iterations=scheme.iterations, **kwargs)
  _assert_binomially_close(_pattern_counts(mechanism, patterns, key=1), np.exp(log_probs))


def test_add_direction_draws_pure_noise():
  mechanism = jaxacct.MatrixMechanism(jaxacct.BMinSep(sampling_prob=1., iterations=6, min_sep=2),
                                      jaxacct.BandedToeplitz([1.0, 1.0]), 1e-9)
  y = np.asarray(sampling.sample_outputs(jax.random.key(0), mechanism, 64, 'add')[0])
  assert np.abs(y).max() < 1e-7


MECH = jaxacct.MatrixMechanism(
    jaxacct.BMinSep(sampling_prob=0.4, iterations=9, min_sep=3, warm_start=True),
    jaxacct.BandedToeplitz([1.0, 0.5, 0.375]), 0.9)


@pytest.mark.slow
@pytest.mark.parametrize('direction', ['remove', 'add'])
def test_losses_equal_privacy_loss_of_the_drawn_outputs(direction):
  key = jax.random.key(42)
  losses = np.asarray(jaxacct.sample_privacy_losses(key, MECH, 300, direction))
  y, _ = sampling.sample_outputs(key, MECH, 300, direction)
  np.testing.assert_allclose(np.asarray(jaxacct.privacy_loss(MECH, y, direction)), losses,
                             rtol=1e-13, atol=1e-13)


def test_bitwise_identical_whatever_the_chunking():
  # n = 2100 -> chunks of 256 samples: 600 samples take 3 calls; 10 samples take one call
  # of another compiled size. Sample g's key depends only on g, so prefixes agree bitwise.
  mechanism = jaxacct.MatrixMechanism(jaxacct.BMinSep(sampling_prob=.1, iterations=2100, min_sep=4),
                                      jaxacct.BandedToeplitz([1., .5]), 2.0)
  key = jax.random.key(5)
  many = np.asarray(jaxacct.sample_privacy_losses(key, mechanism, 600, 'remove'))
  few = np.asarray(jaxacct.sample_privacy_losses(key, mechanism, 10, 'remove'))
  np.testing.assert_array_equal(many[:10], few)
  assert len(np.unique(many)) == 600


def test_a_call_computes_the_blocks_asked_for_with_the_bits_of_a_whole_call(monkeypatch):
  """``sample_privacy_losses`` computes the blocks it needs, in a call of at most the next power
  of two of them and at least 2 (a whole call of 2²⁰ entries is 113 blocks at n = 9), and every
  sample keeps the bits it has in a whole call (its key depends only on its index; a block's
  code only on the block's shape). The pinned values (test_pinned_values.py, computed with whole
  calls) check the same for every kernel family."""
  block_size = sampling.default_block_size(MECH.iterations)
  whole = sampling.default_blocks_per_call(block_size, MECH.iterations)
  assert (block_size, whole) == (1024, 113)
  # Per device: the blocks needed, rounded up to a power of two, at least 2 (one block per call
  # changes the multi-attribution losses' last bits: options.MIN_BLOCKS_PER_CALL), at most a
  # whole call (the default, itself never below 2: also at n ≥ 1024, where 2²⁰ outputs are one
  # block or less).
  assert [sampling.capped_blocks_per_call(blocks, block_size, 9, devices)
          for blocks, devices in ((1, 1), (3, 1), (9, 2), (500, 1), (500, 4))] == [2, 4, 8, 113, 113]
  assert sampling.default_blocks_per_call(1024, 1024) == 2
  assert sampling.default_blocks_per_call(64, 100_000) == 2
  assert sampling.capped_blocks_per_call(1, 1024, 1024, 1) == 2
  assert sampling.capped_blocks_per_call(500, 64, 100_000, 1) == 2
  calls = []
  traced = sampling.block_outputs

  def recorded(ids, *args, **kwargs):
    calls.append(ids.shape[0])
    return traced(ids, *args, **kwargs)

  monkeypatch.setattr(sampling, 'block_outputs', recorded)
  key = jax.random.key(14)
  capped = {n: np.asarray(jaxacct.sample_privacy_losses(key, MECH, n, 'remove'))
            for n in (10, 2500)}
  assert calls == [2, 4]  # 1 block in a call of 2; 3 blocks in a call of 4 (not 113)
  # The same samples computed in whole calls, as before the cap.
  monkeypatch.setattr(sampling, 'capped_blocks_per_call', lambda *args: whole)
  for n, losses in capped.items():
    np.testing.assert_array_equal(
        np.asarray(jaxacct.sample_privacy_losses(key, MECH, n, 'remove')), losses)
  assert calls[2:] == [whole, whole]
  np.testing.assert_array_equal(capped[2500][:10], capped[10])
  assert len(np.unique(capped[2500])) == 2500


def test_directions_and_keys_give_independent_streams():
  key = jax.random.key(9)
  remove = np.asarray(jaxacct.sample_privacy_losses(key, MECH, 50, 'remove'))
  add = np.asarray(jaxacct.sample_privacy_losses(key, MECH, 50, 'add'))
  other = np.asarray(jaxacct.sample_privacy_losses(jax.random.key(10), MECH, 50, 'remove'))
  assert not np.any(np.isin(remove, add)) and not np.any(np.isin(remove, other))
  legacy = np.asarray(jaxacct.sample_privacy_losses(jax.random.PRNGKey(9), MECH, 50, 'remove'))
  np.testing.assert_array_equal(legacy, remove)


def test_results_are_float64_whatever_the_global_flag_and_kernel_dtype():
  assert not jax.config.jax_enable_x64  # the library must not rely on (or flip) it
  loss64 = jaxacct.sample_privacy_losses(jax.random.key(1), MECH, 500, 'remove')
  loss32 = jaxacct.sample_privacy_losses(jax.random.key(1), MECH, 500, 'remove', dtype=jnp.float32)
  assert loss64.dtype == np.float64 and loss32.dtype == np.float64
  assert not jax.config.jax_enable_x64
  # Same key -> same bits and participations; float32 arithmetic only perturbs the loss.
  np.testing.assert_allclose(np.asarray(loss32), np.asarray(loss64), rtol=1e-4, atol=1e-4)


def test_traced_parameters_do_not_recompile():
  scheme = jaxacct.BMinSep(sampling_prob=0.3, iterations=9, min_sep=3, warm_start=True)
  key = jax.random.key(0)
  jaxacct.sample_privacy_losses(key, jaxacct.MatrixMechanism(scheme, MECH.matrix, 1.0), 16, 'remove')
  compiled = (sampling.block_outputs, sampling.block_losses)
  before = [f._cache_size() for f in compiled]
  for sigma, p, c_col in [(0.5, 0.3, [1, .2, .1]), (3.0, 0.9, [2, 1, 1]), (1.2, 1.0, [1, 0, 0])]:
    scheme_p = jaxacct.BMinSep(sampling_prob=p, iterations=9, min_sep=3, warm_start=True)
    mechanism = jaxacct.MatrixMechanism(scheme_p, jaxacct.BandedToeplitz(c_col), sigma)
    jaxacct.sample_privacy_losses(key, mechanism, 16, 'remove')
  assert [f._cache_size() for f in compiled] == before


def _direction_deltas(sigma, p, steps, epsilon):
  """δ(ε) of each direction of T-fold Poisson-subsampled Gaussian DP-SGD by dp_accounting PLD.

  dp_accounting 0.6.0 has no public per-direction accessor, so the two PMFs are read from
  the (pinned) PrivacyLossDistribution; its REMOVE pair is our "remove" (mixture ‖ N(0)).
  """
  from dp_accounting.pld import privacy_loss_distribution as pld_lib
  pld = pld_lib.from_gaussian_mechanism(sigma, sampling_prob=p,
                                        value_discretization_interval=1e-4).self_compose(steps)
  return {'remove': pld._pmf_remove.get_delta_for_epsilon(epsilon),
          'add': pld._pmf_add.get_delta_for_epsilon(epsilon)}


@pytest.mark.parametrize('sigma, p, steps, epsilon', [(1.0, 0.1, 20, 0.5), (0.8, 0.05, 40, 1.0)])
def test_poisson_dpsgd_delta_agrees_with_pld(sigma, p, steps, epsilon):
  mechanism = jaxacct.MatrixMechanism(jaxacct.Poisson(sampling_prob=p, iterations=steps),
                                      jaxacct.BandedToeplitz([1.0]), sigma)
  expected = _direction_deltas(sigma, p, steps, epsilon)
  for direction, key in (('remove', 0), ('add', 1)):
    losses = np.asarray(jaxacct.sample_privacy_losses(jax.random.key(key), mechanism, 200_000,
                                                      direction))
    terms = -np.expm1(np.minimum(epsilon - losses, 0.0))
    standard_error = terms.std(ddof=1) / np.sqrt(terms.size)
    assert abs(terms.mean() - expected[direction]) <= 4 * standard_error, (
        direction, terms.mean(), expected[direction], standard_error)


def test_bad_sampler_arguments():
  key = jax.random.key(0)
  with pytest.raises(ValueError, match='num_samples must be an integer >= 1'):
    jaxacct.sample_privacy_losses(key, MECH, 0, 'remove')
  with pytest.raises(TypeError, match='num_samples'):
    jaxacct.sample_privacy_losses(key, MECH, 2.5, 'remove')
  with pytest.raises(ValueError, match='direction must be one of'):
    jaxacct.sample_privacy_losses(key, MECH, 5, 'positive')
  with pytest.raises(ValueError, match='dtype must be'):
    jaxacct.sample_privacy_losses(key, MECH, 5, 'remove', dtype=jnp.float16)
  with pytest.raises(TypeError, match='key must be a JAX PRNG key'):
    jaxacct.sample_privacy_losses(0, MECH, 5, 'remove')
  with pytest.raises(TypeError, match='mechanism'):
    jaxacct.sample_privacy_losses(key, 'mechanism', 5, 'remove')
