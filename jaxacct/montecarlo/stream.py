"""The one stream driver: block-ordered float64 hockey-stick sums for estimation, σ sweeps and
verification.

Every Monte Carlo accounting run is the same loop: for each direction, for each call's range
of global blocks on the ``SampleMesh``, a *loss program* evaluates the privacy losses of
every block for each of K candidates; each block is reduced on device to per-ε float64 sums
of the hockey-stick terms (1 − e^{ε − L})₊ and of their squares (and optional histogram
counts); the host adds the per-block sums **in block order, in float64** into a
``BlockSums`` accumulator. The result depends only on (key, purpose, mechanism, ε grid, block
size, number of samples), not on blocks per call or device count.

Loss programs:

- ``sampling.OneSigma``: y = C·x + σ·z, then the loss (the estimator and the plain samplers);
- ``SharedDraws``: one draw (x, z) and one pass of d = Cᵀ(C·x) + σ·Cᵀz serve K candidate σ
  (common random numbers; ``candidates.py`` explains why the EVR guarantee holds).

``BlockSums`` is serialisable (``to_dict``/``from_dict``) per candidate and direction, so a
run can be resumed from any block boundary without changing any key.

Progress: every public long run takes ``progress(samples_done, samples_total, stage)``
(``jaxacct.progress.Progress``), called after each call; ``stage`` names the part of the run
("estimate", "estimation sweep 2", "verification") and the counts start again at 0 with each
stage.

Where the code runs: the loss programs and block reductions are JAX (device, sharded over the
sample axis); the driver and the accumulator are NumPy (host).

References:
  Andy Dong and Arun Ganesh, "Privacy Amplification for BandMF via b-Min-Sep Subsampling",
  arXiv:2602.09338 (v2): §2.5 (Monte Carlo accounting) (docs/references.md).
"""

from __future__ import annotations

import dataclasses
import functools
from typing import Callable

import jax
import jax.numpy as jnp
import numpy as np
from jax import lax

from jaxacct.conventions import DIRECTIONS, signed_loss
from jaxacct.mechanism import MatrixMechanism
from jaxacct.montecarlo import program32, sampling, sharding
from jaxacct.montecarlo.kernels import SchemeKernel
from jaxacct.montecarlo.sharding import SampleMesh
from jaxacct.errors import InputError

def hockey_stick_terms(epsilons: jax.Array, losses: jax.Array) -> jax.Array:
  """(1 − e^{ε − L})₊ = −expm1(min(ε − L, 0)) for every (ε, L): shape (E, N) (the Monte Carlo
  estimate of Dong & Ganesh (2026) §2.5)."""
  return -jnp.expm1(jnp.minimum(epsilons[:, None] - losses[None, :], 0.0))


@functools.partial(jax.jit, static_argnames=('mesh',))
def block_reductions(losses, num_samples, epsilons, edges, *, mesh):
  """Per-block float64 sums of the terms and their squares, and histogram counts.

  ``losses``: (k, block_size) with global sample index block·block_size + j;
  samples with index ≥ ``num_samples`` are masked out. Each block is reduced
  by the same fixed-shape program (lax.map), so sums do not depend on k.
  """
  block_size = losses.shape[1]

  def one_device(losses, first_index, num_samples, epsilons, edges):
    def one_block(args):
      block_losses, first = args
      valid = (first + jnp.arange(block_size, dtype=jnp.int64)) < num_samples
      terms = jnp.where(valid[None, :], hockey_stick_terms(epsilons, block_losses), 0.0)
      # Bin j holds losses in (edges[j-1], edges[j]]; bin len(edges) is the overflow.
      bins = jnp.searchsorted(edges, block_losses, side='left')
      one_hot = (bins[:, None] == jnp.arange(edges.shape[0] + 1)[None, :]) & valid[:, None]
      return (jnp.sum(terms, axis=1), jnp.sum(jnp.square(terms), axis=1),
              jnp.sum(one_hot, axis=0, dtype=jnp.int64))
    return lax.map(one_block, (losses, first_index))

  first_index = jnp.arange(losses.shape[0], dtype=jnp.int64) * block_size
  return sharding.per_device(one_device, mesh, 2)(losses, first_index, num_samples, epsilons,
                                                  edges)


