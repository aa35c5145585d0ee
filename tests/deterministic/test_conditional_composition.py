"""Seed 002 §4's per-step dominating pairs (``conditional_composition``): the variational tail
bounds against sampled ternary losses, the reverse-hazard weights, Remark D.5."""

import math

import numpy as np
import pytest
from scipy import integrate, special, stats

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
def test_tail_bound_costs_hold_for_sampled_ternary_losses(n, b, band, sigma, step, direction):
  # Each bound's bad-event cost (module docstring) is at most β, with L_i computed exactly from
  # the prefix means: remove (1/b)(1 − λ̄_i) E_{N(μ_i)}[(1 − e^{L_i − τ_i})_+] (= (1/b)
  # E_{N(μ_i)}[(1 − λ̄_i/λ_i)_+]), add E_{N(0)}[λ_i (1 − e^{L_i − τ_i})_+]. 200,000 draws;
  # each integrand is in [0, 1], so its standard error is at most √(cost/draws); 4 s.e. slack.
  # For i = 2 with a distinct predecessor the remove cost is exact (L_2 = L_{2,1} is
  # Gaussian), so the estimate must also reach β − 4 s.e.
  beta, draws = 0.01, 200_000
  prefix, identical = _prefix(n, b, band, step)
  tau = cc.tail_bounds(prefix @ prefix.T, identical, sigma, beta, direction)
  rng = np.random.default_rng(n * 1000 + step)
  noise = sigma * rng.standard_normal((draws, step))
  for i in range(1, b):
    y = noise + (prefix[i] if direction == 'remove' else 0.0)
    log_density = -((y[:, None, :] - prefix[None, :i + 1, :])**2).sum(axis=-1) / (2 * sigma**2)
    loss = special.logsumexp(log_density[:, :i], axis=1) - math.log(i) - log_density[:, i]
    excess = -np.expm1(np.minimum(loss - tau[i], 0.0))  # (1 − e^{L − τ})_+
    hazard = 1 / (1 + i * np.exp(loss))
    if direction == 'remove':
      samples = (1 - 1 / (1 + i * math.exp(tau[i]))) * excess / b
    else:
      samples = hazard * excess
    cost, error = samples.mean(), samples.std() / math.sqrt(draws)
    assert cost <= beta + 4 * error, (i, tau[i], cost, error)
    if direction == 'remove' and i == 1 and not identical[1, 0]:
      assert cost >= beta - 4 * error, (tau[i], cost, error)


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
  # The curve composes the merged steps (one epoch at σ/√2: b − 1 = 5 bounds) and the union
  # bound splits δ_E over exactly those.
  curve = cc.ConditionalCompositionCurve(dpsgd, 1.0, 1e-6, 1e-2)
  assert curve.tail_bound_counts == {'forward': 5}
  assert curve.significance(1e-6) == 1e-6 / 5
  assert curve.explain(1e-5)['tail_bounds'] == {'forward': 5}


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


def _exact_add_cost(tau, loss, predecessors):
  """E_{u~N(0,1)}[λ(u)(1 − e^{loss(u) − τ})_+], λ = 1/(1 + (i − 1)e^{loss}), by quadrature."""
  def integrand(u):
    gain = -math.expm1(min(loss(u) - tau, 0.0))
    return math.exp(-u * u / 2 - np.logaddexp(0.0, math.log(predecessors) + loss(u))) * gain
  return integrate.quad(integrand, -40, 40, limit=500, epsabs=0, epsrel=1e-11)[0] / math.sqrt(
      2 * math.pi)


