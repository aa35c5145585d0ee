"""The attempt ledger of Algorithm 5: every verification run made of each mechanism.

Re-running verification with fresh seeds (or other candidates, N, δ_b, targets) until a run
passes would void Theorem A.1 of Dong & Ganesh (2026); a repeat must declare itself
(``attempt``) and is then charged by a union bound over the attempts (Chua et al., AISTATS
2025, Fact 4.2 with the false-acceptance probabilities added).

**What counts as the same mechanism.** Attempts are counted per *mechanism*, not per target:
the canonical sampling scheme (its class and fields, numbers canonicalised so that
1 == 1.0 == np.float64(1); a number that is not exactly a float is refused by the scheme), the
strategy *up to scale* (``Strategy.scale_free_fingerprint``: C and σ rescaled together are
one mechanism family, as every σ of it is) and the adjacency. Every verification of it counts
— at any (ε, δ), seed, candidate σ, N, δ_b, precision or proposal — because releasing the
best of several targets is also a retry.

**The rule and its proof sketch.** Let runs 1 … k verify the mechanism, run j at (ε_j, δ_j)
with N_j samples and threshold δ_b,j, and let the released claim be run k's: the mechanism
it names is (ε, L)-DP with L = τδ_b, except on the event that some run accepted a candidate
that is not — the only way a false claim can be released, whichever run is chosen and however
the choice depends on the outcomes. A run j can back the claim only if its own statement
implies it (ε_j ≤ ε and δ_o,j ≤ δ, its released δ at most the target; a weaker statement
cannot be released as this one). For such a run, a candidate that is not (ε, L)-DP has
δ(ε_j) ≥ δ(ε) > L, so by Fact 4.2 run j accepts it with probability at most
exp(−N_j·KL(δ_b,j ‖ L)) (1 when δ_b,j ≥ L). The union bound over the runs gives
Q(τ) = Σ_j q_j(τ), and Theorem A.1 releases δ_o = min_τ τδ_b + Q(τ)(1 − τδ_b)
(``evr.overall_delta(N, δ_b, attempts=k, earlier=…)``). Runs that cannot back the claim are
still counted — charged as this run's own q, so k identical runs charge k·q exactly as before
— and a retry is refused unless declared (``attempt`` ≥ the runs recorded + 1). A release
supersedes the mechanism's earlier ones: publish only the latest.

What the count of recorded runs does not cover (docs/proofs/tilting.md, (f)): the union is
over the runs made so far, so it bounds a procedure's failure only in expectation over the
user's choices. A user who *would* retry if the first result looked bad, and publishes the
first when it does not, has a procedure whose failure probability is up to k·q though the
first release charged q. Such a plan must be declared up front: ``attempt=k`` on the first
run charges k attempts from the start (``attempts = max(attempt, runs + 1)``).

- ``VerificationLedger``: in memory, for one process, *opted into explicitly*: its releases
  say "attempts unchecked" (``Guarantee.attempts_checked`` False).
- ``FileLedger``: the default of every API function and CLI call (``ledger_from(None)``): one
  file per user, ``default_path()`` (``$JAXACCT_LEDGER`` moves it). Every charge holds an
  exclusive ``fcntl`` lock on ``PATH.lock``, re-reads the file, checks and records, and
  rewrites the file atomically (write, fsync, rename) with a SHA-256 and a keyed MAC
  (HMAC-SHA256 with the per-user secret kept beside it, ``jaxacct._secret``), so a crash
  leaves the old or the new ledger, two processes cannot both take the same attempt, and an
  edit by someone without the secret is refused. A corrupt, edited or malformed ledger is
  refused (``LedgerError`` naming the file and field), never reset: repair or move it.

What it cannot protect against: the ledger file deleted (or the whole state folder with its
secret), or edited by its owner with the secret; a checkpoint or report that records a charge
then refuses to go on against a ledger that lacks it, but a new run with no such record
cannot know. The guarantee then rests on the user declaring ``attempt``.

Host code (no JAX).

References:
  Andy Dong and Arun Ganesh, "Privacy Amplification for BandMF via b-Min-Sep Subsampling",
  arXiv:2602.09338 (v2): App. A (Algorithm 5, Theorem A.1) (docs/references.md).
  Chua et al., "Balls-and-bins sampling for DP-SGD", AISTATS 2025 (arXiv:2412.16802), Fact 4.2.
"""

