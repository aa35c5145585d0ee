"""``InputError`` carries what it refuses as fields (issue 44 step 1): ``argument``, ``value``,
``allowed``, filled by every ``_validate`` check, kept through pickling, prefixed by ``within``;
the message is unchanged."""

from __future__ import annotations

import pickle

import numpy as np
import pytest

import jaxacct
from jaxacct import _validate
from jaxacct.errors import InputError, InputTypeError

CHECKS = [
    (lambda: _validate.integer_at_least('block_size', 0, 1), 'block_size', 0,
     'block_size must be an integer >= 1, got 0'),
    (lambda: _validate.integer_at_least('block_size', 2.0, 1), 'block_size', 2.0,
     'block_size must be an integer >= 1, got the float 2.0'),
    (lambda: _validate.real_number('epsilon', 'one'), 'epsilon', 'one',
     "epsilon must be a real number, got 'one'"),
    (lambda: _validate.real_number('epsilon', np.ones(2)), 'epsilon', None,
     'epsilon must be a scalar, got an array of shape (2,)'),
    (lambda: _validate.probability('sampling_prob', 1.5), 'sampling_prob', 1.5,
     'sampling_prob must be in (0, 1], got 1.5'),
    (lambda: _validate.positive_finite('max_seconds', -1.0), 'max_seconds', -1.0,
     'max_seconds must be finite and > 0, got -1.0'),
    (lambda: _validate.finite_real('epsilon', float('inf')), 'epsilon', float('inf'),
     'epsilon must be finite, got inf'),
    (lambda: _validate.boolean('shared_draws', 'no'), 'shared_draws', 'no',
     "shared_draws must be True or False, got 'no'"),
    (lambda: _validate.one_of('direction', 'up', ('remove', 'add')), 'direction', 'up',
     "direction must be one of 'remove', 'add', got 'up'"),
]


@pytest.mark.parametrize('check, argument, value, message', CHECKS)
def test_every_check_names_its_argument_as_a_field_and_keeps_its_message(check, argument,
                                                                         value, message):
  with pytest.raises(InputError) as raised:
    check()
  error = raised.value
  assert str(error) == message and error.argument == argument
  if value is not None:
    assert error.value == value or (isinstance(value, float) and np.isnan(value))


def test_fields_survive_pickling_and_within_prefixes_the_argument():
  error = InputTypeError(argument='sampling_prob', requirement='must be in (0, 1], got 2',
                         value=2, allowed='(0, 1]')
  again = pickle.loads(pickle.dumps(error))
  assert type(again) is InputTypeError and str(again) == str(error)
  assert (again.argument, again.value, again.allowed) == ('sampling_prob', 2, '(0, 1]')
  assert error.within('scheme') is error and error.argument == 'scheme.sampling_prob'
  # the composed message follows the argument's new name: no text is rewritten
  assert str(error) == 'scheme.sampling_prob must be in (0, 1], got 2'
  plain = InputError('a refusal naming no argument').within('scheme')
  assert plain.argument is None and str(plain) == 'scheme: a refusal naming no argument'
  with pytest.raises(TypeError, match='needs the argument'):
    InputError(requirement='must be > 0')


def test_each_front_end_writes_the_fields_in_its_own_terms():
  from jaxacct import config
  from jaxacct.montecarlo.evr.ledger import UndeclaredRetryError
  retry = UndeclaredRetryError(1)
  assert retry.suggestion == {'monte_carlo.attempt': 2} and retry.required_attempt == 2
  assert str(retry).endswith(
      '; declare it with monte_carlo=jaxacct.MonteCarloOptions(attempt=2)')
  assert config.describe(retry).endswith(
      '; declare it with --set calibration.attempt=2 (or calibration.attempt: 2 in the config)')
  assert config.describe(retry, 'monte_carlo').endswith('--set monte_carlo.attempt=2 (or '
                                                        'monte_carlo.attempt: 2 in the config)')
  again = pickle.loads(pickle.dumps(retry))
  assert str(again) == str(retry) and again.required_attempt == 2
  refused = InputError('not for this mechanism', argument='accountant', value='pld',
                       alternatives={'monte_carlo': 'the Monte Carlo accountant', 'renyi': None})
  assert str(refused) == ("accountant='pld': not for this mechanism; use "
                          "accountant='monte_carlo' (the Monte Carlo accountant) or "
                          "accountant='renyi'")
  assert config.describe(refused) == ('accountant: pld: not for this mechanism; use accountant: '
                                      'monte_carlo (the Monte Carlo accountant) or accountant: '
                                      'renyi')
  field = InputError(argument='monte_carlo.num_samples', requirement='must be >= 1, got 0')
  assert config.describe(field) == 'calibration.num_samples must be >= 1, got 0'
  assert config.describe(ValueError('plain')) == 'plain'


def test_no_front_end_rewrites_an_error_text():
  """The CLI and the config write refusals from the fields (describe), never by replacing or
  splitting an exception's text (the removed translations did)."""
  import ast
  import pathlib
  root = pathlib.Path(jaxacct.__file__).parent
  offenders = []
  for path in [root / 'config.py', *sorted((root / 'cli').glob('*.py'))]:
    for node in ast.walk(ast.parse(path.read_text())):
      if (isinstance(node, ast.Call) and isinstance(node.func, ast.Attribute)
          and node.func.attr in ('replace', 'split', 'partition', 'startswith')
          and (node.args or node.func.attr != 'split')  # .split(): whitespace only
          and isinstance(node.func.value, ast.Call)
          and isinstance(node.func.value.func, ast.Name) and node.func.value.func.id == 'str'
          and node.func.value.args and isinstance(node.func.value.args[0], ast.Name)):
        offenders.append(f'{path.name}:{node.lineno}')
      if (isinstance(node, ast.Call) and isinstance(node.func, ast.Attribute)
          and node.func.attr in ('split', 'replace') and node.args
          and isinstance(node.func.value, ast.Name) and node.func.value.id == 'message'):
        offenders.append(f'{path.name}:{node.lineno}')
  assert not offenders, offenders


def test_a_library_refusal_reaches_the_caller_with_its_field():
  with pytest.raises(InputError) as raised:
    jaxacct.MonteCarloOptions(num_candidates=0)
  assert raised.value.argument == 'num_candidates' and raised.value.value == 0
