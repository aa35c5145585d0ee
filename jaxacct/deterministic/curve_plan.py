"""The plan of a deterministic report: how long its queries will take, before they run.

A bad-event curve (MMCC, conditional composition: ``mixture_pld.BadEventCurve``) composes a
new PLD for each δ_E it is asked about (δ_E = δ/2), so a report costs its number of
compositions times their cost, and neither is known before the queries run: a δ(ε) query
searches δ by regula falsi, and the report curve stops where ε(δ) passes its top. The plan
therefore *replays* the run's own queries on the curve's ``coarse_copy`` — the same searches
at about the same δ_E, each composition ~10 times cheaper — to count the compositions and their
δ_E. A full composition's cost grows as δ_E falls (wider PLD supports: ~0.6 s at δ_E = 0.25 to
~1.3 s at 5·10⁻¹⁰ for the MMCC config) while a coarse one's is mostly fixed overhead, so the
coarse seconds are not scaled; the plan times full compositions at the replay's largest and
smallest δ_E and interpolates linearly in ln δ_E. Both are compositions the run needs (the
report curve's first and last points): the curve keeps them, so the run does not compute them
again.

Curves whose queries are cheap (one composed PLD or RDP vector answers every ε) have nothing
to plan (``plan_queries`` returns None).

The replay makes no progress calls (its queries are the run's, called without progress), so
the plan announces itself before the replay and again before the timed compositions
(``progress.announce``): a log shows what the minute it may take is spent on. The coarse copy
saves most where the PLD grid dominates a composition's cost (MMCC); where building the pairs
dominates (conditional composition of a short balls-in-bins run), a coarse composition costs
about as much as a full one, and the replay about as much as the run.

References:
  Choquette-Choo, Ganesh, Steinke and Thakurta, "Privacy Amplification for Matrix Mechanisms",
  arXiv:2310.15526 (ICLR 2024), Thm 4.8 (δ = δ_PLD + δ₁, the composition per δ₁);
  Schuchardt and Kalinin (2026), Lemma 4.1 (the same structure for conditional composition)
  (docs/references.md).
"""

from __future__ import annotations

import dataclasses
import time
from typing import Callable

import numpy as np

from jaxacct import progress as progress_lib
from jaxacct.progress import format_seconds
from jaxacct.deterministic.accountant import TightestCurve
from jaxacct.deterministic.base import PrivacyCurve
from jaxacct.deterministic.mixture_pld import BadEventCurve

# A line at least this often while the plan composes: no log stays silent over ~10 s.
_HEARTBEAT_SECONDS = 8.0


@dataclasses.dataclass(frozen=True)
class CurvePlan:
  """What ``plan_queries`` projects for a run's queries.

  Attributes:
    compositions: the compositions the replay made (every costly curve, both directions).
    projected_seconds: the run's queries after the plan (the timed compositions excluded: the
      curve keeps them).
    timed: (δ_E, seconds) of each full composition timed, per costly curve in order.
    plan_seconds: the plan's own seconds (replay and the timed compositions).
  """

  compositions: int
  projected_seconds: float
  timed: tuple[tuple[float, float], ...]
  plan_seconds: float

  @property
  def seconds_per_composition(self) -> tuple[float, float]:
    """(fewest, most) seconds of a timed full composition."""
    seconds = [t for _, t in self.timed]
    return min(seconds), max(seconds)

  def to_dict(self) -> dict:
    return dataclasses.asdict(self)


def _costly(curve: PrivacyCurve) -> dict[str, BadEventCurve]:
  """The curves of ``curve`` whose queries compose new PLDs, by name."""
  if isinstance(curve, BadEventCurve):
    return {'curve': curve}
  if isinstance(curve, TightestCurve):
    return {name: c for name, c in curve.curves.items() if isinstance(c, BadEventCurve)}
  return {}


