"""The tilted remove-direction estimate (montecarlo/evr/tilted.py, engine/tilted.py): oracles
(E[w] = 1, plain Monte Carlo, dp_accounting's PLD), bitwise reproducibility, terms ≤ M, fail
closed above M, and refusals before compute.

Tolerances: statistical comparisons are within 4 standard errors (fixed keys: every run checks
the same draws); bounds within the stated float64 rounding allowance.
"""

import dataclasses
import itertools
import math

import hypothesis
import hypothesis.strategies as st
import jax
import jax.numpy as jnp
import numpy as np
import pytest

import jaxacct
from jaxacct.deterministic import minsep_chain, tilt_bound
from jaxacct.montecarlo.engine import keys as keys_lib
from jaxacct.montecarlo.engine import tilted as engine_tilted
from jaxacct.montecarlo.evr import plan, tilted

# The tiny b-min-sep of the issue (n = 12, b = 3, warm start, 3 bands ≤ b). σ = 1.6 keeps the
# weights' variance small at α = 3 (Z_2 ≈ 1.7, Z_3 ≈ 5.2; at σ = 0.7, Z_3 ≈ 6e7 and E[w] = 1 is
# beyond any small sample); plain δ at ε = 2.5 is ≈ 4e-4.
BMINSEP = jaxacct.MatrixMechanism(
    jaxacct.BMinSep(sampling_prob=0.3, iterations=12, min_sep=3, warm_start=True),
    jaxacct.BandedToeplitz([1.0, 0.5, 0.25]), 1.6)
# ε = −40: every term is w·(1 − e^{ε−L}) with L ≥ ln Pr[x = 0] > −5 here, so e^{ε−L} < 1e-15
# and the estimate is E_{Q_α}[w] = 1 (tilting.md (b)) to 1e-15.
EPS = [-40.0, 1.0, 2.0, 2.5]
# Random-phase cyclic Poisson (2 bands ≤ T = 3) and fixed-bin balls-in-bins (3 bands ≤ T = 4):
# the tuples of minsep_chain's cyclic law, the losses of their own kernels (phase mixtures).
CYCLIC = jaxacct.MatrixMechanism(
    jaxacct.CyclicPoisson(sampling_prob=0.4, iterations=12, cycle_length=3),
    jaxacct.BandedToeplitz([1.0, 0.5]), 1.2)
BALLS = jaxacct.MatrixMechanism(jaxacct.BallsInBins(iterations=12, cycle_length=4),
                                jaxacct.BandedToeplitz([1.0, 0.5, 0.25]), 1.6)
SAMPLES, BLOCK = 6000, 256


def _tilted(mechanism, order, epsilons, num_samples, *, key=1, block_size=BLOCK, run=None):
  return jaxacct.estimate_delta(
      jax.random.key(key), mechanism, epsilons, num_samples,
      monte_carlo=jaxacct.MonteCarloOptions(proposal='tilted', tilt_order=order,
                                            block_size=block_size), run=run)


@pytest.fixture(scope='module')
def plain():
  return jaxacct.estimate_delta(jax.random.key(1), BMINSEP, EPS, 4 * SAMPLES,
                                monte_carlo=jaxacct.MonteCarloOptions(block_size=BLOCK))


@pytest.fixture(scope='module', params=[2, 3], ids=lambda a: f'alpha={a}')
def tilted_run(request):
  return _tilted(BMINSEP, request.param, EPS, SAMPLES)


def test_weights_have_mean_one(tilted_run):
  mean, error = tilted_run.delta_hat['remove'][0], tilted_run.standard_error['remove'][0]
  assert error > 0 and abs(mean - 1.0) <= 4 * error, (mean, error)


def test_tilted_agrees_with_plain_sampling(tilted_run, plain):
  both = np.hypot(tilted_run.standard_error['remove'], plain.standard_error['remove'])
  gap = np.abs(tilted_run.delta_hat['remove'] - plain.delta_hat['remove'])
  assert np.all(gap[1:] <= 4 * both[1:]), gap / both


