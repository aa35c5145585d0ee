"""Where conditional composition's gap to Rényi comes from.

For two settings (δ = 1e-5, δ_E = δ/2, grid 1e-3):

  A  BallsInBins(iterations=50, cycle_length=50), BandedToeplitz([1.0, 0.5, 0.3]), σ = 1;
  B  BallsInBins(iterations=200, cycle_length=20) (10 epochs), C = I, σ = 2,

prints ε(δ) per direction along a ladder, each rung on top of the previous one:

  renyi            the Rényi accountant (the target);
  before           the module at commit db4abe1 (``--before``: read with git show);
  cost             the bad-event cost of the module docstring (remove: the own component, with
                   the (1 − λ̄) and hockey-stick factors; add: λ(y) and hockey stick), δ_E
                   split evenly over the bounds — sound;
  merged           + equal steps merged (``reduced_means``) — sound;
  order            + forward or reversed order, whichever ``order`` scores better — sound;
  library          + δ_E shared ∝ e^{c²/σ²} − 1 (``allocation``): what the accountant reports;
  *no union bound  + every bound gets all of δ_E (not a proof);
  *exact tails     + each bound's cost from importance-sampled exact ternary losses instead of
                   the variational bound (not a proof; Monte Carlo);
  *grid 1e-4       + a ten times finer PLD grid (sound, slower);
  *best δ_E split  + δ_E ∈ {0.1, 0.25, 0.5, 0.75, 0.9}·δ, the best (sound; five compositions).

Rungs marked * are diagnostics only, never offered as an accountant. The starred rungs run on
the order the library picked. Also times one δ(ε) (δ_E = δ/2, the library's inversion) and one
ε(δ) of the library curve, fresh.

Usage:

  python benchmarks/conditional_composition_gap.py [--only A|B] [--before] [--samples 4000]
"""

from __future__ import annotations

import argparse
import contextlib
import math
import subprocess
import time
import types

import numpy as np
from scipy import special

import jaxacct
from jaxacct.deterministic import base, mixture_pld, random_allocation
from jaxacct.deterministic import conditional_composition as cc

DELTA = 1e-5
GRID = 1e-3
BEFORE = 'db4abe1'  # the last commit before conditional composition was tightened
DIRECTIONS = ('remove', 'add')


def settings() -> dict:
  return {
      'A': (jaxacct.BallsInBins(iterations=50, cycle_length=50),
            jaxacct.BandedToeplitz([1.0, 0.5, 0.3]), 1.0),
      'B': (jaxacct.BallsInBins(iterations=200, cycle_length=20),
            jaxacct.BandedToeplitz([1.0]), 2.0),
  }


def epsilon(means, sigma, direction, *, bad_event=DELTA / 2, grid=GRID, bounds=None,
            pairs=cc.step_pairs):
  extra = {} if bounds is None else {'bounds': bounds}
  sorted_means, log_p = pairs(means, sigma, bad_event, direction, **extra)
  composed = mixture_pld.compose([
      mixture_pld.mixture_pmf(sorted_means[n], log_p[n], sigma, direction, grid)
      for n in range(means.shape[1])])
  return max(0.0, float(composed.get_epsilon_for_delta(DELTA - bad_event)))


def before_module():
  """The module as of ``BEFORE``, without its registration (it would clash)."""
  source = subprocess.run(['git', 'show', f'{BEFORE}:jaxacct/deterministic/'
                           'conditional_composition.py'], capture_output=True, text=True,
                          check=True).stdout
  source = source[:source.index('@register')]
  module = types.ModuleType('conditional_composition_before')
  exec(compile(source, 'conditional_composition_before', 'exec'), module.__dict__)
  return module


@contextlib.contextmanager
def even_allocation():
  """δ_E split evenly over the bounds (the module before ``allocation``)."""
  kept = cc.allocation
  cc.allocation = lambda means, sigma: np.full(np.shape(means), 1.0 / np.size(means))
  try:
    yield
  finally:
    cc.allocation = kept


# ---------------------------------------------------------------- oracles (not proofs)
def no_union_bound(bad_event):
  """Every bound gets all of δ_E."""
  def bounds(gram, identical, rank, rows, sigma, significance, direction):
    del significance
    return cc._tail_bounds(gram, identical, rank, rows, sigma, bad_event, direction)
  return bounds


