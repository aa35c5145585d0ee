"""The ``jaxacct`` command (host code).

- ``jaxacct estimate CONFIG``: streaming Monte Carlo δ̂(ε) of both directions
  (``estimate_delta``) for the config's mechanism, with standard errors.
- ``jaxacct calibrate CONFIG``: the smallest σ passing Estimate-Verify-Release
  (``calibrate_noise_multiplier``) at the config's (ε, δ).
- ``jaxacct train CONFIG``: calibrate σ as ``calibrate`` does, then train the
  config's training task (``training.task``; ``examples/digits.py``) on batches of the scheme
  with that σ; reports test accuracy with the guarantee.

With a deterministic accountant (``accountant: pld``, ``renyi`` or any registered name;
``auto`` takes the tightest deterministic one for truncated Poisson, truncated cyclic Poisson
and balls-in-bins) both commands go through the accountant contract
(``jaxacct.deterministic.base``) instead: ``estimate`` reports the proven δ(ε) (max over
directions, and per direction) and ε(δ), ``calibrate`` the smallest σ
(``calibrate_deterministic``). Every payload names the ``accountant`` that gave its answer
(``monte_carlo`` for Monte Carlo estimates) and, for ``auto``, every one evaluated in its
``explanation``.

Options: ``--set section.key=value`` (repeatable) overrides config values;
``--json`` prints one JSON object on stdout; ``--out DIR`` chooses the report
folder (JSON with a ``report_schema`` version, PNG); ``--max-minutes M`` refuses a Monte
Carlo calibration, or an estimate large enough to be timed first, projected (and printed) to
take longer here (default 30); ``--force`` runs
it anyway, and an accelerator-scale config on CPU; ``--debug`` prints the traceback of an
internal error. Every config value and option is checked before any compute.
Progress (rate, ETA) goes to stderr: a bar on a terminal, otherwise a line every 30 s.
``train`` with an ``individual:`` section records per-example privacy (seed 004).

Exit codes: 0 ok; 2 bad input (a config or argument the library refused, naming it; a
missing file or extra; a file that cannot be written); 1 anything else — an internal error
(a bug, or a failure such as a σ search that cannot bracket), reported in one line, with
the traceback behind ``--debug``.
"""

from __future__ import annotations

import argparse
import dataclasses
import json
import logging
import os
import pathlib
import shutil
import sys
import time
import traceback

import jax
import numpy as np
import tqdm

from jaxacct import config as config_lib
from jaxacct.errors import InputError
from jaxacct import report
from jaxacct.deterministic import accountant as deterministic
from jaxacct.deterministic import base as deterministic_base
from jaxacct.individual import tracking as tracking_lib
from jaxacct.mechanism import DIRECTIONS, MatrixMechanism
from jaxacct.lower_triangular import banded_inverse_square_root
from jaxacct.matrices import BandedToeplitz, square_root_coefficients
from jaxacct.montecarlo import checkpoint as checkpoint_lib
from jaxacct.montecarlo import ledger as ledger_lib
from jaxacct.montecarlo import plan as plan_lib
from jaxacct.montecarlo import precision as precision_lib
from jaxacct.montecarlo import sharding
from jaxacct.conventions import Purpose
from jaxacct.montecarlo import keys as keys_lib
from jaxacct.montecarlo.calibration import CalibrationRecord, calibrate_noise_multiplier
from jaxacct.montecarlo.estimator import estimate_delta
from jaxacct.montecarlo.options import RunOptions


class _Progress:
  """Progress of each stage of a run on stderr (process 0 only): a tqdm bar (samples,
  samples/s, ETA) on a terminal; otherwise — a log, a batch job, ``--json`` — a plain line
  every ``interval`` seconds with the same figures, so a long run is never silent."""

  def __init__(self, args, label: str | None = None, interval: float = 30.0,
               unit: str = 'samples'):
    self.enabled = sharding.is_leader()
    self.terminal = sys.stderr.isatty() and not args.json
    self.label, self.interval, self.unit = label, interval, unit
    self.bar = None
    self.stage = None

  def __call__(self, done: int, total: int, stage: str) -> None:
    if not self.enabled:
      return
    stage = self.label or stage
    if self.terminal:
      self._bar(done, total, stage)
      return
    now = time.perf_counter()
    if self.stage != (stage, total) or done < self.done:
      self.stage, self.started, self.last, self.first = (stage, total), now, now, done
    self.done = done
    finished = done >= total
    if now - self.last >= self.interval or (finished and now - self.started >= 5.0):
      self.last = now
      rate = (done - self.first) / max(now - self.started, 1e-9)
      eta = (total - done) / rate if rate > 0 else float('inf')
      print(f'jaxacct: {stage}: {done:,}/{total:,} {self.unit} ({100 * done / total:.0f} %), '
            f'{rate:,.1f}/s, ' + ('done' if finished else f'ETA {plan_lib.format_seconds(eta)}'),
            file=sys.stderr, flush=True)

  def _bar(self, done: int, total: int, stage: str) -> None:
    if (self.bar is None or self.bar.desc != stage or self.bar.total != total
        or done < self.bar.n):
      self.close()
      self.bar = tqdm.tqdm(total=total, initial=done, desc=stage, unit=f' {self.unit}',
                           unit_scale=True, file=sys.stderr, leave=True, dynamic_ncols=True)
    self.bar.update(done - self.bar.n)
    if done >= total:
      self.close()

  def close(self) -> None:
    if self.bar is not None:
      self.bar.close()
      self.bar = None


class _ProbeProgress:
  """A stderr line per σ probe of a deterministic calibration once the search is slow (a
  probe over 2 s, or 5 s in total), so MMCC or conditional composition is never silent."""

  def __init__(self):
    self.enabled = sharding.is_leader()
    self.started = time.perf_counter()
    self.count = 0

  def __call__(self, accountant: str, sigma: float, passed: bool, seconds: float) -> None:
    self.count += 1
    elapsed = time.perf_counter() - self.started
    if self.enabled and (seconds >= 2.0 or elapsed >= 5.0):
      print(f'jaxacct: calibrating σ with {accountant}: probe {self.count}, σ = {sigma:.6g} '
            f'{"meets" if passed else "misses"} the target ({seconds:.1f} s; '
            f'{plan_lib.format_seconds(elapsed)} so far)', file=sys.stderr, flush=True)


