"""Capacity plan of a Monte Carlo calibration: samples, measured throughput, projected time.

Before a production verification (Dong & Ganesh (2026) §7.4: ~10¹⁰ samples per σ) a user needs
to know what it costs. ``capacity_plan`` counts the samples ``calibrate_noise_multiplier``
draws —

- verification: N per direction (Fact 4.2 of Chua et al. through ``evr.resolve_sample_size``)
  in one shared-draws pass over the k Monte Carlo candidates;
- estimation: each σ sweep draws ``estimation_samples`` per direction for 16 candidates; the
  search makes at least 2 sweeps (a coarse bracket and a fine grid), more when the initial
  guess is far off (each extra sweep is reported);

— and times the same programs here, at the run's call shape (``call_seconds``: the run's own
loop over one call per direction, after a compiling one): the shared-draws programs of 16 σ
(sweeps) and of the k candidates (verification), and the estimator's one-σ program of the
report curve that the CLI draws after a calibration. A phase costs its calls, the last one
whole. The plan also computes the search's starting points (σ_up and the initial guess), and
the run, in the same process, reuses them and every compiled program, so the projection is
given twice: for a fresh process (``seconds_here``) and for the rest of this one
(``seconds_after_plan``). Projections on N devices assume linear scaling in the device count
(blocks are independent; the per-block sums all-gathered per call are a few kB); device-hours;
the memory per device of one call (XLA's compiled memory analysis, where the backend gives it).

A user who knows the throughput of their accelerator passes ``samples_per_second`` (one-σ
samples per second per device); the K-candidate cost then follows ``DEFAULT_CANDIDATE_COST``
(the ratio recorded in benchmarks/RESULTS.md at the production shape: 16 σ cost 6.45 × one
σ), and nothing is compiled or timed.

Compiles and timed calls make no progress calls, so each is announced before it starts
(``progress.announce``: "compiling and timing the float64 program of 16 σ …"), to the run's
progress callback (the CLI's reporter; none: logged at INFO, which the ``jaxacct`` command
shows on stderr), and a plan never sits silent in a log for the minutes a large compile takes.

Host code around short device runs.

References:
  Andy Dong and Arun Ganesh, "Privacy Amplification for BandMF via b-Min-Sep Subsampling",
  arXiv:2602.09338 (v2): App. A, §7.4 (the production shape) (docs/references.md).
"""

from __future__ import annotations

import dataclasses
import time

import jax
import numpy as np

from jaxacct import _validate
from jaxacct._precision import scoped_x64
from jaxacct.mechanism import MatrixMechanism
from jaxacct.conventions import DIRECTIONS
from jaxacct.montecarlo.engine import kernels, program32, sampling, stream
from jaxacct.montecarlo.evr import bounds as evr, search_start, tilted_plan
from jaxacct.montecarlo.engine import keys as keys_lib
from jaxacct.montecarlo.engine.sharding import SampleMesh
from jaxacct import options as options_lib
from jaxacct.errors import InputError
from jaxacct import progress as progress_lib
from jaxacct.progress import format_seconds

SWEEP_CANDIDATES = search_start.SWEEP_CANDIDATES  # σ per estimation sweep
MIN_SWEEPS = 2  # a coarse sweep that brackets σ, then the fine one
DEFAULT_CANDIDATE_COST = (6.45 - 1.0) / 15.0  # c₁/c₀ from 16 σ = 6.45 × one σ (RESULTS.md)
_TIMED_CALLS = 3  # calls timed after the compiling one (median)

SLOWEST_SAMPLE_ROUNDS_PER_SECOND = 5e6
"""The throughput bound behind ``needs_timing``, the one gate deciding from sample counts alone
whether a run is worth timing first: one-σ sample-rounds per second per device (draws × σ ×
rounds n; each σ of a shared-draws program counted in full). A run whose draws take at most
the caller's seconds at this rate is not timed (a plan times a few calls of every program:
seconds); only larger runs are. Conservative: every shape measured on the 2-core CPU of
benchmarks/RESULTS.md runs faster — 2.5·10⁷ one-σ sample-rounds/s at the n = 7200, 256-band
production shape (float64), 2.4·10⁷ for the quickstart (n = 128), ~10⁸ for b-min-sep n = 1000
(float32), and several times more counting the σ a shared draw serves — so a run skipped here
is short on any such machine (the quickstart calibration counts 3.1·10⁸ sample-rounds: ≤ 61 s
at this bound, ~20 s measured)."""


