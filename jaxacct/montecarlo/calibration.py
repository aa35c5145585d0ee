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

References:
  Andy Dong and Arun Ganesh, "Privacy Amplification for BandMF via b-Min-Sep Subsampling",
  arXiv:2602.09338 (v2): App. A (Algorithm 5 with candidates at powers of 1.01, fallback to an
  exactly accounted mechanism), §7.1 (docs/references.md).
"""

from __future__ import annotations

import dataclasses

import numpy as np

from jaxacct import _validate
from jaxacct.guarantee import Guarantee
from jaxacct.mechanism import MatrixMechanism
from jaxacct.montecarlo import candidates as candidates_lib
from jaxacct.montecarlo import checkpoint as checkpoint_lib
from jaxacct.montecarlo import evr, search_start, sharding, verification
from jaxacct.montecarlo import keys as keys_lib
from jaxacct.montecarlo import options as options_lib
from jaxacct.montecarlo import ledger as ledger_lib
from jaxacct.montecarlo import plan as plan_lib
from jaxacct.montecarlo import precision as precision_lib
from jaxacct import progress as progress_lib
from jaxacct.errors import InputError

_SWEEP = search_start.SWEEP_CANDIDATES


class CalibrationError(RuntimeError):
  """The σ search could not bracket the target (e.g. it needs σ beyond the fallback)."""


@dataclasses.dataclass(frozen=True)
class SweepRecord:
  """One estimation sweep: candidate σ and their max-direction δ̂(ε) on the estimation stream."""

  sigmas: tuple[float, ...]
  delta_hat: tuple[float, ...]


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
    record['sweeps'] = [{'sigmas': list(s.sigmas), 'delta_hat': list(s.delta_hat)}
                        for s in self.sweeps]
    record['verification'] = {'sigmas': list(self.verification.sigmas),
                              'accepted': list(self.verification.accepted),
                              'delta_hat': self.verification.delta_hat}
    return record

  def __getitem__(self, key: str):
    return self.to_dict()[key]


@dataclasses.dataclass(frozen=True)
class Calibration:
  """Result of ``calibrate_noise_multiplier``.

  Attributes:
    mechanism: the released mechanism (scheme, matrix, calibrated σ).
    guarantee: its (ε, δ) guarantee and how it was obtained.
    candidates: the σ list that was verified (increasing; last = fallback σ_up).
    record: the search history (``CalibrationRecord``): estimation sweeps (σ,
      max-direction δ̂) and the verification outcome per candidate.
    charge: the verification's ledger entry (``verification.Verification.charge``).
  """

  mechanism: MatrixMechanism
  guarantee: Guarantee
  candidates: tuple[float, ...]
  record: CalibrationRecord
  charge: dict | None = None

  def __repr__(self) -> str:
    """One line: the released guarantee and how many candidates were verified."""
    return f'Calibration({self.guarantee!r}, candidates={len(self.candidates)})'

  def to_dict(self) -> dict:
    """JSON-ready: the guarantee's fields (``Guarantee.to_dict``), the verified
    ``candidates``, the search ``record`` and the ledger ``charge``."""
    return {**self.guarantee.to_dict(), 'candidates': list(self.candidates),
            'record': self.record.to_dict(), 'charge': self.charge}


def calibrate_noise_multiplier(scheme, matrix, *, epsilon: float, delta: float, key,
                               num_samples: int | None = None, base_delta: float | None = None,
                               grid_ratio: float = 1.01, shared_draws: bool = True,
                               estimation_samples: int | None = None,
                               num_candidates: int = 8, attempt: int = 1,
                               ledger=None, fallback=None, precision: str = 'float64',
                               devices=None, progress=None, checkpoint=None,
                               checkpoint_interval: float | None = None,
                               max_seconds: float | None = None,
                               run: options_lib.RunOptions | None = None) -> Calibration:
  """Smallest σ (on a ``grid_ratio`` grid) whose mechanism passes Algorithm 5 at (ε, δ).

  Args:
    scheme: the sampling scheme.
    matrix: the strategy matrix (``BandedToeplitz``, or ``LowerTriangular`` for App. B bounds).
    epsilon: target ε.
    delta: target overall δ ∈ (0, 1).
    key: typed JAX key (estimation and verification use separate streams of it).
    num_samples: verification samples per direction and candidate (default:
      ``evr.minimum_samples(δ_b, δ)`` for this attempt).
    base_delta: δ_b (default: δ/2, or the largest one N supports).
    grid_ratio: ratio between consecutive candidate σ (> 1).
    shared_draws: common random numbers across σ (default; see ``candidates.py``).
    estimation_samples: samples per direction for the estimation search
      (default min(⌊N/4⌋, ⌈50/δ_b⌉), at least 1000: the search only places the
      candidate grid, so a ~15–30 % relative error on δ̂ at δ_b is enough and
      keeps the search no dearer than the verification).
    num_candidates: Monte Carlo candidates verified (plus the fallback).
    attempt: the 1-based index of this verification of the mechanism, at any target
      (``verification.verify``); re-calibrating with a new key, or at another (ε, δ), is
      another attempt. The default ``num_samples`` is the minimum for it.
    ledger: a file path for a ``FileLedger`` or a ledger object (default None: the user's
      ledger file, shared with the CLI; an in-memory ``VerificationLedger()`` opts out and
      the release says "attempts unchecked").
    fallback: the deterministic accountant that proves σ_up, the last candidate (an
      accountant or registered name; default ``"unamplified_gaussian"``, which covers every
      scheme; ``"pld"`` gives a smaller σ_up where it applies, e.g. truncated Poisson).
    precision: ``"float64"`` (default), ``"float32"`` (the 32-bit program with its certified
      margin, for the sweeps and the verification; ``verification.verify``) or ``"auto"``
      (resolved once, before any compute; ``montecarlo/precision.py``).
    devices: devices to shard over (default all local devices).
    progress: called as ``progress(samples_done, samples_total, stage)`` after each call, with
      stage "estimation sweep 1", "estimation sweep 2", … (a coarse bracket of 16 σ until it
      straddles the target, then a fine one) and "verification"; counts restart per stage.
    checkpoint: a directory where the run saves its state (the sweeps done, the phase in
      progress and its float64 sums) every ``checkpoint_interval`` seconds and at every
      phase boundary; calling again with the same arguments resumes and returns bitwise the
      result of an uninterrupted run, on any device count. Other arguments (scheme, strategy,
      ε, δ, key, options, code version) are refused, naming what differs.
    max_seconds: if given, the calibration's capacity plan (``plan.capacity_plan``: two
      sweeps and the verification, timed here on ``devices``) is made first, and a
      calibration projected to take longer is refused with ``plan.OverBudgetError`` before
      any sweep (the whole calibration is projected, a resumed one too).
    run: ``RunOptions`` with devices, progress, checkpoint, checkpoint_interval, ledger and
      max_seconds in one object (``montecarlo/options.py``); give each there or as a keyword.

  Returns:
    ``Calibration``.

  References:
    Dong & Ganesh (2026), App. A (Algorithm 5, Theorem A.1).
  """
  run = options_lib.resolve(run, 'calibrate_noise_multiplier',
                            **options_lib.run_keywords(locals()))
  epsilon = _validate.finite_real('epsilon', epsilon)
  # Checks the band against the scheme before any compute (σ is a placeholder).
  placeholder = MatrixMechanism(scheme, matrix, 1.0)
  grid_ratio = _validate.real_number('grid_ratio', grid_ratio)
  if not 1.0 < grid_ratio <= 2.0:
    raise InputError(f'grid_ratio must be in (1, 2], got {grid_ratio}')
  num_candidates = _validate.integer_at_least('num_candidates', num_candidates, 1)
  attempt = _validate.integer_at_least('attempt', attempt, 1)  # before the sweeps, not after
  max_seconds = plan_lib.check_max_seconds(run.max_seconds)
  shared_draws = _validate.boolean('shared_draws', shared_draws)
  key = keys_lib.canonicalize_key(key)
  fallback = verification.fallback_accountant(fallback)
  verification.check_fallback(fallback, placeholder)
  choice = precision_lib.choose(precision, placeholder)
  ledger = ledger_lib.ledger_from(run.ledger)
  # N and δ_b of this attempt; an undeclared retry is refused now, not after the sweeps (its
  # σ are not known yet), and a declared one gets the samples it needs to pass.
  n_verify, base = verification.sample_size(
      ledger, placeholder, epsilon=epsilon, delta=delta, key_data=keys_lib.key_words(key),
      num_samples=num_samples, base_delta=base_delta, shared_draws=shared_draws,
      precision=choice.precision, attempt=attempt)
  if estimation_samples is None:
    estimation_samples = evr.default_estimation_samples(n_verify, base)
  estimation_samples = _validate.integer_at_least('estimation_samples', estimation_samples, 1)
  saved = checkpoint_lib.open_checkpoint(run.checkpoint, {
      'run': 'calibrate', 'scheme': repr(scheme), 'strategy': repr(matrix.fingerprint),
      'epsilon': epsilon, 'delta': float(delta), 'seed': list(keys_lib.key_words(key)),
      'num_samples': n_verify, 'base_delta': base, 'grid_ratio': grid_ratio,
      'shared_draws': bool(shared_draws), 'estimation_samples': estimation_samples,
      'num_candidates': num_candidates, 'attempt': attempt, 'fallback': fallback.name,
      **({} if choice.precision == 'float64' else {'precision': choice.precision})},
      run.checkpoint_interval)
  verification.check_checkpoint_charge(saved, ledger)
  # Host decisions from libraries whose last bits may differ between hosts are process 0's.
  sigma_up, guess = sharding.on_leader(lambda: list(search_start.fallback_and_guess(
      scheme, matrix, fallback, epsilon, base)))
  probe = MatrixMechanism(scheme, matrix, guess)
  if max_seconds is not None:
    plan = plan_lib.capacity_plan(probe, epsilon=epsilon, delta=delta, num_samples=n_verify,
                                  base_delta=base, estimation_samples=estimation_samples,
                                  num_candidates=num_candidates, precision=choice.precision,
                                  fallback=fallback, run=run)
    plan_lib.refuse_over_budget(f'the calibration ({plan.verification_samples:,} verification '
                                f'and ≥ {2 * plan.estimation_samples_per_sweep:,} estimation '
                                f'samples)', plan.seconds_here, max_seconds)
  sweeps = []

  def sweep(sigmas):
    phase = checkpoint_lib.Phase(saved, f'estimation-sweep-{len(sweeps)}',
                                 [float(s).hex() for s in sigmas])
    values = candidates_lib.sweep_sigmas(
        key, probe, sigmas, [epsilon], estimation_samples, purpose='estimation',
        shared_draws=shared_draws, precision=choice.precision, devices=run.devices,
        blocks_per_call=run.blocks_per_call, phase=phase,
        progress=progress_lib.staged(run.progress, f'estimation sweep {len(sweeps) + 1}')
    ).delta_hat_max[:, 0]
    sweeps.append(SweepRecord(tuple(map(float, sigmas)), tuple(values.tolist())))
    return values

  # Coarse bracket: 16 σ spanning a factor ~2 around the current centre.
  coarse = search_start.COARSE_RATIO
  centre = guess
  for _ in range(40):
    sigmas = search_start.coarse_sweep(centre)
    passes = sweep(sigmas) <= base
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
  fine_passes = sweep(fine) <= base
  boundary = float(fine[int(np.argmax(fine_passes))]) if fine_passes.any() else float(high)
  # Candidates: the estimated boundary, a few steps below and above, then the fallback.
  below = max(1, num_candidates // 4)
  grid = boundary * grid_ratio ** np.arange(-below, num_candidates - below, dtype=np.float64)
  grid = [float(s) for s in grid if s < sigma_up] + [float(sigma_up)]
  candidates = [MatrixMechanism(scheme, matrix, s) for s in grid]
  outcome = verification.verify(key, candidates, epsilon=epsilon, delta=delta,
                                num_samples=n_verify, base_delta=base, shared_draws=shared_draws,
                                attempt=attempt, fallback=fallback,
                                precision=choice.precision, run=dataclasses.replace(
                                    run, checkpoint=saved, ledger=ledger, max_seconds=None))
  record = CalibrationRecord(
      base_delta=base, num_samples=n_verify, sigma_up=sigma_up, initial_guess=guess,
      estimation_samples=estimation_samples, sweeps=tuple(sweeps),
      verification=VerificationRecord(tuple(grid), tuple(outcome.accepted), outcome.delta_hat),
      fallback_accountant=fallback.name)
  return Calibration(outcome.mechanism, outcome.guarantee, tuple(grid), record, outcome.charge)
