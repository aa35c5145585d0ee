"""Streaming δ̂(ε): exact values, conservativeness, reproducibility, resume, devices."""

import pathlib

import jax
import numpy as np
import pytest

import jaxacct
from jaxacct.montecarlo.engine import sampling
from jaxacct.montecarlo.evr import estimator
from jaxacct.montecarlo.engine import keys as keys_lib
from jaxacct.montecarlo.engine.kernels import kernel_for

MECH = jaxacct.MatrixMechanism(
    jaxacct.BMinSep(sampling_prob=0.3, iterations=40, min_sep=4, warm_start=True),
    jaxacct.BandedToeplitz([1.0, 0.5, 0.25]), 1.0)
EPS = [0.25, 0.5, 1.0, 2.0]


# reference-values.md §3 (jax_privacy tests, exact), tolerance 1e-15 relative.
@pytest.mark.parametrize('epsilon, losses, counts, expected', [
    (3, [3 + np.log(2), 1e9], None, 3 / 4),
    (3, [2, 3, 3 + np.log(2)], None, 1 / 6),
    (3, [2, 3, 3 + np.log(2)], [1, 1, 2], 1 / 4),
    (1000, [999, 1000, 1000 + np.log(2)], None, 1 / 6),
    (0, [-1, 0, np.log(2)], None, 1 / 6),
])
def test_reference_estimates(epsilon, losses, counts, expected):
  assert estimator.delta_from_losses(epsilon, losses, counts) == pytest.approx(expected, rel=1e-15)


@pytest.mark.slow
def test_estimate_equals_mean_of_the_stream_losses():
  key = jax.random.key(3)
  result = estimator.estimate_delta(key, MECH, EPS, 3000,
                                    monte_carlo=jaxacct.MonteCarloOptions(block_size=256))
  stream = keys_lib.purpose_key(key, 'estimation')
  spec = kernel_for(MECH, np.dtype(np.float64))
  for direction in ('remove', 'add'):
    losses = np.asarray(sampling.losses_of_stream(keys_lib.direction_key(stream, direction), MECH,
                                                  spec, 3000, direction))
    terms = -np.expm1(np.minimum(np.asarray(EPS)[:, None] - losses[None, :], 0.0))
    np.testing.assert_allclose(result.delta_hat[direction], terms.mean(axis=1), rtol=1e-12)
    np.testing.assert_allclose(result.standard_error[direction],
                               terms.std(axis=1, ddof=1) / np.sqrt(3000), rtol=1e-9)
  assert result.num_samples == 3000
  assert np.all(result.delta_hat_max >= result.delta_hat['add'])


@pytest.mark.slow
def test_bitwise_identical_whatever_the_blocks_per_call():
  key = jax.random.key(4)
  # 9 blocks (the last one partial) in five calls of two (the fewest allowed,
  # options.MIN_BLOCKS_PER_CALL; the last call partial) and in one call of the default size
  # (102 blocks: the other tests' programs). Two call sizes: a third would compile both
  # directions' programs again for the same code path (the device check's calls of two are
  # these programs).
  runs = [estimator.estimate_delta(key, MECH, EPS, 2300,
                                   monte_carlo=jaxacct.MonteCarloOptions(block_size=256),
                                   run=jaxacct.RunOptions(blocks_per_call=k))
          for k in (2, None)]
  for run in runs[1:]:
    for direction in ('remove', 'add'):
      np.testing.assert_array_equal(run.delta_hat[direction], runs[0].delta_hat[direction])


def test_resume_equals_one_run():
  key = jax.random.key(5)
  whole = estimator.estimate_delta(key, MECH, EPS, 2048,
                                   monte_carlo=jaxacct.MonteCarloOptions(block_size=256))
  first = estimator.estimate_delta(key, MECH, EPS, 768,
                                   monte_carlo=jaxacct.MonteCarloOptions(block_size=256))
  state = estimator.EstimatorState.from_json(first.state.to_json())  # survives serialisation
  resumed = estimator.estimate_delta(key, MECH, EPS, 2048, state=state,
                                     monte_carlo=jaxacct.MonteCarloOptions(block_size=256))
  for direction in ('remove', 'add'):
    np.testing.assert_array_equal(resumed.delta_hat[direction], whole.delta_hat[direction])
  with pytest.raises(ValueError, match='different run'):
    estimator.estimate_delta(jax.random.key(6), MECH, EPS, 2048, state=state,
                             monte_carlo=jaxacct.MonteCarloOptions(block_size=256))
  partial = estimator.estimate_delta(key, MECH, EPS, 700,
                                     monte_carlo=jaxacct.MonteCarloOptions(block_size=256))
  with pytest.raises(ValueError, match='multiple of block_size'):
    estimator.estimate_delta(key, MECH, EPS, 2048, state=partial.state,
                             monte_carlo=jaxacct.MonteCarloOptions(block_size=256))


def test_streams_by_purpose_are_independent():
  key = jax.random.key(7)
  estimate = estimator.estimate_delta(key, MECH, EPS, 512,
                                      monte_carlo=jaxacct.MonteCarloOptions(block_size=256))
  verify = estimator.run_estimate(key, MECH, EPS, 512, block_size=256, purpose='verification')
  assert not np.array_equal(estimate.delta_hat['remove'], verify.delta_hat['remove'])
  # The public estimator cannot read the verification stream (no peeking before verify).
  with pytest.raises(TypeError):
    estimator.estimate_delta(key, MECH, EPS, 512, purpose='verification')
  # The plain sampler has its own stream too.
  plain = np.asarray(jaxacct.sample_privacy_losses(key, MECH, 512, 'remove'))
  stream = keys_lib.direction_key(keys_lib.purpose_key(key, 'estimation'), 'remove')
  from_estimation = np.asarray(sampling.losses_of_stream(
      stream, MECH, kernel_for(MECH, np.dtype(np.float64)), 512, 'remove'))
  assert not np.any(np.isin(plain, from_estimation))


