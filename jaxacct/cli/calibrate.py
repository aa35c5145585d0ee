"""``jaxacct calibrate CONFIG``: the smallest σ passing Estimate-Verify-Release
(``calibrate_noise_multiplier``) at the config's (ε, δ), or a deterministic accountant's
smallest σ (``calibrate_deterministic``), with its report curve and figures, written to
``<report root>/calibrate/`` (``_folders.output_dir``): ``calibration.json`` first (the released
σ and its ledger charge), then ``delta_hat.png`` and ``candidates.png`` (Monte Carlo) or
``delta.png`` (deterministic).

``--estimate-only`` stops after the estimation sweeps: the estimated σ̂ with its range and the
verification plan (``calibrate_noise_multiplier(..., estimate_only=True)``), labelled "estimate,
not a guarantee" in its printed lines, its JSON (``"verified": false``, ``"estimate_only":
true``) and its figures, written as ``calibration_estimate.json``, ``candidates_estimate.png``
and ``delta_hat_estimate.png`` in a folder of their own, ``<report root>/calibrate-estimate/``
(never beside or over a verified calibration's files; the names say "estimate" wherever the
files are copied). The ledger is not charged; the budget (``--max-minutes``) is the
estimate's.
"""

from __future__ import annotations

import argparse
import time

import jax

from jaxacct import accounting
from jaxacct import config as config_lib
from jaxacct import report
from jaxacct.conventions import Purpose
from jaxacct.deterministic import curve_report
from jaxacct.mechanism import MatrixMechanism
from jaxacct.conventions import DIRECTIONS
from jaxacct.options import MonteCarloOptions
from jaxacct.montecarlo.evr import calibration as calibration_lib
from jaxacct.montecarlo.engine import keys as keys_lib
from jaxacct.montecarlo.evr import plan as plan_lib
from jaxacct.montecarlo.evr.calibration import CalibrationRecord
from jaxacct.montecarlo.evr import tilted_search
from jaxacct.montecarlo.evr.estimator import estimate_delta
from jaxacct.progress import format_seconds
from jaxacct.cli.common import (CALIBRATION_OPTIONS, Command, budget_seconds, reporter, calibrated,
                                calibration_section, check_state_files, print_deterministic,
                                print_footer,
                                refuse_over_budget, run_options, run_precision, say_precision,
                                scheme_and_matrix, with_prefix_error)
from jaxacct.cli.plan import check_budget, plan_mechanism
from jaxacct.cli._folders import (keep_only, output_dir, write_on_leader)

# The calibration options of the config that the library takes (as common.calibrated).
_OPTIONS = CALIBRATION_OPTIONS


def _calibrate(args, raw) -> dict:
  if args.estimate_only:
    return _estimate(args, raw)
  calibration_section(raw)  # a config error before the strategy is built
  stand_in, _ = plan_mechanism(raw)  # an optimised band is built after the checks below
  choice = config_lib.accountant_choice(raw, stand_in.scheme, stand_in.matrix)  # once per run
  check_state_files(args, raw, ledger=choice.monte_carlo, mechanism=stand_in)
  projected = check_budget(args, raw, choice)
  started = time.perf_counter()  # the run the plan projects: calibration and report curve
  with calibration_lib.planned_by_caller():  # check_budget printed the plan
    mechanism, g, payload, found = calibrated(args, raw, *scheme_and_matrix(raw), choice)
  with_prefix_error(mechanism, payload)
  folder = output_dir(args, raw)
  # The released σ and its guarantee first (atomically), the curve and the figures after.
  write_on_leader(report.write_json, folder, 'calibration.json', payload)
  title = f'{report.describe(mechanism)} (released σ)' + (
      f', float32 program (margin η ≤ {g.margin:.1e})' if g.margin is not None else '')
  if isinstance(found, CalibrationRecord):
    # δ̂(ε) at the released σ on a fine ε grid, from the report stream (fresh draws, as many
    # as one estimation sweep): an illustration of the released σ, not part of the guarantee
    # (a tilted search that decided every σ by its bounds drew none: the curve still gets
    # the smallest estimate the search would have drawn)
    curve_samples = max(found.estimation_samples, tilted_search.MIN_DEFAULT_SAMPLES)
    _report_curve(args, raw, folder, payload, mechanism, curve_samples,
                  g.precision, 'report-curve',
                  f'{title}\nδ̂(ε) from {curve_samples:,} fresh samples per '
                  f'direction; verified with N = {g.num_samples:,}',
                  released=(g.epsilon, g.delta), threshold=g.base_delta)
    per_direction = None if g.tilt is None else {
        d: f'{n:,} ({g.tilt["proposal"][d]})' for d, (n, _) in g.tilt['directions'].items()}
    write_on_leader(report.plot_candidates, folder, found, g.noise_multiplier, title,
                    per_direction=per_direction)
    written = ('calibration.json', 'delta_hat.png', 'candidates.png')
  else:
    payload['curve'] = curve_report.figure_points(found, [g.epsilon], delta=g.delta,
                                                  released=g.epsilon,
                                                  progress=reporter(args, unit='points'))
    write_on_leader(report.plot_delta_curve, folder, payload['curve']['epsilons'],
                    payload['curve']['delta'], f'{title}\nproven δ(ε) by {g.accountant}',
                    released=(g.epsilon, g.delta))
    written = ('calibration.json', 'delta.png')
  payload['plan_check'] = {'projected_seconds': projected,
                           'measured_seconds': time.perf_counter() - started}
  write_on_leader(report.write_json, folder, 'calibration.json', payload)
  keep_only(args, folder, written)
  payload['report'] = str(folder)
  return payload