@pytest.mark.parametrize('mechanism', [
    jaxacct.MatrixMechanism(jaxacct.BMinSep(sampling_prob=0.3, iterations=12, min_sep=3,
                                            warm_start=False),
                            jaxacct.BandedToeplitz([1.0, 0.5]), 1.6),
    jaxacct.MatrixMechanism(jaxacct.Poisson(sampling_prob=0.2, iterations=12),
                            jaxacct.BandedToeplitz([0.6]), 1.0),
], ids=['cold-start', 'poisson-c=0.6'])
def test_weights_have_mean_one_for_cold_start_and_scaled_poisson(mechanism):
  result = _tilted(mechanism, 3, EPS, 4000)
  mean, error = result.delta_hat['remove'][0], result.standard_error['remove'][0]
  assert error > 0 and abs(mean - 1.0) <= 4 * error, (mean, error)
  assert np.all(result.largest_scaled_term <= 1.0 + 1e-12)


def test_the_result_states_what_ran(tilted_run, plain):
  result = tilted_run.to_dict()
  assert result['proposal'] == {'remove': 'tilted', 'add': 'plain'}
  assert result['method'] == 'estimate' and result['num_samples'] == SAMPLES
  log_z = tilt_bound.log_partition(BMINSEP, tilted_run.order)
  assert tilted_run.log_z == log_z
  np.testing.assert_array_equal(
      tilted_run.support,
      np.exp([tilt_bound.log_support_bound(log_z, tilted_run.order, e) for e in EPS]))
  # Every term checked ≤ M (here: as drawn, ≤ 1 up to the rounding allowance, 64 ulps).
  assert np.all(tilted_run.largest_scaled_term <= 1.0 + 1e-12)
  assert np.all(tilted_run.largest_scaled_term[1:] > 0.5)  # the bound is approached
  # The add direction is the plain estimate's own stream: the same sums for the same samples.
  same = jaxacct.estimate_delta(jax.random.key(1), BMINSEP, EPS, SAMPLES,
                                monte_carlo=jaxacct.MonteCarloOptions(block_size=BLOCK))
  np.testing.assert_array_equal(tilted_run.delta_hat['add'], same.delta_hat['add'])
  np.testing.assert_array_equal(tilted_run.standard_error['add'], same.standard_error['add'])


def test_bitwise_identical_whatever_the_blocks_per_call():
  # 5 blocks of 256, the last partial: calls of 2 blocks (the fewest allowed) and of 8.
  runs = [_tilted(BMINSEP, 2, EPS, 1100, key=7, run=jaxacct.RunOptions(blocks_per_call=calls))
          for calls in (2, 8)]
  assert runs[0].to_dict() == runs[1].to_dict()


def test_a_tilted_run_resumes_from_its_checkpoint_bitwise(tmp_path, monkeypatch):
  class Stop(Exception):
    pass

  def stop_after_one_call(done, total, stage):
    raise Stop

  folder = tmp_path / 'tilted'
  with pytest.raises(Stop):
    _tilted(BMINSEP, 2, EPS, 1100, key=7,
            run=jaxacct.RunOptions(blocks_per_call=2, checkpoint=folder,
                                   checkpoint_interval=1e-9, progress=stop_after_one_call))
  seen = []
  resumed = _tilted(BMINSEP, 2, EPS, 1100, key=7, run=jaxacct.RunOptions(
      blocks_per_call=2, checkpoint=folder, progress=lambda done, total, stage: seen.append(done)))
  whole = _tilted(BMINSEP, 2, EPS, 1100, key=7, run=jaxacct.RunOptions(blocks_per_call=2))
  assert seen[0] > 512  # it went on from the saved blocks
  for direction in ('remove', 'add'):
    np.testing.assert_array_equal(resumed.delta_hat[direction], whole.delta_hat[direction])
  with pytest.raises(jaxacct.InputError):  # another order is another run: refused, not mixed
    _tilted(BMINSEP, 3, EPS, 1100, key=7, run=jaxacct.RunOptions(checkpoint=folder))
  # Tables with another digest (another NumPy, platform or input) are another run too, with the
  # same order and ln Z_α: refused, naming the digest.
  real = minsep_chain.TupleChain.digest(tilted.tilt_for(BMINSEP, 2, EPS).chain)
  monkeypatch.setattr(minsep_chain.TupleChain, 'digest', lambda self: '0' * 32)
  with pytest.raises(jaxacct.InputError) as refused:
    _tilted(BMINSEP, 2, EPS, 1100, key=7, run=jaxacct.RunOptions(checkpoint=folder))
  assert 'tables_digest' in str(refused.value) and len(real) == 32


