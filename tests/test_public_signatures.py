"""No public function takes more than 10 parameters (issue 44): what a run needs beyond the
science goes in ``MonteCarloOptions`` / ``RunOptions`` (``jaxacct/options.py``).

Public = the ``__all__`` of ``jaxacct`` and of its documented subpackages, their classes'
constructors and public methods, and the drivers the docs reach by module path. A result
record the library builds (a frozen dataclass with ``to_dict``, e.g. ``Guarantee``) is not
called with all its fields by users and is exempt by that rule, not by a list; so is an
options object (a frozen, keyword-only dataclass whose every field has a default, e.g.
``MonteCarloOptions``: a user names only the fields they change). ``PENDING``
lists the callables still over the limit: it may only shrink (a test fails when one of them
comes under the limit and is still listed).
"""

from __future__ import annotations

import dataclasses
import importlib
import inspect

import pytest

LIMIT = 10
MODULES = ('jaxacct', 'jaxacct.batching', 'jaxacct.individual', 'jaxacct.training',
           'jaxacct.schemes', 'jaxacct.strategies', 'jaxacct.montecarlo.engine.kernels')
BY_PATH = ('jaxacct.montecarlo.evr.plan:capacity_plan',
           'jaxacct.montecarlo.evr.candidates:estimate_delta_for_sigmas',
           'jaxacct.interop.jax_privacy:calibrated_plan')
# Over the limit today (none since issue 44; a new entry needs a reason and a plan).
PENDING: set[str] = set()


def _is_record(value) -> bool:
  """A result record or an options object (module docstring)."""
  if not (inspect.isclass(value) and dataclasses.is_dataclass(value)
          and value.__dataclass_params__.frozen):
    return False
  fields = dataclasses.fields(value)
  options = all(f.kw_only and (f.default is not dataclasses.MISSING
                               or f.default_factory is not dataclasses.MISSING) for f in fields)
  return options or hasattr(value, 'to_dict')


def _count(function) -> int:
  try:
    parameters = inspect.signature(function).parameters
  except (TypeError, ValueError):  # a builtin without a signature
    return 0
  return sum(1 for name in parameters if name not in ('self', 'cls'))


def _callables():
  """(public name, callable) of everything the module docstring calls public."""
  seen = {}
  for module_name in MODULES:
    module = importlib.import_module(module_name)
    for name in getattr(module, '__all__', ()):
      value = getattr(module, name)
      if inspect.isfunction(value) or (callable(value) and not inspect.isclass(value)
                                       and not inspect.ismodule(value)):
        seen.setdefault(f'{module_name}:{name}', value)
      elif inspect.isclass(value):
        if not _is_record(value):
          seen.setdefault(f'{module_name}:{name}', value)
        for method_name, method in vars(value).items():
          if not method_name.startswith('_') and inspect.isfunction(method):
            seen.setdefault(f'{module_name}:{name}.{method_name}', method)
  for path in BY_PATH:
    module_name, _, name = path.partition(':')
    try:
      seen.setdefault(path, getattr(importlib.import_module(module_name), name))
    except ImportError:  # an optional extra not installed here
      continue
  return seen


def test_no_public_callable_takes_more_than_ten_parameters():
  over = {name: _count(value) for name, value in _callables().items()
          if _count(value) > LIMIT}
  assert set(over) - PENDING == set(), f'over {LIMIT} parameters: {over}'


def test_pending_only_shrinks():
  callables = _callables()
  done = [name for name in PENDING if name in callables and _count(callables[name]) <= LIMIT]
  assert done == [], f'now within {LIMIT} parameters: remove from PENDING: {done}'


def test_the_count_can_fail():
  def wide(a, b, c, d, e, f, g, h, i, j, k):  # noqa: ARG001
    return None
  assert _count(wide) == 11 > LIMIT


@pytest.mark.parametrize('function', ['estimate_delta', 'verify', 'calibrate_noise_multiplier',
                                      'calibrate', 'account'])
def test_the_drivers_take_the_options_whole(function):
  import jaxacct
  parameters = inspect.signature(getattr(jaxacct, function)).parameters
  assert 'monte_carlo' in parameters and 'run' in parameters
  assert _count(getattr(jaxacct, function)) <= LIMIT
