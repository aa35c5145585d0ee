"""The shapes every 32-bit program test runs with (test_program32.py, test_truncated32.py).

A jitted program compiles once per kernel (its static fields), direction and input shape:
block size, blocks per call, number of σ, of ε and of histogram edges. σ and ε values are
traced. Each compile of a kernel's draw program costs 2–10 s on the 2-core CI machine (its
persistent compile cache starts cold), so these tests run every ``Program32`` call, the
estimator's included (``blocks_per_call``, performance only: results are bitwise the same for
any chunking), with the shapes below: within a file each kernel's programs compile once.
"""

from __future__ import annotations

import jax
import numpy as np

from jaxacct.montecarlo.engine import kernels, program32, sharding

BLOCK_SIZE = 64
#: Blocks per device per call of every 32-bit program (more blocks are more calls).
BLOCKS_PER_CALL = 4
#: K = 3 noise multipliers sharing one draw.
SIGMAS = (0.5, 1.0, 3.0)


def program_of(mechanism, sigmas, block_size: int = BLOCK_SIZE) -> program32.Program32:
  """The 32-bit program of ``mechanism`` for the noise multipliers ``sigmas`` on one device."""
  kernel = kernels.kernel_for(mechanism, np.dtype(np.float32))
  return program32.Program32(mechanism, kernel, np.asarray(sigmas), block_size,
                             sharding.SampleMesh.over(jax.local_devices()[:1]))


def calls(num_blocks: int):
  """First blocks of the calls that cover blocks [0, num_blocks) (a multiple of the call)."""
  assert num_blocks % BLOCKS_PER_CALL == 0, num_blocks
  return range(0, num_blocks, BLOCKS_PER_CALL)


def losses_and_margins(program, stream_key, num_blocks: int, direction: str):
  """``program.losses_and_margins`` of blocks [0, num_blocks) in calls of ``BLOCKS_PER_CALL``:
  (each call's outputs ((y, info) for one σ, else None), losses, margins), the losses and
  margins (num_blocks, K, block size) NumPy float32."""
  parts = [program.losses_and_margins(stream_key, first, BLOCKS_PER_CALL, direction)
           for first in calls(num_blocks)]
  return ([part[0] for part in parts], np.concatenate([np.asarray(part[1]) for part in parts]),
          np.concatenate([np.asarray(part[2]) for part in parts]))


def components(program, stream_key, num_blocks: int, direction: str) -> list:
  """The draw program's (C·x, z, info) of blocks [0, num_blocks), one tuple per call (the
  draws of ``losses_and_margins``, without the losses)."""
  # pylint: disable=protected-access
  with program32.scope():
    return [program._components(stream_key, first, BLOCKS_PER_CALL, direction)
            for first in calls(num_blocks)]
