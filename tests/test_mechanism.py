"""MatrixMechanism construction and its bad-input errors."""

import pytest

import jaxacct
from jaxacct.mechanism import check_mechanism


def _bminsep(min_sep=3):
  return jaxacct.BMinSep(sampling_prob=0.5, iterations=6, min_sep=min_sep)


def test_positional_and_keyword_construction_agree():
  matrix = jaxacct.BandedToeplitz([1.0, 0.5])
  assert jaxacct.MatrixMechanism(_bminsep(), matrix, 1.0) == jaxacct.MatrixMechanism(
      scheme=_bminsep(), matrix=jaxacct.BandedToeplitz(c_col=[1.0, 0.5]), noise_multiplier=1.0)


@pytest.mark.parametrize('sigma, message', [
    (0.0, 'noise_multiplier σ = 0 is not differentially private'),
    (-1.0, 'noise_multiplier must be finite and > 0'),
    (float('nan'), 'noise_multiplier must be finite and > 0'),
    (float('inf'), 'noise_multiplier must be finite and > 0'),
])
def test_noise_multiplier_must_be_positive_and_finite(sigma, message):
  with pytest.raises(ValueError, match=message):
    jaxacct.MatrixMechanism(_bminsep(), jaxacct.BandedToeplitz([1.0]), sigma)


@pytest.mark.parametrize('scheme, limit_name', [
    (jaxacct.BMinSep(sampling_prob=0.5, iterations=6, min_sep=2), 'min_sep = 2'),
    (jaxacct.Poisson(sampling_prob=0.5, iterations=6, truncated_batch_size=3, dataset_size=10),
     'min_sep = 1'),
    (jaxacct.CyclicPoisson(sampling_prob=0.5, iterations=6, cycle_length=2), 'cycle_length = 2'),
])
def test_band_longer_than_the_scheme_allows(scheme, limit_name):
  with pytest.raises(ValueError, match=rf'c_col must have at most {limit_name}'):
    jaxacct.MatrixMechanism(scheme, jaxacct.BandedToeplitz([1.0, 0.5, 0.25]), 1.0)


@pytest.mark.parametrize('scheme', [jaxacct.Poisson(sampling_prob=0.5, iterations=6),
                                    jaxacct.BMinSep(sampling_prob=0.5, iterations=6, min_sep=1)])
def test_untruncated_poisson_accepts_overlapping_bands_for_mmcc_only(scheme):
  # Independent participations: MMCC (seed 003) accounts any band count; the Monte Carlo
  # recursion would be wrong with overlapping columns, so its view refuses, naming mmcc.
  mechanism = jaxacct.MatrixMechanism(scheme, jaxacct.BandedToeplitz([1.0, 0.5, 0.25]), 1.0)
  assert mechanism.bounded
  with pytest.raises(ValueError, match='"mmcc"'):
    mechanism.matrix.kernel_view(scheme)
  # max ‖C·x‖² over x ∈ {0,1}⁶ is at x = 1 (C ≥ 0): row sums 1, 1.5, 1.75, 1.75, 1.75, 1.75.
  assert mechanism.matrix.separated_sensitivity_squared(1, 6) == pytest.approx(
      1 + 1.5**2 + 4 * 1.75**2)


def test_balls_in_bins_accepts_long_bands():
  mechanism = jaxacct.MatrixMechanism(
      jaxacct.BallsInBins(iterations=6, cycle_length=2), jaxacct.BandedToeplitz([1, .5, .25]), 1.0)
  assert mechanism.iterations == 6


@pytest.mark.parametrize('c_col', [[], [float('nan')], [1.0, float('inf')], [1.0, -0.5],
                                   [0.0, 0.0], [0.0, 1.0], [[1.0]]])
def test_bad_c_col(c_col):
  with pytest.raises(ValueError, match='c_col'):
    jaxacct.BandedToeplitz(c_col)


def test_wrong_kinds():
  with pytest.raises(TypeError, match='scheme'):
    jaxacct.MatrixMechanism('poisson', jaxacct.BandedToeplitz([1.0]), 1.0)
  with pytest.raises(TypeError, match='matrix'):
    jaxacct.MatrixMechanism(_bminsep(), [1.0], 1.0)


def test_check_mechanism_names_the_argument():
  # The one check behind account, train, noise_transformation, the accountants and the samplers.
  mechanism = jaxacct.MatrixMechanism(_bminsep(), jaxacct.BandedToeplitz([1.0]), 1.0)
  assert check_mechanism(mechanism) is mechanism
  with pytest.raises(jaxacct.InputTypeError,
                     match=r'^mechanism must be a jaxacct\.MatrixMechanism, got 0\.5$'):
    check_mechanism(0.5)
  with pytest.raises(TypeError, match=r'^candidates\[1\] must be a jaxacct\.MatrixMechanism, got '):
    check_mechanism(_bminsep(), 'candidates[1]')
