"""jax_privacy 2.0's batch selection strategies and BandMF strategies as jaxacct objects.

``to_scheme`` turns a jax_privacy ``BatchSelectionStrategy`` into the jaxacct scheme with the
same participation law, ``from_scheme`` goes back, and ``to_strategy`` turns jax_privacy's
BandMF strategy (Toeplitz coefficients, a ``BandMFExecutionPlanConfig``, a
``ColumnNormalizedBanded`` or a dense C) into a jaxacct ``Strategy``. Whatever jaxacct would
account as a different mechanism is refused with ``jaxacct.InputError`` naming the object, the
field and the reason; nothing is approximated.

``calibrated_plan`` builds a jax_privacy ``DPExecutionPlan`` from jax_privacy's own pieces
(the caller's batch selection strategy, ``clipping.clipped_grad``,
``noise_addition.matrix_factorization_privatizer`` with C⁻¹ and stddev σ·Δ) with jaxacct's σ,
a ``JaxacctVerifiedEvent`` as its ``dp_event`` (which dp_accounting refuses to compose: it
records jaxacct's statement without claiming a dp_accounting analysis), and jax_privacy's own
σ side by side where jax_privacy has an accountant for the configuration.

jax_privacy is imported on the first call (the ``jaxprivacy`` extra: ``pip install
'jax-privacy>=2.0,<2.1'``), never at import; versions outside the tested range 2.0.x are
refused. Host code only: NumPy, no device work.

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

import copy
import dataclasses
import functools
import importlib
import math
import numbers
from typing import Any

import jax
import numpy as np

from jaxacct import _validate, schemes
from jaxacct import accounting as accounting_lib
from jaxacct._version import __version__ as _JAXACCT_VERSION
from jaxacct.conventions import Adjacency
from jaxacct.guarantee import Guarantee
from jaxacct import options as options_lib
from jaxacct.montecarlo.engine import keys as keys_lib
from jaxacct.options import RunOptions
from jaxacct.errors import InputError, InputTypeError, MissingExtraError
from jaxacct.strategies.banded_toeplitz import BandedToeplitz
from jaxacct.strategies.lower_triangular import LowerTriangular
from jaxacct.schemes.participation import Cyclic, FixedBins, MinSepChain, UserLevel
from jaxacct.strategy import Strategy

__all__ = ['CalibratedPlan', 'JaxacctVerifiedEvent', 'PlanComparison', 'calibrated_plan',
           'from_scheme', 'to_scheme', 'to_strategy']

# What installs the `jaxprivacy` extra: the requirement itself, which works with any install of
# jaxacct, or the extra from a clone (jaxacct is not on the package index).
INSTALL = ("pip install 'jax-privacy>=2.0,<2.1' (the jaxprivacy extra; in a jaxacct clone: "
           "pip install -e '.[jaxprivacy]')")
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

  Chosen by the scheme's participation model (``scheme.participation``), not its family:
  the b-min-sep chain with b = 1 (``Poisson``, and ``BMinSep(min_sep=1)``, the same law) →
  ``CyclicPoissonSampling`` (cycle_length 1, default partition type); ``Cyclic``
  (``CyclicPoisson``) → ``CyclicPoissonSampling`` (``'independent'`` → ``INDEPENDENT``,
  ``'equal_split'`` → ``EQUAL_SPLIT``, which never samples the dataset_size mod T examples
  left over: covered by the equal-split accounting, see the module docstring);
  ``FixedBins`` (``BallsInBins``) → ``BallsInBinsSampling``; the chain with b > 1
  (``BMinSep``) → ``BMinSepSampling``. jax_privacy keeps the dataset size out of its
  strategies: for a truncated scheme call ``batch_iterator(scheme.dataset_size, rng)``.

  Args:
    scheme: a jaxacct ``Poisson``, ``CyclicPoisson``, ``BallsInBins`` or ``BMinSep``.

  Returns:
    A frozen jax_privacy strategy, equal (``==``) to the one built by hand from the same
    fields; ``to_scheme(from_scheme(s), dataset_size=s.dataset_size) == s`` except that
    ``BMinSep(min_sep=1)`` comes back as the equal ``Poisson``.

  Raises:
    InputError: a scheme jax_privacy 2.0 has no sampler for (``MultiAttributionBMinSep``,
      user-registered families).
    InputTypeError: not a jaxacct scheme.
    MissingExtraError: jax_privacy is not installed in the tested range 2.0.x.

  References:
    Dong & Ganesh (2026) §3, §4 (Algorithms 1 and 2), App. D.
  """
  selection = _jax_privacy().batch_selection
  if not isinstance(scheme, schemes.SamplingScheme):
    raise InputTypeError(f'scheme must be a jaxacct scheme (Poisson, CyclicPoisson, BallsInBins, '
                         f'BMinSep), got {scheme!r}')
  participation = scheme.participation
  iterations = participation.iterations
  truncated = None if participation.truncation is None else participation.truncation.batch_size
  match participation.model:
    case MinSepChain(sampling_prob=p, min_sep=1):
      return selection.CyclicPoissonSampling(sampling_prob=p, iterations=iterations,
                                             truncated_batch_size=truncated)
    case MinSepChain(sampling_prob=p, min_sep=b, warm_start=warm):
      return selection.BMinSepSampling(sampling_prob=p, iterations=iterations, min_sep=b,
                                       warm_start=warm, truncated_batch_size=truncated)
    case Cyclic(sampling_prob=p, cycle_length=t, partition=partition):
      partition_type = {'independent': selection.PartitionType.INDEPENDENT,
                        'equal_split': selection.PartitionType.EQUAL_SPLIT}[partition]
      return selection.CyclicPoissonSampling(sampling_prob=p, iterations=iterations,
                                             truncated_batch_size=truncated, cycle_length=t,
                                             partition_type=partition_type)
    case FixedBins(cycle_length=t):
      return selection.BallsInBinsSampling(iterations=iterations, cycle_length=t)
    case UserLevel():
      raise InputError(
          f'{scheme!r} has no jax_privacy 2.0 sampler: multi-attribution b-min-sep (Dong & '
          'Ganesh (2026) §6.1, Algorithm 3) excludes every example sharing a user with an '
          'example sampled in the previous min_sep - 1 rounds; UserSelectionStrategy is a '
          'different mechanism')
  raise InputError(f'{type(scheme).__name__} has no jax_privacy 2.0 counterpart; from_scheme maps '
                   'Poisson, CyclicPoisson, BallsInBins and BMinSep')


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


