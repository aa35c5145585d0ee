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
of [σ_v, σ_up] with σ_v the tightest deterministic accountant's σ at (ε, δ_b), so that the
candidate passes, and σ_up the unamplified fallback's; an in-memory ledger): its samples per
direction, whether it released σ_v, and its measured seconds beside the projection at σ_v.
Usage (from the repository root):

  PYTHONPATH=. python benchmarks/tilted_table.py [--samples 4096] [--verify]

Results: benchmarks/RESULTS.md ("plain vs tilted per direction").
"""

from __future__ import annotations

import argparse
import dataclasses
import math
import pathlib
import time
import typing

import jax

import jaxacct
from jaxacct import config
from jaxacct.deterministic import accountant as deterministic
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


class Projection(typing.NamedTuple):
  """One verification at (ε, δ), δ_b = δ/2, projected: the order, M, the add bound, N per
  direction (plain, tilted remove, tilted add) and seconds (plain both, tilted per direction)."""

  alpha: int
  support: float
  add_bound: float | None
  plain_n: int
  remove_n: int
  add_n: int
  plain_s: float
  tilted_s: tuple[float, float]


def _projection(mechanism, epsilon: float, delta: float, samples: int) -> Projection:
  """The module docstring's arithmetic at ``mechanism``'s σ, rates timed on ``samples``."""
  choice = tilted.choose_order(mechanism, epsilon)
  support = math.exp(choice.log_bound)
  add = tilted.add_bound([mechanism], epsilon)
  base = delta / 2
  plain_n = bounds.minimum_samples(base, delta)
  remove_n = bounds.minimum_samples(base, delta, support=min(support, 1.0))
  add_n = 0 if add is not None and add <= base else plain_n
  grid, key = [epsilon], jax.random.key(0)
  plain_rate = _per_sample(lambda n: jaxacct.estimate_delta(
      key, mechanism, grid, n, run=jaxacct.RunOptions(progress=False)), samples)
  tilted_rate = _per_sample(lambda n: jaxacct.estimate_delta(
      key, mechanism, grid, n, run=jaxacct.RunOptions(progress=False),
      monte_carlo=jaxacct.MonteCarloOptions(proposal='tilted', tilt_order=choice.alpha)),
      samples)
  # Tilted remove = the tilted estimate's cost minus its plain add half.
  remove_rate = max(tilted_rate - plain_rate / 2, 0.0)
  return Projection(choice.alpha, support, add, plain_n, remove_n, add_n, plain_n * plain_rate,
                    (remove_n * remove_rate, add_n * plain_rate / 2))


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
    threshold = tilt_bound.add_vanishing_epsilon(mechanism)
    row = _projection(mechanism, epsilon, delta, args.samples)
    print(f'| {name} | ({epsilon:g}, {delta:.3g}) | {row.alpha} | {row.support:.3g} | '
          f'{"—" if threshold is None else f"{threshold:.3f}"} | '
          f'{"—" if row.add_bound is None else f"{row.add_bound:.3g}"} | {row.plain_n:,} | '
          f'{row.remove_n:,} | {row.add_n:,} | {row.plain_s:,.0f} | {row.tilted_s[0]:,.0f} | '
          f'{row.tilted_s[1]:,.0f} | {row.plain_s / sum(row.tilted_s):.3g}× |', flush=True)
    if args.verify and 'production' not in name:
      runs.append(_verified(name, mechanism, epsilon, delta, args.samples))
  if runs:
    print('\n| config | σ verified | α | released σ | N remove | N add | projected s '
          '| measured s |')
    print('|---|---:|---:|---|---:|---:|---:|---:|')
    for line in runs:
      print(line)


def _verified(name, mechanism, epsilon, delta, samples: int) -> str:
  """One tilted verification of [σ_v, σ_up] (module docstring) as a table row: σ_v the
  tightest deterministic accountant's σ at (ε, δ_b) (≥ the Monte Carlo boundary, so the
  candidate should pass), its projection at σ_v beside the measured seconds."""
  fallback = registry.get('unamplified_gaussian')
  scheme, matrix = mechanism.scheme, mechanism.matrix
  sigma_up = fallback.sigma(scheme, matrix, epsilon=epsilon, delta=delta / 2)
  proven, _ = deterministic.calibrate_deterministic(scheme, matrix, epsilon=epsilon,
                                                    delta=delta / 2)
  sigma = float(proven.noise_multiplier)
  if not sigma < sigma_up:
    return f'| {name} | {sigma:.6g} ≥ σ_up = {sigma_up:.6g}: not run | | | | | | |'
  candidate = dataclasses.replace(mechanism, noise_multiplier=sigma)
  row = _projection(candidate, epsilon, delta, samples)
  start = time.perf_counter()
  result = jaxacct.verify(jax.random.key(0), [candidate, dataclasses.replace(
      mechanism, noise_multiplier=sigma_up)], epsilon=epsilon, delta=delta,
                          monte_carlo=jaxacct.MonteCarloOptions(proposal='tilted',
                                                                tilt_order=row.alpha),
                          run=jaxacct.RunOptions(ledger=jaxacct.VerificationLedger(),
                                                 progress=False))
  seconds = time.perf_counter() - start
  guarantee = result.guarantee
  # Per direction [N, support] (the tilt's record; a fallback release has none).
  sizes = (guarantee.tilt or {}).get('directions', {})
  counts = [f'{sizes[d][0]:,}' if d in sizes else '—' for d in ('remove', 'add')]
  released = float(result.mechanism.noise_multiplier)
  return (f'| {name} | {sigma:.6g} | {row.alpha} | {released:.6g} ({guarantee.method}) | '
          f'{counts[0]} | {counts[1]} | {sum(row.tilted_s):,.0f} | {seconds:,.0f} |')


if __name__ == '__main__':
  main()
