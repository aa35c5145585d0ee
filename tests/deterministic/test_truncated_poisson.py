"""Tests for the truncated-Poisson accountant (seed 001, jaxacct.deterministic.truncated_poisson).

Oracles, none of which goes through the code under test:
- reference-values.md §11 (closed form, direct sum and 60-digit mpmath agree) and §9
  (dp_accounting 0.6.0);
- direct summation of binomial pmfs (the paper's original q = p·Σ pmf(s)·B/(s+1) / w₂, and
  E[min(Bin(n, p), B)]);
- scipy.integrate.quad of (p(y) − e^ε q(y))₊ with densities built from scipy.stats.norm;
- dp_accounting's own events (PoissonSampledDpEvent, TruncatedSubsampledGaussianDpEvent) through
  PLDAccountant at the same discretisation.
"""

from __future__ import annotations

import math

import dp_accounting
import numpy as np
import pytest
from dp_accounting.pld import pld_privacy_accountant
from scipy import integrate, stats

import jaxacct
from jaxacct.deterministic import pld as pld_module
from jaxacct.deterministic import truncated_poisson as tp

NR = dp_accounting.NeighboringRelation
_RELATION = {'add_remove': NR.ADD_OR_REMOVE_ONE, 'zero_out': NR.REPLACE_SPECIAL,
             'replace_one': NR.REPLACE_ONE}

# reference-values.md §11: (n, p, B, w₂, q), 13 significant digits.
_REGIMES = [
    (10000, 0.1, 1000, 5.035462207519e-01, 9.762340386563e-02),
    (10000, 0.1, 1050, 4.989022849595e-02, 9.876415619149e-02),
    (10000, 0.1, 1100, 5.236001296034e-04, 9.922072593297e-02),
    (1000, 0.05, 60, 8.555199879977e-02, 4.703281249356e-02),
    (100, 1.0, 10, 1.0, 0.1),
    (57600, 1793 / 57600, 2048, 1.126312371313e-09, 3.101616955971e-02),
    (60000, 0.01, 600, 5.053472025555e-01, 9.679371703785e-03),
    (60000, 0.01, 650, 2.214666048953e-02, 9.852264307273e-03),
]

# §11 one-step table: (n, p, B, σ), ε, AR-PQ, ZO-PQ, ZO-QP, RO.
_ONE_STEP = [
    ((10000, 0.1, 1000, 1.0), 0.5, 1.7043832042e-02, 1.8931031646e-02, 1.5969571439e-03, 1.9727528931e-02),
    ((10000, 0.1, 1000, 1.0), 1.0, 9.6168354200e-03, 1.0599062941e-02, 1.5057781450e-04, 1.0705491508e-02),
    ((10000, 0.1, 1000, 1.0), 2.0, 3.5097383283e-03, 3.8902905749e-03, 1.6958247213e-06, 3.9006378053e-03),
    ((10000, 0.1, 1050, 1.0), 0.5, 3.5466983164e-03, 3.7382950510e-03, 1.6428986461e-04, 4.9973751230e-03),
    ((10000, 0.1, 1050, 1.0), 1.0, 1.1574104604e-03, 1.2574567273e-03, 1.5653581123e-05, 1.3764229459e-03),
    ((10000, 0.1, 1050, 1.0), 2.0, 3.5758205461e-04, 3.9650302701e-04, 1.7897675782e-07, 3.9889260870e-04),
    ((1000, 0.05, 60, 0.8), 0.5, 2.8455479515e-03, 2.9145193125e-03, 1.1256848281e-04, 3.1858293577e-03),
    ((1000, 0.05, 60, 0.8), 1.0, 1.3525798210e-03, 1.3917441091e-03, 1.6698238572e-05, 1.4274632989e-03),
    ((1000, 0.05, 60, 0.8), 2.0, 6.0212177446e-04, 6.2196745973e-04, 5.5323415489e-07, 6.2331216191e-04),
]


def _dpa_epsilon(event, count, relation, delta, discretization):
  accountant = pld_privacy_accountant.PLDAccountant(
      neighboring_relation=relation, value_discretization_interval=discretization)
  accountant.compose(event, count)
  return accountant.get_epsilon(delta)


