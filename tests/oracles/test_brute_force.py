"""Tests of the brute-force oracle itself (spec 000 §10, reference-values §1, §2, §14).

The oracle is checked against exact fractions, the golden losses, exact
identities between schemes, and two further independent derivations written
here: a Fraction-arithmetic transcription of Algorithms 1/2 (window exclusion
rule with a virtual history, no Markov chain) and the O(n) recursions of spec
000 §2.2 and §4.3 (with band lengths >= 3, which exercise the boundary column
norms).
"""

from __future__ import annotations

import itertools
import math
from fractions import Fraction

import numpy as np
import pytest
from scipy import special

from . import brute_force as bf

PROBS = (0.3, 0.5, 1.0)


def _assert_prob_law(patterns, log_probs, n):
  assert patterns.dtype == np.float64 and log_probs.dtype == np.float64
  assert patterns.ndim == 2 and patterns.shape[1] == n
  assert log_probs.shape == (patterns.shape[0],)
  assert np.all(np.isfinite(log_probs))
  assert np.all((patterns == 0) | (patterns == 1))
  assert np.unique(patterns, axis=0).shape[0] == patterns.shape[0]
  total = math.fsum(np.exp(log_probs))
  assert abs(total - 1.0) <= 1e-12, total


def _assert_same_law(law_a, law_b, atol=1e-12):
  (xa, la), (xb, lb) = law_a, law_b
  np.testing.assert_array_equal(xa, xb)
  np.testing.assert_allclose(np.exp(la), np.exp(lb), rtol=0, atol=atol)


def _min_gap(pattern):
  idx = np.flatnonzero(pattern)
  return np.inf if idx.size < 2 else np.min(np.diff(idx))


# ---------------------------------------------------------------------------
# Normalisation and structure.
# ---------------------------------------------------------------------------


@pytest.mark.parametrize("n", [1, 2, 3, 5, 8, 10])
def test_bminsep_sums_to_one_and_respects_min_sep(n):
  for b, p, warm in itertools.product(range(1, 5), PROBS, (False, True)):
    x, lp = bf.participation_law(
        "bminsep", iterations=n, sampling_prob=p, min_sep=b, warm_start=warm)
    _assert_prob_law(x, lp, n)
    assert all(_min_gap(row) >= b for row in x)


@pytest.mark.parametrize("n", [1, 2, 3, 5, 8, 10])
def test_other_schemes_sum_to_one(n):
  for p in PROBS:
    _assert_prob_law(*bf.participation_law(
        "poisson", iterations=n, sampling_prob=p), n)
  for t in range(1, 5):
    x, lp = bf.participation_law("balls_in_bins", iterations=n, cycle_length=t)
    _assert_prob_law(x, lp, n)
    assert x.shape[0] == min(t, n) + (1 if t > n else 0)
    for p, part in itertools.product(PROBS, ("independent", "equal_split")):
      x, lp = bf.participation_law(
          "cyclic_poisson", iterations=n, sampling_prob=p, cycle_length=t,
          partition=part)
      _assert_prob_law(x, lp, n)
      assert all(_min_gap(row) >= t for row in x)


def test_p_zero_gives_only_the_empty_pattern():
  for kwargs in (dict(kind="poisson"),
                 dict(kind="bminsep", min_sep=3, warm_start=True),
                 dict(kind="cyclic_poisson", cycle_length=2)):
    x, lp = bf.participation_law(iterations=5, sampling_prob=0.0, **kwargs)
    np.testing.assert_array_equal(x, np.zeros((1, 5)))
    np.testing.assert_array_equal(lp, [0.0])


def test_cold_start_p_one_is_deterministic():
  for n, b in itertools.product((1, 4, 7, 10), (1, 2, 3, 4)):
    x, lp = bf.participation_law(
        "bminsep", iterations=n, sampling_prob=1.0, min_sep=b,
        warm_start=False)
    expected = (np.arange(n) % b == 0).astype(float)[None, :]
    np.testing.assert_array_equal(x, expected)
    np.testing.assert_array_equal(lp, [0.0])
    _assert_same_law((x, lp), bf.participation_law(
        "cyclic_poisson", iterations=n, sampling_prob=1.0, cycle_length=b,
        partition="equal_split"))


