"""Choose the smallest noise multiplier σ that passes Estimate-Verify-Release (host driver).

1. Fix the verification budget: N and δ_b from the target δ (``evr.resolve_sample_size``).
2. Fallback σ_up: the fallback accountant's σ at (ε, δ_b) (default the unamplified Gaussian
   bound, ``deterministic.unamplified``; any registered accountant that supports the scheme).
3. Initial guess: Poisson DP-SGD's PLD σ at the expected participation rate,
   times the maximum column norm of C (``noise_multiplier`` is not normalised
   by ‖c_col‖). It is a guess, not a lower bound: b-min-sep can need less.
4. Bracket and refine on the *estimation* stream: batches of σ candidates on a
   geometric grid share draws (``candidates.py``); the bracket is extended
   down until a candidate fails (δ̂ > δ_b in some direction) and up until one
   passes, then refined to ``grid_ratio``.
5. Fix the candidate grid σ* · grid_ratio^j around the estimated boundary,
   append σ_up, and run Algorithm 5 on fresh *verification* draws.

With ``estimate_only=True`` the run stops after step 4 and returns the estimated σ̂ (the
boundary of step 5) with the range the estimation's ±2 standard errors leave open
(``SigmaEstimate``) and what step 5 would cost (``VerificationPlan``): an estimate, not a
guarantee (``Guarantee.method == "estimate"``). The ledger is neither read nor charged.

Before a run, a projection past ``LONG_RUN_SECONDS`` is logged (one WARNING line on the
``jaxacct`` logger) with how to bound it (``max_seconds=``) or get an estimate instead; runs
whose sample counts cannot take that long even at ``plan.SLOWEST_SAMPLE_ROUNDS_PER_SECOND`` are
not timed for it (``plan.needs_timing``). Progress covers the whole run: each phase is
announced to the progress callback (``progress.expect``: the labels "estimation sweep 1/2",
"verification" and their relative costs), so a ``progress.Reporter`` gives the whole run's ETA.

References:
  Andy Dong and Arun Ganesh, "Privacy Amplification for BandMF via b-Min-Sep Subsampling",
  arXiv:2602.09338 (v2): App. A (Algorithm 5 with candidates at powers of 1.01, fallback to an
  exactly accounted mechanism), §7.1 (docs/references.md).
"""

from __future__ import annotations

import contextlib
import contextvars
import dataclasses
from typing import Any
import logging
import math
import time

import jax
import numpy as np

from jaxacct import _validate
from jaxacct.guarantee import Guarantee
from jaxacct.mechanism import MatrixMechanism
from jaxacct.montecarlo.evr import candidates as candidates_lib
from jaxacct.montecarlo.evr import checkpoint as checkpoint_lib
from jaxacct.montecarlo.engine import sharding
from jaxacct.deterministic import tilt_bound
from jaxacct.montecarlo.evr import bounds as evr, search_start, verification
from jaxacct.montecarlo.evr import tilted as tilted_lib
from jaxacct.montecarlo.evr import tilted_plan, tilted_search
from jaxacct.montecarlo.engine import keys as keys_lib
from jaxacct.montecarlo.evr import ledger as ledger_lib
from jaxacct.montecarlo.evr import plan as plan_lib
from jaxacct.montecarlo.evr import precision as precision_lib
from jaxacct import progress as progress_lib
from jaxacct.conventions import DIRECTIONS, Method
from jaxacct import options as options_lib

_SWEEP = search_start.SWEEP_CANDIDATES
_LOG = logging.getLogger(__name__)  # under the library's logger, 'jaxacct'

LONG_RUN_SECONDS = 120.0
"""A calibration whose capacity plan projects more seconds than this here is announced before
it starts: one WARNING line on the ``jaxacct`` logger (shown on stderr by Python's last-resort
handler when logging is not configured, and by the CLI) with the projection, and how to bound
it (``max_seconds=``) or get an estimated σ first (``estimate_only=True``). Change it to move
the threshold; ``math.inf`` turns the line (and the timing behind it) off."""

ESTIMATE_LABEL = 'estimate, not a guarantee'
"""How an estimated σ is labelled wherever it appears (the result, its JSON, the CLI, figures)."""

ACCELERATOR_HINT = ('accelerators (TPU/GPU) run the float32 program: '
                    'jaxacct.montecarlo.evr.plan.capacity_plan(..., '
                    "monte_carlo=jaxacct.MonteCarloOptions(precision='float32'), "
                    'target_devices=N) projects it (from the command line: jaxacct plan)')
"""Where a verification too slow here can run, and how to project it (as ``jaxacct plan``)."""

_STANDARD_ERRORS = 2.0  # the estimate's band: δ̂ ± 2 s.e. (as estimator.resolved_epsilon)

_CALLER_PLANNED = contextvars.ContextVar('jaxacct_caller_planned', default=False)


@contextlib.contextmanager
def planned_by_caller():
  """Within it, ``calibrate_noise_multiplier`` makes no capacity plan of its own for the
  announcement (``LONG_RUN_SECONDS``) and logs none: for a caller that has printed the run's
  plan itself (the ``jaxacct calibrate`` command). ``max_seconds`` and ``estimate_only`` still
  plan."""
  token = _CALLER_PLANNED.set(True)
  try:
    yield
  finally:
    _CALLER_PLANNED.reset(token)


class CalibrationError(RuntimeError):
  """The σ search could not bracket the target (e.g. it needs σ beyond the fallback)."""


@dataclasses.dataclass(frozen=True)
class SweepRecord:
  """One estimation sweep: candidate σ and their max-direction δ̂(ε) on the estimation stream,
  with the larger of the two directions' standard errors (empty in records made before it was
  kept)."""

  sigmas: tuple[float, ...]
  delta_hat: tuple[float, ...]
  standard_error: tuple[float, ...] = ()


@dataclasses.dataclass(frozen=True)
class VerificationRecord:
  """Algorithm 5's verified candidates (last = fallback), outcomes and per-direction δ̂(ε)."""

  sigmas: tuple[float, ...]
  accepted: tuple[bool, ...]
  delta_hat: dict


