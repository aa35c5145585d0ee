"""Worked example: jax_privacy's BandMF execution plan with jaxacct's σ against jax_privacy's σ.

A jax_privacy 2.0 user has a ``BandMFExecutionPlanConfig``: truncated cyclic Poisson BandMF
(``bands`` = 4 Toeplitz bands from ``optimize_banded_toeplitz``, equal-split groups, expected batch
64, at most ``truncated_batch_size`` = 72 examples per step) on scikit-learn's digits (m = 1437
training images), at (ε, δ) = (2, 5·10⁻⁴), 300 steps. This script trains the same Flax MLP
(``examples/digits.py``) with three ``DPExecutionPlan``s, all at that (ε, δ):

1. ``config.plan``: jax_privacy's own σ (dp_accounting's PLD accountant on jax_privacy's
   ``truncated_amplified_bandmf_event``);
2. ``jaxacct.interop.jax_privacy.calibrated_plan(batch_selection_strategy=config.plan.
   batch_selection_strategy, strategy=config, ...)``: the same sampler, C, clipping and noise
   construction, σ from jaxacct's ``pld`` accountant for truncated cyclic Poisson (Ganesh (2025),
   zero-out adjacency, the dataset size public as in jax_privacy's own analysis);
3. the same config with ``BMinSepSampling`` (min_sep = bands, the same expected batch size and
   truncation), σ by jaxacct's verified Monte Carlo (Dong & Ganesh (2026) App. A, App. D):
   jax_privacy samples b-min-sep batches but has no accountant for them.

One training loop serves every plan, written only with the plan's components as jax_privacy's
``DPExecutionPlan`` docstring prescribes: ``batch_selection_strategy.batch_iterator``,
``batch_selection.split_and_pad_global_batch`` into fixed-size minibatches (one compiled program
for every step and batch size) with ``is_padding_example`` given to ``clipped_grad``, the sum over
minibatches, ``noise_addition_transform``, then post-processing (division by the public expected
batch size, SGD with momentum and a cosine-decayed learning rate: with digits.py's constant 0.5 the
noise at these σ undoes the early progress; 0.1 with decay was the best of a handful of settings
tried on this split, the same for every plan). The table gives σ, its accountant, test accuracy
(mean ± s.d. over training seeds) and the calibration and training wall times.

σ is printed in jaxacct's units: the mechanism y = C·x + σ·z with per-example contributions of
norm ≤ 1 and C = ``config.strategy`` as given, i.e. the plan's noise stddev divided by the clipped
sum's sensitivity Δ. jax_privacy's ``noise_multiplier`` σ_jp is relative to ‖strategy‖₂ (the
plan adds C⁻¹Z with stddev σ_jp·Δ·‖strategy‖₂), so jax_privacy's σ here is σ_jp·‖strategy‖₂
(``jaxacct/interop/jax_privacy.py``, "Noise scale"); ``optimize_banded_toeplitz`` returns a
unit-norm band, so the two scales coincide numerically in this example.

Both accountants discretise the privacy-loss distribution on the same pessimistic grid,
``pld_grid`` = 10⁻³ (dp_accounting's and jaxacct's default is 10⁻⁴: ~7–10× slower here, and σ
changes by less than 0.01 %). ``calibrated_plan(..., plan=PlanOptions(compare=True))`` would
also put jax_privacy's σ in ``.comparison``, but always with dp_accounting's default
``PLDAccountant`` (grid 10⁻⁴), not the config's accountant; to time each accountant on its own, this script
calibrates jax_privacy's plan itself (``config.plan``) and reads σ_jp off its ``dp_event``.

Every plan is calibrated once (the Monte Carlo σ is verified once). A training seed changes the
batches, the initial parameters and the privatizer's key; the privatizer of another seed is
rebuilt with jax_privacy's ``matrix_factorization_privatizer`` from the plan's C⁻¹ and noise
stddev (``reseeded``; checked against the plan's own privatizer at its own seed). The same
training seeds serve every plan, so the plans see the same standard normal draws Z.

Run from the repository root (needs ``pip install -e '.[train,jaxprivacy]'``)::

    .venv/bin/python examples/jax_privacy_plan.py [--fast]

``--fast`` (or ``JAXACCT_FAST=1``): 60 steps, δ = 10⁻², one training seed and no b-min-sep row
(the same code path otherwise).
The notebook ``notebooks/jax_privacy_plan.ipynb`` runs it and draws the figure.

References:
  Christopher A. Choquette-Choo, Arun Ganesh, Ryan McKenna, H. Brendan McMahan, Keith Rush,
  Abhradeep Thakurta and Zheng Xu, "(Amplified) banded matrix factorization: a unified approach
  to private training", NeurIPS 2023, arXiv 2306.08153 (BandMF, cyclic Poisson sampling, Alg. 9
  streams C⁻¹Z) (docs/references.md).
  Arun Ganesh, "Tighter Privacy Analysis for Truncated Poisson Sampling", arXiv:2508.15089:
  Def. 2.1 (zero-out adjacency), §3.1 (truncated cyclic Poisson) (docs/references.md).
  Andy Dong and Arun Ganesh, "Privacy Amplification for BandMF via b-Min-Sep Subsampling",
  arXiv:2602.09338 (v2): §4 (b-min-sep, Algorithm 2), App. A (Estimate-Verify-Release), App. D
  (truncation) (docs/references.md).
  jax_privacy 2.0.0 (google-deepmind/jax_privacy): ``experimental.execution_plan``
  (``DPExecutionPlan``, ``BandMFExecutionPlanConfig``), ``batch_selection``, ``clipping``,
  ``noise_addition``.
"""

