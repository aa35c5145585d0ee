"""Checkpoint and resume of long Monte Carlo runs (host code).

A run (an estimate, a σ calibration, a verification) is a sequence of named *phases*
(``estimation-sweep-0``, ``estimation-sweep-1``, …, ``verification``; ``estimate``); each
phase is a stream run (``stream.StreamState``) that can stop at any call boundary. A
``Checkpoint`` keeps, in one JSON file of its directory:

- the run's *fingerprint*: named fields (scheme, strategy, ε, δ, seed, options, block size,
  the code version …); resuming with any field changed is refused, naming the fields;
- the results of the finished phases (what the run decided from them);
- the stream state of the phase in progress (per direction and candidate, the float64
  block-ordered sums and the samples and blocks they hold; the next block; the layout of
  the phase: N, block size, first block, programs);
- the ledger charge of a verification.

It is written atomically (write to a temporary file, fsync, rename, fsync the directory)
every ``interval_seconds`` during a phase and at every phase boundary, with a SHA-256 of its
content and a MAC (HMAC-SHA256 under the user's secret, ``jaxacct._secret``; format 2).
Resuming from it adds the same per-block sums in the same order, so the result is bitwise
that of an uninterrupted run, whatever the device count before and after (the key of a
sample depends only on its global index).

**What is detected, and what is not.** Every refusal is a ``CheckpointError`` naming the
file and the field, raised when the checkpoint is opened or, at the latest, when the phase
resumes — before any compute from it.

- A truncated or damaged file (its SHA-256).
- Any edit — of the sums, squares, sample or block counts, positions, layout, fingerprint,
  finished phases or charge — by someone without the secret: the MAC is missing or wrong
  ("edited, or written with another user's secret").
- A position that disagrees with the sample counts, even in a file signed with the secret
  (``StreamState.check``): a block moved forward or back, out of range (refused on
  opening), counts edited, a finished phase short of N samples per direction and
  candidate, a layout (N, block size, first block, programs) that is not the resuming run's.
- A checkpoint of format 1 (earlier versions: no counts, no MAC).

Not detected:

- The secret's owner (the same user, or anyone who has read the secret) editing the file
  and recomputing the MAC. The counts must still agree with the position, so a forged file
  passes only with sums that are themselves consistent fabrications; nothing can tell
  fabricated float sums from computed ones short of recomputing them.
- Deleting the checkpoint: a new run starts from block 0 (for a verification the ledger
  already recorded the charge, so the new run is charged as the same run or refused as an
  undeclared retry, ``ledger.py``).
- Replaying an older valid checkpoint of the same run (a copy saved earlier): it resumes
  from its earlier block and recomputes the rest, bitwise the same result.

**Another machine or user.** The checkpoint resumes only with the secret that signed it.
Copy the writer's secret file (mode 600) to the new account's state folder (beside its
ledger) or name it with ``JAXACCT_SECRET``; without it the checkpoint is refused, naming
the secret file that is missing, and is never re-signed.

Under ``jax.distributed`` only process 0 reads and writes the file (and reads the secret);
it sends what it read to the other processes, so every process resumes from the same state.
"""

from __future__ import annotations

import functools
import hashlib
import json
import os
import pathlib
import time
from typing import Any

from jaxacct import _files, _secret
from jaxacct._version import __version__
from jaxacct.montecarlo.engine import sharding
from jaxacct.montecarlo.engine.stream import StreamState
from jaxacct.errors import InputError, InputTypeError

FORMAT = 2
FILE_NAME = 'checkpoint.json'


class CheckpointError(InputError):
  """A checkpoint that cannot be used: another run's, corrupt, edited, inconsistent, of an
  earlier format, signed with a secret this user lacks, or not writable."""


