"""The accountant registry, ``accountant="auto"``, and the config/CLI choice of accountant."""

import ast
import json
import pathlib
import sys
import typing

import pytest

import jaxacct
from jaxacct import cli
from jaxacct import config as config_lib
from jaxacct.deterministic import base

from accountant_contract import mechanism

CONFIGS = pathlib.Path(__file__).resolve().parents[2] / 'configs'
TRUNCATED_POISSON = jaxacct.Poisson(sampling_prob=0.1, iterations=6, truncated_batch_size=25,
                                    dataset_size=200)
COARSE = {'value_discretization_interval': 1e-3}

PACKAGE = pathlib.Path(__file__).resolve().parents[2] / 'jaxacct' / 'deterministic'


def registered_names(package: pathlib.Path) -> tuple[str, ...]:
  """The accountant names the public modules of ``package`` register, in ``tie_order`` (read
  with ``ast``: each ``@register``-ed class's ``name = '...'`` and ``tie_order = N``); the
  package imports every public module, so a new accountant is one file."""
  found = []
  for path in sorted(package.glob('*.py')):
    if path.name.startswith('_'):
      continue
    for cls in ast.parse(path.read_text()).body:
      if isinstance(cls, ast.ClassDef) and any(
          getattr(d, 'id', getattr(d, 'attr', None)) == 'register' for d in cls.decorator_list):
        fields = {s.targets[0].id: s.value.value for s in cls.body if isinstance(s, ast.Assign)
                  and isinstance(s.targets[0], ast.Name) and isinstance(s.value, ast.Constant)}
        found.append((fields['tie_order'], fields['name']))
  return tuple(name for _, name in sorted(found))


# The package's accountants, in tie_order (every public module of jaxacct/deterministic/).
REGISTERED = registered_names(PACKAGE)


@typing.final
class _Stub(base.DeterministicAccountant):
  """A do-nothing accountant for registry tests (registered only in private registries)."""

  name = 'stub'
  tie_order = 1000
  references = ('none',)
  adjacencies = ('zero_out',)

  def _refusal(self, mechanism, options):
    return None

  def _curve(self, mechanism, options):
    raise NotImplementedError

  def _sigma(self, probe, epsilon, delta, tolerance, options, progress=None):
    raise NotImplementedError

  def _supersedes_monte_carlo(self, mechanism):
    return False


# ---------------------------------------------------------------- registry
def test_registered_accountants_in_order():
  assert base.available() == REGISTERED
  assert [a.name for a in base.accountants()] == list(base.available())
  assert base.get('pld') is base.get('pld')


def test_registered_names_are_read_from_the_package(tmp_path):
  """The negative case: one more public module that registers an accountant is named in its
  tie_order place; a private module's is not."""
  assert REGISTERED[:2] == ('pld', 'unamplified_gaussian')
  registered = ('@register\n@typing.final\nclass Extra(base.DeterministicAccountant):\n'
                '  name = {!r}\n  tie_order = {}\n')
  (tmp_path / 'zeta.py').write_text(registered.format('extra', 5))
  (tmp_path / 'mmcc.py').write_text(registered.format('mmcc', 50))
  (tmp_path / '_private.py').write_text(registered.format('other', 1))
  assert registered_names(tmp_path) == ('extra', 'mmcc')


def test_the_registry_orders_by_tie_order_and_refuses_a_missing_or_taken_one():
  registry = base.AccountantRegistry()
  late = type('Late', (_Stub,), {'name': 'late', 'tie_order': 7})
  early = type('Early', (_Stub,), {'name': 'early', 'tie_order': 3})
  registry.register(late)
  registry.register(early)
  assert registry.available() == ('early', 'late')
  with pytest.raises(jaxacct.InputError, match="tie_order 3, as 'early' does"):
    registry.register(type('Same', (_Stub,), {'name': 'same', 'tie_order': 3}))
  with pytest.raises(TypeError, match='needs an int class attribute tie_order'):
    registry.register(type('Unplaced', (_Stub,), {'name': 'unplaced', 'tie_order': None}))


