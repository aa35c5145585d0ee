"""Exact privacy losses against the brute-force oracle and the reference values.

Oracle: ``tests/oracles/brute_force.py`` enumerates every participation
pattern with its exact probability (Markov chain of seed 000 Fig. 1, not the
recursion) and evaluates ln P/Q = logsumexp_x[log p_x + (2⟨Cx,y⟩ − ‖Cx‖²)/(2σ²)]
with a dense C. Tolerance 1e-10·max(1, |L|): both sides are float64 sums of
O(n·2ⁿ) terms, observed agreement ~2e-15.
"""

import numpy as np
import pytest

import jaxacct
from oracles import brute_force

TOL = 1e-10


# The add direction is the negated log ratio of the same y (spec 000 §0). ``direction`` is a
# static argument of the loss program (one compile per direction and shape); with a
# ``BandedToeplitz`` it reaches the kernels only through the view's charge, which ignores it
# (the same column norms in both directions, ``BandedToeplitz`` view ``charge``, asserted for
# every case below without compiling), so the add program is compiled and compared bitwise in
# one case per kernel family and variant (``ADD_CHECKED``), not in all 117.
ADD_CHECKED = {('bminsep', 10, 4, 3, 0.35), ('poisson', 8, 1, 0.2), ('balls_in_bins', 9, 3, 5),
               ('cyclic_poisson', 10, 4, 3, 0.4)}


def _assert_matches_oracle(mechanism, kind, y, add_case, **scheme_kwargs):
  got = np.asarray(jaxacct.privacy_loss(mechanism, y, 'remove'))
  want = brute_force.loss_for(kind, np.asarray(mechanism.matrix.c_col), y,
                              mechanism.noise_multiplier, **scheme_kwargs)
  np.testing.assert_array_less(np.abs(got - want), TOL * np.maximum(1.0, np.abs(want)))
  view = mechanism.matrix.kernel_view(mechanism.scheme)
  n = mechanism.iterations
  np.testing.assert_array_equal(np.asarray(view.charge('add', n)),
                                np.asarray(view.charge('remove', n)))
  if (kind, *add_case) in ADD_CHECKED:
    np.testing.assert_array_equal(np.asarray(jaxacct.privacy_loss(mechanism, y, 'add')), -got)


def _random_case(seed, n, band_length, scale=1.5):
  rng = np.random.default_rng(seed)
  c_col = rng.uniform(0.05, 1.0, band_length)
  sigma = float(rng.uniform(0.4, 2.0))
  y = rng.normal(size=(6, n)) * scale + rng.uniform(0, 1, size=(1, n))
  return c_col, sigma, y


# Band lengths 1 … b including ≥ 3 (the jax_privacy boundary-norm bug is invisible below 3),
# b > n, n not a multiple of b, p = 1.
BMINSEP_CASES = [(n, b, m, p) for (n, b) in [(7, 3), (9, 4), (3, 5), (10, 4)]
                 for m in range(1, min(b, 4) + 1) for p in (0.35, 1.0)]


@pytest.mark.parametrize('warm_start', [False, True], ids=['cold', 'warm'])
@pytest.mark.parametrize('n, b, m, p', BMINSEP_CASES, ids=[f'{n=},{b=},{m=},{p=}' for n, b, m, p in BMINSEP_CASES])
def test_bminsep_matches_oracle(n, b, m, p, warm_start):
  c_col, sigma, y = _random_case(n * 100 + b * 10 + m, n, m)
  mechanism = jaxacct.MatrixMechanism(
      jaxacct.BMinSep(sampling_prob=p, iterations=n, min_sep=b, warm_start=warm_start),
      jaxacct.BandedToeplitz(c_col), sigma)
  _assert_matches_oracle(mechanism, 'bminsep', y, (n, b, m, p), sampling_prob=p, min_sep=b,
                         warm_start=warm_start)


@pytest.mark.parametrize('n, p', [(1, 0.5), (8, 0.2), (10, 1.0)])
def test_poisson_matches_oracle(n, p):
  c_col, sigma, y = _random_case(n, n, 1)
  mechanism = jaxacct.MatrixMechanism(
      jaxacct.Poisson(sampling_prob=p, iterations=n), jaxacct.BandedToeplitz(c_col), sigma)
  _assert_matches_oracle(mechanism, 'poisson', y, (n, 1, p), sampling_prob=p)


# Balls-in-bins needs no band limit: bands longer than the cycle overlap.
BINS_CASES = [(8, 2, 1), (8, 2, 2), (8, 2, 4), (9, 3, 3), (9, 3, 5), (5, 7, 3), (10, 4, 4)]


@pytest.mark.parametrize('n, cycle, m', BINS_CASES, ids=[f'{n=},{cycle=},{m=}' for n, cycle, m in BINS_CASES])
def test_balls_in_bins_matches_oracle(n, cycle, m):
  c_col, sigma, y = _random_case(1000 + n * 10 + m, n, m)
  mechanism = jaxacct.MatrixMechanism(
      jaxacct.BallsInBins(iterations=n, cycle_length=cycle), jaxacct.BandedToeplitz(c_col), sigma)
  _assert_matches_oracle(mechanism, 'balls_in_bins', y, (n, cycle, m), cycle_length=cycle)


