"""The ``jaxacct estimate`` command on the quickstart config (small sample override)."""

import json
import pathlib

import pytest

from jaxacct import cli

CONFIGS = pathlib.Path(__file__).resolve().parents[1] / 'configs'


def _small_copy(tmp_path, extra=''):
  text = (CONFIGS / 'quickstart.yaml').read_text().replace('num_samples: 100000',
                                                           'num_samples: 2000')
  path = tmp_path / 'quick.yaml'
  path.write_text(text + extra)
  return path


def test_estimate_json(tmp_path, capsys):
  assert cli.main(['estimate', str(_small_copy(tmp_path)), '--json']) == 0
  result = json.loads(capsys.readouterr().out)
  assert result['num_samples'] == 2000 and result['seed'] == 0
  for direction in ('remove', 'add'):
    deltas = result['delta_hat'][direction]
    assert len(deltas) == 4 and all(0 <= d <= 1 for d in deltas)
    assert deltas == sorted(deltas, reverse=True)  # δ̂(ε) is non-increasing in ε


def test_unknown_key_is_a_one_line_error(tmp_path, capsys):
  assert cli.main(['estimate', str(_small_copy(tmp_path, 'bogus: 1\n'))]) == 2
  err = capsys.readouterr().err.strip()
  assert '\n' not in err and 'unknown key bogus' in err and 'noise_multiplier' in err


def test_missing_file(capsys):
  assert cli.main(['estimate', 'does/not/exist.yaml']) == 2
  assert 'config file not found' in capsys.readouterr().err
