"""δ̂(ε) for many noise multipliers at once, with common random numbers across σ.

For a fixed scheme and strategy, y(σ) = C·x + σ·z is linear in σ, so one draw
of (x, z) and one pass of sliding dot products, d(σ) = Cᵀ(C·x) + σ·Cᵀz, serve
every candidate σ; only the privacy-loss recursion is repeated per σ.

Why shared draws keep the EVR guarantee (seed 000 App. A, Theorem A.1; spec
000 §8.5): the proof bounds Pr[i* < i_min] by Pr[v_{i_min−1} = 1], the
*marginal* probability that the single candidate just below the first private
one is falsely accepted. Each candidate's estimate is still the mean of N
i.i.d. terms of its own pair (the draws are i.i.d. across samples; sharing
them across σ only correlates different candidates), so Fact 4.2 bounds that
marginal probability by q. The outcomes never depend on the dataset, so the
released index has the same law under D and D′ whatever the joint law of the
verifier's outcomes. Independence between candidates is stated in Theorem A.1
but not used by its proof. Independent keys per candidate are offered too
(``shared_draws=False``).

Where the code runs: the two block kernels are JAX (device, sharded over the
sample axis); the sweep driver is host code reusing the estimator's per-block
reductions, so sums are combined in block order in float64.
"""

from __future__ import annotations

import dataclasses
import functools
from typing import Callable, Sequence

import jax
import jax.numpy as jnp
import numpy as np
from jax import lax

from jaxacct import _validate
from jaxacct._precision import kernel_dtype, scoped_x64
from jaxacct.mechanism import DIRECTIONS, MatrixMechanism
from jaxacct.montecarlo import estimator, losses, sampling
from jaxacct.montecarlo import keys as keys_lib
from jaxacct.montecarlo import sharding as sharding_lib
from jaxacct.montecarlo._spec import KernelSpec, kernel_spec

# Candidate j of an independent-keys sweep uses fold_in(key, _CANDIDATE_TAG + j).
_CANDIDATE_TAG = 1 << 16


@dataclasses.dataclass(frozen=True)
class SigmaSweep:
  """δ̂(ε) per candidate σ and direction: arrays of shape (num_candidates, num_epsilons)."""

  noise_multipliers: np.ndarray
  epsilons: np.ndarray
  delta_hat: dict
  standard_error: dict
  num_samples: int
  shared_draws: bool

  @property
  def delta_hat_max(self) -> np.ndarray:
    return np.maximum(*(self.delta_hat[d] for d in DIRECTIONS))


@functools.partial(jax.jit, static_argnames=('spec', 'direction', 'block_size', 'mesh'))
def _block_components(block_ids, stream_key, p, matrix, *, spec: KernelSpec, direction: str,
                      block_size: int, mesh):
  """(C·x, z, r) of whole blocks: arrays (k, block_size, n) (C·x is 0 for untruncated add; r
  is None without truncation)."""
  def one_device(ids, stream_key, p, matrix):
    def one_block(block):
      indices = block * block_size + jnp.arange(block_size, dtype=jnp.int64)
      mean, z, rest = sampling.draw_components(stream_key, indices, p, matrix, spec, direction)
      return jnp.zeros_like(z) if mean is None else mean, z, rest
    return lax.map(one_block, ids)
  return sampling.per_device(one_device, mesh, 1)(block_ids, stream_key, p, matrix)


@functools.partial(jax.jit, static_argnames=('spec', 'direction', 'mesh'))
def _block_losses_for_sigmas(mean, z, rest, sigmas, p, matrix, *, spec: KernelSpec,
                             direction: str, mesh):
  """float64 losses (k, K, block_size) for K noise multipliers from shared draws.

  One pass of sliding dot products per block (d_m = Cᵀ(C·x), d_z = Cᵀz); the
  recursion runs once per σ on d = d_m + σ·d_z (lax.map: measured faster than vmap).
  """
  def one_device(mean, z, rest, sigmas, p, matrix):
    def one_block(draws):
      mean_block, z_block, rest_block = draws
      dz = losses.transpose_products(spec, z_block, matrix)
      dm = losses.transpose_products(spec, mean_block, matrix)
      def one_sigma(sigma):
        d = dm + sigma.astype(dz.dtype) * dz
        return losses.log_ratio_from_dots(spec, d, p, sigma, matrix, rest_block,
                                          direction).astype(jnp.float64)
      return lax.map(one_sigma, sigmas)
    return lax.map(one_block, (mean, z, rest))
  loss = sampling.per_device(one_device, mesh, 3)(mean, z, rest, sigmas, p, matrix)
  return loss if direction == 'remove' else -loss


def _check_sigmas(noise_multipliers) -> np.ndarray:
  sigmas = np.asarray(noise_multipliers, dtype=np.float64)
  if sigmas.ndim != 1 or sigmas.size == 0:
    raise ValueError(f'noise_multipliers must be a non-empty 1-D list, got {noise_multipliers!r}')
  if not np.all(np.isfinite(sigmas) & (sigmas > 0)):
    raise ValueError(f'noise_multipliers must be finite and > 0, got {sigmas.tolist()}')
  return sigmas


