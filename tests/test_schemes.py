"""Scheme configuration: validation, participation rates, constructors (seed 000 §2, §4)."""

import ast
import dataclasses
import pathlib
import sys

import jax
import numpy as np
import pytest

import jaxacct
from jaxacct import schemes
from jaxacct.montecarlo.engine import kernels

import family_examples

SCHEMES = pathlib.Path(__file__).resolve().parents[1] / 'jaxacct' / 'schemes'


def test_schemes_are_frozen_keyword_only():
  scheme = jaxacct.BMinSep(sampling_prob=0.5, iterations=10, min_sep=3)
  with pytest.raises(dataclasses.FrozenInstanceError):
    scheme.sampling_prob = 0.1  # type: ignore[misc]
  with pytest.raises(TypeError):
    jaxacct.BMinSep(0.5, 10, 3)  # type: ignore[misc]
  assert scheme.warm_start is True  # the default


def test_expected_participation_rates():
  # p0 = p / (1 + (b - 1) p) (seed 000 §4): p = 0.5, b = 3 -> 0.25.
  assert jaxacct.BMinSep(sampling_prob=0.5, iterations=4, min_sep=3).expected_participation_rate == 0.25
  assert jaxacct.Poisson(sampling_prob=0.3, iterations=4).expected_participation_rate == 0.3
  assert jaxacct.BallsInBins(iterations=4, cycle_length=8).expected_participation_rate == 0.125
  assert jaxacct.CyclicPoisson(
      sampling_prob=0.5, iterations=4, cycle_length=4).expected_participation_rate == 0.125


@pytest.mark.parametrize('min_sep', [1, 2, 16, 256])
def test_bminsep_from_expected_batch_size_round_trips(min_sep):
  # seed 000 §4: p = p0 / (1 - p0 (b - 1)); §9.4 production numbers as one case.
  scheme = jaxacct.BMinSep.from_expected_batch_size(
      expected_batch_size=1793, dataset_size=14_745_600, iterations=7200, min_sep=min_sep)
  assert scheme.expected_participation_rate == pytest.approx(1793 / 14_745_600, rel=1e-12)


def test_other_from_expected_batch_size():
  assert jaxacct.Poisson.from_expected_batch_size(
      expected_batch_size=10, dataset_size=1000, iterations=5).sampling_prob == 0.01
  bins = jaxacct.BallsInBins.from_expected_batch_size(
      expected_batch_size=125, dataset_size=1000, iterations=5)
  assert bins.cycle_length == 8
  cyclic = jaxacct.CyclicPoisson.from_expected_batch_size(
      expected_batch_size=1793, dataset_size=14_745_600, iterations=7200, cycle_length=256,
      partition='equal_split')
  # spec 000 §9.4: p = 1793 / 57600 in each group of 14,745,600 / 256.
  assert cyclic.sampling_prob == pytest.approx(1793 / 57600, rel=1e-12)
  with pytest.raises(ValueError, match='expected_batch_size'):
    jaxacct.BallsInBins.from_expected_batch_size(
        expected_batch_size=300, dataset_size=1000, iterations=5)
  with pytest.raises(ValueError, match='expected_batch_size'):
    jaxacct.BMinSep.from_expected_batch_size(
        expected_batch_size=200, dataset_size=1000, iterations=5, min_sep=8)


@pytest.mark.parametrize('factory, name', [
    (lambda v: jaxacct.Poisson(sampling_prob=v, iterations=3), 'sampling_prob'),
    (lambda v: jaxacct.BMinSep(sampling_prob=v, iterations=3, min_sep=2), 'sampling_prob'),
    (lambda v: jaxacct.CyclicPoisson(sampling_prob=v, iterations=3, cycle_length=2),
     'sampling_prob'),
])
@pytest.mark.parametrize('value', [0.0, -0.1, 1.5, float('nan'), float('inf')])
def test_sampling_prob_outside_unit_interval(factory, name, value):
  with pytest.raises(ValueError, match=rf'{name} must be in \(0, 1\]'):
    factory(value)


