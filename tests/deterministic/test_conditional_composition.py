"""Seed 002 §4's per-step dominating pairs (``conditional_composition``): the variational tail
bounds against sampled ternary losses, the reverse-hazard weights, Remark D.5."""

import math

import numpy as np
import pytest
from scipy import special

import jaxacct
from jaxacct.deterministic import base
from jaxacct.deterministic import conditional_composition as cc
from jaxacct.deterministic import random_allocation

from accountant_contract import AccountantContract, Calibration, Case, mechanism

BALLS = jaxacct.BallsInBins(iterations=8, cycle_length=4)  # k = 2 epochs
BAD_EVENT = {'bad_event_delta': 1e-7, 'value_discretization_interval': 1e-2}


class TestConditionalCompositionAccountant(AccountantContract):
  name = 'conditional_composition'
  consistency_slack = 1e-9  # ε(δ) and δ(ε) read the same composed PMF

  def supported_cases(self):
    return [
        Case('dpsgd-k2', mechanism(BALLS, sigma=2.0), BAD_EVENT),
        Case('banded-k1', mechanism(jaxacct.BallsInBins(iterations=6, cycle_length=6),
                                    c_col=[1.0, 0.5], sigma=2.5), BAD_EVENT),
        Case('add_remove-partial-epoch', mechanism(
            jaxacct.BallsInBins(iterations=7, cycle_length=3), c_col=[1.0, 0.4], sigma=3.0),
             {**BAD_EVENT, 'adjacency': 'add_remove'}),
    ]

  def unsupported_cases(self):
    return [
        Case('no-bad-event-delta', mechanism(BALLS, sigma=2.0)),
        Case('poisson', mechanism(jaxacct.Poisson(sampling_prob=0.25, iterations=8)), BAD_EVENT),
        Case('replace_one', mechanism(BALLS), {**BAD_EVENT, 'adjacency': 'replace_one'}),
    ]

  def calibration_case(self):
    return Calibration(jaxacct.BallsInBins(iterations=6, cycle_length=6),
                       jaxacct.BandedToeplitz([1.0, 0.5]), epsilon=2.0, delta=1e-5,
                       tolerance=1e-2, options=BAD_EVENT)


def test_bad_event_delta_is_checked_and_bounds_what_delta_can_be():
  accountant = base.get('conditional_composition')
  mech = mechanism(BALLS, sigma=2.0)
  with pytest.raises(ValueError, match=r'bad_event_delta must be in \(0, 1\)'):
    accountant.epsilon_for_delta(mech, 1e-5, bad_event_delta=0.0)
  assert accountant.epsilon_for_delta(mech, 1e-7, **BAD_EVENT) == math.inf
  with pytest.raises(ValueError, match='must exceed bad_event_delta'):
    accountant.sigma(BALLS, jaxacct.BandedToeplitz([1.0]), epsilon=1.0, delta=1e-7, **BAD_EVENT)

TAIL_CASES = [  # (n, b, band, σ, step): a prefix of `step` rounds, sorted by the step's means
    (8, 4, [1.0, 0.5], 1.0, 5),
    (12, 6, [1.0], 0.7, 9),
    (12, 4, [1.0, 0.6, 0.3], 1.3, 7),
    (10, 5, [1.0, 0.8], 0.5, 6),
]


def _prefix(n, b, band, step):
  means = random_allocation.slot_means(jaxacct.BallsInBins(iterations=n, cycle_length=b),
                                       jaxacct.BandedToeplitz(band))
  order = np.argsort(means[:, step], kind='stable')
  prefix = means[order, :step]
  identical = np.array([[np.array_equal(u, v) for v in prefix] for u in prefix])
  return prefix, identical


@pytest.mark.parametrize('direction', ['remove', 'add'])
@pytest.mark.parametrize('n, b, band, sigma, step', TAIL_CASES,
                         ids=[f'n{c[0]}-b{c[1]}-p{len(c[2])}-s{c[4]}' for c in TAIL_CASES])
