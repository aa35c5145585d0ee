"""Banded lower-triangular Toeplitz strategy matrices for DP-BandMF.

A BandMF strategy matrix ``C`` (n×n, lower-triangular, entrywise non-negative)
is described by the non-zero band of its first column, ``c_col``:
``C[i + k, i] = c_col[k]`` for ``0 <= k < num_bands`` and ``i + k < n``, and
``C[i, j] = 0`` otherwise. Training releases ``G + C⁻¹Z``, which is
post-processing-equivalent to the matrix mechanism ``CG + Z`` (Dong & Ganesh
(2026) §2.3–2.4).

Notation (API name ↔ symbol in the papers cited below):

============================  ==========================================
``c_col``                     c = (c₀, …, c_{m−1}), the band of column 0
``num_bands`` / ``bands``     m ("b-banded" in Dong & Ganesh (2026) §2.3)
``iterations``                n, the number of rows/columns of C
``min_sep``                   b, the min-separation of participations
``column_squared_norms``      s_i = Σ_{k < min(m, n−i)} c_k²  (Dong & Ganesh (2026) §5)
============================  ==========================================

Careful: the number of bands m and the min-sep b are different parameters;
the sensitivity formula here (and the Monte Carlo dynamic program, Dong &
Ganesh (2026) §5, Theorem 5.1) needs ``m <= b``.

Where the code runs: everything numeric is JAX (device) code built from
``jnp``/``lax`` so that it can be jitted, differentiated and fed traced
coefficients (``BandedToeplitz`` is a pytree whose only leaf is ``c_col``).
Public functions run inside a *scoped* ``jax.enable_x64(True)`` context so
that eager calls compute in float64 without touching the global JAX
configuration; inside a caller's ``jit`` the dtype of the traced input is
kept. Argument checks run on the host before any compute. The optimiser
returns a host ``np.ndarray``.

Sharp edge: an eager call returns a float64 ``jax.Array`` even when the
caller runs JAX without x64; convert it with ``np.asarray``/``float`` before
mixing it with float32 JAX code (JAX would otherwise warn and truncate).

References:
  Andy Dong and Arun Ganesh, "Privacy Amplification for BandMF via b-Min-Sep Subsampling",
  arXiv:2602.09338 (v2): §2.3 (b-banded Toeplitz C), §2.4, §3, §4.1, §5 (Eq. (1), Theorem 5.1), §7.1
  (prefix-sum MSE), App. B (docs/references.md).
  Christopher A. Choquette-Choo, Arun Ganesh, Thomas Steinke and Abhradeep Thakurta, "Privacy
  Amplification for Matrix Mechanisms", arXiv:2310.15526 (v2; ICLR 2024): MMCC for Poisson sampling
  with any C (docs/references.md).
"""

from __future__ import annotations

import dataclasses
import functools
import math
from typing import Any, NamedTuple

import jax
import jax.numpy as jnp
import numpy as np
from jax import lax

from jaxacct import _validate
from jaxacct._precision import scoped_x64 as _scoped_x64
from jaxacct.strategy import RoundingShape, Strategy, config_key
from jaxacct.errors import InputError, InputTypeError

# The names ``jaxacct`` exports at the top level (``strategies/__init__.py``).
EXPORTED = ('BandedToeplitz', 'optimize_banded_toeplitz', 'square_root_coefficients')

__all__ = [
    'BandedToeplitz',
    'min_sep_sensitivity_squared',
    'optimize_banded_toeplitz',
    'prefix_sum_mse',
    'square_root_coefficients',
]

def _is_tracer(value: Any) -> bool:
  return isinstance(value, jax.core.Tracer)


def _coefficients(name: str, values: Any) -> jax.Array:
  """Validates band coefficients and returns them as a ``jnp`` array.

  Concrete values get the full check of ``_validate.band_coefficients`` (1-D,
  non-empty, finite, non-negative, first entry > 0). Traced values (inside
  ``jit``/``grad``) can only be checked for shape; their dtype is kept if it is
  floating. Must be called inside the scoped x64 context.
  """
  if isinstance(values, BandedToeplitz):
    values = values.c_col
  if _is_tracer(values):
    if values.ndim != 1:
      raise InputError(f'{name} must be a 1-D array, got shape {values.shape}')
    if values.shape[0] == 0:
      raise InputError(f'{name} must be non-empty')
    if not jnp.issubdtype(values.dtype, jnp.floating):
      values = values.astype(float)  # default float dtype of the caller
    return values
  return jnp.asarray(_validate.band_coefficients(name, values))


def _iterations(value: Any) -> int:
  return _validate.integer_at_least('iterations', value, 1)


# Kernels. Un-jitted and unvalidated: `c` is a 1-D float array (possibly
# traced), `n` a static Python int. Paper symbols: c, n, m, b, s, beta.


def _column_squared_norms(c: jax.Array, n: int) -> jax.Array:
  """s_i = Σ_{k < w_i} c_k² with w_i = min(m, n − i).

  The last columns of C are truncated at row n (right-zero-padded c_i in Eq. (1) of
  Dong & Ganesh (2026) §5), so their squared norms decrease towards the end.
  """
  m = c.shape[0]
  w = np.minimum(m, n - np.arange(n))  # static window lengths, non-increasing in i
  return jnp.cumsum(c * c)[w - 1]


