"""The result every accountant returns: an (ε, δ) guarantee and how it was obtained."""

from __future__ import annotations

import dataclasses
from typing import Literal

Method = Literal['verified_mc', 'fallback', 'deterministic', 'estimate', 'conjectural']
METHODS: tuple[str, ...] = ('verified_mc', 'fallback', 'deterministic', 'estimate', 'conjectural')
ADJACENCIES: tuple[str, ...] = ('zero_out', 'add_remove', 'replace_one')


@dataclasses.dataclass(frozen=True, kw_only=True)
class Guarantee:
  """An (ε, δ)-DP statement about one mechanism, with its provenance.

  Attributes:
    epsilon: ε.
    delta: the overall δ (for ``verified_mc``: δ_overall of Theorem A.1, not δ_b).
    method: ``"verified_mc"`` (Estimate-Verify-Release, seed 000 App. A),
      ``"fallback"`` (the last candidate of Algorithm 5, proven by a
      deterministic accountant at δ_b; the released δ is still δ_overall),
      ``"deterministic"`` (a closed-form / PLD accountant), ``"estimate"``
      (Monte Carlo estimate only: **not** a guarantee), ``"conjectural"``
      (rests on an unproven conjecture).
    noise_multiplier: σ of the mechanism the statement is about.
    delta_hat: per-direction MC estimates at ε (``{"remove": …, "add": …}``) or None.
    num_samples: MC samples per direction behind the statement (0 if none).
    base_delta: the verification threshold δ_b (None if not verified).
    seed: the raw key words of the randomness used (None if none).
    attempts: verification runs charged by a union bound (1 normally).
    adjacency: the neighbouring relation of the statement: ``"zero_out"`` (one
      example replaced by one with zero gradient; the Monte Carlo accountants,
      equal to add/remove without truncation), ``"add_remove"`` or
      ``"replace_one"`` (deterministic accountants). Under truncation the
      dataset size is public in every case.
    bounded: the privacy losses behind the statement are bounds, not exact
      (seed 000 App. B r-min-sep bounds for a dense ``LowerTriangular`` C:
      each direction's loss is over-stated, so ε and δ are upper bounds and
      the statement is valid but may be loose).
  """

  epsilon: float
  delta: float
  method: Method
  noise_multiplier: float
  delta_hat: dict | None = None
  num_samples: int = 0
  base_delta: float | None = None
  seed: tuple[int, ...] | None = None
  attempts: int = 1
  adjacency: str = 'zero_out'
  bounded: bool = False

  def __post_init__(self):
    if self.method not in METHODS:
      raise ValueError(f'method must be one of {", ".join(METHODS)}, got {self.method!r}')
    if self.adjacency not in ADJACENCIES:
      raise ValueError(f'adjacency must be one of {", ".join(ADJACENCIES)}, got {self.adjacency!r}')

  @property
  def verified(self) -> bool:
    """True when the statement is a proven guarantee (verified MC, fallback or deterministic)."""
    return self.method in ('verified_mc', 'fallback', 'deterministic')
