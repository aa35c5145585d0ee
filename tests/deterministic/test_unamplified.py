"""The ``"unamplified_gaussian"`` accountant (the EVR fallback) under the contract."""

import math
import sys

import numpy as np

import pytest

import jaxacct
from jaxacct.deterministic import base, pld
from jaxacct import square_root_coefficients

from accountant_contract import AccountantContract, Calibration, Case, mechanism


def _bminsep(**kwargs):
  return jaxacct.BMinSep(sampling_prob=0.2, iterations=12, min_sep=3, **kwargs)


class TestUnamplifiedGaussianAccountant(AccountantContract):
  name = 'unamplified_gaussian'
  consistency_slack = 0.0  # ε(δ) is rounded up, so δ(ε(δ)) ≤ δ exactly

  def supported_cases(self):
    return [
        Case('bminsep-warm', mechanism(_bminsep(), c_col=[1.0, 0.6, 0.3], sigma=3.0)),
        Case('bminsep-truncated', mechanism(
            _bminsep(truncated_batch_size=5, dataset_size=40), c_col=[1.0, 0.5], sigma=3.0)),
        Case('poisson', mechanism(jaxacct.Poisson(sampling_prob=0.1, iterations=5), sigma=2.0)),
        Case('balls_in_bins', mechanism(jaxacct.BallsInBins(iterations=12, cycle_length=4),
                                        c_col=[1.0, 0.5, 0.25, 0.1, 0.05], sigma=2.0)),
        Case('truncated_cyclic', mechanism(jaxacct.CyclicPoisson(
            sampling_prob=0.5, iterations=8, cycle_length=2, partition='equal_split',
            truncated_batch_size=3, dataset_size=11), c_col=[1.0, 0.5], sigma=2.0)),
        Case('multi_attribution', mechanism(jaxacct.MultiAttributionBMinSep(
            sampling_prob=0.1, iterations=8, min_sep=2, max_examples_per_user=2),
            c_col=[1.0, 0.5], sigma=3.0)),
        Case('dense_bminsep', mechanism(jaxacct.BMinSep(
            sampling_prob=0.2, iterations=8, min_sep=2),
            matrix=jaxacct.banded_inverse_square_root(8, 2), sigma=3.0)),
    ]

  def unsupported_cases(self):
    poisson = mechanism(jaxacct.Poisson(sampling_prob=0.1, iterations=5))
    return [Case('poisson-replace_one', poisson, {'adjacency': 'replace_one'}),
            Case('poisson-add_remove', poisson, {'adjacency': 'add_remove'})]

  def calibration_case(self):
    return Calibration(_bminsep(), jaxacct.BandedToeplitz([1.0, 0.6, 0.3]), epsilon=1.0,
                       delta=1e-5, tolerance=1e-4)


SCHEMES = {
    'poisson': (jaxacct.Poisson(sampling_prob=0.1, iterations=20), jaxacct.BandedToeplitz([1.0])),
    'bminsep-sqrt16': (jaxacct.BMinSep(sampling_prob=0.5, iterations=48, min_sep=16),
                       jaxacct.BandedToeplitz(square_root_coefficients(16))),
    'cyclic': (jaxacct.CyclicPoisson(sampling_prob=0.3, iterations=24, cycle_length=4),
               jaxacct.BandedToeplitz([1.0, 0.5, 0.25])),
    'balls_in_bins': (jaxacct.BallsInBins(iterations=12, cycle_length=4),
                      jaxacct.BandedToeplitz([1.0, 0.5, 0.25, 0.1, 0.05])),
    'dense_poisson': (jaxacct.Poisson(sampling_prob=0.1, iterations=8),
                      jaxacct.banded_inverse_square_root(8, 3)),
}


@pytest.mark.parametrize('name', SCHEMES)
@pytest.mark.parametrize('epsilon, delta', [(1.0, 1e-5), (2.0, 5e-4), (0.5, 5e-2)])
def test_sigma_is_unamplified_sigma_bit_for_bit(name, epsilon, delta):
  scheme, matrix = SCHEMES[name]
  expected = pld.unamplified_sigma(scheme, matrix, epsilon=epsilon, delta=delta)
  accountant = base.get('unamplified_gaussian')
  assert accountant.sigma(scheme, matrix, epsilon=epsilon, delta=delta) == expected
  mech, guarantee = accountant.calibrate(scheme, matrix, epsilon=epsilon, delta=delta)
  assert mech.noise_multiplier == guarantee.noise_multiplier == expected
  assert guarantee.accountant == 'unamplified_gaussian'


