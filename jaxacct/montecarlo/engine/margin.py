"""The certified error margin of the 32-bit device program, and its sound hockey-stick sums.

The 32-bit program (``precision="float32"``: uint32 words, float32 arithmetic, int32 indices,
float32 block sums; no 64-bit type on device) computes for every sample a float32 loss L̂
and a float32 margin η with

    |L̂ − L(y)| ≤ η,                                                              (M)

where y = C·x + σ·z is the real-valued output that the sample's random words define (the
same words, hence the same y, as the float64 program: ``keys.word_pairs``; x is drawn by
exact integer comparisons, ``kernels/_common.py``) and L(y) its exact privacy loss.
Verification then evaluates every hockey-stick term at ε − η and rounds block sums up
(``hockey_stick_sums32``, ``block_sum_factor``), so the float64 block-ordered total is
≥ Σ (1 − e^{ε − L(y)})₊ over the same draws: δ̂₃₂ ≥ δ̂ of the exact losses and
Algorithm 5 (Dong & Ganesh (2026) App. A) keeps its guarantee.

Proof of (M) (u = 2⁻²⁴; every quantity is per sample; γ_k = k·u/(1 − k·u); all
approximations below are upper bounds, and every constant is rounded up).

Assumptions, each checked by a test on this backend (``tests/montecarlo/test_program32.py``,
``benchmarks/accelerator.py``): IEEE float32 add/multiply, no flush of normal numbers;
exp within ``EXP_ULPS``, log within ``LOG_ULPS`` (relative), expm1 within ``EXPM1_ULPS``,
logaddexp(log q, v) within ``LOGADDEXP_ULPS``·u·(|r| + min(1, 2π)) + u|Δ|π with π = e^{v − r}
and Δ = v − log q (its exp and log1p terms scale with e^{−|Δ|} ≤ 2π; the rounding of the
internal difference Δ moves r by its derivative, ≤ π, times u|Δ|), 1/x within ``DIVIDE_ULPS``;
float32 ``ndtri`` as stated in ``noise.py``.

1. Noise. |ẑ − z| ≤ 8u(1 + |ẑ|) (``noise.NORMAL32_ERROR_ULPS``).
2. Mean. |m̂ − m| ≤ E_m (``MarginConstants.mean_error``, from the view's
   ``strategy.RoundingShape``): participations of a band are separated by at least its
   length, so each entry of C·x is one coefficient times its count (one rounding plus the
   coefficient's); a dense C (``LowerTriangular``) sums ≤ n products, any order, γ_n; the
   balls-in-bins modes are host values rounded once. |m| ≤ c_max.
3. Output. ŷ = fl(m̂ + fl(σ̂ẑ)) with |σ̂ − σ| ≤ uσ: |ŷ − y| ≤ E_y = E_m
   + σ·8u(1 + Z) + 2.01u·σ·Z + u·Y, with Y = max|ŷ| and Z = max|ẑ| ≤ (Y + c_max + E_m)(1 + 3u)/σ̂.
4. Products. d̂_i = Σ_k ĉ_ki ŷ_k: a band's m products are summed as a binary tree of depth
   ⌈log₂ m⌉ (``strategies.banded_toeplitz.sliding_dot_products``, float32), t = ⌈log₂ m⌉ + 1 roundings per
   term; a dense column's n products in any order (``jnp.matmul``), t = n. So
   |d̂_i − Σ_k ĉ_ki ŷ_k| ≤ γ_t Σ|ĉ_ki||ŷ_k|, and with |ĉ − c| ≤ u|c|:
   |d̂_i − d_i| ≤ Δd = ‖c‖₁·[(u + γ_t(1 + u))·Y + E_y], ‖c‖₁ the largest column sum. With shared draws
   (d = d_m + σ·d_z) the same steps bound d_m = Cᵀ(C·x) and d_z = Cᵀz separately and add
   the two roundings of fl(d̂_m + fl(σ̂·d̂_z)) (``shared_draws_product_error``).
5. Per-round ratio. ℓ_i = (2d_i − s_i)·κ, κ = 1/(2σ²); the device forms
   v̂_i = fl(fl(fl(2d̂_i − ŝ_i)·κ̂) + log p̂) with |κ̂ − κ| ≤ (3 + DIVIDE_ULPS)u·κ,
   |ŝ_i − s_i| ≤ Δs = charge_gamma·s_max (γ_{m+3} for a band's column norms) and
   |log p̂ − log p| ≤ u|log p|; then â_i = exp(v̂_i). Hence â_i = p·e^{ℓ_i}·e^{θ_i} with
   |θ_i| ≤ δ = κ(1 + 8u)(2Δd + Δs) + 8.2u·Λ
   + 1.01u(Λ + |log p|) + u|log p| + 1.01·EXP_ULPS·u, Λ = (2D + s_max)·κ(1 + 4u) ≥ max|ℓ̂|,
   D = max|d̂| (``round_ratio_error``).
6. Recursion, b ≥ 2 (Dong & Ganesh (2026) Eq. (1)). f₀ is a sum over participation paths of
   (powers of q)·Π_{i ∈ path} a_i, and a path holds at most K = ⌈n/b⌉ participations, so
   perturbing every a_i by e^{θ_i} moves ln f₀ by at most K·δ. The linear-domain
   evaluation (``kernels/bminsep.py``) takes host powers q^k (error u), then per chunk of s
   rounds sums ≤ s + 1 nonnegative products: relative error ≤ γ_{s+3} + u per chunk level;
   power-of-two rescaling is exact inside the range check, and a result that underflows is
   flushed to 0 (XLA flushes subnormals): a flushed a_i < 2⁻¹²⁶ times an aligned
   f_{i+b} ≤ 2⁵⁰ against f_i ≥ 2⁻⁵⁰ costs ≤ 2⁻²⁶ relative per round (other flushed
   products far less); over ⌈n/s⌉ + 1 levels ρ = (1 + γ_{s+3} + u)^{⌈n/s⌉+1}
   (1 + n·2⁻²⁶) − 1 and |Δ ln f| ≤ −ln(1 − ρ) (``linear_recursion_error``). The final
   logarithms, the exponent's E·ln 2, the warm-start combination and its normaliser cost
   ≤ 32u(|L̂| + ln 2b + 4) + γ_{b+2} + (LOG_ULPS + 2)·u·1.01(max_j |log Ŝ_j| + 2⁻¹⁶)
   (``final_log_error``): the last term is the log's relative error and E·ln 2's two
   roundings in terms of the computed sums Ŝ_j themselves, which can be ≈ 2⁻¹⁰⁰ inside the
   range check (p ≳ 0.85), so it is not implied by |L̂|. A sample outside the linear
   range is recomputed in log space, where each of the n steps adds ≤ u(4(|log q| + |log p|
   + Λ + 2M) + 8) with M = max_i |L_i| (logaddexp is 1-Lipschitz, so earlier errors do not
   grow) (``log_space_recursion_error``).
7. Poisson (b = 1): L = Σ_i g(v_i), g(v) = logaddexp(log q, v), g′ = π ∈ (0, 1) increasing
   with π(v + θ) ≤ e^{|θ|}π(v): |Σ g(v̂_i) − Σ g(v_i)| ≤ Σ_i e^{δ_i}δ_i·P_i, with δ_i the
   bound of step 5 for round i (Poisson has one band, so steps 3–5 hold per round with
   |ŷ_i|, |ẑ_i|, |d̂_i| in place of the maxima; δ_i holds for every rounding of v̂_i, FMA or
   not) and v̂_i the copy ĝ_i = logaddexp(log q̂, v̂_i) is computed from. P_i ≥ π(v̂_i) is
   derived from the float32 π̂_i = e^{fl(v̂′_i − ĝ_i)}, whose v̂′_i may be a differently rounded
   copy (XLA recomputes v per fusion and contracts t·κ̂ + log p̂ in some): P_i =
   π̂_i(1 + max(2⁻¹⁶, 1.01ρ_i)) with ρ_i = 1.01u(3Λ_i + 2|log p| + LOGADDEXP_ULPS(|ĝ_i| + 1)
   + 2|Δ̂_i| + 1 + EXP_ULPS) ≥ ln(π(v̂_i)/π̂_i) (the copies' mismatch, ĝ's error, the
   subtraction, the exp; ``posterior_bound``). Plus 1.01·LOGADDEXP_ULPS·u·Σ(|ĝ_i| + 2P_i)
   + 1.01u·Σ(|Δ̂_i| + ρ_i)P_i for the logaddexps (|Δ| of the copy v̂_i within ρ_i of |Δ̂_i|),
   1.01u·Σ(|ĝ_i| + P_i) for log q̂ (∂g/∂log q = 1 − π and (1 − π)|log q| ≤ |g| + π), and
   γ_{⌈log₂ n⌉ + 1}·Σ|ĝ_i| for the binary-tree sum (``_common.tree_sum``); the
   float32 sums ΣP and Σ|ĝ| are inflated by 1 + γ_n (``poisson_error``).
8. Sum: η = (6 or 7) + final_log_error, computed in float32 and inflated by 2⁻¹⁹ relative
   plus 2⁻²¹(|L̂| + |ε| + 1) for the roundings of the hockey-stick argument itself
   (``hockey_stick_sums32``).
9. Mixtures (the other families; each kernel's ``log_ratio_with_margin`` states its steps).
   A float32 logsumexp of T terms is 1-Lipschitz in the max norm of its inputs and adds its
   own rounding (``log_sum_exp_error``; with − ln T, ``phase_mixture_error``). Under FMA
   contraction its exponents are fl(x′_j − M̂) with x′_j the exact product or another copy of
   the input than the one the max M̂ saw: t_j ≤ τ (the copies' spread) and S ≥ e^{−τ}
   instead of t ≤ 0, S ≥ 1; the bound carries e^τ explicitly.
   Cyclic Poisson: step 7 per phase (slab sums of ⌈n/T⌉ terms, γ_{⌈n/T⌉}), then phase 0
   (``equal_split``) or the phase mixture (``independent``). Balls-in-bins: the mean is a mode
   m_j (host float64 rounded, within u(1 + 2⁻²⁰)|m|: steps 2–4 with c_max ≥ max m), the phase
   sums of d̂ and the exponents (2Σ_j − ‖m_j‖²)κ carry their rounding into the bin mixture.
   Multi-attribution: entries of C·x are count·c_k (c_max scaled by k_u); the per-round
   mixture over counts has a bound that replaces step 5's δ in the recursion of step 6 with
   p_u = 1 − (1 − p)^{k_u}.
10. Truncated b-min-sep (Dong & Ganesh (2026) App. D). Entries of C·x are x_i·c_k with x^P ≤ 2,
   |x^Q| ≤ 1 (c_max doubled). Per round, ℓ(μ) = (2μd − μ²s)κ for μ ∈ {1, 2, −1} (2μ, μ² exact
   multipliers) is within κ(1 + 8u)(2|μ|Δd + μ²Δs) + 8.2u·Λ_μ; ln t = ln B − ln(r + 1) and
   ln(1 − t) = ln((r + 1 − B)/(r + 1)) are within their roundings (the integers rounded once
   to float32, one division, LOG_ULPS); a mixture logaddexp(ln t + ℓ(μ), ln(1 − t)) is
   1-Lipschitz in the max norm of its inputs plus its own rounding (``truncated_round_errors``).
   Those per-round errors replace step 5's first term in the P/R and Q/R recursions (step 6
   or 7 each) and η = η_P + η_Q + u|L̂| (the subtraction). The batch sizes r are drawn by
   exact inversion against 64-bit integer thresholds (``binomial32.py``); their law is within
   a certified total variation T·τ of the exact one per sample, which the host adds to each
   block sum (a hockey-stick term lies in [0, 1]), so δ̂₃₂ still bounds the exact δ̂.

Hockey-stick sums. With ε↓ = the largest float32 ≤ ε, the device computes
t̂ = −expm1(min(fl(ε↓ − fl(L̂ + η′)), 0)) ≥ (1 − EXPM1_ULPS·u)·(1 − e^{ε − L(y)})₊ and sums a
block of B terms in float32 (any order: ≥ (1 − γ_{B−1})·the exact sum); ``block_sum_factor``
= 1/((1 − γ_{B−1})(1 − EXPM1_ULPS·u)), rounded up, restores an upper bound on the host.

Where the code runs: the bounds are float32 device code beside the kernels (32-bit
programs only); ``block_sum_factor``, ``linear_recursion_error`` and the constants are host
float64.

References:
  Higham, "Accuracy and Stability of Numerical Algorithms" (2002), §3.1–3.4 (γ_k, sums and
  inner products).
  Andy Dong and Arun Ganesh, "Privacy Amplification for BandMF via b-Min-Sep Subsampling",
  arXiv:2602.09338 (v2): §5 (Eq. (1)), App. A, App. D (docs/references.md).
"""

