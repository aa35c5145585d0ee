"""ln Z_α and the tilted-term bound M(α, ε) (``deterministic/tilt_bound.py``).

Oracles: exhaustive enumeration of participation patterns (``test_minsep_chain``'s), of the
T^α bin tuples of balls-in-bins, the pointwise density identity P = Z·Q_α·e^{−(α−1)L} of the
tilted mixture, and quadrature of δ(ε) = E_P[(1 − e^{ε−L})₊] in one and two dimensions.
"""

from __future__ import annotations

import itertools
import math

import numpy as np
import pytest
from scipy import integrate, optimize, special

import jaxacct
from jaxacct.deterministic import minsep_chain, renyi, tilt_bound
from jaxacct.errors import InputError

from test_minsep_chain import brute_log_z, cyclic_patterns, dense_c, minsep_patterns


def mechanism(scheme, c_col=(1.0,), sigma=1.0, matrix=None):
  return jaxacct.MatrixMechanism(scheme, matrix if matrix is not None
                                 else jaxacct.BandedToeplitz(list(c_col)), sigma)


# ---------------------------------------------------------------- M(α, ε)
@pytest.mark.parametrize('alpha', [2, 3, 5, 8, 40])
@pytest.mark.parametrize('log_z,epsilon', [(0.3, 1.0), (4.0, 0.5), (12.0, 6.0)])
def test_support_bound_is_the_canonne_kamath_steinke_delta(alpha, log_z, epsilon):
  expected = renyi.log_delta_from_divergence(log_z / (alpha - 1), alpha, epsilon)
  assert tilt_bound.log_support_bound(log_z, alpha, epsilon) == pytest.approx(float(expected),
                                                                              rel=1e-13, abs=1e-13)


@pytest.mark.parametrize('alpha', [2, 3, 7])
def test_support_bound_is_the_maximum_of_a_tilted_term(alpha):
  log_z, epsilon = 1.7, 0.8
  loss = np.linspace(epsilon, epsilon + 8.0, 200_001)
  # ln of Z e^{−(α−1)L}(1 − e^{ε−L}) for L > ε.
  loss = loss[1:]
  terms = log_z - (alpha - 1) * loss + np.log(-np.expm1(epsilon - loss))
  bound = tilt_bound.log_support_bound(log_z, alpha, epsilon)
  assert terms.max() <= bound + 1e-12
  at_maximum = epsilon + math.log(alpha / (alpha - 1))  # e^L = e^ε α/(α − 1)
  value = log_z - (alpha - 1) * at_maximum + math.log(-math.expm1(epsilon - at_maximum))
  assert value == pytest.approx(bound, abs=1e-13)


# ---------------------------------------------------------------- ln Z_α against enumeration
@pytest.mark.parametrize('n,p,c,sigma,alpha', [(10, 0.3, 1.0, 0.9, 2), (7, 0.2, 1.5, 1.1, 3),
                                               (6, 1.0, 0.7, 0.8, 3), (1, 0.01, 1.0, 1.0, 8)])
def test_poisson_closed_form_equals_enumeration_and_the_chain(n, p, c, sigma, alpha):
  patterns, logs = minsep_patterns(n, 1, p, False)
  expected = brute_log_z(patterns, logs, [c], sigma, alpha) if alpha <= 3 else None
  closed = tilt_bound.poisson_log_partition(p, n, c, sigma, alpha)
  chain = minsep_chain.TupleChain(minsep_chain.min_sep_law(p, 1, False, 1), [c], sigma, alpha, n)
  assert closed == pytest.approx(chain.log_z, rel=1e-12, abs=1e-13)
  if expected is not None:
    assert closed == pytest.approx(expected, rel=1e-12, abs=1e-13)
  poisson = jaxacct.Poisson(sampling_prob=p, iterations=n)
  result = tilt_bound.partition(mechanism(poisson, [c], sigma), alpha)
  assert result.method == 'poisson' and result.computed == closed
  assert closed <= result.log_z <= closed + 1e-12 * (1 + abs(closed))


