"""The α-tuple chain (``deterministic/minsep_chain.py``) against exhaustive enumeration.

The oracle here enumerates every participation pattern x ∈ {0,1}ⁿ, gets p_x by running
Algorithm 1/2 of Dong & Ganesh (2026) (or the cyclic Poisson phases) round by round, builds the
dense C and G = CᵀC, and sums Π_j p_{x_j} exp(Σ_{j<l} x_jᵀ G x_l/σ²) over every α-tuple. Small
n only (n ≤ 10, b ≤ 3, α ∈ {2, 3}).
"""

from __future__ import annotations

import itertools
import math

import numpy as np
import pytest
from scipy.special import logsumexp

import jaxacct
from jaxacct.deterministic import minsep_chain
from jaxacct.errors import InputError

from oracles.chi_square import p_value


# ---------------------------------------------------------------- the oracle
def minsep_patterns(n, b, p, warm, transition_prob=None):
  """(patterns (N, n) bool, ln p_x) of every possible pattern, by simulating Alg. 1/2; with
  ``transition_prob`` q the warm start's initial law is p's and the rounds join with q."""
  q = p if transition_prob is None else transition_prob
  if warm and b > 1:
    starts = [(b, 1.0 / (1.0 + (b - 1) * p))] + [(k, p / (1.0 + (b - 1) * p)) for k in range(1, b)]
  else:
    starts = [(b, 1.0)]  # d = rounds since the last participation (≥ b: eligible)
  patterns, logs = [], []
  for bits in itertools.product((False, True), repeat=n):
    total = 0.0
    for d, weight in starts:
      for joined in bits:
        if d >= b:
          weight *= q if joined else 1.0 - q
          d = 1 if joined else d + 1
        elif joined:
          weight = 0.0
          break
        else:
          d += 1
      total += weight
    if total > 0.0:
      patterns.append(bits)
      logs.append(math.log(total))
  return np.array(patterns, bool), np.array(logs)


def cyclic_patterns(n, cycle, p, random_phase):
  """Cyclic Poisson: phase uniform (or 0), Bernoulli(p) in each round of the phase."""
  phases = range(cycle) if random_phase else [0]
  patterns, logs = [], []
  for bits in itertools.product((False, True), repeat=n):
    total = 0.0
    for phase in phases:
      weight = 1.0 / len(phases)
      for t, joined in enumerate(bits):
        if t % cycle == phase:
          weight *= p if joined else 1.0 - p
        elif joined:
          weight = 0.0
      total += weight
    if total > 0.0:
      patterns.append(bits)
      logs.append(math.log(total))
  return np.array(patterns, bool), np.array(logs)


def dense_c(c, n):
  matrix = np.zeros((n, n))
  for i in range(n):
    for k, value in enumerate(c):
      if i + k < n:
        matrix[i + k, i] = value
  return matrix


def brute_log_terms(patterns, logs, c, sigma, alpha):
  """ln of every α-tuple's term Π p exp(Σ_{j<l} x_jᵀ G x_l/σ²): shape (N,)*α."""
  n = patterns.shape[1]
  gram = dense_c(c, n).T @ dense_c(c, n)
  x = patterns.astype(float)
  inner = x @ gram @ x.T / sigma**2
  count = len(logs)
  terms = np.zeros((count,) * alpha)
  for j in range(alpha):
    shape = [1] * alpha
    shape[j] = count
    terms = terms + logs.reshape(shape)
    for l in range(j + 1, alpha):
      shape2 = [1] * alpha
      shape2[j], shape2[l] = count, count
      terms = terms + inner.reshape(shape2)
  return terms


def brute_log_z(patterns, logs, c, sigma, alpha):
  return float(logsumexp(brute_log_terms(patterns, logs, c, sigma, alpha)))


