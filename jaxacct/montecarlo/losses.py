"""Exact privacy-loss recursions in log space (device, JAX).

Given outputs y (batch-major ``(N, n)``) of the dominating pair
P = Σ_x p_x N(Cx, σ²I), Q = N(0, σ²I), these kernels return ln P(y)/Q(y).
Everything is computed from the sliding dot products d_i = Σ_k c_k y_{i+k}
(column i of C dotted with y) and the truncated column squared norms s_i,
through the per-round log-likelihood ratios

  ℓ_i = (2 d_i − s_i) / (2σ²)                           (spec 000 §4.3).

Layout: everything stays batch-major ``(N, n)`` up to ℓ, and only the b-min-sep
recursion transposes (ℓ → time-major) for its ``lax.scan`` over rounds. Fusing
a time-major transpose of y into the sliding sums made XLA read them with a
stride of n (measured 2–4× slower, ``benchmarks/RESULTS.md``).

Kernels are not jit-compiled here; ``sampling.py`` composes and jits them.

References:
  seed 000: Dong & Ganesh, arXiv 2602.09338v2: Eq. (1) and Theorem 5.1 (cold
  start), its warm-start corollary, §2.2–2.3 (balls-in-bins, cyclic Poisson),
  App. D (truncated b-min-sep: Corollary D.2 and the P/R, Q/R recursions).
"""

from __future__ import annotations

import jax
import jax.numpy as jnp
from jax import lax

from jaxacct.montecarlo._spec import FFT_MIN_BANDS, KernelSpec, SchemeParams
from jaxacct.montecarlo.participation import balls_in_bins_modes, multiplicity_log_weights

def sliding_dot_products(y: jax.Array, c_col: jax.Array) -> jax.Array:
  """d_i = Σ_{k < m} c_k y_{i+k} with y_j = 0 for j ≥ n, i.e. d = Cᵀy; batch-major (N, n)."""
  n = y.shape[1]
  m = c_col.shape[0]
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


def _log_terms(sampling_prob: jax.Array, dtype) -> tuple[jax.Array, jax.Array]:
  # log(1 − p) = −inf at p = 1 is handled exactly by logaddexp(−inf, a) = a.
  return jnp.log(sampling_prob).astype(dtype), jnp.log1p(-sampling_prob).astype(dtype)


def bminsep_log_ratio(ell: jax.Array, sampling_prob: jax.Array, min_sep: int,
                      warm_start: bool) -> jax.Array:
  """ln P/Q under b-min-sep by the suffix recursion of seed 000 Eq. (1), in log space.

  L_i = logaddexp(log(1−p) + L_{i+1}, log p + ℓ_i + L_{i+b}), L_j = 0 for j ≥ n
  (0-indexed form of f_i with L_i = log f_{i+1}); cold start (Theorem 5.1):
  L₀; warm start (corollary for Algorithm 2):
  logsumexp(L₀, log p + L₁, …, log p + L_{b−1}) − log(1 + (b−1)p).

  A reversed-time ``lax.scan`` keeps a circular buffer of b rows (slot i mod b):
  slot i mod b holds L_{i+b} until it is overwritten by L_i, and its zero
  initialisation is the boundary condition (also when b > n). b = 1 (Poisson)
  factorises into Σ_i log(1 − p + p e^{ℓ_i}).

  Args:
    ell: per-round log-likelihood ratios ℓ, batch-major (N, n).
    sampling_prob: p (traced scalar).
    min_sep: b (static).
    warm_start: Algorithm 2 (static).
  """
  dtype = ell.dtype
  log_p, log_q = _log_terms(sampling_prob, dtype)
  if min_sep == 1:
    return jnp.sum(jnp.logaddexp(log_q, log_p + ell), axis=1)
  num, n = ell.shape
  b = min_sep

  def step(buffer, inputs):
    i, ell_i = inputs
    next_row = lax.dynamic_index_in_dim(buffer, (i + 1) % b, keepdims=False)
    far_row = lax.dynamic_index_in_dim(buffer, i % b, keepdims=False)
    row = jnp.logaddexp(log_q + next_row, log_p + ell_i + far_row)
    return lax.dynamic_update_index_in_dim(buffer, row, i % b, axis=0), None

  buffer, _ = lax.scan(step, jnp.zeros((b, num), dtype), (jnp.arange(n), ell.T), reverse=True)
  if not warm_start:
    return buffer[0]
  combined = jax.nn.logsumexp(
      jnp.concatenate([buffer[:1], log_p + buffer[1:]], axis=0), axis=0)
  return combined - jnp.log1p((b - 1) * sampling_prob).astype(dtype)


