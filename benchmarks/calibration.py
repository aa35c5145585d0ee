"""Calibration benchmark: end-to-end σ calibration and the cost of many σ candidates.

Prints
1. wall time of ``jaxacct calibrate`` on configs/quickstart.yaml (δ = 1e-3) and on the same
   mechanism at δ = 1e-5 (``--skip-1e-5`` to leave the ~minutes-long one out);
2. the cost of evaluating 16 σ candidates vs one candidate, with shared draws (common random
   numbers: one draw and one pass of sliding dot products, only the recursion per σ) and with
   independent keys, at n = 1000, b = 16 (16 square-root bands) and at the production shape
   (n = 7200, b = 256, 256 bands);
3. where jax-privacy 2.0.0 is installed, its cost for the same 16-candidate sweep (one run per σ,
   as its example does) against jaxacct's, in the same run.

Timing: jit first (compile excluded), block until ready, minimum of ``--repeats``.
Run from the repository root: ``python benchmarks/calibration.py [--quick]``.
"""

from __future__ import annotations

import argparse
import pathlib
import sys
import time

import jax
import numpy as np

ROOT = pathlib.Path(__file__).resolve().parents[1]
sys.path.insert(0, str(ROOT))

import jaxacct  # noqa: E402
from jaxacct import config as config_lib  # noqa: E402
from jaxacct import square_root_coefficients  # noqa: E402
from jaxacct.montecarlo.evr import candidates  # noqa: E402


def _best(fn, repeats):
  fn()  # compile / warm up
  times = []
  for _ in range(repeats):
    start = time.perf_counter()
    fn()
    times.append(time.perf_counter() - start)
  return min(times)


def _calibration_wall_time(delta):
  raw = config_lib.load(ROOT / 'configs' / 'quickstart.yaml', [f'calibration.delta={delta}'])
  scheme = config_lib.scheme_from(raw)
  matrix = config_lib.matrix_from(raw, scheme.iterations)
  start = time.perf_counter()
  result = jaxacct.calibrate_noise_multiplier(scheme, matrix, epsilon=raw['calibration']['epsilon'],
                                              delta=delta, key=jax.random.key(0))
  return time.perf_counter() - start, result


def _mechanisms():
  c16 = square_root_coefficients(16)
  c256 = square_root_coefficients(256)
  return {
      'n=1000 b=16 warm': (jaxacct.MatrixMechanism(
          jaxacct.BMinSep(sampling_prob=0.5, iterations=1000, min_sep=16),
          jaxacct.BandedToeplitz(c16 / np.linalg.norm(c16)), 1.0), 4096),
      'production n=7200 b=256': (jaxacct.MatrixMechanism(
          jaxacct.BMinSep(sampling_prob=0.03, iterations=7200, min_sep=256),
          jaxacct.BandedToeplitz(c256 / np.linalg.norm(c256)), 1.0), 512),
  }


def _jax_privacy_sweep(mechanism, sigmas, num_samples):
  try:
    from jax_privacy import batch_selection
    from jax_privacy.experimental.monte_carlo import sample_generation
  except ImportError:
    return None
  scheme = mechanism.scheme
  strategy = batch_selection.BMinSepSampling(
      sampling_prob=scheme.sampling_prob, iterations=scheme.iterations, min_sep=scheme.min_sep,
      warm_start=scheme.warm_start)
  c_col = np.asarray(mechanism.matrix.c_col)

  def run():
    for sigma in sigmas:
      for positive in (True, False):
        sample_generation.get_privacy_loss_sample(strategy, sigma, c_col, seed=0,
                                                  positive_sample=positive,
                                                  num_samples=num_samples)
  return run


def main():
  parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
  parser.add_argument('--quick', action='store_true', help='smaller sample counts')
  parser.add_argument('--skip-1e-5', action='store_true', help='skip the δ = 1e-5 calibration')
  parser.add_argument('--repeats', type=int, default=3)
  args = parser.parse_args()
  print(f'jax {jax.__version__}, devices {jax.devices()}')

  print('\n1. End-to-end calibration (quickstart mechanism: n = 128, b = 8, 4 bands, ε = 2)')
  deltas = [1e-3] if args.skip_1e_5 else [1e-3, 1e-5]
  for delta in deltas:
    seconds, result = _calibration_wall_time(delta)
    g = result.guarantee
    print(f'  δ = {delta:g}: {seconds:7.1f} s  σ = {g.noise_multiplier:.5f} ({g.method}), '
          f'N = {g.num_samples:,} per direction and candidate, {len(result.candidates)} candidates')

  print('\n2. 16 σ candidates vs one (both directions; µs per sample and direction)')
  print(f'  {"config":26s} {"1 σ":>10s} {"16 σ shared":>12s} {"ratio":>6s} {"16 σ indep.":>12s} '
        f'{"ratio":>6s} {"jax-privacy 16 σ":>17s} {"jp/jaxacct":>10s}')
  for name, (mechanism, num) in _mechanisms().items():
    if args.quick:
      num //= 4
    sigmas16 = list(mechanism.noise_multiplier * 1.01 ** np.arange(16))
    key = jax.random.key(0)

    def sweep(sigmas, shared):
      result = candidates.estimate_delta_for_sigmas(key, mechanism, sigmas, [1.0], num,
                                                    monte_carlo=jaxacct.MonteCarloOptions(
                                                        shared_draws=shared))
      return result.delta_hat['remove']

    one = _best(lambda: sweep(sigmas16[:1], True), args.repeats)
    shared = _best(lambda: sweep(sigmas16, True), args.repeats)
    independent = _best(lambda: sweep(sigmas16, False), max(1, args.repeats - 1))
    per = lambda t: t / (2 * num) * 1e6  # noqa: E731
    jp_run = _jax_privacy_sweep(mechanism, sigmas16, num if not name.startswith('prod') else 128)
    if jp_run is not None:
      jp_samples = num if not name.startswith('prod') else 128
      jp_time = _best(jp_run, 1) / (2 * jp_samples) * 1e6
      jp_cells = f'{jp_time:15.1f}µs {jp_time / per(shared):10.1f}'
    else:
      jp_cells = f'{"(not installed)":>17s} {"":>10s}'
    print(f'  {name:26s} {per(one):8.1f}µs {per(shared):10.1f}µs {shared / one:6.2f} '
          f'{per(independent):10.1f}µs {independent / one:6.2f} {jp_cells}')


if __name__ == '__main__':
  main()