# ---------------------------------------------------------------- regimes
@pytest.mark.parametrize('n, p, b, w2, q', _REGIMES)
def test_regimes_match_reference(n, p, b, w2, q):
  regimes = tp.truncation_regimes(n, p, b)
  assert regimes.w2 == pytest.approx(w2, rel=1e-10)
  assert regimes.q == pytest.approx(q, rel=1e-10)
  assert regimes.w1 + regimes.w2 == pytest.approx(1.0, abs=1e-15)


def test_regimes_survive_underflow():
  # 1 − CDF is 0 here although the tail is 1.02e-31 (P1).
  n, p, b = 57600, 1793 / 57600, 2300
  assert 1.0 - stats.binom.cdf(b - 1, n - 1, p) == 0.0
  regimes = tp.truncation_regimes(n, p, b)
  assert regimes.w2 == pytest.approx(1.022668e-31, rel=1e-6)
  assert regimes.q == pytest.approx(3.10698684878e-02, rel=1e-10)
  # Both tails below 1e-308: scipy's logsf is −inf, q must still be exact (P3).
  regimes = tp.truncation_regimes(10000, 0.1, 2500)
  assert np.isneginf(stats.binom.logsf(2499, 9999, 0.1))
  assert regimes.log_w2 == pytest.approx(math.log(1.176126) - 403 * math.log(10), abs=1e-6)
  assert regimes.w2 == 0.0 and regimes.w1 == 1.0
  assert regimes.q == pytest.approx(9.99400797902e-02, rel=1e-10)


@pytest.mark.parametrize('n, p, b', [(50, 0.3, 12), (400, 0.05, 25), (1000, 0.05, 60),
                                     (3000, 0.2, 590), (2000, 0.01, 3), (300, 0.9, 250)])
def test_regimes_identity_and_bound(n, p, b):
  regimes = tp.truncation_regimes(n, p, b)
  k = np.arange(n + 1)
  expected = float(np.sum(np.minimum(k, b) * stats.binom.pmf(k, n, p))) / n
  assert p * regimes.w1 + regimes.q * regimes.w2 == pytest.approx(expected, rel=1e-12)
  assert 0.0 < regimes.q <= p * b / (b + 1)
  # The paper's original definition of q by direct summation (Thm 3.1).
  s = np.arange(b, n)
  pmf = stats.binom.pmf(s, n - 1, p)
  assert regimes.q == pytest.approx(p * np.sum(pmf * b / (s + 1)) / np.sum(pmf), rel=1e-11)


def test_regimes_degenerate():
  assert tp.truncation_regimes(100, 0.3, 100) == tp.TruncationRegimes(0.0, -math.inf, 1.0, 0.0, 0.0)
  assert tp.truncation_regimes(100, 0.3, 250).w2 == 0.0
  always = tp.truncation_regimes(100, 1.0, 10)
  assert (always.w1, always.w2, always.q) == (0.0, 1.0, 0.1)


# ---------------------------------------------------------------- one-step δ
@pytest.mark.parametrize('params, epsilon, ar, zo, zo_add, ro', _ONE_STEP)
def test_one_step_delta_matches_reference(params, epsilon, ar, zo, zo_add, ro):
  def delta(adjacency, direction):
    return tp.one_step_delta(*params, epsilon, adjacency, direction=direction)
  assert delta('add_remove', 'remove') == pytest.approx(ar, rel=1e-9)
  assert delta('add_remove', 'add') == 0.0  # ε ≥ −ln(1 − p) (P7)
  assert delta('zero_out', 'remove') == pytest.approx(zo, rel=1e-9)
  assert delta('zero_out', 'add') == pytest.approx(zo_add, rel=1e-9)
  assert delta('replace_one', 'remove') == pytest.approx(ro, rel=1e-9)
  assert delta('replace_one', 'add') == pytest.approx(ro, rel=1e-9)
  assert delta('zero_out', 'max') == pytest.approx(zo, rel=1e-9)


