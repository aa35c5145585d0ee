"""Argument checks that run before any compute.

Every check raises ``ValueError`` (or ``TypeError`` for the wrong kind of
object) whose message names the argument, shows the value received and states
the allowed range, e.g. ``"sampling_prob must be in (0, 1], got 1.5"``.

References:
  Andy Dong and Arun Ganesh, "Privacy Amplification for BandMF via b-Min-Sep Subsampling",
  arXiv:2602.09338 (v2): §2.3, Theorem 5.1 (C lower-triangular and non-negative)
  (docs/references.md).
  Christopher A. Choquette-Choo, Arun Ganesh, Thomas Steinke and Abhradeep Thakurta, "Privacy
  Amplification for Matrix Mechanisms", arXiv:2310.15526 (v2; ICLR 2024): Lemma 4.3 (monotonicity:
  mean domination) (docs/references.md).
"""

from __future__ import annotations

import math
import numbers
from typing import Any

import numpy as np
from jaxacct.errors import InputError, InputTypeError


def _is_integer(value: Any) -> bool:
  return isinstance(value, numbers.Integral) and not isinstance(value, bool)


def integer_at_least(name: str, value: Any, minimum: int) -> int:
  """Returns ``value`` as ``int`` if it is an integer ``>= minimum``."""
  if isinstance(value, (float, np.floating)) and float(value).is_integer():
    raise InputTypeError(argument=name, value=value,
                         requirement=f'must be an integer >= {minimum}, got the float {value!r}')
  if not _is_integer(value):
    raise InputTypeError(argument=name, value=value,
                         requirement=f'must be an integer >= {minimum}, got {value!r}')
  if value < minimum:
    raise InputError(argument=name, value=value,
                     requirement=f'must be an integer >= {minimum}, got {value}')
  return int(value)


def real_number(name: str, value: Any) -> float:
  """Returns ``value`` as a Python float; rejects non-scalars and non-numbers."""
  if isinstance(value, bool) or not isinstance(value, (numbers.Real, np.ndarray, np.generic)):
    try:
      import jax  # local: _validate must stay importable without touching devices
      if isinstance(value, jax.Array) and value.shape == ():
        return float(value)
    except ImportError:  # pragma: no cover
      pass
    raise InputTypeError(argument=name, value=value,
                         requirement=f'must be a real number, got {value!r}')
  array = np.asarray(value)
  if array.shape != ():
    raise InputError(argument=name, value=value,
                     requirement=f'must be a scalar, got an array of shape {array.shape}')
  return float(array)


def probability(name: str, value: Any, *, allow_zero: bool = False) -> float:
  """Checks ``value`` in (0, 1] (or [0, 1] with ``allow_zero``)."""
  value = real_number(name, value)
  low_ok = value >= 0.0 if allow_zero else value > 0.0
  if not (math.isfinite(value) and low_ok and value <= 1.0):
    interval = '[0, 1]' if allow_zero else '(0, 1]'
    raise InputError(argument=name, requirement=f'must be in {interval}, got {value}', value=value)
  return value


def positive_finite(name: str, value: Any) -> float:
  """Checks ``0 < value < inf``."""
  value = real_number(name, value)
  if not (math.isfinite(value) and value > 0.0):
    raise InputError(argument=name, requirement=f'must be finite and > 0, got {value}', value=value)
  return value


def finite_real(name: str, value: Any) -> float:
  """Checks that ``value`` is a finite real scalar."""
  value = real_number(name, value)
  if not math.isfinite(value):
    raise InputError(argument=name, requirement=f'must be finite, got {value}', value=value)
  return value


def boolean(name: str, value: Any) -> bool:
  """Returns ``value`` as ``bool`` if it is a bool (or a NumPy bool): a string such as
  ``'no'`` or a number is refused, never read by its truth value."""
  if not isinstance(value, (bool, np.bool_)):
    raise InputTypeError(argument=name, value=value,
                         requirement=f'must be True or False, got {value!r}')
  return bool(value)


def one_of(name: str, value: Any, allowed: tuple[str, ...]) -> str:
  """Checks that ``value`` is one of the ``allowed`` strings."""
  if value not in allowed:
    raise InputError(argument=name, value=value,
                     requirement=f'must be one of {", ".join(map(repr, allowed))}, got {value!r}')
  return value


def real_array(name: str, values: Any, kind: str = 'an array') -> np.ndarray:
  """``values`` as a float64 NumPy array if they are real numbers (a number, a nested list of
  numbers of one shape, a NumPy or JAX array); ``kind`` describes what is expected in the
  message (``'a 1-D list'``, ``'an n×n matrix'``).

  Refused with ``InputTypeError`` naming ``name``: None, a string or bytes (never read
  character by character or as a number), booleans, complex numbers, other objects; with
  ``InputError``: nested lists of unequal lengths.
  """
  if values is None or isinstance(values, (str, bytes)):
    raise InputTypeError(f'{name} must be {kind} of real numbers, got {_shown(values)}')
  try:
    array = np.asarray(values)
  except (ValueError, TypeError):  # ragged nested lists
    raise InputError(f'{name} must be {kind} of real numbers with rows of equal length, got '
                     f'{_shown(values)}') from None
  if array.dtype.kind == 'O' and all(
      isinstance(v, numbers.Real) and not isinstance(v, (bool, np.bool_)) for v in array.ravel()):
    return array.astype(np.float64)  # an object array of numbers (e.g. from pandas)
  if array.dtype.kind not in 'iuf':
    what = {'b': 'booleans', 'c': 'complex numbers', 'U': 'strings', 'S': 'strings',
            'O': 'objects that are not numbers'}.get(array.dtype.kind, f'{array.dtype} values')
    raise InputTypeError(f'{name} must be {kind} of real numbers, got {what}: {_shown(values)}')
  return array.astype(np.float64)


def _shown(value: Any, limit: int = 120) -> str:
  """``repr(value)``, cut to ``limit`` characters for a message."""
  text = repr(value)
  return text if len(text) <= limit else text[:limit - 1] + '…'


def band_coefficients(name: str, values: Any) -> np.ndarray:
  """Checks a band of a banded Toeplitz matrix: 1-D, non-empty, finite, >= 0, first > 0.

  Non-negativity is required by every amplification result we implement
  (Dong & Ganesh (2026) §2.3 and Thm 5.1 assume C ≥ 0; mean domination is
  Choquette-Choo et al. (2023) Lemma 4.3); a zero leading coefficient makes
  C singular.
  """
  array = real_array(name, values, 'a 1-D array')
  if array.ndim != 1:
    raise InputError(f'{name} must be a 1-D array, got shape {array.shape}')
  if array.size == 0:
    raise InputError(f'{name} must be non-empty')
  if not np.all(np.isfinite(array)):
    raise InputError(f'{name} must contain only finite values (no NaN or inf), got {array}')
  if np.any(array < 0):
    raise InputError(f'{name} must be entrywise non-negative, got {array}')
  if not array[0] > 0:
    raise InputError(f'{name}[0] must be > 0 (otherwise C is singular), got {array[0]}')
  return array