def _sum_by_phase(values: jax.Array, cycle: int) -> jax.Array:
  """(N, n) → (N, T): Σ over rounds i ≡ j (mod T) of values_i.

  An unrolled sum of ⌈n/T⌉ column slabs: a reshape-and-reduce fused with the
  sliding sums measured 4–8× slower on CPU (benchmarks/RESULTS.md).
  """
  n = values.shape[1]
  total = values[:, :min(cycle, n)]
  if n < cycle:
    return jnp.pad(total, ((0, 0), (0, cycle - n)))
  for start in range(cycle, n, cycle):
    slab = values[:, start:start + cycle]
    total = total + jnp.pad(slab, ((0, 0), (0, cycle - slab.shape[1])))
  return total


def cyclic_poisson_log_ratio(ell: jax.Array, sampling_prob: jax.Array, cycle: int,
                             partition: str) -> jax.Array:
  """ln P/Q under cyclic Poisson (seed 000 §2.2; requires len(c) ≤ T).

  Per phase s the rounds i ≡ s are independent Poisson trials with disjoint
  output windows, so ln P_s/Q = Σ_{i≡s} log(1 − p + p e^{ℓ_i}).
  ``independent``: L = logsumexp_s(·) − log T; ``equal_split``: phase 0.
  """
  log_p, log_q = _log_terms(sampling_prob, ell.dtype)
  per_phase = _sum_by_phase(jnp.logaddexp(log_q, log_p + ell), cycle)
  if partition == 'equal_split':
    return per_phase[:, 0]
  return jax.nn.logsumexp(per_phase, axis=1) - jnp.log(cycle).astype(ell.dtype)


def balls_in_bins_log_ratio(d: jax.Array, noise_multiplier: jax.Array, cycle: int,
                            modes: jax.Array) -> jax.Array:
  """ln P/Q under fixed-bin balls-in-bins (seed 000 §2.3).

  L = logsumexp_j (2⟨m_j, y⟩ − ‖m_j‖²)/(2σ²) − log T with ⟨m_j, y⟩ = Σ_{i≡j} d_i,
  exact for any band length (‖m_j‖² includes the cross terms of overlapping
  columns when len(c) > T).
  """
  dtype = d.dtype
  inner = _sum_by_phase(d, cycle)
  norms = jnp.sum(jnp.square(modes), axis=1).astype(dtype)[None, :]
  two_var = (2.0 * jnp.square(noise_multiplier)).astype(dtype)
  return jax.nn.logsumexp((2.0 * inner - norms) / two_var, axis=1) - jnp.log(cycle).astype(dtype)


def truncated_bminsep_log_ratio(d: jax.Array, norms: jax.Array, rest: jax.Array,
                                params: SchemeParams, noise_multiplier: jax.Array, min_sep: int,
                                warm_start: bool) -> jax.Array:
  """ln P(y)/Q(y) of truncated b-min-sep given the other examples' batch sizes r (seed 000 App. D).

  The pair of Corollary D.2 is compared through the reference R = N(0, σ²I)
  (§D, spec 000 §5.3–5.4): with ℓ_i(μ) = (2μ d_i − μ² s_i)/(2σ²) and
  t_i = B/(r_i + 1),

    a^P_i = ℓ_i(1) if r_i < B else logaddexp(log t_i + ℓ_i(2), log(1 − t_i)),
    a^Q_i = 0      if r_i < B else logaddexp(log t_i + ℓ_i(−1), log(1 − t_i)),

  each runs the recursion of Eq. (1) (``bminsep_log_ratio``: the b − 1 barred
  rounds after a participation hold also for Q/R and for truncated-away
  participations), the warm-start combination is applied to P/R and to Q/R
  separately, and ln P/Q = ln P/R − ln Q/R. Both recursions run as one scan of
  2N rows. A block of samples without any truncated round takes the
  untruncated recursion instead (a^Q ≡ 0 makes Q/R ≡ 1), which is exact and
  avoids the mixture terms' transcendentals.

  Args:
    d: sliding dot products Cᵀy, (N, n).
    norms: truncated column squared norms s, (1, n).
    rest: r, (N, n) integers.
    params: p and B (traced).
    noise_multiplier: σ (traced).
    min_sep, warm_start: static.
  """
  truncation = rest >= params.truncated_batch_size

  def untruncated():
    ell = (2.0 * d - norms) / (2.0 * jnp.square(noise_multiplier)).astype(d.dtype)
    return bminsep_log_ratio(ell, params.sampling_prob, min_sep, warm_start)

  # Without a truncated round, a^Q ≡ 0 gives Q/R = 1 exactly and a^P = ℓ(1): the untruncated
  # recursion. Realistic truncation is rare (~10⁻⁹ per round at seed 000 §7.4), so a block
  # almost never pays for the mixture terms below (their transcendentals on every entry).
  return lax.cond(jnp.any(truncation), lambda: _truncated_log_ratio(
      d, norms, rest, truncation, params, noise_multiplier, min_sep, warm_start), untruncated)