def test_tuple_seeds_depend_only_on_the_block_and_the_purpose():
  key = jax.random.key(3)
  stream = keys_lib.host_stream_key(key, 'estimation', 'remove')
  whole = keys_lib.host_block_seeds(stream, range(6))
  assert whole == keys_lib.host_block_seeds(stream, [0, 1, 2]) + keys_lib.host_block_seeds(
      stream, [3, 4, 5])
  assert len(set(whole)) == 6
  other = keys_lib.host_block_seeds(keys_lib.host_stream_key(key, 'verification', 'remove'),
                                    range(6))
  assert not set(whole) & set(other)
  # Never a sample key of the run's own streams.
  with jax.enable_x64(True):
    samples = keys_lib.sample_keys(keys_lib.direction_key(
        keys_lib.purpose_key(key, 'estimation'), 'remove'), jnp.asarray(0), 8)
  words = {(int(a) << 32) | int(b) for a, b in np.asarray(jax.random.key_data(samples))}
  assert not words & set(whole)


@pytest.mark.slow
@pytest.mark.parametrize('delta,alpha', [(1e-5, 7), (1e-6, 8), (1e-8, 8)])
def test_dp_sgd_agrees_with_the_pld_at_a_small_delta(delta, alpha):
  # DP-SGD (Poisson q = 0.01, n = 1000, σ = 1, C = I) at the ε where the PLD's remove δ is
  # ``delta`` (jaxacct's "pld" accountant: dp_accounting's pessimistic PLD). α is the order of
  # the smallest M there (tilt_bound.choose_order over 2 … 8): M/δ ≈ 7 (1e-5), 9 (1e-6), 16
  # (1e-8), so 1e4 samples give a relative s.e. of a few % (plain sampling: ~100 % at 1e4, or
  # ~10²/δ samples for the same).
  mechanism = jaxacct.MatrixMechanism(jaxacct.Poisson(sampling_prob=0.01, iterations=1000),
                                      jaxacct.BandedToeplitz([1.0]), 1.0)
  epsilon = jaxacct.epsilon_for_delta(mechanism, delta, accountant='pld', direction='remove')
  pld = jaxacct.delta_for_epsilon(mechanism, epsilon, accountant='pld', direction='remove')
  order = tilt_bound.choose_order(mechanism, epsilon).alpha
  result = _tilted(mechanism, order, [epsilon], 10_000, key=2, block_size=1024)
  estimate, error = result.delta_hat['remove'][0], result.standard_error['remove'][0]
  assert order == alpha and error < 0.06 * pld
  assert abs(estimate - pld) <= 4 * error, (estimate, pld, error)


@pytest.mark.parametrize('mechanism', [CYCLIC, BALLS], ids=['cyclic-random-phase',
                                                             'balls-in-bins'])