DEFAULT_MAX_MINUTES = 30.0


def _check_budget(args, raw) -> None:
  """Before a Monte Carlo calibration: print its plan (samples, measured throughput,
  projected time here) on stderr, and refuse it when the projection exceeds
  ``--max-minutes`` (default 30) unless ``--force``."""
  mechanism, _ = _plan_mechanism(raw)
  if config_lib.accountant_from(raw, mechanism.scheme, mechanism.matrix) != config_lib.MONTE_CARLO:
    return
  plan = _capacity_plan(args, raw, precisions=())  # the budget is the run precision's
  if sharding.is_leader():
    _print_plan(plan, file=sys.stderr)
  _refuse_over_budget(args, 'the Monte Carlo calibration', plan['plan']['seconds_here'], '')


def _refuse_over_budget(args, run: str, seconds: float, advice: str) -> None:
  """ConfigError when ``run`` is projected over ``--max-minutes`` (default 30) without --force."""
  budget = args.max_minutes if args.max_minutes is not None else DEFAULT_MAX_MINUTES
  try:
    plan_lib.refuse_over_budget(
        run, seconds, None if args.force else 60.0 * budget,
        budget=f'the --max-minutes budget of {budget:g} min',
        advice=f'pass --force (or a larger --max-minutes) to run it anyway, {advice}or run it '
               f'on an accelerator')
  except plan_lib.OverBudgetError as refusal:
    raise config_lib.ConfigError(str(refusal)) from None


# Below this many sample-rounds × bands an estimate runs in minutes at most on a CPU, so it
# starts without a throughput probe (the probe compiles and times a block: a few seconds).
_ESTIMATE_PROBE_WORK = 1e10


def _estimate_max_seconds(args, mechanism, num_samples: int) -> float | None:
  """The ``max_seconds`` of a Monte Carlo estimate: ``--max-minutes`` (default 30) for one
  large enough to time first, None (nothing timed or refused) for a small one or --force."""
  work = 2.0 * num_samples * mechanism.iterations * mechanism.matrix.num_bands
  if work <= _ESTIMATE_PROBE_WORK or args.force:
    return None
  return 60.0 * (args.max_minutes if args.max_minutes is not None else DEFAULT_MAX_MINUTES)


def _write(function, *args, **kwargs) -> None:
  """Writes a report file on process 0 only (every process computed the same result)."""
  if sharding.is_leader():
    function(*args, **kwargs)


def _output_dir(args, raw) -> pathlib.Path:
  if args.out:
    return pathlib.Path(args.out)
  configured = raw.get('report', {}).get('output_dir')
  return pathlib.Path(configured) if configured else pathlib.Path('reports') / pathlib.Path(
      args.config).stem


# Room a run needs in its folders: reports (a JSON and up to three PNGs of ~100 KiB) and
# checkpoints (float64 sums per candidate and ε, written beside the previous file) stay well
# under this; the ledger grows by a line per verification.
_FOLDER_ROOM = 4 << 20
_LEDGER_ROOM = 256 << 10


def _check_writable(folder: pathlib.Path, name: str, room: int = _FOLDER_ROOM) -> None:
  """Raises ConfigError naming ``name`` unless files can be created in ``folder`` (created if
  missing) and it has ``room`` bytes free: before any compute, so a long run cannot fail at
  its end (a full disk found after a day of verification would lose the released σ)."""
  try:
    folder.mkdir(parents=True, exist_ok=True)
    probe = folder / f'.jaxacct-write-test-{os.getpid()}'
    try:
      probe.write_bytes(b'\0' * 4096)
    finally:
      if probe.exists():
        probe.unlink()
    free = shutil.disk_usage(folder).free
  except OSError as error:
    raise config_lib.ConfigError(f'{name} {folder}: cannot write there '
                                 f'({error.strerror or error})') from None
  if free < room:
    raise config_lib.ConfigError(f'{name} {folder}: only {free >> 10} KiB free, the run needs '
                                 f'about {room >> 10} KiB there; free some space or choose '
                                 'another folder')


def _check_outputs(args, raw) -> None:
  """The report folder, checkpoint folder and ledger file of the run are writable."""
  if not sharding.is_leader():
    return
  _check_writable(_output_dir(args, raw),
                  '--out' if args.out else 'report.output_dir' if raw.get('report', {}).get(
                      'output_dir') else 'the report folder (--out)')
  if args.checkpoint:
    _check_writable(pathlib.Path(args.checkpoint), '--checkpoint')
  if args.command == 'calibrate':  # the ledger it charges: --ledger or the user's
    _check_writable(_ledger_path(args).parent, '--ledger' if args.ledger else
                    f'the attempt ledger\'s folder (${ledger_lib.ENVIRONMENT_VARIABLE}, --ledger)',
                    _LEDGER_ROOM)


