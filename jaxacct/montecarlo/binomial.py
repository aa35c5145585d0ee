"""Exact Binomial(count, p) draws for many counts at once (device, JAX).

The truncated b-min-sep sampler draws one binomial per sample and round
(n·N draws per block), so this is its hot path. ``jax.random.binomial`` runs
both of its algorithms on every element inside ``while`` loops and measured
~260–500 ns per draw on a 2-core CPU (benchmarks/RESULTS.md). Here:

- mean count·q > 10 (q = min(p, 1 − p)): BTRS, the transformed rejection
  method with squeeze of Hörmann (1993), with ``ATTEMPTS`` proposals unrolled
  (branch-free, vectorised) and a ``while`` loop only for the rare lanes that
  rejected all of them (probability < 10⁻³ per lane);
- mean ≤ 10: inversion of the CDF by the pmf recurrence, in a ``while`` loop
  that only runs when some lane needs it;
- p > 1/2 draws count − Binomial(count, 1 − p).

Both methods are exact samplers given exact arithmetic. In float64 the law
deviates from Binomial(count, p) only by rounding (~10⁻¹⁶ per draw) and by the
Stirling series of log k! in the BTRS acceptance test, truncated after the
k⁻⁷ term: its error is < 1/(1188·(k+1)⁹) ≤ 4·10⁻¹³ in the log-acceptance
bound (k > 9; smaller k use exact table values), so the total-variation
distance per draw is below ~10⁻¹², i.e. below 10⁻⁸ for 10⁴ rounds: far under
the Monte Carlo error of any δ̂ we report.

Uniforms are (W + ½)·2⁻⁵³ from the top 53 bits of 64-bit words W (never 0 or
1), drawn from per-element keys, so every lane's draw depends only on its key.

References:
  W. Hörmann, "The generation of binomial random variates", J. Statist.
  Comput. Simul. 46 (1993), algorithm BTRS; also TensorFlow's and JAX's
  ``binomial`` (same algorithm; not the code).
"""

from __future__ import annotations

import math

import jax
import jax.numpy as jnp
import numpy as np
from jax import lax

ATTEMPTS = 3  # unrolled BTRS proposals per draw (each accepted w.p. ≳ 0.9 when the mean is > 10)
_INVERSION_MAX_MEAN = 10.0
_FALLBACK_TAG = 1 << 20  # fold_in offset of the keys of the rare extra BTRS rounds
# fc(k) = log k! − [½ log 2π + (k + ½) log(k + 1) − (k + 1)], exact for k ≤ 9.
_STIRLING_TABLE = np.array([math.lgamma(k + 1) - (0.5 * math.log(2 * math.pi)
                                                   + (k + 0.5) * math.log(k + 1) - (k + 1))
                            for k in range(10)])


def _uniforms(keys: jax.Array, count: int, tag) -> jax.Array:
  """(N, count) float64 uniforms in (0, 1) from the lanes' keys folded with ``tag``."""
  words = jax.vmap(lambda k: jax.random.bits(jax.random.fold_in(k, tag), (count,), jnp.uint64))(
      keys)
  return ((words >> 11).astype(jnp.float64) + 0.5) * 2.0**-53


def _stirling_tail(k: jax.Array) -> jax.Array:
  """fc(k) for k ≥ 0 (float64): table for k ≤ 9, else the series in 1/(k + 1) to the k⁻⁷ term."""
  z = jnp.maximum(k, 9.0) + 1.0
  z2 = z * z
  series = (1.0 / 12.0 - (1.0 / 360.0 - (1.0 / 1260.0 - 1.0 / (1680.0 * z2)) / z2) / z2) / z
  table = jnp.asarray(_STIRLING_TABLE)[jnp.clip(k, 0, 9).astype(jnp.int32)]
  return jnp.where(k <= 9, table, series)


