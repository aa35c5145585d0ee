"""Exact ln Z_α for the tilt, both directions (``tilt_bound.partition``, ``tilt_partition``).

Remove direction, Z_α = E_iid[exp(Σ_{j<l} ⟨Cx_j, Cx_l⟩/σ²)] over α i.i.d. patterns
(docs/proofs/tilting.md (a)):
- against that expectation enumerated here (every α-tuple of every pattern, tiny n), for
  Poisson, cyclic Poisson (both partitions), b-min-sep (cold, warm) and balls-in-bins;
- against dp_accounting's RDP accountant ((α − 1)·RDP = ln Z_α, integer orders) for the
  Poisson-subsampled Gaussian and for cyclic Poisson as a composition of its phase's rounds;
- balls-in-bins against the Rényi accountant's exact rung (Schuchardt & Kalinin's recursion).
Add direction, Z'_α = E_Q[(P/Q)^{−(α−1)}] of the product mechanisms:
- one round's certified bracket against 40-digit mpmath quadrature and the independent
  oracle's SciPy quadrature (``tests/oracles/tilting.py``), the closed forms μ = 0 and p = 1;
- the product over rounds against tensor Gauss–Hermite quadrature of E_Q[e^{−(α−1)L}] with
  the brute-force loss L (n = 2, 3);
- add ≤ remove per round (Mironov, Talwar & Zhang compare the two; checked, not assumed).
Both: M(α, ε) is renyi.py's Canonne–Kamath–Steinke conversion at the same Rényi value.
"""

from __future__ import annotations

import itertools
import math

import dp_accounting
import mpmath
import numpy as np
import pytest
from dp_accounting.rdp import rdp_privacy_accountant
from scipy import special

import jaxacct
from jaxacct.deterministic import renyi, tilt_bound, tilt_partition
from jaxacct.errors import InputError
from oracles import tilting as oracle


def mechanism(scheme, c_col=(1.0,), sigma=1.0):
  return jaxacct.MatrixMechanism(scheme, jaxacct.BandedToeplitz(list(c_col)), sigma)


# ---------------------------------------------------------------- pattern laws, enumerated
def strategy(c_col, n):
  c = np.zeros((n, n))
  for k, value in enumerate(c_col):
    c += value * np.eye(n, k=-k)
  return c


def poisson_law(n, p):
  patterns = np.array(list(itertools.product((0.0, 1.0), repeat=n)))
  return patterns, np.prod(np.where(patterns == 1.0, p, 1.0 - p), axis=1)


def cyclic_law(n, cycle, p, independent):
  """Phase 0 (equal split), or a uniform phase (independent): Bernoulli(p) in its rounds."""
  phases = range(cycle) if independent else [0]
  patterns, probs = [], []
  for phase in phases:
    rounds = np.arange(phase, n, cycle)
    for bits in itertools.product((0.0, 1.0), repeat=rounds.size):
      x = np.zeros(n)
      x[rounds] = bits
      patterns.append(x)
      probs.append(np.prod([p if b else 1.0 - p for b in bits]) / len(phases))
  return np.array(patterns), np.array(probs)


def minsep_law(n, b, p, warm):
  """Dong & Ganesh (2026) Alg. 1/2: state k = rounds still barred; from 0 participate w.p. p
  (then barred b − 1 rounds)."""
  start = {0: 1.0}
  if warm:
    start = {0: 1.0 / (1.0 + (b - 1) * p)}
    start.update({k: p / (1.0 + (b - 1) * p) for k in range(1, b)})
  paths = [((), k, w) for k, w in start.items()]
  for _ in range(n):
    grown = []
    for x, k, w in paths:
      if k > 0:
        grown.append((x + (0.0,), k - 1, w))
        continue
      if p < 1.0:
        grown.append((x + (0.0,), 0, w * (1.0 - p)))
      grown.append((x + (1.0,), b - 1, w * p))
    paths = grown
  return np.array([x for x, _, _ in paths]), np.array([w for _, _, w in paths])


def balls_in_bins_law(n, cycle):
  patterns = np.array([(np.arange(n) % cycle == i).astype(float) for i in range(cycle)])
  return patterns, np.full(cycle, 1.0 / cycle)


def enumerated_log_z(patterns, probs, c_col, sigma, alpha):
  """ln Σ over ordered α-tuples of Π p_{x_j}·exp(Σ_{j<l} ⟨Cx_j, Cx_l⟩/σ²)."""
  modes = patterns @ strategy(c_col, patterns.shape[1]).T
  inner = modes @ modes.T / sigma**2
  logs = []
  for tup in itertools.product(range(len(probs)), repeat=alpha):
    pairs = sum(inner[tup[j], tup[l]] for j in range(alpha) for l in range(j + 1, alpha))
    logs.append(sum(math.log(probs[i]) for i in tup) + pairs)
  return float(special.logsumexp(logs))