def _truncated_log_ratio(d, norms, rest, truncation, params, noise_multiplier, min_sep,
                         warm_start):
  dtype = d.dtype
  two_var = (2.0 * jnp.square(noise_multiplier)).astype(dtype)
  survival = (params.truncated_batch_size.astype(jnp.float64)
              / (rest.astype(jnp.float64) + 1.0))
  log_t = jnp.log(jnp.minimum(survival, 1.0)).astype(dtype)
  log_not_t = jnp.log1p(-jnp.minimum(survival, 1.0)).astype(dtype)  # finite when r ≥ B
  ell_one = (2.0 * d - norms) / two_var
  ell_two = (4.0 * d - 4.0 * norms) / two_var
  ell_minus_one = (-2.0 * d - norms) / two_var
  a_p = jnp.where(truncation, jnp.logaddexp(log_t + ell_two, log_not_t), ell_one)
  a_q = jnp.where(truncation, jnp.logaddexp(log_t + ell_minus_one, log_not_t), 0.0)
  both = bminsep_log_ratio(jnp.concatenate([a_p, a_q.astype(dtype)]), params.sampling_prob,
                           min_sep, warm_start)
  num = d.shape[0]
  return both[:num] - both[num:]


def multi_attribution_log_ratio(d: jax.Array, norms: jax.Array, sampling_prob: jax.Array,
                                two_var: jax.Array, min_sep: int, multiplicity: int) -> jax.Array:
  """ln P/Q of multi-attribution b-min-sep by Theorem 6.1's recursion (seed 000 §6.3), log space.

  f_i = (1 − p)^{k_u} f_{i+1} + Σ_{j=1}^{k_u} Pr[Bin(k_u, p) = j]·N(j c_i)/N(0)·f_{i+b}
  is Eq. (1) with p_u = 1 − (1 − p)^{k_u} in place of p and the per-round
  log-likelihood ratio replaced by the zero-truncated mixture
  a_i = logsumexp_j [log Pr[Bin = j | ≥ 1] + (2j d_i − j² s_i)/(2σ²)], so it
  runs through ``bminsep_log_ratio`` (cold start).
  """
  dtype = d.dtype
  log_p_u, log_weights = multiplicity_log_weights(sampling_prob, multiplicity)
  j = jnp.arange(1, multiplicity + 1, dtype=dtype)
  terms = (log_weights.astype(dtype)
           + (2.0 * j * d[..., None] - jnp.square(j) * norms[..., None]) / two_var)
  return bminsep_log_ratio(jax.nn.logsumexp(terms, axis=-1), jnp.exp(log_p_u), min_sep, False)


