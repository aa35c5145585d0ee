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
run can be resumed from any block boundary without changing any key. It counts the samples
and blocks it holds beside its float sums; a ``StreamState`` (the sums, the position, the
run's ``Layout``) is refused wherever it is resumed — read back, or handed to ``accumulate``
— unless its position and counts agree (``StreamState.check``), so a saved position cannot
be moved past blocks that were never computed. The counts are integers added beside the
sums; the sums are added exactly as without them.

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
from jaxacct.montecarlo.engine import program32, sampling, sharding
from jaxacct.montecarlo.engine.kernels import SchemeKernel
from jaxacct.montecarlo.engine.sharding import SampleMesh
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
    samples / blocks: per direction, (K,) int64: the samples (the last block masked) and the
      blocks added so far. They tie the sums to a stream position (``StreamState.check``);
      None in an accumulator rebuilt from sums alone (``estimator.EstimatorState.totals``),
      which ``accumulate`` counts as the blocks before its first block.
  """

  sums: dict
  squares: dict
  counts: dict | None
  margins: dict | None = None
  samples: dict | None = None
  blocks: dict | None = None

  @classmethod
  def zeros(cls, num_candidates: int, num_epsilons: int,
            num_bins: int | None = None) -> 'BlockSums':
    def zero(width, dtype=np.float64):
      return {d: np.zeros((num_candidates, width), dtype) for d in DIRECTIONS}
    return cls(zero(num_epsilons), zero(num_epsilons),
               None if num_bins is None else zero(num_bins, np.int64),
               samples=_zero_counts(num_candidates), blocks=_zero_counts(num_candidates))

  @property
  def num_candidates(self) -> int:
    return int(self.sums[DIRECTIONS[0]].shape[0])

  def add(self, direction: str, candidate: int, block_sums, block_squares,
          block_counts=None, block_margins=None, *, samples: int | None = None) -> None:
    """Adds the rows of one call (blocks in order) to candidate ``candidate`` of ``direction``.

    ``samples``: the samples those blocks hold (the run's last block is masked); the rows
    are counted as blocks with them. None (tests of the sums alone) counts neither.
    """
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
    if samples is not None and self.samples is not None:
      self.samples[direction][candidate] += samples
      self.blocks[direction][candidate] += block_sums.shape[0]

  def to_dict(self) -> dict:
    """JSON-ready nested lists (K × E per direction; K per direction for the counts)."""
    def lists(table):
      return None if table is None else {d: table[d].tolist() for d in DIRECTIONS}
    return {'sums': lists(self.sums), 'squares': lists(self.squares),
            'counts': lists(self.counts), 'margins': lists(self.margins),
            'samples': lists(self.samples), 'blocks': lists(self.blocks)}

  @classmethod
  def from_dict(cls, record: dict, like: 'BlockSums | None' = None, *, where: str = 'totals',
                counted: bool = False) -> 'BlockSums':
    """The accumulator of ``to_dict``'s form; InputError naming the field (``where``.name)
    when a table is missing, has another shape than ``like``'s, or holds a negative or
    non-finite value, or a count that is not an integer. ``counted``: the sample and block
    counts must be present (a checkpoint's); without it they may be absent (None)."""
    if not isinstance(record, dict):
      raise InputError(f'{where} must be a mapping, got {type(record).__name__}')

    def arrays(name, dtype, optional):
      table = record.get(name)
      if table is None:
        if optional:
          return None
        raise InputError(f'{where}.{name} is missing')
      if name == 'counts' and like is not None and like.counts is None:
        raise InputError(f'{where}.counts is present, but this run keeps no histogram')
      if not isinstance(table, dict) or set(table) != set(DIRECTIONS):
        raise InputError(f'{where}.{name} must map {" and ".join(DIRECTIONS)} to arrays')
      result = {}
      for d in DIRECTIONS:
        try:
          values = np.asarray(table[d], np.float64)
        except (TypeError, ValueError):
          raise InputError(f'{where}.{name}.{d} must be an array of numbers') from None
        reference = None if like is None else getattr(like, name)
        shape = None if reference is None else reference[d].shape
        if name == 'margins' and like is not None:
          shape = (like.sums[d].shape[0],)
        if shape is not None and values.shape != shape:
          raise InputError(f'{where}.{name}.{d} has shape {values.shape}, this run {shape}')
        if not np.all(np.isfinite(values)) or np.any(values < 0):
          raise InputError(f'{where}.{name}.{d} must hold finite values >= 0')
        if dtype == np.int64 and np.any(values != np.floor(values)):
          raise InputError(f'{where}.{name}.{d} must hold integers')
        result[d] = values.astype(dtype)
      return result

    counts_optional = like is None or like.counts is None
    totals = cls(arrays('sums', np.float64, False), arrays('squares', np.float64, False),
                 arrays('counts', np.int64, counts_optional),
                 arrays('margins', np.float64, True))
    first = totals.sums[DIRECTIONS[0]]
    num_candidates = (first.shape[0] if first.ndim else 0) if like is None else like.num_candidates
    for d in DIRECTIONS:
      for name in ('sums', 'squares', 'counts'):
        table = getattr(totals, name)
        if table is not None and (table[d].ndim != 2 or table[d].shape[0] != num_candidates):
          raise InputError(f'{where}.{name}.{d} has shape {table[d].shape}: one row per '
                           f'candidate ({num_candidates}) expected')
    totals.samples = _read_counts(record, 'samples', where, num_candidates, counted)
    totals.blocks = _read_counts(record, 'blocks', where, num_candidates, counted)
    if (totals.samples is None) != (totals.blocks is None):
      raise InputError(f'{where}.samples and {where}.blocks must be both present or both absent')
    return totals


# Counts are exact integers in JSON: below 2⁶² they never overflow the int64 sums below.
_COUNT_LIMIT = 2**62


def _zero_counts(num_candidates: int) -> dict:
  return {d: np.zeros(num_candidates, np.int64) for d in DIRECTIONS}


def _read_counts(record: dict, name: str, where: str, num_candidates: int,
                 required: bool) -> dict | None:
  """Per direction, the (K,) int64 counts ``record[name]`` (exact JSON integers)."""
  table = record.get(name)
  if table is None:
    if required:
      raise InputError(f'{where}.{name} is missing')
    return None
  if not isinstance(table, dict) or set(table) != set(DIRECTIONS):
    raise InputError(f'{where}.{name} must map {" and ".join(DIRECTIONS)} to lists of counts')
  result = {}
  for d in DIRECTIONS:
    values = table[d]
    if not isinstance(values, list) or len(values) != num_candidates:
      raise InputError(f'{where}.{name}.{d} must list {num_candidates} counts (one per '
                       f'candidate), got {values!r:.80}')
    for c, value in enumerate(values):
      if isinstance(value, bool) or not isinstance(value, int) or not 0 <= value < _COUNT_LIMIT:
        raise InputError(f'{where}.{name}.{d}[{c}] must be an integer in [0, 2^62), got '
                         f'{value!r:.40}')
    result[d] = np.asarray(values, np.int64).reshape(num_candidates)
  return result


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


@dataclasses.dataclass(frozen=True)
class Layout:
  """What a stream run covers: the geometry a state's sample counts are checked against.

  Attributes:
    num_samples: N, the samples per direction of every candidate.
    block_size: samples per block; the last of ⌈N / block_size⌉ blocks is masked.
    first_block: the run's first block (> 0 when it extends an estimate: the blocks before
      it are already in the sums, full).
    num_programs: loss programs run in turn, each over both directions; the K candidates
      are theirs in order, K / num_programs each (one program of K, or K programs of one).
    per_direction: None (both directions draw ``num_samples``), or the samples of each
      direction in ``DIRECTIONS`` order when they differ (a tilted verification sizes each
      direction by its own support bound; 0: a direction certified without samples);
      ``num_samples`` is then their maximum.
  """

  num_samples: int
  block_size: int
  first_block: int = 0
  num_programs: int = 1
  per_direction: tuple[int, ...] | None = None

  @classmethod
  def of(cls, num_samples, block_size: int, first_block: int = 0,
         num_programs: int = 1) -> 'Layout':
    """The layout of a run of ``num_samples`` per direction: an int, or a mapping direction →
    N (``per_direction`` unless they are all equal)."""
    if isinstance(num_samples, dict):
      counts = tuple(int(num_samples[d]) for d in DIRECTIONS)
      if len(set(counts)) > 1:
        return cls(max(counts), block_size, first_block, num_programs, counts)
      num_samples = counts[0]
    return cls(int(num_samples), block_size, first_block, num_programs)

  def samples_in(self, direction: int) -> int:
    """N of the direction with index ``direction`` (``DIRECTIONS`` order)."""
    return self.num_samples if self.per_direction is None else self.per_direction[direction]

  def blocks_in(self, direction: int) -> int:
    """⌈N / block_size⌉ of the direction with index ``direction``."""
    return -(-self.samples_in(direction) // self.block_size)

  @property
  def total_blocks(self) -> int:
    return -(-self.num_samples // self.block_size)

  def to_dict(self) -> dict:
    record = dataclasses.asdict(self)
    if self.per_direction is None:
      del record['per_direction']  # the form saved before per-direction sizes existed
    else:
      record['per_direction'] = list(self.per_direction)
    return record

  @classmethod
  def from_dict(cls, record, where: str = 'layout') -> 'Layout':
    """The layout of ``to_dict``'s form; InputError naming the field (``where``.name)."""
    if not isinstance(record, dict):
      raise InputError(f'{where} must be a mapping, got {type(record).__name__}')
    values = {}
    for field in dataclasses.fields(cls):
      if field.name == 'per_direction':
        continue
      value = record.get(field.name)
      low = 0 if field.name == 'first_block' else 1
      if isinstance(value, bool) or not isinstance(value, int) or not low <= value < _COUNT_LIMIT:
        raise InputError(f'{where}.{field.name} must be an integer in [{low}, 2^62), got '
                         f'{value!r:.40}')
      values[field.name] = value
    if 'per_direction' in record:
      counts = record['per_direction']
      if (not isinstance(counts, list) or len(counts) != len(DIRECTIONS)
          or any(isinstance(c, bool) or not isinstance(c, int) or not 0 <= c < _COUNT_LIMIT
                 for c in counts) or max(counts) != values.get('num_samples')):
        raise InputError(f'{where}.per_direction must list {len(DIRECTIONS)} sample counts '
                         f'in [0, 2^62) whose maximum is num_samples, got {counts!r:.80}')
      values['per_direction'] = tuple(counts)
    if set(record) != set(values):
      raise InputError(f'{where} must hold exactly {", ".join(values)}')
    layout = cls(**values)
    if layout.first_block * layout.block_size > layout.num_samples:
      raise InputError(f'{where}.first_block {layout.first_block} starts past the '
                       f'{layout.num_samples} samples of the run')
    return layout

  def differences(self, other: 'Layout', where: str) -> str:
    return '; '.join(f'{where}.{f.name} is {getattr(self, f.name)}, this run has '
                     f'{getattr(other, f.name)}' for f in dataclasses.fields(self)
                     if getattr(self, f.name) != getattr(other, f.name))


@dataclasses.dataclass
class StreamState:
  """A stream run that can stop at any call boundary and resume there bit for bit.

  A run is one or more loss programs (one, or one per candidate for independent keys), each
  over both directions, each direction over blocks [first_block, end).

  **Position and counts.** The totals count, per direction and candidate, the samples and
  blocks they hold. At a position (program p, direction d, block b) of a run (``Layout``)
  those are fixed: a direction finished before it holds all N samples (⌈N/B⌉ blocks); the
  direction in progress holds the samples of the blocks before b (the last block masked);
  a direction not started holds the blocks before the run's first block (0 for a new run);
  a finished run (p = the number of programs) holds N everywhere. ``check`` refuses a state
  whose position, counts and layout disagree, and whose histogram counts or zero-sample
  sums disagree with its samples, before anything is computed from it: a saved position
  cannot be moved, nor counts edited, without the other. The float sums themselves are not
  tied to the counts by arithmetic (only a MAC over the saved file ties them:
  ``checkpoint.py``).

  Attributes:
    totals: the accumulator (``BlockSums``) of everything computed so far.
    program: index of the program being run (earlier ones are finished).
    direction: index into ``DIRECTIONS`` of the direction being run in that program.
    block: the next global block of that direction, or None for the run's first block.
    layout: the run the counts are checked against: set by ``accumulate`` (a fresh state
      has None), saved with the state and compared with the run that resumes it.
    where: the state's name in refusals (a checkpoint's field path; not saved).
    refuse: builds the exception of a refusal from its message (a checkpoint's names its
      file; not saved); default ``InputError``.
  """

  totals: BlockSums
  program: int = 0
  direction: int = 0
  block: int | None = None
  layout: Layout | None = None
  where: str = dataclasses.field(default='stream', compare=False, repr=False)
  refuse: Callable[[str], Exception] | None = dataclasses.field(default=None, compare=False,
                                                               repr=False)

  def blocks_remaining(self, *, num_samples: int, first_block: int, block_size: int,
                       num_programs: int = 1) -> int:
    """Blocks (over programs and both directions) that ``accumulate`` still computes from
    this state for a run of ``num_programs`` programs over [first_block, ⌈N/block⌉).

    A state with a layout (a resumed one) is refused, as ``accumulate`` would, unless the
    run is its layout's: a projection never runs on a saved state of another run.
    """
    return sum(sum(left) for left in self.blocks_left(
        num_samples=num_samples, first_block=first_block, block_size=block_size,
        num_programs=num_programs))

  def blocks_left(self, *, num_samples, first_block: int, block_size: int,
                  num_programs: int = 1) -> list[list[int]]:
    """``blocks_remaining``'s terms: per program, per direction (``DIRECTIONS`` order), the
    blocks ``accumulate`` still computes; ``num_samples`` an int or a mapping direction → N
    (``Layout.of``). The same refusal of another run's state."""
    layout = Layout.of(num_samples, block_size, first_block, num_programs)
    if self.layout is not None:
      self._check_layout(layout)
    blocks = [max(0, layout.blocks_in(i) - first_block) for i in range(len(DIRECTIONS))]
    left = []
    for program in range(num_programs):
      if program < self.program:
        left.append([0] * len(blocks))
      elif program > self.program:
        left.append(list(blocks))
      else:
        done = [blocks[i] if i < self.direction else 0 for i in range(len(blocks))]
        if self.direction < len(blocks) and self.block is not None:
          done[self.direction] = min(blocks[self.direction], max(0, self.block - first_block))
        left.append([b - d for b, d in zip(blocks, done)])
    return left

  def expected_counts(self, layout: Layout) -> tuple[dict, dict]:
    """Per direction, the (K,) samples and blocks the totals hold at this position."""
    num_candidates = self.totals.num_candidates
    per_program = num_candidates // layout.num_programs
    samples, blocks = _zero_counts(num_candidates), _zero_counts(num_candidates)
    for index, d in enumerate(DIRECTIONS):
      for c in range(num_candidates):
        count_samples, count_blocks = self._cell(layout, c // per_program, index)[:2]
        samples[d][c], blocks[d][c] = count_samples, count_blocks
    return samples, blocks

  def _cell(self, layout: Layout, program: int, direction: int) -> tuple[int, int, str]:
    """(samples, blocks, why) of one program's candidates in one direction at this position."""
    n, size = layout.samples_in(direction), layout.block_size
    here = (program, direction)
    if here < (self.program, self.direction):
      return n, layout.blocks_in(direction), f'a finished direction holds all N = {n} samples'
    if here == (self.program, self.direction) and self.block is not None:
      return (min(self.block * size, n), self.block,
              f'the direction in progress holds the samples of the blocks before '
              f'{self.where}.block = {self.block} (blocks of {size}, N = {n})')
    first = min(layout.first_block, layout.blocks_in(direction))
    return (first * size, first,
            'a direction not started holds no samples' if first == 0 else
            f'a direction not started holds the {first} blocks before the run\'s first')

  def check(self, layout: Layout | None = None) -> None:
    """InputError naming the fields unless position, counts and ``layout`` (default: the
    state's own) agree (see the class docstring); nothing to check without a layout."""
    problem = self._problem(layout or self.layout)
    if problem is not None:
      raise InputError(problem)

  def _problem(self, layout: Layout | None) -> str | None:
    if layout is None:
      return None
    w, totals = self.where, self.totals
    num_candidates = totals.num_candidates
    if num_candidates % layout.num_programs:
      return (f'{w}.layout.num_programs = {layout.num_programs} does not split the '
              f'{num_candidates} candidates of {w}.totals')
    if self.program > layout.num_programs or (self.program == layout.num_programs and (
        self.direction, self.block) != (0, None)):
      return (f'{w}.program = {self.program} ({w}.direction {self.direction}, {w}.block '
              f'{self.block}) is past the end of this run\'s {layout.num_programs} program(s)')
    if self.block is not None and not layout.first_block <= self.block <= layout.total_blocks:
      return (f'{w}.block = {self.block} is outside this run\'s blocks '
              f'[{layout.first_block}, {layout.total_blocks}] ({layout.num_samples} samples per '
              f'direction in blocks of {layout.block_size})')
    if totals.samples is None:
      return f'{w}.totals.samples is missing'
    per_program = num_candidates // layout.num_programs
    position = (f'at {w}.program {self.program}, {w}.direction {self.direction} '
                f'({DIRECTIONS[self.direction]}), {w}.block {self.block}')
    for index, d in enumerate(DIRECTIONS):
      for c in range(num_candidates):
        samples, blocks, why = self._cell(layout, c // per_program, index)
        for name, got, want in (('samples', totals.samples[d][c], samples),
                                ('blocks', totals.blocks[d][c], blocks)):
          if got != want:
            return (f'{w}.totals.{name}.{d}[{c}] = {got} does not match the position: '
                    f'{position} it must be {want} ({why}); {w}.block or the counts were '
                    'changed')
        if totals.counts is not None and int(totals.counts[d][c].sum()) != totals.samples[d][c]:
          return (f'{w}.totals.counts.{d}[{c}] sums to {int(totals.counts[d][c].sum())}, not '
                  f'the {totals.samples[d][c]} samples of {w}.totals.samples.{d}[{c}]')
        if totals.samples[d][c] == 0 and (np.any(totals.sums[d][c] != 0)
                                          or np.any(totals.squares[d][c] != 0)):
          return (f'{w}.totals.sums.{d}[{c}] is not 0, but {w}.totals.samples.{d}[{c}] '
                  'counts no samples')
    return None

  def _refusal(self, message: str) -> Exception:
    return InputError(message) if self.refuse is None else self.refuse(message)

  def _check_layout(self, layout: Layout) -> None:
    if self.layout != layout:
      raise self._refusal(f'{self.where}.layout differs from this run\'s: '
                          f'{self.layout.differences(layout, self.where + ".layout")}')

  def enter(self, layout: Layout, *, program_index: int, candidate_offset: int,
            program_candidates: int) -> None:
    """Checks the state against the run that goes on from it (``accumulate``'s first step,
    before any compute) and adopts ``layout``.

    A state with a layout (a saved one, or a fresh one given its run's) must have the run's;
    a fresh state without one takes it. Totals without counts (the sums of an earlier
    estimate a fresh state extends) count the blocks before ``layout.first_block``. Then
    position and counts must agree (``check``).
    """
    num_candidates = self.totals.num_candidates
    if (num_candidates != layout.num_programs * program_candidates
        or candidate_offset != program_index * program_candidates):
      raise InputError(f'program {program_index} of {layout.num_programs} with '
                       f'{program_candidates} candidates from candidate {candidate_offset} '
                       f'does not split the {num_candidates} candidates of the state in order')
    if self.layout is not None:
      self._check_layout(layout)
    if self.totals.samples is None:
      if (self.program, self.direction, self.block) != (0, 0, None):
        raise self._refusal(f'{self.where}.totals has no sample counts, and is not at the '
                            'start of a run')
      first = layout.first_block
      self.totals.samples = {d: np.full(num_candidates, first * layout.block_size, np.int64)
                             for d in DIRECTIONS}
      self.totals.blocks = {d: np.full(num_candidates, first, np.int64) for d in DIRECTIONS}
    problem = self._problem(layout)
    if problem is not None:
      raise self._refusal(problem)
    self.layout = layout

  def to_dict(self) -> dict:
    """JSON-ready (floats round-trip exactly through ``json``)."""
    return {'totals': self.totals.to_dict(), 'program': self.program,
            'direction': self.direction, 'block': self.block,
            'layout': None if self.layout is None else self.layout.to_dict()}

  @classmethod
  def from_dict(cls, record: dict, like: 'StreamState | None' = None, *,
                where: str = 'stream') -> 'StreamState':
    """The state of ``to_dict``'s form, checked: types, ranges, the shapes of ``like``'s
    totals and its layout (if it has one), and position ↔ counts ↔ layout (``check``), so
    a block out of range or a count that disagrees is refused here, before any compute.
    InputError naming the field (``where``.name)."""
    if not isinstance(record, dict):
      raise InputError(f'{where} must be a mapping, got {type(record).__name__}')
    for name in ('totals', 'program', 'direction', 'block', 'layout'):
      if name not in record:
        raise InputError(f'{where}.{name} is missing')

    def index(name, value, top=None):
      if (isinstance(value, bool) or not isinstance(value, int) or value < 0
          or (top is not None and value > top)):
        allowed = '>= 0' if top is None else f'in [0, {top}]'
        raise InputError(f'{where}.{name} must be an integer {allowed}, got {value!r:.40}')
      return value

    block = record['block']
    state = cls(BlockSums.from_dict(record['totals'], None if like is None else like.totals,
                                    where=f'{where}.totals', counted=True),
                index('program', record['program']),
                index('direction', record['direction'], len(DIRECTIONS) - 1),
                None if block is None else index('block', block),
                Layout.from_dict(record['layout'], f'{where}.layout'), where=where)
    if like is not None and like.layout is not None and like.layout != state.layout:
      raise InputError(f'{where}.layout differs from this run\'s: '
                       f'{state.layout.differences(like.layout, where + ".layout")}')
    state.check()
    return state


def loss_block_sums(program, stream_key, ids, direction: str, *, first_block: int,
                    block_size: int, num_samples: int, epsilons: jax.Array, edges: jax.Array,
                    mesh: SampleMesh) -> list[tuple]:
  """Per candidate, the host (sums, squares, counts) of the blocks ``ids`` (from
  ``first_block``) of a loss program: its losses reduced by ``block_reductions``."""
  remaining = jnp.asarray(num_samples - first_block * block_size, jnp.int64)
  return [mesh.to_host(block_reductions(losses, remaining, epsilons, edges, mesh=mesh.mesh))
          for losses in program(stream_key, ids, direction)]


def accumulate(stream_key_of: Callable[[str], jax.Array], program, state: StreamState, *,
               program_index: int = 0, num_programs: int = 1, candidate_offset: int = 0,
               num_samples: int | dict,
               first_block: int, block_size: int, blocks_per_call: int | None,
               mesh: SampleMesh, epsilons: np.ndarray, edges: tuple[float, ...] | None,
               progress: Callable[[int, int], None] | None = None,
               after_call: Callable[[StreamState], None] | None = None) -> None:
  """Runs ``program`` over blocks [first_block, ⌈num_samples/block_size⌉) of both directions.

  Adds each call's per-block sums to ``state.totals`` (candidate ``candidate_offset + j`` for
  the program's j-th candidate), in block order, and advances ``state`` past the call. A
  resumed ``state`` skips what it has done: programs before ``state.program``, directions
  before ``state.direction``, blocks before ``state.block`` — after ``state.enter`` checked,
  before any compute, that its layout is this run's and its position agrees with its sample
  counts (a refusal names the field, and the checkpoint file of a saved state). Samples past
  ``num_samples`` in the last block are masked out; each call's samples and blocks are
  counted with its sums.

  Args:
    stream_key_of: the key of a direction's stream (purpose and direction folded in).
    num_samples: N per direction, or a mapping direction → N when they differ (``Layout.of``;
      a direction of 0 samples computes nothing).
    program: a loss program (``sampling.OneSigma`` or ``SharedDraws``), or one that reduces
      its own blocks (``block_sums``: ``program32.Program32``, ``tilted.TiltedDraws``).
    state: the run's state (fresh or resumed); updated in place.
    program_index: this program's index in the run, of ``num_programs``.
    blocks_per_call: blocks per device per call (performance only; default keeps ~2²⁰
      output entries per device).
    progress: called as ``progress(samples_done, samples_total)`` after each call, counting
      the samples of all ``num_programs`` programs and both directions.
    after_call: called with ``state`` after each call (a checkpoint hook).
  """
  layout = Layout.of(num_samples, block_size, first_block, num_programs)
  state.enter(layout, program_index=program_index, candidate_offset=candidate_offset,
              program_candidates=program.num_candidates)
  if program_index < state.program:
    return  # finished before the run was resumed
  if program_index > state.program:
    raise InputError(f'program {program_index} cannot run before program {state.program} of '
                     'the state is finished')
  if blocks_per_call is None:
    blocks_per_call = sampling.default_blocks_per_call(block_size, program.kernel.iterations)
  eps_device = jnp.asarray(epsilons)
  edges_device = jnp.asarray(edges if edges is not None else [0.0])
  # Where this program starts: a resumed state's direction and block, else the beginning.
  resume_direction, resume_block = state.direction, state.block
  for index, direction in enumerate(DIRECTIONS):
    if index < resume_direction:
      continue
    start = resume_block if index == resume_direction and resume_block is not None else first_block
    stream_key = stream_key_of(direction)
    n = layout.samples_in(index)
    for block, used, ids in mesh.calls(start, layout.blocks_in(index), blocks_per_call):
      if hasattr(program, 'block_sums'):  # it reduces its own blocks (32-bit, tilted)
        reduced = program.block_sums(stream_key, block, ids.shape[0], direction, n, epsilons,
                                     edges)
      else:
        reduced = loss_block_sums(program, stream_key, ids, direction, first_block=block,
                                  block_size=block_size, num_samples=n,
                                  epsilons=eps_device, edges=edges_device, mesh=mesh)
      samples = min((block + used) * block_size, n) - block * block_size
      for j, (block_sums, block_squares, block_counts, *block_margins) in enumerate(reduced):
        state.totals.add(direction, candidate_offset + j, block_sums[:used],
                         block_squares[:used], None if edges is None else block_counts[:used],
                         block_margins[0][:used] if block_margins else None, samples=samples)
      state.program, state.direction, state.block = program_index, index, block + used
      if after_call is not None:
        after_call(state)
      if progress is not None:
        per_program = sum(layout.samples_in(i) for i in range(len(DIRECTIONS)))
        done = (program_index * per_program + sum(layout.samples_in(i) for i in range(index))
                + min((block + used) * block_size, n))
        progress(done, num_programs * per_program)
    state.program, state.direction, state.block = program_index, index + 1, None
  state.program, state.direction, state.block = program_index + 1, 0, None
