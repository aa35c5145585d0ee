"""The ``"pld"`` accountant: PLDs composed by dp_accounting, where a mechanism reduces to 1-D pairs.

Mechanisms it covers (a banded strategy C; ``noise_multiplier`` is not normalised by
‖c_col‖, so every round is charged the maximum column norm of C: σ_eff = σ/‖c‖_max,
conservative for the truncated last columns):

======================================  ==================================================
scheme                                  reduction
======================================  ==================================================
``Poisson``, ``BMinSep(min_sep=1)``     n rounds of the Poisson-subsampled Gaussian
                                        (dp_accounting); with truncation, the pairs of
                                        Ganesh (2025)
                                        (``truncated_poisson.truncated_poisson_pld``)
``CyclicPoisson``                       ⌈n/T⌉ Poisson rounds of phase 0 (``pld``); with
                                        truncation (``equal_split``), Ganesh (2025) over
                                        the group sizes (``truncated_cyclic_poisson_pld``)
======================================  ==================================================

``BMinSep`` with b = 1 is Poisson sampling: every example is eligible in every round, so cold
and warm start coincide, and a truncated-away example is blocked for b − 1 = 0 rounds. It is
accounted as the ``Poisson`` scheme with the same p, n, B and dataset size, hence with the
same PLD bit for bit.

Adjacency: ``zero_out`` (default; equal to add/remove without truncation, except for an
equal split), ``add_remove`` (truncated Poisson: for the fixed public dataset size; refused for
cyclic Poisson with ``partition="equal_split"``, truncated or not, whose groups it would change) and ``replace_one`` (Poisson family, truncated cyclic
Poisson). Discretisation is pessimistic (dp_accounting's connect-the-dots), so every δ(ε) and
ε(δ) is an upper bound. Per direction: ``remove`` = H(P‖Q), ``add`` = H(Q‖P), read from the
PLD's two PMFs (``pld_pmfs``). A σ so small that the grid would exceed ``_grid.MAX_GRID_POINTS``
(σ/‖c‖ below ~0.08 at the default step 1e-4, untruncated) is refused before any compute,
naming the step that would fit (``size_refusal``); a huge σ is a grid of a few points.

References:
  Arun Ganesh, "Tighter Privacy Analysis for Truncated Poisson Sampling", arXiv:2508.15089: Thms
  3.1, 3.3, 3.4 and the remark after Thm 3.1 (§3.1) (docs/references.md).
  Choquette-Choo et al., "(Amplified) banded matrix factorization", NeurIPS 2023 (cyclic-Poisson
  reduction).
  Andy Dong and Arun Ganesh, "Privacy Amplification for BandMF via b-Min-Sep Subsampling",
  arXiv:2602.09338 (v2): §3 (cyclic Poisson), §4 (b = 1 is Poisson), App. B, App. D
  (docs/references.md).
  Christopher A. Choquette-Choo, Arun Ganesh, Thomas Steinke and Abhradeep Thakurta, "Privacy
  Amplification for Matrix Mechanisms", arXiv:2310.15526 (v2; ICLR 2024): the MMCC accountant
  (docs/references.md).
  Doroshenko et al., "Connect the Dots", arXiv 2207.04380, Alg. 1 (pessimistic PLD).
"""

from __future__ import annotations

import dataclasses
import typing
from typing import Any, Callable

from jaxacct import _validate
from jaxacct.conventions import Adjacency
from jaxacct.deterministic import _grid, pld_pmfs, pld, truncated_poisson
from jaxacct.deterministic._search import smallest_passing_sigma
from jaxacct.deterministic import base
from jaxacct.deterministic.base import (DeterministicAccountant, Option,
                                        PrivacyCurve, register)
from jaxacct.mechanism import MatrixMechanism, check_mechanism
from jaxacct.schemes.participation import Cyclic, MinSepChain

DEFAULT_DISCRETIZATION = 1e-4
_SCOPE = ('poisson and cyclic_poisson schemes (and bminsep with min_sep = 1) with a banded '
          'strategy')


