"""A training task (dataset + model) as a plug-in, and the run that trains one privately.

``TrainingTask`` is what ``train_task`` and ``jaxacct train`` need besides the mechanism: the
private training set, a test set, the model's ``init`` and per-example loss, and an
``evaluate`` metric. A config names its task as ``training.task: <module>:<factory>`` (an
importable module, or a ``.py`` file relative to the config), with keyword arguments in
``training.task_options``; the factory returns a ``TrainingTask``. The digits example
(``examples/digits.py``: an MLP on scikit-learn's digits) is one such task, and the default of
the legacy ``training.dataset: digits``.

References:
  Antti Koskela, Marlon Tobaben and Antti Honkela, "Individual Privacy Accounting with Gaussian
  Differential Privacy", arXiv:2209.15596 (docs/references.md).
"""

from __future__ import annotations

import dataclasses
import functools
import importlib
import importlib.util
import math
import pathlib
import secrets
import sys
import time
from typing import Any, Callable

import jax
import numpy as np
import optax

from jaxacct import _validate
from jaxacct.batching.iterators import batches
from jaxacct.errors import InputError, InputTypeError, MissingExtraError
from jaxacct.guarantee import Guarantee
from jaxacct.individual import tracking as tracking_lib
from jaxacct.mechanism import MatrixMechanism
from jaxacct.training.loop import TrainOptions, TrainingData, train


@dataclasses.dataclass(frozen=True, kw_only=True)
class TrainingTask:
  """A dataset and a model to train with a jaxacct mechanism.

  Attributes:
    name: a short name for reports.
    x_train / y_train: the private training set (its size is the scheme's dataset size).
    x_test / y_test: held-out examples for ``evaluate``.
    init: ``init(key, x_batch) -> params`` (a pytree).
    per_example_loss: ``loss(params, x, y)`` of one example (``train`` vmaps its gradient).
    evaluate: ``evaluate(params, x, y) -> float`` (e.g. accuracy), reported on both sets.
  """

  name: str
  x_train: Any
  y_train: Any
  x_test: Any
  y_test: Any
  init: Callable[[jax.Array, Any], Any]
  per_example_loss: Callable[[Any, Any, Any], jax.Array]
  evaluate: Callable[[Any, Any, Any], float]

  def __post_init__(self):
    for name in ('init', 'per_example_loss', 'evaluate'):
      if not callable(getattr(self, name)):
        raise InputTypeError(f'{name} must be callable, got {getattr(self, name)!r}')
    if len(self.x_train) != len(self.y_train) or len(self.x_train) < 1:
      raise InputError(f'x_train and y_train must hold the same number (>= 1) of examples, '
                       f'got {len(self.x_train)} and {len(self.y_train)}')

  @property
  def dataset_size(self) -> int:
    return len(self.x_train)


