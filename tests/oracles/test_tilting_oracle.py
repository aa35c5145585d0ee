"""Self-checks of the tilting oracle (tests/oracles/tilting.py; docs/proofs/tilting.md).

Every identity of the derivation is checked numerically against something computed another
way: the tilted law's normaliser against quadrature of ∫Q(P/Q)^α and against the Poisson
closed form; the tilted mixture density times the weight against P's density at random points;
the tilted estimator's mean against the hockey-stick divergence by quadrature; the b-min-sep
forward pass / FFBS against exhaustive enumeration of α-tuples; the scaled Chernoff–Hoeffding
bound against exact binomial probabilities. numpy/scipy only.
"""

from __future__ import annotations

import itertools
import math

import numpy as np
import pytest
from scipy import special, stats

from . import brute_force as bf
from . import tilting as tl

RNG_SEED = 20260445


def _law(kind, c, n, sigma, alpha, **kw):
  return tl.tilted_law_for(kind, c, n, sigma, alpha, **kw)


# ---------------------------------------------------------------------------
# (b) the support bound M(α, ε)
# ---------------------------------------------------------------------------


@pytest.mark.parametrize("alpha", [1.5, 2.0, 3.0, 7.3])
def test_kappa_is_the_maximum_of_the_tilted_integrand(alpha):
  t = 1.0 + np.concatenate([np.linspace(0.0, 3.0, 600_001), np.linspace(3.0, 400.0, 40_001)])
  values = t**(1 - alpha) - t**(-alpha)
  assert values.max() <= math.exp(tl.log_kappa(alpha)) * (1 + 1e-12)
  assert values.max() >= math.exp(tl.log_kappa(alpha)) * (1 - 1e-8)
  # Attained at t = α/(α − 1), i.e. L = ε + ln(α/(α − 1)).
  star = alpha / (alpha - 1)
  assert abs(star**(1 - alpha) - star**(-alpha) - math.exp(tl.log_kappa(alpha))) < 1e-14


def test_support_bound_is_the_cks_conversion():
  rng = np.random.default_rng(RNG_SEED)
  for _ in range(50):
    alpha = 1.0 + 10 * rng.random()
    d = 3 * rng.random()
    eps = 5 * rng.random()
    m = math.exp(tl.log_support_bound((alpha - 1) * d, alpha, eps))
    assert m == pytest.approx(tl.cks_delta(d, alpha, eps), rel=1e-12)


# ---------------------------------------------------------------------------
# (a) the normaliser
# ---------------------------------------------------------------------------


@pytest.mark.parametrize("alpha", [2, 3, 4])
def test_poisson_closed_form(alpha):
  for p, sigma in [(0.05, 0.7), (0.3, 1.0), (0.9, 2.0)]:
    law = _law("poisson", [1.0], 1, sigma, alpha, sampling_prob=p)
    assert law.log_z == pytest.approx(tl.poisson_log_z(p, sigma, alpha), rel=1e-13, abs=1e-14)
    law3 = _law("poisson", [1.0], 3, sigma, alpha, sampling_prob=p)  # C = I: a product
    assert law3.log_z == pytest.approx(tl.poisson_log_z(p, sigma, alpha, rounds=3), rel=1e-13)
  # A banded C under Poisson is not a product: Z_α exceeds the product of column norms' Z.
  law = _law("poisson", [1.0, 0.5], 3, 1.0, 2, sampling_prob=0.3)
  assert law.log_z > sum(tl.poisson_log_z(0.3, 1.0, 2, col_norm=math.sqrt(s))
                         for s in (1.25, 1.25, 1.0)) + 1e-3


@pytest.mark.parametrize("kind,kw,c,n,alpha", [
    ("poisson", dict(sampling_prob=0.3), [1.0], 1, 3),
    ("poisson", dict(sampling_prob=0.4), [1.0, 0.5], 2, 2),
    ("bminsep", dict(sampling_prob=0.4, min_sep=2, warm_start=False), [1.0, 0.6], 2, 3),
    ("bminsep", dict(sampling_prob=0.6, min_sep=2, warm_start=True), [0.8, 0.7], 2, 2),
    ("cyclic_poisson", dict(sampling_prob=0.5, cycle_length=2), [1.0, 0.4], 2, 2),
    ("balls_in_bins", dict(cycle_length=2), [1.0, 0.5], 2, 3),
])
def test_normaliser_matches_quadrature_of_the_renyi_moment(kind, kw, c, n, alpha):
  law = _law(kind, c, n, 1.0, alpha, **kw)
  assert tl.renyi_moment_by_quadrature(law) == pytest.approx(law.log_z, rel=1e-9, abs=1e-11)
  assert law.log_z >= 0.0  # Z_α = e^{(α−1)D_α} ≥ 1
  assert math.fsum(np.exp(law.log_pi)) == pytest.approx(1.0, abs=1e-12)