@pytest.mark.parametrize('w, regime, expected', [
    (0.1, 1, (0.031913233, 0.010572581, 3.3973813e-04)),
    (0.0976234, 2, (0.058925947, 0.029032003, 3.9149552e-03)),
])
def test_add_remove_reverse_direction_closed_form(w, regime, expected):
  # H(N(0) ‖ (1−w)N(0) + wN(μ)), σ = 1: the "add" direction of the AR pair. The table has 8
  # significant digits: rel 5e-8 covers half a unit in the last printed digit.
  pair = tp.dominating_pair('add_remove', regime, w, 1.0).reversed()
  for epsilon, value in zip((0.01, 0.05, 0.09), expected):
    assert pair.hockey_stick(epsilon) == pytest.approx(value, rel=5e-8)
  assert pair.hockey_stick(-math.log1p(-w) + 1e-9) == 0.0


def _quadrature_delta(adjacency, direction, n, p, b, sigma, epsilon):
  """w₁H₁ + w₂H₂ by scipy quad, with w₂, q by direct summation and densities from scipy.stats."""
  s = np.arange(b, n)
  pmf = stats.binom.pmf(s, n - 1, p)
  w2 = float(np.sum(pmf))
  q = p * float(np.sum(pmf * b / (s + 1))) / w2 if w2 > 0 else 0.0
  mixtures = {  # (P components, Q components) as (mean, weight), spec 001 §3
      ('add_remove', 1): ([(0, 1 - p), (1, p)], [(0, 1)]),
      ('add_remove', 2): ([(0, 1 - q), (2, q)], [(0, 1)]),
      ('zero_out', 1): ([(0, 1 - p), (1, p)], [(0, 1)]),
      ('zero_out', 2): ([(0, 1 - q), (2, q)], [(0, 1 - q), (-1, q)]),
      ('replace_one', 1): ([(0, 1 - p), (1, p)], [(0, 1 - p), (-1, p)]),
      ('replace_one', 2): ([(0, 1 - q), (2, q)], [(0, 1 - q), (-2, q)]),
  }
  total = 0.0
  for regime, weight in ((1, 1.0 - w2), (2, w2)):
    if weight == 0.0:
      continue
    first, second = mixtures[adjacency, regime]
    if direction == 'add':
      first, second = second, first

    def density(components, y):
      return sum(c * stats.norm.pdf(y, loc=m, scale=sigma) for m, c in components)

    def integrand(y, first=first, second=second):
      return max(density(first, y) - math.exp(epsilon) * density(second, y), 0.0)

    grid = np.linspace(-3 - 30 * sigma, 3 + 30 * sigma, 20001)
    values = density(first, grid) - math.exp(epsilon) * density(second, grid)
    # Both ends of every grid cell where the sign changes, so quad sees the kink's cell on its own.
    cells = np.flatnonzero(np.diff(np.sign(values)) != 0)
    kinks = sorted(set(grid[cells]) | set(grid[cells + 1]))
    h = integrate.quad(integrand, grid[0], grid[-1], points=kinks or None, limit=500,
                       epsabs=1e-15, epsrel=1e-12)[0]
    total += weight * h
  return total


def _random_cases(count, seed=2024):
  """(n, p, B, σ, ε) with B about half a standard deviation above n·p, so both regimes matter."""
  rng = np.random.default_rng(seed)
  cases = []
  for _ in range(count):
    n, p = int(rng.integers(30, 1500)), float(rng.uniform(0.02, 0.6))
    b = max(1, int(n * p + 0.5 * math.sqrt(n * p * (1 - p))))
    cases.append((n, p, b, float(rng.uniform(0.5, 2.0)), float(rng.uniform(0.05, 2.5))))
  return cases


_RANDOM_CASES = _random_cases(6)