def contract_classes() -> dict[str, list[str]]:
  """The ``AccountantContract`` test classes of the imported test modules, by accountant name."""
  from accountant_contract import AccountantContract  # pylint: disable=import-outside-toplevel
  found, pending = {}, [AccountantContract]
  while pending:
    for subclass in pending.pop().__subclasses__():
      pending.append(subclass)
      if subclass.name:
        found.setdefault(subclass.name, []).append(subclass.__qualname__)
  return found


def missing_contracts(names, classes) -> list[str]:
  """The accountants of ``names`` without a collected (``Test…``) contract class."""
  return [n for n in names if not any(c.startswith('Test') for c in classes.get(n, ()))]


def test_every_registered_accountant_has_a_contract_test_class():
  """Each registered accountant runs ``accountant_contract.AccountantContract``: its test module
  (``test_<module>.py`` beside this one) defines the class. The modules are imported here so the
  check does not depend on which files this run collected."""
  import importlib  # pylint: disable=import-outside-toplevel
  here = pathlib.Path(__file__).resolve().parent
  for path in sorted(here.glob('test_*.py')):
    if 'AccountantContract)' in path.read_text() and path.stem not in sys.modules:
      importlib.import_module(path.stem)
  assert missing_contracts(base.available(), contract_classes()) == []
  # The negative case: an accountant without its class is named.
  assert missing_contracts(('pld', 'extra'), contract_classes()) == ['extra']


def test_registry_refuses_collisions_reserved_names_and_non_accountants():
  registry = base.AccountantRegistry()
  assert registry.register(_Stub) is _Stub and registry.available() == ('stub',)
  with pytest.raises(ValueError, match="named 'stub' is already registered"):
    registry.register(_Stub())
  for reserved in ('auto', 'monte_carlo', 'not a name'):
    stub = _Stub()
    stub.name = reserved  # instance attribute: only this object is renamed
    with pytest.raises(ValueError, match='identifier other than auto, monte_carlo'):
      registry.register(stub)
  with pytest.raises(TypeError, match='expects a DeterministicAccountant'):
    registry.register(object())
  # The package registry refuses a second "pld" and is unchanged.
  stub = _Stub()
  stub.name = 'pld'
  with pytest.raises(ValueError, match="named 'pld' is already registered"):
    base.register(stub)
  assert base.available() == REGISTERED


def test_unknown_names_list_the_registered_ones():
  with pytest.raises(ValueError, match="unknown deterministic accountant 'rdp'; registered: pld, "
                                       'unamplified_gaussian'):
    base.get('rdp')
  mech = mechanism(TRUNCATED_POISSON)
  with pytest.raises(ValueError, match='registered: pld, unamplified_gaussian'):
    jaxacct.delta_for_epsilon(mech, 1.0, accountant='rdp')
  with pytest.raises(TypeError, match='accountant must be a name'):
    jaxacct.epsilon_for_delta(mech, 1e-5, accountant=3)


def test_supporting_asks_each_accountant_with_the_options_it_takes():
  truncated = mechanism(TRUNCATED_POISSON)
  assert base.supporting(truncated) == ('pld', 'unamplified_gaussian')
  assert base.supporting(truncated, adjacency='replace_one', **COARSE) == ('pld',)
  bminsep = mechanism(jaxacct.BMinSep(sampling_prob=0.1, iterations=6, min_sep=3))
  assert base.supporting(bminsep) == ('unamplified_gaussian', 'minsep_renyi')
  assert base.supporting(bminsep, adjacency='replace_one') == ()
  truncated = mechanism(jaxacct.BMinSep(sampling_prob=0.1, iterations=6, min_sep=3,
                                        truncated_batch_size=5, dataset_size=100))
  assert base.supporting(truncated) == ('unamplified_gaussian',)  # minsep_renyi: not truncated