def test_cyclic_and_balls_in_bins_weights_have_mean_one_and_agree_with_plain(mechanism):
  # Tuples of the cyclic chain (random phase; p = 1 for balls-in-bins), losses of the schemes'
  # own kernels (a mixture over the phase): E[w] = 1 (ε = −40) and δ̂ at ε = 1, 2 (≈ 0.04 and
  # 0.004 here) within 4 s.e. of plain sampling from 4× the draws.
  result = _tilted(mechanism, 3, EPS[:3], 4000)
  plain = jaxacct.estimate_delta(jax.random.key(1), mechanism, EPS[:3], 16_000,
                                 monte_carlo=jaxacct.MonteCarloOptions(block_size=BLOCK))
  mean, error = result.delta_hat['remove'][0], result.standard_error['remove'][0]
  assert error > 0 and abs(mean - 1.0) <= 4 * error, (mean, error)
  both = np.hypot(result.standard_error['remove'], plain.standard_error['remove'])
  gap = np.abs(result.delta_hat['remove'] - plain.delta_hat['remove'])
  assert np.all(gap[1:] <= 4 * both[1:]), gap / both
  assert np.all(result.standard_error['remove'][1:] < plain.standard_error['remove'][1:])
  assert np.all(result.largest_scaled_term <= 1.0 + 1e-12)
  # The proven add bound a tilted verification certifies with (tilted.add_bound) is above the
  # plain add estimate (within 4 s.e.) wherever it is below 1.
  for i, epsilon in enumerate(EPS[1:3], start=1):
    bound = tilted.add_bound([mechanism], epsilon)
    if bound is not None:
      assert bound >= plain.delta_hat['add'][i] - 4 * plain.standard_error['add'][i]


def _scheme_patterns(mechanism):
  """(patterns (K, n), probabilities (K,)) of one example, enumerated from the scheme's own
  definition: a uniform phase s ∈ {0 … T−1}, then in every round t ≡ s (mod T) a Bernoulli(p)
  trial (cyclic Poisson, random phase) or a certain participation (balls-in-bins, p = 1)."""
  scheme = mechanism.scheme
  n, t = scheme.iterations, scheme.cycle_length
  p = getattr(scheme, 'sampling_prob', 1.0)
  patterns, probabilities = [], []
  for phase in range(t):
    rounds = list(range(phase, n, t))
    for bits in itertools.product((0, 1), repeat=len(rounds)):
      if p == 1.0 and not all(bits):
        continue
      x = np.zeros(n)
      x[rounds] = bits
      patterns.append(x)
      probabilities.append(math.prod(p if b else 1.0 - p for b in bits) / t)
  return np.array(patterns), np.array(probabilities)


def _block_program(mechanism, key):
  """(tilt, kernel, program, remove stream key) of one device's α = 3 tilted program of
  ``mechanism`` on ``key``'s estimation streams (the block oracles below)."""
  from jaxacct.montecarlo.engine import kernels
  from jaxacct.montecarlo.engine.sharding import SampleMesh
  tilt = tilted.tilt_for(mechanism, 3, np.asarray([1.0]))
  kernel = kernels.kernel_for(mechanism, np.dtype(np.float64))
  program = engine_tilted.TiltedDraws(
      mechanism=mechanism, kernel=kernel, block_size=BLOCK,
      mesh=SampleMesh.over(jax.local_devices()[:1]), tuples=tilt.tuples,
      tuple_key=keys_lib.host_stream_key(key, 'estimation', 'remove'), order=3,
      log_z=tilt.log_z, log_support=tilt.log_support)
  stream_key = keys_lib.direction_key(keys_lib.purpose_key(key, 'estimation'), 'remove')
  return tilt, kernel, program, stream_key


@pytest.mark.parametrize('mechanism', [CYCLIC, BALLS], ids=['cyclic-random-phase',
                                                             'balls-in-bins'])
