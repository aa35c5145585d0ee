"""The attempt ledger of Algorithm 5: which verification runs were made for each guarantee.

Re-running verification with fresh seeds (or other candidates, N, δ_b) until a run passes
would void Theorem A.1 of Dong & Ganesh (2026); a repeat must declare itself (``attempt``)
and is then charged by a union bound over the attempts (Chua et al., AISTATS 2025, Fact 4.2
with the false-acceptance probability multiplied by the attempts).

- ``VerificationLedger``: in memory, for one process (a notebook, a pipeline): pass the same
  object to every ``verify`` / ``calibrate_noise_multiplier`` call that could retry.
- ``FileLedger``: the same rule across processes and CLI calls, in a JSON file (the CLI's
  default is one file per user, ``default_path``): every charge holds an exclusive ``fcntl``
  lock on ``PATH.lock``,
  re-reads the file, checks and records, and rewrites the file atomically (write, fsync,
  rename), so a crash leaves the old or the new ledger and two processes cannot both take the
  same attempt. A corrupt ledger is refused, never reset (that would forget attempts): repair
  or move it.

What it protects against: accidental retries — a second calibration with a new seed, in
another report folder, after the report folder or a per-run ledger was deleted, or with a
scheme written with NumPy scalars. What it cannot: someone editing or deleting the ledger
file on purpose (a checkpoint or report that records a charge then refuses to go on against
a ledger that lacks it, but a new run with no such record cannot know). The guarantee then
rests on the user declaring ``attempt``.

Host code (no JAX).

References:
  Andy Dong and Arun Ganesh, "Privacy Amplification for BandMF via b-Min-Sep Subsampling",
  arXiv:2602.09338 (v2): App. A (Algorithm 5, Theorem A.1) (docs/references.md).
"""

from __future__ import annotations

import contextlib
import errno
import fcntl
import json
import os
import pathlib
import time
from typing import Callable, Iterator

from jaxacct import _files
from jaxacct.mechanism import MatrixMechanism
from jaxacct.montecarlo import sharding
from jaxacct.errors import InputError, InputTypeError

FORMAT = 1
ENVIRONMENT_VARIABLE = 'JAXACCT_LEDGER'


def default_path() -> pathlib.Path:
  """The user's ledger file: ``$JAXACCT_LEDGER``, else ``$XDG_STATE_HOME/jaxacct/ledger.json``
  (``~/.local/state/jaxacct/ledger.json`` without XDG_STATE_HOME): shared by every CLI run of
  the user, so neither another ``--out`` nor a deleted report folder forgets an attempt."""
  explicit = os.environ.get(ENVIRONMENT_VARIABLE)
  if explicit:
    return pathlib.Path(explicit).expanduser()
  state = os.environ.get('XDG_STATE_HOME') or os.path.join(os.path.expanduser('~'), '.local',
                                                             'state')
  return pathlib.Path(state) / 'jaxacct' / 'ledger.json'


class LedgerError(InputError):
  """A ledger file that cannot be used (corrupt, or its lock cannot be taken)."""


class UndeclaredRetryError(InputError):
  """A verification of a guarantee the ledger holds other runs of, without declaring the
  attempt; ``required_attempt`` is the ``attempt`` that declares it (the CLI names its
  ``--set calibration.attempt=…``)."""

  def __init__(self, runs: int):
    self.required_attempt = runs + 1
    super().__init__(
        f'this mechanism was already verified {runs} time(s) at the same (epsilon, delta) '
        f'with other keys or settings; re-running verification until it passes voids the '
        f'guarantee. Declare the run with attempt={runs + 1} to charge a union bound over all '
        'attempts')