REMOVE_CASES = [
    ('poisson', jaxacct.Poisson(sampling_prob=0.3, iterations=4), [1.2], 0.9, 3,
     lambda: poisson_law(4, 0.3), 'poisson'),
    ('poisson-alpha-4', jaxacct.Poisson(sampling_prob=0.1, iterations=3), [1.0], 0.7, 4,
     lambda: poisson_law(3, 0.1), 'poisson'),
    ('cyclic-equal-split', jaxacct.CyclicPoisson(sampling_prob=0.5, iterations=7, cycle_length=3,
                                                 partition='equal_split'),
     [1.0, 0.6, 0.3], 0.8, 3, lambda: cyclic_law(7, 3, 0.5, False), 'fixed_phase'),
    ('cyclic-independent', jaxacct.CyclicPoisson(sampling_prob=0.4, iterations=6, cycle_length=2),
     [1.0, 0.5], 0.9, 3, lambda: cyclic_law(6, 2, 0.4, True), 'chain'),
    ('bminsep-cold', jaxacct.BMinSep(sampling_prob=0.35, iterations=7, min_sep=3,
                                     warm_start=False),
     [1.0, 0.6, 0.3], 0.9, 2, lambda: minsep_law(7, 3, 0.35, False), 'chain'),
    ('bminsep-warm', jaxacct.BMinSep(sampling_prob=0.35, iterations=7, min_sep=3,
                                     warm_start=True),
     [1.0, 0.6, 0.3], 0.9, 3, lambda: minsep_law(7, 3, 0.35, True), 'chain'),
    ('balls-in-bins', jaxacct.BallsInBins(iterations=8, cycle_length=3), [1.0, 0.7, 0.2, 0.1],
     1.1, 4, lambda: balls_in_bins_law(8, 3), 'balls_in_bins'),
]


@pytest.mark.parametrize('name, scheme, band, sigma, alpha, law, method', REMOVE_CASES,
                         ids=[case[0] for case in REMOVE_CASES])
def test_remove_log_z_is_the_enumerated_pair_expectation(name, scheme, band, sigma, alpha, law,
                                                         method):
  del name
  patterns, probs = law()
  assert probs.sum() == pytest.approx(1.0, rel=1e-14)
  expected = enumerated_log_z(patterns, probs, band, sigma, alpha)
  result = tilt_bound.partition(mechanism(scheme, band, sigma), alpha)
  assert result.method == method
  assert result.computed == pytest.approx(expected, rel=1e-12, abs=1e-13)
  assert expected <= result.log_z <= expected + 1e-12 * (1.0 + abs(expected))  # rounded up


# ---------------------------------------------------------------- dp_accounting's RDP
ORDERS = list(range(2, 13))


def _rdp(events):
  accountant = rdp_privacy_accountant.RdpAccountant(orders=ORDERS)
  for event, count in events:
    accountant.compose(event, count)
  return accountant.rdp


@pytest.mark.parametrize('q, sigma, n', [(0.01, 1.0, 1000), (1 / 256, 1.1, 2560),
                                         (0.05, 2.0, 500), (0.3, 0.8, 7), (1.0, 10.0, 100)])
def test_poisson_remove_log_z_is_dp_accounting_rdp(q, sigma, n):
  event = dp_accounting.PoissonSampledDpEvent(q, dp_accounting.GaussianDpEvent(sigma))
  rdp = _rdp([(event, n)])
  scheme = jaxacct.Poisson(sampling_prob=q, iterations=n)
  for alpha, value in zip(ORDERS, rdp):
    log_z = tilt_bound.partition(mechanism(scheme, [1.0], sigma), alpha).computed
    assert log_z == pytest.approx((alpha - 1) * value, rel=1e-10)


@pytest.mark.parametrize('n, cycle, band, q, sigma', [(2000, 8, [0.8, 0.5, 0.3, 0.1], 0.04, 1.5),
                                                      (10, 4, [1.0, 0.5, 0.25], 0.3, 0.9)])