def _materialize(c: jax.Array, n: int) -> jax.Array:
  m = c.shape[0]
  diff = np.arange(n)[:, None] - np.arange(n)[None, :]  # i − j for C[i, j]
  in_band = (diff >= 0) & (diff < m)
  return jnp.where(in_band, c[np.clip(diff, 0, m - 1)], jnp.zeros((), c.dtype))


def toeplitz_solve(band: jax.Array, rhs: jax.Array) -> jax.Array:
  """x with T x = rhs for T lower-triangular Toeplitz with band ``band``, O(n·m) time, O(m) carry.

  Banded forward substitution: row i reads t₀x_i + Σ_{k=1}^{m−1} t_k x_{i−k} =
  rhs_i (x_j = 0 for j < 0); the carry holds (x_{i−1}, …, x_{i−m+1}). With
  rhs = e₀ this is the first column of T⁻¹ (the power-series inverse of the band).
  """
  n = rhs.shape[0]
  m = min(band.shape[0], n)  # bands below row n never enter the n×n system
  t0, tail = band[0], band[1:m]

  def step(previous, rhs_i):
    x_i = (rhs_i - jnp.dot(tail, previous)) / t0
    return jnp.concatenate([x_i[None], previous])[:-1], x_i

  _, x = lax.scan(step, jnp.zeros(m - 1, band.dtype), rhs.astype(band.dtype))
  return x


def _mean_prefix_error(c: jax.Array, n: int) -> jax.Array:
  """(1/n)·‖A C⁻¹‖_F² for A the all-ones lower-triangular n×n matrix.

  A and C⁻¹ are lower-triangular Toeplitz, hence so is A C⁻¹; its first
  column is A C⁻¹ e₀ = C⁻¹ A e₀ = C⁻¹ 𝟏 = β (Toeplitz lower-triangular
  matrices commute). Row i is (β_i, β_{i−1}, …, β₀, 0, …), with squared norm
  cumsum(β²)_i (the MSE formula of jax_privacy's ``matrix_factorization.toeplitz``).
  """
  beta = toeplitz_solve(c, jnp.ones(n, c.dtype))  # β = C⁻¹𝟏
  return jnp.mean(jnp.cumsum(beta * beta))


def _prefix_sum_mse(c: jax.Array, n: int) -> jax.Array:
  """(1/n)·‖A C⁻¹‖_F² · s_0 with s_0 the largest (truncated) squared column norm."""
  return _mean_prefix_error(c, n) * _column_squared_norms(c, n)[0]


# Jitted once per (n, m, dtype) so that eager calls do not re-trace the scan.
_prefix_sum_mse_jit = jax.jit(_prefix_sum_mse, static_argnames=('n',))


def _min_sep_sensitivity_squared(c: jax.Array, b: int, n: int) -> jax.Array:
  """Σ_{j=0}^{k−1} s_{j·b}, k = ⌈n/b⌉ (valid for m <= b)."""
  return jnp.sum(_column_squared_norms(c, n)[::b])


# Band length from which products with the band use O(n log n) FFTs / O(n) gathers
# instead of m shifted multiply-adds. Measured on a 2-core CPU at n = 7200
# (benchmarks/RESULTS.md): shifted sums win at 64 bands, FFT at 256.
FFT_MIN_BANDS = 128


def sliding_dot_products(y: jax.Array, c_col: jax.Array) -> jax.Array:
  """d_i = Σ_{k < m} c_k y_{i+k} with y_j = 0 for j ≥ n, i.e. d = Cᵀy; batch-major (N, n).

  float32 always sums the m products as a binary tree (``tree_sliding_dot_products``): its
  componentwise error bound is what the 32-bit program's margin certifies (an FFT has only
  a normwise bound).
  """
  n = y.shape[1]
  m = c_col.shape[0]
  if y.dtype == jnp.float32:
    return tree_sliding_dot_products(y, c_col)
  if m < FFT_MIN_BANDS:
    padded = jnp.pad(y, ((0, 0), (0, m - 1)))
    d = c_col[0] * y
    for k in range(1, m):
      d = d + c_col[k] * padded[:, k:k + n]
    return d
  # Cross-correlation by FFT: zero padding to ≥ n + m − 1 avoids wrap-around.
  length = 1 << (n + m - 2).bit_length()
  spectrum = jnp.fft.rfft(y, length, axis=1) * jnp.conj(jnp.fft.rfft(c_col, length))[None, :]
  return jnp.fft.irfft(spectrum, length, axis=1)[:, :n].astype(y.dtype)


def tree_sliding_dot_products(y: jax.Array, c_col: jax.Array) -> jax.Array:
  """``sliding_dot_products`` as a binary tree of m shifted products: every d̂_i is within
  γ_t·Σ_k |c_k||y_{i+k}|, t = ⌈log₂ m⌉ + 1 roundings, of the exact sum (Higham §3.1);
  XLA does not reassociate floating-point sums, so the tree is the order computed."""
  n = y.shape[1]
  m = c_col.shape[0]
  padded = jnp.pad(y, ((0, 0), (0, m - 1)))
  level = [c_col[k] * padded[:, k:k + n] for k in range(m)]
  while len(level) > 1:
    paired = [level[k] + level[k + 1] for k in range(0, len(level) - 1, 2)]
    level = paired + ([level[-1]] if len(level) % 2 else [])
  return level[0]


