"""MMCC (Choquette-Choo et al. (2023)) for Poisson BandMF: wall time of ε(δ) and of a σ
calibration.

For n ∈ {128, 512, 2048} and two matrices — BSR with 16 bands (banded Toeplitz: rows from
31 on share one PLD) and BISR with 4 inverse bands (C dense, every row distinct) — prints the
seconds of one ε(δ) at ``--sigma`` (max over directions, δ₁ = δ/2) and of a σ calibration at
ε = ``--epsilon`` (dense C only for n ≤ 512 unless ``--full``), with MMCC's own diagnostics
(distinct rows, tail bounds, max p̃/p). With ``--mc``, also jaxacct's Monte Carlo estimate of
the same mechanism (dense ``LowerTriangular``: Dong & Ganesh (2026) App. B, r = 1) at n = 128:
its ε̂ at δ = 1e-5 from ``--samples`` samples per direction, against MMCC's at the same δ.

Goals: n = 2048 with 16 bands under 2 minutes, a dense C of n = 512 under 5 minutes
(Choquette-Choo et al. (2023) Sec. 7: n ≈ 2000 "still took several hours").

Usage:

  python benchmarks/mmcc.py [--sigma 8] [--epsilon 2] [--sampling-prob 0.015625] [--mc]
                            [--full] [--only NAME]
"""

from __future__ import annotations

import argparse
import time

import jax
import numpy as np

import jaxacct
from jaxacct.deterministic import base
from jaxacct import square_root_coefficients

DELTA = 1e-6
MC_DELTA = 1e-5


def settings(full: bool) -> dict:
  """name → (n, strategy, calibrate?)."""
  table = {}
  for n in (128, 512, 2048):
    table[f'BSR 16 bands n={n}'] = (n, jaxacct.BandedToeplitz(square_root_coefficients(16)),
                                    True)
    table[f'BISR dense n={n}'] = (n, jaxacct.banded_inverse_square_root(n, 4), full or n <= 512)
  return table


def timed(function):
  start = time.perf_counter()
  value = function()
  return value, time.perf_counter() - start


def monte_carlo_epsilon(mechanism, reference: float, samples: int) -> tuple[float, float, float]:
  """ε̂ (max over directions) where δ̂ crosses MC_DELTA, and where δ̂ ∓ 2 s.e. does, on a grid."""
  grid = np.geomspace(reference / 20, reference * 1.5, 100)
  estimate = jaxacct.estimate_delta(jax.random.key(0), mechanism, list(grid), samples)
  found = []
  for shift in (0.0, -2.0, 2.0):
    crossings = []
    for d in ('remove', 'add'):
      deltas = (np.asarray(estimate.delta_hat[d])
                + shift * np.asarray(estimate.standard_error[d]))
      below = np.flatnonzero(deltas <= MC_DELTA)
      crossings.append(grid[below[0]] if below.size else np.inf)
    found.append(max(crossings))
  return tuple(found)


def main() -> None:
  parser = argparse.ArgumentParser(description=__doc__.split('\n')[0])
  parser.add_argument('--sigma', type=float, default=8.0)
  parser.add_argument('--epsilon', type=float, default=2.0)
  parser.add_argument('--sampling-prob', type=float, default=1 / 64)
  parser.add_argument('--mc', action='store_true', help='also estimate by Monte Carlo at n = 128')
  parser.add_argument('--samples', type=int, default=400_000)
  parser.add_argument('--full', action='store_true', help='calibrate dense C at n = 2048 too')
  parser.add_argument('--only', help='run the settings whose name contains this')
  args = parser.parse_args()
  accountant = base.get('mmcc')
  print(f'δ = {DELTA:g} (δ₁ = δ₂ = δ/2); p = {args.sampling_prob:g}; ε(δ) at σ = {args.sigma:g}; '
        f'σ calibrated at ε = {args.epsilon:g}; {jax.device_count()} {jax.default_backend()} '
        'device(s)')
  print(f'{"setting":<22} {"ε(δ)":>9} {"s":>7} {"rows":>5} {"bounds":>8} {"max p̃/p":>9}'
        f'{"σ(ε)":>9} {"s":>8}')
  for name, (n, matrix, calibrate) in settings(args.full).items():
    if args.only and args.only not in name:
      continue
    scheme = jaxacct.Poisson(sampling_prob=args.sampling_prob, iterations=n)
    mechanism = jaxacct.MatrixMechanism(scheme, matrix, args.sigma)
    curve = accountant.privacy_curve(mechanism)
    epsilon, seconds = timed(lambda: curve.epsilon_for_delta(DELTA))
    why = curve.explain(DELTA)
    line = (f'{name:<22} {epsilon:9.4f} {seconds:7.1f} {why["distinct_rows"]:>5} '
            f'{why["tail_bounds"]:>8} {why["max_amplification_ratio"]:9.3f}')
    if calibrate:
      sigma, more = timed(lambda: accountant.sigma(scheme, matrix, epsilon=args.epsilon,
                                                   delta=DELTA, tolerance=1e-3))
      line += f'{sigma:9.4f} {more:8.1f}'
    print(line, flush=True)
    if args.mc and n == 128:
      dense = jaxacct.LowerTriangular(np.asarray(matrix.materialize(n)))
      reference = curve.epsilon_for_delta(MC_DELTA)
      (estimate, low, high), seconds = timed(lambda: monte_carlo_epsilon(
          jaxacct.MatrixMechanism(scheme, dense, args.sigma), reference, args.samples))
      print(f'{"":<22} at δ = {MC_DELTA:g}: MMCC {reference:.4f}; Monte Carlo (App. B, r = 1) '
            f'{estimate:.4f} [{low:.4f}, {high:.4f}] ±2 s.e., {args.samples} samples/direction, '
            f'{seconds:.0f} s', flush=True)


if __name__ == '__main__':
  main()
