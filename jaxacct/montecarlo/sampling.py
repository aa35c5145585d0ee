"""Public Monte Carlo entry points: keys → x → y = C·x + σ·z → privacy loss.

``sample_privacy_losses`` draws outputs of the dominating pair and evaluates
their privacy loss in one jitted kernel; ``privacy_loss`` evaluates given
outputs. Both return float64 ``(num_samples,)`` arrays whatever the global
``jax_enable_x64`` flag (they run under a scoped x64 context) and whatever the
kernel ``dtype``.

Directions (spec 000 §0): ``"remove"``: y ~ P (example present), loss
ln P(y)/Q(y); ``"add"``: y ~ Q = N(0, σ²I), loss ln Q(y)/P(y) = −ln P(y)/Q(y).
Both feed the same estimator δ̂(ε) = mean of (1 − e^{ε − loss})₊.

Sample g of a direction's stream uses the key
fold_in(fold_in(fold_in(key, direction), g >> 20), g & (2²⁰ − 1)), so losses are
bitwise identical whatever the chunk size. Work is done in chunks of at most
``_MAX_CHUNK_ELEMENTS`` output entries so memory does not grow with
``num_samples``.
"""

from __future__ import annotations

import functools

import jax
import jax.numpy as jnp
import numpy as np

from jaxacct import _validate
from jaxacct._precision import kernel_dtype, scoped_x64
from jaxacct.matrices import BandedToeplitz
from jaxacct.mechanism import DIRECTIONS, MatrixMechanism
from jaxacct.montecarlo import keys as keys_lib
from jaxacct.montecarlo import losses, noise, participation
from jaxacct.montecarlo._spec import KernelSpec, kernel_spec, sampling_prob

# ~1,000 samples per call at n = 1000 measured best on CPU; larger n gets
# proportionally fewer samples so a chunk's (n, N) arrays stay ~10 MB.
_MAX_CHUNK_ELEMENTS = 1 << 20
_MIN_CHUNK = 8


def _chunk_size(iterations: int, num_samples: int) -> int:
  cap = max(_MIN_CHUNK, _MAX_CHUNK_ELEMENTS // iterations)
  cap = 1 << (cap.bit_length() - 1)
  wanted = 1 << max(0, num_samples - 1).bit_length()  # next power of two: few shapes compile
  return max(_MIN_CHUNK, min(cap, wanted))


def _traced_params(mechanism: MatrixMechanism) -> tuple[jax.Array, jax.Array, BandedToeplitz]:
  return (jnp.asarray(sampling_prob(mechanism), jnp.float64),
          jnp.asarray(mechanism.noise_multiplier, jnp.float64),
          jax.tree_util.tree_map(lambda c: jnp.asarray(c, jnp.float64), mechanism.matrix))


def _draw_outputs(stream_key, first_index, p, sigma, matrix, spec: KernelSpec, chunk: int,
                  direction: str) -> jax.Array:
  """Outputs y of samples first_index … first_index + chunk − 1, batch-major (chunk, n)."""
  dtype = jnp.dtype(spec.dtype)
  sample_keys = keys_lib.sample_keys(stream_key, first_index, chunk)
  noise_keys = jax.vmap(lambda k: jax.random.fold_in(k, 2))(sample_keys)
  z = jax.vmap(lambda k: noise.standard_normal(k, (spec.iterations,), dtype))(noise_keys)
  y = sigma.astype(dtype) * z
  if direction == 'remove':
    y = y + participation.sample_mean(spec, sample_keys, p, matrix).astype(dtype)
  return y


@functools.partial(jax.jit, static_argnames=('spec', 'chunk', 'direction'))
def _outputs_chunk(stream_key, first_index, p, sigma, matrix, *, spec: KernelSpec, chunk: int,
                   direction: str):
  return _draw_outputs(stream_key, first_index, p, sigma, matrix, spec, chunk, direction)


@functools.partial(jax.jit, static_argnames=('spec',))
def _loss_chunk(y, p, sigma, matrix, *, spec: KernelSpec):
  return losses.log_ratio(spec, y.astype(spec.dtype), p, sigma, matrix).astype(jnp.float64)


def _sample_chunk(stream_key, first_index, p, sigma, matrix, *, spec: KernelSpec, chunk: int,
                  direction: str):
  """Privacy losses of samples first_index … first_index + chunk − 1 of one stream.

  Two compiled programs, not one: on XLA:CPU the single fused program
  (draws + recursion) measured ~2× slower than the same work split at y
  (benchmarks/RESULTS.md); y of one chunk (~8 MB) stays on the device.
  """
  y = _outputs_chunk(stream_key, first_index, p, sigma, matrix, spec=spec, chunk=chunk,
                     direction=direction)
  loss = _loss_chunk(y, p, sigma, matrix, spec=spec)
  return loss if direction == 'remove' else -loss


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
  return _run_stream(_sample_chunk, key, mechanism, num_samples, direction, dtype)


def _run_stream(chunk_fn, key, mechanism, num_samples, direction, dtype) -> jax.Array:
  """Validates, derives the direction's stream and runs ``chunk_fn`` over fixed-size chunks."""
  _check_mechanism(mechanism)
  num_samples = _validate.integer_at_least('num_samples', num_samples, 1)
  _validate.one_of('direction', direction, DIRECTIONS)
  resolved = kernel_dtype(dtype)
  if num_samples > keys_lib.MAX_SAMPLE_INDEX:
    raise ValueError(f'num_samples must be <= 2**52, got {num_samples}')
  stream_key = keys_lib.direction_key(keys_lib.canonicalize_key(key), direction)
  spec = kernel_spec(mechanism, resolved)
  p, sigma, matrix = _traced_params(mechanism)
  chunk = _chunk_size(spec.iterations, num_samples)
  parts = []
  for start in range(0, num_samples, chunk):
    result = chunk_fn(stream_key, jnp.asarray(start, jnp.int64), p, sigma, matrix,
                      spec=spec, chunk=chunk, direction=direction)
    parts.append(result[:min(chunk, num_samples - start)])
  return parts[0] if len(parts) == 1 else jnp.concatenate(parts)


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
  return _run_stream(_outputs_chunk, key, mechanism, num_samples, direction, dtype)


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
  p, sigma, matrix = _traced_params(mechanism)
  num_samples = y.shape[0]
  chunk = _chunk_size(n, num_samples)
  parts = []
  for start in range(0, num_samples, chunk):
    block = y[start:start + chunk]
    count = block.shape[0]
    if count < chunk:  # pad to the compiled shape; padded rows are discarded
      block = jnp.pad(block, ((0, chunk - count), (0, 0)))
    parts.append(_loss_chunk(block, p, sigma, matrix, spec=spec)[:count])
  loss = parts[0] if len(parts) == 1 else jnp.concatenate(parts)
  return loss if direction == 'remove' else -loss
