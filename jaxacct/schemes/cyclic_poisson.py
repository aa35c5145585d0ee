"""Cyclic Poisson sampling (Dong & Ganesh (2026) §3, §7; Ganesh (2025) §3.1 with truncation).

References:
  Andy Dong and Arun Ganesh, "Privacy Amplification for BandMF via b-Min-Sep Subsampling",
  arXiv:2602.09338 (v2): §3, §4.1, §7 (docs/references.md).
  Arun Ganesh, "Tighter Privacy Analysis for Truncated Poisson Sampling", arXiv:2508.15089: §3.1
  (the remark after Theorem 3.1: truncated cyclic Poisson) (docs/references.md).
"""

from __future__ import annotations

import dataclasses
from collections.abc import Iterator
from typing import ClassVar

import numpy as np

from jaxacct import _validate
from jaxacct.errors import InputError
from jaxacct.schemes import _pool, base, participation

@base.register('cyclic_poisson')
@dataclasses.dataclass(frozen=True, kw_only=True)
class CyclicPoisson(base.SamplingScheme):
  """Cyclic Poisson sampling (Dong & Ganesh (2026) §3, §4.1; Choquette-Choo et al., "(Amplified)
  banded matrix factorization", NeurIPS 2023).

  Examples are assigned to one of T = ``cycle_length`` phases and are
  Poisson-sampled with probability p only in the rounds i ≡ phase (mod T).

  - ``partition="independent"``: every example draws its phase uniformly at
    random (jax_privacy's INDEPENDENT); the accountant mixes over the phase.
  - ``partition="equal_split"``: the dataset is split into T equal groups
    (EQUAL_SPLIT); the sensitive example's phase is then public, and the
    accountant uses phase 0, the worst one: its rounds are pointwise earlier
    (larger untruncated column norms) and at least as many as any other phase's,
    and a Poisson-subsampled Gaussian round with a smaller column norm is a
    post-processing (rescale and add noise) of one with a larger norm.

  Exact accounting needs ``len(c_col) ≤ cycle_length``.

  Attributes:
    sampling_prob: p ∈ (0, 1], the probability in the rounds of an example's phase.
    iterations: n ≥ 1.
    cycle_length: T ≥ 1.
    partition: ``"independent"`` or ``"equal_split"``.
    truncated_batch_size: B ≥ 1 or None; only with ``equal_split`` (each group
      of ⌊m/T⌋ or ⌈m/T⌉ examples is then a truncated Poisson population).
    dataset_size: required with ``truncated_batch_size`` (public), else None.
  """

  sampling_prob: float
  iterations: int
  cycle_length: int
  partition: base.Partition = 'independent'
  truncated_batch_size: int | None = None
  dataset_size: int | None = None

  PARTITIONS: ClassVar[tuple[str, ...]] = ('independent', 'equal_split')
  summary_fields: ClassVar = (('cycle_length', 'cycle {}'), ('sampling_prob', 'p={:.4g}'), ('truncated_batch_size', 'B={}'))

  def __post_init__(self):
    self._store_python_scalars()
    _validate.probability('sampling_prob', self.sampling_prob)
    _validate.integer_at_least('iterations', self.iterations, 1)
    _validate.integer_at_least('cycle_length', self.cycle_length, 1)
    _validate.one_of('partition', self.partition, self.PARTITIONS)
    base.check_truncation(self)
    if self.truncates and self.partition != 'equal_split':
      raise InputError(
          argument='truncated_batch_size', value=self.truncated_batch_size, requirement=
          "needs partition='equal_split' for CyclicPoisson: with random "
          "phases ('independent') the group sizes are random and no truncated accountant is "
          'valid (Ganesh (2025) covers fixed, public group sizes)')

  def max_sensitivity_squared(self, strategy) -> float:
    # Phase 0 in every one of its rounds (the worst case; C ≥ 0, columns m ≤ T apart).
    norms = np.asarray(strategy.column_squared_norms(self.iterations))
    return float(np.sum(norms[::self.cycle_length]))

  @property
  def expected_participation_rate(self) -> float:
    return float(self.sampling_prob) / self.cycle_length

  @property
  def max_band_length(self) -> int:
    return self.cycle_length

  @property
  def participation(self) -> participation.Participation:
    """``Cyclic`` (Dong & Ganesh (2026) §3, §4.1)."""
    return participation.Participation(
        model=participation.Cyclic(sampling_prob=self.sampling_prob,
                                   cycle_length=self.cycle_length, partition=self.partition),
        truncation=participation.Truncation.of(self.truncated_batch_size, self.dataset_size),
        iterations=self.iterations)

  @property
  def band_limit_name(self) -> str:
    return 'cycle_length'

  def check_training_data(self, dataset_size: int, graph=None) -> None:
    del graph
    _pool.check_every_group_filled(dataset_size, self.cycle_length)

  def sampled_rounds(self, dataset_size: int, rng: np.random.Generator,
                     graph=None) -> Iterator[np.ndarray]:
    """T groups (independent uniform labels, or an equal split of a random permutation);
    round i samples group i mod T with probability p per example."""
    del graph
    t, p = self.cycle_length, float(self.sampling_prob)
    if self.partition == 'equal_split':
      permutation = rng.permutation(dataset_size)
      groups = [permutation[g::t].astype(np.int64) for g in range(t)]  # sizes ⌊m/T⌋ or ⌈m/T⌉
    else:
      groups = _pool.groups(rng.integers(t, size=dataset_size), t)
    for i in range(self.iterations):
      group = groups[i % t]
      yield group[rng.choice(group.size, rng.binomial(group.size, p), replace=False)]

  @classmethod
  def from_expected_batch_size(cls, *, expected_batch_size: float, dataset_size: int,
                               iterations: int, cycle_length: int,
                               partition: base.Partition = 'independent',
                               truncated_batch_size: int | None = None) -> 'CyclicPoisson':
    """The scheme with p = T·p₀, p₀ = expected_batch_size / dataset_size (needs p₀ ≤ 1/T)."""
    rate, cycle_length = base.rate_within_period(expected_batch_size, dataset_size, cycle_length,
                                             'cycle_length', 'cyclic Poisson sampling')
    return cls(sampling_prob=min(1.0, rate * cycle_length), iterations=iterations,
               cycle_length=cycle_length, partition=partition,
               **base.truncation_fields(truncated_batch_size, dataset_size))
