"""Batch sampling schemes as frozen configurations of public information.

A scheme says *how* batches are formed; it holds only public parameters
(never the dataset size of an untruncated run, never randomness). The same
object drives the Monte Carlo accountant (``jaxacct.montecarlo``) and, in a
later module, the training data pipeline, so what is trained is what is
accounted.

Notation (seed 000 = Dong & Ganesh, "Privacy Amplification for BandMF via
b-Min-Sep Subsampling", arXiv 2602.09338v2):

===========================  ======  ==============================================
API name                     paper   meaning
===========================  ======  ==============================================
``iterations``               n       number of training rounds
``sampling_prob``            p       probability of sampling an *eligible* example
``min_sep``                  b       rounds between two participations (b-min-sep)
``cycle_length``             T or b  period of balls-in-bins / cyclic Poisson
``expected_participation_    p₀      marginal per-round participation rate
rate``
``truncated_batch_size``     B       fixed batch size: longer batches are cut to a
                                     uniformly random subset of size B (seed 001;
                                     seed 000 App. D writes B_max)
``dataset_size``             m (000) number of examples; public only under truncation
                             n (001)
===========================  ======  ==============================================

Truncation (fixed batch shapes for XLA): short batches are padded (no privacy
cost) and batches larger than B are cut to a uniformly random subset of size B.
Its accountants need the dataset size, so it becomes public information and
the guarantee is for zero-out adjacency (seed 001 Def. 2.1: one example
replaced by one with zero gradient). Truncated accountants exist for
``Poisson`` (seed 001, ``jaxacct.truncated_poisson_pld``; Monte Carlo by
seed 000 App. D with b = 1), ``BMinSep`` (seed 000 App. D, Monte Carlo) and
``CyclicPoisson(partition="equal_split")`` (seed 001 §3 remark, deterministic);
other schemes refuse the fields.

Shape-determining fields (``iterations``, ``min_sep``, ``cycle_length``,
``warm_start``, ``partition``) are static for ``jax.jit``; ``sampling_prob`` is
traced, so a new value does not recompile.
"""

from __future__ import annotations

import abc
import dataclasses
import math
from typing import ClassVar, Literal

import numpy as np

from jaxacct import _validate
from jaxacct.errors import InputError, InputTypeError

Partition = Literal['independent', 'equal_split']


class SamplingScheme(abc.ABC):
  """Interface of every batch sampling scheme (abstract; concrete schemes are final)."""

  def _store_python_scalars(self) -> None:
    """Fields given as NumPy (or 0-d array) scalars are stored as Python scalars, so that equal
    values give equal schemes, reprs and ledger ids (``BMinSep(sampling_prob=np.float64(0.04))``
    is ``BMinSep(sampling_prob=0.04)``). Called first by every ``__post_init__``."""
    for field in dataclasses.fields(self):
      value = getattr(self, field.name)
      # type(), not isinstance: np.float64 is a float subclass with another repr.
      if type(value) not in (bool, int, float, str, type(None)) and \
          getattr(value, 'shape', None) == () and hasattr(value, 'item'):
        object.__setattr__(self, field.name, value.item())

  iterations: int

  @property
  @abc.abstractmethod
  def expected_participation_rate(self) -> float:
    """Stationary marginal probability p₀ that an example is in a given round."""

  @property
  @abc.abstractmethod
  def max_band_length(self) -> int | None:
    """Longest ``c_col`` the exact accountant supports (``None``: no limit)."""

  @property
  def band_limit_name(self) -> str:
    """Name of the field that bounds ``len(c_col)``, for error messages."""
    return 'min_sep'

  @property
  def min_sep_chain(self) -> int | None:
    """r when one example's participation is the r-min-sep chain of seed 000 Fig. 1, else None.

    That is: at most one participation per round, at least r rounds apart, drawn by the
    cold- or warm-start chain with a per-round probability p (Poisson: r = 1). The
    App. B bounds for a dense strategy need exactly this.
    """
    return None

  @property
  def conjectural(self) -> bool:
    """True when the scheme's Monte Carlo accounting rests on an unproven conjecture."""
    return False

  @abc.abstractmethod
  def max_sensitivity_squared(self, strategy) -> float:
    """max over the scheme's participation patterns x of ‖C·x‖² (host; the EVR fallback's Δ²).

    Exact for C ≥ 0 with a band no longer than the scheme's separation; for a dense
    ``LowerTriangular`` the strategy's App. B bound (seed 000). Truncation does not change it
    (``deterministic.pld.max_sensitivity_squared`` explains why).
    """

  @property
  def truncates(self) -> bool:
    """True when batches larger than ``truncated_batch_size`` < ``dataset_size`` are cut.

    B ≥ dataset_size is allowed and means no batch can ever be cut: such a
    scheme is accounted exactly like the untruncated one.
    """
    size = getattr(self, 'truncated_batch_size', None)
    return size is not None and size < self.dataset_size


