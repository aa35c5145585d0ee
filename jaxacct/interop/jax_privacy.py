"""jax_privacy 2.0's batch selection strategies and BandMF strategies as jaxacct objects.

``to_scheme`` turns a jax_privacy ``BatchSelectionStrategy`` into the jaxacct scheme with the
same participation law, ``from_scheme`` goes back, and ``to_strategy`` turns jax_privacy's
BandMF strategy (Toeplitz coefficients, a ``BandMFExecutionPlanConfig``, a
``ColumnNormalizedBanded`` or a dense C) into a jaxacct ``Strategy``. Whatever jaxacct would
account as a different mechanism is refused with ``jaxacct.InputError`` naming the object, the
field and the reason; nothing is approximated.

jax_privacy is imported on the first call (``pip install 'jaxacct[jax_privacy]'``), never at
import; versions outside the tested range 2.0.x are refused. Host code only: NumPy, no
device work.

Notation (the symbols of Dong & Ganesh (2026), D&G below; Ganesh (2025) writes n for the dataset
size):

=========================================  ==============================  ======================
jax_privacy 2.0                            jaxacct                         symbol, definition
=========================================  ==============================  ======================
``*.iterations``                           ``iterations``                  n, rounds (batches)
``CyclicPoissonSampling.sampling_prob``    ``CyclicPoisson.sampling_``     p, per round of the
                                           ``prob`` (``Poisson`` when      example's phase
                                           T = 1)                          (D&G §3)
``CyclicPoissonSampling.cycle_length``     ``CyclicPoisson.cycle_length``  T (D&G §3)
``CyclicPoissonSampling.partition_type``   ``CyclicPoisson.partition``     random phase per
``INDEPENDENT`` / ``EQUAL_SPLIT``          ``'independent'`` /             example / fixed,
                                           ``'equal_split'``               public equal groups
``BallsInBinsSampling.cycle_length``       ``BallsInBins.cycle_length``    T, one bin for the
                                                                           whole run (D&G §3)
``BMinSepSampling.sampling_prob``          ``BMinSep.sampling_prob``       p, given eligibility
``BMinSepSampling.min_sep``                ``BMinSep.min_sep``             b (D&G §4)
``BMinSepSampling.warm_start``             ``BMinSep.warm_start``          Alg. 2 (True) /
                                                                           Alg. 1 (False), D&G
``*.truncated_batch_size``                 ``truncated_batch_size``        B (Ganesh (2025);
                                                                           B_max in D&G App. D)
``batch_iterator(num_examples, ...)``      ``dataset_size`` (truncated     m, public under
                                           only: ``to_scheme(...,          truncation (zero-out
                                           dataset_size=num_examples)``)   adjacency)
BandMF coefficients (``BandMFExecution     ``BandedToeplitz.c_col``        c, the band of C's
PlanConfig.strategy``, ``toeplitz.                                         first column
optimize_banded_toeplitz``)                                                (D&G §2.3)
``len(strategy)`` (``num_bands``)          ``BandedToeplitz.num_bands``    m_c, "b-banded"
``ColumnNormalizedBanded``, ``column_      ``LowerTriangular.entries``     C, accounted by the
normalize=True``, a dense n×n C                                            r-min-sep bounds of
                                                                           D&G App. B
=========================================  ==============================  ======================

The BandMF strategies and the cyclic Poisson reduction are those of Choquette-Choo et al.,
"(Amplified) banded matrix factorization", NeurIPS 2023, arXiv 2306.08153.

The laws compared (jax_privacy 2.0.0's ``batch_iterator`` against jaxacct's scheme docstrings
and ``sampled_rounds``; ``tests/interop/test_jax_privacy.py`` checks them by χ² against the
exact laws):

- Poisson and cyclic Poisson: a Binomial(|group|, p) count of uniformly chosen group members
  is Poisson sampling (Lemma 1 of arXiv 2406.17298v3); ``INDEPENDENT`` draws the bins
  i.i.d. uniform (multinomial sizes of a random permutation). ``EQUAL_SPLIT`` gives every
  group exactly ⌊m/T⌋ examples and never samples the other m mod T; jaxacct's
  ``'equal_split'`` accounts a fixed, public phase (phase 0, the worst), which covers every
  sampled example, and a never-sampled example is trivially private.
- Balls-in-bins: one i.i.d. uniform bin per example for the whole run, as jaxacct's.
- b-min-sep: each example is drawn w.p. p in every round and dropped when it was drawn in the
  previous b − 1 rounds (Alg. 1); the warm start puts each example independently in one of
  the b − 1 past rounds w.p. p/(1 + (b − 1)p) each (Alg. 2), as jaxacct's.
- Truncation: jax_privacy keeps a uniformly random subset of B when a batch is larger (cyclic
  Poisson draws min(Binomial, B) uniform members, the same law); b-min-sep records the batch
  before truncation, so truncated-away examples stay blocked for b − 1 rounds: Dong & Ganesh
  (2026) App. D's model, as jaxacct's. jax_privacy does not pad (batches have at most B examples);
  padding is post-processing. With ``EQUAL_SPLIT`` every group has ⌊m/T⌋ examples, one of the
  sizes (⌊m/T⌋, ⌈m/T⌉) over which jaxacct's truncated cyclic accountant takes the worst. The
  semantics agree, so truncated strategies are mapped (with the dataset size made public).
- ``BMinSepSampling(min_sep=1, warm_start=True)`` fails in jax_privacy 2.0.0's
  ``batch_iterator`` (a multinomial over zero history slots); at b = 1 warm and cold start are
  the same law, so ``from_scheme`` returns the cold start there.

Refused: ``FixedBatchSampling`` (fixed-size uniform batches, replace-one adjacency with a public
dataset size; with ``replace=True`` an example can appear twice in a batch), and
``UserSelectionStrategy`` (user level, not jaxacct's multi-attribution Algorithm 3), any other
or subclassed strategy (its ``batch_iterator`` may differ), ``StreamingMatrix`` and
``BufferedToeplitz`` strategies (see ``to_strategy``).

Noise scale (for building a mechanism): jax_privacy's ``noise_multiplier`` σ_jp is relative to
the strategy's coefficient norm (``BandMFExecutionPlanConfig`` streams C⁻¹Z with stddev =
σ_jp · Δ · ‖strategy‖₂, Δ the clipped sum's sensitivity: the clip norm, or 1 with
``rescale_to_unit_norm``, doubled for replace-one), while jaxacct's ``noise_multiplier`` σ is
that of C·x + σZ at sensitivity 1 with C as given: with ``to_strategy(config)``'s C (either
``column_normalize``), σ = σ_jp · ‖config.strategy‖₂.

References:
  Andy Dong and Arun Ganesh, "Privacy Amplification for BandMF via b-Min-Sep Subsampling",
  arXiv:2602.09338 (v2): §2.3, §3, §4 (Algorithms 1 and 2), §6.1, Theorem 5.1, App. B, App. D
  (docs/references.md).
  Arun Ganesh, "Tighter Privacy Analysis for Truncated Poisson Sampling", arXiv:2508.15089:
  Def. 2.1 (zero-out adjacency), §3.1 (truncated cyclic Poisson) (docs/references.md).
  Christopher A. Choquette-Choo, Arun Ganesh, Ryan McKenna, H. Brendan McMahan, Keith Rush,
  Abhradeep Thakurta and Zheng Xu, "(Amplified) banded matrix factorization: a unified approach
  to private training", NeurIPS 2023, arXiv 2306.08153 (docs/references.md).
  jax_privacy 2.0.0 (google-deepmind/jax_privacy): ``batch_selection``, ``matrix_factorization``,
  ``experimental.execution_plan``, the source the mappings were checked against.
"""