def test_a_tilted_block_of_a_phase_mixture_has_the_brute_force_loss(mechanism):
  """Oracle of one block: y = C·Σ_j x_j + σ·z from the cyclic tuple chain and the run's NOISE
  stream, and its loss L = ln P/Q against the mixture over the scheme's own enumerated
  patterns, P/Q(y) = Σ_x p_x exp(⟨Cx, y⟩/σ² − ‖Cx‖²/(2σ²)) — the pair the chain tilts and the
  pair the kernel's loss mixes over the phase are the scheme's one pair."""
  from jaxacct.deterministic import minsep_chain
  from jaxacct.montecarlo.engine import sampling
  sigma = float(mechanism.noise_multiplier)
  _, kernel, program, stream_key = _block_program(mechanism, jax.random.key(5))
  tuples = program.draw_tuples([0])[0]
  with jax.enable_x64(True):
    losses = np.asarray(program.losses(stream_key, 0, 1))[0]
    _, z = sampling.draw_noise(stream_key, jnp.arange(BLOCK, dtype=jnp.int64), kernel)
  c = mechanism.matrix.banded_coefficients()
  y = minsep_chain.apply_band(c, tuples).sum(axis=1) + sigma * np.asarray(z)
  patterns, probabilities = _scheme_patterns(mechanism)
  means = minsep_chain.apply_band(c, patterns)
  exponents = (y @ means.T - 0.5 * np.sum(means * means, axis=1)) / sigma**2
  expected = np.log(np.exp(exponents) @ probabilities)
  np.testing.assert_allclose(losses, expected, rtol=1e-11, atol=1e-11)
  # Every drawn tuple is one of the scheme's patterns per chain (the chain's support).
  known = {x.astype(bool).tobytes() for x in patterns}
  assert all(x.tobytes() in known for x in tuples.reshape(-1, mechanism.iterations))


def test_fixed_phase_cyclic_poisson_agrees_with_the_pld_at_a_small_delta():
  # Cyclic Poisson, equal split (phase 0), 2 bands ≤ T = 4, at the ε where the PLD's remove δ
  # is 1e-6 (jaxacct's "pld": exact for this scheme, pessimistic discretisation). α = 3 (the
  # smallest M there, M/δ ≈ 13): 1e4 samples give a relative s.e. of ~3 % (plain: ~10⁸ draws).
  mechanism = jaxacct.MatrixMechanism(
      jaxacct.CyclicPoisson(sampling_prob=0.1, iterations=60, cycle_length=4,
                            partition='equal_split'), jaxacct.BandedToeplitz([1.0, 0.5]), 0.8)
  epsilon = jaxacct.epsilon_for_delta(mechanism, 1e-6, accountant='pld', direction='remove')
  pld = jaxacct.delta_for_epsilon(mechanism, epsilon, accountant='pld', direction='remove')
  order = tilt_bound.choose_order(mechanism, epsilon).alpha
  result = _tilted(mechanism, order, [epsilon], 10_000, key=2, block_size=1024)
  estimate, error = result.delta_hat['remove'][0], result.standard_error['remove'][0]
  assert order == 3 and error < 0.05 * pld
  assert abs(estimate - pld) <= 4 * error, (estimate, pld, error)


@hypothesis.given(losses=st.lists(st.floats(-50.0, 60.0), min_size=1, max_size=8),
                  epsilon=st.floats(-5.0, 20.0), order=st.integers(2, 12),
                  log_z=st.floats(0.0, 300.0))
def test_every_term_is_at_most_its_bound(losses, epsilon, order, log_z):
  log_support = tilt_bound.log_support_bound(log_z, order, epsilon)
  with jax.enable_x64(True):
    scaled, excess = engine_tilted.scaled_terms(
        jnp.asarray([epsilon]), jnp.asarray(losses), jnp.asarray(log_z),
        jnp.asarray([log_support]), jnp.asarray(float(order)))
  assert np.all(np.asarray(excess) <= 0.0)
  assert np.all(np.asarray(scaled) <= 1.0 + 1e-12) and np.all(np.asarray(scaled) >= 0.0)


