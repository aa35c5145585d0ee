"""``account``: a mechanism's guarantee in one call, the accountant chosen as configs choose it.

``accountant="auto"`` means the same here and in a config's ``accountant: auto``
(``choose_accountant``): the tightest deterministic accountant where one supersedes Monte
Carlo for the mechanism (``DeterministicAccountant.supersedes_monte_carlo``: truncated Poisson
and truncated cyclic Poisson by ``pld``, balls-in-bins by ``renyi`` / ``conditional_composition``),
and verified Monte Carlo (Estimate-Verify-Release, Dong & Ganesh (2026) App. A) otherwise. The
returned ``Guarantee`` names what answered (``method``, ``accountant``).

References:
  Andy Dong and Arun Ganesh, "Privacy Amplification for BandMF via b-Min-Sep Subsampling",
  arXiv:2602.09338 (v2): App. A (Estimate-Verify-Release) (docs/references.md).
"""

from __future__ import annotations

import dataclasses
import math

import numpy as np

from jaxacct import _validate
from jaxacct import options as options_lib
from jaxacct.options import MonteCarloOptions, RunOptions
from jaxacct.conventions import Adjacency, Method
from jaxacct.deterministic import accountant as deterministic_functions
from jaxacct.deterministic import base as deterministic
from jaxacct.errors import InputError, InputTypeError
from jaxacct.guarantee import Guarantee
from jaxacct.mechanism import MatrixMechanism, check_mechanism
from jaxacct.montecarlo.evr import bounds as evr, verification
from jaxacct.montecarlo.engine import keys as keys_lib
from jaxacct.montecarlo.evr import ledger as ledger_lib
from jaxacct.montecarlo.evr.calibration import Calibration, calibrate_noise_multiplier
from jaxacct.montecarlo.evr.estimator import estimate_delta

AUTO = 'auto'
MONTE_CARLO = 'monte_carlo'

# ε grid of the estimation step when only δ is given: (0, ε_fallback(δ_b)] in this many steps.
_EPSILON_GRID_POINTS = 64
# The estimated ε is the smallest grid point with δ̂ + this many standard errors ≤ δ_b, so the
# verification (fresh draws, N ≥ the estimation's) passes with high probability.
_ESTIMATION_STANDARD_ERRORS = 3.0


class NotVerifiedError(RuntimeError):
  """The verifier rejected the mechanism at the requested (ε, δ) (Algorithm 5: δ̂ > δ_b).

  Attributes:
    verification: the ``verification.Verification`` (δ̂ per direction, N, δ_b).
  """

  def __init__(self, message: str, verification_result):
    super().__init__(message)
    self.verification = verification_result


def accountant_choices() -> tuple[str, ...]:
  """The values of ``accountant``: auto, monte_carlo and every registered deterministic name."""
  return (AUTO, MONTE_CARLO, *deterministic.available())


def choose_accountant(mechanism: MatrixMechanism, accountant: str = AUTO, *,
                      adjacency: str = Adjacency.ZERO_OUT.value) -> str:
  """``"monte_carlo"``, a deterministic accountant's name, or ``"auto"`` (the tightest of the
  deterministic accountants, where one supersedes Monte Carlo for ``mechanism``).

  Raises:
    InputError: an unknown accountant, or Monte Carlo under an adjacency other than zero-out
      (the message names the accountants that cover it).
  """
  choices = accountant_choices()
  if accountant not in choices:
    raise InputError(argument='accountant', value=accountant,
                     requirement=f'must be one of {", ".join(choices)}, got {accountant!r}')
  if accountant == AUTO and deterministic.superseding_monte_carlo(mechanism) is None:
    accountant = MONTE_CARLO
  if accountant == MONTE_CARLO and adjacency != Adjacency.ZERO_OUT:
    covering = [a.name for a in deterministic.accountants() if adjacency in a.adjacencies]
    raise InputError(f'Monte Carlo accounting is for zero-out adjacency (equal to add/remove '
                     f'without truncation); the accountants that cover {adjacency}: '
                     f'{", ".join(covering)}', argument='adjacency', value=adjacency,
                     alternatives={Adjacency.ZERO_OUT.value: None})
  return accountant


