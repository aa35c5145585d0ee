"""Public Monte Carlo entry points: keys → x → y = C·x + σ·z → privacy loss.

``sample_privacy_losses`` draws outputs of the dominating pair and evaluates
their privacy loss (two compiled stages per chunk, the draws and the loss);
``privacy_loss`` evaluates given
outputs. Both return float64 ``(num_samples,)`` arrays whatever the global
``jax_enable_x64`` flag (they run under a scoped x64 context) and whatever the
kernel ``dtype``.

Directions (Dong & Ganesh (2026) §2.5, footnote 1): ``"remove"``: y ~ P (example
present), loss ln P(y)/Q(y); ``"add"``: y ~ Q = N(0, σ²I), loss ln Q(y)/P(y) = −ln P(y)/Q(y).
Both feed the same estimator δ̂(ε) = mean of (1 − e^{ε − loss})₊.

Sample g of a direction's stream uses the key
fold_in(fold_in(fold_in(fold_in(key, "sampling"), direction), g >> 20), g & (2²⁰ − 1))
(``keys.py``), so losses are
bitwise identical whatever the number of blocks per call or devices (see
``default_block_size``). Work is done block by block, sharded over all local devices,
so memory does not grow with ``num_samples``.

References:
  Andy Dong and Arun Ganesh, "Privacy Amplification for BandMF via b-Min-Sep Subsampling",
  arXiv:2602.09338 (v2): §2.5 (both directions: footnote 1), Fig. 1, Algorithms 1/2, §3, Eq. (1),
  Theorem 5.1, App. B, App. D (Corollary D.2) (docs/references.md).
"""

from __future__ import annotations

import dataclasses
import functools
from typing import NamedTuple

import jax
import jax.numpy as jnp
import numpy as np
from jax import lax