# ---------------------------------------------------------------------------
# (a) + (b): Q_α(y)·w(y) = P(y) pointwise, any n
# ---------------------------------------------------------------------------


@pytest.mark.parametrize("kind,kw,c,n,alpha", [
    ("bminsep", dict(sampling_prob=0.35, min_sep=3, warm_start=False), [1.0, 0.7, 0.4], 5, 2),
    ("bminsep", dict(sampling_prob=0.5, min_sep=3, warm_start=True), [0.9, 0.5, 0.6], 5, 3),
    ("poisson", dict(sampling_prob=0.2), [1.0, 0.5, 0.25], 4, 3),
    ("cyclic_poisson", dict(sampling_prob=0.7, cycle_length=3), [1.0, 0.3, 0.3], 5, 3),
    ("balls_in_bins", dict(cycle_length=2), [1.0, 0.6, 0.3], 5, 4),
])
def test_tilted_density_times_weight_is_p(kind, kw, c, n, alpha):
  law = _law(kind, c, n, 0.8, alpha, **kw)
  rng = np.random.default_rng(RNG_SEED)
  y = rng.normal(size=(200, n)) * 1.5 + rng.random((200, n)) * alpha
  lhs = law.log_density_tilted(y) + law.log_weight(y)
  np.testing.assert_allclose(lhs, law.log_density_p(y), rtol=0, atol=1e-10)


@pytest.mark.parametrize("kind,kw,c,n", [
    ("poisson", dict(sampling_prob=0.3), [1.0], 1),
    ("bminsep", dict(sampling_prob=0.5, min_sep=2, warm_start=True), [1.0, 0.6], 2),
])
def test_mean_of_the_weight_under_the_tilted_law_is_one(kind, kw, c, n):
  for alpha in (2, 3):
    law = _law(kind, c, n, 0.9, alpha, **kw)
    assert tl.tilted_mean_of_weight(law) == pytest.approx(1.0, abs=1e-10)


# ---------------------------------------------------------------------------
# The quadrature δ itself, against the Gaussian mechanism's closed form
# ---------------------------------------------------------------------------


def _gaussian_delta(norm, sigma, eps):
  """Balle & Wang (2018): H_{e^ε}(N(μ,σ²)‖N(0,σ²)), ‖μ‖ = norm."""
  a = norm / (2 * sigma)
  b = eps * sigma / norm
  return stats.norm.cdf(a - b) - math.exp(eps) * stats.norm.cdf(-a - b)


def test_quadrature_recovers_the_gaussian_mechanism():
  for eps in (0.0, 0.5, 2.0):
    x, lp = bf.participation_law("poisson", iterations=1, sampling_prob=1.0)
    d = tl.hockey_stick(x, lp, np.eye(1) * 1.3, 0.9, eps)
    assert d == pytest.approx(_gaussian_delta(1.3, 0.9, eps), rel=1e-11)
    # n = 2: cold b-min-sep with p = 1 is the deterministic pattern (1, 0); ‖Cx‖ = ‖c‖.
    x, lp = bf.participation_law("bminsep", iterations=2, sampling_prob=1.0, min_sep=2,
                                 warm_start=False)
    c = bf.strategy_matrix([0.8, 0.6], 2)
    for direction in ("remove", "add"):
      d = tl.hockey_stick(x, lp, c, 0.7, eps, direction)
      assert d == pytest.approx(_gaussian_delta(1.0, 0.7, eps), rel=1e-9, abs=1e-14)


# ---------------------------------------------------------------------------
# (b): E_{Q_α}[X] = δ_remove(ε) and δ_remove ≤ X_max ≤ M
# ---------------------------------------------------------------------------


@pytest.mark.parametrize("eps", [0.2, 1.0, 2.5])
def test_tilted_estimator_mean_is_delta_one_dimensional(eps):
  for alpha in (2, 3, 5):
    law = _law("poisson", [1.0], 1, 0.8, alpha, sampling_prob=0.3)
    delta = tl.hockey_stick(law.patterns, law.log_probs, law.c_matrix, 0.8, eps)
    assert tl.tilted_expectation_of_x(law, eps) == pytest.approx(delta, rel=1e-9)
    assert delta <= math.exp(law.log_support_bound(eps))


