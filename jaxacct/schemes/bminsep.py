"""b-min-sep subsampling (Dong & Ganesh (2026) §4, Algorithms 1 and 2; App. D with truncation).

References:
  Andy Dong and Arun Ganesh, "Privacy Amplification for BandMF via b-Min-Sep Subsampling",
  arXiv:2602.09338 (v2): §4 (Algorithms 1 and 2, Fig. 1), §4.1, App. D (docs/references.md).
"""

from __future__ import annotations

import collections
import dataclasses
from collections.abc import Iterator
from typing import ClassVar

import numpy as np

from jaxacct import _validate
from jaxacct.errors import InputTypeError
from jaxacct.schemes import _pool, base, participation

@base.register('bminsep')
@dataclasses.dataclass(frozen=True, kw_only=True)
class BMinSep(base.SamplingScheme):
  """b-min-sep subsampling (Dong & Ganesh (2026) §4, Algorithm 1 cold / Algorithm 2 warm start).

  In each round every example that did not participate in the previous
  ``min_sep − 1`` rounds is included independently with probability
  ``sampling_prob``. With ``warm_start=True`` the examples' states start from the
  chain's stationary law (Alg. 2), so the expected batch size is constant from
  round 1. Exact Monte Carlo accounting (Thm 5.1) needs ``len(c_col) ≤ min_sep``.

  Formal guarantees: an example participates at most once in any window of
  ``min_sep`` consecutive rounds; 1/p₀ = 1/p + (b − 1).

  Attributes:
    sampling_prob: p ∈ (0, 1], given eligibility.
    iterations: n ≥ 1.
    min_sep: b ≥ 1.
    warm_start: Algorithm 2 (True) or Algorithm 1 (False).
    truncated_batch_size: B ≥ 1 or None (no truncation). Truncated-away
      examples still count as participants (blocked for b − 1 rounds).
    dataset_size: required with ``truncated_batch_size`` (public), else None.
  """

  sampling_prob: float
  iterations: int
  min_sep: int
  warm_start: bool = True
  truncated_batch_size: int | None = None
  dataset_size: int | None = None

  def __post_init__(self):
    self._store_python_scalars()
    _validate.probability('sampling_prob', self.sampling_prob)
    _validate.integer_at_least('iterations', self.iterations, 1)
    _validate.integer_at_least('min_sep', self.min_sep, 1)
    if not isinstance(self.warm_start, bool):
      raise InputTypeError(argument='warm_start', value=self.warm_start,
                           requirement=f'must be a bool, got {self.warm_start!r}')
    base.check_truncation(self)

  summary_fields: ClassVar = (('min_sep', 'b={}'), ('sampling_prob', 'p={:.4g}'), ('truncated_batch_size', 'B={}'))

  def max_sensitivity_squared(self, strategy) -> float:
    # Participations b apart in every b-th round from round 0: with C ≥ 0 and a band of
    # length ≤ b (or the App. B bound for a dense C) the worst pattern.
    return strategy.separated_sensitivity_squared(self.min_sep, self.iterations)

  @property
  def expected_participation_rate(self) -> float:
    """p₀ = p / (1 + (b − 1)p) (Dong & Ganesh (2026) §4, expected return time of Fig. 1)."""
    p = float(self.sampling_prob)
    return p / (1.0 + (self.min_sep - 1) * p)

  @property
  def max_band_length(self) -> int:
    return self.min_sep

  @property
  def participation(self) -> participation.Participation:
    """The b-min-sep chain (Dong & Ganesh (2026) Fig. 1); at b = 1 it is Poisson's."""
    return participation.Participation(
        model=participation.MinSepChain(sampling_prob=self.sampling_prob, min_sep=self.min_sep,
                                        warm_start=self.warm_start),
        truncation=participation.Truncation.of(self.truncated_batch_size, self.dataset_size),
        iterations=self.iterations)

  def sampled_rounds(self, dataset_size: int, rng: np.random.Generator,
                     graph=None) -> Iterator[np.ndarray]:
    """The sampled sets S_i of Algorithm 1 (cold) or 2 (warm); all of S_i is blocked for
    b − 1 rounds, also what truncation cuts."""
    del graph
    p, b = float(self.sampling_prob), self.min_sep
    pool = _pool.EligiblePool(dataset_size)
    blocked: collections.deque = collections.deque()
    if self.warm_start and b > 1:
      # Algorithm 2's stationary state: eligible w.p. 1/(1 + (b−1)p), else sampled in one of
      # the b − 1 previous rounds, each w.p. p/(1 + (b−1)p).
      weights = np.array([1.0] + [p] * (b - 1)) / (1.0 + (b - 1) * p)
      counts = rng.multinomial(dataset_size, weights)
      for count in counts[1:]:
        blocked.append(pool.draw(int(count), rng))
    for _ in range(self.iterations):
      sampled = pool.draw(int(rng.binomial(pool.size, p)), rng)
      blocked.append(sampled)
      if len(blocked) > b - 1:
        pool.release(blocked.popleft())  # sampled b − 1 rounds ago: eligible next round
      yield sampled

  @classmethod
  def from_expected_batch_size(cls, *, expected_batch_size: float, dataset_size: int,
                               iterations: int, min_sep: int, warm_start: bool = True,
                               truncated_batch_size: int | None = None) -> 'BMinSep':
    """The scheme with p = p₀ / (1 − p₀(b − 1)), p₀ = expected_batch_size / dataset_size.

    Feasible only for p₀ ≤ 1/b (Dong & Ganesh (2026) §4.1).
    """
    rate, min_sep = base.rate_within_period(expected_batch_size, dataset_size, min_sep, 'min_sep',
                                        'b-min-sep sampling')
    p = min(1.0, rate / (1.0 - rate * (min_sep - 1)))
    return cls(sampling_prob=p, iterations=iterations, min_sep=min_sep, warm_start=warm_start,
               **base.truncation_fields(truncated_batch_size, dataset_size))
