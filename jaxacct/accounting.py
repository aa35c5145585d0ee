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
import pathlib

import numpy as np

from jaxacct import _validate
from jaxacct.conventions import Adjacency, Method
from jaxacct.deterministic import accountant as deterministic_functions
from jaxacct.deterministic import base as deterministic
from jaxacct.errors import InputError, InputTypeError
from jaxacct.guarantee import Guarantee
from jaxacct.mechanism import MatrixMechanism
from jaxacct.montecarlo import evr, verification
from jaxacct.montecarlo import keys as keys_lib
from jaxacct.montecarlo import ledger as ledger_lib
from jaxacct.montecarlo.estimator import estimate_delta
from jaxacct.montecarlo.options import RunOptions

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
    raise InputError(f'accountant must be one of {", ".join(choices)}, got {accountant!r}')
  if accountant == AUTO and deterministic.superseding_monte_carlo(mechanism) is None:
    accountant = MONTE_CARLO
  if accountant == MONTE_CARLO and adjacency != Adjacency.ZERO_OUT:
    covering = [a.name for a in deterministic.accountants() if adjacency in a.adjacencies]
    raise InputError(f'adjacency: {adjacency} is only for accountant: {", ".join(covering)}; '
                     'the Monte Carlo accountants are for zero-out adjacency (equal to '
                     'add/remove without truncation)')
  return accountant


