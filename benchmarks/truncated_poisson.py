"""Truncated-Poisson accountant (Ganesh (2025)): speed and tightness against dp_accounting.

Prints
1. wall time of one ε at T = 1000 (n = 60000, p = 0.01, B = 650, σ = 1, δ = 1e-5, zero-out) for
   ``jaxacct`` (exact Thm 3.3 pairs) and for dp_accounting's ``TruncatedSubsampledGaussianDpEvent``
   (PLDAccountant, REPLACE_SPECIAL, same discretisation), in the same run, with the ratio;
2. the ε gap, ours (add/remove, zero-out, replace-one) vs dp_accounting (which uses the replace-one
   r = 2 pair for every relation), on (a) n = 60000, p = 0.01, B ∈ {600, 620, 650}, σ = 1,
   T = 1000, δ = 1e-5 and (b) the Dong & Ganesh (2026) §7.4 production group: n = 57600,
   p = 1793/57600, B = 2048, σ = 0.627, T = 29, δ = 1.30158e-8 (an independent numpy PLD gave
   ZO ≈ 8.119, RO ≈ 8.445; not values from either paper).

Timing: the minimum of ``--repeats`` runs, each building the PLD from scratch (no caching in
either library). Run from the repository root: ``python benchmarks/truncated_poisson.py``.
"""

from __future__ import annotations

import argparse
import pathlib
import sys
import time

import dp_accounting
from dp_accounting.pld import pld_privacy_accountant

ROOT = pathlib.Path(__file__).resolve().parents[1]
sys.path.insert(0, str(ROOT))

from jaxacct.deterministic import truncated_poisson as tp  # noqa: E402

NR = dp_accounting.NeighboringRelation
_RELATION = {'add_remove': NR.ADD_OR_REMOVE_ONE, 'zero_out': NR.REPLACE_SPECIAL,
             'replace_one': NR.REPLACE_ONE}


def dpa_epsilon(n, p, b, sigma, steps, delta, relation, discretization):
  accountant = pld_privacy_accountant.PLDAccountant(
      neighboring_relation=relation, value_discretization_interval=discretization)
  accountant.compose(dp_accounting.TruncatedSubsampledGaussianDpEvent(n, p, b, sigma), steps)
  return accountant.get_epsilon(delta)


def best_time(fn, repeats):
  times, value = [], None
  for _ in range(repeats):
    start = time.perf_counter()
    value = fn()
    times.append(time.perf_counter() - start)
  return min(times), value


def gap_table(title, n, p, batch_sizes, sigma, steps, delta, discretization):
  print(f'\n{title}: n={n}, p={p:.6g}, sigma={sigma}, T={steps}, delta={delta:g}, '
        f'interval={discretization:g}')
  print(f'{"B":>6} {"w2":>11} {"q":>10} | {"ours AR":>9} {"ours ZO":>9} {"ours RO":>9} | '
        f'{"dpa ZO":>9} {"dpa RO":>9} | {"ZO gap":>8} {"AR gap":>8}')
  for b in batch_sizes:
    regimes = tp.truncation_regimes(n, p, b)
    ours = {adjacency: tp.truncated_poisson_epsilon(
        n, p, b, sigma, steps, adjacency, delta, value_discretization_interval=discretization)
            for adjacency in tp.ADJACENCIES}
    theirs = {adjacency: dpa_epsilon(n, p, b, sigma, steps, delta, _RELATION[adjacency],
                                     discretization) for adjacency in ('zero_out', 'replace_one')}
    print(f'{b:>6} {regimes.w2:>11.4e} {regimes.q:>10.6f} | {ours["add_remove"]:>9.5f} '
          f'{ours["zero_out"]:>9.5f} {ours["replace_one"]:>9.5f} | {theirs["zero_out"]:>9.5f} '
          f'{theirs["replace_one"]:>9.5f} | {ours["zero_out"] - theirs["zero_out"]:>+8.4f} '
          f'{ours["add_remove"] - theirs["zero_out"]:>+8.4f}')


def main():
  parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
  parser.add_argument('--repeats', type=int, default=3)
  parser.add_argument('--interval', type=float, default=1e-4, help='PLD discretisation')
  args = parser.parse_args()

  n, p, b, sigma, steps, delta = 60000, 0.01, 650, 1.0, 1000, 1e-5
  print(f'1. one epsilon, zero-out: n={n}, p={p}, B={b}, sigma={sigma}, T={steps}, '
        f'delta={delta:g}, interval={args.interval:g}, best of {args.repeats}')
  ours_time, ours = best_time(lambda: tp.truncated_poisson_epsilon(
      n, p, b, sigma, steps, 'zero_out', delta, value_discretization_interval=args.interval),
                              args.repeats)
  dpa_time, dpa = best_time(lambda: dpa_epsilon(n, p, b, sigma, steps, delta, NR.REPLACE_SPECIAL,
                                                args.interval), args.repeats)
  print(f'   jaxacct (exact Thm 3.3 pairs):          {ours_time:7.3f} s   eps = {ours:.6f}')
  print(f'   dp_accounting TruncatedSubsampled...:   {dpa_time:7.3f} s   eps = {dpa:.6f}')
  print(f'   time ratio jaxacct / dp_accounting = {ours_time / dpa_time:.2f}; '
        f'eps gap = {ours - dpa:+.6f} ({(ours - dpa) / dpa:+.3%})')

  gap_table('2a. realistic DP-SGD', 60000, 0.01, (600, 620, 650), 1.0, 1000, 1e-5, args.interval)
  gap_table('2b. Dong & Ganesh (2026) §7.4 production group', 57600, 1793 / 57600, (2048,),
            0.627, 29, 1.30158e-8, args.interval)


if __name__ == '__main__':
  main()