CYCLIC_CASES = [(n, cycle, m, p) for (n, cycle) in [(8, 3), (10, 4), (3, 4)]
                for m in (1, 3) if m <= cycle for p in (0.4, 1.0)]


@pytest.mark.parametrize('partition', ['independent', 'equal_split'])
@pytest.mark.parametrize('n, cycle, m, p', CYCLIC_CASES, ids=[f'{n=},{cycle=},{m=},{p=}' for n, cycle, m, p in CYCLIC_CASES])
def test_cyclic_poisson_matches_oracle(n, cycle, m, p, partition):
  c_col, sigma, y = _random_case(2000 + n * 10 + m, n, m)
  mechanism = jaxacct.MatrixMechanism(
      jaxacct.CyclicPoisson(sampling_prob=p, iterations=n, cycle_length=cycle, partition=partition),
      jaxacct.BandedToeplitz(c_col), sigma)
  _assert_matches_oracle(mechanism, 'cyclic_poisson', y, (n, cycle, m, p), sampling_prob=p,
                         cycle_length=cycle, partition=partition)


def test_production_like_band_uses_fft_path_exactly():
  # 64+ bands take the FFT branch of the sliding dot products; check it against the
  # direct definition d = Cᵀy with a dense C (numpy), through balls-in-bins whose
  # loss is a closed form of d (seed 000 §2.3).
  n, cycle, m = 150, 75, 70
  rng = np.random.default_rng(7)
  c_col = rng.uniform(0.0, 1.0, m)
  c_col[0] = 1.0
  y = rng.normal(size=(3, n))
  mechanism = jaxacct.MatrixMechanism(
      jaxacct.BallsInBins(iterations=n, cycle_length=cycle), jaxacct.BandedToeplitz(c_col), 3.0)
  c_dense = brute_force.strategy_matrix(c_col, n)
  modes = np.stack([c_dense @ (np.arange(n) % cycle == j) for j in range(cycle)])
  exponents = (2 * y @ modes.T - np.sum(modes**2, axis=1)) / (2 * 3.0**2)
  from scipy.special import logsumexp
  want = logsumexp(exponents, axis=1) - np.log(cycle)
  got = np.asarray(jaxacct.privacy_loss(mechanism, y, 'remove'))
  np.testing.assert_allclose(got, want, rtol=0, atol=1e-10 * max(1, np.abs(want).max()))


# reference-values.md §1 [jp-test, confirmed by enumeration], σ = 1, tolerance 1e-12 absolute.
REFERENCE_LOSSES = [
    (jaxacct.BallsInBins(iterations=4, cycle_length=2), [1, 0, 1, 0], [1, 0], 0.4337808304830272),
    (jaxacct.BallsInBins(iterations=4, cycle_length=2), [1, .5, 1, .5], [1, .5], 0.9052974004451105),
    (jaxacct.BallsInBins(iterations=4, cycle_length=2), [1, 1, 1, 1], [1, 1, .5, .5],
     1.5799760835798948),
    (jaxacct.BallsInBins(iterations=4, cycle_length=2), [0, 1, .5, 1], [1, .5], 0.7802974004451104),
    (jaxacct.BMinSep(sampling_prob=.5, iterations=3, min_sep=2, warm_start=False), [1, 1, 1], [1],
     0.6070560625306676),
    (jaxacct.BMinSep(sampling_prob=.5, iterations=3, min_sep=2, warm_start=False), [1, 1, 1],
     [1, .5], 0.9239798890121712),
    (jaxacct.BMinSep(sampling_prob=.5, iterations=3, min_sep=2, warm_start=True), [1, 1, 1],
     [1, .5], 0.8329398380809252),
    (jaxacct.BMinSep(sampling_prob=.5, iterations=3, min_sep=2, warm_start=False), [0, 1, 1],
     [1, .5], 0.4155349444473233),
    (jaxacct.CyclicPoisson(sampling_prob=.5, iterations=3, cycle_length=2), [1, 0, 1], [1],
     0.24576433028848393),
    (jaxacct.CyclicPoisson(sampling_prob=.5, iterations=3, cycle_length=2), [1, .5, 1], [1, .5],
     0.4468602908276156),
    (jaxacct.CyclicPoisson(sampling_prob=1 / 3, iterations=3, cycle_length=2), [1, .5, 1], [1, .5],
     0.30744897807389276),
    (jaxacct.CyclicPoisson(sampling_prob=.5, iterations=3, cycle_length=2), [1, 1, 1], [1, .5],
     0.6805952255579165),
    (jaxacct.CyclicPoisson(sampling_prob=1 / 3, iterations=3, cycle_length=2), [1, 1, 1], [1, .5],
     0.485401681402855),
]


@pytest.mark.parametrize('scheme, y, c_col, expected', REFERENCE_LOSSES)
def test_reference_losses(scheme, y, c_col, expected):
  mechanism = jaxacct.MatrixMechanism(scheme, jaxacct.BandedToeplitz(c_col), 1.0)
  got = float(jaxacct.privacy_loss(mechanism, np.asarray([y], float), 'remove')[0])
  assert abs(got - expected) <= 1e-12


