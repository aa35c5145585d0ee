"""Public Monte Carlo entry points: keys → x → y = C·x + σ·z → privacy loss.

``sample_privacy_losses`` draws outputs of the dominating pair and evaluates
their privacy loss (two compiled stages per chunk, the draws and the loss);
``privacy_loss`` evaluates given
outputs. Both return float64 ``(num_samples,)`` arrays whatever the global
``jax_enable_x64`` flag (they run under a scoped x64 context) and whatever the
kernel ``dtype``.

Directions (spec 000 §0): ``"remove"``: y ~ P (example present), loss
ln P(y)/Q(y); ``"add"``: y ~ Q = N(0, σ²I), loss ln Q(y)/P(y) = −ln P(y)/Q(y).
Both feed the same estimator δ̂(ε) = mean of (1 − e^{ε − loss})₊.

Sample g of a direction's stream uses the key
fold_in(fold_in(fold_in(fold_in(key, "sampling"), direction), g >> 20), g & (2²⁰ − 1))
(``keys.py``), so losses are
bitwise identical whatever the number of blocks per call or devices (see
``default_block_size``). Work is done block by block, sharded over all local devices,
so memory does not grow with ``num_samples``.
"""

from __future__ import annotations

import functools

import jax
import jax.numpy as jnp
import numpy as np
from jax import lax
from jax.sharding import PartitionSpec

from jaxacct import _validate
from jaxacct._precision import kernel_dtype, scoped_x64
from jaxacct.matrices import BandedToeplitz
from jaxacct.mechanism import DIRECTIONS, MatrixMechanism
from jaxacct.montecarlo import keys as keys_lib
from jaxacct.montecarlo import losses, noise, participation
from jaxacct.montecarlo import sharding as sharding_lib
from jaxacct.montecarlo._spec import KernelSpec, kernel_spec, sampling_prob

# Samples per block. Every compiled kernel evaluates whole blocks of one fixed
# shape (lax.map over blocks), because XLA's floating-point code for an array
# depends on its shape (vectorisation, FMA contraction): fixed block shapes make
# every sample's loss bitwise independent of how many blocks a call holds or
# how many devices share them. ~1,000 samples per block amortise the per-round
# cost of the scans at n = 1000; at n = 7200 blocks of 128 keep the (block, n)
# arrays in cache (benchmarks/RESULTS.md).
_BLOCK_ELEMENTS = 1 << 20
_MAX_BLOCK = 1024
_MIN_BLOCK = 64