@dataclasses.dataclass(frozen=True)
class AccountantChoice:
  """Which accountant answers a request, and why (``choose``; ``Calibration.choice``).

  Attributes:
    requested: what the caller asked for (``"auto"``, ``"monte_carlo"`` or a name).
    name: ``"monte_carlo"``, a deterministic accountant's name, or ``"auto"`` (the tightest
      supporting deterministic accountant answers each query; ``TightestCurve``).
    reason: one sentence: why this one.
    adjacency: the neighbouring relation it accounts.
  """

  requested: str
  name: str
  reason: str
  adjacency: str

  @property
  def monte_carlo(self) -> bool:
    return self.name == MONTE_CARLO

  def to_dict(self) -> dict:
    return dataclasses.asdict(self)


def choose(mechanism: MatrixMechanism, accountant: str | AccountantChoice = AUTO, *,
           adjacency: str = Adjacency.ZERO_OUT.value,
           accountant_options: dict | None = None) -> AccountantChoice:
  """The one place ``accountant`` is resolved for a mechanism (σ is not read), with the reason;
  every refusal before any compute.

  ``"auto"``: the deterministic accountants where one supersedes Monte Carlo for the mechanism
  (``DeterministicAccountant.supersedes_monte_carlo``), and then one of them must support it
  under ``adjacency`` and ``accountant_options``; else verified Monte Carlo. A named
  deterministic accountant must support the mechanism (its refusal is the error's text). An
  ``AccountantChoice`` (made earlier in the same run, e.g. by the CLI before its plan) is
  returned as is: ``auto`` is resolved once per run.

  Raises:
    InputError: an unknown accountant or adjacency; Monte Carlo under an adjacency other than
      zero-out; a deterministic choice that does not support the mechanism (with its reason).
    InputTypeError: an option no chosen accountant takes.
  """
  if isinstance(accountant, AccountantChoice):  # made once per run by its caller
    if accountant.adjacency != adjacency:
      raise InputError(f'differs from the choice\'s {accountant.adjacency}',
                       argument='adjacency', value=adjacency)
    return accountant
  options = {} if accountant_options is None else dict(accountant_options)
  name = choose_accountant(mechanism, accountant, adjacency=adjacency)
  if name == MONTE_CARLO:
    reason = ('requested' if accountant == MONTE_CARLO else
              f'no registered deterministic accountant supersedes Monte Carlo for '
              f'{type(mechanism.scheme).__name__}: verified Monte Carlo (Estimate-Verify-Release, '
              f'Dong & Ganesh (2026) App. A)')
    if options:
      raise InputError(f'{", ".join(sorted(options))} are options of a deterministic '
                       'accountant, not of Monte Carlo accounting', argument='accountant_options')
    return AccountantChoice(accountant, name, reason, adjacency)
  if adjacency not in {a.value for a in Adjacency}:
    raise InputError(argument='adjacency', value=adjacency, requirement=(
        f'must be one of {", ".join(a.value for a in Adjacency)}, got {adjacency!r}'))
  taken = {**options, 'adjacency': adjacency}
  if name == AUTO:
    # none supports it: the refusal gives every accountant's reason, as accountant='auto'
    chosen = deterministic_functions.chosen_accountants(mechanism, AUTO, taken,
                                                        at_sigma=False)  # σ: a placeholder
    return AccountantChoice(accountant, name, (
        f'{deterministic.superseding_monte_carlo(mechanism)} supersedes Monte Carlo for '
        f'{type(mechanism.scheme).__name__}; the tightest of '
        f'{", ".join(a.name for a, _ in chosen)} answers'), adjacency)
  try:
    refusal = deterministic.get(name).supports(mechanism, **taken)
  except (TypeError, ValueError) as error:  # an option it does not take, or a value it refuses
    kind = InputTypeError if isinstance(error, TypeError) else InputError
    raise kind(str(error), argument='accountant_options') from None
  if refusal is not None:
    raise InputError(refusal, argument='accountant', value=name,
                     alternatives=deterministic.alternatives(mechanism, taken))
  return AccountantChoice(accountant, name, 'requested', adjacency)


def _accountant_options(value) -> dict:
  """``accountant_options`` as a dict (None: none), ``InputTypeError`` otherwise."""
  if value is None:
    return {}
  if not isinstance(value, dict):
    raise InputTypeError(f'accountant_options must be a dict of the deterministic '
                         f'accountant\'s options, got {value!r}')
  return dict(value)