from __future__ import annotations

import math
from typing import NamedTuple

import jax
import jax.numpy as jnp
import numpy as np
from jaxacct.errors import InputError

UNIT_ROUNDOFF = 2.0**-24
"""u of float32 (round to nearest)."""

EXP_ULPS = 4.0
LOG_ULPS = 4.0
EXPM1_ULPS = 8.0
LOGADDEXP_ULPS = 4.0
DIVIDE_ULPS = 2.0
"""Assumed accuracy of float32 elementary functions (measured on this project's CPU: exp 1.4,
log 2.0, expm1 5.7, logaddexp 2.0 in the form above; tests assert the assumptions)."""

NOISE_ULPS = 8.0  # noise.NORMAL32_ERROR_ULPS (asserted equal in the tests)


class MarginConstants(NamedTuple):
  """Per-mechanism inputs of the margin, float32 rounded up (host-built, traced).

  Attributes: c_max ≥ max|entry of C·x| (one coefficient for separated participations of a
  band, a row sum for a dense C, times the largest count), mean_error ≥ max|m̂ − m| of the
  float32 mean, c_abs_sum = the largest ‖column of C‖₁ (‖c‖₁ for a band), tree_gamma = γ of
  the products' roundings, s_max = the largest charge, charge_gamma = its relative rounding,
  log_p and log_q as magnitudes |log p|, |log q| (finite: log q = −∞ at p = 1 enters only as
  q^k = 0).
  """

  c_max: np.ndarray
  mean_error: np.ndarray
  c_abs_sum: np.ndarray
  tree_gamma: np.ndarray
  s_max: np.ndarray
  charge_gamma: np.ndarray
  log_p: np.ndarray
  log_q: np.ndarray