@pytest.mark.parametrize('factory, name', [
    (lambda v: jaxacct.Poisson(sampling_prob=0.5, iterations=v), 'iterations'),
    (lambda v: jaxacct.BMinSep(sampling_prob=0.5, iterations=v, min_sep=2), 'iterations'),
    (lambda v: jaxacct.BMinSep(sampling_prob=0.5, iterations=3, min_sep=v), 'min_sep'),
    (lambda v: jaxacct.BallsInBins(iterations=v, cycle_length=2), 'iterations'),
    (lambda v: jaxacct.BallsInBins(iterations=3, cycle_length=v), 'cycle_length'),
    (lambda v: jaxacct.CyclicPoisson(sampling_prob=0.5, iterations=3, cycle_length=v),
     'cycle_length'),
])
@pytest.mark.parametrize('value', [0, -3])
def test_integer_fields_below_one(factory, name, value):
  with pytest.raises(ValueError, match=rf'{name} must be an integer >= 1'):
    factory(value)


def test_non_integer_fields_and_unknown_partition():
  with pytest.raises(TypeError, match='min_sep'):
    jaxacct.BMinSep(sampling_prob=0.5, iterations=3, min_sep=2.0)
  with pytest.raises(ValueError, match='partition'):
    jaxacct.CyclicPoisson(sampling_prob=0.5, iterations=3, cycle_length=2, partition='random')
  with pytest.raises(TypeError, match='warm_start'):
    jaxacct.BMinSep(sampling_prob=0.5, iterations=3, min_sep=2, warm_start=1)


def test_every_scheme_implements_the_interface():
  for scheme in [e for examples in family_examples.EXAMPLES.values() for e in examples]:
    assert isinstance(scheme, schemes.SamplingScheme)
    assert 0 < scheme.expected_participation_rate <= 1


# ------------------------------------------------------------- one registration per family
def registering_modules(folder: pathlib.Path) -> dict[str, str]:
  """Config name -> module, for each module of ``folder`` with a class decorated
  ``@register('<name>')`` / ``@base.register('<name>')`` (read with ``ast``)."""
  found = {}
  for path in sorted(folder.glob('*.py')):
    for node in ast.walk(ast.parse(path.read_text())):
      if isinstance(node, ast.ClassDef):
        for decorator in node.decorator_list:
          if (isinstance(decorator, ast.Call) and decorator.args
              and isinstance(decorator.args[0], ast.Constant)
              and getattr(decorator.func, 'attr', getattr(decorator.func, 'id', None))
              == 'register'):
            found[decorator.args[0].value] = path.stem
  return found


def kernel_contract_classes() -> list[type]:
  """The ``KernelContract`` test classes (``tests/montecarlo``), imported if not yet."""
  folder = str(pathlib.Path(__file__).resolve().parent / 'montecarlo')
  if folder not in sys.path:
    sys.path.append(folder)
  import kernel_contract  # pylint: disable=import-outside-toplevel
  import test_kernel_contract  # pylint: disable=import-outside-toplevel,unused-import
  return kernel_contract.contract_classes()


def family_gaps(names, examples, contracts) -> list[str]:
  """What each family of ``names`` lacks: its registration, examples (``family_examples``), a
  registered Monte Carlo kernel, a kernel contract class for one of its kernels."""
  gaps = []
  for name in names:
    family = schemes.families().get(name)
    if family is None:
      gaps.append(f'{name}: not registered by importing jaxacct.schemes')
      continue
    if not examples.get(name) or not all(type(e) is family for e in examples[name]):
      gaps.append(f'{name}: no examples in tests/family_examples.py (or wrong family)')
    served = [k for k in kernels.registered() if family in k.schemes]
    if not served:
      gaps.append(f'{name}: no Monte Carlo kernel (jaxacct/montecarlo/engine/kernels/)')
    elif not {c.kernel for c in contracts} & set(served):
      gaps.append(f'{name}: no KernelContract class for its kernels')
  return gaps


def test_every_family_module_has_examples_a_kernel_and_a_contract_class():
  """The families are the modules of ``jaxacct/schemes/`` that register one (none listed here):
  each is registered under its config name, has examples, a kernel and a contract class."""
  names = registering_modules(SCHEMES)
  assert set(names) == set(schemes.families())
  assert names['bminsep'] == 'bminsep'
  assert family_gaps(names, family_examples.EXAMPLES, kernel_contract_classes()) == []


