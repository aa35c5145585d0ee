"""Capacity plan accuracy: the plan's projected wall time beside the measured one.

For each config, ``jaxacct COMMAND CONFIG --json`` runs in a fresh process; the CLI prints the
plan before the run and records ``plan_check`` in its JSON: the plan's projection of the rest of
the run after the plan and the measured seconds of that rest. ``calibrate``: the capacity plan
(``montecarlo/evr/plan.py``: the sweeps, the verification, the report curve and the figures; the
compiles and the initial σ are done by the plan, which the run then reuses). ``estimate`` with
a deterministic accountant whose queries compose PLDs (MMCC): the report's queries replayed on a
coarse copy of the curve (``deterministic/curve_plan.py``). ``train``: the calibration's
capacity plan without its report, plus the training's first steps timed
(``training.task.project_training``). Printed side by side with their ratio, the whole
process's seconds and the machine's load average (other work on the machine moves both
figures, not always alike). Each run has its own temporary attempt ledger: measuring charges
nothing of the user's.

Goal: measured / projected within [1/1.3, 1.3].

Run from the repository root:
``python benchmarks/plan_accuracy.py [CONFIG[:COMMAND] ...] [--set K=V]`` (default: the five
runs of ``DEFAULT_RUNS``; the multi-attribution calibration takes ~15 min on a 2-core CPU).
"""

from __future__ import annotations

import argparse
import json
import os
import pathlib
import subprocess
import sys
import tempfile
import time

ROOT = pathlib.Path(__file__).resolve().parents[1]
DEFAULT_RUNS = ('quickstart:calibrate', 'truncated_bminsep_small:calibrate',
                'poisson_bandmf_mmcc:estimate', 'digits_bandmf:train',
                'multi_attribution:calibrate')


def run(config: str, subcommand: str, overrides: list[str]) -> dict:
  """One ``jaxacct SUBCOMMAND CONFIG`` in a fresh process: its JSON payload and wall seconds."""
  with tempfile.TemporaryDirectory() as folder:
    command = [sys.executable, '-m', 'jaxacct', subcommand, str(ROOT / 'configs' /
                                                                f'{config}.yaml'),
               '--json', '--out', folder, '--force']
    for override in overrides:
      command += ['--set', override]
    # A measurement, not a release: a fresh attempt ledger per run (never the user's).
    env = {**os.environ, 'JAXACCT_LEDGER': str(pathlib.Path(folder) / 'ledger.json')}
    start = time.perf_counter()
    done = subprocess.run(command, capture_output=True, text=True, cwd=ROOT, check=False,
                          env=env)
    seconds = time.perf_counter() - start
  if done.returncode != 0:
    raise RuntimeError(f'{config}: exit {done.returncode}\n{done.stderr[-2000:]}')
  return {**json.loads(done.stdout), 'process_seconds': seconds}


def main() -> None:
  parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
  parser.add_argument('runs', nargs='*', default=list(DEFAULT_RUNS),
                      metavar='CONFIG[:COMMAND]', help='COMMAND: calibrate (default), estimate '
                      'or train')
  parser.add_argument('--set', action='append', default=[], metavar='KEY=VALUE')
  args = parser.parse_args()
  print(f'{"config":38s} {"projected s":>11s} {"measured s":>10s} {"ratio":>6s} '
        f'{"process s":>9s} {"load":>5s}')
  for spec in args.runs:
    config, _, subcommand = spec.partition(':')
    payload = run(config, subcommand or 'calibrate', args.set)
    check = payload['plan_check']
    projected, measured = check['projected_seconds'], check['measured_seconds']
    print(f'{spec:38s} {projected:11.1f} {measured:10.1f} {measured / projected:6.2f} '
          f'{payload["process_seconds"]:9.1f} {os.getloadavg()[0]:5.1f}', flush=True)


if __name__ == '__main__':
  main()
