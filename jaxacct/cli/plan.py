"""``jaxacct plan CONFIG``: the capacity plan of the config's Monte Carlo calibration — samples,
throughput measured here, projected wall time here and on N devices (``montecarlo/evr/plan.py``).

It times the device programs of the precision the run would use only (``calibration.precision``,
``common.run_precision``); ``--precision both`` (or the other precision's name) times the other
one's too. On a CPU the float32 program of a large truncated scheme compiles in minutes, and a
plan of both precisions cost more than the calibration it planned (benchmarks/RESULTS.md).

The same plan is printed on stderr before ``calibrate`` and ``train`` run a Monte Carlo
calibration, which refuse it over their budget (``check_budget``).
"""

from __future__ import annotations

import argparse
import sys

import jax

from jaxacct import config as config_lib
from jaxacct import progress as progress_lib
from jaxacct import report
from jaxacct.mechanism import MatrixMechanism
from jaxacct.montecarlo.engine import sharding
from jaxacct.montecarlo.evr import plan as plan_lib
from jaxacct.montecarlo.evr import tilted_plan
from jaxacct.options import MonteCarloOptions
from jaxacct.cli.common import Command, calibration_section, refuse_over_budget, run_precision
from jaxacct.cli._folders import (output_dir, write_on_leader)

CALIBRATION_FIGURES = 2  # calibrate draws δ̂(ε) and the candidates after its calibration


def plan_mechanism(raw) -> tuple[MatrixMechanism, str | None]:
  """The config's mechanism for timing, and a note when a strategy is stood in for.

  The cost of a sample depends on the strategy's shape only (band count, or a dense n × n C),
  so a strategy that is costly to build (an optimisation of minutes at n = 7200) is timed as
  the cheap one of the same shape its config key names (``config.timing_stand_in``).
  """
  scheme = config_lib.scheme_from(raw)
  sigma = float(raw.get('noise_multiplier') or 1.0)  # a placeholder: timing ignores σ
  stand_in = config_lib.timing_stand_in(raw, scheme.iterations)
  if stand_in is not None:
    return MatrixMechanism(scheme, stand_in[0], sigma), stand_in[1]
  return MatrixMechanism(scheme, config_lib.matrix_from(raw, scheme.iterations), sigma), None


def capacity_plan(args, raw, precisions=('float64', 'float32')) -> dict:
  """The capacity plan of the config's Monte Carlo calibration (``plan.capacity_plan``, with
  calibrate's report curve and figures), timed for ``precisions`` (the run's own precision is
  always among them)."""
  cal = calibration_section(raw)
  mechanism, note = plan_mechanism(raw)
  options = config_lib.library_keywords(raw, 'calibration', (
      'num_samples', 'base_delta', 'estimation_samples', 'num_candidates', 'fallback',
      'attempt', 'grid_ratio', 'proposal', 'tilt_order', 'tilt_state_budget'))
  # (N for the declared attempt: the ledger's earlier runs are not read here)
  run = run_precision(raw, mechanism).precision
  # calibrate's report curve after the calibration (its grid: calibrate.py), and its figures
  report_epsilons = report.curve_epsilons([float(cal['epsilon'])])
  figures = CALIBRATION_FIGURES * report.figure_seconds(report_epsilons)

  def plan_in(precision: str):
    return plan_lib.capacity_plan(
        mechanism, epsilon=float(cal['epsilon']), delta=float(cal['delta']),
        target_devices=getattr(args, 'devices', None),
        samples_per_second=getattr(args, 'samples_per_second', None),
        report_epsilons=report_epsilons, figure_seconds=figures,
        monte_carlo=MonteCarloOptions(precision=precision, **options))

  def payload(plan: dict, plans: dict, refusal: str | None) -> dict:
    return {'plan': plan, 'plans': plans, 'precision': run, 'float32_refusal': refusal,
            'stand_in': note, 'epsilon': float(cal['epsilon']), 'delta': float(cal['delta']),
            'backend': jax.default_backend()}

  own = plan_in(run)
  if isinstance(own, tilted_plan.TiltedCapacityPlan):  # float64 only: the whole answer
    return payload(own.to_dict(), {}, None)
  plans, refusal = {run: own.to_dict()}, None
  for name in sorted(set(precisions) - {run}, key=('float64', 'float32').index):
    try:
      plans[name] = plan_in(name).to_dict()
    except ValueError as refused:
      if name != 'float32':
        raise
      refusal = str(refused)  # the 32-bit program does not serve this mechanism
  plans = {name: plans[name] for name in ('float64', 'float32') if name in plans}
  return payload(plans[run], plans, refusal)


