"""The library's error types: every argument, config, file and ledger check raises an
``InputError`` naming what it refuses and the allowed range.

``InputError`` subclasses ``ValueError`` (and ``InputTypeError`` also ``TypeError``,
``MissingExtraError`` also ``ImportError``), so callers' ``except ValueError`` keeps working.
The CLI maps an ``InputError`` or an ``OSError`` to exit code 2 with one line, and anything else
to exit code 1 (an internal error; its traceback behind ``--debug``).
"""

from __future__ import annotations

from typing import Any, Mapping

class Spelling:
  """How a front end writes an argument's name and a value given to it: Python's keyword form
  here (``monte_carlo.attempt`` → ``monte_carlo=jaxacct.MonteCarloOptions(attempt=2)``); the
  CLI writes config keys (``config.ConfigSpelling``)."""

  def name(self, argument: str) -> str:
    return argument

  def assign(self, argument: str, value: Any) -> str:
    head, _, field = argument.partition('.')
    if head == 'monte_carlo' and field:
      return f'monte_carlo=jaxacct.MonteCarloOptions({field}={value!r})'
    return f'{argument}={value!r}'

  def suggest(self, argument: str, value: Any) -> str:
    """How to declare ``argument=value`` (a suggestion's form; ``assign`` by default)."""
    return self.assign(argument, value)


PYTHON = Spelling()


class InputError(ValueError):
  """The library refuses its input (an argument, a config value, a file, the ledger).

  Besides the message, an error carries what it refuses as fields, so a front end (the CLI, a
  notebook) writes it in its own terms (``render(spelling)``) without parsing the text:

  - ``argument``: the dotted name of the refused argument (``'sampling_prob'``,
    ``'monte_carlo.attempt'``); ``within`` prefixes it when a request builds a part
    (``'scheme.sampling_prob'``). ``value``: what was given; ``allowed``: the range, in words.
  - the message, in one of two forms. With ``requirement`` (what the argument must be, after
    its name: ``'must be in (0, 1], got 1.5'``) it is composed as ``f'{name} {requirement}'``,
    so it follows ``within`` and the front end's name for the argument. Otherwise it is the
    first positional argument, as for any exception, led by ``name=value: `` (``name: `` when
    ``value`` is None) when the error names an argument.
  - ``suggestion``: ``{argument: value}`` that would be accepted (``{'monte_carlo.attempt':
    2}``), and ``alternatives``: other values of ``argument`` that answer, each with a note or
    None (``{'monte_carlo': 'the Monte Carlo accountant'}``); both end the message.
  - ``context``: the part of a request an error naming no argument is about
    (``within('scheme')``): the message is led by ``'scheme: '``.

  ``str(error)`` is ``render()``, in Python's terms. The fields live in the instance's
  ``__dict__``, so they survive pickling.
  """

  def __init__(self, *args, argument: str | None = None, requirement: str | None = None,
               value: Any = None, allowed: str | None = None,
               suggestion: Mapping[str, Any] | None = None,
               alternatives: Mapping[str, str | None] | None = None):
    if (requirement is not None or alternatives) and argument is None:
      raise TypeError('InputError(requirement=..., alternatives=...) needs the argument they '
                      'are about')
    super().__init__(*args)
    self.argument, self.requirement = argument, requirement
    self.value, self.allowed = value, allowed
    self.suggestion = None if suggestion is None else dict(suggestion)
    self.alternatives = None if alternatives is None else dict(alternatives)
    self.context: str | None = None

  def render(self, spelling: Spelling = PYTHON) -> str:
    """The message with the argument, the suggestion and the alternatives written by
    ``spelling`` (Python's keyword form by default)."""
    if self.requirement is not None:
      text = f'{spelling.name(self.argument)} {self.requirement}'
    else:
      text = super().__str__()
      if self.argument is not None:
        lead = (spelling.name(self.argument) if self.value is None
                else spelling.assign(self.argument, self.value))
        text = f'{lead}: {text}'
    if self.context is not None:
      text = f'{self.context}: {text}'
    if self.suggestion:
      text += '; declare it with ' + ', '.join(
          spelling.suggest(name, value) for name, value in self.suggestion.items())
    if self.alternatives:
      text += '; use ' + ' or '.join(
          spelling.assign(self.argument, value) + (f' ({note})' if note else '')
          for value, note in self.alternatives.items())
    return text

  def __str__(self) -> str:
    return self.render()

  def within(self, prefix: str) -> 'InputError':
    """This error as part ``prefix`` of a request (``'scheme'``: ``argument``
    ``'sampling_prob'`` becomes ``'scheme.sampling_prob'``; an error naming no argument is led
    by ``'scheme: '``); in place, for ``raise error.within(...) from None``."""
    if self.argument is not None:
      self.argument = f'{prefix}.{self.argument}'
      if self.suggestion:
        self.suggestion = {f'{prefix}.{name}': value for name, value in self.suggestion.items()}
    else:
      self.context = prefix if self.context is None else f'{prefix}.{self.context}'
    return self


class InputTypeError(InputError, TypeError):
  """An argument of the wrong type."""


class MissingExtraError(InputError, ImportError):
  """An optional dependency is missing; the message gives the install command."""
