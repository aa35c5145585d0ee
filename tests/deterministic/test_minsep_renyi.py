"""The ``"minsep_renyi"`` accountant (``deterministic/minsep_renyi.py``): the contract suite, the
single-chain statistics against exhaustive enumeration, soundness against exact hockey-stick
divergences (quadrature, ``tests/oracles/tilting.py``; dp_accounting's PLD for DP-SGD), the
remove Rényi orders against dp_accounting's RDP accountant, and the add-direction Rényi bounds
against the exact add moment by quadrature.
"""

from __future__ import annotations

import itertools
import math
import pathlib

import dp_accounting
import numpy as np
import pytest
from dp_accounting.pld import privacy_loss_distribution
from scipy import special

import jaxacct
from jaxacct.deterministic import base, minsep_chain, minsep_renyi, pld, pld_pmfs, random_allocation
from jaxacct.deterministic import renyi, tilt_bound

from accountant_contract import AccountantContract, Calibration, Case, mechanism
from oracles import brute_force as bf
from oracles import tilting as oracle
from test_minsep_chain import minsep_patterns

ROOT = pathlib.Path(__file__).resolve().parents[2]


WARM = jaxacct.BMinSep(sampling_prob=0.3, iterations=12, min_sep=3, warm_start=True)


class TestMinSepRenyiAccountant(AccountantContract):
  name = 'minsep_renyi'
  # ε(δ) and δ(ε) evaluate the same closed forms (Prop. 12, the analytic Gaussian); the
  # Gaussian ε is a bisection rounded up, so δ(ε(δ)) ≤ δ up to the last bits.
  consistency_slack = 1e-9

  def supported_cases(self):
    return [
        Case('bminsep-warm', mechanism(WARM, c_col=[1.0, 0.5], sigma=1.0)),
        Case('bminsep-cold-alpha4', mechanism(
            jaxacct.BMinSep(sampling_prob=0.25, iterations=10, min_sep=2, warm_start=False),
            c_col=[1.0, 0.6], sigma=0.8), {'alpha_max': 4}),
        Case('bminsep-small-budget', mechanism(WARM, c_col=[1.0, 0.5, 0.25], sigma=1.2),
             {'state_budget': 12}),  # C(4, 2) = 6, C(5, 3) = 10 fit; α ≥ 4 skipped
        Case('dpsgd', mechanism(jaxacct.Poisson(sampling_prob=0.1, iterations=20), sigma=1.0)),
        Case('cyclic-independent', mechanism(jaxacct.CyclicPoisson(
            sampling_prob=0.5, iterations=12, cycle_length=4), c_col=[1.0, 0.5], sigma=1.0)),
        Case('cyclic-equal-split-add-remove', mechanism(jaxacct.CyclicPoisson(
            sampling_prob=0.5, iterations=12, cycle_length=4, partition='equal_split'),
            c_col=[1.0, 0.5], sigma=1.0), {'adjacency': 'add_remove'}),
        Case('balls-in-bins-bands-over-cycle', mechanism(
            jaxacct.BallsInBins(iterations=12, cycle_length=4),
            c_col=[1.0, 0.5, 0.3, 0.2, 0.1], sigma=1.5), {'alpha_max': 6}),
    ]

  def unsupported_cases(self):
    poisson = jaxacct.Poisson(sampling_prob=0.1, iterations=6)
    return [
        Case('truncated', mechanism(jaxacct.BMinSep(sampling_prob=0.1, iterations=6, min_sep=2,
                                                    truncated_batch_size=3, dataset_size=50))),
        Case('multi-attribution', mechanism(jaxacct.MultiAttributionBMinSep(
            sampling_prob=0.1, iterations=6, min_sep=2, max_examples_per_user=2))),
        Case('dense', mechanism(poisson, matrix=jaxacct.LowerTriangular(np.tril(np.ones((6, 6)))))),
        Case('poisson-banded', mechanism(poisson, c_col=[1.0, 0.5])),
        Case('replace_one', mechanism(WARM), {'adjacency': 'replace_one'}),
        Case('budget-below-alpha-2', mechanism(WARM), {'state_budget': 5}),
    ]

  def calibration_case(self):
    return Calibration(jaxacct.BMinSep(sampling_prob=0.2, iterations=16, min_sep=4),
                       jaxacct.BandedToeplitz([1.0, 0.5]), epsilon=2.0, delta=1e-5,
                       tolerance=1e-3)


