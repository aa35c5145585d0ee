"""The ``"pld"`` accountant under the contract, and what is special to it.

Reference values with provenance: the pinned σ and ε below were computed by the
pre-contract ``jaxacct.deterministic.accountant`` (``mechanism_pld`` and
``calibrate_deterministic`` at commit dfc21ce) with value_discretization_interval = 1e-3 and
tolerance = 1e-3; the contract must reproduce them bit for bit.
"""

import math

import numpy as np
import pytest

import jaxacct
from jaxacct.deterministic import base, pld

from accountant_contract import AccountantContract, Calibration, Case, mechanism

COARSE = {'value_discretization_interval': 1e-3}


def _poisson(**kwargs):
  return jaxacct.Poisson(sampling_prob=0.1, iterations=6, **kwargs)


def _bminsep(min_sep, **kwargs):
  return jaxacct.BMinSep(sampling_prob=0.1, iterations=6, min_sep=min_sep, **kwargs)


TRUNCATION = {'truncated_batch_size': 25, 'dataset_size': 200}


class TestPLDAccountant(AccountantContract):
  name = 'pld'
  consistency_slack = 1e-9

  def supported_cases(self):
    cyclic = dict(sampling_prob=0.4, iterations=9, cycle_length=3)
    return [
        Case('poisson', mechanism(_poisson()), COARSE),
        Case('poisson-replace_one', mechanism(_poisson(), sigma=1.2),
             {**COARSE, 'adjacency': 'replace_one'}),
        Case('truncated_poisson', mechanism(_poisson(**TRUNCATION), c_col=[2.0], sigma=2.0),
             COARSE),
        Case('truncated_poisson-add_remove', mechanism(_poisson(**TRUNCATION)),
             {**COARSE, 'adjacency': 'add_remove'}),
        Case('bminsep1-warm-truncated', mechanism(_bminsep(1, **TRUNCATION)), COARSE),
        Case('cyclic-independent', mechanism(jaxacct.CyclicPoisson(**cyclic), c_col=[1.0, 0.5]),
             COARSE),
        Case('cyclic-add_remove', mechanism(jaxacct.CyclicPoisson(**cyclic)),
             {**COARSE, 'adjacency': 'add_remove'}),
        # 61 examples in 3 groups of 20 and 21: the worst over two PLDs (WorstCasePLD).
        Case('truncated_cyclic-two_sizes', mechanism(jaxacct.CyclicPoisson(
            **cyclic, partition='equal_split', truncated_batch_size=9, dataset_size=61),
            c_col=[1.0, 0.5]), COARSE),
        Case('truncated_cyclic-replace_one', mechanism(jaxacct.CyclicPoisson(
            **cyclic, partition='equal_split', truncated_batch_size=9, dataset_size=61)),
            {**COARSE, 'adjacency': 'replace_one'}),
    ]

  def unsupported_cases(self):
    cyclic = dict(sampling_prob=0.4, iterations=9, cycle_length=3)
    return [
        Case('bminsep2', mechanism(_bminsep(2), c_col=[1.0, 0.5])),
        Case('balls_in_bins', mechanism(jaxacct.BallsInBins(iterations=6, cycle_length=3))),
        Case('multi_attribution', mechanism(jaxacct.MultiAttributionBMinSep(
            sampling_prob=0.1, iterations=6, min_sep=1, max_examples_per_user=2))),
        Case('dense_poisson', mechanism(_poisson(),
                                        matrix=jaxacct.banded_inverse_square_root(6, 2))),
        Case('cyclic-replace_one', mechanism(jaxacct.CyclicPoisson(**cyclic)),
             {'adjacency': 'replace_one'}),
        Case('truncated_cyclic-add_remove', mechanism(jaxacct.CyclicPoisson(
            **cyclic, partition='equal_split', truncated_batch_size=9, dataset_size=61)),
            {'adjacency': 'add_remove'}),
        # Adding an example re-splits the others (the short group moves): not one example's
        # contribution, so the phase-0 reduction is refused (was accepted before issue 32).
        Case('equal_split-add_remove', mechanism(jaxacct.CyclicPoisson(
            **cyclic, partition='equal_split')), {'adjacency': 'add_remove'}),
    ]

  def calibration_case(self):
    return Calibration(_poisson(**TRUNCATION), jaxacct.BandedToeplitz([1.0]), epsilon=1.0,
                       delta=1e-5, tolerance=1e-3, options=COARSE)


def _curves_equal(first, second):
  for direction in ('remove', 'add'):
    for epsilon in np.linspace(0.0, 6.0, 25):  # off the 1e-3 grid too
      assert (first.delta_for_epsilon(epsilon, direction=direction)
              == second.delta_for_epsilon(epsilon, direction=direction))
    for delta in (1e-9, 1e-4, 0.05):
      assert (first.epsilon_for_delta(delta, direction=direction)
              == second.epsilon_for_delta(delta, direction=direction))


@pytest.mark.parametrize('truncation', [{}, TRUNCATION], ids=['untruncated', 'truncated'])
@pytest.mark.parametrize('warm_start', [True, False], ids=['warm', 'cold'])
@pytest.mark.parametrize('adjacency', ['zero_out', 'replace_one'])
def test_bminsep_with_min_sep_1_is_poisson_bit_for_bit(truncation, warm_start, adjacency):
  # b = 1: every example is always eligible, so cold and warm start are Poisson sampling.
  bminsep = mechanism(_bminsep(1, warm_start=warm_start, **truncation), c_col=[1.5], sigma=1.3)
  poisson = mechanism(_poisson(**truncation), c_col=[1.5], sigma=1.3)
  options = {**COARSE, 'adjacency': adjacency}
  accountant = base.get('pld')
  _curves_equal(accountant.privacy_curve(bminsep, **options),
                accountant.privacy_curve(poisson, **options))
  # mechanism_pld, which used to refuse b-min-sep, now returns the Poisson PLD too.
  from_bminsep = jaxacct.mechanism_pld(bminsep, **options)
  from_poisson = jaxacct.mechanism_pld(poisson, **options)
  assert from_bminsep.get_epsilon_for_delta(1e-5) == from_poisson.get_epsilon_for_delta(1e-5)
  assert from_bminsep.get_delta_for_epsilon(0.7) == from_poisson.get_delta_for_epsilon(0.7)