# ---------------------------------------------------------------------------
# reference-values.md §2: exact pattern probabilities, n = 3, b / cycle = 2.
# ---------------------------------------------------------------------------

_REF_PATTERNS = ((1, 0, 1), (1, 0, 0), (0, 1, 0), (0, 0, 1), (0, 0, 0))
F = Fraction
_REF_PROBS = [
    (dict(kind="bminsep", sampling_prob=0.5, min_sep=2, warm_start=False),
     (F(1, 4), F(1, 4), F(1, 4), F(1, 8), F(1, 8))),
    (dict(kind="bminsep", sampling_prob=0.5, min_sep=2, warm_start=True),
     (F(1, 6), F(1, 6), F(1, 3), F(1, 6), F(1, 6))),
    (dict(kind="bminsep", sampling_prob=0.25, min_sep=2, warm_start=False),
     (F(1, 16), F(3, 16), F(3, 16), F(9, 64), F(27, 64))),
    (dict(kind="cyclic_poisson", sampling_prob=0.5, cycle_length=2,
          partition="independent"),
     (F(1, 8), F(1, 8), F(1, 4), F(1, 8), F(3, 8))),
    (dict(kind="cyclic_poisson", sampling_prob=1 / 3, cycle_length=2,
          partition="independent"),
     (F(1, 18), F(1, 9), F(1, 6), F(1, 9), F(5, 9))),
]


@pytest.mark.parametrize("kwargs,expected", _REF_PROBS)
def test_reference_pattern_probabilities(kwargs, expected):
  x, lp = bf.participation_law(iterations=3, **kwargs)
  got = {tuple(int(v) for v in row): np.exp(l) for row, l in zip(x, lp)}
  assert set(got) == set(_REF_PATTERNS)
  for pattern, prob in zip(_REF_PATTERNS, expected):
    assert abs(got[pattern] - float(prob)) <= 1e-15, (pattern, got[pattern])


# ---------------------------------------------------------------------------
# reference-values.md §1: exact losses (sigma = 1), non-truncated cases.
# ---------------------------------------------------------------------------

_BIB = dict(kind="balls_in_bins", cycle_length=2)
_COLD = dict(kind="bminsep", sampling_prob=0.5, min_sep=2, warm_start=False)
_WARM = dict(kind="bminsep", sampling_prob=0.5, min_sep=2, warm_start=True)


def _cyc(p):
  return dict(kind="cyclic_poisson", sampling_prob=p, cycle_length=2,
              partition="independent")


_REF_LOSSES = [
    (_BIB, [1, 0, 1, 0], [1, 0], 0.4337808304830272),
    (_BIB, [1, .5, 1, .5], [1, .5], 0.9052974004451105),
    (_BIB, [1, 1, 1, 1], [1, 1, .5, .5], 1.5799760835798948),
    (_BIB, [0, 1, .5, 1], [1, .5], 0.7802974004451104),
    (_COLD, [1, 1, 1], [1], 0.6070560625306676),
    (_COLD, [1, 1, 1], [1, .5], 0.9239798890121712),
    (_WARM, [1, 1, 1], [1, .5], 0.8329398380809252),
    (_COLD, [0, 1, 1], [1, .5], 0.4155349444473233),
    (_cyc(1 / 2), [1, 0, 1], [1], 0.24576433028848393),
    (_cyc(1 / 2), [1, .5, 1], [1, .5], 0.4468602908276156),
    (_cyc(1 / 3), [1, .5, 1], [1, .5], 0.30744897807389276),
    (_cyc(1 / 2), [1, 1, 1], [1, .5], 0.6805952255579165),
    (_cyc(1 / 3), [1, 1, 1], [1, .5], 0.485401681402855),
]


