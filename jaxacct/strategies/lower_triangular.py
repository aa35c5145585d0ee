"""Dense lower-triangular non-negative strategies and their r-min-sep loss bounds.

``LowerTriangular(C)`` is any n×n lower-triangular, entrywise non-negative C
with a positive diagonal, e.g. C = H⁻¹ for a banded Toeplitz H (BISR,
BandInvMF), whose columns are full and decay instead of stopping after a band.
Used with ``BMinSep(min_sep=r)`` (or ``Poisson``, r = 1) the exact b-min-sep
recursion does not apply, because the columns of participations r rounds
apart overlap. The privacy loss is bracketed instead (the upper bound is
Dong & Ganesh (2026) App. B; the lower bound is jaxacct's, not in the paper):

* **upper bound** on ln P/Q (recursion (6), for the ``remove`` direction,
  y ~ P): drop the cross terms 2x_i x_j c_iᵀc_j ≥ 0 from ‖Cx‖²;
* **lower bound** on ln P/Q (for the ``add`` direction, y ~ Q, loss ln Q/P):
  charge each participation i the largest total cross term M_i it can have with
  later r-separated participations (``later_cross_term_bounds``).

Both factorise over participations, so both run through the same recursion
with per-round log-likelihood ratios ℓ_i = (2⟨c_i, y⟩ − s_i − 2·[add]·M_i)/(2σ²).
With a banded C of at most r bands every cross term vanishes and both equal
Eq. (1) exactly.

Sharp edge: dense C is O(n²) memory and the kernels cost O(n²) per sample
(a matrix product), against O(n·m) for banded C.

References:
  Andy Dong and Arun Ganesh, "Privacy Amplification for BandMF via b-Min-Sep Subsampling",
  arXiv:2602.09338 (v2): App. B (B.1: recursion (6), Lemma B.1; B.2–B.3), §3, §7.1
  (docs/references.md).
  Jan Schuchardt and Nikita Kalinin, "Sampling-Free Privacy Accounting for Matrix Mechanisms under
  Random Allocation", arXiv:2601.21636: §5 and Fig. 1 (BISR, BandInvMF), Lemma 2.8
  (docs/references.md).
"""

from __future__ import annotations

import dataclasses
import functools
import hashlib
import math
from typing import Any, NamedTuple

import jax
import jax.numpy as jnp
import numpy as np
from scipy import linalg

from jaxacct import _validate
from jaxacct._precision import scoped_x64
from jaxacct.strategies.banded_toeplitz import minimize_lbfgs, toeplitz_solve
from jaxacct.strategy import RoundingShape, Strategy, config_key
from jaxacct.errors import InputError, InputTypeError
from jaxacct.schemes.participation import FixedBins

# The names ``jaxacct`` exports at the top level (``strategies/__init__.py``).
EXPORTED = ('LowerTriangular', 'banded_inverse_square_root', 'optimize_banded_inverse')

__all__ = [
    'LowerTriangular',
    'PhaseModes',
    'RMinSepTerms',
    'banded_inverse_square_root',
    'later_cross_term_bounds',
    'optimize_banded_inverse',
    'sensitivity_bound_squared',
    'square_root_inverse_band',
]


def _entries(values: Any) -> np.ndarray:
  if isinstance(values, jax.core.Tracer):
    raise InputTypeError('LowerTriangular(entries) needs concrete values, got a tracer; construct it '
                    'outside jit/vmap/grad and pass it in as a pytree argument')
  array = np.array(_validate.real_array('entries', values, 'an n×n matrix'))
  if array.ndim != 2 or array.shape[0] != array.shape[1] or array.shape[0] == 0:
    raise InputError(f'entries must be a non-empty square n×n matrix, got shape {array.shape}')
  if not np.all(np.isfinite(array)):
    raise InputError('entries must be finite (no NaN or inf)')
  if np.any(array < 0):
    i, j = np.argwhere(array < 0)[0]
    raise InputError(f'entries must be non-negative (App. B drops non-negative cross terms), got '
                     f'C[{i}, {j}] = {array[i, j]}')
  upper = np.triu(array, 1)
  if np.any(upper != 0):
    i, j = np.argwhere(upper != 0)[0]
    raise InputError(f'entries must be lower-triangular, got C[{i}, {j}] = {array[i, j]} above '
                     'the diagonal')
  if np.any(np.diag(array) <= 0):
    i = int(np.argmin(np.diag(array)))
    raise InputError(f'entries must have a positive diagonal (C must be invertible), got '
                     f'C[{i}, {i}] = {array[i, i]}')
  array.setflags(write=False)
  return array