@dataclasses.dataclass(frozen=True)
class CalibrationRecord:
  """The search history of ``calibrate_noise_multiplier`` (what ``report`` plots).

  Attributes:
    base_delta: δ_b. num_samples: verification samples per direction and candidate.
    sigma_up: the fallback σ (proven by ``fallback_accountant``). initial_guess: the search's
    start. estimation_samples: samples per direction of each sweep. sweeps: the estimation
    sweeps in order. verification: the verified candidates and outcomes.
    fallback_accountant: the deterministic accountant that proves σ_up.

  ``record[key]`` reads the JSON form (``to_dict``), the form ``Calibration.record`` had
  before it was typed.
  """

  base_delta: float
  num_samples: int
  sigma_up: float
  initial_guess: float
  estimation_samples: int
  sweeps: tuple[SweepRecord, ...]
  verification: VerificationRecord
  fallback_accountant: str = verification.DEFAULT_FALLBACK

  def to_dict(self) -> dict:
    """JSON-ready nested dicts and lists."""
    record = dataclasses.asdict(self)
    record['sweeps'] = [{'sigmas': list(s.sigmas), 'delta_hat': list(s.delta_hat),
                         'standard_error': list(s.standard_error)} for s in self.sweeps]
    record['verification'] = {'sigmas': list(self.verification.sigmas),
                              'accepted': list(self.verification.accepted),
                              'delta_hat': self.verification.delta_hat}
    return record

  def __getitem__(self, key: str):
    return self.to_dict()[key]


@dataclasses.dataclass(frozen=True)
class VerificationPlan:
  """What verifying an estimated σ would take: Algorithm 5 on fresh verification draws
  (Dong & Ganesh (2026) App. A), as the capacity plan (``plan.capacity_plan``) projects it here.

  Attributes:
    num_samples: N per direction and candidate (the minimum for δ_b at the declared
      ``attempt``, or the ``num_samples`` given; the ledger is not read: the verification
      checks it, and a recorded earlier run makes it a later attempt with a larger N).
    base_delta: δ_b. attempt: the attempt N is sized for.
    candidates: Monte Carlo candidates verified in one pass (plus the fallback σ_up, proven
      without sampling). draws: the draws of that pass, both directions.
    seconds_here: the plan's projection of the verification's sampling here (the calls of its
      k-candidate program on ``devices_here`` ``backend`` devices in ``precision``).
    calibration_seconds_here: the whole verified calibration (sweeps, verification, compiles,
      starting points) projected for a fresh process here.
    accelerator_hint: where a verification too slow here runs, and how to project it there.
  """

  num_samples: int
  base_delta: float
  attempt: int
  candidates: int
  draws: int
  seconds_here: float
  calibration_seconds_here: float
  devices_here: int
  backend: str
  precision: str
  accelerator_hint: str = ACCELERATOR_HINT

  def to_dict(self) -> dict:
    return dataclasses.asdict(self)


@dataclasses.dataclass(frozen=True)
class SigmaEstimate:
  """The answer of ``calibrate_noise_multiplier(..., estimate_only=True)``: an estimated σ̂ with
  the range its estimation leaves open — an estimate, not a guarantee — and the verification
  plan that would make it one.

  **σ̂** is the smallest σ of the fine sweep (step ``grid_ratio``) whose estimation δ̂(ε) is
  ≤ δ_b in both directions: the boundary a verified calibration with the same key and
  options centres its candidates on.

  **The range.** Every sweep draws the same samples of the key's estimation stream (common
  random numbers), so the sweeps together trace one δ̂(σ) at every swept σ, each with its
  standard error (the larger of the two directions', as ``DeltaEstimate.resolved_epsilon``).
  A swept σ *surely fails* when δ̂ − 2 s.e. > δ_b, and *surely passes* when δ̂ + 2 s.e. < δ_b
  and δ_b is above the resolution 3/N of the N estimation samples (the rule of three: with no
  term above 0 among N draws of a term in [0, 1], a mean up to 3/N is not excluded at 95 %).
  ``low`` is the smallest swept σ above every σ that surely fails; ``high`` the smallest swept
  σ from which every swept σ surely passes. In between, the estimation cannot tell whether
  δ(ε) ≤ δ_b. When no σ surely passes, ``high`` is σ_up, the fallback's proven σ (Algorithm 5
  releases it when every Monte Carlo candidate fails, so a verified σ is never above it) and
  ``needed_samples`` says how many estimation samples per direction would resolve an end below
  it; when none surely fails, ``low`` is the smallest σ swept (``low_resolved`` False). The
  range always contains σ̂.

  What it is not: a confidence interval with a guarantee. The band is pointwise (about 95 %
  at each σ under the normal approximation, not simultaneously over σ), its standard error is
  itself estimated (unreliable when few draws have a loss above ε), and its ends are grid
  points (``grid_ratio`` apart on the fine sweep, 1.05 on a coarse one). A verified
  calibration of the same key releases the smallest candidate whose δ̂ on N fresh draws
  (N ≫ the estimation's) is ≤ δ_b, i.e. close to the σ where the true δ(ε) = δ_b: inside the
  range unless the estimation's δ̂ erred by more than 2 s.e. there, the verification's own
  error moved it past an end by a grid step, or every candidate failed and σ_up was released.

  Attributes:
    noise_multiplier: σ̂. low, high: the range (``low_resolved``, ``high_resolved``: each end
      is set by a σ that surely fails / surely passes, not by the swept or fallback limit).
    epsilon, base_delta: ε and the threshold δ_b the estimate was compared with.
    delta_hat, standard_error: per direction, δ̂(ε) at σ̂ and its standard error.
    estimation_samples: N per direction of each sweep. needed_samples: with
      ``high_resolved`` False, the estimation samples per direction that would let some swept σ
      below σ_up surely pass (from the s.e.'s 1/√N scaling, at least 3/δ_b), else None.
    seconds_here: the capacity plan's projection of this estimate here.
    verification: what verifying it would take (``VerificationPlan``).
    label: ``ESTIMATE_LABEL``.
  """

  noise_multiplier: float
  low: float
  high: float
  low_resolved: bool
  high_resolved: bool
  epsilon: float
  base_delta: float
  delta_hat: dict
  standard_error: dict
  estimation_samples: int
  needed_samples: int | None
  seconds_here: float
  verification: VerificationPlan
  label: str = ESTIMATE_LABEL

  def to_dict(self) -> dict:
    record = dataclasses.asdict(self)
    record['verification'] = self.verification.to_dict()
    return record


