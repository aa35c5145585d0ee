"""``jaxacct estimate CONFIG``: the config's δ(ε) — a Monte Carlo estimate (``estimate_delta``,
both directions with standard errors) or, with a deterministic accountant, the proven δ(ε)
and ε(δ), written to ``<report root>/estimate/`` (``_folders.output_dir``): ``estimate.json``
and ``delta_hat.png`` (Monte Carlo) or ``delta.png`` (deterministic)."""

from __future__ import annotations

import time

import jax

from jaxacct import config as config_lib
from jaxacct import report
from jaxacct.deterministic import accountant as deterministic
from jaxacct.mechanism import DIRECTIONS
from jaxacct.montecarlo.evr import plan as plan_lib
from jaxacct.montecarlo.evr import precision as precision_lib
from jaxacct.montecarlo.evr.estimator import estimate_delta
from jaxacct.options import MonteCarloOptions
from jaxacct.cli.common import (Command, check_deterministic_budget, check_state_files,
                                deterministic_curve, estimate_max_seconds, print_deterministic,
                                print_footer, refuse_over_budget, reporter, run_options,
                                run_precision, say_precision)
from jaxacct.cli._folders import (keep_only, output_dir, write_on_leader)


def _report_queries(args, curve, epsilons, target):
  """The report's queries of a deterministic curve, in the run's order: ε(target δ), the
  figure's points and the δ(ε) table (both directions). ``args`` None: no progress (a plan's
  replay, ``check_deterministic_budget``)."""
  released = None if target is None else curve.epsilon_for_delta(target)
  # The figure's points first: their ε(δ) on fixed δ (decades and half decades) are the
  # brackets every δ(ε) search of the table starts from, so the table reuses them.
  figure = deterministic_curve(args, curve, epsilons, released, target)
  table = None if args is None else reporter(args, unit='queries')
  by_direction = {d: [] for d in DIRECTIONS}
  for i, (e, d) in enumerate(((e, d) for e in epsilons for d in DIRECTIONS), start=1):
    by_direction[d].append(curve.delta_for_epsilon(e, direction=d))
    if table is not None:
      table(i, len(epsilons) * len(DIRECTIONS), 'δ(ε) table')
  return released, figure, by_direction


def _estimate_deterministic(args, raw, mechanism, name: str) -> dict:
  adjacency = config_lib.setting(raw, 'adjacency')
  options = config_lib.accountant_options(raw)
  epsilons = [float(e) for e in config_lib.setting(raw, 'monte_carlo.epsilons')]
  curve = deterministic.privacy_curve(mechanism, accountant=name, adjacency=adjacency, **options)
  target = raw.get('calibration', {}).get('delta')
  projected = check_deterministic_budget(
      args, curve, lambda replayed: _report_queries(None, replayed, epsilons, target), figures=1)
  started = time.perf_counter()  # the run the plan projects: the queries and the figure
  released, figure, by_direction = _report_queries(args, curve, epsilons, target)
  if isinstance(curve, deterministic.TightestCurve):  # auto: name the one that gave ε(δ)
    name = curve.chosen(target) if target is not None else config_lib.AUTO
  payload = {
      'noise_multiplier': float(mechanism.noise_multiplier),
      'epsilon': released,
      'delta': target, 'verified': True, 'method': 'deterministic', 'adjacency': adjacency,
      'accountant': name, 'num_samples': 0, 'seed': None, 'epsilons': epsilons,
      'delta_of_epsilon': [max(pair) for pair in zip(*by_direction.values())],
      'delta_of_epsilon_by_direction': by_direction,
      'accountant_options': options,
      'explanation': None if target is None else curve.explain(target),
  }
  payload['curve'] = figure
  folder = output_dir(args, raw)
  write_on_leader(report.write_json, folder, 'estimate.json', payload)
  write_on_leader(report.plot_delta_curve, folder, payload['curve']['epsilons'],
                  payload['curve']['delta'],
                  f'{report.describe(mechanism)}\nδ(ε) by {name} ({adjacency})',
                  released=None if target is None else (payload['epsilon'], target),
                  point_label='proven')
  if projected is not None:
    payload['plan_check'] = {'projected_seconds': projected,
                             'measured_seconds': time.perf_counter() - started}
    write_on_leader(report.write_json, folder, 'estimate.json', payload)
  keep_only(args, folder, ('estimate.json', 'delta.png'))
  payload['report'] = str(folder)
  return payload