def r_min_sep_log_ratio(d: jax.Array, terms, sampling_prob: jax.Array, two_var: jax.Array,
                        min_sep: int, warm_start: bool, direction: str) -> jax.Array:
  """Bounds on ln P/Q for dense non-negative C under r-min-sep (seed 000 App. B), log space.

  ``remove``: recursion (6), ℓ_i = (2⟨c_i, y⟩ − s_i)/(2σ²) with full columns
  c_i, an upper bound on ln P/Q (Lemma B.1: the cross terms dropped from ‖Cx‖²
  are ≥ 0). ``add``: ℓ_i lowered by M_i/σ² (``later_cross_term_bounds``), a
  lower bound on ln P/Q, so the add loss −(this) is ≥ the exact ln Q/P. Each
  bound is conservative only in its own direction (spec 000 §7 "Caution").
  Both factorise over participations and run through Eq. (1)'s recursion
  (which computes E_x Π_{i: x_i = 1} e^{ℓ_i} for the cold or warm r-min-sep chain).

  Args:
    d: ⟨c_i, y⟩ = (Cᵀy)_i, batch-major (N, n).
    terms: ``lower_triangular.RMinSepTerms`` (traced).
    sampling_prob: p. two_var: 2σ². min_sep: r (static).
    warm_start: Algorithm 2 (static). direction: ``"remove"`` or ``"add"`` (static).
  """
  dtype = d.dtype
  charge = terms.squared_norms
  if direction == 'add':
    charge = charge + 2.0 * terms.cross_bounds
  ell = (2.0 * d - charge.astype(dtype)[None, :]) / two_var
  return bminsep_log_ratio(ell, sampling_prob, min_sep, warm_start)


def transpose_products(spec: KernelSpec, y: jax.Array, matrix) -> jax.Array:
  """d = Cᵀy for batch-major y (N, n): sliding dot products (banded) or a matrix product (dense)."""
  if spec.dense:
    # HIGHEST: TPU/GPU default matmuls round to bf16/TF32, far coarser than the kernel dtype.
    return jnp.matmul(y, matrix.entries.astype(y.dtype), precision=lax.Precision.HIGHEST)
  return sliding_dot_products(y, matrix.c_col.astype(y.dtype))


def log_ratio_from_dots(spec: KernelSpec, d: jax.Array, params: SchemeParams,
                        noise_multiplier: jax.Array, matrix,
                        rest: jax.Array | None = None, direction: str = 'remove') -> jax.Array:
  """ln P(y)/Q(y) from d = Cᵀy (N, n) (y enters only through d).

  ``rest`` is the other examples' batch sizes r (N, n) of a truncated scheme
  (``None`` otherwise). ``matrix`` is a ``BandedToeplitz``, or for ``spec.dense``
  ``RMinSepTerms``, whose result is the App. B bound matching ``direction``
  (upper for ``remove``, lower for ``add``); banded results ignore ``direction``.
  """
  dtype = d.dtype
  two_var = (2.0 * jnp.square(noise_multiplier)).astype(dtype)
  if spec.dense:
    return r_min_sep_log_ratio(d, matrix, params.sampling_prob, two_var, spec.period,
                               spec.warm_start, direction)
  if spec.kind == 'balls_in_bins':
    modes = balls_in_bins_modes(spec.iterations, spec.period, matrix.c_col)
    return balls_in_bins_log_ratio(d, noise_multiplier, spec.period, modes)
  norms = matrix.column_squared_norms(spec.iterations).astype(dtype)[None, :]
  if spec.truncated:
    return truncated_bminsep_log_ratio(d, norms, rest, params, noise_multiplier, spec.period,
                                       spec.warm_start)
  if spec.multiplicity > 1:
    return multi_attribution_log_ratio(d, norms, params.sampling_prob, two_var, spec.period,
                                       spec.multiplicity)
  ell = (2.0 * d - norms) / two_var
  if spec.kind == 'bminsep':
    return bminsep_log_ratio(ell, params.sampling_prob, spec.period, spec.warm_start)
  return cyclic_poisson_log_ratio(ell, params.sampling_prob, spec.period, spec.partition)


def log_ratio(spec: KernelSpec, y: jax.Array, params: SchemeParams,
              noise_multiplier: jax.Array, matrix,
              rest: jax.Array | None = None, direction: str = 'remove') -> jax.Array:
  """ln P(y)/Q(y) for batch-major outputs y (N, n) of the mechanism described by ``spec``.

  For a dense C (``spec.dense``) it is the App. B bound for ``direction``.
  """
  d = transpose_products(spec, y, matrix)
  return log_ratio_from_dots(spec, d, params, noise_multiplier, matrix, rest, direction)
