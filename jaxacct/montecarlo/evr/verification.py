"""Algorithm 5 (Estimate-Verify-Release) on the verification stream, and its attempt ledger.

Candidates M_1 … M_k with increasing σ are verified on fresh draws of the key's
*verification* stream (through the one stream driver, ``stream.py``); the last one is
proven by a deterministic fallback accountant. The failure-bound arithmetic (Fact 4.2,
δ_overall, sample sizes) is in ``evr.py``.

References:
  Andy Dong and Arun Ganesh, "Privacy Amplification for BandMF via b-Min-Sep Subsampling",
  arXiv:2602.09338 (v2): App. A (Algorithm 5, Theorem A.1), §6.3 (Conjecture 6.2)
  (docs/references.md).
  Chua et al., "Balls-and-bins sampling for DP-SGD", AISTATS 2025, Fact 4.2.
"""

from __future__ import annotations

import dataclasses
import json
import math
from typing import Any

import jax

from jaxacct import _validate
from jaxacct.conventions import CANDIDATE_TAG, DIRECTIONS, Method
from jaxacct.deterministic import base as accountants
from jaxacct.deterministic import tilt_bound
from jaxacct.guarantee import Guarantee
from jaxacct.mechanism import MatrixMechanism
from jaxacct.montecarlo.evr import candidates as candidates_lib
from jaxacct.montecarlo.evr import checkpoint as checkpoint_lib
from jaxacct.montecarlo.engine import keys as keys_lib
from jaxacct.montecarlo.evr import ledger as ledger_lib
from jaxacct.montecarlo.evr import plan as plan_lib
from jaxacct.montecarlo.evr import precision as precision_lib
from jaxacct.montecarlo.engine import sharding, stream
from jaxacct.montecarlo.evr import bounds as evr
from jaxacct.montecarlo.evr.ledger import FileLedger as FileLedger
from jaxacct.montecarlo.evr.ledger import VerificationLedger as VerificationLedger
from jaxacct.montecarlo.evr import tilted as tilted_lib
from jaxacct.montecarlo.evr import tilted_plan
from jaxacct.montecarlo.engine import sampling
from jaxacct.montecarlo.evr.search_start import DEFAULT_FALLBACK as DEFAULT_FALLBACK
from jaxacct.montecarlo.evr.search_start import check_fallback as check_fallback
from jaxacct.montecarlo.evr.search_start import fallback_accountant as fallback_accountant
from jaxacct import progress as progress_lib
from jaxacct import options as options_lib
from jaxacct.errors import InputError, InputTypeError


@dataclasses.dataclass(frozen=True)
class Verification:
  """Outcome of Algorithm 5.

  Attributes:
    guarantee: the released (ε, δ_overall) statement and how it was obtained.
    mechanism: the released candidate M_{i*}.
    index: i* (0-based) in the candidate list.
    accepted: verifier outcome per candidate (the last, proven one, is True).
    delta_hat: per direction, δ̂(ε) of each Monte Carlo candidate (length k − 1).
    num_samples: samples per direction per candidate.
    base_delta: the verification threshold δ_b.
    sums: the stream accumulator of the verification draws (``stream.BlockSums``: per
      direction and Monte Carlo candidate, the float64 block-ordered sums), or None when
      only the fallback was verified.
    charge: the ledger entry this run was charged as, {"ledger": file or None, "guarantee",
      "run"} (reports record it; ``ledger.check_recorded_charge``).
  """

  guarantee: Any
  mechanism: Any
  index: int
  accepted: tuple[bool, ...]
  delta_hat: dict
  num_samples: int
  base_delta: float
  sums: Any = None
  charge: dict | None = None

  def __repr__(self) -> str:
    """One line: the released guarantee and which candidate it is."""
    return (f'Verification({self.guarantee!r}, released candidate {self.index + 1} of '
            f'{len(self.accepted)})')


def _released_margin(sweep, index: int, method: str) -> float | None:
  """The largest certified margin η over both directions' draws of candidate ``index``
  (32-bit program only; None for float64 or a released fallback)."""
  if method == Method.FALLBACK or sweep is None or sweep.sums.margins is None:
    return None
  return float(max(sweep.sums.margins[d][index] for d in DIRECTIONS))


def check_checkpoint_charge(saved, ledger) -> None:
  """Resuming: LedgerError unless ``ledger`` still holds the charge ``saved`` (a checkpoint or
  None) recorded, checked on process 0 before any compute."""
  if saved is not None and saved.charge is not None:
    sharding.on_leader(lambda: ledger_lib.check_recorded_charge(
        ledger, saved.charge, f'checkpoint {str(saved.path)!r}'))


