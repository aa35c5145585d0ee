"""Seed 002 §4's per-step dominating pairs (``conditional_composition``): the variational tail
bounds against sampled ternary losses, the reverse-hazard weights, Remark D.5."""

import math

import numpy as np
import pytest
from scipy import special

import jaxacct
from jaxacct.deterministic import base
from jaxacct.deterministic import conditional_composition as cc
from jaxacct.deterministic import mixture_pld
from jaxacct.deterministic import random_allocation

from accountant_contract import AccountantContract, Calibration, Case, mechanism

BALLS = jaxacct.BallsInBins(iterations=8, cycle_length=4)  # k = 2 epochs
BAD_EVENT = {'bad_event_delta': 1e-7, 'value_discretization_interval': 1e-2}


class TestConditionalCompositionAccountant(AccountantContract):
  name = 'conditional_composition'
  # ε(δ) and δ(ε) read the same composed PMF at a fixed δ_E; with δ_E = δ/2 (the default),
  # δ(ε) inverts ε(δ) (regula falsi on ln δ) to a relative 1e-4.
  consistency_slack = 2e-4

  def supported_cases(self):
    return [
        Case('dpsgd-k2', mechanism(BALLS, sigma=2.0), BAD_EVENT),
        Case('banded-k1', mechanism(jaxacct.BallsInBins(iterations=6, cycle_length=6),
                                    c_col=[1.0, 0.5], sigma=2.5), BAD_EVENT),
        Case('add_remove-partial-epoch', mechanism(
            jaxacct.BallsInBins(iterations=7, cycle_length=3), c_col=[1.0, 0.4], sigma=3.0),
             {**BAD_EVENT, 'adjacency': 'add_remove'}),
        Case('default-half-delta', mechanism(jaxacct.BallsInBins(iterations=6, cycle_length=3),
                                             c_col=[1.0, 0.5], sigma=2.0),
             {'value_discretization_interval': 1e-2}),
    ]

  def unsupported_cases(self):
    return [
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


def test_default_bad_event_delta_is_half_of_delta_and_delta_inverts_epsilon():
  # Seed 002 App. B.2: δ_E = δ/2. ε(δ) equals the explicit δ_E = δ/2 answer exactly; δ(ε) is
  # the smallest δ whose ε(δ) ≤ ε, within the bisection's relative 1e-4, never below it.
  accountant = base.get('conditional_composition')
  mech = mechanism(BALLS, sigma=2.0)
  grid = {'value_discretization_interval': 1e-2}
  delta = 1e-4
  epsilon = accountant.epsilon_for_delta(mech, delta, **grid)
  assert epsilon == accountant.epsilon_for_delta(mech, delta, bad_event_delta=delta / 2, **grid)
  curve = accountant.privacy_curve(mech, **grid)
  assert curve.explain(delta)['bad_event_delta'] == delta / 2
  for direction in ('remove', 'add'):
    target = curve.epsilon_for_delta(delta, direction=direction)
    found = curve.delta_for_epsilon(target, direction=direction)
    assert curve.epsilon_for_delta(found, direction=direction) <= target
    assert found <= delta * (1 + 1e-4)
    assert curve.epsilon_for_delta(found / (1 + 2e-4), direction=direction) > target


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
  # At n = 1 every prefix is empty (all identical): τ_i = 0, λ̄_i = 1/i, p_i = 1/b, and the
  # lowest group's mass sits on its top rank (λ̄ = 1 there): the merged mixture is the prior.
  means = random_allocation.slot_means(jaxacct.BallsInBins(iterations=12, cycle_length=6),
                                       jaxacct.BandedToeplitz([1.0, 0.5]))
  for direction in ('remove', 'add'):
    sorted_means, log_p = cc.step_pairs(means[:, :1], 1.0, 1e-6, direction)
    values, probs = mixture_pld.merged(sorted_means[0], log_p[0])
    np.testing.assert_array_equal(values, [0.0, 1.0])
    np.testing.assert_allclose(probs, [5 / 6, 1 / 6], rtol=1e-13)


def test_only_the_bounds_that_matter_are_taken():
  # DP-SGD (one-hot means): at step n only slot n has a nonzero mean, and it needs a bound
  # once some earlier slot has a distinct prefix (from step 2 on): N − 1 bounds, not N(b − 1).
  # A banded C takes one per slot with a distinct nonzero step mean above the zeros.
  dpsgd = random_allocation.slot_means(jaxacct.BallsInBins(iterations=12, cycle_length=6),
                                       jaxacct.BandedToeplitz([1.0]))
  assert cc.bound_count(dpsgd) == 11
  banded = random_allocation.slot_means(jaxacct.BallsInBins(iterations=6, cycle_length=6),
                                        jaxacct.BandedToeplitz([1.0, 0.5, 0.25]))
  # steps 2..6 have 2, 3, 3, 3, 3 nonzero slots above the zeros; at step 2 slot 2 (c = 1)
  # and slot 1 (c = .5) both have a predecessor of another prefix class, and so on.
  assert cc.bound_count(banded) == 2 + 3 + 3 + 3 + 3
  # The union bound splits δ_E over exactly those bounds.
  curve = cc.ConditionalCompositionCurve(dpsgd, 1.0, 1e-6, 1e-2)
  assert curve.significance(1e-6) == 1e-6 / 11
  assert curve.explain(1e-5)['tail_bounds'] == 11


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


def test_identical_predecessors_add_their_exact_share():
  # Remark D.5: components equal to μ_i contribute exactly 1 to the ratio, so with s of them
  # L_i ≥ ln(s/(i − 1) + e^{τ'}), τ' the bound on the others' share; never above the truth.
  prefix = np.array([[0.0, 0.0], [0.0, 0.0], [3.0, 0.0], [0.0, 0.0]])
  identical = np.array([[np.array_equal(u, v) for v in prefix] for u in prefix])
  for direction in ('remove', 'add'):
    tau = cc.tail_bounds(prefix @ prefix.T, identical, 0.2, 1e-9, direction)
    assert tau[1] == 0.0  # its only predecessor is identical: L ≡ 0
    assert tau[3] == pytest.approx(math.log(2 / 3), abs=1e-15)  # the distinct one is far off
    assert tau[3] < math.log(2 / 3)  # ... rounded down, never above
    # μ_2 = (3, 0) against two equal predecessors at 0: L_2 = (9 − 2·y·μ_2)/(2σ²) exactly,
    # N(112.5, 15²) under add; under remove its own component pulls the tail far below 0.
    if direction == 'add':
      assert tau[2] == pytest.approx(112.5 + 15 * special.ndtri(1e-9), rel=1e-12)
    else:
      assert tau[2] < -100
  # One identical and one distinct predecessor at 0.1 (σ = 1, add): L = ln(½ + ½ r) with
  # ln r ~ N(−0.005, 0.1²) exactly, so the β-quantile is ln(½ + ½ e^{−0.005 + 0.1 z_β}).
  prefix = np.array([[0.0, 0.0], [0.1, 0.0], [0.0, 0.0]])
  identical = np.array([[np.array_equal(u, v) for v in prefix] for u in prefix])
  tau = cc.tail_bounds(prefix @ prefix.T, identical, 1.0, 1e-6, 'add')
  exact = math.log(0.5 + 0.5 * math.exp(-0.005 + 0.1 * special.ndtri(1e-6)))
  assert tau[2] == pytest.approx(exact, abs=1e-13)  # exact up to rounding in ν + ξ·z_β


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
  from jaxacct.deterministic import pld_pmfs
  rng = np.random.default_rng(3)
  means = np.concatenate([[0.0, 0.0], np.sort(rng.uniform(0.1, 1.5, 6))])
  probs = rng.dirichlet(np.ones(8))
  ours = mixture_pld.mixture_pmf(means, np.log(probs), 1.3, direction, 1e-3)
  values, merged = mixture_pld.merged(means, np.log(probs))
  np.testing.assert_allclose(merged, np.concatenate([[probs[:2].sum()], probs[2:]]), rtol=1e-14)
  theirs = pld_pmfs.direction_pmf(privacy_loss_distribution.from_mixture_gaussian_mechanism(
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
    total = mixture_pld.compose([
        mixture_pld.mixture_pmf(sorted_means[n], log_p[n], sigma, direction, 1e-3)
        for n in range(means.shape[1])])
    epsilons[direction] = total.get_epsilon_for_delta(delta - bad_event)
  estimate = jaxacct.estimate_delta(jax.random.key(9),
                                    jaxacct.MatrixMechanism(scheme, matrix, sigma),
                                    [epsilons['remove'], epsilons['add']], 60_000)
  for index, direction in enumerate(('remove', 'add')):
    delta_hat = float(estimate.delta_hat[direction][index])
    error = float(estimate.standard_error[direction][index])
    assert delta_hat <= delta + 4 * error, (direction, epsilons[direction], delta_hat)


def _bisected_delta(curve, epsilon, direction):
  """The pre-issue-31 inversion (decade bracket, then bisection on ln δ): the oracle."""
  high = 1e-6
  while high < 0.5 and curve.epsilon_for_delta(high, direction=direction) > epsilon:
    high = min(0.5, high * 10)
  low = high / 10
  while curve.epsilon_for_delta(low, direction=direction) <= epsilon:
    low, high = low / 10, low
  while high / low - 1.0 > 1e-4:
    middle = math.sqrt(low * high)
    if curve.epsilon_for_delta(middle, direction=direction) <= epsilon:
      high = middle
    else:
      low = middle
  return high


@pytest.mark.parametrize('epsilon', [0.3, 1.0, 2.5])
def test_delta_of_epsilon_is_a_proven_pair_near_the_bisection_and_history_free(epsilon):
  mech = mechanism(jaxacct.BallsInBins(iterations=6, cycle_length=3), c_col=[1.0, 0.5],
                   sigma=2.0)
  accountant = base.get('conditional_composition')
  grid = {'value_discretization_interval': 1e-2}
  fresh = accountant.privacy_curve(mech, **grid)
  used = accountant.privacy_curve(mech, **grid)
  accountant_curve = cc.ConditionalCompositionCurve
  assert isinstance(fresh, accountant_curve)
  for other in (0.2, 4.0):  # earlier queries leave compositions in the cache
    used.delta_for_epsilon(other)
  for direction in ('remove', 'add'):
    found = fresh.delta_for_epsilon(epsilon, direction=direction)
    assert used.delta_for_epsilon(epsilon, direction=direction) == found
    assert fresh.epsilon_for_delta(found, direction=direction) <= epsilon  # proven
    # ε(δ) is monotone only up to the PLD grid: both searches find a crossing; they agree
    # to far better than the figures show (measured ≤ 7e-4 relative on larger mechanisms).
    assert found == pytest.approx(_bisected_delta(fresh, epsilon, direction), rel=2e-3)


def test_auto_asks_a_costly_curve_only_whether_it_beats_the_best_and_gets_the_minimum():
  mech = mechanism(jaxacct.BallsInBins(iterations=6, cycle_length=3), c_col=[1.0, 0.5],
                   sigma=2.0)
  options = {'value_discretization_interval': 1e-2}
  tight = accountant_module().privacy_curve(mech, accountant='auto', **options)
  assert [c.relative_cost for c in tight.curves.values()] != [1] * len(tight.curves)
  for epsilon in (0.5, 1.5, 3.0):
    for direction in ('remove', 'add'):
      full = min(chosen.privacy_curve(mech, **taken).delta_for_epsilon(
          epsilon, direction=direction)
                 for chosen, taken in accountant_module().chosen_accountants(mech, 'auto',
                                                                             options))
      assert tight.delta_for_epsilon(epsilon, direction=direction) == full


def test_report_curve_points_are_proven_and_form_a_decreasing_frontier():
  mech = mechanism(jaxacct.BallsInBins(iterations=6, cycle_length=3), c_col=[1.0, 0.5],
                   sigma=2.0)
  curve = accountant_module().privacy_curve(mech, accountant='auto',
                                            value_discretization_interval=1e-2)
  calls = []
  points = accountant_module().report_curve(curve, [1.0, 2.0], floor=1e-9,
                                            progress=lambda *call: calls.append(call))
  eps, deltas = points['epsilons'], points['delta']
  assert len(eps) >= 10 and eps == sorted(eps) and deltas == sorted(deltas, reverse=True)
  assert len(set(eps)) == len(eps) and eps[-1] > 3.0 or deltas[-1] <= 1e-9 * 1.0001
  for e, d in zip(eps, deltas):
    assert curve.epsilon_for_delta(d) == e  # each point is the accountant's own ε(δ)
  assert calls[-1][0] == calls[-1][1] and {c[2] for c in calls} == {'report curve'}
  assert [c[0] for c in calls] == list(range(1, len(calls) + 1))


def accountant_module():
  from jaxacct.deterministic import accountant
  return accountant
