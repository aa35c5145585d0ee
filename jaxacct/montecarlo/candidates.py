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
from typing import Callable, Sequence

import jax
import jax.numpy as jnp
import numpy as np

from jaxacct import _validate
from jaxacct._precision import scoped_x64
from jaxacct.conventions import CANDIDATE_TAG, DIRECTIONS
from jaxacct.mechanism import MatrixMechanism
from jaxacct.montecarlo import checkpoint as checkpoint_lib
from jaxacct.montecarlo import estimator, kernels, sampling, stream
from jaxacct.montecarlo import precision as precision_lib
from jaxacct.montecarlo import keys as keys_lib
from jaxacct.montecarlo.sharding import SampleMesh


@dataclasses.dataclass(frozen=True)
class SigmaSweep:
  """δ̂(ε) per candidate σ and direction: arrays of shape (num_candidates, num_epsilons).

  ``sums`` is the stream accumulator (``stream.BlockSums``) the estimates were computed
  from: per direction and candidate, the float64 block-ordered sums.
  """

  noise_multipliers: np.ndarray
  epsilons: np.ndarray
  delta_hat: dict
  standard_error: dict
  num_samples: int
  shared_draws: bool
  sums: stream.BlockSums | None = None

  @property
  def delta_hat_max(self) -> np.ndarray:
    return np.maximum(*(self.delta_hat[d] for d in DIRECTIONS))


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
                              dtype=jnp.float64, precision: str | None = None,
                              block_size: int | None = None,
                              blocks_per_call: int | None = None, devices=None,
                              progress: stream.Progress | None = None) -> SigmaSweep:
  """δ̂(ε) of ``mechanism`` with each σ in ``noise_multipliers`` (its own σ is ignored).

  With ``shared_draws`` every candidate uses the same draws (x, z) of the key's
  estimation stream; otherwise candidate j uses the independent key
  fold_in(key, 2¹⁶ + j) and the plain estimator. (The verification stream is
  reachable only through ``evr.verify``.) ``progress(samples_done, samples_total, stage)``
  is called after each call (stage "estimation sweep"). ``dtype`` / ``precision``: as
  ``estimate_delta``.

  Returns:
    ``SigmaSweep`` with (K, E) arrays per direction.

  References:
    Dong & Ganesh, arXiv 2602.09338v2, App. A (Algorithm 5, Theorem A.1);
    spec 000 §8.5 (common random numbers).
  """
  return sweep_sigmas(key, mechanism, noise_multipliers, epsilons, num_samples,
                      purpose='estimation', shared_draws=shared_draws, dtype=dtype,
                      precision=precision, block_size=block_size, blocks_per_call=blocks_per_call, devices=devices,
                      progress=stream.staged(progress, 'estimation sweep'))


@scoped_x64
def sweep_sigmas(key, mechanism: MatrixMechanism, noise_multipliers: Sequence[float], epsilons,
                 num_samples: int, *, purpose: str, shared_draws: bool = True, dtype=jnp.float64,
                 precision: str | None = None,
                 block_size: int | None = None, blocks_per_call: int | None = None, devices=None,
                 progress: Callable[[int, int], None] | None = None,
                 phase: checkpoint_lib.Phase | None = None) -> SigmaSweep:
  """``estimate_delta_for_sigmas`` on the stream of ``purpose`` (library-internal).

  Both modes run through the one stream driver (``stream.accumulate``): shared draws as one
  ``SharedDraws`` program of K candidates; independent keys as K ``OneSigma`` programs, each
  on the streams of its own key fold_in(key, 2¹⁶ + j). ``phase`` (a checkpoint's view of
  this sweep) resumes it and saves its progress; ``progress(done, total)`` counts the samples
  of every candidate program and direction.
  """
  sampling.check_mechanism(mechanism)
  sigmas = _check_sigmas(noise_multipliers)
  grid = estimator.check_epsilons(epsilons)
  num_samples = keys_lib.check_num_samples(num_samples)
  _validate.one_of('purpose', purpose, ('estimation', 'verification'))
  key = keys_lib.canonicalize_key(key)
  kernel = kernels.kernel_for(
      mechanism, precision_lib.from_arguments(dtype, precision, mechanism).dtype)
  if block_size is None:
    block_size = sampling.default_block_size(kernel.iterations)
  block_size = _validate.integer_at_least('block_size', block_size, 1)
  mesh = SampleMesh.over(devices)
  phase = checkpoint_lib.Phase(None, 'sweep') if phase is None else phase
  state = phase.start(stream.StreamState(stream.BlockSums.zeros(sigmas.size, grid.size)))
  run = dict(after_call=phase.after_call, num_samples=num_samples, first_block=0, block_size=block_size,
             blocks_per_call=blocks_per_call, mesh=mesh, epsilons=grid, edges=None)

  def streams_of(run_key):
    purpose_key = keys_lib.purpose_key(run_key, purpose)
    return lambda direction: keys_lib.direction_key(purpose_key, direction)

  if shared_draws:
    program = stream.shared_draws_program(mechanism, kernel, sigmas, block_size, mesh)
    stream.accumulate(streams_of(key), program, state, progress=progress, **run)
  else:
    for j, sigma in enumerate(sigmas):
      candidate = dataclasses.replace(mechanism, noise_multiplier=float(sigma))
      stream.accumulate(streams_of(jax.random.fold_in(key, CANDIDATE_TAG + j)),
                        stream.one_sigma_program(candidate, kernel, block_size, mesh), state,
                        program_index=j, num_programs=sigmas.size, candidate_offset=j,
                        progress=progress, **run)
  phase.finish(state)
  totals = state.totals
  delta_hat, standard_error = {}, {}
  for d in DIRECTIONS:
    delta_hat[d], standard_error[d] = stream.mean_and_standard_error(
        totals.sums[d], totals.squares[d], num_samples)
  return SigmaSweep(sigmas, grid, delta_hat, standard_error, num_samples, shared_draws, totals)