from __future__ import annotations

import argparse
import dataclasses
import functools
import os
import time
from typing import Any

import dp_accounting
import jax
import jax.numpy as jnp
import numpy as np
import optax
from jax_privacy import batch_selection, noise_addition
from jax_privacy.experimental import execution_plan
from jax_privacy.matrix_factorization import toeplitz

from jaxacct.interop import jax_privacy as jaxacct_jp

import digits  # examples/digits.py: the data and the Flax MLP (this folder is on sys.path)

# jax_privacy's default neighbouring relation for BandMF; jaxacct's "zero_out" is the same unit.
RELATION = dp_accounting.NeighboringRelation.REPLACE_SPECIAL
# The privatizer seed the calibrated plans are built with (training runs reseed, see reseeded).
PLAN_NOISE_SEED = 0


@dataclasses.dataclass(frozen=True)
class Settings:
  """What the comparison runs (``FULL`` and ``FAST`` below).

  Attributes:
    epsilon, delta: the target every plan is calibrated to.
    iterations: training steps n (a multiple of ``bands``).
    bands: Toeplitz bands of C, the cycle length of cyclic Poisson and b-min-sep's min_sep.
    expected_batch_size: before truncation, the same for every sampler; also the public divisor
      of the noisy gradient sum.
    truncated_batch_size: B, the largest batch (jax_privacy keeps a uniform subset of B).
    minibatch_size: the fixed shape of the compiled clipped-gradient program.
    seeds: training seeds (batches, initial parameters, the privatizer's key).
    learning_rate, momentum: SGD with momentum on the noisy mean gradient, the learning rate
      decayed to 0 over the run by a cosine schedule.
    hidden: width of the MLP's hidden layer.
    pld_grid: value_discretization_interval of both PLD accountants.
    eval_every: steps between test-accuracy readings (and the last step).
    bminsep: also train the b-min-sep plan (its Monte Carlo calibration dominates the run).
    calibration_seed: the Monte Carlo calibration's key.
  """

  epsilon: float = 2.0
  delta: float = 5e-4
  iterations: int = 300
  bands: int = 4
  expected_batch_size: float = 64.0
  truncated_batch_size: int = 72
  minibatch_size: int = 36
  seeds: tuple[int, ...] = (0, 1, 2, 3, 4)
  learning_rate: float = 0.1
  momentum: float = 0.9
  hidden: int = 64
  pld_grid: float = 1e-3
  eval_every: int = 10
  bminsep: bool = True
  calibration_seed: int = 0