# ------------------------------------------------------------------ calibrated plans (item 2)
# jaxacct's adjacency → jax_privacy's neighbouring relation with the same unit of contribution:
# the clipped sum moves by at most one clipped gradient (jax_privacy's sensitivity is the clip
# bound for both). ``replace_one`` is not mapped: jax_privacy doubles Δ for REPLACE_ONE, while
# jaxacct's replace-one analyses already compare a +1 with a −1 contribution of unit norm (e.g.
# ``deterministic/truncated_poisson.py``), so the plan's noise would be twice what jaxacct's σ
# says; refused rather than silently over- or under-noised.
_RELATIONS = {Adjacency.ZERO_OUT.value: 'REPLACE_SPECIAL',
              Adjacency.ADD_REMOVE.value: 'ADD_OR_REMOVE_ONE'}
# BandMFExecutionPlanConfig's defaults for the clipped sum (jax_privacy 2.0.0).
_CLIP_DEFAULTS = {'l2_clip_norm': 1.0, 'rescale_to_unit_norm': True, 'normalize_by': 1.0,
                  'dtype': np.float32}


@functools.cache
def _event_class():
  """``JaxacctVerifiedEvent``, built on first use (dp_accounting is imported lazily)."""
  attr = importlib.import_module('attr')
  dp_event = importlib.import_module('dp_accounting.dp_event')

  @attr.s(frozen=True, slots=True, auto_attribs=True)
  class JaxacctVerifiedEvent(dp_event.UnsupportedDpEvent):
    """A correlated-noise (matrix mechanism) run accounted by jaxacct, not by dp_accounting.

    The ``dp_event`` of ``calibrated_plan``'s plan. It records what jaxacct proved, so a
    pipeline that reads ``plan.dp_event`` sees the statement and where it came from, and it
    claims no analysis it did not get: it subclasses ``dp_accounting.UnsupportedDpEvent``, so
    dp_accounting's accountants (``PLDAccountant``, ``RDPAccountant``, any that follows the
    ``DpEvent`` contract) return ``supports(event) == False`` and ``compose(event)`` raises
    ``dp_accounting.UnsupportedEventError``, alone or inside a ``ComposedDpEvent`` /
    ``SelfComposedDpEvent``. Composing it with other mechanisms needs jaxacct (or a user's own
    argument), never a dp_accounting ledger that would silently treat it as free or as
    something else.

    Attributes:
      noise_multiplier: jaxacct's σ of y = C·x + σ·z (per-example contribution of norm ≤ 1,
        C as given, not normalised): the plan adds C⁻¹Z with stddev σ·Δ, Δ the clipped sum's
        sensitivity.
      epsilon, delta: the guarantee (δ the overall δ for verified Monte Carlo).
      method: ``Guarantee.method`` (``"verified_mc"``, ``"deterministic"``, ``"fallback"``).
      accountant: the deterministic accountant that proved it, or ``"monte_carlo"`` for a
        verified Monte Carlo statement (Dong & Ganesh (2026) App. A, Estimate-Verify-Release).
      adjacency: jaxacct's neighbouring relation (``"zero_out"`` or ``"add_remove"``).
      num_samples: Monte Carlo samples per direction behind it (0 if deterministic).
      scheme: the jaxacct scheme (``repr``), the batch selection's participation law.
      strategy: the jaxacct strategy (its summary and fingerprint).
      jaxacct_version: the jaxacct release that produced it.
    """

    noise_multiplier: float
    epsilon: float
    delta: float
    method: str
    accountant: str
    adjacency: str
    num_samples: int
    scheme: str
    strategy: str
    jaxacct_version: str

  JaxacctVerifiedEvent.__module__ = __name__
  JaxacctVerifiedEvent.__qualname__ = 'JaxacctVerifiedEvent'
  return JaxacctVerifiedEvent


