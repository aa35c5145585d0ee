"""``jaxacct.account``: the configs' choice of accountant from Python (issue 30)."""

from __future__ import annotations

import jax
import numpy as np
import pytest

import jaxacct
from jaxacct import accounting
from jaxacct.deterministic import accountant as deterministic_functions
from jaxacct.montecarlo.evr import verification

BMINSEP = jaxacct.MatrixMechanism(jaxacct.BMinSep(sampling_prob=0.25, iterations=4, min_sep=2),
                                  jaxacct.BandedToeplitz([1.0, 0.5]), 1.0)
TRUNCATED_POISSON = jaxacct.MatrixMechanism(
    jaxacct.Poisson(sampling_prob=0.1, iterations=6, truncated_batch_size=3, dataset_size=20),
    jaxacct.BandedToeplitz([1.0]), 1.5)
DELTA = 0.1  # a Monte Carlo verification of a few thousand samples per direction


def test_auto_is_the_configs_choice():
  assert accounting.choose_accountant(BMINSEP) == 'monte_carlo'
  assert accounting.choose_accountant(TRUNCATED_POISSON) == 'auto'  # pld supersedes it
  with pytest.raises(jaxacct.InputError, match="adjacency='add_remove': Monte Carlo accounting is for "):
    accounting.choose_accountant(BMINSEP, adjacency='add_remove')
  with pytest.raises(jaxacct.InputError, match='accountant must be one of auto, monte_carlo, '):
    accounting.choose_accountant(BMINSEP, 'magic')


@pytest.mark.slow  # ~10 s on the 2-core CI machine (durations report)
def test_deterministic_answers_name_the_tightest_accountant():
  by_delta = jaxacct.account(TRUNCATED_POISSON, delta=1e-5)
  assert by_delta.method == 'deterministic' and by_delta.verified
  assert by_delta.epsilon == jaxacct.epsilon_for_delta(TRUNCATED_POISSON, 1e-5)
  assert by_delta.accountant == deterministic_functions.privacy_curve(
      TRUNCATED_POISSON).chosen(1e-5)
  by_epsilon = jaxacct.account(TRUNCATED_POISSON, epsilon=2.0)
  assert by_epsilon.delta == jaxacct.delta_for_epsilon(TRUNCATED_POISSON, 2.0)
  # Both given: proven as stated, or refused with the ε the accountant proves.
  assert jaxacct.account(TRUNCATED_POISSON, epsilon=by_delta.epsilon + 0.1,
                         delta=1e-5).epsilon == by_delta.epsilon + 0.1
  with pytest.raises(jaxacct.InputError, match=r'not \(0.01, 1e-05\)-DP by auto: its ε\(δ\) is'):
    jaxacct.account(TRUNCATED_POISSON, epsilon=0.01, delta=1e-5)
  named = jaxacct.account(TRUNCATED_POISSON, delta=1e-5, accountant='pld')
  assert named.accountant == 'pld' and named.epsilon >= by_delta.epsilon


def test_monte_carlo_is_algorithm_5_with_the_fallback_as_last_candidate():
  key = jax.random.key(11)
  epsilon = 1.5
  guarantee = jaxacct.account(BMINSEP, epsilon=epsilon, delta=DELTA, key=key)
  sigma_up = verification.fallback_accountant(None).sigma(
      BMINSEP.scheme, BMINSEP.matrix, epsilon=epsilon, delta=guarantee.base_delta)
  direct = jaxacct.verify(key, [BMINSEP, jaxacct.MatrixMechanism(
      BMINSEP.scheme, BMINSEP.matrix, sigma_up)], epsilon=epsilon, delta=DELTA)
  assert guarantee == direct.guarantee and direct.index == 0
  assert guarantee.method == 'verified_mc' and guarantee.noise_multiplier == 1.0
  assert guarantee.delta <= DELTA


def test_monte_carlo_estimates_epsilon_when_only_delta_is_given():
  guarantee = jaxacct.account(BMINSEP, delta=DELTA, key=jax.random.key(5))
  assert guarantee.method == 'verified_mc' and guarantee.noise_multiplier == 1.0
  # The estimated ε is a point of the grid on (0, ε_fallback(δ_b)], below the fallback's own.
  ceiling = verification.fallback_accountant(None).epsilon_for_delta(BMINSEP,
                                                                     guarantee.base_delta)
  grid = np.linspace(0.0, ceiling, accounting._EPSILON_GRID_POINTS + 1)[1:]
  assert guarantee.epsilon in grid and guarantee.epsilon < ceiling


def test_a_rejected_mechanism_raises_and_names_the_fallback_sigma():
  # At ε = 0.05 the true δ(ε) of BMINSEP is far above δ_b = 0.05: the verifier rejects it.
  with pytest.raises(jaxacct.NotVerifiedError, match=r'the verifier rejected σ = 1 at .*'
                                                     r'unamplified_gaussian proves σ ≥ '):
    jaxacct.account(BMINSEP, epsilon=0.05, delta=DELTA, key=jax.random.key(2))


@pytest.mark.parametrize('kwargs, message', [
    ({}, 'account needs epsilon'),
    ({'delta': DELTA}, 'needs key='),
    ({'epsilon': 1.0, 'key': jax.random.key(0)}, 'verifies an overall delta'),
    ({'delta': 1.5}, 'delta must be'),
    ({'epsilon': -1.0}, 'epsilon must be finite and >= 0'),
    ({'delta': DELTA, 'key': jax.random.key(0), 'accountant_options': {'bandwidths': [2]}},
     'accountant_options: bandwidths are options of a deterministic accountant'),
    ({'delta': DELTA, 'key': jax.random.key(0), 'bandwidths': [2]},
     r"accountant_options=\{'bandwidths'"),
])
def test_bad_arguments_are_refused_before_compute(kwargs, message):
  with pytest.raises(jaxacct.InputError, match=message):
    jaxacct.account(BMINSEP, **kwargs)
