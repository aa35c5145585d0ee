"""Flax/optax DP-BandMF training on the batches and σ the accountant analysed.

``noise`` streams the correlated noise C⁻¹Z, ``step`` is the jitted
clip–sum–noise–update step, ``loop.train`` runs it over a
``jaxacct.batching.batches`` iterator for a calibrated ``MatrixMechanism`` and
returns the trained state with the guarantee, and ``digits`` is the worked
example (scikit-learn's digits, DP-SGD vs DP-BandMF at equal (ε, δ)).
"""

from __future__ import annotations

from jaxacct.training.loop import TrainResult as TrainResult
from jaxacct.training.loop import train as train
from jaxacct.training.step import TrainState as TrainState
from jaxacct.training.step import clipped_gradient_sum as clipped_gradient_sum
from jaxacct.training.step import train_step as train_step

__all__ = ['TrainResult', 'TrainState', 'clipped_gradient_sum', 'train', 'train_step']
