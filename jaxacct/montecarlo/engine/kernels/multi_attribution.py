"""Kernel of multi-attribution b-min-sep sampling (``MultiAttributionBMinSep``), user level, with
k_u ≥ 2 examples per user (k_u = 1 is cold-start b-min-sep: the ``bminsep`` kernel's).

Theorem 6.1 of Dong & Ganesh (2026): after contribution bounding a user's participation vector is
dominated by x with x_i ~ Binomial(k_u, p) when none of the previous b − 1 rounds is positive,
else 0. That is cold-start b-min-sep of the *user* with p_u = 1 − (1 − p)^{k_u} and an
independent zero-truncated Binomial(k_u, p) multiplicity per participation; the loss is Eq. (1)
with the per-round ratio replaced by the multiplicity mixture.

Random sub-streams of a sample key (``conventions.Stream``): ``TRIALS`` (the user's geometric
gaps), ``MULTIPLICITY`` (the count per participation).

32-bit program (``precision="float32"``): the user's gaps and the counts are drawn by exact
integer thresholds of the exact model ((1 − p)^{k_u} and the zero-truncated binomial CDF as
rationals), so they equal the float64 program's draws up to its own rounding at a
threshold; the per-round mixture carries its margin into the b-min-sep recursion's
(``log_ratio_with_margin``).

References:
  Andy Dong and Arun Ganesh, "Privacy Amplification for BandMF via b-Min-Sep Subsampling",
  arXiv:2602.09338 (v2): §6.1 (Algorithm 3), §6.2 (Theorem 6.1 and its recursion), §6.3 (Algorithm
  4, Conjecture 6.2) (docs/references.md).
"""

from __future__ import annotations

import dataclasses
import fractions
import math
from typing import Any, NamedTuple

import jax
import jax.numpy as jnp
import numpy as np

from jaxacct import schemes
from jaxacct.conventions import Stream
from jaxacct.montecarlo.engine import margin
from jaxacct.montecarlo.engine.kernels import _common, bminsep
from jaxacct.montecarlo.engine.kernels.base import NoInfo, SchemeKernel, register


def multiplicity_log_weights(sampling_prob: jax.Array, multiplicity: int) -> tuple[jax.Array,
                                                                                   jax.Array]:
  """(log p_u, log of the zero-truncated Binomial(k_u, p) pmf at j = 1 … k_u), float64.

  p_u = 1 − (1 − p)^{k_u} = Pr[Binomial(k_u, p) ≥ 1] (Dong & Ganesh (2026) Theorem 6.1).
  """
  k = multiplicity
  log_q = jnp.log1p(-sampling_prob)
  log_p_u = jnp.log(-jnp.expm1(k * log_q))
  j = jnp.arange(1, k + 1, dtype=jnp.float64)
  log_choose = (jax.scipy.special.gammaln(k + 1.0) - jax.scipy.special.gammaln(j + 1.0)
                - jax.scipy.special.gammaln(k - j + 1.0))
  # (k − j)·log(1 − p) is 0·(−inf) = nan at p = 1 for j = k: use where.
  log_pmf = log_choose + j * jnp.log(sampling_prob) + jnp.where(j < k, (k - j) * log_q, 0.0)
  return log_p_u, log_pmf - log_p_u


def participation(keys: jax.Array, sampling_prob: jax.Array, iterations: int, min_sep: int,
                  multiplicity: int) -> jax.Array:
  """A user's participation counts x under Theorem 6.1's model, batch-major int (N, n).

  The user's participation rounds are cold-start b-min-sep with p_u (geometric
  gaps, ``bminsep.participation``); each carries an independent
  zero-truncated Binomial(k_u, p) count, drawn by inversion of its k_u-entry CDF.
  """
  log_p_u, log_weights = multiplicity_log_weights(sampling_prob, multiplicity)
  rounds = bminsep.participation(keys, jnp.exp(log_p_u), iterations, min_sep, False)
  words = _common.stream_words(keys, Stream.MULTIPLICITY, iterations)
  uniform = ((words >> 11).astype(jnp.float64) + 0.5) * 2.0**-53
  cdf = jnp.cumsum(jnp.exp(log_weights))[:-1]  # Pr[count ≤ j], j = 1 … k_u − 1
  counts = 1 + jnp.sum(uniform[..., None] > cdf, axis=-1)
  return jnp.where(rounds, counts, 0)


