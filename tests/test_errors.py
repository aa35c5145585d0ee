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
  error = InputTypeError('sampling_prob must be in (0, 1], got 2', argument='sampling_prob',
                         value=2, allowed='(0, 1]')
  again = pickle.loads(pickle.dumps(error))
  assert type(again) is InputTypeError and str(again) == str(error)
  assert (again.argument, again.value, again.allowed) == ('sampling_prob', 2, '(0, 1]')
  assert error.within('scheme') is error and error.argument == 'scheme.sampling_prob'
  assert InputError('no field').within('scheme').argument is None
  assert str(error) == 'sampling_prob must be in (0, 1], got 2'  # the message is untouched


def test_a_library_refusal_reaches_the_caller_with_its_field():
  with pytest.raises(InputError) as raised:
    jaxacct.MonteCarloOptions(num_candidates=0)
  assert raised.value.argument == 'num_candidates' and raised.value.value == 0
