"""The per-user secret that keys the MAC of saved state (checkpoints, the attempt ledger).

One file of 32 random bytes, readable by its owner only, kept beside the user's attempt
ledger: ``secret`` in the directory of ``$JAXACCT_LEDGER``, else of
``$XDG_STATE_HOME/jaxacct/ledger.json`` (``~/.local/state/jaxacct/`` without XDG_STATE_HOME),
the folder of ``montecarlo.ledger.default_path()``; ``$JAXACCT_SECRET`` names the file
explicitly. It is created on first use with ``os.open(…, O_CREAT | O_EXCL, 0o600)`` (two
processes racing to create it agree on one), and refused (``SecretError`` naming the file
and what to do) when it is readable or writable by group or others, or is not 32 bytes.

``_files.write_checked_json(…, keyed=True)`` signs a document with it (HMAC-SHA256):
whoever lacks the file cannot produce a document that reads back. Its owner can — the MAC
tells edits by *others* (another user, a shared folder, a tool) from the owner's own runs,
and does not stop the owner. A run that moves to another machine or user account takes the
file with it (copy it, mode 0600, into that account's state folder or name it with
``JAXACCT_SECRET``); without it a signed file is refused, never re-signed.

Host code (no JAX).
"""

from __future__ import annotations

import os
import pathlib
import stat
import time

from jaxacct.errors import InputError

SECRET_BYTES = 32
ENVIRONMENT_VARIABLE = 'JAXACCT_SECRET'
FILE_NAME = 'secret'
# A reader that finds the file empty waits this long for the process creating it to finish
# its one write of 32 bytes (the file is created empty, then written).
_CREATION_WAIT_SECONDS = 2.0


class SecretError(InputError):
  """The secret file cannot be used: readable by others, of the wrong size, missing where a
  signed file needs it, or not readable. The message names the file and the remedy."""


# The variable that moves the user's ledger (and with it this secret's default folder).
LEDGER_VARIABLE = 'JAXACCT_LEDGER'


def ledger_path() -> pathlib.Path:
  """The user's attempt ledger file (``montecarlo.ledger.default_path()``):
  ``$JAXACCT_LEDGER``, else ``$XDG_STATE_HOME/jaxacct/ledger.json``
  (``~/.local/state/jaxacct/ledger.json``). Here, below the ledger, because the secret lives
  beside it."""
  explicit = os.environ.get(LEDGER_VARIABLE)
  if explicit:
    return pathlib.Path(explicit).expanduser()
  state = os.environ.get('XDG_STATE_HOME') or os.path.join(os.path.expanduser('~'), '.local',
                                                             'state')
  return pathlib.Path(state) / 'jaxacct' / 'ledger.json'


def state_directory() -> pathlib.Path:
  """The folder of the user's attempt ledger (``ledger_path``'s)."""
  return ledger_path().parent


def secret_path() -> pathlib.Path:
  """The secret file: ``$JAXACCT_SECRET``, else ``secret`` beside the user's ledger."""
  explicit = os.environ.get(ENVIRONMENT_VARIABLE)
  if explicit:
    return pathlib.Path(explicit).expanduser()
  return state_directory() / FILE_NAME


# Per path: (device, inode, size, ctime, mode) of the file read, and its bytes. A replaced,
# rewritten, re-moded or removed file is read (or refused) again.
_cache: dict[str, tuple[tuple[int, ...], bytes]] = {}


def secret_key(*, create: bool = True) -> bytes:
  """The user's secret (32 bytes) from ``secret_path()``, created there if missing and
  ``create`` (read once per path and file version).

  Raises:
    SecretError: the file is readable or writable by group or others (``chmod 600`` it), is
      not 32 bytes, is not a regular file, cannot be read or created, or is missing and
      ``create`` is False.
  """
  path = secret_path()
  try:
    status = os.stat(path)
  except FileNotFoundError:
    if not create:
      raise SecretError(f'the secret file {str(path)!r} does not exist') from None
    _create(path)
    status = os.stat(path)
  except OSError as error:
    raise SecretError(f'the secret file {str(path)!r} cannot be read: '
                      f'{error.strerror or error}') from None
  cached = _cache.get(str(path))
  if cached is not None and cached[0] == _version(status):
    return cached[1]
  version, key = _read(path)
  _cache[str(path)] = (version, key)
  return key


def _create(path: pathlib.Path) -> None:
  """Creates the secret with O_EXCL (mode 0600); a process that loses the race keeps the
  winner's file."""
  try:
    path.parent.mkdir(mode=0o700, parents=True, exist_ok=True)
    handle = os.open(path, os.O_WRONLY | os.O_CREAT | os.O_EXCL, 0o600)
  except FileExistsError:
    return
  except OSError as error:
    raise SecretError(f'the secret file {str(path)!r} cannot be created: '
                      f'{error.strerror or error}') from None
  try:
    os.write(handle, os.urandom(SECRET_BYTES))
    os.fsync(handle)
  finally:
    os.close(handle)


def _read(path: pathlib.Path) -> tuple[tuple[int, ...], bytes]:
  deadline = time.monotonic() + _CREATION_WAIT_SECONDS
  while True:
    try:
      handle = os.open(path, os.O_RDONLY)
    except OSError as error:
      raise SecretError(f'the secret file {str(path)!r} cannot be read: '
                        f'{error.strerror or error}') from None
    try:
      status = os.fstat(handle)  # the file read, not the name (no check-then-read race)
      if not stat.S_ISREG(status.st_mode):
        raise SecretError(f'the secret file {str(path)!r} is not a regular file')
      if status.st_mode & 0o077:
        raise SecretError(
            f'the secret file {str(path)!r} has mode {stat.S_IMODE(status.st_mode):04o}: it '
            'must be readable and writable by its owner only (whoever reads it can sign saved '
            f'state as this user); run chmod 600 {str(path)!r} if no one else has read it, '
            'else remove it (files signed with it are then refused)')
      key = os.read(handle, SECRET_BYTES + 1)
    finally:
      os.close(handle)
    if len(key) == SECRET_BYTES:
      return _version(status), key
    if not key and time.monotonic() < deadline:
      time.sleep(0.05)  # created empty by another process, which is writing it now
      continue
    size = f'{len(key)} bytes' if len(key) <= SECRET_BYTES else f'over {SECRET_BYTES} bytes'
    raise SecretError(
        f'the secret file {str(path)!r} holds {size}, not {SECRET_BYTES}: it is damaged or not '
        'a jaxacct secret; restore it, or remove it to create a new one (files signed with the '
        'old one are then refused)')


def _version(status: os.stat_result) -> tuple[int, ...]:
  return status.st_dev, status.st_ino, status.st_size, status.st_ctime_ns, status.st_mode