# ---------------------------------------------------------------- auto
def _every_supporting(mech, **options):
  """The accountants "auto" takes the minimum over: the amplified ones that support it."""
  return {name: base.taken_options(base.get(name), options)
          for name in base.supporting(mech, **options) if base.get(name).amplified}


@pytest.mark.parametrize('scheme, options', [
    (TRUNCATED_POISSON, COARSE),
    (jaxacct.Poisson(sampling_prob=1.0, iterations=1), COARSE),  # no amplification to credit
    (jaxacct.BallsInBins(iterations=4, cycle_length=2), {}),
], ids=['truncated_poisson', 'poisson-p1', 'balls-in-bins'])
def test_auto_takes_the_smallest_over_the_supporting_accountants(scheme, options):
  mech = mechanism(scheme, sigma=2.0)
  chosen = _every_supporting(mech, **options)
  deltas = [base.get(n).delta_for_epsilon(mech, 1.0, **o) for n, o in chosen.items()]
  epsilons = [base.get(n).epsilon_for_delta(mech, 1e-5, direction='remove', **o)
              for n, o in chosen.items()]
  assert jaxacct.delta_for_epsilon(mech, 1.0, direction='add', **options) == min(
      base.get(n).delta_for_epsilon(mech, 1.0, direction='add', **o) for n, o in chosen.items())
  assert jaxacct.delta_for_epsilon(mech, 1.0, **options) <= min(deltas)
  assert jaxacct.epsilon_for_delta(mech, 1e-5, direction='remove', **options) == min(epsilons)
  sigmas = {n: base.get(n).sigma(scheme, mech.matrix, epsilon=1.0, delta=1e-5, tolerance=1e-3,
                                 **o) for n, o in chosen.items()}
  calibrated, guarantee = jaxacct.calibrate_deterministic(
      scheme, mech.matrix, epsilon=1.0, delta=1e-5, tolerance=1e-3, **options)
  winner = min(sigmas, key=sigmas.get)
  assert guarantee.accountant == winner and calibrated.noise_multiplier == sigmas[winner]
  assert guarantee.method == 'deterministic' and guarantee.adjacency == 'zero_out'


def test_auto_never_answers_with_the_unamplified_bound():
  # Issue 31: "auto" is over the amplified accountants. With p = 1 and one round the exact
  # Gaussian σ (1e-12 relative) would beat the PLD's or MMCC's σ rounded up to 1e-3, yet auto
  # answers with an amplified one; the unamplified bound is there by name.
  matrix = jaxacct.BandedToeplitz([1.0])
  unamplified = jaxacct.Poisson(sampling_prob=1.0, iterations=1)
  _, guarantee = jaxacct.calibrate_deterministic(unamplified, matrix, epsilon=1.0, delta=1e-5,
                                                 tolerance=1e-3, **COARSE)
  _, by_name = jaxacct.calibrate_deterministic(unamplified, matrix, epsilon=1.0, delta=1e-5,
                                               tolerance=1e-3, accountant='unamplified_gaussian')
  assert guarantee.accountant in ('pld', 'mmcc') and by_name.accountant == 'unamplified_gaussian'
  assert by_name.noise_multiplier <= guarantee.noise_multiplier <= by_name.noise_multiplier * 1.01
  # b-min-sep's amplified deterministic accountant is minsep_renyi: the tightest answers with
  # it, here within 0.1 % of the loose bound (little amplification at p = 0.1 over 6 rounds,
  # and the Rényi conversion's loss); truncated b-min-sep has none: auto refuses, naming Monte
  # Carlo and the loose option; by name the loose bound is answered.
  untruncated = mechanism(jaxacct.BMinSep(sampling_prob=0.1, iterations=6, min_sep=3))
  _, amplified = jaxacct.calibrate_deterministic(untruncated.scheme, untruncated.matrix,
                                                 epsilon=1.0, delta=1e-5, tolerance=1e-3)
  _, loose = jaxacct.calibrate_deterministic(untruncated.scheme, untruncated.matrix, epsilon=1.0,
                                             delta=1e-5, tolerance=1e-3,
                                             accountant='unamplified_gaussian')
  assert amplified.accountant == 'minsep_renyi'
  assert loose.noise_multiplier * 0.99 <= amplified.noise_multiplier <= loose.noise_multiplier * 1.01
  bminsep = mechanism(jaxacct.BMinSep(sampling_prob=0.1, iterations=6, min_sep=3,
                                      truncated_batch_size=5, dataset_size=100))
  for call in (jaxacct.epsilon_for_delta, jaxacct.delta_for_epsilon):
    with pytest.raises(base.UnsupportedMechanismError, match=(
        r"no amplified deterministic accountant supports.*; use accountant='monte_carlo' \(the "
        r"Monte Carlo accountant\) or accountant='unamplified_gaussian' \(a loose bound that "
        r'ignores the sampling\)$')) as refused:
      call(bminsep, 1e-5 if call is jaxacct.epsilon_for_delta else 1.0)
    assert list(refused.value.alternatives) == ['monte_carlo', 'unamplified_gaussian']
  assert jaxacct.epsilon_for_delta(bminsep, 1e-5, accountant='unamplified_gaussian') > 0