def _estimate_deterministic(args, raw, mechanism, name: str) -> dict:
  adjacency = raw.get('adjacency', 'zero_out')
  options = config_lib.accountant_options(raw)
  epsilons = [float(e) for e in raw.get('monte_carlo', {}).get('epsilons', [1.0])]
  curve = deterministic.privacy_curve(mechanism, accountant=name, adjacency=adjacency, **options)
  deltas = [curve.delta_for_epsilon(e) for e in epsilons]
  target = raw.get('calibration', {}).get('delta')
  if isinstance(curve, deterministic.TightestCurve):  # auto: name the one that gave ε(δ)
    name = curve.chosen(target) if target is not None else config_lib.AUTO
  payload = {
      'noise_multiplier': float(mechanism.noise_multiplier),
      'epsilon': None if target is None else curve.epsilon_for_delta(target),
      'delta': target, 'verified': True, 'method': 'deterministic', 'adjacency': adjacency,
      'accountant': name, 'num_samples': 0, 'seed': None, 'epsilons': epsilons,
      'delta_of_epsilon': deltas,
      'delta_of_epsilon_by_direction': {d: [curve.delta_for_epsilon(e, direction=d)
                                            for e in epsilons] for d in DIRECTIONS},
      'accountant_options': options,
      'explanation': None if target is None else curve.explain(target),
  }
  payload['curve'] = _deterministic_curve(curve, epsilons, payload['epsilon'])
  folder = _output_dir(args, raw)
  _write(report.write_json, folder, 'estimate.json', payload)
  _write(report.plot_delta_curve, folder, payload['curve']['epsilons'],
         payload['curve']['delta'], f'{report.describe(mechanism)}\nδ(ε) by {name} ({adjacency})',
         released=None if target is None else (payload['epsilon'], target), point_label='proven')
  payload['report'] = str(folder)
  return payload


def _deterministic_curve(curve, epsilons, released: float | None) -> dict:
  """δ(ε) (max over directions) on the report's fine ε grid."""
  grid = report.curve_epsilons(epsilons, released if released is not None and np.isfinite(
      released) else None)
  return {'epsilons': grid, 'delta': [curve.delta_for_epsilon(e) for e in grid]}


def _scheme_fields(scheme) -> dict:
  """The scheme as JSON: its type and public fields."""
  return {'type': type(scheme).__name__, **dataclasses.asdict(scheme)}


def _estimate(args, raw) -> dict:
  mechanism = config_lib.mechanism_from(raw)
  name = config_lib.accountant_from(raw, mechanism.scheme, mechanism.matrix)
  if name != config_lib.MONTE_CARLO:
    return _estimate_deterministic(args, raw, mechanism, name)
  mc = raw.get('monte_carlo', {})
  num_samples = int(mc.get('num_samples', 100_000))
  seed = int(mc.get('seed', 0))
  epsilons = mc.get('epsilons', [1.0])
  if 'precision' in mc and mc.get('dtype', 'float64') != 'float64':
    raise config_lib.ConfigError('give monte_carlo.precision or its legacy spelling '
                                 'monte_carlo.dtype, not both')
  if 'precision' in mc or 'dtype' in mc:
    choice = precision_lib.from_arguments(np.dtype(mc.get('dtype', 'float64')),
                                          mc.get('precision'), mechanism)
  else:
    choice = _run_precision(raw, mechanism)
  _say_precision(choice)
  _check_state_files(args, raw, ledger=False)
  grid = report.curve_epsilons(epsilons)  # the table's ε and a fine grid for the plot
  try:
    result = estimate_delta(jax.random.key(seed), mechanism, grid, num_samples,
                            dtype=choice.dtype, run=_run_options(
                                args, _Progress(args), max_seconds=_estimate_max_seconds(
                                    args, mechanism, num_samples)))
  except plan_lib.OverBudgetError as refusal:  # timed by the library before any sample
    _refuse_over_budget(args, f'the Monte Carlo estimate (monte_carlo.num_samples = '
                        f'{num_samples:,}, {choice.precision})', refusal.seconds,
                        'use fewer samples, ')
    raise
  target = raw.get('calibration', {}).get('delta')
  eps_hat = result.epsilon_for_delta(target) if target is not None else None
  table = [grid.index(float(e)) for e in epsilons]
  payload = {
      'noise_multiplier': float(mechanism.noise_multiplier),
      'epsilon': eps_hat, 'delta': target, 'verified': False, 'method': 'estimate',
      'accountant': config_lib.MONTE_CARLO,
      'conjectural': mechanism.scheme.conjectural, 'bounded': mechanism.bounded,
      'scheme': _scheme_fields(mechanism.scheme),
      'sampling_prob': _scheme_fields(mechanism.scheme).get('sampling_prob'),  # None: no p
      'expected_participation_rate': mechanism.scheme.expected_participation_rate,
      'num_samples': num_samples, 'seed': seed, 'epsilons': [float(e) for e in epsilons],
      'precision': choice.precision, 'precision_reason': choice.reason,
      'delta_hat': {d: result.delta_hat[d][table].tolist() for d in DIRECTIONS},
      'standard_error': {d: result.standard_error[d][table].tolist() for d in DIRECTIONS},
      'curve': _curve_payload(result),
  }
  folder = _output_dir(args, raw)
  _write(report.write_json, folder, 'estimate.json', payload)
  _write(report.plot_delta_hat, folder, result.epsilons, result.delta_hat, result.standard_error,
         f'{report.describe(mechanism)}, N = {num_samples:,} per direction\nMonte Carlo estimate '
         '(not a guarantee)', num_samples=num_samples,
         released=None if target is None else (eps_hat, target), point_label='estimated')
  payload['report'] = str(folder)
  return payload


def _curve_payload(result) -> dict:
  """A ``DeltaEstimate`` on the report's fine ε grid, as JSON."""
  return {'epsilons': result.epsilons.tolist(),
          'delta_hat': {d: result.delta_hat[d].tolist() for d in DIRECTIONS},
          'standard_error': {d: result.standard_error[d].tolist() for d in DIRECTIONS}}


def _strategy(raw) -> tuple:
  """(scheme, matrix) of the config, built once (an optimised band costs an L-BFGS run)."""
  scheme = config_lib.scheme_from(raw)
  return scheme, config_lib.matrix_from(raw, scheme.iterations)