def needs_timing(mechanism: MatrixMechanism, num_samples: int, seconds: float | None, *,
                 devices: int = 1) -> bool:
  """Whether ``num_samples`` one-σ draws per direction of ``mechanism`` (each σ of a shared
  draw counted: K candidates of N draws are K·N) could take longer than ``seconds`` on
  ``devices`` devices at ``SLOWEST_SAMPLE_ROUNDS_PER_SECOND`` — only then is a run worth timing
  (None: no budget, nothing to time). The gate of the calibration's long-run announcement
  (``calibration.LONG_RUN_SECONDS``) and of a budget the caller would otherwise time a run
  against (the ``jaxacct estimate`` command under ``--max-minutes``)."""
  if seconds is None:
    return False
  return (len(DIRECTIONS) * num_samples * mechanism.iterations
          / (SLOWEST_SAMPLE_ROUNDS_PER_SECOND * devices)) > seconds


@dataclasses.dataclass(frozen=True)
class CapacityPlan:
  """What a calibration costs (see the module docstring).

  Attributes:
    num_samples / base_delta: verification N per direction and candidate, and δ_b.
    verification_candidates: Monte Carlo candidates verified (plus the fallback, free).
    estimation_samples: samples per direction of each estimation sweep.
    verification_samples / estimation_samples_per_sweep: draws of each phase (both
      directions; one draw serves all candidates of a pass).
    seconds_per_sample: {16: c(16), k: c(k), 1: c(1) (with a report)} seconds per draw on
      all devices here, in calls of the run's size (one draw in each direction: half a call).
    measured: True when timed here, False when from ``samples_per_second``.
    devices_here: devices the rate refers to.
    seconds_here: projected wall time of the run in a fresh process here: the
      ``estimation_sweeps``, the verification, the report curve and figures (if planned), the
      compiles and the search's starting points; seconds_per_extra_sweep: each further sweep.
    estimation_sweeps: the sweeps projected (``estimation_sweeps``: 2, or 3 when a pilot call
      shows the first coarse sweep cannot bracket σ; 2 when the throughput is given).
    seconds_after_plan: what is left of it in this process after the plan (whose compiles and
      starting points the run reuses): the sampling calls, the report curve and figures.
    compile_seconds: the run's compiles (sweep, verification and one-σ programs in both
      directions), measured here as the first timed run's excess (0 when not measured).
    initial_seconds: the fallback's σ_up and the initial guess (host), computed here.
    report_seconds: the report curve's calls (one sweep's draws at one σ; 0 without one).
    figure_seconds: the report's figures drawn after the run (host; 0 without): in
      seconds_here, seconds_after_plan and seconds_on_target, not in device_hours_on_target
      (no device draws them).
    target_devices: N for the projection; seconds_on_target / device_hours_on_target.
    memory_per_device: bytes of one call's arguments, outputs and temporaries (or None).
    block_size / iterations / blocks_per_call: the kernel's block and n, and the call size.
  """

  num_samples: int
  base_delta: float
  verification_candidates: int
  estimation_samples: int
  verification_samples: int
  estimation_samples_per_sweep: int
  seconds_per_sample: dict
  measured: bool
  devices_here: int
  seconds_here: float
  seconds_per_extra_sweep: float
  target_devices: int
  seconds_on_target: float
  device_hours_on_target: float
  memory_per_device: int | None
  block_size: int
  iterations: int
  precision: str = 'float64'
  compile_seconds: float = 0.0
  report_seconds: float = 0.0
  blocks_per_call: int = 0
  initial_seconds: float = 0.0
  seconds_after_plan: float = 0.0
  estimation_sweeps: int = MIN_SWEEPS
  figure_seconds: float = 0.0

  def to_dict(self) -> dict:
    record = dataclasses.asdict(self)
    record['seconds_per_sample'] = {str(k): v for k, v in self.seconds_per_sample.items()}
    return record


def _stream_key(direction: str) -> jax.Array:
  """The stream the timed calls draw from (any key: the timing does not depend on it)."""
  return keys_lib.direction_key(keys_lib.purpose_key(jax.random.key(0), 'estimation'), direction)


