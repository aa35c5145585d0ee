"""``jaxacct train CONFIG``: calibrate σ as ``calibrate`` does, then train the config's
training task (``training.task``; ``examples/digits.py``) on batches of the scheme with that
σ; reports test accuracy with the guarantee (and, with an ``individual:`` section, per-example
privacy, Koskela et al. (2022)) in ``<report root>/train/`` (``_folders.output_dir``):
``training.json``, ``training.png`` and, with that section, ``individual_epsilons.png``.

References:
  Antti Koskela, Marlon Tobaben and Antti Honkela, "Individual Privacy Accounting with Gaussian
  Differential Privacy", arXiv:2209.15596 (docs/references.md).
"""

from __future__ import annotations

import pathlib
import sys
import time


from jaxacct import config as config_lib
from jaxacct import report
from jaxacct.individual import tracking as tracking_lib
from jaxacct.mechanism import MatrixMechanism
from jaxacct.montecarlo.engine import sharding
from jaxacct.progress import format_seconds
from jaxacct.cli.common import (Command, reporter, calibrated, calibration_section,
                                check_state_files, print_footer, refuse_over_budget,
                                scheme_and_matrix, with_prefix_error)
from jaxacct.cli.plan import check_budget
from jaxacct.cli._folders import (keep_only, output_dir, write_on_leader)


def _train(args, raw) -> dict:
  from jaxacct.training.loop import noise_bands  # local: flax and optax only for training
  from jaxacct.training.task import project_training, train_task
  task = config_lib.training_task_from(raw, pathlib.Path(args.config).parent)
  m = task.dataset_size
  declared = raw['scheme'].get('dataset_size')
  if declared != m:
    raise config_lib.ConfigError(f'scheme.dataset_size must be the training set size {m} (the '
                                 f'scheme is accounted for it), got {declared}')
  noise = bool(config_lib.setting(raw, 'training.noise'))
  if noise:
    calibration_section(raw)
  scheme, matrix = scheme_and_matrix(raw)
  noise_bands(matrix)  # refuses a strategy whose C⁻¹Z cannot be streamed, before calibrating
  individual = config_lib.individual_from(raw, m)
  if individual is not None and not noise:
    raise config_lib.ConfigError('the individual section needs a private run (training.noise: '
                                 'true): without noise there is no ε to account')
  if individual is not None:  # refusals (banded C, subsampled filter, …) before calibrating
    tracking_lib.bind(individual, MatrixMechanism(scheme, matrix, 1.0), m)
  options = config_lib.library_keywords(raw, 'training', ('clip_norm', 'learning_rate',
                                                          'momentum', 'seed'))
  choice = None
  if noise:
    probe = MatrixMechanism(scheme, matrix, 1.0)
    choice = config_lib.accountant_choice(raw, scheme, matrix)  # once per run
    check_state_files(args, raw, ledger=choice.monte_carlo, mechanism=probe)
  # The plan: the training's first steps timed (a discarded run, public seed), then the
  # calibration's capacity plan, whose budget covers both.
  training = project_training(task, MatrixMechanism(scheme, matrix, 1.0), noise=noise,
                              individual=individual, **options)
  figures = 1 + (individual is not None)
  then = ('the training', training.projected_seconds + figures * report.figure_seconds())
  if sharding.is_leader():
    print(f'plan: training {training.steps} steps: first step (compile) '
          f'{format_seconds(training.first_step_seconds)}, then '
          f'{training.seconds_per_step * 1e3:.1f} ms per step (timed on {training.timed_steps} '
          f'steps): {format_seconds(then[1])} with {figures} figure(s)', file=sys.stderr)
  if noise:
    projected = check_budget(args, raw, choice, report=False, then=then)
  else:  # no calibration: the training alone
    refuse_over_budget(args, then[0], then[1], '', accelerator=False)
    projected = then[1]
  started = time.perf_counter()  # the run the plan projects: calibration and training
  if noise:
    mechanism, g, calibration, _ = calibrated(args, raw, scheme, matrix, choice)
  else:
    mechanism, g, calibration = MatrixMechanism(scheme, matrix, 1.0), None, None
  trained = time.perf_counter()
  payload = train_task(
      task, mechanism, g, noise=noise, individual=individual,
      progress=reporter(args, unit='steps'), **options)
  payload['task'] = task.name
  payload['training_seconds'] = time.perf_counter() - trained
  payload['calibration'] = calibration
  if noise:
    with_prefix_error(mechanism, payload)
  folder = output_dir(args, raw)
  write_on_leader(report.write_json, folder, 'training.json', payload)
  write_on_leader(report.plot_training, folder, payload,
                  f'{task.name}: {report.describe(mechanism)}')
  if payload['individual'] is not None:
    write_on_leader(report.plot_individual, folder, payload['individual'],
                    f'{task.name}: {report.describe(mechanism)}')
  payload['plan_check'] = {'projected_seconds': projected, 'training': training.to_dict(),
                           'measured_seconds': time.perf_counter() - started}
  write_on_leader(report.write_json, folder, 'training.json', payload)
  keep_only(args, folder, ('training.json', 'training.png')
            + (('individual_epsilons.png',) if payload['individual'] is not None else ()))
  payload['report'] = str(folder)
  return payload


def _print(payload: dict) -> None:
  privacy = ('no noise: NOT private' if payload['method'] == 'nonprivate' else
             f'σ = {payload["noise_multiplier"]:.6g}, ({payload["epsilon"]:.6g}, '
             f'{payload["delta"]:.4g})-DP [{payload["method"]}'
             + (f' by {payload["accountant"]}' if payload.get('accountant') else '') + ']')
  if payload['seed'] is not None and payload['method'] != 'nonprivate':
    print(f'warning: training.seed = {payload["seed"]} is in the config: anyone with it can '
          'regenerate the noise and batches, so this model must not be released as private',
          file=sys.stderr)
  print(f'test accuracy {payload["accuracy"]:.4f} after {payload["steps"]} steps '
        f'(expected batch {payload["expected_batch_size"]:.4g}, batches padded to '
        f'{payload["batch_shape"]} examples); {privacy}; training took '
        f'{payload["training_seconds"]:.1f} s')
  if payload.get('individual'):
    summary = payload['individual']
    q = summary['quantiles']
    print(f'individual ε at δ = {summary["delta"]:.3g} ({summary["method"]}, '
          f'{summary["tracked"]} examples): min {q["0"]:.3g}, median {q["50"]:.3g}, 90 % '
          f'{q["90"]:.3g}, max {q["100"]:.3g}; worst case {summary["worst_case_epsilon"]:.3g}'
          + (f'; filter guarantees ε = {summary["filter_epsilon"]:.4g} to every example, '
             f'{summary["active_per_epoch"][-1]} still active'
             if summary['filter_epsilon'] is not None else '')
          + ' (individual ε depend on private data: not for release)')
  print_footer(payload)

COMMAND = Command(name='train', help='calibrate σ, then train the config\'s training task with it',
                  run=_train, print_human=_print, order=3,
                  charges_ledger=True)