# ---------------------------------------------------------------- ln Z_α
MINSEP_CASES = [
    # (n, b, p, warm, c, σ, α)
    (10, 2, 0.3, False, [1.0, 0.5], 1.0, 2),
    (10, 2, 0.3, True, [1.0, 0.5], 0.7, 2),
    (9, 3, 0.4, True, [1.0, 0.6, 0.3], 0.8, 2),
    (10, 3, 0.25, False, [0.9, 0.7, 0.2], 0.6, 2),
    (10, 3, 0.5, True, [1.0], 1.3, 3),
    (9, 2, 0.2, True, [1.0, 0.8], 0.9, 3),
    (10, 3, 0.35, False, [1.0, 0.4, 0.4], 0.75, 3),
    (8, 3, 1.0, True, [1.0, 0.5], 1.0, 3),   # p = 1: warm start is balls-in-bins with T = 3
    (8, 3, 1.0, False, [1.0, 0.5, 0.1], 1.0, 2),  # deterministic rounds 0, 3, 6
    (10, 1, 0.3, False, [1.0], 0.9, 2),     # Poisson
    (7, 1, 0.2, True, [1.5], 1.1, 3),
    (2, 3, 0.6, True, [1.0, 0.5, 0.25], 0.7, 3),  # n < b: the Gram is cut at row n
]


@pytest.mark.parametrize('n,b,p,warm,c,sigma,alpha', MINSEP_CASES,
                         ids=[f'n={n}-b={b}-p={p}-{"warm" if w else "cold"}-m={len(c)}-a={a}'
                              for n, b, p, w, c, _, a in MINSEP_CASES])
def test_log_partition_equals_enumeration(n, b, p, warm, c, sigma, alpha):
  patterns, logs = minsep_patterns(n, b, p, warm)
  expected = brute_log_z(patterns, logs, c, sigma, alpha)
  chain = minsep_chain.TupleChain(minsep_chain.min_sep_law(p, b, warm, len(c)), c, sigma, alpha, n)
  assert chain.log_z == pytest.approx(expected, rel=1e-12, abs=1e-13)
  assert chain.num_states == minsep_chain.state_count(b, alpha) == math.comb(b + alpha - 1, alpha)


CYCLIC_CASES = [
    # (n, T, p, random phase, c, σ, α)
    (9, 3, 0.4, True, [1.0, 0.5], 0.8, 2),
    (8, 2, 0.3, True, [1.0, 0.7], 0.7, 3),
    (10, 4, 0.5, False, [1.0, 0.5, 0.2], 0.9, 2),
    (7, 3, 1.0, True, [1.0, 0.5, 0.5], 1.0, 3),  # fixed-bin balls-in-bins
    (10, 3, 0.6, True, [1.0], 0.6, 2),
]


@pytest.mark.parametrize('n,cycle,p,random_phase,c,sigma,alpha', CYCLIC_CASES)
def test_cyclic_chain_equals_enumeration(n, cycle, p, random_phase, c, sigma, alpha):
  patterns, logs = cyclic_patterns(n, cycle, p, random_phase)
  expected = brute_log_z(patterns, logs, c, sigma, alpha)
  law = minsep_chain.cyclic_law(p, cycle, len(c), random_phase)
  assert law.num_states == cycle + len(c) - 1
  chain = minsep_chain.TupleChain(law, c, sigma, alpha, n)
  assert chain.log_z == pytest.approx(expected, rel=1e-12, abs=1e-13)


def test_log_partition_of_a_scheme():
  scheme = jaxacct.BMinSep(sampling_prob=0.3, iterations=9, min_sep=3, warm_start=True)
  patterns, logs = minsep_patterns(9, 3, 0.3, True)
  expected = brute_log_z(patterns, logs, [1.0, 0.5, 0.25], 0.8, 2)
  value = minsep_chain.log_partition(scheme, [1.0, 0.5, 0.25], 0.8, 2)
  assert value == pytest.approx(expected, rel=1e-12)


@pytest.mark.parametrize('n', [1, 2, 5, 9])
def test_gram_diagonals_are_the_finite_gram(n):
  c = np.array([1.0, 0.7, 0.4, 0.1])
  dense = dense_c(c, n)
  gram = dense.T @ dense
  diagonals = minsep_chain.gram_diagonals(c, n)
  for delta in range(c.size):
    for t in range(n):
      expected = gram[t - delta, t] if t >= delta else 0.0
      assert diagonals[delta, t] == pytest.approx(expected, abs=1e-15)
  assert np.allclose(minsep_chain.apply_band(c, np.eye(n)), dense.T)  # rows of Cᵀ: C·e_i


def test_apply_band_by_fft_matches_the_dense_product():
  rng = np.random.default_rng(3)
  c = rng.random(80) + 0.1
  x = rng.random((3, 200)) < 0.1
  assert np.allclose(minsep_chain.apply_band(c, x), x @ dense_c(c, 200).T, rtol=1e-12, atol=1e-12)


