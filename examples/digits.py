"""Worked example: a Flax MLP on scikit-learn's digits with DP-SGD and DP-BandMF (host + device).

The data ship with scikit-learn (1797 8×8 images, 10 classes; no download).
Pixels are scaled by the public constant 1/16 (no data-dependent
preprocessing, which would itself need privacy). The split is fixed by a seed;
the training set is the private dataset whose size m the scheme is built for.

Two mechanisms at the same (ε, δ), each with σ calibrated by jaxacct:

* DP-SGD: Poisson sampling, C = I (``c_col = [1]``), σ from the PLD accountant;
* DP-BandMF: b-min-sep sampling and a banded Toeplitz C optimised for prefix
  sums under b-min-sep (Dong & Ganesh (2026) §7.1), σ from Monte Carlo EVR.

Requires the ``train`` extra (scikit-learn).

References:
  Andy Dong and Arun Ganesh, "Privacy Amplification for BandMF via b-Min-Sep Subsampling",
  arXiv:2602.09338 (v2): §7 (BandMF vs DP-SGD at equal ε), App. A (Estimate-Verify-Release)
  (docs/references.md).
  Abadi et al., CCS 2016 (DP-SGD).

A ``jaxacct.training.TrainingTask`` (``task``): ``jaxacct train`` runs it for configs with
``training.task: ../examples/digits.py:task`` (or the legacy ``training.dataset: digits``), and
your own model plugs in the same way (``jaxacct/training/task.py``). Import it from a checkout
with ``sys.path.insert(0, "examples")``; ``import digits``.
"""


from __future__ import annotations

import functools
from typing import Any, NamedTuple

import flax.linen as nn
import jax
import jax.numpy as jnp
import numpy as np
import optax

import jaxacct
from jaxacct import optimize_banded_toeplitz
from jaxacct.training.task import TrainingTask, fixed_batch_size, train_task

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
    raise jaxacct.MissingExtraError(
        "the digits example needs scikit-learn: pip install 'scikit-learn>=1.3' (the train "
        "extra; in the jaxacct clone: pip install -e '.[train]')") from error
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


def task(test_fraction: float = 0.2, split_seed: int = 0, hidden: int = 64,
         data: DigitsData | None = None) -> TrainingTask:
  """The digits MLP as a ``TrainingTask`` (``training.task_options``: test_fraction,
  split_seed, hidden); ``data`` reuses a loaded split."""
  data = load_digits(test_fraction, split_seed) if data is None else data
  model = MLP(hidden)
  return TrainingTask(
      name='digits', x_train=data.x_train, y_train=data.y_train, x_test=data.x_test,
      y_test=data.y_test, init=model.init, per_example_loss=per_example_loss(hidden),
      evaluate=lambda params, x, y: accuracy(params, hidden, x, y))


def train_digits(mechanism: jaxacct.MatrixMechanism, guarantee: jaxacct.Guarantee | None,
                 data: DigitsData, *, hidden: int = 64, **options) -> dict:
  """Trains the MLP with ``mechanism`` on ``data`` (``train_task``'s options: clip_norm,
  learning_rate, momentum, seed, noise, individual, progress) and reports test accuracy."""
  return train_task(task(hidden=hidden, data=data), mechanism, guarantee, **options)


METHODS = ('dpsgd', 'bandmf')


def calibrated_mechanism(method: str, *, epsilon: float, delta: float, dataset_size: int,
                         iterations: int = 300, expected_batch_size: float = 64.0,
                         min_sep: int = 8, bands: int = 8, seed: int = 0, ledger=None
                         ) -> tuple[jaxacct.MatrixMechanism, jaxacct.Guarantee]:
  """The example's two mechanisms with σ calibrated to (ε, δ).

  ``ledger``: the attempt ledger of the Monte Carlo calibration (default: the user's). A sweep
  over ε of one mechanism (an accuracy-vs-ε curve) is several attempts at it; to compare, not
  to release, pass an in-memory ``jaxacct.montecarlo.evr.ledger.VerificationLedger()`` per point
  (its guarantees say "attempts unchecked").

  ``"dpsgd"``: Poisson sampling, C = I, σ from the PLD accountant
  (``calibrate_deterministic`` on a 1e-3 grid, pessimistic). ``"bandmf"``: warm b-min-sep, C the
  ``bands``-band Toeplitz optimised for prefix sums at b-min-sep sensitivity,
  σ from Monte Carlo EVR (``calibrate_noise_multiplier``, key ``seed``).
  """
  if method == 'dpsgd':
    scheme = jaxacct.Poisson.from_expected_batch_size(
        expected_batch_size=expected_batch_size, dataset_size=dataset_size, iterations=iterations)
    # A 1e-3 PLD grid: still pessimistic (connect-the-dots), ~10× faster than 1e-4 here.
    return jaxacct.calibrate_deterministic(scheme, jaxacct.BandedToeplitz([1.0]), epsilon=epsilon,
                                           delta=delta, value_discretization_interval=1e-3)
  if method == 'bandmf':
    scheme = jaxacct.BMinSep.from_expected_batch_size(
        expected_batch_size=expected_batch_size, dataset_size=dataset_size,
        iterations=iterations, min_sep=min_sep)
    matrix = jaxacct.BandedToeplitz(optimize_banded_toeplitz(iterations, bands, min_sep=min_sep))
    result = jaxacct.calibrate_noise_multiplier(scheme, matrix, epsilon=epsilon, delta=delta,
                                                key=jax.random.key(seed),
                                                run=jaxacct.RunOptions(ledger=ledger))
    return result.mechanism, result.guarantee
  raise jaxacct.InputError(f'method must be one of {", ".join(METHODS)}, got {method!r}')


__all__ = ['METHODS', 'MLP', 'DigitsData', 'accuracy', 'calibrated_mechanism',
           'fixed_batch_size', 'load_digits', 'per_example_loss', 'task', 'train_digits']