def _refuse_monte_carlo_arguments(function: str, choice: AccountantChoice, *, key,
                                  monte_carlo: MonteCarloOptions, run: RunOptions) -> None:
  """A named deterministic accountant would silently not use ``key``, ``monte_carlo`` or
  ``run.ledger``: refused. Under ``"auto"`` the caller cannot know the choice: allowed."""
  if choice.requested == AUTO:
    return
  unused = [name for name, given in (('key', key is not None),
                                     ('monte_carlo', monte_carlo != MonteCarloOptions()),
                                     ('run.ledger', run.ledger is not None)) if given]
  if unused:
    work = {'account': 'accounting', 'calibrate': 'calibration'}[function]
    raise InputError(f'{function}: {unused[0]} is for Monte Carlo {work}, not used by '
                     f'accountant={choice.requested!r}; drop it, or use '
                     'accountant=\'monte_carlo\'')


@options_lib.moved
def account(mechanism: MatrixMechanism, *, epsilon: float | None = None,
            delta: float | None = None, key=None, accountant: str = AUTO,
            adjacency: str = Adjacency.ZERO_OUT.value, accountant_options: dict | None = None,
            monte_carlo: MonteCarloOptions | None = None,
            run: RunOptions | None = None) -> Guarantee:
  """The (ε, δ) guarantee of ``mechanism``, by the accountant a config's ``accountant:`` picks.

  Args:
    mechanism: the ``MatrixMechanism`` (scheme, strategy, σ).
    epsilon / delta: give δ for ε(δ), ε for δ(ε) (deterministic accountants), or both to
      prove that (ε, δ) holds. Monte Carlo needs δ (the overall δ of Theorem A.1); without ε
      it estimates the smallest ε its verification is likely to pass (from the estimation
      stream: the smallest point of a grid on (0, ε_fallback(δ_b)] with δ̂ + 3 s.e. ≤ δ_b),
      then verifies it on fresh draws.
    key: a JAX key, required for Monte Carlo (never a default key).
    accountant: ``"auto"`` (``choose_accountant``), ``"monte_carlo"`` or a deterministic
      accountant's name.
    adjacency: the neighbouring relation (deterministic accountants that cover it; Monte
      Carlo is for zero-out only).
    accountant_options: options of the deterministic accountant (e.g. renyi's
      ``{'bandwidths': 4}``).
    monte_carlo: ``MonteCarloOptions`` of the Monte Carlo verification
      (``verification.verify``): ``num_samples``, ``base_delta``, ``attempt``, ``fallback``,
      ``precision``, and ``estimation_samples`` of the ε estimate (default as
      ``calibrate_noise_multiplier``'s); ``proposal='tilted'`` with ``tilt_order`` verifies
      the remove direction tilted (``montecarlo/evr/tilted.py``; ε required, δ_b default
      δ/2, each direction sized by its own support), ``proposal='auto'`` the tilt where it
      covers the mechanism and helps (with ε given; plain otherwise); other fields are
      refused.
    run: ``RunOptions`` (devices, progress, checkpoint, ledger, max_seconds).

  A ``key``, ``monte_carlo`` or ``run.ledger`` given with an explicit deterministic
  ``accountant`` is refused (it would be silently unused); with ``"auto"`` they are allowed,
  since the caller cannot know the choice, and used only if Monte Carlo is chosen.

  Returns:
    A ``Guarantee`` naming its ``method`` and ``accountant``: deterministic (the accountant
    that gave the answer; for ``"auto"`` the tightest; for Monte Carlo, the fallback when it
    alone proves the mechanism at (ε, δ_b), with its own δ(ε)), or ``verified_mc``.

  Raises:
    InputError: bad arguments, before any compute. NotVerifiedError: the verifier rejected
    the mechanism at (ε, δ) (its δ̂ exceeded δ_b); the attempt is recorded in the ledger.

  References:
    Dong & Ganesh, arXiv 2602.09338v2, App. A (Algorithm 5); the deterministic accountants'
    own papers (``jaxacct.deterministic``).
  """
  check_mechanism(mechanism)
  if epsilon is None and delta is None:
    raise InputError('account needs epsilon (for δ(ε)), delta (for ε(δ)) or both')
  if epsilon is not None:
    epsilon = _validate.real_number('epsilon', epsilon)
    if not 0.0 <= epsilon < math.inf:
      raise InputError(f'epsilon must be finite and >= 0, got {epsilon}')
  if delta is not None:
    delta = _validate.probability('delta', delta)
    if delta >= 1.0:
      raise InputError(f'delta must be in (0, 1), got {delta}')
  monte_carlo = options_lib.monte_carlo_options(monte_carlo, 'account', ACCOUNT_FIELDS)
  run = options_lib.run_options(run)
  accountant_options = _accountant_options(accountant_options)
  choice = choose(mechanism, accountant, adjacency=adjacency,
                  accountant_options=accountant_options)
  if choice.monte_carlo:
    return _verified(mechanism, epsilon, delta, key=key, monte_carlo=monte_carlo, run=run)
  _refuse_monte_carlo_arguments('account', choice, key=key, monte_carlo=monte_carlo, run=run)
  curve = deterministic_functions.privacy_curve(mechanism, accountant=choice.name,
                                                adjacency=adjacency, **accountant_options)
  if delta is None:
    delta = curve.delta_for_epsilon(epsilon)
  else:
    proven = curve.epsilon_for_delta(delta)
    if epsilon is not None and proven > epsilon:
      raise InputError(f'the mechanism is not ({epsilon}, {delta})-DP by {choice.name}: its '
                       f'ε(δ) is {proven:.6g}')
    epsilon = proven if epsilon is None else epsilon
  name = curve.chosen(delta) if isinstance(curve, deterministic_functions.TightestCurve) \
      else choice.name
  return Guarantee(epsilon=float(epsilon), delta=float(delta), method=Method.DETERMINISTIC,
                   noise_multiplier=float(mechanism.noise_multiplier), adjacency=adjacency,
                   bounded=mechanism.bounded, accountant=name)