@pytest.mark.parametrize('warm', [False, True])
def test_pattern_log_prob_equals_the_simulated_law(warm):
  patterns, logs = minsep_patterns(9, 3, 0.35, warm)
  law = minsep_chain.min_sep_law(0.35, 3, warm, 3)
  assert np.allclose(minsep_chain.pattern_log_prob(law, patterns), logs, rtol=1e-13, atol=1e-14)
  impossible = np.zeros((1, 9), bool)
  impossible[0, [2, 3]] = True
  assert minsep_chain.pattern_log_prob(law, impossible)[0] == -np.inf
  assert logsumexp(logs) == pytest.approx(0.0, abs=1e-14)


# ---------------------------------------------------------------- the sampler
def _tuple_law(patterns, logs, c, sigma, alpha):
  terms = brute_log_terms(patterns, logs, c, sigma, alpha)
  log_prob = terms - logsumexp(terms)
  index = np.array(list(itertools.product(range(len(logs)), repeat=alpha)))
  tuples = patterns[index]  # (N^α, α, n)
  return tuples, log_prob.reshape(-1)


SAMPLER_CASES = [
    (5, 2, 0.4, True, [1.0, 0.5], 0.8, 2),
    (6, 3, 0.3, False, [1.0, 0.6, 0.3], 0.7, 2),
    (4, 2, 0.5, True, [1.0, 0.9], 0.9, 3),
]


@pytest.mark.parametrize('n,b,p,warm,c,sigma,alpha', SAMPLER_CASES)
def test_sampler_draws_the_tilted_law(n, b, p, warm, c, sigma, alpha):
  patterns, logs = minsep_patterns(n, b, p, warm)
  tuples, exact = _tuple_law(patterns, logs, c, sigma, alpha)
  chain = minsep_chain.TupleChain(minsep_chain.min_sep_law(p, b, warm, len(c)), c, sigma, alpha, n,
                                  checkpoint_interval=2)
  # log_prob of every tuple equals the enumerated ln π_α.
  assert np.allclose(chain.log_prob(tuples), exact, rtol=1e-12, atol=1e-12)
  draws, log_prob = chain.sample(np.random.default_rng(20260301), 30_000)
  assert draws.shape == (30_000, alpha, n) and draws.dtype == bool
  law = {t.tobytes(): math.exp(v) for t, v in zip(tuples, exact)}
  # χ² over the N^α tuples (cells with < 5 expected pooled); a fixed seed, threshold 1e-3.
  assert p_value([d.tobytes() for d in draws], law) > 1e-3
  lookup = {t.tobytes(): v for t, v in zip(tuples, exact)}
  reported = np.array([lookup[d.tobytes()] for d in draws])
  assert np.allclose(log_prob, reported, rtol=1e-12, atol=1e-12)


@pytest.mark.parametrize('n,cycle,p,random_phase,c,sigma,alpha', [
    (6, 3, 0.5, True, [1.0, 0.6], 0.8, 2),
    (6, 2, 0.4, False, [1.0, 0.6], 0.8, 3),  # equal split: phase 0
    (7, 3, 1.0, True, [1.0, 0.5, 0.5], 1.0, 3),  # fixed-bin balls-in-bins
], ids=['random-phase', 'fixed-phase', 'balls-in-bins'])
def test_cyclic_sampler_draws_the_tilted_law(n, cycle, p, random_phase, c, sigma, alpha):
  patterns, logs = cyclic_patterns(n, cycle, p, random_phase)
  tuples, exact = _tuple_law(patterns, logs, c, sigma, alpha)
  chain = minsep_chain.TupleChain(minsep_chain.cyclic_law(p, cycle, len(c), random_phase), c,
                                  sigma, alpha, n)
  assert np.allclose(chain.log_prob(tuples), exact, rtol=1e-12, atol=1e-12)
  draws, _ = chain.sample(7, 20_000)
  law = {t.tobytes(): math.exp(v) for t, v in zip(tuples, exact)}
  assert p_value([d.tobytes() for d in draws], law) > 1e-3


def test_checkpoint_interval_does_not_change_the_draws():
  law = minsep_chain.min_sep_law(0.2, 4, True, 3)
  draws = [minsep_chain.TupleChain(law, [1.0, 0.5, 0.2], 0.9, 3, 40,
                                   checkpoint_interval=interval).sample(5, 200)
           for interval in (1, 6, 40)]
  for patterns, log_prob in draws[1:]:
    assert np.array_equal(patterns, draws[0][0])
    assert np.array_equal(log_prob, draws[0][1])
  patterns = draws[0][0]
  # Every draw keeps the separation: participations ≥ b = 4 rounds apart in each chain.
  times = [np.flatnonzero(row) for row in patterns.reshape(-1, 40)]
  assert all(np.all(np.diff(t) >= 4) for t in times)