from __future__ import annotations

import importlib
import numbers
from typing import Any

import jax
import numpy as np

from jaxacct import schemes
from jaxacct.errors import InputError, InputTypeError, MissingExtraError
from jaxacct.strategies.banded_toeplitz import BandedToeplitz
from jaxacct.strategies.lower_triangular import LowerTriangular
from jaxacct.strategy import Strategy

__all__ = ['from_scheme', 'to_scheme', 'to_strategy']

INSTALL = "pip install 'jaxacct[jax_privacy]'"
# The (major, minor) release whose source these mappings were checked against.
TESTED_RELEASE = (2, 0)


def _jax_privacy():
  """The ``jax_privacy`` module after checking that it is installed in the tested range."""
  try:
    module = importlib.import_module('jax_privacy')
  except ImportError as error:
    raise MissingExtraError(
        f'jaxacct.interop.jax_privacy needs jax_privacy {TESTED_RELEASE[0]}.{TESTED_RELEASE[1]}.x, '
        f'which is not installed: {INSTALL}') from error
  version = str(getattr(module, '__version__', 'unknown'))
  parts = version.split('.')
  release = tuple(int(part) for part in parts[:2] if part.isdigit())
  if release != TESTED_RELEASE:
    raise MissingExtraError(
        f'jaxacct.interop.jax_privacy is tested with jax_privacy '
        f'{TESTED_RELEASE[0]}.{TESTED_RELEASE[1]}.x, found jax_privacy {version}: its samplers\' '
        f'participation laws may differ, so they are not mapped; {INSTALL}')
  return module