def margin_constants(shape, sampling_prob: float, multiplicity: int = 1) -> MarginConstants:
  """Host: ``MarginConstants`` of a view's ``strategy.RoundingShape`` (``view.rounding_shape``),
  the per-round probability p and the largest count per participation (multi-attribution)."""
  p = float(sampling_prob)
  log_q = abs(math.log1p(-p)) if p < 1.0 else 0.0
  up = lambda value: round_up32(value * (1.0 + 2.0**-40))  # noqa: E731
  mean_max = multiplicity * shape.mean_max
  mean_error = mean_max * (gamma(shape.mean_roundings) * (1.0 + UNIT_ROUNDOFF) + UNIT_ROUNDOFF)
  return MarginConstants(up(mean_max), up(mean_error), up(shape.column_abs_sum),
                         up(gamma(shape.product_roundings)), up(shape.charge_max),
                         up(gamma(shape.charge_roundings)), up(abs(math.log(p))),
                         up(log_q))


def gamma(k: float) -> float:
  """γ_k = k·u/(1 − k·u), the relative error bound of k float32 roundings (Higham §3.1)."""
  ku = k * UNIT_ROUNDOFF
  if ku >= 0.5:
    raise InputError(f'{k} roundings exceed the float32 error analysis (k·u ≥ 1/2)')
  return ku / (1.0 - ku)


