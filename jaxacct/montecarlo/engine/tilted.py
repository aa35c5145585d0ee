"""The tilted remove-direction draws: y from the law tilted by the privacy loss, terms X/M ≤ 1.

For the remove-direction pair P = Σ_x p_x N(Cx, σ²I), Q = N(0, σ²I) (Dong & Ganesh (2026) §2.4),
L = ln P/Q and an integer order α ≥ 2, the tilted law Q_α ∝ P^α Q^{1−α} is the mixture
Σ_τ π_α(τ) N(C·Σ_j x_j, σ²I) over α-tuples τ = (x_1 … x_α) of participation patterns
(docs/proofs/tilting.md (a)). With the weight w = Z_α e^{−(α−1)L} = dP/dQ_α,

    δ_remove(ε) = E_{Q_α}[X],   X = w·(1 − e^{ε−L})₊ ≤ M(α, ε) = Z_α e^{−(α−1)ε}(α−1)^{α−1}/α^α

surely (tilting.md (b); M is the Rényi → (ε, δ) conversion of Canonne, Kamath & Steinke (2020),
arXiv:2004.00010, Prop. 12). This module is the device side: it is given the tuples (a host
function, ``TiltedDraws.tuples``), ln Z_α and ln M per ε, and knows nothing of how they were
computed (``montecarlo/evr/tilted.py`` builds them from ``deterministic.tilt_bound`` and
``deterministic.minsep_chain``).

**Draws.** Block b of a (purpose, direction) stream draws its ``block_size`` tuples, in sample
order, from NumPy's Philox generator keyed by ``keys.host_block_seeds`` (the block's key under
``keys.host_stream_key``: level-1 code ``Purpose.TILTED_TUPLES``), so a sample's tuple depends
only on (key, purpose, direction, block, index in the block) — not on blocks per call, devices
or resume. Its noise z is the sample's ``Stream.NOISE`` sub-stream of the run's own stream
(``sampling.draw_noise``, as every proposal's), y = C·Σ_j x_j + σz with C·x_j the strategy
view's ``separated_mean`` of each chain's pattern (each pattern is separated by the scheme; their
sum need not be, so the α means are summed, not the patterns), and L is the plain program's loss
stage unchanged (``sampling.block_losses``).

**Terms.** X/M is evaluated in log space, ln(X/M) = ln Z_α − (α−1)L + ln(1 − e^{ε−L})₊ − ln M,
and every term is compared with 1 on device: a block whose largest ln(X/M) exceeds its rounding
allowance (``ROUNDING_ULPS``) makes the run raise ``TermAboveBoundError`` before its sums are
added — never clipped. In exact arithmetic ln Z_α cancels and X/M ≤ 1 for any L; the check
guards the weights' arithmetic and any ln Z_α or ln M given that disagree (a too-small ln Z_α
for M is the tests' injected fault). The sums are of X/M ∈ [0, 1] (Fact 4.2 then applies to
them as to the plain terms); the caller multiplies by M.

**Add direction.** No exact tilt of Q is known for these mixtures: ``TiltedDraws`` draws the add
direction by plain sampling, the plain program's calls and sums exactly (bitwise those of
``sampling.OneSigma``).

Where the code runs: the y, loss and reduction programs are JAX (device, sharded over blocks);
the tuple draws and the checks of the block maxima are NumPy (host). Under ``jax.distributed``
every process draws the whole call's tuples (the same on each, from the same seeds) and places
its own devices' rows: correct, and redundant host work to remove when it matters.

References:
  Andy Dong and Arun Ganesh, "Privacy Amplification for BandMF via b-Min-Sep Subsampling",
  arXiv:2602.09338 (v2): §2.4, §2.5 (docs/references.md).
  Clément L. Canonne, Gautam Kamath and Thomas Steinke, "The Discrete Gaussian for Differential
  Privacy", arXiv:2004.00010: Prop. 12 (docs/references.md).
"""

from __future__ import annotations

import dataclasses
import functools
from typing import Callable

import jax
import jax.numpy as jnp
import numpy as np
from jax import lax

from jaxacct.mechanism import MatrixMechanism
from jaxacct.montecarlo.engine import keys as keys_lib
from jaxacct.montecarlo.engine import sampling, sharding, stream
from jaxacct.montecarlo.engine.kernels import SchemeKernel
from jaxacct.montecarlo.engine.sharding import SampleMesh

