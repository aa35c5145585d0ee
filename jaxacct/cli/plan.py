"""``jaxacct plan CONFIG``: the capacity plan of the config's Monte Carlo calibration — samples,
throughput measured here, projected wall time here and on N devices (``montecarlo/evr/plan.py``).

It times the device programs of the precision the run would use only (``monte_carlo.precision``,
``common.run_precision``); ``--precision both`` (or the other precision's name) times the other
one's too. On a CPU the float32 program of a large truncated scheme compiles in minutes, and a
plan of both precisions cost more than the calibration it planned (benchmarks/RESULTS.md).
"""

from __future__ import annotations

import argparse


from jaxacct import config as config_lib
from jaxacct import report
from jaxacct.cli.common import (Command, capacity_plan, plan_mechanism, print_plan)
from jaxacct.cli._folders import (output_dir, write_on_leader)


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
                           'monte_carlo.precision), both, or the one named as well as the '
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
