"""Which arithmetic a Monte Carlo run uses: float64, or the 32-bit program with its margin.

``precision`` is one of ``"float64"`` (64-bit device program, the default of every API
function), ``"float32"`` (the 32-bit program of ``program32.py``: sound, with the certified
margin of ``margin.py``; refused with the reason for a mechanism it does not serve, never
run in float64 instead) and ``"auto"``: float32 on a TPU or GPU backend (their native type),
and on a CPU whichever precision this library measures faster for the mechanism (one call of
each program at the mechanism's shape, after compiling; cached per shape), float64 when the
32-bit program does not serve the mechanism. ``PrecisionChoice.reason`` says which and why.

Before float32 is chosen, the backend self-test (``selftest32.py``: the float32 accuracy the
margin's proof assumes, measured on the local devices, cached per backend and version) must
pass: ``"float32"`` raises ``selftest32.Float32SelfTestError`` naming the failed assumption,
``"auto"`` falls back to float64 with it as the reason. The legacy ``dtype=jnp.float32`` of
the 32-bit program is held to the same test.

Host code.
"""

from __future__ import annotations

import dataclasses

import jax
import numpy as np

from jaxacct.montecarlo.engine import kernels, program32, selftest32, sharding
from jaxacct.montecarlo.evr import plan
from jaxacct.errors import InputError
from jaxacct.options import PRECISIONS

ACCELERATORS = ('gpu', 'tpu', 'cuda', 'rocm')


@dataclasses.dataclass(frozen=True)
class PrecisionChoice:
  """The precision a run uses and why (shown by the CLI, recorded in reports).

  Attributes: precision ("float32" or "float64"); reason (one sentence).
  """

  precision: str
  reason: str

  @property
  def dtype(self) -> np.dtype:
    return np.dtype(self.precision)


def check_precision(precision) -> str:
  """``precision`` if it is one of ``PRECISIONS``, else ValueError naming the argument."""
  if not isinstance(precision, str) or precision not in PRECISIONS:
    raise InputError(f'precision must be one of {", ".join(map(repr, PRECISIONS))}, '
                     f'got {precision!r}')
  return precision


def choose(precision: str, mechanism, *, progress=None) -> PrecisionChoice:
  """Resolves ``precision`` for ``mechanism`` (before any compute for float32/float64).

  ``"auto"`` on a CPU compiles and times both programs; each compile is announced first
  (``progress.announce`` to ``progress``; None: a person's terminal, else the ``jaxacct``
  logger at INFO, which the CLI shows).

  Raises:
    ValueError: an unknown name, or ``"float32"`` for a mechanism the 32-bit program does
      not serve (the message gives the reason).
    selftest32.Float32SelfTestError: ``"float32"`` on a backend that fails the self-test
      (the message names the failed assumption, measured vs assumed).
  """
  precision = check_precision(precision)
  if precision == 'float64':
    return PrecisionChoice('float64', 'requested')
  refused = program32.refusal(mechanism, kernels.kernel_for(mechanism, np.dtype(np.float32)))
  if precision == 'float32':
    if refused is not None:
      raise InputError(f'precision="float32" cannot serve this mechanism: {refused}')
    selftest32.require_float32()
    return PrecisionChoice('float32', 'requested')
  if refused is not None:
    return PrecisionChoice('float64', f'auto: {refused}')
  report = selftest32.check_backend()
  if not report.passed:
    return PrecisionChoice('float64', f'auto: {report.reason}')
  backend = jax.default_backend()
  if backend in ACCELERATORS:
    return PrecisionChoice('float32', f'auto: the {backend} backend computes in float32')
  # Timings differ between hosts: under jax.distributed process 0 decides for every process.
  faster, reason = sharding.on_leader(lambda: _measured_choice(mechanism, progress))
  return PrecisionChoice(faster, reason)


def _measured_choice(mechanism, progress=None) -> list[str]:
  float64_cost, float32_cost = _measured_costs(mechanism, progress)
  faster = 'float32' if float32_cost < float64_cost else 'float64'
  return [faster, f'auto: measured here {float32_cost * 1e6:.1f} µs (float32) vs '
                  f'{float64_cost * 1e6:.1f} µs (float64) per sample']


_COSTS: dict = {}


def _measured_costs(mechanism, progress=None) -> tuple[float, float]:
  """Seconds per sample of one σ in float64 and in float32 on the local devices (cached per
  kernel shape and band length: p and σ do not change the cost materially). The run then
  finds the chosen precision's one-σ program compiled (same shapes)."""
  shape = (kernels.kernel_for(mechanism, np.dtype(np.float64)), mechanism.matrix.num_bands)
  if shape not in _COSTS:
    _COSTS[shape] = tuple(plan.seconds_per_sample(
        mechanism, np.dtype(dtype), role='precision auto: the faster one here is chosen',
        progress=progress) for dtype in (np.float64, np.float32))
  return _COSTS[shape]
