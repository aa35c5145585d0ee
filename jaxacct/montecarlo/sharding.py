"""The device set a Monte Carlo run is spread over, and how block ranges map onto it.

Blocks of samples are independent, so the only sharding is along the sample axis
("samples"). Results do not depend on the number of devices: each sample's key is a function
of its global index, and per-block sums are combined on the host in block order.

``SampleMesh`` is the one place that knows the devices: it turns a range of global block
indices into per-call index arrays placed on the mesh. Multi-host runs and resumed runs plug
in here (a global mesh over every process's devices; a first block other than 0).
"""

from __future__ import annotations

import dataclasses
from typing import Iterator

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


@dataclasses.dataclass(frozen=True)
class SampleMesh:
  """A device set for block-sharded Monte Carlo calls.

  Attributes:
    mesh: the 1-D ``jax.sharding.Mesh`` over the sample axis.
  """

  mesh: Mesh

  @classmethod
  def over(cls, devices=None) -> 'SampleMesh':
    """The mesh over ``devices`` (default: all local devices)."""
    return cls(sample_mesh(devices))

  @property
  def size(self) -> int:
    return int(self.mesh.devices.size)

  def calls(self, first_block: int, end_block: int,
            blocks_per_call: int) -> Iterator[tuple[int, int, jax.Array]]:
    """Yields (first block of the call, blocks of it inside the range, block ids on the mesh).

    Each call covers ``blocks_per_call`` blocks per device; the last call may run past
    ``end_block`` (its extra blocks are computed with the same fixed shapes and discarded).
    """
    call_blocks = blocks_per_call * self.size
    shard = sample_sharding(self.mesh)
    for block in range(first_block, end_block, call_blocks):
      ids = jax.device_put(np.arange(block, block + call_blocks, dtype=np.int64), shard)
      yield block, min(call_blocks, end_block - block), ids