@dataclasses.dataclass(frozen=True)
class Calibration:
  """Result of ``jaxacct.calibrate`` and ``calibrate_noise_multiplier``.

  Attributes:
    mechanism: the released mechanism (scheme, matrix, calibrated σ); with ``estimate_only``,
      the mechanism at the estimated σ̂ (not released: nothing was verified).
    guarantee: its (ε, δ) guarantee and how it was obtained (``method="estimate"`` and
      ``verified`` False for an estimate: not a guarantee).
    candidates: the σ list that was verified (increasing; last = fallback σ_up); empty for an
      estimate and for a deterministic calibration.
    record: the Monte Carlo search history (``CalibrationRecord``): estimation sweeps (σ,
      max-direction δ̂) and the verification outcome per candidate; None for a deterministic
      calibration.
    charge: the verification's ledger entry (``verification.Verification.charge``); None for
      an estimate, which is never charged, and for a deterministic calibration.
    estimate: for ``estimate_only``, σ̂ with its range and verification plan
      (``SigmaEstimate``); None otherwise.
    choice: which accountant answered and why (``accounting.AccountantChoice``; set by
      ``jaxacct.calibrate``, None from ``calibrate_noise_multiplier`` called directly).
    curve: a deterministic calibration's privacy curve at the released σ (the accountant's
      ``PrivacyCurve``; ``explain`` reads it); None for Monte Carlo.
    plan_check: when the run was planned (a ``max_seconds`` budget, ``estimate_only``, or a
      run projected past ``LONG_RUN_SECONDS``): ``projected_seconds`` (the capacity plan's
      projection of this run here: sweeps, verification, compiles and starting points) beside
      ``measured_seconds`` (the whole call), so a plan's error is seen; None otherwise.
  """

  mechanism: MatrixMechanism
  guarantee: Guarantee
  candidates: tuple[float, ...]
  record: CalibrationRecord | None
  charge: dict | None = None
  estimate: SigmaEstimate | None = None
  choice: Any = None
  curve: Any = None
  plan_check: dict | None = None

  @property
  def estimate_only(self) -> bool:
    """True for the answer of ``estimate_only=True``: an estimate, not a guarantee."""
    return self.estimate is not None

  def __repr__(self) -> str:
    """One line: the released guarantee and how many candidates were verified (or σ̂, its
    range and the verification it needs, labelled an estimate)."""
    if self.estimate is None:
      return f'Calibration({self.guarantee!r}, candidates={len(self.candidates)})'
    e, plan = self.estimate, self.estimate.verification
    return (f'Calibration(σ̂={e.noise_multiplier:.6g} in [{e.low:.4g}, {e.high:.4g}] at '
            f'(ε, δ_b)=({e.epsilon:.6g}, {e.base_delta:.4g}): {e.label}; to verify: '
            f'{plan.num_samples:,} samples per direction × {plan.candidates} candidates, '
            f'{progress_lib.format_seconds(plan.seconds_here)} here)')

  def explain(self) -> dict:
    """Which accountant answered and why: the choice (requested, accountant, reason,
    adjacency) and, for a deterministic calibration, its curve's own explanation at δ (for
    ``"auto"``: every supporting accountant's ε(δ) and the one that gave it)."""
    explained = {} if self.choice is None else self.choice.to_dict()
    if self.curve is not None:
      explained['curve'] = self.curve.explain(self.guarantee.delta)
    if self.record is not None:
      explained['fallback'] = self.record.fallback_accountant
    return explained

  def to_dict(self) -> dict:
    """JSON-ready: the guarantee's fields (``Guarantee.to_dict``: ``verified`` False and
    ``method`` "estimate" for an estimate), ``estimate_only``, the verified ``candidates``,
    the search ``record``, the ledger ``charge``, for an estimate its ``label`` and
    ``estimate`` (``SigmaEstimate.to_dict``), and ``choice`` and ``plan_check`` when known."""
    record = {**self.guarantee.to_dict(), 'estimate_only': self.estimate_only,
              'candidates': list(self.candidates),
              'record': None if self.record is None else self.record.to_dict(),
              'charge': self.charge}
    if self.estimate is not None:
      record.update(label=self.estimate.label, estimate=self.estimate.to_dict())
    if self.choice is not None:
      record['choice'] = self.choice.to_dict()
    if self.plan_check is not None:
      record['plan_check'] = dict(self.plan_check)
    return record


def _sweeps_band(sweeps):
  """(σ, δ̂, s.e.) of every swept σ, sorted by σ (sweeps of one stream: one δ̂(σ))."""
  sigmas = np.concatenate([np.asarray(s.sigmas, np.float64) for s in sweeps])
  mean = np.concatenate([np.asarray(s.delta_hat, np.float64) for s in sweeps])
  error = np.concatenate([np.asarray(s.standard_error, np.float64) for s in sweeps])
  order = np.argsort(sigmas, kind='stable')
  return sigmas[order], mean[order], error[order]