def _run_identity(key_data, sigmas, n: int, base: float, shared_draws: bool, precision: str,
                  epsilon: float, delta: float, tilt: dict | None = None) -> str:
  """A verification run's ledger identity: the same run resumed is not a new attempt. A tilted
  run adds its proposal, order, per-direction sizes and each candidate's ln Z_α (``tilt``)."""
  identity = {'seed': [int(w) for w in key_data], 'sigmas': [float(s) for s in sigmas],
              'num_samples': int(n), 'base_delta': float(base),
              'shared_draws': bool(shared_draws), 'precision': precision,
              'epsilon': float(epsilon), 'delta': float(delta)}
  if tilt is not None:
    identity.update(tilt)
  return json.dumps(identity, sort_keys=True)


def check_retry(ledger, mechanism, *, epsilon: float | None, delta: float, key_data,
                num_samples: int | None, base_delta: float | None, shared_draws: bool,
                precision: str | None, attempt: int,
                proposal: str = 'plain') -> ledger_lib.Charge:
  """Before any compute: the charge of a coming verification of ``mechanism`` (every run the
  ledger holds of it, at any target), and ``ledger.UndeclaredRetryError`` when the ledger
  holds ``attempt`` or more runs of it and none could be this one (same key, target, shared
  draws, proposal, and ε, N, δ_b and precision where given; ``None``: any). Its candidate σ are found by a
  search, so they cannot be compared yet; a run this check lets through is still checked in
  full when ``verify`` charges it. The charge gives the sample size of this attempt
  (``evr.resolve_direction_sizes(..., attempts=, earlier=)``)."""
  known = {'seed': [int(w) for w in key_data], 'shared_draws': bool(shared_draws),
           'delta': float(delta), 'proposal': proposal}
  optional = {'num_samples': num_samples, 'base_delta': base_delta, 'precision': precision,
              'epsilon': None if epsilon is None else float(epsilon)}

  def could_be(record: ledger_lib.RunRecord) -> bool:
    try:
      recorded = json.loads(record.run)
    except ValueError:
      return False  # a format-1 run: never this version's
    recorded.setdefault('proposal', 'plain')  # runs recorded before proposals existed
    return (all(recorded.get(k) == v for k, v in known.items())
            and all(v is None or recorded.get(k) == v for k, v in optional.items()))

  # ε not known yet (``account`` estimates it): every recorded run at any ε could back it.
  claim = math.inf if epsilon is None else float(epsilon)
  return ledger_lib.Charge.from_json(sharding.on_leader(lambda: ledger.preview(
      mechanism, epsilon=claim, delta=float(delta), attempt=attempt,
      could_be=could_be).to_json()))


def sample_size(ledger, mechanism, *, epsilon: float | None, delta: float, key_data,
                num_samples: int | None, base_delta: float | None, shared_draws: bool,
                precision: str | None, attempt: int) -> tuple[int, float]:
  """(N, δ_b) of this attempt before any compute: ``check_retry``'s charge, then the defaults
  of ``evr.resolve_direction_sizes`` for it with plain proposals (each direction against its
  own earlier runs, N the larger) — a declared retry gets the samples it needs to pass, and
  given ones too few for it are refused naming the ``num_samples`` that suffices."""
  sizes, base = direction_sample_sizes(
      ledger, mechanism, epsilon=epsilon, delta=delta, key_data=key_data,
      num_samples=num_samples, base_delta=base_delta, shared_draws=shared_draws,
      precision=precision, attempt=attempt,
      proposals={d: evr.DirectionProposal() for d in DIRECTIONS})
  return max(size.num_samples for size in sizes.values()), base


def direction_sample_sizes(ledger, mechanism, *, epsilon: float | None, delta: float, key_data,
                           num_samples: int | None, base_delta: float | None,
                           shared_draws: bool, precision: str | None, attempt: int,
                           proposals: dict, proposal: str = 'plain') -> tuple[dict, float]:
  """(per direction ``evr.DirectionSize``, δ_b) of this attempt before any compute:
  ``check_retry``'s charge, then ``evr.resolve_direction_sizes`` with each direction's
  ``evr.DirectionProposal`` and earlier runs."""
  charge = check_retry(ledger, mechanism, epsilon=epsilon, delta=delta, key_data=key_data,
                       num_samples=num_samples, base_delta=base_delta,
                       shared_draws=shared_draws, precision=precision, attempt=attempt,
                       proposal=proposal)
  return evr.resolve_direction_sizes(delta, num_samples, base_delta, proposals,
                                     attempts=charge.attempts, earlier=charge.earlier)