@dataclasses.dataclass
class BlockSums:
  """Host float64 accumulator of per-block sums, per direction and candidate (block order).

  Attributes:
    sums / squares: per direction, (K, E) float64 sums of the terms and their squares.
    counts: per direction, (K, bins) int64 histogram counts, or None without a histogram.
    margins: per direction, (K,) the largest certified margin η of the 32-bit program's
      samples (``margin.py``), or None for float64 runs.
  """

  sums: dict
  squares: dict
  counts: dict | None
  margins: dict | None = None

  @classmethod
  def zeros(cls, num_candidates: int, num_epsilons: int,
            num_bins: int | None = None) -> 'BlockSums':
    def zero(width, dtype=np.float64):
      return {d: np.zeros((num_candidates, width), dtype) for d in DIRECTIONS}
    return cls(zero(num_epsilons), zero(num_epsilons),
               None if num_bins is None else zero(num_bins, np.int64))

  def add(self, direction: str, candidate: int, block_sums, block_squares,
          block_counts=None, block_margins=None) -> None:
    """Adds the rows of one call (blocks in order) to candidate ``candidate`` of ``direction``."""
    if block_margins is not None and block_margins.size:
      if self.margins is None:
        self.margins = {d: np.zeros(self.sums[d].shape[0]) for d in DIRECTIONS}
      self.margins[direction][candidate] = max(self.margins[direction][candidate],
                                               float(np.max(block_margins)))
    for row in range(block_sums.shape[0]):  # host, float64, block order: bitwise reproducible
      self.sums[direction][candidate] = self.sums[direction][candidate] + block_sums[row]
      self.squares[direction][candidate] = self.squares[direction][candidate] + block_squares[row]
    if self.counts is not None:
      self.counts[direction][candidate] = (self.counts[direction][candidate]
                                           + block_counts.sum(axis=0))

  def to_dict(self) -> dict:
    """JSON-ready nested lists (K × E per direction)."""
    def lists(table):
      return None if table is None else {d: table[d].tolist() for d in DIRECTIONS}
    return {'sums': lists(self.sums), 'squares': lists(self.squares),
            'counts': lists(self.counts), 'margins': lists(self.margins)}

  @classmethod
  def from_dict(cls, record: dict, like: 'BlockSums | None' = None) -> 'BlockSums':
    """The accumulator of ``to_dict``'s form; ValueError naming the field when a table is
    missing, has another shape than ``like``'s, or holds a negative or non-finite value."""
    if not isinstance(record, dict):
      raise InputError(f'totals must be a mapping, got {type(record).__name__}')

    def arrays(name, dtype, optional):
      table = record.get(name)
      if table is None:
        if optional:
          return None
        raise InputError(f'totals.{name} is missing')
      if name == 'counts' and like is not None and like.counts is None:
        raise InputError('totals.counts is present, but this run keeps no histogram')
      if not isinstance(table, dict) or set(table) != set(DIRECTIONS):
        raise InputError(f'totals.{name} must map {" and ".join(DIRECTIONS)} to arrays')
      result = {}
      for d in DIRECTIONS:
        try:
          values = np.asarray(table[d], np.float64)
        except (TypeError, ValueError):
          raise InputError(f'totals.{name}.{d} must be an array of numbers') from None
        reference = None if like is None else getattr(like, name)
        shape = None if reference is None else reference[d].shape
        if name == 'margins' and like is not None:
          shape = (like.sums[d].shape[0],)
        if shape is not None and values.shape != shape:
          raise InputError(f'totals.{name}.{d} has shape {values.shape}, this run {shape}')
        if not np.all(np.isfinite(values)) or np.any(values < 0):
          raise InputError(f'totals.{name}.{d} must hold finite values >= 0')
        if dtype == np.int64 and np.any(values != np.floor(values)):
          raise InputError(f'totals.{name}.{d} must hold integers')
        result[d] = values.astype(dtype)
      return result

    counts_optional = like is None or like.counts is None
    return cls(arrays('sums', np.float64, False), arrays('squares', np.float64, False),
               arrays('counts', np.int64, counts_optional), arrays('margins', np.float64, True))