def test_auto_means_the_accountant_of_record_and_tightest_the_deterministic_minimum():
  # "auto" is accounting.choose's everywhere: for b-min-sep that is Monte Carlo, which the
  # deterministic functions refuse naming "tightest"; where a deterministic accountant
  # supersedes Monte Carlo (Poisson with C = I) "auto" is "tightest", the functions' default.
  bminsep = mechanism(jaxacct.BMinSep(sampling_prob=0.1, iterations=6, min_sep=3))
  with pytest.raises(jaxacct.InputError, match="accountant='auto': the accountant of record for "
                                               'BMinSep is verified Monte Carlo') as refused:
    jaxacct.epsilon_for_delta(bminsep, 1e-5, accountant='auto')
  assert refused.value.alternatives == {'tightest': 'the tightest supporting deterministic bound'}
  from jaxacct import accounting
  assert accounting.choose(bminsep).name == 'monte_carlo'
  poisson = mechanism(jaxacct.Poisson(sampling_prob=0.1, iterations=6))
  assert accounting.choose(poisson).name == 'auto'
  by_default = jaxacct.epsilon_for_delta(poisson, 1e-5)
  assert by_default == jaxacct.epsilon_for_delta(poisson, 1e-5, accountant='auto') == \
      jaxacct.epsilon_for_delta(poisson, 1e-5, accountant='tightest')
  assert 'tightest' in base.RESERVED_NAMES  # no accountant can be registered under it


def test_auto_options_are_passed_only_where_taken_and_never_ignored():
  bminsep = mechanism(jaxacct.BMinSep(sampling_prob=0.1, iterations=6, min_sep=3))
  with pytest.raises(TypeError, match=r"'bandwidths' is not taken by any accountant that "
                                      r'supports this mechanism \(pld\); it is an option of '
                                      'renyi'):
    jaxacct.delta_for_epsilon(mechanism(TRUNCATED_POISSON), 1.0, bandwidths=[1])
  with pytest.raises(TypeError, match="unexpected option 'discretization'"):
    jaxacct.delta_for_epsilon(bminsep, 1.0, discretization=1e-3)
  with pytest.raises(base.UnsupportedMechanismError, match='no amplified deterministic '
                                                           'accountant supports'):
    jaxacct.delta_for_epsilon(bminsep, 1.0, adjacency='replace_one')
  with pytest.raises(ValueError, match='adjacency must be one of'):
    jaxacct.delta_for_epsilon(bminsep, 1.0, adjacency='swap')
  # replace_one: only pld honours it, so auto is pld (the Gaussian accountant is zero-out only).
  truncated = mechanism(TRUNCATED_POISSON)
  assert jaxacct.delta_for_epsilon(truncated, 1.0, adjacency='replace_one', **COARSE) == \
      base.get('pld').delta_for_epsilon(truncated, 1.0, adjacency='replace_one', **COARSE)
  # By name, an option the accountant does not take is a TypeError naming it.
  with pytest.raises(TypeError, match="'unamplified_gaussian' got an unexpected option "
                                      "'value_discretization_interval'"):
    jaxacct.delta_for_epsilon(truncated, 1.0, accountant='unamplified_gaussian', **COARSE)