def released_index(accepted) -> int:
  """i* = min{i : v_j = 1 for all j ≥ i} (0-based) of Algorithm 5; v_k = 1 is forced.

  Scans from the most private candidate down and stops at the first rejection;
  a later acceptance below a rejection does not count (the outcomes need not
  be monotone in σ).
  """
  outcomes = [bool(v) for v in accepted]
  if not outcomes:
    raise InputError('accepted must list at least one candidate')
  index = len(outcomes) - 1
  while index > 0 and outcomes[index - 1]:
    index -= 1
  return index


@options_lib.moved
def verify(key, candidates, *, epsilon: float, delta: float,
           monte_carlo: options_lib.MonteCarloOptions | None = None,
           run: options_lib.RunOptions | None = None) -> Verification:
  """Algorithm 5 (Estimate-Verify-Release) over candidates ordered by increasing σ.

  Candidates M_1 … M_k share one scheme and strategy and have strictly
  increasing σ (so each satisfies every guarantee of the previous one). M_k must
  be (ε, δ_b)-DP by the deterministic ``fallback`` accountant (checked here:
  its δ(ε) at M_k, the maximum over both directions, must be ≤ δ_b). For i < k the verifier accepts M_i iff δ̂(ε) ≤ δ_b in **both**
  directions, with N fresh samples per direction from the *verification*
  stream (float64 losses). The released mechanism is M_{i*},
  i* = min{i : v_j = 1 for all j ≥ i}; by Theorem A.1 with Fact 4.2 it is
  (ε, δ_overall(N, δ_b))-DP.

  Everything that defines the test (candidates, ε, δ, N, δ_b) is fixed by the
  arguments and the ledger before any verification sample is drawn. A second verification
  of the same mechanism — scheme, and strategy up to scale — recorded in ``ledger``, at this
  or any other (ε, δ) and differing in anything (key, candidates, N, δ_b, shared draws,
  precision), raises unless it declares itself with ``attempt``; the false-acceptance bound
  is then a union over the attempts (``ledger.py`` states the rule and its proof sketch),
  and the default N is the minimum for that attempt. Retries the ledger has not seen must
  be declared by the caller.

  Args:
    key: typed JAX key; only its verification stream is used.
    candidates: ``MatrixMechanism`` list, increasing σ, last one provably private.
    epsilon: ε.
    delta: the target overall δ.
    monte_carlo: ``MonteCarloOptions``; verify uses ``num_samples`` / ``base_delta`` (N and
      δ_b; missing ones are derived for this attempt, ``sample_size``; given ones too few for
      it are refused before any compute), ``shared_draws`` (common random numbers across
      candidates, ``candidates.py``), ``attempt`` (the 1-based index of this verification run
      of this mechanism, at any target), ``fallback`` (the deterministic accountant proving
      M_k, a ``DeterministicAccountant`` or registered name; default
      ``"unamplified_gaussian"``; a released fallback's ``Guarantee.accountant`` names it) and
      ``precision`` (``"float32"``: the 32-bit program, δ̂ evaluated at ε − η with a certified
      per-sample margin η and block sums rounded up, so the verifier never accepts on draws
      whose exact-loss δ̂ exceeds δ_b, ``montecarlo/engine/margin.py``; part of the run's identity),
      ``proposal`` and ``tilt_order`` (``"tilted"``: the remove direction drawn from the law
      tilted by the privacy loss, each direction with its own N and support, the add direction
      certified without samples for ε ≥ −ln Pr[x = 0]; ``montecarlo/evr/tilted.py``; the
      release's ``Guarantee.tilt`` records it). Other fields are refused.
    run: ``RunOptions``: devices, progress (stage "verification"), checkpoint (a folder where
      the verification saves its state every ``checkpoint_interval`` seconds; calling again
      with the same arguments resumes it bitwise — the same ledger run, not a new attempt),
      ledger (an object; default None: the user's ledger file, ``ledger.default_path()``,
      shared with the CLI; an in-memory ``VerificationLedger()`` opts out and the release says
      "attempts unchecked") and max_seconds (one call of the verification program is timed
      first — with the tilted proposal, after the host tables, a host pass of tuple draws and
      one call per direction, ``tilted_plan.tilted_sampling_seconds`` — and a verification
      projected longer is refused with ``plan.OverBudgetError`` before the ledger is charged
      or a sample is drawn).

  References:
    Dong & Ganesh (2026), App. A (Algorithm 5, Theorem A.1);
    Chua et al., AISTATS 2025, Fact 4.2.
  """
  return run_verification(key, candidates, epsilon=epsilon, delta=delta,
                          monte_carlo=options_lib.monte_carlo_options(
                              monte_carlo, 'verify', VERIFY_FIELDS),
                          run=options_lib.run_options(run))