def test_identical_predecessors_add_their_exact_share():
  # Remark D.5: components equal to μ_i contribute exactly 1 to the ratio, so with s of them
  # L_i ≥ ln(s/(i − 1) + e^X), X the variational bound on the others' share.
  prefix = np.array([[0.0, 0.0], [0.0, 0.0], [3.0, 0.0], [0.0, 0.0]])
  identical = np.array([[np.array_equal(u, v) for v in prefix] for u in prefix])
  tau = {d: cc.tail_bounds(prefix @ prefix.T, identical, 0.2, 1e-9, d) for d in ('remove', 'add')}
  for direction in ('remove', 'add'):
    assert tau[direction][1] == 0.0  # its only predecessor is identical: L ≡ 0
    # the distinct one is 15σ off: L_4 ≥ ln(2/3) always, and only just above with cost > β
    assert tau[direction][3] == pytest.approx(math.log(2 / 3), abs=1e-7)
  # μ_3 = (3, 0) against two equal predecessors at 0: L_3 = (9 − 2·y·μ_3)/(2σ²) exactly,
  # N(112.5, 15²) under N(0) and N(−112.5, 15²) under its own component. Remove: the cost is
  # (1/4)(1 − λ̄)·E[...] ≤ (1/4)·2e^τ, so τ may reach ≈ ln(2β) (λ̄ still ≈ 1). Add: λ(y) ≤
  # e^{−L}/2 is astronomically small, so the cost stays below β for every τ (the exact cost
  # saturates at 3.5e-14) and τ grows until the bracket stops (λ̄ = 0 to double precision).
  assert tau['remove'][2] == pytest.approx(math.log(2 * 1e-9), abs=0.05)
  assert tau['add'][2] > 1e6
  assert _exact_add_cost(tau['add'][2], lambda u: 112.5 + 15 * u, 2) <= 1e-9
  # One identical and one distinct predecessor at 0.1 (σ = 1, add): L = ln(½ + ½ r) with
  # ln r ~ N(−0.005, 0.1²) exactly, so the only slack left is λ's piecewise bound: the exact
  # cost at τ is at most β and uses 99 % of it (the probability bound, the quantile
  # ln(½ + ½ e^{−0.005 + 0.1 z_β}), was 0.05 lower).
  prefix = np.array([[0.0, 0.0], [0.1, 0.0], [0.0, 0.0]])
  identical = np.array([[np.array_equal(u, v) for v in prefix] for u in prefix])
  tau = cc.tail_bounds(prefix @ prefix.T, identical, 1.0, 1e-6, 'add')[2]
  cost = _exact_add_cost(tau, lambda u: math.log(0.5 + 0.5 * math.exp(-0.005 + 0.1 * u)), 2)
  assert 0.99e-6 <= cost <= 1e-6
  assert tau > math.log(0.5 + 0.5 * math.exp(-0.005 + 0.1 * special.ndtri(1e-6))) + 0.05


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


# ---------------------------------------------------------------- issue 31 item 9
def _grid(dimension, sigma, top, points):
  """A tensor grid over [−7σ, top + 7σ]^dimension: (points, cell volume)."""
  axis = np.linspace(-7 * sigma, top + 7 * sigma, points)
  mesh = np.meshgrid(*([axis] * dimension), indexing='ij')
  return np.stack(mesh, axis=-1).reshape(-1, dimension), (axis[1] - axis[0])**dimension


def _log_components(y, means, sigma):
  """ln N(y | m_k, σ²I) for every row m_k of ``means`` (k, grid)."""
  return np.stack([stats.norm.logpdf(y, m, sigma).sum(axis=1) for m in means])


TINY = {  # (scheme, band, σ): at most 3 merged steps, so the exact pair fits a 3-D grid
    'dpsgd-b3-k2': (jaxacct.BallsInBins(iterations=6, cycle_length=3), [1.0], 1.0),
    'banded-b3': (jaxacct.BallsInBins(iterations=3, cycle_length=3), [1.0, 0.5], 0.8),
    'banded-b3-p3': (jaxacct.BallsInBins(iterations=3, cycle_length=3), [1.0, 0.6, 0.3], 1.0),
    'banded-b2-k2': (jaxacct.BallsInBins(iterations=4, cycle_length=2), [1.0, 0.6], 1.0),
}


