"""What the ``jaxacct`` subcommands share: the ``Command`` shape, progress on stderr, the time
budget (``--max-minutes``/``--force`` in seconds, and its refusals in the command's terms),
state-file checks, the calibration of ``calibrate`` and ``train``, and the shared printing. The
capacity plan and its printing are ``plan``'s (``cli/plan.py``)."""

from __future__ import annotations

import argparse
import dataclasses
import json
import pathlib
import sys
import time
from typing import Callable

import jax

from jaxacct import accounting
from jaxacct import config as config_lib
from jaxacct import progress as progress_lib
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


def scheme_and_matrix(raw) -> tuple:
  """(scheme, matrix) of the config, built once (an optimised band costs an L-BFGS run)."""
  scheme = config_lib.scheme_from(raw)
  return scheme, config_lib.matrix_from(raw, scheme.iterations)


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


# The calibration section's keys that are MonteCarloOptions fields of the same name.
CALIBRATION_OPTIONS = ('num_samples', 'base_delta', 'grid_ratio', 'shared_draws',
                       'estimation_samples', 'num_candidates', 'fallback', 'attempt', 'proposal',
                       'tilt_order', 'tilt_state_budget')


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
  options = config_lib.library_keywords(raw, 'calibration', CALIBRATION_OPTIONS)
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

