"""Deterministic PLD accounting of whole mechanisms (``mechanism_pld``, ``calibrate_deterministic``).

Anchors: reference-values §6/§9 (dp_accounting, tolerance 1e-3 relative as
stated there); the Monte Carlo engine on the same truncated-Poisson mechanism
(seed 000 App. D with b = 1 releases more than seed 001's pair, so its δ may
only be larger: a one-sided check at 4 standard errors).
"""

import dataclasses

import jax
import numpy as np
import pytest

import jaxacct
from jaxacct.deterministic import accountant


def _poisson(**kwargs):
  scheme = jaxacct.Poisson(**kwargs)
  return jaxacct.MatrixMechanism(scheme, jaxacct.BandedToeplitz([2.0]), 2.0)


def test_poisson_pld_matches_dp_accounting_anchor():
  # A1 (reference-values §9): p = 0.01, σ = 1, T = 1000, δ = 1e-5 → ε = 1.828244. Here c = [2]
  # and σ = 2, i.e. σ_eff = σ/‖c‖ = 1 (noise_multiplier is not normalised by ‖c_col‖).
  mech = _poisson(sampling_prob=0.01, iterations=1000)
  assert accountant.mechanism_pld(mech).get_epsilon_for_delta(1e-5) == pytest.approx(1.828244,
                                                                                     rel=1e-3)
  # B ≥ dataset size: never truncates, same accountant.
  never = _poisson(sampling_prob=0.01, iterations=1000, truncated_batch_size=600,
                   dataset_size=600)
  assert accountant.mechanism_pld(never).get_epsilon_for_delta(1e-5) == pytest.approx(
      1.828244, rel=1e-3)


def test_truncation_costs_privacy_and_replace_one_costs_more():
  base = dict(sampling_prob=0.05, iterations=50)
  plain = accountant.mechanism_pld(_poisson(**base)).get_epsilon_for_delta(1e-5)
  cut = _poisson(**base, truncated_batch_size=55, dataset_size=1000)
  zero_out = accountant.mechanism_pld(cut).get_epsilon_for_delta(1e-5)
  replace = accountant.mechanism_pld(cut, adjacency='replace_one').get_epsilon_for_delta(1e-5)
  assert plain < zero_out < replace


@pytest.mark.slow
def test_monte_carlo_app_d_pair_is_never_tighter_than_seed_001():
  scheme = jaxacct.Poisson(sampling_prob=0.1, iterations=20, truncated_batch_size=55,
                           dataset_size=500)
  mech = jaxacct.MatrixMechanism(scheme, jaxacct.BandedToeplitz([1.0]), 1.0)
  exact = float(accountant.mechanism_pld(mech).get_delta_for_epsilon(1.0))
  mc = jaxacct.estimate_delta(jax.random.key(3), mech, [1.0], 20_000)
  worst = max(mc.delta_hat[d][0] + 4 * mc.standard_error[d][0] for d in ('remove', 'add'))
  assert exact <= worst
  assert exact > 1e-3  # a non-trivial comparison (δ ≈ 0.01 here)


@pytest.mark.slow
def test_calibrate_deterministic_round_trip():
  scheme = jaxacct.Poisson(sampling_prob=0.05, iterations=30, truncated_batch_size=55,
                           dataset_size=1000)
  matrix = jaxacct.BandedToeplitz([1.0])
  mech, guarantee = accountant.calibrate_deterministic(scheme, matrix, epsilon=2.0, delta=1e-5,
                                                       tolerance=1e-3)
  assert guarantee.method == 'deterministic' and guarantee.verified
  assert guarantee.adjacency == 'zero_out' and guarantee.noise_multiplier == mech.noise_multiplier
  assert accountant.mechanism_pld(mech).get_delta_for_epsilon(2.0) <= 1e-5
  lower = dataclasses.replace(mech, noise_multiplier=mech.noise_multiplier / 1.002)
  assert accountant.mechanism_pld(lower).get_delta_for_epsilon(2.0) > 1e-5


def test_unsupported_schemes_and_adjacencies():
  bminsep = jaxacct.MatrixMechanism(jaxacct.BMinSep(sampling_prob=0.5, iterations=4, min_sep=2),
                                    jaxacct.BandedToeplitz([1.0]), 1.0)
  with pytest.raises(TypeError, match='no deterministic accountant for BMinSep'):
    accountant.mechanism_pld(bminsep)
  cyclic = jaxacct.MatrixMechanism(
      jaxacct.CyclicPoisson(sampling_prob=0.5, iterations=4, cycle_length=2),
      jaxacct.BandedToeplitz([1.0]), 1.0)
  with pytest.raises(ValueError, match="replace_one' is not implemented for untruncated cyclic"):
    accountant.mechanism_pld(cyclic, adjacency='replace_one')
  with pytest.raises(ValueError, match='adjacency must be one of'):
    accountant.mechanism_pld(cyclic, adjacency='swap')
  with pytest.raises(ValueError, match='adjacency must be one of'):
    jaxacct.Guarantee(epsilon=1.0, delta=1e-5, method='deterministic', noise_multiplier=1.0,
                      adjacency='swap')


@pytest.mark.parametrize('answer', [0.3, 3.7, 1.0])
def test_sigma_search_counts_its_probes_in_the_one_progress_protocol(answer):
  from jaxacct.deterministic._search import smallest_passing_sigma
  probes, calls = [], []

  def meets(sigma):
    probes.append(sigma)
    return sigma >= answer

  sigma = smallest_passing_sigma(meets, tolerance=1e-4, floor=0.0, start=1.0, step=2.0,
                                 progress=lambda *call: calls.append(call))
  assert answer <= sigma <= answer * (1 + 1e-4)
  assert [c[0] for c in calls[:-1]] == list(range(1, len(probes) + 1))
  assert all(done <= total for done, total, _ in calls)
  # Once the bracket holds, the expected count is exact: it never changes again.
  assert calls[-1][:2] == (len(probes), len(probes)) and calls[-2][1] == len(probes)
  assert {c[2] for c in calls} == {'σ search'}


def test_deterministic_calibration_names_the_accountant_in_its_progress_stage():
  scheme = jaxacct.BallsInBins(iterations=10, cycle_length=5)
  calls = []
  accountant.calibrate_deterministic(scheme, jaxacct.BandedToeplitz([1.0]), epsilon=2.0,
                                     delta=1e-5, accountant='renyi',
                                     progress=lambda *call: calls.append(call))
  assert calls and {c[2] for c in calls} == {'σ search with renyi'}
  assert calls[-1][0] == calls[-1][1]
