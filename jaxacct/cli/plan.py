"""``jaxacct plan CONFIG``: the capacity plan of the config's Monte Carlo calibration — samples,
throughput measured here, projected wall time here and on N devices (``montecarlo/plan.py``)."""

from __future__ import annotations

import argparse


from jaxacct import config as config_lib
from jaxacct import report
from jaxacct.cli.common import (Command, capacity_plan, output_dir, print_plan, write_on_leader)


def _plan(args, raw) -> dict:
  payload = capacity_plan(args, raw, ('float64', 'float32') if args.precision == 'both'
                           else (args.precision,))
  folder = output_dir(args, raw)
  write_on_leader(report.write_json, folder, 'plan.json', payload)
  payload['report'] = str(folder)
  return payload


def _print(payload: dict) -> None:
  print_plan(payload)
  print(f'report: {payload["report"]}')


def _add_arguments(parser: argparse.ArgumentParser) -> None:
  parser.add_argument('--devices', type=int, metavar='N',
                      help='project to N devices (default: the devices here)')
  parser.add_argument('--samples-per-second', type=float, metavar='R',
                      help='one-σ samples/s per device, instead of measuring here')
  parser.add_argument('--precision', choices=('both', 'float64', 'float32'), default='both',
                      help='the device programs to time (default both; each compiles once, '
                           'the float32 one of a large truncated scheme in minutes on a CPU)')


def _check_arguments(args) -> None:
  if args.devices is not None and args.devices < 1:
    raise config_lib.ConfigError(f'--devices must be an integer >= 1, got {args.devices}')
  if args.samples_per_second is not None and not 0 < args.samples_per_second < float('inf'):
    raise config_lib.ConfigError(f'--samples-per-second must be finite and > 0, got '
                                 f'{args.samples_per_second}')

COMMAND = Command(name='plan', help='samples, measured throughput and projected time of a '
                  'calibration', run=_plan, print_human=_print, order=4, runs_monte_carlo=False,
                  add_arguments=_add_arguments, check_arguments=_check_arguments)
