"""A deterministic accountant's report of one mechanism's privacy curve (host code): ε(δ) at a
target δ, the δ(ε) table of both directions and the proven points of its figure, as one
JSON-ready result (``CurveReport.to_dict``, the ``estimate.json`` of ``jaxacct estimate``).

Every number is a query of the curve (``base.PrivacyCurve``), so the report is a list of pairs
the accountant proves. ``query`` makes the queries in the order the run and its plan's replay
(``curve_plan.plan_queries``) share: ε(δ), the figure's points (ε(δ) on fixed δ, whose
brackets every δ(ε) search of the table then starts from), the table.

References: those of the curve's accountant (``base.get(name).references``).
"""

from __future__ import annotations

import dataclasses
import typing

import numpy as np

from jaxacct.conventions import DIRECTIONS, Method
from jaxacct.deterministic import accountant as accountant_lib
from jaxacct.deterministic import base
from jaxacct.mechanism import MatrixMechanism

FIGURE_FLOOR = 1e-6
"""The smallest δ of a report's figure, relative to the target δ (10⁻²⁰ without one): smaller δ
are of no use to a reader (``report.plot_delta_curve`` draws down to the same δ)."""


def figure_points(curve: base.PrivacyCurve, epsilons, *, delta: float | None = None,
                  released: float | None = None, progress=None) -> dict:
  """The proven (ε(δ), δ) points of a report's figure (``accountant.report_curve``): up to 1.5 ×
  the largest of ``epsilons`` and the ``released`` ε (when finite), down to ``FIGURE_FLOOR`` ×
  ``delta``. ``progress``: as ``report_curve``'s (stage "report curve")."""
  shown = [float(e) for e in epsilons] + (
      [released] if released is not None and np.isfinite(released) else [])
  return accountant_lib.report_curve(curve, shown,
                                     floor=FIGURE_FLOOR * delta if delta else 1e-20,
                                     progress=progress)


class Answers(typing.NamedTuple):
  """What a report's queries return (``query``): ε(δ) (None without δ), the figure's points
  and the δ(ε) table per direction."""

  epsilon: float | None
  points: dict
  delta_by_direction: dict


def query(curve: base.PrivacyCurve, epsilons, *, delta: float | None = None,
          progress=None) -> Answers:
  """The report's queries of ``curve``, in the run's order: ε(``delta``), the figure's points
  (``figure_points``) and δ(ε) of both directions on ``epsilons``. ``progress``: after every
  point (stage "report curve") and every query of the table (stage "δ(ε) table")."""
  epsilons = [float(e) for e in epsilons]
  released = None if delta is None else curve.epsilon_for_delta(delta)
  points = figure_points(curve, epsilons, delta=delta, released=released, progress=progress)
  by_direction = {d: [] for d in DIRECTIONS}
  for i, (e, d) in enumerate(((e, d) for e in epsilons for d in DIRECTIONS), start=1):
    by_direction[d].append(curve.delta_for_epsilon(e, direction=d))
    if progress is not None:
      progress(i, len(epsilons) * len(DIRECTIONS), 'δ(ε) table')
  return Answers(released, points, by_direction)


@dataclasses.dataclass(frozen=True, kw_only=True)
class CurveReport:
  """A deterministic accountant's answers about one mechanism (``curve_report``): proven
  bounds, so ``to_dict`` says ``verified`` and method ``"deterministic"``.

  Attributes:
    noise_multiplier: σ of the mechanism.
    accountant: the accountant that answered: the one requested, or for ``"auto"`` the one
      that gave ε(δ) (``"auto"`` without a target δ).
    adjacency: the neighbouring relation accounted.
    accountant_options: the accountant's options the curve was built with.
    epsilons: the table's ε; delta_by_direction: direction → δ(ε) on them.
    delta: the target δ (None: no ε(δ) asked); epsilon: ε(δ), max over directions.
    explanation: the curve's ``explain(delta)`` (for ``"auto"``: every accountant's ε(δ) and
      which gave it), or None.
    points: the figure's points (``figure_points``): ``{"epsilons": […], "delta": […]}``.
  """

  noise_multiplier: float
  accountant: str
  adjacency: str
  accountant_options: dict
  epsilons: list
  delta_by_direction: dict
  delta: float | None
  epsilon: float | None
  explanation: dict | None
  points: dict

  def to_dict(self) -> dict:
    """JSON-ready, with the keys of a Monte Carlo report where they apply (``num_samples`` 0
    and ``seed`` None: nothing was sampled); ``delta_of_epsilon`` is the max over directions
    and ``curve`` the figure's points."""
    return {
        'noise_multiplier': self.noise_multiplier, 'epsilon': self.epsilon,
        'delta': self.delta, 'verified': True, 'method': Method.DETERMINISTIC.value,
        'adjacency': self.adjacency, 'accountant': self.accountant, 'num_samples': 0,
        'seed': None, 'epsilons': list(self.epsilons),
        'delta_of_epsilon': [max(pair) for pair in zip(*self.delta_by_direction.values())],
        'delta_of_epsilon_by_direction': self.delta_by_direction,
        'accountant_options': self.accountant_options, 'explanation': self.explanation,
        'curve': self.points}


def curve_report(mechanism: MatrixMechanism, curve: base.PrivacyCurve, epsilons, *,
                 accountant: str, adjacency: str, accountant_options: dict | None = None,
                 delta: float | None = None, progress=None) -> CurveReport:
  """The report of ``curve``, ``mechanism``'s curve under ``accountant`` (a name, or
  ``"auto"`` for a ``TightestCurve``) with ``adjacency`` and ``accountant_options``: its
  queries (``query``, with ``progress``) and, at ``delta``, the curve's explanation."""
  answers = query(curve, epsilons, delta=delta, progress=progress)
  explanation = None if delta is None else curve.explain(delta)
  if isinstance(curve, accountant_lib.TightestCurve):  # auto: name the one that gave ε(δ)
    accountant = accountant_lib.AUTO if explanation is None else explanation['accountant']
  return CurveReport(
      noise_multiplier=float(mechanism.noise_multiplier), accountant=accountant,
      adjacency=adjacency, accountant_options={} if accountant_options is None
      else dict(accountant_options), epsilons=[float(e) for e in epsilons],
      delta_by_direction=answers.delta_by_direction, delta=delta, epsilon=answers.epsilon,
      explanation=explanation, points=answers.points)