def _coarse(curve: PrivacyCurve) -> PrivacyCurve:
  """``curve`` with every costly curve replaced by its ``coarse_copy`` (cheap ones shared)."""
  if isinstance(curve, BadEventCurve):
    return curve.coarse_copy()
  return TightestCurve({name: c.coarse_copy() if isinstance(c, BadEventCurve) else c
                        for name, c in curve.curves.items()})


def plan_queries(curve: PrivacyCurve, queries: Callable[[PrivacyCurve], object], *,
                 progress=None) -> CurvePlan | None:
  """Projects the seconds of ``queries(curve)`` by running ``queries`` on a coarse copy.

  Args:
    curve: the run's curve (``deterministic.privacy_curve``).
    queries: the run's queries as a function of a curve (without progress output): called
      once here, on the coarse copy; the run then calls it on ``curve``.
    progress: where the replay and the timed compositions are announced before they start
      (``progress.announce``: a ``Reporter``; None: a person's terminal, else the ``jaxacct``
      logger at INFO; False: nowhere).

  Returns:
    ``CurvePlan``, or None when ``curve`` has no costly curve (nothing worth planning) or the
    replay composed nothing.
  """
  costly = _costly(curve)
  if not costly:
    return None
  started = time.perf_counter()
  which = ('the ' + ' and '.join(costly) + ' curve' + 's' * (len(costly) > 1)
           if isinstance(curve, TightestCurve) else 'the curve')
  progress_lib.announce(progress, f'planning the report\'s PLD compositions: its queries '
                                  f'replayed on a coarse copy of {which}…')
  coarse = _coarse(curve)
  with progress_lib.heartbeat(progress, 'the replay', count=lambda: sum(
      len(c.composition_seconds) for c in _costly(coarse).values()), every=_HEARTBEAT_SECONDS):
    queries(coarse)
  replay = {name: list(c.composition_seconds) for name, c in _costly(coarse).items()}
  if not any(replay.values()):
    return None
  extremes = dict.fromkeys(f'{bound(b for _, b in keys):.3g}' for keys in replay.values()
                           if keys for bound in (max, min))
  progress_lib.announce(progress, f'the replay made {sum(map(len, replay.values()))} '
                                  f'compositions in {format_seconds(time.perf_counter() - started)}'
                                  f'; timing full ones at δ_E = {", ".join(extremes)} (the run '
                                  'keeps them)…')
  projected, timed = 0.0, []
  beat = progress_lib.heartbeat(progress, 'timing the full compositions',
                                every=_HEARTBEAT_SECONDS)
  with beat:
    projected, timed = _time_full_compositions(costly, replay)
  return CurvePlan(compositions=sum(len(keys) for keys in replay.values()),
                   projected_seconds=float(projected), timed=tuple(timed),
                   plan_seconds=time.perf_counter() - started)


def _time_full_compositions(costly: dict, replay: dict) -> tuple[float, list]:
  """Composes the full curves' compositions at each replay's largest and smallest δ_E (kept
  by the run's curve) and projects the rest by a line in ln δ_E: (projected seconds, timed
  (δ_E, seconds))."""
  projected, timed = 0.0, []
  for name, keys in replay.items():
    if not keys:
      continue
    fine = costly[name]
    # Full compositions at the largest and smallest δ_E (the run's too: kept by the curve).
    ends = [max(keys, key=lambda k: k[1]), min(keys, key=lambda k: k[1])]
    points = []
    for direction, bad_event in dict.fromkeys(ends):
      fine.composed(direction, bad_event)  # composed now, or kept from an earlier query
      seconds = fine.composition_seconds[direction, bad_event]
      points.append((np.log(bad_event), seconds))
      timed.append((bad_event, seconds))
    (x0, y0), (x1, y1) = points[0], points[-1]

    def cost(bad_event, x0=x0, y0=y0, x1=x1, y1=y1):
      if x1 == x0:
        return y0
      return y0 + (y1 - y0) * (np.log(bad_event) - x0) / (x1 - x0)

    projected += sum(cost(bad_event) for direction, bad_event in keys
                     if (direction, bad_event) not in fine.composition_seconds)
  return projected, timed
