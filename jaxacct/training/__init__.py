"""Flax/optax DP-BandMF training on the batches and σ the accountant analysed.

``noise`` streams the correlated noise C⁻¹Z (``noise_transformation``: the same noise as an
optax ``GradientTransformation`` for a user's own Flax/optax loop), ``step`` is the jitted
clip–sum–noise–update step, ``loop.train`` runs it over a
``jaxacct.batching.batches`` iterator for a calibrated ``MatrixMechanism`` and
returns the trained state with the guarantee, and ``task`` is the plug-in point of a dataset
and model (``TrainingTask``, ``train_task``; ``jaxacct train`` loads one named by the config).
The worked example, scikit-learn's digits with DP-SGD vs DP-BandMF at equal (ε, δ), is
``examples/digits.py``.
"""

from __future__ import annotations

from jaxacct.training.loop import TrainOptions as TrainOptions
from jaxacct.training.loop import TrainResult as TrainResult
from jaxacct.training.loop import TrainingData as TrainingData
from jaxacct.training.loop import train as train
from jaxacct.training.noise import NoiseCoefficients as NoiseCoefficients
from jaxacct.training.noise import NoiseState as NoiseState
from jaxacct.training.noise import NoiseTransformationState as NoiseTransformationState
from jaxacct.training.noise import noise_transformation as noise_transformation
from jaxacct.training.step import NoiseArgs as NoiseArgs
from jaxacct.training.step import StepSpec as StepSpec
from jaxacct.training.step import TrackingArgs as TrackingArgs
from jaxacct.training.step import TrainState as TrainState
from jaxacct.training.step import clipped_gradient_sum as clipped_gradient_sum
from jaxacct.training.step import train_step as train_step
from jaxacct.training.task import TrainingTask as TrainingTask
from jaxacct.training.task import load_task as load_task
from jaxacct.training.task import train_task as train_task

__all__ = ['NoiseArgs', 'NoiseCoefficients', 'NoiseState', 'NoiseTransformationState',
           'StepSpec', 'TrackingArgs', 'TrainOptions', 'TrainResult', 'TrainState',
           'TrainingData', 'TrainingTask', 'clipped_gradient_sum', 'load_task',
           'noise_transformation', 'train', 'train_step', 'train_task']


def __getattr__(name: str):
  # The digits example moved to examples/digits.py: say where it went instead of a bare
  # ModuleNotFoundError.
  if name == 'digits':
    raise ImportError('jaxacct.training.digits moved to examples/digits.py of the jaxacct '
                      'repository (sys.path.insert(0, "examples"); import digits); your own '
                      'model plugs in as a jaxacct.training.TrainingTask')
  raise AttributeError(f'module {__name__!r} has no attribute {name!r}')
