"""Individual accounting (Koskela et al. (2022)): time per example and training-step
overhead.

1. ``individual_epsilons`` for ``--examples`` × ``--steps`` clipped-norm ratios (default
   10,000 × 10,000; q = 0.005, σ = 2, δ = 1e-5, the App. D σ̃ grid of 100 points to 15σ):
   - ``pld``: jaxacct's σ-grid FFT products (both directions), split into bucketing and
     composition, against the anchor — dp_accounting's own chain (self-compose each bucket,
     compose across buckets, per example) — on ``--anchor-examples`` of the same examples, in
     the same run (the ratio printed is per example);
   - ``rdp``: bucket counts @ the per-bucket RDP table + the vectorised conversion (the table
     of 100 buckets × 236 orders is a fixed cost, printed apart).
   Ratios: each example has its own level u ~ U(0.05, 1) and per-step ratios u·e^{0.3 Z}
   clipped to 1 (a spread like Fig. 1's MNIST gradients).
2. Training-step overhead of recording norms on digits (the Flax MLP, float32): median step
   time of ``train_step`` without tracking, with full-batch GDP tracking + filter (reuses the
   step's norms; full batch of 1437), and under Poisson (expected batch 64) with a norm pass
   over 300 tracked examples and over all 1437.

Goals: ≤ 1 ms per example for the PLD route; ≤ 10 % step overhead for recording
norms where the step's own gradients are reused.

Usage:

  python benchmarks/individual.py [--examples 10000] [--steps 10000] [--anchor-examples 5]
                                  [--skip-accounting] [--skip-training]
"""

from __future__ import annotations

import argparse
import pathlib
import platform
import sys
import time

import jax
import jax.numpy as jnp
import numpy as np
import optax

Q, SIGMA, DELTA = 0.005, 2.0, 1e-5


def timed(function):
  start = time.perf_counter()
  value = function()
  return value, time.perf_counter() - start


def ratios(examples: int, steps: int, seed: int = 0) -> np.ndarray:
  rng = np.random.default_rng(seed)
  level = rng.uniform(0.05, 1.0, (examples, 1))
  return np.minimum(level * np.exp(0.3 * rng.standard_normal((examples, steps))), 1.0)


def anchor_epsilon(row_counts: np.ndarray, sigmas: np.ndarray) -> float:
  """dp_accounting's chain for one example's bucket counts (both directions, max)."""
  from dp_accounting.pld import privacy_loss_distribution
  composed = None
  for b in np.flatnonzero(row_counts):
    part = privacy_loss_distribution.from_gaussian_mechanism(
        float(sigmas[b]), sampling_prob=Q, value_discretization_interval=1e-4
    ).self_compose(int(row_counts[b]))
    composed = part if composed is None else composed.compose(part)
  return 0.0 if composed is None else float(composed.get_epsilon_for_delta(DELTA))


def accounting(examples: int, steps: int, anchor_examples: int) -> None:
  from jaxacct import individual
  from jaxacct.individual import epsilons as epsilons_lib
  data = ratios(examples, steps)
  print(f'individual_epsilons: {examples} examples × {steps} steps, q = {Q}, σ = {SIGMA}, '
        f'δ = {DELTA}, grid 100 to 15σ')
  grid = epsilons_lib.bucket_ratios(100, 15.0)
  counts, bucketing = timed(lambda: epsilons_lib.bucket_counts(data, grid))
  options = dict(sampling_prob=Q, noise_multiplier=SIGMA, delta=DELTA)
  epsilons_lib._rdp_table_cached.cache_clear()
  results = {}
  for method in ('pld', 'rdp'):
    if method == 'rdp':  # the fixed cost of the RDP table, apart
      _, table = timed(lambda: epsilons_lib._rdp_table_cached(Q, tuple((SIGMA / grid).tolist())))
      print(f'  rdp table (100 buckets × {epsilons_lib.ORDERS.size} orders): {table:.1f} s '
            '(fixed, cached per grid)')
    eps, total = timed(lambda: individual.individual_epsilons(data, method=method, **options))
    results[method] = eps, total
    print(f'  {method}: {total:.2f} s = {1e3 * total / examples:.3f} ms per example '
          f'(bucketing {bucketing:.2f} s of it); ε min {eps.min():.4f}, median '
          f'{np.median(eps):.4f}, max {eps.max():.4f}')
  pld, pld_total = results['pld']
  sigmas = SIGMA / grid
  chosen = np.linspace(0, examples - 1, anchor_examples).astype(int)
  reference, anchor = timed(lambda: np.array([anchor_epsilon(counts[i], sigmas)
                                               for i in chosen]))
  per_example = anchor / anchor_examples
  print(f'  anchor, dp_accounting chain per example: {per_example:.2f} s ({anchor_examples} '
        f'examples): jaxacct pld is {per_example / (pld_total / examples):.0f}× faster; '
        f'max |ε_jaxacct − ε_anchor| = {np.max(np.abs(pld[chosen] - reference)):.2e}, '
        f'jaxacct ≥ anchor: {bool(np.all(pld[chosen] >= reference - 1e-12))}')


