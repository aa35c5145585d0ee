"""The participation model (``jaxacct/schemes/participation.py``): each family's model, the
schemes' JSON unchanged by it, the strategies' band and phase sums, unknown models refused,
and an AST test that no module outside ``schemes/`` and ``strategies/`` asks a scheme or
strategy its class (design §4)."""

from __future__ import annotations

import ast
import dataclasses
import pathlib

import numpy as np
import pytest

import jaxacct
from jaxacct import schemes
from jaxacct.deterministic import base as accountant_base
from jaxacct.deterministic import minsep_chain, tilt_bound
from jaxacct.individual import tracking as tracking_lib
from jaxacct.schemes.participation import (Cyclic, FixedBins, MinSepChain, Participation,
                                           Truncation, UserLevel)
from jaxacct.strategy import Strategy

PACKAGE = pathlib.Path(__file__).resolve().parents[1] / 'jaxacct'

# (scheme, its participation, its to_dict() as before the model existed), one or more per family.
EXAMPLES = {
    'poisson': [(
        jaxacct.Poisson(sampling_prob=0.3, iterations=4),
        Participation(model=MinSepChain(sampling_prob=0.3, min_sep=1, warm_start=False),
                      truncation=None, iterations=4),
        {'type': 'Poisson', 'sampling_prob': 0.3, 'iterations': 4, 'truncated_batch_size': None,
         'dataset_size': None}), (
        jaxacct.Poisson(sampling_prob=0.3, iterations=4, truncated_batch_size=2, dataset_size=9),
        Participation(model=MinSepChain(sampling_prob=0.3, min_sep=1, warm_start=False),
                      truncation=Truncation(batch_size=2, dataset_size=9), iterations=4),
        {'type': 'Poisson', 'sampling_prob': 0.3, 'iterations': 4, 'truncated_batch_size': 2,
         'dataset_size': 9})],
    'bminsep': [(
        jaxacct.BMinSep(sampling_prob=0.5, iterations=6, min_sep=3),
        Participation(model=MinSepChain(sampling_prob=0.5, min_sep=3, warm_start=True),
                      truncation=None, iterations=6),
        {'type': 'BMinSep', 'sampling_prob': 0.5, 'iterations': 6, 'min_sep': 3,
         'warm_start': True, 'truncated_batch_size': None, 'dataset_size': None}), (
        # b = 1: Poisson's model, whichever start (one chain).
        jaxacct.BMinSep(sampling_prob=0.3, iterations=4, min_sep=1, truncated_batch_size=2,
                        dataset_size=9),
        Participation(model=MinSepChain(sampling_prob=0.3, min_sep=1, warm_start=False),
                      truncation=Truncation(batch_size=2, dataset_size=9), iterations=4),
        {'type': 'BMinSep', 'sampling_prob': 0.3, 'iterations': 4, 'min_sep': 1,
         'warm_start': True, 'truncated_batch_size': 2, 'dataset_size': 9})],
    'cyclic_poisson': [(
        jaxacct.CyclicPoisson(sampling_prob=0.6, iterations=9, cycle_length=3,
                              partition='equal_split', truncated_batch_size=5, dataset_size=30),
        Participation(model=Cyclic(sampling_prob=0.6, cycle_length=3, partition='equal_split'),
                      truncation=Truncation(batch_size=5, dataset_size=30), iterations=9),
        {'type': 'CyclicPoisson', 'sampling_prob': 0.6, 'iterations': 9, 'cycle_length': 3,
         'partition': 'equal_split', 'truncated_batch_size': 5, 'dataset_size': 30})],
    'balls_in_bins': [(
        jaxacct.BallsInBins(iterations=7, cycle_length=3),
        Participation(model=FixedBins(cycle_length=3), truncation=None, iterations=7),
        {'type': 'BallsInBins', 'iterations': 7, 'cycle_length': 3, 'truncated_batch_size': None,
         'dataset_size': None})],
    'multi_attribution': [(
        # k_u = 1 stays UserLevel (not widened to MinSepChain: an open question).
        jaxacct.MultiAttributionBMinSep(sampling_prob=0.2, iterations=5, min_sep=2,
                                        max_examples_per_user=1),
        Participation(model=UserLevel(sampling_prob=0.2, min_sep=2, max_examples_per_user=1),
                      truncation=None, iterations=5),
        {'type': 'MultiAttributionBMinSep', 'sampling_prob': 0.2, 'iterations': 5,
         'min_sep': 2, 'max_examples_per_user': 1, 'exclusion': 'sampled',
         'accept_conjecture_6_2': False})],
}
CASES = [case for cases in EXAMPLES.values() for case in cases]


def test_every_family_has_examples_and_declares_a_model():
  assert set(EXAMPLES) == set(schemes.families())
  for name, cases in EXAMPLES.items():
    for scheme, _, _ in cases:
      assert type(scheme) is schemes.families()[name]
      assert scheme.participation.model is not None