FULL = Settings()
# CI's quick run: the same code path, few steps, one seed, a large δ, and no b-min-sep row (its
# Monte Carlo calibration spends ~20 s compiling, whatever the steps and δ).
FAST = Settings(delta=1e-2, iterations=60, seeds=(0,), eval_every=5, bminsep=False)


def fast_mode() -> bool:
  """True with ``JAXACCT_FAST=1`` in the environment (as the notebooks' CI run sets it)."""
  return os.environ.get('JAXACCT_FAST') == '1'


# -------------------------------------------------------------------------- the plans
@dataclasses.dataclass(frozen=True)
class CalibratedRun:
  """One plan, calibrated at (ε, δ), ready to train.

  Attributes:
    name: a short label.
    plan: the ``DPExecutionPlan``.
    sigma: σ in jaxacct's units (the plan's noise stddev / Δ, C = config.strategy as given).
    accountant: what calibrated σ.
    calibration_seconds: wall time of the calibration (building the plan).
    noise_stddev: the privatizer's stddev, σ·Δ.
    noising_matrix: the privatizer's C⁻¹ (a jax_privacy ``StreamingMatrix``).
    dtype: the privatizer's noise dtype (the config's).
    expected_batch_size: the public divisor of the noisy sum.
  """

  name: str
  plan: Any
  sigma: float
  accountant: str
  calibration_seconds: float
  noise_stddev: float
  noising_matrix: Any
  dtype: Any
  expected_batch_size: float


def user_config(settings: Settings, dataset_size: int
                ) -> execution_plan.BandMFExecutionPlanConfig:
  """The jax_privacy user's own configuration: truncated cyclic Poisson BandMF.

  ``EQUAL_SPLIT`` groups of ⌊m/bands⌋ examples, each sampled with probability
  expected_batch_size / ⌊m/bands⌋ in its rounds; the strategy is jax_privacy's
  ``optimize_banded_toeplitz`` (``BandMFExecutionPlanConfig.default``); the accountant
  dp_accounting's PLD with the zero-out relation (jax_privacy's default) on ``pld_grid``.
  """
  group = dataset_size // settings.bands
  return execution_plan.BandMFExecutionPlanConfig.default(
      num_bands=settings.bands, iterations=settings.iterations, epsilon=settings.epsilon,
      delta=settings.delta, sampling_prob=settings.expected_batch_size / group,
      truncated_batch_size=settings.truncated_batch_size, num_examples=dataset_size,
      partition_type=batch_selection.PartitionType.EQUAL_SPLIT,
      accountant=dp_accounting.pld.PLDAccountant(
          RELATION, value_discretization_interval=settings.pld_grid),
      noise_seed=PLAN_NOISE_SEED)


def _event_noise_multiplier(event) -> float:
  """The Gaussian noise multiplier inside a jax_privacy BandMF ``dp_event`` (σ_jp)."""
  while not hasattr(event, 'noise_multiplier'):
    event = event.event  # SelfComposedDpEvent / PoissonSampledDpEvent wrap one event
  return float(event.noise_multiplier)


