"""Tests of the truncated b-min-sep oracle (seed 000 App. D, spec 000 §5).

The oracle (`truncated_brute_force`) is checked against the golden losses of
reference-values §1, hand-derived exact fractions, the untruncated oracle
(`brute_force`) when no round truncates, a forward algorithm over the chain
(a second derivation of the same likelihood ratio), a direct simulation of the
mechanism (Alg. 1/2 with explicit exclusion windows and uniform-subset
truncation) and, for the rest batch sizes, a convolution of the per-example
pattern laws of `brute_force`. The App. D recursions of spec 000 §5.4 are
transcribed here only as a system under test.
"""

from __future__ import annotations

import itertools
import math
from fractions import Fraction

import hypothesis
import numpy as np
import pytest
from hypothesis import strategies as st
from scipy import special, stats

from . import brute_force as bf
from . import truncated_brute_force as tbf

F = Fraction


def _log(x):
  with np.errstate(divide="ignore"):
    return np.log(np.asarray(x, dtype=np.float64))


def _law_dict(x_p, x_q, lp):
  return {(tuple(int(v) for v in a), tuple(int(v) for v in b)): np.exp(l)
          for a, b, l in zip(x_p, x_q, lp)}


# ---------------------------------------------------------------------------
# reference-values.md §1: golden losses (sigma = 1, y = 1, c = [1, .5]).
# ---------------------------------------------------------------------------

_TRUNC_REF = [
    ([1, 0, 0], 1, False, 0.8407396632949528),
    ([2, 0, 1], 1, False, 0.6833726274094434),
    ([2, 0, 1], 2, False, 0.978400107545793),
    ([2, 0, 1], 1, True, 0.6643184939690996),
]


@pytest.mark.parametrize("r,big_b,warm,expected", _TRUNC_REF)
def test_reference_truncated_losses(r, big_b, warm, expected):
  y = np.ones(3)
  for fn in (tbf.truncated_privacy_loss, tbf.truncated_privacy_loss_forward):
    got = fn(y, r, [1.0, 0.5], 0.5, 2, big_b, 1.0, warm)
    assert got.shape == ()
    assert abs(float(got) - expected) <= 1e-12, fn.__name__


_UNTRUNC_REF = [
    (False, [1, 1, 1], [1.0], 0.6070560625306676),
    (False, [1, 1, 1], [1.0, 0.5], 0.9239798890121712),
    (True, [1, 1, 1], [1.0, 0.5], 0.8329398380809252),
    (False, [0, 1, 1], [1.0, 0.5], 0.4155349444473233),
]


@pytest.mark.parametrize("warm,y,c_col,expected", _UNTRUNC_REF)
@pytest.mark.parametrize("r,big_b", [([0, 0, 0], 1), ([2, 0, 1], 3),
                                     ([4, 4, 4], 5)])
def test_reference_untruncated_losses_when_no_round_truncates(
    warm, y, c_col, expected, r, big_b):
  y = np.array(y, dtype=float)
  for fn in (tbf.truncated_privacy_loss, tbf.truncated_privacy_loss_forward):
    got = fn(y, r, c_col, 0.5, 2, big_b, 1.0, warm)
    assert abs(float(got) - expected) <= 1e-12, fn.__name__


# ---------------------------------------------------------------------------
# Law of (x^P, x^Q) given r.
# ---------------------------------------------------------------------------


def test_participation_law_hand_checked():
  # Cold, b = 2, p = 1/2, n = 3: patterns 101, 100, 010, 001, 000 have
  # probabilities 1/4, 1/4, 1/4, 1/8, 1/8 (reference-values §2). r = [2, 0, 1],
  # B = 1: rounds 0 and 2 truncate with survival 1/3 and 1/2.
  x_p, x_q, lp = tbf.truncated_participation_law([2, 0, 1], 0.5, 2, 1, False)
  got = _law_dict(x_p, x_q, lp)
  want = {
      ((2, 0, 2), (-1, 0, -1)): F(1, 4) * F(1, 3) * F(1, 2),
      ((2, 0, 0), (-1, 0, 0)): F(1, 4) * F(1, 3) * F(1, 2) + F(1, 4) * F(1, 3),
      ((0, 1, 0), (0, 0, 0)): F(1, 4),
      ((0, 0, 2), (0, 0, -1)): F(1, 4) * F(2, 3) * F(1, 2) + F(1, 8) * F(1, 2),
  }
  want[((0, 0, 0), (0, 0, 0))] = 1 - sum(want.values())
  assert want[((0, 0, 0), (0, 0, 0))] == F(21, 48)
  assert set(got) == set(want)
  for key, prob in want.items():
    assert abs(got[key] - float(prob)) <= 1e-15, key
  # Rows are sorted lexicographically by x^P.
  assert [tuple(row) for row in x_p] == sorted(tuple(row) for row in x_p)


