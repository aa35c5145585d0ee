"""δ̂(ε) for many noise multipliers at once, with common random numbers across σ.

For a fixed scheme and strategy, y(σ) = C·x + σ·z is linear in σ, so one draw
of (x, z) and one pass of sliding dot products, d(σ) = Cᵀ(C·x) + σ·Cᵀz, serve
every candidate σ; only the privacy-loss recursion is repeated per σ.

Why shared draws keep the EVR guarantee (an argument about Dong & Ganesh (2026)
App. A, Theorem A.1, not made in the paper): the proof bounds Pr[i* < i_min] by
Pr[v_{i_min−1} = 1], the *marginal* probability that the single candidate just
below the first private one is falsely accepted. Each candidate's estimate is still the mean of N
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

References:
  Andy Dong and Arun Ganesh, "Privacy Amplification for BandMF via b-Min-Sep Subsampling",
  arXiv:2602.09338 (v2): App. A (Algorithm 5, Theorem A.1 and its proof) (docs/references.md).
"""

from __future__ import annotations

import dataclasses
from typing import Callable, Sequence

import jax
import numpy as np

from jaxacct import _validate
from jaxacct._precision import scoped_x64
from jaxacct.conventions import CANDIDATE_TAG, DIRECTIONS
from jaxacct.mechanism import MatrixMechanism
from jaxacct.montecarlo.evr import checkpoint as checkpoint_lib
from jaxacct.montecarlo.engine import kernels, sampling, stream
from jaxacct.montecarlo.evr import estimator
from jaxacct.montecarlo.evr import plan as plan_lib
from jaxacct.montecarlo.evr import precision as precision_lib
from jaxacct.montecarlo.engine import keys as keys_lib
from jaxacct.montecarlo.engine.sharding import SampleMesh
from jaxacct import progress as progress_lib
from jaxacct.errors import InputError
from jaxacct import options as options_lib


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
  sigmas = _validate.real_array('noise_multipliers', noise_multipliers, 'a non-empty 1-D list')
  if sigmas.ndim != 1 or sigmas.size == 0:
    raise InputError(f'noise_multipliers must be a non-empty 1-D list, got {noise_multipliers!r}')
  if not np.all(np.isfinite(sigmas) & (sigmas > 0)):
    raise InputError(f'noise_multipliers must be finite and > 0, got {sigmas.tolist()}')
  return sigmas


@options_lib.moved
@scoped_x64
def estimate_delta_for_sigmas(key, mechanism: MatrixMechanism, noise_multipliers: Sequence[float],
                              epsilons, num_samples: int, *,
                              monte_carlo: options_lib.MonteCarloOptions | None = None,
                              run: options_lib.RunOptions | None = None) -> SigmaSweep:
  """δ̂(ε) of ``mechanism`` with each σ in ``noise_multipliers`` (its own σ is ignored).

  With ``monte_carlo.shared_draws`` (default) every candidate uses the same draws (x, z) of the
  key's estimation stream; otherwise candidate j uses the independent key
  fold_in(key, 2¹⁶ + j) and the plain estimator. (The verification stream is
  reachable only through ``evr.verify``.) ``monte_carlo`` also gives ``precision`` and
  ``block_size`` (as ``estimate_delta``); other fields are refused. ``run``: ``RunOptions``
  with devices, blocks per call, progress (stage "estimation sweep"), checkpoint (a folder;
  calling again with the same arguments resumes the sweep bitwise), checkpoint interval and
  max_seconds (``jaxacct/options.py``). A ledger is refused: a sweep verifies nothing.

  Returns:
    ``SigmaSweep`` with (K, E) arrays per direction.

  References:
    Dong & Ganesh (2026), App. A (Algorithm 5, Theorem A.1); common random
    numbers: the module docstring (not in the paper).
  """
  monte_carlo = options_lib.monte_carlo_options(monte_carlo, 'estimate_delta_for_sigmas',
                                                SWEEP_FIELDS)
  run = options_lib.run_options(run)
  if run.ledger is not None:
    raise InputError('estimate_delta_for_sigmas: run.ledger must be None (a sweep verifies '
                     'nothing; the ledger is for verify and calibrate)')
  sigmas = _check_sigmas(noise_multipliers)
  estimator.check_epsilons(epsilons)  # before the checkpoint reads them
  saved = checkpoint_lib.open_checkpoint(
      run.checkpoint, {'run': 'sweep', 'scheme': repr(mechanism.scheme),
                       'strategy': repr(mechanism.matrix.fingerprint),
                       'sigmas': [float(s).hex() for s in sigmas],
                       'epsilons': [float(e) for e in np.ravel(epsilons)],
                       'num_samples': int(num_samples),
                       'shared_draws': monte_carlo.shared_draws,
                       'precision': monte_carlo.precision,
                       'block_size': monte_carlo.block_size,
                       'seed': list(keys_lib.key_words(keys_lib.canonicalize_key(key)))},
      run.checkpoint_interval)
  return sweep_sigmas(key, mechanism, sigmas, epsilons, num_samples, purpose='estimation',
                      shared_draws=monte_carlo.shared_draws, precision=monte_carlo.precision,
                      block_size=monte_carlo.block_size, run=run,
                      progress=progress_lib.staged(run.progress, 'estimation sweep'),
                      phase=checkpoint_lib.Phase(saved, 'sweep', [s.hex() for s in
                                                                  sigmas.tolist()]))


