"""Standard normal noise with exact Gaussian tails, in float64 or float32.

δ targets go down to 1e-8–1e-10, so the noise must keep its true tails.
``jax.random.normal`` builds a uniform on (−1, 1) with the dtype's mantissa and
applies erfinv: float32 normals then stop near 5.3σ and float64 ones near 8.2σ.
Truncated noise biases δ̂ low, the unsafe direction.

Here every normal consumes 64 random bits: one sign bit and a 63-bit integer W,
mapped to the half-open tail probability u = (W + ½)·2⁻⁶⁴ ∈ (2⁻⁶⁵, ½), and
z = ±Φ⁻¹(1 − u) = ∓ndtri(u). Because u is formed by scaling an integer (not by
subtracting from 1), small tail probabilities keep their full relative
precision in both dtypes, so |z| reaches Φ⁻¹(1 − 2⁻⁶⁵) ≈ 9.15. The remaining
truncation has probability 2⁻⁶⁴ per draw (total-variation distance ≤ 5.4e-20
per coordinate), far below any δ we report.

The quantile is Cephes' ``ndtri`` rational approximation (the one scipy and
``jax.scipy.special.ndtri`` use), accurate to the dtype's precision in the tails.
float64 evaluates it rearranged for u ∈ (0, ½] (``tail_quantile``): one division
instead of six (the tail polynomials in 1/z are evaluated as their z⁸-scaled
reversals, so no 1/z is formed), and the far-tail branch (u < e⁻³², probability
~10⁻¹⁴ per draw) only for a block that needs it — 23 % less time per normal on
the project's CPU (benchmarks/RESULTS.md, "Monte Carlo cost"). float32 keeps ``ndtri``, which
measured faster there.

The 32-bit program (``normals_from_word_pairs``) draws the same 64-bit word as two uint32
words (hi, lo), so it samples the same real z as float64, and evaluates it in float32:
û = hi'·2⁻³² + (lo + ½)·2⁻⁶⁴ (hi' the 31 magnitude bits) has relative error ≤ 3u
(u = 2⁻²⁴: two conversions and one addition; no underflow, û ≥ 2⁻⁶⁵), which moves z by at
most 3u·û/φ(z) ≤ 3u·1.2534 (the Mills ratio is largest at z = 0), and float32 ``ndtri``
differs from the exact quantile of its float32 input by at most 3.9·u·(1 + |z|) (measured
over **every** float32 input in (2⁻⁶⁶, ½] on this project's CPU, 26 s;
``benchmarks/accelerator.py`` measures it on the backend at hand). Hence
|ẑ − z| ≤ ``NORMAL32_ERROR_ULPS``·u·(1 + |ẑ|) with 8 ≥ 3.9 + 3.8 (the bound the margin of
``margin.py`` uses).
"""

from __future__ import annotations

import jax
import jax.numpy as jnp
import numpy as np
from jax import lax
from jax.scipy.special import ndtri

from jaxacct.montecarlo.engine.keys import word_pairs

# u = (W + 1/2) * 2^-64 with W the low 63 bits; the top bit is the sign.
_TWO_POW_MINUS_64 = 2.0**-64

NORMAL32_ERROR_ULPS = 8.0
"""|ẑ − z| ≤ NORMAL32_ERROR_ULPS · 2⁻²⁴ · (1 + |ẑ|) for ``normals_from_word_pairs`` (see above)."""


# Cephes ndtri coefficients, highest power first: P0/Q0 for u > e⁻² (in w² with w = u − ½),
# P1/Q1 for e⁻³² ≤ u ≤ e⁻² and P2/Q2 below (in 1/z with z = √(−2 ln u)).
_P0 = (-5.99633501014107895267E1, 9.80010754185999661536E1, -5.66762857469070293439E1,
       1.39312609387279679503E1, -1.23916583867381258016E0)
_Q0 = (1.0, 1.95448858338141759834E0, 4.67627912898881538453E0, 8.63602421390890590575E1,
       -2.25462687854119370527E2, 2.00260212380060660359E2, -8.20372256168333339912E1,
       1.59056225126211695515E1, -1.18331621121330003142E0)
_P1 = (4.05544892305962419923E0, 3.15251094599893866154E1, 5.71628192246421288162E1,
       4.40805073893200834700E1, 1.46849561928858024014E1, 2.18663306850790267539E0,
       -1.40256079171354495875E-1, -3.50424626827848203418E-2, -8.57456785154685413611E-4)
_Q1 = (1.0, 1.57799883256466749731E1, 4.53907635128879210584E1, 4.13172038254672030440E1,
       1.50425385692907503408E1, 2.50464946208309415979E0, -1.42182922854787788574E-1,
       -3.80806407691578277194E-2, -9.33259480895457427372E-4)
_P2 = (3.23774891776946035970E0, 6.91522889068984211695E0, 3.93881025292474443415E0,
       1.33303460815807542389E0, 2.01485389549179081538E-1, 1.23716634817820021358E-2,
       3.01581553508235416007E-4, 2.65806974686737550832E-6, 6.23974539184983293730E-9)