@pytest.mark.parametrize('n, p, b, sigma, epsilon', _RANDOM_CASES)
@pytest.mark.parametrize('adjacency', tp.ADJACENCIES)
def test_one_step_delta_against_quadrature(adjacency, n, p, b, sigma, epsilon):
  for direction in ('remove', 'add'):
    expected = _quadrature_delta(adjacency, direction, n, p, b, sigma, epsilon)
    got = tp.one_step_delta(n, p, b, sigma, epsilon, adjacency, direction=direction)
    assert got == pytest.approx(expected, rel=1e-8, abs=1e-13)


def test_hockey_stick_grid_matches_scalar():
  pair = tp.dominating_pair('zero_out', 2, 0.3, 0.7)
  epsilons = np.array([-3.0, -0.2, 0.0, 0.37, 1.5, 4.0, 12.0])
  grid = pair.hockey_stick_grid(epsilons)
  scalar = np.array([pair.hockey_stick(e) for e in epsilons])
  np.testing.assert_allclose(grid, scalar, rtol=1e-11, atol=1e-300)
  low, high = pair.loss_limits()
  assert low == -math.inf and high == math.inf  # Q has a component at −1 < 0, P one at 2 > 0


# ---------------------------------------------------------------- PLD composition
@pytest.mark.parametrize('adjacency', ['add_remove', 'zero_out'])
def test_one_round_pld_matches_exact_one_step_per_direction(adjacency):
  # Pins the direction convention: pmf_remove = H(P‖Q), pmf_add = H(Q‖P).
  n, p, b, sigma = 10000, 0.1, 1000, 1.0
  pld = tp.truncated_poisson_pld(n, p, b, sigma, 1, adjacency)
  for name, pmf in (('remove', pld._pmf_remove), ('add', pld._pmf_add)):  # pylint: disable=protected-access
    for epsilon in (0.05, 0.5, 2.0):  # grid points: connect-the-dots is exact there
      exact = tp.one_step_delta(n, p, b, sigma, epsilon, adjacency, direction=name)
      assert pmf.get_delta_for_epsilon(epsilon) == pytest.approx(exact, rel=1e-9, abs=1e-15)
    for epsilon in (0.05003, 0.50005, 1.23456):  # off grid: pessimistic and close
      exact = tp.one_step_delta(n, p, b, sigma, epsilon, adjacency, direction=name)
      got = pmf.get_delta_for_epsilon(epsilon)
      assert exact - 1e-15 <= got <= exact * (1 + 1e-6) + 1e-15
  assert pld.get_delta_for_epsilon(0.5) == pytest.approx(
      tp.one_step_delta(n, p, b, sigma, 0.5, adjacency), rel=1e-9)


@pytest.mark.parametrize('adjacency', tp.ADJACENCIES)
def test_untruncated_equals_poisson_subsampled_gaussian(adjacency):
  # B ≥ n: never truncated, so the result is dp_accounting's Poisson-subsampled Gaussian.
  n, p, sigma, steps, delta, d = 5000, 0.02, 0.9, 50, 1e-6, 1e-4
  ours = tp.truncated_poisson_epsilon(n, p, n, sigma, steps, adjacency, delta,
                                      value_discretization_interval=d)
  event = dp_accounting.PoissonSampledDpEvent(p, dp_accounting.GaussianDpEvent(sigma))
  theirs = _dpa_epsilon(event, steps, _RELATION[adjacency], delta, d)
  # Same pair, same grid, both exact δ at grid points: only tail/grid-end handling differs.
  assert ours == pytest.approx(theirs, rel=1e-6)


def test_direction_convention_matches_dp_accounting():
  # One untruncated round, per direction: our pmf_remove/pmf_add are dp_accounting's REMOVE/ADD.
  from dp_accounting.pld import privacy_loss_distribution
  p, sigma = 0.3, 0.8
  ours = tp.truncated_poisson_pld(50, p, 50, sigma, 1, 'add_remove')
  theirs = privacy_loss_distribution.from_gaussian_mechanism(sigma, sampling_prob=p)
  epsilons = [-0.1, 0.2, 0.5, 1.0, 2.0]  # grid points of both
  for name in ('_pmf_remove', '_pmf_add'):
    np.testing.assert_allclose(getattr(ours, name).get_delta_for_epsilon(epsilons),
                               getattr(theirs, name).get_delta_for_epsilon(epsilons),
                               rtol=1e-9, atol=1e-15)
  assert ours._pmf_remove.get_delta_for_epsilon(1.0) > 10 * ours._pmf_add.get_delta_for_epsilon(1.0)


