"""Checkpoint and resume of long Monte Carlo runs (host code).

A run (an estimate, a σ calibration, a verification) is a sequence of named *phases*
(``estimation-sweep-0``, ``estimation-sweep-1``, …, ``verification``; ``estimate``); each
phase is a stream run (``stream.StreamState``) that can stop at any call boundary. A
``Checkpoint`` keeps, in one JSON file of its directory:

- the run's *fingerprint*: named fields (scheme, strategy, ε, δ, seed, options, block size,
  the code version …); resuming with any field changed is refused, naming the fields;
- the results of the finished phases (what the run decided from them);
- the stream state of the phase in progress (per direction and candidate, the float64
  block-ordered sums, and the next block).

It is written atomically (write to a temporary file, fsync, rename, fsync the directory)
every ``interval_seconds`` during a phase and at every phase boundary, with a SHA-256 of its
content: a corrupt or truncated file is refused, never silently restarted. Resuming from it
adds the same per-block sums in the same order, so the result is bitwise that of an
uninterrupted run, whatever the device count before and after (the key of a sample depends
only on its global index).

Under ``jax.distributed`` only process 0 reads and writes the file; it sends what it read to
the other processes, so every process resumes from the same state.
"""

from __future__ import annotations

import functools
import hashlib
import json
import os
import pathlib
import time
from typing import Any

from jaxacct import _files
from jaxacct._version import __version__
from jaxacct.montecarlo import sharding
from jaxacct.montecarlo.stream import StreamState
from jaxacct.errors import InputError, InputTypeError

FORMAT = 1
FILE_NAME = 'checkpoint.json'


class CheckpointError(InputError):
  """A checkpoint that cannot be used: another run's, corrupt, or not writable."""


@functools.cache
def code_version() -> str:
  """The package version and a digest of its sources (once per process): any code change
  starts a new run."""
  root = pathlib.Path(__file__).resolve().parents[1]  # the jaxacct package
  digest = hashlib.sha256()
  for path in sorted(root.rglob('*.py')):
    digest.update(str(path.relative_to(root)).encode())
    digest.update(path.read_bytes())
  return f'{__version__}+{digest.hexdigest()[:16]}'