def test_poisson_matches_the_sampled_gaussian_moment():
  # Mironov, Talwar & Zhang (2019) §3.3: A_α = Σ_k C(α,k) (1−q)^{α−k} q^k exp((k² − k)/(2σ²)),
  # summed here term by term in plain floats (small α), and ln Z_α = n ln A_α.
  q, sigma, alpha, n = 0.05, 0.9, 4, 30
  a = sum(math.comb(alpha, k) * (1 - q) ** (alpha - k) * q**k
          * math.exp((k * k - k) / (2 * sigma**2)) for k in range(alpha + 1))
  value = tilt_bound.poisson_log_partition(q, n, 1.0, sigma, alpha)
  assert value == pytest.approx(n * math.log(a), rel=1e-13)


SCHEME_CASES = [
    ('bminsep-warm', jaxacct.BMinSep(sampling_prob=0.3, iterations=9, min_sep=3, warm_start=True),
     [1.0, 0.5, 0.25], 0.8, 2, 'chain'),
    ('bminsep-cold', jaxacct.BMinSep(sampling_prob=0.4, iterations=8, min_sep=2, warm_start=False),
     [1.0, 0.7], 0.9, 3, 'chain'),
    ('bminsep-b1', jaxacct.BMinSep(sampling_prob=0.3, iterations=8, min_sep=1), [1.2], 1.0, 2,
     'poisson'),
    ('cyclic-independent', jaxacct.CyclicPoisson(sampling_prob=0.5, iterations=9, cycle_length=3),
     [1.0, 0.6], 0.8, 3, 'chain'),
    ('cyclic-equal-split', jaxacct.CyclicPoisson(sampling_prob=0.4, iterations=10, cycle_length=3,
                                                 partition='equal_split'),
     [1.0, 0.5, 0.3], 0.7, 3, 'fixed_phase'),
]


def _enumerated(scheme, c, sigma, alpha):
  n = scheme.iterations
  if scheme.config_name == 'cyclic_poisson':
    patterns, logs = cyclic_patterns(n, scheme.cycle_length, scheme.sampling_prob,
                                     scheme.partition == 'independent')
  else:
    patterns, logs = minsep_patterns(n, scheme.min_sep, scheme.sampling_prob, scheme.warm_start)
  return brute_log_z(patterns, logs, c, sigma, alpha)


@pytest.mark.parametrize('name,scheme,c,sigma,alpha,method', SCHEME_CASES,
                         ids=[case[0] for case in SCHEME_CASES])
def test_dispatcher_equals_enumeration(name, scheme, c, sigma, alpha, method):
  del name
  expected = _enumerated(scheme, c, sigma, alpha)
  result = tilt_bound.partition(mechanism(scheme, c, sigma), alpha)
  assert result.method == method
  assert result.computed == pytest.approx(expected, rel=1e-12, abs=1e-13)
  assert result.computed <= result.log_z <= result.computed + 1e-12 * (1 + abs(expected))


def test_fixed_phase_product_equals_the_fixed_phase_chain():
  law = minsep_chain.cyclic_law(0.3, 4, 3, random_phase=False)
  for n in (4, 11, 30):
    chain = minsep_chain.TupleChain(law, [1.0, 0.8, 0.4], 0.6, 3, n)
    product = tilt_bound.fixed_phase_log_partition(0.3, n, 4, [1.0, 0.8, 0.4], 0.6, 3)
    assert product == pytest.approx(chain.log_z, rel=1e-12)


def balls_in_bins_log_z(n, cycle, c, sigma, alpha):
  """T^{−α} Σ over the T^α bin tuples of exp(Σ_{j<l} ⟨m_{i_j}, m_{i_l}⟩/σ²), m_i = C·1[r ≡ i]."""
  modes = np.array([dense_c(c, n) @ (np.arange(n) % cycle == i) for i in range(cycle)])
  inner = modes @ modes.T / sigma**2
  terms = [sum(inner[t[j], t[l]] for j in range(alpha) for l in range(j + 1, alpha))
           for t in itertools.product(range(cycle), repeat=alpha)]
  return float(special.logsumexp(terms)) - alpha * math.log(cycle)