def test_tail_bounds_hold_for_sampled_ternary_losses(n, b, band, sigma, step, direction):
  # Pr[L_i < τ_i] ≤ β (Theorem 4.8 / D.3) with y ~ (1/b)Σ_k N(μ_k, σ²I) (remove) or N(0, σ²I)
  # (add), L_i computed exactly from the prefix means; 200,000 draws give a standard error
  # of 0.0005 at β = 0.05, so 4 s.e. = 0.002. For i = 2 the variational bound is exact
  # (one predecessor: L_2 = L_{2,1} is Gaussian), so the fraction must also be ≥ β − 4 s.e.
  beta, draws = 0.05, 200_000
  prefix, identical = _prefix(n, b, band, step)
  tau = cc.tail_bounds(prefix @ prefix.T, identical, sigma, beta, direction)
  rng = np.random.default_rng(n * 1000 + step)
  noise = sigma * rng.standard_normal((draws, step))
  y = noise + (prefix[rng.integers(0, b, draws)] if direction == 'remove' else 0.0)
  log_density = -((y[:, None, :] - prefix[None, :, :])**2).sum(axis=-1) / (2 * sigma**2)
  slack = 4 * math.sqrt(beta * (1 - beta) / draws)
  for i in range(1, b):
    loss = special.logsumexp(log_density[:, :i], axis=1) - math.log(i) - log_density[:, i]
    fraction = float(np.mean(loss < tau[i]))
    assert fraction <= beta + slack, (i, tau[i], fraction)
    if i == 1 and not identical[1, 0]:
      assert fraction >= beta - slack, (tau[i], fraction)


def test_first_step_gives_the_uniform_prior():
  # At n = 1 every prefix is empty (all identical): τ_i = 0, λ̄_i = 1/i, p_i = 1/b.
  means = random_allocation.slot_means(jaxacct.BallsInBins(iterations=12, cycle_length=6),
                                       jaxacct.BandedToeplitz([1.0, 0.5]))
  for direction in ('remove', 'add'):
    _, log_p = cc.step_pairs(means[:, :1], 1.0, 1e-6, direction)
    np.testing.assert_allclose(np.exp(log_p[0]), np.full(6, 1 / 6), rtol=1e-13)


@pytest.mark.parametrize('direction', ['remove', 'add'])
def test_weights_are_a_distribution_shifted_to_the_largest_means(direction):
  means = random_allocation.slot_means(jaxacct.BallsInBins(iterations=16, cycle_length=8),
                                       jaxacct.BandedToeplitz([1.0, 0.6]))
  sorted_means, log_p = cc.step_pairs(means, 0.9, 1e-6, direction)
  np.testing.assert_allclose(np.exp(special.logsumexp(log_p, axis=1)), 1.0, rtol=1e-12)
  assert np.all(np.diff(sorted_means, axis=1) >= 0)
  # Stochastic dominance over the true prior (uniform): Pr_p[z ≥ i] ≥ (b − i + 1)/b.
  upper_tail = np.cumsum(np.exp(log_p)[:, ::-1], axis=1)[:, ::-1]
  assert np.all(upper_tail >= (np.arange(8, 0, -1) / 8)[None, :] - 1e-12)


def test_identical_predecessors_floor_the_tail_bound():
  # Remark D.5: components equal to μ_i contribute exactly 1 to the ratio, so
  # L_i ≥ ln(#identical/(i − 1)) surely. Two identical pairs and a distinct vector.
  prefix = np.array([[0.0, 0.0], [0.0, 0.0], [3.0, 0.0], [0.0, 0.0]])
  identical = np.array([[np.array_equal(u, v) for v in prefix] for u in prefix])
  for direction in ('remove', 'add'):
    tau = cc.tail_bounds(prefix @ prefix.T, identical, 0.2, 1e-9, direction)
    assert tau[1] == 0.0  # its only predecessor is identical: L ≡ 0
    assert tau[3] == pytest.approx(math.log(2 / 3), abs=1e-15)  # two of three identical
    assert tau[3] < math.log(2 / 3)  # ... floored one ulp below, never above
    # μ_2 = (3, 0) against two equal predecessors at 0: L_2 = (9 − 2·y·μ_2)/(2σ²) exactly,
    # N(112.5, 15²) under add; under remove its own component pulls the tail far below 0.
    if direction == 'add':
      assert tau[2] == pytest.approx(112.5 + 15 * special.ndtri(1e-9), rel=1e-12)
    else:
      assert tau[2] < -100