def _report_curve(args, raw, folder, payload: dict, mechanism, samples: int, precision: str,
                  part: str, title: str, *, released, **plot) -> None:
  """δ̂(ε) at ``mechanism``'s σ on a fine ε grid around ``released`` ε, from the REPORT stream of
  the calibration's seed (fresh draws, ``samples`` per direction, as many as one estimation
  sweep): an illustration of the released (or estimated) σ, not part of any guarantee. Adds
  ``payload['curve']`` and draws ``delta_hat*.png``; ``part`` is its checkpoint subfolder."""
  key = keys_lib.purpose_key(jax.random.key(int(config_lib.setting(raw, 'calibration.seed'))),
                             Purpose.REPORT)
  curve = estimate_delta(key, mechanism, report.curve_epsilons([released[0]]), samples,
                         monte_carlo=MonteCarloOptions(precision=precision),
                         run=run_options(args, reporter(args, 'report curve'), part))
  payload['curve'] = curve.to_dict()
  write_on_leader(report.plot_delta_hat, folder, curve.epsilons, curve.delta_hat,
                  curve.standard_error, title, num_samples=samples, released=released, **plot)


def _estimate(args, raw) -> dict:
  """``--estimate-only``: σ̂, its range and the verification plan, its report curve (δ̂(ε) at
  σ̂ from the report stream, as a verified calibration's) and figures; nothing is verified or
  charged. The library plans the run (for the verification plan) and refuses, before any
  sweep, an estimate projected over --max-minutes unless --force."""
  cal = calibration_section(raw)
  stand_in, _ = plan_mechanism(raw)
  accountant = config_lib.accountant_choice(raw, stand_in.scheme, stand_in.matrix)
  if not accountant.monte_carlo:
    raise config_lib.ConfigError(
        f'--estimate-only estimates σ by Monte Carlo, and this config is accounted by '
        f'{accountant.name}: `jaxacct calibrate {args.config}` proves its σ directly')
  check_state_files(args, raw, ledger=False)
  scheme, matrix = scheme_and_matrix(raw)
  seed = int(config_lib.setting(raw, 'calibration.seed'))
  options = config_lib.library_keywords(raw, 'calibration', _OPTIONS)
  choice = run_precision(raw, MatrixMechanism(scheme, matrix, 1.0))
  say_precision(choice)
  budget = budget_seconds(args)  # the estimate's own (--force lifts only the default)
  started = time.perf_counter()
  try:
    result = accounting.calibrate(
        scheme, matrix, epsilon=float(cal['epsilon']), delta=float(cal['delta']), key=seed,
        accountant=accountant, adjacency=accountant.adjacency, monte_carlo=MonteCarloOptions(
            precision=choice.precision, estimate_only=True, **options),
        run=run_options(args, reporter(args), max_seconds=budget))
  except plan_lib.OverBudgetError as refusal:  # projected by the library before any sweep
    refuse_over_budget(args, refusal.run, refusal.seconds,
                       'use fewer calibration.estimation_samples (a wider range), ')
    raise
  estimate, mechanism = result.estimate, result.mechanism
  payload = {**result.to_dict(), 'seed': seed, 'seconds': time.perf_counter() - started,
             'precision_reason': choice.reason, 'config': args.config}
  # the library's hint names its Python call; the CLI's names the command for this config
  payload['estimate']['verification']['accelerator_hint'] = (
      f'accelerators (TPU/GPU) run the float32 program: `jaxacct plan {args.config}` projects '
      'it')
  with_prefix_error(mechanism, payload)
  folder = output_dir(args, raw)
  write_on_leader(report.write_json, folder, 'calibration_estimate.json', payload)
  title = (f'{report.describe(mechanism)}\nestimated σ̂'
           + (', float32 program' if choice.precision == 'float32' else ''))
  _report_curve(args, raw, folder, payload, mechanism, estimate.estimation_samples,
                choice.precision, 'report-curve-estimate',
                f'{title}\nδ̂(ε) from {estimate.estimation_samples:,} fresh samples per '
                f'direction; nothing verified',
                released=(estimate.epsilon, float(cal['delta'])),
                threshold=estimate.base_delta, point_label='estimated',
                name='delta_hat_estimate.png', banner=estimate.label)
  write_on_leader(report.plot_candidates, folder, result.record, estimate.noise_multiplier,
                  title, estimate=estimate.to_dict(), name='candidates_estimate.png')
  payload['plan_check'] = {'projected_seconds': estimate.seconds_here,
                           'measured_seconds': time.perf_counter() - started}
  write_on_leader(report.write_json, folder, 'calibration_estimate.json', payload)
  payload['report'] = str(folder)
  return payload