_Q2 = (1.0, 6.02427039364742014255E0, 3.67983563856160859403E0, 1.37702099489081330271E0,
       2.16236993594496635890E-1, 1.34204006088543189037E-2, 3.28014464682127739104E-4,
       2.89247864745380683936E-6, 6.79019408009981274425E-9)


def _horner(coefficients, x):
  total = jnp.full_like(x, coefficients[0])
  for c in coefficients[1:]:
    total = total * x + c
  return total


def _tail_branch(z, p, q):
  """z − ln z / z − P(1/z)/(z·Q(1/z)), with z⁸P(1/z), z⁸Q(1/z) as reversed polynomials in z."""
  scaled_q = _horner(q[::-1], z)
  return z - (jnp.log(z) * scaled_q + _horner(p[::-1], z)) / (z * scaled_q)


def tail_quantile(u: jax.Array) -> jax.Array:
  """Φ⁻¹(1 − u) for u ∈ (0, ½]: Cephes ndtri (scipy's), rearranged to one division.

  Central part (u > e⁻²): −√(2π)·(w + w³P0(w²)/Q0(w²)), w = u − ½; tails:
  z − ln z/z − P(1/z)/(z·Q(1/z)), z = √(−2 ln u), with (P1, Q1) for z < 8 and
  (P2, Q2) beyond. Both regular branches are formed and selected before the one
  division; the far-tail branch runs only when some element of the array needs it.
  """
  w = u - 0.5
  ww = w * w
  z = jnp.sqrt(-2.0 * jnp.log(u))
  scaled_q1 = _horner(_Q1[::-1], z)
  central = u > np.exp(-2.0)
  numerator = jnp.where(central, w * ww * _horner(_P0, ww),
                        -(jnp.log(z) * scaled_q1 + _horner(_P1[::-1], z)))
  denominator = jnp.where(central, _horner(_Q0, ww), z * scaled_q1)
  quantile = jnp.where(central, -np.sqrt(2.0 * np.pi), 1.0) * (
      jnp.where(central, w, z) + numerator / denominator)
  far = z >= 8.0
  return lax.cond(jnp.any(far), lambda: jnp.where(far, _tail_branch(z, _P2, _Q2), quantile),
                  lambda: quantile)


def normals_from_bits(bits: jax.Array, dtype) -> jax.Array:
  """Maps uint64 random words to standard normals (the transform, exposed for tests)."""
  sign_negative = (bits >> jnp.uint64(63)) == jnp.uint64(1)
  magnitude_bits = bits & jnp.uint64(0x7FFFFFFFFFFFFFFF)
  tail_prob = (magnitude_bits.astype(dtype) + jnp.asarray(0.5, dtype)) * jnp.asarray(
      _TWO_POW_MINUS_64, dtype)
  if jnp.dtype(dtype) == jnp.float64:
    z = tail_quantile(tail_prob)
  else:
    z = -ndtri(tail_prob)  # Φ⁻¹(1 − u) ≥ 0
  return jnp.where(sign_negative, -z, z)


def standard_normals_per_key(keys: jax.Array, length: int, dtype) -> jax.Array:
  """``length`` exact-tail normals per key, batch-major (N, length).

  Equal to ``vmap(standard_normal)`` over the keys: the words are drawn per key and
  transformed as one array, outside the ``vmap`` (under ``vmap`` the far-tail
  ``lax.cond`` of ``tail_quantile`` would become a select and run for every draw).
  """
  bits = jax.vmap(lambda key: jax.random.bits(key, (length,), jnp.uint64))(keys)
  return normals_from_bits(bits, dtype)


def standard_normal(key: jax.Array, shape: tuple[int, ...], dtype) -> jax.Array:
  """Standard normal draws with exact tails (see module docstring).

  Must run with 64-bit types enabled (every jaxacct entry point is scoped x64).
  """
  bits = jax.random.bits(key, shape, jnp.uint64)
  return normals_from_bits(bits, dtype)


def normals_from_word_pairs(hi: jax.Array, lo: jax.Array) -> jax.Array:
  """32-bit device code: float32 normals of the 64-bit words (hi << 32) | lo.

  The real z is that of ``normals_from_bits`` for the same word (exact tails to
  |z| ≈ 9.15); the float32 value is within ``NORMAL32_ERROR_ULPS``·u·(1 + |ẑ|) of it.
  """
  sign_negative = (hi >> jnp.uint32(31)) == jnp.uint32(1)
  magnitude_hi = hi & jnp.uint32(0x7FFFFFFF)
  tail_prob = (magnitude_hi.astype(jnp.float32) * jnp.float32(2.0**-32)
               + (lo.astype(jnp.float32) + jnp.float32(0.5)) * jnp.float32(_TWO_POW_MINUS_64))
  z = -ndtri(tail_prob)
  return jnp.where(sign_negative, -z, z)


def standard_normals_per_key32(keys: jax.Array, length: int) -> jax.Array:
  """32-bit device code: ``standard_normals_per_key`` in float32 from the same words, (N, length)."""
  hi, lo = jax.vmap(lambda key: word_pairs(key, length))(keys)
  return normals_from_word_pairs(hi, lo)