def _plan_mechanism(raw) -> tuple[MatrixMechanism, str | None]:
  """The config's mechanism for timing, and a note when an optimised strategy is stood in for.

  The cost of a sample depends on the strategy's shape only (band count, or a dense n × n C),
  so an optimised band (an L-BFGS run of minutes at n = 7200) is timed as the square-root band
  of the same length, and an optimised banded inverse as the BISR matrix of the same bands.
  """
  scheme = config_lib.scheme_from(raw)
  strategy = raw.get('strategy') or {}
  sigma = float(raw.get('noise_multiplier', 1.0))
  if 'optimized_bands' in strategy:
    bands = int(strategy['optimized_bands'])
    return (MatrixMechanism(scheme, BandedToeplitz(square_root_coefficients(bands)), sigma),
            f'timed with the square-root band of the same length ({bands}) for the optimised one')
  if 'optimized_inverse_bands' in strategy:
    bands = int(strategy['optimized_inverse_bands'])
    return (MatrixMechanism(scheme, banded_inverse_square_root(scheme.iterations, bands), sigma),
            f'timed with the BISR matrix of {bands} inverse bands for the optimised one')
  return MatrixMechanism(scheme, config_lib.matrix_from(raw, scheme.iterations), sigma), None


def _capacity_plan(args, raw, precisions=('float64', 'float32')) -> dict:
  """The capacity plan of the config's Monte Carlo calibration (``montecarlo/plan.py``), timed
  for ``precisions`` (the run's own precision is always among them)."""
  cal = _calibration_section(raw)
  mechanism, note = _plan_mechanism(raw)
  options = {k: cal[k] for k in ('num_samples', 'base_delta', 'estimation_samples',
                                 'num_candidates') if k in cal}
  run = _run_precision(raw, mechanism).precision
  plans, refusal = {}, None
  for name in sorted(set(precisions) | {run}, key=('float64', 'float32').index):
    try:
      plans[name] = plan_lib.capacity_plan(
          mechanism, epsilon=float(cal['epsilon']), delta=float(cal['delta']),
          target_devices=getattr(args, 'devices', None),
          samples_per_second=getattr(args, 'samples_per_second', None), precision=name,
          **options).to_dict()
    except ValueError as refused:  # the 32-bit program does not serve this mechanism
      refusal = str(refused)
  payload = {'plan': plans[run], 'plans': plans, 'precision': run, 'float32_refusal': refusal,
             'stand_in': note, 'epsilon': float(cal['epsilon']),
             'delta': float(cal['delta']), 'backend': jax.default_backend()}
  return payload


def _plan(args, raw) -> dict:
  payload = _capacity_plan(args, raw, ('float64', 'float32') if args.precision == 'both'
                           else (args.precision,))
  folder = _output_dir(args, raw)
  _write(report.write_json, folder, 'plan.json', payload)
  payload['report'] = str(folder)
  return payload


def _print_plan(payload: dict, file=None) -> None:
  plan = payload['plan']
  file = sys.stdout if file is None else file
  rate = 1.0 / plan['seconds_per_sample']['1']
  print(f'capacity plan at (ε, δ) = ({payload["epsilon"]}, {payload["delta"]:.4g}), n = '
        f'{plan["iterations"]}, block {plan["block_size"]}:', file=file)
  print(f'  verification: N = {plan["num_samples"]:,} per direction (δ_b = '
        f'{plan["base_delta"]:.4g}), {plan["verification_candidates"]} candidates in one '
        f'pass: {plan["verification_samples"]:,} draws', file=file)
  print(f'  estimation: {plan["estimation_samples"]:,} per direction per sweep of 16 σ, '
        f'at least 2 sweeps: {2 * plan["estimation_samples_per_sweep"]:,} draws', file=file)
  source = (f'measured on {plan["devices_here"]} {payload["backend"]} device(s)'
            if plan['measured'] else 'given (--samples-per-second)')
  print(f'  throughput: {rate:,.0f} one-σ samples/s ({source}); 16 σ cost '
        f'{plan["seconds_per_sample"]["16"] / plan["seconds_per_sample"]["1"]:.2f}× one σ',
        file=file)
  if payload.get('stand_in'):
    print(f'  ({payload["stand_in"]})', file=file)
  print(f'  projected wall time here: {plan_lib.format_seconds(plan["seconds_here"])} (+ '
        f'{plan_lib.format_seconds(plan["seconds_per_extra_sweep"])} per extra sweep)', file=file)
  print(f'  on {plan["target_devices"]} device(s): '
        f'{plan_lib.format_seconds(plan["seconds_on_target"])}, '
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
          f'{plan_lib.format_seconds(other["seconds_here"])} here, '
          f'{other["device_hours_on_target"]:,.1f} device-hours on {other["target_devices"]}'
          f'{memory}', file=file)
  if 'float32' in plans:
    print('  accelerators (TPU/GPU) run the float32 program: project with its figures',
          file=file)
  elif payload.get('float32_refusal'):
    print(f'  float32: not available ({payload["float32_refusal"]})', file=file)


def _calibration_section(raw) -> dict:
  cal = raw.get('calibration')
  if not cal or 'epsilon' not in cal or 'delta' not in cal:
    raise config_lib.ConfigError('calibrate needs calibration.epsilon and calibration.delta')
  return cal


def _run_options(args, progress: _Progress, part: str | None = None, **fields) -> RunOptions:
  """The ``RunOptions`` of a Monte Carlo run: ``progress``, and ``--checkpoint`` /
  ``--checkpoint-interval`` (``part`` names a subfolder for a second run of the same command,
  calibrate's report curve), plus ``fields`` (ledger, max_seconds)."""
  if args.checkpoint is not None:
    fields['checkpoint'] = (args.checkpoint if part is None
                            else str(pathlib.Path(args.checkpoint) / part))
    fields['checkpoint_interval'] = args.checkpoint_interval
  return RunOptions(progress=progress, **fields)


def _ledger_path(args) -> pathlib.Path:
  """``--ledger``, or the user's ledger (``$JAXACCT_LEDGER``, else the XDG state folder): the
  attempt ledger of calibrate, shared by every report folder (``ledger.default_path``)."""
  return pathlib.Path(args.ledger) if args.ledger else ledger_lib.default_path()


