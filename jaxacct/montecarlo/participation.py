"""Samplers of the sensitive example's participation and of the mean C·x (device, JAX).

Each sampler draws, for a chunk of samples with one key each, the
participation pattern x of the sensitive example under its scheme and returns
the noiseless output mean C·x, batch-major ``(num_samples, iterations)``.
Kernels are not jit-compiled here: ``sampling.py`` composes and jits them.

Randomness per sample (folded from the sample's key by purpose): 0 → the
per-round Bernoulli trials, 1 → the warm-start state / phase / bin. A
Bernoulli(p) trial compares a raw 64-bit word with ⌊p·2⁶⁴⌋ (exact to 2⁻⁶⁴,
cheaper than forming a float uniform).

References:
  seed 000: Dong & Ganesh, arXiv 2602.09338v2, §2.2–2.4, §4 (Fig. 1 Markov
  chain, Algorithms 1 and 2), spec 000 §4.5.
"""

from __future__ import annotations

import jax
import jax.numpy as jnp
from jax import lax

from jaxacct.matrices import BandedToeplitz
from jaxacct.montecarlo._spec import FFT_MIN_BANDS, KernelSpec


def _bernoulli_trials(keys: jax.Array, length: int, sampling_prob: jax.Array) -> jax.Array:
  """Bernoulli(p) trials, batch-major bool (N, length); P[True] = ⌊p·2⁶⁴⌋/2⁶⁴ (or 1 at p = 1).

  Rounding p down by < 2⁻⁶⁴ changes the pattern law by a total variation of at
  most n·2⁻⁶⁴ per sample, negligible against any δ reported.
  """
  words = jax.vmap(lambda k: jax.random.bits(jax.random.fold_in(k, 0), (length,), jnp.uint64))(keys)
  below_one = sampling_prob < 1.0
  # float64 → uint64 is exact here: p·2⁶⁴ < 2⁶⁴ has at most 53 significant bits.
  threshold = jnp.where(below_one, sampling_prob, 0.0) * 2.0**64
  return (words < threshold.astype(jnp.uint64)) | ~below_one


def _start_key(keys: jax.Array) -> jax.Array:
  return jax.vmap(lambda k: jax.random.fold_in(k, 1))(keys)


def mean_of_separated_participations(x: jax.Array, c_col: jax.Array) -> jax.Array:
  """C·x for participations at least len(c_col) rounds apart, batch-major (N, n).

  Columns of separated participations do not overlap, so row r of C·x is
  c[r − t] for the last participation t ≤ r with r − t < len(c), else 0.
  Short bands use m shifted multiply-adds (fast, fused); long bands an O(n)
  ``cummax`` and gather instead of an O(n·m) product.

  Args:
    x: bool ``(N, n)`` participation indicators, batch-major.
    c_col: ``(m,)`` band of C.
  """
  num, n = x.shape
  m = c_col.shape[0]
  if m < FFT_MIN_BANDS:
    padded = jnp.pad(x.astype(c_col.dtype), ((0, 0), (m - 1, 0)))
    mean = c_col[0] * padded[:, m - 1:]
    for k in range(1, m):
      mean = mean + c_col[k] * padded[:, m - 1 - k:m - 1 - k + n]
    return mean
  rounds = jnp.arange(n, dtype=jnp.int32)[None, :]
  last = lax.cummax(jnp.where(x, rounds, jnp.int32(-m - 1)), axis=1)
  gap = rounds - last
  return jnp.where(gap < m, c_col[jnp.clip(gap, 0, m - 1)], 0.0)