from jaxacct import _validate
from jaxacct._precision import kernel_dtype, scoped_x64
from jaxacct.conventions import DIRECTIONS, Purpose, Stream, signed_loss
from jaxacct.mechanism import MatrixMechanism, check_mechanism
from jaxacct.montecarlo.engine import keys as keys_lib
from jaxacct import options
from jaxacct.montecarlo.engine import kernels, noise, program32
from jaxacct.montecarlo.engine import sharding as sharding_lib
from jaxacct.montecarlo.engine.kernels import SchemeKernel
from jaxacct.errors import InputError, InputTypeError

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
  """Blocks per device per call keeping ~2²⁰ output entries per device (performance only), and
  never fewer than ``options.MIN_BLOCKS_PER_CALL`` (one block per call rounds differently)."""
  return max(options.MIN_BLOCKS_PER_CALL, _MAX_CHUNK_ELEMENTS // (block_size * iterations))


def capped_blocks_per_call(num_blocks: int, block_size: int, iterations: int,
                           num_devices: int) -> int:
  """Blocks per device per call of a run of ``num_blocks`` blocks: the default (~2²⁰ outputs
  per device), or where the run needs fewer per device, that need rounded up to a power of two
  (few call shapes compile), never below ``options.MIN_BLOCKS_PER_CALL``. Performance only: a
  block's samples do not depend on the call that computes it."""
  needed = -(-num_blocks // num_devices)
  default = default_blocks_per_call(block_size, iterations)
  return min(default, max(options.MIN_BLOCKS_PER_CALL, 1 << (needed - 1).bit_length()))


def traced_params(mechanism: MatrixMechanism, kernel: SchemeKernel):
  """(scheme parameters, σ, strategy view) as device values: traced, so new values do not
  recompile.

  The view is the strategy's ``kernel_view`` for the scheme (the band of a
  ``BandedToeplitz``; C, column norms and cross-term bounds of a dense
  ``LowerTriangular``, computed once on the host; Dong & Ganesh (2026) App. B).
  """
  view = mechanism.matrix.kernel_view(mechanism.scheme)
  return (kernel.params(mechanism),
          jnp.asarray(mechanism.noise_multiplier, jnp.float64),
          jax.tree_util.tree_map(lambda c: jnp.asarray(c, jnp.float64), view))


def draw_noise(stream_key, indices, kernel: SchemeKernel):
  """(sample keys, z) of the samples with global ``indices`` (N,): z (N, n) in the kernel's
  dtype from each sample's ``Stream.NOISE`` sub-stream (the noise of every proposal)."""
  sample_keys = keys_lib.keys_for_indices(stream_key, indices)
  noise_keys = jax.vmap(lambda k: jax.random.fold_in(k, int(Stream.NOISE)))(sample_keys)
  return sample_keys, noise.standard_normals_per_key(noise_keys, kernel.iterations,
                                                     jnp.dtype(kernel.dtype))


def draw_components(stream_key, indices, params, view, kernel: SchemeKernel, direction: str):
  """(C·x, z, info) of the samples with global ``indices`` (N,), batch-major (N, n) each.

  C·x is ``None`` when the direction has no signal (``add`` without truncation: y ~ Q);
  ``info`` is the kernel's ``Info`` (the other examples' batch sizes under truncation, an
  empty ``NoInfo`` otherwise). The draws do not depend on σ, so y(σ) = C·x + σ·z for
  several σ shares them (common random numbers).
  """
  dtype = jnp.dtype(kernel.dtype)
  sample_keys, z = draw_noise(stream_key, indices, kernel)
  if not kernel.has_signal(direction):
    return None, z, kernel.empty_info()
  mean, info = kernel.sample_mean(sample_keys, params, view, direction)
  return mean.astype(dtype), z, info


def draw_outputs(stream_key, indices, params, sigma, view, kernel: SchemeKernel,
                 direction: str):
  """Outputs (y, info) of the samples with global ``indices`` (N,) of a stream, batch-major.

  y = C·x + σ·z with x from the scheme's participation sampler (``remove``) or
  y = σ·z (``add``); under truncation x is x^P or x^Q of Dong & Ganesh (2026)
  Corollary D.2 and ``info`` holds the released batch sizes of the other examples.
  Un-jitted device kernel.
  """
  mean, z, info = draw_components(stream_key, indices, params, view, kernel, direction)
  y = sigma.astype(z.dtype) * z
  return (y if mean is None else y + mean), info


def log_ratio(kernel: SchemeKernel, y, params, sigma, view, info, direction: str):
  """ln P(y)/Q(y) of batch-major outputs y (N, n): d = Cᵀy through the view, then the
  kernel's recursion (for an inexact view the bound conservative for ``direction``)."""
  return kernel.log_ratio(view.transpose_products(y), params, sigma, view, info, direction)


@functools.partial(jax.jit, static_argnames=('kernel', 'direction', 'block_size', 'mesh'))
def block_outputs(block_ids, stream_key, params, sigma, view, *, kernel: SchemeKernel,
                  direction: str, block_size: int, mesh):
  """Outputs (y, info) of whole blocks of a stream: (k, block_size, n) …, sharded over ``mesh``."""
  def one_device(ids, stream_key, params, sigma, view):
    def one_block(block):
      indices = block * block_size + jnp.arange(block_size, dtype=jnp.int64)
      return draw_outputs(stream_key, indices, params, sigma, view, kernel, direction)
    return lax.map(one_block, ids)
  return sharding_lib.per_device(one_device, mesh, 1)(block_ids, stream_key, params, sigma, view)


@functools.partial(jax.jit, static_argnames=('kernel', 'direction', 'mesh'))
def block_losses(outputs, params, sigma, view, *, kernel: SchemeKernel, direction: str, mesh):
  """float64 losses of whole blocks of outputs (y, info), (k, block_size, n) → (k, block_size).

  ``remove``: ln P/Q; ``add``: ln Q/P = −ln P/Q (Dong & Ganesh (2026) §2.5, footnote 1).
  """
  def one_device(outputs, params, sigma, view):
    def one_block(block):
      y_block, info_block = block
      return log_ratio(kernel, y_block, params, sigma, view, info_block,
                       direction).astype(jnp.float64)
    return lax.map(one_block, outputs)
  return signed_loss(sharding_lib.per_device(one_device, mesh, 1)(outputs, params, sigma, view), direction)


@dataclasses.dataclass(frozen=True)
class OneSigma:
  """Loss program of one mechanism: y = C·x + σ·z, then ln P/Q (two compiled stages)."""

  mechanism: MatrixMechanism
  kernel: SchemeKernel
  block_size: int
  mesh: sharding_lib.SampleMesh

  precision = 'float64'

  @property
  def num_candidates(self) -> int:
    return 1

  def outputs_and_losses(self, stream_key, ids, direction: str):
    """((y, info), losses) of the blocks ``ids``: (k, block_size, n) …, (k, block_size).

    On XLA:CPU the single fused program measured ~2× slower than the same work split at y
    (benchmarks/RESULTS.md).
    """
    params, sigma, view = self._traced
    outputs = block_outputs(ids, stream_key, params, sigma, view, kernel=self.kernel,
                                     direction=direction, block_size=self.block_size,
                                     mesh=self.mesh.mesh)
    return outputs, block_losses(outputs, params, sigma, view, kernel=self.kernel,
                                          direction=direction, mesh=self.mesh.mesh)

  def __call__(self, stream_key, ids, direction: str) -> list[jax.Array]:
    return [self.outputs_and_losses(stream_key, ids, direction)[1]]

  @functools.cached_property
  def _traced(self):
    return traced_params(self.mechanism, self.kernel)


@functools.partial(jax.jit, static_argnames=('kernel', 'direction'))
def loss_of_outputs(y, info, params, sigma, view, *, kernel: SchemeKernel, direction: str):
  """Jitted ln P(y)/Q(y) in float64 for batch-major outputs y (N, n) and their ``info``.

  ``direction`` picks the App. B bound for an inexact view (ignored otherwise).
  """
  return log_ratio(kernel, y.astype(kernel.dtype), params, sigma, view, info,
                   direction).astype(jnp.float64)


@scoped_x64
def sample_privacy_losses(key, mechanism: MatrixMechanism, num_samples: int, direction: str,
                          dtype=jnp.float64) -> jax.Array:
  """Draws outputs of the dominating pair and returns their privacy losses.

  For ``direction="remove"`` y = C·x + σ·z with x drawn by the scheme's
  participation chain (Dong & Ganesh (2026) Fig. 1, Algorithms 1/2; §3 for cyclic
  Poisson and balls-in-bins), loss ln P(y)/Q(y); for ``"add"`` y = σ·z, loss
  ln Q(y)/P(y). Losses are exact (Dong & Ganesh (2026) Eq. (1), Theorem 5.1 and its
  warm-start corollary; mode sums for balls-in-bins; per-phase products for cyclic
  Poisson).

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
  stream_key, kernel, num_samples = _prepare(key, mechanism, num_samples, direction, dtype)
  return losses_of_stream(stream_key, mechanism, kernel, num_samples, direction)


def _prepare(key, mechanism, num_samples, direction, dtype):
  """Validates the sampler arguments; returns (stream key, kernel, num_samples)."""
  check_mechanism(mechanism)
  num_samples = keys_lib.check_num_samples(num_samples)
  _validate.one_of('direction', direction, DIRECTIONS)
  resolved = kernel_dtype(dtype)
  base = keys_lib.purpose_key(keys_lib.canonicalize_key(key), Purpose.SAMPLING)
  kernel = kernels.kernel_for(mechanism, resolved)
  program32.check_float32_kernel(mechanism, kernel)
  return keys_lib.direction_key(base, direction), kernel, num_samples


@scoped_x64
def losses_of_stream(stream_key, mechanism: MatrixMechanism, kernel: SchemeKernel,
                     num_samples: int, direction: str) -> jax.Array:
  """Losses of samples 0 … num_samples − 1 of one (purpose, direction) stream, float64."""
  return _collect(stream_key, mechanism, kernel, num_samples, direction, keep_info=False)[0]


def _collect(stream_key, mechanism, kernel, num_samples, direction, *, keep_info: bool):
  """(losses, r or None) of samples 0 … num_samples − 1 of a stream (all local devices)."""
  block_size = default_block_size(kernel.iterations)
  # The plain samplers return arrays to this process: its own devices only.
  mesh = sharding_lib.SampleMesh.over(jax.local_devices())
  precision32 = program32.serves(mechanism, kernel)
  program = (program32.Program32(mechanism, kernel, np.asarray([mechanism.noise_multiplier]),
                                 block_size, mesh)
             if precision32 else OneSigma(mechanism, kernel, block_size, mesh))
  losses_parts, rest_parts = [], []
  num_blocks = -(-num_samples // block_size)
  per_call = capped_blocks_per_call(num_blocks, block_size, kernel.iterations, mesh.size)
  for block, used, ids in mesh.calls(0, num_blocks, per_call):
    if precision32:
      outputs, block_loss, _ = program.losses_and_margins(stream_key, block, ids.shape[0],
                                                          direction)
      block_loss = block_loss[:, 0].astype(jnp.float64)
    else:
      outputs, block_loss = program.outputs_and_losses(stream_key, ids, direction)
    losses_parts.append(block_loss[:used].reshape(-1))
    if keep_info:
      rest_parts.append(kernel.batch_sizes_of(outputs[1])[:used].reshape(-1, kernel.iterations))
  rest = jnp.concatenate(rest_parts)[:num_samples] if keep_info else None
  return jnp.concatenate(losses_parts)[:num_samples], rest


class TruncatedSamples(NamedTuple):
  """Privacy losses of a truncated scheme with the released batch sizes they were conditioned on.

  Attributes:
    losses: float64 ``(num_samples,)``.
    rest_batch_sizes: int32 ``(num_samples, iterations)``: r_i, the number of
      *other* examples sampled in round i before truncation.
  """

  losses: jax.Array
  rest_batch_sizes: jax.Array


@scoped_x64
def sample_truncated_privacy_losses(key, mechanism: MatrixMechanism, num_samples: int,
                                    direction: str, dtype=jnp.float64) -> TruncatedSamples:
  """``sample_privacy_losses`` for a truncated scheme, also returning the drawn batch sizes r.

  Under truncation the adversary of Dong & Ganesh (2026) App. D sees r (the
  other examples' pre-truncation batch sizes; its law is the same under D and D′),
  so every loss is conditioned on its own r: r_i ~ Binomial(k_i, p) from the
  pool of examples not barred by the last b − 1 rounds (truncated-away ones
  included); the sensitive example joins by the b-min-sep chain and survives a
  truncated round w.p. B/(r_i + 1); y = C·x^P + σz (``remove``) or C·x^Q + σz
  (``add``, **not** pure noise), Corollary D.2. Same draws and losses as
  ``sample_privacy_losses`` with the same key.

  Args and Raises: as ``sample_privacy_losses``; the scheme must truncate.

  Returns:
    ``TruncatedSamples(losses, rest_batch_sizes)``.

  References:
    Dong & Ganesh, arXiv 2602.09338v2, App. D (Lemma D.1, Corollary D.2).
  """
  stream_key, kernel, num_samples = _prepare(key, mechanism, num_samples, direction, dtype)
  if not kernel.releases_batch_sizes:
    raise InputError(
        f'sample_truncated_privacy_losses needs a truncated scheme (truncated_batch_size < '
        f'dataset_size), got {mechanism.scheme!r}; use sample_privacy_losses')
  losses_, rest = _collect(stream_key, mechanism, kernel, num_samples, direction, keep_info=True)
  return TruncatedSamples(losses_, rest)


@scoped_x64
def sample_outputs(key, mechanism: MatrixMechanism, num_samples: int, direction: str,
                   dtype=jnp.float64) -> tuple[jax.Array, jax.Array | None]:
  """The outputs (y, r) that ``sample_privacy_losses`` evaluates, batch-major (num_samples, n).

  Same keys, same draws: ``privacy_loss(mechanism, y, direction,
  rest_batch_sizes=r)`` equals ``sample_privacy_losses(key, …)`` up to float
  round-off. r is ``None`` for untruncated schemes. Meant for inspection and
  tests; the fused sampler never materialises y on the host.

  Args and Raises: as ``sample_privacy_losses``.

  Returns:
    y of shape ``(num_samples, iterations)`` in the kernel ``dtype``, and r
    (int32, same shape) or ``None``.
  """
  stream_key, kernel, num_samples = _prepare(key, mechanism, num_samples, direction, dtype)
  block_size = default_block_size(kernel.iterations)
  one_device = sharding_lib.SampleMesh.over(jax.local_devices()[:1])
  if program32.serves(mechanism, kernel):
    program = program32.Program32(mechanism, kernel, np.asarray([mechanism.noise_multiplier]),
                                  block_size, one_device)
    outputs_of = lambda block, ids: program.losses_and_margins(  # noqa: E731
        stream_key, block, ids.shape[0], direction)[0]
  else:
    params, sigma, view = traced_params(mechanism, kernel)
    outputs_of = lambda block, ids: block_outputs(  # noqa: E731
        ids, stream_key, params, sigma, view, kernel=kernel, direction=direction,
        block_size=block_size, mesh=one_device.mesh)
  # The calls of ``sample_privacy_losses`` on one device (its draw programs, compiled once).
  num_blocks = -(-num_samples // block_size)
  per_call = capped_blocks_per_call(num_blocks, block_size, kernel.iterations, 1)
  ys, rests = [], []
  for block, used, ids in one_device.calls(0, num_blocks, per_call):
    y, info = outputs_of(block, ids)
    ys.append(y[:used].reshape(-1, kernel.iterations))
    rest = kernel.batch_sizes_of(info)
    rests.append(None if rest is None else rest[:used].reshape(-1, kernel.iterations))
  rest = None if rests[0] is None else jnp.concatenate(rests)[:num_samples]
  return jnp.concatenate(ys)[:num_samples], rest


def _check_outputs(name: str, value, shape: tuple[int, int], integer: bool) -> jax.Array:
  array = jnp.asarray(value)
  kind_ok = (jnp.issubdtype(array.dtype, jnp.integer) if integer else
             jnp.issubdtype(array.dtype, jnp.floating) or jnp.issubdtype(array.dtype, jnp.integer))
  if not kind_ok:
    raise InputTypeError(f'{name} must be an {"integer" if integer else "real"} array, '
                    f'got dtype {array.dtype}')
  if array.ndim != 2 or array.shape[1] != shape[1] or array.shape[0] < 1 or (
      shape[0] and array.shape[0] != shape[0]):
    rows = shape[0] or 'N >= 1'
    raise InputError(f'{name} must have shape (num_samples, iterations) = ({rows}, {shape[1]}), '
                     f'got {tuple(array.shape)}')
  return array


@scoped_x64
def privacy_loss(mechanism: MatrixMechanism, y, direction: str, *,
                 rest_batch_sizes=None) -> jax.Array:
  """Exact privacy loss of given outputs y of the mechanism's dominating pair.

  ``direction="remove"``: ln P(y)/Q(y) (for y ~ P); ``"add"``: ln Q(y)/P(y)
  (for y ~ Q). Evaluated in float64 whatever the dtype of ``y`` (float32
  inputs are upcast, never the reverse). For a dense ``LowerTriangular`` C it
  is the Dong & Ganesh (2026) App. B bound (jaxacct's lower bound for ``add``)
  that is conservative for ``direction`` (≥ the exact loss), not the exact loss.

  Args:
    mechanism: the mechanism.
    y: outputs, shape ``(num_samples, iterations)`` (batch-major).
    direction: ``"remove"`` or ``"add"``.
    rest_batch_sizes: required exactly for truncated schemes: the other
      examples' pre-truncation batch sizes r, integers of the same shape as
      ``y`` (part of the released output, Dong & Ganesh (2026) App. D).

  Returns:
    float64 array of shape ``(num_samples,)``.

  References:
    Dong & Ganesh, arXiv 2602.09338v2, Eq. (1), Theorem 5.1, §2.2–2.3, App. D.
  """
  check_mechanism(mechanism)
  _validate.one_of('direction', direction, DIRECTIONS)
  n = mechanism.iterations
  kernel = kernels.kernel_for(mechanism, np.dtype(np.float64))
  y = _check_outputs('y', y, (0, n), integer=False).astype(jnp.float64)
  truncated = kernel.releases_batch_sizes
  if truncated != (rest_batch_sizes is not None):
    raise InputError(
        f'rest_batch_sizes is required for truncated schemes and only for them; '
        f'{type(mechanism.scheme).__name__} ' + ('truncates: pass the batch sizes r drawn with y'
                                                  if truncated else
                                                  'is not truncated, pass rest_batch_sizes=None'))
  rest = None
  if truncated:
    rest = _check_outputs('rest_batch_sizes', rest_batch_sizes, y.shape, integer=True)
    others = mechanism.scheme.dataset_size - 1
    if bool(jnp.any((rest < 0) | (rest > others))):
      raise InputError(f'rest_batch_sizes must be in [0, dataset_size - 1 = {others}]')
    rest = rest.astype(jnp.int32)
  params, sigma, view = traced_params(mechanism, kernel)
  num_samples = y.shape[0]
  chunk = _chunk_size(n, num_samples)
  parts = []
  for start in range(0, num_samples, chunk):
    block = y[start:start + chunk]
    rest_block = None if rest is None else rest[start:start + chunk]
    count = block.shape[0]
    if count < chunk:  # pad to the compiled shape; padded rows are discarded
      block = jnp.pad(block, ((0, chunk - count), (0, 0)))
      rest_block = None if rest is None else jnp.pad(rest_block, ((0, chunk - count), (0, 0)))
    parts.append(loss_of_outputs(block, kernel.info_from_batch_sizes(rest_block), params, sigma,
                                 view, kernel=kernel, direction=direction)[:count])
  return signed_loss(parts[0] if len(parts) == 1 else jnp.concatenate(parts), direction)