def test_an_injected_term_above_its_bound_fails_closed(monkeypatch):
  grid = np.asarray([0.5, 1.0])
  tilt = tilted.tilt_for(BMINSEP, 2, grid)
  # M computed from ln Z − 1: the terms (weights at the true ln Z) exceed it.
  low = dataclasses.replace(tilt, log_support=np.asarray(
      [tilt_bound.log_support_bound(tilt.log_z - 1.0, 2, e) for e in grid]))
  with pytest.raises(tilted.TermAboveBoundError, match='never clipped') as raised:
    tilted.run_tilted_estimate(jax.random.key(1), BMINSEP, low, 512, purpose='estimation',
                               block_size=BLOCK, identity={}, run=jaxacct.RunOptions())
  assert raised.value.scaled > 1.0 and raised.value.epsilon in grid.tolist()
  # A NaN term fails too (``not excess <= 0``).
  with pytest.raises(tilted.TermAboveBoundError):
    engine_tilted.check_block_maxima(np.asarray([[-1.0, np.nan]]), np.asarray([[0.5, np.nan]]),
                                     3, grid)
  engine_tilted.check_block_maxima(np.asarray([[-1.0, -np.inf]]), np.asarray([[0.5, 0.0]]), 3,
                                   grid)


def _no_compute(monkeypatch):
  def fail(*args, **kwargs):
    raise AssertionError('computed before refusing')
  monkeypatch.setattr(tilted.minsep_chain, 'TupleChain', fail)
  monkeypatch.setattr(tilted.stream, 'accumulate', fail)


@pytest.mark.parametrize('mechanism, match', [
    (jaxacct.MatrixMechanism(jaxacct.BMinSep(sampling_prob=0.1, iterations=12, min_sep=3,
                                             dataset_size=100, truncated_batch_size=8),
                             jaxacct.BandedToeplitz([1.0]), 1.0), 'truncates'),
    (jaxacct.MatrixMechanism(jaxacct.MultiAttributionBMinSep(
        sampling_prob=0.1, iterations=12, min_sep=3, max_examples_per_user=2),
        jaxacct.BandedToeplitz([1.0]), 1.0), 'multi-attribution'),
    (jaxacct.MatrixMechanism(jaxacct.BMinSep(sampling_prob=0.1, iterations=12, min_sep=3),
                             jaxacct.LowerTriangular(np.tril(np.ones((12, 12)))), 1.0),
     'LowerTriangular'),
    (jaxacct.MatrixMechanism(jaxacct.BallsInBins(iterations=12, cycle_length=2),
                             jaxacct.BandedToeplitz([1.0, 0.5, 0.2]), 1.0),
     'exceed the cycle length'),
    (jaxacct.MatrixMechanism(jaxacct.Poisson(sampling_prob=0.5, iterations=12),
                             jaxacct.BandedToeplitz([1.0, 0.5]), 1.0), 'exceed the separation'),
], ids=['truncated', 'multi-attribution', 'lower-triangular',
        'balls-in-bins-bands-over-cycle', 'poisson-two-bands'])
def test_uncovered_schemes_are_refused_before_compute(monkeypatch, mechanism, match):
  _no_compute(monkeypatch)
  with pytest.raises(jaxacct.InputError, match=match) as refused:
    _tilted(mechanism, 2, [1.0], 512, block_size=128)
  assert refused.value.argument == 'mechanism'


def test_an_order_over_the_state_budget_is_refused_before_compute(monkeypatch):
  _no_compute(monkeypatch)
  big = jaxacct.MatrixMechanism(jaxacct.BMinSep(sampling_prob=0.01, iterations=1000, min_sep=64),
                                jaxacct.BandedToeplitz([1.0]), 1.0)
  with pytest.raises(jaxacct.InputError, match='state budget') as refused:
    _tilted(big, 8, [1.0], 512)
  assert refused.value.argument == 'monte_carlo.tilt_order'
  # The estimate's own budget (tilt_state_budget), one state below the n = 12 chain's at α = 2.
  states, _ = tilted.sampler_states(BMINSEP, 2)
  with pytest.raises(jaxacct.InputError, match=f'{states:,} tuple-chain states') as refused:
    jaxacct.estimate_delta(jax.random.key(0), BMINSEP, [1.0], 512,
                           monte_carlo=jaxacct.MonteCarloOptions(
                               proposal='tilted', tilt_order=2, tilt_state_budget=states - 1))
  assert refused.value.argument == 'monte_carlo.tilt_order'


