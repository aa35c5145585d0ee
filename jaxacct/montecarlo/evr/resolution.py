"""What an estimate's samples resolve (host code, float64): the ε at which δ̂(ε) is below a
target δ with its confidence band, each direction above its own "rule of three" floor.

The floor. A direction's N terms lie in [0, S] and have mean δ. If no term is above 0, a δ up
to 3·S/N is not excluded at 95 %: the terms over S lie in [0, 1] with mean μ = δ/S, each is 0
with probability at most 1 − μ, so all N are 0 with probability ≤ (1 − μ)^N ≤ e^{−μN} < 5 %
only when μ > 3/N. Plain terms (1 − e^{ε−L})₊ have S = 1, so the floor is 3/N; the tilted
remove direction's terms have S = M(α, ε) (``tilted.py``), so its floor is 3·M(α, ε)/N, per ε.
Each direction's floor must be below δ: a δ under one direction's floor is not resolved,
whatever the other direction resolves.

References:
  Andy Dong and Arun Ganesh, "Privacy Amplification for BandMF via b-Min-Sep Subsampling",
  arXiv:2602.09338 (v2): §2.5 (the estimator and its standard error; docs/references.md).
"""

from __future__ import annotations

import math
import typing

import numpy as np

from jaxacct import _validate
from jaxacct.conventions import DIRECTIONS
from jaxacct.errors import InputError


class Resolution(typing.NamedTuple):
  """What an estimate resolves at a δ (``DeltaEstimate.resolved_epsilon``): the resolved ε,
  or None with the samples per direction that would resolve it and why."""

  epsilon: float | None
  needed_samples: int | None
  reason: str | None


class Support(typing.NamedTuple):
  """One direction's bound on its terms, for its floor (module docstring).

  Attributes:
    bound: S(ε) per ε of the grid, float64 (E,): 1 for plain terms, M(α, ε) for tilted ones.
    name: the direction as a reason names it ("tilted remove direction").
    rule: its floor as a formula ("3/N", "3·M(α = 3, ε)/N").
  """

  bound: np.ndarray
  name: str
  rule: str


def grid_rows(grid: np.ndarray, epsilons) -> slice | list[int]:
  """The rows of ``grid`` holding ``epsilons`` (each must be a grid point), or every row
  (``slice(None)``) for None."""
  if epsilons is None:
    return slice(None)
  points = grid.tolist()
  missing = [float(e) for e in epsilons if float(e) not in points]
  if missing:
    raise InputError(f'epsilons {missing} are not on this estimate\'s grid')
  return [points.index(float(e)) for e in epsilons]


def resolve(epsilons: np.ndarray, delta_hat: dict, standard_error: dict, num_samples: int,
            delta: float, *, z: float = 2.0, supports: dict | None = None) -> Resolution:
  """The smallest grid ε whose δ̂(ε) is resolved below ``delta`` by ``num_samples`` per
  direction: its upper confidence bound max over directions of δ̂ + z·s.e. (the larger
  standard error) is below ``delta``, and ``delta`` is above every direction's floor 3·S/N
  there (module docstring). Otherwise ``epsilon`` is None and ``needed_samples`` says how many
  samples per direction would resolve it (from the s.e.'s 1/√N scaling at the first ε where
  δ̂ < ``delta``, and at least every direction's floor there; None when no grid ε has
  δ̂ < ``delta``: the grid, not N, is then short), the reason naming the direction that limits
  it.

  Args:
    epsilons, delta_hat, standard_error, num_samples: the estimate (per direction, (E,)).
    delta: the target δ. z: the band's standard errors.
    supports: per direction its ``Support``; None: plain terms in both directions (one floor,
      3/N).
  """
  delta = _validate.probability('delta', delta)
  z = _validate.positive_finite('z', z)
  n, grid = num_samples, np.asarray(epsilons)
  bounds = {d: (np.ones(grid.size) if supports is None else supports[d].bound)
            for d in DIRECTIONS}
  floors = {d: 3.0 * bounds[d] / n for d in DIRECTIONS}
  # Per ε, the fewest samples whose every floor is below δ (the "rule of three").
  rule_of_three = np.asarray([max(math.ceil(3.0 * float(bounds[d][i]) / delta) + 1
                                  for d in DIRECTIONS) for i in range(grid.size)])
  above_floors = np.all([floors[d] < delta for d in DIRECTIONS], axis=0)

  def below_floor(i: int) -> str:
    if supports is None:
      return (f'δ = {delta:.3g} is below the resolution 3/N = {floors[DIRECTIONS[0]][i]:.3g} '
              f'of N = {n:,} samples per direction')
    phrases = {d: (f'the {supports[d].name}\'s {supports[d].rule} = {floors[d][i]:.3g}'
                   + (f' at ε = {grid[i]:.4g}' if np.ptp(bounds[d]) else '')
                   + f' (needs N ≥ {math.ceil(3.0 * float(bounds[d][i]) / delta) + 1:,})')
               for d in DIRECTIONS}
    return (f'δ = {delta:.3g} is below the resolution of N = {n:,} samples per direction: '
            + '; '.join(phrases[d] + ('' if floors[d][i] >= delta else ' resolves it')
                        for d in sorted(DIRECTIONS, key=lambda d: floors[d][i] < delta)))

  if not above_floors.any():
    largest = np.max([bounds[d] for d in DIRECTIONS], axis=0)
    i = int(np.lexsort((np.sum([bounds[d] for d in DIRECTIONS], axis=0), largest))[0])
    return Resolution(None, int(rule_of_three[i]), below_floor(i))
  high = np.maximum(*(delta_hat[d] for d in DIRECTIONS))
  error = np.maximum(*(standard_error[d] for d in DIRECTIONS))
  upper = high + z * error
  resolved = np.flatnonzero((upper < delta) & above_floors)
  if resolved.size:
    return Resolution(float(grid[resolved[0]]), None, None)
  below = np.flatnonzero(high < delta)
  if not below.size:
    return Resolution(None, None, f'no ε of the grid (up to {grid.max():.4g}) has '
                                  f'δ̂(ε) below δ = {delta:.3g}: extend the ε grid')
  i = below[0]
  needed = math.ceil(n * (z * error[i] / (delta - high[i]))**2)
  if upper[i] < delta:  # resolved there but for a direction's floor
    return Resolution(None, max(needed + 1, int(rule_of_three[i])), below_floor(i))
  reason = (f'the upper confidence bound δ̂ + {z:g}·s.e. is not below δ = {delta:.3g} '
            f'at any ε of the grid with N = {n:,} samples per direction')
  if supports is not None:
    reason += ' (at ε = {:.4g}: {})'.format(grid[i], ', '.join(
        f'the {supports[d].name}\'s δ̂ + {z:g}·s.e. = '
        f'{delta_hat[d][i] + z * standard_error[d][i]:.3g}' for d in DIRECTIONS))
  return Resolution(None, max(needed + 1, int(rule_of_three[i])), reason)