def mean_and_standard_error(sums, sums_of_squares, num_samples: int):
  """Sample mean of the terms and its standard error (sample s.d. / √N), host float64."""
  n = num_samples
  mean = np.asarray(sums, np.float64) / n
  variance = np.maximum(np.asarray(sums_of_squares, np.float64) / n - mean**2, 0.0)
  variance *= n / max(1, n - 1)
  return mean, np.sqrt(variance / n)


@functools.partial(jax.jit, static_argnames=('kernel', 'direction', 'block_size', 'mesh'))
def _block_components(block_ids, stream_key, params, view, *, kernel: SchemeKernel,
                      direction: str, block_size: int, mesh):
  """(C·x, z, info) of whole blocks: arrays (k, block_size, n) (C·x is None without a signal)."""
  def one_device(ids, stream_key, params, view):
    def one_block(block):
      indices = block * block_size + jnp.arange(block_size, dtype=jnp.int64)
      return sampling.draw_components(stream_key, indices, params, view, kernel, direction)
    return lax.map(one_block, ids)
  return sharding.per_device(one_device, mesh, 1)(block_ids, stream_key, params, view)


@functools.partial(jax.jit, static_argnames=('kernel', 'direction', 'mesh'))
def _block_losses_for_sigmas(mean, z, info, sigmas, params, view, *, kernel: SchemeKernel,
                             direction: str, mesh):
  """float64 losses (k, K, block_size) for K noise multipliers from shared draws.

  One pass of sliding dot products per block (d_m = Cᵀ(C·x), d_z = Cᵀz; d_m is skipped
  for a direction without a signal); the kernel's ``log_ratios_for_sigmas`` evaluates
  d = d_m + σ·d_z for every σ.
  """
  def one_device(mean, z, info, sigmas, params, view):
    def one_block(draws):
      mean_block, z_block, info_block = draws
      dz = view.transpose_products(z_block)
      dm = None if mean_block is None else view.transpose_products(mean_block)
      return kernel.log_ratios_for_sigmas(dm, dz, params, sigmas, view, info_block,
                                          direction).astype(jnp.float64)
    return lax.map(one_block, (mean, z, info))
  loss = sharding.per_device(one_device, mesh, 3)(mean, z, info, sigmas, params, view)
  return signed_loss(loss, direction)


@dataclasses.dataclass(frozen=True)
class SharedDraws:
  """Loss program of K noise multipliers sharing one draw (x, z) per sample (y linear in σ)."""

  mechanism: MatrixMechanism
  kernel: SchemeKernel
  sigmas: np.ndarray
  block_size: int
  mesh: SampleMesh

  precision = 'float64'

  @property
  def num_candidates(self) -> int:
    return int(self.sigmas.size)

  def __call__(self, stream_key, ids, direction: str) -> list[jax.Array]:
    params, view, sigmas = self._traced
    mean, z, info = _block_components(ids, stream_key, params, view, kernel=self.kernel,
                                      direction=direction, block_size=self.block_size,
                                      mesh=self.mesh.mesh)
    loss = _block_losses_for_sigmas(mean, z, info, sigmas, params, view, kernel=self.kernel,
                                    direction=direction, mesh=self.mesh.mesh)
    return [loss[:, j, :] for j in range(self.num_candidates)]

  def draws_memory(self, stream_key, ids, direction: str) -> int | None:
    """Bytes per device of the draw pass of one call (arguments, outputs and temporaries,
    from XLA's memory analysis), or None on a backend without one."""
    params, view, _ = self._traced
    return sharding.compiled_memory(_block_components.lower(
        ids, stream_key, params, view, kernel=self.kernel, direction=direction,
        block_size=self.block_size, mesh=self.mesh.mesh))

  @functools.cached_property
  def _traced(self):
    params, _, view = sampling.traced_params(self.mechanism, self.kernel)
    return params, view, jnp.asarray(self.sigmas)


