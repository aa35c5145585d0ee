"""Kernel of cyclic Poisson sampling (``CyclicPoisson``, both partitions).

Examples are assigned to one of T phases and Poisson-sampled with probability p in the rounds
of their phase. With len(c_col) ≤ T the rounds of one phase have disjoint output windows, so
given the phase s the loss is a product of per-round Poisson terms:
ln P_s/Q = Σ_{i≡s} log(1 − p + p e^{ℓ_i}). ``independent``: the phase is uniform and the loss
mixes over it; ``equal_split``: the phase is public and phase 0 is the worst.

Random sub-streams of a sample key (``conventions.Stream``): ``TRIALS`` (one Bernoulli trial
per round of the phase), ``START`` (the phase, ``independent`` only).

32-bit program (``precision="float32"``): the same trials and phase from the same words
(``_common.bernoulli_trials32``, ``_common.uniform_index32``), per-phase Poisson terms with
the margin of ``montecarlo/engine/margin.py`` (proof step 7 per phase, then the phase mixture).

References:
  Andy Dong and Arun Ganesh, "Privacy Amplification for BandMF via b-Min-Sep Subsampling",
  arXiv:2602.09338 (v2): §3 (cyclic Poisson of Choquette-Choo et al.), §4.1 (the variant with a
  uniformly random phase) (docs/references.md).
  Choquette-Choo et al., "(Amplified) banded matrix factorization", NeurIPS 2023.
  Arun Ganesh, "Tighter Privacy Analysis for Truncated Poisson Sampling", arXiv:2508.15089: §3.1
  (truncated cyclic Poisson, the remark after Theorem 3.1) (docs/references.md).
"""

from __future__ import annotations

import dataclasses
import math
from typing import Any, NamedTuple

import jax
import jax.numpy as jnp
import numpy as np

from jaxacct import schemes
from jaxacct.montecarlo.engine import margin
from jaxacct.montecarlo.engine.kernels import _common, bminsep
from jaxacct.montecarlo.engine.kernels.base import NoInfo, SchemeKernel, register
from jaxacct.montecarlo.engine.kernels.bminsep import SamplingProbParams, sampling_prob_params


