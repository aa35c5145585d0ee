"""Bitwise regression pins: every seed gives the same losses, δ̂ and σ as before the redesign.

The values in ``pinned_values.json`` were computed by this module's ``compute()`` on the
code of commit c7f3bec (before the scheme-kernel / strategy-view / stream-driver redesign of
issue 12), on the project's 2-core x86-64 CPU machine. They are compared as exact float64
bit patterns (``float.hex``): a refactoring must not change a single bit. Regenerate only for
an intended change of the numbers (``python tests/test_pinned_values.py``), and say why in
the commit. XLA's CPU code generation depends on the instruction set, so a machine of
another kind may legitimately differ in the last bits; then regenerate there at the base
commit first.

One exception: the calibration's σ grid starts from an initial guess computed by
dp_accounting's PLD (``pld.dpsgd_sigma``), whose FFT convolutions round differently across
NumPy/SciPy builds (the guess moved by ~1e-13 relative between two installs of the same
pinned versions; the base and current trees still agree bitwise within one install). Those
values (``GUESS_DEPENDENT``) are compared to 1e-12 relative; every other pin is exact.

Intended change since: ``losses/bminsep_warm/remove/float32`` was regenerated when the kernels
began multiplying by an explicit 1/(2σ²) instead of dividing by 2σ² (issue 13: XLA rewrote
some of those divisions and not others depending on the device count). Every float64 pin
stayed bitwise the same.

Issue 18 regenerated the loss, estimate and sweep pins (not the calibration ones, which did
not move), for two intended changes of the last bits: Eq. (1) runs in the linear domain with
exact power-of-two rescaling (``bminsep.linear_log_ratio``) instead of a logaddexp per round
(largest change 1.5e-14 relative, a multi-attribution loss; ≤ 6.5e-16 for δ̂ and its standard
error), and the float64 exact-tail normals evaluate Cephes' ndtri rearranged to one division
(``noise.tail_quantile``; every loss moved by ≤ 5.1e-15 relative).

Issue 28 regenerated ``losses/bminsep_warm/remove/float32`` only: ``dtype=float32`` is now the
32-bit device program (the same real samples as float64, float32 arithmetic with host-computed
constants, sliding products summed as a binary tree instead of shifted sums), so its float32
losses moved in their last float32 bits (≤ 6 ulp); every float64 pin stayed bitwise the same.
"""

import json
import pathlib

import jax
import numpy as np
import pytest

import jaxacct
from jaxacct.montecarlo.evr import candidates

PINS = pathlib.Path(__file__).with_name('pinned_values.json')
BAND = [1.0, 0.5, 0.25]
GUESS_DEPENDENT = frozenset({'calibration/noise_multiplier', 'calibration/candidates'})


def _mechanisms() -> dict:
  return {
      'bminsep_warm': jaxacct.MatrixMechanism(
          jaxacct.BMinSep(sampling_prob=0.3, iterations=24, min_sep=4, warm_start=True),
          jaxacct.BandedToeplitz(BAND), 1.1),
      'bminsep_cold': jaxacct.MatrixMechanism(
          jaxacct.BMinSep(sampling_prob=0.3, iterations=24, min_sep=4, warm_start=False),
          jaxacct.BandedToeplitz(BAND), 1.1),
      'poisson': jaxacct.MatrixMechanism(
          jaxacct.Poisson(sampling_prob=0.2, iterations=20), jaxacct.BandedToeplitz([1.0]), 0.9),
      'balls_in_bins': jaxacct.MatrixMechanism(
          jaxacct.BallsInBins(iterations=20, cycle_length=5),
          jaxacct.BandedToeplitz([1.0, 0.6, 0.3, 0.2, 0.1, 0.05]), 1.5),
      'cyclic_independent': jaxacct.MatrixMechanism(
          jaxacct.CyclicPoisson(sampling_prob=0.5, iterations=20, cycle_length=4),
          jaxacct.BandedToeplitz([1.0, 0.5]), 1.0),
      'cyclic_equal_split': jaxacct.MatrixMechanism(
          jaxacct.CyclicPoisson(sampling_prob=0.5, iterations=20, cycle_length=4,
                                partition='equal_split'),
          jaxacct.BandedToeplitz([1.0, 0.5]), 1.0),
      'truncated_bminsep': jaxacct.MatrixMechanism(
          jaxacct.BMinSep(sampling_prob=0.3, iterations=16, min_sep=3, truncated_batch_size=4,
                          dataset_size=12),
          jaxacct.BandedToeplitz([1.0, 0.4]), 1.0),
      'truncated_poisson': jaxacct.MatrixMechanism(
          jaxacct.Poisson(sampling_prob=0.3, iterations=16, truncated_batch_size=3,
                          dataset_size=10),
          jaxacct.BandedToeplitz([1.0]), 1.0),
      'multi_attribution': jaxacct.MatrixMechanism(
          jaxacct.MultiAttributionBMinSep(sampling_prob=0.2, iterations=20, min_sep=3,
                                          max_examples_per_user=2),
          jaxacct.BandedToeplitz([1.0, 0.5]), 1.2),
      'dense_bminsep': jaxacct.MatrixMechanism(
          jaxacct.BMinSep(sampling_prob=0.3, iterations=16, min_sep=4, warm_start=True),
          jaxacct.banded_inverse_square_root(16, 3), 1.3),
      'dense_poisson': jaxacct.MatrixMechanism(
          jaxacct.Poisson(sampling_prob=0.2, iterations=16),
          jaxacct.banded_inverse_square_root(16, 3), 1.3),
  }