def _accountant():
  return base.get('minsep_renyi')


# ---------------------------------------------------------------- the single-chain statistics
def _law_and_patterns(kind, n, c_col, **fields):
  """(chain law, patterns, ln p_x) of one example under the scheme (oracle: Alg. 1/2 run
  round by round, ``brute_force.participation_law``)."""
  patterns, logs = bf.participation_law(kind, iterations=n, **fields)
  scheme = {'poisson': jaxacct.Poisson, 'bminsep': jaxacct.BMinSep,
            'cyclic_poisson': jaxacct.CyclicPoisson}[kind](iterations=n, **fields)
  return minsep_chain.law_for(scheme, len(c_col)), patterns, logs


def _reference_law(kind, n, scale, fields):
  """(patterns, ln r_x) of r_λ: the scheme with p → λp but p's initial law (warm start:
  Algorithm 2's stationary law at p, then Algorithm 1's transitions at λp), by running the
  rounds for every pattern (the oracle's own simulation, ``test_minsep_chain``'s method)."""
  p = fields['sampling_prob']
  if kind != 'bminsep' or not fields['warm_start'] or fields['min_sep'] == 1:
    return bf.participation_law(kind, iterations=n, **{**fields, 'sampling_prob': scale * p})
  patterns, logs = minsep_patterns(n, fields['min_sep'], p, True, transition_prob=scale * p)
  return patterns.astype(np.float64), logs


CHAIN_CASES = [
    ('poisson', 6, [1.0], dict(sampling_prob=0.3)),
    ('bminsep', 8, [1.0, 0.5], dict(sampling_prob=0.4, min_sep=2, warm_start=False)),
    ('bminsep', 8, [1.0, 0.6, 0.3], dict(sampling_prob=0.35, min_sep=3, warm_start=True)),
    ('bminsep', 7, [0.9, 0.4], dict(sampling_prob=1.0, min_sep=3, warm_start=True)),
    ('cyclic_poisson', 8, [1.0, 0.5], dict(sampling_prob=0.6, cycle_length=3,
                                           partition='independent')),
    ('cyclic_poisson', 7, [1.0, 0.5, 0.2], dict(sampling_prob=0.5, cycle_length=3,
                                                partition='equal_split')),
]


@pytest.mark.parametrize('kind, n, c_col, fields', CHAIN_CASES,
                         ids=[f'{c[0]}-{i}' for i, c in enumerate(CHAIN_CASES)])
def test_reference_moments_equal_the_enumeration(kind, n, c_col, fields):
  # For r_λ (the chain with p → λp, same initial law): μ = E_r[x], E_r‖Cx‖², ‖Cμ‖² and
  # KL(r‖p) from every pattern x ∈ {0,1}ⁿ; ln p₀ = ln p_{x = 0}. The chain's KL is the path KL:
  # equal to the pattern KL when patterns determine the path (cold start, Poisson, a fixed
  # phase), larger otherwise (the warm start's and the random phase's initial state).
  law, patterns, logs = _law_and_patterns(kind, n, c_col, **fields)
  scales = np.array([0.25, 0.6, 1.0])
  moments = minsep_renyi.reference_moments(law, c_col, n, scales)
  p = fields['sampling_prob']
  c = bf.strategy_matrix(c_col, n)
  zero = np.flatnonzero(patterns.sum(axis=1) == 0)
  if p == 1.0:  # kl(λ‖1) = ∞ for λ < 1: only r = p is kept, and p₀ = 0 (warm p = 1: bins)
    assert list(moments.scales) == [1.0] and moments.log_never == -math.inf
  else:
    assert moments.log_never == pytest.approx(float(logs[zero[0]]), rel=1e-12, abs=1e-12)
    assert moments.log_never <= float(logs[zero[0]])  # rounded down
  exact_path = kind == 'poisson' or fields.get('warm_start') is False or \
      fields.get('partition') == 'equal_split'
  for index, scale in enumerate(moments.scales):
    ref_patterns, ref_logs = _reference_law(kind, n, scale, fields)
    assert np.array_equal(ref_patterns, patterns) or scale < 1.0
    weights = np.exp(ref_logs)
    mu = weights @ ref_patterns
    second = weights @ np.sum((ref_patterns @ c.T)**2, axis=1)
    rows = {tuple(row): k for k, row in enumerate(patterns.astype(int))}
    base_logs = np.array([logs[rows[tuple(row)]] for row in ref_patterns.astype(int)])
    kl = float(weights @ (ref_logs - base_logs))
    assert moments.second_moments[index] == pytest.approx(second, rel=1e-12)
    assert moments.second_moments[index] >= second  # rounded up
    assert moments.mean_norms_squared[index] == pytest.approx(float(np.sum((c @ mu)**2)),
                                                              rel=1e-12)
    if exact_path:
      assert moments.divergences[index] == pytest.approx(kl, rel=1e-10, abs=1e-13)
    assert moments.divergences[index] >= kl - 1e-13