def _estimate(args, raw) -> dict:
  mechanism = config_lib.mechanism_from(raw)
  name = config_lib.accountant_choice(raw, mechanism.scheme, mechanism.matrix).name
  if name != config_lib.MONTE_CARLO:
    return _estimate_deterministic(args, raw, mechanism, name)
  mc = raw.get('monte_carlo', {})
  num_samples = int(config_lib.setting(raw, 'monte_carlo.num_samples'))
  seed = int(config_lib.setting(raw, 'monte_carlo.seed'))
  epsilons = [float(e) for e in config_lib.setting(raw, 'monte_carlo.epsilons')]
  if 'precision' in mc and mc.get('dtype', 'float64') != 'float64':
    raise config_lib.ConfigError('give monte_carlo.precision or its legacy spelling '
                                 'monte_carlo.dtype, not both')
  if 'precision' in mc or 'dtype' in mc:  # dtype: float32 is the 32-bit program too
    choice = precision_lib.choose(mc.get('precision', mc.get('dtype')), mechanism)
  else:
    choice = run_precision(raw, mechanism)
  say_precision(choice)
  check_state_files(args, raw, ledger=False)
  grid = report.curve_epsilons(epsilons)  # the table's ε and a fine grid for the plot
  try:
    result = estimate_delta(jax.random.key(seed), mechanism, grid, num_samples,
                            monte_carlo=MonteCarloOptions(precision=choice.precision),
                            run=run_options(
                                args, reporter(args), max_seconds=estimate_max_seconds(
                                    args, mechanism, num_samples)))
  except plan_lib.OverBudgetError as refusal:  # timed by the library before any sample
    refuse_over_budget(args, f'the Monte Carlo estimate (monte_carlo.num_samples = '
                        f'{num_samples:,}, {choice.precision})', refusal.seconds,
                        'use fewer samples, ')
    raise
  target = raw.get('calibration', {}).get('delta')
  # The (ε, δ) marked is one the samples resolve: δ̂ + 2·s.e. below δ, δ above 3/N.
  resolution = None if target is None else result.resolved_epsilon(target)
  eps_hat = None if resolution is None else resolution.epsilon
  scheme = mechanism.scheme.to_dict()
  payload = {
      'noise_multiplier': float(mechanism.noise_multiplier),
      'epsilon': eps_hat, 'delta': target, 'verified': False, 'method': 'estimate',
      'accountant': config_lib.MONTE_CARLO,
      'conjectural': mechanism.scheme.conjectural, 'bounded': mechanism.bounded,
      'scheme': scheme, 'sampling_prob': scheme.get('sampling_prob'),  # None: no p
      'expected_participation_rate': mechanism.scheme.expected_participation_rate,
      'seed': seed, 'precision': choice.precision, 'precision_reason': choice.reason,
      'resolution': None if resolution is None else resolution._asdict(),
      **result.to_dict(epsilons),  # the table's rows: epsilons, delta_hat, standard_error, N
      'curve': result.to_dict(),
  }
  folder = output_dir(args, raw)
  write_on_leader(report.write_json, folder, 'estimate.json', payload)
  write_on_leader(report.plot_delta_hat, folder, result.epsilons, result.delta_hat,
                  result.standard_error,
                  f'{report.describe(mechanism)}, N = {num_samples:,} per direction\nMonte Carlo '
                  'estimate (not a guarantee)', num_samples=num_samples,
                  released=None if eps_hat is None else (eps_hat, target),
                  point_label='estimated')
  keep_only(args, folder, ('estimate.json', 'delta_hat.png'))
  payload['report'] = str(folder)
  return payload


def _print(payload: dict) -> None:
  if payload['method'] == 'deterministic':
    print_deterministic(payload, table=True)
  else:
    print(f'noise_multiplier σ = {payload["noise_multiplier"]}, {payload["num_samples"]:,} '
          f'samples per direction, seed {payload["seed"]} (Monte Carlo estimate, not a guarantee'
          + ('; CONJECTURAL: rests on Conjecture 6.2' if payload.get('conjectural') else '')
          + ('; App. B BOUNDS: upper bounds on δ̂' if payload.get('bounded') else '') + ')')
    floor = 3.0 / payload['num_samples']  # below it δ̂ says nothing (the rule of three)
    print(f'{"epsilon":>8}  {"delta_hat remove":>24}  {"delta_hat add":>24}')
    for i, eps in enumerate(payload['epsilons']):
      cells = [f'{payload["delta_hat"][d][i]:.4e} ± {payload["standard_error"][d][i]:.1e}'
               if payload['delta_hat'][d][i] >= floor else f'< {floor:.1e} (3/N)'
               for d in DIRECTIONS]
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