def test_tilted_estimator_mean_is_delta_two_dimensional():
  law = _law("bminsep", [1.0, 0.6], 2, 0.9, 2, sampling_prob=0.4, min_sep=2, warm_start=True)
  for eps in (0.3, 1.5):
    delta = tl.hockey_stick(law.patterns, law.log_probs, law.c_matrix, 0.9, eps)
    assert tl.tilted_expectation_of_x(law, eps) == pytest.approx(delta, rel=1e-9)
    for alpha in (2, 3, 4, 6):
      big = _law("bminsep", [1.0, 0.6], 2, 0.9, alpha, sampling_prob=0.4, min_sep=2,
                 warm_start=True)
      assert delta <= math.exp(big.log_support_bound(eps))


def test_x_never_exceeds_m_on_tilted_samples():
  law = _law("bminsep", [1.0, 0.7, 0.4], 6, 0.7, 3, sampling_prob=0.4, min_sep=3,
             warm_start=False)
  rng = np.random.default_rng(RNG_SEED)
  k = rng.choice(law.tuples.shape[0], size=5000, p=np.exp(law.log_pi) / np.exp(law.log_pi).sum())
  modes = bf.mode_vectors(law.patterns, law.c_matrix)
  y = modes[law.tuples[k]].sum(axis=1) + 0.7 * rng.normal(size=(5000, 6))
  for eps in (0.5, 2.0, 4.0):
    x = np.exp(law.log_weight(y)) * (-np.expm1(np.minimum(eps - law.loss(y), 0.0)))
    assert np.all(x <= math.exp(law.log_support_bound(eps)) * (1 + 1e-12))


# ---------------------------------------------------------------------------
# (d): b-min-sep forward pass and FFBS against enumeration
# ---------------------------------------------------------------------------

CHAIN_CASES = [
    # (n, b, c, p, warm, alpha, sigma)
    (6, 3, [1.0, 0.7, 0.4], 0.35, False, 2, 0.9),
    (5, 3, [1.0, 0.7, 0.4], 0.35, True, 3, 1.1),
    (5, 4, [1.0, 0.3, 0.2, 0.6], 0.6, True, 2, 1.0),
    (5, 2, [0.8, 0.5], 0.5, True, 3, 0.7),
    (4, 1, [1.0], 0.3, False, 3, 0.8),            # Poisson (b = 1)
    (5, 3, [1.0, 0.5, 0.2], 1.0, True, 2, 0.8),   # p = 1, warm: balls-in-bins, T = 3
    (5, 3, [1.0, 0.5, 0.2], 1.0, False, 3, 0.8),  # p = 1, cold: deterministic
    (4, 3, [1.0, 0.5], 0.4, True, 2, 0.6),        # bands < b
]


@pytest.mark.parametrize("n,b,c,p,warm,alpha,sigma", CHAIN_CASES)
def test_bminsep_forward_pass_and_ffbs_are_exact(n, b, c, p, warm, alpha, sigma):
  law = _law("bminsep", c, n, sigma, alpha, sampling_prob=p, min_sep=b, warm_start=warm)
  chain = tl.BminsepTiltChain(bf.strategy_matrix(c, n), p, b, warm, sigma, alpha)
  assert chain.log_z == pytest.approx(law.log_z, rel=1e-13, abs=1e-13)
  enumerated = tl.enumerated_pattern_law(law)
  induced = chain.induced_pattern_law()
  for key in set(enumerated) | set(induced):
    assert abs(enumerated.get(key, 0.0) - induced.get(key, 0.0)) <= 1e-13


def test_finite_horizon_gram_matters():
  """G[s, t] must use the columns truncated at row n; the infinite-horizon Toeplitz
  autocorrelation overstates the interactions of the last m_c − 1 rounds and changes Z_α."""
  n, b, c, p, sigma, alpha = 5, 3, [1.0, 0.7, 0.4], 0.5, 0.8, 2
  c_matrix = bf.strategy_matrix(c, n)
  gram = c_matrix.T @ c_matrix
  assert gram[n - 1, n - 1] == pytest.approx(c[0]**2)
  assert gram[n - 2, n - 1] == pytest.approx(c[1] * c[0])
  assert gram[n - 3, n - 2] == pytest.approx(c[1] * c[0] + c[2] * c[1])
  extended = bf.strategy_matrix(c, n + b)[:, :n]  # rows beyond n kept: infinite horizon
  wrong = extended.T @ extended / sigma**2
  exact = tl.BminsepTiltChain(c_matrix, p, b, True, sigma, alpha)
  naive = tl.BminsepTiltChain(c_matrix, p, b, True, sigma, alpha, gram=wrong)
  law = _law("bminsep", c, n, sigma, alpha, sampling_prob=p, min_sep=b, warm_start=True)
  assert exact.log_z == pytest.approx(law.log_z, rel=1e-13)
  assert naive.log_z > law.log_z + 1e-3