def test_balls_in_bins_moments_are_schuchardt_kalinin_lemma_3_4():
  # r = p: E‖Cx‖²/(2σ²) = tr(G)/(2Tσ²) and ‖Cμ‖²/(2σ²) = ΣG/(2T²σ²), the (a, c) of Lemma 3.4
  # (renyi.add_divergence_terms); p₀ = (T − n)/T when n < T, else 0.
  sigma = 1.3
  for n, cycle in ((12, 4), (3, 5)):
    scheme = jaxacct.BallsInBins(iterations=n, cycle_length=cycle)
    matrix = jaxacct.BandedToeplitz([1.0, 0.5, 0.3, 0.2, 0.1])
    moments = minsep_renyi.balls_in_bins_moments(scheme, matrix)
    a, c = renyi.add_divergence_terms(random_allocation.gram_matrix(scheme, matrix), sigma)
    assert moments.second_moments[0] / (2 * sigma**2) == pytest.approx(a, rel=1e-12)
    assert moments.mean_norms_squared[0] / (2 * sigma**2) == pytest.approx(c, rel=1e-12)
    expected = math.log((cycle - n) / cycle) if n < cycle else -math.inf
    assert moments.log_never == expected


# ---------------------------------------------------------------- the add Rényi bounds
ADD_CASES = [
    ('poisson', dict(sampling_prob=0.3), [1.0], 2, 0.8),
    ('bminsep', dict(sampling_prob=0.5, min_sep=2, warm_start=True), [1.0, 0.6], 2, 0.9),
    ('bminsep', dict(sampling_prob=0.4, min_sep=2, warm_start=False), [1.0, 0.5], 2, 0.7),
    ('cyclic_poisson', dict(sampling_prob=0.7, cycle_length=2, partition='independent'),
     [1.0, 0.8], 2, 1.0),
    ('poisson', dict(sampling_prob=0.2), [1.5], 1, 1.0),
]


@pytest.mark.parametrize('kind, fields, c_col, n, sigma', ADD_CASES,
                         ids=[f'{c[0]}-{i}' for i, c in enumerate(ADD_CASES)])
def test_add_renyi_bounds_dominate_the_exact_moment(kind, fields, c_col, n, sigma):
  # ln ∫Q^α P^{1−α} by tensor Gauss–Legendre (n ≤ 2) ≤ (α − 1)·[E‖Cx‖² + (α − 1)‖Cμ‖²]/(2σ²)
  # (the Rényi form of (A2) with r = p, library statistics) ≤ ln E exp(α(α − 1)‖Cx‖²/(2σ²))
  # (the Jensen bound, enumerated): the module docstring's proof that Jensen is dominated.
  law, patterns, logs = _law_and_patterns(kind, n, c_col, **fields)
  c = bf.strategy_matrix(c_col, n)
  norms = np.sum((patterns @ c.T)**2, axis=1)
  moments = minsep_renyi.reference_moments(law, c_col, n, [1.0])
  top = float(np.max(patterns @ c.T))
  for alpha in (1.5, 2.0, 3.0):
    def integrand(y):
      loss = bf.privacy_loss(patterns, logs, c, y, sigma)
      log_q = -0.5 * np.sum(y**2, axis=-1) / sigma**2 - n * math.log(sigma * math.sqrt(2 * math.pi))
      return np.exp(log_q + (1.0 - alpha) * loss)
    low, high = -14.0 * sigma - alpha * top, top + 14.0 * sigma
    exact = math.log(oracle.gauss_legendre_box(integrand, [low] * n, [high] * n, nodes=200))
    gibbs = (alpha - 1) * (moments.second_moments[0]
                           + (alpha - 1) * moments.mean_norms_squared[0]) / (2 * sigma**2)
    jensen = float(special.logsumexp(logs + alpha * (alpha - 1) * norms / (2 * sigma**2)))
    assert exact <= gibbs * (1 + 1e-9) + 1e-12, (alpha, exact, gibbs)
    assert gibbs <= jensen * (1 + 1e-12), (alpha, gibbs, jensen)
    assert exact > 0.0


