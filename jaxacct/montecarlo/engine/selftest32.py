"""The backend self-test of the 32-bit margin's assumptions.

The certified margin η of the 32-bit program (``margin.py``, proof in its docstring) rests on
accuracy constants of the backend's float32 arithmetic that were measured on one CPU. Before a
float32 run releases anything, ``precision.choose`` asks this module whether they hold on the
devices at hand: ``check_backend`` measures them there and ``require_float32`` refuses float32,
naming each failed constant with its measured and assumed value, where one does not hold.

What is checked, on each distinct device kind of ``devices`` (one device of each), with the
function the 32-bit program calls (``jnp.exp`` …, ``jnp.matmul(…, precision=HIGHEST)``),
jitted with 64-bit types disabled as the program runs (``program32.scope``), against a float64
reference on the host (NumPy/SciPy; each product of two float32 values is exact in float64, and
a float64 function's error, ≤ 2⁻⁵⁰ relative, is at most ~2⁻²⁶ of the float32 assumptions it
checks). "ulps" are units of u = 2⁻²⁴ of relative error, as the proof counts them. The inputs
are fixed (Weyl sequences and integer hashes, no random generator), built once per process:

  =========  ==========================================  ==================================
  name       assumption (proof)                          inputs
  =========  ==========================================  ==================================
  exp        relative ≤ ``margin.EXP_ULPS``              [−87, 88] (every normal result),
                                                         k·ln2/2 ± 1 ulp, ±2⁻ʲ
  expm1      relative ≤ ``margin.EXPM1_ULPS``            −[2⁻¹⁰⁰, 100] (the hockey-stick
                                                         argument is ≤ 0), −k·ln2/2
  log        relative ≤ ``margin.LOG_ULPS``              e^[−87, 88] with |ln x| > 10⁻²,
                                                         [0.99, 1) and 1 − k·2⁻²⁴
  log near 1 absolute ≤ ``margin.LOG_ULPS``·u            [1, 3] (a logsumexp's sum)
  log1p      relative ≤ ``margin.LOG_ULPS`` (log1p(−x))  x ∈ (0, ½] and 2^[−100, −1]
  logaddexp  ≤ LOGADDEXP_ULPS·u·(|r| + min(1, 2π))       (log q, v), p ∈ {10⁻⁶, 2.4·10⁻⁶,
             + u|Δ|π (proof, assumptions; step 7)        10⁻⁵, 0.05, ½, 1 − 10⁻⁶},
                                                         v ∈ [−60, 30] and log p ± ½
  divide     relative ≤ ``margin.DIVIDE_ULPS``           1/x, x ∈ e^[−80, 80]; a/b with
                                                         a, b ∈ e^[−40, 40] and integers
  ndtri      ``noise.NORMAL32_ERROR_ULPS`` − 3.8 in      every binade of (2⁻⁶⁶, ½] (256
             units of u(1 + |ẑ|) (noise.py: the rest     mantissas each), ±8 ulps at the
             is the rounding of the tail probability)    branch points e⁻², e⁻³²
  multiply   one rounding to nearest: |fl(ab) − ab| ≤    full and patterned mantissas,
             ½ulp (IEEE), no flush of a normal result    products in [2⁻¹²⁵, 2¹²⁶]
  add        one rounding to nearest: ≤ ½ulp (IEEE)      exponent gaps 0–27 (exact in
                                                         float64), both signs
  dot        one rounding per operation: a 1-term dot    (64 × 128) @ (128 × 128): dots of
             within ½ulp of ab, a k-term dot within      1–16 terms (banded) and 1–128
             γ_k Σ|aᵢ||bᵢ| (Higham §3.1; proof step 4),  (lower triangular), adversarial
             measured as a multiple of that bound        mantissas, scales 2^[−24, 24]
  =========  ==========================================  ==================================

A backend fails when a measured value exceeds the assumption (or is not a number). The dot
check is the single-rounding model itself (γ of the dot's own length, not the proof's γ_n ≥
it; a single product correctly rounded), so a TF32 product, inputs rounded to bf16 and a
multi-pass bf16 product fail it (an emulation of the 6-pass bf16 algorithm of a TPU's
``HIGHEST`` measures 1.5, ``tests/montecarlo/test_selftest32.py``); so do products or sums
that round toward zero or flush normal results.

NOT checked: inputs outside these sets (the checks are samples, not proofs: an elementary
function that is wrong on inputs not sampled here passes; ``benchmarks/accelerator.py
--exhaustive`` sweeps ndtri completely); other shapes or fusions of the same operation (XLA
may pick another dot algorithm or vector width for another shape; the program's own products
are the same ``jnp.matmul(…, HIGHEST)`` and ``dot_general`` call on other shapes); the
conversions uint32 → float32 of the random words (assumed correctly rounded, noise.py); the
logaddexp of two general arguments (truncated schemes, proof step 10: its exp, log1p and sums
are the ones above, the model is checked only with log q first); ``jax.nn.logsumexp`` as a
whole (its exp, log, max and sum are checked); FMA
contraction (the proof allows it where it happens); the devices' memory or the random words
themselves (``tests/montecarlo/test_program32.py`` compares with the float64 program); and a
change of the backend's code without a change of the cache key below.

Cache: a measurement is cached per (platform, platform_version, device_kind, jax and jaxlib
versions, digest of the assumed constants and of this self-test's version) in the process and
on disk, in ``$JAXACCT_CACHE_DIR/selftest32/`` (default ``$XDG_CACHE_HOME/jaxacct``, else
``~/.cache/jaxacct``), as checked JSON written atomically (``_files.write_checked_json``). A
cached result is trusted as it stands: delete the folder to measure again. A corrupt or
unreadable file is ignored and measured anew; a cache that cannot be written is skipped. A
test that could not run (an exception from the backend) is a failure and is not cached.

Under ``jax.distributed`` each process tests its own devices and, when ``devices`` is None,
the processes agree (an all-gather of the verdicts, a collective: every process calls it, as
every process calls ``precision.choose``), so that all of them choose the same precision.

Where the code runs: the functions under test run on the devices tested (one jitted program per
process); inputs, references, comparisons and the cache are host code.

References:
  Higham, "Accuracy and Stability of Numerical Algorithms" (2002), §2.2 (the standard model),
  §3.1 (γ_k, inner products).
"""