# Rounding allowance of ln(X/M), in units of u = 2⁻⁵³ times the magnitudes it is formed from
# (|ln Z| + (α−1)(|L| + |ε|) + |ln(1 − e^{ε−L})| + |ln M| + 1). It is computed with 4 additions
# (each off by ≤ u of its result, hence of that sum), a product (α−1)L (≤ u·(α−1)|L|) and
# ln(−expm1(ε − L)): ε − L is rounded once (relative u), expm1 and ln are accurate to a few
# ulps, so the log is off by ≤ ~4u + u·|ln(·)|; ln M on the host is ≤ 4u·(its terms). That is
# ≤ 16u of the magnitudes in all: 64u leaves a factor 4 for the libraries' transcendentals.
ROUNDING_ULPS = 64.0
_U = 2.0**-53


class TermAboveBoundError(RuntimeError):
  """A tilted term X exceeded its support bound M(α, ε) beyond rounding: the run is refused
  (terms are never clipped). Attributes: ``block`` (global block id), ``epsilon``, and
  ``scaled`` (the term's X/M)."""

  def __init__(self, block: int, epsilon: float, scaled: float):
    self.block, self.epsilon, self.scaled = block, epsilon, scaled
    super().__init__(
        f'a tilted term of block {block} is X/M = {scaled!r} at ε = {epsilon!r}, above its '
        'support bound M(α, ε) = Z_α e^{−(α−1)ε}(α−1)^{α−1}/α^α beyond float64 rounding: '
        'ln Z_α, ln M or the weights are wrong; the estimate is refused (terms are never '
        'clipped)')

  def __reduce__(self):
    return type(self), (self.block, self.epsilon, self.scaled)


def scaled_terms(epsilons: jax.Array, losses: jax.Array, log_z, log_support: jax.Array,
                 order) -> tuple[jax.Array, jax.Array]:
  """(X/M, excess) for every (ε, L), shape (E, N): X/M = exp(ln Z_α − (α−1)L +
  ln(1 − e^{ε−L})₊ − ln M(α, ε)) (0 where L ≤ ε), and ln(X/M) minus its rounding allowance
  (``ROUNDING_ULPS``; −inf where X = 0): a term is above its bound iff its excess is > 0 (or
  NaN). ``log_support`` (E,) is ln M per ε; ``log_z`` and ``order`` are scalars."""
  hockey = stream.hockey_stick_terms(epsilons, losses)          # (1 − e^{ε−L})₊, (E, N)
  tilt = order - 1.0
  positive = hockey > 0.0
  log_hockey = jnp.log(hockey)                                    # −inf where L ≤ ε
  log_scaled = (log_z - tilt * losses)[None, :] + log_hockey - log_support[:, None]
  magnitude = (jnp.abs(log_z) + tilt * (jnp.abs(losses)[None, :] + jnp.abs(epsilons)[:, None])
               + jnp.where(positive, -log_hockey, 0.0) + jnp.abs(log_support)[:, None] + 1.0)
  scaled = jnp.where(positive, jnp.exp(log_scaled), 0.0)
  excess = jnp.where(positive | jnp.isnan(hockey), log_scaled - ROUNDING_ULPS * _U * magnitude,
                     -jnp.inf)
  return scaled, excess


@functools.partial(jax.jit, static_argnames=('kernel', 'mesh'))
def _tilted_outputs(patterns, block_ids, stream_key, sigma, view, *, kernel: SchemeKernel, mesh):
  """Outputs (y, info) of whole blocks from their tuples ``patterns`` (k, block_size, α, n)."""
  block_size, order = patterns.shape[1], patterns.shape[2]
  dtype = jnp.dtype(kernel.dtype)

  def one_device(patterns, ids, stream_key, sigma, view):
    def one_block(args):
      block_patterns, block = args
      indices = block * block_size + jnp.arange(block_size, dtype=jnp.int64)
      _, z = sampling.draw_noise(stream_key, indices, kernel)
      mean = view.separated_mean(block_patterns[:, 0, :], dtype)
      for j in range(1, order):  # C·Σ_j x_j = Σ_j C·x_j (each x_j separated, their sum not)
        mean = mean + view.separated_mean(block_patterns[:, j, :], dtype)
      return sigma.astype(z.dtype) * z + mean.astype(dtype), kernel.empty_info()
    return lax.map(one_block, (patterns, ids))
  return sharding.per_device(one_device, mesh, 2)(patterns, block_ids, stream_key, sigma, view)


