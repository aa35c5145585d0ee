"""Multi-device / multi-process scaling and checkpoint overhead of the Monte Carlo stream.

Prints samples/s of ``estimate_delta`` at the production shape (Dong & Ganesh (2026) §7.4: warm
b-min-sep, n = 7200, b = 256, 256 square-root bands, untruncated, float64) with

  * 1, 2 and 4 forced host devices in one process (``XLA_FLAGS``), and
  * 2 processes × 2 devices under ``jax.distributed`` on localhost (gloo collectives),

each the median of ``--repeats`` runs after a compiling run, with the scaling efficiency
rate / (devices × rate on 1 device); and the overhead of ``checkpoint=`` with a save every
``--interval`` seconds (goal ≤ 2 %: a save is one small JSON write per interval), from plain
and checkpointed runs interleaved in one process (separate processes differ by more than 2 %).

Each configuration runs in its own subprocess (this file with ``--worker``), since the device
count is fixed when JAX starts. On a 2-core CPU machine, 4 devices share 2 cores: the forced
devices measure the sharding machinery's overhead, not a speed-up (a GPU/TPU host has one
device per accelerator). Usage:

  python benchmarks/scaling.py [--samples 4096] [--repeats 3] [--interval 10]
"""

from __future__ import annotations

import argparse
import json
import os
import pathlib
import socket
import statistics
import subprocess
import sys
import tempfile
import time

HERE = pathlib.Path(__file__).resolve()


def worker(args) -> None:
  import jax
  if args.processes > 1:
    jax.distributed.initialize(coordinator_address=args.coordinator,
                               num_processes=args.processes, process_id=args.process_id)
  import jaxacct
  from jaxacct import square_root_coefficients
  scheme = jaxacct.BMinSep(sampling_prob=0.03, iterations=7200, min_sep=256, warm_start=True)
  mechanism = jaxacct.MatrixMechanism(
      scheme, jaxacct.BandedToeplitz(square_root_coefficients(256)), 0.47)
  def timed(repeat, checkpointed):
    with tempfile.TemporaryDirectory() as folder:
      run = (jaxacct.RunOptions(checkpoint=folder, checkpoint_interval=args.interval)
             if checkpointed else None)
      start = time.perf_counter()
      jaxacct.estimate_delta(jax.random.key(repeat), mechanism, [8.0, 10.0, 12.0],
                             args.samples, run=run)
      return time.perf_counter() - start

  # With --checkpoint, plain and checkpointed runs alternate in the same process (order
  # swapped every repetition), so the overhead is not confused with process-to-process drift.
  seconds = {False: [], True: []}
  for repeat in range(args.repeats + 1):  # the first repetition compiles
    order = (False, True) if repeat % 2 == 0 else (True, False)
    for checkpointed in order if args.checkpoint else (False,):
      seconds[checkpointed].append(timed(repeat, checkpointed))
  if jax.process_index() == 0:
    print(json.dumps({'devices': jax.device_count(), 'seconds': seconds[False][1:],
                      'checkpointed': seconds[True][1:]}))
  if args.processes > 1:
    jax.distributed.shutdown()


def _spawn(extra, devices, processes=1):
  env = dict(os.environ, XLA_FLAGS=f'--xla_force_host_platform_device_count={devices}')
  port = None
  if processes > 1:
    with socket.socket() as probe:
      probe.bind(('localhost', 0))
      port = probe.getsockname()[1]
  runs = [subprocess.Popen(
      [sys.executable, str(HERE), '--worker', '--processes', str(processes), '--process-id',
       str(i), '--coordinator', f'localhost:{port}', *extra], env=env,
      stdout=subprocess.PIPE, stderr=subprocess.DEVNULL, text=True) for i in range(processes)]
  outputs = [run.communicate()[0] for run in runs]
  line = [l for l in outputs[0].splitlines() if l.startswith('{')][-1]
  return json.loads(line)


def main() -> None:
  parser = argparse.ArgumentParser(description=__doc__.split('\n')[0])
  parser.add_argument('--samples', type=int, default=4096, help='samples per direction')
  parser.add_argument('--repeats', type=int, default=3)
  parser.add_argument('--interval', type=float, default=10.0, help='checkpoint interval (s)')
  parser.add_argument('--worker', action='store_true', help=argparse.SUPPRESS)
  parser.add_argument('--processes', type=int, default=1, help=argparse.SUPPRESS)
  parser.add_argument('--process-id', type=int, default=0, help=argparse.SUPPRESS)
  parser.add_argument('--coordinator', default='', help=argparse.SUPPRESS)
  parser.add_argument('--checkpoint', action='store_true', help=argparse.SUPPRESS)
  args = parser.parse_args()
  if args.worker:
    worker(args)
    return
  common = ['--samples', str(args.samples), '--repeats', str(args.repeats), '--interval',
            str(args.interval)]
  total = 2 * args.samples  # both directions
  print(f'production shape n=7200 b=256 (256 bands), float64, {args.samples} samples per '
        f'direction, median of {args.repeats}; machine: {os.cpu_count()} cores')
  print(f'{"configuration":<34} {"samples/s":>10} {"efficiency":>11}')
  base_rate = None
  for label, devices, processes, extra in (
      ('1 process × 1 device', 1, 1, []), ('1 process × 2 devices', 2, 1, []),
      ('1 process × 4 devices', 4, 1, []), ('2 processes × 2 devices', 2, 2, []),
      (f'1 device, checkpoint every {args.interval:g} s', 1, 1, ['--checkpoint'])):
    result = _spawn(common + extra, devices, processes)
    rate = total / statistics.median(result['seconds'])
    base_rate = rate if base_rate is None else base_rate
    if extra:
      overhead = statistics.median(result['checkpointed']) / statistics.median(result['seconds'])
      print(f'{label:<34} {total / statistics.median(result["checkpointed"]):>10,.0f} '
            f'{"overhead":>11} {overhead - 1:+.1%} (vs plain runs interleaved in its process)')
    else:
      efficiency = rate / (result['devices'] * base_rate)
      print(f'{label:<34} {rate:>10,.0f} {efficiency:>11.2f}')


if __name__ == '__main__':
  main()