@dataclasses.dataclass(frozen=True, eq=False)
class LowerTriangular(Strategy):
  """Dense lower-triangular, entrywise non-negative strategy matrix C (n×n).

  A JAX pytree whose only leaf is ``entries``. Accounted by the r-min-sep
  bounds of Dong & Ganesh (2026) App. B (see the module docstring): the Monte Carlo
  accountant reports upper bounds on ε and δ, never the exact values.

  Attributes:
    entries: C as a read-only float64 ``np.ndarray`` of shape (n, n).

  Raises:
    ValueError: at construction, if C is not square, has NaN/inf, negative
      entries, entries above the diagonal, or a non-positive diagonal entry.
    TypeError: if constructed from a traced value.

  Example:
    >>> strategy = LowerTriangular([[1.0, 0.0], [0.5, 1.0]])
    >>> strategy.column_squared_norms(2).tolist()
    [1.25, 1.0]

  References:
    Dong & Ganesh (2026), App. B (r-min-sep for non-banded C).
  """

  entries: np.ndarray
  exact = False  # class attribute (not a field): Monte Carlo losses are App. B bounds

  def __post_init__(self):
    object.__setattr__(self, 'entries', _entries(self.entries))

  @property
  def iterations(self) -> int:
    """n, the number of rows and columns (fixed: a dense C describes one horizon)."""
    return int(self.entries.shape[0])

  @property
  def num_bands(self) -> int:
    """n: every column may be non-zero down to the last row."""
    return self.iterations

  @property
  def summary(self) -> str:
    return 'dense C'

  def _check_iterations(self, iterations: int | None) -> None:
    if iterations is not None:
      n = _validate.integer_at_least('iterations', iterations, 1)
      if n != self.iterations:
        raise InputError(f'iterations must equal the size of C ({self.iterations}), got {n}')

  @scoped_x64
  def column_squared_norms(self, iterations: int | None = None) -> jax.Array:
    """s_i = ‖c_i‖² of the full columns (Dong & Ganesh (2026) App. B.1, recursion (6))."""
    self._check_iterations(iterations)
    return jnp.sum(jnp.square(jnp.asarray(self.entries)), axis=0)

  @scoped_x64
  def max_column_norm(self, iterations: int | None = None) -> jax.Array:
    """max_i ‖c_i‖₂, the single-participation L2 sensitivity of C."""
    return jnp.sqrt(jnp.max(self.column_squared_norms(iterations)))

  @scoped_x64
  def materialize(self, iterations: int | None = None) -> jax.Array:
    """C as a float64 ``jax.Array``."""
    self._check_iterations(iterations)
    return jnp.asarray(self.entries)

  @functools.cached_property
  def fingerprint(self) -> tuple:
    """Hashable public identity (ledgers and checkpoint fingerprints); hashed once."""
    return ('lower_triangular', self.iterations,
            hashlib.sha256(np.ascontiguousarray(self.entries).tobytes()).hexdigest())

  def scale_free_sketch(self) -> tuple[str, tuple[float, ...]]:
    """('lower_triangular n', numbers) up to scale (``Strategy.scale_free_sketch``): the column
    squared norms and eight fixed ±1 projections of the entries, each relative to the largest
    entry (a rescaled C gives the same numbers up to rounding)."""
    return f'lower_triangular {self.iterations}', self._sketch

  @functools.cached_property
  def _sketch(self) -> tuple[float, ...]:
    entries = np.asarray(self.entries, np.float64)
    scale = float(np.max(np.abs(entries)))
    signs = np.random.default_rng(0).choice([-1.0, 1.0], size=(8, entries.shape[0]))
    norms = np.sum(np.square(entries), axis=0) / scale**2
    projections = (signs @ entries @ signs.T).diagonal() / scale
    return tuple(np.concatenate([norms, projections]).tolist())

  def exact_for(self, scheme) -> bool:
    """Balls-in-bins losses are exact with any C (a mixture over T modes); others are App. B."""
    return isinstance(scheme.participation.model, FixedBins)

  def check_scheme(self, scheme) -> None:
    """App. B bounds the loss of the r-min-sep chain (Poisson r = 1, BMinSep r = min_sep);
    fixed-bin balls-in-bins is exact with any C."""
    if scheme.min_sep_chain is None and not self.exact_for(scheme):
      raise InputError(
          f'a LowerTriangular strategy is accounted by the r-min-sep bounds of Dong & Ganesh '
          f'(2026) App. B, '
          f'for Poisson or BMinSep(min_sep=r) schemes, or exactly for BallsInBins; got '
          f'{type(scheme).__name__}')
    if scheme.truncates:
      raise InputError('a LowerTriangular strategy cannot be accounted with truncation (Dong & '
                       'Ganesh (2026) App. D assumes banded C); drop truncated_batch_size or use '
                       'BandedToeplitz')
    if self.iterations != scheme.iterations:
      raise InputError(f'the LowerTriangular matrix is {self.iterations}×{self.iterations} but '
                       f'the scheme has iterations = {scheme.iterations}; they must be equal')

  def kernel_view(self, scheme) -> 'RMinSepTerms | PhaseModes':
    model = scheme.participation.model
    if isinstance(model, FixedBins):
      return PhaseModes(self.entries, phase_sums(self.entries, model.cycle_length))
    return self.kernel_terms(scheme.min_sep_chain)

  def separated_sensitivity_squared(self, min_sep: int, iterations: int) -> float:
    """``sensitivity_bound_squared``: an upper bound, exact for r = 1 (App. B)."""
    self._check_iterations(iterations)
    return sensitivity_bound_squared(self.entries, min_sep)

  def phase_sums(self, cycle_length: int, iterations: int | None = None) -> np.ndarray:
    """The T mode vectors of the dense C in O(n²) (module ``phase_sums``), float64 (T, n)."""
    self._check_iterations(iterations)
    return phase_sums(self.entries, cycle_length)

  def noise_bands(self) -> tuple[np.ndarray, np.ndarray]:
    """((1,), h) when C⁻¹ is banded Toeplitz with band h (BISR, BandInvMF), else TypeError."""
    band = self.inverse_band()
    if band is None:
      raise InputTypeError('training streams C⁻¹Z when C or C⁻¹ is banded Toeplitz; this '
                      'LowerTriangular is not Toeplitz, so its C⁻¹ has no band to stream')
    return np.ones(1), band

  def prefix_error(self, iterations: int | None = None) -> float:
    """(1/n)‖A C⁻¹‖_F² (times σ²: the MSE of the noisy prefix sums, Dong & Ganesh (2026) §7.1)."""
    self._check_iterations(iterations)
    n = self.iterations
    prefix = np.linalg.solve(self.entries.T, np.tril(np.ones((n, n))).T).T  # A C⁻¹
    return float(np.sum(prefix * prefix) / n)

  def inverse_band(self) -> np.ndarray | None:
    """h if C⁻¹ is lower-triangular Toeplitz (C⁻¹[i + k, i] = h_k, k < len(h)), else None.

    Entries of C⁻¹ below 1e-12·max|C⁻¹| count as zero (the rounding level of
    recomputing an inverse band from C), so len(h) is the band of a banded
    inverse (BISR, BandInvMF) and up to n for any other Toeplitz C. Training
    streams C⁻¹Z from h with O(len(h)·d) memory (``jaxacct.training.noise``).

    References:
      Kalinin, Lampert, arXiv 2505.12128 (banded-inverse factorisations).
    """
    return _inverse_band(self)

  def kernel_terms(self, min_sep: int) -> 'RMinSepTerms':
    """The arrays the r-min-sep kernels need (C, s, M), computed once per (C, r) on the host."""
    return _kernel_terms(self, _validate.integer_at_least('min_sep', min_sep, 1))

  @classmethod
  def from_inverse_band(cls, inverse_band: Any, iterations: int) -> 'LowerTriangular':
    """C = H⁻¹ for H the n×n lower-triangular banded Toeplitz matrix with band ``inverse_band``.

    Requires h₀ > 0 and h_k ≤ 0 for k ≥ 1, which makes C ≥ 0: the first column
    of C is the power series 1/(h₀ − Σ_k |h_k| zᵏ) = h₀⁻¹ Σ_j (Σ_k |h_k| zᵏ/h₀)ʲ,
    all of whose coefficients are non-negative.

    References:
      Kalinin, Lampert, arXiv 2505.12128 (BISR: banded inverse square root);
      Dong, Ganesh, arXiv 2602.09338v2, App. B.2 (C⁻¹ banded Toeplitz).
    """
    n = _validate.integer_at_least('iterations', iterations, 1)
    band = np.asarray(inverse_band, dtype=np.float64)
    if band.ndim != 1 or band.size == 0 or not np.all(np.isfinite(band)):
      raise InputError(f'inverse_band must be a non-empty finite 1-D array, got {inverse_band!r}')
    if band[0] <= 0 or np.any(band[1:] > 0):
      raise InputError('inverse_band must have h[0] > 0 and h[k] <= 0 for k >= 1 (so that '
                       f'C = H⁻¹ is non-negative), got {band.tolist()}')
    with jax.enable_x64(True):
      column = np.asarray(toeplitz_solve(jnp.asarray(band), jnp.eye(1, n, dtype=jnp.float64)[0]))
    return cls(_toeplitz_matrix(column))

  def __eq__(self, other: object) -> bool:
    if not isinstance(other, LowerTriangular):
      return NotImplemented
    return self.fingerprint == other.fingerprint

  def __hash__(self) -> int:
    return hash(self.fingerprint)

  def __repr__(self) -> str:
    return f'LowerTriangular(n={self.iterations}, sha256={self.fingerprint[2][:12]})'


