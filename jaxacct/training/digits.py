"""Worked example: a Flax MLP on scikit-learn's digits with DP-SGD and DP-BandMF (host + device).

The data ship with scikit-learn (1797 8×8 images, 10 classes; no download).
Pixels are scaled by the public constant 1/16 (no data-dependent
preprocessing, which would itself need privacy). The split is fixed by a seed;
the training set is the private dataset whose size m the scheme is built for.

Two mechanisms at the same (ε, δ), each with σ calibrated by jaxacct:

* DP-SGD: Poisson sampling, C = I (``c_col = [1]``), σ from the PLD accountant;
* DP-BandMF: b-min-sep sampling and a banded Toeplitz C optimised for prefix
  sums under b-min-sep (seed 000 §7.1), σ from Monte Carlo EVR.

Requires the ``train`` extra (scikit-learn).

References:
  Dong, Ganesh, arXiv 2602.09338v2, §7 (BandMF vs DP-SGD at equal ε);
  Abadi et al., CCS 2016 (DP-SGD).
"""

from __future__ import annotations

import functools
import math
import secrets
from typing import Any, NamedTuple

import flax.linen as nn
import jax
import jax.numpy as jnp
import numpy as np
import optax

from jaxacct import _validate, schemes
from jaxacct.batching.iterators import batches
from jaxacct.deterministic.accountant import calibrate_deterministic
from jaxacct.guarantee import Guarantee
from jaxacct.individual import tracking as tracking_lib
from jaxacct.matrices import BandedToeplitz, optimize_banded_toeplitz
from jaxacct.mechanism import MatrixMechanism
from jaxacct.montecarlo.calibration import calibrate_noise_multiplier
from jaxacct.training.loop import train
from jaxacct.errors import InputError, MissingExtraError

NUM_CLASSES = 10


class DigitsData(NamedTuple):
  x_train: np.ndarray
  y_train: np.ndarray
  x_test: np.ndarray
  y_test: np.ndarray


def load_digits(test_fraction: float = 0.2, seed: int = 0) -> DigitsData:
  """scikit-learn's digits, pixels / 16 as float32, split by ``seed`` (stratified)."""
  try:
    from sklearn import datasets, model_selection
  except ImportError as error:  # pragma: no cover - exercised only without the extra
    raise MissingExtraError("the digits example needs scikit-learn: pip install 'jaxacct[train]'") from error
  x, y = datasets.load_digits(return_X_y=True)
  x_train, x_test, y_train, y_test = model_selection.train_test_split(
      (x / 16.0).astype(np.float32), y.astype(np.int32), test_size=test_fraction,
      random_state=seed, stratify=y)
  return DigitsData(x_train, y_train, x_test, y_test)


class MLP(nn.Module):
  """Two-layer perceptron: 64 → hidden → 10 (tanh keeps per-example gradients bounded-ish)."""

  hidden: int = 64

  @nn.compact
  def __call__(self, x):
    x = jnp.tanh(nn.Dense(self.hidden)(x))
    return nn.Dense(NUM_CLASSES)(x)


@functools.lru_cache(maxsize=None)
def per_example_loss(hidden: int):
  """``loss(params, x, y)`` of one example (cached: one compiled step per model size)."""
  model = MLP(hidden)

  def loss(params, x, y):
    logits = model.apply(params, x[None, :])[0]
    return optax.softmax_cross_entropy_with_integer_labels(logits, y)

  return loss


def accuracy(params: Any, hidden: int, x: np.ndarray, y: np.ndarray) -> float:
  logits = MLP(hidden).apply(params, jnp.asarray(x))
  return float(jnp.mean(jnp.argmax(logits, axis=-1) == jnp.asarray(y)))