@functools.partial(jax.jit, static_argnames=('mesh',))
def tilted_reductions(losses, num_samples, epsilons, log_z, log_support, order, *, mesh):
  """Per block: float64 sums of X/M and of its squares (E,), and the largest excess and X/M of
  its samples (E,) (``scaled_terms``); samples with index ≥ ``num_samples`` are masked out. Each
  block is reduced by the same fixed-shape program (lax.map), so sums do not depend on k."""
  block_size = losses.shape[1]

  def one_device(losses, first_index, num_samples, epsilons, log_z, log_support, order):
    def one_block(args):
      block_losses, first = args
      valid = (first + jnp.arange(block_size, dtype=jnp.int64)) < num_samples
      scaled, excess = scaled_terms(epsilons, block_losses, log_z, log_support, order)
      scaled = jnp.where(valid[None, :], scaled, 0.0)
      excess = jnp.where(valid[None, :], excess, -jnp.inf)
      # NaN is kept by max: a NaN term fails the host check (``not excess <= 0``).
      return (jnp.sum(scaled, axis=1), jnp.sum(jnp.square(scaled), axis=1),
              jnp.max(excess, axis=1), jnp.max(scaled, axis=1))
    return lax.map(one_block, (losses, first_index))

  first_index = jnp.arange(losses.shape[0], dtype=jnp.int64) * block_size
  return sharding.per_device(one_device, mesh, 2)(losses, first_index, num_samples, epsilons,
                                                  log_z, log_support, order)


# The tuples one host pass may hold: bool entries (blocks · block_size · α · n).
HOST_PASS_BYTES = 1 << 28