def _check_state_files(args, raw, *, ledger: bool) -> None:
  """Before any compute or throughput probe: the checkpoint file (``--checkpoint``) reads and
  has its format's structure; with ``ledger`` (a Monte Carlo calibration) the attempt ledger
  opens, and a calibration report already in the report folder that records a ledger charge
  finds it in that ledger (``ledger.check_recorded_charge``)."""
  if args.checkpoint:
    checkpoint_lib.check_file(args.checkpoint)
  if not ledger:
    return
  path = _output_dir(args, raw) / 'calibration.json'

  def check():
    try:
      opened = ledger_lib.FileLedger(_ledger_path(args))
    except ledger_lib.LedgerError as error:
      raise config_lib.ConfigError(str(error)) from None
    if not path.exists():
      return
    try:
      charge = json.loads(path.read_text()).get('charge')
    except (OSError, ValueError, AttributeError):
      raise config_lib.ConfigError(
          f'the earlier report {str(path)!r} cannot be read, and it may record a ledger charge: '
          'move it away (or use another --out) to calibrate again') from None
    try:
      ledger_lib.check_recorded_charge(opened, charge, f'report {str(path)!r}')
    except ledger_lib.LedgerError as error:
      raise config_lib.ConfigError(str(error)) from None
  sharding.on_leader(check)


def _calibrated(args, raw, scheme, matrix) -> tuple:
  """(mechanism, guarantee, payload, EVR record or None) at the config's (ε, δ)."""
  cal = _calibration_section(raw)
  started = time.perf_counter()
  name = config_lib.accountant_from(raw, scheme, matrix)
  if name != config_lib.MONTE_CARLO:
    options = config_lib.accountant_options(raw)
    mechanism, g = deterministic.calibrate_deterministic(
        scheme, matrix, epsilon=float(cal['epsilon']), delta=float(cal['delta']),
        accountant=name, adjacency=raw.get('adjacency', 'zero_out'), progress=_ProbeProgress(),
        **options)
    # auto: every accountant's ε at the calibrated σ, so the report shows which ran and why
    # the named one was chosen
    curve = deterministic.privacy_curve(mechanism, accountant=name, adjacency=g.adjacency,
                                        **options)
    payload = {'noise_multiplier': g.noise_multiplier, 'epsilon': g.epsilon, 'delta': g.delta,
               'verified': g.verified, 'method': g.method, 'adjacency': g.adjacency,
               'accountant': g.accountant, 'accountant_options': options,
               'explanation': curve.explain(g.delta), 'num_samples': 0, 'seed': None,
               'seconds': time.perf_counter() - started}
    return mechanism, g, payload, curve
  seed = int(cal.get('seed', 0))
  options = {k: cal[k] for k in ('num_samples', 'base_delta', 'grid_ratio', 'shared_draws',
                                 'estimation_samples', 'num_candidates', 'fallback', 'attempt')
             if k in cal}
  ledger = _ledger_path(args)
  choice = _run_precision(raw, MatrixMechanism(scheme, matrix, 1.0))
  _say_precision(choice)
  result = calibrate_noise_multiplier(scheme, matrix, epsilon=float(cal['epsilon']),
                                      delta=float(cal['delta']), key=jax.random.key(seed),
                                      precision=choice.precision, **options,
                                      run=_run_options(args, _Progress(args), ledger=ledger))
  g = result.guarantee
  payload = {
      'noise_multiplier': g.noise_multiplier, 'epsilon': g.epsilon, 'delta': g.delta,
      'verified': g.verified, 'method': g.method, 'adjacency': g.adjacency,
      'accountant': g.accountant, 'bounded': g.bounded, 'num_samples': g.num_samples, 'seed': seed,
      'base_delta': g.base_delta, 'delta_hat': g.delta_hat, 'candidates': list(result.candidates),
      'seconds': time.perf_counter() - started, 'record': result.record.to_dict(),
      'attempts': g.attempts, 'ledger': str(ledger), 'charge': result.charge,
      'precision': g.precision, 'margin': g.margin, 'precision_reason': choice.reason,
  }
  return result.mechanism, g, payload, result.record


_DEFAULT_PRECISION = precision_lib.PrecisionChoice(
    'float64', 'the default; monte_carlo.precision: auto or float32 selects the 32-bit program')


def _run_precision(raw, mechanism) -> precision_lib.PrecisionChoice:
  """The device program of a Monte Carlo run: ``monte_carlo.precision`` (default float64)."""
  precision = raw.get('monte_carlo', {}).get('precision')
  return _DEFAULT_PRECISION if precision is None else precision_lib.choose(precision, mechanism)


def _say_precision(choice: precision_lib.PrecisionChoice) -> None:
  if sharding.is_leader():
    print(f'precision: {choice.precision} ({choice.reason})', file=sys.stderr)


def _with_prefix_error(mechanism, payload: dict) -> dict:
  """Adds the prefix-sum MSE ‖A C⁻¹‖_F²·σ²/n of seed 000 §7.1 (compare schemes at equal ε)."""
  payload['prefix_sum_mse'] = (mechanism.matrix.prefix_error(mechanism.iterations)
                               * mechanism.noise_multiplier**2)
  return payload