def sigma_range(sweeps, *, base_delta: float, estimation_samples: int, sigma_hat: float,
                sigma_up: float, z: float = _STANDARD_ERRORS) -> tuple:
  """(low, high, low_resolved, high_resolved, needed_samples) of ``SigmaEstimate`` (its
  docstring derives them) from the ``SweepRecord`` s of one estimation stream."""
  sigmas, mean, error = _sweeps_band(sweeps)
  fails = np.flatnonzero(mean - z * error > base_delta)
  resolvable = 3.0 / estimation_samples < base_delta
  passes = (mean + z * error < base_delta) & resolvable
  low_resolved = bool(fails.size)
  low = float(sigmas[min(fails[-1] + 1, sigmas.size - 1)] if low_resolved else sigmas[0])
  # The smallest σ from which every swept σ surely passes (a suffix of the sorted σ).
  suffix = np.flip(np.logical_and.accumulate(np.flip(passes)))
  high_resolved = bool(suffix.any())
  high = float(sigmas[np.argmax(suffix)]) if high_resolved else float(sigma_up)
  needed = None
  if not high_resolved:
    rule_of_three = math.ceil(3.0 / base_delta) + 1
    below = (mean < base_delta) & (sigmas < sigma_up)
    needed = rule_of_three
    if below.any():
      scale = (z * error[below] / (base_delta - mean[below]))**2
      needed = max(rule_of_three, math.ceil(estimation_samples * float(scale.min())) + 1)
  return min(low, sigma_hat), max(high, sigma_hat), low_resolved, high_resolved, needed


def _phase_seconds(plan: plan_lib.CapacityPlan) -> tuple[float, float, float]:
  """(sweeps, verification, compiles and starting points) of a capacity plan made without a
  report curve: its sampling after the plan is the projected sweeps plus the verification."""
  sweeps = plan.estimation_sweeps * plan.seconds_per_extra_sweep
  verification = plan.seconds_after_plan - plan.report_seconds - sweeps
  return sweeps, verification, plan.compile_seconds + plan.initial_seconds


def _announce(plan: plan_lib.CapacityPlan, estimate_only: bool, estimation_samples: int,
              max_seconds: float | None, progress) -> None:
  """The WARNING line of a run projected past ``LONG_RUN_SECONDS`` (process 0 only)."""
  sweeps, verification_seconds, fixed = _phase_seconds(plan)
  seconds = progress_lib.format_seconds
  where = f'{plan.devices_here} {jax.default_backend()} device(s), {plan.precision}'
  if estimate_only:
    projected = sweeps + fixed
    if projected <= LONG_RUN_SECONDS:
      return
    message = (f'jaxacct: this σ estimate is projected to take {seconds(projected)} here '
               f'({where}: {plan.estimation_sweeps} estimation sweeps of 16 σ × '
               f'{estimation_samples:,} samples per direction); ')
  else:
    projected = plan.seconds_here
    if projected <= LONG_RUN_SECONDS:
      return
    message = (f'jaxacct: this calibration is projected to take {seconds(projected)} here '
               f'({where}: {plan.estimation_sweeps} estimation sweeps {seconds(sweeps)}, '
               f'verification of {plan.verification_candidates} candidates × '
               f'{plan.num_samples:,} samples per direction {seconds(verification_seconds)}); ')
  if max_seconds is None:
    message += 'max_seconds= bounds it (refused before any sample when over)'
  else:
    message += f'within max_seconds = {max_seconds:g} s'
  # The fewest estimation samples whose ±2 s.e. band can resolve σ̂'s range (SigmaEstimate),
  # and the sweeps' time with them (linear in the samples).
  fewest = math.ceil(3.0 / plan.base_delta) + 1
  quicker = (f'{seconds(sweeps * fewest / estimation_samples + fixed)} with '
             f'estimation_samples={fewest:,}, the fewest that can resolve its range')
  if estimate_only:
    message += '; fewer estimation_samples= make it quicker and its range wider' + (
        f' ({quicker})' if fewest < estimation_samples else '')
  else:
    message += (f'; estimate_only=True gives an estimated σ ({ESTIMATE_LABEL}) with its '
                f'verification plan in {seconds(sweeps + fixed)}'
                + (f' ({quicker})' if fewest < estimation_samples else ''))
  if progress is None:  # nobody watching a terminal: say how to follow it anyway
    message += ('; progress=jaxacct.progress.Reporter() (or JAXACCT_PROGRESS=1) reports its '
                'progress off a terminal')
  _LOG.warning(message)


