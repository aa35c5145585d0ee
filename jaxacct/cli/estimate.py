"""``jaxacct estimate CONFIG``: the config's δ(ε) — a Monte Carlo estimate (``estimate_delta``,
both directions with standard errors; ``monte_carlo.proposal: tilted`` draws the remove
direction from the law tilted by the privacy loss, ``montecarlo/evr/tilted.py``) or, with a deterministic accountant, the proven δ(ε)
and ε(δ), written to ``<report root>/estimate/`` (``_folders.output_dir``): ``estimate.json``
and ``delta_hat.png`` (Monte Carlo) or ``delta.png`` (deterministic)."""

from __future__ import annotations

import sys
import time

import jax
import numpy as np

from jaxacct import config as config_lib
from jaxacct import progress as progress_lib
from jaxacct import report
from jaxacct.deterministic import accountant as deterministic
from jaxacct.deterministic import curve_plan, curve_report
from jaxacct.mechanism import DIRECTIONS
from jaxacct.montecarlo.evr import plan as plan_lib
from jaxacct.montecarlo.evr.estimator import EstimateReport, estimate_delta
from jaxacct.montecarlo.engine import sharding
from jaxacct.options import MonteCarloOptions
from jaxacct.cli.common import (Command, budget_seconds, check_state_files, print_deterministic,
                                print_footer, refuse_over_budget, reporter, run_options,
                                run_precision, say_precision)
from jaxacct.cli._folders import (keep_only, output_dir, write_on_leader)


def _report_progress(args):
  """The report's progress on stderr: its figure's points, then its δ(ε) table's queries
  (``curve_report.query``'s stages), each on a reporter of its own."""
  units, reporters = {'report curve': 'points', 'δ(ε) table': 'queries'}, {}

  def progress(done: int, total: int, stage: str) -> None:
    if stage not in reporters:
      reporters[stage] = reporter(args, unit=units[stage])
    reporters[stage](done, total, stage)
  return progress


def _check_budget(args, curve, queries, figures: int) -> float | None:
  """Before a deterministic report whose queries compose new PLDs (MMCC, conditional
  composition): print its plan on stderr (``curve_plan.plan_queries``: the run's queries
  replayed on a coarse copy of the curve count the compositions, two full ones timed at the
  ends of δ_E, which the run keeps, price them) and refuse it over ``--max-minutes`` (default
  30; ``--force`` lifts only the default). Returns the projected seconds of the run after the
  plan, ``figures`` figures included (None: the curve's queries are cheap, nothing is
  planned). The replay and the timed compositions are announced on stderr as they start (a
  replay can take a minute)."""
  plan = curve_plan.plan_queries(curve, queries, progress=reporter(args))
  if plan is None:
    return None
  projected = plan.projected_seconds + figures * report.figure_seconds()
  seconds = progress_lib.format_seconds
  if sharding.is_leader():
    fewest, most = plan.seconds_per_composition
    print(f'plan: the report makes ~{plan.compositions} PLD compositions (its queries replayed '
          f'on a coarse copy of the curve in {seconds(plan.plan_seconds)}; full ones took '
          f'{seconds(fewest)} to {seconds(most)} from the largest to the smallest δ_E): '
          f'projected {seconds(projected)} after this plan, figures included', file=sys.stderr)
  refuse_over_budget(args, 'the deterministic report', projected,
                     'use a coarser value_discretization_interval', accelerator=False)
  return projected


