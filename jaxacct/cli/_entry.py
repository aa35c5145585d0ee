"""The ``jaxacct`` entry point: the parser built from the subcommands (every module of this
package with a ``COMMAND``), the checks shared by all of them, and the exit codes."""

from __future__ import annotations

import argparse
import importlib
import pkgutil
import json
import logging
import os
import pathlib
import sys
import traceback

import jax

from jaxacct import config as config_lib
from jaxacct._version import __version__
from jaxacct.errors import InputError
from jaxacct.montecarlo.engine import sharding, watchdog
from jaxacct.cli import config_keys
from jaxacct.cli.common import Command, DEFAULT_MAX_MINUTES
from jaxacct.cli.plan import capacity_plan, print_plan
from jaxacct.cli._folders import (check_outputs, leaving_no_new_empty_folders, run_folders)


def is_bad_input(error: BaseException) -> bool:
  """True when ``error`` is the library refusing its input, not a failure of the library: a
  ``jaxacct.InputError`` (every argument, config, file and ledger check raises one, naming the
  argument and its range; a missing extra raises ``MissingExtraError`` with the install
  command) or an ``OSError`` (a file that is missing or cannot be written). Anything else,
  a ValueError from NumPy or JAX included, is an internal error."""
  return isinstance(error, (InputError, OSError))


def _report_error(error: BaseException, *, debug: bool, section: str = 'calibration') -> int:
  """Prints ``error`` on stderr; returns 2 for bad input, 1 for an internal error. A library
  refusal is written in the config's keys from its fields (``config.describe``; ``section``:
  where the command's Monte Carlo options live)."""
  message = ' '.join(config_lib.describe(error, section).split()) or type(error).__name__
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


_STATUS_CODES = ('UNKNOWN:', 'UNAVAILABLE:', 'INTERNAL:', 'ABORTED:', 'DEADLINE_EXCEEDED:')


def _is_lost_peer(error: BaseException) -> bool:
  """True for a runtime error of a collective or of the coordination service: under
  ``--distributed`` that is another process gone (killed, crashed, preempted). jaxlib raises
  most as ``JaxRuntimeError``, but now and then a collective's as a plain ``ValueError``
  whose message starts with the status code ('UNKNOWN: Gloo AllGather failed: ...
  Connection reset by peer', seen once in ~10 kills of a peer)."""
  message = str(error)
  runtime = (type(error).__name__ in ('JaxRuntimeError', 'XlaRuntimeError')
             or (type(error) is ValueError and message.startswith(_STATUS_CODES)))
  return runtime and any(sign in message for sign in _LOST_PEER_SIGNS)


_RERUN = ('Rerun the same command on every host; with --checkpoint it resumes from the last '
          'saved block')


def _exit_after_lost_peer(error: BaseException) -> None:
  """Ends this process at once with exit code 1 and one message. Python's exit would run
  ``jax.distributed.shutdown``, whose barrier waits for the lost process until the heartbeat
  timeout and then aborts the process (SIGABRT and a C++ stack dump)."""
  reason = ' '.join(str(error).split())[:300]
  print(f'jaxacct: error: a process of the distributed run was lost ({reason}); this process '
        f'stops too. {_RERUN}', file=sys.stderr)
  sys.stdout.flush()
  sys.stderr.flush()
  os._exit(1)  # pylint: disable=protected-access  # skip the shutdown barrier (see above)


def _peer_timeout(args) -> float:
  """``--peer-timeout``, else ``$JAXACCT_PEER_TIMEOUT``, else the watchdog's default (60 s),
  checked finite and > 0 with the flag or variable named."""
  if args.peer_timeout is not None:
    name, value = '--peer-timeout', args.peer_timeout
  elif os.environ.get(watchdog.TIMEOUT_ENV) is not None:
    name, text = watchdog.TIMEOUT_ENV, os.environ[watchdog.TIMEOUT_ENV]
    try:
      value = float(text)
    except ValueError:
      raise config_lib.ConfigError(
          f'{name} must be a number of seconds (> 0), got {text!r}') from None
  else:
    return watchdog.DEFAULT_TIMEOUT
  if not (value > 0 and value < float('inf')):
    raise config_lib.ConfigError(f'{name} must be finite and > 0 seconds, got {value}')
  return value