def one_sigma_program(mechanism: MatrixMechanism, kernel: SchemeKernel, block_size: int,
                      mesh: SampleMesh):
  """The loss program of one mechanism in the kernel's precision (``program32`` for float32)."""
  if uses_program32(mechanism, kernel):
    return program32.Program32(mechanism, kernel, np.asarray([mechanism.noise_multiplier]),
                               block_size, mesh)
  return sampling.OneSigma(mechanism, kernel, block_size, mesh)


def shared_draws_program(mechanism: MatrixMechanism, kernel: SchemeKernel, sigmas: np.ndarray,
                         block_size: int, mesh: SampleMesh):
  """The loss program of K noise multipliers sharing one draw, in the kernel's precision."""
  if uses_program32(mechanism, kernel):
    return program32.Program32(mechanism, kernel, np.asarray(sigmas), block_size, mesh)
  return SharedDraws(mechanism, kernel, sigmas, block_size, mesh)


def uses_program32(mechanism: MatrixMechanism, kernel: SchemeKernel) -> bool:
  """True for a float32 kernel that the 32-bit program serves (see ``program32.refusal``);
  ValueError for a float32 kernel that has only the 32-bit program but cannot serve it."""
  program32.check_float32_kernel(mechanism, kernel)
  return program32.serves(mechanism, kernel)