@pytest.mark.parametrize('n,cycle,c,sigma,alpha', [
    (12, 4, [1.0], 1.5, 3),             # DP-SGD, 3 epochs
    (12, 4, [1.0, 0.5, 0.25], 1.0, 2),  # bands ≤ T
    (10, 4, [1.0, 0.6], 0.8, 3),        # partial last epoch
    (9, 3, [1.0, 0.7, 0.5, 0.3, 0.2], 1.2, 3),  # more bands than T
])
def test_balls_in_bins_equals_enumeration(n, cycle, c, sigma, alpha):
  scheme = jaxacct.BallsInBins(iterations=n, cycle_length=cycle)
  expected = balls_in_bins_log_z(n, cycle, c, sigma, alpha)
  result = tilt_bound.partition(mechanism(scheme, c, sigma), alpha)
  assert result.method == 'balls_in_bins'
  assert result.computed == pytest.approx(expected, rel=1e-12, abs=1e-13)
  if len(c) <= cycle:  # the p = 1 cyclic chain is the same pair
    chain = minsep_chain.TupleChain(minsep_chain.law_for(scheme, len(c)), c, sigma, alpha, n)
    assert chain.log_z == pytest.approx(expected, rel=1e-12, abs=1e-13)


# ---------------------------------------------------------------- the tilting identity
def _log_ratio(means, log_weights, y, sigma):
  """ln Σ_i w_i N(μ_i, σ²I)(y)/N(0, σ²I)(y) for rows y."""
  exponents = (2.0 * y @ means.T - np.sum(means**2, axis=1)) / (2.0 * sigma**2)
  return special.logsumexp(log_weights + exponents, axis=1)


def _pair(scheme, c, sigma, alpha):
  """(P's means and ln weights, Q_α's means and ln weights, ln Z_α) by enumeration."""
  n = scheme.iterations
  patterns, logs = minsep_patterns(n, scheme.min_sep_chain, scheme.sampling_prob,
                                   getattr(scheme, 'warm_start', False))
  chain = minsep_chain.TupleChain(minsep_chain.law_for(scheme, len(c)), c, sigma, alpha, n)
  index = np.array(list(itertools.product(range(len(logs)), repeat=alpha)))
  tuples = patterns[index]
  tilted_means = minsep_chain.apply_band(c, tuples.sum(axis=1))
  p_means = minsep_chain.apply_band(c, patterns)
  log_z = tilt_bound.log_partition(mechanism(scheme, c, sigma), alpha)
  return (p_means, logs), (tilted_means, chain.log_prob(tuples)), log_z, chain.log_z


@pytest.mark.parametrize('scheme,c,alpha', [
    (jaxacct.BMinSep(sampling_prob=0.4, iterations=4, min_sep=2, warm_start=True), [1.0, 0.5], 2),
    (jaxacct.BMinSep(sampling_prob=0.3, iterations=5, min_sep=3, warm_start=False),
     [1.0, 0.8, 0.2], 3),
    (jaxacct.Poisson(sampling_prob=0.2, iterations=4), [1.3], 3),
])
def test_tilted_mixture_times_its_weight_is_p(scheme, c, alpha):
  # Pointwise: Z_α · (dQ_α/dQ)(y) · e^{−(α−1)L(y)} = (dP/dQ)(y), L = ln dP/dQ.
  sigma = 0.8
  (p_means, p_logs), (t_means, t_logs), _, log_z = _pair(scheme, c, sigma, alpha)
  y = np.random.default_rng(11).normal(0.5, 1.5, size=(500, scheme.iterations))
  loss = _log_ratio(p_means, p_logs, y, sigma)
  tilted = _log_ratio(t_means, t_logs, y, sigma)
  assert np.allclose(log_z + tilted - (alpha - 1) * loss, loss, rtol=1e-12, atol=1e-12)