class VerificationLedger:
  """The verification runs made for each (scheme, strategy, ε, δ): the attempts to charge.

  In memory; ``FileLedger`` keeps the same entries in a file shared by processes. ``verify``
  without a ledger uses a fresh one, which sees only its own run: the caller then answers
  for declaring ``attempt``.
  """

  def __init__(self):
    self._runs: dict[str, list[str]] = {}

  @staticmethod
  def guarantee_id(mechanism: MatrixMechanism, epsilon: float, delta: float) -> str:
    """The identity of a guarantee: one ledger entry per (scheme, strategy, ε, δ)."""
    return repr((mechanism.scheme, mechanism.matrix.fingerprint, float(epsilon), float(delta)))

  def runs(self, guarantee_id: str) -> tuple[str, ...]:
    """The distinct runs recorded for a guarantee, in order."""
    with self._locked():
      return tuple(self._runs.get(guarantee_id, ()))

  @property
  def location(self) -> str | None:
    """The file the entries live in, or None for an in-memory ledger."""
    return None

  def attempts_for(self, guarantee_id: str, run: str, attempt: int) -> int:
    """Attempts to charge if ``run`` is made now; raises if it is an undeclared retry."""
    seen = self._runs.get(guarantee_id, [])
    new_run = run not in seen
    if new_run and len(seen) >= attempt:
      raise UndeclaredRetryError(len(seen))
    return max(attempt, len(seen) + new_run)

  def check_retry(self, guarantee_id: str, could_be: Callable[[str], bool],
                  attempt: int) -> None:
    """Before any compute: ``UndeclaredRetryError`` when the guarantee has ``attempt`` or more
    recorded runs and none of them ``could_be`` the coming one (whose identity is known only
    in part before its search). Never refuses a run ``charge`` would accept."""
    with self._locked():
      seen = self._runs.get(guarantee_id, [])
      if len(seen) >= attempt and not any(could_be(run) for run in seen):
        raise UndeclaredRetryError(len(seen))

  def record(self, guarantee_id: str, run: str) -> None:
    """Records ``run`` (once it is certain to draw verification samples)."""
    seen = self._runs.setdefault(guarantee_id, [])
    if run not in seen:
      seen.append(run)

  def charge(self, guarantee_id: str, run: str, attempt: int,
             check: Callable[[int], None]) -> int:
    """Attempts to charge ``run``, recorded once ``check(attempts)`` returns (atomically).

    ``check`` raises to refuse the run (e.g. the overall δ exceeds the target); nothing is
    recorded then. A repeat of a recorded run is charged as before and not recorded twice.
    """
    with self._locked():
      attempts = self.attempts_for(guarantee_id, run, attempt)
      check(attempts)
      self.record(guarantee_id, run)
    return attempts

  @contextlib.contextmanager
  def _locked(self) -> Iterator[None]:
    yield  # one process: nothing to lock or reload


class FileLedger(VerificationLedger):
  """A ``VerificationLedger`` kept in a JSON file and locked for each charge.

  Args:
    path: the ledger file (created on the first charge; its directory must exist or be
      creatable). Share one path between every process and CLI call that could verify the
      same guarantee (``--ledger PATH``).
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

  def _load(self) -> None:
    body = _files.read_checked_json(self.path, 'ledger', LedgerError)
    if body is None:
      self._runs = {}
      return
    if body.get('format') != FORMAT:
      raise LedgerError(f'ledger {str(self.path)!r} has format {body.get("format")!r}; this '
                        f'version reads format {FORMAT}')
    self._runs = {k: list(v) for k, v in body['runs'].items()}

  def _save(self) -> None:
    _files.write_checked_json(self.path, {'format': FORMAT, 'runs': self._runs})

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
        before = json.dumps(self._runs, sort_keys=True)
        yield
        if json.dumps(self._runs, sort_keys=True) != before:
          self._save()
      finally:
        fcntl.flock(handle.fileno(), fcntl.LOCK_UN)


def check_recorded_charge(ledger: VerificationLedger, charge: dict | None, record: str) -> None:
  """LedgerError unless ``ledger`` holds ``charge`` ({"ledger", "guarantee", "run"}, as a
  checkpoint or report ``record`` keeps it): going on against a ledger that lost or never had
  the charge would let a retry pass as a first attempt. A charge made in memory (no file) is
  not checked: it was never shared."""
  if charge is None or charge.get('ledger') is None:
    return
  if ledger.location != charge['ledger']:
    where = ('an in-memory ledger' if ledger.location is None else f'ledger {ledger.location!r}')
    raise LedgerError(f'{record} records a verification charged in ledger {charge["ledger"]!r}, '
                      f'but this run uses {where}: use that ledger (--ledger '
                      f'{charge["ledger"]}), or start a new report folder and declare the retry '
                      'with attempt')
  if charge['run'] not in ledger.runs(charge['guarantee']):
    raise LedgerError(f'{record} records a verification charged in ledger {charge["ledger"]!r}, '
                      'which no longer has it (deleted or replaced?): restore the ledger; a '
                      'ledger that forgets attempts would let a retry pass as a first attempt')


def ledger_from(ledger) -> VerificationLedger:
  """A ledger object from ``ledger``: None (a fresh in-memory one), a ledger, or a file path."""
  if ledger is None:
    return VerificationLedger()
  if isinstance(ledger, VerificationLedger):
    return ledger
  if isinstance(ledger, (str, os.PathLike)):
    # Under jax.distributed only process 0 opens (and later charges) the file; its refusal
    # is raised on every process. The others hold an in-memory ledger they never charge.
    opened = []
    sharding.on_leader(lambda: opened.append(FileLedger(ledger)))
    return opened[0] if opened else VerificationLedger()
  raise InputTypeError(f'ledger must be a VerificationLedger, a file path or None, got {ledger!r}')