def __getattr__(name: str):
  """``JaxacctVerifiedEvent`` is created on first access (it subclasses a dp_accounting class,
  and dp_accounting is imported lazily)."""
  if name == 'JaxacctVerifiedEvent':
    return _event_class()
  raise AttributeError(f'module {__name__!r} has no attribute {name!r}')


@dataclasses.dataclass(frozen=True)
class PlanComparison:
  """σ of the same configuration by jaxacct and by jax_privacy's own accountant.

  Both σ are in jaxacct's units (the plan's stddev divided by the sensitivity Δ), so they
  compare directly: the smaller σ adds less noise for the same (ε, δ).

  Attributes:
    jaxacct_sigma: jaxacct's σ (``CalibratedPlan.guarantee.noise_multiplier``).
    jaxacct_accountant: what gave it (``"monte_carlo"`` or a deterministic accountant).
    jax_privacy_sigma: the σ the plan of ``BandMFExecutionPlanConfig(..., epsilon, delta)``
      would add (σ_jp · ‖strategy‖₂, see the module docstring), or None.
    jax_privacy_noise_multiplier: σ_jp itself (jax_privacy's, relative to ‖strategy‖₂), or None.
    jax_privacy_accountant: the dp_accounting accountant and event it calibrated with, or None.
    reason: why there is no jax_privacy σ (None when there is).
  """

  jaxacct_sigma: float
  jaxacct_accountant: str
  jax_privacy_sigma: float | None = None
  jax_privacy_noise_multiplier: float | None = None
  jax_privacy_accountant: str | None = None
  reason: str | None = None

  @property
  def ratio(self) -> float | None:
    """jaxacct's σ / jax_privacy's σ (< 1: jaxacct adds less noise), or None."""
    return None if self.jax_privacy_sigma is None else self.jaxacct_sigma / self.jax_privacy_sigma


