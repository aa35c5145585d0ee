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

References:
  Andy Dong and Arun Ganesh, "Privacy Amplification for BandMF via b-Min-Sep Subsampling",
  arXiv:2602.09338 (v2): §2 (DP-BandMF; the clipped sums: §2.2–2.3) (docs/references.md).
  Antti Koskela, Marlon Tobaben and Antti Honkela, "Individual Privacy Accounting with Gaussian
  Differential Privacy", arXiv:2209.15596 (docs/references.md).
"""

from __future__ import annotations

import functools
from typing import Any, Callable, NamedTuple

import jax
import jax.numpy as jnp
import optax

from jaxacct.individual import tracking as tracking_lib
from jaxacct.training import noise as noise_lib
from jaxacct.errors import InputError


class TrainState(NamedTuple):
  """Everything a resumed run needs: parameters, optimiser state, noise history, step, and
  the individual accounting state (``jaxacct.individual.IndividualState``; None when off)."""

  params: Any
  opt_state: Any
  noise: noise_lib.NoiseState
  step: jax.Array
  individual: Any = None


def check_per_example_loss(loss_fn: Callable, params: Any, inputs: Any, labels: Any) -> None:
  """Raises unless ``loss_fn(params, x, y)`` of one example is a real scalar (checked by shape)."""
  one = jax.tree_util.tree_map(lambda a: a[0], (inputs, labels))
  out = jax.eval_shape(loss_fn, params, *one)
  if not hasattr(out, 'shape') or out.shape != () or not jnp.issubdtype(out.dtype, jnp.floating):
    raise InputError(
        f'loss_fn(params, x, y) must return a per-example real scalar for one example x (no '
        f'batch axis); got {out}. Per-example clipping needs one loss per example')


def per_example_gradients(loss_fn: Callable, params: Any, inputs: Any,
                          labels: Any) -> tuple[Any, jax.Array]:
  """(per-example gradients ∇_θ loss_fn(θ; x_e, y_e) by ``vmap(grad)``, their L2 norms).

  The norms are summed in at least float32 whatever the parameters' precision (bf16 sums
  would be off by ~0.3 %, more than clipping and individual accounting tolerate)."""
  grads = jax.vmap(jax.grad(loss_fn), in_axes=(None, 0, 0))(params, inputs, labels)
  leaves = jax.tree_util.tree_leaves(grads)
  squared = sum(jnp.sum(jnp.reshape(jnp.square(g.astype(jnp.promote_types(g.dtype, jnp.float32))),
                                    (g.shape[0], -1)), axis=1) for g in leaves)
  return grads, jnp.sqrt(squared)


def masked_clipped_sum(grads: Any, norms: jax.Array, mask: jax.Array,
                       clip_norm: jax.Array) -> Any:
  """Σ_e mask_e · clip(g_e, κ) of per-example gradients with norms ``norms``."""
  # where(): a zero gradient gets factor 1 (not 0/0); masked slots are zeroed in the gradient
  # itself too, so a non-finite gradient there cannot leak into the sum as 0·inf = NaN.
  scale = jnp.where(mask, jnp.minimum(1.0, clip_norm / jnp.where(norms > 0, norms, 1.0)), 0.0)

  def masked_sum(g):
    g = jnp.where(jnp.reshape(mask, (-1,) + (1,) * (g.ndim - 1)), g, jnp.zeros((), g.dtype))
    return jnp.tensordot(scale.astype(g.dtype), g, axes=1, precision=jax.lax.Precision.HIGHEST)

  return jax.tree_util.tree_map(masked_sum, grads)


def clipped_gradient_sum(loss_fn: Callable, params: Any, inputs: Any, labels: Any,
                         mask: jax.Array, clip_norm: jax.Array) -> Any:
  """Σ_e mask_e · clip(∇_θ loss_fn(θ; x_e, y_e), κ): per-example grads by ``vmap(grad)``.

  References:
    Abadi et al., "Deep learning with differential privacy", CCS 2016, Alg. 1
    (per-example clipping); Dong & Ganesh (2026) §2.2–2.3 (DP-BandMF uses the same clipped
    sums).
  """
  grads, norms = per_example_gradients(loss_fn, params, inputs, labels)
  return masked_clipped_sum(grads, norms, mask, clip_norm)


def init_state(params: Any, optimizer: optax.GradientTransformation,
               band_lengths: tuple[int, int], individual: Any = None) -> TrainState:
  """Step-0 state for bands of lengths (len(c_col), len(inverse_band)) (``noise``)."""
  return TrainState(params, optimizer.init(params),
                    noise_lib.init_noise_state(band_lengths, params),
                    jnp.zeros((), jnp.int32), individual)


class StepSpec(NamedTuple):
  """What a step computes, static under ``jit`` (a new spec compiles a new program): the
  per-example ``loss_fn(params, x, y)``, the optax ``optimizer`` and the individual
  accounting's ``tracking`` spec (``jaxacct.individual.tracking.DeviceSpec``; None: off)."""

  loss_fn: Callable
  optimizer: optax.GradientTransformation
  tracking: tracking_lib.DeviceSpec | None = None