def host_blocks_for(block_size: int, order: int, iterations: int) -> int:
  """Blocks per host pass of the tuple sampler: as many as ``HOST_PASS_BYTES`` of patterns
  hold (≥ 1). Performance only: a block's tuples do not depend on the pass that draws them."""
  return max(1, HOST_PASS_BYTES // (block_size * order * iterations))


@dataclasses.dataclass(frozen=True, eq=False)
class TiltedDraws:
  """Loss program of the tilted remove direction (plain add direction) for ``stream.accumulate``.

  It reduces its own blocks (``block_sums``): the remove direction's sums are of X/M ∈ [0, 1]
  (module docstring), the add direction's those of ``sampling.OneSigma`` (plain sampling).

  Attributes:
    mechanism, kernel, block_size, mesh: as ``sampling.OneSigma``'s (a float64 kernel).
    tuples: host, ``tuples(rngs, count)`` → bool (len(rngs), count, α, n): for each
      ``np.random.Generator`` of ``rngs``, ``count`` draws of π_α from it in sample order (the
      same draws whichever generators come with it).
    tuple_key: ``keys.host_stream_key`` of the run's purpose and the remove direction.
    order: α ≥ 2.
    log_z: ln Z_α of the weights (rounded up: a larger Z only raises every term).
    log_support: (E,) ln M(α, ε) per ε of the run's grid, the bound every term is checked
      against.
    observe: None, or called on the host with each call's largest X/M per block and ε
      (k, E), once checked (a diagnostic: how close the terms come to M).
    host_blocks: blocks whose tuples one host pass draws (``host_blocks_for``; performance
      only): the sampler's dominant cost is a forward pass shared by the blocks drawn together,
      so a pass draws ahead of the device calls and later calls take their blocks from it.
  """

  mechanism: MatrixMechanism
  kernel: SchemeKernel
  block_size: int
  mesh: SampleMesh
  tuples: Callable[[np.random.Generator, int], np.ndarray]
  tuple_key: jax.Array
  order: int
  log_z: float
  log_support: np.ndarray
  observe: Callable[[np.ndarray], None] | None = None
  host_blocks: int = 1
  # Blocks drawn ahead by the last host pass (block id → tuples): a cache, never state of the
  # estimate (a block's tuples depend only on its seed).
  _ahead: dict = dataclasses.field(default_factory=dict, init=False, repr=False)

  precision = 'float64'

  @property
  def num_candidates(self) -> int:
    return 1

  @functools.cached_property
  def plain(self) -> sampling.OneSigma:
    """The add direction's program (plain sampling)."""
    return sampling.OneSigma(self.mechanism, self.kernel, self.block_size, self.mesh)

  @functools.cached_property
  def _traced(self):
    return sampling.traced_params(self.mechanism, self.kernel)

  def draw_tuples(self, block_ids, last_block: int | None = None) -> np.ndarray:
    """Host: the tuples of blocks ``block_ids`` (consecutive), bool (k, block_size, α, n)
    (module docstring). A block not drawn ahead starts a host pass of whole calls from this
    one (calls of len(block_ids) blocks): as many as ``host_blocks`` holds (at least this
    call), never past the call that holds ``last_block`` − 1 (exclusive; default: this call's
    own blocks). Whole calls, so a later call never finds half its blocks drawn and starts a
    pass (a forward recomputation: a minute at the §7.4 shape) for the rest — the last call's
    padding blocks included."""
    ids = [int(b) for b in block_ids]
    if any(b not in self._ahead for b in ids):
      stop = ids[-1] + 1 if last_block is None else max(ids[-1] + 1, int(last_block))
      calls = min(max(1, self.host_blocks // len(ids)), -(-(stop - ids[0]) // len(ids)))
      ahead = np.arange(ids[0], ids[0] + calls * len(ids), dtype=np.int64)
      seeds = keys_lib.host_block_seeds(self.tuple_key, ahead)
      drawn = self.tuples([np.random.Generator(np.random.Philox(key=seed)) for seed in seeds],
                          self.block_size)
      self._ahead.clear()
      self._ahead.update(zip(ahead.tolist(), drawn))
    return np.stack([self._ahead.pop(b) for b in ids])

  def losses(self, stream_key, first_block: int, num_blocks: int,
             last_block: int | None = None) -> jax.Array:
    """Remove-direction losses L = ln P/Q of the tilted draws of blocks [first_block,
    first_block + num_blocks), (num_blocks, block_size) float64 on the mesh (``last_block``:
    as ``draw_tuples``)."""
    ids = np.arange(first_block, first_block + num_blocks, dtype=np.int64)
    patterns = self.mesh.place(self.draw_tuples(ids, last_block))
    params, sigma, view = self._traced
    outputs = _tilted_outputs(patterns, self.mesh.place(ids), stream_key, sigma, view,
                              kernel=self.kernel, mesh=self.mesh.mesh)
    return sampling.block_losses(outputs, params, sigma, view, kernel=self.kernel,
                                 direction='remove', mesh=self.mesh.mesh)

  def block_sums(self, stream_key, first_block: int, num_blocks: int, direction: str,
                 num_samples: int, epsilons: np.ndarray, edges) -> list[tuple]:
    """Host (sums, squares, counts, scaled maxima) of the blocks (``stream.accumulate``'s
    protocol): the remove direction's of X/M, checked against 1 (``TermAboveBoundError``), the
    add direction's plain (``stream.loss_block_sums``; no maxima)."""
    eps_device = jnp.asarray(epsilons)
    if direction != 'remove':
      ids = self.mesh.place(np.arange(first_block, first_block + num_blocks, dtype=np.int64))
      return stream.loss_block_sums(
          self.plain, stream_key, ids, direction, first_block=first_block,
          block_size=self.block_size, num_samples=num_samples, epsilons=eps_device,
          edges=jnp.asarray(edges if edges is not None else [0.0]), mesh=self.mesh)
    losses = self.losses(stream_key, first_block, num_blocks,
                         last_block=-(-num_samples // self.block_size))
    remaining = jnp.asarray(num_samples - first_block * self.block_size, jnp.int64)
    sums, squares, excess, largest = self.mesh.to_host(tilted_reductions(
        losses, remaining, eps_device, jnp.asarray(self.log_z, jnp.float64),
        jnp.asarray(self.log_support, jnp.float64), jnp.asarray(self.order, jnp.float64),
        mesh=self.mesh.mesh))
    check_block_maxima(excess, largest, first_block, epsilons)
    if self.observe is not None:
      self.observe(largest)
    counts = np.zeros((num_blocks, 1), np.int64)  # no histogram of tilted losses
    return [(sums, squares, counts)]


def check_block_maxima(excess: np.ndarray, largest: np.ndarray, first_block: int,
                       epsilons) -> None:
  """Raises ``TermAboveBoundError`` for the first block (k, E) whose largest excess is above
  0 or NaN (``scaled_terms``), naming its global id, ε and X/M."""
  bad = ~(np.asarray(excess) <= 0.0)
  if bad.any():
    row, column = np.argwhere(bad)[0]
    raise TermAboveBoundError(first_block + int(row), float(np.asarray(epsilons)[column]),
                              float(largest[row, column]))