def _initialize_distributed(args) -> None:
  """``jax.distributed.initialize`` from the flags, the environment, or cluster detection,
  then the peer watchdog (``montecarlo/engine/watchdog.py``): a peer silent for the peer timeout
  ends this process with exit code 1 and one line, before the runtime's heartbeat (set
  longer) aborts it."""
  def from_env(value, name):
    if value is not None or os.environ.get(name) is None:
      return value
    try:
      return int(os.environ[name])
    except ValueError:
      raise config_lib.ConfigError(f'{name} must be an integer, got {os.environ[name]!r}') from None
  timeout = _peer_timeout(args)
  kwargs = {'coordinator_address': args.coordinator,
            'num_processes': from_env(args.num_processes, 'JAX_NUM_PROCESSES'),
            'process_id': from_env(args.process_id, 'JAX_PROCESS_ID')}
  # The runtime's heartbeat outlasts the watchdog's bound, so the watchdog ends a hung run.
  heartbeat = watchdog.runtime_heartbeat_seconds(timeout)
  try:
    jax.distributed.initialize(**{k: v for k, v in kwargs.items() if v is not None},
                               heartbeat_timeout_seconds=heartbeat)
  except (ValueError, TypeError, RuntimeError) as error:
    raise config_lib.ConfigError(
        f'--distributed: jax.distributed.initialize failed ({error}). Give --coordinator '
        'HOST:PORT --num-processes N --process-id I (or JAX_COORDINATOR_ADDRESS, '
        'JAX_NUM_PROCESSES, JAX_PROCESS_ID), or run where JAX detects the cluster (Cloud TPU, '
        'SLURM, Open MPI)') from None
  watchdog.start(timeout=timeout, hint=f'{_RERUN} (--peer-timeout sets the wait, now '
                                       f'{timeout:g} s)')


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


def commands() -> list[Command]:
  """Every subcommand: the ``COMMAND`` of each module of this package, in ``order``."""
  package = pathlib.Path(__file__).parent
  found = []
  for module in pkgutil.iter_modules([str(package)]):
    if module.name.startswith('_') or module.name == 'common':
      continue  # not commands (and __main__ would run one on import)
    command = getattr(importlib.import_module(f'jaxacct.cli.{module.name}'), 'COMMAND', None)
    if isinstance(command, Command):
      found.append(command)
  return sorted(found, key=lambda command: (command.order, command.name))


# Shown under ``jaxacct --help``; each line runs as written from the repository root
# (tests/test_docs.py checks the configs, subcommands, flags and --set keys).
EXAMPLES = """\
examples (from the repository root):
  jaxacct calibrate configs/quickstart.yaml            # verified σ at (ε, δ) = (2, 10⁻³)
  jaxacct estimate configs/quickstart.yaml --set noise_multiplier=2    # δ̂(ε) at σ = 2
  jaxacct plan configs/multi_attribution.yaml --devices 8   # its time here and on 8 devices
  jaxacct train configs/digits_bandmf.yaml             # calibrate σ, then train
"""