# ---------------------------------------------------------------- soundness: hockey-stick δ
EXACT_CASES = [
    ('poisson-n2', jaxacct.Poisson(sampling_prob=0.3, iterations=2), [1.0], 0.7),
    ('bminsep-warm-n2', jaxacct.BMinSep(sampling_prob=0.5, iterations=2, min_sep=2), [1.0, 0.6],
     0.8),
    ('bminsep-cold-n2', jaxacct.BMinSep(sampling_prob=0.4, iterations=2, min_sep=2,
                                        warm_start=False), [1.0, 0.5], 0.6),
    ('cyclic-n2', jaxacct.CyclicPoisson(sampling_prob=0.8, iterations=2, cycle_length=2),
     [1.0, 0.7], 0.8),
    ('balls-in-bins-n2-T3', jaxacct.BallsInBins(iterations=2, cycle_length=3), [1.0, 0.5], 0.9),
]


def _pattern_law(scheme):
  if isinstance(scheme, jaxacct.BallsInBins):
    return bf.participation_law('balls_in_bins', iterations=scheme.iterations,
                                cycle_length=scheme.cycle_length)
  if isinstance(scheme, jaxacct.CyclicPoisson):
    return bf.participation_law('cyclic_poisson', iterations=scheme.iterations,
                                sampling_prob=scheme.sampling_prob,
                                cycle_length=scheme.cycle_length, partition=scheme.partition)
  if isinstance(scheme, jaxacct.Poisson):
    return bf.participation_law('poisson', iterations=scheme.iterations,
                                sampling_prob=scheme.sampling_prob)
  return bf.participation_law('bminsep', iterations=scheme.iterations,
                              sampling_prob=scheme.sampling_prob, min_sep=scheme.min_sep,
                              warm_start=scheme.warm_start)


@pytest.mark.parametrize('name, scheme, c_col, sigma', EXACT_CASES,
                         ids=[c[0] for c in EXACT_CASES])
def test_delta_is_at_least_the_exact_hockey_stick(name, scheme, c_col, sigma):
  # n = 2: H_{e^ε}(P‖Q) and H_{e^ε}(Q‖P) by quadrature (oracle, exact to ~1e-10), per direction.
  del name
  curve = _accountant().privacy_curve(mechanism(scheme, c_col=c_col, sigma=sigma))
  patterns, logs = _pattern_law(scheme)
  c = bf.strategy_matrix(c_col, scheme.iterations)
  for epsilon in (0.0, 0.5, 1.5, 3.0):
    for direction in ('remove', 'add'):
      exact = oracle.hockey_stick(patterns, logs, c, sigma, epsilon, direction)
      bound = curve.delta_for_epsilon(epsilon, direction=direction)
      assert bound >= exact - 1e-10, (direction, epsilon, bound, exact)


PROJECTED_CASES = [
    ('bminsep-warm-n8-b3', jaxacct.BMinSep(sampling_prob=0.3, iterations=8, min_sep=3),
     [1.0, 0.6, 0.3], 0.7),
    ('bminsep-cold-n7-b2', jaxacct.BMinSep(sampling_prob=0.5, iterations=7, min_sep=2,
                                           warm_start=False), [1.0, 0.8], 0.6),
    ('cyclic-n8-T3', jaxacct.CyclicPoisson(sampling_prob=0.6, iterations=8, cycle_length=3),
     [1.0, 0.5], 0.6),
    ('balls-in-bins-n6-T3', jaxacct.BallsInBins(iterations=6, cycle_length=3), [1.0, 0.7, 0.2],
     0.8),
]


