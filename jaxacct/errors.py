"""The library's error types: every argument, config, file and ledger check raises an
``InputError`` naming what it refuses and the allowed range.

``InputError`` subclasses ``ValueError`` (and ``InputTypeError`` also ``TypeError``,
``MissingExtraError`` also ``ImportError``), so callers' ``except ValueError`` keeps working.
The CLI maps an ``InputError`` or an ``OSError`` to exit code 2 with one line, and anything else
to exit code 1 (an internal error; its traceback behind ``--debug``).
"""


class InputError(ValueError):
  """The library refuses its input (an argument, a config value, a file, the ledger).

  Besides the message, an error may carry what it refuses as fields, so a front end (the CLI, a
  notebook) can render it in its own terms without parsing the text: ``argument`` (the dotted
  name of the refused argument, e.g. ``'sampling_prob'``, ``'monte_carlo.attempt'``; ``within``
  prefixes it when a request builds a part, e.g. ``'scheme.sampling_prob'``), ``value`` (what
  was given) and ``allowed`` (the range, in words). All default to None; ``str(error)`` is the
  message alone. The fields live in the instance's ``__dict__``, so they survive pickling.
  """

  def __init__(self, *args, argument: str | None = None, value=None,
               allowed: str | None = None):
    super().__init__(*args)
    self.argument, self.value, self.allowed = argument, value, allowed

  def within(self, prefix: str) -> 'InputError':
    """This error with ``argument`` under ``prefix`` (``'scheme'``: ``'scheme.sampling_prob'``);
    in place, for ``raise error.within(...) from None``."""
    if self.argument is not None:
      self.argument = f'{prefix}.{self.argument}'
    return self


class InputTypeError(InputError, TypeError):
  """An argument of the wrong type."""


class MissingExtraError(InputError, ImportError):
  """An optional dependency is missing; the message gives the install command."""