@pytest.mark.parametrize('scheme, participation, _', CASES, ids=repr)
def test_each_family_reports_its_model(scheme, participation, _):
  assert scheme.participation == participation
  model = participation.model
  assert scheme.min_sep_chain == (model.min_sep if isinstance(model, MinSepChain) else None)


@pytest.mark.parametrize('scheme, _, as_dict', CASES, ids=repr)
def test_to_dict_and_fields_do_not_see_the_model(scheme, _, as_dict):
  # to_dict() is the scheme's JSON and the ledger's mechanism description: unchanged.
  assert scheme.to_dict() == as_dict
  assert list(scheme.to_dict()) == list(as_dict)
  assert 'participation' not in {field.name for field in dataclasses.fields(scheme)}


def test_truncation_cuts_only_below_the_dataset_size():
  assert Truncation(batch_size=2, dataset_size=9).cuts
  assert not Truncation(batch_size=9, dataset_size=9).cuts
  assert Truncation.of(None, None) is None
  assert MinSepChain(sampling_prob=0.1, min_sep=1, warm_start=True) == \
      MinSepChain(sampling_prob=0.1, min_sep=1, warm_start=False)
  assert MinSepChain(sampling_prob=0.1, min_sep=2, warm_start=True).warm_start


# ---------------------------------------------------------------- strategies
@pytest.mark.parametrize('iterations, cycle', [(7, 3), (6, 3), (5, 8), (9, 1)])
def test_phase_sums_of_both_strategies_are_the_sums_of_columns(iterations, cycle):
  banded = jaxacct.BandedToeplitz([1.0, 0.5, 0.25, 0.125])
  dense = jaxacct.LowerTriangular(np.asarray(banded.materialize(iterations)))
  c = np.asarray(banded.materialize(iterations), np.float64)
  expected = np.zeros((cycle, iterations))
  for phase in range(cycle):
    expected[phase] = c[:, phase::cycle].sum(axis=1)
  np.testing.assert_allclose(banded.phase_sums(cycle, iterations), expected, rtol=1e-15)
  np.testing.assert_allclose(dense.phase_sums(cycle, iterations), expected, rtol=1e-15)
  assert banded.phase_sums(cycle, iterations).dtype == np.float64


def test_banded_coefficients():
  band = jaxacct.BandedToeplitz([1.0, 0.5]).banded_coefficients()
  assert band.dtype == np.float64 and band.tolist() == [1.0, 0.5]
  assert jaxacct.LowerTriangular([[1.0, 0.0], [0.5, 1.0]]).banded_coefficients() is None


# ---------------------------------------------------------------- an unknown model
@dataclasses.dataclass(frozen=True, kw_only=True)
class _Shuffled:
  """A participation model no accountant knows (one participation per epoch, shuffled)."""

  epoch_length: int


@dataclasses.dataclass(frozen=True, kw_only=True)
class _ShuffledScheme(schemes.SamplingScheme):
  """A family (not registered) realising the unknown model."""

  iterations: int
  epoch_length: int

  expected_participation_rate = 0.5
  max_band_length = 1

  @property
  def participation(self):
    return Participation(model=_Shuffled(epoch_length=self.epoch_length), truncation=None,
                         iterations=self.iterations)

  def max_sensitivity_squared(self, strategy) -> float:
    return strategy.separated_sensitivity_squared(1, self.iterations)

  def sampled_rounds(self, dataset_size, rng, graph=None):
    raise NotImplementedError


def test_an_unknown_model_is_refused_by_every_amplified_accountant():
  mechanism = jaxacct.MatrixMechanism(_ShuffledScheme(iterations=4, epoch_length=2),
                                      jaxacct.BandedToeplitz([1.0]), 1.0)
  assert {'pld', 'mmcc', 'renyi', 'conditional_composition', 'unamplified_gaussian'} <= set(
      accountant_base.available())
  for accountant in accountant_base.accountants():
    reason = accountant.supports(mechanism)
    if accountant.amplified:
      assert reason is not None, accountant.name
    else:  # the unamplified Gaussian needs only the scheme's sensitivity
      assert reason is None, accountant.name
  assert tilt_bound.refusal(mechanism) == 'no exact partition function for _ShuffledScheme'
  with pytest.raises(jaxacct.InputError, match='no tuple chain for _ShuffledScheme'):
    minsep_chain.law_for(mechanism.scheme, 1)
  with pytest.raises(jaxacct.InputError, match='untruncated Poisson'):
    tracking_lib.bind(jaxacct.individual.IndividualAccountant(delta=1e-5), mechanism, 8)
  assert mechanism.scheme.min_sep_chain is None