def test_always_truncating_add_remove_is_subsampled_gaussian_at_half_sigma():
  # p = 1, B < n: fixed batches; Thm 3.1 is then tight (rate B/n, sensitivity 2).
  n, b, sigma, steps, delta, d = 400, 40, 2.0, 20, 1e-5, 1e-4
  ours = tp.truncated_poisson_epsilon(n, 1.0, b, sigma, steps, 'add_remove', delta,
                                      value_discretization_interval=d)
  event = dp_accounting.PoissonSampledDpEvent(b / n, dp_accounting.GaussianDpEvent(sigma / 2))
  assert ours == pytest.approx(_dpa_epsilon(event, steps, NR.ADD_OR_REMOVE_ONE, delta, d), rel=1e-6)


@pytest.mark.slow
@pytest.mark.parametrize('b', [600, 650])
def test_composed_epsilon_against_dp_accounting(b):
  n, p, sigma, steps, delta, d = 60000, 0.01, 1.0, 100, 1e-5, 1e-4
  event = dp_accounting.TruncatedSubsampledGaussianDpEvent(n, p, b, sigma)
  eps = {adjacency: tp.truncated_poisson_epsilon(n, p, b, sigma, steps, adjacency, delta,
                                                 value_discretization_interval=d)
         for adjacency in tp.ADJACENCIES}
  theirs = {adjacency: _dpa_epsilon(event, steps, _RELATION[adjacency], delta, d)
            for adjacency in ('zero_out', 'replace_one')}
  # RO: dp_accounting uses the same pairs (r = 2 as σ/2, sensitivity 1), same grid step;
  # observed agreement ~1e-8 (grid ends and its inverse-loss precision differ).
  assert eps['replace_one'] == pytest.approx(theirs['replace_one'], rel=1e-6)
  # AR/ZO: our r = 2 pairs are dominated by the RO one it uses (P13), so ours ≤ theirs up to
  # the same 1e-6 discretisation noise, and strictly smaller by a visible margin when w₂ is large.
  assert eps['add_remove'] <= eps['zero_out'] <= theirs['zero_out'] * (1 + 1e-6)
  assert eps['zero_out'] < theirs['zero_out'] * (1 - 1e-3)


def test_reference_values_section_9_anchor():
  # reference-values §9 (T = 1000, δ = 1e-5, interval 1e-4): B = 650 → 5.16816 via dp_accounting;
  # "no truncation" → 1.82824 (= A1) via our B ≥ n path; our exact ZO is strictly below 5.16816.
  n, p, sigma, steps, delta = 60000, 0.01, 1.0, 1000, 1e-5
  event = dp_accounting.TruncatedSubsampledGaussianDpEvent(n, p, 650, sigma)
  assert _dpa_epsilon(event, steps, NR.REPLACE_SPECIAL, delta, 1e-4) == pytest.approx(5.16816, rel=1e-3)
  ours = tp.truncated_poisson_epsilon(n, p, 650, sigma, steps, 'zero_out', delta)
  assert 1.82824 < ours < 5.16816 * (1 - 5e-3)
  assert tp.truncated_poisson_epsilon(n, p, n, sigma, steps, 'zero_out', delta) == pytest.approx(
      1.82824, rel=1e-3)


def test_epsilon_and_delta_are_consistent():
  args = (20000, 0.02, 420, 1.1, 30, 'zero_out')
  epsilon = tp.truncated_poisson_epsilon(*args, 1e-6, value_discretization_interval=1e-3)
  delta = tp.truncated_poisson_delta(*args, epsilon, value_discretization_interval=1e-3)
  assert delta == pytest.approx(1e-6, rel=1e-2) and delta <= 1e-6 * (1 + 1e-9)  # float round-off


