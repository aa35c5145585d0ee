"""Streaming correlated noise C⁻¹Z for DP-BandMF training (device code).

DP-BandMF releases G + C⁻¹Z (Dong & Ganesh (2026) §2.3–2.4). Two Toeplitz forms
of C stream with bounded memory:

* C banded with band c = (c₀, …, c_{m−1}) (BandMF): row t of W = C⁻¹Z solves
  Σ_{k<m} c_k W_{t−k} = Z_t, so W_t = (Z_t − Σ_{k=1}^{m−1} c_k W_{t−k}) / c₀;
* C⁻¹ banded with band h (BISR, BandInvMF): W_t = Σ_{k<m} h_k Z_{t−k}.

Both are the one recursion W_t = (Σ_k h_k Z_{t−k} − Σ_{k≥1} c_k W_{t−k}) / c₀
with c = (1) or h = (1), keeping the last rows of Z and of W: memory
O((len(h) + len(c))·d), time the same per step. Z_t is drawn from the key of step
t of the *training* stream (``keys.purpose_key(key, "training")``, disjoint from
every accounting stream), so a run resumed from a saved ``NoiseState``
reproduces the noise bit for bit.

``noise_transformation(mechanism, key=, clip_norm=)`` packages the recursion as an optax
``GradientTransformation`` for a user's own Flax/optax loop; its state
(``NoiseTransformationState``) holds the step, the ``NoiseState``, the key's data and the
bands and scales as arrays. ``train_step`` privatises with the same update (``privatize``),
on a state it assembles from its ``TrainState`` and traced arguments. Device code, except
the checks of ``noise_transformation`` (host).

References:
  Andy Dong and Arun Ganesh, "Privacy Amplification for BandMF via b-Min-Sep Subsampling",
  arXiv:2602.09338 (v2): §2.3–2.4 (docs/references.md).
"""

from __future__ import annotations

from typing import Any, NamedTuple

import jax
import jax.numpy as jnp
import numpy as np
import optax

from jaxacct import _validate
from jaxacct.errors import InputError, InputTypeError
from jaxacct.mechanism import MatrixMechanism, check_mechanism
from jaxacct.montecarlo.engine import keys as keys_lib
from jaxacct.strategy import check_strategy


class NoiseState(NamedTuple):
  """The last rows of Z (len(h) − 1) and of W (len(c) − 1), newest first: params-shaped
  pytrees whose leaves have that leading axis (zeros before step 0)."""

  z_history: Any
  w_history: Any


def init_noise_state(band_lengths: tuple[int, int], params: Any) -> NoiseState:
  """Zero history for bands of lengths (len(c), len(h)) and parameters shaped like ``params``."""
  def zeros(length):
    return jax.tree_util.tree_map(
        lambda leaf: jnp.zeros((length - 1,) + jnp.shape(leaf), jnp.result_type(leaf)), params)
  c_length, h_length = band_lengths
  return NoiseState(zeros(h_length), zeros(c_length))


def step_key(training_key: jax.Array, step: jax.Array) -> jax.Array:
  """Key of step t of the training stream: fold_in(fold_in(key, t >> 20), t & (2²⁰ − 1)).

  The same (block, index) coordinates as the accounting streams
  (``montecarlo.keys``), computed in uint32 so that it runs without x64; steps
  are int32 (< 2³¹), far beyond any training run.
  """
  t = jnp.asarray(step).astype(jnp.uint32)
  block = t >> keys_lib.KEY_BLOCK_BITS
  within = t & jnp.uint32(keys_lib.KEY_BLOCK_SIZE - 1)
  return jax.random.fold_in(jax.random.fold_in(training_key, block), within)


