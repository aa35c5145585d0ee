"""The plan of a deterministic report: how long its queries will take, before they run.

A bad-event curve (MMCC, conditional composition: ``mixture_pld.BadEventCurve``) composes a
new PLD for each δ_E it is asked about (δ_E = δ/2), so a report costs its number of
compositions times their cost, and neither is known before the queries run: a δ(ε) query
searches δ by regula falsi, and the report curve stops where ε(δ) passes its top. The plan
therefore *replays* the run's own queries on the curve's ``coarse_copy`` — the same searches
at about the same δ_E, each composition tens of times cheaper — and scales the coarse
seconds by the ratio of a full composition to the coarse one at the same δ_E, timed on the
replay's median-cost δ_E. That full composition is one the run needs: the curve keeps it, so
the run does not compute it again.

Curves whose queries are cheap (one composed PLD or RDP vector answers every ε) have nothing
to plan (``plan_queries`` returns None).

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

from jaxacct.deterministic.accountant import TightestCurve
from jaxacct.deterministic.base import PrivacyCurve
from jaxacct.deterministic.mixture_pld import BadEventCurve


@dataclasses.dataclass(frozen=True)
class CurvePlan:
  """What ``plan_queries`` projects for a run's queries.

  Attributes:
    compositions: the compositions the replay made (every costly curve, both directions).
    projected_seconds: the run's queries after the plan (the timed composition excluded: the
      curve keeps it).
    seconds_per_composition: the timed full composition's seconds.
    scale: full / coarse seconds of that composition (the factor applied to the replay).
    plan_seconds: the plan's own seconds (replay and the timed composition).
  """

  compositions: int
  projected_seconds: float
  seconds_per_composition: float
  scale: float
  plan_seconds: float

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


def plan_queries(curve: PrivacyCurve,
                 queries: Callable[[PrivacyCurve], object]) -> CurvePlan | None:
  """Projects the seconds of ``queries(curve)`` by running ``queries`` on a coarse copy.

  Args:
    curve: the run's curve (``deterministic.privacy_curve``).
    queries: the run's queries as a function of a curve (without progress output): called
      once here, on the coarse copy; the run then calls it on ``curve``.

  Returns:
    ``CurvePlan``, or None when ``curve`` has no costly curve (nothing worth planning) or the
    replay composed nothing.
  """
  costly = _costly(curve)
  if not costly:
    return None
  started = time.perf_counter()
  coarse = _coarse(curve)
  queries(coarse)
  replay = _costly(coarse)
  # Coarse seconds of every composition the run will make, by (curve, direction, δ_E).
  coarse_seconds = {(name, *key): seconds for name, c in replay.items()
                    for key, seconds in c.composition_seconds.items()}
  if not coarse_seconds:
    return None
  # The composition of median coarse cost, at full resolution (kept by the run's curve).
  keys = sorted(coarse_seconds, key=coarse_seconds.get)
  name, direction, bad_event = keys[len(keys) // 2]
  before = dict(costly[name].composition_seconds)
  costly[name].composed(direction, bad_event)
  full = costly[name].composition_seconds.get((direction, bad_event), before.get(
      (direction, bad_event)))
  scale = full / max(coarse_seconds[name, direction, bad_event], 1e-9)
  done = {(n, *key) for n, c in costly.items() for key in c.composition_seconds}
  remaining = np.sum([s for key, s in coarse_seconds.items() if key not in done])
  return CurvePlan(compositions=len(coarse_seconds),
                   projected_seconds=float(scale * remaining),
                   seconds_per_composition=float(full), scale=float(scale),
                   plan_seconds=time.perf_counter() - started)