@pytest.mark.parametrize('name, scheme, c_col, sigma', PROJECTED_CASES,
                         ids=[c[0] for c in PROJECTED_CASES])
def test_delta_is_at_least_the_exact_delta_of_a_projection(name, scheme, c_col, sigma):
  # n ≤ 8, b ≤ 3: the exact δ of the pair projected on u = Cμ/‖Cμ‖ (μ = E[x]), a 1-D mixture by
  # quadrature, is ≤ the mechanism's δ in each direction (post-processing), hence ≤ the bound.
  del name
  curve = _accountant().privacy_curve(mechanism(scheme, c_col=c_col, sigma=sigma))
  patterns, logs = _pattern_law(scheme)
  c = bf.strategy_matrix(c_col, scheme.iterations)
  modes = patterns @ c.T
  direction_u = np.exp(logs) @ modes
  projected = modes @ (direction_u / np.linalg.norm(direction_u))
  for epsilon in (0.25, 1.0, 2.0):
    for direction in ('remove', 'add'):
      exact = oracle.hockey_stick(projected[:, None], logs, np.ones((1, 1)), sigma, epsilon,
                                  direction)
      assert curve.delta_for_epsilon(epsilon, direction=direction) >= exact - 1e-10
      assert exact > 0.0


@pytest.mark.parametrize('q, n, sigma', [(0.2, 8, 0.8), (0.05, 8, 0.5)])
def test_dpsgd_delta_is_at_least_dp_accounting_pld(q, n, sigma):
  # Poisson DP-SGD (C = I): dp_accounting's optimistic PLD (a lower estimate of the exact δ),
  # per direction, up to its 1e-15 floor (the truncated tail mass it adds everywhere: where
  # (A1) proves δ_add = 0, for ε ≥ −ln p₀ = −n ln(1 − q), the PLD still reports 1e-15).
  curve = _accountant().privacy_curve(mechanism(jaxacct.Poisson(sampling_prob=q, iterations=n),
                                                sigma=sigma))
  pld_ = privacy_loss_distribution.from_gaussian_mechanism(
      sigma, sampling_prob=q, pessimistic_estimate=False, use_connect_dots=False,
      value_discretization_interval=1e-4).self_compose(n)
  for direction in ('remove', 'add'):
    pmf = pld_pmfs.direction_pmf(pld_, direction)
    for epsilon in (0.5, 1.0, 2.0, 4.0):
      assert curve.delta_for_epsilon(epsilon, direction=direction) >= \
          pmf.get_delta_for_epsilon(epsilon) - 1e-14, (direction, epsilon)


@pytest.mark.parametrize('q, sigma, n', [(0.05, 0.9, 30), (0.01, 1.2, 500), (0.3, 2.0, 7)])
def test_dpsgd_remove_divergences_equal_dp_accounting_rdp(q, sigma, n):
  # Integer orders of the Poisson-subsampled Gaussian: tilt_bound's closed form (rounded up by
  # ~1e-13 relative) against RdpAccountant (Mironov, Talwar & Zhang (2019) §3.3), 1e-9 relative.
  orders = list(range(2, 9))
  rdp = dp_accounting.rdp.RdpAccountant(orders)
  rdp.compose(dp_accounting.PoissonSampledDpEvent(q, dp_accounting.GaussianDpEvent(sigma)), n)
  curve = _accountant().privacy_curve(mechanism(jaxacct.Poisson(sampling_prob=q, iterations=n),
                                                sigma=sigma))
  np.testing.assert_array_equal(curve.orders, orders)
  np.testing.assert_allclose(curve.divergences, rdp.rdp, rtol=1e-9)
  assert np.all(curve.divergences >= rdp.rdp * (1 - 1e-12))