@pytest.mark.parametrize("kwargs,y,c_col,expected", _REF_LOSSES)
def test_reference_losses(kwargs, y, c_col, expected):
  kwargs = dict(kwargs)
  kind = kwargs.pop("kind")
  got = bf.loss_for(kind, c_col, np.array(y, dtype=float), 1.0, **kwargs)
  assert got.shape == ()
  assert abs(float(got) - expected) <= 1e-12


# ---------------------------------------------------------------------------
# reference-values.md §14: exact identities.
# ---------------------------------------------------------------------------


@pytest.mark.parametrize("n", [3, 5, 8])
def test_warm_bminsep_p1_equals_balls_in_bins(n):
  rng = np.random.default_rng(n)
  y = rng.normal(size=(6, n))
  for b in range(1, 5):
    warm = bf.participation_law(
        "bminsep", iterations=n, sampling_prob=1.0, min_sep=b, warm_start=True)
    bib = bf.participation_law("balls_in_bins", iterations=n, cycle_length=b)
    _assert_same_law(warm, bib)
    for c_col in ([1.0, 0.6, 0.3], [0.9, 0.5, 0.4, 0.2]):
      c_mat = bf.strategy_matrix(c_col, n)
      np.testing.assert_allclose(
          bf.privacy_loss(*warm, c_mat, y, 0.8),
          bf.privacy_loss(*bib, c_mat, y, 0.8), rtol=0, atol=1e-12)


@pytest.mark.parametrize("n", [3, 5, 8])
def test_cyclic_poisson_p1_equals_balls_in_bins(n):
  for t in range(1, 6):
    _assert_same_law(
        bf.participation_law("cyclic_poisson", iterations=n, sampling_prob=1.0,
                             cycle_length=t, partition="independent"),
        bf.participation_law("balls_in_bins", iterations=n, cycle_length=t))


@pytest.mark.parametrize("n", [1, 4, 9])
def test_bminsep_b1_equals_poisson(n):
  for p, warm in itertools.product(PROBS, (False, True)):
    _assert_same_law(
        bf.participation_law("bminsep", iterations=n, sampling_prob=p,
                             min_sep=1, warm_start=warm),
        bf.participation_law("poisson", iterations=n, sampling_prob=p))


@pytest.mark.parametrize("n", [1, 4, 9])
def test_cycle_one_cyclic_poisson_equals_poisson(n):
  for p, part in itertools.product(PROBS, ("independent", "equal_split")):
    _assert_same_law(
        bf.participation_law("cyclic_poisson", iterations=n, sampling_prob=p,
                             cycle_length=1, partition=part),
        bf.participation_law("poisson", iterations=n, sampling_prob=p))


@pytest.mark.parametrize("n", [1, 2, 5, 10])
def test_warm_start_marginal_rate_is_p0(n):
  for b, p in itertools.product(range(1, 5), PROBS):
    rates = bf.participation_rates(*bf.participation_law(
        "bminsep", iterations=n, sampling_prob=p, min_sep=b, warm_start=True))
    np.testing.assert_allclose(rates, np.full(n, p / (1 + (b - 1) * p)),
                               rtol=0, atol=1e-12)


def test_cold_start_marginal_rate_is_not_constant():
  rates = bf.participation_rates(*bf.participation_law(
      "bminsep", iterations=4, sampling_prob=0.5, min_sep=3, warm_start=False))
  assert rates[0] == pytest.approx(0.5, abs=1e-15)
  assert rates[1] == pytest.approx(0.25, abs=1e-15)


# ---------------------------------------------------------------------------
# Independent transcription of Algorithms 1/2 in exact Fraction arithmetic.
# ---------------------------------------------------------------------------