def test_a_family_without_examples_or_kernel_is_named(every_other_round, tmp_path):
  """The negative case: one more family module (registered, but with no examples, kernel or
  contract class) is named; so is one whose module registers nothing at import."""
  del every_other_round
  (tmp_path / 'every_other_round.py').write_text(
      "@base.register('every_other_round')\nclass EveryOtherRound:\n  pass\n")
  (tmp_path / 'helper.py').write_text('class Helper:\n  pass\n')
  (tmp_path / 'ghost.py').write_text("@register('ghost')\nclass Ghost:\n  pass\n")
  names = registering_modules(tmp_path)
  assert names == {'every_other_round': 'every_other_round', 'ghost': 'ghost'}
  assert family_gaps(names, family_examples.EXAMPLES, kernel_contract_classes()) == [
      'every_other_round: no examples in tests/family_examples.py (or wrong family)',
      'every_other_round: no Monte Carlo kernel (jaxacct/montecarlo/engine/kernels/)',
      'ghost: not registered by importing jaxacct.schemes']


def test_every_family_is_registered_once_with_its_config_name():
  families = schemes.families()
  for name, family in families.items():
    assert family.config_name == name and getattr(jaxacct, family.__name__) is family
  # The config keys are the dataclass fields and the from_expected_batch_size parameters.
  assert schemes.config_fields(jaxacct.BMinSep) == {
      'sampling_prob': float, 'iterations': int, 'min_sep': int, 'warm_start': bool,
      'truncated_batch_size': int | None, 'dataset_size': int | None,
      'expected_batch_size': float}
  with pytest.raises(jaxacct.InputError, match="'poisson' is already registered for Poisson"):
    schemes.register('poisson')(jaxacct.BMinSep)
  with pytest.raises(jaxacct.InputTypeError, match='needs a SamplingScheme dataclass'):
    schemes.register('not_a_scheme')(dict)


@pytest.fixture
def every_other_round(monkeypatch):
  """A user's own family (participates in rounds offset, offset + 2, …), registered for one
  test: the registry is restored afterwards."""
  monkeypatch.setattr(schemes.base, '_FAMILIES', dict(schemes.base._FAMILIES))

  @schemes.register('every_other_round')
  @dataclasses.dataclass(frozen=True, kw_only=True)
  class EveryOtherRound(schemes.SamplingScheme):
    iterations: int
    offset: int = 0
    summary_fields = (('offset', 'offset {}'),)

    def __post_init__(self):
      if self.offset not in (0, 1):
        # argument= and requirement=: the message follows the argument's name in a config
        raise jaxacct.InputError(argument='offset', value=self.offset,
                                 requirement=f'must be 0 or 1, got {self.offset}')

    expected_participation_rate = 0.5
    max_band_length = 2

    def max_sensitivity_squared(self, strategy) -> float:
      return strategy.separated_sensitivity_squared(2, self.iterations)

    def sampled_rounds(self, dataset_size, rng, graph=None):
      del rng, graph
      for i in range(self.iterations):
        yield np.arange(dataset_size) if i % 2 == self.offset else np.zeros(0, np.int64)

  return EveryOtherRound


def test_a_registered_family_is_configured_trained_and_reported(every_other_round, tmp_path):
  from jaxacct import config, report
  path = tmp_path / 'own.yaml'
  path.write_text('scheme: {type: every_other_round, iterations: 4, offset: 1}\n'
                  'strategy: {c_col: [1.0, 0.5]}\n')
  scheme = config.scheme_from(config.load(path))
  assert scheme == every_other_round(iterations=4, offset=1)
  assert [b.size for b in jaxacct.batching.batches(scheme, 3, 0)] == [0, 3, 0, 3]
  mechanism = jaxacct.MatrixMechanism(scheme, jaxacct.BandedToeplitz([1.0, 0.5]), 2.0)
  assert report.describe(mechanism) == 'EveryOtherRound (offset 1), n=4, 2 bands, σ=2'
  # Its fields are typed from the annotations (an int) and ranged by its constructor.
  with pytest.raises(config.ConfigError, match='scheme.offset must be an integer'):
    config.load(path, ['scheme.offset=0.5'])
  with pytest.raises(jaxacct.InputError, match='^scheme.offset must be 0 or 1, got 2$'):
    config.scheme_from(config.load(path, ['scheme.offset=2']))
  with pytest.raises(config.ConfigError, match='scheme.min_sep is not a key of scheme.type '
                                               'every_other_round'):
    config.scheme_from(config.load(path, ['scheme.min_sep=2']))
  # No Monte Carlo kernel is registered for it: refused by name before any compute.
  with pytest.raises(jaxacct.InputTypeError, match='no Monte Carlo kernel for scheme '
                                                   'EveryOtherRound'):
    jaxacct.estimate_delta(jax.random.key(0), mechanism, [1.0], 10)