# The MonteCarloOptions fields ``account`` uses.
ACCOUNT_FIELDS = frozenset({'num_samples', 'base_delta', 'estimation_samples', 'attempt',
                            'fallback', 'precision', 'proposal', 'tilt_order',
                            'tilt_state_budget'})


def _verified(mechanism, epsilon, delta, *, key, monte_carlo: MonteCarloOptions,
              run: RunOptions) -> Guarantee:
  """Algorithm 5 with the candidates (M, M at the fallback's σ_up) at (ε, δ); ε estimated
  first when not given (``account``)."""
  if delta is None:
    raise InputError('Monte Carlo accounting verifies an overall delta: give delta (and '
                     'epsilon, or let account estimate it), or use estimate_delta for δ̂(ε)')
  if key is None:
    raise InputError('Monte Carlo accounting needs key= (a JAX key; never a default key)')
  if monte_carlo.proposal == 'tilted' or (monte_carlo.proposal == 'auto' and epsilon is not None):
    return _verified_tilted(mechanism, epsilon, delta, key=key, monte_carlo=monte_carlo,
                            run=run)
  precision = monte_carlo.precision
  estimation_run, verification_run = _phase_runs(run)
  # The attempt's N and δ_b from the ledger before any compute (ε may be estimated below:
  # until then every recorded run of the mechanism is taken to back the claim).
  ledger = ledger_lib.ledger_from(run.ledger)
  n, base = verification.sample_size(
      ledger, mechanism, epsilon=epsilon, delta=delta,
      key_data=keys_lib.key_words(keys_lib.canonicalize_key(key)),
      num_samples=monte_carlo.num_samples, base_delta=monte_carlo.base_delta, shared_draws=True,
      precision=None if precision == 'auto' else precision, attempt=monte_carlo.attempt)
  verification_run = dataclasses.replace(verification_run, ledger=ledger)
  estimation_run = dataclasses.replace(estimation_run, ledger=None)  # an estimate charges none
  fallback = verification.fallback_accountant(monte_carlo.fallback)
  verification.check_fallback(fallback, mechanism)
  if epsilon is None:
    epsilon = _estimated_epsilon(mechanism, key, fallback, n, base,
                                 monte_carlo.estimation_samples, precision, estimation_run)
  return _against_fallback(mechanism, epsilon, delta, key=key, fallback=fallback,
                           run=verification_run, monte_carlo=MonteCarloOptions(num_samples=n, base_delta=base,
                                                         attempt=monte_carlo.attempt,
                                                         fallback=fallback, precision=precision))


