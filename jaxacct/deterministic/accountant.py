"""The public deterministic accounting functions, by accountant name or ``"tightest"`` (host code).

- ``delta_for_epsilon(mechanism, epsilon, accountant=...)``: δ(ε), per direction or the max;
- ``epsilon_for_delta(mechanism, delta, accountant=...)``: ε(δ), likewise;
- ``calibrate_deterministic(scheme, matrix, epsilon=, delta=, accountant=...)``: the smallest
  σ meeting (ε, δ), with its ``Guarantee`` (which records the accountant);
- ``privacy_curve(mechanism, accountant=...)``: the curve those read; for ``"tightest"`` a
  ``TightestCurve`` that also says which accountant gave each answer;
- ``mechanism_pld``: the PLD object of the ``"pld"`` accountant (as before the contract).

``accountant`` is a registered name (``jaxacct.deterministic.base.available()``: ``"pld"``,
``"unamplified_gaussian"``, ``"renyi"``, ``"conditional_composition"``, ``"mmcc"``) or
``"tightest"`` (the default): every registered *amplified* accountant that supports the
mechanism under the given options is evaluated and the smallest ε, δ or σ is returned, per
direction (the unamplified Gaussian bound ignores the sampling, so ``"tightest"`` never answers
with it: ask for it by name; where no amplified accountant supports a mechanism the error names
Monte Carlo). Each is a valid bound of its direction, so their minimum is too. It passes each
accountant only the options it takes; an option that no supporting accountant takes is an
error, never ignored, and an accountant that cannot honour the requested adjacency does not
support the call.

``"auto"`` means what it means everywhere (``jaxacct.account``, ``jaxacct.calibrate``,
configs): the accountant of record (``jaxacct.accounting.choose``). Where a deterministic
accountant supersedes Monte Carlo for the mechanism that is ``"tightest"``; otherwise it is
verified Monte Carlo, which these functions do not run: they refuse, naming ``"tightest"``.

References: those of each accountant (``base.get(name).references``): Ganesh, arXiv
2508.15089v1 (truncated Poisson); Choquette-Choo et al., NeurIPS 2023 (cyclic Poisson);
Balle & Wang, ICML 2018, Thm 8 (Gaussian); Dong & Ganesh, arXiv 2602.09338v2, App. A;
Schuchardt & Kalinin, arXiv 2601.21636 (balls-in-bins: Rényi, conditional composition).
"""

from __future__ import annotations

import math
import typing
from typing import Any, Mapping

import numpy as np

from jaxacct import _validate
from jaxacct.conventions import ADJACENCIES as ADJACENCIES
from jaxacct.conventions import DIRECTIONS
from jaxacct.deterministic import base
from jaxacct.deterministic.base import DeterministicAccountant, UnsupportedMechanismError
from jaxacct.deterministic.pld_accountant import mechanism_pld as mechanism_pld
from jaxacct.guarantee import Guarantee
from jaxacct.mechanism import MatrixMechanism
from jaxacct.errors import InputError, InputTypeError

AUTO = 'auto'  # the accountant of record, as everywhere (jaxacct.accounting.choose)
TIGHTEST = 'tightest'  # the tightest supporting deterministic accountant: these functions' default
_COMBINED = (AUTO, TIGHTEST)