from __future__ import annotations

import dataclasses
import functools
import hashlib
import json
import math
import os
import pathlib
from typing import Callable, Mapping

import jax
import jax.numpy as jnp
import numpy as np
from jax import lax

from jaxacct import _files
from jaxacct.errors import InputError
from jaxacct.montecarlo.engine import margin, noise, program32

SELFTEST_VERSION = 1
"""Bumped whenever the inputs or the checks change (part of the cache key)."""

CACHE_ENVIRONMENT_VARIABLE = 'JAXACCT_CACHE_DIR'

U = margin.UNIT_ROUNDOFF
_INPUT_ROUNDING_ULPS = 3.8  # noise.py: the rounding of the tail probability, 3u·1.2534 ≤ 3.8u
_GOLDEN = (math.sqrt(5.0) - 1.0) / 2.0

FUNCTION_NAMES = ('exp', 'expm1', 'log', 'log1p', 'logaddexp', 'divide', 'ndtri', 'multiply',
                  'add', 'dot')
"""Keys of ``check_backend(functions=…)``: unary, (a, b) → a ∘ b, or (a, b) → a @ b."""


def _highest_dot(a: jax.Array, b: jax.Array) -> jax.Array:
  return jnp.matmul(a, b, precision=lax.Precision.HIGHEST)  # as strategies/lower_triangular.py


_FUNCTIONS: dict[str, Callable] = {
    'exp': jnp.exp, 'expm1': jnp.expm1, 'log': jnp.log, 'log1p': jnp.log1p,
    'logaddexp': jnp.logaddexp, 'divide': jnp.divide, 'ndtri': jax.scipy.special.ndtri,
    'multiply': jnp.multiply, 'add': jnp.add, 'dot': _highest_dot}


class Float32SelfTestError(InputError):
  """float32 refused: the backend does not meet an assumption of the 32-bit margin."""