@pytest.mark.parametrize('direction', ['remove', 'add'])
@pytest.mark.parametrize('name', list(TINY))
def test_bad_event_cost_of_the_weights_is_at_most_delta_e_by_brute_force(name, direction):
  # The proof in the module docstring charges, per step and rank i above the lowest group,
  # remove: (1/b) E_{N(μ_i)}[(1 − λ̄_i/λ_i(y))_+]; add: E_{N(0)}[(λ_i(y) − λ̄_i)_+/(1 − λ̄_i)],
  # λ_i(y) = P(z = i | z ≤ i, prefix y) the exact posterior reverse hazard and λ̄_i the
  # weights' own (p_i / Σ_{j≤i} p_j). Summed over all steps it must not exceed δ_E; computed
  # here on a 2-D grid of the prefix (h = 0.04σ; the Riemann sum of these smooth integrands
  # is accurate to far better than the 1e-4 slack). The costs use a good part of δ_E (the
  # variational bounds are not loose here), so the bound is not vacuous.
  scheme, band, sigma = TINY[name]
  bad_event = 0.05
  means = random_allocation.slot_means(scheme, jaxacct.BandedToeplitz(band))
  curve = cc.ConditionalCompositionCurve(means, sigma, bad_event, 1e-3)
  for order, steps in curve.orders.items():
    sorted_means, log_p = cc.step_pairs(steps, sigma, bad_event, direction)
    b, total = steps.shape[0], 0.0
    for n in range(1, steps.shape[1]):
      rank = np.argsort(steps[:, n], kind='stable')  # the module's sorted order
      prefix = steps[rank, :n]
      y, volume = _grid(n, sigma, prefix.max(), 351)
      logs = _log_components(y, prefix, sigma)
      p = np.exp(log_p[n])
      lowest = int(np.searchsorted(sorted_means[n], sorted_means[n][0], side='right'))
      for i in range(lowest, b):  # 0-based ranks above the lowest group
        bar = p[i] / p[:i + 1].sum()
        hazard = np.exp(logs[i] - special.logsumexp(logs[:i + 1], axis=0))
        if direction == 'remove':
          total += (np.exp(logs[i]) * np.maximum(1 - bar / hazard, 0.0)).sum() * volume / b
        else:
          origin = stats.norm.logpdf(y, 0.0, sigma).sum(axis=1)
          total += (np.exp(origin) * np.maximum(hazard - bar, 0.0)).sum() * volume / (1 - bar)
    assert total <= bad_event + 1e-4, (order, total)
    assert total >= 0.05 * bad_event, (order, total)


@pytest.mark.parametrize('name', list(TINY))
def test_curve_bounds_the_exact_pair_by_brute_force(name):
  # δ(ε) = δ_PLD(ε) + δ_E of every order must be at least H_{e^ε} of the exact pair,
  # computed on a 3-D grid of the merged steps (which carry the same pair: checked against
  # the unmerged means' Gram matrix). δ_E = 0.05 makes the tail bounds aggressive.
  scheme, band, sigma = TINY[name]
  means = random_allocation.slot_means(scheme, jaxacct.BandedToeplitz(band))
  curve = cc.ConditionalCompositionCurve(means, sigma, 0.05, 1e-3)
  steps = curve.orders['forward']
  np.testing.assert_allclose(steps @ steps.T, means @ means.T, rtol=1e-14)
  y, volume = _grid(steps.shape[1], sigma, steps.max(), 121)
  log_p = special.logsumexp(_log_components(y, steps, sigma), axis=0) - math.log(steps.shape[0])
  log_q = stats.norm.logpdf(y, 0.0, sigma).sum(axis=1)
  for epsilon in (0.25, 0.5, 1.0, 2.0):
    exact = {'remove': (np.maximum(np.exp(log_p) - math.exp(epsilon) * np.exp(log_q), 0)).sum(),
             'add': (np.maximum(np.exp(log_q) - math.exp(epsilon) * np.exp(log_p), 0)).sum()}
    for direction in ('remove', 'add'):
      bound = curve.delta_for_epsilon(epsilon, direction=direction)
      assert bound >= exact[direction] * volume - 1e-4, (epsilon, direction, bound)