@dataclasses.dataclass(frozen=True)
class CalibratedPlan:
  """A jax_privacy ``DPExecutionPlan`` whose noise jaxacct calibrated (``calibrated_plan``).

  Attributes:
    plan: the ``DPExecutionPlan`` (the caller's batch selection strategy, jax_privacy's
      ``clipped_grad``, ``matrix_factorization_privatizer`` with C⁻¹ and stddev σ·Δ, and a
      ``JaxacctVerifiedEvent``).
    guarantee: jaxacct's ``Guarantee`` (``noise_multiplier`` is σ).
    comparison: ``PlanComparison`` with jax_privacy's own σ where it has an accountant, or
      None when not asked (``compare=False``).
    scheme, strategy: the jaxacct scheme and strategy that were accounted.
    sensitivity: Δ, the clipped sum's L2 sensitivity as jax_privacy computes it.
    noise_stddev: the privatizer's stddev, σ·Δ.
    calibration: ``jaxacct.calibrate``'s ``Calibration`` (its ``choice`` says which accountant
      answered and why; the Monte Carlo search record, or the deterministic curve at σ).
  """

  plan: Any
  guarantee: Guarantee
  comparison: PlanComparison | None
  scheme: schemes.SamplingScheme
  strategy: Strategy
  sensitivity: float
  noise_stddev: float
  calibration: Any = None

  def summary(self) -> str:
    """A few lines for a person (library code does not print; a script can)."""
    g = self.guarantee
    how = g.accountant if g.accountant else 'monte_carlo'
    lines = [
        f'jaxacct calibrated plan: ({g.epsilon:.6g}, {g.delta:.4g})-DP, {g.adjacency} adjacency',
        f'  scheme:   {self.scheme.summary()}',
        f'  strategy: {self.strategy.summary}',
        f'  sigma = {g.noise_multiplier:.6g} by {how} ({g.method}'
        + (f', {g.num_samples:,} samples per direction' if g.num_samples else '') + ')',
        f'  noise stddev = sigma * sensitivity = {g.noise_multiplier:.6g} * '
        f'{self.sensitivity:.6g} = {self.noise_stddev:.6g}']
    c = self.comparison
    if c is not None:
      if c.jax_privacy_sigma is None:
        lines.append(f'  jax_privacy: no accountant for this configuration ({c.reason})')
      else:
        lines.append(f'  jax_privacy: sigma = {c.jax_privacy_sigma:.6g} by '
                     f'{c.jax_privacy_accountant}; jaxacct/jax_privacy = {c.ratio:.4f}')
    return '\n'.join(lines)

  def __str__(self) -> str:
    return self.summary()


def _target(epsilon, delta) -> tuple[float, float]:
  epsilon = _validate.real_number('epsilon', epsilon)
  if not (math.isfinite(epsilon) and epsilon > 0.0):
    raise InputError(f'epsilon must be finite and > 0, got {epsilon}')
  delta = _validate.real_number('delta', delta)
  if not (math.isfinite(delta) and 0.0 < delta < 1.0):
    raise InputError(f'delta must be in (0, 1), got {delta}')
  return epsilon, delta


def _noising(source, accounted: Strategy, iterations: int, jax_privacy):
  """(noising matrix C⁻¹ for ``matrix_factorization_privatizer``, Toeplitz coefficients as
  jax_privacy's BandMF config would hold them or None, column_normalize)."""
  factorization = jax_privacy.matrix_factorization
  toeplitz = factorization.toeplitz
  plan_config = importlib.import_module(
      'jax_privacy.experimental.execution_plan').BandMFExecutionPlanConfig
  if isinstance(source, plan_config):
    if int(source.iterations) != iterations:
      raise InputError(
          f'strategy: the BandMFExecutionPlanConfig has iterations={source.iterations}, the '
          f'batch_selection_strategy {iterations}; they must be equal')
    given = _floats('BandMFExecutionPlanConfig.strategy', source.strategy)
    band = _band(given)
    normalize = iterations if source.column_normalize else None
    # The plan's own construction (BandMFExecutionPlanConfig.plan).
    return (toeplitz.inverse_as_streaming_matrix(band, normalize), given,
            bool(source.column_normalize))
  if isinstance(source, factorization.banded.ColumnNormalizedBanded):
    params = _floats('ColumnNormalizedBanded.params', source.params)
    n, bands = params.shape
    outside = np.add.outer(np.arange(n), np.arange(bands)) >= n
    if np.any(params[outside] != 0):
      raise InputError(
          'strategy: this ColumnNormalizedBanded has nonzero params outside the n×n matrix '
          '(params[j, k] with j + k >= n); its inverse_as_streaming_matrix normalises by column '
          'norms that include them, so it is not the inverse of the C that materialize() gives '
          "and jaxacct accounts. Zero them (as from_banded_toeplitz does) or pass "
          'np.asarray(strategy.materialize())')
    return source.inverse_as_streaming_matrix(), None, False
  band = accounted.banded_coefficients()
  if band is not None:
    given = _floats('strategy', source)
    return toeplitz.inverse_as_streaming_matrix(band), given, False
  # A dense C: the dense privatizer with C⁻¹ (lower triangular, solved in float64).
  entries = np.asarray(accounted.materialize(iterations), dtype=np.float64)
  scipy_linalg = importlib.import_module('scipy.linalg')
  inverse = scipy_linalg.solve_triangular(entries, np.eye(iterations), lower=True)
  return inverse, None, False


