"""Brute-force oracles for seed 002's Rényi accountant (fixed-bin balls-in-bins), NumPy only.

Independent of ``jaxacct``: the slot means by a loop over rounds, eq. (5) by enumerating every
slot tuple, Lemma 3.4 and Theorem 3.1 as printed (with the sign of eq. (5) corrected; spec
002 §2.2), and the DP-SGD closed form of R₂.
"""

from __future__ import annotations

import itertools
import math

import numpy as np
from scipy import special


def slot_means(entries: np.ndarray, slots: int) -> np.ndarray:
  """m_i = Σ over rounds r ≡ i (mod b) of column r of C: (b, n)."""
  n = entries.shape[0]
  means = np.zeros((slots, n))
  for round_ in range(n):
    means[round_ % slots] += entries[:, round_]
  return means


def gram(entries: np.ndarray, slots: int) -> np.ndarray:
  """G_ij = ⟨m_i, m_j⟩."""
  means = slot_means(entries, slots)
  return means @ means.T


def renyi_remove_by_tuples(gram_matrix: np.ndarray, sigma: float, alpha: int) -> float:
  """R_α(P‖Q) = (1/(α−1))·[ln Σ_{r ∈ [b]^α} exp(Σ_{j1≠j2} G_{r_j1 r_j2}/(2σ²)) − α ln b] by
  enumerating all b^α tuples (eq. (5), sign corrected)."""
  b = gram_matrix.shape[0]
  if b**alpha > 2_000_000:
    raise ValueError(f'b^alpha = {b**alpha} tuples is too many to enumerate')
  exponents = []
  for tuple_ in itertools.product(range(b), repeat=alpha):
    block = gram_matrix[np.ix_(tuple_, tuple_)]
    exponents.append((block.sum() - np.trace(block)) / (2 * sigma**2))
  return (special.logsumexp(exponents) - alpha * math.log(b)) / (alpha - 1)


def renyi_add_bound(gram_matrix: np.ndarray, sigma: float, alpha: float) -> float:
  """Lemma 3.4: tr(G)/(2bσ²) + (α − 1)ΣG/(2b²σ²)."""
  b = gram_matrix.shape[0]
  return (np.trace(gram_matrix) / (2 * b * sigma**2)
          + (alpha - 1) * gram_matrix.sum() / (2 * b * b * sigma**2))


def delta_from_renyi(rho: float, alpha: float, epsilon: float) -> float:
  """Theorem 3.1: exp((α − 1)(ρ − ε))/(α − 1)·(1 − 1/α)^α, capped at 1."""
  return min(1.0, math.exp((alpha - 1) * (rho - epsilon)) / (alpha - 1) * (1 - 1 / alpha)**alpha)


def epsilon_from_renyi(rho: float, alpha: float, delta: float) -> float:
  """Theorem 3.1 solved for ε: the ε at which ``delta_from_renyi`` equals δ."""
  return rho + (alpha * math.log(1 - 1 / alpha) - math.log(alpha - 1) - math.log(delta)) / (
      alpha - 1)


def dpsgd_renyi2(epochs: int, slots: int, sigma: float) -> float:
  """R₂(P‖Q) for C = I (G = k·I_b): ln E_Q[(p/q)²] = ln((1/b²)Σ_{i,j} e^{G_ij/σ²})
  = ln(1 + (e^{k/σ²} − 1)/b)."""
  return math.log(1 + math.expm1(epochs / sigma**2) / slots)