def test_cyclic_remove_log_z_is_dp_accounting_rdp_of_its_rounds(n, cycle, band, q, sigma):
  # Phase 0's rounds t = 0, T, … with squared norms s_t (cut at row n): independent Poisson
  # rounds with noise σ/√s_t at sensitivity 1.
  norms = tilt_partition.phase_zero_squared_norms(n, cycle, band)
  values, counts = np.unique(norms, return_counts=True)
  rdp = _rdp([(dp_accounting.PoissonSampledDpEvent(
      q, dp_accounting.GaussianDpEvent(sigma / math.sqrt(s))), int(k)) for s, k in
      zip(values, counts)])
  scheme = jaxacct.CyclicPoisson(sampling_prob=q, iterations=n, cycle_length=cycle,
                                 partition='equal_split')
  for alpha, value in zip(ORDERS[:6], rdp):
    log_z = tilt_bound.partition(mechanism(scheme, band, sigma), alpha).computed
    assert log_z == pytest.approx((alpha - 1) * value, rel=1e-10)


def test_phase_zero_norms_are_cut_at_row_n():
  norms = tilt_partition.phase_zero_squared_norms(10, 4, [1.0, 0.5, 0.25])
  # rounds 0, 4, 8: full norm, full norm, cut to two coefficients (rows 8, 9)
  np.testing.assert_allclose(norms, [1.3125, 1.3125, 1.25], rtol=1e-15)
  with pytest.raises(InputError, match='3 bands > cycle_length = 2'):
    tilt_partition.phase_zero_squared_norms(10, 2, [1.0, 0.5, 0.25])


@pytest.mark.parametrize('n, cycle, band, sigma', [(12, 4, [1.0, 0.5, 0.25], 1.0),
                                                   (9, 3, [1.0, 0.7, 0.5, 0.3, 0.2], 1.2)])
def test_balls_in_bins_is_the_renyi_accountants_exact_rung(n, cycle, band, sigma):
  scheme = jaxacct.BallsInBins(iterations=n, cycle_length=cycle)
  plan = renyi.RenyiPlan.build(scheme, jaxacct.BandedToeplitz(band), None, 6, 300_000)
  exact = [i for i, rung in enumerate(plan.rungs) if rung[1] == 0.0]
  assert exact
  rung = plan.rung(exact[-1], sigma)
  for alpha in range(2, 7):
    log_z = tilt_bound.partition(mechanism(scheme, band, sigma), alpha).computed
    assert log_z == pytest.approx((alpha - 1) * rung.divergences[alpha - 2], rel=1e-12)


# ---------------------------------------------------------------- add direction, one round
def mp_log_moment(p, mu, alpha, digits=40):
  """ln E_{u~N(0,1)}[((1 − p) + p e^{μu − μ²/2})^{−(α−1)}] by mpmath quadrature."""
  with mpmath.workdps(digits):
    p, mu, m = mpmath.mpf(p), mpmath.mpf(mu), mpmath.mpf(alpha) - 1

    def integrand(u):
      return mpmath.npdf(u) * ((1 - p) + p * mpmath.exp(mu * u - mu * mu / 2)) ** (-m)

    peak = -m * mu  # the integrand's mass lies between −(α − 1)μ and 0
    points = [-mpmath.inf, peak - 12, peak - 4, peak, peak / 2, 0, 4, 12, mpmath.inf]
    return float(mpmath.log(mpmath.quad(integrand, sorted(set(points)))))


ROUNDS = [(0.01, 1.0, 2), (0.01, 1.0, 8), (0.3, 2.0, 5), (0.9, 1.5, 4), (1e-4, 3.0, 3),
          (0.5, 0.1, 40), (0.999, 1.0, 10), (0.05, 0.5, 2.5), (1e-3, 0.7, 64)]


@pytest.mark.parametrize('p, mu, alpha', ROUNDS)
def test_one_round_bracket_contains_the_40_digit_value(p, mu, alpha):
  bracket = tilt_partition.round_add_log_moment(p, mu * mu, 1.0, alpha)
  exact = mp_log_moment(p, mu, alpha)
  assert bracket.lower <= exact <= bracket.upper
  assert bracket.upper - bracket.lower <= 1e-9 * (1.0 + abs(exact))
  assert bracket.estimate == pytest.approx(exact, rel=1e-12, abs=1e-14)
  # Scale: only μ = √s/σ matters.
  scaled = tilt_partition.round_add_log_moment(p, 4.0 * mu * mu, 2.0, alpha)
  assert scaled.estimate == pytest.approx(bracket.estimate, rel=1e-12, abs=1e-15)