@dataclasses.dataclass(frozen=True)
class _Refusal:
  """Why the PLD accountant does not cover a mechanism.

  Attributes:
    reason: the one-line reason (``supports``).
    error: ``mechanism_pld``'s exception type: TypeError for the scheme or strategy,
      ValueError for the adjacency.
    scheme: True when the scheme itself is not covered (``mechanism_pld`` then says so first).
  """

  reason: str
  error: type[Exception] = ValueError
  scheme: bool = False


_Build = Callable[[float, float], Any]  # (σ, discretisation) → PLD or WorstCasePLD


def _not_covered(what: str) -> _Refusal:
  return _Refusal(f'covers {_SCOPE} only, not {what} (Monte Carlo accounting covers it)',
                  TypeError, scheme=True)


def _poisson_plan(mechanism: MatrixMechanism, adjacency: str) -> _Build | _Refusal:
  """The b-min-sep chain with b = 1: Poisson (``Poisson``, ``BMinSep(min_sep=1)``: one model)."""
  scheme = mechanism.scheme
  participation = scheme.participation
  model, truncation, iterations = (participation.model, participation.truncation,
                                   participation.iterations)
  if model.min_sep != 1:
    return _not_covered(f'{type(scheme).__name__} with min_sep = {model.min_sep}')
  column_norm = float(mechanism.matrix.max_column_norm(iterations))

  def build(sigma: float, d: float):
    sigma_eff = sigma / column_norm
    if truncation is not None and truncation.cuts:
      return truncated_poisson.truncated_poisson_pld(
          truncation.dataset_size, float(model.sampling_prob), truncation.batch_size,
          sigma_eff, iterations, adjacency, value_discretization_interval=d)
    from dp_accounting import privacy_accountant  # local: heavy imports
    from dp_accounting.pld import privacy_loss_distribution as pld_lib
    relation = (privacy_accountant.NeighboringRelation.REPLACE_ONE
                if adjacency == Adjacency.REPLACE_ONE
                else privacy_accountant.NeighboringRelation.ADD_OR_REMOVE_ONE)
    single = pld_lib.from_gaussian_mechanism(sigma_eff, sampling_prob=float(model.sampling_prob),
                                             value_discretization_interval=d,
                                             neighboring_relation=relation)
    return single if iterations == 1 else single.self_compose(iterations)

  return build


def _cyclic_plan(mechanism: MatrixMechanism, adjacency: str) -> _Build | _Refusal:
  scheme, matrix = mechanism.scheme, mechanism.matrix
  if scheme.truncates:
    if adjacency == Adjacency.ADD_REMOVE:
      return _Refusal(
          "adjacency='add_remove' is not supported for truncated cyclic Poisson: removing an "
          'example changes the dataset size and hence the group sizes, which this reduction '
          "needs public and fixed; use 'zero_out' or 'replace_one'")
    return lambda sigma, d: truncated_poisson.truncated_cyclic_poisson_pld(
        scheme, matrix, sigma, adjacency=adjacency, value_discretization_interval=d)
  if adjacency == Adjacency.ADD_REMOVE and scheme.participation.model.partition == 'equal_split':
    # Adding an example to an equal split re-splits the dataset: the others' groups change
    # with it (which group is short moves), so the neighbours differ in more than one
    # example's contribution and the one-example reduction does not hold.
    return _Refusal(
        "adjacency='add_remove' is not supported for cyclic Poisson with partition="
        "'equal_split': adding or removing an example changes the equal split of the others "
        "(the group sizes), which this reduction needs fixed; use 'zero_out' (the example "
        "replaced by a zero gradient, the split unchanged) or partition='independent'")
  if adjacency == Adjacency.REPLACE_ONE:
    return _Refusal("adjacency='replace_one' is not implemented for untruncated cyclic Poisson; "
                    "use 'zero_out' (equal to add/remove with partition='independent')")
  return lambda sigma, d: pld.cyclic_poisson_pld(scheme, matrix, sigma,
                                                 value_discretization_interval=d)


# The participation model selects the reduction (any family realising it).
_PLANS = {MinSepChain: _poisson_plan, Cyclic: _cyclic_plan}


