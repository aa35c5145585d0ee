"""The §7.4 shape, untruncated, verified with the tilted remove direction on this machine.

Dong & Ganesh (2026) §7.4: b-min-sep (b = 256, warm start), 256-band BandMF, n = 7200,
dataset 14,745,600, expected batch 1793, with ``scheme.truncated_batch_size`` ≥ the dataset
(never truncates), σ = 0.47, target (ε, δ) = (10, 1.301·10⁻⁸). Plain verification needs
~1.2·10¹⁰ samples per direction (``jaxacct plan`` projects ~900 days here). This verifies
[σ = 0.47, the fallback's σ] with ``MonteCarloOptions(proposal='tilted', tilt_order=α)``: the
remove direction tilted (terms ≤ M(α, ε)), the add direction certified without samples
(ε = 10 ≥ −ln Pr[x = 0] ≈ 0.90, ``tilt_bound.add_vanishing_epsilon``).

It prints the tilt (ln Z_α, M, the state count and its host seconds), the per-direction sample
sizes, the plain sizes for comparison (Fact 4.2 arithmetic, not run), the release and the
wall-clock seconds of each stage. The ledger is a file in ``--state`` (not the user's), and the
run checkpoints there: run again with the same arguments to resume. Never timed inside tests.

Usage (from the repository root):

  PYTHONPATH=. python benchmarks/tilted_production.py [--order 2] [--state /tmp/prod74]

Results: benchmarks/RESULTS.md ("§7.4 untruncated, tilted").
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
from jaxacct import progress as progress_lib
from jaxacct.deterministic import tilt_bound
from jaxacct.montecarlo.evr import bounds, tilted
from jaxacct.montecarlo.evr.search_start import fallback_accountant

EPSILON, DELTA, SIGMA = 10.0, 1.301e-8, 0.47


def production_mechanism(sigma: float = SIGMA):
  """The §7.4 config's mechanism, never truncated (the batch bound is the dataset size)."""
  root = pathlib.Path(__file__).resolve().parents[1]
  raw = config.load(root / 'configs' / 'bminsep_production_7_4.yaml',
                    ['scheme.truncated_batch_size=14745600'])
  return config.mechanism_from(raw, sigma)


def state_folder(path: str) -> pathlib.Path:
  """The benchmark's own ledger and checkpoint folder (never the user's), created."""
  state = pathlib.Path(path)
  state.mkdir(parents=True, exist_ok=True)
  return state


def main() -> None:
  parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
  parser.add_argument('--order', type=int, default=2)
  parser.add_argument('--state', default='/tmp/prod74')
  parser.add_argument('--seed', type=int, default=0)
  args = parser.parse_args()
  state = state_folder(args.state)
  mechanism = production_mechanism()
  start = time.perf_counter()
  tilt = tilted.tilt_for(mechanism, args.order, [EPSILON])
  host = time.perf_counter() - start
  support = math.exp(tilt.log_support[0])
  print(f'tilt alpha={tilt.order} ln Z={tilt.log_z:.6f} ({tilt.method}, {tilt.states:,} states, '
        f'{host:.1f} s host)  M={support:.4g}  M/delta={support / DELTA:.3g}')
  print(f'add direction: -ln Pr[x=0] = {tilt_bound.add_vanishing_epsilon(mechanism):.6f}')
  base = DELTA / 2
  plain = bounds.minimum_samples(base, DELTA)
  tilted_n = bounds.minimum_samples(base, DELTA, support=support)
  print(f'samples per direction at delta_b = delta/2: plain {plain:,} (not run), '
        f'tilted remove {tilted_n:,}')
  fallback = fallback_accountant(None)
  sigma_up = fallback.sigma(mechanism.scheme, mechanism.matrix, epsilon=EPSILON, delta=base)
  candidates = [mechanism, dataclasses.replace(mechanism, noise_multiplier=sigma_up * 1.0001)]
  start = time.perf_counter()
  result = jaxacct.verify(
      jax.random.key(args.seed), candidates, epsilon=EPSILON, delta=DELTA,
      monte_carlo=jaxacct.MonteCarloOptions(proposal='tilted', tilt_order=args.order),
      run=jaxacct.RunOptions(ledger=jaxacct.FileLedger(state / 'ledger.json'),
                             checkpoint=state / f"checkpoint-alpha{args.order}",
                             progress=progress_lib.Reporter()))
  seconds = time.perf_counter() - start
  print(f'release: {result.guarantee!r}')
  print(f'delta_hat {result.delta_hat}  tilt {result.guarantee.tilt}')
  print(f'verify wall clock {seconds:.1f} s ({seconds / 60:.1f} min)')


if __name__ == '__main__':
  main()
