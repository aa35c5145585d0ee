"""Kernel of b-min-sep sampling (``BMinSep``, cold and warm start) and Poisson sampling (b = 1).

Participation: the Markov chain of Dong & Ganesh (2026) Fig. 1 (Algorithms 1 and 2) as a
renewal process (§4.1); loss: the suffix recursion of Eq. (1), Theorem 5.1 (cold start) and its
warm-start corollary (§5), in the linear domain with exact power-of-two rescaling and a
per-sample log-space fallback (``log_ratio``). With a dense ``LowerTriangular`` C the strategy
view charges each round the App. B bound for the direction asked (upper for ``remove``, lower
for ``add``), and the same recursion computes the bound. Multi-attribution b-min-sep with one
example per user (k_u = 1) is exactly the users' cold-start chain (Theorem 6.1) and is drawn here.

Random sub-streams of a sample key (``conventions.Stream``): ``TRIALS`` (geometric gaps,
or the per-round Bernoulli trials when b = 1), ``START`` (the warm-start state).

References:
  Andy Dong and Arun Ganesh, "Privacy Amplification for BandMF via b-Min-Sep Subsampling",
  arXiv:2602.09338 (v2): §4 (Fig. 1, Algorithms 1 and 2; the renewal view in §4.1), §5 (Eq. (1),
  Theorem 5.1 and its warm-start corollary), App. B (docs/references.md).
"""

from __future__ import annotations

import dataclasses
import decimal
import fractions
import functools
import math
from typing import Any, NamedTuple

import jax
import jax.numpy as jnp
import numpy as np
from jax import lax

from jaxacct import schemes
from jaxacct.schemes.participation import UserLevel
from jaxacct.conventions import Stream
from jaxacct.montecarlo.engine import margin
from jaxacct.montecarlo.engine.keys import word_pairs
from jaxacct.montecarlo.engine.kernels import _common
from jaxacct.montecarlo.engine.kernels.base import NoInfo, SchemeKernel, register