def _rebuild(cls, source: Any, **fields):
  """``cls(**fields)``, a refusal by jaxacct's own checks re-raised naming ``source``."""
  try:
    return cls(**fields)
  except InputError as error:
    kind = InputTypeError if isinstance(error, TypeError) else InputError
    shown = ', '.join(f'{name}={value!r}' for name, value in fields.items())
    raise kind(f'{_name(source)} cannot be accounted as jaxacct.{cls.__name__}({shown}): '
               f'{error}') from error


def _name(source: Any) -> str:
  if isinstance(source, str):
    return source
  return f'jax_privacy {source!r}'


# ------------------------------------------------------------------------ batch selection
def _truncation(source, dataset_size) -> dict:
  """The truncation fields of a jaxacct scheme for a jax_privacy strategy."""
  size = getattr(source, 'truncated_batch_size', None)
  if size is None:
    if dataset_size is not None:
      raise InputError(
          'dataset_size is public information only for a truncated strategy (Ganesh (2025); '
          f'zero-out adjacency), but {_name(source)} does not truncate: leave dataset_size=None')
    return {}
  if dataset_size is None:
    raise InputError(
        f'{_name(source)} truncates batches to truncated_batch_size={size}: pass '
        'to_scheme(strategy, dataset_size=num_examples), the num_examples given to '
        "batch_iterator. jaxacct's truncated accountants depend on it, so it becomes public "
        'information and the guarantee is for zero-out adjacency')
  return {'truncated_batch_size': size, 'dataset_size': dataset_size}