@pytest.mark.parametrize('alpha', [2, 3, 6])
def test_delta_by_quadrature_in_one_dimension(alpha):
  # n = 1, Poisson: P = (1 − p)N(0, σ²) + pN(c, σ²); L increases in y, so the hinge starts at
  # the y* with L(y*) = ε.
  p, c, sigma, epsilon = 0.3, 2.0, 0.9, 0.7
  scheme = jaxacct.Poisson(sampling_prob=p, iterations=1)
  (p_means, p_logs), (t_means, t_logs), log_z, _ = _pair(scheme, [c], sigma, alpha)

  def loss(y):
    return float(_log_ratio(p_means, p_logs, np.array([[y]]), sigma)[0])

  def hinge(y):
    return -math.expm1(min(epsilon - loss(y), 0.0))

  def density(means, log_weights, y):
    return float(np.exp(special.logsumexp(log_weights - (y - means[:, 0])**2 / (2 * sigma**2)))
                 / math.sqrt(2 * math.pi * sigma**2))

  kink = optimize.brentq(lambda y: loss(y) - epsilon, -50.0, 50.0, xtol=1e-14)
  direct, _ = integrate.quad(lambda y: density(p_means, p_logs, y) * hinge(y), kink, np.inf,
                             epsabs=0, epsrel=1e-11, limit=200)
  tilted, _ = integrate.quad(
      lambda y: math.exp(log_z - (alpha - 1) * loss(y)) * density(t_means, t_logs, y) * hinge(y),
      kink, np.inf, epsabs=0, epsrel=1e-11, limit=200)
  assert tilted == pytest.approx(direct, rel=1e-8)
  assert direct <= math.exp(tilt_bound.log_support_bound(log_z, alpha, epsilon))


def test_delta_by_quadrature_in_two_dimensions():
  # n = 2, warm-start 2-min-sep with two bands: patterns 00, 10, 01 (11 is not allowed).
  # C ≥ 0 makes L non-decreasing in y₂, so for each y₁ the hinge starts at one kink y₂*(y₁)
  # (found by bisection); Gauss–Legendre in y₂ on [y₂*, y₂* + 14σ] (the integrand is smooth
  # there) and in y₁ on [−7σ, 7σ + 2].
  scheme = jaxacct.BMinSep(sampling_prob=0.5, iterations=2, min_sep=2, warm_start=True)
  c, sigma, epsilon, alpha = [1.0, 0.6], 0.7, 1.0, 3
  (p_means, p_logs), (t_means, t_logs), log_z, _ = _pair(scheme, c, sigma, alpha)
  assert len(p_logs) == 3
  nodes, weights = np.polynomial.legendre.leggauss(160)

  def scaled(low, high):
    return (0.5 * (high - low)[..., None] * nodes + 0.5 * (high + low)[..., None],
            0.5 * (high - low)[..., None] * weights)

  y1, w1 = scaled(np.array(-7 * sigma), np.array(7 * sigma + 2.0))

  def loss_at(first, second):
    y = np.stack([np.broadcast_to(first, second.shape), second], axis=-1).reshape(-1, 2)
    return _log_ratio(p_means, p_logs, y, sigma).reshape(second.shape), y

  low, high = np.full(y1.shape, -60.0), np.full(y1.shape, 60.0)
  for _ in range(200):  # bisection for L(y₁, y₂*) = ε
    middle = 0.5 * (low + high)
    above = loss_at(y1, middle)[0] > epsilon
    high, low = np.where(above, middle, high), np.where(above, low, middle)
  y2, w2 = scaled(high, high + 14 * sigma)
  loss, y = loss_at(y1[:, None], y2)
  hinge = -np.expm1(np.minimum(epsilon - loss, 0.0))
  log_q = (-np.sum(y**2, axis=1).reshape(loss.shape) / (2 * sigma**2)
           - math.log(2 * math.pi * sigma**2))
  tilted_ratio = _log_ratio(t_means, t_logs, y, sigma).reshape(loss.shape)
  direct = np.sum(w1 * np.sum(w2 * np.exp(log_q + loss) * hinge, axis=1))
  tilted = np.sum(w1 * np.sum(w2 * np.exp(log_q + log_z + tilted_ratio - (alpha - 1) * loss)
                              * hinge, axis=1))
  assert tilted == pytest.approx(direct, rel=1e-10)
  assert direct <= math.exp(tilt_bound.log_support_bound(log_z, alpha, epsilon))
  # Reference: scipy.integrate.dblquad of the direct integrand on [−6, 10]², epsabs 1e-12,
  # epsrel 1e-10 (17 s, run once when this test was written): 0.14877636934247285.
  assert direct == pytest.approx(0.14877636934247285, rel=1e-9)