from __future__ import annotations

import ast
import contextlib
import dataclasses
import errno
import fcntl
import hashlib
import json
import math
import numbers
import os
import pathlib
import time
from typing import Callable, Iterator

from jaxacct import _files, _secret
from jaxacct.conventions import DIRECTIONS
from jaxacct.mechanism import MatrixMechanism
from jaxacct.montecarlo.engine import sharding
from jaxacct.montecarlo.evr import bounds as evr
from jaxacct.errors import InputError, InputTypeError

FORMAT = 2
ENVIRONMENT_VARIABLE = _secret.LEDGER_VARIABLE
# The one neighbouring relation Monte Carlo accounting verifies (``mechanism.py``).
_ADJACENCY = 'zero_out'


def default_path() -> pathlib.Path:
  """The user's ledger file: ``$JAXACCT_LEDGER``, else ``$XDG_STATE_HOME/jaxacct/ledger.json``
  (``~/.local/state/jaxacct/ledger.json`` without XDG_STATE_HOME), beside the user's secret
  (``jaxacct._secret``): shared by every API call and CLI run of the user, so neither another
  ``--out`` nor a deleted report folder forgets an attempt."""
  return _secret.ledger_path()


class LedgerError(InputError):
  """A ledger file that cannot be used (corrupt, edited, malformed, or its lock cannot be
  taken)."""


class UndeclaredRetryError(InputError):
  """A verification of a mechanism the ledger holds other runs of, without declaring the
  attempt; ``required_attempt`` is the ``attempt`` that declares it, also the error's
  ``suggestion`` (``monte_carlo.attempt``; the CLI writes its config key)."""

  def __init__(self, runs: int):
    self.required_attempt = runs + 1
    super().__init__(
        f'this mechanism (the same scheme, and strategy up to scale) was already verified '
        f'{runs} time(s), at this or another (epsilon, delta) target or with other keys or '
        f'settings; re-running verification until it passes voids the guarantee. Declaring '
        f'the run as attempt {runs + 1} charges a union bound over all attempts (its default '
        'num_samples is then the minimum for that attempt)',
        suggestion={'monte_carlo.attempt': runs + 1})

  def __reduce__(self):  # rebuilt from the count of earlier runs, not from the message
    return type(self), (self.required_attempt - 1,), self.__dict__


# ------------------------------------------------------------------ the mechanism's identity
# Two mechanisms are one when their exact parts agree and their numbers (the scheme's, the
# strategy's scale-free sketch) agree within this relative tolerance: a near-duplicate is
# counted with the mechanism it nearly is (merging more is conservative; rescaling C moves
# its normalised entries by a few ulps, far below it).
RELATIVE_TOLERANCE = 1e-6


def _canonical(value, field: str):
  """A JSON-ready canonical form: equal numbers are equal whatever their type (1, 1.0,
  np.float64(1) → 1.0), so equal mechanisms get one ledger entry."""
  if isinstance(value, (bool, str)) or value is None:
    return value
  if isinstance(value, numbers.Real):
    number = float(value)
    if isinstance(value, numbers.Rational) and not isinstance(value, numbers.Integral) \
        and value != number:  # e.g. Fraction(1, 3)
      raise InputTypeError(f'{field} = {value!r} is not exactly a float; pass a float')
    if isinstance(value, numbers.Integral) and abs(int(value)) >= 2**53:
      raise InputTypeError(f'{field} = {value!r} is too large to compare as a float')
    return number
  if isinstance(value, dict):
    return {str(k): _canonical(v, f'{field}.{k}') for k, v in value.items()}
  if isinstance(value, (list, tuple)):
    return [_canonical(v, f'{field}[{i}]') for i, v in enumerate(value)]
  raise InputTypeError(f'{field} = {value!r} has no canonical ledger form')