# The MonteCarloOptions fields a sweep uses.
SWEEP_FIELDS = frozenset({'shared_draws', 'precision', 'block_size'})


def _programs(mechanism: MatrixMechanism, kernel, sigmas: np.ndarray, block_size: int,
              mesh: SampleMesh, shared_draws: bool) -> list:
  """The sweep's loss programs: one ``SharedDraws`` of K candidates, or K ``OneSigma``."""
  if shared_draws:
    return [stream.shared_draws_program(mechanism, kernel, sigmas, block_size, mesh)]
  return [stream.one_sigma_program(dataclasses.replace(mechanism, noise_multiplier=float(s)),
                                   kernel, block_size, mesh) for s in sigmas]


@dataclasses.dataclass
class _Sweep:
  """A sweep with its arguments checked and its state resumed, ready to run or project."""

  mechanism: MatrixMechanism
  sigmas: np.ndarray
  grid: np.ndarray
  num_samples: int
  purpose: str
  key: jax.Array
  shared_draws: bool
  block_size: int
  blocks_per_call: int | None
  mesh: SampleMesh
  phase: checkpoint_lib.Phase
  programs: list
  state: stream.StreamState

  def refuse_over_budget(self, run: str, max_seconds: float | None) -> None:
    """``plan.OverBudgetError`` before any compute when the rest is projected over
    ``max_seconds`` (None: nothing is timed or refused; ``plan.refuse_projected``)."""
    plan_lib.refuse_projected(run, max_seconds, self.programs[0], self.mesh, self.state,
                              num_samples=self.num_samples, block_size=self.block_size,
                              blocks_per_call=self.blocks_per_call,
                              num_programs=len(self.programs))