def to_scheme(batch_selection_strategy, *, dataset_size: int | None = None
              ) -> schemes.SamplingScheme:
  """The jaxacct scheme with the participation law of a jax_privacy batch selection strategy.

  ``CyclicPoissonSampling`` → ``Poisson`` (cycle_length 1, either partition type: the
  same sampler) or ``CyclicPoisson`` (``INDEPENDENT`` → ``'independent'``, ``EQUAL_SPLIT``
  → ``'equal_split'``); ``BallsInBinsSampling`` → ``BallsInBins``; ``BMinSepSampling`` →
  ``BMinSep`` (cold or warm start). Truncated strategies need ``dataset_size``. The module
  docstring compares the laws field by field.

  Args:
    batch_selection_strategy: a jax_privacy 2.0 ``CyclicPoissonSampling``,
      ``BallsInBinsSampling`` or ``BMinSepSampling`` (exactly these classes).
    dataset_size: m, the ``num_examples`` given to ``batch_iterator``; required with
      ``truncated_batch_size`` (it is then public, zero-out adjacency), refused without.

  Returns:
    A frozen jaxacct scheme, equal (``==``) to the one built by hand from the same fields.

  Raises:
    InputError: a strategy jaxacct would account as a different mechanism (fixed-size or
      user-level batches, truncation with random group sizes, a subclass), or fields outside
      jaxacct's ranges (e.g. ``sampling_prob=0``, ``truncated_batch_size=0``), naming the
      strategy, the field and the reason.
    InputTypeError: not a jax_privacy batch selection strategy.
    MissingExtraError: jax_privacy is not installed in the tested range 2.0.x.

  References:
    Dong & Ganesh (2026) §4, Algorithms 1 and 2 (b-min-sep), §3 (cyclic Poisson,
    balls-in-bins), App. D (truncation); Ganesh (2025) §3.1 (truncated cyclic Poisson).
  """
  selection = _jax_privacy().batch_selection
  source = batch_selection_strategy
  kind = type(source)
  if kind is selection.CyclicPoissonSampling:
    fields = dict(sampling_prob=source.sampling_prob, iterations=source.iterations,
                  **_truncation(source, dataset_size))
    partitions = {selection.PartitionType.INDEPENDENT: 'independent',
                  selection.PartitionType.EQUAL_SPLIT: 'equal_split'}
    if source.partition_type not in partitions:
      raise InputError(f'{_name(source)}: partition_type must be PartitionType.INDEPENDENT or '
                       f'PartitionType.EQUAL_SPLIT, got {source.partition_type!r}')
    cycle = source.cycle_length
    if isinstance(cycle, numbers.Integral) and not isinstance(cycle, bool) and cycle == 1:
      # One group holding every example under both partition types: Poisson sampling.
      return _rebuild(schemes.Poisson, source, **fields)
    return _rebuild(schemes.CyclicPoisson, source, cycle_length=source.cycle_length,
                    partition=partitions[source.partition_type], **fields)
  if kind is selection.BallsInBinsSampling:
    _truncation(source, dataset_size)  # no truncation field: refuses a dataset_size
    return _rebuild(schemes.BallsInBins, source, iterations=source.iterations,
                    cycle_length=source.cycle_length)
  if kind is selection.BMinSepSampling:
    return _rebuild(schemes.BMinSep, source, sampling_prob=source.sampling_prob,
                    iterations=source.iterations, min_sep=source.min_sep,
                    warm_start=source.warm_start, **_truncation(source, dataset_size))
  if kind is selection.FixedBatchSampling:
    within, event = (
        ('with replacement within a batch, so an example can appear several times in one '
         'batch', 'SampledWithReplacementDpEvent') if source.replace else
        ('without replacement within a batch', 'SampledWithoutReplacementDpEvent'))
    raise InputError(
        f'{_name(source)} cannot be accounted by jaxacct: every round is a uniform draw of '
        f'batch_size examples ({within}), independently across rounds; it is analysed by '
        f"dp_accounting's {event} (replace-one adjacency, public dataset size), a mechanism no "
        'jaxacct scheme accounts. For fixed-size batches that jaxacct accounts, use '
        'CyclicPoissonSampling or BMinSepSampling with truncated_batch_size')
  if kind is selection.UserSelectionStrategy:
    raise InputError(
        f'{_name(source)} cannot be accounted by jaxacct: it samples users by its base_strategy '
        'and puts examples_per_user_per_batch of each sampled user in the batch, a user-level '
        "mechanism that is not jaxacct's MultiAttributionBMinSep (Dong & Ganesh (2026) §6.1, "
        'Algorithm 3, which excludes every example sharing a user with a recent sample). The law '
        "of one user's participation is that of base_strategy: to_scheme(strategy.base_strategy) "
        "accounts it when each user's examples in a batch are clipped together as one "
        'contribution')
  if isinstance(source, selection.BatchSelectionStrategy):
    raise InputError(
        f'{_name(source)} cannot be accounted by jaxacct: only the classes '
        'CyclicPoissonSampling, BallsInBinsSampling and BMinSepSampling of jax_privacy 2.0 are '
        f'mapped (exactly these: a subclass such as {kind.__name__} may override '
        'batch_iterator, so its participation law is unknown)')
  raise InputTypeError(
      'batch_selection_strategy must be a jax_privacy.batch_selection.CyclicPoissonSampling, '
      f'BallsInBinsSampling or BMinSepSampling, got {source!r}')