def chosen_accountants(mechanism: MatrixMechanism, accountant: str,
                       options: Mapping[str, Any], *,
                       at_sigma: bool = True) -> list[tuple[DeterministicAccountant, dict]]:
  """The accountants to evaluate, each with the options it takes (checked before any compute).

  With ``at_sigma`` (a curve of the mechanism's own σ, not a calibration) ``"tightest"`` also
  leaves out an accountant whose grids would be too large at that σ (``size_refusal``: a σ
  far below 0.1), so another one answers.

  Raises:
    ValueError: an unknown accountant name; ``UnsupportedMechanismError`` when no accountant
      supports the mechanism under the options (with every accountant's reason);
      ``CurveTooLargeError`` when those that do cannot at its σ.
    TypeError: an option that no supporting accountant takes.
  """
  if isinstance(accountant, DeterministicAccountant):
    return [(accountant, dict(options))]
  if accountant not in _COMBINED:
    return [(base.get(accountant), dict(options))]
  base.check_mechanism(mechanism)
  if accountant == AUTO and base.superseding_monte_carlo(mechanism) is None:
    # "auto" means the accountant of record everywhere: here that is Monte Carlo, which these
    # deterministic functions do not run
    raise InputError(
        f'the accountant of record for {type(mechanism.scheme).__name__} is verified Monte '
        'Carlo (no registered deterministic accountant supersedes it): jaxacct.account and '
        'jaxacct.calibrate run it', argument='accountant', value=AUTO,
        alternatives={TIGHTEST: 'the tightest supporting deterministic bound'})
  # "tightest" is over the amplified accountants: a bound that ignores the sampling is answered
  # only when asked for by name, never as the silent winner of a sampled mechanism.
  every = tuple(a for a in base.accountants() if a.amplified)
  known = {name for a in every for name in a.option_names()}
  unknown = [name for name in options if name not in known]
  if unknown:
    raise InputTypeError(f'unexpected option {", ".join(map(repr, unknown))}: no registered '
                    f'deterministic accountant takes it (they take: {", ".join(sorted(known))})')
  chosen, reasons, too_large = [], [], []
  for candidate in every:
    taken = base.taken_options(candidate, options)
    reason = candidate.supports(mechanism, **taken)  # checks the option values
    if reason is None and at_sigma:
      reason = candidate.size_refusal(mechanism, **taken)
      if reason is not None:
        too_large.append(f'{candidate.name}: {reason}')
        continue
    if reason is None:
      chosen.append((candidate, taken))
    else:
      reasons.append(f'{candidate.name}: {reason}')
  if not chosen and too_large:
    raise base.CurveTooLargeError(
        'no amplified deterministic accountant can account this mechanism at noise_multiplier='
        f'{mechanism.noise_multiplier:g} (' + '; '.join(too_large) + ')')
  if not chosen:
    loose = [a.name for a in base.accountants() if not a.amplified
             and a.supports(mechanism, **base.taken_options(a, options)) is None]
    raise UnsupportedMechanismError(
        'no amplified deterministic accountant supports this mechanism under these options ('
        + '; '.join(reasons) + ')', argument='accountant', value=accountant,
        alternatives={**base.MONTE_CARLO_ALTERNATIVE, **{
            name: 'a loose bound that ignores the sampling' for name in loose[:1]}})
  used = {name for candidate, taken in chosen for name in taken}
  ignored = [name for name in options if name not in used]
  if ignored:
    owners = [a.name for a in every if set(ignored) & set(a.option_names())]
    raise InputTypeError(
        f'option {", ".join(map(repr, ignored))} is not taken by any accountant that supports '
        f'this mechanism ({", ".join(c.name for c, _ in chosen)}); it is an option of '
        f'{", ".join(owners)}, which does not support it (pass accountant= explicitly to see why)')
  return chosen