def _calibrate(args, raw) -> dict:
  _calibration_section(raw)  # a config error before the strategy is built
  stand_in, _ = _plan_mechanism(raw)  # an optimised band is built after the checks below
  _check_state_files(args, raw, ledger=config_lib.accountant_from(
      raw, stand_in.scheme, stand_in.matrix) == config_lib.MONTE_CARLO)
  _check_budget(args, raw)
  mechanism, g, payload, found = _calibrated(args, raw, *_strategy(raw))
  _with_prefix_error(mechanism, payload)
  folder = _output_dir(args, raw)
  # The released σ and its guarantee first (atomically), the curve and the figures after.
  _write(report.write_json, folder, 'calibration.json', payload)
  title = f'{report.describe(mechanism)} (released σ)' + (
      f', float32 program (margin η ≤ {g.margin:.1e})' if g.margin is not None else '')
  if isinstance(found, CalibrationRecord):
    # δ̂(ε) at the released σ on a fine ε grid, from the report stream (fresh draws, as many
    # as one estimation sweep): an illustration of the released σ, not part of the guarantee
    key = keys_lib.purpose_key(jax.random.key(int(raw['calibration'].get('seed', 0))),
                               Purpose.REPORT)
    curve = estimate_delta(key, mechanism, report.curve_epsilons([g.epsilon]),
                           found.estimation_samples, precision=g.precision,
                           run=_run_options(args, _Progress(args, 'report curve'),
                                            'report-curve'))
    payload['curve'] = _curve_payload(curve)
    _write(report.plot_delta_hat, folder, curve.epsilons, curve.delta_hat, curve.standard_error,
           f'{title}\nδ̂(ε) from {found.estimation_samples:,} fresh samples per direction; '
           f'verified with N = {g.num_samples:,}', num_samples=found.estimation_samples,
           released=(g.epsilon, g.delta), threshold=g.base_delta)
    _write(report.plot_candidates, folder, found, g.noise_multiplier, title)
  else:
    payload['curve'] = _deterministic_curve(found, [g.epsilon], g.epsilon)
    _write(report.plot_delta_curve, folder, payload['curve']['epsilons'],
           payload['curve']['delta'], f'{title}\nproven δ(ε) by {g.accountant}',
           released=(g.epsilon, g.delta))
  _write(report.write_json, folder, 'calibration.json', payload)
  payload['report'] = str(folder)
  return payload


def _train(args, raw) -> dict:
  from jaxacct.training.loop import noise_bands  # local: flax and optax only for training
  from jaxacct.training.task import train_task
  training = raw.get('training') or {}
  task = config_lib.training_task_from(raw, pathlib.Path(args.config).parent)
  m = task.dataset_size
  declared = raw['scheme'].get('dataset_size')
  if declared != m:
    raise config_lib.ConfigError(f'scheme.dataset_size must be the training set size {m} (the '
                                 f'scheme is accounted for it), got {declared}')
  noise = bool(training.get('noise', True))
  if noise:
    _calibration_section(raw)
  scheme, matrix = _strategy(raw)
  noise_bands(matrix)  # refuses a strategy whose C⁻¹Z cannot be streamed, before calibrating
  if noise:
    _check_budget(args, raw)
  individual = config_lib.individual_from(raw, m)
  if individual is not None and not noise:
    raise config_lib.ConfigError('the individual section needs a private run (training.noise: '
                                 'true): without noise there is no ε to account')
  if individual is not None:  # refusals (banded C, subsampled filter, …) before calibrating
    tracking_lib.bind(individual, MatrixMechanism(scheme, matrix, 1.0), m)
  if noise:
    mechanism, g, calibration, _ = _calibrated(args, raw, scheme, matrix)
  else:
    mechanism, g, calibration = MatrixMechanism(scheme, matrix, 1.0), None, None
  started = time.perf_counter()
  payload = train_task(
      task, mechanism, g, clip_norm=float(training.get('clip_norm', 1.0)),
      learning_rate=float(training.get('learning_rate', 0.5)),
      momentum=float(training.get('momentum', 0.9)),
      seed=None if training.get('seed') is None else int(training['seed']), noise=noise,
      individual=individual, progress=_Progress(args, unit='steps'))
  payload['task'] = task.name
  payload['training_seconds'] = time.perf_counter() - started
  payload['calibration'] = calibration
  if noise:
    _with_prefix_error(mechanism, payload)
  folder = _output_dir(args, raw)
  _write(report.write_json, folder, 'training.json', payload)
  if payload['individual'] is not None:
    _write(report.plot_individual, folder, payload['individual'],
           f'{task.name}: {report.describe(mechanism)}')
  payload['report'] = str(folder)
  return payload


