"""The contract every deterministic accountant runs (``jaxacct.deterministic.base``).

``AccountantContract`` is not collected itself (its name does not start with ``Test``). An
accountant's test class subclasses it and supplies:

- ``name``: the registered name;
- ``supported_cases()`` / ``unsupported_cases()``: ``Case``s (mechanism + options) it must
  account / refuse;
- ``calibration_case()``: a ``Calibration`` target it must meet;
- ``consistency_slack``: how far δ(ε(δ)) may exceed δ (relative), from its discretisation.

Every test here then runs for that accountant, one case at a time with readable ids
(``pytest_generate_tests`` on the class). Cases are small (few rounds, a coarse PLD grid)
so the suite stays fast; curves are built once per case and class.

Modelled on dp_accounting's ``privacy_accountant_test.py`` (a contract suite skipped for the
base class, inherited by every accountant's tests).
"""

from __future__ import annotations

import dataclasses
import math
from typing import Any

import numpy as np
import pytest

import jaxacct
from jaxacct import conventions
from jaxacct.deterministic import base

EPSILONS = (0.0, 0.25, 0.5, 1.0, 2.0, 4.0)
DELTAS = (1e-6, 1e-3, 0.1)
DIRECTIONS = (None, 'remove', 'add')


@dataclasses.dataclass(frozen=True)
class Case:
  """A mechanism and the options to ask an accountant about it with."""

  id: str
  mechanism: jaxacct.MatrixMechanism
  options: dict = dataclasses.field(default_factory=dict)


@dataclasses.dataclass(frozen=True)
class Calibration:
  """A calibration target: σ for (ε, δ) on ``scheme``/``matrix``."""

  scheme: Any
  matrix: Any
  epsilon: float
  delta: float
  tolerance: float = 1e-3
  options: dict = dataclasses.field(default_factory=dict)


def mechanism(scheme, c_col=(1.0,), sigma=1.0, matrix=None) -> jaxacct.MatrixMechanism:
  return jaxacct.MatrixMechanism(scheme, matrix if matrix is not None
                                 else jaxacct.BandedToeplitz(list(c_col)), sigma)