def call_seconds(program, mesh: SampleMesh, block_size: int, blocks_per_call: int,
                 num_epsilons: int = 1, calls: int = _TIMED_CALLS,
                 statistic=np.median) -> tuple[float, float]:
  """(seconds of one call in each direction, seconds of the compiles) of ``program`` at the
  run's own call shape.

  Runs ``stream.accumulate`` (the run's loop: both directions, the per-block reductions, the
  host sums) over one call of ``blocks_per_call`` blocks per device: first to compile, then
  ``calls`` times (fewer once a second has been spent), taking the ``statistic``; the compile
  is the first run's excess. The run then finds every program compiled (same shapes, same
  static arguments), so its first call costs no more than the others.
  """
  num_samples = blocks_per_call * mesh.size * block_size
  epsilons = np.linspace(0.5, 2.0, num_epsilons)

  def run_once() -> float:
    state = stream.StreamState(stream.BlockSums.zeros(program.num_candidates, num_epsilons))
    start = time.perf_counter()
    stream.accumulate(_stream_key, program, state, num_samples=num_samples, first_block=0,
                      block_size=block_size, blocks_per_call=blocks_per_call, mesh=mesh,
                      epsilons=epsilons, edges=None)
    return time.perf_counter() - start

  first = run_once()
  steady = []
  while len(steady) < calls and sum(steady) < 1.0:
    steady.append(run_once())
  seconds = float(statistic(steady))
  return seconds, max(0.0, first - seconds)


def _memory(program, mesh: SampleMesh, blocks_per_call: int) -> int | None:
  """Bytes per device of one call of ``program`` (its draws, plus one (K, block) loss row
  per candidate for the recursion pass), or None on a backend without a memory analysis."""
  ids = next(mesh.calls(0, blocks_per_call * mesh.size, blocks_per_call))[2]
  memory = program.draws_memory(_stream_key('remove'), ids, 'remove')
  if memory is None:
    return None
  return memory + 2 * program.num_candidates * blocks_per_call * program.block_size * 8


class OverBudgetError(InputError):
  """A run projected (from a timed call) to take longer than the caller's ``max_seconds``.

  Attributes: run (what was refused), seconds (its projected wall time here), max_seconds.
  """

  def __init__(self, message: str, run: str, seconds: float, max_seconds: float):
    super().__init__(message)
    self.run, self.seconds, self.max_seconds = run, seconds, max_seconds


def check_max_seconds(max_seconds) -> float | None:
  """``max_seconds`` checked (None, or finite and > 0) before any compute."""
  return None if max_seconds is None else _validate.positive_finite('max_seconds', max_seconds)


def refuse_over_budget(run: str, seconds: float, max_seconds: float | None, *,
                       budget: str | None = None,
                       advice: str = 'pass a larger max_seconds (or none) to run it anyway, or '
                                     'use fewer samples or more devices') -> None:
  """``OverBudgetError`` naming ``run`` and the budget (``budget``, default "max_seconds = …")
  when the projected ``seconds`` exceed ``max_seconds`` (None: nothing is refused)."""
  if max_seconds is not None and seconds > max_seconds:
    budget = f'max_seconds = {max_seconds:g}' if budget is None else budget
    raise OverBudgetError(f'{run} is projected to take {format_seconds(seconds)} here, over '
                          f'{budget}: {advice}', run, seconds, max_seconds)


def _describe(program, role: str | None = None) -> str:
  """"the float64 program of 16 σ (the estimation sweeps; n = 128)": what a compile is of."""
  sigmas = 'one σ' if program.num_candidates == 1 else f'{program.num_candidates} σ'
  return (f'the {program.precision} program of {sigmas} ('
          + ('' if role is None else f'{role}; ') + f'n = {program.kernel.iterations:,})')


