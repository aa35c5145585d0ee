"""The static (shape-determining) description of a mechanism for the kernels.

Only these fields are ``jax.jit`` static arguments; ``sampling_prob``,
``noise_multiplier`` and ``c_col`` travel as traced arrays, so a σ sweep or a
new ``c_col`` of the same length reuses the compiled kernel.
"""

from __future__ import annotations

import functools
from typing import NamedTuple

import jax
import jax.numpy as jnp
import numpy as np

from jaxacct import schemes
from jaxacct.mechanism import MatrixMechanism


# Band length from which products with the band use O(n log n) FFTs / O(n) gathers
# instead of m shifted multiply-adds. Measured on a 2-core CPU at n = 7200
# (benchmarks/RESULTS.md): shifted sums win at 64 bands, FFT at 256.
FFT_MIN_BANDS = 128


class KernelSpec(NamedTuple):
  """Hashable static configuration of a Monte Carlo kernel.

  Attributes:
    kind: ``"bminsep"`` (Poisson is b = 1), ``"balls_in_bins"`` or ``"cyclic_poisson"``.
    iterations: n.
    period: b (min_sep) or T (cycle_length).
    warm_start: b-min-sep Algorithm 2 (unused otherwise).
    partition: cyclic Poisson partition (``""`` otherwise).
    num_bands: len(c_col).
    dtype: kernel arithmetic dtype name (``"float64"`` or ``"float32"``).
    truncated: batches are cut to ``truncated_batch_size`` (seed 000 App. D):
      the outputs carry the other examples' batch sizes r and the pair is
      P = N(C·x^P, σ²I), Q = N(C·x^Q, σ²I) (Corollary D.2).
    multiplicity: k_u of multi-attribution b-min-sep (Theorem 6.1; 1 otherwise).
    dense: C is a dense ``LowerTriangular`` matrix: the losses are the r-min-sep
      bounds of seed 000 App. B (upper for ``remove``, lower for ``add``).
  """

  kind: str
  iterations: int
  period: int
  warm_start: bool
  partition: str
  num_bands: int
  dtype: str
  truncated: bool = False
  multiplicity: int = 1
  dense: bool = False


class SchemeParams(NamedTuple):
  """Traced (non-static) scheme parameters: new values do not recompile.

  Attributes:
    sampling_prob: p, float64 scalar.
    truncated_batch_size: B, int64 scalar (0 when not truncated).
    dataset_size: m, int64 scalar (0 when not truncated).
    batch_size_table: the fast path of the other examples' batch-size draws
      (``binomial.InversionTable``) or None; its length is a static shape.
  """

  sampling_prob: jax.Array
  truncated_batch_size: jax.Array
  dataset_size: jax.Array
  batch_size_table: object = None


@functools.singledispatch
def _structure(scheme) -> tuple[str, int, bool, str]:
  raise TypeError(f'no Monte Carlo kernel for scheme {type(scheme).__name__}')


@_structure.register
def _(scheme: schemes.Poisson):
  return 'bminsep', 1, False, ''


@_structure.register
def _(scheme: schemes.BMinSep):
  # With b = 1 warm and cold start coincide (every example is always eligible).
  return 'bminsep', scheme.min_sep, scheme.warm_start and scheme.min_sep > 1, ''


@_structure.register
def _(scheme: schemes.MultiAttributionBMinSep):
  return 'bminsep', scheme.min_sep, False, ''  # cold start (seed 000 §6.4)


@_structure.register
def _(scheme: schemes.BallsInBins):
  return 'balls_in_bins', scheme.cycle_length, False, ''


@_structure.register
def _(scheme: schemes.CyclicPoisson):
  return 'cyclic_poisson', scheme.cycle_length, False, scheme.partition


def kernel_spec(mechanism: MatrixMechanism, dtype: np.dtype) -> KernelSpec:
  """The static kernel description of ``mechanism``; refuses truncation without an MC kernel."""
  scheme = mechanism.scheme
  if scheme.conjectural and not getattr(scheme, 'accept_conjecture_6_2', False):
    raise ValueError(
        "accounting Algorithm 4 (exclusion='participated') by Theorem 6.1's model rests on the "
        'unproven Conjecture 6.2 of seed 000; pass accept_conjecture_6_2=True to accept it (results '
        "are then labelled 'conjectural'), or use Algorithm 3 (exclusion='sampled')")
  kind, period, warm, partition = _structure(scheme)
  if scheme.truncates and kind != 'bminsep':
    raise ValueError(
        f'no Monte Carlo accountant for truncated {type(scheme).__name__}; truncated cyclic '
        'Poisson (equal_split) is accounted deterministically by jaxacct.cyclic_poisson_pld '
        '(seed 001 reduction)')
  return KernelSpec(kind, mechanism.iterations, period, warm, partition,
                    mechanism.matrix.num_bands, np.dtype(dtype).name, scheme.truncates,
                    getattr(scheme, 'max_examples_per_user', 1), mechanism.bounded)


def scheme_params(mechanism: MatrixMechanism) -> SchemeParams:
  """The traced parameters of the mechanism's scheme, as device scalars."""
  from jaxacct.montecarlo.participation import batch_size_table  # local: participation imports us
  scheme = mechanism.scheme
  truncates = scheme.truncates
  return SchemeParams(
      jnp.asarray(sampling_prob(mechanism), jnp.float64),
      jnp.asarray(scheme.truncated_batch_size if truncates else 0, jnp.int64),
      jnp.asarray(scheme.dataset_size if truncates else 0, jnp.int64),
      batch_size_table(scheme) if truncates else None)


def sampling_prob(mechanism: MatrixMechanism) -> float:
  """p of the scheme; 1 for balls-in-bins (every example is in its bin's rounds)."""
  return float(getattr(mechanism.scheme, 'sampling_prob', 1.0))
