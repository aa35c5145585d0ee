"""What the ``jaxacct`` subcommands share: the ``Command`` shape, progress on stderr, the
Monte Carlo budget and capacity plan, output and state-file checks, the calibration of
``calibrate`` and ``train``, and the shared printing."""

from __future__ import annotations

import argparse
import dataclasses
import json
import pathlib
import sys
import time
from typing import Callable

import jax
import numpy as np

from jaxacct import accounting
from jaxacct import config as config_lib
from jaxacct import progress as progress_lib
from jaxacct import report
from jaxacct.deterministic import accountant as deterministic
from jaxacct.deterministic import curve_plan
from jaxacct.mechanism import MatrixMechanism
from jaxacct.montecarlo.evr import checkpoint as checkpoint_lib
from jaxacct.montecarlo.evr import verification
from jaxacct.montecarlo.engine import keys as keys_lib
from jaxacct.montecarlo.evr import ledger as ledger_lib
from jaxacct.montecarlo.evr import plan as plan_lib
from jaxacct.montecarlo.evr import precision as precision_lib
from jaxacct.montecarlo.engine import sharding
from jaxacct.options import MonteCarloOptions, RunOptions
from jaxacct.cli._folders import (report_root, ledger_path)


def reporter(args, label: str | None = None, unit: str = 'samples') -> progress_lib.Reporter:
  """The run's progress on stderr (``jaxacct.progress.Reporter``, process 0 only): a tqdm bar
  on a terminal; with ``--json`` or off a terminal, a plain line every 30 s."""
  return progress_lib.Reporter(label, unit=unit, terminal=sys.stderr.isatty() and not args.json)


DEFAULT_MAX_MINUTES = 30.0


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


def budget_seconds(args) -> float | None:
  """The time budget of a run in seconds: an explicit ``--max-minutes`` always (``--force``
  never overrides a budget the user wrote), else the default 30 minutes unless ``--force``
  (None: no budget)."""
  if args.max_minutes is not None:
    return 60.0 * args.max_minutes
  return None if args.force else 60.0 * DEFAULT_MAX_MINUTES


def refuse_over_budget(args, run: str, seconds: float, advice: str,
                       accelerator: bool = True) -> None:
  """ConfigError when ``run`` is projected over ``--max-minutes`` (default 30; ``--force``
  lifts only the default, ``budget_seconds``)."""
  explicit = args.max_minutes is not None
  budget = args.max_minutes if explicit else DEFAULT_MAX_MINUTES
  lift = ('pass a larger --max-minutes to run it anyway (--force does not lift a '
          '--max-minutes you give)' if explicit
          else 'pass --force (or a larger --max-minutes) to run it anyway')
  try:
    plan_lib.refuse_over_budget(
        run, seconds, budget_seconds(args),
        budget=f'the --max-minutes budget of {budget:g} min',
        advice=lift + (f', {advice}or run it on an accelerator' if accelerator
                       else (f', or {advice.rstrip(", ")}' if advice else '')))
  except plan_lib.OverBudgetError as refusal:
    raise config_lib.ConfigError(str(refusal)) from None


def check_deterministic_budget(args, curve, queries, figures: int) -> float | None:
  """Before a deterministic report whose queries compose new PLDs (MMCC, conditional
  composition): print its plan on stderr (``deterministic.curve_plan``: the run's queries
  replayed on a coarse copy of the curve count the compositions, two full ones timed at the
  ends of δ_E, which the run keeps, price them) and refuse it over ``--max-minutes`` (default
  30; ``--force`` lifts only the default). Returns the projected seconds of the run after the
  plan, ``figures`` figures included (None: the curve's queries are cheap, nothing is
  planned). The replay and the timed compositions are announced on stderr as they start (a
  replay can take a minute)."""
  plan = curve_plan.plan_queries(curve, queries, progress=reporter(args))
  if plan is None:
    return None
  projected = plan.projected_seconds + figures * figure_seconds([1.0, 2.0])
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