def default_block_size(iterations: int) -> int:
  """Samples per block for ``iterations`` rounds: a power of two in [64, 1024], ~2²⁰/n."""
  fitting = max(1, _BLOCK_ELEMENTS // iterations)
  return max(_MIN_BLOCK, min(_MAX_BLOCK, 1 << (fitting.bit_length() - 1)))
# privacy_loss on given y pads to power-of-two chunks of at most this many entries.
_MAX_CHUNK_ELEMENTS = 1 << 20
_MIN_CHUNK = 8


def _chunk_size(iterations: int, num_samples: int) -> int:
  cap = max(_MIN_CHUNK, _MAX_CHUNK_ELEMENTS // iterations)
  cap = 1 << (cap.bit_length() - 1)
  wanted = 1 << max(0, num_samples - 1).bit_length()  # next power of two: few shapes compile
  return max(_MIN_CHUNK, min(cap, wanted))


def default_blocks_per_call(block_size: int, iterations: int) -> int:
  """Blocks per device per call keeping ~2²⁰ output entries per device (performance only)."""
  return max(1, _MAX_CHUNK_ELEMENTS // (block_size * iterations))


def traced_params(mechanism: MatrixMechanism) -> tuple[jax.Array, jax.Array, BandedToeplitz]:
  """(p, σ, matrix) as float64 device values: traced, so new values do not recompile."""
  return (jnp.asarray(sampling_prob(mechanism), jnp.float64),
          jnp.asarray(mechanism.noise_multiplier, jnp.float64),
          jax.tree_util.tree_map(lambda c: jnp.asarray(c, jnp.float64), mechanism.matrix))


def draw_components(stream_key, indices, p, matrix, spec: KernelSpec, direction: str):
  """(C·x, z) of the samples with global ``indices`` (N,), batch-major (N, n) each.

  C·x is ``None`` for ``add`` (y ~ Q has no signal). The draws do not depend
  on σ, so y(σ) = C·x + σ·z for several σ shares them (common random numbers).
  """
  dtype = jnp.dtype(spec.dtype)
  sample_keys = keys_lib.keys_for_indices(stream_key, indices)
  noise_keys = jax.vmap(lambda k: jax.random.fold_in(k, 2))(sample_keys)
  z = jax.vmap(lambda k: noise.standard_normal(k, (spec.iterations,), dtype))(noise_keys)
  if direction == 'add':
    return None, z
  return participation.sample_mean(spec, sample_keys, p, matrix).astype(dtype), z


def draw_outputs(stream_key, indices, p, sigma, matrix, spec: KernelSpec,
                 direction: str) -> jax.Array:
  """Outputs y of the samples with global ``indices`` (N,) of a stream, batch-major (N, n).

  y = C·x + σ·z for ``remove`` (x from the scheme's participation sampler), y = σ·z
  for ``add``. Un-jitted device kernel.
  """
  mean, z = draw_components(stream_key, indices, p, matrix, spec, direction)
  y = sigma.astype(z.dtype) * z
  return y if mean is None else y + mean


def per_device(fn, mesh, num_sharded: int):
  """shard_map ``fn`` over ``mesh``: the first ``num_sharded`` args split by blocks, others replicated."""
  def specs(count):
    return tuple([PartitionSpec(sharding_lib.SAMPLE_AXIS)] * num_sharded + [PartitionSpec()] * count)
  def wrapped(*args):
    return jax.shard_map(fn, mesh=mesh, in_specs=specs(len(args) - num_sharded),
                         out_specs=PartitionSpec(sharding_lib.SAMPLE_AXIS),
                         check_vma=False)(*args)
  return wrapped


@functools.partial(jax.jit, static_argnames=('spec', 'direction', 'block_size', 'mesh'))
def block_outputs(block_ids, stream_key, p, sigma, matrix, *, spec: KernelSpec, direction: str,
                  block_size: int, mesh):
  """Outputs of whole blocks of a stream: (k, block_size, n), blocks sharded over ``mesh``."""
  def one_device(ids, stream_key, p, sigma, matrix):
    def one_block(block):
      indices = block * block_size + jnp.arange(block_size, dtype=jnp.int64)
      return draw_outputs(stream_key, indices, p, sigma, matrix, spec, direction)
    return lax.map(one_block, ids)
  return per_device(one_device, mesh, 1)(block_ids, stream_key, p, sigma, matrix)


@functools.partial(jax.jit, static_argnames=('spec', 'direction', 'mesh'))
def block_losses(y, p, sigma, matrix, *, spec: KernelSpec, direction: str, mesh):
  """float64 losses of whole blocks of outputs (k, block_size, n) → (k, block_size).

  ``remove``: ln P/Q; ``add``: ln Q/P = −ln P/Q (spec 000 §0).
  """
  def one_device(y, p, sigma, matrix):
    def one_block(y_block):
      return losses.log_ratio(spec, y_block, p, sigma, matrix).astype(jnp.float64)
    return lax.map(one_block, y)
  loss = per_device(one_device, mesh, 1)(y, p, sigma, matrix)
  return loss if direction == 'remove' else -loss


def stream_blocks(stream_key, mechanism: MatrixMechanism, spec: KernelSpec, direction: str, *,
                  first_block: int, end_block: int, block_size: int,
                  blocks_per_call: int | None = None, mesh=None):
  """Yields ``(first_block_of_call, used_blocks, losses)`` over blocks [first_block, end_block).

  Host driver shared by ``sample_privacy_losses`` and the estimator: each call
  evaluates ``blocks_per_call`` blocks on every device of ``mesh`` in two
  compiled stages (draws, then losses). On XLA:CPU the single fused program
  measured ~2× slower than the same work split at y (benchmarks/RESULTS.md).
  ``losses`` is a device array (k, block_size); only its first ``used_blocks``
  rows belong to the requested range.
  """
  mesh = sharding_lib.sample_mesh() if mesh is None else mesh
  if blocks_per_call is None:
    blocks_per_call = default_blocks_per_call(block_size, spec.iterations)
  call_blocks = blocks_per_call * mesh.devices.size
  shard = sharding_lib.sample_sharding(mesh)
  p, sigma, matrix = traced_params(mechanism)
  for block in range(first_block, end_block, call_blocks):
    ids = jax.device_put(np.arange(block, block + call_blocks, dtype=np.int64), shard)
    y = block_outputs(ids, stream_key, p, sigma, matrix, spec=spec, direction=direction,
                      block_size=block_size, mesh=mesh)
    yield block, min(call_blocks, end_block - block), block_losses(
        y, p, sigma, matrix, spec=spec, direction=direction, mesh=mesh)


@functools.partial(jax.jit, static_argnames=('spec',))
def loss_of_outputs(y, p, sigma, matrix, *, spec: KernelSpec):
  """Jitted ln P(y)/Q(y) in float64 for batch-major outputs y (N, n)."""
  return losses.log_ratio(spec, y.astype(spec.dtype), p, sigma, matrix).astype(jnp.float64)


def _check_mechanism(mechanism) -> None:
  if not isinstance(mechanism, MatrixMechanism):
    raise TypeError(f'mechanism must be a jaxacct.MatrixMechanism, got {mechanism!r}')


@scoped_x64
def sample_privacy_losses(key, mechanism: MatrixMechanism, num_samples: int, direction: str,
                          dtype=jnp.float64) -> jax.Array:
  """Draws outputs of the dominating pair and returns their privacy losses.

  For ``direction="remove"`` y = C·x + σ·z with x drawn by the scheme's
  participation chain (seed 000 Fig. 1, Algorithms 1/2; §2.2–2.3), loss
  ln P(y)/Q(y); for ``"add"`` y = σ·z, loss ln Q(y)/P(y). Losses are exact
  (seed 000 Eq. (1), Theorem 5.1 and its warm-start corollary; mode sums for
  balls-in-bins; per-phase products for cyclic Poisson).

  Args:
    key: a typed JAX key (``jax.random.key``); legacy ``uint32[2]`` keys are converted.
    mechanism: the mechanism to account.
    num_samples: number of samples N ≥ 1.
    direction: ``"remove"`` or ``"add"``.
    dtype: kernel arithmetic, ``jnp.float64`` (default) or ``jnp.float32``
      (faster; noise keeps exact tails; see ``benchmarks/RESULTS.md`` for its
      measured deviation from float64). The result is float64 either way.

  Returns:
    float64 array of shape ``(num_samples,)``.

  Raises:
    ValueError / TypeError: bad ``num_samples``, ``direction``, ``dtype`` or key.

  References:
    Dong & Ganesh, "Privacy Amplification for BandMF via b-Min-Sep
    Subsampling", arXiv 2602.09338v2, §3–5.
  """
  stream_key, spec, num_samples = _prepare(key, mechanism, num_samples, direction, dtype)
  return losses_of_stream(stream_key, mechanism, spec, num_samples, direction)


def _prepare(key, mechanism, num_samples, direction, dtype):
  """Validates the sampler arguments; returns (stream key, spec, num_samples)."""
  _check_mechanism(mechanism)
  num_samples = keys_lib.check_num_samples(num_samples)
  _validate.one_of('direction', direction, DIRECTIONS)
  resolved = kernel_dtype(dtype)
  base = keys_lib.purpose_key(keys_lib.canonicalize_key(key), 'sampling')
  return keys_lib.direction_key(base, direction), kernel_spec(mechanism, resolved), num_samples


@scoped_x64
def losses_of_stream(stream_key, mechanism: MatrixMechanism, spec: KernelSpec, num_samples: int,
                     direction: str) -> jax.Array:
  """Losses of samples 0 … num_samples − 1 of one (purpose, direction) stream, float64."""
  block_size = default_block_size(spec.iterations)
  parts = [losses_[:used].reshape(-1) for _, used, losses_ in stream_blocks(
      stream_key, mechanism, spec, direction, first_block=0,
      end_block=-(-num_samples // block_size), block_size=block_size)]
  return jnp.concatenate(parts)[:num_samples]


@scoped_x64
def sample_outputs(key, mechanism: MatrixMechanism, num_samples: int, direction: str,
                   dtype=jnp.float64) -> jax.Array:
  """The outputs y that ``sample_privacy_losses`` evaluates, batch-major (num_samples, n).

  Same keys, same draws: ``privacy_loss(mechanism, sample_outputs(key, …), direction)``
  equals ``sample_privacy_losses(key, …)`` up to float round-off. Meant for
  inspection and tests; the fused sampler never materialises y on the host.

  Args and Raises: as ``sample_privacy_losses``.

  Returns:
    array of shape ``(num_samples, iterations)`` in the kernel ``dtype``.
  """
  stream_key, spec, num_samples = _prepare(key, mechanism, num_samples, direction, dtype)
  p, sigma, matrix = traced_params(mechanism)
  mesh = sharding_lib.sample_mesh(jax.local_devices()[:1])
  block_size = default_block_size(spec.iterations)
  parts = []
  for block in range(-(-num_samples // block_size)):
    ids = jnp.asarray([block], jnp.int64)
    parts.append(block_outputs(ids, stream_key, p, sigma, matrix, spec=spec, direction=direction,
                               block_size=block_size, mesh=mesh)[0])
  return jnp.concatenate(parts)[:num_samples]


@scoped_x64
def privacy_loss(mechanism: MatrixMechanism, y, direction: str, *,
                 rest_batch_sizes=None) -> jax.Array:
  """Exact privacy loss of given outputs y of the mechanism's dominating pair.

  ``direction="remove"``: ln P(y)/Q(y) (for y ~ P); ``"add"``: ln Q(y)/P(y)
  (for y ~ Q). Evaluated in float64 whatever the dtype of ``y`` (float32
  inputs are upcast, never the reverse).

  Args:
    mechanism: the mechanism.
    y: outputs, shape ``(num_samples, iterations)`` (batch-major).
    direction: ``"remove"`` or ``"add"``.
    rest_batch_sizes: the other examples' pre-truncation batch sizes, only for
      truncated schemes; must be ``None`` for the schemes of this module.

  Returns:
    float64 array of shape ``(num_samples,)``.

  References:
    Dong & Ganesh, arXiv 2602.09338v2, Eq. (1), Theorem 5.1, §2.2–2.3.
  """
  _check_mechanism(mechanism)
  _validate.one_of('direction', direction, DIRECTIONS)
  if rest_batch_sizes is not None:
    raise ValueError(
        f'rest_batch_sizes is only for truncated schemes; {type(mechanism.scheme).__name__} '
        'is not truncated, pass rest_batch_sizes=None')
  y = jnp.asarray(y)
  if not jnp.issubdtype(y.dtype, jnp.floating) and not jnp.issubdtype(y.dtype, jnp.integer):
    raise TypeError(f'y must be a real array, got dtype {y.dtype}')
  y = y.astype(jnp.float64)
  n = mechanism.iterations
  if y.ndim != 2 or y.shape[1] != n or y.shape[0] < 1:
    raise ValueError(
        f'y must have shape (num_samples, iterations) = (N >= 1, {n}), got {tuple(y.shape)}')
  spec = kernel_spec(mechanism, np.dtype(np.float64))
  p, sigma, matrix = traced_params(mechanism)
  num_samples = y.shape[0]
  chunk = _chunk_size(n, num_samples)
  parts = []
  for start in range(0, num_samples, chunk):
    block = y[start:start + chunk]
    count = block.shape[0]
    if count < chunk:  # pad to the compiled shape; padded rows are discarded
      block = jnp.pad(block, ((0, chunk - count), (0, 0)))
    parts.append(loss_of_outputs(block, p, sigma, matrix, spec=spec)[:count])
  loss = parts[0] if len(parts) == 1 else jnp.concatenate(parts)
  return loss if direction == 'remove' else -loss