@pytest.mark.parametrize("n", [1, 3, 6, 9])
def test_participation_law_structure_and_marginals(n):
  rng = np.random.default_rng(n)
  for b, p, warm, big_b in itertools.product(
      (1, 2, 4), (0.3, 0.5, 1.0), (False, True), (1, 2)):
    r = rng.integers(0, 4, size=n)
    x_p, x_q, lp = tbf.truncated_participation_law(r, p, b, big_b, warm)
    assert x_p.dtype == x_q.dtype == lp.dtype == np.float64
    assert np.all(np.isfinite(lp))
    assert abs(math.fsum(np.exp(lp)) - 1.0) <= 1e-12
    assert np.unique(x_p, axis=0).shape[0] == x_p.shape[0]
    trunc = r >= big_b
    np.testing.assert_array_equal(x_q, np.where(x_p == 2, -1.0, 0.0))
    assert np.all(np.where(trunc, np.isin(x_p, (0, 2)), np.isin(x_p, (0, 1))))
    for row in x_p:
      idx = np.flatnonzero(row)
      assert idx.size < 2 or np.min(np.diff(idx)) >= b
    # Marginal P(x^P_i != 0) = participation rate * survival.
    rates = bf.participation_rates(*bf.participation_law(
        "bminsep", iterations=n, sampling_prob=p, min_sep=b, warm_start=warm))
    t = np.where(trunc, big_b / (r + 1.0), 1.0)
    np.testing.assert_allclose(np.exp(lp) @ (x_p != 0), rates * t, rtol=0,
                               atol=1e-12)


@pytest.mark.parametrize("n", [1, 4, 8])
def test_participation_law_without_truncation_is_untruncated_law(n):
  for b, p, warm in itertools.product((1, 2, 3), (0.0, 0.4, 1.0),
                                      (False, True)):
    x_p, x_q, lp = tbf.truncated_participation_law(
        np.zeros(n, dtype=int), p, b, 1, warm)
    x_ref, lp_ref = bf.participation_law(
        "bminsep", iterations=n, sampling_prob=p, min_sep=b, warm_start=warm)
    np.testing.assert_array_equal(x_p, x_ref)
    np.testing.assert_array_equal(x_q, np.zeros_like(x_ref))
    np.testing.assert_allclose(np.exp(lp), np.exp(lp_ref), rtol=0, atol=1e-14)


def test_truncated_away_participation_still_blocks():
  # p = 1, cold, b = 2, every round truncates with survival 1/2: the example
  # participates in rounds 0, 2, 4 whatever happens to it, so x^P is never
  # non-zero in rounds 1, 3.
  x_p, _, lp = tbf.truncated_participation_law([1] * 5, 1.0, 2, 1, False)
  assert np.all(x_p[:, [1, 3]] == 0)
  assert x_p.shape[0] == 8
  np.testing.assert_allclose(np.exp(lp), np.full(8, 1 / 8), rtol=0, atol=1e-15)


def test_mode_vectors():
  x_p, x_q, _ = tbf.truncated_participation_law([2, 0, 1], 0.5, 2, 1, False)
  m_p, m_q = tbf.truncated_mode_vectors(x_p, x_q, [1.0, 0.5])
  c_mat = bf.strategy_matrix([1.0, 0.5], 3)
  np.testing.assert_array_equal(m_p, x_p @ c_mat.T)
  np.testing.assert_array_equal(m_q, x_q @ c_mat.T)
  np.testing.assert_array_equal(m_p[-1], [2.0, 1.0, 2.0])  # x^P = (2, 0, 2)


# ---------------------------------------------------------------------------
# The loss: identities, shapes, per-sample r.
# ---------------------------------------------------------------------------