def mechanism_description(mechanism: MatrixMechanism) -> dict:
  """The public identity of a mechanism family, as the ledger records it: the canonical scheme
  (numbers as floats), the strategy up to scale (``Strategy.scale_free_sketch``: its kind and
  normalised numbers), the adjacency. σ is not part of it: every candidate σ of one family is
  one mechanism for the attempt count."""
  kind, sketch = mechanism.matrix.scale_free_sketch()
  return {'scheme': _canonical(mechanism.scheme.to_dict(), 'scheme'),
          'strategy': {'kind': str(kind), 'sketch': _canonical(list(sketch), 'strategy')},
          'adjacency': _ADJACENCY}


def _exact_part_and_numbers(description: dict) -> tuple[str, list[float]]:
  """(the digest of everything but the numbers, the numbers in a fixed order)."""
  scheme = description['scheme']
  names = sorted(k for k, v in scheme.items() if isinstance(v, float))
  exact = {'scheme': {k: ('#' if k in names else v) for k, v in scheme.items()},
           'strategy': {'kind': description['strategy']['kind'],
                        'length': len(description['strategy']['sketch'])},
           'adjacency': description['adjacency']}
  text = json.dumps(exact, sort_keys=True, separators=(',', ':'))
  return (hashlib.sha256(text.encode()).hexdigest()[:32],
          [scheme[k] for k in names] + list(description['strategy']['sketch']))


def _legacy_prefix(mechanism: MatrixMechanism) -> str:
  """How format 1 (one entry per (scheme, strategy, ε, δ)) began this mechanism's keys."""
  return repr((mechanism.scheme, mechanism.matrix.fingerprint))[:-1] + ', '


def _close(a: list[float], b: list[float]) -> bool:
  return len(a) == len(b) and all(
      abs(x - y) <= RELATIVE_TOLERANCE * max(abs(x), abs(y)) for x, y in zip(a, b))


# ------------------------------------------------------------------------------ the runs
@dataclasses.dataclass(frozen=True)
class RunRecord:
  """One verification run of a mechanism, as the ledger keeps it.

  Attributes:
    run: the run's identity (key, candidates, N, δ_b, options, target): the same run resumed
      is not a new attempt.
    epsilon / delta: its target. num_samples / base_delta: its N and δ_b. support: the bound M
      on its terms (1 for plain sampling). overall_delta: the δ it released (its claim).
    directions: None (both directions drew ``num_samples`` terms in [0, ``support``]), or
      per direction [N_d, M_d] when they differ (a tilted verification: the remove direction
      tilted, the add direction plain or certified without samples, N_d = 0 with M_d ≤ δ_b).
  """

  run: str
  epsilon: float
  delta: float
  num_samples: int
  base_delta: float
  overall_delta: float
  support: float = 1.0
  directions: dict | None = None

  def backs(self, epsilon: float, delta: float) -> bool:
    """True when this run's statement implies (ε, δ): it could be released as that claim."""
    return self.epsilon <= epsilon and self.overall_delta <= delta

  def triple(self, direction: str) -> tuple[int, float, float]:
    """(N_d, δ_b, M_d) of one direction: what it is charged with (``evr.overall_delta``)."""
    if self.directions is None:
      return self.num_samples, self.base_delta, self.support
    samples, support = self.directions[direction]
    return samples, self.base_delta, support

  def to_dict(self) -> dict:
    record = dataclasses.asdict(self)
    if self.directions is None:
      del record['directions']  # the form written before per-direction sizes existed
    return record

  @classmethod
  def from_dict(cls, record, where: str) -> 'RunRecord':
    """The record of ``to_dict``'s form; LedgerError naming ``where`` when malformed."""
    fields = {f.name: f.type for f in dataclasses.fields(cls)}
    if not isinstance(record, dict) or set(record) - set(fields) or \
        not {'run', 'epsilon', 'delta', 'num_samples', 'base_delta', 'overall_delta'} <= set(
            record):
      raise LedgerError(f'{where} must hold the fields {", ".join(fields)}')
    directions = record.get('directions')
    if directions is not None and not _direction_sizes_ok(directions, record.get('base_delta')):
      raise LedgerError(f'{where}.directions must map each of {", ".join(DIRECTIONS)} to '
                        f'[num_samples >= 0, support in (0, 1]] (0 samples only with support <= '
                        f'base_delta), got {directions!r:.120}')
    ok = (isinstance(record['run'], str)
          and all(isinstance(record.get(k, 1.0), (int, float))
                  and not isinstance(record.get(k, 1.0), bool) and math.isfinite(record.get(k, 1.0))
                  for k in ('epsilon', 'delta', 'base_delta', 'overall_delta', 'support'))
          and isinstance(record['num_samples'], int) and not isinstance(record['num_samples'], bool)
          and record['num_samples'] >= (0 if directions is not None else 1)
          and 0.0 < record['base_delta'] < 1.0
          and 0.0 < record['delta'] < 1.0 and record.get('support', 1.0) > 0)
    if not ok:
      raise LedgerError(f'{where} has a field of the wrong type or range: {record!r}')
    return cls(**record)