class NoiseArgs(NamedTuple):
  """The step's traced noise and clipping inputs (a pytree: a new σ, κ or band of the same
  length does not recompile): the run's ``training_key``, the bands ``c_col`` /
  ``inverse_band`` (``noise.correlated_noise``), ``noise_scale`` = σ·κ (0 turns noise off),
  ``clip_norm`` κ and the public ``normalizer`` B̄."""

  training_key: jax.Array
  c_col: jax.Array
  inverse_band: jax.Array
  noise_scale: jax.Array
  clip_norm: jax.Array
  normalizer: jax.Array


class TrackingArgs(NamedTuple):
  """The traced inputs of individual accounting (``jaxacct.individual.tracking``): the slots'
  dataset ``indices`` (full batch), the ``tracked`` (inputs, labels) of the norm pass
  (Poisson p < 1), the ``charge_factor`` and the float32 ``ratio_grid``
  (``IndividualAccountant.traced``). Unused fields stay None."""

  indices: jax.Array | None = None
  tracked: tuple[Any, Any] | None = None
  charge_factor: jax.Array | None = None
  ratio_grid: jax.Array | None = None


@functools.partial(jax.jit, static_argnames=('spec',))
def train_step(state: TrainState, inputs: Any, labels: Any, mask: jax.Array, *,
               spec: StepSpec, noise: NoiseArgs,
               tracking: TrackingArgs = TrackingArgs()) -> TrainState:
  """One DP-BandMF step (module docstring): ``spec`` (static: loss, optimiser, tracking spec),
  ``noise`` (traced: ``NoiseArgs``; ``noise_scale`` = σ·κ, 0 turns noise off) and
  ``tracking`` (traced: ``TrackingArgs``).

  ``noise.c_col`` / ``noise.inverse_band``: the band of C (with ``inverse_band = (1,)``) or of
  C⁻¹ (with ``c_col = (1,)``); see ``noise.correlated_noise``. The clipped sum is privatised
  and divided by ``normalizer`` by ``noise.privatize``, the update of
  ``noise.noise_transformation``, so a user's own optax loop adds the same noise.

  Individual accounting (``spec.tracking``, Koskela et al. (2022);
  ``jaxacct.individual.tracking``): full batch charges every example its clipped-norm ratio
  from this step's own per-example gradients (``tracking.indices`` = the slots' dataset ids) and, with a filter, masks the dropped ones
  out of the sum before the noise; under Poisson p < 1 a separate norm pass over the
  ``tracked`` (inputs, labels) at the same parameters counts every tracked example's ratio
  bucket.

  Floats and the band are traced: a new σ, κ or band of the same length does
  not recompile. The noise of step t depends only on (training_key, t) and the
  saved history, so resuming from a saved ``TrainState`` reproduces the run.

  References:
    Choquette-Choo et al., NeurIPS 2023 (DP-BandMF); Dong, Ganesh, arXiv
    2602.09338v2, §2 (the released G + C⁻¹Z); Koskela, Tobaben & Honkela,
    arXiv 2209.15596, Alg. 1 (the individual GDP filter).
  """
  loss_fn, optimizer, device_spec = spec
  clip_norm = noise.clip_norm
  grads, norms = per_example_gradients(loss_fn, state.params, inputs, labels)
  individual = state.individual
  if device_spec is not None and device_spec.full_batch:
    individual, mask = tracking_lib.full_batch_update(
        device_spec, individual, state.step, tracking.indices, mask,
        tracking_lib.clipped_ratios(norms, clip_norm), tracking.charge_factor)
  elif device_spec is not None:
    _, tracked_norms = per_example_gradients(loss_fn, state.params, *tracking.tracked)
    individual = tracking_lib.bucket_update(
        individual, tracking_lib.clipped_ratios(tracked_norms, clip_norm), tracking.ratio_grid)
  total = masked_clipped_sum(grads, norms, mask, clip_norm)
  # The update of jaxacct.training.noise_transformation on the traced bands and scales (a new
  # σ or band does not recompile); TrainState keeps the step and history, not the key.
  grad, noise_state = noise_lib.privatize(
      total, noise_lib.NoiseTransformationState(
          state.step, state.noise, jax.random.key_data(noise.training_key),
          noise_lib.NoiseCoefficients(noise.c_col, noise.inverse_band, noise.noise_scale,
                                      noise.normalizer)),
      key_impl=jax.random.key_impl(noise.training_key))
  updates, opt_state = optimizer.update(grad, state.opt_state, state.params)
  return TrainState(optax.apply_updates(state.params, updates), opt_state, noise_state.noise,
                    noise_state.step, individual)
