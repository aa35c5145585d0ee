"""The sampling-free b-min-sep accountant next to verified Monte Carlo, at the shipped configs.

For each config it calibrates σ at the config's own target (ε, δ) twice:

* verified Monte Carlo (``calibrate_noise_multiplier``, plain proposal, the config's defaults:
  Estimate-Verify-Release, Dong & Ganesh (2026) App. A) — a release that holds with the EVR
  failure bound;
* ``minsep_renyi`` (``calibrate_deterministic(..., accountant='minsep_renyi')``): exact
  integer-order Rényi divergences of the remove direction (the α-tuple chain) and the proven
  add-direction bounds, no sampling — a deterministic guarantee;

and prints both σ, their ratio (the noise the deterministic bound costs), minsep_renyi's
ε(δ) at the Monte Carlo σ, and the seconds of each. The ledger is a file in ``--state`` (not
the user's). Never timed inside tests. Usage (from the repository root):

  PYTHONPATH=. python benchmarks/minsep_renyi.py [--state /tmp/minsep_renyi]

Results: benchmarks/RESULTS.md ("minsep_renyi next to verified Monte Carlo").
"""

from __future__ import annotations

import argparse
import pathlib
import time

import jax

import jaxacct
from benchmarks.tilted_production import state_folder
from jaxacct import config

ROOT = pathlib.Path(__file__).resolve().parents[1]
CONFIGS = ('quickstart', 'bminsep_grid_7_1_bands4_epoch256', 'bminsep_grid_7_1_bands4_epoch1024',
           'bminsep_grid_7_1_bands16_epoch256', 'bminsep_grid_7_1_bands16_epoch1024')


def main() -> None:
  parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
  parser.add_argument('--state', default='/tmp/minsep_renyi')
  parser.add_argument('--only', default=None, help='one config name')
  args = parser.parse_args()
  state = state_folder(args.state)
  print('| config | (ε, δ) | n, b, bands | verified MC σ | MC s | minsep_renyi σ | s | ratio '
        '| minsep_renyi ε(δ) at the MC σ |')
  print('|---|---|---|---:|---:|---:|---:|---:|---:|')
  for name in CONFIGS if args.only is None else (args.only,):
    raw = config.load(ROOT / 'configs' / f'{name}.yaml', [])
    mechanism = config.mechanism_from(raw, 1.0)
    epsilon = float(raw['calibration']['epsilon'])
    delta = float(raw['calibration']['delta'])
    scheme, matrix = mechanism.scheme, mechanism.matrix
    start = time.perf_counter()
    verified = jaxacct.calibrate_noise_multiplier(
        scheme, matrix, epsilon=epsilon, delta=delta, key=jax.random.key(0),
        run=jaxacct.RunOptions(ledger=jaxacct.FileLedger(state / f'{name}-ledger.json')))
    mc_seconds = time.perf_counter() - start
    start = time.perf_counter()
    deterministic, guarantee = jaxacct.calibrate_deterministic(
        scheme, matrix, epsilon=epsilon, delta=delta, accountant='minsep_renyi')
    renyi_seconds = time.perf_counter() - start
    assert guarantee.accountant == 'minsep_renyi'
    mc_sigma = verified.guarantee.noise_multiplier
    at_mc = jaxacct.epsilon_for_delta(jaxacct.MatrixMechanism(scheme, matrix, mc_sigma), delta,
                                      accountant='minsep_renyi')
    print(f'| {name} | ({epsilon:g}, {delta:g}) | {scheme.iterations}, '
          f'{getattr(scheme, "min_sep", "-")}, {matrix.num_bands} | {mc_sigma:.5f} | '
          f'{mc_seconds:.0f} | {deterministic.noise_multiplier:.5f} | {renyi_seconds:.0f} | '
          f'{deterministic.noise_multiplier / mc_sigma:.3f} | {at_mc:.3f} |', flush=True)


if __name__ == '__main__':
  main()
