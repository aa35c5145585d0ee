"""Kernel of fixed-bin balls-in-bins sampling (``BallsInBins``).

Each example draws one bin j uniformly from {0, …, T−1} once and takes part in every round
i ≡ j (mod T). The output mean is one of the T mode vectors m_j = C·1[i ≡ j], so
P = (1/T) Σ_j N(m_j, σ²I) and the loss is a log-sum-exp over the modes, exact for any band
length (overlapping columns included).

Random sub-streams of a sample key (``conventions.Stream``): ``START`` (the bin).

32-bit program (``precision="float32"``): the same bin from the same words
(``_common.uniform_index32``); the modes and their squared norms are host float64 constants
rounded to float32; the margin (``log_ratio_with_margin``) bounds the phase sums of d, the
exponents and the mixture (``montecarlo/engine/margin.py``).

References:
  Andy Dong and Arun Ganesh, "Privacy Amplification for BandMF via b-Min-Sep Subsampling",
  arXiv:2602.09338 (v2): §3 (balls-in-bins: T participation patterns) (docs/references.md).
  Choquette-Choo et al., "Near exact privacy amplification for matrix mechanisms", arXiv
  2410.06266.
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
from jaxacct.montecarlo.engine.kernels import _common
from jaxacct.montecarlo.engine.kernels.base import NoInfo, SchemeKernel, register


class NoParams(NamedTuple):
  """Balls-in-bins has no traced scheme parameter (every example is in its bin's rounds)."""


def log_ratio(d: jax.Array, noise_multiplier: jax.Array, cycle: int,
              modes: jax.Array) -> jax.Array:
  """ln P/Q under fixed-bin balls-in-bins (Dong & Ganesh (2026) §3).

  L = logsumexp_j (2⟨m_j, y⟩ − ‖m_j‖²)/(2σ²) − log T with ⟨m_j, y⟩ = Σ_{i≡j} d_i,
  exact for any band length (‖m_j‖² includes the cross terms of overlapping
  columns when len(c) > T).
  """
  dtype = d.dtype
  inner = _common.sum_by_phase(d, cycle)
  norms = jnp.sum(jnp.square(modes), axis=1).astype(dtype)[None, :]
  scale = _common.inverse_two_variance(noise_multiplier, dtype)
  return jax.nn.logsumexp((2.0 * inner - norms) * scale, axis=1) - jnp.log(cycle).astype(dtype)


class Params32(NamedTuple):
  """Traced parameters of the 32-bit balls-in-bins program (host-built, float32).

  Attributes: modes (T, n) and norms ‖m_j‖² (T,) rounded to float32 from float64 sums;
  norm_error ≥ max_j |N̂_j − ‖m_j‖²|; log_cycle = ln T; margin (``margin.MarginConstants``
  with c_max ≥ the largest mode entry and mean_error ≥ |m̂ − m|, which is what the margin's
  steps 2–4 need of the mean: entries of C·x then sum up to ⌈m/T⌉ coefficients).
  """

  modes: Any
  norms: Any
  norm_error: Any
  log_cycle: Any
  margin: margin.MarginConstants


def params32(mechanism) -> Params32:
  """Host: ``Params32`` of a balls-in-bins mechanism (modes in float64, then rounded)."""
  scheme = mechanism.scheme
  with jax.enable_x64(True):
    modes = np.asarray(mechanism.matrix.kernel_view(scheme).phase_modes(
        scheme.iterations, scheme.cycle_length), np.float64)
  # The float64 sums' own rounding (nonnegative terms, any order): a mode entry sums at most
  # n entries of C (relative ≤ γ_n in float64), a norm n squares of them.
  u = margin.UNIT_ROUNDOFF
  n = scheme.iterations
  mode_rel = 1.01 * n * 2.0**-53
  norm_rel = 1.01 * (n + 1) * 2.0**-53 + 2.0 * mode_rel
  norms = np.sum(modes * modes, axis=1)
  largest = np.max(np.abs(modes))
  constants = margin.margin_constants(_common.rounding_shape(mechanism), 0.5)._replace(
      c_max=margin.round_up32(largest * (1.0 + mode_rel)),
      mean_error=margin.round_up32((u * (1.0 + mode_rel) + mode_rel) * largest * (1.0 + 2**-40)))
  norm_error = margin.round_up32((u + norm_rel) * (1.0 + u) * np.max(norms) * (1.0 + 2**-40))
  return Params32(modes.astype(np.float32), norms.astype(np.float32), norm_error,
                  np.float32(math.log(scheme.cycle_length)), constants)


def log_ratio_with_margin(d: jax.Array, params: Params32, kappa: jax.Array, cycle: int,
                          product_error: jax.Array) -> tuple[jax.Array, jax.Array]:
  """32-bit program: (L̂, η) per sample with |L̂ − L| ≤ η (Dong & Ganesh (2026) §3; ``margin.py``).

  x̂_j = fl(fl(2·Σ̂_{i≡j} d̂_i − N̂_j)·κ̂), L̂ = logsumexp_j x̂_j − ln T̂. With k = ⌈n/T⌉ terms
  per phase sum (slab order: relative rounding γ_k), Δd ≥ |d̂_i − d_i| and D = max|d̂|:
  |Σ̂ − Σ| ≤ k(Δd + γ_k·D); the exponent's numerator A_j = 2Σ_j − N_j moves by
  ΔA = 2k(Δd + γ_k·D) + ΔN + u·A_max (ΔN = ``norm_error``, A_max = max|Â|), and
  |x̂_j − x_j| ≤ κ̂(1 + 8u)ΔA + (3 + DIVIDE_ULPS)u·κ̂·A_max + u·max|x̂| (κ ≤ κ̂ ≤ κ(1 + 2u));
  the logsumexp is 1-Lipschitz in the max norm (``margin.phase_mixture_error`` adds its own
  rounding). XLA contracts x̂_j's product into the logsumexp's subtraction: its exponents use
  the exact products x̃_j = Â_j·κ̂ (within the bound above, one rounding fewer) against the max
  of the rounded x̂_j, the case ``margin.log_sum_exp_error``'s default spread covers. The
  bound is evaluated in float32 and inflated by 2⁻¹⁶.
  """
  u = margin.UNIT_ROUNDOFF
  n = d.shape[1]
  per_sum = -(-n // cycle)
  inner = _common.sum_by_phase(d, cycle)
  numerator = 2.0 * inner - params.norms[None, :]
  exponents = numerator * kappa
  losses = jax.nn.logsumexp(exponents, axis=1) - params.log_cycle
  gamma_k = float(margin.gamma(per_sum))
  d_max = jnp.max(jnp.abs(d), axis=1)
  sum_error = per_sum * (jnp.max(product_error, axis=1) + gamma_k * d_max)
  numerator_max = jnp.max(jnp.abs(numerator), axis=1)
  numerator_error = 2.0 * sum_error + params.norm_error + u * numerator_max
  exponent_error = (kappa * ((1.0 + 8.0 * u) * numerator_error
                             + (3.0 + margin.DIVIDE_ULPS) * u * numerator_max)
                    + u * jnp.max(jnp.abs(exponents), axis=1))
  return losses, (exponent_error * (1.0 + 2.0**-16)
                  + margin.phase_mixture_error(cycle, losses))


@register
@dataclasses.dataclass(frozen=True)
class BallsInBinsKernel(SchemeKernel):
  """Fixed-bin balls-in-bins. Attributes: iterations n, cycle_length T, dtype."""

  schemes = (schemes.BallsInBins,)

  iterations: int
  cycle_length: int
  dtype: str

  @classmethod
  def build(cls, mechanism, dtype: np.dtype) -> 'BallsInBinsKernel':
    return cls(mechanism.iterations, mechanism.scheme.cycle_length, dtype.name)



  def params(self, mechanism) -> NoParams | Params32:
    return NoParams() if self.dtype == 'float64' else params32(mechanism)

  def sample_mean(self, keys, params, view, direction):
    del direction
    if self.dtype == 'float32':
      bins = _common.uniform_index32(_common.start_keys(keys), self.cycle_length)
      return params.modes[bins], NoInfo()
    bins = jax.vmap(lambda k: jax.random.randint(k, (), 0, self.cycle_length))(
        _common.start_keys(keys))
    return view.phase_modes(self.iterations, self.cycle_length)[bins], NoInfo()

  def log_ratio_with_margin(self, d, params, noise_multiplier, kappa, view, info, direction,
                            product_error):
    """32-bit program: (L̂, η) per sample, exact in both directions."""
    del noise_multiplier, view, info, direction
    return log_ratio_with_margin(d, params, kappa, self.cycle_length, product_error)

  def log_ratio(self, d, params, noise_multiplier, view, info, direction):
    del params, info, direction  # exact in both directions
    modes = view.phase_modes(self.iterations, self.cycle_length)
    return log_ratio(d, noise_multiplier, self.cycle_length, modes)
