"""The scheme-kernel protocol and its registry.

A *scheme kernel* is everything the Monte Carlo engine knows about one family of sampling
schemes. It is a frozen, hashable dataclass holding only the shape-determining (static)
fields of a mechanism — it is passed to ``jax.jit`` as a static argument — and it owns:

- ``params(mechanism)``: the traced parameters (a pytree of device scalars/arrays), so a new
  p or B does not recompile;
- ``sample_mean(keys, params, view, direction)``: the participation sampler, returning the
  noiseless output mean C·x (batch-major ``(N, n)``) and the kernel's ``Info`` (outputs the
  adversary also sees, e.g. the other examples' batch sizes under truncation; an empty
  ``NoInfo`` otherwise);
- ``log_ratio(d, params, sigma, view, info, direction)``: ln P(y)/Q(y) from d = Cᵀy;
- its random sub-streams (``jaxacct.conventions.Stream``), listed in its module docstring.

The strategy matrix reaches a kernel only through its view (``jaxacct.strategy``), so a
kernel never branches on the strategy's type.

Registration: each kernel module decorates its class with ``@register``; the class lists the
scheme types it serves (``schemes``) and may refuse a particular scheme (``refusal``, e.g.
an untruncated kernel refuses a truncating scheme that another kernel of the same type
accepts). ``kernel_for(mechanism, dtype)`` returns the built kernel of the first class that
accepts the scheme. Adding a scheme is its module in ``jaxacct/schemes/`` (the registered
frozen dataclass) and one new module here (the kernel; ``kernels/__init__.py`` imports every
module of this package, which registers it).

Kernels are not jit-compiled here: ``montecarlo/engine/sampling.py`` composes and jits them.
"""

from __future__ import annotations

import abc
from typing import Any, ClassVar, NamedTuple

import jax
import numpy as np
from jax import lax

from jaxacct.conventions import Direction
from jaxacct.montecarlo.engine import margin
from jaxacct.errors import InputError, InputTypeError


class NoInfo(NamedTuple):
  """The ``Info`` of kernels whose outputs are y alone (a pytree without leaves)."""


