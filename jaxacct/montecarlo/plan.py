"""Capacity plan of a Monte Carlo calibration: samples, measured throughput, projected time.

Before a production verification (seed 000 §7.4: ~10¹⁰ samples per σ) a user needs to know
what it costs. ``capacity_plan`` counts the samples ``calibrate_noise_multiplier`` draws —

- verification: N per direction (Fact 4.2 of Chua et al. through ``evr.resolve_sample_size``)
  in one shared-draws pass over the k Monte Carlo candidates;
- estimation: each σ sweep draws ``estimation_samples`` per direction for 16 candidates; the
  search makes at least 2 sweeps (a coarse bracket and a fine grid), more when the initial
  guess is far off (each extra sweep is reported);

— and times the same programs here: the median of 3 calls (one block per device) of the
shared-draws program (``stream.SharedDraws``) with 1 and with 16 candidates on the local
devices, after a compiling call, which gives the
cost per sample c(K) = c₀ + K·c₁ (one draw, K recursions). Projections: wall time here, and on N
devices assuming linear scaling in the device count (blocks are independent; the per-block
sums all-gathered per call are a few kB), device-hours, and the memory per device of one call
(XLA's compiled memory analysis, where the backend gives it).

A user who knows the throughput of their accelerator passes ``samples_per_second`` (one-σ
samples per second per device); the K-candidate cost then follows the ratio c(16)/c(1)
measured on this machine if ``measure_ratio`` or else ``DEFAULT_CANDIDATE_COST`` (the ratio
recorded in benchmarks/RESULTS.md at the production shape: 16 σ cost 6.45 × one σ).

Host code around short device runs.
"""

from __future__ import annotations

import dataclasses
import time

import jax
import numpy as np

from jaxacct import _validate
from jaxacct._precision import scoped_x64
from jaxacct.mechanism import MatrixMechanism
from jaxacct.montecarlo import evr, kernels, program32, sampling, stream
from jaxacct.montecarlo import keys as keys_lib
from jaxacct.montecarlo import options as options_lib
from jaxacct.montecarlo.sharding import SampleMesh
from jaxacct.errors import InputError
from jaxacct.progress import format_seconds

SWEEP_CANDIDATES = 16  # σ per estimation sweep (calibration.py)
MIN_SWEEPS = 2
DEFAULT_CANDIDATE_COST = (6.45 - 1.0) / 15.0  # c₁/c₀ from 16 σ = 6.45 × one σ (RESULTS.md)
_TIMED_CALLS = 3  # calls timed after the compiling one (median)