def check_budget(args, raw, choice, report: bool = True,
                 then: tuple[str, float] | None = None) -> float | None:
  """Before a Monte Carlo calibration: print its plan (samples, measured throughput,
  projected time here) on stderr, and refuse it when the projection exceeds
  ``--max-minutes`` (default 30; ``--force`` lifts only the default). ``report`` False: the
  run draws no report curve and figures of its own (``train``), so they are left out.
  ``then``: (what, seconds) of work after the calibration that the budget covers too
  (``train``'s training). ``choice``: the run's ``AccountantChoice``. Returns
  the projected seconds of the run after the plan, ``then`` included (the calibration's
  share is None without a Monte Carlo calibration), which the report records beside the
  measured ones."""
  if not choice.monte_carlo:
    if then is not None:
      refuse_over_budget(args, then[0], then[1], '', accelerator=False)
      return then[1]
    return None
  plan = capacity_plan(args, raw, precisions=())  # the budget is the run precision's
  seconds = plan['plan']['seconds_after_plan']
  if not report:
    seconds -= plan['plan']['report_seconds'] + plan['plan']['figure_seconds']
  if sharding.is_leader():
    print_plan(plan, file=sys.stderr)
  what = 'the Monte Carlo calibration'
  if then is not None:
    seconds += then[1]
    what += f' and {then[0]}'
    if sharding.is_leader():
      print(f'  then {then[0]}: {progress_lib.format_seconds(then[1])}; in all after this plan '
            f'{progress_lib.format_seconds(seconds)}', file=sys.stderr)
  refuse_over_budget(args, what, seconds, '')
  return seconds


def print_plan(payload: dict, file=None) -> None:
  """The capacity plan (``capacity_plan``'s payload) for a person, on ``file`` (default
  stdout; ``calibrate`` and ``train`` print it on stderr before their run)."""
  plan = payload['plan']
  file = sys.stdout if file is None else file
  if plan.get('proposal') == 'tilted':
    print_tilted_plan(payload, file)
    return
  rate = 1.0 / plan['seconds_per_sample']['1']
  print(f'capacity plan at (ε, δ) = ({payload["epsilon"]}, {payload["delta"]:.4g}), n = '
        f'{plan["iterations"]}, block {plan["block_size"]}:', file=file)
  print(f'  verification: N = {plan["num_samples"]:,} per direction (δ_b = '
        f'{plan["base_delta"]:.4g}), {plan["verification_candidates"]} candidates in one '
        f'pass: {plan["verification_samples"]:,} draws', file=file)
  sweeps = plan['estimation_sweeps']
  why = ('a pilot call: the first coarse sweep cannot bracket σ' if sweeps > 2
         else 'a coarse one brackets σ, then a fine one')
  print(f'  estimation: {plan["estimation_samples"]:,} per direction per sweep of 16 σ, '
        f'{sweeps} sweeps projected ({why}): '
        f'{sweeps * plan["estimation_samples_per_sweep"]:,} draws', file=file)
  source = (f'measured on {plan["devices_here"]} {payload["backend"]} device(s)'
            if plan['measured'] else 'given (--samples-per-second)')
  print(f'  throughput: {rate:,.0f} one-σ samples/s ({source}); 16 σ cost '
        f'{plan["seconds_per_sample"]["16"] / plan["seconds_per_sample"]["1"]:.2f}× one σ',
        file=file)
  if payload.get('stand_in'):
    print(f'  ({payload["stand_in"]})', file=file)
  seconds = progress_lib.format_seconds
  print(f'  projected wall time here: {seconds(plan["seconds_here"])} (compiles '
        f'{seconds(plan["compile_seconds"])}, initial σ and fallback '
        f'{seconds(plan["initial_seconds"])}, report curve {seconds(plan["report_seconds"])} '
        f'and figures {seconds(plan["figure_seconds"])}; '
        f'+ {seconds(plan["seconds_per_extra_sweep"])} per extra sweep); after this plan, '
        f'whose compiles and initial σ the run reuses: {seconds(plan["seconds_after_plan"])}',
        file=file)
  print(f'  on {plan["target_devices"]} device(s): '
        f'{progress_lib.format_seconds(plan["seconds_on_target"])}, '
        f'{plan["device_hours_on_target"]:,.1f} device-hours (linear scaling)', file=file)
  if plan['memory_per_device'] is not None:
    print(f'  memory per device per call: {plan["memory_per_device"] / 2**20:,.1f} MiB',
          file=file)
  plans = payload.get('plans', {})
  print(f'  this run: {payload.get("precision", "float64")} (calibration.precision)', file=file)
  for name, other in plans.items():
    memory = ('' if other['memory_per_device'] is None
              else f', {other["memory_per_device"] / 2**20:,.1f} MiB per device per call')
    print(f'  {name}: {1.0 / other["seconds_per_sample"]["1"]:,.0f} samples/s here, '
          f'{progress_lib.format_seconds(other["seconds_here"])} here, '
          f'{other["device_hours_on_target"]:,.1f} device-hours on {other["target_devices"]}'
          f'{memory}', file=file)
  if 'float32' in plans:
    print('  accelerators (TPU/GPU) run the float32 program: project with its figures',
          file=file)
  elif payload.get('float32_refusal'):
    print(f'  float32: not available ({payload["float32_refusal"]})', file=file)


