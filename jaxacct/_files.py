"""Crash-safe, checksummed JSON files (checkpoints and attempt ledgers).

``write_checked_json`` writes ``{"body": …, "sha256": …}`` to a temporary file, fsyncs it,
renames it over the target and fsyncs the directory: after a crash the file is the old or
the new document, never a mix. ``read_checked_json`` refuses a document whose checksum does
not match (a truncated or edited file) instead of silently starting over.
"""

from __future__ import annotations

import contextlib
import hashlib
import json
import os
import pathlib


def _digest(body) -> str:
  return hashlib.sha256(json.dumps(body, sort_keys=True).encode()).hexdigest()


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


def write_checked_json(path, body) -> None:
  """Atomically writes ``body`` (JSON-ready) with its SHA-256."""
  write_atomically(pathlib.Path(path), json.dumps({'body': body, 'sha256': _digest(body)}))


def read_checked_json(path, what: str, error: type[Exception]):
  """The body of the checked document at ``path``, or None if there is no file.

  Raises:
    ``error`` naming ``what`` and the path when the file is not a complete document or its
    checksum does not match (it is left in place).
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
  return body