def _estimate_deterministic(args, raw, mechanism, name: str) -> dict:
  adjacency = config_lib.setting(raw, 'adjacency')
  options = config_lib.accountant_options(raw)
  epsilons = [float(e) for e in config_lib.setting(raw, 'monte_carlo.epsilons')]
  curve = deterministic.privacy_curve(mechanism, accountant=name, adjacency=adjacency, **options)
  target = raw.get('calibration', {}).get('delta')
  projected = _check_budget(
      args, curve, lambda replayed: curve_report.query(replayed, epsilons, delta=target),
      figures=1)
  started = time.perf_counter()  # the run the plan projects: the queries and the figure
  result = curve_report.curve_report(mechanism, curve, epsilons, accountant=name,
                                     adjacency=adjacency, accountant_options=options,
                                     delta=target, progress=_report_progress(args))
  payload = result.to_dict()
  folder = output_dir(args, raw)
  write_on_leader(report.write_json, folder, 'estimate.json', payload)
  write_on_leader(report.plot_delta_curve, folder, result.points['epsilons'],
                  result.points['delta'],
                  f'{report.describe(mechanism)}\nδ(ε) by {result.accountant} ({adjacency})',
                  released=None if target is None else (result.epsilon, target),
                  point_label='proven')
  if projected is not None:
    payload['plan_check'] = {'projected_seconds': projected,
                             'measured_seconds': time.perf_counter() - started}
    write_on_leader(report.write_json, folder, 'estimate.json', payload)
  keep_only(args, folder, ('estimate.json', 'delta.png'))
  payload['report'] = str(folder)
  return payload


def _max_seconds(args, mechanism, num_samples: int, options: MonteCarloOptions) -> float | None:
  """The ``max_seconds`` of a Monte Carlo estimate: the run's budget (``budget_seconds``) when
  the estimate could exceed it (``plan.needs_timing``), None (nothing timed or refused)
  otherwise. An estimate that is not timed first is announced on stderr here, since its first
  call compiles the program without a line (a timed one is announced by the probe,
  ``plan.program_seconds``). A tilted estimate under a budget is always projected
  (``tilted_plan.tilted_sampling_seconds``: after its host tables, a host pass of tuple draws
  and one call per direction are timed; the plain gate ``needs_timing`` does not know the host
  draws' cost), and says so first."""
  if options.proposal == 'tilted':
    budget = budget_seconds(args)
    progress_lib.announce(reporter(args), f'estimate: {num_samples:,} samples per direction '
                                          f'of n = {mechanism.iterations:,} rounds, the remove '
                                          f'direction tilted (α = {options.tilt_order}), '
                                          'starting: ' + (
                                              'its host tables, then a host pass of tuple '
                                              'draws and one call per direction timed against '
                                              'the budget…' if budget is not None else
                                              'not timed first (--force; its first call may '
                                              'compile the program)…'))
    return budget
  budget = budget_seconds(args)
  if plan_lib.needs_timing(mechanism, num_samples, budget, devices=jax.device_count()):
    return budget
  progress_lib.announce(reporter(args), f'estimate: {num_samples:,} samples per direction '
                                        f'of n = {mechanism.iterations:,} rounds, starting '
                                        '(its first call may compile the program)…')
  return None


def _estimate(args, raw) -> dict:
  mechanism = config_lib.mechanism_from(raw)
  name = config_lib.accountant_choice(raw, mechanism.scheme, mechanism.matrix).name
  if name != config_lib.MONTE_CARLO:
    return _estimate_deterministic(args, raw, mechanism, name)
  num_samples = int(config_lib.setting(raw, 'monte_carlo.num_samples'))
  seed = int(config_lib.setting(raw, 'monte_carlo.seed'))
  epsilons = [float(e) for e in config_lib.setting(raw, 'monte_carlo.epsilons')]
  choice = run_precision(raw, mechanism, 'monte_carlo')
  say_precision(choice)
  check_state_files(args, raw, ledger=False)
  grid = report.curve_epsilons(epsilons)  # the table's ε and a fine grid for the plot
  options = MonteCarloOptions(precision=choice.precision, **config_lib.tilt_options(raw))
  try:
    result = estimate_delta(jax.random.key(seed), mechanism, grid, num_samples,
                            monte_carlo=options,
                            run=run_options(args, reporter(args), max_seconds=_max_seconds(
                                args, mechanism, num_samples, options)))
  except plan_lib.OverBudgetError as refusal:  # timed by the library before any sample
    refuse_over_budget(args, f'the Monte Carlo estimate (monte_carlo.num_samples = '
                        f'{num_samples:,}, {choice.precision})', refusal.seconds,
                        'use fewer samples, ')
    raise
  target = raw.get('calibration', {}).get('delta')
  # The (ε, δ) marked is one the samples resolve: δ̂ + 2·s.e. below δ, δ above 3/N.
  estimate = EstimateReport(mechanism=mechanism, estimate=result, epsilons=epsilons,
                            delta=target, precision=choice)
  payload = {**estimate.to_dict(), 'seed': seed}  # the config's seed, not the key's words
  eps_hat = payload['epsilon']
  folder = output_dir(args, raw)
  write_on_leader(report.write_json, folder, 'estimate.json', payload)
  write_on_leader(report.plot_delta_hat, folder, result.epsilons, result.delta_hat,
                  result.standard_error,
                  f'{report.describe(mechanism)}, N = {num_samples:,} per direction\nMonte Carlo '
                  f'estimate{_tilted_text(payload, ", ")} (not a guarantee)',
                  num_samples=num_samples, remove_floor=(
                      None if payload.get('proposal', {}).get('remove') != 'tilted'
                      else 3.0 * np.asarray(payload['curve']['support']) / num_samples),
                  released=None if eps_hat is None else (eps_hat, target),
                  point_label='estimated')
  keep_only(args, folder, ('estimate.json', 'delta_hat.png'))
  payload['report'] = str(folder)
  return payload