def mean_of_separated_participations(x: jax.Array, c_col: jax.Array) -> jax.Array:
  """C·x for participations at least len(c_col) rounds apart, batch-major (N, n).

  Columns of separated participations do not overlap, so row r of C·x is
  x_t·c[r − t] for the last participation t ≤ r with r − t < len(c), else 0.
  Short bands use m shifted multiply-adds (fast, fused); long bands an O(n)
  ``cummax`` and gather instead of an O(n·m) product.

  Args:
    x: ``(N, n)`` participation indicators (bool) or weights (the truncated
      pair's x^P ∈ {2, 1, 0}, x^Q ∈ {−1, 0}; a zero weight adds nothing, and
      its separation from other participations is all that matters), batch-major.
    c_col: ``(m,)`` band of C.
  """
  num, n = x.shape
  m = c_col.shape[0]
  weights = x.astype(c_col.dtype)
  if m < FFT_MIN_BANDS:
    padded = jnp.pad(weights, ((0, 0), (m - 1, 0)))
    mean = c_col[0] * padded[:, m - 1:]
    for k in range(1, m):
      mean = mean + c_col[k] * padded[:, m - 1 - k:m - 1 - k + n]
    return mean
  rounds = jnp.arange(n, dtype=jnp.int32)[None, :]
  last = lax.cummax(jnp.where(weights != 0, rounds, jnp.int32(-m - 1)), axis=1)
  gap = rounds - last
  weight = jnp.take_along_axis(weights, jnp.clip(last, 0, n - 1), axis=1)
  return jnp.where(gap < m, weight * c_col[jnp.clip(gap, 0, m - 1)], 0.0)