def log_ratio(d: jax.Array, norms: jax.Array, sampling_prob: jax.Array, scale: jax.Array,
              min_sep: int, multiplicity: int) -> jax.Array:
  """ln P/Q of multi-attribution b-min-sep by Theorem 6.1's recursion (§6.2), log space.

  f_i = (1 − p)^{k_u} f_{i+1} + Σ_{j=1}^{k_u} Pr[Bin(k_u, p) = j]·N(j c_i)/N(0)·f_{i+b}
  is Eq. (1) with p_u = 1 − (1 − p)^{k_u} in place of p and the per-round
  log-likelihood ratio replaced by the zero-truncated mixture
  a_i = logsumexp_j [log Pr[Bin = j | ≥ 1] + (2j d_i − j² s_i)/(2σ²)], so it
  runs through ``bminsep.log_ratio`` (cold start).
  """
  dtype = d.dtype
  log_p_u, log_weights = multiplicity_log_weights(sampling_prob, multiplicity)
  j = jnp.arange(1, multiplicity + 1, dtype=dtype)
  terms = (log_weights.astype(dtype)
           + (2.0 * j * d[..., None] - jnp.square(j) * norms[..., None]) * scale)
  return bminsep.log_ratio(jax.nn.logsumexp(terms, axis=-1), jnp.exp(log_p_u), min_sep, False)


class Params32(NamedTuple):
  """Traced parameters of the 32-bit multi-attribution program (host-built, 32-bit types).

  Attributes: user (``bminsep.Params32`` of the user's chain, p_u = 1 − (1 − p)^{k_u}, exact
  gap thresholds); count_thresholds uint32 (2, k_u − 1) (``count_thresholds``);
  log_weights float32 (k_u,), the log zero-truncated Binomial(k_u, p) pmf; max_log_weight
  ≥ max_j |log w_j|.
  """

  user: bminsep.Params32
  count_thresholds: Any
  log_weights: Any
  max_log_weight: Any

  @property
  def margin(self) -> margin.MarginConstants:
    """The user chain's ``margin.MarginConstants`` (what the 32-bit program reads)."""
    return self.user.margin


def count_thresholds(sampling_prob: float, multiplicity: int) -> np.ndarray:
  """Host: the counts of ``participation`` as thresholds on the 53-bit word M = W >> 11.

  count = 1 + #{j < k_u : (M + ½)·2⁻⁵³ > F_j}, F_j = Pr[Bin(k_u, p) ≤ j | ≥ 1], is
  1 + #{j : M ≥ τ_j}, τ_j = ⌊F_j·2⁵³ − ½⌋ + 1, with F_j exact (``fractions``). Returns τ_j as
  (τ >> 21, τ & (2²¹ − 1)) rows, uint32 (2, k_u − 1).
  """
  p = fractions.Fraction(float(sampling_prob))
  k = multiplicity
  q = 1 - p
  pmf = [math.comb(k, j) * p**j * q**(k - j) for j in range(k + 1)]
  at_least_one = 1 - q**k
  rows = np.zeros((2, k - 1), np.uint32)
  cdf = fractions.Fraction(0)
  for j in range(1, k):
    cdf += pmf[j] / at_least_one
    threshold = math.floor(cdf * 2**53 - fractions.Fraction(1, 2)) + 1
    # τ_j = 2⁵³ (F_j within 2⁻⁵⁴ of 1) is never reached: (2³² − 1, 2²¹) exceeds every M.
    rows[:, j - 1] = ((threshold >> 21, threshold & ((1 << 21) - 1)) if threshold < 1 << 53
                      else (0xFFFFFFFF, 1 << 21))
  return rows