@dataclasses.dataclass(frozen=True, kw_only=True)
class Measurement:
  """One checked assumption.

  Attributes: name (a row of the module docstring's table); assumption (where the assumed
  value lives); assumed; measured (largest value over the inputs, in ``unit``); unit; inputs
  (one line); device_kind (where the largest value was measured).
  """

  name: str
  assumption: str
  assumed: float
  measured: float
  unit: str
  inputs: str
  device_kind: str = ''

  @property
  def passed(self) -> bool:
    return bool(self.measured <= self.assumed)  # False for NaN

  def describe(self) -> str:
    return (f'{self.name} measured {self.measured:.3g} {self.unit} > assumed {self.assumed:g} '
            f'({self.assumption})')


@dataclasses.dataclass(frozen=True, kw_only=True)
class SelfTestReport:
  """The verdict of ``check_backend``.

  Attributes: backend (platform); device_kinds; versions ("jax …, jaxlib …"); measurements
  (per assumption, the largest over the device kinds); passed; reason (one sentence: what
  passed, or each failed assumption with measured vs assumed); cached (True when every
  measurement came from a cache, in the process or on disk).
  """

  backend: str
  device_kinds: tuple[str, ...]
  versions: str
  measurements: tuple[Measurement, ...]
  passed: bool
  reason: str
  cached: bool = False

  @property
  def failures(self) -> tuple[Measurement, ...]:
    return tuple(m for m in self.measurements if not m.passed)


def check_backend(devices=None, *,
                  functions: Mapping[str, Callable] | None = None) -> SelfTestReport:
  """Measures the 32-bit margin's float32 assumptions on ``devices`` (see the module docstring).

  Args:
    devices: JAX devices (default: ``jax.local_devices()``); one device of each distinct
      (platform, device kind) is tested.
    functions: fault injection for tests: replacements for some of ``FUNCTION_NAMES`` (for
      example ``{'exp': lambda x: jnp.exp(x) * (1 + 64 * 2**-24)}``). Such a run reads and
      writes no cache.

  Returns:
    A ``SelfTestReport``; a backend that cannot run the test fails with the error as reason.
    Nothing is raised for a backend's failure.

  Raises:
    InputError: ``devices`` empty or not devices, ``functions`` with an unknown name.
  """
  collective = devices is None and functions is None
  devices = _check_devices(devices)
  table = dict(_FUNCTIONS)
  if functions is not None:
    unknown = sorted(set(functions) - set(FUNCTION_NAMES))
    if unknown:
      raise InputError(f'functions has unknown names {unknown}; known: {list(FUNCTION_NAMES)}')
    table.update(functions)
  kinds: dict[tuple[str, str], object] = {}
  for device in devices:
    kinds.setdefault((device.platform, device.device_kind), device)
  results, all_cached, error = [], True, None
  for device in kinds.values():
    try:
      measurements, cached = _measured(device, table, use_cache=functions is None)
    except Exception as failure:  # pylint: disable=broad-except  (a refusal, never a pass)
      error = f'{type(failure).__name__}: {failure}'
      break
    results.append(measurements)
    all_cached &= cached
  return _report(list(kinds), results, all_cached, error, collective)


def require_float32(devices=None) -> SelfTestReport:
  """The passing ``check_backend(devices)`` report; else ``Float32SelfTestError`` naming each
  failed assumption (measured vs assumed) and the backend."""
  report = check_backend(devices)
  if not report.passed:
    raise Float32SelfTestError(f'precision="float32" is refused on this backend: {report.reason}; '
                               'run in float64 (precision="float64")')
  return report


# ---- the report ------------------------------------------------------------------------------

def _versions() -> str:
  import jaxlib  # pylint: disable=import-outside-toplevel
  return f'jax {jax.__version__}, jaxlib {getattr(jaxlib, "__version__", "?")}'


def _check_devices(devices) -> list:
  if devices is None:
    return jax.local_devices()
  try:
    devices = list(devices)
  except TypeError:
    raise InputError(f'devices must be a sequence of JAX devices, got {devices!r}') from None
  if not devices or not all(isinstance(d, jax.Device) for d in devices):
    raise InputError(f'devices must be a non-empty sequence of JAX devices, got {devices!r}')
  return devices