def test_ffbs_draws_with_extended_space_weight_estimate_delta():
  """Monte Carlo with the FFBS sampler and w̃ = ν(path)e^{I}e^{−(α−1)L}/π'(path) on n = 2."""
  n, b, c, p, sigma, alpha, eps = 2, 2, [1.0, 0.6], 0.4, 0.9, 2, 0.3
  c_matrix = bf.strategy_matrix(c, n)
  chain = tl.BminsepTiltChain(c_matrix, p, b, True, sigma, alpha)
  law = _law("bminsep", c, n, sigma, alpha, sampling_prob=p, min_sep=b, warm_start=True)
  delta = tl.hockey_stick(law.patterns, law.log_probs, c_matrix, sigma, eps)
  rng = np.random.default_rng(RNG_SEED)
  draws = 3000
  xs = np.empty(draws)
  for i in range(draws):
    pats, log_pi_path = chain.sample(rng)
    y = c_matrix @ pats.sum(axis=0) + sigma * rng.normal(size=n)
    # FFBS is exact, so π'(path) = ν(path)e^{I}/Z and w̃ = Z e^{−(α−1)L}.
    loss = float(law.loss(y))
    xs[i] = math.exp(chain.log_z - (alpha - 1) * loss) * (-math.expm1(min(eps - loss, 0.0)))
    assert math.isfinite(log_pi_path) and log_pi_path <= 0.0
  m = math.exp(law.log_support_bound(eps))
  assert xs.max() <= m * (1 + 1e-12)
  se = xs.std() / math.sqrt(draws)
  assert abs(xs.mean() - delta) <= 5 * se


def test_extended_space_weight_with_another_proposal():
  """Any tuple law π' > 0: E[w̃ f] = E_P[f] with w̃ = Πp·e^{I}·e^{−(α−1)L}/π', and
  sup X̃ = κ e^{−(α−1)ε} sup_τ Πp e^{I}/π' = M·sup π_α/π' (not M·sup Z π_α/π')."""
  sigma, alpha, eps = 0.8, 3, 0.7
  law = _law("poisson", [1.0], 1, sigma, alpha, sampling_prob=0.3)
  log_prior = law.log_probs[law.tuples].sum(axis=1)          # iid proposal π' = Π p(x_j)
  log_target = law.log_pi + law.log_z                        # Π p e^{I}
  delta = tl.hockey_stick(law.patterns, law.log_probs, law.c_matrix, sigma, eps)
  grid = np.linspace(-12, 16, 200_001)[:, None]
  loss = law.loss(grid)
  h = -np.expm1(np.minimum(eps - loss, 0.0))
  total, sup_x = 0.0, 0.0
  modes = bf.mode_vectors(law.patterns, law.c_matrix)
  for k in range(law.tuples.shape[0]):
    mean = modes[law.tuples[k]].sum(axis=0)[0]
    weight = np.exp(log_target[k] - log_prior[k] - (alpha - 1) * loss) * h
    dens = stats.norm.pdf((grid[:, 0] - mean) / sigma) / sigma
    total += math.exp(log_prior[k]) * np.trapezoid(dens * weight, grid[:, 0])
    sup_x = max(sup_x, float(weight.max()))
  assert total == pytest.approx(delta, rel=1e-6)
  ratio = float(np.max(log_target - log_prior))
  bound = math.exp(tl.log_kappa(alpha) - (alpha - 1) * eps + ratio)
  m = math.exp(law.log_support_bound(eps))
  assert bound == pytest.approx(m * math.exp(float(np.max(law.log_pi - log_prior))), rel=1e-12)
  assert sup_x <= bound * (1 + 1e-9) and sup_x >= 0.999 * bound
  assert bound * math.exp(law.log_z) > bound  # the brief's M·sup(Z·π_α/π') is Z× looser


# ---------------------------------------------------------------------------
# (e) add direction
# ---------------------------------------------------------------------------


@pytest.mark.parametrize("warm", [False, True])
def test_add_direction_loss_is_bounded_by_the_empty_pattern(warm):
  n, c = 5, [1.0, 0.7, 0.4]
  x, lp = bf.participation_law("bminsep", iterations=n, sampling_prob=0.3, min_sep=3,
                               warm_start=warm)
  empty = np.all(x == 0, axis=1)
  log_p0 = float(lp[empty][0])
  rng = np.random.default_rng(RNG_SEED)
  y = rng.normal(size=(2000, n)) * 3 - 2
  loss = bf.privacy_loss(x, lp, bf.strategy_matrix(c, n), y, 0.8)
  assert np.all(loss >= log_p0 - 1e-12)  # -L = ln Q/P ≤ −ln p_0
  assert loss.min() < log_p0 + 0.05      # and the bound is approached