def _hex(values) -> list[str]:
  return [float(v).hex() for v in np.asarray(values, np.float64).ravel()]


def loss_pins(names=None) -> dict:
  """The loss pins of the named mechanisms (all by default): six losses per direction."""
  pins = {}
  for name, mechanism in _mechanisms().items():
    if names is not None and name not in names:
      continue
    for direction in ('remove', 'add'):
      losses = jaxacct.sample_privacy_losses(jax.random.key(7), mechanism, 6, direction)
      pins[f'losses/{name}/{direction}'] = _hex(losses)
  return pins


# Two blocks per call: these runs need a few blocks each, and a call of the default size (~2²⁰
# outputs per device: 42 blocks at n = 24) would compute dozens. Blocks per call are performance
# only (every sample keeps its bits in any call of two blocks or more: the pins were computed
# with the default), and two blocks is the call ``sample_privacy_losses`` makes for the loss
# pins (6 samples), so the estimates reuse its compiled programs.
RUN = jaxacct.RunOptions(blocks_per_call=2)


def compute() -> dict:
  """Today's values: a few losses per mechanism and direction, δ̂, a σ sweep and a calibration."""
  pins = loss_pins()
  warm = _mechanisms()['bminsep_warm']
  losses32 = jaxacct.sample_privacy_losses(jax.random.key(7), warm, 6, 'remove',
                                           dtype=np.float32)
  pins['losses/bminsep_warm/remove/float32'] = _hex(losses32)
  estimate = jaxacct.estimate_delta(jax.random.key(11), warm, [0.5, 1.0, 2.0], 3000,
                                    histogram_edges=[0.0, 1.0, 2.0, 4.0], run=RUN)
  for direction in ('remove', 'add'):
    pins[f'estimate/delta_hat/{direction}'] = _hex(estimate.delta_hat[direction])
    pins[f'estimate/standard_error/{direction}'] = _hex(estimate.standard_error[direction])
  pins['estimate/histogram'] = estimate.state.histogram
  truncated = jaxacct.estimate_delta(jax.random.key(11), _mechanisms()['truncated_bminsep'],
                                     [0.5, 1.0], 2000, run=RUN)
  for direction in ('remove', 'add'):
    pins[f'estimate_truncated/delta_hat/{direction}'] = _hex(truncated.delta_hat[direction])
  sweep = candidates.estimate_delta_for_sigmas(jax.random.key(12), warm, [0.8, 1.0, 1.3],
                                               [0.5, 1.0], 2000, run=RUN)
  for direction in ('remove', 'add'):
    pins[f'sweep/delta_hat/{direction}'] = _hex(sweep.delta_hat[direction])
    pins[f'sweep/standard_error/{direction}'] = _hex(sweep.standard_error[direction])
  calibration = jaxacct.calibrate_noise_multiplier(warm.scheme, warm.matrix, epsilon=2.0,
                                                   delta=1e-2, key=jax.random.key(13),
                                                   monte_carlo=jaxacct.MonteCarloOptions(
                                                       num_candidates=4),
                                                   run=RUN)
  pins['calibration/noise_multiplier'] = _hex([calibration.guarantee.noise_multiplier])
  pins['calibration/delta'] = _hex([calibration.guarantee.delta])
  pins['calibration/candidates'] = _hex(calibration.candidates)
  pins['calibration/method'] = calibration.guarantee.method
  pins['calibration/accepted'] = list(calibration.record['verification']['accepted'])
  return pins