def params32(mechanism) -> Params32:
  """Host: ``Params32`` (float64 logs of the exact weights, rounded to float32)."""
  scheme = mechanism.scheme
  p, k = float(scheme.sampling_prob), scheme.max_examples_per_user
  n, b = scheme.iterations, scheme.min_sep
  p_user = -math.expm1(k * math.log1p(-p)) if p < 1.0 else 1.0
  with jax.enable_x64(True):
    _, log_weights = multiplicity_log_weights(jnp.float64(p), k)
  log_weights = np.asarray(log_weights, np.float64)
  gaps, count = bminsep.gap_thresholds(p, n, k) if b > 1 else (None, None)
  chain = bminsep.chain32(p_user, b)
  if b > 1 and p < 1.0:  # 1/ln q_u = 1/(k_u·ln(1 − p)): no cancellation in 1 − p_u
    chain = chain._replace(per_log_stay=np.float32(1.0 / (k * math.log1p(-p))))
  # Entries of C·x are count·(an entry of C x) with count ≤ k_u.
  constants = margin.margin_constants(_common.rounding_shape(mechanism), p_user, k)
  user = bminsep.Params32(chain, _common.bernoulli_threshold(p_user) if b == 1 else None,
                          gaps, None if count is None else np.int32(count), None, constants)
  # |log ŵ_j − log w_j| ≤ u|log w_j| + float64's ~k·2⁻⁵⁰: covered by 2⁻²⁰ relative slack.
  # Weights of probability 0 (p = 1) are −inf in both precisions and add exactly 0.
  finite = np.abs(log_weights[np.isfinite(log_weights)])
  return Params32(user, count_thresholds(p, k), log_weights.astype(np.float32),
                  margin.round_up32(np.max(finite) * (1.0 + 2.0**-20)))


def participation32(keys: jax.Array, params: Params32, iterations: int, min_sep: int,
                    multiplicity: int) -> jax.Array:
  """``participation`` in 32-bit code: the same counts from the same words, int32 (N, n)."""
  rounds = bminsep.participation32(keys, params.user, iterations, min_sep, False)
  hi, lo = _common.stream_word_pairs(keys, Stream.MULTIPLICITY, iterations)
  low = lo >> jnp.uint32(11)  # M = hi·2²¹ + (lo >> 11)
  thresholds = params.count_thresholds
  at_least = ((hi[..., None] > thresholds[0]) | ((hi[..., None] == thresholds[0])
                                                  & (low[..., None] >= thresholds[1])))
  counts = 1 + jnp.sum(at_least, axis=-1, dtype=jnp.int32)
  return jnp.where(rounds, counts, 0)


def log_ratio_with_margin(d: jax.Array, norms: jax.Array, params: Params32, kappa: jax.Array,
                          product_error: jax.Array, min_sep: int,
                          multiplicity: int) -> tuple[jax.Array, jax.Array]:
  """32-bit program: (L̂, η) per sample (``margin`` proof steps 5–7 with the mixture).

  The mixture a_i = logsumexp_j t_ij, t_ij = log w_j + (2j·d_i − j²·s_i)κ, is formed as in
  float64. With Δd ≥ |d̂ − d|, D = max|d̂|, Δs = charge_gamma·s_max (the view's charge)
  and k = k_u: the numerator A = 2j·d − j²·s moves by ΔA = 2kΔd + k²Δs + 2.01u(2kD + k²s_max);
  with X = (2kD + k²s_max)·κ̂(1 + 4u) ≥ max|Â·κ̂| and W ≥ max|log w_j|,
  |t̂ − t| ≤ κ̂(1 + 8u)ΔA + (5 + DIVIDE_ULPS)u·X + 1.01u·W + 1.01u(X + W) for any rounding
  of t̂ (FMA or not); the logsumexp adds ``margin.log_sum_exp_error`` with spread 2|t̂ − t|
  (its max and its exponents may see different copies of t̂). The recursion then takes â_i = exp(â_i + log p̂_u), so
  δ = Δa + 1.01u(Λ + |log p_u|) + u|log p_u| + 1.01·EXP_ULPS·u (Λ ≥ max|â|) enters
  ``bminsep.log_ratio_with_margin`` as step 5's δ does.
  """
  u = margin.UNIT_ROUNDOFF
  constants = params.user.margin
  k = multiplicity
  j = jnp.arange(1, k + 1, dtype=jnp.float32)
  terms = params.log_weights + (2.0 * j * d[..., None] - jnp.square(j) * norms[..., None]) * kappa
  mixture = jax.nn.logsumexp(terms, axis=-1)
  d_max = jnp.max(jnp.abs(d), axis=1, keepdims=True)
  scale = 2.0 * k * d_max + k * k * constants.s_max
  numerator_error = (2.0 * k * jnp.max(product_error, axis=1, keepdims=True)
                     + k * k * constants.charge_gamma * constants.s_max + 2.01 * u * scale)
  exponent_max = scale * kappa * (1.0 + 4.0 * u)
  weight = params.max_log_weight
  term_error = (kappa * (1.0 + 8.0 * u) * numerator_error
                + (5.0 + margin.DIVIDE_ULPS) * u * exponent_max + 1.01 * u * weight
                + 1.01 * u * (exponent_max + weight))
  mixture_max = jnp.max(jnp.abs(mixture), axis=1, keepdims=True)
  log_p = constants.log_p
  # The max and the exponents of the logsumexp may see differently rounded copies of t̂, each
  # within term_error of t: spread ≤ 2·term_error (2.02: its float32 evaluation).
  mixture_error = margin.log_sum_exp_error(k, mixture_max, 2.02 * term_error)
  delta = ((term_error + mixture_error) * (1.0 + 2.0**-16)
           + 1.01 * u * (mixture_max + log_p) + u * log_p + 1.01 * margin.EXP_ULPS * u)
  return bminsep.log_ratio_with_margin(mixture, delta, mixture_max, params.user.chain,
                                       constants, min_sep, False)


