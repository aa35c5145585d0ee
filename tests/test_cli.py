"""The ``jaxacct`` command on the shipped configs (small overrides keep it fast)."""

import json
import pathlib

import pytest
import yaml

from jaxacct import cli
from jaxacct import config as config_lib

CONFIGS = pathlib.Path(__file__).resolve().parents[1] / 'configs'
REQUIRED = {'noise_multiplier', 'epsilon', 'delta', 'verified', 'method', 'num_samples', 'seed'}


def test_estimate_json(tmp_path, capsys):
  code = cli.main(['estimate', str(CONFIGS / 'quickstart.yaml'), '--json', '--out', str(tmp_path),
                   '--set', 'monte_carlo.num_samples=3000'])
  assert code == 0
  result = json.loads(capsys.readouterr().out)
  assert REQUIRED <= result.keys()
  assert result['method'] == 'estimate' and result['verified'] is False
  assert result['num_samples'] == 3000 and result['seed'] == 0
  for direction in ('remove', 'add'):
    deltas = result['delta_hat'][direction]
    assert len(deltas) == 4 and all(0 <= d <= 1 for d in deltas)
    assert deltas == sorted(deltas, reverse=True)  # δ̂(ε) is non-increasing in ε
    assert len(result['standard_error'][direction]) == 4
  assert (tmp_path / 'estimate.json').is_file() and (tmp_path / 'delta_hat.png').is_file()


def test_calibrate_json(tmp_path, capsys):
  code = cli.main(['calibrate', str(CONFIGS / 'quickstart.yaml'), '--json', '--out', str(tmp_path),
                   '--set', 'calibration.delta=0.02', '--set', 'calibration.epsilon=1.0'])
  assert code == 0
  result = json.loads(capsys.readouterr().out)
  assert REQUIRED <= result.keys()
  assert result['verified'] is True and result['method'] in ('verified_mc', 'fallback')
  assert result['delta'] <= 0.02 and result['epsilon'] == 1.0
  assert (tmp_path / 'calibration.json').is_file() and (tmp_path / 'candidates.png').is_file()


@pytest.mark.parametrize('override, message', [
    ('bogus=1', 'unknown key bogus; valid keys: scheme'),
    ('monte_carlo.sample_count=5', 'unknown key monte_carlo.sample_count; valid keys: num_samples'),
    ('scheme.min_sep=0', 'min_sep must be an integer >= 1'),
])
def test_bad_config_is_a_one_line_error(override, message, capsys):
  assert cli.main(['estimate', str(CONFIGS / 'quickstart.yaml'), '--set', override]) == 2
  err = capsys.readouterr().err.strip()
  assert '\n' not in err and message in err


def test_missing_file(capsys):
  assert cli.main(['estimate', 'does/not/exist.yaml']) == 2
  assert 'config file not found' in capsys.readouterr().err


def test_accelerator_scale_configs_refuse_cpu(capsys):
  assert cli.main(['calibrate', str(CONFIGS / 'bminsep_production_7_4.yaml')]) == 2
  assert 'accelerator-scale' in capsys.readouterr().err


@pytest.mark.parametrize('path', sorted(CONFIGS.glob('*.yaml')), ids=lambda p: p.name)
def test_every_shipped_config_is_valid(path):
  raw = config_lib.load(path)
  scheme = config_lib.scheme_from(raw)
  assert scheme.iterations >= 1
  assert yaml.safe_load(path.read_text())['calibration']['delta'] < 1
