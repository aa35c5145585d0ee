"""The participation model of a sampling scheme: what accountants and strategies ask instead of
the scheme's family (``SamplingScheme.participation``).

A family *realises* a model: ``Poisson`` and ``BMinSep`` are both the b-min-sep chain
(``MinSepChain``, Poisson is b = 1), ``CyclicPoisson`` is ``Cyclic``, ``BallsInBins`` is
``FixedBins``, ``MultiAttributionBMinSep`` is ``UserLevel``. A new family that realises an
existing model touches no accountant; a new *model* is the explicit extension event: every
accountant dispatches on the model and refuses one it does not know. A family that declares no
model (``Participation.model`` None) is accounted by Monte Carlo or the unamplified fallback only.

``Participation`` is not a dataclass field of the scheme, so ``to_dict()`` and the ledger's
mechanism description do not see it.

References:
  Andy Dong and Arun Ganesh, "Privacy Amplification for BandMF via b-Min-Sep Subsampling",
  arXiv:2602.09338 (v2): §3 (cyclic Poisson, balls-in-bins), §4 and Fig. 1 (b-min-sep),
  §6 (multi-attribution), App. D (truncation) (docs/references.md).
  Jan Schuchardt and Nikita Kalinin, "Sampling-Free Privacy Accounting for Matrix Mechanisms under
  Random Allocation", arXiv:2601.21636: Definition 2.7 (fixed bins) (docs/references.md).
  Arun Ganesh, "Tighter Privacy Analysis for Truncated Poisson Sampling", arXiv:2508.15089: Def.
  2.1, §3.1 (truncation) (docs/references.md).
"""

from __future__ import annotations

import dataclasses
from typing import Literal

Partition = Literal['independent', 'equal_split']


@dataclasses.dataclass(frozen=True, kw_only=True)
class MinSepChain:
  """One example's participation is the b-min-sep chain of Dong & Ganesh (2026) §4, Fig. 1
  (Algorithm 1 cold, Algorithm 2 warm start): per round w.p. p given eligibility, at least
  b rounds apart. Poisson sampling (§4) is ``MinSepChain(p, 1, False)``.

  Attributes:
    sampling_prob: p, given eligibility.
    min_sep: b ≥ 1.
    warm_start: Algorithm 2; always False at b = 1 (the two starts are one chain there).
  """

  sampling_prob: float
  min_sep: int
  warm_start: bool

  def __post_init__(self):
    # b = 1 has no history to warm: one chain, one model (BMinSep(min_sep=1) == Poisson).
    object.__setattr__(self, 'warm_start', bool(self.warm_start) and self.min_sep > 1)


@dataclasses.dataclass(frozen=True, kw_only=True)
class Cyclic:
  """Cyclic Poisson (Dong & Ganesh (2026) §3, §4.1; Choquette-Choo et al., NeurIPS 2023): the
  example's phase among T is uniform (``"independent"``) or public (``"equal_split"``), and it
  is Poisson-sampled w.p. p in the rounds of its phase.

  Attributes:
    sampling_prob: p in the rounds of the example's phase.
    cycle_length: T ≥ 1.
    partition: ``"independent"`` or ``"equal_split"``.
  """

  sampling_prob: float
  cycle_length: int
  partition: Partition


@dataclasses.dataclass(frozen=True, kw_only=True)
class FixedBins:
  """Fixed-bin balls-in-bins (Schuchardt & Kalinin (2026) Definition 2.7; Dong & Ganesh (2026)
  §3): the example draws one of T bins once and takes part in every round of it.

  Attributes:
    cycle_length: T ≥ 1.
  """

  cycle_length: int


@dataclasses.dataclass(frozen=True, kw_only=True)
class UserLevel:
  """Multi-attribution b-min-sep at user level (Dong & Ganesh (2026) §6, Theorem 6.1): the
  user's participation is b-min-sep with p_u = 1 − (1 − p)^{k_u} and a zero-truncated
  Binomial(k_u, p) multiplicity per participation.

  Kept distinct from ``MinSepChain`` also at k_u = 1 (where Theorem 6.1 gives the cold-start
  b-min-sep chain): accountants that accept ``MinSepChain`` have not been checked for it.

  Attributes:
    sampling_prob: p, the interim per-example probability.
    min_sep: b ≥ 1.
    max_examples_per_user: k_u ≥ 1.
  """

  sampling_prob: float
  min_sep: int
  max_examples_per_user: int


@dataclasses.dataclass(frozen=True, kw_only=True)
class Truncation:
  """Batches longer than B are cut to a uniform subset of size B (Ganesh (2025) Algorithm 1;
  Dong & Ganesh (2026) App. D); the dataset size m is then public (Ganesh (2025) Def. 2.1).

  Attributes:
    batch_size: B ≥ 1.
    dataset_size: m ≥ 1.
  """

  batch_size: int
  dataset_size: int

  @property
  def cuts(self) -> bool:
    """True when a batch can be cut (B < m); B ≥ m is accounted as no truncation."""
    return self.batch_size < self.dataset_size

  @classmethod
  def of(cls, batch_size: int | None, dataset_size: int | None) -> Truncation | None:
    """The truncation of a scheme's (``truncated_batch_size``, ``dataset_size``) fields, or None
    when ``batch_size`` is None."""
    return None if batch_size is None else cls(batch_size=batch_size, dataset_size=dataset_size)


Model = MinSepChain | Cyclic | FixedBins | UserLevel


@dataclasses.dataclass(frozen=True, kw_only=True)
class Participation:
  """How one example (or user) participates over the run: what accountants ask.

  Attributes:
    model: the participation law (``MinSepChain``, ``Cyclic``, ``FixedBins``, ``UserLevel``),
      or None for a family that declares none (no amplified accountant applies).
    truncation: the scheme's ``Truncation`` (as given, also when B ≥ m), or None.
    iterations: n ≥ 1.
  """

  model: Model | None
  truncation: Truncation | None
  iterations: int