# Below this many sample-rounds × bands an estimate runs in minutes at most on a CPU, so it
# starts without a throughput probe (the probe compiles and times a block: a few seconds).
_ESTIMATE_PROBE_WORK = 1e10


def estimate_max_seconds(args, mechanism, num_samples: int) -> float | None:
  """The ``max_seconds`` of a Monte Carlo estimate: ``budget_seconds`` (``--max-minutes``,
  default 30, which ``--force`` lifts unless given) for one large enough to time first, None
  (nothing timed or refused) for a small one or no budget. An estimate that is not timed first
  is announced on stderr here, since its first call compiles the program without a line (a
  timed one is announced by the probe, ``plan.program_seconds``)."""
  work = 2.0 * num_samples * mechanism.iterations * mechanism.matrix.num_bands
  seconds = None if work <= _ESTIMATE_PROBE_WORK else budget_seconds(args)
  if seconds is None:
    progress_lib.announce(reporter(args), f'estimate: {num_samples:,} samples per direction '
                                          f'of n = {mechanism.iterations:,} rounds, starting '
                                          '(its first call may compile the program)…')
  return seconds


def deterministic_curve(args, curve, epsilons, released: float | None,
                        target: float | None) -> dict:
  """The report's proven (ε(δ), δ) points (``deterministic.report_curve``) down to 10⁻⁶ of the
  target δ (the figure shows no less), with progress on stderr (none with ``args`` None: a
  plan's replay)."""
  shown = [float(e) for e in epsilons] + (
      [released] if released is not None and np.isfinite(released) else [])
  return deterministic.report_curve(
      curve, shown, floor=1e-6 * target if target else 1e-20,
      progress=None if args is None else reporter(args, unit='points'))


def scheme_and_matrix(raw) -> tuple:
  """(scheme, matrix) of the config, built once (an optimised band costs an L-BFGS run)."""
  scheme = config_lib.scheme_from(raw)
  return scheme, config_lib.matrix_from(raw, scheme.iterations)


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
  """The capacity plan of the config's Monte Carlo calibration (``montecarlo/evr/plan.py``), timed
  for ``precisions`` (the run's own precision is always among them)."""
  cal = calibration_section(raw)
  mechanism, note = plan_mechanism(raw)
  options = config_lib.library_keywords(raw, 'calibration', (
      'num_samples', 'base_delta', 'estimation_samples', 'num_candidates', 'fallback',
      'attempt'))  # N for the declared attempt (the ledger's earlier runs are not read here)
  run = run_precision(raw, mechanism).precision
  # calibrate's report curve after the calibration (its grid: calibrate.py)
  report_epsilons = report.curve_epsilons([float(cal['epsilon'])])
  plans, refusal = {}, None
  for name in sorted(set(precisions) | {run}, key=('float64', 'float32').index):
    try:
      plans[name] = plan_lib.capacity_plan(
          mechanism, epsilon=float(cal['epsilon']), delta=float(cal['delta']),
          target_devices=getattr(args, 'devices', None),
          samples_per_second=getattr(args, 'samples_per_second', None),
          report_epsilons=report_epsilons,
          monte_carlo=MonteCarloOptions(precision=name, **options)).to_dict()
    except ValueError as refused:
      if name != 'float32' or name == run:
        raise
      refusal = str(refused)  # the 32-bit program does not serve this mechanism
  figures = figure_seconds(report_epsilons)
  for plan in plans.values():  # calibrate then draws its two figures (δ̂(ε), candidates)
    plan['figure_seconds'] = CALIBRATION_FIGURES * figures
    plan['seconds_after_plan'] += CALIBRATION_FIGURES * figures
    plan['seconds_here'] += CALIBRATION_FIGURES * figures
    plan['seconds_on_target'] += CALIBRATION_FIGURES * figures
  payload = {'plan': plans[run], 'plans': plans, 'precision': run, 'float32_refusal': refusal,
             'stand_in': note, 'epsilon': float(cal['epsilon']),
             'delta': float(cal['delta']), 'backend': jax.default_backend()}
  return payload