def test_accountant_instances_are_accepted():
  truncated = mechanism(TRUNCATED_POISSON)
  accountant = base.get('unamplified_gaussian')
  assert jaxacct.delta_for_epsilon(truncated, 1.0, accountant=accountant) == \
      accountant.delta_for_epsilon(truncated, 1.0)


# ---------------------------------------------------------------- accountant of record
@pytest.mark.parametrize('scheme, expected', [
    (TRUNCATED_POISSON, 'pld'),
    (jaxacct.BMinSep(sampling_prob=0.1, iterations=6, min_sep=1, truncated_batch_size=25,
                     dataset_size=200), 'pld'),
    (jaxacct.CyclicPoisson(sampling_prob=0.3, iterations=6, cycle_length=2,
                           partition='equal_split', truncated_batch_size=5, dataset_size=40), 'pld'),
    # Untruncated Poisson: pld is the exact pair's PLD (Monte Carlo would verify at δ_b < δ).
    (jaxacct.Poisson(sampling_prob=0.1, iterations=6), 'pld'),
    (jaxacct.CyclicPoisson(sampling_prob=0.3, iterations=6, cycle_length=2), None),
    (jaxacct.BMinSep(sampling_prob=0.1, iterations=6, min_sep=3, truncated_batch_size=25,
                     dataset_size=200), None),
    (jaxacct.BallsInBins(iterations=6, cycle_length=2), 'renyi'),  # and conditional_composition
], ids=['truncated_poisson', 'truncated_bminsep1', 'truncated_cyclic', 'poisson', 'cyclic',
        'truncated_bminsep3', 'balls_in_bins'])
def test_superseding_monte_carlo(scheme, expected):
  assert base.superseding_monte_carlo(mechanism(scheme)) == expected


def _accountant_of(name, **changes):
  raw = config_lib.load(CONFIGS / name, [f'{k}={v}' for k, v in changes.items()])
  scheme = config_lib.scheme_from(raw)
  return config_lib.accountant_choice(
      raw, scheme, config_lib.matrix_from(raw, scheme.iterations)).name


def test_config_auto_keeps_the_shipped_configs_choices():
  # auto is deterministic (the tightest supporting accountant) where one supersedes Monte
  # Carlo: truncated Poisson / cyclic Poisson (pld wins: the CLI test below) and balls-in-bins.
  assert _accountant_of('truncated_poisson_dpsgd.yaml') == 'auto'
  assert _accountant_of('truncated_cyclic_poisson.yaml') == 'auto'
  assert _accountant_of('balls_in_bins_auto.yaml') == 'auto'
  assert _accountant_of('poisson_bandmf_mmcc.yaml') == 'auto'  # mmcc: Poisson, 16 bands
  assert _accountant_of('balls_in_bins_renyi.yaml') == 'renyi'  # explicit
  assert _accountant_of('digits_dpsgd.yaml') == 'pld'  # explicit
  for name in ('quickstart.yaml', 'truncated_bminsep_small.yaml', 'bisr_rminsep.yaml'):
    assert _accountant_of(name) == 'monte_carlo'
  # Untruncated Poisson: pld is the exact pair's PLD, which Monte Carlo would only estimate
  # and verify at δ_b < δ (a larger σ): auto takes pld (Monte Carlo until issue 32).
  assert _accountant_of('truncated_poisson_dpsgd.yaml',
                        **{'scheme.truncated_batch_size': 60000}) == 'auto'
  # Cyclic Poisson: equal split (the phase public) likewise; independent phases stay with
  # Monte Carlo, which mixes over the phase (a tighter pair than pld's phase 0).
  from jaxacct import accounting
  for partition, chosen in (('equal_split', 'auto'), ('independent', 'monte_carlo')):
    cyclic = jaxacct.MatrixMechanism(jaxacct.CyclicPoisson(
        sampling_prob=0.5, iterations=16, cycle_length=2, partition=partition),
        jaxacct.BandedToeplitz([1.0, 0.5]), 1.0)
    assert accounting.choose_accountant(cyclic) == chosen, partition