@scoped_x64
def prepare_sweep(key, mechanism: MatrixMechanism, noise_multipliers: Sequence[float], epsilons,
                  num_samples: int, *, purpose: str, shared_draws: bool = True,
                  precision: str = 'float64', block_size: int | None = None,
                  run: options_lib.RunOptions = options_lib.RunOptions(),
                  phase: checkpoint_lib.Phase | None = None) -> _Sweep:
  """Checks a sweep's arguments and resumes its state (``phase``), computing nothing."""
  sampling.check_mechanism(mechanism)
  shared_draws = _validate.boolean('shared_draws', shared_draws)
  sigmas = _check_sigmas(noise_multipliers)
  grid = estimator.check_epsilons(epsilons)
  num_samples = keys_lib.check_num_samples(num_samples)
  _validate.one_of('purpose', purpose, ('estimation', 'verification'))
  key = keys_lib.canonicalize_key(key)
  kernel = kernels.kernel_for(mechanism, precision_lib.choose(precision, mechanism).dtype)
  if block_size is None:
    block_size = sampling.default_block_size(kernel.iterations)
  block_size = _validate.integer_at_least('block_size', block_size, 1)
  mesh = SampleMesh.over(run.devices)
  phase = checkpoint_lib.Phase(None, 'sweep') if phase is None else phase
  state = phase.start(stream.StreamState(stream.BlockSums.zeros(sigmas.size, grid.size)))
  return _Sweep(mechanism, sigmas, grid, num_samples, purpose, key, bool(shared_draws),
                block_size, run.blocks_per_call, mesh, phase,
                _programs(mechanism, kernel, sigmas, block_size, mesh, shared_draws), state)


@scoped_x64
def run_sweep(sweep: _Sweep, progress: Callable[[int, int], None] | None = None) -> SigmaSweep:
  """Runs a prepared sweep through the one stream driver (``stream.accumulate``): shared
  draws as one ``SharedDraws`` program of K candidates; independent keys as K ``OneSigma``
  programs, each on the streams of its own key fold_in(key, 2¹⁶ + j)."""
  state = sweep.state
  run = dict(after_call=sweep.phase.after_call, num_samples=sweep.num_samples, first_block=0,
             block_size=sweep.block_size, blocks_per_call=sweep.blocks_per_call,
             mesh=sweep.mesh, epsilons=sweep.grid, edges=None, progress=progress)

  def streams_of(run_key):
    purpose_key = keys_lib.purpose_key(run_key, sweep.purpose)
    return lambda direction: keys_lib.direction_key(purpose_key, direction)

  if sweep.shared_draws:
    stream.accumulate(streams_of(sweep.key), sweep.programs[0], state, **run)
  else:
    for j, program in enumerate(sweep.programs):
      stream.accumulate(streams_of(jax.random.fold_in(sweep.key, CANDIDATE_TAG + j)), program,
                        state, program_index=j, num_programs=len(sweep.programs),
                        candidate_offset=j, **run)
  sweep.phase.finish(state)
  totals = state.totals
  delta_hat, standard_error = {}, {}
  for d in DIRECTIONS:
    delta_hat[d], standard_error[d] = stream.mean_and_standard_error(
        totals.sums[d], totals.squares[d], sweep.num_samples)
  return SigmaSweep(sweep.sigmas, sweep.grid, delta_hat, standard_error, sweep.num_samples,
                    sweep.shared_draws, totals)


@scoped_x64
def sweep_sigmas(key, mechanism: MatrixMechanism, noise_multipliers: Sequence[float], epsilons,
                 num_samples: int, *, purpose: str, shared_draws: bool = True,
                 precision: str = 'float64', block_size: int | None = None,
                 run: options_lib.RunOptions = options_lib.RunOptions(),
                 progress: Callable[[int, int], None] | None = None,
                 phase: checkpoint_lib.Phase | None = None) -> SigmaSweep:
  """``estimate_delta_for_sigmas`` on the stream of ``purpose`` (library-internal).

  ``phase`` (a checkpoint's view of this sweep) resumes it and saves its progress;
  ``progress(done, total)`` counts the samples of every candidate program and direction
  (``run.progress`` is not read: callers stage it); ``run.max_seconds`` refuses, before any
  compute, a sweep projected to take longer.
  """
  max_seconds = plan_lib.check_max_seconds(run.max_seconds)
  sweep = prepare_sweep(key, mechanism, noise_multipliers, epsilons, num_samples,
                        purpose=purpose, shared_draws=shared_draws, precision=precision,
                        block_size=block_size, run=run, phase=phase)
  sweep.refuse_over_budget(f'the sweep of {sweep.sigmas.size} σ × {sweep.num_samples:,} '
                           f'samples per direction', max_seconds)
  return run_sweep(sweep, progress)