# The MonteCarloOptions fields a verification uses.
VERIFY_FIELDS = frozenset({'num_samples', 'base_delta', 'shared_draws', 'attempt', 'fallback',
                           'precision', 'proposal', 'tilt_order', 'tilt_state_budget'})


def run_verification(key, candidates, *, epsilon: float, delta: float,
                     monte_carlo: options_lib.MonteCarloOptions, run: options_lib.RunOptions,
                     saved: checkpoint_lib.Checkpoint | None = None) -> Verification:
  """``verify`` with checked options (library-internal); ``saved`` is an opened checkpoint
  (``calibrate_noise_multiplier`` passes its own), used instead of ``run.checkpoint``."""
  num_samples, base_delta = monte_carlo.num_samples, monte_carlo.base_delta
  shared_draws, attempt = monte_carlo.shared_draws, monte_carlo.attempt
  fallback, precision = monte_carlo.fallback, monte_carlo.precision
  if isinstance(candidates, MatrixMechanism):
    raise InputTypeError(
        'candidates must be a sequence of jaxacct.MatrixMechanism ordered by increasing '
        'noise_multiplier, the last one provable by the fallback, got a single mechanism: pass '
        '[mechanism, the same at the fallback\'s sigma], or use jaxacct.account(mechanism, '
        'epsilon=, delta=, key=)')
  epsilon = _validate.finite_real('epsilon', epsilon)
  max_seconds = plan_lib.check_max_seconds(run.max_seconds)
  try:
    candidates = list(candidates)
  except TypeError:
    raise InputTypeError('candidates must be a sequence of jaxacct.MatrixMechanism, got '
                         f'{candidates!r}') from None
  if len(candidates) < 1 or not all(isinstance(m, MatrixMechanism) for m in candidates):
    raise InputError('candidates must be a non-empty list of jaxacct.MatrixMechanism')
  first = candidates[0]
  if any(m.scheme != first.scheme or m.matrix != first.matrix for m in candidates):
    raise InputError('candidates must share one scheme and one strategy matrix')
  sigmas = [float(m.noise_multiplier) for m in candidates]
  if any(b <= a for a, b in zip(sigmas, sigmas[1:])):
    raise InputError(f'candidates must be ordered by strictly increasing noise_multiplier, got {sigmas}')
  choice = precision_lib.choose(precision, first)
  key = keys_lib.canonicalize_key(key)
  key_data = keys_lib.key_words(key)
  budget = monte_carlo.tilt_state_budget or tilt_bound.DEFAULT_STATE_BUDGET
  proposal, order = tilted_lib.resolve_proposal(monte_carlo.proposal, monte_carlo.tilt_order,
                                                candidates[:-1], epsilon, choice.precision,
                                                state_budget=budget)
  tilted = proposal == 'tilted'
  # The tilts (host tables, float64) of the Monte Carlo candidates, before any sample, and
  # each direction's term range and proven bound.
  if tilted and len(candidates) > 1:  # host tables: minutes at the §7.4 shape, said first
    progress_lib.announce(run.progress, f'verification: the α = {order} tilts of '
                                        f'{len(candidates) - 1} candidate(s) (host tables)…')
  tilts = ([tilted_lib.tilt_for(m, order, [epsilon], state_budget=budget)
            for m in candidates[:-1]] if tilted else [])
  proposals = (tilted_lib.direction_proposals(candidates[:-1], tilts, epsilon) if tilted
               else {d: evr.DirectionProposal() for d in DIRECTIONS})
  # Every verification of the mechanism (scheme, strategy up to scale, adjacency), at any
  # target and with any key, candidates, N, δ_b, shared draws, precision or proposal, is an
  # attempt.
  ledger = ledger_lib.ledger_from(run.ledger)
  sizes, base = direction_sample_sizes(
      ledger, first, epsilon=epsilon, delta=delta, key_data=key_data, num_samples=num_samples,
      base_delta=base_delta, shared_draws=shared_draws, precision=choice.precision,
      attempt=attempt, proposals=proposals, proposal=proposal)
  if not tilted:  # one N for both directions (per direction when earlier runs differ: the larger)
    sizes = {d: evr.DirectionSize(max(z.num_samples for z in sizes.values()), 1.0)
             for d in DIRECTIONS}
  n = max(size.num_samples for size in sizes.values())
  fallback = fallback_accountant(fallback)
  check_fallback(fallback, first)
  if fallback.delta_for_epsilon(candidates[-1], epsilon) > base:
    sigma_up = fallback.sigma(first.scheme, first.matrix, epsilon=epsilon, delta=base)
    raise InputError(
        f'the last candidate must be (epsilon, base_delta)-DP by a deterministic accountant '
        f'(fallback={fallback.name!r}): noise_multiplier must be >= {sigma_up}, got '
        f'{sigmas[-1]}')
  tilt_identity = tilted_lib.run_identity(tilts, sizes, order) if tilted else None
  run_id = _run_identity(key_data, sigmas, n, base, shared_draws, choice.precision, epsilon,
                         delta, tilt_identity)
  if saved is None:
    saved = checkpoint_lib.open_checkpoint(
        run.checkpoint, {'run': 'verify', 'mechanism': ledger_lib.mechanism_description(first),
                         'verification': run_id, 'attempt': attempt, 'fallback': fallback.name},
        run.checkpoint_interval)

  def within_delta(charge: ledger_lib.Charge) -> float:
    released = charge.overall_delta(sizes, base)
    if released > delta:
      needed = max(evr.minimum_samples(base, delta, attempts=charge.attempts,
                                       earlier=charge.earlier[d], support=sizes[d].support)
                   for d in DIRECTIONS)
      raise InputError(f'with attempt = {charge.attempts} the overall delta {released} exceeds '
                       f'delta = {delta}; use num_samples >= {needed} or a smaller base_delta')
    return released

  if tilted and n == 0 and len(candidates) > 1:
    return _certified_release(candidates, tilts, proposals, order, epsilon)
  check_checkpoint_charge(saved, ledger)
  sweep = None
  if len(candidates) > 1 and not tilted:
    sweep = candidates_lib.prepare_sweep(
        key, first, sigmas[:-1], [epsilon], n, purpose='verification', shared_draws=shared_draws,
        precision=choice.precision, run=run,
        phase=_verification_phase(saved, sigmas))
    sweep.refuse_over_budget(f'the verification of {len(candidates) - 1} candidates × {n:,} '
                             f'samples per direction', max_seconds)
  elif tilted and max_seconds is not None:  # what is left after a resume, projected
    samples = {d: sizes[d].num_samples for d in DIRECTIONS}
    state = tilted_lib.saved_state(_verification_phase(saved, sigmas), len(tilts), 1)
    plan_lib.refuse_over_budget(
        f'the tilted verification of {len(tilts)} candidate(s) × ({samples["remove"]:,} remove, '
        f'{samples["add"]:,} add) samples',
        tilted_plan.tilted_sampling_seconds(
            candidates[:-1], tilts, samples, run=run, state=state,
            block_size=sampling.default_block_size(first.iterations)),
        max_seconds)
  # Recorded only once the run is certain to draw verification samples; under
  # jax.distributed process 0 charges the ledger and every process gets its answer.
  record = ledger_lib.RunRecord(
      run=run_id, epsilon=epsilon, delta=float(delta), num_samples=n, base_delta=base,
      overall_delta=1.0, support=max(z.support for z in sizes.values()),
      directions=({d: [sizes[d].num_samples, sizes[d].support] for d in DIRECTIONS}
                  if tilted else None))

  def charge_now():
    charge, entry = ledger.charge(first, record, attempt, within_delta)
    return [charge.to_json(), {'ledger': ledger.location, 'guarantee': entry, 'run': run_id},
            ledger.persistent]
  charge_json, charge, checked = sharding.on_leader(charge_now)
  if saved is not None:
    saved.record_charge(charge)
  released_delta = ledger_lib.Charge.from_json(charge_json).overall_delta(sizes, base)

  accepted = [True] * len(candidates)
  delta_hat = {d: [] for d in DIRECTIONS}
  sums = None
  if sweep is not None:
    sweep = candidates_lib.run_sweep(sweep, progress_lib.staged(run.progress, 'verification'))
    sums = sweep.sums
    for d in DIRECTIONS:
      delta_hat[d] = sweep.delta_hat[d][:, 0].tolist()
    accepted[:-1] = [bool(v <= base) for v in sweep.delta_hat_max[:, 0]]
  elif tilts and n > 0:
    result = tilted_lib.run_tilted_sweep(
        [jax.random.fold_in(key, CANDIDATE_TAG + j) for j in range(len(tilts))],
        candidates[:-1], tilts, {d: sizes[d].num_samples for d in DIRECTIONS},
        purpose='verification', block_size=sampling.default_block_size(first.iterations),
        run=run, phase=_verification_phase(saved, sigmas),
        progress=progress_lib.staged(run.progress, 'verification'))
    sums = result.sums
    for d in DIRECTIONS:
      delta_hat[d] = result.delta_hat[d][:, 0].tolist()
  if tilts:
    # A direction certified without samples has no δ̂ (None); its candidates pass in it.
    for d in DIRECTIONS:
      if sizes[d].num_samples == 0:
        delta_hat[d] = [None] * len(tilts)
    accepted[:-1] = [all(delta_hat[d][i] is None or delta_hat[d][i] <= base
                         for d in DIRECTIONS) for i in range(len(tilts))]
  index = released_index(accepted)
  chosen = candidates[index]
  method = Method.VERIFIED_MC if index < len(candidates) - 1 else Method.FALLBACK
  if method == Method.VERIFIED_MC and chosen.scheme.conjectural:
    method = Method.CONJECTURAL  # e.g. Algorithm 4 by Conjecture 6.2 (Dong & Ganesh (2026) §6.3)
  monte_carlo_release = method != Method.FALLBACK
  guarantee = Guarantee(
      epsilon=epsilon, delta=released_delta, method=method,
      noise_multiplier=float(chosen.noise_multiplier),
      delta_hat=({d: delta_hat[d][index] for d in DIRECTIONS} if monte_carlo_release else None),
      num_samples=n, base_delta=base, seed=key_data, attempts=attempts_of(charge_json),
      bounded=chosen.bounded and monte_carlo_release,
      accountant=None if monte_carlo_release else fallback.name,
      precision=choice.precision, margin=_released_margin(sweep, index, method),
      attempts_checked=bool(checked),
      tilt=(tilted_lib.guarantee_record(tilts[index], sizes, order)
            if tilted and monte_carlo_release else None))
  return Verification(guarantee, chosen, index, tuple(accepted), delta_hat, n, base, sums,
                      charge)


