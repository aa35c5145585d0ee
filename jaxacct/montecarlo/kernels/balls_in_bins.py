"""Kernel of fixed-bin balls-in-bins sampling (``BallsInBins``).

Each example draws one bin j uniformly from {0, …, T−1} once and takes part in every round
i ≡ j (mod T). The output mean is one of the T mode vectors m_j = C·1[i ≡ j], so
P = (1/T) Σ_j N(m_j, σ²I) and the loss is a log-sum-exp over the modes, exact for any band
length (overlapping columns included).

Random sub-streams of a sample key (``conventions.Stream``): ``START`` (the bin).

References:
  seed 000: Dong & Ganesh, arXiv 2602.09338v2, §2.3; Choquette-Choo et al., arXiv 2410.06266.
"""

from __future__ import annotations

import dataclasses
from typing import NamedTuple

import jax
import jax.numpy as jnp
import numpy as np

from jaxacct import schemes
from jaxacct.montecarlo.kernels import _common
from jaxacct.montecarlo.kernels.base import NoInfo, SchemeKernel, register


class NoParams(NamedTuple):
  """Balls-in-bins has no traced scheme parameter (every example is in its bin's rounds)."""


def log_ratio(d: jax.Array, noise_multiplier: jax.Array, cycle: int,
              modes: jax.Array) -> jax.Array:
  """ln P/Q under fixed-bin balls-in-bins (seed 000 §2.3).

  L = logsumexp_j (2⟨m_j, y⟩ − ‖m_j‖²)/(2σ²) − log T with ⟨m_j, y⟩ = Σ_{i≡j} d_i,
  exact for any band length (‖m_j‖² includes the cross terms of overlapping
  columns when len(c) > T).
  """
  dtype = d.dtype
  inner = _common.sum_by_phase(d, cycle)
  norms = jnp.sum(jnp.square(modes), axis=1).astype(dtype)[None, :]
  scale = _common.inverse_two_variance(noise_multiplier, dtype)
  return jax.nn.logsumexp((2.0 * inner - norms) * scale, axis=1) - jnp.log(cycle).astype(dtype)


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

  @classmethod
  def max_sensitivity_squared(cls, scheme, strategy) -> float:
    # The example is in every round of one bin: max_j ‖m_j‖².
    modes = np.asarray(strategy.kernel_view(scheme).phase_modes(scheme.iterations,
                                                                scheme.cycle_length))
    return float(np.max(np.sum(modes**2, axis=1)))

  def params(self, mechanism) -> NoParams:
    return NoParams()

  def sample_mean(self, keys, params, view, direction):
    del params, direction
    bins = jax.vmap(lambda k: jax.random.randint(k, (), 0, self.cycle_length))(
        _common.start_keys(keys))
    return view.phase_modes(self.iterations, self.cycle_length)[bins], NoInfo()

  def log_ratio(self, d, params, noise_multiplier, view, info, direction):
    del params, info, direction  # exact in both directions
    modes = view.phase_modes(self.iterations, self.cycle_length)
    return log_ratio(d, noise_multiplier, self.cycle_length, modes)