# ---------------------------------------------------------------- no class checks outside
def _class_names() -> frozenset[str]:
  strategies = set()
  pending = [Strategy]
  while pending:
    for cls in pending.pop().__subclasses__():
      strategies.add(cls)
      pending.append(cls)
  families = set(schemes.families().values())
  return frozenset(cls.__name__ for cls in families | strategies)


def _mentions(node: ast.AST, names: frozenset[str]) -> bool:
  """True when ``node`` names one of ``names`` (``X`` or ``module.X``) or ``config_name``."""
  for inner in ast.walk(node):
    if isinstance(inner, ast.Name) and inner.id in names:
      return True
    if isinstance(inner, ast.Attribute) and (inner.attr in names or inner.attr == 'config_name'):
      return True
    if isinstance(inner, ast.Constant) and inner.value == 'config_name':
      return True
  return False


def class_checks(source: str, filename: str, names: frozenset[str]) -> list[str]:
  """``file:line`` of every isinstance/issubclass, ``is``/``==``/``in`` comparison, ``case``
  class pattern or dict keyed by a scheme or strategy class, and every ``config_name``
  comparison or ``getattr`` probe, outside ``to_scheme`` (interop's translation at the edge)."""
  tree = ast.parse(source)
  allowed = set()
  for node in ast.walk(tree):
    if isinstance(node, ast.FunctionDef) and node.name == 'to_scheme':
      allowed.update(id(inner) for inner in ast.walk(node))
  problems = []
  for node in ast.walk(tree):
    if id(node) in allowed:
      continue
    if isinstance(node, ast.Call) and isinstance(node.func, ast.Name) and \
        node.func.id in ('isinstance', 'issubclass') and len(node.args) == 2 and \
        _mentions(node.args[1], names):
      problems.append(f'{filename}:{node.lineno}: {ast.unparse(node)}')
    elif isinstance(node, ast.Compare) and any(
        isinstance(op, (ast.Is, ast.IsNot, ast.Eq, ast.NotEq, ast.In, ast.NotIn))
        for op in node.ops) and _mentions(node, names):
      problems.append(f'{filename}:{node.lineno}: {ast.unparse(node)}')
    elif isinstance(node, ast.MatchClass) and _mentions(node.cls, names):
      problems.append(f'{filename}:{node.lineno}: case {ast.unparse(node)}')
    elif isinstance(node, ast.Dict) and any(key is not None and _mentions(key, names)
                                            for key in node.keys):
      problems.append(f'{filename}:{node.lineno}: a dict keyed by class')
    elif isinstance(node, ast.Call) and isinstance(node.func, ast.Name) and \
        node.func.id in ('getattr', 'hasattr') and len(node.args) >= 2 and \
        isinstance(node.args[1], ast.Constant) and node.args[1].value == 'config_name':
      problems.append(f'{filename}:{node.lineno}: {ast.unparse(node)}')
  return problems


def _checked_files():
  for path in sorted(PACKAGE.rglob('*.py')):
    relative = path.relative_to(PACKAGE)
    if relative.parts[0] in ('schemes', 'strategies') or relative.name == 'strategy.py':
      continue  # a family or strategy may ask its own class (__eq__, constructors)
    yield path, f'jaxacct/{relative.as_posix()}'


def test_no_scheme_or_strategy_class_is_asked_outside_its_own_modules():
  names = _class_names()
  assert {'Poisson', 'BMinSep', 'CyclicPoisson', 'BallsInBins', 'MultiAttributionBMinSep',
          'BandedToeplitz', 'LowerTriangular'} <= names
  problems = [problem for path, name in _checked_files()
              for problem in class_checks(path.read_text(), name, names)]
  assert not problems, ('ask scheme.participation.model or Strategy.banded_coefficients / '
                        'phase_sums instead:\n' + '\n'.join(problems))


def test_the_class_check_finds_each_form_in_a_synthetic_source():
  source = '''
def f(scheme, matrix, kind):
  if isinstance(scheme, schemes.BMinSep): pass
  if isinstance(matrix, (LowerTriangular, int)): pass
  if type(scheme) is schemes.Poisson: pass
  if getattr(scheme, 'config_name', None) == 'balls_in_bins': pass
  if scheme.config_name != 'cyclic_poisson': pass
  match matrix:
    case BandedToeplitz(): pass
  if isinstance(scheme.participation.model, FixedBins): pass
  if isinstance(matrix, Strategy): pass
  PLANS = {schemes.CyclicPoisson: 1, 'x': 2}
  config = getattr(scheme, 'config_name', None)

def to_scheme(source):
  if kind is schemes.Poisson: pass
'''
  problems = class_checks(source, 'synthetic.py', _class_names())
  lines = sorted({int(problem.split(':')[1]) for problem in problems})
  assert lines == [3, 4, 5, 6, 7, 9, 12, 13]
  assert problems[0] == 'synthetic.py:3: isinstance(scheme, schemes.BMinSep)'