def test_low_noise_mode_losses():
  # reference-values.md §1: balls-in-bins modes of (T=2, n=4, c=[1,.5]) have ‖m‖² = 2.5 and
  # 2.25; a sample on a mode at σ = 1e-4 has loss ≈ ‖m‖²/(2σ²) (relative tolerance 1e-6).
  mechanism = jaxacct.MatrixMechanism(
      jaxacct.BallsInBins(iterations=4, cycle_length=2), jaxacct.BandedToeplitz([1, .5]), 1e-4)
  modes = np.array([[1, .5, 1, .5], [0, 1, .5, 1]])
  got = np.asarray(jaxacct.privacy_loss(mechanism, modes, 'remove'))
  np.testing.assert_allclose(got, [1.25e8, 1.125e8], rtol=1e-6)


# Exact identities (reference-values.md §14), per-sample on random y, band length ≥ 3.
def test_bminsep_with_min_sep_one_is_poisson():
  _, sigma, y = _random_case(5, 9, 1)
  poisson = jaxacct.MatrixMechanism(jaxacct.Poisson(sampling_prob=0.3, iterations=9),
                                    jaxacct.BandedToeplitz([0.7]), sigma)
  for warm in (True, False):
    bminsep = jaxacct.MatrixMechanism(
        jaxacct.BMinSep(sampling_prob=0.3, iterations=9, min_sep=1, warm_start=warm),
        jaxacct.BandedToeplitz([0.7]), sigma)
    np.testing.assert_allclose(jaxacct.privacy_loss(bminsep, y, 'remove'),
                               jaxacct.privacy_loss(poisson, y, 'remove'), rtol=1e-12, atol=1e-12)


@pytest.mark.parametrize('b, m', [(3, 3), (4, 3), (4, 4)])
def test_warm_bminsep_with_p_one_is_balls_in_bins(b, m):
  c_col, sigma, y = _random_case(50 + b, 11, m)
  bminsep = jaxacct.MatrixMechanism(
      jaxacct.BMinSep(sampling_prob=1.0, iterations=11, min_sep=b, warm_start=True),
      jaxacct.BandedToeplitz(c_col), sigma)
  bins = jaxacct.MatrixMechanism(jaxacct.BallsInBins(iterations=11, cycle_length=b),
                                 jaxacct.BandedToeplitz(c_col), sigma)
  np.testing.assert_allclose(jaxacct.privacy_loss(bminsep, y, 'remove'),
                             jaxacct.privacy_loss(bins, y, 'remove'), rtol=1e-12, atol=1e-12)


@pytest.mark.parametrize('cycle, m', [(3, 3), (4, 2)])
def test_cyclic_poisson_with_p_one_is_balls_in_bins(cycle, m):
  c_col, sigma, y = _random_case(70 + cycle, 10, m)
  cyclic = jaxacct.MatrixMechanism(
      jaxacct.CyclicPoisson(sampling_prob=1.0, iterations=10, cycle_length=cycle),
      jaxacct.BandedToeplitz(c_col), sigma)
  bins = jaxacct.MatrixMechanism(jaxacct.BallsInBins(iterations=10, cycle_length=cycle),
                                 jaxacct.BandedToeplitz(c_col), sigma)
  np.testing.assert_allclose(jaxacct.privacy_loss(cyclic, y, 'remove'),
                             jaxacct.privacy_loss(bins, y, 'remove'), rtol=1e-12, atol=1e-12)


def test_bad_outputs_and_directions():
  mechanism = jaxacct.MatrixMechanism(jaxacct.BMinSep(sampling_prob=.5, iterations=3, min_sep=2),
                                      jaxacct.BandedToeplitz([1, .5]), 1.0)
  with pytest.raises(ValueError, match=r'y must have shape \(num_samples, iterations\)'):
    jaxacct.privacy_loss(mechanism, np.zeros((2, 4)), 'remove')
  with pytest.raises(ValueError, match='y must have shape'):
    jaxacct.privacy_loss(mechanism, np.zeros(3), 'remove')
  with pytest.raises(ValueError, match="direction must be one of 'remove', 'add'"):
    jaxacct.privacy_loss(mechanism, np.zeros((2, 3)), 'both')
  with pytest.raises(ValueError, match='rest_batch_sizes'):
    jaxacct.privacy_loss(mechanism, np.zeros((2, 3)), 'remove', rest_batch_sizes=np.zeros((2, 3)))


def test_float32_outputs_are_evaluated_in_float64():
  mechanism = jaxacct.MatrixMechanism(jaxacct.BMinSep(sampling_prob=.5, iterations=3, min_sep=2),
                                      jaxacct.BandedToeplitz([1, .5]), 1.0)
  y32 = np.asarray([[1, 1, 1]], np.float32)
  loss = jaxacct.privacy_loss(mechanism, y32, 'remove')
  assert loss.dtype == np.float64
  assert abs(float(loss[0]) - 0.8329398380809252) <= 1e-12  # reference-values.md §1 (warm)