def test_loss_is_zero_when_p_is_zero():
  y = np.random.default_rng(0).normal(size=(5, 4))
  for warm in (False, True):
    for fn in (tbf.truncated_privacy_loss, tbf.truncated_privacy_loss_forward):
      got = fn(y, [3, 0, 5, 1], [1.0, 0.4], 0.0, 2, 1, 0.7, warm)
      np.testing.assert_allclose(got, 0.0, rtol=0, atol=1e-15)


def test_log_ratios_q_is_reference_without_truncation():
  y = np.random.default_rng(1).normal(size=(5, 4))
  log_p, log_q = tbf.truncated_log_ratios(y, [0, 1, 0, 1], [1.0, 0.4], 0.5,
                                          2, 2, 0.7, True)
  np.testing.assert_allclose(log_q, 0.0, rtol=0, atol=1e-15)
  np.testing.assert_allclose(
      log_p, bf.loss_for("bminsep", [1.0, 0.4], y, 0.7, sampling_prob=0.5,
                         min_sep=2, warm_start=True), rtol=0, atol=1e-12)


def test_per_sample_rest_batch_sizes():
  rng = np.random.default_rng(2)
  n, num = 5, 12
  y = rng.normal(size=(num, n)) + 0.8
  r = rng.integers(0, 3, size=(num, n))
  r[3] = r[7]  # exercise grouping of repeated rows
  args = ([1.0, 0.6, 0.3], 0.4, 3, 1, 0.9, True)
  batched = tbf.truncated_privacy_loss(y, r, *args)
  forward = tbf.truncated_privacy_loss_forward(y, r, *args)
  assert batched.shape == forward.shape == (num,)
  for k in range(num):
    single = tbf.truncated_privacy_loss(y[k], r[k], *args)
    assert abs(float(single) - batched[k]) <= 1e-13
  np.testing.assert_allclose(forward, batched, rtol=0, atol=1e-10)


@pytest.mark.parametrize("n", [7, 10])
def test_forward_matches_enumeration_long_bands_and_larger_n(n):
  # Includes band lengths > b, where the App. D recursions do not apply but
  # the pair (Corollary D.2) and both derivations here are still defined.
  rng = np.random.default_rng(10 + n)
  for b, c_col, warm in itertools.product(
      (1, 2, 4), ([1.0, 0.7, 0.4], [0.8, 0.5, 0.3, 0.2]), (False, True)):
    r = rng.integers(0, 3, size=n)
    y = rng.normal(size=(4, n)) + rng.uniform(0, 2, size=(4, n))
    args = (y, r, c_col, 0.45, b, 1, 0.8, warm)
    np.testing.assert_allclose(tbf.truncated_privacy_loss_forward(*args),
                               tbf.truncated_privacy_loss(*args), rtol=0,
                               atol=1e-10)


# ---------------------------------------------------------------------------
# Property tests: untruncated oracle, forward algorithm, spec recursion.
# ---------------------------------------------------------------------------


def _spec_recursion_loss(y, r, c, p, b, big_b, sigma, warm):
  """Spec 000 §5.4 (App. D recursions in log space) -- under test, not oracle.

  Needs len(c) <= b. Boundary columns are truncated at row n (§4.3).
  """
  n, m = len(y), len(c)
  d = np.array([c[:min(m, n - i)] @ y[i:i + min(m, n - i)] for i in range(n)])
  s = np.array([c[:min(m, n - i)] @ c[:min(m, n - i)] for i in range(n)])

  def ell(mu):
    return (2 * mu * d - mu**2 * s) / (2 * sigma**2)

  trunc = np.asarray(r) >= big_b
  t = np.where(trunc, big_b / (np.asarray(r) + 1.0), 1.0)
  a_p = np.where(trunc, np.logaddexp(_log(t) + ell(2.0), _log(1 - t)), ell(1.0))
  a_q = np.where(trunc, np.logaddexp(_log(t) + ell(-1.0), _log(1 - t)), 0.0)

  def comb(a):
    big_l = np.zeros(n + b)
    for i in reversed(range(n)):
      big_l[i] = np.logaddexp(_log(1 - p) + big_l[i + 1],
                              _log(p) + a[i] + big_l[i + b])
    if not warm:
      return big_l[0]
    terms = [big_l[0]] + [_log(p) + big_l[j] for j in range(1, b)]
    return special.logsumexp(terms) - np.log1p((b - 1) * p)

  return comb(a_p) - comb(a_q)