def _direction_sizes_ok(directions, base) -> bool:
  if not isinstance(directions, dict) or set(directions) != set(DIRECTIONS):
    return False
  for entry in directions.values():
    if not (isinstance(entry, (list, tuple)) and len(entry) == 2):
      return False
    samples, support = entry
    if (isinstance(samples, bool) or not isinstance(samples, int) or samples < 0
        or isinstance(support, bool) or not isinstance(support, (int, float))
        or not 0.0 < support <= 1.0):
      return False
    if samples == 0 and not (isinstance(base, (int, float)) and support <= base):
      return False
  return True


@dataclasses.dataclass(frozen=True)
class Charge:
  """What a verification run is charged: ``attempts`` (this run and every other recorded run
  of the mechanism, or the declared attempt if larger) and ``earlier``, per direction the
  (N_j, δ_b,j, M_j) of the other runs that could back its claim (``evr.overall_delta``; a run
  recorded without per-direction sizes has the same triple in both)."""

  attempts: int
  earlier: dict = dataclasses.field(default_factory=lambda: {d: () for d in DIRECTIONS})

  def overall_delta(self, sizes, base_delta: float) -> float:
    """The δ released at threshold δ_b under this charge (Theorem A.1): ``sizes`` is N (every
    direction's terms in [0, 1]) or a mapping direction → (N_d, M_d) (``evr.DirectionSize``);
    the maximum over the directions (docs/proofs/review-per-direction.md)."""
    return evr.overall_delta_by_direction(evr.direction_sizes(sizes), base_delta,
                                          attempts=self.attempts, earlier=self.earlier)

  def to_json(self) -> list:
    """[attempts, {direction: [[N_j, δ_b,j, M_j], …]}] (floats exact through ``json``)."""
    return [self.attempts, {d: [list(t) for t in self.earlier[d]] for d in DIRECTIONS}]

  @classmethod
  def from_json(cls, value) -> 'Charge':
    attempts, earlier = value
    return cls(attempts, {d: tuple(tuple(t) for t in earlier[d]) for d in DIRECTIONS})


def charge_of(others, attempt: int, epsilon: float, delta: float) -> Charge:
  """The charge of a run at (ε, δ) declared as ``attempt``, given the ``others`` runs of the
  mechanism (``RunRecord``; not this run). Raises ``UndeclaredRetryError`` when the others
  are ``attempt`` or more (the module docstring has the rule)."""
  others = list(others)
  if len(others) >= attempt:
    raise UndeclaredRetryError(len(others))
  backing = [r for r in others if r.backs(epsilon, delta)]
  return Charge(attempts=max(attempt, len(others) + 1),
                earlier={d: tuple(r.triple(d) for r in backing) for d in DIRECTIONS})


