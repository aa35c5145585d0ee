"""The library's error types: every argument, config, file and ledger check raises an
``InputError`` naming what it refuses and the allowed range.

``InputError`` subclasses ``ValueError`` (and ``InputTypeError`` also ``TypeError``,
``MissingExtraError`` also ``ImportError``), so callers' ``except ValueError`` keeps working.
The CLI maps an ``InputError`` or an ``OSError`` to exit code 2 with one line, and anything else
to exit code 1 (an internal error; its traceback behind ``--debug``).
"""


class InputError(ValueError):
  """The library refuses its input (an argument, a config value, a file, the ledger)."""


class InputTypeError(InputError, TypeError):
  """An argument of the wrong type."""


class MissingExtraError(InputError, ImportError):
  """An optional dependency is missing; the message gives the install command."""
