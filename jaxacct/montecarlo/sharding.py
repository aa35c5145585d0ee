"""Device mesh helpers: shard the sample axis over every local device.

Blocks of samples are independent, so the only sharding is along the sample
axis ("samples"). Results do not depend on the number of devices: each
sample's key is a function of its global index, and per-block sums are
combined on the host in block order.
"""

from __future__ import annotations

import jax
import numpy as np
from jax.sharding import Mesh, NamedSharding, PartitionSpec

SAMPLE_AXIS = 'samples'


def sample_mesh(devices=None) -> Mesh:
  """A 1-D mesh over ``devices`` (default: all local devices)."""
  devices = jax.local_devices() if devices is None else list(devices)
  return Mesh(np.asarray(devices), (SAMPLE_AXIS,))


def sample_sharding(mesh: Mesh) -> NamedSharding:
  """Sharding of an array whose leading axis is samples (or blocks of samples)."""
  return NamedSharding(mesh, PartitionSpec(SAMPLE_AXIS))