def standard_normal_like(key: jax.Array, params: Any) -> Any:
  """Z_t: independent N(0, 1) entries shaped like ``params`` (leaf j from fold_in(key, j))."""
  leaves, treedef = jax.tree_util.tree_flatten(params)
  draws = [jax.random.normal(jax.random.fold_in(key, j), jnp.shape(leaf), jnp.result_type(leaf))
           for j, leaf in enumerate(leaves)]
  return jax.tree_util.tree_unflatten(treedef, draws)


def _push(row: jax.Array, history: jax.Array) -> jax.Array:
  return jnp.concatenate([row[None], history], axis=0)[:history.shape[0]]


def _weighted(coefficients: jax.Array, history: jax.Array) -> jax.Array:
  return jnp.tensordot(coefficients.astype(history.dtype), history, axes=1,
                       precision=jax.lax.Precision.HIGHEST)


def correlated_noise(c_col: jax.Array, inverse_band: jax.Array, state: NoiseState,
                     z: Any) -> tuple[Any, NoiseState]:
  """(W_t, next state) from Z_t by the recursion of the module docstring.

  Args:
    c_col: the band (c₀, …, c_{m−1}) of C, c₀ > 0, or (1.0,) when C⁻¹ is banded.
    inverse_band: the band h of C⁻¹, or (1.0,) when C is banded.
    state: the previous rows.
    z: Z_t, shaped like the parameters.

  References:
    Choquette-Choo et al., "(Amplified) banded matrix factorization", NeurIPS
    2023, §2 (noise C⁻¹Z generated online for banded C); Kalinin, Lampert,
    arXiv 2505.12128 (banded C⁻¹); Dong & Ganesh (2026) §2.3.
  """
  def row(z_leaf, z_history, w_history):
    mixed = inverse_band[0].astype(z_leaf.dtype) * z_leaf + _weighted(inverse_band[1:], z_history)
    w = (mixed - _weighted(c_col[1:], w_history)) / c_col[0].astype(z_leaf.dtype)
    return w, _push(z_leaf, z_history), _push(w, w_history)

  triples = jax.tree_util.tree_map(row, z, state.z_history, state.w_history)
  pick = lambda i: jax.tree_util.tree_map(lambda _, t: t[i], z, triples)  # noqa: E731
  return pick(0), NoiseState(pick(1), pick(2))


# ----------------------------------------------------------- the optax transformation
class NoiseCoefficients(NamedTuple):
  """The numbers of the noise, as arrays: the bands (c, h) of ``correlated_noise``, σ·κ and the
  public divisor B̄. They travel in the state, so a jitted update traces them: a new σ or band
  of the same length does not recompile, and the program is the one ``train_step`` runs."""

  c_col: jax.Array
  inverse_band: jax.Array
  noise_scale: jax.Array
  normalizer: jax.Array


class NoiseTransformationState(NamedTuple):
  """State of ``noise_transformation`` (a pytree: save it with ``jax.tree.map(np.asarray, s)``).

  Attributes:
    step: int32 scalar, the index t of the next step (0 after ``init``); step t draws Z_t from
      ``step_key(training key, t)``. int32 bounds a run to 2³¹ − 1 steps, far beyond any
      accounted ``iterations``.
    noise: the ``NoiseState`` (the last len(h) − 1 rows of Z and len(c) − 1 rows of W).
    key_data: uint32 ``jax.random.key_data`` of the *training-stream* key
      (``keys.purpose_key(key, "training")``), so a restored state needs no key object.
    coefficients: ``NoiseCoefficients`` (bands, σ·κ, B̄).

  Everything the noise depends on is here, so a restored state continues its own noise. The
  state is as secret as the run's key: it holds the key and the past noise rows.
  """

  step: jax.Array
  noise: NoiseState
  key_data: jax.Array
  coefficients: NoiseCoefficients