class AccountantContract:
  """Inherited tests of the contract (see the module docstring)."""

  name: str = ''
  consistency_slack: float = 1e-9  # δ(ε(δ)) ≤ δ·(1 + slack) + 1e-15

  # -- supplied by subclasses
  def supported_cases(self) -> list[Case]:
    raise NotImplementedError

  def unsupported_cases(self) -> list[Case]:
    raise NotImplementedError

  def calibration_case(self) -> Calibration:
    raise NotImplementedError

  # -- plumbing
  def pytest_generate_tests(self, metafunc):
    for argument, cases in (('supported', self.supported_cases),
                            ('unsupported', self.unsupported_cases)):
      if argument in metafunc.fixturenames:
        listed = cases()
        metafunc.parametrize(argument, listed, ids=[case.id for case in listed])

  @property
  def accountant(self) -> base.DeterministicAccountant:
    return base.get(self.name)

  _curves: dict = {}

  def curve(self, case: Case, sigma_scale: float = 1.0) -> base.PrivacyCurve:
    key = (self.name, case.id, sigma_scale)
    if key not in AccountantContract._curves:
      mech = dataclasses.replace(case.mechanism,
                                 noise_multiplier=case.mechanism.noise_multiplier * sigma_scale)
      AccountantContract._curves[key] = self.accountant.privacy_curve(mech, **case.options)
    return AccountantContract._curves[key]

  # -- the contract
  def test_registered_with_metadata(self):
    accountant = self.accountant
    assert self.name in base.available() and accountant.name == self.name
    assert isinstance(accountant.references, tuple) and accountant.references
    assert all(isinstance(r, str) and r for r in accountant.references)
    assert set(accountant.adjacencies) <= set(conventions.ADJACENCIES)
    assert accountant.option_names()[0] == 'adjacency'
    assert accountant.sigma_floor >= 0.0

  def test_supported(self, supported):
    assert self.accountant.supports(supported.mechanism, **supported.options) is None
    assert self.name in base.supporting(supported.mechanism, **supported.options)

  def test_unsupported_gives_a_reason_and_every_entry_point_refuses(self, unsupported):
    mech, options = unsupported.mechanism, unsupported.options
    reason = self.accountant.supports(mech, **options)
    assert isinstance(reason, str) and reason and '\n' not in reason
    assert self.name not in base.supporting(mech, **options)
    calls = {
        'delta_for_epsilon': lambda: self.accountant.delta_for_epsilon(mech, 1.0, **options),
        'epsilon_for_delta': lambda: self.accountant.epsilon_for_delta(mech, 1e-5, **options),
        'privacy_curve': lambda: self.accountant.privacy_curve(mech, **options),
        'sigma': lambda: self.accountant.sigma(mech.scheme, mech.matrix, epsilon=1.0,
                                               delta=1e-5, **options),
        'calibrate': lambda: self.accountant.calibrate(mech.scheme, mech.matrix, epsilon=1.0,
                                                       delta=1e-5, **options),
        'jaxacct.delta_for_epsilon': lambda: jaxacct.delta_for_epsilon(
            mech, 1.0, accountant=self.name, **options),
        'jaxacct.epsilon_for_delta': lambda: jaxacct.epsilon_for_delta(
            mech, 1e-5, accountant=self.name, **options),
        'jaxacct.calibrate_deterministic': lambda: jaxacct.calibrate_deterministic(
            mech.scheme, mech.matrix, epsilon=1.0, delta=1e-5, accountant=self.name, **options),
    }
    for entry, call in calls.items():
      with pytest.raises(base.UnsupportedMechanismError) as info:
        call()
      message = str(info.value)
      assert isinstance(info.value, ValueError), entry
      assert reason in message and repr(self.name) in message, entry
      # It offers who does cover the mechanism (other accountants, or Monte Carlo) as
      # alternatives to the refused accountant, which a front end writes in its own terms.
      refusal = info.value
      assert refusal.argument == 'accountant' and refusal.value == self.name, entry
      assert refusal.alternatives or 'no registered deterministic accountant' in message, entry
      assert all(f'accountant={name!r}' in message for name in refusal.alternatives or ()), entry

  @pytest.mark.parametrize('direction', DIRECTIONS, ids=str)
  def test_delta_is_non_increasing_in_epsilon(self, supported, direction):
    curve = self.curve(supported)
    deltas = np.array([curve.delta_for_epsilon(e, direction=direction) for e in EPSILONS])
    assert np.all((0.0 <= deltas) & (deltas <= 1.0))
    assert np.all(np.diff(deltas) <= 0.0), deltas

  def test_delta_is_non_increasing_in_sigma(self, supported):
    curves = [self.curve(supported, scale) for scale in (1.0, 1.5, 2.25)]
    for direction in DIRECTIONS:
      deltas = [c.delta_for_epsilon(0.5, direction=direction) for c in curves]
      assert deltas == sorted(deltas, reverse=True), (direction, deltas)

  @pytest.mark.parametrize('direction', DIRECTIONS, ids=str)
  def test_epsilon_and_delta_are_consistent(self, supported, direction):
    curve = self.curve(supported)
    for delta in DELTAS:
      epsilon = curve.epsilon_for_delta(delta, direction=direction)
      assert epsilon >= 0.0
      if math.isfinite(epsilon):
        reached = curve.delta_for_epsilon(epsilon, direction=direction)
        assert reached <= delta * (1 + self.consistency_slack) + 1e-15, (delta, epsilon, reached)

  def test_one_point_queries_read_the_same_curve(self, supported):
    mech, options = supported.mechanism, supported.options
    curve = self.curve(supported)
    assert self.accountant.epsilon_for_delta(mech, 1e-3, direction='add', **options) \
        == curve.epsilon_for_delta(1e-3, direction='add')
    assert self.accountant.delta_for_epsilon(mech, 0.5, **options) == curve.delta_for_epsilon(0.5)

  def test_max_over_directions_is_one_of_them(self, supported):
    curve = self.curve(supported)
    for epsilon in EPSILONS:
      both = [curve.delta_for_epsilon(epsilon, direction=d) for d in ('remove', 'add')]
      assert curve.delta_for_epsilon(epsilon) == max(both)
    for delta in DELTAS:
      both = [curve.epsilon_for_delta(delta, direction=d) for d in ('remove', 'add')]
      assert curve.epsilon_for_delta(delta) == max(both)

  def test_calibrate_meets_the_target_and_is_tight(self):
    case = self.calibration_case()
    accountant = self.accountant
    mech, guarantee = accountant.calibrate(case.scheme, case.matrix, epsilon=case.epsilon,
                                           delta=case.delta, tolerance=case.tolerance,
                                           **case.options)
    sigma = mech.noise_multiplier
    assert guarantee.accountant == self.name and guarantee.method == 'deterministic'
    assert guarantee.verified and guarantee.noise_multiplier == sigma
    assert (guarantee.epsilon, guarantee.delta) == (case.epsilon, case.delta)
    assert guarantee.adjacency == case.options.get('adjacency', 'zero_out')
    assert accountant.delta_for_epsilon(mech, case.epsilon, **case.options) <= case.delta
    if sigma > accountant.sigma_floor:
      lower = dataclasses.replace(mech, noise_multiplier=sigma * (1 - 2 * case.tolerance))
      assert accountant.delta_for_epsilon(lower, case.epsilon, **case.options) > case.delta
    else:
      assert sigma == accountant.sigma_floor
    # sigma() and the public function by name give the same σ, bit for bit.
    assert accountant.sigma(case.scheme, case.matrix, epsilon=case.epsilon, delta=case.delta,
                            tolerance=case.tolerance, **case.options) == sigma
    public, public_guarantee = jaxacct.calibrate_deterministic(
        case.scheme, case.matrix, epsilon=case.epsilon, delta=case.delta,
        tolerance=case.tolerance, accountant=self.name, **case.options)
    assert public.noise_multiplier == sigma and public_guarantee == guarantee

  BAD_INPUTS = [
      ('delta_for_epsilon', dict(epsilon=-0.5), ValueError, 'epsilon must be finite and >= 0'),
      ('delta_for_epsilon', dict(epsilon=math.nan), ValueError, 'epsilon must be finite'),
      ('delta_for_epsilon', dict(epsilon=math.inf), ValueError, 'epsilon must be finite'),
      ('delta_for_epsilon', dict(epsilon='1'), TypeError, 'epsilon must be a real number'),
      ('epsilon_for_delta', dict(delta=0.0), ValueError, r'delta must be in \(0, 1\)'),
      ('epsilon_for_delta', dict(delta=1.0), ValueError, r'delta must be in \(0, 1\)'),
      ('epsilon_for_delta', dict(delta=-1e-5), ValueError, r'delta must be in \(0, 1\)'),
      ('epsilon_for_delta', dict(delta=math.nan), ValueError, r'delta must be in \(0, 1\)'),
      ('delta_for_epsilon', dict(direction='max'), ValueError, 'direction must be one of'),
      ('epsilon_for_delta', dict(direction='both'), ValueError, 'direction must be one of'),
      ('delta_for_epsilon', dict(adjacency='swap'), ValueError, 'adjacency must be one of'),
      ('delta_for_epsilon', dict(bogus=1), TypeError, "unexpected option 'bogus'"),
      ('epsilon_for_delta', dict(mechanism='poisson'), TypeError, 'must be a jaxacct.MatrixMech'),
      ('calibrate', dict(delta=1.5), ValueError, r'delta must be in \(0, 1\)'),
      ('calibrate', dict(epsilon=-1.0), ValueError, 'epsilon must be finite and >= 0'),
      ('calibrate', dict(tolerance=0.0), ValueError, 'tolerance must be in'),
      ('calibrate', dict(tolerance=0.5), ValueError, 'tolerance must be in'),
      ('calibrate', dict(bogus=1), TypeError, "unexpected option 'bogus'"),
      ('calibrate', dict(adjacency='swap'), ValueError, 'adjacency must be one of'),
  ]

  @pytest.mark.parametrize('entry, change, error, match', BAD_INPUTS,
                           ids=[f'{e}-{"-".join(f"{k}={v!r}" for k, v in c.items())}'
                                for e, c, _, _ in BAD_INPUTS])
  def test_bad_input_is_refused_before_any_compute(self, monkeypatch, entry, change, error,
                                                   match):
    accountant = self.accountant

    def no_compute(*args, **kwargs):
      raise AssertionError('computed before checking its arguments')

    monkeypatch.setattr(accountant, '_curve', no_compute)
    monkeypatch.setattr(accountant, '_sigma', no_compute)
    case = self.supported_cases()[0]
    arguments = {'mechanism': case.mechanism, **case.options}
    if entry == 'calibrate':
      arguments = {'scheme': case.mechanism.scheme, 'matrix': case.mechanism.matrix,
                   'epsilon': 1.0, 'delta': 1e-5, **case.options}
    elif entry == 'delta_for_epsilon':
      arguments['epsilon'] = 1.0
    else:
      arguments['delta'] = 1e-5
    arguments.update(change)
    with pytest.raises(error, match=match):
      getattr(accountant, entry)(**arguments)
    public = (jaxacct.calibrate_deterministic if entry == 'calibrate'
              else getattr(jaxacct, entry))
    with pytest.raises(error, match=match):
      public(accountant=self.name, **arguments)