@pytest.fixture(scope='module')
def computed() -> dict:
  return compute()


@pytest.mark.slow
@pytest.mark.parametrize('name', sorted(json.loads(PINS.read_text())) if PINS.exists() else [])
def test_value_is_bitwise_unchanged(name, computed):
  _assert_pinned(computed, name, json.loads(PINS.read_text())[name])


def _assert_pinned(computed: dict, name: str, expected) -> None:
  if name in GUESS_DEPENDENT:
    got = [float.fromhex(v) for v in computed[name]]
    assert got == pytest.approx([float.fromhex(v) for v in expected], rel=1e-12), name
  else:
    assert computed[name] == expected, name


# Recomputes the pins in a fresh interpreter and counts the persistent-cache hits and the
# entries it could not read (JAX warns and recompiles).
_CACHED_RUN = """
import json, sys, warnings
from jax import monitoring
hits = []
monitoring.register_event_listener(
    lambda event, **kw: hits.append(1) if event == '/jax/compilation_cache/cache_hits' else None)
sys.path.insert(0, 'tests')
import test_pinned_values
with warnings.catch_warnings(record=True) as caught:
  warnings.simplefilter('always')
  pins = test_pinned_values.loss_pins(sys.argv[1:])
unreadable = sum('Error reading persistent compilation cache' in str(w.message) for w in caught)
print(json.dumps({'pins': pins, 'hits': len(hits), 'unreadable': unreadable}))
"""


# One mechanism per kernel family whose programs differ most: b-min-sep warm start (the linear
# recursion and its fallback), truncation (App. D), cyclic Poisson, multi-attribution.
_CACHE_CHECKED = ('bminsep_warm', 'truncated_bminsep', 'cyclic_equal_split', 'multi_attribution')


def _compute_elsewhere(cache: pathlib.Path) -> dict:
  from devices import run_on_devices
  return run_on_devices(_CACHED_RUN, 1, *_CACHE_CHECKED, env={
      'JAX_COMPILATION_CACHE_DIR': str(cache), 'JAX_ENABLE_COMPILATION_CACHE': 'true'})


@pytest.mark.slow
@pytest.mark.multiprocess
def test_a_cold_warm_or_corrupt_compilation_cache_gives_the_same_bits(tmp_path):
  """Issue 27: the pins do not depend on the persistent compilation cache the suite runs with.
  Fresh processes compute the loss pins of one mechanism per kernel family with an empty cache
  (compiling and writing every program), with that cache (reading it), and with that cache
  after every entry was corrupted (JAX cannot read them and recompiles); all three give the
  pins' bits."""
  cache = tmp_path / 'cache'
  cold = _compute_elsewhere(cache)
  warm = _compute_elsewhere(cache)
  # Corrupted in place: the cache key depends on the cache's path (XLA's own cache directories
  # are among the compile options), so a copy elsewhere would never be read.
  for index, entry in enumerate(sorted(p for p in cache.iterdir() if p.is_file())):
    data = bytearray(entry.read_bytes())
    if index % 2:
      del data[len(data) // 2:]  # truncated, as by a kill mid-write
    else:
      data[len(data) // 2] ^= 0xFF  # a flipped byte
    entry.write_bytes(bytes(data))
  corrupted = _compute_elsewhere(cache)
  # A cold run already hits where two of its jitted functions lower to the same program.
  assert warm['hits'] > cold['hits'] and cold['unreadable'] == warm['unreadable'] == 0, (
      cold['hits'], warm['hits'], cold['unreadable'], warm['unreadable'])
  # Every lookup that hit in the warm run finds a corrupt entry now, and none is used.
  assert corrupted['hits'] == 0 and corrupted['unreadable'] == warm['hits'], (
      corrupted['hits'], corrupted['unreadable'], warm['hits'])
  pins = json.loads(PINS.read_text())
  pinned = {name: pins[name] for mechanism in _CACHE_CHECKED for name in
            (f'losses/{mechanism}/remove', f'losses/{mechanism}/add')}
  for run in (cold, warm, corrupted):
    assert run['pins'].keys() == pinned.keys()
    for name, expected in pinned.items():
      _assert_pinned(run['pins'], name, expected)

if __name__ == '__main__':
  PINS.write_text(json.dumps(compute(), indent=1, sort_keys=True) + '\n')
  print(f'wrote {PINS}')
