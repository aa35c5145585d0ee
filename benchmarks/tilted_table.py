"""Samples and seconds of a verification, plain vs tilted, per direction, for a few configs.

For each config (at its σ, the issue's (ε, δ) targets) it prints, per direction, the samples
N of a first verification at δ_b = δ/2 (Fact 4.2 arithmetic, ``evr.bounds.minimum_samples``):

* plain: terms in [0, 1], both directions;
* tilted: the remove direction's terms in [0, M(α, ε)] at the order α of the smallest M
  (``tilted.choose_order`` within the default state budget), the add direction 0 when a
  proven add bound is ≤ δ_b (``tilted.add_bound``: (A1) ε ≥ −ln Pr[x = 0], (A2) Gibbs'
  inequality, (A3) the unamplified Gaussian, a product mechanism's Rényi bound) and plain
  otherwise;

and the seconds those N would take here, from seconds per sample measured on ``--samples``
draws of each program (a second, compiled call): plain (both directions' draws) and tilted
(remove: host tuple draws + device; add: the plain program). Projections, not runs; never
timed inside tests. With ``--verify`` the tilted verification is also run (``jaxacct.verify``
of [σ, σ_up], σ_up the unamplified fallback's σ at (ε, δ_b), an in-memory ledger): its
samples per direction, whether it released σ, and its measured seconds beside the projected
ones. Usage (from the repository root):

  PYTHONPATH=. python benchmarks/tilted_table.py [--samples 4096] [--verify]

Results: benchmarks/RESULTS.md ("plain vs tilted per direction").
"""

from __future__ import annotations

import argparse
import dataclasses
import math
import pathlib
import time

import jax

import jaxacct
from jaxacct import config
from jaxacct.deterministic import base as registry
from jaxacct.deterministic import tilt_bound
from jaxacct.montecarlo.evr import bounds, tilted

ROOT = pathlib.Path(__file__).resolve().parents[1]
CASES = (  # (config, overrides, ε, δ)
    ('quickstart', [], 2.0, 1e-5),
    # Cyclic Poisson, equal split, untruncated (T = 8, 8 bands, n = 400), at σ = 1.3.
    ('truncated_cyclic_poisson', ['scheme.truncated_batch_size=null', 'noise_multiplier=1.3'],
     3.0, 1e-6),
    # Balls-in-bins, one epoch of 100 rounds, 4 bands, σ = 4 (its own target).
    ('balls_in_bins_auto', [], 1.0, 1e-5),
    ('bminsep_grid_7_1_bands16_epoch256', [], 2.0, 1e-5),
    ('bminsep_grid_7_1_bands4_epoch1024', [], 2.0, 1e-5),
    ('bminsep_production_7_4', ['scheme.truncated_batch_size=14745600'], 10.0, 1.301e-8),
)


def _per_sample(call, samples: int) -> float:
  call(samples)  # compile
  start = time.perf_counter()
  call(samples)
  return (time.perf_counter() - start) / samples


def main() -> None:
  parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
  parser.add_argument('--samples', type=int, default=4096)
  parser.add_argument('--skip-production', action='store_true')
  parser.add_argument('--verify', action='store_true',
                      help='also run each tilted verification (not the production one)')
  args = parser.parse_args()
  runs = []
  print('| config | ε, δ | α | M | −ln p₀ | add bound | plain N per dir | tilted N remove '
        '| tilted N add | plain s (both) | tilted s remove | tilted s add | gain |')
  print('|---|---|---:|---:|---:|---:|---:|---:|---:|---:|---:|---:|---:|')
  for name, overrides, epsilon, delta in CASES:
    if args.skip_production and 'production' in name:
      continue
    raw = config.load(ROOT / 'configs' / f'{name}.yaml', overrides)
    mechanism = config.mechanism_from(raw)
    choice = tilted.choose_order(mechanism, epsilon)
    support = math.exp(choice.log_bound)
    threshold = tilt_bound.add_vanishing_epsilon(mechanism)
    add = tilted.add_bound([mechanism], epsilon)
    base = delta / 2
    plain_n = bounds.minimum_samples(base, delta)
    remove_n = bounds.minimum_samples(base, delta, support=min(support, 1.0))
    add_n = 0 if add is not None and add <= base else plain_n
    grid = [epsilon]
    key = jax.random.key(0)
    plain_rate = _per_sample(lambda n: jaxacct.estimate_delta(
        key, mechanism, grid, n, run=jaxacct.RunOptions(progress=False)), args.samples)
    tilted_rate = _per_sample(lambda n: jaxacct.estimate_delta(
        key, mechanism, grid, n, run=jaxacct.RunOptions(progress=False),
        monte_carlo=jaxacct.MonteCarloOptions(proposal='tilted', tilt_order=choice.alpha)),
        args.samples)
    # Tilted remove = the tilted estimate's cost minus its plain add half.
    remove_rate = max(tilted_rate - plain_rate / 2, 0.0)
    plain_s = plain_n * plain_rate
    tilted_s = (remove_n * remove_rate, add_n * plain_rate / 2)
    print(f'| {name} | ({epsilon:g}, {delta:.3g}) | {choice.alpha} | {support:.3g} | '
          f'{"—" if threshold is None else f"{threshold:.3f}"} | '
          f'{"—" if add is None else f"{add:.3g}"} | {plain_n:,} | {remove_n:,} | {add_n:,} | '
          f'{plain_s:,.0f} | '
          f'{tilted_s[0]:,.0f} | {tilted_s[1]:,.0f} | {plain_s / sum(tilted_s):.3g}× |',
          flush=True)
    if args.verify and 'production' not in name:
      runs.append(_verified(name, mechanism, epsilon, delta, choice.alpha, sum(tilted_s)))
  if runs:
    print('\n| config | α | released σ (verified) | N remove | N add | projected s '
          '| measured s |')
    print('|---|---:|---|---:|---:|---:|---:|')
    for row in runs:
      print(row)


def _verified(name, mechanism, epsilon, delta, order, projected) -> str:
  """One tilted verification of [σ, σ_up] (module docstring), as a table row."""
  fallback = registry.get("unamplified_gaussian")
  sigma_up = fallback.sigma(mechanism.scheme, mechanism.matrix, epsilon=epsilon,
                            delta=delta / 2)
  sigma = float(mechanism.noise_multiplier)
  if not sigma < sigma_up:
    return f'| {name} | {order} | σ = {sigma:g} ≥ σ_up = {sigma_up:.4g}: not run | | | | |'
  candidates = [mechanism, dataclasses.replace(mechanism, noise_multiplier=sigma_up)]
  start = time.perf_counter()
  result = jaxacct.verify(jax.random.key(0), candidates, epsilon=epsilon, delta=delta,
                          monte_carlo=jaxacct.MonteCarloOptions(proposal='tilted',
                                                                tilt_order=order),
                          run=jaxacct.RunOptions(ledger=jaxacct.VerificationLedger(),
                                                 progress=False))
  seconds = time.perf_counter() - start
  guarantee = result.guarantee
  sizes = (guarantee.tilt or {}).get('directions', {})
  released = float(result.mechanism.noise_multiplier)
  return (f'| {name} | {order} | {released:.6g} ({guarantee.method}) | '
          f'{sizes.get("remove", ["—"])[0]:,} | {sizes.get("add", ["—"])[0]:,} | '
          f'{projected:,.0f} | {seconds:,.0f} |')


if __name__ == '__main__':
  main()
