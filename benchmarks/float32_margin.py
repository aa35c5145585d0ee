"""What the 32-bit program's certified margin costs: error, margin, σ penalty.

For each configuration, on the same draws in both precisions (same key, same words):

* the float32 loss error max |L̂₃₂ − L₆₄| and the certified margin η (median, max), and the
  power ratio max η / max |ΔL| (how far the worst-case bound is above the observed worst error);
* the σ penalty: the σ at which δ̂(ε) crosses the threshold δ_b, interpolated on a fine σ grid
  (log δ̂ linear in log σ between grid points) from a shared-draws sweep in float64 and in
  float32 (terms at ε − η, sums rounded up), as (σ₃₂ / σ₆₄ − 1). Same draws, so the
  difference is the margin's, not Monte Carlo noise.

Usage: python benchmarks/float32_margin.py [--skip-production] [--only NAME]
"""

from __future__ import annotations

import argparse
import dataclasses
import time

import jax
import numpy as np

import jaxacct
from jaxacct import BandedToeplitz, square_root_coefficients
from jaxacct.montecarlo.engine import kernels, keys, program32, sampling, sharding
from jaxacct.montecarlo.evr import candidates


def _configs(production: bool):
  def band(bands):  # the square-root band normalised to ‖c‖₂ = 1, as the configs do
    c = np.asarray(square_root_coefficients(bands), np.float64)
    return BandedToeplitz(c / np.linalg.norm(c))
  rows = [
      # configs/quickstart.yaml: n = 128, b = 8, 4 bands, p = 64/2048, warm start.
      ('quickstart', jaxacct.MatrixMechanism(jaxacct.BMinSep(
          sampling_prob=64 / 2048, iterations=128, min_sep=8, warm_start=True), band(4), 1.5),
       2.0, 5e-4, 200_000),
      ('b-min-sep warm n=1000 b=16', jaxacct.MatrixMechanism(jaxacct.BMinSep(
          sampling_prob=0.05, iterations=1000, min_sep=16, warm_start=True), band(16), 2.0),
       2.0, 1e-3, 50_000),
      ('poisson n=1000', jaxacct.MatrixMechanism(jaxacct.Poisson(
          sampling_prob=0.05, iterations=1000), band(1), 2.0), 2.0, 1e-3, 50_000),
      ('cyclic Poisson n=1000 T=16', jaxacct.MatrixMechanism(jaxacct.CyclicPoisson(
          sampling_prob=0.5, iterations=1000, cycle_length=16), band(16), 2.0), 2.0, 1e-3, 50_000),
      ('balls-in-bins n=1000 T=16', jaxacct.MatrixMechanism(jaxacct.BallsInBins(
          iterations=1000, cycle_length=16), band(16), 6.0), 2.0, 1e-3, 50_000),
      ('LowerTriangular warm n=256 b=16', jaxacct.MatrixMechanism(jaxacct.BMinSep(
          sampling_prob=0.05, iterations=256, min_sep=16, warm_start=True),
          jaxacct.LowerTriangular(band(16).materialize(256)), 2.0), 2.0, 1e-3, 50_000),
      ('multi-attribution k=4 b=16', jaxacct.MatrixMechanism(jaxacct.MultiAttributionBMinSep(
          sampling_prob=0.01, iterations=1000, min_sep=16, max_examples_per_user=4), band(16),
          2.0), 2.0, 1e-3, 50_000),
  ]
  if production:
    rows.append(('production n=7200 b=256 warm', jaxacct.MatrixMechanism(jaxacct.BMinSep(
        sampling_prob=0.03, iterations=7200, min_sep=256, warm_start=True), band(256), 2.0),
                 2.0, 1e-2, 4_096))
  return rows