def _toeplitz_matrix(column: np.ndarray) -> np.ndarray:
  n = column.shape[0]
  diff = np.arange(n)[:, None] - np.arange(n)[None, :]
  return np.where(diff >= 0, column[np.clip(diff, 0, n - 1)], 0.0)


def _flatten_with_keys(matrix: LowerTriangular):
  return ((jax.tree_util.GetAttrKey('entries'), matrix.entries),), None


def _flatten(matrix: LowerTriangular):
  return (matrix.entries,), None


def _unflatten(_: None, children) -> LowerTriangular:
  matrix = object.__new__(LowerTriangular)  # no validation: the leaf may be a tracer
  object.__setattr__(matrix, 'entries', children[0])
  return matrix


jax.tree_util.register_pytree_with_keys(LowerTriangular, _flatten_with_keys, _unflatten, _flatten)


# HIGHEST: TPU/GPU default matmuls round to bf16/TF32, far coarser than the kernel dtype.
def _transpose_products(entries, y: jax.Array) -> jax.Array:
  """Cᵀy row-wise: y C for a batch of outputs y, (N, n)."""
  return jnp.matmul(y, entries.astype(y.dtype), precision=jax.lax.Precision.HIGHEST)


def _dense_mean(entries, x: jax.Array, dtype) -> jax.Array:
  """C·x row-wise: x Cᵀ for a batch of participation patterns x, (N, n)."""
  return jnp.matmul(x.astype(dtype), entries.astype(dtype).T, precision=jax.lax.Precision.HIGHEST)