def jax_privacy_run(config: execution_plan.BandMFExecutionPlanConfig, pld_grid: float
                    ) -> CalibratedRun:
  """``config.plan``, timed: jax_privacy's own calibration (``pld_grid``: its accountant's grid,
  for the label)."""
  started = time.perf_counter()
  plan = config.plan  # calibrates σ_jp on first access (a cached property)
  seconds = time.perf_counter() - started
  norm = float(np.linalg.norm(config.strategy))
  sigma = _event_noise_multiplier(plan.dp_event) * norm  # jaxacct's units
  sensitivity = float(plan.clipped_grad(lambda: None).sensitivity(RELATION))
  return CalibratedRun(
      name='jax_privacy σ', plan=plan, sigma=sigma,
      accountant=f'dp_accounting PLD (grid {pld_grid:g})'
                 ' on truncated_amplified_bandmf_event',
      calibration_seconds=seconds, noise_stddev=sigma * sensitivity,
      noising_matrix=toeplitz.inverse_as_streaming_matrix(config.strategy), dtype=config.dtype,
      expected_batch_size=config.sampling_prob * (config.num_examples // len(config.strategy)))


def jaxacct_run(name: str, config: execution_plan.BandMFExecutionPlanConfig, sampler, *,
                settings: Settings, dataset_size: int, expected_batch_size: float
                ) -> CalibratedRun:
  """``calibrated_plan`` for ``config``'s C and clipping with ``sampler``, timed.

  jaxacct chooses the accountant (``accountant="auto"``): its PLD for truncated cyclic Poisson,
  verified Monte Carlo for b-min-sep (key ``settings.calibration_seed``).
  """
  options = ({} if isinstance(sampler, batch_selection.BMinSepSampling)
             else {'value_discretization_interval': settings.pld_grid})
  started = time.perf_counter()
  result = jaxacct_jp.calibrated_plan(
      batch_selection_strategy=sampler, strategy=config, epsilon=settings.epsilon,
      delta=settings.delta, dataset_size=dataset_size,
      key=jax.random.key(settings.calibration_seed),
      plan=jaxacct_jp.PlanOptions(compare=False), accountant_options=options)
  seconds = time.perf_counter() - started
  g = result.guarantee
  if g.num_samples:
    accountant = f'jaxacct verified Monte Carlo ({g.num_samples:,} samples/direction)'
  else:
    accountant = f'jaxacct {g.accountant} (grid {settings.pld_grid:g})'
  return CalibratedRun(
      name=name, plan=result.plan, sigma=float(g.noise_multiplier), accountant=accountant,
      calibration_seconds=seconds, noise_stddev=result.noise_stddev,
      noising_matrix=toeplitz.inverse_as_streaming_matrix(config.strategy), dtype=config.dtype,
      expected_batch_size=expected_batch_size)


def bminsep_sampler(settings: Settings, dataset_size: int) -> batch_selection.BMinSepSampling:
  """Warm-start b-min-sep with min_sep = bands and the same expected batch size and truncation.

  The expected batch is m·p/(1 + (b − 1)p) (Dong & Ganesh (2026) §4), so p = p₀/(1 − (b − 1)p₀)
  with p₀ = expected_batch_size / m.
  """
  rate = settings.expected_batch_size / dataset_size
  return batch_selection.BMinSepSampling(
      sampling_prob=rate / (1.0 - (settings.bands - 1) * rate), iterations=settings.iterations,
      min_sep=settings.bands, warm_start=True,
      truncated_batch_size=settings.truncated_batch_size)


def reseeded(run: CalibratedRun, noise_key: jax.Array):
  """``run.plan`` with its privatizer keyed by ``noise_key`` (same C⁻¹, stddev and dtype).

  The plan's privatizer holds a fixed key; a training seed needs its own. Rebuilt the way both
  ``BandMFExecutionPlanConfig.plan`` and ``calibrated_plan`` build it, so σ stays the
  calibrated (for Monte Carlo: verified once) value.
  """
  privatizer = noise_addition.matrix_factorization_privatizer(
      run.noising_matrix, stddev=run.noise_stddev, prng_key=noise_key, dtype=run.dtype)
  return dataclasses.replace(run.plan, noise_addition_transform=privatizer)


def check_reseeded(run: CalibratedRun, plan_noise_seed: int = PLAN_NOISE_SEED, steps: int = 6
                   ) -> None:
  """``reseeded`` at the plan's own seed adds the plan's own noise (to float32 rounding)."""
  zero = jnp.zeros((16,), jnp.float32)
  own, again = run.plan.noise_addition_transform, reseeded(
      run, jax.random.key(plan_noise_seed)).noise_addition_transform
  own_state, again_state = own.init(zero), again.init(zero)
  for _ in range(steps):
    a, own_state = own.update(zero, own_state)
    b, again_state = again.update(zero, again_state)
    np.testing.assert_allclose(np.asarray(a), np.asarray(b), rtol=1e-6,
                               atol=1e-6 * run.noise_stddev)


# -------------------------------------------------------------------------- training
@functools.lru_cache(maxsize=None)
def _evaluate(hidden: int):
  model = digits.MLP(hidden)

  @jax.jit
  def accuracy(params, x, y):
    return jnp.mean(jnp.argmax(model.apply(params, x), axis=-1) == y)

  return accuracy


@functools.lru_cache(maxsize=None)
def _accumulate(clipped_grad, hidden: int):
  """acc + the clipped gradient sum of one fixed-size minibatch (compiled once per plan)."""
  grad_fn = clipped_grad(digits.per_example_loss(hidden), batch_argnums=(1, 2),
                         keep_batch_dim=False)

  @jax.jit
  def accumulate(total, params, x, y, is_padding):
    grads = grad_fn(params, x, y, is_padding_example=is_padding)
    return jax.tree.map(jnp.add, total, grads)

  return accumulate


def train(plan, data: digits.DigitsData, *, settings: Settings, seed: int,
          expected_batch_size: float) -> dict:
  """Trains the digits MLP with ``plan``'s components; returns accuracy and history.

  Batches from ``plan.batch_selection_strategy.batch_iterator(m, rng)`` (generator seeded by
  ``[seed, 1]``), split into ``minibatch_size`` pieces padded with −1; a padding slot holds a
  zero example (not derived from real data) and is flagged by ``is_padding_example``, so
  ``clipped_grad`` zeroes it. The summed clipped gradient goes through
  ``plan.noise_addition_transform`` untouched; only its noisy output is post-processed.
  """
  m = data.x_train.shape[0]
  params = digits.MLP(settings.hidden).init(jax.random.fold_in(jax.random.key(seed), 0),
                                            data.x_train[:1])
  schedule = optax.cosine_decay_schedule(settings.learning_rate, settings.iterations)
  optimizer = optax.sgd(schedule, momentum=settings.momentum)
  opt_state = optimizer.init(params)
  privatizer = plan.noise_addition_transform
  noise_state = privatizer.init(params)
  accumulate = _accumulate(plan.clipped_grad, settings.hidden)
  evaluate = _evaluate(settings.hidden)

  @jax.jit
  def apply(params, opt_state, noise_state, clipped_sum):
    noisy_sum, noise_state = privatizer.update(clipped_sum, noise_state)
    mean = jax.tree.map(lambda g: g / expected_batch_size, noisy_sum)  # post-processing
    updates, opt_state = optimizer.update(mean, opt_state, params)
    return optax.apply_updates(params, updates), opt_state, noise_state

  zeros = jax.tree.map(jnp.zeros_like, params)
  x_test, y_test = jnp.asarray(data.x_test), jnp.asarray(data.y_test)
  history_steps, history_accuracy = [], []
  rng = np.random.default_rng([seed, 1])
  step = 0
  for step, indices in enumerate(plan.batch_selection_strategy.batch_iterator(m, rng=rng), 1):
    clipped_sum = zeros
    for minibatch in batch_selection.split_and_pad_global_batch(indices, settings.minibatch_size):
      is_padding = minibatch < 0
      safe = np.where(is_padding, 0, minibatch)
      x = np.where(is_padding[:, None], 0.0, data.x_train[safe]).astype(np.float32)
      y = np.where(is_padding, 0, data.y_train[safe]).astype(np.int32)
      clipped_sum = accumulate(clipped_sum, params, x, y, is_padding)
    params, opt_state, noise_state = apply(params, opt_state, noise_state, clipped_sum)
    del indices, clipped_sum  # sensitive: only the noisy sum left this step
    if step % settings.eval_every == 0 or step == settings.iterations:
      history_steps.append(step)
      history_accuracy.append(float(evaluate(params, x_test, y_test)))
  if step != settings.iterations:
    raise RuntimeError(f'the batch iterator gave {step} batches, expected {settings.iterations}')
  return {'accuracy': history_accuracy[-1], 'history_steps': history_steps,
          'history_accuracy': history_accuracy}


# -------------------------------------------------------------------------- the comparison
@dataclasses.dataclass(frozen=True)
class PlanResult:
  """One plan's row of the table.

  Attributes:
    name, sampler, accountant: what was trained and what calibrated σ.
    sigma: σ in jaxacct's units. ratio: σ / jax_privacy's σ for the same (ε, δ).
    calibration_seconds: building (calibrating) the plan once.
    accuracies: final test accuracy per training seed.
    train_seconds: wall time per training run (each seed; the first includes compiling).
    history_steps, history_accuracy: test accuracy after those steps, one row per seed.
  """

  name: str
  sampler: str
  accountant: str
  sigma: float
  ratio: float
  calibration_seconds: float
  accuracies: tuple[float, ...]
  train_seconds: tuple[float, ...]
  history_steps: tuple[int, ...]
  history_accuracy: tuple[tuple[float, ...], ...]

  @property
  def accuracy_mean(self) -> float:
    return float(np.mean(self.accuracies))

  @property
  def accuracy_std(self) -> float:
    """Sample s.d. over seeds (0 with one seed)."""
    return float(np.std(self.accuracies, ddof=1)) if len(self.accuracies) > 1 else 0.0


@dataclasses.dataclass(frozen=True)
class Comparison:
  """The plans' rows with the settings and data sizes they ran with."""

  settings: Settings
  dataset_size: int
  test_size: int
  strategy: tuple[float, ...]
  rows: tuple[PlanResult, ...]

  def table(self) -> str:
    """The comparison as a plain-text table."""
    s = self.settings
    head = (f'digits (m = {self.dataset_size}, {self.test_size} test), {s.iterations} steps, '
            f'{s.bands}-band C = [{", ".join(f"{c:.3f}" for c in self.strategy)}] '
            f'(‖C e₁‖ = {np.linalg.norm(self.strategy):.4f}), expected batch '
            f'{s.expected_batch_size:g}, truncated to B = {s.truncated_batch_size}, '
            f'(ε, δ) = ({s.epsilon:g}, {s.delta:g}), {len(s.seeds)} training seed(s)\n'
            'σ in jaxacct units (noise stddev / sensitivity; jax_privacy: noise_multiplier × '
            '‖strategy‖₂)\n')
    lines = [f'{"plan":16s} {"sampler":26s} {"σ":>8s} {"σ/σ_jp":>7s} {"accuracy":>14s} '
             f'{"calib s":>8s} {"train s/run":>11s}  accountant']
    for r in self.rows:
      accuracy = (f'{r.accuracy_mean:.3f} ± {r.accuracy_std:.3f}' if len(r.accuracies) > 1
                  else f'{r.accuracy_mean:.3f}')
      lines.append(f'{r.name:16s} {r.sampler:26s} {r.sigma:8.4f} {r.ratio:7.3f} {accuracy:>14s} '
                   f'{r.calibration_seconds:8.1f} {np.mean(r.train_seconds):11.1f}  '
                   f'{r.accountant}')
    return head + '\n'.join(lines)


def calibrate(settings: Settings, dataset_size: int
              ) -> tuple[execution_plan.BandMFExecutionPlanConfig, list[CalibratedRun]]:
  """The user's config and the comparison's plans, each calibrated once at (ε, δ) and timed."""
  config = user_config(settings, dataset_size)
  runs = [jax_privacy_run(config, settings.pld_grid)]
  cyclic = runs[0].plan.batch_selection_strategy  # the user's sampler, as jax_privacy built it
  runs += [jaxacct_run('jaxacct σ', config, cyclic, settings=settings, dataset_size=dataset_size,
                       expected_batch_size=settings.expected_batch_size)]
  if settings.bminsep:
    runs.append(jaxacct_run('b-min-sep', config, bminsep_sampler(settings, dataset_size),
                            settings=settings, dataset_size=dataset_size,
                            expected_batch_size=settings.expected_batch_size))
  for run_ in runs:
    check_reseeded(run_)
  return config, runs


def _sampler_label(plan) -> str:
  sampler = plan.batch_selection_strategy
  if isinstance(sampler, batch_selection.BMinSepSampling):
    return f'b-min-sep b={sampler.min_sep} p={sampler.sampling_prob:.4f}'
  return f'cyclic Poisson T={sampler.cycle_length} p={sampler.sampling_prob:.4f}'


def run(settings: Settings = FULL, data: digits.DigitsData | None = None,
        progress=print) -> Comparison:
  """Calibrates every plan once, trains each with every seed, and returns the rows.

  ``progress`` gets one line per calibration and training run (``None``: silent).
  """
  data = digits.load_digits() if data is None else data
  m = data.x_train.shape[0]
  say = progress or (lambda line: None)
  config, runs = calibrate(settings, m)
  reference = runs[0].sigma
  for r in runs:
    say(f'calibrated {r.name}: σ = {r.sigma:.4f} by {r.accountant} '
        f'[{r.calibration_seconds:.1f} s]')
  rows = []
  for r in runs:
    accuracies, seconds, histories = [], [], []
    for seed in settings.seeds:
      started = time.perf_counter()
      plan = reseeded(r, jax.random.fold_in(jax.random.key(seed), 2))
      out = train(plan, data, settings=settings, seed=seed,
                  expected_batch_size=r.expected_batch_size)
      seconds.append(time.perf_counter() - started)
      accuracies.append(out['accuracy'])
      histories.append(tuple(out['history_accuracy']))
      say(f'trained {r.name} seed {seed}: test accuracy {out["accuracy"]:.3f} '
          f'[{seconds[-1]:.1f} s]')
    rows.append(PlanResult(
        name=r.name, sampler=_sampler_label(r.plan), accountant=r.accountant, sigma=r.sigma,
        ratio=r.sigma / reference, calibration_seconds=r.calibration_seconds,
        accuracies=tuple(accuracies), train_seconds=tuple(seconds),
        history_steps=tuple(out['history_steps']), history_accuracy=tuple(histories)))
  strategy = tuple(float(c) for c in np.asarray(config.strategy))
  return Comparison(settings=settings, dataset_size=m, test_size=data.x_test.shape[0],
                    strategy=strategy, rows=tuple(rows))


def sigma_by_truncation(settings: Settings, dataset_size: int, sizes) -> list[dict]:
  """σ of jax_privacy and of jaxacct for the user's config at each truncated batch size B.

  Calibration only (no training): where truncation binds (B near the expected batch), the two
  analyses of the truncated rounds differ most.
  """
  rows = []
  for size in sizes:
    config = user_config(dataclasses.replace(settings, truncated_batch_size=int(size)),
                         dataset_size)
    theirs = jax_privacy_run(config, settings.pld_grid)
    ours = jaxacct_run('jaxacct σ', config, theirs.plan.batch_selection_strategy,
                       settings=settings, dataset_size=dataset_size,
                       expected_batch_size=settings.expected_batch_size)
    rows.append({'truncated_batch_size': int(size), 'jax_privacy_sigma': theirs.sigma,
                 'jaxacct_sigma': ours.sigma, 'ratio': ours.sigma / theirs.sigma,
                 'jax_privacy_seconds': theirs.calibration_seconds,
                 'jaxacct_seconds': ours.calibration_seconds})
  return rows


def plot(comparison: Comparison, truncation: list[dict] | None = None):
  """The figure: test accuracy per step (mean ± s.d. over seeds), final test accuracy against σ
  (each seed's runs joined: the plans share its batches' seed and noise draws) and, given
  ``truncation`` (``sigma_by_truncation``), σ against B."""
  import matplotlib.pyplot as plt  # local: only the figure needs it

  panels = 3 if truncation else 2
  fig, axes = plt.subplots(1, panels, figsize=(4.6 * panels, 3.9), squeeze=False)
  s = comparison.settings
  ax = axes[0, 0]
  colors = {}
  for row in comparison.rows:
    curves = np.asarray(row.history_accuracy)
    mean = curves.mean(axis=0)
    line, = ax.plot(row.history_steps, mean, label=f'{row.name} (σ = {row.sigma:.2f})')
    colors[row.name] = line.get_color()
    if curves.shape[0] > 1:
      spread = curves.std(axis=0, ddof=1)
      ax.fill_between(row.history_steps, mean - spread, mean + spread, color=line.get_color(),
                      alpha=0.2, linewidth=0)
  ax.set_xlabel('step')
  ax.set_ylabel('test accuracy')
  ax.set_title(f'digits MLP, (ε, δ) = ({s.epsilon:g}, {s.delta:g}), B = {s.truncated_batch_size}')
  ax.legend(loc='lower right')
  ax.grid(alpha=0.3)

  ax = axes[0, 1]
  rows = sorted(comparison.rows, key=lambda row: row.sigma)
  sigmas = [row.sigma for row in rows]
  for i in range(len(s.seeds)):
    ax.plot(sigmas, [row.accuracies[i] for row in rows], color='grey', alpha=0.5, linewidth=0.8,
            marker='.', label='one training seed' if i == 0 else None)
  for row in rows:
    ax.errorbar(row.sigma, row.accuracy_mean, yerr=row.accuracy_std, color=colors[row.name],
                marker='o', markersize=7, capsize=4, label=f'{row.name}: mean ± s.d.')
  ax.set_xlabel('σ at equal (ε, δ)')
  ax.set_ylabel(f'test accuracy after {s.iterations} steps')
  ax.set_title('final accuracy against σ')
  ax.margins(x=0.15)
  ax.legend(fontsize='small')
  ax.grid(alpha=0.3)

  if truncation:
    ax = axes[0, 2]
    sizes = [r['truncated_batch_size'] for r in truncation]
    ax.plot(sizes, [r['jax_privacy_sigma'] for r in truncation], marker='o',
            color=colors.get('jax_privacy σ'), label='jax_privacy (dp_accounting PLD)')
    ax.plot(sizes, [r['jaxacct_sigma'] for r in truncation], marker='s',
            color=colors.get('jaxacct σ'), label='jaxacct (pld, Ganesh 2025)')
    ax.axvline(s.expected_batch_size, color='grey', linestyle=':', label='expected batch')
    ax.set_xlabel('truncated batch size B')
    ax.set_ylabel('σ at equal (ε, δ)')
    ax.set_title('cyclic Poisson BandMF: σ against B')
    ax.legend(fontsize='small')
    ax.grid(alpha=0.3)
  fig.tight_layout()
  return fig


def main(argv: list[str] | None = None) -> Comparison:
  """The command line: runs the comparison (``FAST`` with ``--fast`` or ``JAXACCT_FAST=1``, else
  ``FULL``), prints the table and returns it."""
  parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
  parser.add_argument('--fast', action='store_true',
                      help='60 steps, delta 1e-2, one seed, no b-min-sep (also JAXACCT_FAST=1)')
  args = parser.parse_args(argv)
  settings = FAST if (args.fast or fast_mode()) else FULL
  started = time.perf_counter()
  comparison = run(settings)
  print(comparison.table())
  print(f'total {time.perf_counter() - started:.0f} s')
  return comparison


__all__ = ['FAST', 'FULL', 'CalibratedRun', 'Comparison', 'PlanResult', 'Settings',
           'bminsep_sampler', 'calibrate', 'check_reseeded', 'fast_mode', 'jax_privacy_run',
           'jaxacct_run', 'plot', 'reseeded', 'run', 'sigma_by_truncation', 'train',
           'user_config']

if __name__ == '__main__':
  main()