def test_printed_k_i_to_b_under_counts_lemma_4_1_and_the_own_component_suffices():
  # DP-SGD, b = 4, one epoch, step 3: slot 2 (c = 1) ranks last; its predecessors are slots 0,
  # 1 (prefixes e_0, e_1) and slot 3, whose prefix 0 equals slot 2's. Algorithm 4's printed
  # reference (1/b) Σ_{k=i}^b N(μ_k) keeps only slot 2's own component, so its τ* (largest τ
  # with (1/4) Pr_{N(0)}[L < τ] ≤ β) lets Lemma 4.1's bad event — under the marginal
  # (1/4) Σ_{k=1}^4 N(μ_k) — have probability ≥ 2β (slot 3's component is slot 2's).
  # The latent-slot argument charges less than the printed term, so it covers τ*.
  sigma, beta = 1.0, 0.01
  axis = np.linspace(-9, 10, 1901)
  h = axis[1] - axis[0]
  y0, y1 = np.meshgrid(axis, axis, indexing='ij')
  loss = np.log((np.exp((y0 - 0.5) / sigma**2) + np.exp((y1 - 0.5) / sigma**2) + 1) / 3)
  density = {m: stats.norm.pdf(y0, m[0], sigma) * stats.norm.pdf(y1, m[1], sigma) * h * h
             for m in ((0, 0), (1, 0), (0, 1))}

  def own(tau):  # (1/b) Pr_{N(μ_2)}[L < τ]: the printed sum over k = i … b
    return (density[0, 0] * (loss < tau)).sum() / 4

  low, high = -1.1, 3.0  # L ≥ ln(1/3): own(−1.1) = 0
  for _ in range(60):
    middle = (low + high) / 2
    low, high = (middle, high) if own(middle) <= beta else (low, middle)
  tau = low
  marginal = sum(d * (loss < tau) for d in (density[0, 0], density[0, 0], density[1, 0],
                                            density[0, 1])).sum() / 4
  assert marginal >= 2 * beta * 0.99
  latent = (1 - 1 / (1 + 3 * math.exp(tau))) * (
      density[0, 0] * -np.expm1(np.minimum(loss - tau, 0))).sum() / 4
  assert latent <= own(tau) <= beta


def test_reduced_means_merge_equal_steps_and_keep_the_gram_matrix():
  # k epochs of DP-SGD: one epoch at amplitude √k; a banded C over k epochs: b + p − 1 steps
  # (the first epoch's p − 1 partial columns, then the steady ones); zero columns dropped.
  dpsgd = random_allocation.slot_means(jaxacct.BallsInBins(iterations=12, cycle_length=4),
                                       jaxacct.BandedToeplitz([1.0]))
  reduced = cc.reduced_means(dpsgd)
  np.testing.assert_allclose(reduced, math.sqrt(3) * np.eye(4), rtol=2e-15)
  assert np.all(reduced >= math.sqrt(3) * np.eye(4))  # rounded up
  banded = random_allocation.slot_means(jaxacct.BallsInBins(iterations=40, cycle_length=8),
                                        jaxacct.BandedToeplitz([1.0, 0.5, 0.25]))
  merged = cc.reduced_means(banded)
  assert merged.shape == (8, 8 + 2)
  np.testing.assert_allclose(merged @ merged.T, banded @ banded.T, rtol=1e-14)
  padded = np.concatenate([np.zeros((3, 2)), np.eye(3)], axis=1)
  np.testing.assert_array_equal(cc.reduced_means(padded), np.eye(3))
  # DP-SGD reversed is the same pair (slots relabelled): one order; banded C: both.
  assert list(cc.step_orders(dpsgd)) == ['forward']
  assert list(cc.step_orders(banded)) == ['forward', 'reversed']