def test_blocks_drawn_together_are_the_blocks_drawn_alone():
  """``draw_blocks`` shares one forward recomputation across generators; each generator's
  draws must be bitwise those of ``draw`` on it alone, whatever the checkpoint interval (the
  engine draws many blocks per host pass: a block may not depend on its companions)."""
  law = minsep_chain.min_sep_law(0.25, 3, True, 3)

  def generators():
    return [np.random.Generator(np.random.Philox(key=[seed, 7])) for seed in (1, 2, 3)]

  alone = np.stack([minsep_chain.TupleChain(law, [1.0, 0.6, 0.3], 0.8, 3, 31).draw(g, 9)
                    for g in generators()])
  for interval in (1, 5, 31):
    chain = minsep_chain.TupleChain(law, [1.0, 0.6, 0.3], 0.8, 3, 31,
                                    checkpoint_interval=interval)
    together = chain.draw_blocks(generators(), 9)
    assert together.shape == (3, 9, 3, 31) and together.dtype == bool
    assert np.array_equal(together, alone)
    assert np.array_equal(chain.draw_blocks(generators()[1:2], 9)[0], alone[1])
  assert alone.any() and not np.array_equal(alone[0], alone[1])  # the check can fail


# ---------------------------------------------------------------- refusals
def test_state_budget_refusal_names_alpha_and_the_count():
  law = minsep_chain.min_sep_law(0.1, 16, True, 4)
  with pytest.raises(InputError, match=r'alpha = 3 .*C\(18, 3\) = 816 .*state_budget = 100'):
    minsep_chain.TupleChain(law, [1.0, 0.5], 1.0, 3, 20, state_budget=100)


def test_refusals_name_the_argument():
  with pytest.raises(InputError, match='bands <= min_sep'):
    minsep_chain.min_sep_law(0.1, 2, False, 3)
  with pytest.raises(InputError, match='coefficients: 3 bands'):
    minsep_chain.TupleChain(minsep_chain.min_sep_law(0.1, 4, False, 2), [1.0, 0.5, 0.2], 1.0, 2, 9)
  with pytest.raises(InputError, match='scheme: truncated'):
    minsep_chain.law_for(jaxacct.Poisson(sampling_prob=0.1, iterations=5, truncated_batch_size=3,
                                         dataset_size=50), 1)
  multi = jaxacct.MultiAttributionBMinSep(sampling_prob=0.1, iterations=5, min_sep=2,
                                         max_examples_per_user=2)
  with pytest.raises(InputError, match='scheme: .*multi-attribution'):
    minsep_chain.law_for(multi, 1)
  with pytest.raises(InputError, match='alpha'):
    minsep_chain.TupleChain(minsep_chain.min_sep_law(0.1, 2, False, 1), [1.0], 1.0, 0, 5)
  with pytest.raises(InputError, match='noise_multiplier'):
    minsep_chain.TupleChain(minsep_chain.min_sep_law(0.1, 2, False, 1), [1.0], 0.0, 2, 5)


def test_the_tables_digest_names_what_the_draws_depend_on():
  # Equal inputs give equal digests (a resumed run's check), whatever the checkpoint interval
  # (memory only: the draws do not depend on it); each input that changes the law of the
  # draws or ln Z_α changes it.
  def chain(**changes):
    inputs = dict(law=minsep_chain.min_sep_law(0.3, 3, True, 2), coefficients=[1.0, 0.5],
                  noise_multiplier=1.2, alpha=2, iterations=9)
    inputs.update(changes)
    return minsep_chain.TupleChain(**inputs)

  base = chain().digest()
  assert base == chain().digest() == chain(checkpoint_interval=1).digest() and len(base) == 32
  others = [chain(noise_multiplier=1.2000000000000002), chain(alpha=3), chain(iterations=10),
            chain(coefficients=[1.0, 0.25]), chain(law=minsep_chain.min_sep_law(0.3, 3, False, 2)),
            chain(law=minsep_chain.min_sep_law(0.31, 3, True, 2))]
  assert len({base} | {other.digest() for other in others}) == len(others) + 1
