"""One process of a jax.distributed run on localhost (spawned by test_distributed.py).

Usage: python distributed_worker.py COORDINATOR NUM_PROCESSES PROCESS_ID
(NUM_PROCESSES = 1: no jax.distributed at all, the single-process reference). Process 0 prints
one JSON line with the bit patterns of estimates and σ sweeps in both precisions and of a small
calibration of truncated b-min-sep; every process checks it computed the same bits.
"""

import json
import sys

import jax

from jaxacct.montecarlo.engine import watchdog  # host code only: no JAX computation on import

coordinator, num_processes, process_id = sys.argv[1], int(sys.argv[2]), int(sys.argv[3])
if num_processes > 1:
  # The peer watchdog as a library user starts it (issue 42 item 7): the whole run below and
  # its end (stop, then shutdown) must pass without a false alarm.
  jax.distributed.initialize(coordinator_address=coordinator, num_processes=num_processes,
                             process_id=process_id, initialization_timeout=120,
                             heartbeat_timeout_seconds=watchdog.runtime_heartbeat_seconds(60.0))
  watchdog.start(timeout=60.0)

import numpy as np  # noqa: E402  (after initialize, as jax.distributed requires)

import jaxacct  # noqa: E402
from jaxacct.montecarlo.engine import sharding
from jaxacct.montecarlo.evr import candidates  # noqa: E402


def hexes(values):
  return [float(v).hex() for v in np.asarray(values, np.float64).ravel()]


band = jaxacct.BandedToeplitz([1.0, 0.5, 0.25])
warm = jaxacct.BMinSep(sampling_prob=0.3, iterations=24, min_sep=4, warm_start=True)
truncated = jaxacct.BMinSep(sampling_prob=0.3, iterations=16, min_sep=3, truncated_batch_size=4,
                            dataset_size=12)
estimate = jaxacct.estimate_delta(jax.random.key(5), jaxacct.MatrixMechanism(warm, band, 1.1),
                                  [0.5, 1.0, 2.0], 20_000,
                                  run=jaxacct.RunOptions(blocks_per_call=2))
# The 32-bit program (issue 28) under the same rule.
estimate32 = jaxacct.estimate_delta(jax.random.key(5), jaxacct.MatrixMechanism(warm, band, 1.1),
                                    [0.5, 1.0, 2.0], 20_000,
                                    monte_carlo=jaxacct.MonteCarloOptions(precision='float32'),
                                    run=jaxacct.RunOptions(blocks_per_call=2))
result = {'devices': jax.device_count(),
          'estimate': {d: hexes(estimate.delta_hat[d]) for d in ('remove', 'add')},
          'estimate32': {d: hexes(estimate32.delta_hat[d]) for d in ('remove', 'add')}}
# The K-σ program of the float32 verification (shared draws), with its margins.
for precision in ('float64', 'float32'):  # shared draws of K σ, as verification runs them
  sweep = candidates.sweep_sigmas(jax.random.key(13), jaxacct.MatrixMechanism(warm, band, 1.1),
                                  [0.9, 1.2, 1.6], [1.0, 2.0], 6000, purpose='verification',
                                  precision=precision,
                                  run=jaxacct.RunOptions(blocks_per_call=2))
  result['sweep' + precision[-2:]] = {
      d: hexes(sweep.delta_hat[d]) + ([] if sweep.sums.margins is None
                                      else hexes(sweep.sums.margins[d]))
      for d in ('remove', 'add')}
# One whole calibration (sweeps, ledger, verification, fallback) per process layout: the
# truncated scheme, whose binomial batch sizes are the most intricate draws. 16 candidates: the
# verification's K σ program is then the estimation sweeps' (16 σ, calibration._SWEEP), one
# program fewer to compile in each process (its 2,615 samples per direction are cheap).
for name, scheme, matrix in (('truncated', truncated, jaxacct.BandedToeplitz([1.0, 0.4])),):
  calibration = jaxacct.calibrate_noise_multiplier(scheme, matrix, epsilon=2.0, delta=2e-2,
                                                   key=jax.random.key(13),
                                                   monte_carlo=jaxacct.MonteCarloOptions(
                                                       num_candidates=16),
                                                   run=jaxacct.RunOptions(blocks_per_call=2))
  result[name] = {'sigma': hexes([calibration.guarantee.noise_multiplier]),
                  'candidates': hexes(calibration.candidates),
                  'delta_hat': json.dumps(calibration.record.to_dict()['verification'])}
agreed = sharding.broadcast_json(result)
assert agreed == result, f'process {process_id} computed other bits than process 0'
if process_id == 0:
  print(json.dumps(result))
if num_processes > 1:
  watchdog.stop()  # marks this process done and waits for the other, then the barrier
  jax.distributed.shutdown()