def test_add_direction_vanishes_beyond_minus_log_p0():
  x, lp = bf.participation_law("bminsep", iterations=2, sampling_prob=0.5, min_sep=2,
                               warm_start=False)
  c = bf.strategy_matrix([1.0, 0.6], 2)
  log_p0 = float(lp[np.all(x == 0, axis=1)][0])  # (1 − p)² = 0.25
  assert tl.hockey_stick(x, lp, c, 0.8, -log_p0, "add") == 0.0
  assert tl.hockey_stick(x, lp, c, 0.8, -log_p0 + 0.1, "add") == 0.0
  assert tl.hockey_stick(x, lp, c, 0.8, -log_p0 - 0.1, "add") > 1e-6
  # The generalisation: X_add = (1 − e^{ε+L})₊ ≤ (1 − e^ε p_0)₊ surely.
  eps = -log_p0 - 0.1
  assert tl.hockey_stick(x, lp, c, 0.8, eps, "add") <= 1 - math.exp(eps + log_p0)


@pytest.mark.parametrize("alpha", [2.0, 2.5, 4.0])
def test_one_round_add_tilt(alpha):
  for q, sigma, eps in [(0.1, 0.7, 0.05), (0.3, 1.0, 0.1), (0.6, 0.5, 0.5)]:
    out = tl.one_round_add_tilt(q, 1.0, sigma, alpha, eps)
    assert out["delta"] > 0
    assert out["tilted"] == pytest.approx(out["delta"], rel=1e-8)
    assert out["delta"] <= math.exp(out["log_m"])
  out = tl.one_round_add_tilt(0.3, 1.0, 1.0, 2.0, -math.log(0.7) + 1e-3)
  assert out["delta"] == 0.0


# ---------------------------------------------------------------------------
# (c) EVR with a support bound
# ---------------------------------------------------------------------------


def test_scaled_chernoff_hoeffding_bounds_the_extremal_law():
  for n, base, true, m in [(2000, 5e-4, 1.2e-3, 1e-2), (300, 5e-6, 3e-5, 1e-4),
                           (50_000, 5e-6, 8e-6, 1e-3), (40, 1e-3, 5e-3, 8e-3)]:
    exact, bound = tl.scaled_binomial_acceptance(n, base, true, m)
    assert exact <= bound * (1 + 1e-12)
    assert bound < 1


def test_kl_of_scaled_arguments_decreases_in_m():
  """q_j grows with M (joint convexity of KL): the largest M over candidates is the safe one."""
  a, b = 5e-6, 2e-5
  values = [tl.bernoulli_kl(a / m, b / m) for m in (2e-5, 1e-4, 1e-3, 1e-2, 1.0)]
  assert all(x > y for x, y in zip(values, values[1:]))


def test_refined_overall_delta_is_the_rescaled_formula():
  for n, base, m in [(10**5, 5e-6, 1e-2), (10**6, 5e-6, 1e-3), (4000, 5e-6, 1e-4),
                     (10**4, 1e-3, 0.5)]:
    refined = tl.overall_delta(n, base, m, "refined")
    assert refined == pytest.approx(m * tl.overall_delta(n, base / m, 1.0), rel=1e-9)
    lead = tl.overall_delta(n, base, m, "lead")
    today = tl.overall_delta(n, base, 1.0)
    assert base < refined <= lead * (1 + 1e-12) and lead <= today * (1 + 1e-12)
  # M = 1: all three coincide (today's formula).
  assert tl.overall_delta(10**6, 5e-6, 1.0, "lead") == tl.overall_delta(10**6, 5e-6, 1.0)
  # M ≤ δ_b: certified without samples at δ = M.
  assert tl.overall_delta(1, 5e-6, 4e-6) == 4e-6


def test_today_overall_delta_reference_value():
  """M = 1 reproduces the minimum sample count of today's formula at δ_t = 1e-5, δ_b = δ_t/2
  (≈1.07e7; the library value is checked in docs/proofs/tilting.md's evidence)."""
  assert tl.minimum_samples(5e-6, 1e-5, 1.0) == 10_745_967
  assert tl.minimum_samples(5e-6, 1e-5, 1e-3) == tl.minimum_samples(5e-3, 1e-2, 1.0)