@st.composite
def _cases(draw):
  n = draw(st.integers(1, 6))
  b = draw(st.integers(1, 3))
  m = draw(st.integers(1, b))
  c = [draw(st.floats(0.1, 2.0))]
  c += [draw(st.floats(0.0, 2.0)) for _ in range(m - 1)]
  p = draw(st.sampled_from([0.0, 0.3, 1.0]) | st.floats(0.01, 0.99))
  big_b = draw(st.integers(1, 3))
  r = draw(st.lists(st.integers(0, 5), min_size=n, max_size=n))
  warm = draw(st.booleans())
  sigma = draw(st.floats(0.3, 3.0))
  seed = draw(st.integers(0, 2**32 - 1))
  rng = np.random.default_rng(seed)
  y = rng.normal(scale=sigma, size=(6, n)) + rng.uniform(-1, 2.5, size=(6, n))
  return dict(y=y, r=np.array(r), c=np.array(c), p=p, b=b, big_b=big_b,
              sigma=sigma, warm=warm)


@hypothesis.settings(max_examples=150)
@hypothesis.given(_cases())
def test_property_no_truncation_equals_untruncated_oracle(case):
  r = np.minimum(case["r"], case["big_b"] - 1)
  got = tbf.truncated_privacy_loss(case["y"], r, case["c"], case["p"],
                                   case["b"], case["big_b"], case["sigma"],
                                   case["warm"])
  want = bf.loss_for("bminsep", case["c"], case["y"], case["sigma"],
                     sampling_prob=case["p"], min_sep=case["b"],
                     warm_start=case["warm"])
  np.testing.assert_allclose(got, want, rtol=0, atol=1e-12)


@hypothesis.settings(max_examples=150)
@hypothesis.given(_cases())
def test_property_forward_algorithm_equals_enumeration(case):
  args = (case["y"], case["r"], case["c"], case["p"], case["b"],
          case["big_b"], case["sigma"], case["warm"])
  np.testing.assert_allclose(tbf.truncated_privacy_loss_forward(*args),
                             tbf.truncated_privacy_loss(*args), rtol=0,
                             atol=1e-10)


@hypothesis.settings(max_examples=150)
@hypothesis.given(_cases())
def test_property_spec_recursion_equals_enumeration(case):
  got = tbf.truncated_privacy_loss(case["y"], case["r"], case["c"], case["p"],
                                   case["b"], case["big_b"], case["sigma"],
                                   case["warm"])
  for k, y in enumerate(case["y"]):
    want = _spec_recursion_loss(y, case["r"], case["c"], case["p"], case["b"],
                                case["big_b"], case["sigma"], case["warm"])
    assert abs(got[k] - want) <= 1e-10


@pytest.mark.parametrize("n", [4, 9])
def test_spec_recursion_boundary_norms_band_3_and_4(n):
  rng = np.random.default_rng(30 + n)
  for c_col, b, warm, big_b in itertools.product(
      ([1.0, 0.7, 0.4], [0.8, 0.5, 0.3, 0.2]), (4, 5), (False, True), (1, 2)):
    r = rng.integers(0, 4, size=n)
    y = rng.normal(size=(3, n)) + 1.0
    got = tbf.truncated_privacy_loss(y, r, c_col, 0.6, b, big_b, 0.8, warm)
    for k in range(3):
      want = _spec_recursion_loss(y[k], r, np.asarray(c_col), 0.6, b, big_b,
                                  0.8, warm)
      assert abs(got[k] - want) <= 1e-10


# ---------------------------------------------------------------------------
# Law of the rest batch sizes r.
# ---------------------------------------------------------------------------