@dataclasses.dataclass
class StreamState:
  """A stream run that can stop at any call boundary and resume there bit for bit.

  A run is one or more loss programs (one, or one per candidate for independent keys), each
  over both directions, each direction over blocks [first_block, end).

  Attributes:
    totals: the accumulator (``BlockSums``) of everything computed so far.
    program: index of the program being run (earlier ones are finished).
    direction: index into ``DIRECTIONS`` of the direction being run in that program.
    block: the next global block of that direction, or None for the run's first block.
  """

  totals: BlockSums
  program: int = 0
  direction: int = 0
  block: int | None = None

  def blocks_remaining(self, *, num_samples: int, first_block: int, block_size: int,
                       num_programs: int = 1) -> int:
    """Blocks (over programs and both directions) that ``accumulate`` still computes from
    this state for a run of ``num_programs`` programs over [first_block, ⌈N/block⌉)."""
    per_direction = max(0, -(-num_samples // block_size) - first_block)
    if self.program >= num_programs:
      return 0
    done = self.direction * per_direction + (0 if self.block is None else min(
        per_direction, max(0, self.block - first_block)))
    return (num_programs - self.program) * len(DIRECTIONS) * per_direction - done

  def to_dict(self) -> dict:
    """JSON-ready (floats round-trip exactly through ``json``)."""
    return {'totals': self.totals.to_dict(), 'program': self.program,
            'direction': self.direction, 'block': self.block}

  @classmethod
  def from_dict(cls, record: dict, like: 'StreamState | None' = None) -> 'StreamState':
    """The state of ``to_dict``'s form, checked (types, ranges, the shapes of ``like``'s
    totals); ValueError naming the field. The block's range is checked by ``accumulate``."""
    if not isinstance(record, dict):
      raise InputError(f'stream must be a mapping, got {type(record).__name__}')
    for name in ('totals', 'program', 'direction', 'block'):
      if name not in record:
        raise InputError(f'stream.{name} is missing')

    def index(name, value, top=None):
      if (isinstance(value, bool) or not isinstance(value, int) or value < 0
          or (top is not None and value > top)):
        allowed = '>= 0' if top is None else f'in [0, {top}]'
        raise InputError(f'stream.{name} must be an integer {allowed}, got {value!r}')
      return value

    block = record['block']
    return cls(BlockSums.from_dict(record['totals'], None if like is None else like.totals),
               index('program', record['program']),
               index('direction', record['direction'], len(DIRECTIONS) - 1),
               None if block is None else index('block', block))


def accumulate(stream_key_of: Callable[[str], jax.Array], program, state: StreamState, *,
               program_index: int = 0, num_programs: int = 1, candidate_offset: int = 0,
               num_samples: int,
               first_block: int, block_size: int, blocks_per_call: int | None,
               mesh: SampleMesh, epsilons: np.ndarray, edges: tuple[float, ...] | None,
               progress: Callable[[int, int], None] | None = None,
               after_call: Callable[[StreamState], None] | None = None) -> None:
  """Runs ``program`` over blocks [first_block, ⌈num_samples/block_size⌉) of both directions.

  Adds each call's per-block sums to ``state.totals`` (candidate ``candidate_offset + j`` for
  the program's j-th candidate), in block order, and advances ``state`` past the call. A
  resumed ``state`` skips what it has done: programs before ``state.program``, directions
  before ``state.direction``, blocks before ``state.block``. Samples past ``num_samples``
  in the last block are masked out.

  Args:
    stream_key_of: the key of a direction's stream (purpose and direction folded in).
    program: a loss program (``sampling.OneSigma`` or ``SharedDraws``).
    state: the run's state (fresh or resumed); updated in place.
    program_index: this program's index in the run, of ``num_programs``.
    blocks_per_call: blocks per device per call (performance only; default keeps ~2²⁰
      output entries per device).
    progress: called as ``progress(samples_done, samples_total)`` after each call, counting
      the samples of all ``num_programs`` programs and both directions.
    after_call: called with ``state`` after each call (a checkpoint hook).
  """
  if state.program > num_programs:
    raise InputError(f'the saved state (a checkpoint) is at program {state.program} of a run '
                     f'of {num_programs}')
  if program_index < state.program:
    return  # finished before the run was resumed
  if blocks_per_call is None:
    blocks_per_call = sampling.default_blocks_per_call(block_size, program.kernel.iterations)
  total_blocks = -(-num_samples // block_size)
  eps_device = jnp.asarray(epsilons)
  edges_device = jnp.asarray(edges if edges is not None else [0.0])
  # Where this program starts: a resumed state's direction and block, else the beginning.
  resume_direction, resume_block = ((state.direction, state.block)
                                    if program_index == state.program else (0, None))
  if resume_block is not None and not first_block <= resume_block <= total_blocks:
    raise InputError(f'the saved state (a checkpoint) resumes at block {resume_block}, outside '
                     f'this run\'s blocks [{first_block}, {total_blocks}]')
  for index, direction in enumerate(DIRECTIONS):
    if index < resume_direction:
      continue
    start = resume_block if index == resume_direction and resume_block is not None else first_block
    stream_key = stream_key_of(direction)
    for block, used, ids in mesh.calls(start, total_blocks, blocks_per_call):
      if program.precision == 'float32':
        reduced = program.block_sums(stream_key, block, ids.shape[0], direction, num_samples,
                                     epsilons, edges)
      else:
        remaining = jnp.asarray(num_samples - block * block_size, jnp.int64)
        reduced = [mesh.to_host(block_reductions(losses, remaining, eps_device, edges_device,
                                                 mesh=mesh.mesh))
                   for losses in program(stream_key, ids, direction)]
      for j, (block_sums, block_squares, block_counts, *block_margins) in enumerate(reduced):
        state.totals.add(direction, candidate_offset + j, block_sums[:used],
                         block_squares[:used], None if edges is None else block_counts[:used],
                         block_margins[0][:used] if block_margins else None)
      state.program, state.direction, state.block = program_index, index, block + used
      if after_call is not None:
        after_call(state)
      if progress is not None:
        done = ((program_index * len(DIRECTIONS) + index) * num_samples
                + min((block + used) * block_size, num_samples))
        progress(done, num_programs * len(DIRECTIONS) * num_samples)
    state.program, state.direction, state.block = program_index, index + 1, None
  state.program, state.direction, state.block = program_index + 1, 0, None