def _tilted_text(payload: dict, lead: str) -> str:
  """"tilted remove direction (α = 3)" after ``lead`` for a tilted estimate, else ""."""
  proposal = payload.get('proposal') or {}
  tilted = [d for d in DIRECTIONS if proposal.get(d) == 'tilted']
  return ''.join(f'{lead}tilted {d} direction (α = {payload["tilt_order"]})' for d in tilted)


def _floor(payload: dict, direction: str, i: int) -> tuple[float, str]:
  """The resolution of a direction's δ̂ at the table's i-th ε: below it δ̂ says nothing (the
  rule of three, ``resolution``): 3/N, or 3·M(α, ε)/N for a tilted direction (terms ≤ M)."""
  if (payload.get('proposal') or {}).get(direction) == 'tilted':
    return 3.0 * payload['support'][i] / payload['num_samples'], '3M/N'
  return 3.0 / payload['num_samples'], '3/N'


def _print(payload: dict) -> None:
  if payload['method'] == 'deterministic':
    print_deterministic(payload, table=True)
  else:
    print(f'noise_multiplier σ = {payload["noise_multiplier"]}, {payload["num_samples"]:,} '
          f'samples per direction, seed {payload["seed"]} (Monte Carlo estimate, not a guarantee'
          + _tilted_text(payload, '; ')
          + ('; CONJECTURAL: rests on Conjecture 6.2' if payload.get('conjectural') else '')
          + ('; App. B BOUNDS: upper bounds on δ̂' if payload.get('bounded') else '') + ')')
    print(f'{"epsilon":>8}  {"delta_hat remove":>24}  {"delta_hat add":>24}')
    for i, eps in enumerate(payload['epsilons']):
      floors = [_floor(payload, d, i) for d in DIRECTIONS]
      cells = [f'{payload["delta_hat"][d][i]:.4e} ± {payload["standard_error"][d][i]:.1e}'
               if payload['delta_hat'][d][i] >= floor else f'< {floor:.1e} ({rule})'
               for d, (floor, rule) in zip(DIRECTIONS, floors)]
      print(f'{eps:8.3f}  {cells[0]:>24}  {cells[1]:>24}')
    resolution = payload.get('resolution')
    if resolution is not None and resolution['epsilon'] is not None:
      grid = payload['curve']['epsilons']  # resolved on the figure's grid, not the table's
      print(f'estimated ε̂ = {resolution["epsilon"]:.4g} at δ = {payload["delta"]:.3g}: the '
            f'smallest ε of the figure\'s grid ({len(grid)} points on [{min(grid):g}, '
            f'{max(grid):g}]) with δ̂ + 2·s.e. below δ (an estimate, not a guarantee)')
    elif resolution is not None:
      need = resolution['needed_samples']
      print(f'δ = {payload["delta"]:.3g} not resolved at {payload["num_samples"]:,} samples'
            + (f': need ≥ {need:,} (monte_carlo.num_samples)' if need else '')
            + f' — {resolution["reason"]}')
  print_footer(payload)

COMMAND = Command(name='estimate', help='Monte Carlo δ̂(ε), both directions (or a deterministic '
                  'accountant\'s proven δ(ε))', run=_estimate,
                  print_human=_print, order=1, options_section='monte_carlo')