def _relation(adjacency: str):
  dp_accounting = importlib.import_module('dp_accounting')
  if adjacency not in _RELATIONS:
    raise InputError(
        f'adjacency: calibrated_plan maps "zero_out" (jax_privacy REPLACE_SPECIAL) and '
        f'"add_remove" (ADD_OR_REMOVE_ONE), got {adjacency!r}. "replace_one" is not mapped: '
        "jax_privacy doubles the sensitivity for REPLACE_ONE while jaxacct's replace-one "
        'analyses already compare a +1 with a −1 unit contribution, so the noise would be '
        'counted twice')
  return getattr(dp_accounting.NeighboringRelation, _RELATIONS[adjacency])


def _no_comparison(sigma: float, name: str, reason: str) -> PlanComparison:
  return PlanComparison(jaxacct_sigma=sigma, jaxacct_accountant=name, reason=reason)


def _comparison(source, coefficients, column_normalize, *, sigma, name, epsilon, delta,
                adjacency, dataset_size, jax_privacy) -> PlanComparison:
  """jax_privacy's own σ for the configuration, by the route of
  ``BandMFExecutionPlanConfig.plan`` with public functions: its event
  (``experimental.accounting.amplified_bandmf_event`` or the truncated one) calibrated by
  ``dp_accounting.calibrate_dp_mechanism`` with the config's default accountant, a
  ``PLDAccountant`` with the neighbouring relation of ``adjacency``."""
  selection = jax_privacy.batch_selection
  kind = type(source)
  if kind is selection.BMinSepSampling:
    return _no_comparison(sigma, name, 'jax_privacy 2.0 has no accountant for b-min-sep '
                          'sampling (no DpEvent for it; Dong & Ganesh (2026))')
  if kind is selection.BallsInBinsSampling:
    return _no_comparison(sigma, name, 'jax_privacy 2.0 has no accountant for balls-in-bins '
                          'sampling (no DpEvent for it)')
  if coefficients is None:
    return _no_comparison(sigma, name, 'jax_privacy 2.0 accounts BandMF only through '
                          'BandMFExecutionPlanConfig, whose strategy is Toeplitz coefficients, '
                          'not a dense or ColumnNormalizedBanded C')
  bands = int(coefficients.size)
  if source.cycle_length != bands:
    return _no_comparison(
        sigma, name, f"jax_privacy's BandMFExecutionPlanConfig samples with cycle_length = "
        f'len(strategy) = {bands}, this batch_selection_strategy has cycle_length '
        f'{source.cycle_length}')
  dp_accounting = importlib.import_module('dp_accounting')
  execution_plan = importlib.import_module('jax_privacy.experimental.execution_plan')
  events = importlib.import_module('jax_privacy.experimental.accounting')
  accountant = dp_accounting.pld.PLDAccountant(_relation(adjacency))
  truncated = source.truncated_batch_size
  try:  # the config's own checks (adjacency vs partition and truncation, band vs iterations)
    execution_plan.BandMFExecutionPlanConfig(
        iterations=source.iterations, strategy=coefficients, epsilon=None, delta=None,
        noise_multiplier=1.0, sampling_prob=source.sampling_prob,
        truncated_batch_size=truncated, num_examples=dataset_size,
        partition_type=source.partition_type, column_normalize=column_normalize,
        accountant=accountant)
  except (ValueError, TypeError) as error:
    return _no_comparison(sigma, name, f'BandMFExecutionPlanConfig refuses it: {error}')
  if truncated:
    # As BandMFExecutionPlanConfig._get_dp_event: the groups of EQUAL_SPLIT hold ⌊m/T⌋.
    event_name = 'truncated_amplified_bandmf_event'
    make_event = functools.partial(
        events.truncated_amplified_bandmf_event, iterations=source.iterations,
        num_bands=bands, largest_group_size=dataset_size // bands,
        sampling_prob=source.sampling_prob, truncated_batch_size=truncated)
  else:
    event_name = 'amplified_bandmf_event'
    make_event = functools.partial(events.amplified_bandmf_event, iterations=source.iterations,
                                   num_bands=bands, sampling_prob=source.sampling_prob)
  try:
    noise_multiplier = float(dp_accounting.calibrate_dp_mechanism(
        make_fresh_accountant=functools.partial(copy.deepcopy, accountant),
        make_event_from_param=lambda s: make_event(noise_multiplier=s),
        target_epsilon=epsilon, target_delta=delta))
  except Exception as error:  # dp_accounting's search failures: report, do not fail the plan
    return _no_comparison(sigma, name, f'dp_accounting.calibrate_dp_mechanism failed: {error}')
  return PlanComparison(
      jaxacct_sigma=sigma, jaxacct_accountant=name,
      jax_privacy_sigma=noise_multiplier * float(np.linalg.norm(coefficients)),
      jax_privacy_noise_multiplier=noise_multiplier,
      jax_privacy_accountant=f'dp_accounting PLDAccountant({_RELATIONS[adjacency]}) on '
                             f'jax_privacy {event_name}')