def error_and_margin(mechanism, num_samples: int) -> tuple[float, float, float]:
  """(max |L̂₃₂ − L₆₄|, median η, max η) over both directions, same draws."""
  kernel = kernels.kernel_for(mechanism, np.dtype(np.float32))
  block = sampling.default_block_size(mechanism.iterations)
  blocks = -(-num_samples // block)
  program = program32.Program32(mechanism, kernel, np.asarray([mechanism.noise_multiplier]),
                                block, sharding.SampleMesh.over(jax.local_devices()))
  errors, margins = [], []
  for direction in ('remove', 'add'):
    stream = keys.direction_key(keys.purpose_key(jax.random.key(1), 'sampling'), direction)
    _, losses, eta = program.losses_and_margins(stream, 0, blocks, direction)
    exact = np.asarray(sampling.sample_privacy_losses(jax.random.key(1), mechanism,
                                                      blocks * block, direction))
    errors.append(np.abs(np.asarray(losses, np.float64)[:, 0].ravel() - exact))
    margins.append(np.asarray(eta, np.float64)[:, 0].ravel())
  errors, margins = np.concatenate(errors), np.concatenate(margins)
  return float(errors.max()), float(np.median(margins)), float(margins.max())


def crossing(sigmas: np.ndarray, deltas: np.ndarray, threshold: float) -> float:
  """σ where δ̂(σ) falls through ``threshold`` (log–log interpolation between grid points)."""
  above = np.nonzero(deltas > threshold)[0]
  if above.size == 0 or above[-1] + 1 >= sigmas.size:
    return float('nan')
  i = above[-1]
  a, b = np.log(deltas[i]), np.log(max(deltas[i + 1], 1e-300))
  t = (a - np.log(threshold)) / (a - b)
  return float(np.exp(np.log(sigmas[i]) + t * (np.log(sigmas[i + 1]) - np.log(sigmas[i]))))


def sigma_penalty(mechanism, epsilon: float, threshold: float, num_samples: int) -> dict:
  """σ₃₂/σ₆₄ − 1 at δ̂(ε) = threshold, on a 0.2 % σ grid around the coarse crossing."""
  coarse = mechanism.noise_multiplier * 1.1 ** np.arange(-12, 12)
  # The same key (draws) as the fine sweeps below, so the crossing lies inside their grid.
  sweep = candidates.estimate_delta_for_sigmas(jax.random.key(3), mechanism, coarse, [epsilon],
                                               num_samples)
  centre = crossing(coarse, sweep.delta_hat_max[:, 0], threshold)
  if not np.isfinite(centre):
    return {'sigma64': float('nan'), 'sigma32': float('nan'), 'penalty': float('nan')}
  fine = centre * 1.002 ** np.arange(-24, 24)
  found = {}
  for precision in ('float64', 'float32'):
    run = candidates.estimate_delta_for_sigmas(jax.random.key(3), mechanism, fine, [epsilon],
                                               num_samples,
                                               monte_carlo=jaxacct.MonteCarloOptions(
                                                   precision=precision))
    found[precision] = crossing(fine, run.delta_hat_max[:, 0], threshold)
  return {'sigma64': found['float64'], 'sigma32': found['float32'],
          'penalty': found['float32'] / found['float64'] - 1.0}


def main() -> None:
  parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
  parser.add_argument('--skip-production', action='store_true')
  parser.add_argument('--only', default='', help='run the configs whose name contains this')
  args = parser.parse_args()
  started = time.perf_counter()
  print(f'{"config":30s} {"max|ΔL|":>10s} {"η median":>10s} {"η max":>10s} {"η/|ΔL|":>7s} '
        f'{"σ64":>9s} {"σ32":>9s} {"penalty":>8s}')
  for name, mechanism, epsilon, threshold, samples in _configs(not args.skip_production):
    if args.only not in name:
      continue
    error, median, largest = error_and_margin(dataclasses.replace(mechanism), min(samples, 65536))
    found = sigma_penalty(mechanism, epsilon, threshold, samples)
    print(f'{name:30s} {error:10.2e} {median:10.2e} {largest:10.2e} {largest / error:7.0f} '
          f'{found["sigma64"]:9.5f} {found["sigma32"]:9.5f} {found["penalty"]:8.3%}  '
          f'(ε = {epsilon}, δ_b = {threshold:g}, N = {samples:,})', flush=True)
  print(f'done in {time.perf_counter() - started:.0f} s')


if __name__ == '__main__':
  main()