@dataclasses.dataclass(frozen=True)
class CapacityPlan:
  """What a calibration costs (see the module docstring).

  Attributes:
    num_samples / base_delta: verification N per direction and candidate, and δ_b.
    verification_candidates: Monte Carlo candidates verified (plus the fallback, free).
    estimation_samples: samples per direction of each estimation sweep.
    verification_samples / estimation_samples_per_sweep: draws of each phase (both
      directions; one draw serves all candidates of a pass).
    seconds_per_sample: {1: c(1), 16: c(16), k: c(k)} seconds per draw on all devices here.
    measured: True when timed here, False when from ``samples_per_second``.
    devices_here: devices the rate refers to.
    seconds_here: projected wall time here with the minimum of 2 sweeps, the compiles and the
      report curve; seconds_per_extra_sweep: each further sweep.
    compile_seconds: the run's compiles (sweep, verification and one-σ programs), measured
      here as the first timed call's excess (0 when not measured).
    report_seconds: the CLI's report curve (one sweep's draws at one σ).
    target_devices: N for the projection; seconds_on_target / device_hours_on_target.
    memory_per_device: bytes of one call's arguments, outputs and temporaries (or None).
    block_size / iterations: the kernel's block and n.
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

  def to_dict(self) -> dict:
    record = dataclasses.asdict(self)
    record['seconds_per_sample'] = {str(k): v for k, v in self.seconds_per_sample.items()}
    return record


def _time_program(program, mesh: SampleMesh, block_size: int, calls: int = _TIMED_CALLS,
                  statistic=np.median):
  """(seconds per sample of one call of ``program`` after compiling, the call's key and block
  ids, seconds of its compile: the first call less the ``statistic`` of the others)."""
  key = keys_lib.direction_key(keys_lib.purpose_key(jax.random.key(0), 'estimation'), 'remove')
  seconds = []
  for _ in range(1 + calls):  # the first call compiles
    _, _, ids = next(mesh.calls(0, mesh.size, 1))
    start = time.perf_counter()
    if program.precision == 'float32':
      jax.block_until_ready(program.losses_and_margins(key, 0, mesh.size, 'remove'))
    else:
      jax.block_until_ready(program(key, ids, 'remove'))
    seconds.append(time.perf_counter() - start)
  steady = float(statistic(seconds[1:]))
  return steady / (mesh.size * block_size), (key, ids), max(0.0, seconds[0] - steady)


def _timed_cost(mechanism: MatrixMechanism, kernel, mesh: SampleMesh, block_size: int,
                num_candidates: int, calls: int = _TIMED_CALLS,
                statistic=np.median) -> tuple[float, int | None]:
  """(seconds per sample of one call with K candidates after compiling, bytes per device,
  seconds its compile took: the first call's time less a compiled call's)."""
  sigmas = mechanism.noise_multiplier * 1.01 ** np.arange(num_candidates, dtype=np.float64)
  program = stream.shared_draws_program(mechanism, kernel, sigmas, block_size, mesh)
  cost, (key, ids), compile_seconds = _time_program(program, mesh, block_size, calls, statistic)
  memory = program.draws_memory(key, ids, 'remove')
  if memory is not None:
    # The recursion pass holds the draws plus one (K, block) loss row per candidate.
    memory += 2 * num_candidates * block_size * 8
  return cost, memory, compile_seconds


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


@scoped_x64
def program_seconds(program, mesh: SampleMesh, block_size: int, blocks: int) -> float:
  """Projected wall time of ``blocks`` blocks of ``program`` on ``mesh``, from one timed call
  after its compiling one (the run's own program, so the run reuses the compile)."""
  if blocks <= 0:
    return 0.0
  return blocks * block_size * _time_program(program, mesh, block_size, calls=1)[0]


@scoped_x64
def seconds_per_sample(mechanism: MatrixMechanism, dtype: np.dtype, num_candidates: int = 1,
                       devices=None, calls: int = _TIMED_CALLS, statistic=np.median) -> float:
  """Seconds per sample (one draw, ``num_candidates`` σ) of ``mechanism`` in ``dtype``'s program
  on the local devices (``statistic`` of ``calls`` calls of one block per device after
  compiling: the median for plans, the minimum for benchmarks on a shared machine)."""
  mesh = SampleMesh.over(jax.local_devices() if devices is None else devices)
  kernel = kernels.kernel_for(mechanism, np.dtype(dtype))
  return _timed_cost(mechanism, kernel, mesh, sampling.default_block_size(kernel.iterations),
                     num_candidates, calls, statistic)[0]


@scoped_x64
def capacity_plan(mechanism: MatrixMechanism, *, epsilon: float, delta: float,
                  num_samples: int | None = None, base_delta: float | None = None,
                  estimation_samples: int | None = None, num_candidates: int = 8,
                  target_devices: int | None = None, samples_per_second: float | None = None,
                  precision: str = 'float64', devices=None,
                  run: options_lib.RunOptions | None = None) -> CapacityPlan:
  """The capacity plan of ``calibrate_noise_multiplier`` for ``mechanism``'s scheme and strategy.

  Args:
    mechanism: scheme and strategy (σ only sets the timed candidates' scale).
    epsilon, delta, num_samples, base_delta, estimation_samples, num_candidates: as
      ``calibrate_noise_multiplier`` (the same defaults).
    target_devices: N devices to project to (default: the devices here).
    samples_per_second: one-σ samples per second per device, instead of measuring.
    precision: the device program timed: ``"float64"`` or ``"float32"`` (the 32-bit program;
      refused with the reason for a mechanism it does not serve).
    devices: local devices to time on (default all local devices).
    run: ``RunOptions``; only its ``devices`` matter here (give them there or as a keyword).

  References:
    Dong & Ganesh, arXiv 2602.09338v2, App. A and §7.4; Chua et al., AISTATS 2025, Fact 4.2.
  """
  sampling.check_mechanism(mechanism)
  _validate.finite_real('epsilon', epsilon)
  n_verify, base = evr.resolve_sample_size(delta, num_samples, base_delta)
  if estimation_samples is None:
    estimation_samples = evr.default_estimation_samples(n_verify, base)
  estimation_samples = _validate.integer_at_least('estimation_samples', estimation_samples, 1)
  num_candidates = _validate.integer_at_least('num_candidates', num_candidates, 1)
  devices = options_lib.resolve(run, 'capacity_plan', devices=devices).devices
  mesh = SampleMesh.over(jax.local_devices() if devices is None else devices)
  if target_devices is None:
    target_devices = mesh.size
  target_devices = _validate.integer_at_least('target_devices', target_devices, 1)
  if precision not in ('float64', 'float32'):
    raise InputError(f'precision must be "float64" or "float32", got {precision!r}')
  kernel = kernels.kernel_for(mechanism, np.dtype(precision))
  if precision == 'float32' and not stream.uses_program32(mechanism, kernel):
    raise InputError('precision="float32" cannot serve this mechanism: '
                     + program32.refusal(mechanism, kernel))
  block_size = sampling.default_block_size(kernel.iterations)
  if samples_per_second is not None:
    rate = _validate.positive_finite('samples_per_second', samples_per_second)
    one = 1.0 / (rate * mesh.size)
    cost = {1: one, SWEEP_CANDIDATES: one * (1 + DEFAULT_CANDIDATE_COST * 15)}
    memory, measured, compile_seconds = None, False, 0.0
  else:
    one, _, compile_one = _timed_cost(mechanism, kernel, mesh, block_size, 1)
    sweep, memory, compile_sweep = _timed_cost(mechanism, kernel, mesh, block_size,
                                               SWEEP_CANDIDATES)
    # A draw serving 16 σ costs at least one serving one σ: a lower reading is timing noise
    # of two short calls, not a cheaper program.
    cost, measured = {1: one, SWEEP_CANDIDATES: max(sweep, one)}, True
    # The run compiles the sweep program, the verification's (K candidates: timed as the
    # sweep's, the larger of the two) and the report curve's one-σ program; this plan's own
    # compiles of the first and the last are in the persistent cache, if one is on.
    compile_seconds = compile_one + compile_sweep * (1 if num_candidates == SWEEP_CANDIDATES
                                                     else 2)
  per_candidate = (cost[SWEEP_CANDIDATES] - cost[1]) / (SWEEP_CANDIDATES - 1)
  cost[num_candidates] = cost[1] + per_candidate * (num_candidates - 1)
  verification = 2 * n_verify
  per_sweep = 2 * estimation_samples
  sweep_seconds = per_sweep * cost[SWEEP_CANDIDATES]
  sampling_here = MIN_SWEEPS * sweep_seconds + verification * cost[num_candidates]
  # The CLI's report curve: δ̂(ε) at the released σ from one sweep's worth of one-σ draws.
  report_seconds = per_sweep * cost[1]
  here = sampling_here + compile_seconds + report_seconds
  on_target = ((sampling_here + report_seconds) * mesh.size / target_devices
               + compile_seconds)
  return CapacityPlan(
      num_samples=n_verify, base_delta=base, verification_candidates=num_candidates,
      estimation_samples=estimation_samples, verification_samples=verification,
      estimation_samples_per_sweep=per_sweep, seconds_per_sample=cost, measured=measured,
      devices_here=mesh.size, seconds_here=here, seconds_per_extra_sweep=sweep_seconds,
      target_devices=target_devices, seconds_on_target=on_target,
      device_hours_on_target=on_target * target_devices / 3600.0,
      memory_per_device=memory, block_size=block_size, iterations=kernel.iterations,
      precision=precision, compile_seconds=compile_seconds, report_seconds=report_seconds)