# ---------------------------------------------------------------- the curve's parts
def test_remove_side_is_the_best_order_and_add_side_the_best_bound():
  mech = mechanism(WARM, c_col=[1.0, 0.5], sigma=1.0)
  curve = _accountant().privacy_curve(mech, alpha_max=6)
  delta = 1e-4
  log_z = np.array([tilt_bound.partition(mech, a).log_z for a in range(2, 7)])
  orders = np.arange(2, 7)
  expected = float(np.min(renyi.epsilon_from_divergence(log_z / (orders - 1), orders, delta)))
  sensitivity = math.sqrt(pld.max_sensitivity_squared(mech.scheme, mech.matrix))
  expected = min(max(expected, 0.0), pld.gaussian_epsilon(1.0, sensitivity, delta))
  assert curve.epsilon_for_delta(delta, direction='remove') == pytest.approx(expected, rel=1e-12)
  # (A1) alone: δ_add = 0 from ε = −ln p₀ on, and never above (1 − e^ε p₀)₊.
  moments = minsep_renyi.plan_for(mech, 6).moments
  threshold = -moments.log_never
  assert curve.delta_for_epsilon(threshold * (1 + 1e-12), direction='add') == 0.0
  for epsilon in (0.0, 0.5, 1.0, 2.0):
    assert curve.delta_for_epsilon(epsilon, direction='add') <= max(
        -math.expm1(epsilon + moments.log_never), 0.0)
  report = curve.explain(delta)
  assert report['remove']['epsilon'] == curve.epsilon_for_delta(delta, direction='remove')
  assert report['add']['epsilon'] == curve.epsilon_for_delta(delta, direction='add')
  assert report['add']['p0'] == pytest.approx(math.exp(moments.log_never))
  assert report['remove']['orders'] == [2, 3, 4, 5, 6] and report['remove']['skipped_orders'] == {}


def test_orders_over_the_budget_are_skipped_and_named():
  mech = mechanism(WARM, c_col=[1.0, 0.5], sigma=1.0)
  curve = _accountant().privacy_curve(mech, state_budget=12)
  report = curve.explain(1e-3)
  # b = 3: C(α + 2, α) multiset states, 6 and 10 for α = 2, 3; 15 … 45 for α = 4 … 8.
  assert report['remove']['orders'] == [2, 3]
  assert report['remove']['skipped_orders'] == {a: math.comb(a + 2, a) for a in range(4, 9)}
  assert report['remove']['state_budget'] == 12


def test_probe_decisions_equal_the_curve_on_a_sigma_grid():
  # plan.meets decides from bounds where it can — chords of ln Z_α in θ = 1/σ² between the σ it
  # computed before (in a shuffled order here), convexity in α, the first order that passes —
  # and must give the full curve's decision, δ(ε) ≤ δ, at every σ (calibration relies on it).
  scheme = jaxacct.BMinSep(sampling_prob=0.2, iterations=16, min_sep=3, warm_start=True)
  matrix = jaxacct.BandedToeplitz([1.0, 0.6, 0.3])
  probe = jaxacct.MatrixMechanism(scheme, matrix, 1.0)
  reference = minsep_renyi.Plan.build(probe, 8, minsep_renyi.DEFAULT_STATE_BUDGET)
  sigmas = np.random.default_rng(7).permutation(np.geomspace(0.4, 4.0, 41))
  for epsilon, delta in ((1.0, 1e-5), (3.0, 1e-3), (0.5, 0.1)):
    plan = minsep_renyi.Plan.build(probe, 8, minsep_renyi.DEFAULT_STATE_BUDGET)
    computed = 0
    for sigma in sigmas:
      for alpha in plan.orders:  # θ-convexity brackets the exact ln Z_α (rounded up: log_z)
        lower, upper = plan._bounds(float(sigma), alpha)  # pylint: disable=protected-access
        exact = reference.log_partition(float(sigma), alpha)
        assert lower <= exact.computed and exact.log_z <= upper * (1 + 1e-15), (sigma, alpha)
      before = len(plan._partitions)  # pylint: disable=protected-access
      decision = plan.meets(float(sigma), epsilon, delta)
      computed += len(plan._partitions) - before  # pylint: disable=protected-access
      assert decision == (reference.curve(float(sigma)).delta_for_epsilon(epsilon) <= delta), (
          epsilon, delta, sigma)
    assert computed < len(sigmas) * len(reference.orders) / 2  # the bounds decide most probes