def account(mechanism: MatrixMechanism, *, epsilon: float | None = None,
            delta: float | None = None, accountant: str = AUTO,
            adjacency: str = Adjacency.ZERO_OUT.value, key=None,
            num_samples: int | None = None, base_delta: float | None = None,
            estimation_samples: int | None = None, attempt: int = 1, fallback=None,
            precision: str = 'float64', run: RunOptions | None = None,
            **options) -> Guarantee:
  """The (ε, δ) guarantee of ``mechanism``, by the accountant a config's ``accountant:`` picks.

  Args:
    mechanism: the ``MatrixMechanism`` (scheme, strategy, σ).
    epsilon / delta: give δ for ε(δ), ε for δ(ε) (deterministic accountants), or both to
      prove that (ε, δ) holds. Monte Carlo needs δ (the overall δ of Theorem A.1); without ε
      it estimates the smallest ε its verification is likely to pass (from the estimation
      stream: the smallest point of a grid on (0, ε_fallback(δ_b)] with δ̂ + 3 s.e. ≤ δ_b),
      then verifies it on fresh draws.
    accountant: ``"auto"`` (``choose_accountant``), ``"monte_carlo"`` or a deterministic
      accountant's name.
    adjacency: the neighbouring relation (deterministic accountants that cover it; Monte
      Carlo is for zero-out only).
    key: a JAX key, required for Monte Carlo (never a default key).
    num_samples / base_delta / attempt / fallback / precision: of the Monte Carlo verification
      (``verification.verify``); ``estimation_samples`` of the ε estimate (default as
      ``calibrate_noise_multiplier``'s).
    run: ``RunOptions`` (devices, progress, checkpoint, ledger, max_seconds).
    **options: of the deterministic accountant (e.g. renyi's ``bandwidths``).

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
  if not isinstance(mechanism, MatrixMechanism):
    raise InputTypeError(f'mechanism must be a jaxacct.MatrixMechanism, got {mechanism!r}')
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
  choice = choose_accountant(mechanism, accountant, adjacency=adjacency)
  if choice == MONTE_CARLO:
    if options:
      raise InputError(f'{", ".join(sorted(options))}: options of a deterministic accountant, '
                       'not of Monte Carlo accounting')
    return _verified(mechanism, epsilon, delta, key=key, num_samples=num_samples,
                     base_delta=base_delta, estimation_samples=estimation_samples,
                     attempt=attempt, fallback=fallback, precision=precision, run=run)
  curve = deterministic_functions.privacy_curve(mechanism, accountant=choice,
                                                adjacency=adjacency, **options)
  if delta is None:
    delta = curve.delta_for_epsilon(epsilon)
  else:
    proven = curve.epsilon_for_delta(delta)
    if epsilon is not None and proven > epsilon:
      raise InputError(f'the mechanism is not ({epsilon}, {delta})-DP by {choice}: its ε(δ) is '
                       f'{proven:.6g}')
    epsilon = proven if epsilon is None else epsilon
  name = curve.chosen(delta) if isinstance(curve, deterministic_functions.TightestCurve) \
      else choice
  return Guarantee(epsilon=float(epsilon), delta=float(delta), method=Method.DETERMINISTIC,
                   noise_multiplier=float(mechanism.noise_multiplier), adjacency=adjacency,
                   bounded=mechanism.bounded, accountant=name)


def _verified(mechanism, epsilon, delta, *, key, num_samples, base_delta, estimation_samples,
              attempt, fallback, precision, run) -> Guarantee:
  """Algorithm 5 with the candidates (M, M at the fallback's σ_up) at (ε, δ); ε estimated
  first when not given (``account``)."""
  if delta is None:
    raise InputError('Monte Carlo accounting verifies an overall delta: give delta (and '
                     'epsilon, or let account estimate it), or use estimate_delta for δ̂(ε)')
  if key is None:
    raise InputError('Monte Carlo accounting needs key= (a JAX key; never a default key)')
  estimation_run, verification_run = _phase_runs(run)
  # The attempt's N and δ_b from the ledger before any compute (ε may be estimated below:
  # until then every recorded run of the mechanism is taken to back the claim).
  ledger = ledger_lib.ledger_from(None if run is None else run.ledger)
  n, base = verification.sample_size(
      ledger, mechanism, epsilon=epsilon, delta=delta,
      key_data=keys_lib.key_words(keys_lib.canonicalize_key(key)), num_samples=num_samples,
      base_delta=base_delta, shared_draws=True,
      precision=None if precision == 'auto' else precision, attempt=attempt)
  verification_run = dataclasses.replace(verification_run or RunOptions(), ledger=ledger)
  if estimation_run is not None:  # an estimate charges no ledger
    estimation_run = dataclasses.replace(estimation_run, ledger=None)
  fallback = verification.fallback_accountant(fallback)
  verification.check_fallback(fallback, mechanism)
  if epsilon is None:
    epsilon = _estimated_epsilon(mechanism, key, fallback, n, base, estimation_samples,
                                 precision, estimation_run)
  proven = fallback.delta_for_epsilon(mechanism, epsilon)
  if proven <= base:  # the fallback alone proves it: no Monte Carlo to run or charge
    return Guarantee(epsilon=epsilon, delta=float(proven), method=Method.DETERMINISTIC,
                     noise_multiplier=float(mechanism.noise_multiplier),
                     bounded=mechanism.bounded, accountant=fallback.name)
  sigma_up = fallback.sigma(mechanism.scheme, mechanism.matrix, epsilon=epsilon, delta=base)
  candidates = [mechanism, MatrixMechanism(mechanism.scheme, mechanism.matrix, sigma_up)]
  result = verification.verify(key, candidates, epsilon=epsilon, delta=delta, num_samples=n,
                               base_delta=base, attempt=attempt, fallback=fallback,
                               precision=precision, run=verification_run)
  if result.index != 0:
    worst = max(float(np.asarray(result.delta_hat[d])[0]) for d in result.delta_hat)
    raise NotVerifiedError(
        f'the verifier rejected σ = {mechanism.noise_multiplier:g} at (ε, δ) = ({epsilon:g}, '
        f'{delta:g}): δ̂ = {worst:.4g} > δ_b = {base:.4g} on {n:,} samples per direction; '
        f'{fallback.name} proves σ ≥ {sigma_up:.6g}. A new verification of this mechanism at '
        f'the same (ε, δ) is another attempt (attempt=2)', result)
  return result.guarantee


def _estimated_epsilon(mechanism, key, fallback, n, base, estimation_samples, precision,
                       run) -> float:
  """The smallest ε of a grid on (0, ε_fallback(δ_b)] whose estimated δ̂ + 3 s.e. ≤ δ_b
  (estimation stream only: the verification draws stay unseen), else ε_fallback(δ_b)."""
  ceiling = fallback.epsilon_for_delta(mechanism, base)
  if estimation_samples is None:
    estimation_samples = evr.default_estimation_samples(n, base)
  grid = np.linspace(0.0, ceiling, _EPSILON_GRID_POINTS + 1)[1:]
  estimate = estimate_delta(key, mechanism, grid, estimation_samples, precision=precision,
                            run=run)
  bound = np.max([np.asarray(estimate.delta_hat[d]) + _ESTIMATION_STANDARD_ERRORS
                  * np.asarray(estimate.standard_error[d]) for d in estimate.delta_hat], axis=0)
  passing = np.flatnonzero(bound <= base)
  return float(grid[passing[0]] if passing.size else ceiling)


def _phase_runs(run: RunOptions | None) -> tuple[RunOptions | None, RunOptions | None]:
  """The run options of the estimation and the verification: a checkpoint folder gets one
  subfolder per phase (each resumes on its own)."""
  if run is None or run.checkpoint is None:
    return run, run
  if not isinstance(run.checkpoint, (str, pathlib.PurePath)):
    raise InputTypeError('account takes a checkpoint folder (a path): it checkpoints its '
                         f'estimation and verification in subfolders, got {run.checkpoint!r}')
  folder = pathlib.Path(run.checkpoint)
  return (dataclasses.replace(run, checkpoint=folder / 'estimation'),
          dataclasses.replace(run, checkpoint=folder / 'verification'))