class SchemeKernel(abc.ABC):
  """Interface of a scheme family's Monte Carlo kernel (abstract; kernels are final).

  Concrete kernels are frozen dataclasses with at least ``iterations`` (n) and ``dtype``
  (the kernel arithmetic's dtype name, ``"float64"`` or ``"float32"``).
  """

  schemes: ClassVar[tuple[type, ...]] = ()
  """The scheme classes this kernel serves (exact types: schemes are final)."""

  iterations: int
  dtype: str

  releases_batch_sizes: ClassVar[bool] = False
  """True when the outputs include the other examples' batch sizes (truncation, App. D)."""

  @classmethod
  def refusal(cls, scheme) -> str | None:
    """None when this kernel accounts ``scheme``, else the reason (shown if no kernel does)."""
    del scheme
    return None

  @classmethod
  @abc.abstractmethod
  def build(cls, mechanism, dtype: np.dtype) -> 'SchemeKernel':
    """The static kernel of ``mechanism`` with kernel arithmetic in ``dtype``."""

  @abc.abstractmethod
  def params(self, mechanism) -> Any:
    """The traced parameters of ``mechanism`` (host → device values)."""

  def has_signal(self, direction: str) -> bool:
    """True when outputs in ``direction`` have a mean C·x (else y = σ·z: ``add`` under Q)."""
    return direction == Direction.REMOVE

  def law_error(self, params) -> float:
    """Host: a certified bound on the total variation between the law of one sample the
    kernel draws and the dominating pair's (0 unless a sampler is exact only up to a stated
    rounding, e.g. the 32-bit truncated batch sizes); the 32-bit program adds it to every
    hockey-stick term (each lies in [0, 1], so the exact mean is ≤ the sampled one + it)."""
    del params
    return 0.0

  def empty_info(self) -> Any:
    """The ``Info`` of draws without a mean (``has_signal`` False)."""
    return NoInfo()

  def info_from_batch_sizes(self, rest_batch_sizes) -> Any:
    """The ``Info`` of user-given outputs (``privacy_loss``): batch sizes r if released."""
    del rest_batch_sizes  # None: checked by the caller against ``releases_batch_sizes``
    return NoInfo()

  def batch_sizes_of(self, info) -> jax.Array | None:
    """The released batch sizes r in ``info``, or None when the kernel releases none."""
    del info
    return None

  @abc.abstractmethod
  def sample_mean(self, keys: jax.Array, params, view, direction: str) -> tuple[jax.Array, Any]:
    """(C·x, Info) of one participation draw per key, batch-major (N, n)."""

  @abc.abstractmethod
  def log_ratio(self, d: jax.Array, params, noise_multiplier: jax.Array, view, info,
                direction: str) -> jax.Array:
    """ln P(y)/Q(y) (N,) from d = Cᵀy (N, n); bounds for inexact views (per ``direction``)."""

  @abc.abstractmethod
  def log_ratio_with_margin(self, d: jax.Array, params, noise_multiplier: jax.Array,
                            kappa: jax.Array, view, info, direction: str,
                            product_error: jax.Array) -> tuple[jax.Array, jax.Array]:
    """32-bit program: (L̂, η) with |L̂ − L(y)| ≤ η per sample (``montecarlo/engine/margin.py``).
    Every kernel has it (``precision="float32"`` is this program only; with a float32 kernel,
    ``params`` are 32-bit host arrays).

    ``kappa`` ≥ 1/(2σ²); ``product_error`` ≥ max_i |d̂_i − d_i| per sample.
    """

  def log_ratios_for_sigmas_with_margin(self, mean_products: jax.Array | None,
                                        noise_products: jax.Array, params, noise_multipliers,
                                        kappas, view, info, direction: str,
                                        magnitudes) -> tuple[jax.Array, jax.Array]:
    """32-bit program: (L̂, η) (K, N) for K noise multipliers sharing one draw.

    ``magnitudes`` = (|ẑ|, |d̂_z|, |d̂_m|) per round or per sample (``margin`` proof step 4).
    The default forms d = fl(d_m + fl(σ̂·d_z)) and runs ``log_ratio_with_margin`` per σ.
    """
    z_abs, dz_abs, dm_abs = magnitudes

    def one_sigma(constants):
      sigma, kappa = constants
      error, _ = margin.shared_draws_product_error(z_abs, dz_abs, dm_abs, sigma, params.margin)
      d = sigma * noise_products
      d = d if mean_products is None else mean_products + d
      return self.log_ratio_with_margin(d, params, sigma, kappa, view, info, direction, error)
    return lax.map(one_sigma, (noise_multipliers, kappas))

  def log_ratios_for_sigmas(self, mean_products: jax.Array | None, noise_products: jax.Array,
                            params, noise_multipliers: jax.Array, view, info,
                            direction: str) -> jax.Array:
    """ln P/Q (K, N) for K noise multipliers sharing one draw: d(σ) = d_m + σ·d_z.

    d_m = Cᵀ(C·x) (None without a signal) and d_z = Cᵀz, each (N, n). The default runs
    ``log_ratio`` once per σ (``lax.map``: measured faster than ``vmap``); a kernel may
    share work across the candidates.
    """
    def one_sigma(sigma):
      d = sigma.astype(noise_products.dtype) * noise_products
      d = d if mean_products is None else mean_products + d
      return self.log_ratio(d, params, sigma, view, info, direction)
    return lax.map(one_sigma, noise_multipliers)


_REGISTRY: dict[type, list[type[SchemeKernel]]] = {}


def register(kernel: type[SchemeKernel]) -> type[SchemeKernel]:
  """Class decorator: registers ``kernel`` for each type in ``kernel.schemes``."""
  if not kernel.schemes:
    raise InputTypeError(f'{kernel.__name__}.schemes must list the scheme classes it serves')
  for scheme_type in kernel.schemes:
    entries = _REGISTRY.setdefault(scheme_type, [])
    if kernel in entries:
      raise InputError(f'{kernel.__name__} is already registered for {scheme_type.__name__}')
    entries.append(kernel)
  return kernel


def registered() -> tuple[type[SchemeKernel], ...]:
  """Every registered kernel class, once each, in registration order (the kernel contract
  suite, ``tests/montecarlo/kernel_contract.py``, checks that each has its test class)."""
  return tuple(dict.fromkeys(k for kernels in _REGISTRY.values() for k in kernels))


def _kernels_of(scheme) -> list[type[SchemeKernel]]:
  kernels = _REGISTRY.get(type(scheme))
  if not kernels:
    raise InputTypeError(f'no Monte Carlo kernel for scheme {type(scheme).__name__}')
  return kernels


def kernel_class(scheme) -> type[SchemeKernel]:
  """The kernel class that accounts ``scheme``; ValueError with the reasons (each once: the
  kernels of one family may share one) if none does."""
  kernels = _kernels_of(scheme)
  reasons = []
  for kernel in kernels:
    reason = kernel.refusal(scheme)
    if reason is None:
      return kernel
    reasons.append(reason)
  raise InputError('; '.join(dict.fromkeys(reasons)))


def kernel_for(mechanism, dtype: np.dtype) -> SchemeKernel:
  """The static kernel of ``mechanism`` (raises before any compute if none accounts it)."""
  return kernel_class(mechanism.scheme).build(mechanism, np.dtype(dtype))