def participation(keys: jax.Array, sampling_prob: jax.Array, iterations: int, min_sep: int,
                  warm_start: bool) -> jax.Array:
  """Participation under b-min-sep (Alg. 1 cold / Alg. 2 warm), batch-major bool (N, n).

  The Markov chain of Dong & Ganesh (2026) Fig. 1 as a renewal process (§4.1): an
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
  n, b = iterations, min_sep
  if b == 1:
    return _common.bernoulli_trials(keys, n, sampling_prob)
  num_gaps = -(-n // b)
  words = _common.stream_words(keys, Stream.TRIALS, num_gaps)
  uniform = (words.astype(jnp.float64) + 0.5) * 2.0**-64
  per_log_stay = _common.reciprocal(jnp.log1p(-sampling_prob))  # −0 at p = 1
  # Rounds waited, capped at n + 1 (later participations fall outside the run anyway).
  waits = jnp.minimum(jnp.floor(jnp.log(uniform) * per_log_stay), n + 1.0).astype(jnp.int64)
  if warm_start:
    v = jax.vmap(lambda k: jax.random.uniform(k, (), jnp.float64))(_common.start_keys(keys))
    p_available = _common.reciprocal(1.0 + (b - 1) * sampling_prob)
    rank = jnp.floor((v - p_available) * _common.reciprocal(1.0 - p_available)
                     * (b - 1)).astype(jnp.int32)
    first_eligible = jnp.where(v < p_available, 0, 1 + jnp.clip(rank, 0, b - 2))
  else:
    first_eligible = jnp.zeros(keys.shape[0], jnp.int32)
  # t_k = J + Σ_{j≤k} (G_j − 1) + (k − 1)·b  (0-based k − 1 = column index).
  times = (first_eligible[:, None].astype(jnp.int64) + jnp.cumsum(waits, axis=1)
           + b * jnp.arange(num_gaps, dtype=jnp.int64)[None, :])  # int64: no overflow for any n
  return jax.vmap(lambda t: jnp.zeros(n, bool).at[t].set(True, mode='drop'))(times)


def log_ratio(ell: jax.Array, sampling_prob: jax.Array, min_sep: int,
              warm_start: bool) -> jax.Array:
  """ln P/Q under b-min-sep by the suffix recursion of Dong & Ganesh (2026) Eq. (1).

  f_i = (1−p)·f_{i+1} + p·e^{ℓ_i}·f_{i+b}, f_j = 1 for j ≥ n (0-indexed form of
  Eq. (1), L_i = log f_i); cold start (Theorem 5.1): L₀; warm start (corollary
  for Algorithm 2): log(f₀ + p·Σ_{i=1}^{b−1} f_i) − log(1 + (b−1)p).

  b = 1 (Poisson) factorises into Σ_i log(1 − p + p e^{ℓ_i}). Otherwise (b ≥ 2) the
  recursion runs in the linear domain with exact power-of-two rescaling
  (``linear_log_ratio``: one exp per round and sample, the rest multiply-adds), and
  the samples whose range check fails — possible only for extreme losses — are
  recomputed by the log-space recursion (``log_space_log_ratio``), so every sample
  gets a loss with the round-off of an underflow-free evaluation of Eq. (1).

  Args:
    ell: per-round log-likelihood ratios ℓ, batch-major (N, n).
    sampling_prob: p (traced scalar).
    min_sep: b (static).
    warm_start: Algorithm 2 (static).
  """
  if min_sep == 1:
    log_p, log_q = _common.log_terms(sampling_prob, ell.dtype)
    return jnp.sum(jnp.logaddexp(log_q, log_p + ell), axis=1)
  linear, in_range = linear_log_ratio(ell, sampling_prob, min_sep, warm_start)
  return lax.cond(
      jnp.all(in_range), lambda: linear,
      lambda: jnp.where(in_range, linear,
                        log_space_log_ratio(ell, sampling_prob, min_sep, warm_start)))


def log_space_log_ratio(ell: jax.Array, sampling_prob: jax.Array, min_sep: int,
                        warm_start: bool, chain=None):
  """``log_ratio`` in log space: L_i = logaddexp(log(1−p) + L_{i+1}, log p + ℓ_i + L_{i+b}).

  Eq. (1) of Dong & Ganesh (2026) with L_j = 0 for j ≥ n. Never over- or underflows, but
  costs an exp and a log1p per round and sample; ``log_ratio`` uses it only where the
  linear-domain recursion's range check fails. A reversed-time ``lax.scan`` keeps a circular buffer
  of b rows (slot i mod b): slot i mod b holds L_{i+b} until it is overwritten by L_i,
  and its zero initialisation is the boundary condition (also when b > n).

  With ``chain`` (32-bit program: host constants) it returns (losses, max_i |L_i|), the
  magnitude the margin of a log-space evaluation needs (``margin.log_space_recursion_error``).
  """
  dtype = ell.dtype
  if chain is None:
    log_p, log_q = _common.log_terms(sampling_prob, dtype)
  else:
    log_p, log_q = chain.log_p, chain.log_q
  num, n = ell.shape
  b = min_sep

  def step(carry, inputs):
    buffer, magnitude = carry
    i, ell_i = inputs
    next_row = lax.dynamic_index_in_dim(buffer, (i + 1) % b, keepdims=False)
    far_row = lax.dynamic_index_in_dim(buffer, i % b, keepdims=False)
    row = jnp.logaddexp(log_q + next_row, log_p + ell_i + far_row)
    if magnitude is not None:
      magnitude = jnp.maximum(magnitude, jnp.abs(row))
    return (lax.dynamic_update_index_in_dim(buffer, row, i % b, axis=0), magnitude), None

  init = (jnp.zeros((b, num), dtype), None if chain is None else jnp.zeros((num,), dtype))
  (buffer, magnitude), _ = lax.scan(step, init, (jnp.arange(n), ell.T), reverse=True)
  if not warm_start:
    losses = buffer[0]
  else:
    combined = jax.nn.logsumexp(
        jnp.concatenate([buffer[:1], log_p + buffer[1:]], axis=0), axis=0)
    losses = combined - _warm_normaliser(sampling_prob, b, dtype, chain)
  return losses if chain is None else (losses, magnitude)


# Rounds per chunk of the linear-domain recursion (at most b). Measured on this 2-core CPU
# (benchmarks/RESULTS.md, "Monte Carlo cost"): 16 at b = 16 and 32 at b = 256 beat 8, 64 and
# 128, and a chunk length dividing b (f_{i+b} then lies in one chunk) beats one that does not.
_MAX_CHUNK_ROUNDS = 32
# Both precisions take the linear domain for every b ≥ 2 (float32 too: its rounding error is
# relative in f, a priori bounded by ``margin.linear_recursion_error``; log space's grows with |L|).


def chunk_rounds(min_sep: int) -> int:
  """Rounds per chunk for separation b: b up to 32, else a divisor of b in [16, 32] or 32."""
  if min_sep <= _MAX_CHUNK_ROUNDS:
    return min_sep
  divisors = [s for s in range(_MAX_CHUNK_ROUNDS, 15, -1) if min_sep % s == 0]
  return divisors[0] if divisors else _MAX_CHUNK_ROUNDS
# X of the range check: |log₂| of the magnitudes allowed (see ``linear_log_ratio``).
_RANGE_EXPONENT = {'float64': 450, 'float32': 50}


def linear_log_ratio(ell: jax.Array, sampling_prob: jax.Array, min_sep: int,
                     warm_start: bool, chain=None, log_sums: bool = False):
  """Dong & Ganesh (2026) Eq. (1) in the linear domain: (ln P/Q, in_range), both (N,).

  With ``log_sums`` (32-bit margin) a third output, max_j |log Ŝ_j| over the logarithms of
  the final sums (``margin.final_log_error``).

  Rounds are taken in chunks of s ≤ b (reversed time). Inside a chunk every f_{i+b}
  is already known, so g_i = a_i·f_{i+b} with a_i = p·e^{ℓ_i} is elementwise and
  f_i = q·f_{i+1} + g_i (q = 1 − p) is solved for the whole chunk by one product with
  the s×s upper-triangular Toeplitz matrix of powers of q: f = T·g + (q^{s−i})_i·f_next.
  Each chunk of every sample is stored divided by an exact power of two 2^E (E from
  the chunk's maximum; ``frexp``), and E is carried as an integer per chunk, so the
  stored values stay near 1 whatever the size of the loss; a chunk is multiplied by
  2^{E_far − E_next} (exact) to bring its rows to the scale of the chunk it feeds.

  Why the result is as accurate as the log-space recursion: all terms are
  nonnegative, so each multiply-add has relative round-off ≤ u (the dtype's unit
  round-off) unless a result leaves the normal range. ``in_range`` is False unless,
  for every chunk, every factor of a product (a_i, the aligned f_{i+b}, q^k ≤ 1,
  f_next ≤ 2) is ≤ 2^X and every computed f_i is in [2^−X, 2^X], X = 450 (float64)
  or 50 (float32). Then an underflowed product (absolute error ≤ the smallest
  subnormal η times a factor ≤ 2^X) is ≤ 2^{2X}·η ≤ 2^−174 (float64; 2^−49 for
  float32) relative to the f_i it enters: negligible next to u, so the bound is that
  of an underflow-free evaluation (≲ n·u relative in f₀, ≈ n·u absolute in ln f₀).
  Rescaling is exact because the scaled values stay ≥ 2^−2X, above the smallest
  normal number. The caller recomputes samples that are not ``in_range`` in log
  space. Rounds r … n − 1 (r = n mod s) run as whole chunks in a ``lax.scan`` over the
  time-major a (slicing ℓ inside the scan instead measured 20–25 % slower); rounds
  0 … r − 1 are one shorter chunk after it.

  Args and References: as ``log_ratio`` (b ≥ 2).
  """
  dtype = ell.dtype
  log_p = jnp.log(sampling_prob).astype(dtype) if chain is None else chain.log_p
  a = jnp.exp(ell + log_p).T  # (n, N) time-major: measured faster than forming it per chunk
  losses, in_range, *rest = _linear_recursion(a, lambda rows: (rows, None), ell.shape[0],
                                              sampling_prob, min_sep, warm_start, dtype, chain,
                                              log_sums)
  return (losses, in_range & (jnp.max(ell, axis=1) + log_p <= _top_limit(dtype)), *rest)


def linear_log_ratios_for_sigmas(mean_products: jax.Array | None, noise_products: jax.Array,
                                 charge: jax.Array, noise_multipliers: jax.Array,
                                 sampling_prob: jax.Array, min_sep: int,
                                 warm_start: bool, chain=None, log_sums: bool = False):
  """``linear_log_ratio`` for K noise multipliers sharing one draw: ((K, N) losses, in_range)
  (and (K, N) max_j |log Ŝ_j| with ``log_sums``).

  d(σ) = d_m + σ·d_z with d_m = Cᵀ(C·x) (None: no signal) and d_z = Cᵀz (N, n), and
  ℓ_i(σ) = (2d_i(σ) − s_i)/(2σ²) with the view's charge s (n,). d_m and d_z are made
  time-major once per block; each σ's scan forms its chunk of ℓ and e^ℓ from them inside
  the scan, so no (N, n) array of ℓ or e^ℓ is written and read back per σ (those passes
  over memory were most of a candidate's cost at the production shape). One scan per σ
  (``lax.map``): putting all σ in the lanes of one scan measured slower (its working set
  leaves the cache).
  """
  dtype = noise_products.dtype
  log_p = jnp.log(sampling_prob).astype(dtype) if chain is None else chain.log_p
  inputs = (noise_products.T, None if mean_products is None else mean_products.T,
            charge.astype(dtype)[:, None])

  def one_sigma(sigma):
    scale = _common.inverse_two_variance(sigma, dtype)
    sigma = sigma.astype(dtype)

    def rounds_to_a(rows):
      noise_rows, mean_rows, charge_rows = rows  # (m, N), (m, N) or None, (m, 1)
      d = sigma * noise_rows
      d = d if mean_rows is None else mean_rows + d
      ell = (2.0 * d - charge_rows) * scale + log_p
      return jnp.exp(ell), jnp.max(ell, axis=0)

    return _linear_recursion(inputs, rounds_to_a, noise_products.shape[0], sampling_prob,
                             min_sep, warm_start, dtype, chain, log_sums)

  return lax.map(one_sigma, noise_multipliers)


def _top_limit(dtype) -> float:
  """The largest ℓ + log p allowed by the range check: a = p·e^ℓ ≤ 2^X."""
  return _RANGE_EXPONENT[jnp.dtype(dtype).name] * np.log(2.0)


def _linear_recursion(inputs, rounds_to_a, lanes: int, sampling_prob: jax.Array, min_sep: int,
                      warm_start: bool, dtype, chain=None, log_sums: bool = False):
  """The chunked linear-domain recursion of ``linear_log_ratio`` over ``lanes`` independent lanes.

  ``inputs`` is a pytree of time-major arrays (leading axis n, None leaves allowed);
  ``rounds_to_a(rows)`` maps the inputs of m consecutive rounds to (a = p·e^ℓ (m, lanes),
  max over those rounds of ℓ + log p (lanes,) or None when the caller checks it).
  ``chain`` (32-bit program): ``Chain32`` host constants (q^k, p, the warm-start
  normaliser) instead of forming them on device from a float32 p (whose 1 − p loses all
  relative precision near p = 1), and full-precision products on every backend.
  ``log_sums``: also return max_j |log Ŝ_j| over the logarithms of the final sums (the
  32-bit margin's ``final_log_error``; meaningless where ``in_range`` is False).
  """
  n = jax.tree_util.tree_leaves(inputs)[0].shape[0]
  b = min_sep
  s = chunk_rounds(b)
  limit = _RANGE_EXPONENT[jnp.dtype(dtype).name]
  lead, chunks = n % s, n // s  # rounds 0 … lead − 1, then chunk c = rounds lead + c·s + [0, s)
  whole, part = divmod(b, s)  # f_{i+b} lies in the chunks `whole` and `whole + 1` ahead
  slots = whole + (2 if part else 1)  # circular buffer of chunks (live: next, far)
  one = jnp.ones((), dtype)
  row = jnp.arange(s)
  powers = row[None, :] - row[:, None]  # T[i, j] = q^{j−i} for j ≥ i
  if chain is None:
    q = (1.0 - sampling_prob).astype(dtype)
    toeplitz = jnp.where(powers >= 0, q ** jnp.maximum(powers, 0).astype(dtype), 0.0)
    next_weights = q ** (s - row).astype(dtype)  # q^{s−i}: weight of f_next in f_i
    precision = None
  else:
    toeplitz = jnp.where(powers >= 0, chain.powers[jnp.maximum(powers, 0)], 0.0)
    next_weights = chain.powers[s - row]
    precision = lax.Precision.HIGHEST

  def aligned(values, exponents, chunk, rows, e_next):
    """Rows ``rows`` of ``chunk`` at the scale 2^e_next, and the shift applied."""
    shift = exponents[chunk % slots] - e_next
    return values[chunk % slots, rows] * jnp.ldexp(one, shift), shift

  def solve(rows, far_rows, next_row, top):
    """f of m consecutive rounds (m, lanes) from their inputs, f_{i+b} and f_next."""
    a, rows_top = rounds_to_a(rows)
    m = a.shape[0]
    f = (jnp.matmul(toeplitz[:m, :m], a * far_rows, precision=precision)
         + next_weights[s - m:, None] * next_row[None, :])
    return f, top if rows_top is None else jnp.maximum(top, rows_top)

  def chunk(carry, inputs_c):
    c, rows = inputs_c
    values, exponents, low, high, shift_max, top = carry
    e_next = exponents[(c + 1) % slots]
    far_rows, shift = aligned(values, exponents, c + whole, slice(part, s), e_next)
    if part:  # f_{i+b} straddles two chunks
      near_rows, near_shift = aligned(values, exponents, c + whole + 1, slice(0, part), e_next)
      far_rows = jnp.concatenate([far_rows, near_rows])
      shift = jnp.maximum(shift, near_shift)
    f, top = solve(rows, far_rows, values[(c + 1) % slots, 0], top)
    chunk_max = jnp.max(f, axis=0)
    _, e = jnp.frexp(chunk_max)
    values = lax.dynamic_update_index_in_dim(values, f * jnp.ldexp(one, -e)[None, :],
                                             c % slots, 0)
    exponents = lax.dynamic_update_index_in_dim(exponents, e_next + e, c % slots, 0)
    return (values, exponents, jnp.minimum(low, jnp.min(f, axis=0)),
            jnp.maximum(high, chunk_max), jnp.maximum(shift_max, shift), top), None

  def in_chunks(x):
    return None if x is None else x[lead:].reshape((chunks, s) + x.shape[1:])

  init = (jnp.ones((slots, s, lanes), dtype), jnp.zeros((slots, lanes), jnp.int32),
          jnp.full((lanes,), jnp.inf, dtype), jnp.zeros((lanes,), dtype),
          jnp.full((lanes,), -limit, jnp.int32), jnp.full((lanes,), -jnp.inf, dtype))
  (values, exponents, low, high, shift_max, top), _ = (
      lax.scan(chunk, init, (jnp.arange(chunks), jax.tree_util.tree_map(in_chunks, inputs)),
               reverse=True) if chunks else (init, None))
  log_two = np.log(2.0)
  # Rounds 0 … b − 1 (the warm-start sum) in chunk order: (f rows (m, lanes), their exponent).
  pieces = []
  if lead:
    e_next = exponents[0]
    far = []
    for c in range((b - lead) // s, (b - 1) // s + 1):  # chunks holding rounds b … b + lead − 1
      rows = slice(max(b - lead - c * s, 0), min(b - c * s, s))
      rows_c, shift = aligned(values, exponents, c, rows, e_next)
      far.append(rows_c)
      shift_max = jnp.maximum(shift_max, shift)
    f, top = solve(jax.tree_util.tree_map(lambda x: None if x is None else x[:lead], inputs),
                   jnp.concatenate(far), values[0, 0], top)
    low, high = jnp.minimum(low, jnp.min(f, axis=0)), jnp.maximum(high, jnp.max(f, axis=0))
    pieces.append((f[:b], e_next))
  for c in range(0, (b - 1 - lead) // s + 1 if b > lead else 0):
    pieces.append((values[c % slots, :min(s, b - lead - c * s)], exponents[c % slots]))
  in_range = ((top <= _top_limit(dtype)) & (shift_max < limit) & (low >= 2.0**-limit)
              & (high <= 2.0**limit))

  sum_logs = []

  def log_of(rows, exponent):  # ln Σ rows, their scale included
    log_sum = jnp.log(jnp.sum(rows, axis=0))
    sum_logs.append(jnp.abs(log_sum))
    return log_sum + exponent.astype(dtype) * log_two

  def outputs(losses):
    if not log_sums:
      return losses, in_range
    return losses, in_range, functools.reduce(jnp.maximum, sum_logs)

  first_rows, first_exponent = pieces[0]
  if not warm_start:
    return outputs(log_of(first_rows[:1], first_exponent))
  # f₀ + p·Σ_{i=1}^{b−1} f_i.
  p = sampling_prob.astype(dtype) if chain is None else chain.p
  parts = [log_of(jnp.concatenate([first_rows[:1], p * first_rows[1:]]), first_exponent)]
  parts += [log_of(p * rows, exponent) for rows, exponent in pieces[1:]]
  combined = jax.nn.logsumexp(jnp.stack(parts), axis=0)
  return outputs(combined - _warm_normaliser(sampling_prob, b, dtype, chain))


def _warm_normaliser(sampling_prob, min_sep: int, dtype, chain) -> jax.Array:
  """log(1 + (b − 1)p), the warm-start normaliser (a host constant in the 32-bit program)."""
  if chain is None:
    return jnp.log1p((min_sep - 1) * sampling_prob).astype(dtype)
  return chain.warm_log_norm


# ---- The 32-bit program (precision="float32"): exact integer participation, host constants,
# and the certified margin of ``montecarlo/engine/margin.py``.


class Chain32(NamedTuple):
  """Host constants of the recursion for the 32-bit program, float32 (each within u of exact).

  Attributes: p, q = 1 − p, log p, log q, powers q^k (k = 0 … s, s = ``chunk_rounds(b)``),
  warm_log_norm = log(1 + (b − 1)p), per_log_stay = 1/log q (−0 at p = 1).
  """

  p: np.ndarray
  q: np.ndarray
  log_p: np.ndarray
  log_q: np.ndarray
  powers: np.ndarray
  warm_log_norm: np.ndarray
  per_log_stay: np.ndarray


def chain32(sampling_prob: float, min_sep: int) -> Chain32:
  """Host: ``Chain32`` from p in float64 (1 − p is exact for p ≥ ½, Sterbenz)."""
  p = float(sampling_prob)
  q = 1.0 - p
  with np.errstate(divide='ignore'):
    log_q = np.log1p(-p)
  powers = np.power(q, np.arange(chunk_rounds(min_sep) + 1, dtype=np.float64))
  f32 = np.float32
  with np.errstate(divide='ignore'):
    per_log_stay = 1.0 / log_q
  return Chain32(f32(p), f32(q), f32(np.log(p)), f32(log_q), powers.astype(np.float32),
                 f32(np.log1p((min_sep - 1) * p)), f32(per_log_stay))


@functools.lru_cache(maxsize=64)
def gap_thresholds(sampling_prob: float, iterations: int,
                   multiplicity: int = 1) -> tuple[np.ndarray, int]:
  """Host: the geometric gaps of ``participation`` as integer thresholds, exactly.

  waits = ⌊ln U / ln q⌋ capped at n + 1, U = (W + ½)·2⁻⁶⁴, is #{k ≤ n + 1 : q^k ≥ U} =
  #{k : W ≤ T_k} with T_k = ⌊q^k·2⁶⁴ − ½⌋ (non-increasing). Returns the T_k that are ≥ 0 as
  uint32 (hi, lo) rows (2, n + 1) (unused entries 0) and their number. q^k·2⁶⁴ is computed
  with 60 significant digits (``decimal``), so T_k is exact. ``multiplicity`` k_u: the chain
  of a user with k_u examples, q = (1 − p)^{k_u} (Dong & Ganesh (2026) Theorem 6.1).
  """
  table = np.zeros((2, iterations + 1), np.uint32)
  count = 0
  with decimal.localcontext() as context:
    context.prec = 60
    q = (decimal.Decimal(1) - decimal.Decimal(float(sampling_prob))) ** multiplicity
    scale = decimal.Decimal(2) ** 64
    power = decimal.Decimal(1)
    for k in range(1, iterations + 2):
      power *= q
      value = power * scale - decimal.Decimal('0.5')
      if value < 0:
        break
      table[:, k - 1] = _common.word_split(min(int(value), (1 << 64) - 1))
      count = k
  return table, count


def start_thresholds(sampling_prob: float, min_sep: int) -> np.ndarray:
  """Host: warm start's first eligible round J as thresholds on the 52-bit uniform mantissa.

  ``participation`` draws v = M·2⁻⁵² (M = the top 52 bits of a 64-bit word) and takes
  J = #{j ∈ [1, b − 1] : v ≥ τ_j}, τ_j = π₀ + (j − 1)(1 − π₀)/(b − 1), π₀ = 1/(1 + (b − 1)p).
  Returns ⌈τ_j·2⁵²⌉ as (M >> 20, M & (2²⁰ − 1)) rows, uint32 (2, b − 1), exact (fractions).
  """
  p = fractions.Fraction(float(sampling_prob))
  b = min_sep
  available = 1 / (1 + (b - 1) * p)
  rows = np.zeros((2, b - 1), np.uint32)
  for j in range(1, b):
    tau = available + (j - 1) * (1 - available) / (b - 1)
    threshold = math.ceil(tau * 2**52)  # exact for a Fraction
    rows[:, j - 1] = (threshold >> 20, threshold & ((1 << 20) - 1))
  return rows


def _geometric_waits(hi: jax.Array, lo: jax.Array, table: jax.Array, count: jax.Array,
                     per_log_stay: jax.Array, iterations: int) -> jax.Array:
  """#{k ≤ count : (hi, lo) ≤ T_k} (int32): a float32 draft corrected by two exact comparisons.

  The draft ⌊ln U / ln q⌋ − 1 takes ln U from whichever of U and 1 − U is below ½, each
  formed from the words (1 − U from their complement) with relative error ≤ 3u, so ln U has
  relative error ≤ 10u (log, log1p within 4 ulps) and ln U / ln q ≤ 12u; for a count ≤ n + 2
  that is an error < 16u(n + 2) ≤ ½ for n < 2¹⁹ (``program32.refusal`` asks for that), so the
  draft is at most 2 below the exact count and never above it (counts beyond n + 1 are capped
  in both); two comparisons with the thresholds (monotone in k) then reach it exactly.
  """
  def from_words(high, low):
    return (high.astype(jnp.float32) * jnp.float32(2.0**-32)
            + (low.astype(jnp.float32) + jnp.float32(0.5)) * jnp.float32(2.0**-64))
  uniform = from_words(hi, lo)  # U = (W + ½)·2⁻⁶⁴
  complement = from_words(~hi, ~lo)  # 1 − U = (2⁶⁴ − 1 − W + ½)·2⁻⁶⁴
  log_uniform = jnp.where(uniform < 0.5, jnp.log(uniform), jnp.log1p(-complement))
  draft = jnp.floor(jnp.clip(log_uniform * per_log_stay, 0.0, iterations + 2.0)) - 1.0
  waits = jnp.clip(draft.astype(jnp.int32), 0, jnp.minimum(count, iterations + 1))
  for _ in range(2):
    candidate = waits + 1
    index = jnp.clip(candidate - 1, 0, iterations)
    below = _common.words_at_most(hi, lo, table[0][index], table[1][index])
    waits = jnp.where((candidate <= count) & below, candidate, waits)
  return waits


def participation32(keys: jax.Array, params, iterations: int, min_sep: int,
                    warm_start: bool) -> jax.Array:
  """``participation`` in 32-bit code: the same pattern from the same words, bool (N, n).

  The geometric gaps and the warm start compare the 64-bit words with host thresholds
  (``gap_thresholds``, ``start_thresholds``); participation times add up in int32 (with
  saturation at n + 1 where a plain sum could wrap; later participations fall outside the run).
  """
  n, b = iterations, min_sep
  if b == 1:
    return _common.bernoulli_trials32(keys, n, params.trial_threshold)
  num_gaps = -(-n // b)
  hi, lo = _common.stream_word_pairs(keys, Stream.TRIALS, num_gaps)
  waits = _geometric_waits(hi, lo, params.gap_thresholds, params.gap_count,
                           params.chain.per_log_stay, n)
  cap = n + 1
  if num_gaps * cap < 2**31:  # the plain int32 cumulative sum cannot wrap
    elapsed = jnp.cumsum(waits, axis=1, dtype=jnp.int32)
  else:
    elapsed = lax.associative_scan(lambda x, y: jnp.minimum(x + y, cap), waits, axis=1)
  if warm_start:
    start_hi, start_lo = jax.vmap(lambda k: word_pairs(k, 1))(_common.start_keys(keys))
    mantissa_lo = start_lo >> jnp.uint32(12)  # M = hi·2²⁰ + (lo >> 12)
    thresholds = params.start_thresholds
    at_least = ((start_hi > thresholds[0][None, :])
                | ((start_hi == thresholds[0][None, :]) & (mantissa_lo >= thresholds[1][None, :])))
    first_eligible = jnp.sum(at_least, axis=1, dtype=jnp.int32)
  else:
    first_eligible = jnp.zeros(keys.shape[0], jnp.int32)
  times = first_eligible[:, None] + elapsed + b * jnp.arange(num_gaps, dtype=jnp.int32)[None, :]
  return jax.vmap(lambda t: jnp.zeros(n, bool).at[t].set(True, mode='drop'))(times)


class Params32(NamedTuple):
  """Traced parameters of the 32-bit b-min-sep program (host-built, 32-bit types only).

  Attributes: chain (``Chain32``); trial_threshold (b = 1, ``_common.bernoulli_threshold``);
  gap_thresholds and gap_count (b ≥ 2, ``gap_thresholds``); start_thresholds (warm start);
  margin (``margin.MarginConstants``).
  """

  chain: Chain32
  trial_threshold: Any
  gap_thresholds: Any
  gap_count: Any
  start_thresholds: Any
  margin: Any


def log_ratio_with_margin(ell: jax.Array, delta: jax.Array, ratio_max: jax.Array, chain: Chain32,
                          constants, min_sep: int, warm_start: bool) -> tuple[jax.Array, jax.Array]:
  """32-bit program: (L̂, η) per sample with |L̂ − L| ≤ η (``margin`` proof steps 6–7).

  ``delta`` bounds |ln â_i − ln(p·e^{ℓ_i})| and ``ratio_max`` bounds |ℓ̂_i|, per round (N, n)
  or per sample (N, 1); ``constants`` is the mechanism's ``margin.MarginConstants``.
  """
  num, n = ell.shape
  b = min_sep
  if b == 1:
    g, posterior, gap = poisson_terms32(ell, chain)
    losses = _common.tree_sum(g)
    margins = margin.poisson_error(delta, ratio_max, constants.log_p, posterior, g, gap)
    return losses, margins + margin.final_log_error(losses, b)
  delta, ratio_max = jnp.max(delta, axis=1), jnp.max(ratio_max, axis=1)
  linear, in_range, sum_logs = linear_log_ratio(ell, chain.p, b, warm_start, chain,
                                                log_sums=True)
  linear_error = jnp.full((num,), np.float32(margin.linear_recursion_error(n, chunk_rounds(b))))

  def recompute():
    logs, magnitude = log_space_log_ratio(ell, chain.p, b, warm_start, chain)
    logs_error = margin.log_space_recursion_error(n, ratio_max, magnitude, constants)
    return (jnp.where(in_range, linear, logs), jnp.where(in_range, linear_error, logs_error))

  losses, recursion_error = lax.cond(jnp.all(in_range), lambda: (linear, linear_error),
                                     recompute)
  margins = -(-n // b) * delta + recursion_error
  # A sample recomputed in log space takes no logarithm of a sum (its warm-start combination
  # is charged by final_log_error's other terms, as before).
  sum_logs = jnp.where(in_range, sum_logs, 0.0)
  return losses, margins + margin.final_log_error(losses, b, sum_logs)


def poisson_terms32(ell: jax.Array, chain: Chain32) -> tuple[jax.Array, jax.Array, jax.Array]:
  """32-bit program: (ĝ_i = logaddexp(log q, v̂_i), π̂_i = e^{v̂_i − ĝ_i}, |Δ̂_i|) with
  v̂_i = ℓ_i + log p and Δ̂_i = v̂_i − log q: the per-round Poisson terms, their posteriors (the
  derivative of g at v̂_i) and the logaddexp's internal difference (``margin`` proof step 7;
  0 at p = 1, where log q = −∞ and ĝ = v̂ exactly). XLA recomputes v in each of the three
  fusions and may contract ℓ's product into the add in some of them and not others, so the
  three may see differently rounded copies of v̂: ``margin.posterior_bound`` charges that."""
  v = ell + chain.log_p
  g = jnp.logaddexp(chain.log_q, v)
  gap = jnp.where(jnp.isfinite(chain.log_q), jnp.abs(v - chain.log_q), 0.0)
  return g, jnp.exp(v - g), gap


class SamplingProbParams(NamedTuple):
  """Traced parameters of kernels with one per-round probability: p (float64 scalar)."""

  sampling_prob: jax.Array


def sampling_prob_params(mechanism) -> SamplingProbParams:
  return SamplingProbParams(jnp.asarray(float(mechanism.scheme.sampling_prob), jnp.float64))


def chain_of(scheme) -> tuple[int, bool]:
  """(b, warm start) of the b-min-sep chain that draws ``scheme``'s participation rounds.

  Multi-attribution is accounted as the cold-start chain of its users (Dong & Ganesh (2026)
  §6.2, Theorem 6.1). With b = 1 warm and cold start coincide (every example is always
  eligible).
  """
  model = scheme.participation.model
  if isinstance(model, UserLevel):
    return model.min_sep, False
  return model.min_sep, model.warm_start  # MinSepChain: warm_start is False when b = 1


def conjecture_refusal(scheme) -> str | None:
  """Why a multi-attribution ``scheme`` is not accounted: Algorithm 4 without
  ``accept_conjecture_6_2`` (None otherwise). Both kernels serving the family give it."""
  if scheme.conjectural and not scheme.accept_conjecture_6_2:
    return ("accounting Algorithm 4 (exclusion='participated') by Theorem 6.1's model rests on "
            'the unproven Conjecture 6.2 of Dong & Ganesh (2026); pass '
            'accept_conjecture_6_2=True to accept '
            "it (results are then labelled 'conjectural'), or use Algorithm 3 "
            "(exclusion='sampled')")
  return None


@register
@dataclasses.dataclass(frozen=True)
class BMinSepKernel(SchemeKernel):
  """Untruncated b-min-sep (b = 1: Poisson); exact with banded C, App. B bounds with dense C.

  It also serves multi-attribution with one example per user (k_u = 1): Theorem 6.1's model
  is then exactly the users' cold-start b-min-sep with p (``chain_of``), and this kernel
  avoids the one-term mixture's transcendentals.

  Attributes:
    iterations: n. min_sep: b. warm_start: Algorithm 2 (False when b = 1, where the two
    starts coincide). dtype: kernel arithmetic.
  """

  schemes = (schemes.Poisson, schemes.BMinSep, schemes.MultiAttributionBMinSep)

  iterations: int
  min_sep: int
  warm_start: bool
  dtype: str

  @classmethod
  def refusal(cls, scheme) -> str | None:
    if scheme.truncates:
      return 'truncating schemes are accounted by the truncated b-min-sep kernel'
    model = scheme.participation.model
    if isinstance(model, UserLevel):
      reason = conjecture_refusal(scheme)
      if reason is None and model.max_examples_per_user > 1:
        return ('multi-attribution with max_examples_per_user > 1 is accounted by the '
                'multi-attribution kernel (the multiplicity mixture of Theorem 6.1)')
      return reason
    return None

  @classmethod
  def build(cls, mechanism, dtype: np.dtype) -> 'BMinSepKernel':
    b, warm = chain_of(mechanism.scheme)
    return cls(mechanism.iterations, b, warm, dtype.name)



  def params(self, mechanism) -> SamplingProbParams | Params32:
    if self.dtype == 'float64':
      return sampling_prob_params(mechanism)
    p = float(mechanism.scheme.sampling_prob)
    n, b = self.iterations, self.min_sep
    gaps, count = gap_thresholds(p, n) if b > 1 else (None, None)
    return Params32(chain32(p, b), _common.bernoulli_threshold(p) if b == 1 else None,
                    gaps, None if count is None else np.int32(count),
                    start_thresholds(p, b) if self.warm_start else None,
                    margin.margin_constants(_common.rounding_shape(mechanism), p))

  def sample_mean(self, keys, params, view, direction):
    del direction  # only ``remove`` has a signal
    if self.dtype == 'float32':
      x = participation32(keys, params, self.iterations, self.min_sep, self.warm_start)
    else:
      x = participation(keys, params.sampling_prob, self.iterations, self.min_sep,
                        self.warm_start)
    return view.separated_mean(x, self.dtype), NoInfo()

  def log_ratios_for_sigmas_with_margin(self, mean_products, noise_products, params,
                                        noise_multipliers, kappas, view, info, direction,
                                        magnitudes):
    """32-bit program, b ≥ 2: all K candidates in the linear-domain scan (ℓ formed inside it,
    as in float64); margins from per-sample bounds (``margin`` proof steps 4–6); the
    (σ, sample) pairs out of range are recomputed per σ in log space."""
    if self.min_sep == 1:
      return super().log_ratios_for_sigmas_with_margin(
          mean_products, noise_products, params, noise_multipliers, kappas, view, info,
          direction, magnitudes)
    chain, constants = params.chain, params.margin
    charge = view.charge(direction, self.iterations)
    losses, in_range, sum_logs = linear_log_ratios_for_sigmas(
        mean_products, noise_products, charge, noise_multipliers, chain.p, self.min_sep,
        self.warm_start, chain, log_sums=True)
    z_abs, dz_abs, dm_abs = (jnp.max(m, axis=1) for m in magnitudes)
    sigmas, kappas_ = noise_multipliers[:, None], kappas[:, None]
    error, d_max = margin.shared_draws_product_error(z_abs, dz_abs, dm_abs, sigmas, constants)
    delta, _ = margin.round_ratio_error(error, d_max, kappas_, constants)
    n = self.iterations
    margins = (-(-n // self.min_sep) * delta
               + np.float32(margin.linear_recursion_error(n, chunk_rounds(self.min_sep)))
               + margin.final_log_error(losses, self.min_sep,
                                        jnp.where(in_range, sum_logs, 0.0)))

    def recompute():
      exact, exact_margins = super(BMinSepKernel, self).log_ratios_for_sigmas_with_margin(
          mean_products, noise_products, params, noise_multipliers, kappas, view, info,
          direction, magnitudes)
      return jnp.where(in_range, losses, exact), jnp.where(in_range, margins, exact_margins)
    return lax.cond(jnp.all(in_range), lambda: (losses, margins), recompute)

  def log_ratio_with_margin(self, d, params, noise_multiplier, kappa, view, info, direction,
                            product_error):
    """32-bit program: (L̂, η) per sample (``margin`` proof steps 5–7)."""
    del info
    ell = _common.per_round_ratios(d, noise_multiplier, view, direction, self.iterations)
    delta, ratio_max = margin.ratio_bounds(d, product_error, kappa, params.margin)
    return log_ratio_with_margin(ell, delta, ratio_max, params.chain, params.margin,
                                 self.min_sep, self.warm_start)

  def log_ratio(self, d, params, noise_multiplier, view, info, direction):
    del info
    ell = _common.per_round_ratios(d, noise_multiplier, view, direction, self.iterations)
    return log_ratio(ell, params.sampling_prob, self.min_sep, self.warm_start)

  def log_ratios_for_sigmas(self, mean_products, noise_products, params, noise_multipliers,
                            view, info, direction):
    """All K candidates in one linear-domain scan (``linear_log_ratios_for_sigmas``); the
    (σ, sample) pairs out of its range are recomputed per σ by ``log_ratio``."""
    if self.min_sep == 1:
      return super().log_ratios_for_sigmas(mean_products, noise_products, params,
                                           noise_multipliers, view, info, direction)
    charge = view.charge(direction, self.iterations)
    losses, in_range = linear_log_ratios_for_sigmas(
        mean_products, noise_products, charge, noise_multipliers, params.sampling_prob,
        self.min_sep, self.warm_start)
    def recompute():
      exact = super(BMinSepKernel, self).log_ratios_for_sigmas(
          mean_products, noise_products, params, noise_multipliers, view, info, direction)
      return jnp.where(in_range, losses, exact)
    return lax.cond(jnp.all(in_range), lambda: losses, recompute)