def tree_depth(bands: int) -> int:
  """Roundings per term of a binary-tree sum of ``bands`` products: ⌈log₂ m⌉ + 1."""
  return max(0, (bands - 1).bit_length()) + 1


def block_sum_factor(block_size: int) -> float:
  """Host: factor ≥ 1 turning a float32 block sum of hockey-stick terms into an upper bound."""
  factor = 1.0 / ((1.0 - gamma(max(block_size - 1, 1))) * (1.0 - EXPM1_ULPS * UNIT_ROUNDOFF))
  return float(np.nextafter(factor * (1.0 + 2.0**-50), np.inf))


def round_down32(values) -> np.ndarray:
  """Host: the largest float32 ≤ each float64 value."""
  values = np.asarray(values, np.float64)
  rounded = values.astype(np.float32)
  too_big = rounded.astype(np.float64) > values
  return np.where(too_big, np.nextafter(rounded, np.float32(-np.inf)), rounded).astype(np.float32)


def round_up32(values) -> np.ndarray:
  """Host: the smallest float32 ≥ each float64 value."""
  return -round_down32(-np.asarray(values, np.float64))


def linear_recursion_error(iterations: int, chunk: int) -> float:
  """Host: bound on |Δ ln f₀| of the chunked linear-domain recursion (proof step 6)."""
  levels = -(-iterations // chunk) + 1
  growth = (1.0 + gamma(chunk + 3) + UNIT_ROUNDOFF) ** levels * (1.0 + iterations * 2.0**-26)
  return float(-math.log(2.0 - growth) * (1.0 + 2.0**-40))  # −ln(1 − ρ), ρ = growth − 1


def final_log_error(losses: jax.Array, min_sep: int,
                    log_sums: jax.Array | None = None) -> jax.Array:
  """Device: the final logarithms and combinations (proof step 6), per sample.

  ``log_sums`` ≥ max_j |log Ŝ_j| over the computed logarithms of the linear recursion's sums
  (``bminsep.linear_log_ratio(..., log_sums=True)``; 0 where the sample was recomputed in log
  space): the log's relative error LOG_ULPS·u·|ln Ŝ| and the two roundings of E·ln 2
  (ln 2 to float32 and the product, ≤ 2u(|L̂_j| + |ln Ŝ_j|)) are then charged for any Ŝ,
  also Ŝ ≪ 1 (p ≳ 0.85), as (LOG_ULPS + 2)·u·1.01(|log Ŝ| + 2⁻¹⁶); the 2⁻¹⁶ covers the
  log's absolute error near Ŝ = 1 (LOG_ULPS·u) and a differently ordered copy of the sum
  (γ_{s+1}, s ≤ 32 rows).
  """
  u = UNIT_ROUNDOFF
  error = (32.0 * u * (jnp.abs(losses) + float(math.log(2.0 * min_sep) + 4.0))
           + float(gamma(min_sep + 2)))
  if log_sums is None:
    return error
  return error + (LOG_ULPS + 2.0) * u * 1.01 * (log_sums + 2.0**-16)


def one_sigma_product_error(y_max: jax.Array, sigma: jax.Array, constants) -> jax.Array:
  """Device: Δd ≥ max_i |d̂_i − d_i| from ŷ = fl(C·x + σz) (proof steps 1–4), per sample.

  ``constants`` is ``MarginConstants``; y_max = max|ŷ| per sample; ``sigma`` is σ̂.
  """
  u = UNIT_ROUNDOFF
  mean_error = constants.mean_error
  z_max = (y_max + constants.c_max + mean_error) * (1.0 + 3.0 * u) / sigma
  y_error = (mean_error + sigma * NOISE_ULPS * u * (1.0 + z_max) + 2.01 * u * sigma * z_max
             + u * y_max)
  return constants.c_abs_sum * ((u + constants.tree_gamma * (1.0 + u)) * y_max + y_error)


def shared_draws_product_error(z_max: jax.Array, dz_max: jax.Array, dm_max: jax.Array,
                               sigma: jax.Array, constants) -> tuple[jax.Array, jax.Array]:
  """Device: (Δd, D) for d̂ = fl(d̂_m + fl(σ̂·d̂_z)) (proof step 4, shared draws), per sample.

  z_max = max|ẑ|, dz_max = max|d̂_z|, dm_max = max|d̂_m| per sample; ``sigma`` is σ̂
  (broadcastable); D bounds max|d̂| over the rounds.
  """
  u = UNIT_ROUNDOFF
  c_abs_sum, tree, entry_error = constants.c_abs_sum, constants.tree_gamma, constants.mean_error
  mean_error = c_abs_sum * ((u + tree * (1.0 + u)) * (constants.c_max + entry_error)
                            + entry_error)
  noise_error = c_abs_sum * ((u + tree * (1.0 + u)) * z_max + NOISE_ULPS * u * (1.0 + z_max))
  d_max = (dm_max + sigma * dz_max) * (1.0 + 2.0 * u)
  error = (mean_error + sigma * (1.0 + u) * noise_error + 2.01 * u * sigma * dz_max
           + u * d_max)
  return error, d_max


def round_ratio_error(product_error: jax.Array, d_max: jax.Array, kappa: jax.Array,
                      constants) -> tuple[jax.Array, jax.Array]:
  """Device: (δ ≥ |ln â_i − ln(p·e^{ℓ_i})| for every round, Λ ≥ max|ℓ̂_i|) (proof step 5).

  ``kappa`` is an upper bound on 1/(2σ²) (broadcastable with the per-sample arrays).
  """
  u = UNIT_ROUNDOFF
  s_max, log_p = constants.s_max, jnp.abs(constants.log_p)
  ratio_max = (2.0 * d_max + s_max) * kappa * (1.0 + 4.0 * u)
  charge_error = constants.charge_gamma * s_max
  delta = (kappa * (1.0 + 8.0 * u) * (2.0 * product_error + charge_error) + 8.2 * u * ratio_max
           + 1.01 * u * (ratio_max + log_p) + u * log_p + 1.01 * EXP_ULPS * u)
  return delta, ratio_max


def log_space_recursion_error(iterations: int, ratio_max: jax.Array, loss_magnitude: jax.Array,
                              constants) -> jax.Array:
  """Device: the log-space recursion's rounding (proof step 6, fallback), per sample."""
  u = UNIT_ROUNDOFF
  return iterations * u * (4.0 * (jnp.abs(constants.log_q) + jnp.abs(constants.log_p) + ratio_max
                                  + 2.0 * loss_magnitude) + 8.0)


def poisson_error(delta: jax.Array, ratio_max: jax.Array, log_p: jax.Array,
                  posterior: jax.Array, terms: jax.Array, gaps: jax.Array,
                  sums=None, terms_per_sum: int | None = None,
                  summation_gamma: float | None = None) -> jax.Array:
  """Device: proof step 7, per sum: Σ_i e^{δ_i}δ_i·P_i + the logaddexps + log q̂ + the sum's
  rounding, with P_i ≥ π(v̂_i) derived from π̂_i (``posterior_bound``).

  ``delta`` (N, n) or (N, 1) is step 5's δ, ``ratio_max`` its Λ ≥ |ℓ̂| (same shapes),
  ``log_p`` = |log p| (``MarginConstants.log_p``); ``posterior`` π̂, ``terms`` ĝ and
  ``gaps`` |Δ̂| (N, n) (``kernels/bminsep.poisson_terms32``). By default the loss is
  the binary-tree sum of all n terms (``_common.tree_sum``); ``sums`` maps (N, n) to (N, G)
  sums of ``terms_per_sum`` terms each computed with relative error ≤ ``summation_gamma``
  (cyclic Poisson: one sum per phase). The float32 sums of the bound are inflated by
  1 + γ_{terms per sum} to bound their exact values.
  """
  u = UNIT_ROUNDOFF
  n = terms.shape[1]
  bound, mismatch = posterior_bound(ratio_max, log_p, posterior, terms, gaps)
  if sums is None:
    sums, terms_per_sum = (lambda v: jnp.sum(v, axis=1)), n
    summation_gamma = gamma(tree_depth(n))
  inflate = 1.0 + float(gamma(terms_per_sum))
  perturbation = sums(jnp.exp(delta) * delta * bound)
  magnitude = sums(jnp.abs(terms))
  weight = sums(bound)
  # u|Δ_a|π for the logaddexp's internal difference: |Δ_a| ≤ |Δ̂| + the copies' mismatch.
  difference = sums((gaps + mismatch) * bound)
  return inflate * (perturbation + 1.01 * LOGADDEXP_ULPS * u * (magnitude + 2.0 * weight)
                    + 1.01 * u * (magnitude + weight) + 1.01 * u * difference
                    + float(summation_gamma) * magnitude)


def posterior_bound(ratio_max: jax.Array, log_p: jax.Array, posterior: jax.Array,
                    terms: jax.Array, gaps: jax.Array) -> tuple[jax.Array, jax.Array]:
  """Device: (P_i ≥ π(v̂_i), ρ_i) per round (proof step 7), from π̂ = e^{fl(v̂′ − ĝ)}.

  ĝ = logaddexp(log q̂, v̂) and π̂ may see two differently rounded copies v̂, v̂′ of
  v = t·κ̂ + log p̂ (XLA recomputes v per fusion and contracts t·κ̂ + log p̂ into one FMA
  in some of them): the copies are fl(t·κ̂ + log p̂) and fl(fl(t·κ̂) + log p̂), so
  |v̂′ − v̂| ≤ u|t·κ̂| + u(|v̂| + |v̂′|) ≤ 1.01u(3Λ + 2|log p|) (t = fl(2d̂ − ŝ) is the same
  in every copy: 2d̂ is exact; an input ℓ̂ that is no product, a multi-attribution mixture or
  a truncated round's logaddexp, is taken as one float32 value (a caller whose ℓ̂ may have
  copies differing by more must add their spread to Λ), so fl(ℓ̂ + log p̂) has one rounding and
  Λ ≥ |ℓ̂| still bounds |v̂|). Then
  ln π(v̂) − ln π̂ ≤ |v̂′ − v̂| + |ĝ − g(v̂)| + u|v̂′ − ĝ| + 1.01·EXP_ULPS·u, with
  |ĝ − g(v̂)| ≤ 1.01·LOGADDEXP_ULPS·u(|ĝ| + 1) + u|Δ| (π ≤ 1) and
  |v − g(v)| = ln(1 + e^{−Δ}) ≤ |Δ| + ln 2, so ln(π/π̂) ≤ ρ = 1.01u(3Λ + 2|log p|
  + LOGADDEXP_ULPS(|ĝ| + 1) + 2|Δ̂| + 1 + EXP_ULPS) (the 1.01 absorbs the second-order
  differences between |Δ|, |v̂| and their computed copies). e^ρ ≤ 1 + 1.01ρ for ρ ≤ 2⁻⁷, so
  P = π̂(1 + max(2⁻¹⁶, 1.01ρ)) (the floor 2⁻¹⁶ is the previous inflation, kept so that η
  never decreases); for ρ > 2⁻⁷, P ≥ 1 ≥ π. An underflowed π̂ is read as 2⁻¹²⁶ ≥ its value,
  so e^δ·δ·P stays an upper bound and an overflowing e^δ gives η = inf, never inf·0 = NaN.
  ρ also bounds the copies' mismatch in Δ (returned for ``poisson_error``).
  """
  u = UNIT_ROUNDOFF
  posterior = jnp.maximum(posterior, jnp.float32(2.0**-126))
  rho = 1.01 * u * (3.0 * ratio_max + 2.0 * jnp.abs(log_p)
                    + LOGADDEXP_ULPS * (jnp.abs(terms) + 1.0) + 2.0 * gaps
                    + (1.0 + EXP_ULPS))
  bound = posterior * (1.0 + jnp.maximum(jnp.float32(2.0**-16), 1.01 * rho))
  return jnp.where(rho <= 2.0**-7, bound, jnp.maximum(bound, 1.0)), rho


def log_sum_exp_error(count: int, magnitude: jax.Array,
                      spread: jax.Array | None = None) -> jax.Array:
  """Device: rounding of a float32 ``jax.nn.logsumexp`` of ``count`` terms, per sample.

  ``magnitude`` ≥ |result|. The max M̂ = max_j x̂_j is taken over one copy of the inputs and
  the exponents t̂_j = fl(x′_j − M̂) over another: XLA contracts a product input into the
  subtraction (x′_j the exact product, x̂_j its rounding) and may recompute an input per
  fusion. ``spread`` τ ≥ max_j |x′_j − x̂_j|. By default (inputs that are float32 values or
  exact products whose roundings the max sees) a t_j > 0 needs fl(x̃_j) = M̂ < x̃_j, so
  τ = u|M̂|/(1 − u) ≤ 1.01u(magnitude + ln count + 1) (|M̂| ≤ |result|(1 + u) + |log Ŝ|
  and |log Ŝ| ≤ ln count + τ + 1 below); callers whose copies may differ otherwise pass
  2× their input error. logsumexp(x′) = M̂ + ln S for any M̂, S = Σ e^{t_j}, t_j = x′_j − M̂
  ≤ τ and S ≥ e^{−τ} (the maximiser's own term). The subtraction and the exp perturb each
  term by ≤ 1.01u(EXP_ULPS + |t_j|)e^{t_j} (a flushed term by ≤ 2⁻¹²⁶), |t|e^t ≤
  h = max(1/e, τe^τ) for t ≤ τ, so relative to S: r ≤ u(1.01·EXP_ULPS + 1.02·count·e^τ·h)
  + γ_{count−1} (the sum) + count·e^τ·2⁻¹²⁶; compounded, the computed sum is within
  r′ = r(1 + r/4) of S relative, so its log moves by −ln(1 − r′) ≤ r′(1 + r′)
  ≤ r·max(1.02, 1 + 2r) for r ≤ 1/4 (η = inf beyond); log Ŝ is within
  LOG_ULPS·u·(max(ln count, 1) + τ + 2r) of it (Ŝ ∈ [e^{−τ}(1 − r), count·e^τ(1 + r)]),
  and adding M̂ rounds by u·|result| ≤ 1.01u·``magnitude``. Errors in the inputs add
  max_j |x′_j − x_j| (logsumexp is 1-Lipschitz in the max norm): the caller's. e^τ is
  evaluated in float32 and inflated by 8u.
  """
  u = UNIT_ROUNDOFF
  log_count = math.log(count)
  if spread is None:
    spread = 1.01 * u * (magnitude + (log_count + 1.0))
  growth = jnp.exp(spread) * (1.0 + 8.0 * u)  # ≥ e^τ
  peak = jnp.maximum(jnp.float32(1.0 / math.e), spread * growth)  # ≥ max_{t ≤ τ} |t|e^t
  relative = (u * (1.01 * EXP_ULPS + 1.02 * count * growth * peak)
              + float(gamma(max(count - 1, 1))) + count * 2.0**-120 * growth)
  constant = (relative * jnp.maximum(1.02, 1.0 + 2.0 * relative)
              + LOG_ULPS * u * (max(log_count, 1.0) + spread + 2.0 * relative))
  return jnp.where(relative <= 0.25, constant + 1.01 * u * magnitude, jnp.inf)


def phase_mixture_error(count: int, losses: jax.Array) -> jax.Array:
  """Device: rounding of L̂ = logsumexp_s(x̂_s) − ln T̂ over ``count`` = T phases or bins
  (cyclic Poisson ``independent``, balls-in-bins), per sample: ``log_sum_exp_error`` (its
  default spread: inputs are float32 values or exact products) plus the subtraction (u|L̂|)
  and ln T rounded to float32 (u·ln T)."""
  log_count = math.log(count)
  return (log_sum_exp_error(count, jnp.abs(losses) + 1.01 * log_count)
          + UNIT_ROUNDOFF * (1.01 * jnp.abs(losses) + 2.0 * log_count))


def ratio_bounds(d: jax.Array, product_error: jax.Array, kappa: jax.Array,
                 constants) -> tuple[jax.Array, jax.Array]:
  """Device: ``round_ratio_error`` per round when ``product_error`` is per round (N, n) (one
  band: each d_i sees one output), else per sample (N, 1)."""
  d_abs = jnp.abs(d) if product_error.shape[1] > 1 else jnp.max(jnp.abs(d), axis=1,
                                                                 keepdims=True)
  return round_ratio_error(product_error, d_abs, kappa, constants)


def truncated_round_errors(d: jax.Array, product_error: jax.Array, kappa: jax.Array,
                           constants, truncation: jax.Array, log_b: jax.Array,
                           log_t: jax.Array, log_not_t: jax.Array, a_p: jax.Array,
                           a_q: jax.Array):
  """Device: ((δ^P, Λ^P), (δ^Q, Λ^Q)) per round (N, n) for the truncated recursions' inputs
  â^P, â^Q (proof step 10): δ bounds |ln â_i − ln(p·e^{a_i})| as in step 5, Λ ≥ |â_i|.

  ``log_b`` = ln B rounded to nearest; ``log_t`` = fl(ln B̂ − ln ĉ) and ``log_not_t`` =
  ln fl(fl(r − B + 1)/ĉ) with ĉ = fl(fl(r) + 1), as
  computed by ``kernels/truncated.log_ratio_with_margin32``; ``truncation`` marks r ≥ B.
  """
  u = UNIT_ROUNDOFF
  d_abs = (jnp.abs(d) if product_error.shape[1] > 1
           else jnp.max(jnp.abs(d), axis=1, keepdims=True))
  s_max, charge_error = constants.s_max, constants.charge_gamma * constants.s_max

  def ell_error(mu: float):
    magnitude = (2.0 * abs(mu) * d_abs + mu * mu * s_max) * kappa * (1.0 + 4.0 * u)
    error = (kappa * (1.0 + 8.0 * u) * (2.0 * abs(mu) * product_error + mu * mu * charge_error)
             + 8.2 * u * magnitude)
    return error, magnitude

  # ln t̂ = fl(ln B̂ − fl(ln ĉ)), ĉ = fl(fl(r) + 1) within 2.01u of r + 1 (≤ 2.02u after the
  # log): ln B̂ within u·ln B (host), the log within LOG_ULPS relative of ln ĉ ≤ ln B̂ + |ln t̂|
  # (1 + 2u), the subtraction u|ln t̂|. ln(1 − t) = ln fl(fl(r − B + 1)/ĉ): the exact integer
  # rounded once, ĉ, one division (relative (3.01 + DIVIDE_ULPS)u), then LOG_ULPS relative.
  log_b = jnp.abs(log_b)
  t_error = 1.02 * u * (log_b + 2.02 + LOG_ULPS * (log_b + jnp.abs(log_t)) + jnp.abs(log_t))
  not_t_error = 1.02 * (3.01 + DIVIDE_ULPS) * u + 1.01 * LOG_ULPS * u * jnp.abs(log_not_t)
  log_p = jnp.abs(constants.log_p)

  def recursion_inputs(value, value_error):
    # Step 5's tail: v̂ = fl(â + log p̂) and exp(v̂).
    bound = jnp.abs(value) * (1.0 + 2.0**-20) + value_error
    delta = value_error + 1.01 * u * (bound + log_p) + u * log_p + 1.01 * EXP_ULPS * u
    return delta, bound

  def mixture(mu: float, value):
    error, magnitude = ell_error(mu)
    inner = t_error + error + u * (jnp.abs(log_t) + magnitude)
    return jnp.maximum(inner, not_t_error) + LOGADDEXP_ULPS * u * (jnp.abs(value) + 2.0)

  one_error, _ = ell_error(1.0)
  p_error = jnp.where(truncation, mixture(2.0, a_p), one_error)
  q_error = jnp.where(truncation, mixture(-1.0, a_q), 0.0)
  return recursion_inputs(a_p, p_error), recursion_inputs(a_q, q_error)


def upper_losses32(losses: jax.Array, margins: jax.Array) -> jax.Array:
  """Device (float32): fl(L̂ + η′) ≥ L(y), η′ = η(1 + 2⁻¹⁹) + 2⁻²¹(|L̂| + 1) covering the
  rounding of the sum (step 8): the loss the hockey-stick terms and the histogram use."""
  return losses + (margins * (1.0 + 2.0**-19) + 2.0**-21 * (jnp.abs(losses) + 1.0))


def hockey_stick_sums32(epsilons: jax.Array, losses: jax.Array, margins: jax.Array,
                        valid: jax.Array) -> tuple[jax.Array, jax.Array]:
  """Device (float32): per-ε sums of t̂ = −expm1(min(ε − (L̂ + η′), 0)) and of t̂² over a block.

  ``epsilons`` (E,) are rounded down on the host; η′ = η(1 + 2⁻¹⁹) + 2⁻²¹(|L̂| + |ε| + 1)
  covers the roundings of the argument (see the module docstring). Masked samples add 0.
  """
  shifted = upper_losses32(losses, margins)[None, :] + 2.0**-21 * jnp.abs(epsilons)[:, None]
  terms = -jnp.expm1(jnp.minimum(epsilons[:, None] - shifted, 0.0))
  terms = jnp.where(valid[None, :], terms, 0.0)
  return jnp.sum(terms, axis=1), jnp.sum(jnp.square(terms), axis=1)
