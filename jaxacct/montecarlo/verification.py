"""Algorithm 5 (Estimate-Verify-Release) on the verification stream, and its attempt ledger.

Candidates M_1 … M_k with increasing σ are verified on fresh draws of the key's
*verification* stream (through the one stream driver, ``stream.py``); the last one is
proven by a deterministic fallback accountant. The failure-bound arithmetic (Fact 4.2,
δ_overall, sample sizes) is in ``evr.py``.

References:
  Dong & Ganesh, arXiv 2602.09338v2, App. A (Algorithm 5, Theorem A.1); Chua et al.,
  "Balls-and-bins sampling for DP-SGD", AISTATS 2025, Fact 4.2; spec 000 §8.
"""

from __future__ import annotations

import dataclasses
from typing import Any

from jaxacct import _validate
from jaxacct.conventions import DIRECTIONS, Method
from jaxacct.deterministic import base as accountants
from jaxacct.guarantee import Guarantee
from jaxacct.mechanism import MatrixMechanism
from jaxacct.montecarlo import candidates as candidates_lib
from jaxacct.montecarlo import keys as keys_lib
from jaxacct.montecarlo.evr import overall_delta, resolve_sample_size


DEFAULT_FALLBACK = 'unamplified_gaussian'
"""The fallback accountant of Algorithm 5 unless one is given: valid for every scheme."""


def fallback_accountant(fallback) -> accountants.DeterministicAccountant:
  """The deterministic accountant that proves Algorithm 5's last candidate M_k.

  Args:
    fallback: a registered accountant name, a ``DeterministicAccountant``, or None for
      ``DEFAULT_FALLBACK`` (the unamplified Gaussian bound, which covers every scheme).
  """
  if fallback is None:
    fallback = DEFAULT_FALLBACK
  if isinstance(fallback, accountants.DeterministicAccountant):
    return fallback
  if not isinstance(fallback, str):
    raise TypeError(f'fallback must be a deterministic accountant or its registered name '
                    f'({", ".join(accountants.available())}), got {fallback!r}')
  return accountants.get(fallback)


def check_fallback(fallback: accountants.DeterministicAccountant,
                   mechanism: MatrixMechanism) -> None:
  """ValueError unless ``fallback`` supports ``mechanism`` (zero-out adjacency)."""
  reason = fallback.supports(mechanism)
  if reason is not None:
    raise ValueError(f'fallback accountant {fallback.name!r} cannot prove the last candidate '
                     f'({reason}); the default fallback {DEFAULT_FALLBACK!r} covers every scheme')