def _plan(mechanism: MatrixMechanism, adjacency: str) -> _Build | _Refusal:
  """How to build the mechanism's PLD at any σ, or why the accountant refuses it."""
  if mechanism.bounded:
    return _Refusal(
        'this strategy\'s columns overlap across participations (a dense LowerTriangular, or '
        'more bands than the scheme separates), so it has no exact PLD here; for Poisson use '
        'the "mmcc" accountant (Choquette-Choo et al. (2023)), else the Monte Carlo accountant '
        'with the r-min-sep bounds of Dong & Ganesh (2026) App. B', TypeError)
  plan = _PLANS.get(type(mechanism.scheme.participation.model))
  if plan is None:
    return _not_covered(type(mechanism.scheme).__name__)
  return plan(mechanism, adjacency)


# The span of the pair's component means in units of the max column norm: the Poisson-subsampled
# Gaussian {0, 1} vs {0} (replace-one {0, 1} vs {0, −1}); Ganesh (2025)'s truncated pairs
# (``truncated_poisson.dominating_pair``, regime 2: the sum moves by up to 2) {0, 1, 2} vs {0}
# (add/remove), vs {0, −1} (zero-out), vs {0, −2} (replace-one).
_SPREAD = {False: {Adjacency.ADD_REMOVE: 1.0, Adjacency.ZERO_OUT: 1.0, Adjacency.REPLACE_ONE: 2.0},
           True: {Adjacency.ADD_REMOVE: 2.0, Adjacency.ZERO_OUT: 3.0, Adjacency.REPLACE_ONE: 4.0}}


def size_refusal(mechanism: MatrixMechanism, adjacency: str, discretization: float) -> str | None:
  """Why this accountant's PLD grid at the mechanism's σ is too large to build, or None
  (``_grid.refusal``: the widest pair's means span ``_SPREAD`` × the max column norm of C)."""
  scheme = mechanism.scheme
  spread = _SPREAD[bool(scheme.truncates)][Adjacency(adjacency)]
  spread *= float(mechanism.matrix.max_column_norm(scheme.iterations))
  return _grid.refusal(float(mechanism.noise_multiplier), spread, discretization,
                       what="the 'pld' accountant's PLD grid")


def mechanism_pld(mechanism: MatrixMechanism, *, adjacency: str = 'zero_out',
                  value_discretization_interval: float = DEFAULT_DISCRETIZATION):
  """The PLD (both directions, pessimistic) of a Poisson or cyclic-Poisson mechanism.

  Args:
    mechanism: scheme ``Poisson``, ``BMinSep`` with ``min_sep=1`` (the same mechanism) or
      ``CyclicPoisson`` (truncated or not), with a banded strategy.
    adjacency: ``"zero_out"`` (default; equals ``"add_remove"`` without truncation),
      ``"add_remove"`` (truncated Poisson: for the fixed public dataset size) or
      ``"replace_one"``.
    value_discretization_interval: PLD grid step.

  Returns:
    An object with ``get_epsilon_for_delta`` / ``get_delta_for_epsilon`` (max over
    directions): a dp_accounting ``PrivacyLossDistribution`` or a
    ``truncated_poisson.WorstCasePLD``.

  Raises:
    TypeError: for other schemes or a dense strategy (they need Monte Carlo accounting).
    ValueError: an adjacency the scheme's accountant does not cover; a σ too small for the
      PLD grid (``size_refusal``), before any compute.

  References:
    Ganesh, arXiv 2508.15089, Thms 3.1, 3.3, 3.4 (truncation); Choquette-Choo et al., NeurIPS
    2023 (cyclic Poisson); Dong & Ganesh, arXiv 2602.09338v2, §3.
  """
  check_mechanism(mechanism)
  adjacency = _validate.one_of('adjacency', adjacency, truncated_poisson.ADJACENCIES)
  d = _validate.positive_finite('value_discretization_interval', value_discretization_interval)
  plan = _plan(mechanism, Adjacency(adjacency).value)
  if isinstance(plan, _Refusal):
    prefix = (f'no deterministic accountant for {type(mechanism.scheme).__name__} builds a PLD: '
              'the PLD accountant ' if plan.scheme else '')
    raise plan.error(prefix + plan.reason)
  too_large = size_refusal(mechanism, Adjacency(adjacency).value, d)
  if too_large is not None:
    raise base.CurveTooLargeError(too_large)
  return plan(mechanism.noise_multiplier, d)


