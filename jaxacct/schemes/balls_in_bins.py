"""Balls-in-bins sampling (Schuchardt & Kalinin (2026); Dong & Ganesh (2026) §7.1 compares it with
b-min-sep).

References:
  Jan Schuchardt and Nikita Kalinin, "Sampling-Free Privacy Accounting for Matrix Mechanisms under
  Random Allocation", arXiv:2601.21636: Definition 2.7 (docs/references.md).
  Andy Dong and Arun Ganesh, "Privacy Amplification for BandMF via b-Min-Sep Subsampling",
  arXiv:2602.09338 (v2): §3, §7.1 (docs/references.md).
"""

from __future__ import annotations

import dataclasses
import math
from collections.abc import Iterator
from typing import ClassVar

import numpy as np

from jaxacct import _validate
from jaxacct.errors import InputError
from jaxacct.schemes import _pool, base, participation

@base.register('balls_in_bins')
@dataclasses.dataclass(frozen=True, kw_only=True)
class BallsInBins(base.SamplingScheme):
  """Fixed-bin balls-in-bins (Dong & Ganesh (2026) §3; Choquette-Choo et al. arXiv 2410.06266).

  Each example draws one bin j uniformly from {0, …, T−1} **once** and takes part
  in every round i ≡ j (mod T) for the whole run. Not to be confused with
  per-epoch re-drawn bins (random allocation), which is a different mechanism.
  No band limit: ``c_col`` may be longer than ``cycle_length``.

  Attributes:
    iterations: n ≥ 1.
    cycle_length: T ≥ 1 (the epoch length in rounds).
    truncated_batch_size, dataset_size: must stay None (no truncated accountant).
  """

  iterations: int
  cycle_length: int
  truncated_batch_size: None = None
  dataset_size: None = None

  summary_fields: ClassVar = (('cycle_length', 'cycle {}'),)

  def __post_init__(self):
    self._store_python_scalars()
    _validate.integer_at_least('iterations', self.iterations, 1)
    _validate.integer_at_least('cycle_length', self.cycle_length, 1)
    if self.truncated_batch_size is not None or self.dataset_size is not None:
      raise InputError('BallsInBins has no truncated accountant: truncated_batch_size and '
                       'dataset_size must be None (truncation is supported for Poisson, BMinSep '
                       "and CyclicPoisson(partition='equal_split'))")

  def max_sensitivity_squared(self, strategy) -> float:
    # The example is in every round of one bin: max_j ‖m_j‖² over the bins' modes.
    modes = np.asarray(strategy.kernel_view(self).phase_modes(self.iterations,
                                                              self.cycle_length))
    return float(np.max(np.sum(modes**2, axis=1)))

  @property
  def expected_participation_rate(self) -> float:
    return 1.0 / self.cycle_length

  @property
  def max_band_length(self) -> None:
    return None

  @property
  def participation(self) -> participation.Participation:
    """``FixedBins`` (Schuchardt & Kalinin (2026) Definition 2.7); never truncated."""
    return participation.Participation(
        model=participation.FixedBins(cycle_length=self.cycle_length), truncation=None,
        iterations=self.iterations)

  def check_training_data(self, dataset_size: int, graph=None) -> None:
    del graph
    _pool.check_every_group_filled(dataset_size, self.cycle_length)

  def sampled_rounds(self, dataset_size: int, rng: np.random.Generator,
                     graph=None) -> Iterator[np.ndarray]:
    """Every example thrown into one of T bins uniformly once; round i trains bin i mod T."""
    del graph
    bins = _pool.groups(rng.integers(self.cycle_length, size=dataset_size), self.cycle_length)
    for i in range(self.iterations):
      yield bins[i % self.cycle_length]

  @classmethod
  def from_expected_batch_size(cls, *, expected_batch_size: float, dataset_size: int,
                               iterations: int) -> 'BallsInBins':
    """The scheme with T = dataset_size / expected_batch_size (must be an integer)."""
    rate = base.expected_rate(expected_batch_size, dataset_size)
    cycle = round(1.0 / rate)
    if not math.isclose(cycle * rate, 1.0, rel_tol=1e-9):
      raise InputError(
          argument='expected_batch_size', value=expected_batch_size, requirement=
          'must divide dataset_size for balls-in-bins '
          f'(T = dataset_size / expected_batch_size must be an integer), got {dataset_size}'
          f' / {expected_batch_size} = {1.0 / rate}')
    return cls(iterations=iterations, cycle_length=cycle)
