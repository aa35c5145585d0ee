"""The DP-BandMF training step: per-example clipping, masked sum, correlated noise (device code).

For the batch B_t (padded to a fixed shape with a mask), the privatised
gradient is

    ĝ_t = (Σ_{e ∈ B_t} clip(∇ℓ(θ; e), κ) + σ·κ·W_t) / B̄,

with clip(g, κ) = g·min(1, κ/‖g‖₂), W_t row t of C⁻¹Z (``noise``), σ the
calibrated noise multiplier, κ = ``clip_norm`` and B̄ a *public* constant (the
expected batch size): dividing by the realised batch size would leak it.
Padded slots are multiplied by exactly zero. With C = I (one band) this is
DP-SGD. C is banded Toeplitz (BandMF) or has a banded Toeplitz inverse (BISR,
BandInvMF).
"""

from __future__ import annotations

import functools
from typing import Any, Callable, NamedTuple

import jax
import jax.numpy as jnp
import optax

from jaxacct.training import noise as noise_lib


class TrainState(NamedTuple):
  """Everything a resumed run needs: parameters, optimiser state, noise history, step."""

  params: Any
  opt_state: Any
  noise: noise_lib.NoiseState
  step: jax.Array


def check_per_example_loss(loss_fn: Callable, params: Any, inputs: Any, labels: Any) -> None:
  """Raises unless ``loss_fn(params, x, y)`` of one example is a real scalar (checked by shape)."""
  one = jax.tree_util.tree_map(lambda a: a[0], (inputs, labels))
  out = jax.eval_shape(loss_fn, params, *one)
  if not hasattr(out, 'shape') or out.shape != () or not jnp.issubdtype(out.dtype, jnp.floating):
    raise ValueError(
        f'loss_fn(params, x, y) must return a per-example real scalar for one example x (no '
        f'batch axis); got {out}. Per-example clipping needs one loss per example')


def clipped_gradient_sum(loss_fn: Callable, params: Any, inputs: Any, labels: Any,
                         mask: jax.Array, clip_norm: jax.Array) -> Any:
  """Σ_e mask_e · clip(∇_θ loss_fn(θ; x_e, y_e), κ): per-example grads by ``vmap(grad)``.

  References:
    Abadi et al., "Deep learning with differential privacy", CCS 2016, Alg. 1
    (per-example clipping); seed 000 §2 (DP-BandMF uses the same clipped sums).
  """
  grads = jax.vmap(jax.grad(loss_fn), in_axes=(None, 0, 0))(params, inputs, labels)
  leaves = jax.tree_util.tree_leaves(grads)
  squared = sum(jnp.sum(jnp.reshape(jnp.square(g), (g.shape[0], -1)), axis=1) for g in leaves)
  norms = jnp.sqrt(squared)
  # where(): a zero gradient gets factor 1 (not 0/0); padded slots are zeroed in the gradient
  # itself too, so a non-finite gradient there cannot leak into the sum as 0·inf = NaN.
  scale = jnp.where(mask, jnp.minimum(1.0, clip_norm / jnp.where(norms > 0, norms, 1.0)), 0.0)

  def masked_sum(g):
    g = jnp.where(jnp.reshape(mask, (-1,) + (1,) * (g.ndim - 1)), g, jnp.zeros((), g.dtype))
    return jnp.tensordot(scale.astype(g.dtype), g, axes=1, precision=jax.lax.Precision.HIGHEST)

  return jax.tree_util.tree_map(masked_sum, grads)


def init_state(params: Any, optimizer: optax.GradientTransformation,
               band_lengths: tuple[int, int]) -> TrainState:
  """Step-0 state for bands of lengths (len(c_col), len(inverse_band)) (``noise``)."""
  return TrainState(params, optimizer.init(params),
                    noise_lib.init_noise_state(band_lengths, params),
                    jnp.zeros((), jnp.int32))


@functools.partial(jax.jit, static_argnames=('loss_fn', 'optimizer'))  # sharding follows the inputs
def train_step(state: TrainState, inputs: Any, labels: Any, mask: jax.Array, *,
               loss_fn: Callable, optimizer: optax.GradientTransformation,
               training_key: jax.Array, c_col: jax.Array, inverse_band: jax.Array,
               noise_scale: jax.Array,
               clip_norm: jax.Array, normalizer: jax.Array) -> TrainState:
  """One DP-BandMF step (module docstring); ``noise_scale`` = σ·κ (0 turns noise off).

  ``c_col`` / ``inverse_band``: the band of C (with ``inverse_band = (1,)``) or of
  C⁻¹ (with ``c_col = (1,)``); see ``noise.correlated_noise``.

  Floats and the band are traced: a new σ, κ or band of the same length does
  not recompile. The noise of step t depends only on (training_key, t) and the
  saved history, so resuming from a saved ``TrainState`` reproduces the run.

  References:
    Choquette-Choo et al., NeurIPS 2023 (DP-BandMF); Dong, Ganesh, arXiv
    2602.09338v2, §2 (the released G + C⁻¹Z).
  """
  total = clipped_gradient_sum(loss_fn, state.params, inputs, labels, mask, clip_norm)
  z = noise_lib.standard_normal_like(noise_lib.step_key(training_key, state.step), state.params)
  w, noise_state = noise_lib.correlated_noise(c_col, inverse_band, state.noise, z)
  grad = jax.tree_util.tree_map(
      lambda g, n: (g + noise_scale.astype(g.dtype) * n) / normalizer.astype(g.dtype), total, w)
  updates, opt_state = optimizer.update(grad, state.opt_state, state.params)
  return TrainState(optax.apply_updates(state.params, updates), opt_state, noise_state,
                    state.step + 1)