# ---------------------------------------------------------------- the order and refusals
def test_choose_order_minimises_the_bound():
  scheme = jaxacct.Poisson(sampling_prob=0.01, iterations=1000)
  choice = tilt_bound.choose_order(mechanism(scheme, [1.0], 1.0), 2.0)
  assert [row.alpha for row in choice.table] == list(range(2, 9))
  bounds = [row.log_bound for row in choice.table]
  assert choice.log_bound == min(bounds)
  assert choice.alpha == choice.table[int(np.argmin(bounds))].alpha
  for row in choice.table:
    assert row.states == 1 and row.method == 'poisson'
    assert row.log_bound == pytest.approx(tilt_bound.log_support_bound(row.log_z, row.alpha, 2.0))


def test_choose_order_skips_orders_over_the_budget():
  scheme = jaxacct.BMinSep(sampling_prob=0.05, iterations=60, min_sep=8)
  choice = tilt_bound.choose_order(mechanism(scheme, [1.0, 0.5], 1.0), 1.0, orders=[2, 3, 4],
                                   state_budget=120)
  states = {row.alpha: row.states for row in choice.table}
  assert states == {2: 36, 3: 120, 4: 330}
  assert choice.table[2].log_z is None and choice.alpha in (2, 3)
  with pytest.raises(InputError, match='state_budget = 10'):
    tilt_bound.choose_order(mechanism(scheme, [1.0, 0.5], 1.0), 1.0, state_budget=10)


def test_refusals_name_the_reason():
  truncated = jaxacct.Poisson(sampling_prob=0.1, iterations=5, truncated_batch_size=3,
                              dataset_size=50)
  multi = jaxacct.MultiAttributionBMinSep(sampling_prob=0.1, iterations=5, min_sep=2,
                                         max_examples_per_user=2)
  dense = jaxacct.LowerTriangular(np.tril(np.ones((5, 5))))
  poisson = jaxacct.Poisson(sampling_prob=0.1, iterations=5)
  cases = [
      (mechanism(truncated), 'truncates batches'),
      (mechanism(multi), 'multi-attribution'),
      (mechanism(poisson, matrix=dense), 'dense LowerTriangular'),
      (mechanism(poisson, [1.0, 0.5]), '2 bands exceed the separation 1'),
  ]
  for case, reason in cases:
    assert reason in tilt_bound.refusal(case)
    with pytest.raises(InputError, match=f'mechanism: .*{reason}'):
      tilt_bound.log_partition(case, 2)
  scheme = jaxacct.BMinSep(sampling_prob=0.1, iterations=20, min_sep=16)
  with pytest.raises(InputError, match=r'alpha = 3 .*816 multiset states.*state_budget = 100'):
    tilt_bound.log_partition(mechanism(scheme, [1.0, 0.5]), 3, state_budget=100)
  with pytest.raises(InputError, match='alpha'):
    tilt_bound.log_partition(mechanism(poisson), 1)
  with pytest.raises(InputError, match='alpha'):
    tilt_bound.log_support_bound(0.5, 1, 1.0)
