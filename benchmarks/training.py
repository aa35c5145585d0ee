"""Hot paths of training: batch iterators at 10⁷ examples, the noise generator, the training step.

1. Batch iterators (host): steps/s at m = 10⁷ examples, expected batch 10⁴, for
   every scheme; jax_privacy's iterators (``batch_selection``) as the anchor
   where they exist (fewer steps: they may be O(m) per step).
2. Correlated noise C⁻¹Z (device): µs per step for d parameters and m bands,
   jaxacct's streaming recursion vs jax_privacy's ``matrix_factorization_privatizer``
   with ``toeplitz.inverse_as_streaming_matrix`` (same C).
3. The jitted DP-BandMF step on the digits MLP (batch shape 136): steps/s with the
   noise generator and without it (clip + masked sum + optax update only).
4. ``--accuracy``: the digits accuracy table at equal (ε, δ) for both methods.

Run: ``python benchmarks/training.py`` (``--quick`` for a smoke run).
"""

from __future__ import annotations

import argparse
import os
import pathlib
import sys
import time

sys.path.insert(0, os.path.dirname(os.path.dirname(os.path.abspath(__file__))))

import jax  # noqa: E402
import jax.numpy as jnp  # noqa: E402
import numpy as np  # noqa: E402
import optax  # noqa: E402

import jaxacct  # noqa: E402
from jaxacct.batching import batches  # noqa: E402
from jaxacct.training import noise as noise_lib  # noqa: E402
from jaxacct.training import step as step_lib  # noqa: E402

try:
  from jax_privacy import batch_selection as jp_batch_selection
  from jax_privacy import noise_addition as jp_noise
  from jax_privacy.matrix_factorization import toeplitz as jp_toeplitz
except ImportError:  # the anchor is optional
  jp_batch_selection = None


def _rate(iterable, steps: int) -> float:
  started = time.perf_counter()
  for i, _ in enumerate(iterable):
    if i + 1 == steps:
      break
  return steps / (time.perf_counter() - started)