def test_config_takes_any_registered_name():
  assert _accountant_of('quickstart.yaml', accountant='unamplified_gaussian') == \
      'unamplified_gaussian'
  assert config_lib.accountant_choices() == ('auto', 'monte_carlo', *REGISTERED)
  with pytest.raises(config_lib.ConfigError,
                     match='accountant must be one of auto, monte_carlo, ' + ', '.join(REGISTERED)):
    _accountant_of('quickstart.yaml', accountant='rdp')
  with pytest.raises(jaxacct.InputError, match='unamplified_gaussian covers zero_out '
                                               'adjacency only, not replace_one') as refused:
    _accountant_of('quickstart.yaml', accountant='unamplified_gaussian', adjacency='replace_one')
  # the config's words come from the error's fields, not from rewriting its text
  assert config_lib.describe(refused.value).startswith('accountant: unamplified_gaussian: ')
  covering = ', '.join(n for n in REGISTERED if 'add_remove' in base.get(n).adjacencies)
  with pytest.raises(jaxacct.InputError) as refused:
    _accountant_of('quickstart.yaml', adjacency='add_remove')
  assert config_lib.describe(refused.value) == (
      'adjacency: add_remove: Monte Carlo accounting is for zero-out adjacency (equal to '
      f'add/remove without truncation); the accountants that cover add_remove: {covering}; use '
      'adjacency: zero_out')


@pytest.mark.slow
def test_cli_payloads_name_the_accountant(tmp_path, capsys):
  quick = ['--json', '--out', str(tmp_path), '--set', 'accountant=unamplified_gaussian']
  assert cli.main(['estimate', str(CONFIGS / 'quickstart.yaml')] + quick) == 0
  estimate = json.loads(capsys.readouterr().out)
  assert estimate['accountant'] == 'unamplified_gaussian' and estimate['method'] == 'deterministic'
  by_direction = estimate['delta_of_epsilon_by_direction']
  assert estimate['delta_of_epsilon'] == [max(r, a) for r, a in zip(by_direction['remove'],
                                                                    by_direction['add'])]
  assert cli.main(['calibrate', str(CONFIGS / 'quickstart.yaml')] + quick) == 0
  calibrated = json.loads(capsys.readouterr().out)
  assert calibrated['accountant'] == 'unamplified_gaussian'
  raw = config_lib.load(CONFIGS / 'quickstart.yaml')
  scheme = config_lib.scheme_from(raw)
  expected = base.get('unamplified_gaussian').sigma(
      scheme, config_lib.matrix_from(raw, scheme.iterations),
      epsilon=raw['calibration']['epsilon'], delta=raw['calibration']['delta'])
  assert calibrated['noise_multiplier'] == expected
  # auto's "pld" for truncated Poisson is named in the payload: asserted by test_cli.py's
  # test_deterministic_accountant_from_the_cli, which runs that estimate (one CLI run fewer).
  monte_carlo = ['--json', '--out', str(tmp_path), '--set', 'monte_carlo.num_samples=500',
                 '--set', 'scheme.iterations=16']
  assert cli.main(['estimate', str(CONFIGS / 'quickstart.yaml')] + monte_carlo) == 0
  assert json.loads(capsys.readouterr().out)['accountant'] == 'monte_carlo'