# ---------------------------------------------------------------- P12 and the cyclic reduction
def test_one_step_delta_is_not_monotone_in_dataset_size():
  # ZO, p = 0.1, B = 1000, σ = 1, ε = 1: δ rises while w₂ → 1, then falls as q ≈ B/n shrinks.
  sizes = [9000, 10000, 10500, 11000, 12000, 20000, 50000]
  deltas = [tp.one_step_delta(n, 0.1, 1000, 1.0, 1.0, 'zero_out') for n in sizes]
  peak = int(np.argmax(deltas))
  assert 0 < peak < len(sizes) - 1
  assert deltas[peak] > 2 * deltas[-1]


def test_cyclic_reduction_takes_worst_group_size():
  # m = 41 examples in T = 2 groups of 20 and 21; with p = 0.9, B = 5 the smaller group is worse.
  scheme = jaxacct.CyclicPoisson(sampling_prob=0.9, iterations=4, cycle_length=2,
                                 partition='equal_split', truncated_batch_size=5, dataset_size=41)
  matrix = jaxacct.BandedToeplitz([1.0, 0.5])
  sigma = 2.0
  result = tp.truncated_cyclic_poisson_pld(scheme, matrix, sigma, value_discretization_interval=1e-3)
  assert isinstance(result, tp.WorstCasePLD) and result.labels == (20, 21)
  sigma_eff = sigma / math.sqrt(1.25)
  small, large = (tp.truncated_poisson_pld(size, 0.9, 5, sigma_eff, 2, 'zero_out',
                                           value_discretization_interval=1e-3) for size in (20, 21))
  for epsilon in (0.5, 1.0):
    assert small.get_delta_for_epsilon(epsilon) > large.get_delta_for_epsilon(epsilon)
    assert result.get_delta_for_epsilon(epsilon) == small.get_delta_for_epsilon(epsilon)
  assert result.get_epsilon_for_delta(1e-3) == small.get_epsilon_for_delta(1e-3)
  np.testing.assert_array_equal(result.get_delta_for_epsilon([0.5, 1.0]),
                                small.get_delta_for_epsilon([0.5, 1.0]))
  # cyclic_poisson_pld routes truncating schemes here (zero-out).
  routed = pld_module.cyclic_poisson_pld(scheme, matrix, sigma, value_discretization_interval=1e-3)
  assert routed.get_delta_for_epsilon(1.0) == result.get_delta_for_epsilon(1.0)


def test_cyclic_reduction_single_group_size_and_untruncated_limit():
  scheme = jaxacct.CyclicPoisson(sampling_prob=0.05, iterations=10, cycle_length=4,
                                 partition='equal_split', truncated_batch_size=30, dataset_size=2000)
  matrix = jaxacct.BandedToeplitz([1.0, 1.0])
  result = tp.truncated_cyclic_poisson_pld(scheme, matrix, 3.0, adjacency='replace_one',
                                           value_discretization_interval=1e-3)
  direct = tp.truncated_poisson_pld(500, 0.05, 30, 3.0 / math.sqrt(2.0), 3, 'replace_one',
                                    value_discretization_interval=1e-3)
  assert result.get_epsilon_for_delta(1e-6) == direct.get_epsilon_for_delta(1e-6)
  # B ≥ group size: never truncated, equal to the untruncated reduction (add/remove = zero-out).
  untruncated = jaxacct.CyclicPoisson(sampling_prob=0.05, iterations=10, cycle_length=4,
                                      partition='equal_split', truncated_batch_size=500,
                                      dataset_size=2000)
  assert untruncated.truncates  # B < m, but B ≥ every group size (500): no group is ever cut
  ours = tp.truncated_cyclic_poisson_pld(untruncated, matrix, 3.0, value_discretization_interval=1e-3)
  plain = pld_module.cyclic_poisson_pld(
      jaxacct.CyclicPoisson(sampling_prob=0.05, iterations=10, cycle_length=4), matrix, 3.0,
      value_discretization_interval=1e-3)
  assert ours.get_epsilon_for_delta(1e-6) == pytest.approx(plain.get_epsilon_for_delta(1e-6), rel=1e-6)