@dataclasses.dataclass(frozen=True, kw_only=True)
class PlanOptions:
  """How ``calibrated_plan`` builds the plan's clipped sum, and whether it compares σ.

  Attributes:
    l2_clip_norm, rescale_to_unit_norm, normalize_by, dtype: of ``clipped_grad`` (and dtype of
      the privatizer); None: the config's when ``strategy`` is a config, else jax_privacy's
      defaults (1.0, True, 1.0, float32).
    compare: also calibrate jax_privacy's own σ for the configuration where it has an
      accountant (``PlanComparison``).
  """

  l2_clip_norm: float | None = None
  rescale_to_unit_norm: bool | None = None
  normalize_by: float | None = None
  dtype: Any = None
  compare: bool = True

  def __post_init__(self):
    if not isinstance(self.compare, bool):
      raise InputTypeError(f'compare must be True or False, got {self.compare!r}')


# What calibrated_plan forwards to jaxacct.calibrate, verbatim.
_REQUEST = ('accountant', 'adjacency', 'accountant_options', 'monte_carlo', 'run')


def _check_request(request: dict) -> None:
  """Refuses a keyword ``calibrated_plan`` does not forward, naming where it went (CHANGELOG
  0.2.0): ``PlanOptions``, ``MonteCarloOptions``, ``RunOptions`` or ``accountant_options``."""
  plan_fields = {f.name for f in dataclasses.fields(PlanOptions)}
  monte_carlo = {f.name for f in dataclasses.fields(options_lib.MonteCarloOptions)}
  run = {f.name for f in dataclasses.fields(RunOptions)}
  for name in request:
    if name in _REQUEST:
      continue
    place = (f'plan=jaxacct.interop.jax_privacy.PlanOptions({name}=...)' if name in plan_fields
             else f'monte_carlo=jaxacct.MonteCarloOptions({name}=...)' if name in monte_carlo
             else f'run=jaxacct.RunOptions({name}=...)' if name in run
             else f'accountant_options={{{name!r}: ...}}')
    raise InputTypeError(f'calibrated_plan: {name}= moved to {place} (CHANGELOG 0.2.0)')


