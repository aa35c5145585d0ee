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
  start), its warm-start corollary, §2.2–2.3 (balls-in-bins, cyclic Poisson).
"""

from __future__ import annotations

import jax
import jax.numpy as jnp
from jax import lax

from jaxacct.matrices import BandedToeplitz
from jaxacct.montecarlo._spec import FFT_MIN_BANDS, KernelSpec
from jaxacct.montecarlo.participation import balls_in_bins_modes

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


def log_ratio_from_dots(spec: KernelSpec, d: jax.Array, sampling_prob: jax.Array,
                        noise_multiplier: jax.Array, matrix: BandedToeplitz) -> jax.Array:
  """ln P(y)/Q(y) from the sliding dot products d = Cᵀy (N, n) (y enters only through d)."""
  dtype = d.dtype
  if spec.kind == 'balls_in_bins':
    modes = balls_in_bins_modes(spec.iterations, spec.period, matrix.c_col)
    return balls_in_bins_log_ratio(d, noise_multiplier, spec.period, modes)
  norms = matrix.column_squared_norms(spec.iterations).astype(dtype)[None, :]
  ell = (2.0 * d - norms) / (2.0 * jnp.square(noise_multiplier)).astype(dtype)
  if spec.kind == 'bminsep':
    return bminsep_log_ratio(ell, sampling_prob, spec.period, spec.warm_start)
  return cyclic_poisson_log_ratio(ell, sampling_prob, spec.period, spec.partition)


def log_ratio(spec: KernelSpec, y: jax.Array, sampling_prob: jax.Array,
              noise_multiplier: jax.Array, matrix: BandedToeplitz) -> jax.Array:
  """ln P(y)/Q(y) for batch-major outputs y (N, n) of the mechanism described by ``spec``."""
  d = sliding_dot_products(y, matrix.c_col.astype(y.dtype))
  return log_ratio_from_dots(spec, d, sampling_prob, noise_multiplier, matrix)