def _dense_rounding_shape(entries, charge_max: float, charge_roundings: float) -> RoundingShape:
  """Dense products of n terms in float32, in any order (Higham §3.1: γ_n): the mean's
  entries are at most C's largest row sum (C ≥ 0, x ∈ {0, 1}), d_i weighs y by column i.

  Assumes IEEE float32 products and sums in ``jnp.matmul(…, precision=HIGHEST)``, as on CPU
  and GPU; ``benchmarks/accelerator.py`` checks it on the backend it runs on.
  """
  c = np.abs(np.asarray(entries, np.float64))
  n = c.shape[0]
  return RoundingShape(float(np.max(c.sum(axis=1))), n, float(np.max(c.sum(axis=0))), n,
                       float(charge_max), float(charge_roundings))


class RMinSepTerms(NamedTuple):
  """Kernel view of a dense C for an r-min-sep scheme (``strategy.StrategyView``; traced).

  Losses computed with it are the App. B bounds conservative for the direction asked:
  ``remove`` charges s_i (recursion (6), an upper bound on ln P/Q), ``add`` charges
  s_i + 2M_i (a lower bound on ln P/Q, so the add loss ln Q/P is over-stated).

  Attributes:
    entries: C, (n, n).
    squared_norms: s_i = ‖c_i‖², (n,).
    cross_bounds: M_i of ``later_cross_term_bounds``, (n,).
  """

  entries: Any
  squared_norms: Any
  cross_bounds: Any
  exact = False

  def transpose_products(self, y: jax.Array) -> jax.Array:
    return _transpose_products(self.entries, y)

  def separated_mean(self, x: jax.Array, dtype) -> jax.Array:
    # x is r-separated, but a dense product needs no separation.
    return _dense_mean(self.entries, x, dtype)

  def charge(self, direction: str, iterations: int) -> jax.Array:
    del iterations  # the view is for one n
    if direction == 'add':
      return self.squared_norms + 2.0 * self.cross_bounds
    return self.squared_norms

  def rounding_shape(self, iterations: int) -> RoundingShape:
    """s_i and M_i are host values rounded to float32 and s + 2M adds one rounding: 3u."""
    del iterations
    charge = np.asarray(self.squared_norms, np.float64) + 2.0 * np.asarray(self.cross_bounds,
                                                                          np.float64)
    return _dense_rounding_shape(self.entries, np.max(charge), 3.0)

  one_output_per_product = False  # a dense column mixes every later output