@functools.cache
def code_version() -> str:
  """The package version and a digest of its sources (once per process): any code change
  starts a new run."""
  root = pathlib.Path(__file__).resolve().parents[2]  # the jaxacct package
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
      another fingerprint (naming the fields that differ); the file is corrupt, truncated,
      edited (its MAC), inconsistent (naming the field) or of format 1; the user's secret
      is missing for it, or cannot be created or used.
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

  def _check_and_read(self) -> dict | None:
    self._check_writable()
    body = _read(self.path)
    if body is None:  # a new run: its first save must be able to sign (before any compute)
      try:
        _secret.secret_key()
      except _secret.SecretError as problem:
        raise CheckpointError(f'checkpoint {str(self.path)!r} cannot be signed: '
                              f'{problem}') from None
    return body

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
    shapes of ``like``'s (the phase's fresh state), and its layout ``like``'s if that has
    one; its position must agree with its sample counts, and a finished phase's state must
    be final (N samples per direction and candidate). ``accumulate`` then checks the layout
    against the run before any compute; its refusals name this file.
    """
    identity = json.loads(json.dumps(identity))
    record, field = self.completed.get(phase), f'completed.{phase}'
    if record is None and self.current is not None and self.current['phase'] == phase:
      record, field = self.current, 'current'
    if record is None:
      return None
    if record['identity'] != identity:
      raise CheckpointError(f'checkpoint {str(self.path)!r}: phase {phase} was run with '
                            f'{record["identity"]!r}, the resumed run reaches it with '
                            f'{identity!r}; remove the checkpoint to start over')
    return _stream_state(self.path, field, record['stream'], like)

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
    _check_final(self.path, f'completed.{phase}', state)
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
        'current': self.current, 'charge': self.charge}, keyed=True)


def _refusal(path: pathlib.Path, field: str, problem: str) -> CheckpointError:
  return _refused(path, f'{field} {problem}')


def _refused(path: pathlib.Path, message: str) -> CheckpointError:
  return CheckpointError(f'checkpoint {str(path)!r}: {message}; remove the checkpoint (or use '
                         'another directory) to start over')


def _read(path: pathlib.Path) -> dict | None:
  """The body of the checkpoint file at ``path`` (None if there is none), its checksum and
  MAC checked; a format-1 file (no MAC) is refused as such."""
  body = _files.read_checked_json(path, 'checkpoint', CheckpointError)
  if isinstance(body, dict) and body.get('format') == 1:
    raise _format_one(path)
  if body is None:
    return None
  return _files.read_checked_json(path, 'checkpoint', CheckpointError, keyed=True)


def _format_one(path: pathlib.Path) -> CheckpointError:
  return CheckpointError(
      f'checkpoint {str(path)!r} has format 1, written by an earlier jaxacct version (no sample '
      f'counts, no MAC); this version reads format {FORMAT}: finish that run with the version '
      'that wrote it, or remove the checkpoint to start over')


def _stream_state(path: pathlib.Path, field: str, record, like: StreamState | None = None
                  ) -> StreamState:
  """The stream state of phase record ``field`` (``current`` or ``completed.NAME``), checked
  (``StreamState.from_dict``: position ↔ counts ↔ layout, the shapes and layout of
  ``like``); a finished phase's must be final. Its later refusals (``accumulate``) name
  ``path``."""
  try:
    state = StreamState.from_dict(record, like, where=f'{field}.stream')
  except ValueError as error:
    raise _refused(path, str(error)) from None
  if field != 'current':
    _check_final(path, field, state)
  state.refuse = functools.partial(_refused, path)
  return state


def _check_final(path: pathlib.Path, field: str, state: StreamState) -> None:
  """CheckpointError unless ``state`` is a finished phase's: past its last program, holding
  N samples per direction and candidate."""
  layout = state.layout
  if layout is None or state.program != layout.num_programs:
    end = '?' if layout is None else layout.num_programs
    raise _refused(path, f'{field}.stream.program = {state.program} ({field}.stream.direction '
                         f'{state.direction}, {field}.stream.block {state.block}): a finished '
                         f'phase ends at program {end}, having run every block')
  try:
    state.check()
  except ValueError as error:
    raise _refused(path, str(error)) from None


def check_body(path: pathlib.Path, body) -> None:
  """CheckpointError naming the field unless ``body`` (read from ``path``) has this format's
  structure: types, phase records, every stream state (``StreamState.from_dict``: position,
  counts and layout agree; a finished phase's is final, N samples everywhere), the charge."""
  if not isinstance(body, dict):
    raise _refusal(path, 'the document', 'is not a mapping')
  if body.get('format') == 1:
    raise _format_one(path)
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
    _stream_state(path, field, record['stream'])
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
  body = sharding.on_leader(lambda: _read(path))
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