def test_cyclic_reduction_refusals():
  scheme = jaxacct.CyclicPoisson(sampling_prob=0.1, iterations=8, cycle_length=4,
                                 partition='equal_split', truncated_batch_size=10, dataset_size=400)
  matrix = jaxacct.BandedToeplitz([1.0])
  with pytest.raises(ValueError, match='add_remove.*group sizes'):
    tp.truncated_cyclic_poisson_pld(scheme, matrix, 1.0, adjacency='add_remove')
  with pytest.raises(ValueError, match='adjacency must be one of'):
    tp.truncated_cyclic_poisson_pld(scheme, matrix, 1.0, adjacency='swap')
  with pytest.raises(ValueError, match='at most cycle_length'):
    tp.truncated_cyclic_poisson_pld(scheme, jaxacct.BandedToeplitz([1.0] * 5), 1.0)
  with pytest.raises(ValueError, match='not differentially private'):
    tp.truncated_cyclic_poisson_pld(scheme, matrix, 0.0)
  with pytest.raises(TypeError, match='CyclicPoisson'):
    tp.truncated_cyclic_poisson_pld(jaxacct.Poisson(sampling_prob=0.1, iterations=3), matrix, 1.0)
  with pytest.raises(ValueError, match='no truncated_batch_size'):
    tp.truncated_cyclic_poisson_pld(
        jaxacct.CyclicPoisson(sampling_prob=0.1, iterations=8, cycle_length=4,
                              partition='equal_split'), matrix, 1.0)
  # Random phase + truncation is refused by the constructor; if one ever arrives, refuse here too.
  with pytest.raises(ValueError, match='equal_split'):
    jaxacct.CyclicPoisson(sampling_prob=0.1, iterations=8, cycle_length=4,
                          truncated_batch_size=10, dataset_size=400)
  object.__setattr__(scheme, 'partition', 'independent')
  with pytest.raises(ValueError, match="partition='equal_split'"):
    tp.truncated_cyclic_poisson_pld(scheme, matrix, 1.0)


# ---------------------------------------------------------------- calibration
_CAL = dict(value_discretization_interval=1e-3)


def test_calibrate_noise_multiplier_round_trip():
  n, p, b, steps, target, delta = 10000, 0.1, 1000, 10, 2.0, 1e-5
  sigma = tp.calibrate_truncated_poisson_noise_multiplier(
      n, p, b, steps, 'zero_out', epsilon=target, delta=delta, tolerance=1e-3, **_CAL)
  assert tp.truncated_poisson_epsilon(n, p, b, sigma, steps, 'zero_out', delta, **_CAL) <= target
  assert tp.truncated_poisson_epsilon(n, p, b, sigma / 1.002, steps, 'zero_out', delta,
                                      **_CAL) > target


def test_calibrate_iterations_round_trip():
  n, p, b, sigma, target, delta = 60000, 0.01, 650, 1.0, 2.0, 1e-5
  steps = tp.calibrate_truncated_poisson_iterations(n, p, b, sigma, 'zero_out', epsilon=target,
                                                    delta=delta, **_CAL)
  assert steps > 1
  assert tp.truncated_poisson_epsilon(n, p, b, sigma, steps, 'zero_out', delta, **_CAL) <= target
  assert tp.truncated_poisson_epsilon(n, p, b, sigma, steps + 1, 'zero_out', delta, **_CAL) > target
  assert tp.calibrate_truncated_poisson_iterations(n, p, b, sigma, 'zero_out', epsilon=target,
                                                   delta=delta, max_iterations=5, **_CAL) == 5
  assert tp.calibrate_truncated_poisson_iterations(n, p, b, 0.3, 'zero_out', epsilon=0.01,
                                                   delta=1e-9, **_CAL) == 0