# ε(δ = 1e-5) per direction with δ_E = 1e-7 and a 1e-2 grid, after each sound change:
# "before" is commit db4abe1 (mixture reference measure, probability tail bounds, time order,
# unmerged steps); "cost" the bad-event costs of the module docstring (δ_E split evenly);
# "basis" + equal steps merged and the better order; "library" + ``allocation``.
PINNED = {  # name: (n, b, band, σ, order, {direction: (before, cost, basis, library)})
    'banded-k1': (6, 6, [1.0, 0.5], 2.5, 'reversed', {
        'remove': (2.1582989893500737, 2.023062958274548, 1.756811900728855,
                   1.7518354473954085),
        'add': (1.8072673186478714, 1.6848344103394057, 1.2935429802956817,
                1.2924971840074915)}),
    'bands3-k1': (8, 8, [1.0, 0.5, 0.3], 1.5, 'reversed', {
        'remove': (5.288862779769111, 5.091633564094833, 4.570808655962986,
                   4.5301529056090715),
        'add': (4.660979650495424, 4.492651380276144, 3.1838704403882856,
                3.169670365514344)}),
    'dpsgd-k2': (8, 4, [1.0], 2.0, 'forward', {  # one step mean: allocation is even
        'remove': (4.728696257127538, 4.5167863859272135, 3.6784511975692027,
                   3.6784511975692027),
        'add': (4.088110774185811, 3.8924743543977787, 1.8994227159494619,
                1.8994227159494619)}),
}


@pytest.mark.parametrize('direction', ['remove', 'add'])
@pytest.mark.parametrize('name', list(PINNED))
def test_each_sound_change_lowers_epsilon_as_pinned(name, direction, monkeypatch):
  # Deterministic host arithmetic: the pins hold to FFT rounding (1e-9 relative). Each stage
  # is below the one before (the first fails on db4abe1, whose ε is "before").
  n, b, band, sigma, order, pins = PINNED[name]
  before, cost, basis, library = pins[direction]
  means = random_allocation.slot_means(jaxacct.BallsInBins(iterations=n, cycle_length=b),
                                       jaxacct.BandedToeplitz(band))

  def epsilon():
    return cc.ConditionalCompositionCurve(means, sigma, 1e-7, 1e-2).epsilon_for_delta(
        1e-5, direction=direction)

  curve = cc.ConditionalCompositionCurve(means, sigma, 1e-7, 1e-2)
  assert curve.epsilon_for_delta(1e-5, direction=direction) == pytest.approx(library, rel=1e-9)
  assert curve.explain(1e-5)['order'][direction] == order
  monkeypatch.setattr(cc, 'allocation', lambda c, s: np.full(np.shape(c), 1 / np.size(c)))
  assert epsilon() == pytest.approx(basis, rel=1e-9)
  sorted_means, log_p = cc.step_pairs(means, sigma, 1e-7, direction)
  composed = mixture_pld.compose([mixture_pld.mixture_pmf(sorted_means[k], log_p[k], sigma,
                                                          direction, 1e-2) for k in range(n)])
  assert composed.get_epsilon_for_delta(1e-5 - 1e-7) == pytest.approx(cost, rel=1e-9)
  assert library <= basis < cost < before
  assert library < basis or len(band) == 1  # DP-SGD: every bound has the same step mean


def test_allocation_gives_leaky_components_more_of_delta_e():
  # Shares ∝ e^{c²/σ²} − 1, summing to at most 1 (the union bound), equal for equal means.
  shares = cc.allocation(np.array([1.0, 0.5, 0.3, 1.0]), 1.0)
  ratio = np.expm1(np.array([1.0, 0.25, 0.09, 1.0]))
  np.testing.assert_allclose(shares, ratio / ratio.sum(), rtol=1e-11)
  for means in ([1.0, 0.5, 0.3, 1.0], [40.0, 40.0], [0.1] * 7, [1e-9, 2.0, 3.0]):
    shares = cc.allocation(np.array(means), 1.0)
    assert math.fsum(shares) <= 1.0
  np.testing.assert_allclose(cc.allocation(np.array([40.0, 40.0]), 1.0), 0.5, rtol=1e-11)


def test_merged_multi_epoch_bound_is_sound_against_monte_carlo():
  # Three epochs of a banded C, merged to b + p − 1 = 5 steps: the curve's ε per direction at
  # δ = 2e-2 (δ_E = 1e-2) must hold for the Monte Carlo δ̂ of the unmerged mechanism to
  # within 4 standard errors.
  import jax
  scheme = jaxacct.BallsInBins(iterations=12, cycle_length=4)
  matrix = jaxacct.BandedToeplitz([1.0, 0.5])
  sigma, delta = 1.2, 2e-2
  curve = cc.ConditionalCompositionCurve(random_allocation.slot_means(scheme, matrix), sigma,
                                         1e-2, 1e-3)
  assert curve.orders['forward'].shape == (4, 5)
  epsilons = [curve.epsilon_for_delta(delta, direction=d) for d in ('remove', 'add')]
  estimate = jaxacct.estimate_delta(jax.random.key(11),
                                    jaxacct.MatrixMechanism(scheme, matrix, sigma), epsilons,
                                    60_000)
  for index, direction in enumerate(('remove', 'add')):
    delta_hat = float(estimate.delta_hat[direction][index])
    error = float(estimate.standard_error[direction][index])
    assert delta_hat <= delta + 4 * error, (direction, epsilons[index], delta_hat)


