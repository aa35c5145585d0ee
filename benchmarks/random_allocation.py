"""Sampling-free accounting of fixed-bin balls-in-bins (Schuchardt & Kalinin (2026)) against
Monte Carlo.

For each setting of Schuchardt & Kalinin (2026) Figures 2–3 (δ = 1e-5; DP-SGD, BSR and BISR),
prints

  * the time of one ε(δ) at ``--sigma`` and of a σ calibration at ε = ``--epsilon`` for each
    deterministic accountant: ``renyi`` (with the order α, bandwidth p and τ that gave ε) and
    ``conditional_composition`` (δ_E = δ/2 as in Schuchardt & Kalinin (2026) App. B.2; its
    calibration only for N ≤ 100 unless ``--full``: each σ composes N step pairs per direction);
  * with ``--mc``, jaxacct's verified Monte Carlo calibration of the same mechanism at the same
    (ε, δ): its verification samples per direction, time and σ.

Usage:

  python benchmarks/random_allocation.py [--sigma 1.0] [--epsilon 2.0] [--mc] [--full]
                                         [--only NAME]
"""

from __future__ import annotations

import argparse
import time

import jax

import jaxacct
from jaxacct.deterministic import base
from jaxacct import square_root_coefficients

DELTA = 1e-5


def settings() -> dict:
  """name → (scheme, strategy) at the Figure 2–3 settings of Schuchardt & Kalinin (2026) (N
  iterations, k epochs)."""
  def balls(n, k):
    return jaxacct.BallsInBins(iterations=n, cycle_length=n // k)
  return {
      'DP-SGD N=100 k=1': (balls(100, 1), jaxacct.BandedToeplitz([1.0])),
      'DP-SGD N=1000 k=1': (balls(1000, 1), jaxacct.BandedToeplitz([1.0])),
      'DP-SGD N=1000 k=10': (balls(1000, 10), jaxacct.BandedToeplitz([1.0])),
      'BSR N=100 k=1 p=4': (balls(100, 1), jaxacct.BandedToeplitz(square_root_coefficients(4))),
      'BSR N=100 k=1 p=64': (balls(100, 1),
                             jaxacct.BandedToeplitz(square_root_coefficients(64))),
      'BSR N=1000 k=10 p=4': (balls(1000, 10),
                              jaxacct.BandedToeplitz(square_root_coefficients(4))),
      'BISR N=100 k=1 p=4': (balls(100, 1), jaxacct.banded_inverse_square_root(100, 4)),
      'BISR N=1000 k=10 p=4': (balls(1000, 10), jaxacct.banded_inverse_square_root(1000, 4)),
  }


def timed(function):
  start = time.perf_counter()
  value = function()
  return value, time.perf_counter() - start


def main() -> None:
  parser = argparse.ArgumentParser(description=__doc__.split('\n')[0])
  parser.add_argument('--sigma', type=float, default=1.0)
  parser.add_argument('--epsilon', type=float, default=2.0)
  parser.add_argument('--mc', action='store_true', help='also calibrate by verified Monte Carlo')
  parser.add_argument('--full', action='store_true',
                      help='calibrate by conditional composition at every N (slow)')
  parser.add_argument('--only', help='run the settings whose name contains this')
  args = parser.parse_args()
  print(f'δ = {DELTA:g}; ε(δ) at σ = {args.sigma:g}; σ calibrated at ε = {args.epsilon:g}; '
        f'{jax.device_count()} {jax.default_backend()} device(s)')
  print(f'{"setting":<22} {"accountant":<13} {"ε(δ)":>9} {"s":>7}  {"remove: α, p, τ":<22}'
        f'{"σ(ε)":>9} {"s":>7}  samples')
  for name, (scheme, matrix) in settings().items():
    if args.only and args.only not in name:
      continue
    mechanism = jaxacct.MatrixMechanism(scheme, matrix, args.sigma)
    for accountant, options in (('renyi', {}),
                                ('conditional_composition', {'bad_event_delta': DELTA / 2})):
      curve, seconds = timed(lambda: base.get(accountant).privacy_curve(mechanism, **options))
      epsilon, more = timed(lambda: curve.epsilon_for_delta(DELTA))
      why = curve.explain(DELTA).get('remove')
      detail = (f'{why["alpha"]:>3}, {why["bandwidth"]:>3}, {why["tau"]:9.3g}' if why
                else f'{"":22}')
      label = 'cond. comp.' if accountant == 'conditional_composition' else accountant
      if accountant == 'renyi' or args.full or scheme.iterations <= 100:
        sigma, calibration_seconds = timed(lambda: base.get(accountant).sigma(
            scheme, matrix, epsilon=args.epsilon, delta=DELTA, **options))
        calibrated = f'{sigma:9.4f} {calibration_seconds:7.1f}'
      else:
        calibrated = f'{"(--full)":>17}'
      print(f'{name:<22} {label:<13} {epsilon:9.4f} {seconds + more:7.2f}  {detail}    '
            f'{calibrated}', flush=True)
    if args.mc:
      result, seconds = timed(lambda: jaxacct.calibrate_noise_multiplier(
          scheme, matrix, epsilon=args.epsilon, delta=DELTA, key=jax.random.key(0)))
      print(f'{name:<22} {"monte_carlo":<13} {"":>9} {"":>7}  {"(verified, EVR)":<22}'
            f'{result.mechanism.noise_multiplier:9.4f} {seconds:7.1f}  '
            f'{result.guarantee.num_samples:,}', flush=True)


if __name__ == '__main__':
  main()
