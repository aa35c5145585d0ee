"""The training plug-in point (issue 30): a user's own dataset and model through
``training.task``, and the digits example (``examples/digits.py``) as one such task."""

from __future__ import annotations

import json
import pathlib

import pytest

from jaxacct import cli, config
from jaxacct.training import task as task_lib

ROOT = pathlib.Path(__file__).resolve().parents[2]
CONFIGS = ROOT / 'configs'

OWN_TASK = '''
import jax.numpy as jnp
import numpy as np
import optax
from jaxacct.training import TrainingTask

def make(size=40, scale=1.0):
  """Two separable blobs, a logistic regression."""
  rng = np.random.default_rng(0)
  y = (np.arange(size) % 2).astype(np.int32)
  x = (rng.normal(size=(size, 2)) + scale * 3 * (2 * y[:, None] - 1)).astype(np.float32)
  def loss(params, xi, yi):
    logits = jnp.stack([-(xi @ params['w']), xi @ params['w']])
    return optax.softmax_cross_entropy_with_integer_labels(logits, yi)
  def evaluate(params, xs, ys):
    return float(jnp.mean((jnp.asarray(xs) @ params['w'] > 0) == jnp.asarray(ys)))
  return TrainingTask(name='blobs', x_train=x, y_train=y, x_test=x, y_test=y,
                      init=lambda key, xb: {'w': jnp.zeros(2)}, per_example_loss=loss,
                      evaluate=evaluate)

def not_a_task(**options):
  return 3
'''

CONFIG = '''scheme: {type: poisson, iterations: 20, sampling_prob: 0.25}
strategy: {c_col: [1.0]}
training:
  task: own_task.py:make
  task_options: {size: 40}
  noise: false
  seed: 0
  learning_rate: 0.5
'''


@pytest.fixture
def own_config(tmp_path):
  (tmp_path / 'own_task.py').write_text(OWN_TASK)
  path = tmp_path / 'own.yaml'
  path.write_text(CONFIG)
  return path


def test_a_users_task_trains_from_the_cli(own_config, tmp_path, capsys):
  # The scheme's dataset size is the task's (40); noise off: no calibration, a quick run.
  assert cli.main(['train', str(own_config), '--json', '--out', str(tmp_path / 'out'), '--set',
                   'scheme.dataset_size=40', '--set', 'scheme.truncated_batch_size=40']) == 0
  result = json.loads(capsys.readouterr().out)
  assert result['task'] == 'blobs' and result['steps'] == 20 and result['method'] == 'nonprivate'
  assert result['accuracy'] >= 0.9  # separable blobs 6σ apart: measured 1.0
  # Issue 31: train writes its figure from the history of every step (20 steps: each one).
  history = result['history']
  assert history['steps'] == list(range(1, 21))
  assert history['train_loss'][-1] < history['train_loss'][0]
  assert history['test_metric'][-1] == result['accuracy']
  assert (tmp_path / 'out' / 'train' / 'training.png').stat().st_size > 10_000


@pytest.mark.parametrize('override, message', [
    ('training.task=own_task.py', 'training.task must be "<module or file.py>:<factory>"'),
    ('training.task=missing.py:make', "training.task: file"),
    ('training.task=own_task.py:absent', "has no callable 'absent'"),
    ('training.task=own_task.py:not_a_task', 'returned int, not a jaxacct.training.TrainingTask'),
    ('training.task=no_such_module_xyz:make', "cannot import 'no_such_module_xyz'"),
    ('training.task_options={colour: red}', "training.task_options: "),
    ('training.dataset=digits', 'training.task replaces the legacy training.dataset'),
])
def test_a_bad_task_is_named_before_compute(own_config, override, message):
  with pytest.raises(config.ConfigError, match=message):
    config.training_task_from(config.load(own_config, [override]), own_config.parent)


def test_the_legacy_digits_keys_name_the_digits_example():
  raw = config.load(CONFIGS / 'digits_dpsgd.yaml', ['training.task_options={hidden: 16}'])
  task = config.training_task_from(raw, CONFIGS)
  params = task.init(__import__('jax').random.key(0), task.x_train[:1])
  assert task.name == 'digits' and task.dataset_size == 1437
  assert params['params']['Dense_0']['kernel'].shape == (64, 16)
  legacy = dict(raw, training={'dataset': 'digits', 'hidden': 16, 'test_fraction': 0.5})
  assert config.training_task_from(legacy, CONFIGS).dataset_size == 898  # ⌊1797/2⌋ + 0.5 split


def test_train_without_a_training_section_says_so(capsys):
  assert cli.main(['train', str(CONFIGS / 'quickstart.yaml')]) == 2
  assert 'this config has no training section' in capsys.readouterr().err


def test_a_task_checks_its_fields():
  with pytest.raises(TypeError, match='init must be callable'):
    task_lib.TrainingTask(name='x', x_train=[1], y_train=[1], x_test=[1], y_test=[1], init=3,
                          per_example_loss=len, evaluate=len)
  with pytest.raises(ValueError, match='x_train and y_train must hold the same number'):
    task_lib.TrainingTask(name='x', x_train=[1, 2], y_train=[1], x_test=[1], y_test=[1],
                          init=len, per_example_loss=len, evaluate=len)


def test_the_old_digits_module_says_where_it_went():
  with pytest.raises(ImportError, match='moved to examples/digits.py'):
    from jaxacct.training import digits  # noqa: F401


def test_projection_times_the_first_steps_and_the_run_reuses_their_compiles(own_config):
  """``project_training`` runs ``train_task``'s first 3·every + 1 steps (every = steps // 50,
  at least 1); the run after it compiles no new step program (one optimiser object per
  setting: a new one would be a new static argument of the jitted step)."""
  from jaxacct.mechanism import MatrixMechanism
  from jaxacct.training import step as step_lib
  raw = config.load(own_config)
  task = config.training_task_from(raw, own_config.parent)
  mechanism = MatrixMechanism(config.scheme_from(raw), config.matrix_from(raw, 20), 2.0)
  projection = task_lib.project_training(task, mechanism, learning_rate=0.5)
  assert projection.steps == 20 and projection.timed_steps == 4
  assert projection.projected_seconds > 0 and projection.seconds_per_step > 0
  compiled = step_lib.train_step._cache_size()
  result = task_lib.train_task(task, mechanism, None, noise=True, seed=3, learning_rate=0.5)
  assert result['steps'] == 20
  assert step_lib.train_step._cache_size() == compiled