def test_rest_law_hand_checked_tiny_case():
  # D = 2 (one other example), b = 2, n = 2. Cold: r_0 ~ Bern(p); r_0 = 1
  # forces r_1 = 0. Warm: the other example starts barred (state 1) w.p.
  # p/(1+p), then r_0 = 0 and r_1 ~ Bern(p).
  for p in (F(1, 2), F(1, 3), F(1), F(0)):
    cold = tbf.rest_batch_size_law(2, p, 2, 2, False)
    want = {(0, 0): (1 - p)**2, (0, 1): (1 - p) * p, (1, 0): p}
    assert cold == {k: v for k, v in want.items() if v}
    warm = tbf.rest_batch_size_law(2, p, 2, 2, True)
    want = {(1, 0): p / (1 + p), (0, 1): p / (1 + p),
            (0, 0): (1 - p) / (1 + p)}
    assert warm == {k: v for k, v in want.items() if v}
  assert tbf.rest_batch_size_law(1, 0.5, 3, 4, True) == {(0, 0, 0, 0): 1.0}


def _convolved_rest_law(d, p, b, n, warm):
  """Law of r as the sum of D-1 i.i.d. patterns from `brute_force`."""
  x, lp = bf.participation_law("bminsep", iterations=n, sampling_prob=p,
                               min_sep=b, warm_start=warm)
  single = [(tuple(int(v) for v in row), float(np.exp(l)))
            for row, l in zip(x, lp)]
  law = {(0,) * n: 1.0}
  for _ in range(d - 1):
    nxt = {}
    for r, pr in law.items():
      for row, q in single:
        key = tuple(a + c for a, c in zip(r, row))
        nxt[key] = nxt.get(key, 0.0) + pr * q
    law = nxt
  return law


@pytest.mark.parametrize("d,n", [(1, 3), (3, 4), (5, 3), (8, 2), (6, 5)])
def test_rest_law_equals_convolution_of_example_laws(d, n):
  for b, p, warm in itertools.product((1, 2, 3), (0.3, 0.5, 1.0),
                                      (False, True)):
    got = tbf.rest_batch_size_law(d, p, b, n, warm)
    want = _convolved_rest_law(d, p, b, n, warm)
    assert abs(math.fsum(got.values()) - 1.0) <= 1e-13
    assert set(got) == {k for k, v in want.items() if v > 0}
    for key, prob in got.items():
      assert abs(prob - want[key]) <= 1e-13, (b, p, warm, key)


@pytest.mark.parametrize("d", [2, 4, 7])
def test_rest_law_exact_sum_and_binomial_marginals(d):
  n = 4
  for b, p, warm in itertools.product((1, 2, 3), (F(1, 3), F(3, 4), F(1)),
                                      (False, True)):
    law = tbf.rest_batch_size_law(d, p, b, n, warm)
    assert sum(law.values()) == 1
    p0 = p / (1 + (b - 1) * p)

    def binom(k, q, j):
      return math.comb(k, j) * q**j * (1 - q)**(k - j)

    for i in range(n):
      marg = [sum(v for r, v in law.items() if r[i] == j) for j in range(d)]
      if warm:  # each example participates w.p. p0, independently
        assert marg == [binom(d - 1, p0, j) for j in range(d)]
        assert sum(j * v for j, v in enumerate(marg)) == (d - 1) * p0
      elif i == 0:
        assert marg == [binom(d - 1, p, j) for j in range(d)]
    if b == 1:  # i.i.d. Binomial(D-1, p) rounds
      for r, v in law.items():
        assert v == math.prod(binom(d - 1, p, j) for j in r)


def test_rest_law_float_matches_fraction():
  exact = tbf.rest_batch_size_law(5, F(2, 5), 3, 4, True)
  approx = tbf.rest_batch_size_law(5, 0.4, 3, 4, True)
  assert set(exact) == set(approx)
  for key, v in exact.items():
    assert abs(approx[key] - float(v)) <= 1e-15


# ---------------------------------------------------------------------------
# Direct simulation of the mechanism vs truncated_sample_law.
# ---------------------------------------------------------------------------