def _report(kinds, results, cached: bool, error: str | None, collective: bool) -> SelfTestReport:
  backend = ', '.join(sorted({platform for platform, _ in kinds}))
  device_kinds = tuple(kind for _, kind in kinds)
  where = f'{backend} ({", ".join(device_kinds)}; {_versions()})'
  merged = []
  for row in zip(*results) if results and error is None else ():
    merged.append(max(row, key=lambda m: (math.isnan(m.measured), m.measured)))
  failures = [m for m in merged if not m.passed]
  if error is not None:
    reason = f'the float32 self-test could not run on {where}: {error}'
  elif failures:
    reason = (f'the float32 self-test failed on {where}: '
              + '; '.join(m.describe() for m in failures))
  else:
    reason = f'the float32 self-test passed on {where}'
  passed = error is None and not failures
  if collective and jax.process_count() > 1:
    from jax.experimental import multihost_utils  # pylint: disable=import-outside-toplevel
    verdicts = np.asarray(multihost_utils.process_allgather(np.asarray(int(passed), np.int32)))
    others = [int(p) for p in np.flatnonzero(verdicts.reshape(-1) == 0)
              if p != jax.process_index()]
    if passed and others:
      passed, reason = False, (f'the float32 self-test failed on process(es) {others} (their '
                               'messages name the assumption); this process passed')
  return SelfTestReport(backend=backend, device_kinds=device_kinds, versions=_versions(),
                        measurements=tuple(merged), passed=passed, reason=reason,
                        cached=cached and error is None)


# ---- the cache -------------------------------------------------------------------------------

_MEASURED: dict[str, tuple[Measurement, ...]] = {}


def cache_directory() -> pathlib.Path:
  """``$JAXACCT_CACHE_DIR/selftest32`` (default ``$XDG_CACHE_HOME/jaxacct``, else
  ``~/.cache/jaxacct``)."""
  root = os.environ.get(CACHE_ENVIRONMENT_VARIABLE)
  if not root:
    base = os.environ.get('XDG_CACHE_HOME') or os.path.join(os.path.expanduser('~'), '.cache')
    root = os.path.join(base, 'jaxacct')
  return pathlib.Path(root).expanduser() / 'selftest32'


def _assumptions() -> dict[str, float]:
  """The assumed constants, read when called (a test may tighten one)."""
  return {'exp': float(margin.EXP_ULPS), 'expm1': float(margin.EXPM1_ULPS),
          'log': float(margin.LOG_ULPS), 'logaddexp': float(margin.LOGADDEXP_ULPS),
          'divide': float(margin.DIVIDE_ULPS),
          'ndtri': float(noise.NORMAL32_ERROR_ULPS) - _INPUT_ROUNDING_ULPS,
          'multiply': 1.0, 'add': 1.0, 'dot': 1.0}


def _cache_key(device) -> dict:
  import jaxlib  # pylint: disable=import-outside-toplevel
  constants = json.dumps(_assumptions(), sort_keys=True)
  return {'platform': device.platform, 'device_kind': device.device_kind,
          'platform_version': str(getattr(device.client, 'platform_version', '')),
          'jax': jax.__version__, 'jaxlib': str(getattr(jaxlib, '__version__', '?')),
          'selftest': SELFTEST_VERSION,
          'assumptions': hashlib.sha256(constants.encode()).hexdigest()[:16]}


def _measured(device, table, use_cache: bool) -> tuple[tuple[Measurement, ...], bool]:
  """(measurements on ``device``, whether they came from a cache)."""
  if not use_cache:
    return _measure_device(device, table), False
  key = _cache_key(device)
  name = hashlib.sha256(json.dumps(key, sort_keys=True).encode()).hexdigest()[:24]
  if name in _MEASURED:
    return _MEASURED[name], True
  path = cache_directory() / f'{name}.json'
  stored = _read_cache(path, key)
  if stored is not None:
    _MEASURED[name] = stored
    return stored, True
  measurements = _measure_device(device, table)
  _MEASURED[name] = measurements
  try:
    path.parent.mkdir(parents=True, exist_ok=True)
    _files.write_checked_json(path, {'key': key, 'measurements': [
        dataclasses.asdict(m) for m in measurements]})
  except OSError:
    pass  # a read-only home: the measurement is kept in the process only
  return measurements, False


