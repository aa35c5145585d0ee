"""Device helpers shared by several scheme kernels (JAX, un-jitted).

References:
  Andy Dong and Arun Ganesh, "Privacy Amplification for BandMF via b-Min-Sep Subsampling",
  arXiv:2602.09338 (v2): §5 (Eq. (1)) (docs/references.md).
"""

from __future__ import annotations

import jax
import jax.numpy as jnp
import numpy as np

from jaxacct.conventions import Stream
from jaxacct.montecarlo.engine.keys import split_in_two32, word_pairs
from jaxacct.errors import InputError


def fold(keys: jax.Array, code: int) -> jax.Array:
  """fold_in(k, code) for every key of a batch (one sub-stream per sample)."""
  return jax.vmap(lambda k: jax.random.fold_in(k, int(code)))(keys)


def stream_words(keys: jax.Array, stream: Stream, length: int) -> jax.Array:
  """``length`` raw 64-bit words per sample from its ``stream`` sub-key, batch-major (N, length)."""
  return jax.vmap(lambda k: jax.random.bits(jax.random.fold_in(k, int(stream)), (length,),
                                            jnp.uint64))(keys)


def bernoulli_trials(keys: jax.Array, length: int, sampling_prob: jax.Array) -> jax.Array:
  """Bernoulli(p) trials, batch-major bool (N, length); P[True] = ⌊p·2⁶⁴⌋/2⁶⁴ (or 1 at p = 1).

  Stream ``TRIALS``. A trial compares a raw 64-bit word with ⌊p·2⁶⁴⌋ (exact to 2⁻⁶⁴, cheaper
  than forming a float uniform). Rounding p down by < 2⁻⁶⁴ changes the pattern law by a
  total variation of at most n·2⁻⁶⁴ per sample, negligible against any δ reported.
  """
  words = stream_words(keys, Stream.TRIALS, length)
  below_one = sampling_prob < 1.0
  # float64 → uint64 is exact here: p·2⁶⁴ < 2⁶⁴ has at most 53 significant bits.
  threshold = jnp.where(below_one, sampling_prob, 0.0) * 2.0**64
  return (words < threshold.astype(jnp.uint64)) | ~below_one


def start_keys(keys: jax.Array) -> jax.Array:
  """Stream ``START``: warm-start state, cyclic phase or balls-in-bins bin."""
  return fold(keys, Stream.START)


def log_terms(sampling_prob: jax.Array, dtype) -> tuple[jax.Array, jax.Array]:
  """(log p, log(1 − p)) in ``dtype``; log(1 − p) = −inf at p = 1 is exact in logaddexp."""
  return jnp.log(sampling_prob).astype(dtype), jnp.log1p(-sampling_prob).astype(dtype)


def sum_by_phase(values: jax.Array, cycle: int) -> jax.Array:
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


def inverse_two_variance(noise_multiplier: jax.Array, dtype) -> jax.Array:
  """1/(2σ²) in the kernel dtype: kernels multiply by it and never divide by σ².

  Device code never divides by a traced scalar: XLA may rewrite x / broadcast(s) as
  x · broadcast(1/s) in some fusions and not others, and the choice depends on the
  program around it (it differed between 1 and ≥ 2 devices), changing the last bit.
  An explicit reciprocal leaves it nothing to rewrite.
  """
  return reciprocal(2.0 * jnp.square(noise_multiplier)).astype(dtype)


def reciprocal(value: jax.Array) -> jax.Array:
  """1/value, the one division of a traced scalar allowed in device code (see above)."""
  return 1.0 / value


def per_round_ratios(d: jax.Array, noise_multiplier: jax.Array, view, direction: str,
                     iterations: int) -> jax.Array:
  """ℓ_i = (2d_i − s_i)/(2σ²) with the view's charge s for ``direction``.

  The log of the Gaussian ratio N(c_i, σ²I)/N(0, σ²I) over round i's window in Eq. (1) of
  Dong & Ganesh (2026) §5 (0-indexed; c_i right-zero-padded in the last rounds).
  """
  charge = view.charge(direction, iterations).astype(d.dtype)[None, :]
  return (2.0 * d - charge) * inverse_two_variance(noise_multiplier, d.dtype)


# 32-bit device program (``precision="float32"``): the same 64-bit words as (hi, lo) uint32
# pairs (``keys.word_pairs``) and integer thresholds computed exactly on the host, so every
# participation pattern equals the one the float64 program draws from the same key (up to that
# program's own rounding at a threshold, probability ~10⁻¹⁶ per draw).