def print_tilted_plan(payload: dict, file) -> None:
  """A tilted calibration's plan (``tilted_plan.TiltedCapacityPlan``) for a person."""
  plan, seconds = payload['plan'], progress_lib.format_seconds
  costs = plan['costs']
  print(f'capacity plan of the tilted calibration (α = {plan["order"]}) at (ε, δ) = '
        f'({payload["epsilon"]}, {payload["delta"]:.4g}), δ_b = {plan["base_delta"]:.4g}:',
        file=file)
  print(f'  measured here: the α = {plan["order"]} tables {seconds(costs["tables"])} per σ'
        + (f' (and the α = 2 chain {seconds(costs["order_two"])})' if costs['order_two'] else '')
        + f'; a host pass of tuple draws {seconds(costs["forward"])} + '
        f'{costs["per_tuple"] * 1e3:.3g} ms per tuple ({plan["host_blocks"]} blocks of '
        f'{plan["block_size"]:,} per pass); device calls of {plan["blocks_per_call"]} blocks '
        f'{seconds(costs["remove_call"])} (tilted remove), {seconds(costs["add_call"])} '
        f'(plain add)', file=file)
  print(f'  the σ search replayed from σ = {plan["initial_guess"]:.6g} (σ_up = '
        f'{plan["sigma_up"]:.6g}): {len(plan["probes"])} σ, {seconds(plan["search_seconds"])}; '
        + ('ln Z_α modelled from ln Z₂ by a power law through ('
           + ', '.join(f'σ = {sigma:.4g}: {two:.3g}, {alpha:.3g}'
                       for sigma, two, alpha in plan['anchors']) + ')'
           if any(probe['modelled'] for probe in plan['probes'])
           else 'ln Z_α exact at every σ')
        + ', a sampled σ taken to pass when min over the orders known there of M(α′, ε) − '
        f'M(α′, ε)|_(Z = 1) ≤ {tilted_plan.BOUNDARY_SUPPORT_RATIO:g}·δ_b', file=file)
  for probe in plan['probes']:
    drawn = ', '.join(f'{d} {n:,}' for d, n in probe['samples'].items() if n) or 'no samples'
    print(f'    σ = {probe["sigma"]:.6g}: {probe["outcome"]} → '
          f'{"passes" if probe["passes"] else "fails"} (M = {probe["support"]:.3g}'
          + (' modelled' if probe['modelled'] else '')
          + (f', proxy δ {probe["proxy"]:.3g}' if probe.get('proxy') is not None else '')
          + f'; {drawn}; '
          f'{seconds(probe["seconds"])})', file=file)
  samples = ', '.join(f'{d} {n:,}' for d, n in plan['verification_samples'].items())
  print(f'  verification at the boundary σ ≈ {plan["boundary"]:.6g}: {len(plan["candidates"])} '
        f'candidates, each its own tables and draws (N per candidate: {samples}; S = '
        f'{plan["support"]:.3g}), {seconds(plan["verification_seconds"])}', file=file)
  print(f'  projected wall time here: {seconds(plan["seconds_here"])} (compiles '
        f'{seconds(plan["costs"]["compile"])}, initial σ and fallback '
        f'{seconds(plan["initial_seconds"])}, the choice of α {seconds(plan["order_seconds"])}, '
        f'report curve {seconds(plan["report_seconds"])} and figures '
        f'{seconds(plan["figure_seconds"])}); after this plan, whose compiles and initial σ the '
        f'run reuses: {seconds(plan["seconds_after_plan"])}', file=file)
  if payload.get('stand_in'):
    print(f'  ({payload["stand_in"]})', file=file)