@typing.final
class TightestCurve(base.PrivacyCurve):
  """The pointwise minimum, per direction, of several accountants' curves of one mechanism.

  Each curve bounds each direction, so the minimum does; the (ε, δ) statement is the maximum
  over directions of those minima (never looser than any single accountant's).

  Attributes:
    curves: accountant name → its ``PrivacyCurve``, in registration order (ties go to the
      first).
  """

  def __init__(self, curves: Mapping[str, base.PrivacyCurve]):
    self.curves = dict(curves)

  def _delta(self, epsilon: float, direction: str) -> float:
    # Cheapest first (``PrivacyCurve.relative_cost``); a costly curve is only asked whether
    # it beats the best so far, so it is not inverted where it cannot win. The minimum is
    # the same as querying every curve in full.
    best = 1.0
    for curve in sorted(self.curves.values(), key=lambda c: c.relative_cost):
      best = curve._delta_below(epsilon, direction, best)
    return best

  def _epsilon(self, delta: float, direction: str) -> float:
    return min(c.epsilon_for_delta(delta, direction=direction) for c in self.curves.values())

  def epsilons(self, delta: float) -> dict[str, dict[str, float]]:
    """ε(δ) of every accountant per direction: name → {direction: ε}."""
    return {name: {d: curve.epsilon_for_delta(delta, direction=d) for d in DIRECTIONS}
            for name, curve in self.curves.items()}

  def chosen(self, delta: float) -> str:
    """The accountant whose ε(δ) is the answer: the tightest in the binding direction."""
    return self.explain(delta)['accountant']

  def explain(self, delta: float) -> dict:
    """Which accountant gave ε(δ) (``accountant``: in the binding direction; ``by_direction``),
    every accountant's ε(δ) per direction (``epsilons``) and each one's own explanation."""
    epsilons = self.epsilons(delta)
    by_direction = {d: min(epsilons, key=lambda name, d=d: epsilons[name][d])
                    for d in DIRECTIONS}
    binding = max(DIRECTIONS, key=lambda d: epsilons[by_direction[d]][d])
    return {'accountant': by_direction[binding], 'by_direction': by_direction,
            'epsilons': epsilons,
            'explanations': {name: curve.explain(delta) for name, curve in self.curves.items()}}


def privacy_curve(mechanism: MatrixMechanism, *,
                  accountant: str | DeterministicAccountant = TIGHTEST,
                  **options) -> base.PrivacyCurve:
  """The δ(ε) / ε(δ) curve of ``mechanism`` under ``accountant`` (built once, queried often).

  Args:
    mechanism: the ``MatrixMechanism``.
    accountant: a registered name or instance (its own curve), or ``"tightest"``: a
      ``TightestCurve`` over every supporting accountant, whose ``explain(δ)`` names the one
      that gave ε(δ).
    **options: as ``delta_for_epsilon``.

  Raises:
    as ``delta_for_epsilon``.
  """
  chosen = chosen_accountants(mechanism, accountant, options)
  if accountant not in _COMBINED:
    (single, taken), = chosen
    return single.privacy_curve(mechanism, **taken)
  return TightestCurve({a.name: a.privacy_curve(mechanism, **taken) for a, taken in chosen})


def delta_for_epsilon(mechanism: MatrixMechanism, epsilon: float, *,
                      accountant: str | DeterministicAccountant = TIGHTEST,
                      direction: str | None = None, **options) -> float:
  """δ(ε) of ``mechanism`` by a deterministic accountant: a proven upper bound.

  Args:
    mechanism: the ``MatrixMechanism`` (its σ is used as is).
    epsilon: ε, finite and ≥ 0.
    accountant: a registered name (``"pld"``, ``"unamplified_gaussian"``, ``"renyi"``,
      ``"conditional_composition"``), an accountant instance, ``"tightest"`` (default: the
      smallest δ over the supporting accountants, per direction), or ``"auto"`` (the
      accountant of record: ``"tightest"`` where a deterministic one supersedes Monte Carlo).
    direction: ``"remove"`` (H(P‖Q)), ``"add"`` (H(Q‖P)) or None (default: the maximum over
      both, the (ε, δ)-DP statement).
    **options: the accountant's options: ``adjacency`` (``"zero_out"`` default,
      ``"add_remove"``, ``"replace_one"``); ``value_discretization_interval`` (``"pld"``,
      ``"conditional_composition"``); ``bandwidths``, ``alpha_max``, ``max_transitions``
      (``"renyi"``); ``bad_event_delta`` (``"conditional_composition"``).

  Returns:
    δ as a float.

  Raises:
    ValueError: ε < 0 or not finite, an unknown direction, accountant or adjacency;
      ``UnsupportedMechanismError`` (a ValueError) when the accountant does not cover the
      mechanism (naming those that do); ``base.CurveTooLargeError`` (a ValueError) when its
      σ is too small for the accountant's PLD grid (``pld``, ``mmcc``,
      ``conditional_composition``: the message names the grid step that would fit), before
      any compute; ``"tightest"`` then leaves that accountant out; ``"auto"`` where the
      accountant of record is Monte Carlo.
    TypeError: an option the accountant does not take.

  References:
    Ganesh, arXiv 2508.15089v1, Thms 3.1, 3.3, 3.4; Choquette-Choo et al., NeurIPS 2023;
    Balle & Wang, ICML 2018, Thm 8; Dong & Ganesh, arXiv 2602.09338v2, App. A; Schuchardt &
    Kalinin, arXiv 2601.21636, Thm 3.1, Lemmas 3.2-3.4, 4.1.
  """
  epsilon, direction = base.check_epsilon(epsilon), base.check_direction(direction)
  return privacy_curve(mechanism, accountant=accountant, **options).delta_for_epsilon(
      epsilon, direction=direction)