def test_bad_options_are_refused_with_the_allowed_range():
  mech = mechanism(WARM, c_col=[1.0, 0.5], sigma=1.0)
  accountant = _accountant()
  with pytest.raises(ValueError, match='alpha_max must be an integer >= 2'):
    accountant.epsilon_for_delta(mech, 1e-5, alpha_max=1)
  with pytest.raises(ValueError, match=r'alpha_max must be in \[2, 256\]'):
    accountant.epsilon_for_delta(mech, 1e-5, alpha_max=1000)
  with pytest.raises(TypeError, match='state_budget must be an integer >= 1'):
    accountant.epsilon_for_delta(mech, 1e-5, state_budget=2.5)
  with pytest.raises(ValueError, match='state_budget = 5; raise state_budget'):
    accountant.epsilon_for_delta(mech, 1e-5, state_budget=5)
  assert not accountant.supersedes_monte_carlo(mech)


# ---------------------------------------------------------------- reported figures
def test_quickstart_and_dpsgd_figures(capsys):
  # Reported, not tuned: ε at the quickstart's released σ (b-min-sep warm, n = 128, b = 8,
  # 4 square-root bands, σ = 1.17498 verified by Monte Carlo for ε = 2, δ = 1e-3) and at a
  # DP-SGD point next to dp_accounting's PLD. Asserted: the bounds a valid upper bound must
  # satisfy — not below dp_accounting's optimistic PLD (a lower estimate of the exact ε), not
  # above the unamplified Gaussian (min'ed in), and every direction reported by explain.
  from jaxacct import config as config_lib
  raw = config_lib.load(str(ROOT / 'configs' / 'quickstart.yaml'), [])
  scheme = config_lib.scheme_from(raw)
  matrix = config_lib.matrix_from(raw, scheme.iterations)
  quickstart = jaxacct.MatrixMechanism(scheme, matrix, 1.17498)
  curve = _accountant().privacy_curve(quickstart)
  report = curve.explain(1e-3)
  epsilon = curve.epsilon_for_delta(1e-3)
  assert epsilon == max(report['remove']['epsilon'], report['add']['epsilon'])
  unamplified = pld.gaussian_epsilon(1.17498, math.sqrt(
      pld.max_sensitivity_squared(scheme, matrix)), 1e-3)
  assert 0.0 < epsilon <= unamplified
  lines = [f'quickstart σ = 1.17498, δ = 1e-3: ε = {epsilon:.4f} (remove {report["remove"]}, '
           f'add {report["add"]}); unamplified {unamplified:.3f}']
  q, n, sigma, delta = 0.01, 1000, 1.0, 1e-5
  dpsgd = jaxacct.MatrixMechanism(jaxacct.Poisson(sampling_prob=q, iterations=n),
                                  jaxacct.BandedToeplitz([1.0]), sigma)
  ours = _accountant().privacy_curve(dpsgd, alpha_max=64)
  optimistic = privacy_loss_distribution.from_gaussian_mechanism(
      sigma, sampling_prob=q, pessimistic_estimate=False, use_connect_dots=False,
      value_discretization_interval=1e-3).self_compose(n)
  pessimistic = privacy_loss_distribution.from_gaussian_mechanism(
      sigma, sampling_prob=q, value_discretization_interval=1e-3).self_compose(n)
  for direction in ('remove', 'add'):
    lower = pld_pmfs.direction_pmf(optimistic, direction).get_epsilon_for_delta(delta)
    assert ours.epsilon_for_delta(delta, direction=direction) >= lower
  lines.append(f'DP-SGD q = {q}, n = {n}, σ = {sigma}, δ = {delta}: ε = '
               f'{ours.epsilon_for_delta(delta):.4f} (remove '
               f'{ours.epsilon_for_delta(delta, direction="remove"):.4f}, add '
               f'{ours.epsilon_for_delta(delta, direction="add"):.4f}); dp_accounting PLD '
               f'{pessimistic.get_epsilon_for_delta(delta):.4f}')
  with capsys.disabled():
    print('\n' + '\n'.join(lines))
