"""The ``jaxacct`` command (host code).

``jaxacct estimate CONFIG [--json]``: Monte Carlo δ̂(ε) of both directions of
the mechanism a YAML config describes (schema in ``jaxacct.config``), with
standard errors. δ̂(ε) = mean of (1 − e^{ε − L})₊ (spec 000 §4.6), computed
as −expm1(min(ε − L, 0)) and accumulated in float64 chunk by chunk.
"""

from __future__ import annotations

import argparse
import json
import sys
import time

import jax
import numpy as np

from jaxacct import config as config_lib
from jaxacct.mechanism import DIRECTIONS
from jaxacct.montecarlo.sampling import sample_privacy_losses

_CHUNK = 1 << 16


def _estimate(raw: dict) -> dict:
  mechanism = config_lib.mechanism_from(raw)
  mc = raw['monte_carlo']
  num_samples = int(mc.get('num_samples', 100_000))
  seed = int(mc.get('seed', 0))
  epsilons = np.asarray(mc.get('epsilons', [1.0]), dtype=np.float64)
  if epsilons.ndim != 1 or epsilons.size == 0 or not np.all(np.isfinite(epsilons)):
    raise config_lib.ConfigError(f'monte_carlo.epsilons must be a non-empty list of finite '
                                 f'numbers, got {mc.get("epsilons")!r}')
  dtype = {'float64': np.float64, 'float32': np.float32}.get(mc.get('dtype', 'float64'))
  if dtype is None:
    raise config_lib.ConfigError(f'monte_carlo.dtype must be float64 or float32, got {mc["dtype"]!r}')
  key = jax.random.key(seed)
  result = {'noise_multiplier': mechanism.noise_multiplier, 'num_samples': num_samples,
            'seed': seed, 'epsilons': epsilons.tolist(), 'delta_hat': {}, 'standard_error': {}}
  started = time.perf_counter()
  for direction in DIRECTIONS:
    # One draw of num_samples; evaluated in slices so memory stays bounded.
    sums = np.zeros_like(epsilons)
    squares = np.zeros_like(epsilons)
    losses = np.asarray(sample_privacy_losses(key, mechanism, num_samples, direction, dtype=dtype))
    for start in range(0, num_samples, _CHUNK):
      chunk = losses[start:start + _CHUNK]
      terms = -np.expm1(np.minimum(epsilons[:, None] - chunk[None, :], 0.0))
      sums += terms.sum(axis=1)
      squares += np.square(terms).sum(axis=1)
    mean = sums / num_samples
    variance = np.maximum(squares / num_samples - mean**2, 0.0) * num_samples / max(1, num_samples - 1)
    result['delta_hat'][direction] = mean.tolist()
    result['standard_error'][direction] = np.sqrt(variance / num_samples).tolist()
  result['seconds'] = time.perf_counter() - started
  return result


def main(argv: list[str] | None = None) -> int:
  parser = argparse.ArgumentParser(prog='jaxacct', description=__doc__.splitlines()[0])
  commands = parser.add_subparsers(dest='command', required=True)
  estimate = commands.add_parser('estimate', help='Monte Carlo δ̂(ε), both directions')
  estimate.add_argument('config')
  estimate.add_argument('--json', action='store_true', help='print one JSON object')
  args = parser.parse_args(argv)
  try:
    result = _estimate(config_lib.load(args.config))
  except (ValueError, TypeError) as error:
    print(f'jaxacct: error: {error}', file=sys.stderr)
    return 2
  if args.json:
    print(json.dumps(result))
    return 0
  print(f'noise_multiplier σ = {result["noise_multiplier"]}, {result["num_samples"]:,} samples '
        f'per direction, seed {result["seed"]} ({result["seconds"]:.1f} s)')
  print(f'{"epsilon":>8}  {"delta_hat remove":>24}  {"delta_hat add":>24}')
  for i, eps in enumerate(result['epsilons']):
    cells = [f'{result["delta_hat"][d][i]:.4e} ± {result["standard_error"][d][i]:.1e}'
             for d in DIRECTIONS]
    print(f'{eps:8.3f}  {cells[0]:>24}  {cells[1]:>24}')
  return 0


if __name__ == '__main__':
  sys.exit(main())