def training() -> None:
  from jaxacct import individual
  from jaxacct.individual import tracking as tracking_lib
  from jaxacct.training import step as step_lib
  import jaxacct
  sys.path.insert(0, str(pathlib.Path(__file__).resolve().parents[1] / 'examples'))
  import digits  # examples/digits.py
  data = digits.load_digits()
  m = data.x_train.shape[0]
  loss = digits.per_example_loss(64)
  params = digits.MLP(64).init(jax.random.key(0), data.x_train[:1])
  optimizer = optax.sgd(0.5, momentum=0.9)
  print(f'training step on digits (m = {m}, MLP 64, float32): median of 40 interleaved steps')

  def stepper(scheme, accountant, batch):
    """A closure running one step of this configuration (compiled on its first call)."""
    mechanism = jaxacct.MatrixMechanism(scheme, jaxacct.BandedToeplitz([1.0]), 1.0)
    tracking = None if accountant is None else tracking_lib.bind(accountant, mechanism, m)
    state = [step_lib.init_state(params, optimizer, (1, 1),
                                 None if tracking is None else tracking.init())]
    noise = step_lib.NoiseArgs(training_key=jax.random.key(1), c_col=jnp.ones(1),
                               inverse_band=jnp.ones(1), noise_scale=jnp.float32(1.0),
                               clip_norm=jnp.float32(1.0), normalizer=jnp.float32(batch))
    spec = step_lib.StepSpec(loss, optimizer, None if tracking is None else tracking.spec)
    tracked_args = step_lib.TrackingArgs()
    if tracking is not None:
      tracked_args = step_lib.TrackingArgs(indices=jnp.arange(batch, dtype=jnp.int32) % m,
                                           **tracking.traced())
      if not tracking.full_batch:
        tracked_args = tracked_args._replace(tracked=(
            jnp.asarray(data.x_train[tracking.tracked]), jnp.asarray(data.y_train[tracking.tracked])))
    x = jnp.asarray(data.x_train[np.arange(batch) % m])
    y = jnp.asarray(data.y_train[np.arange(batch) % m])
    mask = jnp.ones(batch, bool)

    def run():
      start = time.perf_counter()
      state[0] = step_lib.train_step(state[0], x, y, mask, spec=spec, noise=noise,
                                     tracking=tracked_args)
      jax.block_until_ready(state[0].params)
      return time.perf_counter() - start

    return run

  full = jaxacct.Poisson(sampling_prob=1.0, iterations=1000)
  poisson = jaxacct.Poisson(sampling_prob=64 / m, iterations=1000)
  rows = [
      ('full batch, no tracking', full, None, m),
      ('full batch, GDP filter (reused norms)', full,
       individual.IndividualAccountant(delta=1e-5, filter_budget=100.0), m),
      ('Poisson 64, no tracking', poisson, None, 136),
      ('Poisson 64, norm pass over 300 tracked', poisson,
       individual.IndividualAccountant(delta=1e-5, tracked=tuple(range(300))), 136),
      ('Poisson 64, norm pass over all 1437', poisson,
       individual.IndividualAccountant(delta=1e-5), 136),
  ]
  runs = [stepper(scheme, accountant, batch) for _, scheme, accountant, batch in rows]
  for run in runs:  # compile and warm up
    for _ in range(3):
      run()
  times = np.array([[run() for run in runs] for _ in range(40)])  # interleaved repetitions
  medians = np.median(times, axis=0)
  baseline = {}
  for (name, *_), seconds in zip(rows, medians):
    key = name.split(',')[0]
    baseline.setdefault(key, seconds)
    print(f'  {name:42s} {1e3 * seconds:8.2f} ms/step  ({seconds / baseline[key]:.2f}× '
          f'the untracked step)')


def main() -> None:
  parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
  parser.add_argument('--examples', type=int, default=10_000)
  parser.add_argument('--steps', type=int, default=10_000)
  parser.add_argument('--anchor-examples', type=int, default=5)
  parser.add_argument('--skip-accounting', action='store_true')
  parser.add_argument('--skip-training', action='store_true')
  args = parser.parse_args()
  print(f'machine: {platform.processor() or platform.machine()}, {jax.local_device_count()} '
        f'{jax.default_backend()} device(s), numpy {np.__version__}, jax {jax.__version__}')
  if not args.skip_accounting:
    accounting(args.examples, args.steps, args.anchor_examples)
  if not args.skip_training:
    training()


if __name__ == '__main__':
  main()