def _verified_tilted(mechanism, epsilon, delta, *, key, monte_carlo: MonteCarloOptions,
                     run: RunOptions) -> Guarantee:
  """``_verified`` with the tilted remove direction (``montecarlo/evr/tilted.py``): the
  candidates (M, M at σ_up) verified with per-direction sample sizes (``verification.verify``
  sizes them from each direction's support). ε must be given: the plain ε estimate needs
  ~50/δ_b samples, which the tilt exists to avoid; δ_b is the given one or δ/2."""
  if epsilon is None:
    raise InputError(argument='epsilon', requirement="is required with monte_carlo.proposal="
                     "'tilted' (account's ε estimate samples plainly, ~50/δ_b draws)",
                     suggestion={'monte_carlo.proposal': 'plain'})
  if monte_carlo.estimation_samples is not None:
    raise InputError(argument='monte_carlo.estimation_samples',
                     value=monte_carlo.estimation_samples,
                     requirement="is not used with proposal='tilted' (ε is given)")
  base = monte_carlo.base_delta if monte_carlo.base_delta is not None else delta / 2
  fallback = verification.fallback_accountant(monte_carlo.fallback)
  verification.check_fallback(fallback, mechanism)
  return _against_fallback(mechanism, epsilon, delta, key=key, fallback=fallback,
                           run=_phase_runs(run)[1],
                           monte_carlo=dataclasses.replace(monte_carlo, base_delta=base,
                                                           fallback=fallback))


def _against_fallback(mechanism, epsilon, delta, *, key, fallback, run: RunOptions,
                      monte_carlo: MonteCarloOptions) -> Guarantee:
  """The fallback's own guarantee when it proves the mechanism at (ε, δ_b) (nothing sampled or
  charged), else Algorithm 5 on (M, M at the fallback's σ_up); ``NotVerifiedError`` when the
  verifier rejects M."""
  base = monte_carlo.base_delta
  proven = fallback.delta_for_epsilon(mechanism, epsilon)
  if proven <= base:  # the fallback alone proves it: no Monte Carlo to run or charge
    return Guarantee(epsilon=epsilon, delta=float(proven), method=Method.DETERMINISTIC,
                     noise_multiplier=float(mechanism.noise_multiplier),
                     bounded=mechanism.bounded, accountant=fallback.name)
  sigma_up = fallback.sigma(mechanism.scheme, mechanism.matrix, epsilon=epsilon, delta=base)
  candidates = [mechanism, MatrixMechanism(mechanism.scheme, mechanism.matrix, sigma_up)]
  result = verification.verify(key, candidates, epsilon=epsilon, delta=delta, run=run,
                               monte_carlo=monte_carlo)
  if result.index == 0:
    return result.guarantee
  worst = max(float(np.asarray(result.delta_hat[d])[0]) for d in result.delta_hat)
  raise NotVerifiedError(
      f'the verifier rejected σ = {mechanism.noise_multiplier:g} at (ε, δ) = ({epsilon:g}, '
      f'{delta:g}): δ̂ = {worst:.4g} > δ_b = {result.base_delta:.4g} on '
      f'{result.num_samples:,} samples per direction; {fallback.name} proves σ ≥ '
      f'{sigma_up:.6g}. A new verification of this mechanism at the same (ε, δ) is another '
      'attempt (monte_carlo=MonteCarloOptions(attempt=2))', result)


def _estimated_epsilon(mechanism, key, fallback, n, base, estimation_samples, precision,
                       run) -> float:
  """The smallest ε of a grid on (0, ε_fallback(δ_b)] whose estimated δ̂ + 3 s.e. ≤ δ_b
  (estimation stream only: the verification draws stay unseen), else ε_fallback(δ_b)."""
  ceiling = fallback.epsilon_for_delta(mechanism, base)
  if estimation_samples is None:
    estimation_samples = evr.default_estimation_samples(n, base)
  grid = np.linspace(0.0, ceiling, _EPSILON_GRID_POINTS + 1)[1:]
  estimate = estimate_delta(key, mechanism, grid, estimation_samples,
                            monte_carlo=MonteCarloOptions(precision=precision), run=run)
  bound = np.max([np.asarray(estimate.delta_hat[d]) + _ESTIMATION_STANDARD_ERRORS
                  * np.asarray(estimate.standard_error[d]) for d in estimate.delta_hat], axis=0)
  passing = np.flatnonzero(bound <= base)
  return float(grid[passing[0]] if passing.size else ceiling)


def _phase_runs(run: RunOptions) -> tuple[RunOptions, RunOptions]:
  """The run options of the estimation and the verification: a checkpoint folder gets one
  subfolder per phase (each resumes on its own)."""
  if run.checkpoint is None:
    return run, run
  folder = run.checkpoint
  return (dataclasses.replace(run, checkpoint=folder / 'estimation'),
          dataclasses.replace(run, checkpoint=folder / 'verification'))