def exact_tails(bad_event, samples, seed=0):
  """Every bound gets all of δ_E, and its cost is estimated from exact ternary losses by
  importance sampling (a Gaussian shifted along the variational bound's direction so that the
  losses sit near the variational τ)."""
  rng = np.random.default_rng(seed)

  def bounds(gram, identical, rank, rows, sigma, significance, direction):
    del significance
    b = gram.shape[0]
    values, vectors = np.linalg.eigh(gram)
    factor = vectors * np.sqrt(np.maximum(values, 0.0))  # rows: prefix means up to rotation
    start = cc._tail_bounds(gram, identical, rank, rows, sigma, bad_event, direction)
    out = np.array(start, dtype=np.float64)
    for index, row in enumerate(rows):
      ahead = np.flatnonzero(rank < rank[row])
      if not np.any(~identical[index][ahead]) or not np.isfinite(start[index]):
        continue
      mu = factor[row]
      others = factor[ahead]
      spread = others.mean(axis=0) - mu
      norm = np.linalg.norm(spread)
      unit = spread / norm if norm > 0 else np.zeros_like(spread)
      xi = norm / sigma
      centre = mu if direction == 'remove' else np.zeros_like(mu)
      z0 = (centre - mu) @ spread / sigma**2 + (mu @ mu - (others * others).sum(1).mean()) / (
          2 * sigma**2)
      shift = max(0.0, (z0 - start[index]) / xi) if xi > 0 else 0.0
      g = rng.standard_normal((samples, b))
      z = g - shift * unit
      weight = np.exp(shift * (z @ unit) + 0.5 * shift**2)
      y = centre + sigma * z
      log_own = -((y - mu)**2).sum(1) / (2 * sigma**2)
      log_others = -((y[:, None, :] - others[None])**2).sum(-1) / (2 * sigma**2)
      loss = special.logsumexp(log_others, axis=1) - math.log(ahead.size) - log_own
      count = ahead.size

      def cost(tau):
        gain = -np.expm1(np.minimum(loss - tau, 0.0))
        if direction == 'remove':
          hazard = 1.0 / (1.0 + count * math.exp(tau))
          return (1.0 - hazard) * np.mean(weight * gain) / b
        return np.mean(weight * gain / (1.0 + count * np.exp(loss)))

      low, high = start[index], start[index] + 1.0
      while cost(high) <= bad_event and high < start[index] + 200:
        low, high = high, high + 2 * (high - low)
      for _ in range(50):
        middle = 0.5 * (low + high)
        low, high = (middle, high) if cost(middle) <= bad_event else (low, middle)
      out[index] = low
    return out
  return bounds


def main() -> None:
  parser = argparse.ArgumentParser(description=__doc__.split('\n')[0])
  parser.add_argument('--only', help='A or B')
  parser.add_argument('--before', action='store_true', help='also the module at ' + BEFORE)
  parser.add_argument('--samples', type=int, default=4000,
                      help='importance samples per bound of the exact-tail oracle')
  args = parser.parse_args()
  old = before_module() if args.before else None
  for name, (scheme, matrix, sigma) in settings().items():
    if args.only and args.only != name:
      continue
    mechanism = jaxacct.MatrixMechanism(scheme, matrix, sigma)
    means = random_allocation.slot_means(scheme, matrix)
    rows = {}
    renyi = base.get('renyi').privacy_curve(mechanism)
    rows['renyi'] = {d: renyi.epsilon_for_delta(DELTA, direction=d) for d in DIRECTIONS}
    if old is not None:
      rows['before'] = {d: epsilon(means, sigma, d, pairs=old.step_pairs) for d in DIRECTIONS}
    curve = cc.ConditionalCompositionCurve(means, sigma, None, GRID)
    orders, chosen = curve.orders, {d: curve.order(d) for d in DIRECTIONS}
    with even_allocation():
      rows['cost'] = {d: epsilon(means, sigma, d) for d in DIRECTIONS}
      rows['merged'] = {d: epsilon(orders['forward'], sigma, d) for d in DIRECTIONS}
      rows['order'] = {d: epsilon(orders[chosen[d]], sigma, d) for d in DIRECTIONS}
    curve = cc.ConditionalCompositionCurve(means, sigma, None, GRID)
    start = time.perf_counter()
    rows['library'] = {d: curve.epsilon_for_delta(DELTA, direction=d) for d in DIRECTIONS}
    seconds_epsilon = time.perf_counter() - start
    fresh = cc.ConditionalCompositionCurve(means, sigma, None, GRID)
    start = time.perf_counter()
    target = rows['library']['remove']
    delta_found = fresh.delta_for_epsilon(target, direction='remove')
    seconds_delta = time.perf_counter() - start
    order = {d: curve.orders[chosen[d]] for d in DIRECTIONS}
    bad = DELTA / 2
    rows['*no union bound'] = {d: epsilon(order[d], sigma, d, bounds=no_union_bound(bad))
                               for d in DIRECTIONS}
    rows['*exact tails'] = {d: epsilon(order[d], sigma, d,
                                       bounds=exact_tails(bad, args.samples)) for d in DIRECTIONS}
    rows['*grid 1e-4'] = {d: epsilon(order[d], sigma, d, grid=1e-4,
                                     bounds=exact_tails(bad, args.samples)) for d in DIRECTIONS}
    splits = (0.1, 0.25, 0.5, 0.75, 0.9)
    rows['*best δ_E split'] = {d: min(epsilon(order[d], sigma, d, bad_event=s * DELTA, grid=1e-4,
                                              bounds=exact_tails(s * DELTA, args.samples))
                                      for s in splits) for d in DIRECTIONS}
    print(f'{name}: {scheme.iterations} steps, b = {scheme.cycle_length}, σ = {sigma}, '
          f'order {chosen}; library ε(δ) {seconds_epsilon:.1f} s, δ(ε = {target:.3f}) = '
          f'{delta_found:.3g} in {seconds_delta:.1f} s (fresh curve)')
    gap = max(rows.get('before', rows['cost']).values()) - max(rows['renyi'].values())
    previous = None
    for label, value in rows.items():
      worst = max(value.values())
      share = '' if previous is None or label == 'renyi' else (
          f'{(previous - worst) / gap:7.1%} of the gap')
      print(f'  {label:<16} remove {value["remove"]:8.3f}  add {value["add"]:8.3f}  '
            f'max {worst:8.3f}  {share}', flush=True)
      if label != 'renyi':
        previous = worst


if __name__ == '__main__':
  main()