def _check_state(updates: Any, state: NoiseTransformationState, key_impl: Any) -> None:
  """Static (trace-time) checks that ``state`` is consistent and fits ``updates``."""
  if not isinstance(state, NoiseTransformationState):
    raise InputTypeError(f'state must be a NoiseTransformationState (from init), got '
                         f'{type(state).__name__}')
  lengths = {'w_history': jnp.shape(state.coefficients.c_col)[0],
             'z_history': jnp.shape(state.coefficients.inverse_band)[0]}
  structure = jax.tree_util.tree_structure(updates)
  for name, length in lengths.items():
    history = getattr(state.noise, name)
    if jax.tree_util.tree_structure(history) != structure:
      raise InputError(f'state.noise.{name} is not shaped like the updates: init the '
                       'transformation with parameters of the same structure')
    for leaf, past in zip(jax.tree_util.tree_leaves(updates), jax.tree_util.tree_leaves(history)):
      want = (length - 1,) + tuple(jnp.shape(leaf))
      if tuple(jnp.shape(past)) != want:
        raise InputError(f'state.noise.{name} holds shape {tuple(jnp.shape(past))}, but its '
                         f'bands and these updates need {want}: the state is from another '
                         'model, or was edited')
      if jnp.result_type(past) != jnp.result_type(leaf):
        raise InputError(f'the updates are {jnp.result_type(leaf)} but state.noise.{name} is '
                         f'{jnp.result_type(past)}: init with parameters of the updates\' dtypes')
  key_shape = jax.eval_shape(jax.random.key_data, jax.random.key(0, impl=key_impl)).shape
  if tuple(jnp.shape(state.key_data)) != tuple(key_shape):
    raise InputError(f'state.key_data has shape {tuple(jnp.shape(state.key_data))}; the '
                     f'{key_impl} key needs {tuple(key_shape)}')


def privatize(updates: Any, state: NoiseTransformationState, *,
              key_impl: Any) -> tuple[Any, NoiseTransformationState]:
  """The update of ``noise_transformation``: ((G_t + σκW_t)/B̄, next state); ``train_step``
  calls it too. ``key_impl``: the PRNG implementation of ``state.key_data`` (static)."""
  _check_state(updates, state, key_impl)
  c_col, inverse_band, noise_scale, normalizer = state.coefficients
  key = step_key(jax.random.wrap_key_data(state.key_data, impl=key_impl), state.step)
  w, noise = correlated_noise(c_col, inverse_band, state.noise, standard_normal_like(key, updates))

  def released(g, n):  # Dong & Ganesh (2026) §2.3: the released G_t + (C⁻¹Z)_t, scaled by σκ
    return (g + noise_scale.astype(g.dtype) * n) / normalizer.astype(g.dtype)

  return (jax.tree_util.tree_map(released, updates, w),
          state._replace(step=state.step + 1, noise=noise))