def _print_human(command: str, payload: dict) -> None:
  if command == 'plan':
    _print_plan(payload)
    print(f'report: {payload["report"]}')
    return
  if command != 'train' and payload['method'] == 'deterministic':
    print(f'noise_multiplier σ = {payload["noise_multiplier"]:.6g}, deterministic accountant '
          f'{payload["accountant"]} ({payload["adjacency"]} adjacency; a proven bound)')
    if command == 'estimate':
      print(f'{"epsilon":>8}  {"delta (max over directions)":>28}')
      for eps, delta in zip(payload['epsilons'], payload['delta_of_epsilon']):
        print(f'{eps:8.3f}  {delta:28.6e}')
    if payload['epsilon'] is not None:
      print(f'({payload["epsilon"]:.6g}, {payload["delta"]:.4g})-DP'
            + (f' [{payload["seconds"]:.1f} s]' if 'seconds' in payload else ''))
  elif command == 'estimate':
    print(f'noise_multiplier σ = {payload["noise_multiplier"]}, {payload["num_samples"]:,} '
          f'samples per direction, seed {payload["seed"]} (Monte Carlo estimate, not a guarantee'
          + ('; CONJECTURAL: rests on Conjecture 6.2' if payload.get('conjectural') else '')
          + ('; App. B BOUNDS: upper bounds on δ̂' if payload.get('bounded') else '') + ')')
    print(f'{"epsilon":>8}  {"delta_hat remove":>24}  {"delta_hat add":>24}')
    for i, eps in enumerate(payload['epsilons']):
      cells = [f'{payload["delta_hat"][d][i]:.4e} ± {payload["standard_error"][d][i]:.1e}'
               for d in DIRECTIONS]
      print(f'{eps:8.3f}  {cells[0]:>24}  {cells[1]:>24}')
  elif command == 'train':
    privacy = ('no noise: NOT private' if payload['method'] == 'nonprivate' else
               f'σ = {payload["noise_multiplier"]:.6g}, ({payload["epsilon"]:.6g}, '
               f'{payload["delta"]:.4g})-DP [{payload["method"]}]')
    if payload['seed'] is not None and payload['method'] != 'nonprivate':
      print(f'warning: training.seed = {payload["seed"]} is in the config: anyone with it can '
            'regenerate the noise and batches, so this model must not be released as private',
            file=sys.stderr)
    print(f'test accuracy {payload["accuracy"]:.4f} after {payload["steps"]} steps '
          f'(expected batch {payload["expected_batch_size"]:.4g}, shape '
          f'{payload["batch_shape"]}); {privacy}; {payload["training_seconds"]:.1f} s')
    if payload.get('individual'):
      summary = payload['individual']
      q = summary['quantiles']
      print(f'individual ε at δ = {summary["delta"]:.3g} ({summary["method"]}, '
            f'{summary["tracked"]} examples): min {q["0"]:.3g}, median {q["50"]:.3g}, 90 % '
            f'{q["90"]:.3g}, max {q["100"]:.3g}; worst case {summary["worst_case_epsilon"]:.3g}'
            + (f'; filter guarantees ε = {summary["filter_epsilon"]:.4g} to every example, '
               f'{summary["active_per_epoch"][-1]} still active'
               if summary['filter_epsilon'] is not None else '')
            + ' (individual ε depend on private data: not for release)')
  else:
    print(f'noise_multiplier σ = {payload["noise_multiplier"]:.6g} is ({payload["epsilon"]}, '
          f'{payload["delta"]:.4g})-DP [{payload["method"]}'
          + (f' by {payload["accountant"]}' if payload.get('accountant') else '')
          + f'; verified={payload["verified"]}; '
          + ('App. B loss bounds (upper bound); ' if payload.get('bounded') else '')
          + (f'float32 program, certified margin η ≤ {payload["margin"]:.2g}; '
             if payload.get('precision') == 'float32' and payload.get('margin') is not None
             else '') +
          f'{payload["num_samples"]:,} verification samples per direction, base δ '
          f'{payload["base_delta"]:.4g}, seed {payload["seed"]}; {payload["seconds"]:.1f} s]')
  if 'prefix_sum_mse' in payload:
    print(f'prefix-sum MSE ‖A C⁻¹‖_F²·σ²/n = {payload["prefix_sum_mse"]:.6g} (seed 000 §7.1)')
  print(f'report: {payload["report"]}')


def is_bad_input(error: BaseException) -> bool:
  """True when ``error`` is the library refusing its input, not a failure of the library: a
  ``jaxacct.InputError`` (every argument, config, file and ledger check raises one, naming the
  argument and its range; a missing extra raises ``MissingExtraError`` with the install
  command) or an ``OSError`` (a file that is missing or cannot be written). Anything else,
  a ValueError from NumPy or JAX included, is an internal error."""
  return isinstance(error, (InputError, OSError))


def _report_error(error: BaseException, *, debug: bool) -> int:
  """Prints ``error`` on stderr; returns 2 for bad input, 1 for an internal error."""
  message = ' '.join(str(error).split()) or type(error).__name__
  if is_bad_input(error):
    print(f'jaxacct: error: {message}', file=sys.stderr)
    return 2
  if debug:
    traceback.print_exception(error, file=sys.stderr)
  print(f'jaxacct: internal error ({type(error).__name__}): {message}'
        + ('' if debug else ' [run with --debug for the traceback]'), file=sys.stderr)
  return 1


_LOST_PEER_SIGNS = ('Gloo', 'Connection reset', 'Connection refused', 'Broken pipe',
                    'heartbeat', 'UNAVAILABLE', 'coordination service')


def _is_lost_peer(error: BaseException) -> bool:
  """True for a runtime error of a collective or of the coordination service: under
  ``--distributed`` that is another process gone (killed, crashed, preempted)."""
  return (type(error).__name__ in ('JaxRuntimeError', 'XlaRuntimeError')
          and any(sign in str(error) for sign in _LOST_PEER_SIGNS))


def _exit_after_lost_peer(error: BaseException) -> None:
  """Ends this process at once with exit code 1 and one message. Python's exit would run
  ``jax.distributed.shutdown``, whose barrier waits for the lost process until the heartbeat
  timeout and then aborts the process (SIGABRT and a C++ stack dump)."""
  reason = ' '.join(str(error).split())[:300]
  print(f'jaxacct: error: a process of the distributed run was lost ({reason}); this process '
        'stops too. Rerun the same command on every host; with --checkpoint it resumes from the '
        'last saved block', file=sys.stderr)
  sys.stdout.flush()
  sys.stderr.flush()
  os._exit(1)  # pylint: disable=protected-access  # skip the shutdown barrier (see above)


def _initialize_distributed(args) -> None:
  """``jax.distributed.initialize`` from the flags, the environment, or cluster detection."""
  import os
  def from_env(value, name):
    if value is not None or os.environ.get(name) is None:
      return value
    try:
      return int(os.environ[name])
    except ValueError:
      raise config_lib.ConfigError(f'{name} must be an integer, got {os.environ[name]!r}') from None
  kwargs = {'coordinator_address': args.coordinator,
            'num_processes': from_env(args.num_processes, 'JAX_NUM_PROCESSES'),
            'process_id': from_env(args.process_id, 'JAX_PROCESS_ID')}
  try:
    jax.distributed.initialize(**{k: v for k, v in kwargs.items() if v is not None})
  except (ValueError, TypeError, RuntimeError) as error:
    raise config_lib.ConfigError(
        f'--distributed: jax.distributed.initialize failed ({error}). Give --coordinator '
        'HOST:PORT --num-processes N --process-id I (or JAX_COORDINATOR_ADDRESS, '
        'JAX_NUM_PROCESSES, JAX_PROCESS_ID), or run where JAX detects the cluster (Cloud TPU, '
        'SLURM, Open MPI)') from None


