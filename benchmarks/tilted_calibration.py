"""A tilted calibration of the §7.4 shape (untruncated) on this machine, end to end.

Dong & Ganesh (2026) §7.4: b-min-sep (b = 256, warm start), 256-band BandMF, n = 7200,
dataset 14,745,600, expected batch 1793, never truncated (``scheme.truncated_batch_size`` =
the dataset size), target (ε, δ) = (10, 1.301·10⁻⁸).
``calibrate_noise_multiplier(..., monte_carlo=MonteCarloOptions(proposal='tilted',
tilt_order=α, tilt_state_budget=…, num_candidates=…))``: a bisection of tilted estimates on the
estimation stream (``montecarlo/evr/tilted_search.py``), then Algorithm 5 with the tilt. It
prints each search evaluation, the candidates and outcomes, the release and the wall-clock
seconds. The ledger and checkpoint live in ``--state`` (not the user's): run again with the
same arguments to resume. Never timed inside tests. Usage (from the repository root):

  PYTHONPATH=. python benchmarks/tilted_calibration.py [--order 3] [--state /tmp/cal74]

Results: benchmarks/RESULTS.md ("§7.4 untruncated, tilted calibration").
"""

from __future__ import annotations

import argparse
import time

import jax

import jaxacct
from benchmarks.tilted_production import DELTA, EPSILON, production_mechanism, state_folder
from jaxacct import progress as progress_lib


def main() -> None:
  parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
  parser.add_argument('--order', type=int, default=3)
  parser.add_argument('--state-budget', type=int, default=3_000_000)
  parser.add_argument('--candidates', type=int, default=4)
  parser.add_argument('--state', default='/tmp/cal74')
  parser.add_argument('--seed', type=int, default=0)
  args = parser.parse_args()
  state = state_folder(args.state)
  mechanism = production_mechanism()
  start = time.perf_counter()
  result = jaxacct.calibrate_noise_multiplier(
      mechanism.scheme, mechanism.matrix, epsilon=EPSILON, delta=DELTA,
      key=jax.random.key(args.seed),
      monte_carlo=jaxacct.MonteCarloOptions(proposal='tilted', tilt_order=args.order,
                                            tilt_state_budget=args.state_budget,
                                            num_candidates=args.candidates),
      run=jaxacct.RunOptions(ledger=jaxacct.FileLedger(state / 'ledger.json'),
                             checkpoint=state / f'checkpoint-alpha{args.order}',
                             progress=progress_lib.Reporter()))
  seconds = time.perf_counter() - start
  for sweep in result.record.sweeps:
    print(f'search σ = {sweep.sigmas[0]:.6f}: max-direction δ̂ = {sweep.delta_hat[0]:.4g} '
          f'± {sweep.standard_error[0]:.2g}')
  print(f'candidates {result.candidates}, accepted {result.record.verification.accepted}')
  print(f'release: {result.guarantee!r}')
  print(f'tilt: {result.guarantee.tilt}')
  print(f'calibration wall clock {seconds:.1f} s ({seconds / 60:.1f} min)')


if __name__ == '__main__':
  main()