def _print_estimate(payload: dict) -> None:
  """σ̂, its range and what verifying it takes, each line saying it is an estimate."""
  estimate = payload['estimate']
  plan = estimate['verification']
  print(f'estimated noise_multiplier σ̂ = {estimate["noise_multiplier"]:.6g}, range '
        f'[{estimate["low"]:.6g}, {estimate["high"]:.6g}], at (ε, δ) = ({payload["epsilon"]}, '
        f'{payload["delta"]:.4g}) [{estimate["label"]}: estimation δ̂(ε) ≤ δ_b = '
        f'{estimate["base_delta"]:.4g} on {estimate["estimation_samples"]:,} samples per '
        f'direction, ±2 s.e.; verified={payload["verified"]}; seed {payload["seed"]}; '
        f'took {payload["seconds"]:.1f} s]')
  if not estimate['high_resolved']:
    print(f'  ({estimate["label"]}: no σ below the fallback σ_up = {estimate["high"]:.6g} is '
          f'resolved to pass; ≥ {estimate["needed_samples"]:,} estimation samples per '
          f'direction would resolve it: --set calibration.estimation_samples=N)')
  print(f'to verify it (Estimate-Verify-Release, charged in the attempt ledger): N = '
        f'{plan["num_samples"]:,} samples per direction × {plan["candidates"]} candidates '
        f'({plan["draws"]:,} draws, one pass), projected '
        f'{format_seconds(plan["seconds_here"])} here on {plan["devices_here"]} '
        f'{plan["backend"]} device(s) in {plan["precision"]}; the whole verified calibration '
        f'{format_seconds(plan["calibration_seconds_here"])}: `jaxacct calibrate '
        f'{payload.get("config", "CONFIG")}`')
  print(f'  {plan["accelerator_hint"]}')


def _print(payload: dict) -> None:
  if payload.get('estimate_only'):
    _print_estimate(payload)
  elif payload['method'] == 'deterministic':
    print_deterministic(payload, table=False)
  else:
    print(f'noise_multiplier σ = {payload["noise_multiplier"]:.6g} is ({payload["epsilon"]}, '
          f'{payload["delta"]:.4g})-DP [{payload["method"]}'
          + (f' by {payload["accountant"]}' if payload.get('accountant') else '')
          + f'; verified={payload["verified"]}; '
          + ('App. B loss bounds (upper bound); ' if payload.get('bounded') else '')
          + (f'float32 program, certified margin η ≤ {payload["margin"]:.2g}; '
             if payload.get('precision') == 'float32' and payload.get('margin') is not None
             else '')
          + _samples_text(payload) + f', base δ '
          f'{payload["base_delta"]:.4g}, seed {payload["seed"]}; took '
          f'{payload["seconds"]:.1f} s]')
  print_footer(payload)


def _samples_text(payload: dict) -> str:
  """The verification's samples: one N per direction, or per direction with the tilt."""
  tilt = payload.get('tilt')
  if not tilt:
    return f'{payload["num_samples"]:,} verification samples per direction'
  parts = [f'{d} {tilt["directions"][d][0]:,} ({tilt["proposal"][d]})' for d in DIRECTIONS]
  return f'verification samples (α = {tilt["tilt_order"]}): ' + ', '.join(parts)


def _add_arguments(parser: argparse.ArgumentParser) -> None:
  parser.add_argument('--estimate-only', action='store_true',
                      help='stop after the estimation sweeps: an estimated σ with its range '
                           'and the verification plan (an estimate, not a guarantee; the '
                           'ledger is not charged), written to calibration_estimate.json, '
                           'candidates_estimate.png and delta_hat_estimate.png in the report '
                           'folder calibrate-estimate/')


COMMAND = Command(name='calibrate', help='smallest σ verified by Estimate-Verify-Release',
                  run=_calibrate, print_human=_print, order=2,
                  charges_ledger=True, add_arguments=_add_arguments)