@scoped_x64
def program_seconds(program, mesh: SampleMesh, block_size: int, blocks: int,
                    blocks_per_call: int | None = None, *, progress=None) -> float:
  """Projected wall time of ``blocks`` blocks (both directions together) of ``program`` on
  ``mesh`` in calls of ``blocks_per_call`` blocks per device (default: the run's default),
  from one timed call after its compiling one at that shape, so the run reuses the compile.
  The compile is announced first (``progress.announce`` to ``progress``)."""
  if blocks <= 0:
    return 0.0
  if blocks_per_call is None:
    blocks_per_call = sampling.default_blocks_per_call(block_size, program.kernel.iterations)
  progress_lib.announce(progress, f'compiling {_describe(program)} and timing one call, to '
                                  'project the run against its budget…')
  with progress_lib.heartbeat(progress, 'the compile and timed call'):
    per_call, _ = call_seconds(program, mesh, block_size, blocks_per_call, calls=1)
  calls_per_direction = -(-blocks // (len(DIRECTIONS) * blocks_per_call * mesh.size))
  return calls_per_direction * per_call


def refuse_projected(run: str, max_seconds: float | None, program, mesh: SampleMesh,
                     state: stream.StreamState, *, num_samples: int, block_size: int,
                     blocks_per_call: int | None, first_block: int = 0,
                     num_programs: int = 1) -> None:
  """``OverBudgetError`` naming ``run`` before any compute when what ``state`` has left of a
  run of ``num_programs`` programs over [first_block, ⌈num_samples/block_size⌉) is projected
  over ``max_seconds`` (None: nothing is timed or refused). The projection times one call of
  ``program`` (the first), whose compile the run then reuses (``program_seconds``)."""
  if max_seconds is None:
    return
  remaining = state.blocks_remaining(num_samples=num_samples, first_block=first_block,
                                     block_size=block_size, num_programs=num_programs)
  refuse_over_budget(run, program_seconds(program, mesh, block_size, remaining, blocks_per_call),
                     max_seconds)


@scoped_x64
def seconds_per_sample(mechanism: MatrixMechanism, dtype: np.dtype, num_candidates: int = 1,
                       devices=None, calls: int = _TIMED_CALLS, statistic=np.median, *,
                       role: str | None = None, progress=False) -> float:
  """Seconds per sample (one draw in each direction, ``num_candidates`` σ: the estimator's
  one-σ program for 1, the shared-draws program otherwise) of ``mechanism`` in ``dtype``'s
  program on the local devices, in calls of the default size after compiling (``statistic`` of
  ``calls``: the median for plans, the minimum for benchmarks on a shared machine). The
  compile is announced to ``progress`` (``progress.announce``; default False: not at all),
  naming the program's ``role``."""
  mesh = SampleMesh.over(jax.local_devices() if devices is None else devices)
  kernel = kernels.kernel_for(mechanism, np.dtype(dtype))
  block_size = sampling.default_block_size(kernel.iterations)
  per_call = sampling.default_blocks_per_call(block_size, kernel.iterations)
  program = _program(mechanism, kernel, num_candidates, block_size, mesh)
  progress_lib.announce(progress, f'compiling and timing {_describe(program, role)}…')
  with progress_lib.heartbeat(progress, 'the compile and timed calls'):
    seconds, _ = call_seconds(program, mesh, block_size, per_call, calls=calls,
                              statistic=statistic)
  return seconds / (per_call * mesh.size * block_size)


def _program(mechanism: MatrixMechanism, kernel, num_candidates: int, block_size: int,
             mesh: SampleMesh):
  """The run's loss program for ``num_candidates`` σ: the estimator's one-σ program for 1
  (``estimate_delta``, the report curve), the shared-draws program of K σ otherwise (sweeps
  and verification); σ are traced, so their values do not matter."""
  if num_candidates == 1:
    return stream.one_sigma_program(mechanism, kernel, block_size, mesh)
  sigmas = mechanism.noise_multiplier * 1.01 ** np.arange(num_candidates, dtype=np.float64)
  return stream.shared_draws_program(mechanism, kernel, sigmas, block_size, mesh)


# A pilot decides "surely" at this many standard errors (the plan's projection only).
_PILOT_STANDARD_ERRORS = 3.0


@scoped_x64
def estimation_sweeps(mechanism: MatrixMechanism, kernel, mesh: SampleMesh, block_size: int,
                      blocks_per_call: int, *, epsilon: float, base_delta: float, guess: float,
                      sigma_up: float) -> int:
  """The estimation sweeps the calibration is projected to make, from one pilot call.

  The calibration's first coarse sweep is 16 σ around the initial guess
  (``search_start.coarse_sweep``); when no σ of it passes (δ̂ ≤ δ_b) or all do, the search
  moves the grid and sweeps again before the fine sweep. One call of the sweep's program
  (compiled by the timing: σ are traced) on that grid tells whether the largest σ surely fails
  (δ̂ − 3 s.e. > δ_b in a direction) below σ_up, or the smallest surely passes (δ̂ + 3 s.e. <
  δ_b in both): then ``MIN_SWEEPS + 1``, else ``MIN_SWEEPS``. A prediction for the projection
  only (the draws are the plan's own stream); with too few samples to tell, ``MIN_SWEEPS``.

  References:
    Dong & Ganesh (2026) App. A (Estimate-Verify-Release: the estimation phase whose σ search
    this projects; the search itself is jaxacct's, ``calibrate_noise_multiplier``).
  """
  sigmas = search_start.coarse_sweep(guess)
  program = stream.shared_draws_program(mechanism, kernel, sigmas, block_size, mesh)
  num_samples = blocks_per_call * mesh.size * block_size
  state = stream.StreamState(stream.BlockSums.zeros(sigmas.size, 1))
  stream.accumulate(_stream_key, program, state, num_samples=num_samples, first_block=0,
                    block_size=block_size, blocks_per_call=blocks_per_call, mesh=mesh,
                    epsilons=np.array([epsilon]), edges=None)
  low, high = {}, {}
  for d in DIRECTIONS:
    mean, error = stream.mean_and_standard_error(state.totals.sums[d][:, 0],
                                                 state.totals.squares[d][:, 0], num_samples)
    low[d] = mean - _PILOT_STANDARD_ERRORS * error
    high[d] = mean + _PILOT_STANDARD_ERRORS * error
  none_pass = any(low[d][-1] > base_delta for d in DIRECTIONS) and sigmas[-1] < sigma_up
  all_pass = all(high[d][0] < base_delta for d in DIRECTIONS)
  return MIN_SWEEPS + int(none_pass or all_pass)


# The MonteCarloOptions fields a plan uses: a calibration's, but for ``shared_draws`` (the
# plan times shared draws).
PLAN_FIELDS = frozenset(field.name for field in dataclasses.fields(
    options_lib.MonteCarloOptions)) - {'shared_draws'}


@options_lib.moved
@scoped_x64
def capacity_plan(mechanism: MatrixMechanism, *, epsilon: float, delta: float,
                  target_devices: int | None = None, samples_per_second: float | None = None,
                  report_epsilons=None, figure_seconds: float = 0.0,
                  monte_carlo: options_lib.MonteCarloOptions | None = None,
                  run: options_lib.RunOptions | None = None
                  ) -> CapacityPlan | tilted_plan.TiltedCapacityPlan:
  """The capacity plan of ``calibrate_noise_multiplier`` for ``mechanism``'s scheme and strategy.

  With ``monte_carlo.proposal`` ``"tilted"`` (or ``"auto"`` resolving to it at the initial
  guess, as the calibration decides) the plan is ``tilted_plan.tilted_capacity_plan``'s: the
  tilted search replayed and its host and device costs measured here (``samples_per_second``
  and another ``target_devices`` are refused: the host's tuple draws do not scale with them).

  Every program of the run is compiled and timed at the run's own call shape (``call_seconds``),
  so the projection counts calls as the run makes them (the last call of a phase is whole) and
  the run, in the same process, finds its programs compiled; the search's starting points
  (``search_start.fallback_and_guess``) are computed here too, and the calibration reuses them.

  Args:
    mechanism: scheme and strategy (σ only sets the timed candidates' scale).
    epsilon, delta: as ``calibrate_noise_multiplier``.
    target_devices: N devices to project to (default: the devices here).
    samples_per_second: one-σ samples per second per device, instead of measuring.
    report_epsilons: the ε grid of a report curve that follows the calibration (the CLI's:
      ``estimate_delta`` at the released σ with one sweep's samples), or None for none.
    figure_seconds: seconds of the report's figures drawn after the run, on the host (the
      CLI's: ``report.figure_seconds`` per figure), added to every projected wall time.
    monte_carlo: the calibration's ``MonteCarloOptions`` (same defaults): ``num_samples``,
      ``base_delta`` and ``attempt`` size the verification (N for that attempt; the ledger's
      earlier runs are not read here), ``estimation_samples``, ``num_candidates``,
      ``fallback``; ``precision`` is the device program timed, ``"float64"`` or ``"float32"``
      (the 32-bit program; refused with the reason for a mechanism it does not serve;
      ``"auto"`` is resolved by the calibration, not here). ``shared_draws=False`` is refused:
      the plan times shared draws.
    run: ``RunOptions``; its ``devices`` (to time on; default every device) and
      ``blocks_per_call``. The calibration's own ``RunOptions`` may be passed whole: its
      ledger, checkpoint and budget are that run's and are not used by the plan.

  References:
    Dong & Ganesh (2026) App. A and §7.4; Chua et al., AISTATS 2025, Fact 4.2.
  """
  monte_carlo = options_lib.monte_carlo_options(monte_carlo, 'capacity_plan', PLAN_FIELDS)
  num_candidates, estimation_samples = monte_carlo.num_candidates, monte_carlo.estimation_samples
  precision = monte_carlo.precision
  sampling.check_mechanism(mechanism)
  epsilon = _validate.finite_real('epsilon', epsilon)
  n_verify, base = evr.resolve_sample_size(delta, monte_carlo.num_samples, monte_carlo.base_delta,
                                           attempts=monte_carlo.attempt)
  if estimation_samples is None:
    estimation_samples = evr.default_estimation_samples(n_verify, base)
  estimation_samples = _validate.integer_at_least('estimation_samples', estimation_samples, 1)
  given, given_run = (None if run is None else run.progress), run
  run = options_lib.run_options(run)
  progress = False if given is False else run.progress  # where compiles are announced
  mesh = SampleMesh.over(run.devices)
  given_devices = target_devices
  if target_devices is None:
    target_devices = mesh.size
  target_devices = _validate.integer_at_least('target_devices', target_devices, 1)
  if precision not in ('float64', 'float32'):
    raise InputError(f'precision must be "float64" or "float32", got {precision!r}')
  report = None if report_epsilons is None else np.atleast_1d(
      _validate.real_array('report_epsilons', report_epsilons, 'a 1-D list'))
  if report is not None and (report.ndim != 1 or not np.all(np.isfinite(report))):
    raise InputError(f'report_epsilons must be a 1-D list of finite numbers, got '
                     f'{report.tolist()}')
  figure_seconds = _validate.finite_real('figure_seconds', figure_seconds)
  if figure_seconds < 0:
    raise InputError(f'figure_seconds must be >= 0, got {figure_seconds}')
  fallback = search_start.fallback_accountant(monte_carlo.fallback)
  search_start.check_fallback(fallback, mechanism)
  if monte_carlo.proposal != 'plain':
    tilted = _tilted_plan(mechanism, epsilon, delta, monte_carlo, given_run, mesh.size,
                          given_devices, samples_per_second, report, figure_seconds)
    if tilted is not None:
      return tilted
  kernel = kernels.kernel_for(mechanism, np.dtype(precision))
  if precision == 'float32' and not stream.uses_program32(mechanism, kernel):
    raise InputError('precision="float32" cannot serve this mechanism: '
                     + program32.refusal(mechanism, kernel))
  progress_lib.announce(progress, f'planning the calibration in {precision}: the σ search\'s '
                                  f'starting points (the {fallback.name} fallback\'s σ_up and '
                                  'the initial guess)…')
  started = time.perf_counter()
  sigma_up, guess = search_start.fallback_and_guess(mechanism.scheme, mechanism.matrix,
                                                    fallback, epsilon, base)
  initial_seconds = time.perf_counter() - started
  block_size = sampling.default_block_size(kernel.iterations)
  per_call = run.blocks_per_call or sampling.default_blocks_per_call(block_size,
                                                                      kernel.iterations)
  call_samples = per_call * mesh.size * block_size  # per direction

  def calls(samples: int) -> int:  # calls per direction: the last one is whole
    return -(-samples // call_samples)

  # Candidates of each program: the sweeps', the verification's and the report's (one σ).
  sizes = [SWEEP_CANDIDATES, num_candidates] + ([] if report is None else [1])
  roles = {}
  for k, role in zip(sizes, ('the estimation sweeps', 'the verification', 'the report curve')):
    roles[k] = role if k not in roles else f'{roles[k]} and {role}'
  call_cost, compiles, memory = {}, {}, None
  if samples_per_second is not None:
    rate = _validate.positive_finite('samples_per_second', samples_per_second)
    one = 1.0 / (rate * mesh.size)
    per_extra = DEFAULT_CANDIDATE_COST * one
    for k in sizes + [1]:
      call_cost[k] = len(DIRECTIONS) * call_samples * (one + per_extra * (k - 1))
    measured = False
  else:
    for k in dict.fromkeys(sizes):  # each program once, in the run's order
      program = _program(mechanism, kernel, k, block_size, mesh)
      progress_lib.announce(progress, f'compiling and timing {_describe(program, roles[k])}, '
                                      f'{per_call} blocks of {block_size:,} per call…')
      with progress_lib.heartbeat(progress, 'the compile and timed calls'):
        call_cost[k], compiles[k] = call_seconds(
            program, mesh, block_size, per_call,
            num_epsilons=1 if k > 1 else report.size)
      if k == SWEEP_CANDIDATES:
        memory = _memory(program, mesh, per_call)
    measured = True
  sweeps = MIN_SWEEPS
  if measured:  # the pilot runs the sweep program the timing compiled
    sweeps = estimation_sweeps(mechanism, kernel, mesh, block_size, per_call, epsilon=epsilon,
                               base_delta=base, guess=guess, sigma_up=sigma_up)
  compile_seconds = float(sum(compiles.values()))
  cost = {k: call_cost[k] / (len(DIRECTIONS) * call_samples) for k in call_cost}
  sweep_seconds = calls(estimation_samples) * call_cost[SWEEP_CANDIDATES]
  sampling_here = sweeps * sweep_seconds + calls(n_verify) * call_cost[num_candidates]
  report_seconds = 0.0 if report is None else calls(estimation_samples) * call_cost[1]
  after_plan = sampling_here + report_seconds
  here = after_plan + compile_seconds + initial_seconds
  on_target = after_plan * mesh.size / target_devices + compile_seconds + initial_seconds
  device_hours = on_target * target_devices / 3600.0  # the figures use no device
  return CapacityPlan(
      num_samples=n_verify, base_delta=base, verification_candidates=num_candidates,
      estimation_samples=estimation_samples, verification_samples=len(DIRECTIONS) * n_verify,
      estimation_samples_per_sweep=len(DIRECTIONS) * estimation_samples,
      seconds_per_sample=cost, measured=measured, devices_here=mesh.size,
      seconds_here=here + figure_seconds, seconds_per_extra_sweep=sweep_seconds,
      target_devices=target_devices, seconds_on_target=on_target + figure_seconds,
      device_hours_on_target=device_hours, memory_per_device=memory, block_size=block_size,
      iterations=kernel.iterations, precision=precision, compile_seconds=compile_seconds,
      report_seconds=report_seconds, blocks_per_call=per_call, initial_seconds=initial_seconds,
      seconds_after_plan=after_plan + figure_seconds, estimation_sweeps=sweeps,
      figure_seconds=figure_seconds)


def _tilted_plan(mechanism, epsilon, delta, monte_carlo, run, devices: int, target_devices,
                 samples_per_second, report, figure_seconds):
  """``tilted_plan.tilted_capacity_plan``, or None when "auto" resolves to plain sampling;
  the arguments it cannot honour refused first, naming them."""
  for argument, given, why in (
      ('samples_per_second', samples_per_second is not None,
       'cannot stand in for a tilted run: its host tables and tuple draws are measured here'),
      ('target_devices', target_devices not in (None, devices),
       f'must be the devices here ({devices}) for a tilted run: every process draws the '
       "tuples of all devices' blocks, so the host time does not scale with devices")):
    if given:
      raise InputError(argument=argument, requirement=why,
                       suggestion={'monte_carlo.proposal': 'plain'})
  return tilted_plan.tilted_capacity_plan(
      mechanism, epsilon=epsilon, delta=delta, report_epsilons=report,
      figure_seconds=figure_seconds, monte_carlo=monte_carlo, run=run)