def epsilon_for_delta(mechanism: MatrixMechanism, delta: float, *,
                      accountant: str | DeterministicAccountant = TIGHTEST,
                      direction: str | None = None, **options) -> float:
  """ε(δ) of ``mechanism`` by a deterministic accountant: the smallest proven ε.

  Args:
    mechanism: the ``MatrixMechanism``.
    delta: δ ∈ (0, 1).
    accountant: a registered name or ``"tightest"`` (the smallest ε over the supporting ones).
    direction: ``"remove"``, ``"add"`` or None (the maximum over both).
    **options: as ``delta_for_epsilon``.

  Returns:
    ε as a float (``math.inf`` if no finite ε reaches δ).

  Raises:
    as ``delta_for_epsilon`` (δ outside (0, 1) instead of ε < 0).

  References:
    as ``delta_for_epsilon``.
  """
  delta, direction = base.check_delta(delta), base.check_direction(direction)
  return privacy_curve(mechanism, accountant=accountant, **options).epsilon_for_delta(
      delta, direction=direction)


def calibrate_deterministic(scheme, matrix, *, epsilon: float, delta: float,
                            accountant: str | DeterministicAccountant = TIGHTEST,
                            tolerance: float = 1e-4, progress=None,
                            **options) -> tuple[MatrixMechanism, Guarantee]:
  """Smallest σ (to ``tolerance`` relative, rounded up) with ε(δ) ≤ ``epsilon``.

  Args:
    scheme, matrix: the mechanism's sampling scheme and strategy.
    epsilon: target ε ≥ 0.
    delta: target δ ∈ (0, 1).
    accountant: a registered name, or ``"tightest"`` (default): the smallest σ over the
      supporting accountants; the ``Guarantee`` names the one that gave it.
    tolerance: relative σ tolerance in [1e-12, 0.5): σ·(1 − 2·tolerance) does not meet the
      target (unless σ is the accountant's ``sigma_floor``).
    progress: ``progress(probes_done, probes_expected, stage)`` (``jaxacct.progress``)
      after every probe of a search; the stage names the accountant ("σ search with renyi").
    **options: ``adjacency`` (default ``"zero_out"``) and the accountant's own, e.g.
      ``value_discretization_interval`` (``"pld"``, default 1e-4).

  Returns:
    (mechanism at that σ, its ``Guarantee``: method ``"deterministic"``, ``accountant`` the
    accountant's name, ``adjacency`` as requested).

  Raises:
    as ``delta_for_epsilon``.

  References:
    as ``delta_for_epsilon``.
  """
  epsilon, delta = base.check_epsilon(epsilon), base.check_delta(delta)
  tolerance = base.check_tolerance(tolerance)
  probe = MatrixMechanism(scheme, matrix, 1.0)
  best = None
  for chosen, taken in chosen_accountants(probe, accountant, options, at_sigma=False):
    # An accountant that does not meet the target at the best σ so far cannot give a smaller
    # one (ε(δ) decreases in σ): one curve instead of a calibration (conditional
    # composition's take minutes at N = 1000).
    # One whose grids are too large at the best σ so far is skipped too: a smaller σ needs
    # larger grids still (the best so far stays a valid calibration, maybe a looser one).
    if best is not None and (chosen.size_refusal(best[0], **taken) is not None
                             or chosen.epsilon_for_delta(best[0], delta, **taken) > epsilon):
      continue
    result = chosen.calibrate(scheme, matrix, epsilon=epsilon, delta=delta, tolerance=tolerance,
                              progress=progress, **taken)
    if best is None or result[0].noise_multiplier < best[0].noise_multiplier:
      best = result  # ties: registration order
  return best


