"""Kernel of multi-attribution b-min-sep sampling (``MultiAttributionBMinSep``), user level.

Theorem 6.1 of seed 000: after contribution bounding a user's participation vector is
dominated by x with x_i ~ Binomial(k_u, p) when none of the previous b − 1 rounds is positive,
else 0. That is cold-start b-min-sep of the *user* with p_u = 1 − (1 − p)^{k_u} and an
independent zero-truncated Binomial(k_u, p) multiplicity per participation; the loss is Eq. (1)
with the per-round ratio replaced by the multiplicity mixture.

Random sub-streams of a sample key (``conventions.Stream``): ``TRIALS`` (the user's geometric
gaps), ``MULTIPLICITY`` (the count per participation).

References:
  seed 000: Dong & Ganesh, arXiv 2602.09338v2, §6.2–6.5 (Algorithms 3 and 4, Theorem 6.1,
  Conjecture 6.2).
"""

from __future__ import annotations

import dataclasses

import jax
import jax.numpy as jnp
import numpy as np

from jaxacct import schemes
from jaxacct.conventions import Stream
from jaxacct.montecarlo.kernels import _common, bminsep
from jaxacct.montecarlo.kernels.base import NoInfo, SchemeKernel, register


def multiplicity_log_weights(sampling_prob: jax.Array, multiplicity: int) -> tuple[jax.Array,
                                                                                   jax.Array]:
  """(log p_u, log of the zero-truncated Binomial(k_u, p) pmf at j = 1 … k_u), float64.

  p_u = 1 − (1 − p)^{k_u} = Pr[Binomial(k_u, p) ≥ 1] (seed 000 Theorem 6.1).
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
  """ln P/Q of multi-attribution b-min-sep by Theorem 6.1's recursion (seed 000 §6.3), log space.

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


@register
@dataclasses.dataclass(frozen=True)
class MultiAttributionKernel(SchemeKernel):
  """User-level b-min-sep by Theorem 6.1 (cold start). Attributes: iterations n, min_sep b,
  multiplicity k_u, dtype."""

  schemes = (schemes.MultiAttributionBMinSep,)

  iterations: int
  min_sep: int
  multiplicity: int
  dtype: str

  @classmethod
  def refusal(cls, scheme) -> str | None:
    if scheme.conjectural and not scheme.accept_conjecture_6_2:
      return ("accounting Algorithm 4 (exclusion='participated') by Theorem 6.1's model rests on "
              'the unproven Conjecture 6.2 of seed 000; pass accept_conjecture_6_2=True to accept '
              "it (results are then labelled 'conjectural'), or use Algorithm 3 "
              "(exclusion='sampled')")
    return None

  @classmethod
  def build(cls, mechanism, dtype: np.dtype) -> SchemeKernel:
    scheme = mechanism.scheme
    if scheme.max_examples_per_user == 1:
      # k_u = 1: the model is exactly cold-start b-min-sep with p (Theorem 6.1), whose kernel
      # avoids the one-term mixture's transcendentals and gives the same draws.
      return bminsep.BMinSepKernel(mechanism.iterations, scheme.min_sep, False, dtype.name)
    return cls(mechanism.iterations, scheme.min_sep, scheme.max_examples_per_user, dtype.name)

  @classmethod
  def max_sensitivity_squared(cls, scheme, strategy) -> float:
    # Up to k_u examples of the user in a round, rounds b apart; C ≥ 0, so all-k_u is the max.
    k = scheme.max_examples_per_user
    return float(k * k * strategy.separated_sensitivity_squared(scheme.min_sep,
                                                                scheme.iterations))

  def params(self, mechanism) -> bminsep.SamplingProbParams:
    return bminsep.sampling_prob_params(mechanism)

  def sample_mean(self, keys, params, view, direction):
    del direction
    x = participation(keys, params.sampling_prob, self.iterations, self.min_sep,
                      self.multiplicity)
    return view.separated_mean(x, self.dtype), NoInfo()

  def log_ratio(self, d, params, noise_multiplier, view, info, direction):
    del info
    norms = view.charge(direction, self.iterations).astype(d.dtype)[None, :]
    scale = _common.inverse_two_variance(noise_multiplier, d.dtype)
    return log_ratio(d, norms, params.sampling_prob, scale, self.min_sep, self.multiplicity)