class Checkpoint:
  """The saved state of one run in ``directory`` (see the module docstring).

  Args:
    directory: where ``checkpoint.json`` lives (created if missing; must be writable).
    fingerprint: the run's identity, a JSON-ready mapping of named fields; the code version
      is added as ``code``.
    interval_seconds: the longest time between two saves during a phase (> 0).

  Raises:
    CheckpointError: the directory cannot be written; the file there belongs to a run with
      another fingerprint (naming the fields that differ); the file is corrupt or truncated.
  """

  def __init__(self, directory, fingerprint: dict, *, interval_seconds: float = 60.0):
    if not (isinstance(interval_seconds, (int, float)) and interval_seconds > 0):
      raise InputError(f'interval_seconds must be > 0, got {interval_seconds!r}')
    self.directory = pathlib.Path(directory)
    self.path = self.directory / FILE_NAME
    self.interval_seconds = float(interval_seconds)
    self.fingerprint = json.loads(json.dumps({**fingerprint, 'code': code_version()}))
    self.completed: dict[str, Any] = {}
    self.current: dict | None = None
    self.charge: dict | None = None  # the ledger entry of a charged verification
    self.resumed = False
    self._last_save = time.monotonic()
    # Only process 0 touches the file; its refusal is raised on every process (no hang).
    saved = sharding.on_leader(self._check_and_read)
    if saved is not None:
      self._adopt(saved)

  # -- reading
  def _check_writable(self) -> None:
    try:
      self.directory.mkdir(parents=True, exist_ok=True)
    except OSError as error:
      raise CheckpointError(f'checkpoint directory {str(self.directory)!r} cannot be created: '
                            f'{error.strerror or error}') from None
    if not os.access(self.directory, os.W_OK | os.X_OK):
      raise CheckpointError(f'checkpoint directory {str(self.directory)!r} is not writable')

  def _read(self) -> dict | None:
    return _files.read_checked_json(self.path, 'checkpoint', CheckpointError)

  def _check_and_read(self) -> dict | None:
    self._check_writable()
    return self._read()

  def _refuse(self, field: str, problem: str) -> CheckpointError:
    return _refusal(self.path, field, problem)

  def _adopt(self, body: dict) -> None:
    check_body(self.path, body)
    saved = body['fingerprint']
    differ = sorted(k for k in set(saved) | set(self.fingerprint)
                    if saved.get(k) != self.fingerprint.get(k))
    if differ:
      details = '; '.join(f'{k}: checkpoint {saved.get(k)!r}, now {self.fingerprint.get(k)!r}'
                          for k in differ)
      raise CheckpointError(
          f'checkpoint {str(self.path)!r} belongs to another run ({", ".join(differ)} '
          f'{"differs" if len(differ) == 1 else "differ"}: {details}); use another checkpoint '
          'directory, or remove it to start over')
    self.completed = dict(body['completed'])
    self.current = body['current']
    self.charge = body.get('charge')
    self.resumed = True

  # -- phases
  def saved_state(self, phase: str, identity, like: StreamState | None = None
                  ) -> StreamState | None:
    """The saved stream state of ``phase`` (finished or in progress), or None.

    ``identity`` (JSON-ready: e.g. the phase's σ list) must equal the saved one: a replayed
    run that reaches a phase with other inputs is refused; the state's totals must have the
    shapes of ``like``'s (the phase's fresh state).
    """
    identity = json.loads(json.dumps(identity))
    record = self.completed.get(phase)
    if record is None and self.current is not None and self.current['phase'] == phase:
      record = self.current
    if record is None:
      return None
    if record['identity'] != identity:
      raise CheckpointError(f'checkpoint {str(self.path)!r}: phase {phase} was run with '
                            f'{record["identity"]!r}, the resumed run reaches it with '
                            f'{identity!r}; remove the checkpoint to start over')
    try:
      return StreamState.from_dict(record['stream'], like)
    except ValueError as error:
      raise self._refuse(f'phase {phase}', f'is invalid: {error}') from None

  def progress(self, phase: str, identity, state: StreamState) -> None:
    """Saves ``state`` of the phase in progress if ``interval_seconds`` have passed."""
    if time.monotonic() - self._last_save >= self.interval_seconds:
      self.current = {'phase': phase, 'identity': identity, 'stream': state.to_dict()}
      self.save()

  def finish(self, phase: str, identity, state: StreamState) -> None:
    """Records a finished phase's final state and saves now (a phase boundary).

    A phase that was already finished (replayed on resume) changes nothing: the phase in
    progress, saved later, must survive its replay (else a resumed run restarts it).
    """
    record = json.loads(json.dumps({'identity': identity, 'stream': state.to_dict()}))
    if self.completed.get(phase) == record:
      return
    self.completed[phase] = record
    if self.current is not None and self.current['phase'] == phase:
      self.current = None
    self.save()

  def record_charge(self, charge: dict) -> None:
    """Records the ledger entry a verification was charged as and saves now: a resumed run
    refuses a ledger that lacks it (``ledger.check_recorded_charge``)."""
    charge = json.loads(json.dumps(charge))
    if charge != self.charge:
      self.charge = charge
      self.save()

  def save(self) -> None:
    """Writes the checkpoint now (process 0 only)."""
    self._last_save = time.monotonic()
    if not sharding.is_leader():
      return
    _files.write_checked_json(self.path, {
        'format': FORMAT, 'fingerprint': self.fingerprint, 'completed': self.completed,
        'current': self.current, 'charge': self.charge})


def _refusal(path: pathlib.Path, field: str, problem: str) -> CheckpointError:
  return CheckpointError(f'checkpoint {str(path)!r}: {field} {problem}; remove the checkpoint '
                         '(or use another directory) to start over')


