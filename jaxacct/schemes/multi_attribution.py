"""Multi-attribution b-min-sep sampling, user level (Dong & Ganesh (2026) §6, Algorithms 3 and 4).

References:
  Andy Dong and Arun Ganesh, "Privacy Amplification for BandMF via b-Min-Sep Subsampling",
  arXiv:2602.09338 (v2): §6.1 (Algorithm 3, simulated warm start), §6.2 (accounted as a cold start),
  §6.3 (Algorithm 4) (docs/references.md).
"""

from __future__ import annotations

import dataclasses
import math
from collections.abc import Iterator
from typing import ClassVar, Literal

import numpy as np

from jaxacct import _validate
from jaxacct.errors import InputError, InputTypeError
from jaxacct.schemes import base, participation

@base.register('multi_attribution')
@dataclasses.dataclass(frozen=True, kw_only=True)
class MultiAttributionBMinSep(base.SamplingScheme):
  """Multi-attribution b-min-sep sampling (Dong & Ganesh (2026) §6.1, Algorithm 3), user-level.

  Every example is attributed to a public set of users. In round i each example
  is put in an interim sample S_i with probability p; the batch is S_i minus
  every example sharing a user with an example of S_{i−b+1}, …, S_{i−1}.
  After contribution bounding (``jaxacct.bound_contributions``) every user has
  at most k_u examples.

  Accounting (Theorem 6.1, proven for Algorithm 3): a user's participation
  vector is dominated by x with x_i ~ Binomial(k_u, p) when none of the
  previous b − 1 rounds is positive, else 0, i.e. b-min-sep of the *user* with
  per-round success probability p_u = 1 − (1 − p)^{k_u} and a zero-truncated
  Binomial(k_u, p) multiplicity per participation. It is a cold-start
  analysis; a warm start by burn-in (Dong & Ganesh (2026) §6.1) is a post-processing of it
  (§6.2), so the same accounting holds. With k_u = 1 and one user per example it is exactly
  cold-start ``BMinSep``. The guarantee is user-level: zero-out of all of one
  user's examples.

  Algorithm 4 (``exclusion="participated"``: exclusion by the realised
  batches) also keeps every user b-min-sep, but Theorem 6.1's coupling fails
  for it; accounting it by the same model rests on the unproven Conjecture
  6.2. It is refused unless ``accept_conjecture_6_2=True``, and then every
  verified result is labelled ``"conjectural"`` (the unamplified fallback
  stays a proof: it only needs the min-sep property).

  Attributes:
    sampling_prob: p ∈ (0, 1], the interim sampling probability.
    iterations: n ≥ 1.
    min_sep: b ≥ 1.
    max_examples_per_user: k_u ≥ 1 (after contribution bounding).
    exclusion: ``"sampled"`` (Algorithm 3) or ``"participated"`` (Algorithm 4).
    accept_conjecture_6_2: allow accounting Algorithm 4 (results conjectural).
  """

  sampling_prob: float
  iterations: int
  min_sep: int
  max_examples_per_user: int
  exclusion: Literal['sampled', 'participated'] = 'sampled'
  accept_conjecture_6_2: bool = False

  EXCLUSIONS: ClassVar[tuple[str, ...]] = ('sampled', 'participated')
  needs_graph: ClassVar[bool] = True
  summary_fields: ClassVar = (('min_sep', 'b={}'), ('sampling_prob', 'p={:.4g}'))

  def __post_init__(self):
    self._store_python_scalars()
    _validate.probability('sampling_prob', self.sampling_prob)
    _validate.integer_at_least('iterations', self.iterations, 1)
    _validate.integer_at_least('min_sep', self.min_sep, 1)
    _validate.integer_at_least('max_examples_per_user', self.max_examples_per_user, 1)
    _validate.one_of('exclusion', self.exclusion, self.EXCLUSIONS)
    if not isinstance(self.accept_conjecture_6_2, bool):
      raise InputTypeError(argument='accept_conjecture_6_2', value=self.accept_conjecture_6_2,
                           requirement=f'must be a bool, got {self.accept_conjecture_6_2!r}')

  @property
  def conjectural(self) -> bool:
    return self.exclusion == 'participated'

  @property
  def user_sampling_prob(self) -> float:
    """p_u = 1 − (1 − p)^{k_u}: an available user takes part in a round (Theorem 6.1)."""
    return -math.expm1(self.max_examples_per_user * math.log1p(-float(self.sampling_prob))) \
        if self.sampling_prob < 1 else 1.0

  def max_sensitivity_squared(self, strategy) -> float:
    # Up to k_u examples of the user in a round, rounds b apart; C ≥ 0, so all-k_u is the max.
    k = self.max_examples_per_user
    return float(k * k * strategy.separated_sensitivity_squared(self.min_sep, self.iterations))

  @property
  def expected_participation_rate(self) -> float:
    """Stationary rate of the *user's* participation rounds in the Theorem 6.1 model.

    p_u / (1 + (b − 1)p_u); the per-example batch size depends on the graph.
    """
    p_u = self.user_sampling_prob
    return p_u / (1.0 + (self.min_sep - 1) * p_u)

  @property
  def max_band_length(self) -> int:
    return self.min_sep

  @property
  def participation(self) -> participation.Participation:
    """``UserLevel`` (Dong & Ganesh (2026) §6, Theorem 6.1), also at k_u = 1 (see
    ``UserLevel``)."""
    return participation.Participation(
        model=participation.UserLevel(sampling_prob=self.sampling_prob, min_sep=self.min_sep,
                                      max_examples_per_user=self.max_examples_per_user),
        truncation=None, iterations=self.iterations)

  def check_training_data(self, dataset_size: int, graph=None) -> None:
    if graph is None:
      raise InputTypeError('MultiAttributionBMinSep batches need graph=AttributionGraph (after '
                           'contribution bounding), got None')
    if graph.num_examples != dataset_size:
      raise InputError(argument='dataset_size', value=dataset_size,
                       requirement=f'must equal graph.num_examples = {graph.num_examples}, '
                       f'got {dataset_size}')

  def sampled_rounds(self, dataset_size: int, rng: np.random.Generator,
                     graph=None) -> Iterator[np.ndarray]:
    """Algorithm 3 or 4 (``exclusion``) on the attribution graph, from a cold start."""
    del dataset_size  # the graph's examples
    return attribution_rounds(graph, float(self.sampling_prob), self.min_sep, self.iterations,
                              rng, self.exclusion)


