"""A tilted calibration of the §7.4 shape (untruncated) on this machine, end to end.

Dong & Ganesh (2026) §7.4: b-min-sep (b = 256, warm start), 256-band BandMF, n = 7200,
dataset 14,745,600, expected batch 1793, never truncated (``scheme.truncated_batch_size`` =
the dataset size), target (ε, δ) = (10, 1.301·10⁻⁸).
``calibrate_noise_multiplier(..., monte_carlo=MonteCarloOptions(proposal='tilted',
tilt_order=α, tilt_state_budget=…, num_candidates=…))``: a bisection of tilted estimates on the
estimation stream (``montecarlo/evr/tilted_search.py``), then Algorithm 5 with the tilt. It
prints each search evaluation, the candidates and outcomes, the release and the wall-clock
seconds. With ``--plan`` the tilted capacity plan (``montecarlo/evr/tilted_plan.py``) runs
first, in the same process, and its projection of the rest of the run is printed beside the
measured seconds (goal: within ±30 %); ``--plan-only`` stops after the plan. The ledger and checkpoint live in ``--state`` (not the
user's): run again with the same arguments to resume. Never timed inside tests. Usage (from
the repository root):

  PYTHONPATH=. python benchmarks/tilted_calibration.py [--order 3] [--state /tmp/cal74] [--plan]

Results: benchmarks/RESULTS.md ("§7.4 untruncated, tilted calibration").
"""

from __future__ import annotations

import argparse
import time

import jax

import jaxacct
from benchmarks.tilted_production import DELTA, EPSILON, production_mechanism, state_folder
from jaxacct import progress as progress_lib
from jaxacct.montecarlo.evr import plan


def main() -> None:
  parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
  parser.add_argument('--order', type=int, default=3)
  parser.add_argument('--state-budget', type=int, default=3_000_000)
  parser.add_argument('--candidates', type=int, default=4)
  parser.add_argument('--state', default='/tmp/cal74')
  parser.add_argument('--seed', type=int, default=0)
  parser.add_argument('--plan', action='store_true',
                      help='project the run first (tilted_plan) and print projected vs measured')
  parser.add_argument('--plan-only', action='store_true',
                      help='the plan alone (its replayed search and projection), no run')
  args = parser.parse_args()
  args.plan = args.plan or args.plan_only
  state = state_folder(args.state)
  mechanism = production_mechanism()
  options = jaxacct.MonteCarloOptions(proposal='tilted', tilt_order=args.order,
                                      tilt_state_budget=args.state_budget,
                                      num_candidates=args.candidates)
  projected = None
  if args.plan:
    start = time.perf_counter()
    projected = plan.capacity_plan(mechanism, epsilon=EPSILON, delta=DELTA, monte_carlo=options,
                                   run=jaxacct.RunOptions(progress=progress_lib.Reporter()))
    print(f'plan: {time.perf_counter() - start:.1f} s; costs {projected.costs}')
    for probe in projected.probes:
      print(f'  replayed σ = {probe.sigma:.6f}: {probe.outcome}, passes {probe.passes}, '
            f'M = {probe.support:.3g}{" (modelled)" if probe.modelled else ""}'
            + (f', proxy δ {probe.proxy:.3g}' if probe.proxy is not None else '') + ', '
            f'samples {probe.samples}, {probe.seconds:.1f} s')
    print(f'  boundary {projected.boundary:.6f}, candidates {projected.candidates}, '
          f'N {projected.verification_samples}; search {projected.search_seconds:.0f} s, '
          f'verification {projected.verification_seconds:.0f} s, after the plan '
          f'{projected.seconds_after_plan:.0f} s, in a fresh process {projected.seconds_here:.0f} s')
    if args.plan_only:
      return
  start = time.perf_counter()
  result = jaxacct.calibrate_noise_multiplier(
      mechanism.scheme, mechanism.matrix, epsilon=EPSILON, delta=DELTA,
      key=jax.random.key(args.seed), monte_carlo=options,
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
  if projected is not None:
    print(f'projected after the plan {projected.seconds_after_plan:.1f} s: measured / projected '
          f'= {seconds / projected.seconds_after_plan:.2f}')


if __name__ == '__main__':
  main()
