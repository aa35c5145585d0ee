"""Poisson subsampling (b-min-sep with b = 1: Dong & Ganesh (2026) §4; with truncation: Ganesh
(2025)).

References:
  Andy Dong and Arun Ganesh, "Privacy Amplification for BandMF via b-Min-Sep Subsampling",
  arXiv:2602.09338 (v2): §4 (docs/references.md).
  Arun Ganesh, "Tighter Privacy Analysis for Truncated Poisson Sampling", arXiv:2508.15089
  (docs/references.md).
"""

from __future__ import annotations

import dataclasses
from collections.abc import Iterator
from typing import ClassVar

import numpy as np

from jaxacct import _validate
from jaxacct.schemes import base, participation

@base.register('poisson')
@dataclasses.dataclass(frozen=True, kw_only=True)
class Poisson(base.SamplingScheme):
  """Poisson subsampling: every example is in every round independently w.p. p.

  The b-min-sep scheme with b = 1 (Dong & Ganesh (2026) §4); with a one-band strategy
  ``c_col = [c₀]`` this is DP-SGD.

  Attributes:
    sampling_prob: p ∈ (0, 1].
    iterations: n ≥ 1.
    truncated_batch_size: B ≥ 1 or None (no truncation).
    dataset_size: required with ``truncated_batch_size`` (public), else None.
  """

  sampling_prob: float
  iterations: int
  truncated_batch_size: int | None = None
  dataset_size: int | None = None

  def __post_init__(self):
    self._store_python_scalars()
    _validate.probability('sampling_prob', self.sampling_prob)
    _validate.integer_at_least('iterations', self.iterations, 1)
    base.check_truncation(self)

  min_sep: ClassVar[int] = 1
  summary_fields: ClassVar = (('sampling_prob', 'p={:.4g}'), ('truncated_batch_size', 'B={}'))
  warm_start: ClassVar[bool] = False  # b = 1: every example is always eligible

  def max_sensitivity_squared(self, strategy) -> float:
    # Every round (r = 1): ‖C·1‖², or the App. B bound for a dense C.
    return strategy.separated_sensitivity_squared(1, self.iterations)

  @property
  def expected_participation_rate(self) -> float:
    return float(self.sampling_prob)

  @property
  def participation(self) -> participation.Participation:
    """The b-min-sep chain with b = 1 (Dong & Ganesh (2026) §4)."""
    return participation.Participation(
        model=participation.MinSepChain(sampling_prob=self.sampling_prob, min_sep=1,
                                        warm_start=False),
        truncation=participation.Truncation.of(self.truncated_batch_size, self.dataset_size),
        iterations=self.iterations)

  @property
  def max_band_length(self) -> int:
    return 1

  def sampled_rounds(self, dataset_size: int, rng: np.random.Generator,
                     graph=None) -> Iterator[np.ndarray]:
    """Each round a Binomial(m, p) count of uniformly chosen examples (Poisson sampling)."""
    del graph
    p = float(self.sampling_prob)
    for _ in range(self.iterations):
      yield rng.choice(dataset_size, rng.binomial(dataset_size, p), replace=False).astype(np.int64)

  @classmethod
  def from_expected_batch_size(cls, *, expected_batch_size: float, dataset_size: int,
                               iterations: int,
                               truncated_batch_size: int | None = None) -> 'Poisson':
    """The scheme with p = expected_batch_size / dataset_size."""
    return cls(sampling_prob=base.expected_rate(expected_batch_size, dataset_size),
               iterations=iterations, **base.truncation_fields(truncated_batch_size, dataset_size))