def participation(keys: jax.Array, sampling_prob: jax.Array, iterations: int, cycle: int,
                  partition: str) -> jax.Array:
  """Participation under cyclic Poisson, batch-major bool (N, n).

  ``independent``: a uniform phase s per sample; ``equal_split``: phase 0 (the
  worst phase, see ``CyclicPoisson``). One Bernoulli(p) trial per round of the phase.
  """
  n = iterations
  trials = _common.bernoulli_trials(keys, -(-n // cycle), sampling_prob)  # (N, cycles)
  if partition == 'independent':
    phase = jax.vmap(lambda k: jax.random.randint(k, (), 0, cycle))(_common.start_keys(keys))
  else:
    phase = jnp.zeros(keys.shape[0], jnp.int32)
  in_phase = (jnp.arange(n)[None, :] % cycle) == phase[:, None]
  return in_phase & jnp.repeat(trials, cycle, axis=1)[:, :n]


def log_ratio(ell: jax.Array, sampling_prob: jax.Array, cycle: int,
              partition: str) -> jax.Array:
  """ln P/Q under cyclic Poisson (Dong & Ganesh (2026) §3, §4.1; requires len(c) ≤ T).

  Per phase s the rounds i ≡ s are independent Poisson trials with disjoint
  output windows, so ln P_s/Q = Σ_{i≡s} log(1 − p + p e^{ℓ_i}).
  ``independent``: L = logsumexp_s(·) − log T; ``equal_split``: phase 0.
  """
  log_p, log_q = _common.log_terms(sampling_prob, ell.dtype)
  per_phase = _common.sum_by_phase(jnp.logaddexp(log_q, log_p + ell), cycle)
  if partition == 'equal_split':
    return per_phase[:, 0]
  return jax.nn.logsumexp(per_phase, axis=1) - jnp.log(cycle).astype(ell.dtype)


class Params32(NamedTuple):
  """Traced parameters of the 32-bit cyclic Poisson program (host-built, 32-bit types only).

  Attributes: chain (``bminsep.Chain32`` of p: log p, log q), trial_threshold
  (``_common.bernoulli_threshold``), log_cycle = ln T (float32, nearest), margin
  (``margin.MarginConstants``).
  """

  chain: bminsep.Chain32
  trial_threshold: Any
  log_cycle: Any
  margin: margin.MarginConstants


def participation32(keys: jax.Array, params: Params32, iterations: int, cycle: int,
                    partition: str) -> jax.Array:
  """``participation`` in 32-bit code: the same pattern from the same words, bool (N, n)."""
  n = iterations
  trials = _common.bernoulli_trials32(keys, -(-n // cycle), params.trial_threshold)
  if partition == 'independent':
    phase = _common.uniform_index32(_common.start_keys(keys), cycle)
  else:
    phase = jnp.zeros(keys.shape[0], jnp.int32)
  in_phase = (jnp.arange(n, dtype=jnp.int32)[None, :] % cycle) == phase[:, None]
  return in_phase & jnp.repeat(trials, cycle, axis=1)[:, :n]


def log_ratio_with_margin(ell: jax.Array, delta: jax.Array, ratio_max: jax.Array,
                          params: Params32, cycle: int,
                          partition: str) -> tuple[jax.Array, jax.Array]:
  """32-bit program: (L̂, η) per sample, |L̂ − L| ≤ η (``margin`` proof step 7 per phase).

  Each phase's loss L_s = Σ_{i≡s} g(v_i) is summed slab by slab (⌈n/T⌉ terms, relative
  rounding γ_{⌈n/T⌉}) and bounded by ``margin.poisson_error`` per phase; ``equal_split``
  takes phase 0; ``independent`` mixes the phases by a logsumexp, 1-Lipschitz in the max
  norm, so η = max_s η_s + the mixture's rounding (``margin.phase_mixture_error``).
  ``delta`` bounds |v̂_i − v_i| and ``ratio_max`` (step 5's Λ) bounds |ℓ̂_i| per round (N, n)
  or per sample (N, 1).
  """
  n = ell.shape[1]
  terms, posterior, gap = bminsep.poisson_terms32(ell, params.chain)
  per_sum = -(-n // cycle)
  by_phase = lambda values: _common.sum_by_phase(values, cycle)  # noqa: E731
  losses = by_phase(terms)
  errors = margin.poisson_error(delta, ratio_max, params.margin.log_p, posterior, terms, gap,
                                by_phase, per_sum, margin.gamma(per_sum))
  if partition == 'equal_split':
    return losses[:, 0], errors[:, 0]
  mixed = jax.nn.logsumexp(losses, axis=1) - params.log_cycle
  return mixed, jnp.max(errors, axis=1) + margin.phase_mixture_error(cycle, mixed)


@register
@dataclasses.dataclass(frozen=True)
class CyclicPoissonKernel(SchemeKernel):
  """Untruncated cyclic Poisson. Attributes: iterations n, cycle_length T, partition, dtype."""

  schemes = (schemes.CyclicPoisson,)

  iterations: int
  cycle_length: int
  partition: str
  dtype: str

  @classmethod
  def refusal(cls, scheme) -> str | None:
    if scheme.truncates:
      return (f'no Monte Carlo accountant for truncated {type(scheme).__name__}; truncated cyclic '
              'Poisson (equal_split) is accounted deterministically by jaxacct.cyclic_poisson_pld '
              '(the reduction of Ganesh (2025) §3.1)')
    return None

  @classmethod
  def build(cls, mechanism, dtype: np.dtype) -> 'CyclicPoissonKernel':
    scheme = mechanism.scheme
    return cls(mechanism.iterations, scheme.cycle_length, scheme.partition, dtype.name)



  def params(self, mechanism) -> SamplingProbParams | Params32:
    if self.dtype == 'float64':
      return sampling_prob_params(mechanism)
    p = float(mechanism.scheme.sampling_prob)
    return Params32(bminsep.chain32(p, 1), _common.bernoulli_threshold(p),
                    np.float32(math.log(self.cycle_length)),
                    margin.margin_constants(_common.rounding_shape(mechanism), p))

  def sample_mean(self, keys, params, view, direction):
    del direction
    if self.dtype == 'float32':
      x = participation32(keys, params, self.iterations, self.cycle_length, self.partition)
    else:
      x = participation(keys, params.sampling_prob, self.iterations, self.cycle_length,
                        self.partition)
    return view.separated_mean(x, self.dtype), NoInfo()

  def log_ratio_with_margin(self, d, params, noise_multiplier, kappa, view, info, direction,
                            product_error):
    """32-bit program: (L̂, η) per sample (``margin`` proof steps 5 and 7, per phase)."""
    del info
    ell = _common.per_round_ratios(d, noise_multiplier, view, direction, self.iterations)
    delta, ratio_max = margin.ratio_bounds(d, product_error, kappa, params.margin)
    return log_ratio_with_margin(ell, delta, ratio_max, params, self.cycle_length,
                                 self.partition)

  def log_ratio(self, d, params, noise_multiplier, view, info, direction):
    del info
    ell = _common.per_round_ratios(d, noise_multiplier, view, direction, self.iterations)
    return log_ratio(ell, params.sampling_prob, self.cycle_length, self.partition)
