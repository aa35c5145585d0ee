"""Crash-safe, checksummed and optionally signed JSON files (checkpoints and attempt ledgers).

``write_checked_json`` writes ``{"body": …, "sha256": …}`` to a temporary file, fsyncs it,
renames it over the target and fsyncs the directory: after a crash the file is the old or
the new document, never a mix. ``read_checked_json`` refuses a document whose checksum does
not match (a truncated or damaged file) instead of silently starting over.

The SHA-256 detects accidents only: anyone can recompute it. With ``keyed=True`` the
document also holds ``"mac"``, HMAC-SHA256 of the body's canonical JSON (``_canonical``)
under the user's secret (``_secret.secret_key``), and reading it refuses a missing or wrong
MAC: an edit by anyone who cannot read the secret is detected. The secret's owner can sign
any body; what the body must satisfy beyond that is the reader's to check (a checkpoint's
position against its sample counts, ``montecarlo/evr/checkpoint.py``).
"""

from __future__ import annotations

import contextlib
import hashlib
import hmac
import json
import os
import pathlib

from jaxacct import _secret


def _digest(body) -> str:
  return hashlib.sha256(json.dumps(body, sort_keys=True).encode()).hexdigest()


def _canonical(body) -> bytes:
  """The signed bytes: keys sorted, no spaces, ASCII (``json`` floats round-trip exactly)."""
  return json.dumps(body, sort_keys=True, separators=(',', ':'), ensure_ascii=True).encode()


def mac(body, key: bytes) -> str:
  """HMAC-SHA256 (hex) of ``body``'s canonical JSON under ``key``."""
  return hmac.new(key, _canonical(body), hashlib.sha256).hexdigest()


def write_atomically(path: pathlib.Path, content) -> None:
  """Writes ``content`` (text, bytes, or a callable writing to a binary file object) to
  ``path`` so that a crash leaves either the old or the new file.

  A failed write (a full disk, a read-only folder) removes its temporary file and raises
  OSError naming ``path``.
  """
  path = pathlib.Path(path)
  temporary = path.with_name(f'.{path.name}.{os.getpid()}.tmp')
  try:
    with open(temporary, 'wb') as handle:
      if callable(content):
        content(handle)
      else:
        handle.write(content.encode('utf-8') if isinstance(content, str) else content)
      handle.flush()
      os.fsync(handle.fileno())
    os.replace(temporary, path)
    directory = os.open(path.parent, os.O_RDONLY)
    try:
      os.fsync(directory)
    finally:
      os.close(directory)
  except BaseException as error:  # a full disk, a kill's KeyboardInterrupt, a failed figure
    with contextlib.suppress(OSError):
      temporary.unlink()
    if isinstance(error, OSError):
      raise OSError(error.errno,
                    f'cannot write {str(path)!r}: {error.strerror or error}') from None
    raise


def write_checked_json(path, body, *, keyed: bool = False) -> None:
  """Atomically writes ``body`` (JSON-ready) with its SHA-256 and, if ``keyed``, its MAC under
  the user's secret (created on first use; ``_secret.SecretError`` if it cannot be used)."""
  document = {'body': body, 'sha256': _digest(body)}
  if keyed:
    document['mac'] = mac(body, _secret.secret_key())
  write_atomically(pathlib.Path(path), json.dumps(document))


def read_checked_json(path, what: str, error: type[Exception], *, keyed: bool = False):
  """The body of the checked document at ``path``, or None if there is no file.

  With ``keyed`` the document's MAC must be the one the user's secret gives its body; the
  secret is never created here (a signed file needs the secret that signed it). Without
  ``keyed`` a MAC, if present, is not checked.

  Raises:
    ``error`` naming ``what`` and the path (the file is left in place) when the file is not a
    complete document or its checksum does not match; with ``keyed``, when its MAC is
    missing or wrong (edited, or written with another user's secret), or the secret is
    missing or unusable (naming the secret file and what to do).
  """
  path = pathlib.Path(path)
  if not path.exists():
    return None
  try:
    document = json.loads(path.read_text(encoding='utf-8'))
    body, digest = document['body'], document['sha256']
  except OSError as failure:  # a directory in its place, no permission
    raise error(f'{what} {str(path)!r} cannot be read ({failure.strerror or failure}); it is '
                'kept as is') from None
  except (ValueError, KeyError, TypeError):
    raise error(f'{what} {str(path)!r} is corrupt or truncated (not a complete document); it '
                'is kept as is') from None
  if _digest(body) != digest:
    raise error(f'{what} {str(path)!r} is corrupt: its checksum does not match its content; it '
                'is kept as is')
  if keyed:
    _check_mac(path, what, error, body, document.get('mac'))
  return body


def _check_mac(path: pathlib.Path, what: str, error: type[Exception], body, signature) -> None:
  where = _secret.secret_path()
  if not (isinstance(signature, str) and signature.isascii()):
    raise error(f'{what} {str(path)!r} has no MAC (edited, or written with another user\'s '
                f'secret or by a version without one; the secret is {str(where)!r}); it is '
                'kept as is')
  try:
    key = _secret.secret_key(create=False)
  except _secret.SecretError as problem:
    if where.exists():
      raise error(f'{what} {str(path)!r} cannot be checked: {problem}') from None
    raise error(
        f'{what} {str(path)!r} is signed with a secret this user does not have: '
        f'{str(where)!r} does not exist. A file written on another machine or by another user '
        'reads only with its writer\'s secret: copy the writer\'s secret file to '
        f'{str(where)!r} (mode 600), or name it with {_secret.ENVIRONMENT_VARIABLE}; it is '
        'kept as is') from None
  if not hmac.compare_digest(mac(body, key), signature):
    raise error(f'{what} {str(path)!r} fails its MAC check: edited, or written with another '
                f'user\'s secret (this user\'s is {str(where)!r}); it is kept as is')
