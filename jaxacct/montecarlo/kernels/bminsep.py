"""Kernel of b-min-sep sampling (``BMinSep``, cold and warm start) and Poisson sampling (b = 1).

Participation: the Markov chain of seed 000 Fig. 1 (Algorithms 1 and 2) as a renewal
process; loss: the suffix recursion of seed 000 Eq. (1), Theorem 5.1 (cold start) and its
warm-start corollary, in log space. With a dense ``LowerTriangular`` C the strategy view
charges each round the App. B bound for the direction asked (upper for ``remove``, lower
for ``add``), and the same recursion computes the bound.

Random sub-streams of a sample key (``conventions.Stream``): ``TRIALS`` (geometric gaps,
or the per-round Bernoulli trials when b = 1), ``START`` (the warm-start state).

References:
  seed 000: Dong & Ganesh, arXiv 2602.09338v2, §2.4, §4 (Fig. 1, Algorithms 1 and 2),
  Eq. (1), Theorem 5.1 and its warm-start corollary, App. B; spec 000 §4.3–4.5.
"""

from __future__ import annotations

import dataclasses
from typing import NamedTuple

import jax
import jax.numpy as jnp
import numpy as np
from jax import lax

from jaxacct import schemes
from jaxacct.conventions import Stream
from jaxacct.montecarlo.kernels import _common
from jaxacct.montecarlo.kernels.base import NoInfo, SchemeKernel, register


def participation(keys: jax.Array, sampling_prob: jax.Array, iterations: int, min_sep: int,
                  warm_start: bool) -> jax.Array:
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
  log_p, log_q = _common.log_terms(sampling_prob, dtype)
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


class SamplingProbParams(NamedTuple):
  """Traced parameters of kernels with one per-round probability: p (float64 scalar)."""

  sampling_prob: jax.Array


def sampling_prob_params(mechanism) -> SamplingProbParams:
  return SamplingProbParams(jnp.asarray(float(mechanism.scheme.sampling_prob), jnp.float64))


@register
@dataclasses.dataclass(frozen=True)
class BMinSepKernel(SchemeKernel):
  """Untruncated b-min-sep (b = 1: Poisson); exact with banded C, App. B bounds with dense C.

  Attributes:
    iterations: n. min_sep: b. warm_start: Algorithm 2 (False when b = 1, where the two
    starts coincide). dtype: kernel arithmetic.
  """

  schemes = (schemes.Poisson, schemes.BMinSep)

  iterations: int
  min_sep: int
  warm_start: bool
  dtype: str

  @classmethod
  def refusal(cls, scheme) -> str | None:
    if scheme.truncates:
      return 'truncating schemes are accounted by the truncated b-min-sep kernel'
    return None

  @classmethod
  def build(cls, mechanism, dtype: np.dtype) -> 'BMinSepKernel':
    scheme = mechanism.scheme
    b = scheme.min_sep
    # With b = 1 warm and cold start coincide (every example is always eligible).
    warm = scheme.warm_start and b > 1
    return cls(mechanism.iterations, b, warm, dtype.name)

  @classmethod
  def max_sensitivity_squared(cls, scheme, strategy) -> float:
    # Participations b apart in every b-th round from round 0: with C ≥ 0 and m ≤ b (or the
    # App. B bound for dense C) the worst pattern.
    return strategy.separated_sensitivity_squared(scheme.min_sep, scheme.iterations)

  def params(self, mechanism) -> SamplingProbParams:
    return sampling_prob_params(mechanism)

  def sample_mean(self, keys, params, view, direction):
    del direction  # only ``remove`` has a signal
    x = participation(keys, params.sampling_prob, self.iterations, self.min_sep,
                      self.warm_start)
    return view.separated_mean(x, self.dtype), NoInfo()

  def log_ratio(self, d, params, noise_multiplier, view, info, direction):
    del info
    ell = _common.per_round_ratios(d, noise_multiplier, view, direction, self.iterations)
    return log_ratio(ell, params.sampling_prob, self.min_sep, self.warm_start)