def stream_word_pairs(keys: jax.Array, stream: Stream, length: int) -> tuple[jax.Array, jax.Array]:
  """``stream_words`` as uint32 (hi, lo), each batch-major (N, length)."""
  return jax.vmap(lambda k: word_pairs(jax.random.fold_in(k, int(stream)), length))(keys)


def word_split(value: int) -> tuple[int, int]:
  """Host: a 64-bit unsigned integer as its (high, low) 32-bit halves."""
  return value >> 32, value & 0xFFFFFFFF


def words_at_most(hi: jax.Array, lo: jax.Array, bound_hi: jax.Array,
                  bound_lo: jax.Array) -> jax.Array:
  """(hi, lo) ≤ (bound_hi, bound_lo) as 64-bit unsigned integers, elementwise."""
  return (hi < bound_hi) | ((hi == bound_hi) & (lo <= bound_lo))


def bernoulli_threshold(sampling_prob: float) -> np.ndarray:
  """Host: ``bernoulli_trials``'s threshold ⌊p·2⁶⁴⌋ as uint32 [hi, lo, p = 1]."""
  p = float(sampling_prob)
  if p >= 1.0:
    return np.asarray([0, 0, 1], np.uint32)
  threshold = int(p * 2.0**64)  # exact: p·2⁶⁴ < 2⁶⁴ has at most 53 significant bits
  return np.asarray([*word_split(threshold), 0], np.uint32)


def bernoulli_trials32(keys: jax.Array, length: int, threshold: jax.Array) -> jax.Array:
  """``bernoulli_trials`` in 32-bit code: the same trials from the same words, bool (N, length).

  ``threshold`` is ``bernoulli_threshold(p)``: word < ⌊p·2⁶⁴⌋ is compared as a pair.
  """
  hi, lo = stream_word_pairs(keys, Stream.TRIALS, length)
  below = (hi < threshold[0]) | ((hi == threshold[0]) & (lo < threshold[1]))
  return below | (threshold[2] == 1)


def rounding_shape(mechanism):
  """Host: the ``strategy.RoundingShape`` of ``mechanism``'s kernel view (the 32-bit margin)."""
  view = mechanism.matrix.kernel_view(mechanism.scheme)
  return view.rounding_shape(mechanism.iterations)


def tree_sum(values: jax.Array) -> jax.Array:
  """Σ over the last axis as a binary tree (zero-padded to a power of two; adding 0 is exact).

  Each term meets ⌈log₂ n⌉ roundings, the componentwise bound the 32-bit margin uses
  (``margin.poisson_error``); XLA does not reassociate floating-point sums.
  """
  width = values.shape[-1]
  padded = 1 << max(0, (width - 1).bit_length())
  values = jnp.pad(values, [(0, 0)] * (values.ndim - 1) + [(0, padded - width)])
  while values.shape[-1] > 1:
    half = values.shape[-1] // 2
    values = values[..., :half] + values[..., half:]
  return values[..., 0]


def uniform_index32(keys: jax.Array, span: int) -> jax.Array:
  """``jax.random.randint(k, (), 0, span)`` of the float64 program (int64) per key, in 32-bit
  code: the same index from the same words, int32 (N,).

  JAX draws two 64-bit words H, L from ``split(k)`` (here ``keys.split_in_two32``) and returns (H·2⁶⁴ + L) mod span (its
  ``(H mod s)·(2⁶⁴ mod s) + L mod s`` identity); here the 128-bit number is reduced by Horner's
  rule over bytes, r ← (256·r + byte) mod span, exact in uint32 for span < 2²⁴.
  """
  if not 1 <= span < 1 << 24:
    raise InputError(f'span must be in [1, 2**24) for the 32-bit program, got {span}')

  def one(key):
    high_key, low_key = split_in_two32(key)
    words = word_pairs(high_key, 1) + word_pairs(low_key, 1)
    modulus = jnp.uint32(span)
    rest = jnp.uint32(0)
    for word in words:
      for shift in (24, 16, 8, 0):
        byte = (word[0] >> jnp.uint32(shift)) & jnp.uint32(0xFF)
        rest = (rest * jnp.uint32(256) + byte) % modulus
    return rest.astype(jnp.int32)
  return jax.vmap(one)(keys)
