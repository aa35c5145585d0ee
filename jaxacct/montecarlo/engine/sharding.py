"""The device set a Monte Carlo run is spread over, and how block ranges map onto it.

Blocks of samples are independent, so the only sharding is along the sample axis
("samples"). Results do not depend on the number of devices: each sample's key is a function
of its global index, and per-block sums are combined on the host in block order.

``SampleMesh`` is the one place that knows the devices: it turns a range of global block
indices into per-call index arrays placed on the mesh, and brings per-block results back to
the host. Under ``jax.distributed`` (multi-controller JAX: one process per host, every
process running the same program) the default mesh spans every process's devices; each
process computes only the blocks of its own devices, and ``to_host`` all-gathers the small
per-block sums so that every process adds the same values in the same block order: the
result is bitwise that of one process with the same blocks.
"""

from __future__ import annotations

import dataclasses
import json
from typing import Iterator

import jax
import numpy as np
from jax.experimental import multihost_utils
from jax.sharding import Mesh, NamedSharding, PartitionSpec
from jaxacct.errors import InputError

SAMPLE_AXIS = 'samples'


def sample_mesh(devices=None) -> Mesh:
  """A 1-D mesh over ``devices`` (default: every device of every process, ``jax.devices()``)."""
  devices = jax.devices() if devices is None else list(devices)
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
    """The mesh over ``devices`` (default: all devices of all processes)."""
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
    for block in range(first_block, end_block, call_blocks):
      ids = np.arange(block, block + call_blocks, dtype=np.int64)
      yield block, min(call_blocks, end_block - block), self.place(ids)

  def place(self, array: np.ndarray) -> jax.Array:
    """A host array split over the mesh along its leading axis (each process places only
    the rows of its own devices; the global array is the same on every process)."""
    return jax.make_array_from_callback(array.shape, sample_sharding(self.mesh),
                                        lambda index: array[index])

  @staticmethod
  def to_host(arrays):
    """NumPy copies of sharded results, all-gathered across processes when needed."""
    def one(array):
      if getattr(array, 'is_fully_addressable', True):
        return np.asarray(array)
      return np.asarray(multihost_utils.process_allgather(array, tiled=True))
    return jax.tree_util.tree_map(one, arrays)


def per_device(fn, mesh: Mesh, num_sharded: int):
  """shard_map ``fn`` over ``mesh``: the first ``num_sharded`` args split by blocks, others replicated."""
  def specs(count):
    return tuple([PartitionSpec(SAMPLE_AXIS)] * num_sharded + [PartitionSpec()] * count)
  def wrapped(*args):
    return jax.shard_map(fn, mesh=mesh, in_specs=specs(len(args) - num_sharded),
                         out_specs=PartitionSpec(SAMPLE_AXIS), check_vma=False)(*args)
  return wrapped


def compiled_memory(lowered) -> int | None:
  """Bytes per device of a lowered program once compiled (arguments, outputs and temporaries,
  from XLA's memory analysis), or None on a backend without one."""
  try:
    analysis = lowered.compile().memory_analysis()
  except NotImplementedError:
    return None
  if analysis is None:
    return None
  return int(analysis.argument_size_in_bytes + analysis.output_size_in_bytes
             + analysis.temp_size_in_bytes)


def is_leader() -> bool:
  """True in process 0 (the one process that writes files under ``jax.distributed``)."""
  return jax.process_index() == 0


def broadcast_json(value):
  """Process 0's JSON-ready ``value``, on every process (itself when there is one process).

  Host decisions that could differ between hosts (a file only process 0 reads; a float from
  a library whose last bits depend on the host's NumPy build) go through here, so that every
  process runs the same program.
  """
  if jax.process_count() == 1:
    return value
  data = np.frombuffer(json.dumps(value).encode(), np.uint8) if is_leader() else None
  size = int(multihost_utils.broadcast_one_to_all(
      np.asarray(0 if data is None else data.size, np.int64)))
  buffer = data if data is not None else np.zeros(size, np.uint8)
  received = np.asarray(multihost_utils.broadcast_one_to_all(buffer), np.uint8)
  return json.loads(received.tobytes().decode())


def on_leader(compute):
  """``compute()`` run on process 0 only (e.g. a file lock), its JSON-ready value on every process.

  A ValueError or TypeError raised on process 0 is raised on every process (as ValueError
  elsewhere, with the same message), so no process waits for a broadcast that never comes.
  """
  if jax.process_count() == 1:
    return compute()
  outcome, error = None, None
  if is_leader():
    try:
      outcome = {'value': compute()}
    except (ValueError, TypeError) as caught:
      error, outcome = caught, {'error': f'{type(caught).__name__}: {caught}'}
  outcome = broadcast_json(outcome)
  if error is not None:
    raise error
  if 'error' in outcome:
    raise InputError(outcome['error'])
  return outcome['value']