def from_scheme(scheme: schemes.SamplingScheme):
  """The jax_privacy 2.0 batch selection strategy with the participation law of ``scheme``.

  ``Poisson`` → ``CyclicPoissonSampling`` (cycle_length 1, default partition type);
  ``CyclicPoisson`` → ``CyclicPoissonSampling`` (``'independent'`` → ``INDEPENDENT``,
  ``'equal_split'`` → ``EQUAL_SPLIT``, which never samples the dataset_size mod T examples
  left over: covered by the equal-split accounting, see the module docstring);
  ``BallsInBins`` → ``BallsInBinsSampling``; ``BMinSep`` → ``BMinSepSampling`` (at
  min_sep = 1 always ``warm_start=False``: the same law, and jax_privacy 2.0.0 cannot run the
  warm start there). jax_privacy keeps the dataset size out of its strategies: for a
  truncated scheme call ``batch_iterator(scheme.dataset_size, rng)``.

  Args:
    scheme: a jaxacct ``Poisson``, ``CyclicPoisson``, ``BallsInBins`` or ``BMinSep``.

  Returns:
    A frozen jax_privacy strategy, equal (``==``) to the one built by hand from the same
    fields; ``to_scheme(from_scheme(s), dataset_size=s.dataset_size) == s`` except for the
    b = 1 warm start above.

  Raises:
    InputError: a scheme jax_privacy 2.0 has no sampler for (``MultiAttributionBMinSep``,
      user-registered families).
    InputTypeError: not a jaxacct scheme.
    MissingExtraError: jax_privacy is not installed in the tested range 2.0.x.

  References:
    Dong & Ganesh (2026) §3, §4 (Algorithms 1 and 2), App. D.
  """
  selection = _jax_privacy().batch_selection
  kind = type(scheme)
  truncated = getattr(scheme, 'truncated_batch_size', None)
  if kind is schemes.Poisson:
    return selection.CyclicPoissonSampling(sampling_prob=scheme.sampling_prob,
                                           iterations=scheme.iterations,
                                           truncated_batch_size=truncated)
  if kind is schemes.CyclicPoisson:
    partition = {'independent': selection.PartitionType.INDEPENDENT,
                 'equal_split': selection.PartitionType.EQUAL_SPLIT}[scheme.partition]
    return selection.CyclicPoissonSampling(sampling_prob=scheme.sampling_prob,
                                           iterations=scheme.iterations,
                                           truncated_batch_size=truncated,
                                           cycle_length=scheme.cycle_length,
                                           partition_type=partition)
  if kind is schemes.BallsInBins:
    return selection.BallsInBinsSampling(iterations=scheme.iterations,
                                         cycle_length=scheme.cycle_length)
  if kind is schemes.BMinSep:
    return selection.BMinSepSampling(sampling_prob=scheme.sampling_prob,
                                     iterations=scheme.iterations, min_sep=scheme.min_sep,
                                     warm_start=scheme.warm_start and scheme.min_sep > 1,
                                     truncated_batch_size=truncated)
  if kind is schemes.MultiAttributionBMinSep:
    raise InputError(
        f'{scheme!r} has no jax_privacy 2.0 sampler: multi-attribution b-min-sep (Dong & '
        'Ganesh (2026) §6.1, Algorithm 3) excludes every example sharing a user with an example '
        'sampled in the previous min_sep - 1 rounds; UserSelectionStrategy is a different '
        'mechanism')
  if isinstance(scheme, schemes.SamplingScheme):
    raise InputError(f'{kind.__name__} has no jax_privacy 2.0 counterpart; from_scheme maps '
                     'Poisson, CyclicPoisson, BallsInBins and BMinSep')
  raise InputTypeError(f'scheme must be a jaxacct scheme (Poisson, CyclicPoisson, BallsInBins, '
                       f'BMinSep), got {scheme!r}')