def check_body(path: pathlib.Path, body) -> None:
  """CheckpointError naming the field unless ``body`` (read from ``path``) has this format's
  structure: types, phase records, every stream state (``StreamState.from_dict``), the charge."""
  if not isinstance(body, dict):
    raise _refusal(path, 'the document', 'is not a mapping')
  if body.get('format') != FORMAT:
    raise CheckpointError(f'checkpoint {str(path)!r} has format {body.get("format")!r}; '
                          f'this version reads format {FORMAT}')
  for name, kinds in (('fingerprint', dict), ('completed', dict), ('current', (dict, type(None))),
                      ('charge', (dict, type(None)))):
    if name not in body and name != 'charge':
      raise _refusal(path, name, 'is missing')
    if not isinstance(body.get(name), kinds):
      raise _refusal(path, name, f'has the wrong type ({type(body.get(name)).__name__})')
  records = [(f'completed.{phase}', record) for phase, record in body['completed'].items()]
  if body['current'] is not None:
    records.append(('current', body['current']))
    if not isinstance(body['current'].get('phase'), str):
      raise _refusal(path, 'current.phase', 'must be a phase name')
  for field, record in records:
    if not isinstance(record, dict) or 'identity' not in record or 'stream' not in record:
      raise _refusal(path, field, 'must hold identity and stream')
    try:
      StreamState.from_dict(record['stream'])
    except ValueError as error:
      raise _refusal(path, field, f'is invalid: {error}') from None
  charge = body.get('charge')
  if charge is not None and not (isinstance(charge.get('guarantee'), str)
                                 and isinstance(charge.get('run'), str)
                                 and isinstance(charge.get('ledger'), (str, type(None)))):
    raise _refusal(path, 'charge', 'must hold the ledger, guarantee and run of a charge')


def check_file(directory) -> None:
  """CheckpointError when ``directory``'s checkpoint file (if any) is corrupt or malformed:
  a caller checks it before any compute or throughput probe; whether it is this run's is
  checked when the run opens it (its fingerprint)."""
  path = pathlib.Path(directory) / FILE_NAME
  body = sharding.on_leader(lambda: _files.read_checked_json(path, 'checkpoint', CheckpointError))
  if body is not None:
    check_body(path, body)


class Phase:
  """A ``Checkpoint`` seen from one phase of a run (a stream run over both directions).

  ``start(fresh)`` gives the state to run from: the phase's final state if it finished
  before (nothing is left to compute), its saved state if it was interrupted, else
  ``fresh``; ``after_call`` saves progress every ``interval_seconds``; ``finish`` records
  the phase's end. With ``checkpoint=None`` it never resumes and saves nothing.

  Attributes:
    checkpoint: the run's ``Checkpoint`` or None. name: the phase's name. identity: its
      inputs (JSON-ready), checked on resume.
  """

  def __init__(self, checkpoint: Checkpoint | None, name: str, identity=None):
    self.checkpoint, self.name, self.identity = checkpoint, name, identity

  def start(self, fresh: StreamState) -> StreamState:
    if self.checkpoint is None:
      return fresh
    return self.checkpoint.saved_state(self.name, self.identity, fresh) or fresh

  def after_call(self, state: StreamState) -> None:
    if self.checkpoint is not None:
      self.checkpoint.progress(self.name, self.identity, state)

  def finish(self, state: StreamState) -> None:
    if self.checkpoint is not None:
      self.checkpoint.finish(self.name, self.identity, state)


def open_checkpoint(directory, fingerprint: dict,
                    interval_seconds: float = 60.0) -> Checkpoint | None:
  """``Checkpoint(directory, fingerprint, ...)``, or None when ``directory`` is None."""
  if directory is None:
    return None
  if not isinstance(directory, (str, os.PathLike)):
    raise InputTypeError(f'checkpoint must be a directory path, got {directory!r}')
  return Checkpoint(directory, fingerprint, interval_seconds=interval_seconds)