class VerificationLedger:
  """The verification runs made of each mechanism: the attempts to charge.

  In memory: pass one object to every call that could retry, explicitly (the default of the
  API and the CLI is the user's ``FileLedger``). Its releases say "attempts unchecked": it
  knows nothing of other processes or sessions.
  """

  def __init__(self):
    # entry key → the mechanism's description and runs; a key is the digest of the
    # description's exact part and an index (near-duplicates share the digest).
    self._entries: dict[str, dict] = {}
    self._legacy: dict[str, list[str]] = {}

  @property
  def location(self) -> str | None:
    """The file the entries live in, or None for an in-memory ledger."""
    return None

  @property
  def persistent(self) -> bool:
    """True when the entries outlive the process (a file shared by every run of the user)."""
    return self.location is not None

  def runs(self, mechanism: MatrixMechanism | str) -> tuple[RunRecord, ...]:
    """The distinct runs recorded for a mechanism — every entry it is a near-duplicate of, and
    what a format-1 ledger recorded for it — or for one entry key, in order."""
    with self._locked():
      return self._runs_of(mechanism)

  def _matching(self, mechanism: MatrixMechanism) -> list[str]:
    """The keys of the entries the mechanism is (a near-duplicate of)."""
    exact, values = _exact_part_and_numbers(mechanism_description(mechanism))
    return [key for key, entry in self._entries.items()
            if key.split('-')[0] == exact and _close(entry['numbers'], values)]

  def _runs_of(self, mechanism) -> tuple[RunRecord, ...]:
    if isinstance(mechanism, str):
      return tuple(self._entries.get(mechanism, {}).get('runs', ()))
    found = [r for key in self._matching(mechanism) for r in self._entries[key]['runs']]
    if self._legacy:
      found = _legacy_runs(self._legacy, _legacy_prefix(mechanism)) + found
    unique = {}
    for record in found:
      unique.setdefault(record.run, record)
    return tuple(unique.values())

  def preview(self, mechanism: MatrixMechanism, *, epsilon: float, delta: float, attempt: int,
              could_be: Callable[[RunRecord], bool]) -> Charge:
    """Before any compute: the charge of a coming run whose identity is known only in part
    (``could_be`` tells the recorded runs it could resume). ``UndeclaredRetryError`` when
    ``attempt`` or more other runs are recorded and none could be this one. Never refuses a
    run ``charge`` would accept."""
    with self._locked():
      recorded = self._runs_of(mechanism)
    others = [r for r in recorded if not could_be(r)]
    if attempt > len(others) + 1:
      # The declared attempt counts the runs that could have been this one as earlier ones:
      # it is a new run, charged (and sized) with every recorded run.
      others = list(recorded)
    elif len(others) < len(recorded):  # it may resume a recorded run: charge decides then
      attempt = max(attempt, len(others) + 1)
    return charge_of(others, attempt, epsilon, delta)

  def charge(self, mechanism: MatrixMechanism, record: RunRecord, attempt: int,
             check: Callable[[Charge], float]) -> tuple[Charge, str]:
    """(the charge of the run ``record``, the key of the entry it is recorded in), once
    ``check(charge)`` returns the δ the run releases (atomically; it is recorded as the run's
    ``overall_delta``).

    ``check`` raises to refuse the run (e.g. the overall δ exceeds the target); nothing is
    recorded then. A repeat of a recorded run is charged against the runs recorded now and not
    recorded twice.
    """
    with self._locked():
      recorded = self._runs_of(mechanism)
      others = [r for r in recorded if r.run != record.run]
      new = len(others) == len(recorded)
      charge = charge_of(others, attempt if new else max(attempt, len(others) + 1),
                         record.epsilon, record.delta)
      released = check(charge)
      key = self._entry_for(mechanism)
      if new:
        self._entries[key]['runs'].append(
            dataclasses.replace(record, overall_delta=float(released)))
    return charge, key

  def _entry_for(self, mechanism: MatrixMechanism) -> str:
    """The key of the entry a new run of the mechanism is recorded in (created if none)."""
    matching = self._matching(mechanism)
    if matching:
      return matching[0]
    description = mechanism_description(mechanism)
    exact, values = _exact_part_and_numbers(description)
    index = sum(1 for key in self._entries if key.split('-')[0] == exact)
    key = f'{exact}-{index}'
    self._entries[key] = {'mechanism': description, 'numbers': values, 'runs': []}
    return key

  @contextlib.contextmanager
  def _locked(self) -> Iterator[None]:
    yield  # one process: nothing to lock or reload