def attribution_rounds(graph, p: float, b: int, n: int, rng: np.random.Generator, exclusion: str,
                       burn_in: int = 0) -> Iterator[np.ndarray]:
  """The batches of Algorithm 3 (``exclusion="sampled"``) or 4 (``"participated"``) on the
  ``AttributionGraph`` ``graph``, after ``burn_in`` discarded rounds (Dong & Ganesh (2026)
  §6.1–6.2);
  ``jaxacct.batching.multi_attribution_batches`` checks the arguments."""
  m = graph.num_examples
  indptr, users = graph.indptr, graph.users
  # Last round each user was touched; "never" is far enough back to be eligible.
  touched = np.full(graph.num_users, -b, dtype=np.int64)
  for i in range(burn_in + n):
    size = rng.binomial(m, p)
    sampled = np.sort(rng.choice(m, size=size, replace=False)) if size else np.zeros(0, np.int64)
    starts, ends = indptr[sampled], indptr[sampled + 1]
    counts = ends - starts
    # Users of each sampled example, flattened, with the example's position in ``sampled``.
    flat = users[np.repeat(starts, counts) + _ranges(counts)]
    owner = np.repeat(np.arange(sampled.size), counts)
    blocked_user = touched[flat] > i - b  # touched within rounds i − b + 1 … i − 1
    excluded = np.zeros(sampled.size, bool)
    np.logical_or.at(excluded, owner, blocked_user)
    batch = sampled[~excluded]
    if exclusion == 'sampled':
      touched[flat] = i
    else:
      touched[flat[~excluded[owner]]] = i
    if i >= burn_in:
      yield batch


def _ranges(counts: np.ndarray) -> np.ndarray:
  """Concatenation of arange(c) for c in counts."""
  total = int(counts.sum())
  if total == 0:
    return np.zeros(0, np.int64)
  offsets = np.repeat(np.cumsum(counts) - counts, counts)
  return np.arange(total, dtype=np.int64) - offsets