def _read_cache(path: pathlib.Path, key: dict) -> tuple[Measurement, ...] | None:
  """The cached measurements at ``path`` for ``key``, or None (absent, corrupt, other key)."""
  try:
    body = _files.read_checked_json(path, 'self-test cache', InputError)
    if body is None or body['key'] != key:
      return None
    measurements = tuple(Measurement(**row) for row in body['measurements'])
  except (InputError, OSError, KeyError, TypeError, ValueError):
    return None
  assumed = _assumptions()
  if [m.name for m in measurements] != [name for name, _, _ in _CHECKS]:
    return None
  if any(m.assumed != assumed[_ASSUMED_BY[m.name]] for m in measurements):
    return None
  return measurements


# ---- inputs (host, fixed) --------------------------------------------------------------------

def _weyl(count: int, low: float, high: float, salt: int = 0) -> np.ndarray:
  """``count`` points of [low, high) in the golden-ratio (Weyl) order, float64."""
  k = np.arange(count, dtype=np.float64) + salt
  return low + (high - low) * np.mod(k * _GOLDEN, 1.0)


_PATTERNS = np.asarray([0x7FFFFF, 0x000001, 0x7F7F7F, 0x400001, 0x3FFFFF, 0x00FFFF, 0x7FFF80,
                        0x0080FF, 0x55AA55, 0x2AAAAA, 0x7F8000, 0x007FFF, 0x7F807F, 0x017F01],
                       np.int64)


def _mantissas(count: int, salt: int) -> np.ndarray:
  """23-bit mantissas: a multiplicative hash, every 4th one a bf16-adversarial pattern."""
  k = np.arange(count, dtype=np.int64)
  hashed = ((k + salt) * 2654435761 + salt * 40503) % (1 << 23)
  return np.where(k % 4 == 3, _PATTERNS[(k + salt) % _PATTERNS.size], hashed)


def _floats(mantissas: np.ndarray, exponents: np.ndarray, negative=None) -> np.ndarray:
  """Exact float32 values ±(1 + m·2⁻²³)·2^e."""
  values = np.ldexp(1.0 + mantissas / float(1 << 23), exponents.astype(np.int64))
  if negative is not None:
    values = np.where(negative, -values, values)
  return values.astype(np.float32)


def _neighbours(points, spread: int) -> np.ndarray:
  """float32 values within ``spread`` ulps of each nonzero point."""
  points = np.asarray(points, np.float32)
  points = points[points != 0.0]
  bits = points.view(np.int32).astype(np.int64)
  steps = np.arange(-spread, spread + 1)
  return (bits[:, None] + steps[None, :]).astype(np.int32).view(np.float32).ravel()


_PROBABILITIES = (1e-6, 2.4e-6, 1e-5, 0.05, 0.5, 1.0 - 1e-6)