def _verification_phase(saved, sigmas) -> checkpoint_lib.Phase:
  """The checkpoint phase of a verification's sweep (its candidates' σ its identity)."""
  return checkpoint_lib.Phase(saved, 'verification', [s.hex() for s in sigmas])


def _certified_release(candidates, tilts, proposals, order: int, epsilon: float) -> Verification:
  """Every direction of every Monte Carlo candidate certified by its proven bound (the remove
  direction's M(α, ε) = the Canonne–Kamath–Steinke conversion of its exact Rényi divergence,
  the add direction's (A1) or Rényi bound) at or below the target: a deterministic statement,
  δ = the largest bound, about the smallest σ — nothing is sampled, so nothing is charged to
  the ledger (no random outcome could be retried)."""
  bounds_now = {d: float(proposals[d].bound) for d in DIRECTIONS}
  sizes = {d: evr.DirectionSize(0, bounds_now[d]) for d in DIRECTIONS}
  chosen = candidates[0]
  guarantee = Guarantee(
      epsilon=epsilon, delta=max(bounds_now.values()), method=Method.DETERMINISTIC,
      noise_multiplier=float(chosen.noise_multiplier), bounded=chosen.bounded,
      accountant=CERTIFYING_ACCOUNTANT,
      tilt=tilted_lib.guarantee_record(tilts[0], sizes, order))
  return Verification(guarantee, chosen, 0, (True,) * len(candidates),
                      {d: [None] * len(tilts) for d in DIRECTIONS}, 0, guarantee.delta)


# The name a release certified by the tilt's bounds alone gives as its accountant: the module
# that proves it (``deterministic/tilt_bound.py``), not a registered accountant.
CERTIFYING_ACCOUNTANT = 'tilt_bound'


def attempts_of(charge_json) -> int:
  """The attempts of a ``ledger.Charge.to_json`` form."""
  return int(charge_json[0])