def _points_left(points: list, top: float, most: int) -> int:
  """Grid points still to evaluate before ε(δ) passes ``top`` (at most ``most``): ε(δ) grows
  about linearly in ln δ at first and then more slowly, so extending the last step's slope
  gives a first guess that only grows as the curve flattens."""
  if len(points) < 2 or points[-1][0] <= points[-2][0]:
    return most
  step = points[-1][0] - points[-2][0]
  return max(1, min(most, math.ceil((top - points[-1][0]) / step)))


def report_curve(curve: base.PrivacyCurve, epsilons, *, floor: float = 1e-20,
                 per_decade: int = 2, progress=None) -> dict:
  """Proven (ε(δ), δ) pairs of ``curve`` for a report's figure (max over directions).

  ε(δ) is evaluated on the δ grid 10^(−k/``per_decade``) (with 0.5 on top), from large δ
  down to ``floor`` or until ε(δ) passes 1.5 × the largest of ``epsilons``. Each point is one
  ε(δ) query — one composed PLD per direction for the bad-event curves (MMCC, conditional
  composition), where δ(ε) on an ε grid would search several per point — so every point is a
  pair the accountant proves; the line drawn between points is an illustration. References:
  those of the curve's accountant (``base.get(name).references``).

  ``progress(points_done, points_expected, "report curve")`` (``jaxacct.progress``) after
  every point.

  Returns:
    ``{"epsilons": [...], "delta": [...]}``: ε increasing, δ decreasing (of points with equal
    ε the smallest δ; points with ε = ∞ left out).
  """
  listed = _validate.real_array('epsilons', epsilons, 'a 1-D list')
  if listed.ndim != 1:
    raise InputError(f'epsilons must be a 1-D list of numbers, got shape {listed.shape}')
  if not np.all(np.isfinite(listed) & (listed >= 0)):
    raise InputError(f'epsilons must be finite and >= 0, got {listed.tolist()}')
  top = 1.5 * max(listed.tolist() + [1e-3])
  floor = base.check_delta(floor)
  per_decade = _validate.integer_at_least('per_decade', per_decade, 1)
  last = math.ceil(-math.log10(floor) * per_decade)
  deltas = [0.5] + [10.0 ** (-k / per_decade) for k in range(1, last + 1)]
  points = []
  for done, delta in enumerate(deltas, start=1):
    epsilon = curve.epsilon_for_delta(delta)
    if math.isfinite(epsilon):
      points.append((epsilon, delta))
    finished = epsilon > top or done == len(deltas)
    if progress is not None:
      progress(done, done if finished else done + _points_left(points, top, len(deltas) - done),
               'report curve')
    if finished:
      break
  frontier = []  # ε increasing, δ decreasing: the smallest proven δ at each ε (ties at ε = 0)
  for epsilon, delta in sorted(points):
    if not frontier or delta < frontier[-1][1]:
      frontier.append((epsilon, delta))
  return {'epsilons': [e for e, _ in frontier], 'delta': [d for _, d in frontier]}
