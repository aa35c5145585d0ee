"""The 32-bit device program (``precision="float32"``): accelerator-speed verification, sound.

TPUs have no float64 hardware and GPUs evaluate float64 transcendentals at a fraction of
their float32 rate, so the program that verifies a guarantee runs here with uint32 random
words, float32 arithmetic, int32 indices and counters and float32 block sums: **no 64-bit
type anywhere on device** (every program below is traced with 64-bit types disabled, and a
request for one is an error, not a silent truncation; ``tests/montecarlo/test_program32.py``
reads the lowered text). The host keeps float64, block-ordered sums as for float64.

Same draws: a sample's key is the float64 program's (``keys.block_keys32`` from host
coordinates), its words are the same 64-bit words as (hi, lo) pairs (``keys.word_pairs``),
its participation is the same pattern (exact integer thresholds, ``kernels/_common.py``,
``kernels/bminsep.py``), so both precisions evaluate the same real-valued output y; results
are bitwise identical for any device count, chunking, process count and resume, because
block shapes are fixed and every sample depends only on (key, purpose, direction, block,
index).

Soundness: every loss L̂ comes with a certified margin η ≥ |L̂ − L(y)| (``margin.py``, where
the proof is), every hockey-stick term is evaluated at ε − η and every block sum is rounded
up, so the float64 total is ≥ the sum over the same draws of the exact terms: δ̂₃₂ ≥ δ̂ of
the exact losses, and Algorithm 5 (Dong & Ganesh (2026) App. A) is sound in float32.

Served: Poisson, b-min-sep cold and warm start, cyclic Poisson (both partitions), balls-in-bins
(overlapping modes included), multi-attribution b-min-sep and truncated Poisson / b-min-sep
(App. D: exact 32-bit binomial batch sizes, ``binomial32.py``, whose certified law error is
added to every term: ``SchemeKernel.law_error``), with ``BandedToeplitz``, and the
``LowerTriangular`` views (App. B bounds; balls-in-bins exact), whose dense products the margin
bounds by γ_n. Other kernels are refused in float32 with the reason (``refusal``).

Same draws: the truncated schemes' batch sizes come from the 32-bit sampler's own inversion, so
they are drawn from the same law as float64's but not bit for bit the same values.

Where the code runs: ``block_components``, ``block_losses``, ``block_losses_for_sigmas`` and
``block_sums`` are jitted device programs; the program classes and ``host_inputs`` are host code.

References:
  Andy Dong and Arun Ganesh, "Privacy Amplification for BandMF via b-Min-Sep Subsampling",
  arXiv:2602.09338 (v2): App. A (Algorithm 5), App. B (r-min-sep bounds), App. D (truncation)
  (docs/references.md).
"""

from __future__ import annotations

import contextlib
import dataclasses
import functools
import warnings

import jax
import jax.numpy as jnp
import numpy as np
from jax import lax

from jaxacct.conventions import Stream, signed_loss
from jaxacct.montecarlo.engine import keys as keys_lib
from jaxacct.montecarlo.engine import margin, noise
from jaxacct.montecarlo.engine.kernels import SchemeKernel, _common
from jaxacct.montecarlo.engine.sharding import SampleMesh, compiled_memory, per_device
from jaxacct.errors import InputError

PRECISIONS = ('float64', 'float32')
MAX_ITERATIONS = 1 << 19


def refusal(mechanism, kernel: SchemeKernel) -> str | None:
  """None when the 32-bit program serves ``mechanism`` (every registered family does), else the
  reason."""
  del kernel  # every kernel has the 32-bit program; the limit is the run's length
  if mechanism.iterations >= MAX_ITERATIONS:
    return (f'the 32-bit program needs iterations < {MAX_ITERATIONS} (its participation draft is '
            f'exact to within two rounds below that), got {mechanism.iterations}')
  return None


def check_float32_kernel(mechanism, kernel: SchemeKernel) -> None:
  """``InputError`` when a float32 kernel's mechanism is one the 32-bit program does not serve
  (float32 is that program only: there is no float32 arithmetic without its margin)."""
  if kernel.dtype != 'float32':
    return
  reason = refusal(mechanism, kernel)
  if reason is not None:
    raise InputError(f'float32 cannot serve this mechanism: {reason}')


def serves(mechanism, kernel: SchemeKernel) -> bool:
  """True for a float32 kernel whose mechanism the 32-bit program serves."""
  return kernel.dtype == 'float32' and refusal(mechanism, kernel) is None


@contextlib.contextmanager
def scope():
  """64-bit types off while 32-bit programs are traced and run; a 64-bit request is an error."""
  with jax.enable_x64(False), warnings.catch_warnings():
    warnings.filterwarnings('error', message='Explicitly requested dtype')
    yield