# ------------------------------------------------------------------------------ strategies
def _band(coefficients: np.ndarray) -> np.ndarray:
  """The coefficients without trailing zeros (the same C; jaxacct counts len(c_col) bands)."""
  nonzero = np.flatnonzero(coefficients)
  return coefficients[:nonzero[-1] + 1] if nonzero.size else coefficients


def _column_normalized(params: np.ndarray) -> np.ndarray:
  """C[j + k, j] = params[j, k] (k < bands, j + k < n), each column scaled to norm 1.

  jax_privacy's ``ColumnNormalizedBanded.materialize`` in float64 (its ``params`` hold the
  bands of column j in row j); also the C of ``inverse_as_streaming_matrix(coef,
  column_normalize_for_n=n)``, with params rows all equal to coef.
  """
  n, bands = params.shape
  entries = np.zeros((n, n))
  for k in range(min(bands, n)):
    column = np.arange(n - k)
    entries[column + k, column] = params[column, k]
  with np.errstate(divide='ignore', invalid='ignore'):  # a zero column: LowerTriangular refuses
    return entries / np.linalg.norm(entries, axis=0)


def _floats(name: str, values) -> np.ndarray:
  if isinstance(values, jax.core.Tracer):
    raise InputTypeError(f'{name} needs concrete values, got a tracer; call to_strategy outside '
                         'jit/vmap/grad')
  return np.asarray(values, dtype=np.float64)


def _strategy_of(source, jax_privacy) -> Strategy:
  factorization = jax_privacy.matrix_factorization
  plan_config = importlib.import_module(
      'jax_privacy.experimental.execution_plan').BandMFExecutionPlanConfig
  if isinstance(source, plan_config):
    coefficients = _floats('BandMFExecutionPlanConfig.strategy', source.strategy)
    name = 'jax_privacy BandMFExecutionPlanConfig.strategy'
    if source.column_normalize:
      # The plan's C⁻¹ is inverse_as_streaming_matrix(strategy, column_normalize_for_n=n).
      n = int(source.iterations)
      bands = np.broadcast_to(coefficients, (n, coefficients.size))  # every column's band
      return _rebuild(LowerTriangular, name + ' (column_normalize=True)',
                      entries=_column_normalized(bands))
    return _rebuild(BandedToeplitz, name, c_col=_band(coefficients))
  if isinstance(source, factorization.banded.ColumnNormalizedBanded):
    return _rebuild(LowerTriangular, 'jax_privacy ColumnNormalizedBanded',
                    entries=_column_normalized(_floats('ColumnNormalizedBanded.params',
                                                       source.params)))
  if isinstance(source, factorization.StreamingMatrix):
    raise InputError(
        'a jax_privacy StreamingMatrix cannot be mapped: it is an opaque pair of functions '
        '(in BandMF usually the noising matrix C⁻¹ given to matrix_factorization_privatizer), '
        'whose C could only be recovered by materialising and inverting it in floating point, '
        'not exactly. Pass the strategy itself: its Toeplitz coefficients (e.g. '
        'BandMFExecutionPlanConfig.strategy, or the coef given to inverse_as_streaming_matrix), '
        'the config, or C as a dense n×n array')
  if isinstance(source, factorization.buffered_toeplitz.BufferedToeplitz):
    raise InputError(
        'a jax_privacy BufferedToeplitz (BLT) C has columns that never end, so it has no band '
        'for the exact b-min-sep / cyclic Poisson analyses and its size n is not part of it: '
        'pass np.asarray(blt.materialize(n)) (a dense C, accounted by the App. B bounds of '
        'Dong & Ganesh (2026) App. B) or blt.toeplitz_coefs(n) (n bands)')
  if isinstance(source, Strategy):
    raise InputTypeError(f'{type(source).__name__} is already a jaxacct strategy')
  if isinstance(source, (np.ndarray, jax.Array, list, tuple)):
    array = _floats('strategy', source)
    if array.ndim == 1:
      return _rebuild(BandedToeplitz, 'the Toeplitz coefficients', c_col=_band(array))
    if array.ndim == 2:
      return _rebuild(LowerTriangular, 'the dense strategy matrix', entries=array)
    raise InputError(f'strategy must be 1-D Toeplitz coefficients or a 2-D n×n matrix C, got an '
                     f'array of shape {array.shape}')
  raise InputTypeError(
      'strategy must be Toeplitz coefficients (1-D array), a dense C (2-D array), a jax_privacy '
      f'BandMFExecutionPlanConfig or ColumnNormalizedBanded, got {source!r}')