@pytest.mark.parametrize('fields, argument', [
    ({'proposal': 'tilted'}, 'monte_carlo.tilt_order'),
    ({'tilt_order': 2}, 'monte_carlo.tilt_order'),
    ({'proposal': 'tilted', 'tilt_order': 1}, None),
    ({'proposal': 'tilted', 'tilt_order': 2, 'precision': 'float32'}, 'monte_carlo.precision'),
    ({'proposal': 'tilted', 'tilt_order': 2, 'precision': 'auto'}, 'monte_carlo.precision'),
    ({'proposal': 'sideways'}, None),
    ({'proposal': 'auto', 'tilt_order': 1}, None),
])
def test_bad_tilt_options_are_named(fields, argument):
  with pytest.raises(jaxacct.InputError) as refused:
    jaxacct.MonteCarloOptions(**fields)
  if argument is not None:
    assert refused.value.argument == argument


def test_max_seconds_projects_the_tilted_sampling_before_any_sample(monkeypatch):
  # 10⁶ draws per direction of the n = 12 chain are projected at minutes here: refused under
  # a 1 s budget with nothing run (the projection's own timed calls aside), and the same
  # estimate under a budget it keeps is the one without a budget, bit for bit.
  options = jaxacct.MonteCarloOptions(proposal='tilted', tilt_order=2, block_size=BLOCK)
  runs = []
  monkeypatch.setattr(tilted, 'run_tilted_estimate',
                      lambda *args, **kwargs: runs.append(args) or None)
  with pytest.raises(plan.OverBudgetError, match='tilted estimate of 1,000,000'):
    jaxacct.estimate_delta(jax.random.key(0), BMINSEP, [1.0], 1_000_000, monte_carlo=options,
                           run=jaxacct.RunOptions(max_seconds=1.0))
  assert not runs
  monkeypatch.undo()
  kept = jaxacct.estimate_delta(jax.random.key(0), BMINSEP, [1.0], 1100, monte_carlo=options,
                                run=jaxacct.RunOptions(max_seconds=600.0))
  free = jaxacct.estimate_delta(jax.random.key(0), BMINSEP, [1.0], 1100, monte_carlo=options)
  assert kept.to_dict() == free.to_dict()


def test_max_seconds_projects_only_what_a_resumed_tilted_estimate_has_left(tmp_path):
  # A finished run saved in its checkpoint has nothing left: called again under a budget no
  # draw could keep (1 ns), it is not refused and returns the same result bit for bit (but
  # the largest term, which a resumed run reports of its resumed part: here none).
  options = jaxacct.MonteCarloOptions(proposal='tilted', tilt_order=2, block_size=BLOCK)
  saved = jaxacct.RunOptions(checkpoint=str(tmp_path))
  first = jaxacct.estimate_delta(jax.random.key(4), BMINSEP, [1.0], 1100, monte_carlo=options,
                                 run=saved)
  again = jaxacct.estimate_delta(jax.random.key(4), BMINSEP, [1.0], 1100, monte_carlo=options,
                                 run=dataclasses.replace(saved, max_seconds=1e-9))
  assert ({**again.to_dict(), 'largest_scaled_term': None}
          == {**first.to_dict(), 'largest_scaled_term': None})
  with pytest.raises(plan.OverBudgetError):  # a fresh folder: the whole run is left
    jaxacct.estimate_delta(jax.random.key(4), BMINSEP, [1.0], 1100, monte_carlo=options,
                           run=jaxacct.RunOptions(checkpoint=str(tmp_path / 'new'),
                                                  max_seconds=1e-9))