@options_lib.moved
def calibrate(scheme, strategy, *, epsilon: float, delta: float, key=None,
              accountant: str | AccountantChoice = AUTO, adjacency: str = Adjacency.ZERO_OUT.value,
              accountant_options: dict | None = None,
              monte_carlo: MonteCarloOptions | None = None,
              run: RunOptions | None = None) -> Calibration:
  """The smallest σ at which ``(scheme, strategy)`` is (ε, δ)-DP, by the accountant a config's
  ``accountant:`` picks (``choose``): one call whatever answers.

  Monte Carlo: ``calibrate_noise_multiplier`` (Algorithm 5, Estimate-Verify-Release, Dong &
  Ganesh (2026) App. A) with ``monte_carlo`` and ``run``; it needs ``key`` and charges the
  attempt ledger. Deterministic: ``calibrate_deterministic`` (the accountant's σ search, rounded
  up) with ``accountant_options``; ``run.progress`` sees its probes. Arguments of the other kind
  are refused when the accountant is named, and allowed (unused) under ``"auto"``, whose choice
  the caller cannot know — except ``monte_carlo.estimate_only``, which is refused for a
  deterministic choice (its answer is a guarantee, not an estimate).

  Args:
    scheme, strategy: the sampling scheme and the strategy matrix C.
    epsilon, delta: the target (δ is the overall δ for Monte Carlo).
    key: a JAX key or an int seed, required for Monte Carlo (never a default key).
    accountant: ``"auto"``, ``"monte_carlo"`` or a registered deterministic accountant (or
      the ``AccountantChoice`` of ``choose``, made once per run).
    adjacency: the neighbouring relation (Monte Carlo: zero-out only).
    accountant_options: the deterministic accountant's options (e.g. pld's
      ``value_discretization_interval``) and its σ search's ``tolerance``.
    monte_carlo, run: ``MonteCarloOptions`` and ``RunOptions`` (``jaxacct/options.py``).

  Returns:
    ``Calibration``: the mechanism at σ, its ``Guarantee``, ``choice`` (which accountant and
    why), ``explain()``, ``to_dict()``; the Monte Carlo search record and ledger charge, or the
    deterministic accountant's curve at σ.
  """
  probe = MatrixMechanism(scheme, strategy, 1.0)  # checks the pair before any compute
  options = _accountant_options(accountant_options)
  # The σ search's own option (calibrate_deterministic's), not the accountant's.
  search = {name: options.pop(name) for name in _SEARCH_OPTIONS if name in options}
  choice = choose(probe, accountant, adjacency=adjacency, accountant_options=options)
  if choice.monte_carlo:
    if search:
      raise InputError(f'accountant_options: {", ".join(search)} is an option of a '
                       'deterministic σ search, not of Monte Carlo calibration')
    if key is None:
      raise InputError(f'key: Monte Carlo calibration ({choice.reason}) needs key=, a JAX key '
                       'or an int seed; there is no default key')
    result = calibrate_noise_multiplier(scheme, strategy, epsilon=epsilon, delta=delta,
                                        key=keys_lib.key_from(key), monte_carlo=monte_carlo,
                                        run=run)
    return dataclasses.replace(result, choice=choice)
  monte_carlo = options_lib.monte_carlo_options(monte_carlo, 'calibrate', _CALIBRATE_FIELDS)
  run = options_lib.run_options(run)
  if monte_carlo.estimate_only:
    raise InputError(f'monte_carlo.estimate_only: {choice.name} calibrates this mechanism '
                     'deterministically (a guarantee in one search, nothing to estimate); '
                     "drop it, or use accountant='monte_carlo'")
  _refuse_monte_carlo_arguments('calibrate', choice, key=key, monte_carlo=monte_carlo, run=run)
  mechanism, guarantee = deterministic_functions.calibrate_deterministic(
      scheme, strategy, epsilon=epsilon, delta=delta, accountant=choice.name,
      adjacency=adjacency, progress=run.progress, **search, **options)
  curve = deterministic_functions.privacy_curve(mechanism, accountant=choice.name,
                                                adjacency=adjacency, **options)
  return Calibration(mechanism, guarantee, (), None, choice=choice, curve=curve)


# Options of the deterministic σ search (``calibrate_deterministic``) that ``calibrate`` takes in
# ``accountant_options`` beside the accountant's own.
_SEARCH_OPTIONS = ('tolerance',)
# A deterministic calibration refuses Monte Carlo options rather than drop them: all are known.
_CALIBRATE_FIELDS = frozenset(f.name for f in dataclasses.fields(MonteCarloOptions))
