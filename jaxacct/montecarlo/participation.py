"""Samplers of the sensitive example's participation and of the mean C·x (device, JAX).

Each sampler draws, for a chunk of samples with one key each, the
participation pattern x of the sensitive example under its scheme and returns
the noiseless output mean C·x, time-major ``(iterations, num_samples)``.
Kernels are not jit-compiled here: ``sampling.py`` composes and jits them.

Randomness per sample (the key of one sample is split once, by purpose):
``participation`` → the per-round Bernoulli trials, ``start`` → the warm-start
state / phase / bin.

References:
  seed 000: Dong & Ganesh, arXiv 2602.09338v2, §2.2–2.4, §4 (Fig. 1 Markov
  chain, Algorithms 1 and 2), spec 000 §4.5.
"""

from __future__ import annotations

import jax
import jax.numpy as jnp
from jax import lax

from jaxacct.matrices import BandedToeplitz
from jaxacct.montecarlo._spec import KernelSpec


def _uniforms(keys: jax.Array, length: int) -> jax.Array:
  """float64 uniforms on [0, 1), time-major (length, N); float64 keeps p exact to 2⁻⁵³."""
  return jax.vmap(lambda k: jax.random.uniform(k, (length,), jnp.float64))(keys).T


def mean_of_separated_participations(x: jax.Array, c_col: jax.Array) -> jax.Array:
  """C·x for participations at least len(c_col) rounds apart (columns do not overlap).

  Row r of C·x is then c[r − t] for the last participation t ≤ r with
  r − t < len(c), else 0: an O(n) gather instead of an O(n·len(c)) product.

  Args:
    x: bool ``(n, N)`` participation indicators, time-major.
    c_col: ``(m,)`` band of C.
  """
  n = x.shape[0]
  m = c_col.shape[0]
  rounds = jnp.arange(n, dtype=jnp.int32)[:, None]
  last = lax.cummax(jnp.where(x, rounds, jnp.int32(-m - 1)), axis=0)
  gap = rounds - last
  return jnp.where(gap < m, c_col[jnp.clip(gap, 0, m - 1)], 0.0)


def bminsep_participation(spec: KernelSpec, keys: jax.Array, sampling_prob: jax.Array) -> jax.Array:
  """Participation under b-min-sep (Alg. 1 cold / Alg. 2 warm), time-major bool (n, N).

  The Markov chain of seed 000 Fig. 1: an available example joins w.p. p and is
  then barred for b − 1 rounds. Warm start draws the initial state from the
  stationary law of Alg. 2: available w.p. 1/(1 + (b−1)p), else first eligible
  in a round uniform on {1, …, b−1} (spec 000 §4.5).
  """
  n, b = spec.iterations, spec.period
  part_keys = jax.vmap(lambda k: jax.random.fold_in(k, 0))(keys)
  u = _uniforms(part_keys, n)
  if b == 1:
    return u < sampling_prob
  if spec.warm_start:
    start_keys = jax.vmap(lambda k: jax.random.fold_in(k, 1))(keys)
    v = jax.vmap(lambda k: jax.random.uniform(k, (), jnp.float64))(start_keys)
    p_available = 1.0 / (1.0 + (b - 1) * sampling_prob)
    rank = jnp.floor((v - p_available) / (1.0 - p_available) * (b - 1)).astype(jnp.int32)
    countdown = jnp.where(v < p_available, 0, 1 + jnp.clip(rank, 0, b - 2))
  else:
    countdown = jnp.zeros(keys.shape[0], jnp.int32)

  def step(countdown, u_round):
    joins = (countdown == 0) & (u_round < sampling_prob)
    return jnp.where(joins, b - 1, jnp.maximum(countdown - 1, 0)), joins

  _, x = lax.scan(step, countdown.astype(jnp.int32), u)
  return x


def cyclic_poisson_participation(spec: KernelSpec, keys: jax.Array,
                                 sampling_prob: jax.Array) -> jax.Array:
  """Participation under cyclic Poisson, time-major bool (n, N).

  ``independent``: a uniform phase s per sample; ``equal_split``: phase 0 (the
  worst phase, see ``CyclicPoisson``). One Bernoulli(p) trial per round of the phase.
  """
  n, cycle = spec.iterations, spec.period
  num_cycles = -(-n // cycle)
  part_keys = jax.vmap(lambda k: jax.random.fold_in(k, 0))(keys)
  trials = _uniforms(part_keys, num_cycles) < sampling_prob  # (num_cycles, N)
  if spec.partition == 'independent':
    start_keys = jax.vmap(lambda k: jax.random.fold_in(k, 1))(keys)
    phase = jax.vmap(lambda k: jax.random.randint(k, (), 0, cycle))(start_keys)
  else:
    phase = jnp.zeros(keys.shape[0], jnp.int32)
  rounds = jnp.arange(n)[:, None]
  in_phase = (rounds % cycle) == phase[None, :]
  return in_phase & jnp.repeat(trials, cycle, axis=0)[:n]


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
  """C·x for one draw of the sensitive example's participation per key, time-major (n, N)."""
  c_col = matrix.c_col
  if spec.kind == 'balls_in_bins':
    start_keys = jax.vmap(lambda k: jax.random.fold_in(k, 1))(keys)
    bins = jax.vmap(lambda k: jax.random.randint(k, (), 0, spec.period))(start_keys)
    return balls_in_bins_modes(spec.iterations, spec.period, c_col)[bins].T
  sampler = {'bminsep': bminsep_participation,
             'cyclic_poisson': cyclic_poisson_participation}[spec.kind]
  return mean_of_separated_participations(sampler(spec, keys, sampling_prob), c_col)