@pytest.mark.parametrize('extra, match', [
    ({'histogram_edges': [1.0, 2.0]}, 'histogram_edges'),
])
def test_estimate_arguments_the_tilt_does_not_use_are_refused(monkeypatch, extra, match):
  _no_compute(monkeypatch)
  with pytest.raises(jaxacct.InputError, match=match):
    jaxacct.estimate_delta(jax.random.key(0), BMINSEP, [1.0], 512,
                           monte_carlo=jaxacct.MonteCarloOptions(proposal='tilted',
                                                                 tilt_order=2), **extra)


_DEVICE_SCRIPT = '''
import json, jax, jaxacct, numpy as np
mechanism = jaxacct.MatrixMechanism(
    jaxacct.BMinSep(sampling_prob=0.3, iterations=12, min_sep=3, warm_start=True),
    jaxacct.BandedToeplitz([1.0, 0.5, 0.25]), 1.6)
options = jaxacct.MonteCarloOptions(proposal='tilted', tilt_order=2, block_size=256)
runs = [jaxacct.estimate_delta(jax.random.key(7), mechanism, [-40.0, 1.0, 2.0, 2.5], 1100,
                               monte_carlo=options,
                               run=jaxacct.RunOptions(devices=devices, blocks_per_call=2)
                               ).to_dict()
        for devices in (jax.devices()[:1], jax.devices())]
print(json.dumps({'devices': len(jax.devices()), 'runs': runs}))
'''


@pytest.mark.slow
def test_bitwise_identical_on_one_and_two_devices():
  from devices import run_on_devices
  result = run_on_devices(_DEVICE_SCRIPT, 2)
  assert result['devices'] == 2
  one, two = result['runs']
  assert one == two
  here = _tilted(BMINSEP, 2, EPS, 1100, key=7, run=jaxacct.RunOptions(blocks_per_call=2))
  assert one == here.to_dict()


def test_a_block_is_its_tuples_its_noise_and_the_exact_loss():
  """Oracle of one block: the tuples are ``TupleChain.draw`` on the block's Philox seed, y is
  C·Σ_j x_j (NumPy band product) + σ·z of the run's own NOISE stream, L is ``privacy_loss``."""
  from jaxacct.deterministic import minsep_chain
  from jaxacct.montecarlo.engine import sampling
  tilt, kernel, program, stream_key = _block_program(BMINSEP, jax.random.key(5))
  seed, = keys_lib.host_block_seeds(program.tuple_key, [3])
  patterns = tilt.chain.draw(np.random.Generator(np.random.Philox(key=seed)), BLOCK)
  np.testing.assert_array_equal(program.draw_tuples([3, 4])[0], patterns)
  # Drawn ahead in one host pass (blocks 3 … 6) and served from it: the same tuples.
  ahead = dataclasses.replace(program, host_blocks=4)
  np.testing.assert_array_equal(ahead.draw_tuples([3], last_block=9)[0], patterns)
  assert sorted(ahead._ahead) == [4, 5, 6]
  np.testing.assert_array_equal(ahead.draw_tuples([4, 5]), program.draw_tuples([4, 5]))
  np.testing.assert_array_equal(ahead.draw_tuples([7, 8]), program.draw_tuples([7, 8]))
  with jax.enable_x64(True):
    losses = np.asarray(program.losses(stream_key, 3, 2))[0]
    _, z = sampling.draw_noise(stream_key, 3 * BLOCK + jnp.arange(BLOCK, dtype=jnp.int64), kernel)
  y = (minsep_chain.apply_band(BMINSEP.matrix.banded_coefficients(), patterns).sum(axis=1)
       + 1.6 * np.asarray(z))
  np.testing.assert_allclose(losses, np.asarray(jaxacct.privacy_loss(BMINSEP, y, 'remove')),
                             rtol=1e-12, atol=1e-12)