def iterators(m: int, expected: int, steps: int, jp_steps: int) -> None:
  p0 = expected / m
  cases = [
      ('poisson', jaxacct.Poisson(sampling_prob=p0, iterations=steps),
       lambda: jp_batch_selection.CyclicPoissonSampling(sampling_prob=p0, iterations=jp_steps)),
      ('bminsep warm b=16', jaxacct.BMinSep.from_expected_batch_size(
          expected_batch_size=expected, dataset_size=m, iterations=steps, min_sep=16),
       lambda: jp_batch_selection.BMinSepSampling(
           sampling_prob=p0 / (1 - 15 * p0), iterations=jp_steps, min_sep=16)),
      ('balls-in-bins T=1000', jaxacct.BallsInBins(iterations=steps, cycle_length=m // expected),
       lambda: jp_batch_selection.BallsInBinsSampling(iterations=jp_steps,
                                                      cycle_length=m // expected)),
      ('cyclic poisson T=10 equal_split', jaxacct.CyclicPoisson(
          sampling_prob=10 * p0, iterations=steps, cycle_length=10, partition='equal_split'), None),
  ]
  print(f'\nbatch iterators, m = {m:,}, expected batch {expected:,} (steps/s; init included):')
  for name, scheme, jp in cases:
    started = time.perf_counter()
    it = iter(batches(scheme, m, 0, batch_size=expected + 8 * int(expected**0.5) + 8))
    next(it)
    init = time.perf_counter() - started
    ours = _rate(it, steps - 1)
    line = f'  {name:<34} jaxacct {ours:8.1f} steps/s (first batch incl. init {init:5.2f} s)'
    if jp is not None and jp_batch_selection is not None:
      theirs = _rate(jp().batch_iterator(m, rng=0), jp_steps)
      line += f'   jax_privacy {theirs:8.1f} steps/s   ratio {ours / theirs:6.1f}×'
    print(line, flush=True)


def _min_time(fn, *args, repeats: int = 20) -> float:
  jax.block_until_ready(fn(*args))
  best = float('inf')
  for _ in range(repeats):
    started = time.perf_counter()
    jax.block_until_ready(fn(*args))
    best = min(best, time.perf_counter() - started)
  return best


def noise(dims, bands_list) -> None:
  print('\ncorrelated noise C⁻¹Z, one step (µs; float32; min over repeats):')
  key = jax.random.key(0)
  for d in dims:
    params = {'w': jnp.zeros((d,), jnp.float32)}
    for bands in bands_list:
      c_col = jnp.asarray(jaxacct.square_root_coefficients(bands), jnp.float32)
      state = noise_lib.init_noise_state((bands, 1), params)

      @jax.jit
      def ours(state, t, c_col=c_col):
        z = noise_lib.standard_normal_like(noise_lib.step_key(key, t), params)
        return noise_lib.correlated_noise(c_col, jnp.ones(1, jnp.float32), state, z)

      mine = _min_time(ours, state, jnp.int32(3))
      line = f'  d = {d:>9,}  bands = {bands:>3}: jaxacct {mine * 1e6:9.1f}'
      if jp_batch_selection is not None:
        privatizer = jp_noise.matrix_factorization_privatizer(
            jp_toeplitz.inverse_as_streaming_matrix(c_col), stddev=1.0, prng_key=0)
        jp_state = privatizer.init(params)
        update = jax.jit(lambda g, s: privatizer.update(g, s))
        theirs = _min_time(update, params, jp_state)
        line += f'   jax_privacy {theirs * 1e6:9.1f}   ratio {theirs / mine:5.2f}×'
      print(line, flush=True)


def _digits_example():
  """examples/digits.py (the digits MLP and data), imported from the checkout."""
  sys.path.insert(0, str(pathlib.Path(__file__).resolve().parents[1] / 'examples'))
  import digits  # pylint: disable=import-outside-toplevel
  return digits


def train_step(repeats: int) -> None:
  digits = _digits_example()
  data = digits.load_digits()
  shape = 136
  x, y = data.x_train[:shape], data.y_train[:shape]
  mask = jnp.asarray(np.arange(shape) < 64)
  loss = digits.per_example_loss(64)
  params = digits.MLP(64).init(jax.random.key(0), x[:1])
  optimizer = optax.sgd(0.5, momentum=0.9)
  print('\ntraining step, digits MLP 64-64-10 (4,810 parameters), batch shape 136 (64 real):')
  for bands in (1, 8):
    c_col = jnp.asarray(jaxacct.square_root_coefficients(bands), jnp.float32)
    state = step_lib.init_state(params, optimizer, (bands, 1))
    noise = step_lib.NoiseArgs(training_key=jax.random.key(1), c_col=c_col,
                               inverse_band=jnp.ones(1, jnp.float32), noise_scale=jnp.float32(1.0),
                               clip_norm=jnp.float32(1.0), normalizer=jnp.float32(64.0))
    spec = step_lib.StepSpec(loss, optimizer)
    fn = lambda s: step_lib.train_step(s, x, y, mask, spec=spec, noise=noise)
    t = _min_time(fn, state, repeats=repeats)
    print(f'  with noise generator, {bands} band(s): {1 / t:9.1f} steps/s ({t * 1e3:.3f} ms)')

  @jax.jit
  def noiseless(params, opt_state):
    total = step_lib.clipped_gradient_sum(loss, params, x, y, mask, 1.0)
    grad = jax.tree_util.tree_map(lambda g: g / 64.0, total)
    updates, opt_state = optimizer.update(grad, opt_state, params)
    return optax.apply_updates(params, updates), opt_state

  t = _min_time(noiseless, params, optimizer.init(params), repeats=repeats)
  print(f'  without noise generator (clip + sum + update): {1 / t:9.1f} steps/s ({t * 1e3:.3f} ms)')


def accuracy_table(seeds: int) -> None:
  """Digits test accuracy at equal (ε, δ = 5e-4) for DP-SGD and DP-BandMF, mean ± s.d. over seeds."""
  digits = _digits_example()
  data = digits.load_digits()
  m = data.x_train.shape[0]
  print(f'\ndigits accuracy, 300 steps, delta 5e-4, {seeds} training seeds per cell:')
  for epsilon in (1.0, 2.0, 4.0, 8.0):
    for method in digits.METHODS:
      # A comparison across ε, not a release: an in-memory attempt ledger per point.
      mechanism, g = digits.calibrated_mechanism(
          method, epsilon=epsilon, delta=5e-4, dataset_size=m, iterations=300,
          ledger=jaxacct.montecarlo.evr.ledger.VerificationLedger())
      acc = [digits.train_digits(mechanism, g, data, seed=s)['accuracy'] for s in range(seeds)]
      print(f'  eps {epsilon:3.0f}  {method:7s} sigma {mechanism.noise_multiplier:.4f} '
            f'[{g.method}]  accuracy {np.mean(acc):.3f} ± {np.std(acc, ddof=1):.3f}', flush=True)
  acc = [digits.train_digits(mechanism, None, data, seed=s, noise=False)['accuracy']
         for s in range(seeds)]
  print(f'  no noise: accuracy {np.mean(acc):.3f} ± {np.std(acc, ddof=1):.3f}')


def main(argv=None) -> None:
  parser = argparse.ArgumentParser(description=__doc__.split('\n')[0])
  parser.add_argument('--quick', action='store_true')
  parser.add_argument('--accuracy', action='store_true',
                      help='only the digits accuracy table (DP-SGD vs DP-BandMF, ~5 min)')
  args = parser.parse_args(argv)
  if args.accuracy:
    accuracy_table(5)
    return
  print('devices:', jax.devices(), '| jax', jax.__version__, '| anchor jax_privacy:',
        'yes' if jp_batch_selection is not None else 'not installed')
  if args.quick:
    iterators(10**6, 10**3, 50, 5)
    noise([10**4], [8])
    train_step(5)
  else:
    iterators(10**7, 10**4, 300, 20)
    noise([4_810, 10**6], [8, 64])
    train_step(50)


if __name__ == '__main__':
  main()