def _algorithm_law(n, p, b, warm):
  """Pattern law straight from the text of Algorithm 1/2 (0-indexed rounds).

  An example is excluded at round i iff it participated in one of the rounds
  i-b+1, ..., i-1; warm start adds one virtual participation at round -k
  (1-indexed round 1-k) when the initial draw is s = k > 0.

  Args:
    n: Rounds.
    p: Fraction, sampling probability given eligibility.
    b: Min-sep.
    warm: Algorithm 2 if True.

  Returns:
    Dict mapping pattern tuples to Fraction probabilities.
  """
  if warm:
    p_zero = 1 / (1 + (b - 1) * p)
    starts = [(None, p_zero)]
    starts += [(-k, (1 - p_zero) / (b - 1)) for k in range(1, b)]
  else:
    starts = [(None, Fraction(1))]
  law = {}
  for last, weight in starts:
    paths = [((), last, weight)]
    for i in range(n):
      nxt = []
      for pattern, last_i, w in paths:
        excluded = last_i is not None and i - last_i <= b - 1
        if excluded:
          nxt.append((pattern + (0,), last_i, w))
        else:
          nxt.append((pattern + (1,), i, w * p))
          nxt.append((pattern + (0,), last_i, w * (1 - p)))
      paths = nxt
    for pattern, _, w in paths:
      if w:
        law[pattern] = law.get(pattern, Fraction(0)) + w
  return law


@pytest.mark.parametrize("n", [1, 3, 6, 7])
def test_bminsep_matches_algorithm_transcription(n):
  for b, p, warm in itertools.product(
      range(1, 5), (F(1, 3), F(1, 2), F(3, 4), F(1)), (False, True)):
    exact = _algorithm_law(n, p, b, warm)
    assert sum(exact.values()) == 1
    x, lp = bf.participation_law(
        "bminsep", iterations=n, sampling_prob=float(p), min_sep=b,
        warm_start=warm)
    got = {tuple(int(v) for v in row): np.exp(l) for row, l in zip(x, lp)}
    assert set(got) == set(exact)
    for pattern, prob in exact.items():
      assert abs(got[pattern] - float(prob)) <= 1e-15


# ---------------------------------------------------------------------------
# Cross-check against the O(n) recursions of spec 000 (band length >= 3).
# ---------------------------------------------------------------------------


def _per_round_ell(c, y, sigma):
  """ℓ_i of spec 000 §4.3 with the truncated (decreasing) boundary norms."""
  n, m = len(y), len(c)
  ell = np.empty(n)
  for i in range(n):
    w = min(m, n - i)
    ell[i] = (2 * c[:w] @ y[i:i + w] - c[:w] @ c[:w]) / (2 * sigma**2)
  return ell


def _recursion_loss(c, y, sigma, p, b, warm):
  ell = _per_round_ell(c, y, sigma)
  n = len(y)
  big_l = np.zeros(n + b)
  for i in reversed(range(n)):
    terms = [np.log(p) + ell[i] + big_l[i + b]]
    if p < 1:
      terms.append(np.log1p(-p) + big_l[i + 1])
    big_l[i] = special.logsumexp(terms)
  if not warm:
    return big_l[0]
  terms = [big_l[0]] + [np.log(p) + big_l[j] for j in range(1, b)]
  return special.logsumexp(terms) - np.log1p((b - 1) * p)


def _cyclic_loss(c, y, sigma, p, t, independent):
  ell = _per_round_ell(c, y, sigma)
  per_round = np.logaddexp(np.log1p(-p) if p < 1 else -np.inf,
                           np.log(p) + ell)
  phase_sums = np.array([per_round[s::t].sum() for s in range(t)])
  if not independent:
    return phase_sums[0]
  return special.logsumexp(phase_sums) - np.log(t)


_BANDS = ([1.0, 0.7, 0.4], [0.8, 0.5, 0.3, 0.2], [1.0], [0.9, 0.3])