def test_calibrate_batch_size_round_trip():
  n, p, sigma, steps, target, delta = 60000, 0.01, 1.0, 50, 1.5, 1e-5
  candidates = range(560, 700, 10)
  b = tp.calibrate_truncated_batch_size(n, p, sigma, steps, 'zero_out', epsilon=target,
                                        delta=delta, candidates=candidates, **_CAL)
  assert b in candidates and b > 560
  assert tp.truncated_poisson_epsilon(n, p, b, sigma, steps, 'zero_out', delta, **_CAL) <= target
  for smaller in range(560, b, 10):
    assert tp.truncated_poisson_epsilon(n, p, smaller, sigma, steps, 'zero_out', delta,
                                        **_CAL) > target
  with pytest.raises(ValueError, match='no truncated_batch_size'):
    tp.calibrate_truncated_batch_size(n, p, sigma, steps, 'zero_out', epsilon=0.01, delta=delta,
                                      candidates=[560, 570], **_CAL)


# ---------------------------------------------------------------- bad input
_GOOD = dict(dataset_size=1000, sampling_prob=0.05, truncated_batch_size=60, noise_multiplier=1.0,
             iterations=3, adjacency='zero_out')


@pytest.mark.parametrize('field, value, error, message', [
    ('truncated_batch_size', 0, ValueError, 'truncated_batch_size must be an integer >= 1'),
    ('truncated_batch_size', 2.0, TypeError, 'truncated_batch_size must be an integer'),
    ('dataset_size', 0, ValueError, 'dataset_size must be an integer >= 1'),
    ('sampling_prob', 0.0, ValueError, r'sampling_prob must be in \(0, 1\]'),
    ('sampling_prob', 1.5, ValueError, r'sampling_prob must be in \(0, 1\]'),
    ('noise_multiplier', 0.0, ValueError, 'σ = 0 is not differentially private'),
    ('noise_multiplier', -1.0, ValueError, 'noise_multiplier must be finite and > 0'),
    ('noise_multiplier', math.inf, ValueError, 'noise_multiplier must be finite and > 0'),
    ('noise_multiplier', math.nan, ValueError, 'noise_multiplier must be finite and > 0'),
    ('iterations', 0, ValueError, 'iterations must be an integer >= 1'),
    ('adjacency', 'add_or_remove', ValueError, 'adjacency must be one of'),
])
def test_bad_input(field, value, error, message):
  args = dict(_GOOD, **{field: value})
  with pytest.raises(error, match=message):
    tp.truncated_poisson_pld(**args)
  if field != 'iterations':
    one_step = {k: v for k, v in args.items() if k != 'iterations'}
    with pytest.raises(error, match=message):
      tp.one_step_delta(epsilon=1.0, **one_step)


def test_bad_input_other_entry_points():
  with pytest.raises(ValueError, match=r'delta must be in \(0, 1\]'):
    tp.truncated_poisson_epsilon(**_GOOD, delta=0.0)
  with pytest.raises(ValueError, match='epsilon must be finite'):
    tp.truncated_poisson_delta(**_GOOD, epsilon=math.inf)
  with pytest.raises(ValueError, match='value_discretization_interval'):
    tp.truncated_poisson_pld(**_GOOD, value_discretization_interval=0.0)
  with pytest.raises(ValueError, match='direction must be one of'):
    tp.one_step_delta(1000, 0.05, 60, 1.0, 1.0, 'zero_out', direction='both')
  with pytest.raises(ValueError, match='regime must be 1 or 2'):
    tp.dominating_pair('zero_out', 3, 0.1, 1.0)
  with pytest.raises(ValueError, match='epsilon must be >= 0'):
    tp.calibrate_truncated_poisson_noise_multiplier(1000, 0.05, 60, 3, 'zero_out', epsilon=-1.0,
                                                    delta=1e-5)
  with pytest.raises(ValueError, match='candidates must be an integer >= 1'):
    tp.calibrate_truncated_batch_size(1000, 0.05, 1.0, 3, 'zero_out', epsilon=1.0, delta=1e-5,
                                      candidates=[0, 5])
  with pytest.raises(ValueError, match='σ = 0 is not differentially private'):
    tp.calibrate_truncated_poisson_iterations(1000, 0.05, 60, 0.0, 'zero_out', epsilon=1.0,
                                              delta=1e-5)
