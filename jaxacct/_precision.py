"""Scoped float64: accounting results are float64 whatever the global x64 flag.

The library never flips global JAX configuration. Public entry points run under
``jax.enable_x64(True)`` as a context manager (restored on exit), the approach
of jax_privacy's matrix-factorisation optimiser.
"""

from __future__ import annotations

import functools
from typing import Any, Callable, TypeVar

import jax
import jax.numpy as jnp
import numpy as np
from jaxacct.errors import InputError

F = TypeVar('F', bound=Callable[..., Any])

KERNEL_DTYPES = (np.dtype(np.float64), np.dtype(np.float32))


def _under_transformation(args: tuple[Any, ...], kwargs: dict[str, Any]) -> bool:
  if any(isinstance(leaf, jax.core.Tracer) for leaf in jax.tree.leaves((args, kwargs))):
    return True
  # Under jit every new array is staged out as a tracer (public-API probe).
  return isinstance(jnp.zeros((), jnp.int32), jax.core.Tracer)


def scoped_x64(fn: F) -> F:
  """Runs ``fn`` with 64-bit types enabled, restoring the caller's setting after.

  Inside a caller's transformation (an argument is a tracer, or ``jit`` is
  staging) the caller's setting is kept: switching it mid-trace hands float64
  values to float32 code (JAX warns; eager ``vmap`` in jax 0.10.2 fails).
  """

  @functools.wraps(fn)
  def wrapper(*args, **kwargs):
    if _under_transformation(args, kwargs):
      return fn(*args, **kwargs)
    with jax.enable_x64(True):
      return fn(*args, **kwargs)

  return wrapper  # type: ignore[return-value]


def kernel_dtype(dtype: Any) -> np.dtype:
  """Validates the ``dtype`` argument of a kernel: float64 (default) or float32."""
  try:
    resolved = np.dtype(dtype)
  except TypeError as exc:
    raise InputError(f'dtype must be jnp.float64 or jnp.float32, got {dtype!r}') from exc
  if resolved not in KERNEL_DTYPES:
    raise InputError(f'dtype must be jnp.float64 or jnp.float32, got {dtype!r}')
  return resolved


def as_float64(x: Any) -> jax.Array:
  """Upcasts to float64 (never downcasts); call inside ``scoped_x64``."""
  return jnp.asarray(x, dtype=jnp.float64)