def phase_sums(entries: np.ndarray, period: int) -> np.ndarray:
  """m_j = Σ_{i ≡ j (mod T)} c_i, the T balls-in-bins mode vectors of a dense C: (T, n) float64."""
  entries = np.asarray(entries, np.float64)
  modes = np.zeros((period, entries.shape[0]))
  for phase in range(min(period, entries.shape[0])):
    modes[phase] = entries[:, phase::period].sum(axis=1)
  return modes


class PhaseModes(NamedTuple):
  """Kernel view of a dense C for fixed-bin balls-in-bins (``strategy.StrategyView``; traced).

  The output mean is one of the T modes m_j = C·1[i ≡ j (mod T)], so the loss is exact for
  any C (Dong & Ganesh (2026) §3; Schuchardt & Kalinin (2026) Lemma 2.8).

  Attributes:
    entries: C, (n, n).
    modes: m_j, (T, n).
  """

  entries: Any
  modes: Any
  exact = True

  def transpose_products(self, y: jax.Array) -> jax.Array:
    return _transpose_products(self.entries, y)

  def separated_mean(self, x: jax.Array, dtype) -> jax.Array:
    return _dense_mean(self.entries, x, dtype)

  def charge(self, direction: str, iterations: int) -> jax.Array:
    del direction, iterations  # exact: the column norms in both directions
    return jnp.sum(jnp.square(self.entries), axis=0)

  def phase_modes(self, iterations: int, period: int) -> jax.Array:
    del iterations, period  # fixed by the view
    return self.modes

  def rounding_shape(self, iterations: int) -> RoundingShape:
    """The column norms are n squares summed on device: n + 3 roundings."""
    del iterations
    entries = np.asarray(self.entries, np.float64)
    return _dense_rounding_shape(entries, np.max(np.sum(entries * entries, axis=0)),
                                 entries.shape[0] + 3.0)

  one_output_per_product = False  # a dense column mixes every later output