def noise_transformation(mechanism: MatrixMechanism, *, key: jax.Array, clip_norm: float,
                         normalizer: float | None = None) -> optax.GradientTransformation:
  """DP-BandMF's correlated noise as an optax ``GradientTransformation`` for your own loop.

  ``update(updates, state, params=None)`` takes the **sum** of the step's per-example clipped
  gradients G_t = Σ_{e ∈ B_t} clip(∇ℓ(θ; e), κ) (e.g. ``jaxacct.training.clipped_gradient_sum``;
  the whole batch's sum, once per step, after any cross-device sum or gradient accumulation)
  and returns

      (G_t + σ·κ·W_t) / B̄,      W_t = row t of C⁻¹Z (``correlated_noise``),

  with σ = ``mechanism.noise_multiplier``, κ = ``clip_norm``, Z_t drawn from
  ``step_key(purpose_key(key, "training"), t)`` and B̄ = ``normalizer`` (1 when None: the
  noisy sum). ``jaxacct.training.train`` privatises with this same update, with B̄ = p₀·m, the
  public expected batch size (dividing by the realised batch size would leak it). Chain it
  before the optimiser::

      tx = optax.chain(noise_transformation(mechanism, key=key, clip_norm=1.0,
                                            normalizer=expected_batch_size),
                       optax.sgd(0.1))

  ``init(params)`` puts the key's data, the bands, σ·κ and B̄ in the state
  (``NoiseTransformationState``) with the step and the Z/W history, (len(c) + len(h) − 2)·d
  numbers for d parameters: a restored state resumes bit for bit (``key`` and the other
  arguments seed ``init`` only; ``update`` reads the state), and a jitted update traces those
  numbers, which makes it the program ``train`` runs. Jitted on its own, it adds the
  noise ``train`` adds for the same mechanism, key, clip_norm, normalizer and step, bit for
  bit; eager, or fused into a larger jitted step, XLA may contract a multiply–add differently
  (a last-bit difference). The accounting covers the mechanism's ``iterations`` steps: stop
  there (the transformation does not stop you).

  Args:
    mechanism: the accounted ``jaxacct.MatrixMechanism``; its strategy must stream C⁻¹Z
      (``Strategy.noise_bands``): a ``BandedToeplitz`` C, or a ``LowerTriangular`` C whose
      inverse is banded Toeplitz (BISR).
    key: the run's secret JAX key (``jax.random.key``; no default: whoever knows it can
      remove the noise). The noise uses its "training" stream, as ``train`` does.
    clip_norm: κ > 0, the per-example clipping norm of the summed gradients.
    normalizer: a public B̄ > 0 dividing the noisy sum, or None.

  Returns:
    ``optax.GradientTransformation``: ``init(params)`` → ``NoiseTransformationState``,
    ``update(updates, state, params=None)`` → (noisy updates, next state); the updates have
    the parameters' shapes and dtypes, and ``params`` is not used.

  Raises:
    InputError: a strategy whose C⁻¹Z cannot be streamed in O(bands·d) memory (naming it and
      why), clip_norm or normalizer not finite and > 0, a key that is not a JAX key.

  References:
    Dong & Ganesh (2026) §2.3–2.4 (the released G + C⁻¹Z, streamed); "(Amplified) banded
    matrix factorization", NeurIPS 2023, arXiv 2306.08153, §2 (C⁻¹Z generated online for
    banded C); Kalinin, Lampert, arXiv 2505.12128 (banded C⁻¹, BISR).
  """
  check_mechanism(mechanism)
  training_key = keys_lib.purpose_key(keys_lib.canonicalize_key(key), 'training')
  noise_scale = mechanism.noise_multiplier * _validate.positive_finite('clip_norm', clip_norm)
  normalizer = 1.0 if normalizer is None else _validate.positive_finite('normalizer', normalizer)
  try:
    bands = check_strategy(mechanism.matrix).noise_bands()
  except InputError as error:
    raise InputTypeError(f'noise_transformation cannot stream the noise of mechanism.matrix '
                         f'({type(mechanism.matrix).__name__}) in O(bands·d) memory: '
                         f'{error}') from error
  key_impl = jax.random.key_impl(training_key)
  key_data = jax.random.key_data(training_key)

  def init(params: Any) -> NoiseTransformationState:
    # float64 host values become float64 arrays under x64, float32 otherwise (train's traced
    # values are made the same way); each leaf's noise is then computed in its own dtype.
    c_col, inverse_band = (jnp.asarray(np.asarray(band, np.float64)) for band in bands)
    coefficients = NoiseCoefficients(c_col, inverse_band, jnp.asarray(np.float64(noise_scale)),
                                     jnp.asarray(np.float64(normalizer)))
    return NoiseTransformationState(
        jnp.zeros((), jnp.int32), init_noise_state((len(bands[0]), len(bands[1])), params),
        key_data, coefficients)

  def update(updates: Any, state: NoiseTransformationState,
             params: Any = None) -> tuple[Any, NoiseTransformationState]:
    del params  # the noise depends on the state only (step, key, history, coefficients)
    return privatize(updates, state, key_impl=key_impl)

  return optax.GradientTransformation(init, update)