def _parser() -> argparse.ArgumentParser:
  """``jaxacct`` and its subcommands, each with only the flags it uses."""
  parser = argparse.ArgumentParser(prog='jaxacct', description='JAX-native privacy accounting.',
                                   epilog=EXAMPLES,
                                   formatter_class=argparse.RawDescriptionHelpFormatter)
  parser.add_argument('--version', action='version', version=f'jaxacct {__version__}')
  subparsers = parser.add_subparsers(dest='command', required=True)
  for command in commands():
    sub = subparsers.add_parser(command.name, help=command.help, description=command.help)
    sub.add_argument('config', help='a YAML run configuration (e.g. configs/quickstart.yaml; '
                                    'every key: `jaxacct config --keys`, docs/config-keys.md)')
    sub.add_argument('--set', action='append', default=[], metavar='KEY=VALUE',
                     help='override a config value, e.g. --set monte_carlo.num_samples=1000')
    sub.add_argument('--json', action='store_true', help='print one JSON object on stdout')
    sub.add_argument('--out', metavar='DIR', help='report root: each command writes its own '
                     'folder DIR/<command> (default reports/<config name>)')
    command.add_arguments(sub)
    # A subcommand without the run flags still answers them with their defaults.
    defaults = {'command_object': command, 'checkpoint': None, 'checkpoint_interval': 60.0,
                'max_minutes': None, 'force': False, 'ledger': None}
    if command.runs_monte_carlo:
      sub.add_argument('--force', action='store_true',
                       help='run accelerator-scale configs on CPU, and Monte Carlo runs over '
                            'the default 30-minute budget (never over a --max-minutes you give)')
      sub.add_argument('--max-minutes', type=float, metavar='M',
                       help=f'refuse a Monte Carlo calibration or large estimate projected to '
                            f'take longer than M minutes here (default {DEFAULT_MAX_MINUTES:g}, '
                            'which --force lifts; an M you give is never lifted)')
      sub.add_argument('--checkpoint', metavar='DIR',
                       help='save the run state here and resume from it when rerun')
      sub.add_argument('--checkpoint-interval', type=float, default=60.0, metavar='SECONDS',
                       help='seconds between checkpoint saves during a phase (default 60)')
      for name in ('checkpoint', 'checkpoint_interval', 'max_minutes', 'force'):
        del defaults[name]
    if command.charges_ledger:
      sub.add_argument('--ledger', metavar='PATH',
                       help='attempt ledger file shared by runs (default $JAXACCT_LEDGER, else '
                            '$XDG_STATE_HOME/jaxacct/ledger.json)')
      del defaults['ledger']
    sub.add_argument('--debug', action='store_true',
                     help='print the traceback of an internal error (exit code 1)')
    sub.add_argument('--distributed', action='store_true',
                     help='run under jax.distributed (one process per host)')
    sub.add_argument('--coordinator', metavar='HOST:PORT',
                     help='with --distributed: the coordinator (process 0) address')
    sub.add_argument('--num-processes', type=int, help='with --distributed: process count')
    sub.add_argument('--process-id', type=int, help='with --distributed: this process\'s id')
    sub.add_argument('--peer-timeout', type=float, metavar='SECONDS',
                     help=f'with --distributed: a process silent this long (hung, stopped, cut '
                          f'off) ends the others with exit code 1 and one line, within '
                          f'SECONDS + 2 s (default ${watchdog.TIMEOUT_ENV}, else '
                          f'{watchdog.DEFAULT_TIMEOUT:g})')
    sub.set_defaults(**defaults)
  config_keys.add_parser(subparsers)
  return parser


def _main(argv: list[str] | None) -> int:
  args = _parser().parse_args(argv)
  if hasattr(args, 'answer'):  # a subcommand without a config (``jaxacct config --keys``)
    return args.answer(args)
  command = args.command_object
  try:
    if args.distributed:
      _initialize_distributed(args)
    elif (args.coordinator or args.num_processes is not None or args.process_id is not None
          or args.peer_timeout is not None):
      raise config_lib.ConfigError('--coordinator, --num-processes, --process-id and '
                                   '--peer-timeout need --distributed')
    command.check_arguments(args)
    if args.max_minutes is not None and not args.max_minutes > 0:
      raise config_lib.ConfigError(f'--max-minutes must be > 0, got {args.max_minutes}')
    if not args.checkpoint_interval > 0:
      raise config_lib.ConfigError(f'--checkpoint-interval must be > 0 seconds, got '
                                   f'{args.checkpoint_interval}')
    raw = config_lib.load(args.config, args.set)
    check_outputs(args, raw)
    # "Days of CPU time" is the plain sampler's cost: a run that asks for the tilted proposal
    # costs ~M/δ samples (the §7.4 shape calibrates in ~24 min here) and is planned as it runs.
    tilted = (raw.get(command.options_section) or {}).get('proposal') == 'tilted'
    if (command.runs_monte_carlo and raw.get('accelerator_scale') and not args.force
        and not tilted and jax.default_backend() == 'cpu'):
      if command.charges_ledger and raw.get('calibration'):
        # The run precision's plan only: timing the 32-bit program too would compile it
        # (minutes at this scale) just to refuse; `jaxacct plan` prints both.
        print_plan(capacity_plan(args, raw, precisions=()), file=sys.stderr)
        print(f'  accelerators run the float32 program: `jaxacct plan {args.config}` projects it',
              file=sys.stderr)
      raise config_lib.ConfigError(
          f'{args.config} is accelerator-scale (days of CPU time); run it on a GPU/TPU or pass '
          '--force')
    with leaving_no_new_empty_folders(run_folders(args, raw)):  # a refused run leaves none
      payload = command.run(args, raw)
  except Exception as error:  # pylint: disable=broad-except  # the exit code sorts them
    if args.distributed and _is_lost_peer(error):
      _exit_after_lost_peer(error)
    return _report_error(error, debug=args.debug, section=command.options_section)
  if not sharding.is_leader():
    return 0  # every process computed the same result; process 0 reports it
  if args.json:
    print(json.dumps(payload))
  else:
    command.print_human(payload)
  return 0
