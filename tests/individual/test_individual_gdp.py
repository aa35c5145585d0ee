"""μ-GDP conversions and the individual GDP filter (seed 004 Lemma 1, Thm 2, Algorithm 1)."""

from __future__ import annotations

import math

import numpy as np
import pytest
from scipy import integrate, stats

from jaxacct import individual
from jaxacct.individual import filter as filter_lib


def test_gdp_delta_is_the_gaussian_hockey_stick_and_matches_spec_values():
  # Spec 004 §2.8 [derived]: a heterogeneous Gaussian composition with μ² = 300/20² + 200/30²
  # + 500/50² gives δ(1, 3, 5) = 1.5687e-1, 3.5939e-3, 4.4548e-6.
  mu = math.sqrt(300 / 400 + 200 / 900 + 500 / 2500)
  np.testing.assert_allclose(individual.gdp_delta(mu, [1.0, 3.0, 5.0]),
                             [1.5687e-1, 3.5939e-3, 4.4548e-6], rtol=1e-4)
  # Against quadrature of H_{e^ε}(N(μ,1)‖N(0,1)) = ∫ (φ(x − μ) − e^ε φ(x))_+ dx.
  for mu, eps in ((0.3, 0.1), (1.0, 0.5), (2.5, 4.0)):
    start = eps / mu + mu / 2  # where the integrand turns positive
    value, _ = integrate.quad(lambda x: stats.norm.pdf(x - mu) - math.exp(eps) * stats.norm.pdf(x),
                              start, np.inf, epsabs=1e-14)
    assert individual.gdp_delta(mu, eps) == pytest.approx(value, rel=1e-8)
  assert individual.gdp_delta(0.0, 0.5) == 0.0


def test_gdp_epsilon_inverts_delta_and_budget_inverts_epsilon():
  mus = np.array([0.0, 1e-3, 0.1, 0.5, 1.0, 3.0, 10.0])
  epsilons = individual.gdp_epsilon(mus, 1e-5)
  assert epsilons[0] == 0.0 and epsilons.dtype == np.float64
  assert np.all(np.diff(epsilons) > 0)
  for mu, eps in zip(mus[1:], epsilons[1:]):
    if eps > 0:
      assert individual.gdp_delta(mu, eps) <= 1e-5
      assert individual.gdp_delta(mu, eps * (1 - 1e-9)) > 1e-5
  budget = individual.gdp_budget(1.0, 1e-5)
  assert individual.gdp_epsilon(budget, 1e-5) == pytest.approx(1.0, rel=1e-9)
  assert individual.gdp_delta(budget, 1.0) <= 1e-5 < individual.gdp_delta(budget * (1 + 1e-9), 1.0)


def test_gd_filter_numbers_of_the_paper():
  # reference-values.md §15: private GD, σ = 100, δ = 1e-5. Worst-case RDP (integer orders
  # 2..32, the Canonne et al. conversion of dp_accounting) at k = 420 is ε ≈ 0.8; GDP
  # (μ = √k/σ) allows k = 495 steps at that ε, and is roughly 10 % smaller at k = 420.
  from dp_accounting.rdp import rdp_privacy_accountant
  orders = np.arange(2, 33, dtype=np.float64)
  rdp_epsilon = rdp_privacy_accountant.compute_epsilon(orders, 420 * orders / (2 * 100**2),
                                                       1e-5)[0]
  assert rdp_epsilon == pytest.approx(0.8, abs=0.02)
  steps = np.arange(1, 700)
  gdp_epsilons = individual.gdp_epsilon(np.sqrt(steps) / 100, 1e-5)
  assert steps[gdp_epsilons <= rdp_epsilon].max() == 495
  assert 0.85 < gdp_epsilons[419] / rdp_epsilon < 0.95
  # MIMIC-III: B = √50/σ with the authors' σ gives the paper's ε = 2.75 at δ = 1e-5.
  assert individual.gdp_epsilon(math.sqrt(50) / 10.614652581338738, 1e-5) == pytest.approx(
      2.75, abs=0.01)


@pytest.mark.parametrize('retest', [False, True])
def test_filter_never_lets_an_example_exceed_its_budget(retest):
  rng = np.random.default_rng(0)
  sigma, steps, n = 3.0, 200, 64
  gdp_filter = individual.GDPFilter.for_target(epsilon=3.0, delta=1e-5, noise_multiplier=sigma,
                                               retest=retest)
  state = gdp_filter.init(n)
  scale = rng.uniform(0.05, 1.0, n)  # examples differ in how large their gradients are
  active_counts = []
  for _ in range(steps):
    ratios = np.minimum(scale * rng.uniform(0.5, 1.5, n), 1.0)
    before = state
    state, mask = gdp_filter.step(state, ratios)
    charge = (ratios / sigma) ** 2
    np.testing.assert_array_equal(state.spent, before.spent + np.where(mask, charge, 0.0))
    if not retest:
      assert not np.any(mask & ~before.active)  # dropped for good
    assert np.all(state.spent <= gdp_filter.budget**2)
    active_counts.append(int(mask.sum()))
  assert active_counts[0] == n and active_counts[-1] < n  # the filter did drop examples
  assert np.all(gdp_filter.spent_epsilons(state, 1e-5) <= gdp_filter.epsilon(1e-5) + 1e-12)
  assert gdp_filter.epsilon(1e-5) == pytest.approx(3.0, rel=1e-9)


def test_retest_lets_a_small_step_back_in():
  gdp_filter = individual.GDPFilter(budget=1.0, noise_multiplier=1.0, retest=True)
  state = gdp_filter.init(2)
  state, mask = gdp_filter.step(state, np.array([0.9, 0.1]))
  state, mask = gdp_filter.step(state, np.array([0.9, 0.1]))
  assert mask.tolist() == [False, True]  # 0.81 + 0.81 > 1
  state, mask = gdp_filter.step(state, np.array([0.3, 0.1]))
  assert mask.tolist() == [True, True]  # 0.81 + 0.09 ≤ 1: re-enters
  permanent = individual.GDPFilter(budget=1.0, noise_multiplier=1.0)
  state = permanent.init(1)
  for ratio, expected in ((0.9, True), (0.9, False), (0.3, False)):
    state, mask = permanent.step(state, np.array([ratio]))
    assert mask.tolist() == [expected]


def test_filter_checks_its_inputs():
  with pytest.raises(ValueError, match='budget'):
    individual.GDPFilter(budget=0.0, noise_multiplier=1.0)
  with pytest.raises(ValueError, match='noise_multiplier'):
    individual.GDPFilter(budget=1.0, noise_multiplier=-1.0)
  gdp_filter = individual.GDPFilter(budget=1.0, noise_multiplier=1.0)
  state = gdp_filter.init(3)
  with pytest.raises(ValueError, match='shape'):
    gdp_filter.step(state, np.ones(2))
  with pytest.raises(ValueError, match='clip before accounting'):
    gdp_filter.step(state, np.array([0.5, 1.5, 0.1]))
  with pytest.raises(ValueError, match='delta'):
    individual.gdp_epsilon(1.0, 1.0)
  with pytest.raises(ValueError, match='mu'):
    individual.gdp_epsilon(-1.0, 1e-5)
  assert isinstance(state, filter_lib.FilterState)
