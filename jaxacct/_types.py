"""Type aliases and the shape conventions used across jaxacct.

Shapes are batch-major at every public boundary: an output sample ``y`` of a
mechanism with ``iterations = n`` has shape ``(num_samples, n)`` and a vector of
privacy losses has shape ``(num_samples,)``. Kernels stay batch-major too,
except inside a ``lax.scan`` over rounds, which consumes its inputs time-major
``(n, num_samples)`` (one transpose right before the scan).
"""

from __future__ import annotations

from typing import Any, Union

import jax
import numpy as np

Array = jax.Array
ArrayLike = Union[jax.Array, np.ndarray, float, int]
PRNGKey = jax.Array  # a typed key from jax.random.key (legacy uint32 keys are converted)
Scalar = Union[float, int, jax.Array]
PyTree = Any