def _btrs(keys: jax.Array, count: jax.Array, q: jax.Array) -> jax.Array:
  """BTRS draws (float64, integral values) for lanes with count·q > 10 and q ≤ 1/2.

  Other lanes get a finite dummy setup (count 100, q 1/2) and their result is
  discarded by the caller.
  """
  spq = jnp.sqrt(count * q * (1.0 - q))
  b = 1.15 + 2.53 * spq
  a = -0.0873 + 0.0248 * b + 0.01 * q
  c = count * q + 0.5
  v_r = 0.92 - 4.2 / b
  r = q / (1.0 - q)
  alpha = (2.83 + 5.1 / b) * spq
  m = jnp.floor((count + 1.0) * q)
  # The part of the log acceptance bound that does not depend on the proposal k.
  bound_m = ((m + 0.5) * jnp.log((m + 1.0) / (r * (count - m + 1.0)))
             + _stirling_tail(m) + _stirling_tail(count - m))

  def attempt(u, v):
    u = u - 0.5
    us = 0.5 - jnp.abs(u)
    k = jnp.floor((2.0 * a / us + b) * u + c)
    quick = (us >= 0.07) & (v <= v_r)
    in_range = (k >= 0.0) & (k <= count)
    safe_k = jnp.clip(k, 0.0, count)
    log_v = jnp.log(v * alpha / (a / (us * us) + b))
    bound = (bound_m + (count + 1.0) * jnp.log((count - m + 1.0) / (count - safe_k + 1.0))
             + (safe_k + 0.5) * jnp.log(r * (count - safe_k + 1.0) / (safe_k + 1.0))
             - _stirling_tail(safe_k) - _stirling_tail(count - safe_k))
    return k, quick | (in_range & (log_v <= bound))

  uniforms = _uniforms(keys, 2 * ATTEMPTS, 0)
  result = jnp.zeros_like(count)
  done = jnp.zeros(count.shape, bool)
  for j in range(ATTEMPTS):
    k, accepted = attempt(uniforms[:, 2 * j], uniforms[:, 2 * j + 1])
    result = jnp.where(accepted & ~done, k, result)
    done = done | accepted

  def more(carry):
    round_, result, done = carry
    extra = _uniforms(keys, 2, _FALLBACK_TAG + round_)
    k, accepted = attempt(extra[:, 0], extra[:, 1])
    return round_ + 1, jnp.where(accepted & ~done, k, result), done | accepted

  _, result, _ = lax.while_loop(lambda carry: jnp.any(~carry[2]), more,
                                (jnp.uint32(0), result, done))
  return result


def _inversion(keys: jax.Array, count: jax.Array, q: jax.Array) -> jax.Array:
  """Inversion draws (float64) by the pmf recurrence f(k+1) = f(k)·(count−k)/(k+1)·q/(1−q)."""
  u = _uniforms(keys, 1, 0)[:, 0]
  pmf = jnp.exp(count * jnp.log1p(-q))  # ≥ e^{-10.x}: no underflow for means ≤ 10
  ratio = q / (1.0 - q)

  def active(k, cdf):
    return (u > cdf) & (k < count)

  def step(carry):
    k, pmf, cdf = carry
    move = active(k, cdf)
    pmf = jnp.where(move, pmf * (count - k) / (k + 1.0) * ratio, pmf)
    return jnp.where(move, k + 1.0, k), pmf, jnp.where(move, cdf + pmf, cdf)

  k, _, _ = lax.while_loop(lambda carry: jnp.any(active(carry[0], carry[2])), step,
                           (jnp.zeros_like(count), pmf, pmf))
  return k


def binomial(keys: jax.Array, counts: jax.Array, prob: jax.Array) -> jax.Array:
  """One Binomial(counts[j], prob) draw per key, int64 (N,).

  Args:
    keys: (N,) typed keys, one per lane (the draw depends only on its key).
    counts: (N,) non-negative integers.
    prob: p ∈ [0, 1], traced scalar.
  """
  count = counts.astype(jnp.float64)
  prob = jnp.asarray(prob, jnp.float64)
  flip = prob > 0.5
  q = jnp.where(flip, 1.0 - prob, prob)
  small = count * q <= _INVERSION_MAX_MEAN
  btrs = lax.cond(jnp.all(small), lambda: jnp.zeros_like(count),
                  lambda: _btrs(keys, jnp.where(small, 100.0, count), jnp.where(small, 0.5, q)))
  inverted = lax.cond(jnp.any(small), lambda: _inversion(keys, jnp.where(small, count, 0.0), q),
                      lambda: jnp.zeros_like(count))
  draws = jnp.where(small, inverted, btrs)
  return jnp.where(flip, count - draws, draws).astype(jnp.int64)