@register
@dataclasses.dataclass(frozen=True)
class MultiAttributionKernel(SchemeKernel):
  """User-level b-min-sep by Theorem 6.1 (cold start), k_u ≥ 2 (k_u = 1: ``bminsep``).
  Attributes: iterations n, min_sep b, multiplicity k_u, dtype."""

  schemes = (schemes.MultiAttributionBMinSep,)

  iterations: int
  min_sep: int
  multiplicity: int
  dtype: str

  @classmethod
  def refusal(cls, scheme) -> str | None:
    reason = bminsep.conjecture_refusal(scheme)
    if reason is None and scheme.max_examples_per_user == 1:
      # The model is then exactly cold-start b-min-sep with p (Theorem 6.1).
      return ('multi-attribution with max_examples_per_user = 1 is accounted by the b-min-sep '
              'kernel (Theorem 6.1: cold-start b-min-sep of the users)')
    return reason

  @classmethod
  def build(cls, mechanism, dtype: np.dtype) -> 'MultiAttributionKernel':
    scheme = mechanism.scheme
    return cls(mechanism.iterations, scheme.min_sep, scheme.max_examples_per_user, dtype.name)



  def params(self, mechanism) -> bminsep.SamplingProbParams | Params32:
    if self.dtype == 'float64':
      return bminsep.sampling_prob_params(mechanism)
    return params32(mechanism)

  def sample_mean(self, keys, params, view, direction):
    del direction
    if self.dtype == 'float32':
      x = participation32(keys, params, self.iterations, self.min_sep, self.multiplicity)
    else:
      x = participation(keys, params.sampling_prob, self.iterations, self.min_sep,
                        self.multiplicity)
    return view.separated_mean(x, self.dtype), NoInfo()

  def log_ratio_with_margin(self, d, params, noise_multiplier, kappa, view, info, direction,
                            product_error):
    """32-bit program: (L̂, η) per sample (``log_ratio_with_margin`` above)."""
    del noise_multiplier, info
    norms = view.charge(direction, self.iterations)[None, :]
    return log_ratio_with_margin(d, norms, params, kappa, product_error, self.min_sep,
                                 self.multiplicity)

  def log_ratio(self, d, params, noise_multiplier, view, info, direction):
    del info
    norms = view.charge(direction, self.iterations).astype(d.dtype)[None, :]
    scale = _common.inverse_two_variance(noise_multiplier, d.dtype)
    return log_ratio(d, norms, params.sampling_prob, scale, self.min_sep, self.multiplicity)