def fixed_batch_size(expected_batch_size: float, multiple_of: int = 1,
                     dataset_size: int | None = None) -> int:
  """Batch shape for untruncated schemes: E + 8√E + 8 but at most the dataset size, rounded
  up to a multiple of ``multiple_of`` (the devices the batch is sharded over). A larger batch
  raises; its chance is below 1e-12 per round for the Binomial-like sizes of these schemes."""
  size = math.ceil(expected_batch_size + 8.0 * math.sqrt(expected_batch_size) + 8.0)
  if dataset_size is not None:
    size = min(size, dataset_size)  # a batch never holds more than every example (full batch)
  return int(-(-size // multiple_of) * multiple_of)


def train_task(task: TrainingTask, mechanism: MatrixMechanism, guarantee: Guarantee | None, *,
               clip_norm: float = 1.0, learning_rate: float = 0.5, momentum: float = 0.9,
               seed: int | None = None, noise: bool = True, individual=None,
               progress=None) -> dict:
  """Trains ``task`` with ``mechanism`` (SGD with momentum on the privatised gradient) and
  reports ``evaluate`` on the test and training sets.

  Batches come from ``batches(mechanism.scheme, m, ·)`` and noise from the training stream of
  a JAX key, both derived from ``seed``. ``seed=None`` (the default) draws them from OS entropy
  and does not report it: the guarantee assumes the noise and batches are secret. A given seed
  makes the run reproducible, and anyone who knows it can regenerate the noise: use it for
  experiments, never for a released model.

  ``individual``: a ``jaxacct.individual.IndividualAccountant`` (Koskela et al. (2022))
  recorded during training; its ``tracking.summary`` is returned under ``"individual"``.
  ``progress(step, steps, "training")`` is called after every step.

  Returns:
    dict with ``accuracy`` (test ``evaluate``), ``train_accuracy``, ``epsilon``, ``delta``,
    ``noise_multiplier``, ``method`` (the guarantee's; ``"nonprivate"`` without noise),
    ``steps``, ``expected_batch_size``, ``batch_shape``, ``seed``, ``individual`` and
    ``history`` (``steps``, mean ``train_loss`` on ≤ 512 training examples and
    ``test_metric`` = test ``evaluate``, at ~50 evenly spaced steps).
  """
  if not isinstance(task, TrainingTask):
    raise InputTypeError(f'task must be a jaxacct.training.TrainingTask, got {task!r}')
  m = task.dataset_size
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
  params = task.init(jax.random.fold_in(key, 7), task.x_train[:1])
  history = _History(task, scheme.iterations)

  def on_step(state):
    history.record(state)
    if progress is not None:
      progress(int(state.step), scheme.iterations, 'training')
  result = train(task.per_example_loss, params, _sgd(learning_rate, momentum), mechanism,
                 TrainingData(iterator, task.x_train, task.y_train), clip_norm=clip_norm,
                 key=key, guarantee=guarantee, individual=individual,
                 run=TrainOptions(noise=noise, on_step=on_step))
  g = result.guarantee
  individual_summary = (None if result.tracking is None else tracking_lib.summary(
      result.tracking, result.state.individual, int(result.state.step)))
  return {
      'individual': individual_summary,
      'accuracy': float(task.evaluate(result.state.params, task.x_test, task.y_test)),
      'train_accuracy': float(task.evaluate(result.state.params, task.x_train, task.y_train)),
      'epsilon': None if g is None else g.epsilon,
      'delta': None if g is None else g.delta,
      'noise_multiplier': float(mechanism.noise_multiplier) if noise else 0.0,
      'method': 'nonprivate' if g is None else g.method,
      'accountant': None if g is None else g.accountant,
      'steps': int(result.state.step), 'expected_batch_size': result.normalizer,
      'batch_shape': shape, 'seed': None if secret else seed, 'history': history.as_dict(),
  }


@dataclasses.dataclass(frozen=True)
class TrainingProjection:
  """``project_training``'s projection of ``train_task``'s wall time.

  Attributes:
    steps: the run's steps (the scheme's iterations).
    timed_steps: the steps timed.
    first_step_seconds: setup, compiles and the first step of the timed run (the run
      reuses its compiles: not projected).
    seconds_per_step: steps after the compiles, the history's evaluations (every
      ``max(1, steps // 50)``) included.
    projected_seconds: steps · seconds_per_step + the final test and training evaluations
      (one history record's extra cost each).
  """

  steps: int
  timed_steps: int
  first_step_seconds: float
  seconds_per_step: float
  projected_seconds: float

  def to_dict(self) -> dict:
    return dataclasses.asdict(self)


# One optimiser object and one batched loss per setting and process: the jitted step takes
# the optimiser as a static argument, so a new object would compile the step again; with these
# a second run (``project_training``'s timed steps, then the run) reuses the compiled programs.
@functools.lru_cache(maxsize=None)
def _sgd(learning_rate: float, momentum: float) -> optax.GradientTransformation:
  return optax.sgd(learning_rate, momentum=momentum)


@functools.lru_cache(maxsize=None)
def _batched_loss(per_example_loss: Callable) -> Callable:
  return jax.jit(jax.vmap(per_example_loss, in_axes=(None, 0, 0)))


class _Timed(Exception):
  """Ends ``project_training``'s run after its timed steps."""


def project_training(task: TrainingTask, mechanism: MatrixMechanism, *, noise: bool = True,
                     individual=None, **train_options) -> TrainingProjection:
  """Projects ``train_task(task, mechanism, …)``'s seconds by running its first steps.

  The timed run is ``train_task`` itself with the public seed 0 and σ = 1 (a step's cost does
  not depend on σ); its model, batches and noise are discarded. Its compiles (the step, the
  history's evaluations) are the run's, which reuses them in this process, so the projection
  is of the steps after them: it runs ``3 · every + 1`` steps (``every = max(1, steps //
  50)``, the history's interval; at most the run's) and times the last ``2 · every``, two
  whole intervals whose history evaluations are already compiled.

  Args:
    task, noise, individual, **train_options: as ``train_task`` (``clip_norm``,
      ``learning_rate``, ``momentum``; ``seed`` and ``progress`` are the projection's own).
    mechanism: the run's mechanism (its σ is ignored).

  Returns:
    ``TrainingProjection``.
  """
  train_options = {k: v for k, v in train_options.items() if k not in ('seed', 'progress')}
  steps = mechanism.iterations
  every = max(1, steps // 50)
  timed = min(steps, 3 * every + 1)
  marks = []

  def progress(step, total, stage):
    del total, stage
    marks.append(time.perf_counter())
    if step >= timed:
      raise _Timed

  started = time.perf_counter()
  try:
    train_task(task, MatrixMechanism(mechanism.scheme, mechanism.matrix, 1.0), None,
               noise=noise, individual=individual, seed=0, progress=progress, **train_options)
  except _Timed:
    pass
  first = marks[0] - started
  intervals = np.diff(marks)[-2 * every:]  # steps len(marks) − 2·every + 1 … len(marks)
  step_numbers = np.arange(len(marks) - intervals.size + 1, len(marks) + 1)
  recorded = step_numbers % every == 0
  per_step = float(np.mean(intervals)) if intervals.size else first
  # The final test and training evaluations: about one history record each (a record's extra
  # time over a plain step; 0 when every step records).
  record = (float(np.mean(intervals[recorded]) - np.mean(intervals[~recorded]))
            if recorded.any() and (~recorded).any() else 0.0)
  return TrainingProjection(
      steps=steps, timed_steps=len(marks), first_step_seconds=first, seconds_per_step=per_step,
      projected_seconds=steps * per_step + 2 * max(record, 0.0))


class _History:
  """Mean training loss (on a fixed subset of at most 512 training examples) and test
  ``evaluate`` at about 50 evenly spaced steps and the last: what ``report.plot_training``
  draws. Host-side evaluation of the parameters; it does not touch the batches or the noise."""

  def __init__(self, task: TrainingTask, steps: int):
    self.task, self.every = task, max(1, steps // 50)
    self.last = steps
    count = min(512, task.dataset_size)
    self.x, self.y = task.x_train[:count], task.y_train[:count]
    self.loss = _batched_loss(task.per_example_loss)
    self.steps, self.train_loss, self.test_metric = [], [], []

  def record(self, state) -> None:
    step = int(state.step)
    if step % self.every and step != self.last:
      return
    self.steps.append(step)
    self.train_loss.append(float(np.mean(self.loss(state.params, self.x, self.y))))
    self.test_metric.append(float(self.task.evaluate(state.params, self.task.x_test,
                                                     self.task.y_test)))

  def as_dict(self) -> dict:
    return {'steps': self.steps, 'train_loss': self.train_loss, 'test_metric': self.test_metric}


def load_task(spec: str, options: dict | None = None,
              base: str | pathlib.Path | None = None) -> TrainingTask:
  """The ``TrainingTask`` of ``spec`` = ``"<module>:<factory>"``, called with ``options``.

  ``<module>`` is an importable module name, or a path to a ``.py`` file (relative to
  ``base``, e.g. the config's folder). The factory must return a ``TrainingTask``.
  """
  if not isinstance(spec, str) or spec.count(':') != 1 or not all(spec.split(':')):
    raise InputError(f'training.task must be "<module or file.py>:<factory>", got {spec!r}')
  where, factory_name = spec.split(':')
  if where.endswith('.py'):
    path = pathlib.Path(where)
    if not path.is_absolute() and base is not None:
      path = pathlib.Path(base) / path
    if not path.is_file():
      raise InputError(f'training.task: file {str(path)!r} not found')
    name = f'jaxacct_task_{path.stem}'
    module_spec = importlib.util.spec_from_file_location(name, path)
    module = importlib.util.module_from_spec(module_spec)
    sys.modules[name] = module  # dataclasses and pickling look the module up by name
    try:
      module_spec.loader.exec_module(module)
    except ModuleNotFoundError as error:  # e.g. the digits example's flax or scikit-learn
      raise MissingExtraError(f'training.task: {path} needs {error.name!r}, which is not '
                              "installed (for the digits example, the train extra: pip install "
                              "'flax>=0.10' 'scikit-learn>=1.3', or in a jaxacct clone pip "
                              "install -e '.[train]')") from None
  else:
    try:
      module = importlib.import_module(where)  # layering: user module
    except ImportError as error:
      raise InputError(f'training.task: cannot import {where!r} ({error})') from None
  factory = getattr(module, factory_name, None)
  if not callable(factory):
    raise InputError(f'training.task: {where!r} has no callable {factory_name!r}')
  try:
    task = factory(**(options or {}))
  except TypeError as error:  # an option the factory does not take
    raise InputError(f'training.task_options: {error}') from None
  if not isinstance(task, TrainingTask):
    raise InputTypeError(f'training.task: {spec} returned {type(task).__name__}, not a '
                         'jaxacct.training.TrainingTask')
  return task