def _legacy_runs(legacy: dict, prefix: str) -> list[RunRecord]:
  """The format-1 runs of the mechanism whose keys begin with ``prefix`` (one entry per
  target), as records: their N and δ_b read from the run, their claim the one-attempt δ."""
  found = []
  for target, runs in legacy.items():
    if not target.startswith(prefix):
      continue
    try:
      epsilon, delta = ast.literal_eval('(' + target[len(prefix):])
      for run in runs:
        parts = ast.literal_eval(run)
        n, base = int(parts[2]), float(parts[3])
        found.append(RunRecord(run='format-1 ' + run, epsilon=float(epsilon),
                               delta=float(delta), num_samples=n, base_delta=base,
                               overall_delta=evr.overall_delta(n, base)))
    except (ValueError, SyntaxError, TypeError, IndexError, InputError):
      # Unreadable: counted as an attempt (charged as the run being verified), backing nothing.
      found.extend(RunRecord(run='format-1 ' + run, epsilon=math.inf, delta=0.5,
                             num_samples=1, base_delta=0.5, overall_delta=1.0) for run in runs)
  return found


class FileLedger(VerificationLedger):
  """A ``VerificationLedger`` kept in a JSON file and locked for each charge.

  Args:
    path: the ledger file (created on the first charge; its directory must exist or be
      creatable). Share one path between every process and CLI call that could verify the
      same mechanism (the default, ``default_path()``, is the user's).
    lock_timeout: seconds to wait for the lock before ``LedgerError``.
  """

  def __init__(self, path, *, lock_timeout: float = 60.0):
    super().__init__()
    if not isinstance(path, (str, os.PathLike)):
      raise InputTypeError(f'ledger path must be a file path, got {path!r}')
    self.path = pathlib.Path(path)
    self.lock_timeout = float(lock_timeout)
    if self.path.is_dir():
      raise LedgerError(f'ledger path {str(self.path)!r} is a directory; give a file path')
    try:  # an unusable ledger is refused before any compute
      self.path.parent.mkdir(parents=True, exist_ok=True)
    except OSError as error:
      raise LedgerError(f'ledger directory {str(self.path.parent)!r} cannot be created: '
                        f'{error.strerror or error}') from None
    if not os.access(self.path.parent, os.W_OK | os.X_OK):
      raise LedgerError(f'ledger directory {str(self.path.parent)!r} is not writable')
    self._load()

  def _refuse(self, field: str, problem: str) -> LedgerError:
    return LedgerError(f'ledger {str(self.path)!r}: {field} {problem}; the file is kept as is '
                       '(repair it, or move it away to start a new ledger — its attempts are '
                       'then forgotten and must be declared with attempt)')

  def _load(self) -> None:
    body = _read_ledger(self.path)
    self._entries, self._legacy = {}, {}
    if body is None:
      return
    if not isinstance(body, dict):
      raise self._refuse('the document', 'is not a mapping')
    if body.get('format') == 1:  # the per-target ledger of earlier versions: read, kept
      self._legacy = self._legacy_field(body.get('runs'), 'runs')
      return
    if body.get('format') != FORMAT:
      raise LedgerError(f'ledger {str(self.path)!r} has format {body.get("format")!r}; this '
                        f'version reads formats 1 and {FORMAT}')
    mechanisms = body.get('mechanisms')
    if not isinstance(mechanisms, dict):
      raise self._refuse('mechanisms', 'must be a mapping')
    self._legacy = self._legacy_field(body.get('legacy', {}), 'legacy')
    for key, entry in mechanisms.items():
      where = f'mechanisms.{key}'
      if not (isinstance(entry, dict) and isinstance(entry.get('runs'), list)
              and isinstance(entry.get('mechanism'), dict)):
        raise self._refuse(where, 'must hold "mechanism" and "runs"')
      try:
        exact, values = _exact_part_and_numbers(entry['mechanism'])
      except (KeyError, TypeError, AttributeError):
        raise self._refuse(f'{where}.mechanism', 'is not a mechanism description') from None
      if key.split('-')[0] != exact:
        raise self._refuse(where, 'does not match its mechanism description')
      self._entries[key] = {'mechanism': entry['mechanism'], 'numbers': values, 'runs': [
          RunRecord.from_dict(r, f'ledger {str(self.path)!r}: {where}.runs[{i}]')
          for i, r in enumerate(entry['runs'])]}

  def _legacy_field(self, runs, field: str) -> dict:
    if not (isinstance(runs, dict) and all(
        isinstance(v, list) and all(isinstance(r, str) for r in v) for v in runs.values())):
      raise self._refuse(field, 'must map format-1 guarantees to lists of runs')
    return {k: list(v) for k, v in runs.items()}

  def _document(self) -> dict:
    return {'format': FORMAT, 'legacy': self._legacy, 'mechanisms': {
        key: {'mechanism': entry['mechanism'], 'runs': [r.to_dict() for r in entry['runs']]}
        for key, entry in self._entries.items()}}

  @property
  def location(self) -> str:
    return str(self.path.resolve())

  @contextlib.contextmanager
  def _locked(self) -> Iterator[None]:
    try:
      handle = open(self.path.with_name(self.path.name + '.lock'), 'a+')
    except OSError as error:
      raise LedgerError(f'ledger {str(self.path)!r} cannot be locked: '
                        f'{error.strerror or error}') from None
    with handle:
      deadline = time.monotonic() + self.lock_timeout
      while True:
        try:
          fcntl.flock(handle.fileno(), fcntl.LOCK_EX | fcntl.LOCK_NB)
          break
        except OSError as error:
          if error.errno not in (errno.EAGAIN, errno.EACCES) or time.monotonic() > deadline:
            raise LedgerError(f'ledger {str(self.path)!r} could not be locked within '
                              f'{self.lock_timeout:g} s (another process holds it, or the '
                              'file system does not support locks)') from None
          time.sleep(0.05)
      try:
        self._load()
        before = json.dumps(self._document(), sort_keys=True)
        yield
        if json.dumps(self._document(), sort_keys=True) != before:
          _write_ledger(self.path, self._document())
      finally:
        fcntl.flock(handle.fileno(), fcntl.LOCK_UN)