def host_inputs(mechanism, kernel: SchemeKernel, sigmas) -> tuple:
  """Host: (params, view, σ̂ (K,), κ (K,)) as 32-bit arrays.

  σ̂ = σ rounded to nearest (|σ̂ − σ| ≤ uσ, as the margin assumes) and κ ≥ 1/(2σ²) rounded up.
  """
  params = kernel.params(mechanism)
  view = jax.tree_util.tree_map(lambda c: np.asarray(c, np.float32),
                                mechanism.matrix.kernel_view(mechanism.scheme))
  sigmas = np.asarray(sigmas, np.float64).reshape(-1)
  kappas = margin.round_up32(1.0 / (2.0 * sigmas**2) * (1.0 + 2.0**-40))
  return params, view, sigmas.astype(np.float32), kappas


def _window_max(values: jax.Array, view) -> jax.Array:
  """|values| per round (N, n) when each d_i sees one output (``one_output_per_product``),
  else the per-sample maximum (N, 1): the inputs of the margin's bound on d (proof step 4)."""
  if view.one_output_per_product:
    return jnp.abs(values)
  return jnp.max(jnp.abs(values), axis=1, keepdims=True)


@functools.partial(jax.jit, static_argnames=('kernel', 'direction', 'block_size', 'mesh'))
def block_components(coordinates, stream_key, params, view, *, kernel: SchemeKernel,
                     direction: str, block_size: int, mesh):
  """(C·x or None, z, info) of whole blocks, (k, block_size, n) each, from their key coordinates."""
  def one_device(coordinates, stream_key, params, view):
    def one_block(block_coordinates):
      keys = keys_lib.block_keys32(stream_key, block_coordinates, block_size)
      z = noise.standard_normals_per_key32(_common.fold(keys, Stream.NOISE), kernel.iterations)
      if not kernel.has_signal(direction):
        return None, z, kernel.empty_info()
      mean, info = kernel.sample_mean(keys, params, view, direction)
      return mean, z, info
    return lax.map(one_block, coordinates)
  return per_device(one_device, mesh, 1)(coordinates, stream_key, params, view)


@functools.partial(jax.jit, static_argnames=('kernel', 'direction', 'mesh'))
def block_losses(mean, z, info, sigma, kappa, params, view, *, kernel: SchemeKernel,
                 direction: str, mesh):
  """(y, losses, margins) of whole blocks for one σ: y = C·x + σ̂z, then (L̂, η) of its direction."""
  def one_device(mean, z, info, sigma, kappa, params, view):
    def one_block(draws):
      mean_block, z_block, info_block = draws
      y = sigma * z_block
      y = y if mean_block is None else mean_block + y
      error = margin.one_sigma_product_error(_window_max(y, view), sigma, params.margin)
      losses, margins = kernel.log_ratio_with_margin(view.transpose_products(y), params, sigma,
                                                     kappa, view, info_block, direction, error)
      return y, losses, margins
    return lax.map(one_block, (mean, z, info))
  y, losses, margins = per_device(one_device, mesh, 3)(mean, z, info, sigma, kappa, params, view)
  return y, signed_loss(losses, direction), margins


@functools.partial(jax.jit, static_argnames=('kernel', 'direction', 'mesh'))
def block_losses_for_sigmas(mean, z, info, sigmas, kappas, params, view, *, kernel: SchemeKernel,
                            direction: str, mesh):
  """(losses, margins), each (k, K, block_size), of K noise multipliers sharing one draw.

  One pass of sliding products per block (d_m = Cᵀ(C·x), d_z = Cᵀz), then the kernel's
  ``log_ratios_for_sigmas_with_margin`` (d = fl(d_m + fl(σ̂·d_z)) per σ).
  """
  def one_device(mean, z, info, sigmas, kappas, params, view):
    def one_block(draws):
      mean_block, z_block, info_block = draws
      noise_products = view.transpose_products(z_block)
      mean_products = None if mean_block is None else view.transpose_products(mean_block)
      z_abs = _window_max(z_block, view)
      magnitudes = (z_abs, _window_max(noise_products, view),
                    jnp.zeros_like(z_abs) if mean_products is None
                    else _window_max(mean_products, view))
      return kernel.log_ratios_for_sigmas_with_margin(
          mean_products, noise_products, params, sigmas, kappas, view, info_block, direction,
          magnitudes)
    return lax.map(one_block, (mean, z, info))
  losses, margins = per_device(one_device, mesh, 3)(mean, z, info, sigmas, kappas, params, view)
  return signed_loss(losses, direction), margins