@pytest.mark.parametrize('direction', ['remove', 'add'])
def test_step_deltas_are_each_pairs_hockey_stick(direction):
  # H_{e^ε} of Σ p_i N(c_i, σ²) against N(0, σ²) (or reversed), by quadrature: the screen's
  # single-step δ must not exceed it (it is a lower bound) and is exact to 1e-9.
  rng = np.random.default_rng(5)
  means = np.array([np.sort(np.concatenate([[0.0], rng.uniform(0.1, 2.0, 4)])),
                    [0.0, 0.0, 0.5, 0.5, 3.0], np.zeros(5)])
  log_p = np.log(rng.dirichlet(np.ones(5), 3))
  sigma = 0.9
  for epsilon in (0.0, 0.3, 1.0, 3.0):
    lower = cc.step_deltas(means, log_p, sigma, epsilon, direction)
    for n in range(3):
      def gap(x, n=n):
        p = np.exp(log_p[n]) @ stats.norm.pdf(x, means[n], sigma)
        q = stats.norm.pdf(x, 0.0, sigma)
        return max(p - math.exp(epsilon) * q, 0.0) if direction == 'remove' else max(
            q - math.exp(epsilon) * p, 0.0)
      exact = integrate.quad(gap, -30, 30, limit=400, epsabs=1e-13)[0]
      assert exact - 1e-9 <= lower[n] <= exact + 1e-9, (epsilon, n)


def test_auto_does_not_compose_where_a_single_step_already_loses():
  # 3 bands at σ = 1 over one epoch of 6: at ε = 4 Rényi's remove δ (9e-6) is below what one
  # of conditional composition's step pairs alone leaks, so ``auto`` answers without
  # composing (``_cannot_beat``), and the full curve (7.5e-3) confirms it could not win.
  mech = mechanism(jaxacct.BallsInBins(iterations=6, cycle_length=6), c_col=[1.0, 0.5, 0.3],
                   sigma=1.0)
  options = {'value_discretization_interval': 1e-2}
  tight = accountant_module().privacy_curve(mech, accountant='auto', **options)
  condcomp = tight.curves['conditional_composition']
  best = tight.curves['renyi'].delta_for_epsilon(4.0, direction='remove')
  assert condcomp._cannot_beat(4.0, 'remove', best)
  assert tight.delta_for_epsilon(4.0, direction='remove') == best
  assert not condcomp._composed  # the screen answered
  full = base.get('conditional_composition').privacy_curve(mech, **options)
  assert full.delta_for_epsilon(4.0, direction='remove') >= best


@pytest.mark.parametrize('name', ['banded-k1', 'dpsgd-k2'])
def test_epsilon_floor_is_below_epsilon_without_composing(name):
  # The composition-free lower bound offered to ``auto``: never above ε(δ), and informative
  # (here 0.4 to 0.7 of it).
  n, b, band, sigma, *_ = PINNED[name]
  means = random_allocation.slot_means(jaxacct.BallsInBins(iterations=n, cycle_length=b),
                                       jaxacct.BandedToeplitz(band))
  for delta in (1e-5, 1e-3):
    curve = cc.ConditionalCompositionCurve(means, sigma, None, 1e-2)
    floors = {d: curve.epsilon_floor(delta, d) for d in ('remove', 'add')}
    assert not curve._composed
    for direction, floor in floors.items():
      epsilon = curve.epsilon_for_delta(delta, direction=direction)
      assert epsilon / 4 < floor <= epsilon