def balls_in_bins_modes(iterations: int, cycle_length: int, c_col: jax.Array) -> jax.Array:
  """The T mode vectors m_j = C·1[i ≡ j (mod T)], shape (T, n), in O(T·n).

  Exact also when len(c) > T (the shifted copies of c then overlap): row r of
  m_j is Σ c_k over k ≤ min(r, m−1) with k ≡ r − j (mod T), read from strided
  cumulative sums of c (the balls-in-bins modes of Dong & Ganesh (2026) §3).
  """
  n, cycle = iterations, cycle_length
  m = c_col.shape[0]
  padded = jnp.pad(c_col, (0, -(-m // cycle) * cycle - m))
  strided_cumsum = jnp.cumsum(padded.reshape(-1, cycle), axis=0).reshape(-1)
  bins = jnp.arange(cycle)[:, None]
  rounds = jnp.arange(n)[None, :]
  k_max = jnp.minimum(rounds, m - 1)
  k_star = k_max - jnp.mod(k_max - (rounds - bins), cycle)
  return jnp.where(k_star >= 0, strided_cumsum[jnp.clip(k_star, 0, None)], 0.0)


class BandedView(NamedTuple):
  """Kernel view of a banded Toeplitz C (``strategy.StrategyView``): the traced band.

  Losses computed with it are exact (Dong & Ganesh (2026) Eq. (1), Thm 5.1; §3 for cyclic
  Poisson and balls-in-bins).
  """

  c_col: jax.Array
  exact = True

  def transpose_products(self, y: jax.Array) -> jax.Array:
    return sliding_dot_products(y, self.c_col.astype(y.dtype))

  def separated_mean(self, x: jax.Array, dtype) -> jax.Array:
    del dtype  # computed in the band's float64; the caller casts to the kernel dtype
    return mean_of_separated_participations(x, self.c_col)

  def charge(self, direction: str, iterations: int) -> jax.Array:
    del direction  # exact: the same column norms in both directions
    return _column_squared_norms(self.c_col, iterations)

  def phase_modes(self, iterations: int, period: int) -> jax.Array:
    return balls_in_bins_modes(iterations, period, self.c_col)

  def rounding_shape(self, iterations: int) -> RoundingShape:
    """Separated participations: an entry of C·x is one coefficient times its weight (one
    rounding); d_i sums m products as a binary tree (``tree_sliding_dot_products``); the
    column norms sum m squares on device (m + 3 roundings with their inputs')."""
    del iterations
    c = np.abs(np.asarray(self.c_col, np.float64))
    bands = c.size
    return RoundingShape(float(c.max()), 1, float(c.sum()),
                         max(0, (bands - 1).bit_length()) + 1, float(np.sum(c * c)),
                         float(bands + 3))

  @property
  def one_output_per_product(self) -> bool:
    return self.c_col.shape[0] == 1


@dataclasses.dataclass(frozen=True, eq=False)
class BandedToeplitz(Strategy):
  """Lower-triangular banded Toeplitz strategy matrix ``C[i + k, i] = c_col[k]``.

  The object is a JAX pytree whose only leaf is ``c_col``: pass it through
  ``jit``/``vmap`` as an argument and new coefficient values (of the same
  number of bands) do not retrace. The number of iterations n is not part of
  the matrix; methods take it as a static argument, because the same band
  describes C for every n.

  Attributes:
    c_col: The non-zero band (c₀, …, c_{m−1}) of the first column, stored as a
      read-only float64 ``np.ndarray`` (a ``jax.Array`` or tracer after a
      round trip through a JAX transformation, which skips validation).

  Raises:
    ValueError: at construction, if ``c_col`` is not 1-D, is empty, contains
      NaN/inf or negative values, or ``c_col[0] <= 0``. Non-negativity is
      required by the amplification results (Dong & Ganesh (2026) §2.3 assume a
      non-negative lower-triangular C).
    TypeError: if constructed from a traced value; construct it outside the
      transformation and pass it in as a pytree argument.

  Example:
    >>> strategy = BandedToeplitz([1.0, 0.5, 0.375])
    >>> strategy.column_squared_norms(4).tolist()
    [1.390625, 1.390625, 1.25, 1.0]

  References:
    Choquette-Choo, Ganesh, McKenna, McMahan, Rush, Thakurta, Xu, "(Amplified)
    banded matrix factorization: a unified approach to private training",
    NeurIPS 2023, arXiv 2306.08153 (BandMF with banded C).
    Dong & Ganesh (2026), §2.3 (b-banded Toeplitz definition), §5 (Eq. (1): c_i
    right-zero-padded in the last columns; Theorem 5.1 needs a b-banded C).
  """

  c_col: np.ndarray
  exact = True  # class attribute (not a field): Monte Carlo losses are exact

  def __post_init__(self):
    if _is_tracer(self.c_col):
      raise InputTypeError(
          'BandedToeplitz(c_col) needs concrete values, got a tracer; construct it '
          'outside jit/vmap/grad and pass it in as a pytree argument')
    array = np.array(_validate.band_coefficients('c_col', self.c_col), dtype=np.float64)
    array.setflags(write=False)
    object.__setattr__(self, 'c_col', array)

  @classmethod
  def identity(cls) -> BandedToeplitz:
    """C = I, the strategy of DP-SGD: ``BandedToeplitz([1.0])``, one band.

    With C = I the matrix mechanism releases G + Z, the noisy gradient of every step on its
    own: DP-SGD (Abadi et al. 2016), the one-band (b = 1) case of BandMF. Every accountant
    treats it as ``BandedToeplitz([1.0])``, which it equals (same band, hash, fingerprint and
    ledger sketch); with ``Poisson`` sampling ``accountant="pld"`` accounts it exactly.

    Example:
      >>> BandedToeplitz.identity() == BandedToeplitz([1.0])
      True
      >>> BandedToeplitz.identity().summary
      'C = I'

    References:
      Abadi, Chu, Goodfellow, McMahan, Mironov, Talwar, Zhang, "Deep learning with differential
      privacy", CCS 2016, arXiv 1607.00133 (DP-SGD).
      Denisov, McMahan, Rush, Smith, Thakurta, "Improved differential privacy for SGD via
      optimal private linear operators on adaptive streams", NeurIPS 2022, arXiv 2202.08312
      §2 (the matrix mechanism; C = I is DP-SGD).
      Choquette-Choo, Ganesh, McKenna, McMahan, Rush, Thakurta, Xu, "(Amplified) banded matrix
      factorization: a unified approach to private training", NeurIPS 2023, arXiv 2306.08153
      (a 1-banded C is DP-SGD).
    """
    return cls(np.ones(1))

  @property
  def num_bands(self) -> int:
    """Number of bands m = ``len(c_col)`` (implied by the leaf's shape)."""
    return int(self.c_col.shape[0])

  @property
  def summary(self) -> str:
    return 'C = I' if self.num_bands == 1 else f'{self.num_bands} bands'

  @_scoped_x64
  def column_squared_norms(self, iterations: int) -> jax.Array:
    """Squared column norms of the n×n matrix C, truncated at row n.

    s_i = Σ_{k < min(m, n − i)} c_k². The first n − m + 1 values equal ‖c‖²;
    the last m − 1 DECREASE towards the end: s_{n−1} = c₀²,
    s_{n−2} = c₀² + c₁², …, i.e. s_{n−1−k} = Σ_{j≤k} c_j².

    Args:
      iterations: n >= 1 (static).

    Returns:
      Array of shape ``(iterations,)``; float64 unless ``c_col`` is a traced
      lower-precision leaf.

    References:
      Dong & Ganesh (2026) §5 (c_i right-zero-padded in the last columns, so
      the last m − 1 values decrease). jax_privacy writes them in reverse order
      (a bug found by jaxacct's tests; not in the paper).
    """
    n = _iterations(iterations)
    return _column_squared_norms(_coefficients('c_col', self.c_col), n)

  @_scoped_x64
  def max_column_norm(self, iterations: int | None = None) -> jax.Array:
    """Largest column norm ‖C e_0‖₂ = sqrt(Σ_{k < min(m, n)} c_k²).

    Args:
      iterations: n >= 1, or ``None`` for the untruncated norm ‖c‖₂ (any
        n >= m).

    Returns:
      Scalar array. This is the single-participation L2 sensitivity of C.

    References:
      Dong & Ganesh (2026) §5 (s_0 = ‖c‖² is the largest truncated squared
      column norm).
    """
    c = _coefficients('c_col', self.c_col)
    if iterations is not None:
      c = c[:_iterations(iterations)]
    return jnp.sqrt(jnp.sum(c * c))

  @_scoped_x64
  def materialize(self, iterations: int) -> jax.Array:
    """Dense n×n lower-triangular matrix C (for tests and small n).

    Args:
      iterations: n >= 1 (static).

    Returns:
      Array of shape ``(iterations, iterations)`` with ``C[i + k, i] =
      c_col[k]``.

    References:
      Dong, Ganesh, arXiv 2602.09338v2, §2.3 (b-banded and Toeplitz definitions).
    """
    n = _iterations(iterations)
    return _materialize(_coefficients('c_col', self.c_col), n)

  @functools.cached_property
  def fingerprint(self) -> tuple:
    """Hashable public identity of the strategy (ledgers and checkpoint fingerprints)."""
    return tuple(np.asarray(self.c_col, np.float64).tolist())

  def scale_free_sketch(self) -> tuple[str, tuple[float, ...]]:
    """('banded_toeplitz', c / max|c|): the band up to scale (``Strategy.scale_free_sketch``)."""
    band = np.asarray(self.c_col, np.float64)
    return 'banded_toeplitz', tuple((band / np.max(np.abs(band))).tolist())

  def overlaps_under(self, scheme) -> bool:
    """True when consecutive participations' columns overlap: len(c_col) exceeds the scheme's
    band limit (Poisson with more than one band). Only untruncated Poisson accepts that
    (``check_scheme``): MMCC accounts it (Choquette-Choo et al. (2023)); the Monte Carlo
    recursion does not."""
    limit = scheme.max_band_length
    return limit is not None and self.num_bands > limit

  def exact_for(self, scheme) -> bool:
    """Monte Carlo losses are exact unless columns overlap (``overlaps_under``)."""
    return not self.overlaps_under(scheme)

  def check_scheme(self, scheme) -> None:
    """len(c_col) ≤ the scheme's band limit (Dong & Ganesh (2026) Theorem 5.1: a b-banded C),
    except untruncated Poisson, whose participations are independent (the MMCC of
    Choquette-Choo et al. (2023) takes any C)."""
    if not self.overlaps_under(scheme):
      return
    if scheme.min_sep_chain == 1 and not scheme.truncates:
      return
    raise InputError(
        f'c_col must have at most {scheme.band_limit_name} = {scheme.max_band_length} entries '
        f'for {type(scheme).__name__} (columns of consecutive participations would overlap and '
        f'the exact recursion would be wrong), got len(c_col) = {self.num_bands}; only '
        f'untruncated Poisson takes more bands (accountant "mmcc")')

  def kernel_view(self, scheme) -> BandedView:
    if self.overlaps_under(scheme):
      raise InputError(
          f'Monte Carlo accounting needs len(c_col) <= {scheme.band_limit_name} = '
          f'{scheme.max_band_length} for {type(scheme).__name__}, got {self.num_bands} bands: '
          'account this mechanism with the deterministic accountant "mmcc", or pass '
          'LowerTriangular(C) for the App. B bounds of the Monte Carlo engine')
    return BandedView(self.c_col)

  @_scoped_x64
  def separated_sensitivity_squared(self, min_sep: int, iterations: int) -> float:
    """max ‖C·x‖² over b-separated x: Σ_j s_{j·b}, j < ⌈n/b⌉, for m ≤ b; for b = 1 and any m,
    ‖C·1‖² (C ≥ 0: every participation adds to every row sum)."""
    if min_sep == 1 and self.num_bands > 1:
      n = _iterations(iterations)
      band = np.asarray(self.c_col, np.float64)[:n]
      row_sums = np.cumsum(band)[np.minimum(np.arange(n), band.size - 1)]
      return float(np.sum(row_sums * row_sums))
    return float(min_sep_sensitivity_squared(self.c_col, min_sep, iterations))

  def banded_coefficients(self) -> np.ndarray:
    """c_col as a float64 host array (``Strategy.banded_coefficients``)."""
    return np.asarray(self.c_col, np.float64)

  def phase_sums(self, cycle_length: int, iterations: int) -> np.ndarray:
    """The T mode vectors in O(T·n) (``balls_in_bins_modes``), float64 (T, n)."""
    with jax.enable_x64(True):
      return np.asarray(balls_in_bins_modes(iterations, cycle_length, jnp.asarray(self.c_col)),
                        np.float64)

  def noise_bands(self) -> tuple[np.ndarray, np.ndarray]:
    """(c_col, (1,)): W = C⁻¹Z streams by Σ c_k W_{t−k} = Z_t (``training.noise``)."""
    return np.asarray(self.c_col), np.ones(1)

  @_scoped_x64
  def prefix_error(self, iterations: int) -> float:
    """(1/n)‖A C⁻¹‖_F²: times σ² it is the mean squared error of the noisy prefix sums.

    Dong & Ganesh (2026) §7.1 compares schemes at equal ε by ‖A C⁻¹‖_F²·σ²/n with σ the
    calibrated noise multiplier for this C (not normalised).
    """
    return float(_mean_prefix_error(_coefficients('c_col', self.c_col), _iterations(iterations)))

  def __eq__(self, other: object) -> bool:
    if not isinstance(other, BandedToeplitz):
      return NotImplemented
    mine, theirs = np.asarray(self.c_col), np.asarray(other.c_col)
    return mine.shape == theirs.shape and bool(np.array_equal(mine, theirs))

  def __hash__(self) -> int:
    return hash((BandedToeplitz, self.fingerprint))


def _flatten_with_keys(matrix: BandedToeplitz):
  return ((jax.tree_util.GetAttrKey('c_col'), matrix.c_col),), None


def _flatten(matrix: BandedToeplitz):
  return (matrix.c_col,), None


def _unflatten(_: None, children) -> BandedToeplitz:
  # No validation: the leaf may be a tracer, a sentinel or a placeholder.
  matrix = object.__new__(BandedToeplitz)
  object.__setattr__(matrix, 'c_col', children[0])
  return matrix


jax.tree_util.register_pytree_with_keys(
    BandedToeplitz, _flatten_with_keys, _unflatten, _flatten)


def square_root_coefficients(bands: int) -> np.ndarray:
  """First ``bands`` coefficients of the square-root ("FHU") factorisation.

  c_k = Π_{j=1}^{k} (2j − 1)/(2j) = [1, 1/2, 3/8, 5/16, …], the Taylor
  coefficients of (1 − z)^{−1/2}; with all n bands, C = A^{1/2} for A the
  all-ones lower-triangular (prefix-sum) matrix. jax_privacy initialises its
  banded optimiser from these (``optimal_max_error_strategy_coefs``).

  Args:
    bands: number of coefficients m >= 1.

  Returns:
    float64 ``np.ndarray`` of shape ``(bands,)``.

  References:
    Fichtenberger, Henzinger, Upadhyay, "Constant matters: fine-grained error
    bound on differentially private continual observation", ICML 2023,
    arXiv 2202.11205 (the explicit factorisation of the counting matrix);
    jax_privacy's ``optimal_max_error_strategy_coefs``.
  """
  m = _validate.integer_at_least('bands', bands, 1)
  j = np.arange(1, m, dtype=np.float64)
  return np.concatenate([[1.0], np.cumprod((2.0 * j - 1.0) / (2.0 * j))])


@_scoped_x64
def prefix_sum_mse(c_col: Any, iterations: int) -> jax.Array:
  """Prefix-sum MSE of C at single-participation sensitivity.

  loss = (1/n)·‖A C⁻¹‖_F² · max_i s_i, where A is the all-ones lower-triangular
  n×n matrix and max_i s_i = s_0 = Σ_{k < min(m, n)} c_k² (= ‖c‖² when
  m <= n). A C⁻¹ is lower-triangular Toeplitz with first-column coefficients
  β solving C β = 𝟏, so its row i has squared norm cumsum(β²)_i and
  loss = mean_i cumsum(β²)_i · ‖c‖². β is computed by banded forward
  substitution in O(n·m) (a ``lax.scan``), never by a dense solve. The loss is
  invariant to scaling c and differentiable in ``c_col``.

  Args:
    c_col: band (c₀, …, c_{m−1}) as an array or a ``BandedToeplitz``;
      concrete values must be finite, non-negative with c₀ > 0. Traced values
      (under ``jax.grad``/``jit``) are only shape-checked.
    iterations: n >= 1 (static).

  Returns:
    Scalar array (float64 for concrete input).

  Raises:
    ValueError: for an invalid ``c_col`` or ``iterations``.

  Example:
    >>> float(prefix_sum_mse(square_root_coefficients(4), 16))  # doctest: +ELLIPSIS
    3.76823949...

  References:
    Denisov, McMahan, Rush, Smith, Thakurta, "Improved differential privacy
    for SGD via optimal private linear operators on adaptive streams",
    NeurIPS 2022 (prefix-sum MSE); Dong & Ganesh (2026), §7.1 (the displayed
    MSE equation (1/n)‖AC⁻¹‖_F² σ(C)²); jax_privacy's
    ``matrix_factorization.toeplitz`` (the same formula); values from jax_privacy
    runs are pinned in ``tests/test_matrices.py``.
  """
  n = _iterations(iterations)
  return _prefix_sum_mse_jit(_coefficients('c_col', c_col), n=n)


@_scoped_x64
def min_sep_sensitivity_squared(c_col: Any, min_sep: int, iterations: int) -> jax.Array:
  """max ‖C x‖² over participation vectors x ∈ {0,1}ⁿ with gaps >= ``min_sep``.

  Requires m = len(c_col) <= b = ``min_sep``. Then the result is
  Σ_{j=0}^{k−1} s_{j·b} with k = ⌈n/b⌉ and s the truncated squared column
  norms (``BandedToeplitz.column_squared_norms``): an example participates as
  early and as often as the separation allows.

  Proof. Column i of C is supported on rows i, …, i + m − 1, so for
  participations i₁ < … < i_r with gaps >= b >= m the selected columns have
  disjoint supports and ‖C x‖² = Σ_j s_{i_j}. Since i_j >= (j − 1)·b forces
  r <= k, and s is non-negative and non-increasing in i (its window
  min(m, n − i) shrinks), each term satisfies s_{i_j} <= s_{(j−1)·b} and adding
  the missing terms j = r + 1, …, k only increases the sum, so the pattern
  {0, b, 2b, …} is optimal.

  The argument uses neither non-negativity nor monotonicity of c itself, so
  the formula is exact for every band with m <= b (and differentiable in
  ``c_col``).

  Args:
    c_col: band (c₀, …, c_{m−1}) as an array or a ``BandedToeplitz``.
    min_sep: b >= 1, minimum distance between two participations (static).
    iterations: n >= 1 (static).

  Returns:
    Scalar array (float64 for concrete input).

  Raises:
    ValueError: for invalid arguments, or when len(c_col) > min_sep (columns
      would overlap; use an r-min-sep bound, Dong & Ganesh (2026) App. B,
      instead).

  Example:
    >>> float(min_sep_sensitivity_squared([1.0, 1.0], min_sep=2, iterations=5))
    5.0

  References:
    McKenna, "Scaling up the banded matrix factorization mechanism for large
    scale differentially private ML", ICLR 2025, arXiv 2405.13763, Thm 2
    (b-min-sep sensitivity of banded C; jax_privacy's
    ``minsep_sensitivity_squared``); Dong & Ganesh (2026), §4.1 (‖Cx‖² for
    b-banded C under b-min-sep), §5 (Theorem 5.1 needs m <= b; truncated
    columns s_i); values from jax_privacy runs are pinned in
    ``tests/test_matrices.py``.
  """
  n = _iterations(iterations)
  b = _validate.integer_at_least('min_sep', min_sep, 1)
  c = _coefficients('c_col', c_col)
  if c.shape[0] > b:
    raise InputError(
        f'len(c_col) must be <= min_sep (bands may not exceed the min-sep: Dong & Ganesh '
        f'(2026) Theorem 5.1), got len(c_col)={c.shape[0]} and min_sep={b}')
  return _min_sep_sensitivity_squared(c, b, n)


def _band_from_params(theta: jax.Array) -> jax.Array:
  """c = (1, |θ₁|, …, |θ_{m−1}|): non-negative, c₀ fixed by scale invariance."""
  return jnp.concatenate([jnp.ones(1, theta.dtype), jnp.abs(theta)])


def _objective(c: jax.Array, n: int, b: int | None) -> jax.Array:
  mean_error = _mean_prefix_error(c, n)
  if b is None:
    return mean_error * jnp.sum(c * c)  # bands <= n: s_0 = ‖c‖²
  return mean_error * _min_sep_sensitivity_squared(c, b, n)


def minimize_lbfgs(loss_fn, theta0: jax.Array, max_steps: int):
  """L-BFGS (optax, zoom line search) from theta0; returns (theta, loss, steps).

  Un-jitted: callers jit a wrapper with their objective. Stops after
  ``max_steps`` iterations or once the gradient is at round-off level relative
  to the loss.
  """
  import optax  # local: only the strategy optimisers need it, not `import jaxacct`
  solver = optax.lbfgs()
  value_and_grad = optax.value_and_grad_from_state(loss_fn)

  def step(carry):
    theta, state = carry
    value, grad = value_and_grad(theta, state=state)
    updates, state = solver.update(
        grad, state, theta, value=value, grad=grad, value_fn=loss_fn)
    return optax.apply_updates(theta, updates), state

  def keep_going(carry):
    _, state = carry
    count = optax.tree_utils.tree_get(state, 'count')
    grad = optax.tree_utils.tree_get(state, 'grad')
    value = optax.tree_utils.tree_get(state, 'value')
    converged = optax.tree_utils.tree_norm(grad) <= 1e-12 * jnp.abs(value)
    return (count == 0) | ((count < max_steps) & ~converged & jnp.isfinite(value))

  theta, state = lax.while_loop(keep_going, step, (theta0, solver.init(theta0)))
  return theta, loss_fn(theta), optax.tree_utils.tree_get(state, 'count')


@functools.partial(jax.jit, static_argnames=('n', 'b', 'max_steps'))
def _run_lbfgs(theta0: jax.Array, n: int, b: int | None, max_steps: int):
  return minimize_lbfgs(lambda theta: _objective(_band_from_params(theta), n, b), theta0,
                        max_steps)


@_scoped_x64
def optimize_banded_toeplitz(
    iterations: int,
    bands: int,
    *,
    min_sep: int | None = None,
    max_steps: int = 250,
) -> np.ndarray:
  """MSE-optimal banded Toeplitz band c for n iterations, ‖c‖₂ = 1.

  Minimises, over non-negative bands with c₀ > 0,

  * ``min_sep=None``: ``prefix_sum_mse(c, n)`` = (1/n)‖AC⁻¹‖_F²·‖c‖²
    (single participation; what jax_privacy's ``optimize_banded_toeplitz``
    minimises);
  * ``min_sep=b``: (1/n)‖AC⁻¹‖_F² · ``min_sep_sensitivity_squared(c, b, n)``,
    the prefix-sum MSE at the multi-participation (b-min-sep) sensitivity, as
    for "C that minimizes MSE without amplification" in arXiv 2602.09338v2
    §7.1.

  Both objectives are scale-invariant, so the search runs over
  c = (1, |θ₁|, …, |θ_{m−1}|) (non-negative by construction; fixing c₀ removes
  the flat radial direction) with ``optax.lbfgs`` and its zoom line search,
  in float64, jitted, from the square-root coefficients. It stops after
  ``max_steps`` iterations or when the gradient norm falls below 1e-12 × loss.
  The result is rescaled to unit norm.

  Args:
    iterations: n >= 1.
    bands: m, 1 <= m <= iterations.
    min_sep: b >= bands, or ``None`` for single participation.
    max_steps: maximum number of L-BFGS iterations, >= 1.

  Returns:
    float64 ``np.ndarray`` c of shape ``(bands,)`` with ‖c‖₂ = 1, c >= 0,
    c₀ > 0; ``BandedToeplitz(c)`` is the strategy matrix.

  Raises:
    ValueError: for an argument outside its range (the message names it).
    RuntimeError: if the optimiser produced a non-finite band.

  Example:
    >>> c = optimize_banded_toeplitz(16, 4)
    >>> round(float(prefix_sum_mse(c, 16)), 6)
    3.754024

  References:
    Choquette-Choo et al., arXiv 2306.08153 (BandMF, optimising banded C);
    McKenna, arXiv 2405.13763 (banded Toeplitz optimisation at scale);
    jax_privacy's ``optimize_banded_toeplitz`` (the same objective; its
    optimised losses are pinned in ``tests/test_matrices.py``).
  """
  n = _iterations(iterations)
  m = _validate.integer_at_least('bands', bands, 1)
  if m > n:
    raise InputError(f'bands must be in [1, iterations={n}], got {m}')
  b = None
  if min_sep is not None:
    b = _validate.integer_at_least('min_sep', min_sep, 1)
    if b < m:
      raise InputError(f'min_sep must be >= bands={m} (or None), got {b}')
  steps = _validate.integer_at_least('max_steps', max_steps, 1)
  if m == 1:
    return np.ones(1)
  theta0 = jnp.asarray(square_root_coefficients(m)[1:])
  # optax.lbfgs mixes int32/int64 counters under x64, which strict dtype
  # promotion (as set by test suites, STYLE.md §4) rejects: scope 'standard'.
  with jax.numpy_dtype_promotion('standard'):
    theta, _, _ = _run_lbfgs(theta0, n=n, b=b, max_steps=steps)
  c = np.concatenate([[1.0], np.abs(np.asarray(theta, dtype=np.float64))])
  if not np.all(np.isfinite(c)):
    raise RuntimeError(f'L-BFGS diverged: non-finite band {c} for iterations={n}, bands={m}')
  return c / math.sqrt(float(np.sum(c * c)))


# ------------------------------------------------------------------- config keys (config.py)
def _normalized(c_col: np.ndarray, normalize: bool) -> BandedToeplitz:
  c_col = np.asarray(c_col, float)
  return BandedToeplitz(c_col / np.linalg.norm(c_col) if normalize else c_col)


@config_key('c_col', 'reals', options={'normalize': 'boolean'})
def _from_c_col(value, *, iterations, min_sep, normalize: bool = False) -> BandedToeplitz:
  """The band (c₀, …, c_{m−1}) of a banded Toeplitz C: ``[1.0]`` is DP-SGD's C = I
  (``BandedToeplitz.identity()``).

  Options:
    normalize: divide the band by its Euclidean norm (every full column of C then has norm 1;
      σ is not normalised by it otherwise).
  """
  del iterations, min_sep
  return _normalized(value, normalize)


@config_key('square_root_bands', 'count', options={'normalize': 'boolean'})
def _square_root(value, *, iterations, min_sep, normalize: bool = False) -> BandedToeplitz:
  """m bands of the square-root factorisation of the prefix sums (``square_root_coefficients``,
  Fichtenberger et al., ICML 2023)."""
  del iterations, min_sep
  return _normalized(square_root_coefficients(value), normalize)


def _square_root_stand_in(value, *, iterations) -> tuple[BandedToeplitz, str]:
  del iterations
  return (BandedToeplitz(square_root_coefficients(value)),
          f'timed with the square-root band of the same length ({value}) for the optimised one')


@config_key('optimized_bands', 'count', options={'normalize': 'boolean'},
            timing_stand_in=_square_root_stand_in)
def _optimized(value, *, iterations, min_sep, normalize: bool = False) -> BandedToeplitz:
  """The m-band C of least prefix-sum MSE for single participation
  (``optimize_banded_toeplitz(iterations, m)``, as in Dong & Ganesh (2026) §7.1; an L-BFGS run
  when the config is read)."""
  del min_sep  # configs optimise for single participation (cf. Dong & Ganesh (2026) §7.1)
  return _normalized(optimize_banded_toeplitz(iterations, value), normalize)