def test_histogram_rounds_losses_up():
  key = jax.random.key(8)
  edges = np.linspace(-4.0, 6.0, 41)  # bin width 0.25
  exact = estimator.estimate_delta(key, MECH, EPS, 4096,
                                   monte_carlo=jaxacct.MonteCarloOptions(block_size=256))
  binned = estimator.estimate_delta(key, MECH, EPS, 4096, histogram_edges=edges,
                                    monte_carlo=jaxacct.MonteCarloOptions(block_size=256))
  np.testing.assert_array_equal(binned.delta_hat['remove'], exact.delta_hat['remove'])
  counts = binned.state.histogram
  assert sum(counts['remove']) == 4096 and sum(counts['add']) == 4096
  top = np.append(edges, np.inf)
  for i, eps in enumerate(EPS):
    for direction in ('remove', 'add'):
      from_histogram = estimator.delta_from_losses(eps, top, counts[direction])
      assert from_histogram >= exact.delta_hat[direction][i]  # conservative
  # ε̂(δ) from the histogram: δ̂(ε̂) ≤ δ and it is tight to the bisection tolerance.
  target = 0.05
  eps_hat = binned.epsilon_for_delta(target)
  assert max(estimator.delta_from_losses(eps_hat, top, counts[d]) for d in counts) <= target
  assert max(estimator.delta_from_losses(eps_hat - 1e-6, top, counts[d]) for d in counts) > target
  # Without a histogram: the smallest grid ε that qualifies.
  grid_eps = exact.epsilon_for_delta(0.3)
  assert grid_eps in EPS and exact.delta_hat_max[EPS.index(grid_eps)] <= 0.3


@pytest.mark.parametrize('epsilons', [[], [1.0, float('nan')], [[1.0]]])
def test_bad_epsilon_grids(epsilons):
  with pytest.raises(ValueError, match='epsilons'):
    estimator.estimate_delta(jax.random.key(0), MECH, epsilons, 10)


def test_bad_estimator_arguments():
  with pytest.raises(TypeError, match='key must be a JAX PRNG key'):
    estimator.estimate_delta(7, MECH, EPS, 10)
  with pytest.raises(ValueError, match='num_samples must be an integer >= 1'):
    estimator.estimate_delta(jax.random.key(0), MECH, EPS, 0)
  with pytest.raises(ValueError, match='purpose'):
    estimator.run_estimate(jax.random.key(0), MECH, EPS, 10, purpose='training')
  with pytest.raises(ValueError, match=r'num_samples must be <= 2\*\*52'):
    estimator.estimate_delta(jax.random.key(0), MECH, EPS, 2**53)
  with pytest.raises(ValueError, match='histogram_edges must be strictly increasing'):
    estimator.estimate_delta(jax.random.key(0), MECH, EPS, 10, histogram_edges=[1.0, 0.0])


def device_runs(per_calls) -> dict:
  """δ̂'s bit patterns of 2,300 samples (9 blocks of 256, the last one partial) of ``MECH`` on
  all of this process's devices, in calls of each of ``per_calls`` blocks per device. Blocks
  of 256 in calls of two: the programs on one device are those of
  test_bitwise_identical_whatever_the_blocks_per_call."""
  runs = {}
  for per_call in per_calls:
    result = estimator.estimate_delta(jax.random.key(11), MECH, EPS, 2300,
                                      monte_carlo=jaxacct.MonteCarloOptions(block_size=256),
                                      run=jaxacct.RunOptions(blocks_per_call=per_call))
    runs[f'plain{per_call}'] = {d: [float(v).hex() for v in result.delta_hat[d]]
                                for d in ('remove', 'add')}
  return {'devices': len(jax.devices()), 'runs': runs}


_DEVICE_SCRIPT = '''
import json, sys
sys.path[:0] = sys.argv[1:3]
import test_estimator
print(json.dumps(test_estimator.device_runs((2,))))
'''


@pytest.mark.multiprocess
@pytest.mark.slow
def test_bitwise_identical_on_one_and_four_devices():
  """This process's device (one, in the suite; the reference) against 4 in a subprocess (2 if
  this process has 4). Two blocks per device per call on both sides: the subprocess's calls
  hold 8 blocks (two calls, the second partial) where this process's hold 2 (five calls), so
  the blocks are chunked differently too (other call sizes on one device:
  test_bitwise_identical_whatever_the_blocks_per_call; on several devices, every kernel
  family: test_kernel_contract.py). One call size and the plain mechanism in the subprocess:
  its compiles for 4 devices are the cost of this test. The reduction is the same stream
  driver for every family; truncated b-min-sep's samples keep their bits on several devices in
  test_kernel_contract.py, and its δ̂ and calibration across processes on 4 devices in
  test_distributed.py."""
  from devices import run_on_devices
  here = pathlib.Path(__file__).resolve().parent
  local = device_runs((2,))
  count = 2 if local['devices'] == 4 else 4
  remote = run_on_devices(_DEVICE_SCRIPT, count, str(here.parent), str(here))
  assert remote['devices'] == count != local['devices']
  assert remote['runs']['plain2'] == local['runs']['plain2']
