"""Per-direction access to dp_accounting PLDs (host code).

A dp_accounting ``PrivacyLossDistribution`` holds one PMF per direction: ``remove`` =
H(P‖Q) and ``add`` = H(Q‖P) in jaxacct's convention (``tests/test_truncated_poisson.py``
pins this against dp_accounting), or one symmetric PMF for both. Its queries report only the
maximum over the two, and dp_accounting 0.6.0 (pinned in ``pyproject.toml``) has no public
accessor for either PMF or its atoms, nor a public one-direction PMF of a monotone privacy
loss, so this is the one module that reads dp_accounting's private attributes.
"""

from __future__ import annotations

import functools

import numpy as np

from jaxacct.conventions import DIRECTIONS, Direction
from jaxacct.errors import InputError


@functools.cache
def check_dp_accounting() -> None:
  """Raises ``ImportError`` naming the installed version when
  dp_accounting lacks a private attribute this module reads (a release outside the tested
  range ``pyproject.toml`` states); checked once, on a tiny PLD, at first use."""
  import dp_accounting
  from dp_accounting.pld import privacy_loss_distribution, privacy_loss_mechanism
  version = getattr(dp_accounting, '__version__', 'unknown')
  pld = privacy_loss_distribution.from_gaussian_mechanism(
      1.0, value_discretization_interval=1e-1)
  dense = pld._pmf_remove.to_dense_pmf()  # pylint: disable=protected-access
  needed = [(pld, '_pmf_remove'), (pld, '_pmf_add'), (dense, '_lower_loss'),
            (dense, '_probs'), (dense, '_infinity_mass'),
            (privacy_loss_distribution, '_create_pld_pmf_from_monotone_privacy_loss'),
            (privacy_loss_mechanism.MixtureGaussianPrivacyLoss,
             '_inverse_privacy_losses_with_range')]
  mixture = privacy_loss_mechanism.MixtureGaussianPrivacyLoss(1.0, [0.0, 1.0], [0.5, 0.5])
  needed += [(mixture, '_precompute_privacy_loss_constants'), (mixture, '_variance')]
  missing = [name for owner, name in needed if not hasattr(owner, name)]
  if missing:
    raise ImportError(f'dp_accounting {version} lacks {", ".join(missing)}, which jaxacct '
                      'reads (tested with 0.6.0): install dp-accounting>=0.6.0,<0.7')


def direction_pmf(pld, direction: str):
  """The ``dp_accounting.pld.pld_pmf.PLDPmf`` of ``direction`` (``"remove"`` or ``"add"``).

  Raises:
    ValueError: another direction.
  """
  if direction not in DIRECTIONS:
    raise InputError(f'direction must be one of {", ".join(map(repr, DIRECTIONS))}, got '
                     f'{direction!r}')
  check_dp_accounting()
  # pylint: disable=protected-access  # see the module docstring
  return pld._pmf_remove if direction == Direction.REMOVE else pld._pmf_add


def dense_atoms(pmf) -> tuple[int, np.ndarray, float]:
  """(lattice index of the first atom, the atoms' probabilities, the infinity mass) of a PMF."""
  dense = pmf.to_dense_pmf()
  # pylint: disable=protected-access  # see the module docstring
  return int(dense._lower_loss), np.asarray(dense._probs, np.float64), float(dense._infinity_mass)


@functools.cache
def fast_mixture_loss_class():
  """dp_accounting's ``MixtureGaussianPrivacyLoss`` with its inverse privacy loss vectorised.

  dp_accounting 0.6.0 (pinned) inverts the mixture's loss by a recursive binary search that
  evaluates one point per Python call (~0.5 s per PMF at a 1e-3 grid); this runs the same
  bisection for every loss at once: the same midpoints, the same comparisons, the same
  rounding (the smallest multiple of ``precision`` whose loss is at most the target), hence
  bit-for-bit the same PMFs (tested) at ~30× the speed.
  """
  from dp_accounting.pld import privacy_loss_mechanism  # local: heavy import
  check_dp_accounting()

  class FastMixtureGaussianPrivacyLoss(privacy_loss_mechanism.MixtureGaussianPrivacyLoss):

    def _inverse_privacy_losses_with_range(self, privacy_losses, bounds, precision=1e-6):
      # pylint: disable=protected-access  # the parent's precomputed constants (see above)
      losses = np.asarray(privacy_losses, dtype=np.float64)
      if losses.size == 0:
        return []
      low = np.full(losses.shape, float(bounds[0]))
      high = np.full(losses.shape, float(bounds[1]))
      sensitivities = np.asarray(self.sensitivities, np.float64)
      constants = np.asarray(self._precompute_privacy_loss_constants, np.float64)
      add = self.adjacency_type == privacy_loss_mechanism.AdjacencyType.ADD
      while True:
        # A bracket narrower than ``precision`` is done; so is one whose ends are adjacent
        # floats (|x| ≳ 2⁵²·precision, a huge σ: the midpoint rounds onto an end and the
        # parent's recursion would never end). ``high`` keeps its invariant, loss ≤ target.
        active = (high - low > precision) & ((low + high) / 2 != low) & ((low + high) / 2 != high)
        if not active.any():
          break
        middle = (low[active] + high[active]) / 2
        # Every search starts from the same bounds, so the first ~log₂(#losses) steps probe
        # few distinct midpoints: the loss is evaluated once per distinct one (exact).
        distinct, which = np.unique(middle, return_inverse=True)
        # components × losses, reduced over axis 0: the same sequential order as the parent's
        # 1-D reduce (bit-for-bit), and a contiguous inner loop (~6× faster than axis 1)
        shift = sensitivities[:, None] * distinct[None, :] / self._variance
        split = (-np.logaddexp.reduce(constants[:, None] + shift, axis=0) if add
                 else np.logaddexp.reduce(constants[:, None] - shift, axis=0))
        below = losses[active] < split[which.ravel()]  # the loss decreases in x: inverse above
        low[active] = np.where(below, middle, low[active])
        high[active] = np.where(below, high[active], middle)
      return np.floor(high / precision) * precision

  return FastMixtureGaussianPrivacyLoss


def monotone_loss_pmf(loss, discretization: float):
  """The pessimistic connect-the-dots PLD PMF of one direction's monotone privacy loss
  (dp_accounting's ``_create_pld_pmf_from_monotone_privacy_loss``, private in 0.6.0)."""
  from dp_accounting.pld import privacy_loss_distribution  # local: heavy import
  check_dp_accounting()
  # pylint: disable=protected-access  # see the module docstring
  return privacy_loss_distribution._create_pld_pmf_from_monotone_privacy_loss(
      loss, pessimistic_estimate=True, value_discretization_interval=discretization,
      use_connect_dots=True)