@scoped_x64
def estimate_delta_for_sigmas(key, mechanism: MatrixMechanism, noise_multipliers: Sequence[float],
                              epsilons, num_samples: int, *, shared_draws: bool = True,
                              dtype=jnp.float64, block_size: int | None = None,
                              blocks_per_call: int | None = None, devices=None,
                              progress: Callable[[int, int], None] | None = None) -> SigmaSweep:
  """δ̂(ε) of ``mechanism`` with each σ in ``noise_multipliers`` (its own σ is ignored).

  With ``shared_draws`` every candidate uses the same draws (x, z) of the key's
  estimation stream; otherwise candidate j uses the independent key
  fold_in(key, 2¹⁶ + j) and the plain estimator. (The verification stream is
  reachable only through ``evr.verify``.)

  Returns:
    ``SigmaSweep`` with (K, E) arrays per direction.

  References:
    Dong & Ganesh, arXiv 2602.09338v2, App. A (Algorithm 5, Theorem A.1);
    spec 000 §8.5 (common random numbers).
  """
  return sweep_sigmas(key, mechanism, noise_multipliers, epsilons, num_samples,
                      purpose='estimation', shared_draws=shared_draws, dtype=dtype,
                      block_size=block_size, blocks_per_call=blocks_per_call, devices=devices,
                      progress=progress)


@scoped_x64
def sweep_sigmas(key, mechanism: MatrixMechanism, noise_multipliers: Sequence[float], epsilons,
                 num_samples: int, *, purpose: str, shared_draws: bool = True, dtype=jnp.float64,
                 block_size: int | None = None, blocks_per_call: int | None = None, devices=None,
                 progress: Callable[[int, int], None] | None = None) -> SigmaSweep:
  """``estimate_delta_for_sigmas`` on the stream of ``purpose`` (library-internal)."""
  if not isinstance(mechanism, MatrixMechanism):
    raise TypeError(f'mechanism must be a jaxacct.MatrixMechanism, got {mechanism!r}')
  sigmas = _check_sigmas(noise_multipliers)
  grid = estimator._check_epsilons(epsilons)
  num_samples = keys_lib.check_num_samples(num_samples)
  _validate.one_of('purpose', purpose, ('estimation', 'verification'))
  key = keys_lib.canonicalize_key(key)
  if not shared_draws:
    runs = [estimator.run_estimate(
        jax.random.fold_in(key, _CANDIDATE_TAG + j),
        dataclasses.replace(mechanism, noise_multiplier=float(sigma)), grid, num_samples,
        purpose=purpose, dtype=dtype, block_size=block_size, blocks_per_call=blocks_per_call,
        devices=devices) for j, sigma in enumerate(sigmas)]
    return SigmaSweep(sigmas, grid, {d: np.stack([r.delta_hat[d] for r in runs]) for d in DIRECTIONS},
                      {d: np.stack([r.standard_error[d] for r in runs]) for d in DIRECTIONS},
                      num_samples, False)
  spec = kernel_spec(mechanism, kernel_dtype(dtype))
  if block_size is None:
    block_size = sampling.default_block_size(spec.iterations)
  block_size = _validate.integer_at_least('block_size', block_size, 1)
  mesh = sharding_lib.sample_mesh(devices)
  if blocks_per_call is None:
    blocks_per_call = sampling.default_blocks_per_call(block_size, spec.iterations)
  call_blocks = blocks_per_call * mesh.devices.size
  shard = sharding_lib.sample_sharding(mesh)
  p, _, matrix = sampling.traced_params(mechanism)
  sigmas_device = jnp.asarray(sigmas)
  eps_device = jnp.asarray(grid)
  no_edges = jnp.zeros(1)
  total_blocks = -(-num_samples // block_size)
  sums = {d: np.zeros((sigmas.size, grid.size)) for d in DIRECTIONS}
  squares = {d: np.zeros((sigmas.size, grid.size)) for d in DIRECTIONS}
  purpose_key = keys_lib.purpose_key(key, purpose)
  done = 0
  for direction in DIRECTIONS:
    stream_key = keys_lib.direction_key(purpose_key, direction)
    for block in range(0, total_blocks, call_blocks):
      ids = jax.device_put(np.arange(block, block + call_blocks, dtype=np.int64), shard)
      mean, z, rest = _block_components(ids, stream_key, p, matrix, spec=spec,
                                        direction=direction, block_size=block_size, mesh=mesh)
      loss = _block_losses_for_sigmas(mean, z, rest, sigmas_device, p, matrix, spec=spec,
                                      direction=direction, mesh=mesh)
      used = min(call_blocks, total_blocks - block)
      remaining = jnp.asarray(num_samples - block * block_size, jnp.int64)
      for j in range(sigmas.size):
        block_sums, block_squares, _ = (np.asarray(a)[:used] for a in estimator._block_reductions(
            loss[:, j, :], remaining, eps_device, no_edges, mesh=mesh))
        for row in range(used):  # host, float64, block order
          sums[direction][j] += block_sums[row]
          squares[direction][j] += block_squares[row]
      done += min(used * block_size, num_samples - block * block_size)
      if progress is not None:
        progress(done, num_samples * len(DIRECTIONS))
  delta_hat, standard_error = {}, {}
  for d in DIRECTIONS:
    delta_hat[d], standard_error[d] = estimator.mean_and_standard_error(
        sums[d], squares[d], num_samples)
  return SigmaSweep(sigmas, grid, delta_hat, standard_error, num_samples, True)