def _read_ledger(path: pathlib.Path):
  """The ledger's body: format 2 files carry the keyed MAC (an edit by anyone without the
  user's secret is refused); format 1 files (earlier versions) were written without one and
  are read as they are, then rewritten keyed at the next charge."""
  body = _files.read_checked_json(path, 'ledger', LedgerError)
  if isinstance(body, dict) and body.get('format') == 1:
    return body
  return body if body is None else _files.read_checked_json(path, 'ledger', LedgerError,
                                                            keyed=True)


def _write_ledger(path: pathlib.Path, body: dict) -> None:
  _files.write_checked_json(path, body, keyed=True)


def check_recorded_charge(ledger: VerificationLedger, charge: dict | None, record: str) -> None:
  """LedgerError unless ``ledger`` holds ``charge`` ({"ledger", "guarantee", "run"}, as a
  checkpoint or report ``record`` keeps it; "guarantee" is the mechanism's ledger key): going
  on against a ledger that lost or never had the charge would let a retry pass as a first
  attempt. A charge made in memory (no file) is not checked: it was never shared."""
  if charge is None or charge.get('ledger') is None:
    return
  if ledger.location != charge['ledger']:
    where = ('an in-memory ledger' if ledger.location is None else f'ledger {ledger.location!r}')
    raise LedgerError(f'{record} records a verification charged in ledger {charge["ledger"]!r}, '
                      f'but this run uses {where}: use that ledger (--ledger '
                      f'{charge["ledger"]}), or start a new report folder and declare the retry '
                      'with attempt')
  if charge['run'] not in {r.run for r in ledger.runs(charge['guarantee'])}:
    raise LedgerError(f'{record} records a verification charged in ledger {charge["ledger"]!r}, '
                      'which no longer has it (deleted or replaced?): restore the ledger; a '
                      'ledger that forgets attempts would let a retry pass as a first attempt')


def ledger_from(ledger) -> VerificationLedger:
  """A ledger object from ``ledger``: None (the user's ``FileLedger`` at ``default_path()``),
  a ledger object (``VerificationLedger()`` opts out of the persistent one: its releases say
  "attempts unchecked"), or a file path."""
  if isinstance(ledger, VerificationLedger):
    return ledger
  if ledger is None:
    ledger = default_path()
  if isinstance(ledger, (str, os.PathLike)):
    # Under jax.distributed only process 0 opens (and later charges) the file; its refusal
    # is raised on every process. The others hold an in-memory ledger they never charge.
    opened = []
    sharding.on_leader(lambda: opened.append(FileLedger(ledger)))
    return opened[0] if opened else VerificationLedger()
  raise InputTypeError(f'ledger must be a VerificationLedger, a file path or None, got {ledger!r}')