def to_strategy(strategy, *, scheme=None) -> Strategy:
  """The jaxacct strategy matrix C of a jax_privacy BandMF strategy.

  - Toeplitz coefficients (1-D array: jax_privacy's BandMF ``strategy`` /
    ``optimize_banded_toeplitz`` output, the coefficients of C's first column) →
    ``BandedToeplitz(c_col)`` (trailing zeros dropped: the same C);
  - ``BandMFExecutionPlanConfig`` → ``BandedToeplitz(config.strategy)``, or with
    ``column_normalize=True`` the plan's column-normalised n×n C as ``LowerTriangular``;
  - ``ColumnNormalizedBanded`` (a banded C that is not Toeplitz) and a dense n×n C (2-D
    array) → ``LowerTriangular`` (Dong & Ganesh (2026) App. B bounds; exact for balls-in-bins).

  A ``StreamingMatrix`` (opaque, usually the noising matrix C⁻¹) and a ``BufferedToeplitz``
  are refused with what to pass instead. Always pass C, never the noising matrix C⁻¹.

  Args:
    strategy: one of the above.
    scheme: optional jaxacct scheme, or a jax_privacy batch selection strategy (converted by
      ``to_scheme``): C is checked by ``Strategy.check_scheme``, the rule every
      ``MatrixMechanism`` applies (e.g. a banded C needs at most min_sep or cycle_length
      bands for the exact b-min-sep and cyclic Poisson analyses).

  Returns:
    ``jaxacct.BandedToeplitz`` or ``jaxacct.LowerTriangular``.

  Raises:
    InputError: negative, non-finite or singular C, a strategy that cannot be mapped exactly,
      or C that ``scheme`` cannot be accounted with, naming the reason.
    InputTypeError: an object of another kind, or traced values.
    MissingExtraError: jax_privacy is not installed in the tested range 2.0.x.

  References:
    Choquette-Choo et al., "(Amplified) banded matrix factorization", NeurIPS 2023, arXiv
    2306.08153 (banded Toeplitz BandMF; Alg. 9 streams C⁻¹); Dong & Ganesh (2026) §2.3
    (b-banded C), Theorem 5.1 (len(c) ≤ b), App. B (non-banded C).
  """
  jax_privacy = _jax_privacy()
  result = _strategy_of(strategy, jax_privacy)
  if scheme is not None:
    accounted = scheme if isinstance(scheme, schemes.SamplingScheme) else to_scheme(scheme)
    try:
      result.check_scheme(accounted)
    except InputError as error:
      kind = InputTypeError if isinstance(error, TypeError) else InputError
      raise kind(f'to_strategy: C ({result.summary}) cannot be accounted with scheme '
                 f'{accounted.summary()}: {error}') from error
  return result