@pytest.mark.parametrize("n", [2, 5, 9])
@pytest.mark.parametrize("warm", [False, True])
def test_bminsep_matches_spec_recursion(n, warm):
  rng = np.random.default_rng(100 + n + warm)
  for c_col, b, p, sigma in itertools.product(
      _BANDS, range(1, 6), PROBS, (0.6, 1.3)):
    c = np.asarray(c_col)
    if len(c) > b:
      continue  # the recursion needs band length <= b
    y = rng.normal(size=n) + 0.5
    got = bf.loss_for("bminsep", c, y, sigma, sampling_prob=p, min_sep=b,
                      warm_start=warm)
    want = _recursion_loss(c, y, sigma, p, b, warm)
    assert abs(float(got) - want) <= 1e-12, (c_col, b, p, sigma)


@pytest.mark.parametrize("n", [2, 5, 9])
@pytest.mark.parametrize("partition", ["independent", "equal_split"])
def test_cyclic_poisson_matches_spec_formula(n, partition):
  rng = np.random.default_rng(200 + n)
  for c_col, t, p in itertools.product(_BANDS, range(1, 6), PROBS):
    c = np.asarray(c_col)
    if len(c) > t:
      continue
    y = rng.normal(size=n) + 0.5
    got = bf.loss_for("cyclic_poisson", c, y, 0.9, sampling_prob=p,
                      cycle_length=t, partition=partition)
    want = _cyclic_loss(c, y, 0.9, p, t, partition == "independent")
    assert abs(float(got) - want) <= 1e-12, (c_col, t, p)


def test_poisson_identity_strategy_factorises():
  rng = np.random.default_rng(7)
  n, sigma = 8, 0.7
  y = rng.normal(size=(5, n))
  for p in (0.3, 0.5):
    got = bf.loss_for("poisson", [1.0], y, sigma, sampling_prob=p)
    ell = (2 * y - 1) / (2 * sigma**2)
    want = np.sum(np.log1p(-p + p * np.exp(ell)), axis=1)
    np.testing.assert_allclose(got, want, rtol=0, atol=1e-12)


# ---------------------------------------------------------------------------
# Helpers: strategy matrix, shapes, validation.
# ---------------------------------------------------------------------------


def test_strategy_matrix():
  np.testing.assert_array_equal(
      bf.strategy_matrix([1.0, 0.5, 0.25], 4),
      [[1, 0, 0, 0], [.5, 1, 0, 0], [.25, .5, 1, 0], [0, .25, .5, 1]])
  np.testing.assert_array_equal(bf.strategy_matrix([1.0, 0.5, 0.25, 2.0], 2),
                                [[1, 0], [.5, 1]])
  np.testing.assert_array_equal(bf.strategy_matrix([3.0], 3), 3 * np.eye(3))


def test_mode_vectors_and_batched_losses():
  x, lp = bf.participation_law("balls_in_bins", iterations=4, cycle_length=2)
  c_mat = bf.strategy_matrix([1.0, 0.5], 4)
  np.testing.assert_array_equal(
      bf.mode_vectors(x, c_mat), [[0, 1, .5, 1], [1, .5, 1, .5]])
  y = np.random.default_rng(3).normal(size=(4, 4))
  batched = bf.privacy_loss(x, lp, c_mat, y, 1.5)
  assert batched.shape == (4,)
  for row, val in zip(y, batched):
    assert float(bf.privacy_loss(x, lp, c_mat, row, 1.5)) == pytest.approx(
        val, abs=1e-14)


@pytest.mark.parametrize("kwargs", [
    dict(kind="bminsep", sampling_prob=0.5, min_sep=2),  # warm_start missing
    dict(kind="bminsep", sampling_prob=0.5, min_sep=0, warm_start=False),
    dict(kind="poisson", sampling_prob=1.5),
    dict(kind="poisson", sampling_prob=0.5, min_sep=2),  # unused argument
    dict(kind="balls_in_bins", cycle_length=2, sampling_prob=0.5),
    dict(kind="cyclic_poisson", sampling_prob=0.5, cycle_length=2,
         partition="fixed"),
    dict(kind="per_epoch_balls_in_bins", cycle_length=2),
])
def test_invalid_arguments_raise(kwargs):
  with pytest.raises(ValueError):
    bf.participation_law(iterations=4, **kwargs)