def _separated_max(weights: np.ndarray, min_sep: int) -> np.ndarray:
  """V(j) = max over r-separated index sets J ⊆ {j, …, n−1} of Σ_{t∈J} weights[t] (weights ≥ 0).

  ``weights`` is (n, k): k independent problems at once. Returns V of shape
  (n + 1, k) with V(n) = 0, by V(j) = max(V(j+1), w_j + V(j+r)).
  """
  n = weights.shape[0]
  values = np.zeros((n + min_sep, weights.shape[1]))
  for j in range(n - 1, -1, -1):
    values[j] = np.maximum(values[j + 1], weights[j] + values[j + min_sep])
  return values[:n + 1]


def later_cross_term_bounds(entries: Any, min_sep: int) -> np.ndarray:
  """M_i = max over {j₁ < j₂ < …} ⊆ [i + r, n) with gaps ≥ r of Σ_k c_iᵀc_{j_k}.

  Claim: for every participation pattern x allowed by r-min-sep,
  ‖Cx‖² ≤ Σ_i x_i (s_i + 2M_i). Proof: ‖Cx‖² = Σ_i x_i s_i + 2Σ_{i<j} x_i x_j
  c_iᵀc_j. Fix i with x_i = 1; the later participations {j > i : x_j = 1}
  start at ≥ i + r with gaps ≥ r, so they are one of the index sets in the max
  and Σ_{j>i} x_j c_iᵀc_j ≤ M_i. Hence for y ∈ ℝⁿ
  exp((2yᵀCx − ‖Cx‖²)/(2σ²)) ≥ Π_{i: x_i=1} exp((2⟨c_i, y⟩ − s_i − 2M_i)/(2σ²)),
  and taking the expectation over x (the r-min-sep chain) gives
  P(y)/Q(y) ≥ the value of recursion (6) with ℓ_i lowered by M_i/σ²: a lower
  bound on ln P/Q, i.e. an upper bound on the ``add`` loss ln Q/P.

  Computed per row i of the Gram matrix G = CᵀC (entries ≥ 0 since C ≥ 0) by
  the dynamic programme V_i(j) = max(V_i(j+1), G_ij + V_i(j+r)), all i at once:
  O(n³) for G, O(n²) for the programme, (n + r)·n float64 of memory (dense C
  is for n up to a few thousand). The result is inflated by a relative 4n·2⁻⁵² so that floating
  point rounding cannot make it smaller than the exact maximum.

  Args:
    entries: C, n×n, lower-triangular, non-negative.
    min_sep: r >= 1.

  Returns:
    float64 array M of shape (n,), M_i = 0 when i + r >= n.

  References:
    Dong & Ganesh (2026), App. B, Lemma B.1 (the upper bound this complements;
    its justification covers the ``remove`` direction only, so ``add`` needs this
    lower bound, which is not in the paper).
  """
  c = _entries(entries)  # the claim needs C ≥ 0 lower-triangular: checked, O(n²)
  r = _validate.integer_at_least('min_sep', min_sep, 1)
  n = c.shape[0]
  gram = c.T @ c
  # Column i of V needs only j ≥ i + r; V(j) is computed for every i at once.
  values = _separated_max(gram.T, r)  # values[j, i] = V_i(j)
  index = np.arange(n)
  bounds = np.where(index + r < n, values[np.minimum(index + r, n), index], 0.0)
  return bounds * (1.0 + 4.0 * n * 2.0**-52)


def sensitivity_bound_squared(entries: Any, min_sep: int) -> float:
  """An upper bound on max_x ‖Cx‖² over r-separated participation patterns x.

  max over r-separated index sets of Σ_i (s_i + 2M_i) (``later_cross_term_bounds``
  shows ‖Cx‖² ≤ Σ x_i (s_i + 2M_i)); exact for r = 1 (all rounds: ‖C𝟏‖²) and
  for banded C with at most r bands. Used for the unamplified fallback, where
  over-estimating the sensitivity is conservative.

  References:
    Dong & Ganesh (2026), App. B.
  """
  c = _entries(entries)
  r = _validate.integer_at_least('min_sep', min_sep, 1)
  weights = np.sum(c * c, axis=0) + 2.0 * later_cross_term_bounds(c, r)
  return float(_separated_max(weights[:, None], r)[0, 0])