class _StderrLog(logging.Handler):
  """Shows a library log line on the stderr of the moment (not the one at installation)."""

  def emit(self, record: logging.LogRecord) -> None:
    print(self.format(record), file=sys.stderr, flush=True)


def main(argv: list[str] | None = None) -> int:
  """The ``jaxacct`` command; returns its exit code. The library logs (it never prints): while
  the command runs, its INFO lines are shown on stderr."""
  logger, handler = logging.getLogger('jaxacct'), _StderrLog()
  level = logger.level
  logger.addHandler(handler)
  logger.setLevel(logging.INFO)
  try:
    return _main(argv)
  finally:
    logger.removeHandler(handler)
    logger.setLevel(level)


def _main(argv: list[str] | None) -> int:
  parser = argparse.ArgumentParser(prog='jaxacct', description='JAX-native privacy accounting.')
  commands = parser.add_subparsers(dest='command', required=True)
  for name, help_text in (('estimate', 'Monte Carlo δ̂(ε), both directions'),
                          ('calibrate', 'smallest σ verified by Estimate-Verify-Release'),
                          ('train', 'calibrate σ, then train the config\'s training task (the digits example) with it'),
                          ('plan', 'samples, measured throughput and projected time of a '
                                   'calibration')):
    sub = commands.add_parser(name, help=help_text)
    if name == 'plan':
      sub.add_argument('--devices', type=int, metavar='N',
                       help='project to N devices (default: the devices here)')
      sub.add_argument('--samples-per-second', type=float, metavar='R',
                       help='one-σ samples/s per device, instead of measuring here')
      sub.add_argument('--precision', choices=('both', 'float64', 'float32'), default='both',
                       help='the device programs to time (default both; each compiles once, '
                            'the float32 one of a large truncated scheme in minutes on a CPU)')
    sub.add_argument('config')
    sub.add_argument('--set', action='append', default=[], metavar='KEY=VALUE',
                     help='override a config value, e.g. --set monte_carlo.num_samples=1000')
    sub.add_argument('--json', action='store_true', help='print one JSON object on stdout')
    sub.add_argument('--out', help='report folder (default reports/<config name>)')
    sub.add_argument('--force', action='store_true',
                     help='run accelerator-scale configs on CPU, and Monte Carlo runs over the '
                          '--max-minutes budget')
    sub.add_argument('--max-minutes', type=float, metavar='M',
                     help=f'refuse a Monte Carlo calibration or large estimate projected to take '
                          f'longer than M minutes here (default {DEFAULT_MAX_MINUTES:g}) unless '
                          '--force')
    sub.add_argument('--debug', action='store_true',
                     help='print the traceback of an internal error (exit code 1)')
    sub.add_argument('--checkpoint', metavar='DIR',
                     help='save the run state here and resume from it when rerun')
    sub.add_argument('--checkpoint-interval', type=float, default=60.0, metavar='SECONDS',
                     help='seconds between checkpoint saves during a phase (default 60)')
    sub.add_argument('--ledger', metavar='PATH',
                     help='attempt ledger file shared by runs (default $JAXACCT_LEDGER, else '
                          '$XDG_STATE_HOME/jaxacct/ledger.json)')
    sub.add_argument('--distributed', action='store_true',
                     help='run under jax.distributed (one process per host)')
    sub.add_argument('--coordinator', metavar='HOST:PORT',
                     help='with --distributed: the coordinator (process 0) address')
    sub.add_argument('--num-processes', type=int, help='with --distributed: process count')
    sub.add_argument('--process-id', type=int, help='with --distributed: this process\'s id')
  args = parser.parse_args(argv)
  try:
    if args.distributed:
      _initialize_distributed(args)
    elif args.coordinator or args.num_processes is not None or args.process_id is not None:
      raise config_lib.ConfigError('--coordinator, --num-processes and --process-id need '
                                   '--distributed')
    if args.command == 'plan' and args.devices is not None and args.devices < 1:
      raise config_lib.ConfigError(f'--devices must be an integer >= 1, got {args.devices}')
    if args.command == 'plan' and args.samples_per_second is not None and not (
        0 < args.samples_per_second < float('inf')):
      raise config_lib.ConfigError(f'--samples-per-second must be finite and > 0, got '
                                   f'{args.samples_per_second}')
    if args.max_minutes is not None and not args.max_minutes > 0:
      raise config_lib.ConfigError(f'--max-minutes must be > 0, got {args.max_minutes}')
    if not args.checkpoint_interval > 0:
      raise config_lib.ConfigError(f'--checkpoint-interval must be > 0 seconds, got '
                                   f'{args.checkpoint_interval}')
    raw = config_lib.load(args.config, args.set)
    _check_outputs(args, raw)
    if (args.command != 'plan' and raw.get('accelerator_scale') and not args.force
        and jax.default_backend() == 'cpu'):
      if args.command == 'calibrate' and raw.get('calibration'):
        # The run precision's plan only: timing the 32-bit program too would compile it
        # (minutes at this scale) just to refuse; `jaxacct plan` prints both.
        _print_plan(_capacity_plan(args, raw, precisions=()), file=sys.stderr)
        print(f'  accelerators run the float32 program: `jaxacct plan {args.config}` projects it',
              file=sys.stderr)
      raise config_lib.ConfigError(
          f'{args.config} is accelerator-scale (days of CPU time); run it on a GPU/TPU or pass --force')
    payload = {'estimate': _estimate, 'calibrate': _calibrate, 'train': _train,
               'plan': _plan}[args.command](args, raw)
  except Exception as error:  # pylint: disable=broad-except  # the exit code sorts them
    if args.distributed and _is_lost_peer(error):
      _exit_after_lost_peer(error)
    return _report_error(error, debug=args.debug)
  if not sharding.is_leader():
    return 0  # every process computed the same result; process 0 reports it
  if args.json:
    print(json.dumps(payload))
  else:
    _print_human(args.command, payload)
  return 0


if __name__ == '__main__':
  sys.exit(main())