def fixed_batch_size(expected_batch_size: float, multiple_of: int = 1,
                     dataset_size: int | None = None) -> int:
  """Batch shape for untruncated schemes: E + 8√E + 8 but at most the dataset size, rounded
  up to a multiple of ``multiple_of`` (the devices the batch is sharded over). A larger batch
  raises; its chance is below 1e-12 per round for the Binomial-like sizes of these schemes."""
  size = math.ceil(expected_batch_size + 8.0 * math.sqrt(expected_batch_size) + 8.0)
  if dataset_size is not None:
    size = min(size, dataset_size)  # a batch never holds more than every example (full batch)
  return int(-(-size // multiple_of) * multiple_of)


def train_digits(mechanism: MatrixMechanism, guarantee: Guarantee | None, data: DigitsData, *,
                 clip_norm: float = 1.0, learning_rate: float = 0.5, momentum: float = 0.9,
                 hidden: int = 64, seed: int | None = None, noise: bool = True,
                 individual=None, progress=None) -> dict:
  """Trains the MLP with ``mechanism`` on ``data`` and reports test accuracy.

  Batches come from ``batches(mechanism.scheme, m, ·)`` and noise from the
  training stream of a JAX key, both derived from ``seed``; the optimiser is
  SGD with momentum on the privatised gradient (post-processing).

  ``seed=None`` (the default) draws the seed from OS entropy and does not
  report it: the guarantee assumes the noise and batches are secret. A given
  seed makes the run reproducible, and anyone who knows it can regenerate the
  noise: use it for experiments, never for a released model.

  ``individual``: a ``jaxacct.individual.IndividualAccountant`` (seed 004) recorded during
  training; its ``tracking.summary`` is returned under ``"individual"``. ``progress(step,
  steps, "training")`` is called after every step.

  Returns:
    dict with ``accuracy``, ``epsilon``, ``delta``, ``noise_multiplier``,
    ``method`` (the guarantee's; ``"nonprivate"`` without noise), ``steps``,
    ``expected_batch_size``, ``batch_shape`` (and ``individual``).
  """
  m = data.x_train.shape[0]
  scheme = mechanism.scheme
  secret = seed is None
  if secret:
    # A full 64-bit key from OS entropy (jax.random.key(int) keeps only 32 bits without x64)
    # and an OS-entropy generator for the batches.
    key = jax.random.wrap_key_data(np.frombuffer(secrets.token_bytes(8), np.uint32).copy())
    rng = np.random.default_rng()
  else:
    seed = _validate.integer_at_least('seed', seed, 0)
    key, rng = jax.random.key(seed), np.random.default_rng([seed, 1])
  expected = scheme.expected_participation_rate * m
  shape = (scheme.truncated_batch_size if scheme.truncates
           else fixed_batch_size(expected, jax.local_device_count(), m))
  iterator = batches(scheme, m, rng, batch_size=shape)
  params = MLP(hidden).init(jax.random.fold_in(key, 7), data.x_train[:1])
  result = train(per_example_loss(hidden), params, optax.sgd(learning_rate, momentum=momentum),
                 mechanism, iterator, data.x_train, data.y_train, clip_norm=clip_norm,
                 key=key, guarantee=guarantee, noise=noise, individual=individual,
                 on_step=None if progress is None else
                 lambda state: progress(int(state.step), scheme.iterations, 'training'))
  g = result.guarantee
  individual_summary = (None if result.tracking is None else tracking_lib.summary(
      result.tracking, result.state.individual, int(result.state.step)))
  return {
      'individual': individual_summary,
      'accuracy': accuracy(result.state.params, hidden, data.x_test, data.y_test),
      'train_accuracy': accuracy(result.state.params, hidden, data.x_train, data.y_train),
      'epsilon': None if g is None else g.epsilon,
      'delta': None if g is None else g.delta,
      'noise_multiplier': float(mechanism.noise_multiplier) if noise else 0.0,
      'method': 'nonprivate' if g is None else g.method,
      'steps': int(result.state.step), 'expected_batch_size': result.normalizer,
      'batch_shape': shape, 'seed': None if secret else seed,
  }


METHODS = ('dpsgd', 'bandmf')


def calibrated_mechanism(method: str, *, epsilon: float, delta: float, dataset_size: int,
                         iterations: int = 300, expected_batch_size: float = 64.0,
                         min_sep: int = 8, bands: int = 8, seed: int = 0
                         ) -> tuple[MatrixMechanism, Guarantee]:
  """The example's two mechanisms with σ calibrated to (ε, δ).

  ``"dpsgd"``: Poisson sampling, C = I, σ from the PLD accountant
  (``calibrate_deterministic`` on a 1e-3 grid, pessimistic). ``"bandmf"``: warm b-min-sep, C the
  ``bands``-band Toeplitz optimised for prefix sums at b-min-sep sensitivity,
  σ from Monte Carlo EVR (``calibrate_noise_multiplier``, key ``seed``).
  """
  if method == 'dpsgd':
    scheme = schemes.Poisson.from_expected_batch_size(
        expected_batch_size=expected_batch_size, dataset_size=dataset_size, iterations=iterations)
    # A 1e-3 PLD grid: still pessimistic (connect-the-dots), ~10× faster than 1e-4 here.
    return calibrate_deterministic(scheme, BandedToeplitz([1.0]), epsilon=epsilon, delta=delta,
                                   value_discretization_interval=1e-3)
  if method == 'bandmf':
    scheme = schemes.BMinSep.from_expected_batch_size(
        expected_batch_size=expected_batch_size, dataset_size=dataset_size,
        iterations=iterations, min_sep=min_sep)
    matrix = BandedToeplitz(optimize_banded_toeplitz(iterations, bands, min_sep=min_sep))
    result = calibrate_noise_multiplier(scheme, matrix, epsilon=epsilon, delta=delta,
                                        key=jax.random.key(seed))
    return result.mechanism, result.guarantee
  raise InputError(f'method must be one of {", ".join(METHODS)}, got {method!r}')