def bminsep_participation(spec: KernelSpec, keys: jax.Array, sampling_prob: jax.Array) -> jax.Array:
  """Participation under b-min-sep (Alg. 1 cold / Alg. 2 warm), batch-major bool (N, n).

  The Markov chain of seed 000 Fig. 1 as a renewal process (spec 000 §4.5): an
  available example joins after a Geometric(p) number of rounds (support
  {1, 2, …}) and is then barred for b − 1 rounds, so participation times are
  t₁ = J + G₁ − 1 and t_{k+1} = t_k + (b − 1) + G_{k+1}, with at most
  K = ⌈n/b⌉ of them before round n. J is the first eligible round: 0 (cold
  start) or, for warm start, the stationary law of Alg. 2: 0 w.p.
  1/(1 + (b−1)p), else uniform on {1, …, b−1}. K geometric draws per sample
  replace n Bernoulli trials; b = 1 (Poisson) keeps the per-round trials.
  G = 1 + ⌊ln U / ln(1 − p)⌋ with U = (W + ½)·2⁻⁶⁴ from a 64-bit word W
  (Pr[G > k] = (1 − p)^k; at p = 1, ln(1 − p) = −∞ gives G = 1). U rounds to
  1.0 with probability ~2⁻⁵⁴ (forcing G = 1): a total-variation error of at most
  n·2⁻⁵⁴ per sample, far below any δ reported.
  """
  n, b = spec.iterations, spec.period
  if b == 1:
    return _bernoulli_trials(keys, n, sampling_prob)
  num_gaps = -(-n // b)
  words = jax.vmap(lambda k: jax.random.bits(jax.random.fold_in(k, 0), (num_gaps,), jnp.uint64))(
      keys)
  uniform = (words.astype(jnp.float64) + 0.5) * 2.0**-64
  log_stay = jnp.log1p(-sampling_prob)
  # Rounds waited, capped at n + 1 (later participations fall outside the run anyway).
  waits = jnp.minimum(jnp.floor(jnp.log(uniform) / log_stay), n + 1.0).astype(jnp.int64)
  if spec.warm_start:
    v = jax.vmap(lambda k: jax.random.uniform(k, (), jnp.float64))(_start_key(keys))
    p_available = 1.0 / (1.0 + (b - 1) * sampling_prob)
    rank = jnp.floor((v - p_available) / (1.0 - p_available) * (b - 1)).astype(jnp.int32)
    first_eligible = jnp.where(v < p_available, 0, 1 + jnp.clip(rank, 0, b - 2))
  else:
    first_eligible = jnp.zeros(keys.shape[0], jnp.int32)
  # t_k = J + Σ_{j≤k} (G_j − 1) + (k − 1)·b  (0-based k − 1 = column index).
  times = (first_eligible[:, None].astype(jnp.int64) + jnp.cumsum(waits, axis=1)
           + b * jnp.arange(num_gaps, dtype=jnp.int64)[None, :])  # int64: no overflow for any n
  return jax.vmap(lambda t: jnp.zeros(n, bool).at[t].set(True, mode='drop'))(times)


def cyclic_poisson_participation(spec: KernelSpec, keys: jax.Array,
                                 sampling_prob: jax.Array) -> jax.Array:
  """Participation under cyclic Poisson, batch-major bool (N, n).

  ``independent``: a uniform phase s per sample; ``equal_split``: phase 0 (the
  worst phase, see ``CyclicPoisson``). One Bernoulli(p) trial per round of the phase.
  """
  n, cycle = spec.iterations, spec.period
  trials = _bernoulli_trials(keys, -(-n // cycle), sampling_prob)  # (N, cycles)
  if spec.partition == 'independent':
    phase = jax.vmap(lambda k: jax.random.randint(k, (), 0, cycle))(_start_key(keys))
  else:
    phase = jnp.zeros(keys.shape[0], jnp.int32)
  in_phase = (jnp.arange(n)[None, :] % cycle) == phase[:, None]
  return in_phase & jnp.repeat(trials, cycle, axis=1)[:, :n]


def balls_in_bins_modes(iterations: int, cycle_length: int, c_col: jax.Array) -> jax.Array:
  """The T mode vectors m_j = C·1[i ≡ j (mod T)], shape (T, n), in O(T·n).

  Exact also when len(c) > T (the shifted copies of c then overlap): row r of
  m_j is Σ c_k over k ≤ min(r, m−1) with k ≡ r − j (mod T), read from strided
  cumulative sums of c (seed 000 §2.3).
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


def sample_mean(spec: KernelSpec, keys: jax.Array, sampling_prob: jax.Array,
                matrix: BandedToeplitz) -> jax.Array:
  """C·x for one draw of the sensitive example's participation per key, batch-major (N, n)."""
  c_col = matrix.c_col
  if spec.kind == 'balls_in_bins':
    bins = jax.vmap(lambda k: jax.random.randint(k, (), 0, spec.period))(_start_key(keys))
    return balls_in_bins_modes(spec.iterations, spec.period, c_col)[bins]
  sampler = {'bminsep': bminsep_participation,
             'cyclic_poisson': cyclic_poisson_participation}[spec.kind]
  return mean_of_separated_participations(sampler(spec, keys, sampling_prob), c_col)