@functools.lru_cache(maxsize=8)
def _inverse_band(matrix: LowerTriangular) -> np.ndarray | None:
  n = matrix.iterations
  inverse = linalg.solve_triangular(matrix.entries, np.eye(n), lower=True)
  scale = float(np.max(np.abs(inverse)))
  column = inverse[:, 0]
  length = int(np.max(np.nonzero(np.abs(column) > 1e-12 * scale)[0])) + 1
  band = column[:length]
  if np.max(np.abs(inverse - _toeplitz_matrix(np.pad(band, (0, n - length))))) > 1e-12 * scale:
    return None
  return band


@functools.lru_cache(maxsize=8)
def _kernel_terms(matrix: LowerTriangular, min_sep: int) -> RMinSepTerms:
  entries = matrix.entries
  return RMinSepTerms(entries, np.sum(entries * entries, axis=0),
                      later_cross_term_bounds(entries, min_sep))


def square_root_inverse_band(bands: int) -> np.ndarray:
  """First ``bands`` Taylor coefficients of (1 − z)^{1/2}: [1, −1/2, −1/8, −1/16, −5/128, …].

  With all n bands this is the first column of A^{−1/2} (A the prefix-sum
  matrix); truncated, it is the band of C⁻¹ of the BISR factorisation.

  References:
    Kalinin, Lampert, arXiv 2505.12128 (banded inverse square root).
  """
  m = _validate.integer_at_least('bands', bands, 1)
  h = np.empty(m)
  h[0] = 1.0
  for k in range(1, m):
    h[k] = h[k - 1] * (k - 1.5) / k
  return h


def banded_inverse_square_root(iterations: int, bands: int) -> LowerTriangular:
  """BISR strategy: C⁻¹ = the ``bands``-banded Toeplitz truncation of A^{−1/2}.

  C = H⁻¹ is dense, lower-triangular Toeplitz and non-negative (the band has
  h₀ = 1 and h_k < 0 beyond it; see ``LowerTriangular.from_inverse_band``).
  With ``bands = iterations`` C = A^{1/2}, the square-root factorisation.

  Args:
    iterations: n >= 1.
    bands: number of bands of C⁻¹, in [1, iterations].

  References:
    Kalinin, Lampert, "Back to square roots: an optimal bound on the matrix
    factorization error for multi-epoch differentially private SGD",
    arXiv 2505.12128 (BISR); Schuchardt & Kalinin (2026) §5 and Fig. 1 use it.
  """
  n = _validate.integer_at_least('iterations', iterations, 1)
  m = _validate.integer_at_least('bands', bands, 1)
  if m > n:
    raise InputError(f'bands must be in [1, iterations={n}], got {m}')
  return LowerTriangular.from_inverse_band(square_root_inverse_band(m), n)


def _inverse_band_from_params(theta: jax.Array) -> jax.Array:
  """h = (1, −|θ₁|, …): h₀ > 0 and h_k ≤ 0 keep C = H⁻¹ non-negative."""
  return jnp.concatenate([jnp.ones(1, theta.dtype), -jnp.abs(theta)])


def _banded_inverse_objective(h: jax.Array, n: int, r: int | None) -> jax.Array:
  """(1/n)‖A H‖_F² · sens², sens² = ‖C x₀‖², x₀ the earliest r-separated pattern (or e₀).

  A H is lower-triangular Toeplitz with first column S_d = Σ_{k ≤ min(d, m−1)} h_k,
  so ‖AH‖_F² = Σ_d (n − d) S_d².
  """
  m = h.shape[0]
  partial = jnp.cumsum(h)[np.minimum(np.arange(n), m - 1)]
  error = jnp.sum((n - np.arange(n)) * jnp.square(partial)) / n
  column = toeplitz_solve(h, jnp.zeros(n, h.dtype).at[0].set(1.0))
  if r is None:
    return error * jnp.sum(jnp.square(column))
  pattern = jnp.asarray((np.arange(n) % r) == 0, h.dtype)
  return error * jnp.sum(jnp.square(jnp.convolve(pattern, column)[:n]))