def _simulate(rng, num, d, p, b, big_b, n, warm):
  """Alg. 1/2 with explicit exclusion windows, then uniform-subset truncation.

  Example 0 is the sensitive one. Returns r (num, n) and x^P (num, n).
  """
  last = np.full((num, d), -10**6)  # round of the last (possibly virtual) join
  if warm:
    z = 1 + (b - 1) * p
    probs = [1 / z] + [p / z] * (b - 1)
    state = rng.choice(b, size=(num, d), p=probs)
    last = np.where(state > 0, -state, last)  # Alg. 2: B_{1-k} = {s_j = k}
  rest = np.zeros((num, n), dtype=np.int64)
  x_p = np.zeros((num, n), dtype=np.int64)
  for i in range(n):
    eligible = i - last > b - 1
    sampled = eligible & (rng.random((num, d)) < p)
    last = np.where(sampled, i, last)
    rest[:, i] = sampled[:, 1:].sum(axis=1)
    keys = np.where(sampled, rng.random((num, d)), np.inf)
    rank = np.sum(keys[:, 1:] < keys[:, :1], axis=1)
    kept = sampled[:, 0] & (rank < big_b)  # in the random subset of size B
    truncated = sampled.sum(axis=1) > big_b
    x_p[:, i] = np.where(sampled[:, 0], np.where(truncated, 2 * kept, 1), 0)
  return rest, x_p


@pytest.mark.parametrize("d,p,b,big_b,n,warm", [
    (4, 0.5, 2, 1, 3, False),
    (4, 0.5, 2, 1, 3, True),
    (5, 0.6, 3, 2, 4, True),
    (3, 0.7, 1, 1, 3, False),
])
def test_sample_law_matches_simulated_mechanism(d, p, b, big_b, n, warm):
  law = tbf.truncated_sample_law(d, p, b, big_b, n, warm)
  assert abs(math.fsum(law.values()) - 1.0) <= 1e-12
  for (_, x_p, x_q) in law:
    assert x_q == tuple(-int(v == 2) for v in x_p)
  probs = {(r, x_p): v for (r, x_p, _), v in law.items()}
  num = 40_000
  rng = np.random.default_rng([d, b, big_b, n, int(warm)])
  rest, x_p = _simulate(rng, num, d, p, b, big_b, n, warm)
  counts = {}
  for r_row, x_row in zip(map(tuple, rest.tolist()), map(tuple, x_p.tolist())):
    counts[(r_row, x_row)] = counts.get((r_row, x_row), 0) + 1
  assert set(counts) <= set(probs)
  for key, prob in probs.items():
    freq = counts.get(key, 0) / num
    assert abs(freq - prob) <= 5 * math.sqrt(prob * (1 - prob) / num) + 2 / num
  # Aggregate goodness of fit over cells with enough mass.
  keys = [k for k, v in probs.items() if v * num >= 5]
  obs = np.array([counts.get(k, 0) for k in keys], dtype=float)
  exp = np.array([probs[k] * num for k in keys])
  rest_obs, rest_exp = num - obs.sum(), num - exp.sum()
  chi2 = np.sum((obs - exp)**2 / exp)
  if rest_exp > 0:
    chi2 += (rest_obs - rest_exp)**2 / rest_exp
  assert stats.chi2.sf(chi2, df=len(keys)) > 1e-4


# ---------------------------------------------------------------------------
# Validation.
# ---------------------------------------------------------------------------


@pytest.mark.parametrize("kwargs", [
    dict(rest_batch_sizes=[0, -1, 0]),
    dict(rest_batch_sizes=[0.5, 0, 0]),
    dict(rest_batch_sizes=[0, 0]),
    dict(sampling_prob=1.5),
    dict(min_sep=0),
    dict(truncated_batch_size=0),
    dict(noise_multiplier=0.0),
    dict(warm_start=None),
    dict(c_col=[]),
])
def test_invalid_arguments_raise(kwargs):
  base = dict(y=np.ones(3), rest_batch_sizes=[1, 0, 2], c_col=[1.0, 0.5],
              sampling_prob=0.5, min_sep=2, truncated_batch_size=1,
              noise_multiplier=1.0, warm_start=False)
  base.update(kwargs)
  for fn in (tbf.truncated_privacy_loss, tbf.truncated_privacy_loss_forward):
    with pytest.raises(ValueError):
      fn(**base)


def test_invalid_rest_law_arguments_raise():
  with pytest.raises(ValueError):
    tbf.rest_batch_size_law(0, 0.5, 2, 3, False)
  with pytest.raises(ValueError):
    tbf.rest_batch_size_law(3, 0.5, 2, 3, None)
  with pytest.raises(ValueError):
    tbf.rest_batch_size_law(3, F(3, 2), 2, 3, False)
  with pytest.raises(ValueError):
    tbf.truncated_participation_law([0] * 13, 0.5, 2, 1, False)