@pytest.mark.parametrize('p, mu, alpha', [(0.1, 1.0, 2), (0.0976234, 2.0, 3), (0.3, 0.5, 4)])
def test_one_round_matches_the_independent_oracle(p, mu, alpha):
  bracket = tilt_partition.round_add_log_moment(p, mu * mu, 1.0, alpha)
  for epsilon in (0.05, 0.5, 1.0):
    values = oracle.one_round_add_tilt(p, mu, 1.0, alpha, epsilon)  # SciPy quadrature
    assert bracket.lower - 1e-11 <= values['log_z'] <= bracket.upper + 1e-11
    # δ_add = H_{e^ε}(Q‖P) ≤ M'(α, ε) at the certified upper end.
    assert values['delta'] <= math.exp(tilt_bound.log_support_bound(bracket.upper, alpha,
                                                                     epsilon))


def test_closed_forms_and_jensen():
  assert tilt_partition.round_add_log_moment(0.3, 0.0, 1.0, 5) == (0.0, 0.0, 0.0, 0)
  for mu, alpha in ((0.5, 2), (1.3, 7)):
    value = alpha * (alpha - 1) * mu * mu / 2  # p = 1: the Gaussian, both directions
    bracket = tilt_partition.round_add_log_moment(1.0, mu * mu, 1.0, alpha)
    assert bracket.lower <= value <= bracket.upper
    assert bracket.estimate == value
    assert float(tilt_bound.round_log_factors(1.0, mu * mu, 1.0, alpha)) == pytest.approx(
        value, rel=1e-14)
  for p, mu, alpha in ROUNDS:  # E_Q[(P/Q)^{−(α−1)}] ≥ (E_Q[P/Q])^{−(α−1)} = 1
    assert tilt_partition.round_add_log_moment(p, mu * mu, 1.0, alpha).estimate >= -1e-15


@pytest.mark.parametrize('p', [1e-6, 1e-3, 0.02, 0.2, 0.5, 0.9])
@pytest.mark.parametrize('mu', [0.1, 0.5, 1.0, 2.0, 4.0])
def test_add_moment_is_below_the_remove_moment(p, mu):
  # Mironov, Talwar & Zhang (2019) compare the two directions of one sampled-Gaussian round;
  # checked here on the grid, for the orders the tilt uses.
  for alpha in (2, 3, 5, 8, 16):
    add = tilt_partition.round_add_log_moment(p, mu * mu, 1.0, alpha).estimate
    remove = float(tilt_bound.round_log_factors(p, mu * mu, 1.0, alpha))
    assert add <= remove + 1e-14 * (1.0 + remove)


# ---------------------------------------------------------------- add direction, products
def gauss_hermite_log_moment(patterns, probs, c_col, sigma, alpha, nodes=60):
  """ln E_{y~N(0,σ²I)}[exp(−(α − 1)L(y))], L = ln Σ_x p_x e^{(2⟨Cx,y⟩ − ‖Cx‖²)/(2σ²)}, by a
  tensor Gauss–Hermite rule (n ≤ 3)."""
  n = patterns.shape[1]
  x, w = np.polynomial.hermite.hermgauss(nodes)
  grid = np.stack(np.meshgrid(*[x] * n, indexing='ij'), axis=-1).reshape(-1, n)
  weights = np.prod(np.stack(np.meshgrid(*[w] * n, indexing='ij'), axis=-1).reshape(-1, n),
                    axis=1) / math.pi**(n / 2)
  y = math.sqrt(2.0) * sigma * grid
  modes = patterns @ strategy(c_col, n).T
  exponents = (2.0 * y @ modes.T - np.sum(modes**2, axis=1)) / (2.0 * sigma**2)
  loss = special.logsumexp(np.log(probs) + exponents, axis=1)
  return float(special.logsumexp(-(alpha - 1) * loss, b=weights))


@pytest.mark.parametrize('scheme, band, sigma, alpha, law, method', [
    (jaxacct.Poisson(sampling_prob=0.3, iterations=2), [1.3], 1.0, 3,
     lambda: poisson_law(2, 0.3), 'poisson_add'),
    (jaxacct.BMinSep(sampling_prob=0.2, iterations=3, min_sep=1), [0.9], 1.1, 2,
     lambda: poisson_law(3, 0.2), 'poisson_add'),
    (jaxacct.CyclicPoisson(sampling_prob=0.4, iterations=3, cycle_length=2,
                           partition='equal_split'), [1.0, 0.6], 0.9, 4,
     lambda: cyclic_law(3, 2, 0.4, False), 'fixed_phase_add'),
])
def test_add_log_z_of_a_product_is_the_quadrature_of_the_pair(scheme, band, sigma, alpha, law,
                                                              method):
  patterns, probs = law()
  expected = gauss_hermite_log_moment(patterns, probs, band, sigma, alpha)
  result = tilt_bound.partition(mechanism(scheme, band, sigma), alpha, direction='add')
  assert result.method == method and result.states == 1
  assert result.computed == pytest.approx(expected, rel=1e-11, abs=1e-12)
  assert result.computed <= result.log_z <= result.computed + 1e-8
  assert tilt_bound.log_partition(mechanism(scheme, band, sigma), alpha,
                                  direction='add') == result.log_z