def _check_truncation(scheme) -> None:
  """Validates the (truncated_batch_size, dataset_size) pair of a scheme."""
  size, dataset = scheme.truncated_batch_size, scheme.dataset_size
  name = type(scheme).__name__
  if size is None:
    if dataset is not None:
      raise InputError(
          f'dataset_size is public information of {name} only when batches are truncated; pass '
          'truncated_batch_size too, or leave dataset_size=None (use from_expected_batch_size to '
          'derive sampling_prob from a dataset size)')
    return
  _validate.integer_at_least('truncated_batch_size', size, 1)
  if dataset is None:
    raise InputError(
        f'dataset_size is required when truncated_batch_size is set ({name} with B = {size}): the '
        'truncated accountants depend on it, so it is public (zero-out adjacency); '
        'truncated_batch_size >= dataset_size means no truncation')
  _validate.integer_at_least('dataset_size', dataset, 1)


def _expected_rate(expected_batch_size, dataset_size) -> float:
  expected_batch_size = _validate.positive_finite('expected_batch_size', expected_batch_size)
  dataset_size = _validate.integer_at_least('dataset_size', dataset_size, 1)
  if expected_batch_size > dataset_size:
    raise InputError(
        f'expected_batch_size must be <= dataset_size ({dataset_size}), got {expected_batch_size}')
  return expected_batch_size / dataset_size


def _truncation(truncated_batch_size, dataset_size) -> dict:
  """Truncation fields for a constructor: the dataset size is kept only when truncating."""
  if truncated_batch_size is None:
    return {}
  return {'truncated_batch_size': truncated_batch_size, 'dataset_size': dataset_size}


def _rate_within_period(expected_batch_size, dataset_size, period, period_name: str,
                        scheme_name: str) -> tuple[float, int]:
  """(p₀, period) after checking p₀ ≤ 1/period (an example joins at most once per period)."""
  rate = _expected_rate(expected_batch_size, dataset_size)
  period = _validate.integer_at_least(period_name, period, 1)
  if rate * period > 1.0 + 1e-12:
    raise InputError(
        f'expected_batch_size must be <= dataset_size / {period_name} = {dataset_size / period} '
        f'for {scheme_name} (p must stay <= 1), got {expected_batch_size}')
  return rate, period


@dataclasses.dataclass(frozen=True, kw_only=True)
class Poisson(SamplingScheme):
  """Poisson subsampling: every example is in every round independently w.p. p.

  The b-min-sep scheme with b = 1 (seed 000 §2.4); with a one-band strategy
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
    _check_truncation(self)

  min_sep: ClassVar[int] = 1
  warm_start: ClassVar[bool] = False  # b = 1: every example is always eligible

  def max_sensitivity_squared(self, strategy) -> float:
    # Every round (r = 1): ‖C·1‖², or the App. B bound for a dense C.
    return strategy.separated_sensitivity_squared(1, self.iterations)

  @property
  def expected_participation_rate(self) -> float:
    return float(self.sampling_prob)

  @property
  def min_sep_chain(self) -> int:
    return 1

  @property
  def max_band_length(self) -> int:
    return 1

  @classmethod
  def from_expected_batch_size(cls, *, expected_batch_size: float, dataset_size: int,
                               iterations: int,
                               truncated_batch_size: int | None = None) -> 'Poisson':
    """The scheme with p = expected_batch_size / dataset_size."""
    return cls(sampling_prob=_expected_rate(expected_batch_size, dataset_size),
               iterations=iterations, **_truncation(truncated_batch_size, dataset_size))


@dataclasses.dataclass(frozen=True, kw_only=True)
class BMinSep(SamplingScheme):
  """b-min-sep subsampling (seed 000 §4, Algorithm 1 cold / Algorithm 2 warm start).

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
      raise InputTypeError(f'warm_start must be a bool, got {self.warm_start!r}')
    _check_truncation(self)

  def max_sensitivity_squared(self, strategy) -> float:
    # Participations b apart in every b-th round from round 0: with C ≥ 0 and a band of
    # length ≤ b (or the App. B bound for a dense C) the worst pattern.
    return strategy.separated_sensitivity_squared(self.min_sep, self.iterations)

  @property
  def expected_participation_rate(self) -> float:
    """p₀ = p / (1 + (b − 1)p) (seed 000 §4, renewal argument)."""
    p = float(self.sampling_prob)
    return p / (1.0 + (self.min_sep - 1) * p)

  @property
  def max_band_length(self) -> int:
    return self.min_sep

  @property
  def min_sep_chain(self) -> int:
    return self.min_sep

  @classmethod
  def from_expected_batch_size(cls, *, expected_batch_size: float, dataset_size: int,
                               iterations: int, min_sep: int, warm_start: bool = True,
                               truncated_batch_size: int | None = None) -> 'BMinSep':
    """The scheme with p = p₀ / (1 − p₀(b − 1)), p₀ = expected_batch_size / dataset_size.

    Feasible only for p₀ ≤ 1/b (seed 000 §4).
    """
    rate, min_sep = _rate_within_period(expected_batch_size, dataset_size, min_sep, 'min_sep',
                                        'b-min-sep sampling')
    p = min(1.0, rate / (1.0 - rate * (min_sep - 1)))
    return cls(sampling_prob=p, iterations=iterations, min_sep=min_sep, warm_start=warm_start,
               **_truncation(truncated_batch_size, dataset_size))