CALIBRATION_FIGURES = 2


def figure_seconds(epsilons=(1.0, 2.0)) -> float:
  """Seconds to draw and write one report figure here, timed on a figure like calibrate's
  δ̂(ε) (into a temporary folder): the first drawing imports matplotlib, which the run then
  finds imported, so the second one is the figure's own cost."""
  import tempfile  # pylint: disable=import-outside-toplevel
  eps = np.asarray(epsilons, float)
  curve = {d: np.exp(-eps) for d in ('remove', 'add')}
  spread = {d: 0.01 * np.exp(-eps) for d in ('remove', 'add')}
  with tempfile.TemporaryDirectory() as folder:
    seconds = []
    for _ in range(2):
      start = time.perf_counter()
      report.plot_delta_hat(pathlib.Path(folder), eps, curve, spread, 'plan', num_samples=1000,
                            released=(float(eps[len(eps) // 2]), 1e-3), threshold=5e-4)
      seconds.append(time.perf_counter() - start)
  return seconds[-1]


def print_plan(payload: dict, file=None) -> None:
  plan = payload['plan']
  file = sys.stdout if file is None else file
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
  print(f'  this run: {payload.get("precision", "float64")} (monte_carlo.precision)', file=file)
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


def calibration_section(raw) -> dict:
  cal = raw.get('calibration')
  if not cal or 'epsilon' not in cal or 'delta' not in cal:
    raise config_lib.ConfigError('calibrate needs calibration.epsilon and calibration.delta')
  return cal


def run_options(args, progress: progress_lib.Reporter, part: str | None = None, **fields) -> RunOptions:
  """The ``RunOptions`` of a Monte Carlo run: ``progress``, and ``--checkpoint`` /
  ``--checkpoint-interval`` (``part`` names a subfolder for a second run of the same command,
  calibrate's report curve), plus ``fields`` (ledger, max_seconds)."""
  if args.checkpoint is not None:
    fields['checkpoint'] = (args.checkpoint if part is None
                            else str(pathlib.Path(args.checkpoint) / part))
    fields['checkpoint_interval'] = args.checkpoint_interval
  return RunOptions(progress=progress, **fields)


# The reports under a report root that may record a ledger charge, and the keys of the charge
# in each: calibrate's, train's calibration, and calibrate's in the layout before
# report_schema 3 (every command in the root itself).
_CHARGE_RECORDS = ((('calibrate', 'calibration.json'), ('charge',)),
                   (('train', 'training.json'), ('calibration', 'charge')),
                   (('calibration.json',), ('charge',)))


def check_state_files(args, raw, *, ledger: bool, mechanism: MatrixMechanism | None = None
                      ) -> None:
  """Before any compute or throughput probe: the checkpoint file (``--checkpoint``) reads and
  has its format's structure; with ``ledger`` (a Monte Carlo calibration) the attempt ledger
  opens, a calibration report already under the report root (``calibrate``'s or ``train``'s
  folder, or the root itself in the layout before report_schema 3) that records a ledger
  charge finds it in that ledger (``ledger.check_recorded_charge``), and an undeclared retry
  of ``mechanism``'s guarantee is refused (``verification.check_retry``)."""
  if args.checkpoint:
    checkpoint_lib.check_file(args.checkpoint)
  if not ledger:
    return
  root = report_root(args, raw)

  def check():
    opened = ledger_lib.FileLedger(ledger_path(args))  # a LedgerError is refused as it is
    if mechanism is not None:
      _check_retry(opened, raw, mechanism)
    for parts, keys in _CHARGE_RECORDS:
      path = root.joinpath(*parts)
      if not path.exists():
        continue
      try:
        charge = json.loads(path.read_text())
        for key in keys:
          charge = charge.get(key) if charge is not None else None
      except (OSError, ValueError, AttributeError):
        raise config_lib.ConfigError(
            f'the earlier report {str(path)!r} cannot be read, and it may record a ledger '
            'charge: move it away (or use another --out) to calibrate again') from None
      ledger_lib.check_recorded_charge(opened, charge, f'report {str(path)!r}')
  sharding.on_leader(check)


def _check_retry(ledger, raw, mechanism) -> None:
  """``verification.sample_size`` for the config's calibration, before any compute: an
  undeclared retry, or given samples too few for the declared attempt, are refused (an
  ``auto`` precision, decided by measuring, matches any recorded precision)."""
  cal = calibration_section(raw)
  given = config_lib.library_keywords(raw, 'calibration', ('num_samples', 'base_delta',
                                                           'shared_draws', 'attempt'))
  defaults = MonteCarloOptions(**given)
  precision = config_lib.calibration_precision(raw) or defaults.precision
  seed = int(config_lib.setting(raw, 'calibration.seed'))
  verification.sample_size(
      ledger, mechanism, epsilon=float(cal['epsilon']), delta=float(cal['delta']),
      key_data=keys_lib.key_words(jax.random.key(seed)), num_samples=given.get('num_samples'),
      base_delta=given.get('base_delta'),
      shared_draws=defaults.shared_draws,
      precision=None if precision == 'auto' else precision, attempt=defaults.attempt)


def calibrated(args, raw, scheme, matrix, choice) -> tuple:
  """(mechanism, guarantee, payload, EVR record or the deterministic curve) at the config's
  (ε, δ): ``jaxacct.calibrate`` with the config's request and the run's ``choice``
  (``config.accountant_choice``, made once); the CLI adds its context (seed, seconds, ledger
  file, precision reason) to the result's own ``to_dict``."""
  cal = calibration_section(raw)
  started = time.perf_counter()
  request = dict(epsilon=float(cal['epsilon']), delta=float(cal['delta']), accountant=choice,
                 adjacency=choice.adjacency)
  if not choice.monte_carlo:
    options = config_lib.accountant_options(raw)
    result = accounting.calibrate(scheme, matrix, **request, accountant_options=options,
                                  run=RunOptions(progress=reporter(args, unit='probes')))
    g = result.guarantee
    # auto: every accountant's ε at the calibrated σ, so the report shows which ran and why
    # the named one was chosen
    payload = {**g.to_dict(), 'accountant_options': options,
               'explanation': result.explain()['curve'],
               'seconds': time.perf_counter() - started}
    return result.mechanism, g, payload, result.curve
  seed = int(config_lib.setting(raw, 'calibration.seed'))
  options = config_lib.library_keywords(raw, 'calibration', (
      'num_samples', 'base_delta', 'grid_ratio', 'shared_draws', 'estimation_samples',
      'num_candidates', 'fallback', 'attempt'))
  ledger = ledger_path(args)
  choice = run_precision(raw, MatrixMechanism(scheme, matrix, 1.0))
  say_precision(choice)
  result = accounting.calibrate(
      scheme, matrix, **request, key=seed,
      monte_carlo=MonteCarloOptions(precision=choice.precision, **options),
      run=run_options(args, reporter(args), ledger=ledger_lib.ledger_from(ledger)))
  # The config's seed replaces the guarantee's key words (those of jax.random.key(seed)).
  payload = {**result.to_dict(), 'seed': seed, 'seconds': time.perf_counter() - started,
             'ledger': str(ledger), 'precision_reason': choice.reason}
  return result.mechanism, result.guarantee, payload, result.record


def run_precision(raw, mechanism, section: str = 'calibration') -> precision_lib.PrecisionChoice:
  """The device program of a Monte Carlo run: ``calibration.precision`` (``section``
  ``monte_carlo``: ``estimate``'s ``monte_carlo.precision``), default float64."""
  precision = (config_lib.calibration_precision(raw) if section == 'calibration'
               else raw.get(section, {}).get('precision'))
  if precision is None:
    return precision_lib.PrecisionChoice(
        'float64', f'the default; {section}.precision: auto or float32 selects the 32-bit '
        'program')
  return precision_lib.choose(precision, mechanism)


def say_precision(choice: precision_lib.PrecisionChoice) -> None:
  if sharding.is_leader():
    print(f'precision: {choice.precision} ({choice.reason})', file=sys.stderr)


def with_prefix_error(mechanism, payload: dict) -> dict:
  """Adds the prefix-sum MSE ‖A C⁻¹‖_F²·σ²/n (Dong & Ganesh, arXiv 2602.09338, §7.1: compare
  correlated-noise strategies at equal ε) — not for one band (DP-SGD, C = c·I), where it
  compares nothing."""
  if mechanism.matrix.num_bands > 1:
    payload['prefix_sum_mse'] = (mechanism.matrix.prefix_error(mechanism.iterations)
                                 * mechanism.noise_multiplier**2)
  return payload


@dataclasses.dataclass(frozen=True)
class Command:
  """One subcommand of ``jaxacct``: a module of this package defining ``COMMAND`` is one.

  Attributes:
    name: the subcommand (``jaxacct <name> CONFIG``).
    help: one line for ``jaxacct --help`` and its own ``--help``.
    run: ``run(args, raw_config) -> payload`` (JSON-ready; ``--json`` prints it).
    print_human: prints the payload for a person (without ``--json``).
    order: its place in ``jaxacct --help``.
    runs_monte_carlo: takes ``--checkpoint``, ``--checkpoint-interval``, ``--max-minutes`` and
      ``--force``, and refuses an accelerator-scale config on CPU without ``--force``.
    charges_ledger: takes ``--ledger`` (a Monte Carlo calibration charges the attempt ledger).
    options_section: the config section of its Monte Carlo options (``calibration``, or
      ``monte_carlo`` for ``estimate``): refusals name ``monte_carlo.X`` as its key.
    add_arguments: adds the subcommand's own flags to its parser.
    check_arguments: refuses its own flags' bad values (``ConfigError``) before any compute.
  """

  name: str
  help: str
  run: Callable[[argparse.Namespace, dict], dict]
  print_human: Callable[[dict], None]
  order: int = 100
  runs_monte_carlo: bool = True
  charges_ledger: bool = False
  options_section: str = 'calibration'
  add_arguments: Callable[[argparse.ArgumentParser], None] = lambda parser: None
  check_arguments: Callable[[argparse.Namespace], None] = lambda args: None


def print_deterministic(payload: dict, *, table: bool) -> None:
  """The answer of a deterministic accountant (``estimate``: its δ(ε) table too)."""
  print(f'noise_multiplier σ = {payload["noise_multiplier"]:.6g}, deterministic accountant '
        f'{payload["accountant"]} ({payload["adjacency"]} adjacency; a proven bound)')
  if table:
    print(f'{"epsilon":>8}  {"delta (max over directions)":>28}')
    for eps, delta in zip(payload['epsilons'], payload['delta_of_epsilon']):
      print(f'{eps:8.3f}  {delta:28.6e}')
  if payload['epsilon'] is not None:
    print(f'({payload["epsilon"]:.6g}, {payload["delta"]:.4g})-DP'
          + (f' [took {payload["seconds"]:.1f} s]' if 'seconds' in payload else ''))


def print_footer(payload: dict) -> None:
  """The prefix-sum MSE (when computed) and the report folder."""
  if 'prefix_sum_mse' in payload:
    print(f'prefix-sum MSE ‖A C⁻¹‖_F²·σ²/n = {payload["prefix_sum_mse"]:.6g} (Dong & Ganesh, '
          'arXiv 2602.09338, §7.1)')
  print(f'report: {payload["report"]}')
