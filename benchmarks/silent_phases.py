"""The longest silence of each ``jaxacct`` command, as a user's log file sees it: no phase over ~10 s without a line.

Runs ``jaxacct COMMAND CONFIG`` for each config of ``configs/`` (or those given) as a cold
subprocess with stdout and stderr to pipes (so not a terminal: progress prints a plain line
every 30 s, ``jaxacct/progress.py``), timestamps every line of both streams as it arrives and
prints, per command, the wall time, the exit code and the longest gap between two lines (the
process start and its exit count as lines), with the lines on either side of it. Goal: no gap
over ~10 s.

Commands run with ``--max-minutes M`` where they take it (default 2): a Monte Carlo run or a
planned deterministic report projected over M minutes is refused right after its plan, so the
slow configs cost their plan only, and the rest run whole. Reports go to a temporary folder
and the attempt ledger to a temporary file (``$JAXACCT_LEDGER``): nothing of the user's is
touched. The timings are wall-clock of whole processes (imports and compiles included), on a
machine that may be shared: run it on an idle one to compare before and after.

Usage (from the repository root):

  python benchmarks/silent_phases.py                          # estimate and plan, every config
  python benchmarks/silent_phases.py --commands estimate --configs quickstart,balls_in_bins_auto
  python benchmarks/silent_phases.py --commands plan,calibrate --configs quickstart --max-minutes 0
  python benchmarks/silent_phases.py --logs /tmp/silent       # also keep each timestamped log

``--max-minutes 0`` leaves the flag out (the command's own default budget, 30 min).
"""

from __future__ import annotations

import argparse
import json
import os
import pathlib
import signal
import subprocess
import sys
import tempfile
import threading
import time

ROOT = pathlib.Path(__file__).resolve().parent.parent
# Commands that take --max-minutes (runs_monte_carlo in jaxacct/cli); plan does not.
BUDGETED = ('estimate', 'calibrate', 'train')
DEFAULT_COMMANDS = ('estimate', 'plan')


def _jaxacct() -> list[str]:
  """The ``jaxacct`` of this interpreter's environment (its console script, else -m)."""
  script = pathlib.Path(sys.executable).parent / 'jaxacct'
  return [str(script)] if script.exists() else [sys.executable, '-m', 'jaxacct.cli']


def run_command(argv: list[str], env: dict, timeout: float) -> dict:
  """Runs ``argv``; returns its wall seconds, exit code and timestamped lines (both streams:
  ``(seconds since start, stream, text)``, plus a last ``exit`` line)."""
  lines: list[tuple[float, str, str]] = []
  lock = threading.Lock()
  started = time.perf_counter()
  process = subprocess.Popen(argv, stdout=subprocess.PIPE, stderr=subprocess.PIPE, env=env,
                             cwd=ROOT, start_new_session=True)

  def read(stream, name):
    for raw in iter(stream.readline, b''):
      now = time.perf_counter() - started
      with lock:
        lines.append((now, name, raw.decode(errors='replace').rstrip('\n')))

  readers = [threading.Thread(target=read, args=(process.stdout, 'out'), daemon=True),
             threading.Thread(target=read, args=(process.stderr, 'err'), daemon=True)]
  for reader in readers:
    reader.start()
  try:
    code = process.wait(timeout=timeout)
  except subprocess.TimeoutExpired:
    os.killpg(process.pid, signal.SIGTERM)  # the process group this script started
    code = process.wait()
    code = f'timeout after {timeout:g} s'
  for reader in readers:
    reader.join()
  wall = time.perf_counter() - started
  lines.sort(key=lambda line: line[0])
  lines.append((wall, 'exit', f'exit {code}'))
  return {'seconds': wall, 'code': code, 'lines': lines}


def longest_gap(lines) -> tuple[float, str, str]:
  """(seconds, line before, line after) of the longest silence, from the start to the exit."""
  best, before, after, previous, text = 0.0, '(start)', '', 0.0, '(start)'
  for at, _, line in lines:
    if at - previous > best:
      best, before, after = at - previous, text, line
    previous, text = at, line
  return best, before, after


def _cut(text: str, width: int = 90) -> str:
  return text if len(text) <= width else text[:width - 1] + '…'


def main() -> None:
  parser = argparse.ArgumentParser(description=__doc__.split('\n')[0])
  parser.add_argument('--configs', help='comma-separated config names (default: every '
                                        'configs/*.yaml)')
  parser.add_argument('--commands', default=','.join(DEFAULT_COMMANDS),
                      help='comma-separated subcommands (default estimate,plan)')
  parser.add_argument('--max-minutes', type=float, default=2.0,
                      help='the budget given to commands that take one (0: none given)')
  parser.add_argument('--extra', default='', help='more flags for every command, one string')
  parser.add_argument('--timeout', type=float, default=900.0, help='seconds per command')
  parser.add_argument('--logs', help='a folder to keep each timestamped log in')
  parser.add_argument('--json', help='write the results to this JSON file too')
  args = parser.parse_args()
  names = (args.configs.split(',') if args.configs
           else sorted(path.stem for path in (ROOT / 'configs').glob('*.yaml')))
  commands = args.commands.split(',')
  logs = pathlib.Path(args.logs) if args.logs else None
  if logs:
    logs.mkdir(parents=True, exist_ok=True)
  results = []
  with tempfile.TemporaryDirectory() as scratch:
    env = {**os.environ, 'JAXACCT_LEDGER': str(pathlib.Path(scratch) / 'ledger.json')}
    env.pop('JAXACCT_PROGRESS', None)  # as a log file sees it: progress decides by itself
    print(f'{"command":<48} {"wall":>7} {"exit":>5} {"gap":>7}  around the gap', flush=True)
    for name in names:
      for command in commands:
        argv = _jaxacct() + [command, f'configs/{name}.yaml', '--out',
                             str(pathlib.Path(scratch) / name)]
        if command in BUDGETED and args.max_minutes > 0:
          argv += ['--max-minutes', f'{args.max_minutes:g}']
        argv += args.extra.split()
        result = run_command(argv, env, args.timeout)
        gap, before, after = longest_gap(result['lines'])
        shown = f'{command} {name}'
        print(f'{shown:<48} {result["seconds"]:6.1f}s {str(result["code"])[:5]:>5} '
              f'{gap:6.1f}s  after: {_cut(before)}\n{"":>72}before: {_cut(after)}', flush=True)
        if logs:
          (logs / f'{command}-{name}.log').write_text(''.join(
              f'{at:8.2f} {stream:<4} {text}\n' for at, stream, text in result['lines']))
        results.append({'command': command, 'config': name, 'argv': argv[len(_jaxacct()):],
                        'seconds': result['seconds'], 'code': result['code'],
                        'longest_gap': gap, 'before_gap': before, 'after_gap': after})
  if args.json:
    pathlib.Path(args.json).write_text(json.dumps(results, indent=1))


if __name__ == '__main__':
  main()