@functools.partial(jax.jit, static_argnames=('n', 'r', 'max_steps'))
def _run_banded_inverse(theta0: jax.Array, n: int, r: int | None, max_steps: int):
  return minimize_lbfgs(
      lambda theta: _banded_inverse_objective(_inverse_band_from_params(theta), n, r), theta0,
      max_steps)


@scoped_x64
def optimize_banded_inverse(iterations: int, bands: int, *, min_sep: int | None = None,
                            max_steps: int = 250) -> LowerTriangular:
  """BandInvMF: C = H⁻¹ with H banded Toeplitz, optimised for prefix sums, C ≥ 0.

  Minimises (1/n)‖A C⁻¹‖_F²·sens²(C) over bands h = (1, −|θ₁|, …, −|θ_{m−1}|)
  (the sign pattern that keeps C non-negative, as the App. B accountant needs)
  with ``optax.lbfgs`` from the BISR band. sens² is ‖c₀‖² (single
  participation) or, with ``min_sep=r``, ‖C x₀‖² for x₀ the participations at
  rounds 0, r, 2r, …: a utility heuristic only; accounting is done on the
  returned C by the App. B bounds whatever its origin. The result is scaled to
  unit maximum column norm.

  Args:
    iterations: n >= 1.
    bands: m, number of bands of C⁻¹, in [1, iterations].
    min_sep: r >= 1 or ``None``.
    max_steps: L-BFGS iterations, >= 1.

  Returns:
    ``LowerTriangular`` C.

  References:
    Kalinin, Lampert, arXiv 2505.12128 (banded-inverse factorisations);
    Dong & Ganesh (2026), App. B.2–B.3; Schuchardt & Kalinin (2026) §5 and Fig. 1
    (BandInvMF).
  """
  n = _validate.integer_at_least('iterations', iterations, 1)
  m = _validate.integer_at_least('bands', bands, 1)
  if m > n:
    raise InputError(f'bands must be in [1, iterations={n}], got {m}')
  r = None if min_sep is None else _validate.integer_at_least('min_sep', min_sep, 1)
  steps = _validate.integer_at_least('max_steps', max_steps, 1)
  band = square_root_inverse_band(m)
  if m > 1:
    theta0 = jnp.asarray(-band[1:])
    with jax.numpy_dtype_promotion('standard'):  # optax.lbfgs mixes int32/int64 counters
      theta, _, _ = _run_banded_inverse(theta0, n=n, r=r, max_steps=steps)
    band = np.concatenate([[1.0], -np.abs(np.asarray(theta, np.float64))])
    if not np.all(np.isfinite(band)):
      raise RuntimeError(f'L-BFGS diverged: non-finite inverse band for iterations={n}, '
                         f'bands={m}')
  matrix = LowerTriangular.from_inverse_band(band, n)
  return LowerTriangular(matrix.entries / math.sqrt(float(np.max(np.sum(matrix.entries**2,
                                                                           axis=0)))))


# ------------------------------------------------------------------- config keys (config.py)
@config_key('inverse_square_root_bands', 'count')
def _inverse_square_root(value, *, iterations, min_sep) -> LowerTriangular:
  """BISR: the dense C whose inverse is the m-banded truncation of A^{−1/2}
  (``banded_inverse_square_root``), accounted with the App. B bounds of Dong & Ganesh (2026)."""
  del min_sep
  return banded_inverse_square_root(iterations, value)


def _inverse_stand_in(value, *, iterations) -> tuple[LowerTriangular, str]:
  return (banded_inverse_square_root(iterations, value),
          f'timed with the BISR matrix of {value} inverse bands for the optimised one')


@config_key('optimized_inverse_bands', 'count', timing_stand_in=_inverse_stand_in)
def _optimized_inverse(value, *, iterations, min_sep) -> LowerTriangular:
  """BandInvMF: C = H⁻¹ with H m-banded, optimised by L-BFGS for the scheme's min_sep
  (``optimize_banded_inverse``) when the config is read; App. B bounds."""
  return optimize_banded_inverse(iterations, value, min_sep=min_sep)
