"""The backend self-test of the 32-bit margin's assumptions (issue 42 item 6): it passes on this
CPU, refuses injected faults (an inaccurate exp, products that are not single-rounding), blocks
``precision="float32"`` and turns ``"auto"`` to float64 when it fails, and caches per key.

Oracles: the measured values are compared with the proof's constants (``margin.py``,
``noise.py``); an injected fault's size is known by construction. Every test has its own cache
folder and in-process cache (the autouse fixture), so nothing reads or writes the user's.
"""

from __future__ import annotations

import dataclasses
import json

import jax
import jax.numpy as jnp
import pytest
from jax import lax

import jaxacct
from jaxacct import _files
from jaxacct.errors import InputError
from jaxacct import BandedToeplitz, square_root_coefficients
from jaxacct.montecarlo.engine import margin, selftest32
from jaxacct.montecarlo.evr import precision

POISSON = jaxacct.MatrixMechanism(jaxacct.Poisson(sampling_prob=0.2, iterations=64),
                                  BandedToeplitz(square_root_coefficients(1)), 1.0)
HIGHEST = lax.Precision.HIGHEST


@pytest.fixture(autouse=True)
def _own_cache(tmp_path, monkeypatch):
  monkeypatch.setenv(selftest32.CACHE_ENVIRONMENT_VARIABLE, str(tmp_path / 'cache'))
  monkeypatch.setattr(selftest32, '_MEASURED', {})
  return tmp_path / 'cache' / 'selftest32'


def _cache_files(folder):
  return sorted(folder.glob('*.json')) if folder.exists() else []


def test_this_cpu_passes_every_assumption_and_the_checks_read_real_rounding(_own_cache):
  report = selftest32.check_backend()
  assert report.passed and not report.failures and not report.cached
  assert report.backend == 'cpu' and 'passed on cpu' in report.reason
  by_name = {m.name: m for m in report.measurements}
  assert set(by_name) == {'exp', 'expm1', 'log', 'log near 1', 'log1p', 'logaddexp', 'divide',
                          'ndtri', 'multiply', 'add', 'dot'}
  assert by_name['exp'].assumed == margin.EXP_ULPS
  assert by_name['ndtri'].assumed == pytest.approx(8.0 - 3.8)
  for m in report.measurements:
    # Thousands of full-mantissa inputs: even a correctly rounded result reaches ≥ 0.4 of u
    # (½ulp is between u/2 and u); a check reading 0 would compare nothing.
    assert 0.4 < m.measured <= m.assumed, m
  # IEEE products and sums are correctly rounded: the worst input is within ½ulp (a tie
  # reaches it exactly).
  assert by_name['multiply'].measured <= 1.0 and by_name['add'].measured <= 1.0
  assert len(_cache_files(_own_cache)) == 1


def test_an_injected_inaccurate_exp_is_refused_naming_it(_own_cache):
  # exp·(1 + 64u): ≥ 64u − (exp's own ≤ 1.3u + the product's rounding ≤ u) off somewhere.
  report = selftest32.check_backend(functions={'exp': lambda x: jnp.exp(x) * (1 + 64 * 2**-24)})
  assert not report.passed
  assert [m.name for m in report.failures] == ['exp']
  assert report.failures[0].measured >= 61.0
  assert 'exp measured' in report.reason and 'assumed 4 (margin.EXP_ULPS)' in report.reason
  assert _cache_files(_own_cache) == []  # an injected run is not the backend's measurement


def _split(a, parts):
  pieces, rest = [], a
  for _ in range(parts):
    piece = rest.astype(jnp.bfloat16).astype(jnp.float32)
    pieces.append(piece)
    rest = rest - piece
  return pieces


def _bf16x6(a, b):
  """The 6-pass bf16 product of a TPU's ``HIGHEST`` (a = a₁ + a₂ + a₃ in bf16; the three
  smallest cross products a₂b₃, a₃b₂, a₃b₃ dropped), emulated with exact bf16 products."""
  (a1, a2, a3), (b1, b2, b3) = _split(a, 3), _split(b, 3)
  dot = lambda x, y: jnp.matmul(x, y, precision=HIGHEST)  # noqa: E731
  return dot(a2, b2) + dot(a1, b3) + dot(a3, b1) + dot(a1, b2) + dot(a2, b1) + dot(a1, b1)


def _rounded_inputs(mantissa_bits):
  def dot(a, b):
    r = lambda x: lax.reduce_precision(x, exponent_bits=8, mantissa_bits=mantissa_bits)  # noqa
    return jnp.matmul(r(a), r(b), precision=HIGHEST)
  return dot


@pytest.mark.parametrize('dot', [_rounded_inputs(7), _rounded_inputs(10), _bf16x6],
                         ids=['bf16 inputs', 'tf32 inputs', 'bf16 6-pass'])