# --precision: the precisions timed besides the run's own (which is always timed).
_PRECISIONS = {'run': (), 'both': ('float64', 'float32'), 'float64': ('float64',),
               'float32': ('float32',)}


def _plan(args, raw) -> dict:
  stand_in, _ = plan_mechanism(raw)
  name = config_lib.accountant_choice(raw, stand_in.scheme, stand_in.matrix).name
  if name != config_lib.MONTE_CARLO:  # before any compile: there is nothing to sample
    raise config_lib.ConfigError(
        f'{args.config} is accounted deterministically ('
        + (f'`accountant: {name}`' if name != 'auto' else
           '`accountant: auto` picks a deterministic accountant for this mechanism')
        + '), which samples nothing, so there is no Monte Carlo run to plan: '
        f'`jaxacct calibrate {args.config}` proves its σ and prints its own plan first; '
        f'--set accountant=monte_carlo plans a Monte Carlo calibration instead')
  payload = capacity_plan(args, raw, _PRECISIONS[args.precision])
  folder = output_dir(args, raw)
  write_on_leader(report.write_json, folder, 'plan.json', payload)
  payload['report'] = str(folder)
  return payload


def _print(payload: dict) -> None:
  print_plan(payload)
  untimed = [name for name in ('float64', 'float32') if name not in payload['plans']]
  if payload['plan'].get('proposal') == 'tilted':
    untimed = []  # a tilted run is float64 only
  if untimed and not payload.get('float32_refusal'):
    print(f'  {untimed[0]}: not timed (--precision both times it too'
          + ('; accelerators run it)' if untimed[0] == 'float32' else ')'))
  print(f'report: {payload["report"]}')


def _add_arguments(parser: argparse.ArgumentParser) -> None:
  parser.add_argument('--devices', type=int, metavar='N',
                      help='project to N devices (default: the devices here)')
  parser.add_argument('--samples-per-second', type=float, metavar='R',
                      help='one-σ samples/s per device, instead of measuring here')
  parser.add_argument('--precision', choices=tuple(_PRECISIONS), default='run',
                      help='the device programs to time: the run\'s own (default: '
                           'calibration.precision), both, or the one named as well as the '
                           'run\'s (each compiles once, the float32 one of a large truncated '
                           'scheme in minutes on a CPU)')


def _check_arguments(args) -> None:
  if args.devices is not None and args.devices < 1:
    raise config_lib.ConfigError(f'--devices must be an integer >= 1, got {args.devices}')
  if args.samples_per_second is not None and not 0 < args.samples_per_second < float('inf'):
    raise config_lib.ConfigError(f'--samples-per-second must be finite and > 0, got '
                                 f'{args.samples_per_second}')

COMMAND = Command(name='plan', help='samples, measured throughput and projected time of a '
                  'calibration', run=_plan, print_human=_print, order=4, runs_monte_carlo=False,
                  add_arguments=_add_arguments, check_arguments=_check_arguments)
