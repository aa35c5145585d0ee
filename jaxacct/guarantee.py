"""The result every accountant returns: an (ε, δ) guarantee and how it was obtained.

References:
  Andy Dong and Arun Ganesh, "Privacy Amplification for BandMF via b-Min-Sep Subsampling",
  arXiv:2602.09338 (v2): App. A (Estimate-Verify-Release), App. B (r-min-sep bounds)
  (docs/references.md).
"""

from __future__ import annotations

import dataclasses
import json

from jaxacct.conventions import ADJACENCIES, METHODS, PROVEN_METHODS, Adjacency, Method
from jaxacct.errors import InputError


@dataclasses.dataclass(frozen=True, kw_only=True)
class Guarantee:
  """An (ε, δ)-DP statement about one mechanism, with its provenance.

  Attributes:
    epsilon: ε.
    delta: the overall δ (for ``verified_mc``: δ_overall of Theorem A.1, not δ_b).
    method: ``"verified_mc"`` (Estimate-Verify-Release, Dong & Ganesh (2026) App. A),
      ``"fallback"`` (the last candidate of Algorithm 5, proven by a
      deterministic accountant at δ_b; the released δ is still δ_overall),
      ``"deterministic"`` (a closed-form / PLD accountant), ``"estimate"``
      (Monte Carlo estimate only: **not** a guarantee), ``"conjectural"``
      (rests on an unproven conjecture). See ``jaxacct.conventions.Method``.
    noise_multiplier: σ of the mechanism the statement is about.
    delta_hat: per-direction MC estimates at ε (``{"remove": …, "add": …}``) or None.
    num_samples: MC samples per direction behind the statement (0 if none).
    base_delta: the verification threshold δ_b (None if not verified).
    seed: the raw key words of the randomness used (None if none).
    attempts: verification runs of the mechanism charged by a union bound (1 normally;
      every run of the same scheme and strategy up to scale counts, at any target:
      ``montecarlo/evr/ledger.py``).
    attempts_checked: for a verified Monte Carlo statement, True when the attempts were
      counted in a persistent ledger (the user's file, the default), False when in a
      ``VerificationLedger`` held in memory only: then "attempts unchecked" — earlier
      verifications in other processes are not counted, and the statement rests on the
      caller declaring ``attempt``. None when nothing was verified by sampling.
    adjacency: the neighbouring relation of the statement: ``"zero_out"`` (one
      example replaced by one with zero gradient; the Monte Carlo accountants,
      equal to add/remove without truncation), ``"add_remove"`` or
      ``"replace_one"`` (deterministic accountants). Under truncation the
      dataset size is public in every case.
    bounded: the privacy losses behind the statement are bounds, not exact
      (Dong & Ganesh (2026) App. B r-min-sep bounds for a dense ``LowerTriangular`` C:
      each direction's loss is over-stated, so ε and δ are upper bounds and
      the statement is valid but may be loose).
    accountant: the name of the deterministic accountant that proved the
      statement (``"pld"``, ``"unamplified_gaussian"``, …; for ``fallback`` the
      accountant that proved the last candidate), or None for Monte Carlo
      statements that no deterministic accountant proved.
    precision: the arithmetic of the Monte Carlo device program behind the statement:
      ``"float64"``, or ``"float32"`` (the 32-bit program; every hockey-stick term was
      evaluated at ε − η with a certified per-sample margin η ≥ |L̂ − L| and block sums
      rounded up, so δ̂ is ≥ that of the exact losses: ``jaxacct/montecarlo/engine/margin.py``).
    margin: for ``"float32"``, the largest per-sample margin η among the verification
      draws of the released candidate (None otherwise).
    tilt: None for plain sampling; for a release verified with ``proposal="tilted"``
      (``montecarlo/evr/tilted.py``): the proposal per direction (``"tilted"``, ``"plain"``, or
      ``"certified"`` — a proven bound on δ at ε is ≤ δ_b, no sample), ``tilt_order`` α,
      ``log_z`` (ln Z_α, rounded up), its method and ``tables_digest`` (the tuple sampler's
      host tables, ``Tilt.tables_digest``), ``support`` (M(α, ε) of the released candidate)
      and per direction [N, support] (``num_samples`` is then the larger N).
  """

  epsilon: float
  delta: float
  method: Method | str
  noise_multiplier: float
  delta_hat: dict | None = None
  num_samples: int = 0
  base_delta: float | None = None
  seed: tuple[int, ...] | None = None
  attempts: int = 1
  attempts_checked: bool | None = None
  adjacency: str = 'zero_out'
  bounded: bool = False
  accountant: str | None = None
  precision: str = 'float64'
  margin: float | None = None
  tilt: dict | None = None

  def __post_init__(self):
    if self.method not in METHODS:
      raise InputError(f'method must be one of {", ".join(METHODS)}, got {self.method!r}')
    if self.precision not in ('float64', 'float32'):
      raise InputError(f'precision must be "float64" or "float32", got {self.precision!r}')
    if self.adjacency not in ADJACENCIES:
      raise InputError(f'adjacency must be one of {", ".join(ADJACENCIES)}, got {self.adjacency!r}')
    # Plain strings inside, whatever enum or str was passed: equality, hashing and JSON agree.
    object.__setattr__(self, 'method', Method(self.method).value)
    object.__setattr__(self, 'adjacency', Adjacency(self.adjacency).value)

  def __repr__(self) -> str:
    """One line: σ, (ε, δ), how it was obtained and by which accountant."""
    return (f'Guarantee(noise_multiplier={self.noise_multiplier:.6g}, epsilon={self.epsilon:.6g}, '
            f'delta={self.delta:.4g}, method={self.method!r}, accountant={self.accountant!r}'
            + (f', num_samples={self.num_samples}' if self.num_samples else '')
            + (f', precision={self.precision!r}' if self.precision != 'float64' else '')
            + (', attempts unchecked' if self.attempts_checked is False else '') + ')')

  @property
  def verified(self) -> bool:
    """True when the statement is a proven guarantee (verified MC, fallback or deterministic)."""
    return self.method in PROVEN_METHODS

  def to_dict(self) -> dict:
    """A JSON-ready dict of every field plus ``verified`` (seed as a list of ints)."""
    record = dataclasses.asdict(self)
    if self.tilt is None:
      del record['tilt']  # plain sampling: the form written before tilted releases existed
    record['seed'] = None if self.seed is None else [int(w) for w in self.seed]
    record['verified'] = self.verified
    return record

  def to_json(self) -> str:
    """The statement as one JSON object (``to_dict``); ``from_json`` reads it back."""
    return json.dumps(self.to_dict(), sort_keys=True)

  @classmethod
  def from_json(cls, text: str) -> 'Guarantee':
    record = json.loads(text)
    record.pop('verified', None)
    if record.get('seed') is not None:
      record['seed'] = tuple(record['seed'])
    return cls(**record)