def test_log_weights_follow_the_reverse_hazards():
  tau = np.array([0.0, -1.0, 0.5, 2.0])
  hazard = 1 / (1 + np.arange(4) * np.exp(tau))  # λ̄_1 = 1
  expected = [hazard[i] * np.prod(1 - hazard[i + 1:]) for i in range(4)]
  np.testing.assert_allclose(np.exp(cc.log_weights(tau)), expected, rtol=1e-14)


@pytest.mark.parametrize('direction', ['remove', 'add'])
def test_step_pmf_is_dp_accountings_mixture_pmf_bit_for_bit(direction):
  # The vectorised inverse runs dp_accounting's bisection for all losses at once: the PMF
  # must be exactly dp_accounting's (connect-the-dots, pessimistic), equal means merged.
  from dp_accounting.pld import privacy_loss_distribution
  from jaxacct.deterministic import _pmfs
  rng = np.random.default_rng(3)
  means = np.concatenate([[0.0, 0.0], np.sort(rng.uniform(0.1, 1.5, 6))])
  probs = rng.dirichlet(np.ones(8))
  ours = cc.step_pmf(means, np.log(probs), 1.3, direction, 1e-3)
  values, merged = cc._merged(means, np.log(probs))  # pylint: disable=protected-access
  np.testing.assert_allclose(merged, np.concatenate([[probs[:2].sum()], probs[2:]]), rtol=1e-14)
  theirs = _pmfs.direction_pmf(privacy_loss_distribution.from_mixture_gaussian_mechanism(
      1.3, values.tolist(), merged.tolist(), value_discretization_interval=1e-3), direction)
  assert (ours._lower_loss, ours._infinity_mass) == (theirs._lower_loss, theirs._infinity_mass)
  np.testing.assert_array_equal(ours._probs, theirs._probs)


def test_composed_bound_is_sound_against_monte_carlo():
  # δ_PLD(ε) + δ_E over the N step pairs bounds H_{e^ε}(P‖Q) of the full pair: the Monte Carlo
  # δ̂ at the composed ε (per direction) must not exceed δ by more than 4 standard errors.
  import jax
  scheme = jaxacct.BallsInBins(iterations=12, cycle_length=12)
  matrix = jaxacct.BandedToeplitz([1.0, 0.4])
  sigma, delta, bad_event = 1.5, 2e-2, 1e-2
  means = random_allocation.slot_means(scheme, matrix)
  epsilons = {}
  for direction in ('remove', 'add'):
    sorted_means, log_p = cc.step_pairs(means, sigma, bad_event, direction)
    total = cc.compose([cc.step_pmf(sorted_means[n], log_p[n], sigma, direction, 1e-3)
                        for n in range(means.shape[1])])
    epsilons[direction] = total.get_epsilon_for_delta(delta - bad_event)
  estimate = jaxacct.estimate_delta(jax.random.key(9),
                                    jaxacct.MatrixMechanism(scheme, matrix, sigma),
                                    [epsilons['remove'], epsilons['add']], 60_000)
  for index, direction in enumerate(('remove', 'add')):
    delta_hat = float(estimate.delta_hat[direction][index])
    error = float(estimate.standard_error[direction][index])
    assert delta_hat <= delta + 4 * error, (direction, epsilons[direction], delta_hat)
