"""The dominating pair of fixed-bin balls-in-bins (random allocation) and its Gram matrix (host).

Under ``BallsInBins(iterations=n, cycle_length=b)`` an example draws its slot i uniformly from
{0, …, b − 1} once and takes part in every round r ≡ i (mod b). With a non-negative
lower-triangular strategy C and clip norm 1, the pair

    P = (1/b) Σ_i N(m_i, σ² I_n),   Q = N(0, σ² I_n),   m_i = Σ_{r ≡ i (mod b)} C[:, r]

dominates the mechanism under "remove" (P, Q) and under "add" (Q, P) (Schuchardt & Kalinin
(2026) Lemma 2.8 = Choquette-Choo et al. 2025, Lemma 3.2 with the directions as corrected in
their App. G). The deterministic accountants of Schuchardt & Kalinin (2026) see the pair only
through the slot means, and the Rényi accountant only through their Gram matrix
G_ij = ⟨m_i, m_j⟩.

When b does not divide n the last, partial epoch gives the first n mod b slots one more
round. The pair is the same uniform mixture (the Monte Carlo kernel uses these very means),
and every bound of Schuchardt & Kalinin (2026) holds for any uniform Gaussian mixture, so such
n is supported.

A banded C (band length m) gives a *cyclically* banded G: G_ij = 0 when the cyclic distance
min(|i − j|, b − |i − j|) is ≥ m (the epochs wrap around; Schuchardt & Kalinin (2026)
Fig. 1).

References:
  Jan Schuchardt and Nikita Kalinin, "Sampling-Free Privacy Accounting for Matrix Mechanisms under
  Random Allocation", arXiv:2601.21636: §2.2 (Definition 2.7, Lemma 2.8), Fig. 1, App. G
  (docs/references.md).
"""

from __future__ import annotations

import numpy as np

from jaxacct.conventions import Adjacency
from jaxacct.schemes.participation import FixedBins


ADJACENCIES = (Adjacency.ZERO_OUT.value, Adjacency.ADD_REMOVE.value)
"""The adjacencies of the pair (Lemma 2.8: add/remove, equal to zero-out here)."""


def refusal(scheme, matrix, adjacency: str, accountant: str) -> str | None:
  """None when Schuchardt & Kalinin's pair applies to (scheme, matrix) under ``adjacency``, else
  the reason (naming ``accountant``)."""
  if adjacency not in ADJACENCIES:
    return (f'{accountant} covers zero_out and add_remove adjacency (Schuchardt & Kalinin '
            f'(2026) Lemma 2.8), not '
            f'{adjacency}')
  if not isinstance(scheme.participation.model, FixedBins):
    return (f'the random-allocation accountants cover BallsInBins (fixed-bin balls-in-bins) '
            f'only, not {type(scheme).__name__}')
  # Every Strategy is lower triangular and non-negative (Lemma 2.8 needs C ≥ 0); the
  # mechanism checked that matrix is one.
  del matrix
  return None


def slot_means(scheme, matrix) -> np.ndarray:
  """The slot means m_i = Σ_{r ≡ i (mod b)} C[:, r]: float64 (b, n) (Schuchardt & Kalinin
  (2026) Lemma 2.8).

  The Monte Carlo kernel's balls-in-bins modes: O(b·n) for a ``BandedToeplitz``, O(n²) for
  a ``LowerTriangular`` C.
  """
  participation = scheme.participation
  return matrix.phase_sums(participation.model.cycle_length, participation.iterations)


def gram_matrix(scheme, matrix) -> np.ndarray:
  """G_ij = ⟨m_i, m_j⟩, float64 (b, b), symmetric with non-negative entries."""
  means = slot_means(scheme, matrix)
  gram = means @ means.T
  return 0.5 * (gram + gram.T)  # exactly symmetric (the DP reads both triangles)


def cyclic_distance(b: int) -> np.ndarray:
  """min(|i − j|, b − |i − j|) for i, j in 0..b−1, (b, b) integers."""
  gap = np.abs(np.subtract.outer(np.arange(b), np.arange(b)))
  return np.minimum(gap, b - gap)


def cyclic_bandwidth(gram: np.ndarray) -> int:
  """The smallest p ≥ 1 with G_ij = 0 whenever the cyclic distance of (i, j) is ≥ p.

  At p = ⌊b/2⌋ + 1 every pair is inside the band, so the result is at most that.
  """
  b = gram.shape[0]
  distance = cyclic_distance(b)
  nonzero = distance[gram != 0.0]
  return int(nonzero.max()) + 1 if nonzero.size else 1