@pytest.mark.slow
def test_auto_on_balls_in_bins_is_the_tightest_per_direction_and_names_it():
  # Seed 002's two accountants (auto leaves the unamplified one out): per direction the smallest ε, the
  # statement the max over directions; which wins depends on b and σ (conditional composition
  # at small ε and large b, Rényi at larger ε; at b = 50 and σ = 3 conditional composition
  # wins only "add", which no longer binds since issue 31 item 9).
  from jaxacct.conventions import DIRECTIONS
  from jaxacct.deterministic import accountant
  for b, sigma, winner in ((50, 1.0, 'renyi'), (200, 3.0, 'conditional_composition')):
    scheme = jaxacct.BallsInBins(iterations=b, cycle_length=b)
    mech = jaxacct.MatrixMechanism(scheme, jaxacct.BandedToeplitz([1.0]), sigma)
    curve = accountant.privacy_curve(mech)
    assert isinstance(curve, accountant.TightestCurve)
    epsilons = {n: {d: base.get(n).epsilon_for_delta(mech, 1e-5, direction=d) for d in DIRECTIONS}
                for n in ('renyi', 'conditional_composition', 'minsep_renyi')}
    explanation = curve.explain(1e-5)
    assert explanation['epsilons'] == epsilons
    expected = max(min(e[d] for e in epsilons.values()) for d in DIRECTIONS)
    assert jaxacct.epsilon_for_delta(mech, 1e-5) == expected
    assert explanation['accountant'] == winner
    binding = max(DIRECTIONS, key=lambda d: min(e[d] for e in epsilons.values()))
    assert epsilons[winner][binding] == expected


@pytest.mark.slow
@pytest.mark.parametrize('epsilon, winner', [(0.15, 'conditional_composition'), (1.0, 'renyi')])
def test_auto_calibration_on_balls_in_bins_takes_the_smallest_sigma(epsilon, winner):
  # Accountants that cannot meet the target at the best σ so far are skipped (one curve):
  # the result must still be the smallest σ of all of them.
  scheme = jaxacct.BallsInBins(iterations=60, cycle_length=60)
  matrix = jaxacct.BandedToeplitz([1.0])
  sigmas = {n: base.get(n).sigma(scheme, matrix, epsilon=epsilon, delta=1e-5, tolerance=1e-3)
            for n in ('renyi', 'conditional_composition')}
  calibrated, guarantee = jaxacct.calibrate_deterministic(scheme, matrix, epsilon=epsilon,
                                                          delta=1e-5, tolerance=1e-3)
  assert guarantee.accountant == winner == min(sigmas, key=sigmas.get)
  assert calibrated.noise_multiplier == sigmas[winner]


@pytest.mark.slow
def test_cli_auto_on_balls_in_bins_reports_every_accountant(tmp_path, capsys):
  small = ['--json', '--out', str(tmp_path), '--set', 'scheme.iterations=10', '--set',
           'scheme.cycle_length=10', '--set', 'strategy.square_root_bands=1', '--set',
           'noise_multiplier=3.0', '--set', 'monte_carlo.epsilons=[0.5]']
  config = str(CONFIGS / 'balls_in_bins_auto.yaml')
  assert cli.main(['estimate', config] + small) == 0
  estimate = json.loads(capsys.readouterr().out)
  # minsep_renyi's (A2) bound gives "add" (0.4108 against conditional composition's 0.4125),
  # Rényi "remove" (0.4133), which binds (since issue 31 item 9).
  assert estimate['explanation']['by_direction'] == {'remove': 'renyi', 'add': 'minsep_renyi'}
  assert estimate['accountant'] == 'renyi'
  assert set(estimate['explanation']['epsilons']) == {'renyi', 'conditional_composition',
                                                      'minsep_renyi'}
  assert estimate['epsilon'] == jaxacct.epsilon_for_delta(
      jaxacct.MatrixMechanism(jaxacct.BallsInBins(iterations=10, cycle_length=10),
                              jaxacct.BandedToeplitz([1.0]), 3.0), 1e-5)


def test_a_delta_is_never_reported_below_zero():
  # dp_accounting's add-direction PLD tail cancels to −2.8e-14 here in float64
  dpsgd = mechanism(jaxacct.Poisson(sampling_prob=0.01, iterations=1000))
  assert jaxacct.delta_for_epsilon(dpsgd, 2.698, accountant='pld', direction='add') == 0.0