def test_poisson_add_is_n_rounds_and_cyclic_groups_its_norms():
  one = tilt_partition.round_add_log_moment(0.01, 1.0, 1.0, 6)
  many = tilt_partition.poisson_add_log_partition(0.01, 1000, 1.0, 1.0, 6)
  assert many.lower <= 1000 * one.estimate <= many.upper
  assert many.estimate == pytest.approx(1000 * one.estimate, rel=1e-14)
  band = [1.0, 0.5, 0.25]
  cyclic = tilt_partition.fixed_phase_add_log_partition(0.3, 10, 4, band, 0.8, 3)
  parts = [tilt_partition.round_add_log_moment(0.3, s, 0.8, 3).estimate
           for s in tilt_partition.phase_zero_squared_norms(10, 4, band)]
  assert cyclic.estimate == pytest.approx(sum(parts), rel=1e-14)


# ---------------------------------------------------------------- M(α, ε) and the dispatcher
@pytest.mark.parametrize('direction', ['remove', 'add'])
def test_support_bound_is_the_renyi_conversion_in_both_directions(direction):
  scheme = jaxacct.Poisson(sampling_prob=0.01, iterations=1000)
  for alpha in (2, 4, 7):
    log_z = tilt_bound.log_partition(mechanism(scheme), alpha, direction=direction)
    for epsilon in (0.5, 1.83, 4.0):
      expected = renyi.log_delta_from_divergence(log_z / (alpha - 1), alpha, epsilon)
      assert tilt_bound.log_support_bound(log_z, alpha, epsilon) == pytest.approx(
          float(expected), rel=1e-13, abs=1e-13)


def test_add_support_bound_below_remove_for_dp_sgd():
  # tilting.md (c): q = 0.01, σ = 1, n = 1000, ε = 1.83 — remove M = 7.1e-5 at its best α.
  scheme = jaxacct.Poisson(sampling_prob=0.01, iterations=1000)
  remove = tilt_bound.choose_order(mechanism(scheme), 1.83)
  add = tilt_bound.choose_order(mechanism(scheme), 1.83, orders=range(2, 10), direction='add')
  assert remove.alpha == 7 and math.exp(remove.log_bound) == pytest.approx(7.1e-5, rel=0.02)
  assert [row.method for row in add.table] == ['poisson_add'] * 8
  assert add.log_bound <= remove.log_bound


@pytest.mark.parametrize('scheme, band, reason', [
    (jaxacct.BMinSep(sampling_prob=0.1, iterations=6, min_sep=2), [1.0, 0.5], 'not covered'),
    (jaxacct.CyclicPoisson(sampling_prob=0.5, iterations=6, cycle_length=2), [1.0], 'not covered'),
    (jaxacct.BallsInBins(iterations=6, cycle_length=3), [1.0], 'not covered'),
    (jaxacct.Poisson(sampling_prob=0.1, iterations=5), [1.0, 0.5], 'exceed the separation 1'),
    (jaxacct.Poisson(sampling_prob=0.1, iterations=5, truncated_batch_size=3, dataset_size=50),
     [1.0], 'truncates batches'),
])
def test_add_direction_refusals_name_the_reason(scheme, band, reason):
  case = mechanism(scheme, band)
  assert reason in tilt_bound.refusal(case, 'add')
  with pytest.raises(InputError, match=f'mechanism: .*{reason}'):
    tilt_bound.partition(case, 2, direction='add')
  with pytest.raises(InputError, match='direction'):
    tilt_bound.partition(case, 2, direction='both')


def test_bad_arguments_of_the_round_moment():
  with pytest.raises(InputError, match='alpha'):
    tilt_partition.round_add_log_moment(0.1, 1.0, 1.0, 1.0)
  with pytest.raises(InputError, match='squared_norm'):
    tilt_partition.round_add_log_moment(0.1, -1.0, 1.0, 2)
  with pytest.raises(InputError, match='sampling_prob'):
    tilt_partition.round_add_log_moment(0.0, 1.0, 1.0, 2)
  with pytest.raises(InputError, match='squared_norms'):
    tilt_partition.add_log_partition(0.1, [], 1.0, 2)