@dataclasses.dataclass(frozen=True, kw_only=True)
class BallsInBins(SamplingScheme):
  """Fixed-bin balls-in-bins (seed 000 §2.3; Choquette-Choo et al. arXiv 2410.06266).

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

  @classmethod
  def from_expected_batch_size(cls, *, expected_batch_size: float, dataset_size: int,
                               iterations: int) -> 'BallsInBins':
    """The scheme with T = dataset_size / expected_batch_size (must be an integer)."""
    rate = _expected_rate(expected_batch_size, dataset_size)
    cycle = round(1.0 / rate)
    if not math.isclose(cycle * rate, 1.0, rel_tol=1e-9):
      raise InputError(
          'expected_batch_size must divide dataset_size for balls-in-bins '
          f'(T = dataset_size / expected_batch_size must be an integer), got {dataset_size}'
          f' / {expected_batch_size} = {1.0 / rate}')
    return cls(iterations=iterations, cycle_length=cycle)


@dataclasses.dataclass(frozen=True, kw_only=True)
class CyclicPoisson(SamplingScheme):
  """Cyclic Poisson sampling (seed 000 §2.2, §4.1; Choquette-Choo et al. 2023).

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
  partition: Partition = 'independent'
  truncated_batch_size: int | None = None
  dataset_size: int | None = None

  PARTITIONS: ClassVar[tuple[str, ...]] = ('independent', 'equal_split')

  def __post_init__(self):
    self._store_python_scalars()
    _validate.probability('sampling_prob', self.sampling_prob)
    _validate.integer_at_least('iterations', self.iterations, 1)
    _validate.integer_at_least('cycle_length', self.cycle_length, 1)
    _validate.one_of('partition', self.partition, self.PARTITIONS)
    _check_truncation(self)
    if self.truncates and self.partition != 'equal_split':
      raise InputError(
          "truncated_batch_size needs partition='equal_split' for CyclicPoisson: with random "
          "phases ('independent') the group sizes are random and no truncated accountant is "
          'valid (seed 001 covers fixed, public group sizes)')

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
  def band_limit_name(self) -> str:
    return 'cycle_length'

  @classmethod
  def from_expected_batch_size(cls, *, expected_batch_size: float, dataset_size: int,
                               iterations: int, cycle_length: int,
                               partition: Partition = 'independent',
                               truncated_batch_size: int | None = None) -> 'CyclicPoisson':
    """The scheme with p = T·p₀, p₀ = expected_batch_size / dataset_size (needs p₀ ≤ 1/T)."""
    rate, cycle_length = _rate_within_period(expected_batch_size, dataset_size, cycle_length,
                                             'cycle_length', 'cyclic Poisson sampling')
    return cls(sampling_prob=min(1.0, rate * cycle_length), iterations=iterations,
               cycle_length=cycle_length, partition=partition,
               **_truncation(truncated_batch_size, dataset_size))


@dataclasses.dataclass(frozen=True, kw_only=True)
class MultiAttributionBMinSep(SamplingScheme):
  """Multi-attribution b-min-sep sampling (seed 000 §6.2, Algorithm 3), user-level.

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
  analysis; a warm start by burn-in (§6.4) is a post-processing of it, so the
  same accounting holds. With k_u = 1 and one user per example it is exactly
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

  def __post_init__(self):
    self._store_python_scalars()
    _validate.probability('sampling_prob', self.sampling_prob)
    _validate.integer_at_least('iterations', self.iterations, 1)
    _validate.integer_at_least('min_sep', self.min_sep, 1)
    _validate.integer_at_least('max_examples_per_user', self.max_examples_per_user, 1)
    _validate.one_of('exclusion', self.exclusion, self.EXCLUSIONS)
    if not isinstance(self.accept_conjecture_6_2, bool):
      raise InputTypeError(f'accept_conjecture_6_2 must be a bool, got {self.accept_conjecture_6_2!r}')

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