def calibrated_plan(*, batch_selection_strategy, strategy, epsilon, delta,
                    noise_seed: int | None = None, key=None, dataset_size: int | None = None,
                    plan: PlanOptions | None = None, **request) -> CalibratedPlan:
  """A jax_privacy ``DPExecutionPlan`` whose noise multiplier jaxacct calibrated at (ε, δ).

  σ is jaxacct's, chosen as ``jaxacct.account`` and configs choose (``accountant="auto"``:
  the tightest deterministic accountant where one supersedes Monte Carlo for the mechanism,
  e.g. balls-in-bins and truncated (cyclic) Poisson; verified Monte Carlo by
  ``calibrate_noise_multiplier`` otherwise, e.g. b-min-sep and untruncated cyclic Poisson).
  The plan is jax_privacy's own pieces:

  - ``batch_selection_strategy``: the caller's object, unchanged;
  - ``clipped_grad``: ``clipping.clipped_grad`` with ``l2_clip_norm``, ``normalize_by``,
    ``rescale_to_unit_norm`` and ``dtype`` bound, as ``BandMFExecutionPlanConfig.plan``
    builds it (same defaults: 1.0, 1.0, True, float32);
  - ``noise_addition_transform``: ``noise_addition.matrix_factorization_privatizer`` with
    the noising matrix C⁻¹ (banded Toeplitz: ``toeplitz.inverse_as_streaming_matrix(c)``; a
    ``BandMFExecutionPlanConfig``: the same with its ``column_normalize``; a
    ``ColumnNormalizedBanded``: its ``inverse_as_streaming_matrix()``; a dense C: the dense
    privatizer with C⁻¹ solved in float64), ``stddev = σ · Δ`` and ``prng_key=noise_seed``.
    Δ is ``clipped_grad(...).sensitivity(relation)`` as jax_privacy computes it, with the
    relation of ``adjacency`` (zero_out ↔ ``REPLACE_SPECIAL``, add_remove ↔
    ``ADD_OR_REMOVE_ONE``; both Δ = the clipped gradient's bound / normalize_by). The noise
    scale: jaxacct's σ is that of y = C·x + σ·z with per-example contributions of norm ≤ 1 and
    C not normalised; the streamed noise C⁻¹·(σΔ·Z) added to the clipped sums Δ·x gives
    Δ·(x + σ·C⁻¹Z), whose post-processing C·(…) is Δ·(C·x + σ·Z): the mechanism jaxacct
    accounted, scaled by Δ. (jax_privacy's own plans use σ_jp·Δ·‖strategy‖₂, σ_jp relative to
    the coefficient norm: σ = σ_jp·‖strategy‖₂.)
  - ``dp_event``: a ``JaxacctVerifiedEvent`` recording σ, (ε, δ), method, accountant, scheme,
    strategy and jaxacct's version; dp_accounting's accountants refuse it (``supports`` is
    False, ``compose`` raises ``UnsupportedEventError``), so no dp_accounting ledger counts it
    as an analysis it did not do.

  Args:
    batch_selection_strategy: a jax_privacy ``CyclicPoissonSampling``,
      ``BallsInBinsSampling`` or ``BMinSepSampling`` (``to_scheme``).
    strategy: the BandMF strategy C (anything ``to_strategy`` takes: Toeplitz coefficients, a
      ``BandMFExecutionPlanConfig`` (its strategy, column_normalize and clipping fields; its
      iterations must equal the batch strategy's), a ``ColumnNormalizedBanded``, a dense C).
      Checked against the scheme (``to_strategy(..., scheme=)``): e.g. at most min_sep or
      cycle_length bands.
    epsilon: target ε (finite, > 0). delta: target δ ∈ (0, 1) (the overall δ for Monte Carlo).
    noise_seed: the privatizer's seed, an integer in [0, 2**32) (required; a config's
      ``noise_seed`` when ``strategy`` is a config and this is None). Never an unseeded key.
    key: a typed JAX key or an integer seed for the Monte Carlo calibration; required when
      Monte Carlo runs, unused otherwise. Never a default.
    dataset_size: the ``num_examples`` of ``batch_iterator``; required for truncated
      strategies (public then, as in ``to_scheme``).
    plan: ``PlanOptions`` (the clipped sum's fields and ``compare``).
    **request: forwarded verbatim to ``jaxacct.calibrate``, which chooses and runs the
      calibration: ``accountant`` (``"auto"`` default, ``"monte_carlo"`` or a deterministic
      accountant's name), ``adjacency`` (``"zero_out"`` default or ``"add_remove"``;
      ``"replace_one"`` is refused here: the factor 2 is counted differently),
      ``accountant_options`` (e.g. ``{'tolerance': 1e-7}``), ``monte_carlo``
      (``MonteCarloOptions``) and ``run`` (``RunOptions``). Any other keyword is refused naming
      its new place.

  Returns:
    ``CalibratedPlan`` (``.plan``, ``.guarantee``, ``.comparison``, ``.summary()``).

  Raises:
    InputError: naming the argument: ε or δ out of range, no ``key`` when Monte Carlo runs, no
      or a bad ``noise_seed``, a strategy the scheme's analysis does not allow, an unmapped
      batch strategy or adjacency, options of the wrong calibration.
    InputTypeError: arguments of the wrong kind.
    MissingExtraError: jax_privacy is not installed in the tested range 2.0.x.
    NotVerifiedError / CalibrationError: as ``calibrate_noise_multiplier``.

  References:
    Dong & Ganesh (2026) App. A (Estimate-Verify-Release); Choquette-Choo et al., NeurIPS
    2023, arXiv 2306.08153 (BandMF, Alg. 9 streams C⁻¹); jax_privacy 2.0.0
    ``experimental.execution_plan.BandMFExecutionPlanConfig.plan`` (the construction followed).
  """
  _check_request(request)
  plan = PlanOptions() if plan is None else plan
  if not isinstance(plan, PlanOptions):
    raise InputTypeError(f'plan must be a jaxacct.interop.jax_privacy.PlanOptions, got {plan!r}')
  jax_privacy = _jax_privacy()
  epsilon, delta = _target(epsilon, delta)
  accountant = request.get('accountant', accounting_lib.AUTO)
  adjacency = request.get('adjacency', Adjacency.ZERO_OUT.value)
  if accountant not in accounting_lib.accountant_choices():
    raise InputError(f'accountant must be one of '
                     f'{", ".join(accounting_lib.accountant_choices())}, got {accountant!r}')
  relation = _relation(adjacency)
  plan_config = importlib.import_module(
      'jax_privacy.experimental.execution_plan').BandMFExecutionPlanConfig
  config = strategy if isinstance(strategy, plan_config) else None
  if noise_seed is None and config is not None:
    noise_seed = config.noise_seed
  if noise_seed is None:
    raise InputError('noise_seed: calibrated_plan needs an integer seed for the privatizer '
                     "(jax_privacy draws an unseeded key without one); pass noise_seed=")
  noise_seed = keys_lib.check_seed('noise_seed', noise_seed)
  clip = {}
  for field in ('l2_clip_norm', 'rescale_to_unit_norm', 'normalize_by', 'dtype'):
    value = getattr(plan, field)
    clip[field] = value if value is not None else (
        getattr(config, field) if config is not None else _CLIP_DEFAULTS[field])
  scheme = to_scheme(batch_selection_strategy, dataset_size=dataset_size)
  try:
    accounted = to_strategy(strategy, scheme=scheme)
  except InputError as error:
    kind = InputTypeError if isinstance(error, TypeError) else InputError
    raise kind(f'strategy: {error}') from error
  noising, coefficients, column_normalize = _noising(strategy, accounted, scheme.iterations,
                                                     jax_privacy)

  clipping = jax_privacy.clipping

  @functools.wraps(clipping.clipped_grad)
  def clipped_grad_transform(*args, **kwargs):
    return clipping.clipped_grad(*args, **kwargs, **clip)

  try:
    sensitivity = float(clipped_grad_transform(lambda: None).sensitivity(relation))
  except ValueError as error:
    raise InputError(f'l2_clip_norm / normalize_by: jax_privacy refuses them: {error}') from error
  if not (math.isfinite(sensitivity) and sensitivity > 0.0):
    raise InputError(f'l2_clip_norm / normalize_by: the clipped sum\'s sensitivity must be '
                     f'finite and > 0, got {sensitivity} (l2_clip_norm={clip["l2_clip_norm"]}, '
                     f'normalize_by={clip["normalize_by"]})')

  calibration = accounting_lib.calibrate(scheme, accounted, epsilon=epsilon, delta=delta,
                                         key=key,
                                         **request)
  guarantee, name = calibration.guarantee, calibration.choice.name
  sigma = float(guarantee.noise_multiplier)
  stddev = sigma * sensitivity
  privatizer = jax_privacy.noise_addition.matrix_factorization_privatizer(
      noising, stddev=stddev, prng_key=noise_seed, dtype=clip['dtype'])
  event = _event_class()(
      noise_multiplier=sigma, epsilon=float(guarantee.epsilon), delta=float(guarantee.delta),
      method=str(guarantee.method), accountant=str(guarantee.accountant or name),
      adjacency=str(guarantee.adjacency), num_samples=int(guarantee.num_samples),
      scheme=repr(scheme), strategy=f'{accounted.summary} (fingerprint {accounted.fingerprint})',
      jaxacct_version=_JAXACCT_VERSION)
  dp_plan = importlib.import_module('jax_privacy.experimental.execution_plan').DPExecutionPlan(
      clipped_grad=clipped_grad_transform, batch_selection_strategy=batch_selection_strategy,
      noise_addition_transform=privatizer, dp_event=event)
  comparison = None
  if plan.compare:
    comparison = _comparison(batch_selection_strategy, coefficients, column_normalize,
                             sigma=sigma, name=str(guarantee.accountant or name),
                             epsilon=epsilon, delta=delta, adjacency=adjacency,
                             dataset_size=dataset_size, jax_privacy=jax_privacy)
  return CalibratedPlan(plan=dp_plan, guarantee=guarantee, comparison=comparison, scheme=scheme,
                        strategy=accounted, sensitivity=sensitivity, noise_stddev=stddev,
                        calibration=calibration)
