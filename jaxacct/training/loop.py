"""The DP-BandMF training loop on the batches the accountant analysed (host orchestration).

References:
  Antti Koskela, Marlon Tobaben and Antti Honkela, "Individual Privacy Accounting with Gaussian
  Differential Privacy", arXiv:2209.15596 (docs/references.md).
"""

from __future__ import annotations

import dataclasses
from typing import Any, Callable, NamedTuple

import jax
import jax.numpy as jnp
import numpy as np
import optax
from jax.sharding import NamedSharding, PartitionSpec

from jaxacct import _validate
from jaxacct import options as options_lib
from jaxacct.batching.iterators import BatchIterator
from jaxacct.guarantee import Guarantee
from jaxacct.individual import tracking as tracking_lib
from jaxacct.mechanism import MatrixMechanism, check_mechanism
from jaxacct.strategy import check_strategy
from jaxacct.montecarlo.engine import keys as keys_lib
from jaxacct.montecarlo.engine import sharding
from jaxacct.training import step as step_lib
from jaxacct.errors import InputError, InputTypeError


@dataclasses.dataclass(frozen=True)
class TrainResult:
  """The trained state and the privacy statement that covers it.

  Attributes:
    state: the final ``TrainState`` (parameters, optimiser state, noise history, step).
    guarantee: the guarantee of the mechanism trained with (None when noise was off:
      such a run is not private).
    mechanism: the mechanism whose batches and σ were used.
    normalizer: the public constant the noisy sums were divided by.
    tracking: the bound individual accountant (None when off); its state is
      ``state.individual``.
  """

  state: step_lib.TrainState
  guarantee: Guarantee | None
  mechanism: MatrixMechanism
  normalizer: float
  tracking: tracking_lib.Tracking | None = None

  def individual_epsilons(self) -> np.ndarray:
    """Every tracked example's ε(δ) so far (``Tracking.epsilons``; Koskela et al. (2022))."""
    if self.tracking is None:
      raise InputError('this run had no individual accountant (train(..., individual=...))')
    return self.tracking.epsilons(self.state.individual)


def _check(mechanism, guarantee, batch_iterator, inputs, clip_norm, noise: bool) -> int:
  check_mechanism(mechanism)
  if not isinstance(batch_iterator, BatchIterator):
    raise InputTypeError(f'batch_iterator must come from jaxacct.batching.batches, got '
                    f'{batch_iterator!r}')
  if batch_iterator.scheme != mechanism.scheme:
    raise InputError('batch_iterator and mechanism disagree: the batches are sampled by '
                     f'{batch_iterator.scheme!r} but the mechanism was accounted for '
                     f'{mechanism.scheme!r}; train with the scheme that was accounted')
  if batch_iterator.iterations != mechanism.iterations:
    raise InputError(f'batch_iterator has {batch_iterator.iterations} rounds but the mechanism '
                     f'{mechanism.iterations}')
  if batch_iterator.batch_size is None:
    raise InputError('batch_iterator needs a fixed batch_size (one XLA shape for every step)')
  m = len(jax.tree_util.tree_leaves(inputs)[0])
  if m != batch_iterator.dataset_size:
    raise InputError(f'the data has {m} examples but batch_iterator was built for '
                     f'dataset_size = {batch_iterator.dataset_size}')
  _validate.positive_finite('clip_norm', clip_norm)
  if guarantee is not None and noise and guarantee.noise_multiplier != mechanism.noise_multiplier:
    raise InputError(f'guarantee is for σ = {guarantee.noise_multiplier}, the mechanism has σ = '
                     f'{mechanism.noise_multiplier}')
  return m


def noise_bands(matrix) -> tuple[np.ndarray, np.ndarray]:
  """(c_col, inverse_band) of the streamed noise: (c, (1,)) for banded C, ((1,), h) for banded C⁻¹.

  The strategy's ``noise_bands`` (``jaxacct.strategy.Strategy``); TypeError when C⁻¹Z cannot
  be streamed.
  """
  return check_strategy(matrix).noise_bands()