def test_curve_is_the_gaussian_of_the_sensitivity():
  # Balle & Wang 2018, Thm 8 at Δ = √max‖Cx‖²; reference-values §8: σ = 1, Δ = 1, ε = 1 → δ =
  # 1.269367e-1 (here Δ = 1 by C = [1], one participation).
  mech = mechanism(jaxacct.Poisson(sampling_prob=0.3, iterations=1), sigma=1.0)
  accountant = base.get('unamplified_gaussian')
  assert accountant.delta_for_epsilon(mech, 1.0) == pytest.approx(1.269367e-1, rel=1e-6)
  scheme, matrix = SCHEMES['bminsep-sqrt16']
  mech = jaxacct.MatrixMechanism(scheme, matrix, 5.0)
  sensitivity = math.sqrt(pld.max_sensitivity_squared(scheme, matrix))
  for direction in ('remove', 'add', None):
    assert accountant.delta_for_epsilon(mech, 1.5, direction=direction) == pld.gaussian_delta(
        5.0, sensitivity, 1.5)


def test_gaussian_epsilon_inverts_gaussian_delta():
  for sigma, sensitivity, delta in ((1.0, 1.0, 1e-5), (3.0, 2.0, 0.1), (0.5, 1.0, 1e-10)):
    epsilon = pld.gaussian_epsilon(sigma, sensitivity, delta)
    assert pld.gaussian_delta(sigma, sensitivity, epsilon) <= delta
    assert pld.gaussian_delta(sigma, sensitivity, epsilon * (1 - 1e-9)) > delta
  assert pld.gaussian_epsilon(100.0, 1.0, 0.5) == 0.0  # δ(0) = TV distance < 0.5


def test_gaussian_delta_is_rounded_up_against_high_precision():
  # Oracle: Balle & Wang (2018) Thm 8 in 60-digit mpmath. The float64 difference cancels
  # where ε is large (it under-reported by up to 1.5e-8 relative before the allowance); the
  # allowance keeps δ ≥ the exact value everywhere (below 2.2e-308 the smallest normal float
  # is returned) and costs at most 2e-3 relative at δ ≥ 1e-300: the allowance is relative to
  # the two terms, which exceed δ by up to ~10⁸ where they cancel (1.6e-3 at δ ≈ 1e-307 and
  # 1.5e-3 for ε < 0 measured by the review; ~1e-12 typical).
  mpmath = pytest.importorskip('mpmath')
  mpmath.mp.dps = 60
  rng = np.random.default_rng(7)
  checked = 0
  for case in range(500):
    sigma, sensitivity = 10 ** rng.uniform(-2, 3), 10 ** rng.uniform(-3, 2)
    if case % 5 == 0:  # a = Δ/(2σ) − εσ/Δ cancels: ε near Δ²/(2σ²)
      epsilon = sensitivity**2 / (2 * sigma**2) * (1 + 10 ** rng.uniform(-9, -1))
    elif case % 7 == 0:
      epsilon = -(10 ** rng.uniform(-3, 2.5))
    else:
      epsilon = 0.0 if rng.random() < 0.1 else 10 ** rng.uniform(-6, 1.5)
    s, d, e = mpmath.mpf(sigma), mpmath.mpf(sensitivity), mpmath.mpf(epsilon)
    exact = (mpmath.ncdf(d / (2 * s) - e * s / d)
             - mpmath.exp(e) * mpmath.ncdf(-d / (2 * s) - e * s / d))
    ours = mpmath.mpf(pld.gaussian_delta(sigma, sensitivity, epsilon))
    assert ours >= exact, (sigma, sensitivity, epsilon)
    if exact >= mpmath.mpf('1e-300'):
      assert ours <= exact * (1 + mpmath.mpf('2e-3')), (sigma, sensitivity, epsilon)
      checked += 1
  assert checked > 300
  # Negative ε with a tiny sensitivity: a ≈ 10⁸, the allowance must not overflow δ's exponent.
  assert pld.gaussian_delta(1.0, 1e-8, -3.0) == pytest.approx(1 - math.exp(-3.0), rel=1e-3)
  # Far in the tail δ underflows: the smallest normal float, never 0.
  assert pld.gaussian_delta(1000.0, 5.873, 22576.0) == sys.float_info.min