def test_bminsep_with_min_sep_1_calibrates_as_poisson():
  kwargs = dict(epsilon=1.0, delta=1e-5, tolerance=1e-3, accountant='pld', **COARSE)
  matrix = jaxacct.BandedToeplitz([1.0])
  _, from_bminsep = jaxacct.calibrate_deterministic(_bminsep(1, **TRUNCATION), matrix, **kwargs)
  _, from_poisson = jaxacct.calibrate_deterministic(_poisson(**TRUNCATION), matrix, **kwargs)
  assert from_bminsep == from_poisson


@pytest.mark.parametrize('scheme, c_col, adjacency, epsilon_at_1e_5, sigma', [
    # CyclicPoisson(p=0.3, n=24, T=4, equal_split, B=30, m=401), c = [1, .5, .25], σ = 1.3.
    (jaxacct.CyclicPoisson(sampling_prob=0.3, iterations=24, cycle_length=4,
                           partition='equal_split', truncated_batch_size=30, dataset_size=401),
     [1.0, 0.5, 0.25], 'zero_out', 12.836440389433553, 4.460565312253001),
    # Poisson(p=0.05, n=30), c = [2], σ = 1.3, replace-one.
    (jaxacct.Poisson(sampling_prob=0.05, iterations=30), [2.0], 'replace_one',
     6.82923018706751, 2.4288500710289873),
], ids=['truncated_cyclic', 'poisson-replace_one'])
def test_pre_contract_values(scheme, c_col, adjacency, epsilon_at_1e_5, sigma):
  # The values were computed by the pre-contract tree (mechanism_pld / calibrate_deterministic
  # before issue 12). In one environment the contract reproduces them bit for bit (checked when
  # it landed, and below: the contract and mechanism_pld agree exactly); across NumPy/SciPy
  # builds the PLD's FFT convolutions round differently, ~1e-12 relative observed, hence 1e-9.
  options = {**COARSE, 'adjacency': adjacency}
  mech = mechanism(scheme, c_col=c_col, sigma=1.3)
  epsilon = jaxacct.epsilon_for_delta(mech, 1e-5, accountant='pld', **options)
  assert epsilon == pytest.approx(epsilon_at_1e_5, rel=1e-9)
  assert float(jaxacct.mechanism_pld(mech, **options).get_epsilon_for_delta(1e-5)) == epsilon
  _, guarantee = jaxacct.calibrate_deterministic(scheme, mech.matrix, epsilon=2.0, delta=1e-5,
                                                 tolerance=1e-3, accountant='pld', **options)
  assert guarantee.noise_multiplier == pytest.approx(sigma, rel=1e-9)
  assert guarantee.accountant == 'pld'


def test_mechanism_pld_errors_are_unchanged():
  # mechanism_pld keeps its TypeError for what needs Monte Carlo (tests/test_deterministic_
  # accountant.py pins the messages); the contract raises UnsupportedMechanismError instead.
  dense = mechanism(_poisson(), matrix=jaxacct.banded_inverse_square_root(6, 2))
  with pytest.raises(TypeError, match='Monte Carlo'):
    jaxacct.mechanism_pld(dense)
  with pytest.raises(TypeError, match='no deterministic accountant for BallsInBins'):
    jaxacct.mechanism_pld(mechanism(jaxacct.BallsInBins(iterations=6, cycle_length=3)))


def test_worst_case_pld_per_direction():
  scheme = jaxacct.CyclicPoisson(sampling_prob=0.4, iterations=9, cycle_length=3,
                                 partition='equal_split', truncated_batch_size=9, dataset_size=61)
  worst = jaxacct.mechanism_pld(mechanism(scheme), **COARSE)
  assert len(worst.plds) == 2  # group sizes 20 and 21
  for epsilon in (0.0, 0.5, 2.0):
    both = [worst.get_delta_for_epsilon(epsilon, direction=d) for d in ('remove', 'add')]
    assert worst.get_delta_for_epsilon(epsilon) == max(both)
  both = [worst.get_epsilon_for_delta(1e-5, direction=d) for d in ('remove', 'add')]
  assert worst.get_epsilon_for_delta(1e-5) == max(both)


@pytest.mark.slow  # ~15 s: a fine dp_accounting calibration (discretisation 1e-4)
def test_the_dpsgd_initial_guess_of_a_full_batch_is_the_safe_end():
  # sampling_prob 1, 200 steps: the coarse PLD puts the exact Gaussian σ_up's ε at 4.00009 > 4,
  # so the bracket [0.1, σ_up] has no sign change; the guess is σ_up (it was an internal error).
  upper = pld.gaussian_sigma(4.0, 1e-5, math.sqrt(200))
  assert pld.dpsgd_sigma(1.0, 200, epsilon=4.0, delta=1e-5) == upper
  # Where the bracket holds, the guess is inside it and tight: within 1 % of the fine answer.
  fine = pld.dpsgd_sigma(0.1, 20, epsilon=1.0, delta=5e-4, tolerance=1e-6, discretization=1e-4)
  assert pld.dpsgd_sigma(0.1, 20, epsilon=1.0, delta=5e-4) == pytest.approx(fine, rel=1e-2)