def _check_resumed(state, band_lengths: tuple[int, int], iterations: int, tracking) -> None:
  if not isinstance(state, step_lib.TrainState):
    raise InputTypeError(f'state must be a jaxacct.training.TrainState, got {type(state).__name__}')
  if tracking is None and state.individual is not None:
    raise InputError('state carries individual accounting but train() got no individual '
                     'accountant: pass the one the run started with')
  if tracking is not None:
    if state.individual is None:
      raise InputError('train() got an individual accountant but the resumed state has no '
                       'individual state: a run must account from its first step')
    tracking.check_state(state.individual)
  for name, history, length in (('w_history', state.noise.w_history, band_lengths[0]),
                                ('z_history', state.noise.z_history, band_lengths[1])):
    rows = {int(leaf.shape[0]) for leaf in jax.tree_util.tree_leaves(history)}
    if rows and rows != {length - 1}:
      raise InputError(f'state.noise.{name} holds {rows.pop()} past rows but the strategy\'s bands '
                       f'need {length - 1}: the state is from another mechanism')
  if not 0 <= int(state.step) <= iterations:
    raise InputError(f'state.step must be in [0, iterations = {iterations}], got {int(state.step)}')


def _placement(devices, batch_size: int, state, traced):
  """Shards the batch axis over ``devices`` (state and scalars replicated); identity on one device."""
  mesh = sharding.sample_mesh(devices)
  if mesh.size == 1:
    return lambda tree: tree, state, traced
  if batch_size % mesh.size:
    raise InputError(f'the batch shape {batch_size} must be a multiple of the {mesh.size} devices '
                     'it is sharded over (choose batch_size accordingly, or pass devices=)')
  replicated = NamedSharding(mesh, PartitionSpec())
  batch_sharding = sharding.sample_sharding(mesh)
  return (lambda tree: jax.device_put(tree, batch_sharding),
          jax.device_put(state, replicated), jax.device_put(traced, replicated))


class TrainingData(NamedTuple):
  """What a run trains on: the ``batch_iterator`` of the accounted scheme
  (``jaxacct.batching.batches(mechanism.scheme, m, rng, batch_size=K)``) and the ``inputs`` /
  ``labels`` arrays (or pytrees) with the m examples on the leading axis."""

  batch_iterator: BatchIterator
  inputs: Any
  labels: Any


@dataclasses.dataclass(frozen=True, kw_only=True)
class TrainOptions:
  """How a training run executes (``train``'s ``run=``).

  Attributes:
    noise: False trains without noise (a non-private baseline; no guarantee).
    state: resume from this ``TrainState`` (its ``step`` must be 0 unless the iterator is
      replayed from the same seed: the loop skips the first ``step`` batches).
    on_step: called with the state after every step (host; e.g. checkpointing).
    devices: devices to shard the batch axis over (default: all local devices; the batch shape
      must be a multiple of their number). Per-example gradients are computed where their
      examples live and summed across devices; parameters, optimiser and noise state are
      replicated (the noise is drawn from the same key on every device, so it is identical).
      The sum order differs between device counts, so results agree to float rounding, not
      bitwise.
  """

  noise: bool = True
  state: step_lib.TrainState | None = None
  on_step: Callable[[step_lib.TrainState], None] | None = None
  devices: Any = None

  def __post_init__(self):
    _validate.boolean('noise', self.noise)
    if self.on_step is not None and not callable(self.on_step):
      raise InputTypeError(f'on_step must be callable (state) -> None, got {self.on_step!r}')


@options_lib.moved_to(run='jaxacct.training.TrainOptions',
                      fields=('noise', 'state', 'on_step', 'devices'), monte_carlo=False,
                      positional='batch_iterator, inputs, labels became one argument, '
                                 'jaxacct.training.TrainingData(batch_iterator, inputs, labels)')