@functools.partial(jax.jit, static_argnames=('mesh',))
def block_sums(losses, margins, valid_counts, epsilons, edges, *, mesh):
  """Per-block float32 sums of t̂ = (1 − e^{ε − (L̂ + η′)})₊ and t̂², int32 histogram counts
  and the largest margin η of the block's samples.

  ``losses``/``margins`` (k, block_size); ``valid_counts`` (k,) int32: samples of each block
  inside the run (the rest add 0); ``epsilons`` rounded down on the host.
  """
  block_size = losses.shape[1]

  def one_device(losses, margins, valid_counts, epsilons, edges):
    def one_block(args):
      block_losses_, block_margins, count = args
      valid = jnp.arange(block_size, dtype=jnp.int32) < count
      sums, squares = margin.hockey_stick_sums32(epsilons, block_losses_, block_margins, valid)
      # Binned at L̂ + η′ ≥ L(y) against edges rounded down: each loss is counted at an
      # upper edge ≥ its exact value, as the float64 histogram is (conservative).
      bins = jnp.searchsorted(edges, margin.upper_losses32(block_losses_, block_margins),
                              side='left')
      one_hot = (bins[:, None] == jnp.arange(edges.shape[0] + 1)[None, :]) & valid[:, None]
      return (sums, squares, jnp.sum(one_hot, axis=0, dtype=jnp.int32),
              jnp.max(jnp.where(valid, block_margins, 0.0)))
    return lax.map(one_block, (losses, margins, valid_counts))
  return per_device(one_device, mesh, 3)(losses, margins, valid_counts, epsilons, edges)


@dataclasses.dataclass(frozen=True)
class Program32:
  """A 32-bit loss program of K noise multipliers sharing one draw per sample (K = 1: one σ).

  ``block_sums`` is what the stream driver (``stream.accumulate``) calls: host float64 sums
  per candidate, rounded up by ``margin.block_sum_factor``.
  """

  mechanism: object
  kernel: SchemeKernel
  sigmas: np.ndarray
  block_size: int
  mesh: SampleMesh

  precision = 'float32'

  @property
  def num_candidates(self) -> int:
    return int(np.size(self.sigmas))

  @functools.cached_property
  def _inputs(self):
    return host_inputs(self.mechanism, self.kernel, self.sigmas)

  def _coordinates(self, first_block: int, num_blocks: int) -> jax.Array:
    ids = np.arange(first_block, first_block + num_blocks, dtype=np.int64)
    return self.mesh.place(keys_lib.block_coordinates(ids, self.block_size))

  def _components(self, stream_key, first_block: int, num_blocks: int, direction: str):
    params, view, _, _ = self._inputs
    return block_components(self._coordinates(first_block, num_blocks), stream_key, params, view,
                            kernel=self.kernel, direction=direction,
                            block_size=self.block_size, mesh=self.mesh.mesh)

  def losses_and_margins(self, stream_key, first_block: int, num_blocks: int, direction: str):
    """(outputs (y, info) or None, losses, margins) of blocks [first, first + num_blocks):
    y only for one σ; losses and margins (k, K, block_size) float32."""
    params, view, sigmas, kappas = self._inputs
    with scope():
      mean, z, info = self._components(stream_key, first_block, num_blocks, direction)
      if self.num_candidates == 1:
        y, losses, margins = block_losses(mean, z, info, sigmas[0], kappas[0], params, view,
                                          kernel=self.kernel, direction=direction,
                                          mesh=self.mesh.mesh)
        return (y, info), losses[:, None], margins[:, None]
      losses, margins = block_losses_for_sigmas(mean, z, info, sigmas, kappas, params, view,
                                                kernel=self.kernel, direction=direction,
                                                mesh=self.mesh.mesh)
      return None, losses, margins

  def draws_memory(self, stream_key, ids, direction: str) -> int | None:
    """Bytes per device of the draw pass of one call (XLA's memory analysis), or None."""
    params, view, _, _ = self._inputs
    with scope():
      return compiled_memory(block_components.lower(
          self._coordinates(0, ids.shape[0]), stream_key, params, view, kernel=self.kernel,
          direction=direction, block_size=self.block_size, mesh=self.mesh.mesh))

  def block_sums(self, stream_key, first_block: int, num_blocks: int, direction: str,
                 num_samples: int, epsilons: np.ndarray, edges) -> list[tuple]:
    """Per candidate, host (sums, squares, counts, margins) of the blocks: (k, E) float64 sums
    and squares rounded up, (k, bins) counts, (k,) the largest η of each block."""
    _, losses, margins = self.losses_and_margins(stream_key, first_block, num_blocks, direction)
    starts = (first_block + np.arange(num_blocks, dtype=np.int64)) * self.block_size
    valid = np.clip(num_samples - starts, 0, self.block_size).astype(np.int32)
    eps = margin.round_down32(epsilons)
    bins = margin.round_down32([0.0] if edges is None else edges)
    factor = margin.block_sum_factor(self.block_size)
    # The samplers' certified law error per sample, added to every term (margin step 10).
    law_error = self.kernel.law_error(self._inputs[0])
    results = []
    with scope():
      for j in range(self.num_candidates):
        sums, squares, counts, largest = self.mesh.to_host(block_sums(
            losses[:, j], margins[:, j], self.mesh.place(valid), eps, bins, mesh=self.mesh.mesh))
        sums = sums.astype(np.float64) * factor
        if law_error:
          sums = sums + valid[:, None].astype(np.float64) * law_error * (1.0 + 2.0**-50)
        results.append((sums, squares.astype(np.float64) * factor * factor,
                        counts.astype(np.int64), largest.astype(np.float64)))
    return results
