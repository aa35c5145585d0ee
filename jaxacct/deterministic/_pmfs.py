"""Per-direction access to dp_accounting PLDs (host code).

A dp_accounting ``PrivacyLossDistribution`` holds one PMF per direction: ``remove`` =
H(P‖Q) and ``add`` = H(Q‖P) in jaxacct's convention (``tests/test_truncated_poisson.py``
pins this against dp_accounting), or one symmetric PMF for both. Its queries report only the
maximum over the two, and dp_accounting 0.6.0 (pinned in ``pyproject.toml``) has no public
accessor for either PMF or its atoms, so this is the one place that reads them.
"""

from __future__ import annotations

import numpy as np

from jaxacct.conventions import DIRECTIONS, Direction
from jaxacct.errors import InputError


def direction_pmf(pld, direction: str):
  """The ``dp_accounting.pld.pld_pmf.PLDPmf`` of ``direction`` (``"remove"`` or ``"add"``).

  Raises:
    ValueError: another direction.
  """
  if direction not in DIRECTIONS:
    raise InputError(f'direction must be one of {", ".join(map(repr, DIRECTIONS))}, got '
                     f'{direction!r}')
  # pylint: disable=protected-access  # see the module docstring
  return pld._pmf_remove if direction == Direction.REMOVE else pld._pmf_add


def dense_atoms(pmf) -> tuple[int, np.ndarray, float]:
  """(lattice index of the first atom, the atoms' probabilities, the infinity mass) of a PMF."""
  dense = pmf.to_dense_pmf()
  # pylint: disable=protected-access  # see the module docstring
  return int(dense._lower_loss), np.asarray(dense._probs, np.float64), float(dense._infinity_mass)