def train(loss_fn: Callable, params: Any, optimizer: optax.GradientTransformation,
          mechanism: MatrixMechanism, data: TrainingData, *, clip_norm: float, key: jax.Array,
          guarantee: Guarantee | None = None,
          individual: tracking_lib.IndividualAccountant | None = None,
          run: TrainOptions | None = None) -> TrainResult:
  """Trains with DP-BandMF on ``batch_iterator``'s batches with the mechanism's σ and C.

  Every step gathers the batch (fixed shape, mask), clips per example to
  ``clip_norm``, adds σ·clip_norm·(C⁻¹Z)_t and divides by the public expected
  batch size p₀·m; see ``jaxacct.training.step``. The noise is
  ``noise_transformation(mechanism, key=key, clip_norm=clip_norm, normalizer=p₀·m)``'s, bit
  for bit: a user's own optax loop chaining that transformation privatises the same way.

  Args:
    loss_fn: ``loss_fn(params, x, y)`` → per-example real scalar (one example,
      no batch axis).
    params: initial parameters (pytree).
    optimizer: any optax transformation.
    mechanism: the accounted mechanism, e.g. ``jaxacct.calibrate(...).mechanism``.
    data: ``TrainingData(batch_iterator, inputs, labels)``.
    clip_norm: κ > 0.
    key: JAX key of the run, which must be secret (e.g. from OS entropy): the noise
      is its "training" stream, and whoever knows the key can remove it.
    guarantee: the statement returned with the result (e.g. the calibration's).
    individual: an ``jaxacct.individual.IndividualAccountant`` (Koskela et al. (2022)):
      records every example's clipped-norm ratios (full batch: from the step's own gradients,
      optionally running the individual GDP filter; Poisson p < 1: a norm pass over the
      tracked examples every step) in ``state.individual``, which resumes bitwise with the
      state.
      DP-SGD / DP-GD only (one-band C, untruncated Poisson).
    run: ``TrainOptions`` (noise on or off, a state to resume, a per-step callback, devices).

  Returns:
    ``TrainResult``.

  Raises:
    ValueError / TypeError: mismatched iterator and mechanism, data of the wrong
      size, clip_norm ≤ 0, a loss that is not a per-example scalar.

  References:
    Dong, Ganesh, arXiv 2602.09338v2, §2–3 (DP-BandMF with b-min-sep batches);
    Choquette-Choo et al., NeurIPS 2023 (banded matrix factorisation).
  """
  if not isinstance(data, TrainingData):
    raise InputTypeError('data must be a jaxacct.training.TrainingData(batch_iterator, inputs, '
                         f'labels), got {type(data).__name__}')
  run = TrainOptions() if run is None else run
  if not isinstance(run, TrainOptions):
    raise InputTypeError(f'run must be a jaxacct.training.TrainOptions, got {run!r}')
  batch_iterator, inputs, labels = data
  noise, state, on_step, devices = run.noise, run.state, run.on_step, run.devices
  m = _check(mechanism, guarantee, batch_iterator, inputs, clip_norm, noise)
  step_lib.check_per_example_loss(loss_fn, params, inputs, labels)
  normalizer = mechanism.scheme.expected_participation_rate * m
  if normalizer < 1.0:
    raise InputError(f'the expected batch size p₀·m = {normalizer:.4g} is below one example: the '
                     'dataset is smaller than the scheme expects')
  # Host float64, made float64 under x64 and float32 otherwise, then cast to each parameter's
  # dtype, as noise_transformation's init does: float64 parameters get the accounted C and σκ.
  c_col, inverse_band = (jnp.asarray(np.asarray(band, np.float64))
                         for band in noise_bands(mechanism.matrix))
  band_lengths = (int(c_col.shape[0]), int(inverse_band.shape[0]))
  tracking = None if individual is None else tracking_lib.bind(individual, mechanism, m)
  if tracking is not None:
    tracking_lib.check_parameter_precision(params)
  if state is None:
    state = step_lib.init_state(params, optimizer, band_lengths,
                                None if tracking is None else tracking.init())
  _check_resumed(state, band_lengths, mechanism.iterations, tracking)
  training_key = keys_lib.purpose_key(keys_lib.canonicalize_key(key), 'training')
  noise_args = step_lib.NoiseArgs(
      training_key=training_key, c_col=c_col, inverse_band=inverse_band,
      noise_scale=jnp.asarray(np.float64(mechanism.noise_multiplier * clip_norm
                                         if noise else 0.0)),
      clip_norm=jnp.asarray(clip_norm, jnp.float32),
      normalizer=jnp.asarray(np.float64(normalizer)))
  tracking_args = step_lib.TrackingArgs()
  if tracking is not None:
    tracking_args = step_lib.TrackingArgs(**tracking.traced())
    if not tracking.full_batch:  # the tracked examples' norm pass (replicated over devices)
      tracking_args = tracking_args._replace(tracked=jax.tree_util.tree_map(
          lambda a: jnp.asarray(a[tracking.tracked]), (inputs, labels)))
  place_batch, state, (noise_args, tracking_args) = _placement(
      devices, batch_iterator.batch_size, state, (noise_args, tracking_args))
  spec = step_lib.StepSpec(loss_fn, optimizer, None if tracking is None else tracking.spec)
  skip = int(state.step)
  for i, batch in enumerate(batch_iterator):
    if i < skip:
      continue
    take = jax.tree_util.tree_map(lambda a: a[batch.indices], (inputs, labels))
    inputs_b, labels_b, mask_b, indices_b = place_batch(
        (*take, batch.mask, batch.indices.astype(np.int32)))
    state = step_lib.train_step(
        state, inputs_b, labels_b, mask_b, spec=spec, noise=noise_args,
        tracking=tracking_args if spec.tracking is None else tracking_args._replace(
            indices=indices_b))
    if on_step is not None:
      on_step(state)
  return TrainResult(state, guarantee if noise else None, mechanism, float(normalizer),
                     tracking)