@functools.cache
def _inputs() -> dict[str, np.ndarray]:
  f32 = lambda v: np.asarray(v, np.float32)  # noqa: E731
  half_ln2 = np.arange(-250, 254) * (math.log(2.0) / 2.0)
  tiny = np.ldexp(1.0, -np.arange(1, 61))
  inputs = {
      'exp': f32(np.concatenate([_weyl(12288, -87.0, 88.0), _neighbours(half_ln2, 1),
                                 tiny, -tiny])),
      'expm1': -f32(np.concatenate([_weyl(8192, 0.0, 100.0, 1)[1:],
                                    np.exp2(_weyl(4096, -100.0, 6.6, 2)),
                                    _neighbours(half_ln2[half_ln2 > 0][:200], 1)])),
  }
  wide = f32(np.exp(_weyl(12288, -87.0, 88.0, 3)))
  wide = wide[np.abs(np.log(wide.astype(np.float64))) > 1e-2]
  below_one = f32(np.concatenate([_weyl(2048, 0.99, 1.0, 4), 1.0 - np.arange(1, 2049) * U]))
  inputs['log'] = np.concatenate([wide, below_one[below_one < 1.0]])
  inputs['log_near_one'] = f32(np.concatenate([[1.0], _weyl(4096, 1.0, 3.0, 5)]))
  small = f32(np.concatenate([_weyl(4096, 0.0, 0.5, 6)[1:], [0.5],
                              np.exp2(_weyl(2048, -100.0, -1.0, 7))]))
  inputs['log1p'] = -small  # log1p(−x), x ∈ (0, ½]
  log_q, v = [], []
  for i, p in enumerate(_PROBABILITIES):
    values = np.concatenate([_weyl(4096, -60.0, 30.0, 8 + i),
                             math.log(p) + _weyl(1024, -0.5, 0.5, 16 + i)])
    log_q.append(np.full(values.size, math.log1p(-p)))
    v.append(values)
  inputs['logaddexp_a'], inputs['logaddexp_v'] = f32(np.concatenate(log_q)), f32(np.concatenate(v))
  inputs['reciprocal'] = f32(np.exp(_weyl(4096, -80.0, 80.0, 24)))
  integers = np.floor(np.exp2(_weyl(1024, 0.0, 20.0, 25)))
  inputs['numerator'] = f32(np.concatenate([np.exp(_weyl(4096, -40.0, 40.0, 26)), integers]))
  inputs['denominator'] = f32(np.concatenate([np.exp(_weyl(4096, -40.0, 40.0, 27)),
                                              integers + 1.0 + np.floor(integers / 7.0)]))
  binades = np.repeat(np.arange(-66, -1), 256)
  branches = [np.exp(-2.0), np.exp(-32.0)]
  inputs['ndtri'] = np.concatenate([
      _floats(_mantissas(binades.size, 1), binades), f32([0.5]), _neighbours(branches, 8)])
  count = 8192
  exponents_a = np.floor(_weyl(count, -60.0, 61.0, 30))
  exponents_b = np.floor(_weyl(count, -60.0, 61.0, 31))
  alternate = np.arange(512) % 2 == 1
  inputs['multiply_a'] = np.concatenate([
      _floats(_mantissas(count, 2), exponents_a, _mantissas(count, 9) % 2 == 1),
      _floats(_mantissas(512, 3), np.full(512, -63)),  # products in [2⁻¹²⁵, 2⁻¹²³)
      _floats(_mantissas(512, 4), np.full(512, 62))])  # products in [2¹²⁴, 2¹²⁶)
  inputs['multiply_b'] = np.concatenate([
      _floats(_mantissas(count, 5), exponents_b, _mantissas(count, 17) % 2 == 1),
      _floats(_mantissas(512, 6), np.full(512, -62), alternate),
      _floats(_mantissas(512, 7), np.full(512, 62))])
  gaps = np.arange(count) % 28  # exponent gaps 0–27: a + b exact in float64
  exponents = np.floor(_weyl(count, -60.0, 61.0, 32))
  inputs['add_a'] = _floats(_mantissas(count, 10), exponents)
  inputs['add_b'] = _floats(_mantissas(count, 11), exponents - gaps,
                            (np.arange(count) // 28) % 2 == 1)
  inputs.update(_dot_inputs())
  return inputs


def _dot_inputs() -> dict[str, np.ndarray]:
  """Y (64, 128) with full and bf16-adversarial mantissas, signs and row scales 2^[−20, 20]
  (elements ±4 binades); a banded C (column i has 1 + i mod 16 terms) and a lower-triangular C
  (column i has 128 − i terms), entries of both signs in [¼, 2)."""
  rows, n = 64, 128
  size = rows * n
  row_scale = np.repeat(np.round(_weyl(rows, -20.0, 21.0, 40)), n)
  exponents = row_scale + np.floor(_weyl(size, -4.0, 5.0, 41))
  negative = _mantissas(size, 12) % 3 == 0
  y = _floats(_mantissas(size, 13), exponents, negative).reshape(rows, n)
  entries = _floats(_mantissas(n * n, 14), np.floor(_weyl(n * n, -2.0, 1.0, 42)),
                    _mantissas(n * n, 15) % 5 == 0).reshape(n, n)
  k, i = np.arange(n)[:, None], np.arange(n)[None, :]
  banded = np.where((k >= i) & (k < i + 1 + i % 16), entries, np.float32(0.0))
  dense = np.tril(entries[::-1]).astype(np.float32)
  y_dense = _floats(_mantissas(size, 16), exponents[::-1], negative[::-1]).reshape(rows, n)
  return {'dot_short_y': y, 'dot_short_c': banded.astype(np.float32),
          'dot_dense_y': y_dense, 'dot_dense_c': dense}


# ---- the device program and the comparisons --------------------------------------------------

def _device_outputs(table, x):
  """Every function under test on its inputs, in float32 (one jitted program)."""
  one = jnp.ones((), jnp.float32)
  return {
      'exp': table['exp'](x['exp']), 'expm1': table['expm1'](x['expm1']),
      'log': table['log'](x['log']), 'log_near_one': table['log'](x['log_near_one']),
      'log1p': table['log1p'](x['log1p']),
      'logaddexp': table['logaddexp'](x['logaddexp_a'], x['logaddexp_v']),
      'reciprocal': table['divide'](one, x['reciprocal']),
      'quotient': table['divide'](x['numerator'], x['denominator']),
      'ndtri': -table['ndtri'](x['ndtri']),
      'multiply': table['multiply'](x['multiply_a'], x['multiply_b']),
      'add': table['add'](x['add_a'], x['add_b']),
      'dot_short': table['dot'](x['dot_short_y'], x['dot_short_c']),
      'dot_dense': table['dot'](x['dot_dense_y'], x['dot_dense_c'])}


@functools.cache
def _default_program():
  return jax.jit(functools.partial(_device_outputs, _FUNCTIONS))


def _measure_device(device, table) -> tuple[Measurement, ...]:
  inputs = _inputs()
  program = (_default_program() if table == _FUNCTIONS
             else jax.jit(functools.partial(_device_outputs, table)))
  with program32.scope():
    placed = jax.device_put(inputs, device)
    outputs = jax.tree_util.tree_map(lambda a: np.asarray(a, np.float64), program(placed))
  x = {name: np.asarray(value, np.float64) for name, value in inputs.items()}
  measured = {name: float(compare(outputs, x)) for name, compare, _ in _CHECKS}
  assumed = _assumptions()
  return tuple(Measurement(name=name, assumption=_ASSUMPTION_NAMES[name],
                           assumed=assumed[_ASSUMED_BY[name]], measured=measured[name],
                           unit=_UNITS.get(name, 'ulps'), inputs=description,
                           device_kind=device.device_kind)
               for name, _, description in _CHECKS)


def _relative(got, exact) -> float:
  """max |got − exact| / (u|exact|); an error where exact = 0 counts as inf."""
  error = np.abs(got - exact)
  with np.errstate(divide='ignore', invalid='ignore'):
    ratio = np.where(error == 0.0, 0.0, error / (U * np.abs(exact)))
  return _largest(ratio)


def _largest(values) -> float:
  values = np.asarray(values, np.float64)
  return float('nan') if np.isnan(values).any() else float(np.max(values))


def _logaddexp(out, x) -> float:
  a, v = x['logaddexp_a'], x['logaddexp_v']
  exact = np.logaddexp(a, v)
  posterior = np.exp(v - exact)
  scale = U * (np.abs(exact) + np.minimum(1.0, 2.0 * posterior))
  difference = U * np.abs(v - a) * posterior
  return _largest(np.maximum(np.abs(out['logaddexp'] - exact) - difference, 0.0) / scale)


def _ndtri(out, x) -> float:
  from scipy import special  # pylint: disable=import-outside-toplevel
  exact = -special.ndtri(x['ndtri'])
  return _largest(np.abs(out['ndtri'] - exact) / (U * (1.0 + np.abs(out['ndtri']))))


def _half_ulps(got, exact) -> float:
  """max |got − exact| / ½ulp₃₂(exact): ≤ 1 exactly when got is exact rounded to nearest (a
  normal float32 result); an error where exact = 0 counts as inf."""
  _, exponent = np.frexp(exact)  # |exact| ∈ [2^(e−1), 2^e): float32 half-ulp 2^(e − 25)
  error = np.abs(got - exact)
  with np.errstate(divide='ignore', invalid='ignore'):
    ratio = np.where(error == 0.0, 0.0, error / np.ldexp(1.0, exponent - 25))
  return _largest(np.where(exact == 0.0, np.where(error == 0.0, 0.0, np.inf), ratio))


def _dot(out, x) -> float:
  """Largest error of a k-term dot over its single-rounding bound: ½ulp of the exact value for
  k = 1 (one rounding, to nearest), γ_k Σ|y||c| for k ≥ 2 (any order, FMA or not); the
  float64 reference's own error (γ⁽⁶⁴⁾_k Σ|y||c|) is added to the measured error."""
  worst = []
  for name in ('dot_short', 'dot_dense'):
    y, c = x[name + '_y'], x[name + '_c']
    terms = np.broadcast_to(np.count_nonzero(c, axis=0)[None, :].astype(np.float64),
                            out[name].shape)
    exact = y @ c  # each product exact in float64; the sum within γ⁽⁶⁴⁾_k below
    magnitude = np.abs(y) @ np.abs(c)
    reference_error = terms * 2.0**-53 / (1.0 - terms * 2.0**-53) * magnitude
    bound = terms * U / (1.0 - terms * U) * magnitude * (1.0 - 2.0**-40)
    single = terms == 1.0  # exact in float64: the reference is the product itself
    worst.append(_half_ulps(out[name][single], exact[single]))
    worst.append(_largest((np.abs(out[name] - exact) + reference_error)[~single]
                          / bound[~single]))
  return _largest(worst)


_CHECKS = (
    ('exp', lambda o, x: _relative(o['exp'], np.exp(x['exp'])),
     '[−87, 88], k·ln2/2 ± 1 ulp, ±2⁻ʲ'),
    ('expm1', lambda o, x: _relative(o['expm1'], np.expm1(x['expm1'])),
     '−[2⁻¹⁰⁰, 100], −k·ln2/2 ± 1 ulp'),
    ('log', lambda o, x: _relative(o['log'], np.log(x['log'])),
     'e^[−87, 88] (|ln x| > 10⁻²), [0.99, 1), 1 − k·2⁻²⁴'),
    ('log near 1', lambda o, x: _largest(np.abs(o['log_near_one'] - np.log(x['log_near_one'])) / U),
     '[1, 3], absolute'),
    ('log1p', lambda o, x: _relative(o['log1p'], np.log1p(x['log1p'])),
     'log1p(−x), x ∈ (0, ½] and 2^[−100, −1]'),
    ('logaddexp', _logaddexp, '(log q, v), 6 values of p, v ∈ [−60, 30] and log p ± ½'),
    ('divide', lambda o, x: max(_relative(o['reciprocal'], 1.0 / x['reciprocal']),
                                _relative(o['quotient'], x['numerator'] / x['denominator'])),
     '1/x, x ∈ e^[−80, 80]; a/b, a, b ∈ e^[−40, 40] and integers'),
    ('ndtri', _ndtri, 'every binade of (2⁻⁶⁶, ½], ±8 ulps at e⁻² and e⁻³²'),
    ('multiply', lambda o, x: _half_ulps(o['multiply'], x['multiply_a'] * x['multiply_b']),
     'products in [2⁻¹²⁵, 2¹²⁶], full and bf16-adversarial mantissas'),
    ('add', lambda o, x: _half_ulps(o['add'], x['add_a'] + x['add_b']),
     'exponent gaps 0–27, both signs'),
    ('dot', _dot, 'jnp.matmul(…, HIGHEST): (64 × 128) @ (128 × 128), 1–16 and 1–128 terms'),
)
_ASSUMED_BY = {'exp': 'exp', 'expm1': 'expm1', 'log': 'log', 'log near 1': 'log', 'log1p': 'log',
               'logaddexp': 'logaddexp', 'divide': 'divide', 'ndtri': 'ndtri',
               'multiply': 'multiply', 'add': 'add', 'dot': 'dot'}
_ASSUMPTION_NAMES = {
    'exp': 'margin.EXP_ULPS', 'expm1': 'margin.EXPM1_ULPS', 'log': 'margin.LOG_ULPS',
    'log near 1': 'margin.LOG_ULPS, absolute', 'log1p': 'margin.LOG_ULPS',
    'logaddexp': 'margin.LOGADDEXP_ULPS', 'divide': 'margin.DIVIDE_ULPS',
    'ndtri': 'noise.NORMAL32_ERROR_ULPS − 3.8',
    'multiply': 'IEEE float32 multiply, one rounding', 'add': 'IEEE float32 add, one rounding',
    'dot': 'one rounding per operation, γ_k (margin step 4)'}
_UNITS = {'ndtri': 'u(1 + |z|)', 'log near 1': 'u (absolute)', 'multiply': '× ½ulp',
          'add': '× ½ulp', 'dot': '× the single-rounding bound',
          'logaddexp': 'u·(|r| + min(1, 2π))'}