@typing.final
class PLDCurve(PrivacyCurve):
  """The curve of a PLD, or the worst over several (``WorstCasePLD``), per direction.

  Attributes:
    cases: the dp_accounting ``PrivacyLossDistribution`` of each case (one, or one per group
      size of truncated cyclic Poisson); every query is the maximum over them.
  """

  def __init__(self, pld_like):
    self.cases = tuple(getattr(pld_like, 'plds', (pld_like,)))

  def _delta(self, epsilon: float, direction: str) -> float:
    return max(float(pld_pmfs.direction_pmf(case, direction).get_delta_for_epsilon(epsilon))
               for case in self.cases)

  def _epsilon(self, delta: float, direction: str) -> float:
    return max(float(pld_pmfs.direction_pmf(case, direction).get_epsilon_for_delta(delta))
               for case in self.cases)


def _check_discretization(value) -> float:
  return _validate.positive_finite('value_discretization_interval', value)


@register
@typing.final
class PLDAccountant(DeterministicAccountant):
  """Today's PLD accountants behind the contract (see the module docstring).

  Options: ``adjacency`` and ``value_discretization_interval`` (the PLD grid step, default
  1e-4; pessimistic). ``calibrate`` bisects ln σ down to ``sigma_floor`` = 0.05 (the PLD grid
  grows like 1/σ²), returning the floor if it already meets the target.
  """

  name = 'pld'

  tie_order = 10
  references = (
      'Ganesh, "Tighter Privacy Analysis for Truncated Poisson Sampling", arXiv 2508.15089v1, '
      'Thms 3.1, 3.3, 3.4 (truncated Poisson; remark after Thm 3.1: cyclic Poisson)',
      'Choquette-Choo et al., "(Amplified) banded matrix factorization", NeurIPS 2023 '
      '(cyclic-Poisson BandMF reduction)',
      'Dong & Ganesh, "Privacy Amplification for BandMF via b-Min-Sep Subsampling", arXiv '
      '2602.09338v2, §3 (cyclic Poisson), §4 (b = 1 is Poisson)',
      'Doroshenko et al., "Connect the Dots: Tighter Discrete Approximations of Privacy Loss '
      'Distributions", arXiv 2207.04380, Alg. 1 (pessimistic discretisation)',
  )
  adjacencies = tuple(a.value for a in Adjacency)
  options = {'value_discretization_interval': Option(DEFAULT_DISCRETIZATION,
                                                     _check_discretization)}
  sigma_floor = truncated_poisson.SIGMA_FLOOR

  def _refusal(self, mechanism, options):
    plan = _plan(mechanism, options['adjacency'])
    return plan.reason if isinstance(plan, _Refusal) else None

  def _size_refusal(self, mechanism, options):
    return size_refusal(mechanism, options['adjacency'], options['value_discretization_interval'])

  def _curve(self, mechanism, options):
    build = _plan(mechanism, options['adjacency'])
    return PLDCurve(build(mechanism.noise_multiplier, options['value_discretization_interval']))

  def _sigma(self, probe, epsilon, delta, tolerance, options, progress=None):
    build, d = _plan(probe, options['adjacency']), options['value_discretization_interval']

    def meets(sigma: float) -> bool:
      return PLDCurve(build(sigma, d)).delta_for_epsilon(epsilon) <= delta

    return smallest_passing_sigma(meets, tolerance=tolerance, floor=self.sigma_floor,
                                  progress=progress)

  def _supersedes_monte_carlo(self, mechanism):
    # Truncated Poisson: the Monte Carlo engine uses the pair of Dong & Ganesh (2026) App. D (it
    # also releases the other examples' batch sizes), looser than Ganesh (2025)'s; truncated
    # cyclic Poisson has no Monte Carlo kernel. Untruncated Poisson and equal-split cyclic
    # Poisson: this is the exact pair's PLD, which Monte Carlo only estimates and then verifies
    # at δ_b < δ, so its σ is larger (~10 % at n = 16, δ = 1e-2). Independent cyclic Poisson:
    # Monte Carlo mixes over the random phase, a tighter pair than phase 0's, and stays.
    scheme = mechanism.scheme
    model = scheme.participation.model
    return scheme.truncates or not (isinstance(model, Cyclic)
                                    and model.partition == 'independent')