@options_lib.moved
def calibrate_noise_multiplier(scheme, matrix, *, epsilon: float, delta: float, key,
                               monte_carlo: options_lib.MonteCarloOptions | None = None,
                               run: options_lib.RunOptions | None = None) -> Calibration:
  """Smallest σ (on a ``grid_ratio`` grid) whose mechanism passes Algorithm 5 at (ε, δ).

  Before it starts, a run whose capacity plan projects more than ``LONG_RUN_SECONDS`` (2 min)
  here logs one WARNING line on the ``jaxacct`` logger: the projection, and how to bound it
  (``max_seconds=``) or get an estimate first (``estimate_only=True``). The plan (a few timed
  calls, whose compiles the run reuses) is made only for a run whose sample counts could take
  that long (``plan.needs_timing``), when ``max_seconds`` is given, and for an
  estimate (its verification plan).

  Args:
    scheme: the sampling scheme.
    matrix: the strategy matrix (``BandedToeplitz``, or ``LowerTriangular`` for App. B bounds).
    epsilon: target ε.
    delta: target overall δ ∈ (0, 1).
    key: typed JAX key (estimation and verification use separate streams of it).
    monte_carlo: ``MonteCarloOptions`` (every field is used):

      - num_samples: verification samples per direction and candidate (default:
        ``evr.minimum_samples(δ_b, δ)`` for this attempt).
      - base_delta: δ_b (default: δ/2, or the largest one N supports).
      - grid_ratio: ratio between consecutive candidate σ (> 1).
      - shared_draws: common random numbers across σ (default; see ``candidates.py``).
      - estimation_samples: samples per direction for the estimation search
        (default min(⌊N/4⌋, ⌈50/δ_b⌉), at least 1000: the search only places the
        candidate grid, so a ~15–30 % relative error on δ̂ at δ_b is enough and
        keeps the search no dearer than the verification). For ``estimate_only`` they set
        the estimate's cost and the width of its range (fewer than 3/δ_b cannot resolve its
        upper end: ``SigmaEstimate``).
      - num_candidates: Monte Carlo candidates verified (plus the fallback).
      - attempt: the 1-based index of this verification of the mechanism, at any target
        (``verification.verify``); re-calibrating with a new key, or at another (ε, δ), is
        another attempt. The default ``num_samples`` is the minimum for it.
      - estimate_only: stop after the estimation sweeps and return the estimated σ̂ with its
        range and the verification plan (``Calibration.estimate``, a ``SigmaEstimate``; its
        ``Guarantee`` has ``method="estimate"``, ``verified`` False): an estimate, not a
        guarantee. Nothing is verified, so the ledger is neither read nor charged and no
        fallback is released (σ_up only caps the search). The sweeps are the calibration's
        own (same key, stream and options), so a checkpoint of the estimate lets a verified
        calibration with the same arguments resume after its sweeps.
      - fallback: the deterministic accountant that proves σ_up, the last candidate (an
        accountant or registered name; default ``"unamplified_gaussian"``, which covers every
        scheme; ``"pld"`` gives a smaller σ_up where it applies, e.g. truncated Poisson).
      - precision: ``"float64"`` (default), ``"float32"`` (the 32-bit program with its
        certified margin, for the sweeps and the verification; ``verification.verify``) or
        ``"auto"`` (resolved once, before any compute; ``montecarlo/evr/precision.py``).
    run: ``RunOptions``:

      - devices: devices to shard over (default all devices).
      - progress: called as ``progress(samples_done, samples_total, stage)`` after each call,
        with stage "estimation sweep 1", "estimation sweep 2", … (a coarse bracket of 16 σ
        until it straddles the target, then a fine one) and "verification"; counts restart
        per stage. Each phase is also announced with ``progress.expect`` (labels "estimation
        sweep 1/2", "verification", relative costs), which a ``progress.Reporter`` turns into
        a whole-run ETA; a plain callable sees only the calls above.
      - checkpoint: a folder where the run saves its state (the sweeps done, the phase in
        progress and its float64 sums) every ``checkpoint_interval`` seconds and at every
        phase boundary; calling again with the same arguments resumes and returns bitwise the
        result of an uninterrupted run, on any device count. Other arguments (scheme,
        strategy, ε, δ, key, options, code version) are refused, naming what differs.
      - ledger: a ledger object (default None: the user's ledger file, shared with the CLI;
        an in-memory ``VerificationLedger()`` opts out and the release says "attempts
        unchecked").
      - max_seconds: if given, the calibration's capacity plan (``plan.capacity_plan``: two
        sweeps and the verification, timed here on ``devices``) is made first, and a
        calibration projected to take longer is refused with ``plan.OverBudgetError`` before
        any sweep (the whole calibration is projected, a resumed one too; for
        ``estimate_only``, the sweeps).

  Returns:
    ``Calibration`` (with ``estimate_only``, its ``estimate`` holds σ̂; ``repr`` and
    ``to_dict`` say "estimate, not a guarantee").

  References:
    Dong & Ganesh (2026), App. A (Algorithm 5, Theorem A.1).
  """
  monte_carlo = options_lib.monte_carlo_options(monte_carlo, 'calibrate_noise_multiplier',
                                                CALIBRATE_FIELDS)
  run = options_lib.run_options(run)
  num_samples, base_delta = monte_carlo.num_samples, monte_carlo.base_delta
  estimation_samples, num_candidates = monte_carlo.estimation_samples, monte_carlo.num_candidates
  grid_ratio, attempt, shared_draws = (monte_carlo.grid_ratio, monte_carlo.attempt,
                                       monte_carlo.shared_draws)
  estimate_only, precision = monte_carlo.estimate_only, monte_carlo.precision
  started = time.perf_counter()
  epsilon = _validate.finite_real('epsilon', epsilon)
  # Checks the band against the scheme before any compute (σ is a placeholder).
  placeholder = MatrixMechanism(scheme, matrix, 1.0)
  max_seconds = plan_lib.check_max_seconds(run.max_seconds)
  key = keys_lib.canonicalize_key(key)
  fallback = verification.fallback_accountant(monte_carlo.fallback)
  verification.check_fallback(fallback, placeholder)
  choice = precision_lib.choose(precision, placeholder)
  if monte_carlo.proposal != 'plain':
    tilted = _calibrate_tilted(scheme, matrix, epsilon=epsilon, delta=delta, key=key,
                               monte_carlo=monte_carlo, run=run, fallback=fallback,
                               precision=choice.precision)
    if tilted is not None:  # None: "auto" chose plain sampling
      return tilted
  if estimate_only:
    # Nothing is verified: no ledger is opened, N and δ_b are the declared attempt's.
    ledger = None
    n_verify, base = evr.resolve_sample_size(delta, num_samples, base_delta, attempts=attempt)
  else:
    ledger = ledger_lib.ledger_from(run.ledger)
    # N and δ_b of this attempt; an undeclared retry is refused now, not after the sweeps
    # (its σ are not known yet), and a declared one gets the samples it needs to pass.
    n_verify, base = verification.sample_size(
        ledger, placeholder, epsilon=epsilon, delta=delta, key_data=keys_lib.key_words(key),
        num_samples=num_samples, base_delta=base_delta, shared_draws=shared_draws,
        precision=choice.precision, attempt=attempt)
  if estimation_samples is None:
    estimation_samples = evr.default_estimation_samples(n_verify, base)
  estimation_samples = _validate.integer_at_least('estimation_samples', estimation_samples, 1)
  # The estimate's fingerprint is the calibration's: a verified run resumes after its sweeps.
  saved = checkpoint_lib.open_checkpoint(run.checkpoint, {
      'run': 'calibrate', 'scheme': repr(scheme), 'strategy': repr(matrix.fingerprint),
      'epsilon': epsilon, 'delta': float(delta), 'seed': list(keys_lib.key_words(key)),
      'num_samples': n_verify, 'base_delta': base, 'grid_ratio': grid_ratio,
      'shared_draws': bool(shared_draws), 'estimation_samples': estimation_samples,
      'num_candidates': num_candidates, 'attempt': attempt, 'fallback': fallback.name,
      **({} if choice.precision == 'float64' else {'precision': choice.precision})},
      run.checkpoint_interval)
  if not estimate_only:
    verification.check_checkpoint_charge(saved, ledger)
  # Host decisions from libraries whose last bits may differ between hosts are process 0's.
  sigma_up, guess = sharding.on_leader(lambda: list(search_start.fallback_and_guess(
      scheme, matrix, fallback, epsilon, base)))
  probe = MatrixMechanism(scheme, matrix, guess)
  # The plan, when one is needed: a budget, an estimate's verification plan, or a run whose
  # sample counts could take past LONG_RUN_SECONDS (decided from counts alone, identically
  # on every process: the plan's timed calls run on all of them).
  mesh_size = len(run.devices) if run.devices is not None else jax.device_count()
  # one-σ draws per direction: two sweeps of 16 σ and (unless estimate_only) the k candidates
  sigma_draws = plan_lib.MIN_SWEEPS * _SWEEP * estimation_samples + (
      0 if estimate_only else num_candidates * n_verify)
  plan = None
  if (max_seconds is not None or estimate_only or (
      not _CALLER_PLANNED.get() and math.isfinite(LONG_RUN_SECONDS) and plan_lib.needs_timing(
          placeholder, sigma_draws, LONG_RUN_SECONDS, devices=mesh_size))):
    plan = plan_lib.capacity_plan(probe, epsilon=epsilon, delta=delta, run=run,
                                  monte_carlo=dataclasses.replace(
                                      monte_carlo, num_samples=n_verify, base_delta=base,
                                      estimation_samples=estimation_samples, attempt=1,
                                      precision=choice.precision, fallback=fallback,
                                      shared_draws=True))  # N is this attempt's already
  if max_seconds is not None:
    if estimate_only:
      sweep_seconds, _, fixed = _phase_seconds(plan)
      plan_lib.refuse_over_budget(f'the σ estimate ({plan.estimation_sweeps} sweeps of 16 σ × '
                                  f'{estimation_samples:,} samples per direction)',
                                  sweep_seconds + fixed, max_seconds,
                                  advice='pass a larger max_seconds (or none) to run it '
                                         'anyway, or fewer estimation_samples')
    else:
      plan_lib.refuse_over_budget(f'the calibration ({plan.verification_samples:,} verification '
                                  f'and ≥ {2 * plan.estimation_samples_per_sweep:,} estimation '
                                  f'samples)', plan.seconds_here, max_seconds)
  if plan is not None and not _CALLER_PLANNED.get() and sharding.is_leader():
    _announce(plan, estimate_only, estimation_samples, max_seconds, run.progress)
  phases = _ProgressPlan(run.progress, plan, estimation_samples=estimation_samples,
                         n_verify=n_verify, num_candidates=num_candidates,
                         shared_draws=shared_draws, estimate_only=estimate_only)
  sweeps, last = [], {}
  unbudgeted = dataclasses.replace(run, max_seconds=None)  # the budget was checked above

  def sweep(sigmas, final: bool):
    phases.sweep(len(sweeps) + 1, final)
    phase = checkpoint_lib.Phase(saved, f'estimation-sweep-{len(sweeps)}',
                                 [float(s).hex() for s in sigmas])
    result = candidates_lib.sweep_sigmas(
        key, probe, sigmas, [epsilon], estimation_samples, purpose='estimation',
        shared_draws=shared_draws, precision=choice.precision, run=unbudgeted, phase=phase,
        progress=progress_lib.staged(run.progress, f'estimation sweep {len(sweeps) + 1}'))
    values = result.delta_hat_max[:, 0]
    error = np.maximum(*(result.standard_error[d][:, 0] for d in DIRECTIONS))
    sweeps.append(SweepRecord(tuple(map(float, sigmas)), tuple(values.tolist()),
                              tuple(error.tolist())))
    last.update(result=result)
    return values

  # Coarse bracket: 16 σ spanning a factor ~2 around the current centre.
  coarse = search_start.COARSE_RATIO
  centre = guess
  for _ in range(40):
    sigmas = search_start.coarse_sweep(centre)
    passes = sweep(sigmas, final=False) <= base
    if passes.all():
      centre = sigmas[0] / coarse ** (_SWEEP // 2)
    elif not passes.any():
      if sigmas[-1] >= sigma_up:
        break  # nothing below the fallback passes: Algorithm 5 will release σ_up
      centre = sigmas[-1] * coarse ** (_SWEEP // 2)
    else:
      break
  else:
    raise CalibrationError('could not bracket the noise multiplier in 40 sweeps')
  first_pass = int(np.argmax(passes)) if passes.any() else len(passes)
  high = sigmas[first_pass] if first_pass < len(passes) else sigma_up
  # Fine grid at grid_ratio just below the first coarse pass.
  fine = high * grid_ratio ** -np.arange(_SWEEP - 1, -1, -1, dtype=np.float64)
  fine_passes = sweep(fine, final=True) <= base
  boundary = float(fine[int(np.argmax(fine_passes))]) if fine_passes.any() else float(high)
  if estimate_only:
    estimated = _estimate(scheme, matrix, plan, sweeps, last['result'], boundary=boundary,
                          epsilon=epsilon, delta=delta, base=base, n_verify=n_verify,
                          attempt=attempt, sigma_up=sigma_up, guess=guess,
                          estimation_samples=estimation_samples, shared_draws=shared_draws,
                          fallback=fallback, precision=choice.precision, key=key)
    return _with_plan_check(estimated, estimated.estimate.seconds_here, started)
  # Candidates: the estimated boundary, a few steps below and above, then the fallback.
  grid = search_start.candidate_grid(boundary, sigma_up, grid_ratio, num_candidates)
  candidates = [MatrixMechanism(scheme, matrix, s) for s in grid]
  phases.verification(len(grid) - 1)
  outcome = verification.run_verification(
      key, candidates, epsilon=epsilon, delta=delta,
      monte_carlo=dataclasses.replace(monte_carlo, num_samples=n_verify, base_delta=base,
                                      fallback=fallback, precision=choice.precision),
      run=dataclasses.replace(unbudgeted, ledger=ledger), saved=saved)
  record = CalibrationRecord(
      base_delta=base, num_samples=n_verify, sigma_up=sigma_up, initial_guess=guess,
      estimation_samples=estimation_samples, sweeps=tuple(sweeps),
      verification=VerificationRecord(tuple(grid), tuple(outcome.accepted), outcome.delta_hat),
      fallback_accountant=fallback.name)
  released = Calibration(outcome.mechanism, outcome.guarantee, tuple(grid), record,
                         outcome.charge)
  return released if plan is None else _with_plan_check(released, plan.seconds_here, started)


def _calibrate_tilted(scheme, matrix, *, epsilon: float, delta: float, key,
                      monte_carlo: options_lib.MonteCarloOptions, run: options_lib.RunOptions,
                      fallback, precision: str) -> Calibration | None:
  """The calibration with the tilted proposal (``tilted_search``: a bisection of tilted
  estimates, then Algorithm 5 with the tilt, ``verification.run_verification``), or None when
  ``proposal="auto"`` resolves to plain sampling at the search's initial guess.

  δ_b is the given one or δ/2; each direction's N is sized by the verification from the
  candidates' bounds (``bounds.resolve_direction_sizes``). With ``run.max_seconds`` the run is
  first projected (``tilted_plan.tilted_capacity_plan``: its host tables, one block of draws
  and the device calls timed, the search replayed) and refused over it before the search. Not
  yet with the tilt, refused before any compute: ``estimate_only``.
  """
  tilted_plan.refuse_estimate_only(monte_carlo)
  base = monte_carlo.base_delta if monte_carlo.base_delta is not None else delta / 2
  sigma_up, guess = sharding.on_leader(lambda: list(search_start.fallback_and_guess(
      scheme, matrix, fallback, epsilon, base)))
  budget = monte_carlo.tilt_state_budget or tilt_bound.DEFAULT_STATE_BUDGET
  proposal, order = tilted_plan.resolve_calibration_order(
      monte_carlo, scheme, matrix, guess=guess, sigma_up=sigma_up, epsilon=epsilon,
      base_delta=base, precision=precision, state_budget=budget, progress=run.progress)
  if proposal == 'plain':
    return None
  placeholder = MatrixMechanism(scheme, matrix, 1.0)
  ledger = ledger_lib.ledger_from(run.ledger)
  # An undeclared retry is refused now, before the search (its σ are not known yet).
  verification.check_retry(
      ledger, placeholder, epsilon=epsilon, delta=delta, key_data=keys_lib.key_words(key),
      num_samples=monte_carlo.num_samples, base_delta=monte_carlo.base_delta,
      shared_draws=monte_carlo.shared_draws, precision=precision, attempt=monte_carlo.attempt,
      proposal=proposal)
  saved = checkpoint_lib.open_checkpoint(run.checkpoint, {
      'run': 'calibrate', 'proposal': proposal, 'tilt_order': order, 'state_budget': budget,
      'scheme': repr(scheme), 'strategy': repr(matrix.fingerprint), 'epsilon': epsilon,
      'delta': float(delta), 'seed': list(keys_lib.key_words(key)),
      'num_samples': monte_carlo.num_samples, 'base_delta': base,
      'grid_ratio': monte_carlo.grid_ratio, 'estimation_samples': monte_carlo.estimation_samples,
      'num_candidates': monte_carlo.num_candidates, 'attempt': monte_carlo.attempt,
      'fallback': fallback.name}, run.checkpoint_interval)
  verification.check_checkpoint_charge(saved, ledger)
  # Projected after the knowable refusals (a retry, a checkpoint's charge): the plan costs
  # minutes of host tables at the §7.4 shape.
  if run.max_seconds is not None:
    plan = tilted_plan.tilted_capacity_plan(
        MatrixMechanism(scheme, matrix, guess), epsilon=epsilon, delta=delta,
        monte_carlo=dataclasses.replace(monte_carlo, proposal=proposal, tilt_order=order,
                                        precision=precision),
        run=run)
    plan_lib.refuse_over_budget('the tilted calibration', plan.seconds_after_plan,
                                run.max_seconds)
    run = dataclasses.replace(run, max_seconds=None)  # checked: the phases do not re-plan
  progress_lib.announce(run.progress, f'calibration with the tilted remove direction (α = '
                                      f'{order}): a search of tilted estimates, then the '
                                      'verification')
  boundary, evaluations = tilted_search.boundary(
      key, scheme, matrix, order=order, state_budget=budget, epsilon=epsilon, base_delta=base,
      sigma_up=sigma_up, guess=guess, grid_ratio=monte_carlo.grid_ratio,
      estimation_samples=monte_carlo.estimation_samples, saved=saved, run=run)
  grid = search_start.candidate_grid(boundary, sigma_up, monte_carlo.grid_ratio,
                                     monte_carlo.num_candidates)
  outcome = verification.run_verification(
      key, [MatrixMechanism(scheme, matrix, s) for s in grid], epsilon=epsilon, delta=delta,
      monte_carlo=dataclasses.replace(monte_carlo, proposal=proposal, tilt_order=order,
                                      base_delta=base, fallback=fallback, precision=precision),
      run=dataclasses.replace(run, ledger=ledger), saved=saved)
  record = CalibrationRecord(
      base_delta=base, num_samples=outcome.num_samples, sigma_up=sigma_up, initial_guess=guess,
      estimation_samples=max([max(e.samples.values()) for e in evaluations] or [0]),
      sweeps=tuple(SweepRecord((e.sigma,), (e.delta_hat,), (e.standard_error,))
                   for e in evaluations),
      verification=VerificationRecord(tuple(grid), tuple(outcome.accepted), outcome.delta_hat),
      fallback_accountant=fallback.name)
  return Calibration(outcome.mechanism, outcome.guarantee, tuple(grid), record, outcome.charge)


def _with_plan_check(result: Calibration, projected: float, started: float) -> Calibration:
  """``result`` with its plan check: the projection beside the call's measured seconds."""
  return dataclasses.replace(result, plan_check={
      'projected_seconds': float(projected), 'measured_seconds': time.perf_counter() - started})


# The MonteCarloOptions fields a calibration uses: all of them.
CALIBRATE_FIELDS = frozenset(field.name for field in dataclasses.fields(
    options_lib.MonteCarloOptions))


class _ProgressPlan:
  """Announces a calibration's phases to its progress callback (``progress.expect``).

  Each sweep of 16 σ counts 2 × ``estimation_samples`` draws (one program per σ without
  shared draws), the verification 2N per program; a unit's cost is the plan's measured
  seconds per sample of the program (``CapacityPlan.seconds_per_sample``), or without a plan
  ``plan.DEFAULT_CANDIDATE_COST``'s model (1 + c·(K − 1) for K σ sharing a draw).
  The sweeps expected are the plan's (``estimation_sweeps``; 2 without one), at least one
  more after a coarse sweep and none after the fine one.
  """

  def __init__(self, progress, plan, *, estimation_samples: int, n_verify: int,
               num_candidates: int, shared_draws: bool, estimate_only: bool):
    self.progress, self.plan = progress, plan
    self.estimation_samples, self.n_verify = estimation_samples, n_verify
    self.num_candidates, self.shared_draws = num_candidates, shared_draws
    self.estimate_only = estimate_only
    self.expected = plan_lib.MIN_SWEEPS if plan is None else plan.estimation_sweeps

  def _cost(self, k: int) -> float:
    """Seconds (or model units) per draw of the program of ``k`` σ."""
    k = k if self.shared_draws else 1

    def model(size: int) -> float:
      return 1.0 + plan_lib.DEFAULT_CANDIDATE_COST * (size - 1)
    if self.plan is None:
      return model(k)
    measured = self.plan.seconds_per_sample
    return float(measured[k] if k in measured else measured[_SWEEP] * model(k) / model(_SWEEP))

  def _units(self, k: int, samples: int) -> int:
    return (k if not self.shared_draws else 1) * len(DIRECTIONS) * samples

  def _verification(self, k: int) -> list[progress_lib.Phase]:
    if self.estimate_only or k < 1:
      return []
    return [progress_lib.Phase('verification', self._units(k, self.n_verify), self._cost(k),
                               'verification')]

  def sweep(self, number: int, final: bool) -> None:
    """Sweep ``number`` (1-based) starts; ``final``: the fine sweep, the last one."""
    if self.progress is None:
      return
    self.expected = number if final else max(self.expected, number + 1)
    sweeps = [progress_lib.Phase(f'estimation sweep {i}',
                                 self._units(_SWEEP, self.estimation_samples),
                                 self._cost(_SWEEP), f'estimation sweep {i}/{self.expected}')
              for i in range(number, self.expected + 1)]
    progress_lib.expect(self.progress, sweeps + self._verification(self.num_candidates))

  def verification(self, candidates: int) -> None:
    """The verification of ``candidates`` Monte Carlo candidates starts."""
    if self.progress is not None:
      progress_lib.expect(self.progress, self._verification(candidates))


def _estimate(scheme, matrix, plan, sweeps, result, *, boundary: float, epsilon: float,
              delta: float, base: float, n_verify: int, attempt: int, sigma_up: float,
              guess: float, estimation_samples: int, shared_draws: bool, fallback,
              precision: str, key) -> Calibration:
  """The ``Calibration`` of ``estimate_only``: σ̂ = the boundary, its range and the
  verification plan (``SigmaEstimate``), labelled an estimate."""
  low, high, low_resolved, high_resolved, needed = sigma_range(
      sweeps, base_delta=base, estimation_samples=estimation_samples, sigma_hat=boundary,
      sigma_up=sigma_up)
  # δ̂ at σ̂ per direction, from the fine sweep (the last; its largest σ is the coarse pass
  # it refines, bitwise); none when σ̂ is σ_up, which no sweep reached.
  at = np.flatnonzero(np.asarray(result.noise_multipliers) == boundary)
  delta_hat = {d: float(result.delta_hat[d][at[0], 0]) if at.size else None
               for d in DIRECTIONS}
  standard_error = {d: float(result.standard_error[d][at[0], 0]) if at.size else None
                    for d in DIRECTIONS}
  sweep_seconds, verification_seconds, fixed = _phase_seconds(plan)
  k = plan.verification_candidates
  estimate = SigmaEstimate(
      noise_multiplier=boundary, low=low, high=high, low_resolved=low_resolved,
      high_resolved=high_resolved, epsilon=epsilon, base_delta=base, delta_hat=delta_hat,
      standard_error=standard_error, estimation_samples=estimation_samples,
      needed_samples=needed, seconds_here=sweep_seconds + fixed,
      verification=VerificationPlan(
          num_samples=n_verify, base_delta=base, attempt=attempt, candidates=k,
          draws=len(DIRECTIONS) * n_verify * (1 if shared_draws else k),
          seconds_here=verification_seconds,
          calibration_seconds_here=plan.seconds_here, devices_here=plan.devices_here,
          backend=jax.default_backend(), precision=precision))
  mechanism = MatrixMechanism(scheme, matrix, boundary)
  guarantee = Guarantee(
      epsilon=epsilon, delta=float(delta), method=Method.ESTIMATE, noise_multiplier=boundary,
      delta_hat=None if delta_hat[DIRECTIONS[0]] is None else delta_hat,
      num_samples=estimation_samples, seed=keys_lib.key_words(key), bounded=mechanism.bounded,
      precision=precision)
  record = CalibrationRecord(
      base_delta=base, num_samples=n_verify, sigma_up=sigma_up, initial_guess=guess,
      estimation_samples=estimation_samples, sweeps=tuple(sweeps),
      verification=VerificationRecord((), (), {d: [] for d in DIRECTIONS}),
      fallback_accountant=fallback.name)
  return Calibration(mechanism, guarantee, (), record, None, estimate)