class VerificationLedger:
  """The verification runs made for each (scheme, strategy, ε, δ): the attempts to charge.

  Re-running verification with fresh seeds (or other candidates, N, δ_b) until a run passes
  would void Theorem A.1; a repeat must declare itself (``attempt``) and is then charged by
  a union bound over the attempts. A ledger is an explicit object: pass the same one to every
  ``verify`` / ``calibrate_noise_multiplier`` call of a session (a notebook, a team's
  pipeline) that could retry the same guarantee. ``verify`` without a ledger uses a fresh
  one, so it only sees its own run: the caller then answers for declaring ``attempt``.
  """

  def __init__(self):
    self._runs: dict[str, list[str]] = {}

  @staticmethod
  def guarantee_id(mechanism: MatrixMechanism, epsilon: float, delta: float) -> str:
    """The identity of a guarantee: one ledger entry per (scheme, strategy, ε, δ)."""
    return repr((mechanism.scheme, mechanism.matrix.fingerprint, float(epsilon), float(delta)))

  def runs(self, guarantee_id: str) -> tuple[str, ...]:
    """The distinct runs recorded for a guarantee, in order."""
    return tuple(self._runs.get(guarantee_id, ()))

  def attempts_for(self, guarantee_id: str, run: str, attempt: int) -> int:
    """Attempts to charge if ``run`` is made now; raises if it is an undeclared retry."""
    seen = self._runs.get(guarantee_id, [])
    new_run = run not in seen
    if new_run and len(seen) >= attempt:
      raise ValueError(
          f'this mechanism was already verified {len(seen)} time(s) at the same (epsilon, '
          f'delta) with other keys or settings; re-running verification until it passes voids '
          f'the guarantee. Declare the run with attempt={len(seen) + 1} to charge a union '
          'bound over all attempts')
    return max(attempt, len(seen) + new_run)

  def record(self, guarantee_id: str, run: str) -> None:
    """Records ``run`` (once it is certain to draw verification samples)."""
    seen = self._runs.setdefault(guarantee_id, [])
    if run not in seen:
      seen.append(run)


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
  """

  guarantee: Any
  mechanism: Any
  index: int
  accepted: tuple[bool, ...]
  delta_hat: dict
  num_samples: int
  base_delta: float
  sums: Any = None


def released_index(accepted) -> int:
  """i* = min{i : v_j = 1 for all j ≥ i} (0-based) of Algorithm 5; v_k = 1 is forced.

  Scans from the most private candidate down and stops at the first rejection;
  a later acceptance below a rejection does not count (the outcomes need not
  be monotone in σ).
  """
  outcomes = [bool(v) for v in accepted]
  if not outcomes:
    raise ValueError('accepted must list at least one candidate')
  index = len(outcomes) - 1
  while index > 0 and outcomes[index - 1]:
    index -= 1
  return index


def verify(key, candidates, *, epsilon: float, delta: float, num_samples: int | None = None,
           base_delta: float | None = None, shared_draws: bool = True, attempt: int = 1,
           ledger: VerificationLedger | None = None, fallback=None, devices=None,
           progress=None) -> Verification:
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
  arguments before any verification sample is drawn. A second verification of
  the same scheme and strategy at the same (ε, δ) recorded in ``ledger`` that
  differs in anything (key, candidates, N, δ_b, shared draws) raises unless it
  declares itself with ``attempt`` (then the false-acceptance bound is charged
  attempt times). Retries the ledger has not seen must be declared by the caller.

  Args:
    key: typed JAX key; only its verification stream is used.
    candidates: ``MatrixMechanism`` list, increasing σ, last one provably private.
    epsilon: ε.
    delta: the target overall δ.
    num_samples / base_delta: N and δ_b; missing ones are derived
      (``resolve_sample_size``).
    shared_draws: common random numbers across candidates (see ``candidates.py``).
    attempt: the 1-based index of this verification run for this mechanism at (ε, δ).
    ledger: the ``VerificationLedger`` of the session (default: a fresh one, which knows
      only this run).
    fallback: the deterministic accountant proving M_k (a ``DeterministicAccountant`` or
      registered name; default ``"unamplified_gaussian"``). A released fallback's
      ``Guarantee.accountant`` names it.
    devices / progress: devices to shard over (default all local devices); called as
      ``progress(samples_done, samples_total)``.

  References:
    Dong & Ganesh, arXiv 2602.09338v2, App. A (Algorithm 5, Theorem A.1);
    Chua et al., AISTATS 2025, Fact 4.2; spec 000 §8.
  """
  epsilon = _validate.finite_real('epsilon', epsilon)
  attempt = _validate.integer_at_least('attempt', attempt, 1)
  candidates = list(candidates)
  if len(candidates) < 1 or not all(isinstance(m, MatrixMechanism) for m in candidates):
    raise ValueError('candidates must be a non-empty list of jaxacct.MatrixMechanism')
  first = candidates[0]
  if any(m.scheme != first.scheme or m.matrix != first.matrix for m in candidates):
    raise ValueError('candidates must share one scheme and one strategy matrix')
  sigmas = [float(m.noise_multiplier) for m in candidates]
  if any(b <= a for a, b in zip(sigmas, sigmas[1:])):
    raise ValueError(f'candidates must be ordered by strictly increasing noise_multiplier, got {sigmas}')
  n, base = resolve_sample_size(delta, num_samples, base_delta)
  fallback = fallback_accountant(fallback)
  check_fallback(fallback, first)
  if fallback.delta_for_epsilon(candidates[-1], epsilon) > base:
    sigma_up = fallback.sigma(first.scheme, first.matrix, epsilon=epsilon, delta=base)
    raise ValueError(
        f'the last candidate must be (epsilon, base_delta)-DP by a deterministic accountant '
        f'(fallback={fallback.name!r}): noise_multiplier must be >= {sigma_up}, got '
        f'{sigmas[-1]}')
  key = keys_lib.canonicalize_key(key)
  key_data = keys_lib.key_words(key)
  # Any verification run that differs in key, candidates, N, δ_b or shared draws is another
  # attempt at the same guarantee.
  ledger = VerificationLedger() if ledger is None else ledger
  guarantee_id = VerificationLedger.guarantee_id(first, epsilon, delta)
  run = repr((key_data, tuple(sigmas), n, base, bool(shared_draws)))
  attempts = ledger.attempts_for(guarantee_id, run, attempt)
  released_delta = overall_delta(n, base, attempts=attempts)
  if released_delta > delta:
    raise ValueError(f'with attempt = {attempts} the overall delta {released_delta} exceeds '
                     f'delta = {delta}; use more num_samples or a smaller base_delta')
  ledger.record(guarantee_id, run)  # only once the run is certain to draw verification samples

  accepted = [True] * len(candidates)
  delta_hat = {d: [] for d in DIRECTIONS}
  sweep = None
  if len(candidates) > 1:
    sweep = candidates_lib.sweep_sigmas(
        key, first, sigmas[:-1], [epsilon], n, purpose='verification', shared_draws=shared_draws,
        devices=devices, progress=progress)
    for d in DIRECTIONS:
      delta_hat[d] = sweep.delta_hat[d][:, 0].tolist()
    accepted[:-1] = [bool(v <= base) for v in sweep.delta_hat_max[:, 0]]
  index = released_index(accepted)
  chosen = candidates[index]
  method = Method.VERIFIED_MC if index < len(candidates) - 1 else Method.FALLBACK
  if method == Method.VERIFIED_MC and chosen.scheme.conjectural:
    method = Method.CONJECTURAL  # e.g. Algorithm 4 by Conjecture 6.2 (seed 000 §6.5)
  guarantee = Guarantee(
      epsilon=epsilon, delta=released_delta, method=method,
      noise_multiplier=float(chosen.noise_multiplier),
      delta_hat=(None if method == Method.FALLBACK
                 else {d: delta_hat[d][index] for d in DIRECTIONS}),
      num_samples=n, base_delta=base, seed=key_data, attempts=attempts,
      bounded=chosen.bounded and method != Method.FALLBACK,
      accountant=fallback.name if method == Method.FALLBACK else None)
  return Verification(guarantee, chosen, index, tuple(accepted), delta_hat, n, base,
                      None if sweep is None else sweep.sums)