def test_products_that_are_not_single_rounding_are_refused(dot):
  report = selftest32.check_backend(functions={'dot': dot})
  assert [m.name for m in report.failures] == ['dot']
  assert 'one rounding per operation' in report.reason


def test_a_flushed_normal_product_is_refused():
  def flushing(a, b):
    product = a * b
    return jnp.where(jnp.abs(product) < 2.0**-120, 0.0, product)
  report = selftest32.check_backend(functions={'multiply': flushing})
  assert [m.name for m in report.failures] == ['multiply']


def test_float32_is_refused_and_auto_falls_back_when_the_self_test_fails(monkeypatch):
  assert precision.choose('float32', POISSON) == precision.PrecisionChoice('float32', 'requested')
  # An assumption tighter than this CPU's exp (1.3 ulps measured) fails the real self-test.
  monkeypatch.setattr(margin, 'EXP_ULPS', 0.5)
  with pytest.raises(selftest32.Float32SelfTestError,
                     match=r'refused on this backend: .* on cpu .*exp measured [0-9.]+ ulps > '
                           r'assumed 0\.5 \(margin\.EXP_ULPS\)') as raised:
    precision.choose('float32', POISSON)
  assert isinstance(raised.value, InputError)
  with pytest.raises(selftest32.Float32SelfTestError):
    jaxacct.estimate_delta(jax.random.key(0), POISSON, [1.0], 10,  # a driver, before compute
                           monte_carlo=jaxacct.MonteCarloOptions(precision='float32'))
  choice = precision.choose('auto', POISSON)
  assert choice.precision == 'float64'
  assert choice.reason.startswith('auto: the float32 self-test failed on cpu')
  assert 'margin.EXP_ULPS' in choice.reason
  assert precision.choose('float64', POISSON).reason == 'requested'


def test_the_cache_is_keyed_and_reused(_own_cache, monkeypatch):
  first = selftest32.check_backend()
  (path,) = _cache_files(_own_cache)
  key = json.loads(path.read_text())['body']['key']
  device = jax.local_devices()[0]
  assert key['platform'] == 'cpu' and key['device_kind'] == device.device_kind
  assert key['jax'] == jax.__version__ and key['selftest'] == selftest32.SELFTEST_VERSION

  def no_measuring(*args):
    raise AssertionError('measured again')
  measure = selftest32._measure_device
  monkeypatch.setattr(selftest32, '_measure_device', no_measuring)
  # In the process: reused without reading the file.
  path.unlink()
  again = selftest32.check_backend()
  assert again.cached and again.measurements == first.measurements
  # On disk, in a new process (an empty in-process cache).
  _files.write_checked_json(path, {'key': key, 'measurements': [
      dataclasses.asdict(m) for m in first.measurements]})
  monkeypatch.setattr(selftest32, '_MEASURED', {})
  from_disk = selftest32.check_backend()
  assert from_disk.cached and from_disk.passed and from_disk.measurements == first.measurements
  # Another assumed constant is another key: measured again, in a second file.
  monkeypatch.setattr(selftest32, '_measure_device', measure)
  monkeypatch.setattr(margin, 'EXP_ULPS', 5.0)
  other = selftest32.check_backend()
  assert not other.cached and other.passed
  assert {m.name: m.assumed for m in other.measurements}['exp'] == 5.0
  assert len(_cache_files(_own_cache)) == 2


def test_a_corrupt_cache_file_is_measured_again(_own_cache, monkeypatch):
  selftest32.check_backend()
  (path,) = _cache_files(_own_cache)
  for damage in ('{"body": {"key": ', path.read_text().replace('"exp"', '"exq"')):
    path.write_text(damage)
    monkeypatch.setattr(selftest32, '_MEASURED', {})
    report = selftest32.check_backend()
    assert report.passed and not report.cached
    assert _files.read_checked_json(path, 'cache', InputError)['key']['platform'] == 'cpu'


def test_a_backend_error_is_a_refusal_and_is_not_cached(_own_cache, monkeypatch):
  def failing(*args):
    raise RuntimeError('RESOURCE_EXHAUSTED: out of memory')
  monkeypatch.setattr(selftest32, '_measure_device', failing)
  report = selftest32.check_backend()
  assert not report.passed and 'could not run' in report.reason and 'out of memory' in report.reason
  assert _cache_files(_own_cache) == [] and selftest32._MEASURED == {}
  with pytest.raises(selftest32.Float32SelfTestError, match='out of memory'):
    selftest32.require_float32()


def test_arguments_are_checked_before_any_measurement():
  with pytest.raises(InputError, match=r"unknown names \['sin'\]"):
    selftest32.check_backend(functions={'sin': jnp.sin})
  with pytest.raises(InputError, match='devices must be a non-empty sequence'):
    selftest32.check_backend([])
  assert selftest32.check_backend(jax.local_devices()[:1]).passed
