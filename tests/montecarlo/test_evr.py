"""EVR failure-bound arithmetic (jaxacct.montecarlo.evr.bounds; spec 000 §8)."""

import math

import hypothesis
import hypothesis.strategies as st
import numpy as np
import pytest

from jaxacct.montecarlo.evr import bounds as evr

try:
  import mpmath
except ImportError:  # pragma: no cover - mpmath ships with dp_accounting
  mpmath = None

needs_mpmath = pytest.mark.skipif(mpmath is None, reason='mpmath not installed')


def _kl_mpmath(a, b, dps=50):
  """Bernoulli KL in mpmath from the exact binary values of the float inputs."""
  with mpmath.workdps(dps):
    a, b = mpmath.mpf(a), mpmath.mpf(b)
    lower = 0 if a == 0 else a * (mpmath.log(a) - mpmath.log(b))
    upper = 0 if a == 1 else (1 - a) * (mpmath.log1p(-a) - mpmath.log1p(-b))
    return lower + upper


def _overall_delta_mpmath(n, base, tau_guess):
  """True min over τ of τδ_b + q(τ)(1 − τδ_b), from the root of its derivative.

  d/dx [x + (1 − x)e^{−N·KL(δ_b‖x)}] = 0  ⇔  N·KL(δ_b‖x) = ln(1 + N(x − δ_b)/x).
  """
  with mpmath.workdps(40):
    b = mpmath.mpf(base)
    kl = lambda x: b * mpmath.log(b / x) + (1 - b) * mpmath.log((1 - b) / (1 - x))
    x0 = b * tau_guess
    x_min = mpmath.findroot(lambda x: n * kl(x) - mpmath.log1p(n * (x - b) / x),
                            (b + (x0 - b) / 1.2, b + (x0 - b) * 1.2), solver='illinois')
    return float(x_min + (1 - x_min) * mpmath.exp(-n * kl(x_min)))


# ---------------------------------------------------------------------------
# Bernoulli KL
# ---------------------------------------------------------------------------

_KL_CASES = [
    (1e-10, 3e-10), (3e-10, 1e-10), (1e-10, 1.0000001e-10), (1e-10, 1e-10 * (1 + 1e-12)),
    (1 - 1e-10, 1 - 3e-10), (1 - 3e-10, 1 - 1e-10), (0.5, 0.5 + 1e-9), (1e-10, 0.5),
    (0.5, 1e-10), (0.0, 1e-10), (1.0, 1e-10), (0.0, 1 - 1e-10), (1.0, 1 - 1e-10),
    (1e-300, 1e-200), (0.3, 0.7), (0.25, 0.75), (1e-5, 3.78e-5),
]


@needs_mpmath
@pytest.mark.parametrize('a, b', _KL_CASES)
def test_kl_matches_mpmath_at_extreme_arguments(a, b):
  # Oracle: 50-digit mpmath on the exact binary values; a ≈ b cases have KL ~ 1e-35.
  np.testing.assert_allclose(evr.bernoulli_kl(a, b), float(_kl_mpmath(a, b)), rtol=1e-14)


@needs_mpmath
@hypothesis.given(
    log_a=st.floats(-12.0, 0.0), log_ratio=st.floats(-3.0, 3.0),
    scale=st.sampled_from([1.0, 1e-4, 1e-8]), mirror=st.booleans())
def test_kl_matches_mpmath_random(log_a, log_ratio, scale, mirror):
  a = 10.0**log_a
  b = 10.0**(log_a + scale * log_ratio)
  hypothesis.assume(b <= 1.0)
  if mirror:
    a, b = 1.0 - a, 1.0 - b
  expected = float(_kl_mpmath(a, b))
  np.testing.assert_allclose(evr.bernoulli_kl(a, b), expected, rtol=1e-14, atol=0.0)


def test_kl_closed_forms_without_mpmath():
  # Exact special cases: KL(0‖b) = −ln(1−b), KL(1‖b) = −ln b, KL(a‖a) = 0; and for
  # a = b(1 + t) with tiny t the leading term (a − b)²/(2b(1 − b)) (relative O(t)).
  b = 1e-10
  assert evr.bernoulli_kl(0.0, b) == pytest.approx(-math.log1p(-b), rel=1e-15)
  assert evr.bernoulli_kl(1.0, b) == pytest.approx(-math.log(b), rel=1e-15)
  assert evr.bernoulli_kl(0.0, 1.0 - 2.0**-30) == pytest.approx(30 * math.log(2), rel=1e-15)
  assert evr.bernoulli_kl(1.0, 1.0 - 2.0**-30) == pytest.approx(-math.log1p(-2.0**-30), rel=1e-15)
  for a in [0.0, 1e-10, 0.3, 1.0 - 1e-10, 1.0]:
    assert evr.bernoulli_kl(a, a) == 0.0
  a = b * (1 + 1e-6)
  assert evr.bernoulli_kl(a, b) == pytest.approx((a - b)**2 / (2 * b * (1 - b)), rel=2e-6)
  # b on the boundary.
  assert evr.bernoulli_kl(0.2, 0.0) == math.inf
  assert evr.bernoulli_kl(0.2, 1.0) == math.inf
  assert evr.bernoulli_kl(0.0, 0.0) == 0.0
  assert evr.bernoulli_kl(1.0, 1.0) == 0.0


def test_kl_broadcasts_and_is_nonnegative():
  a = np.linspace(0.0, 1.0, 11)[:, None]
  b = np.linspace(0.05, 0.95, 7)[None, :]
  value = evr.bernoulli_kl(a, b)
  assert value.shape == (11, 7)
  assert np.all(value >= 0.0)
  assert isinstance(evr.bernoulli_kl(0.1, 0.2), float)


# ---------------------------------------------------------------------------
# Verifier bound
# ---------------------------------------------------------------------------


@pytest.mark.parametrize('num_samples, tau, delta, expected', [
    # reference-values.md §3 [jp-test]: hoeffding(N, τ, δ) = exp(−N·KL(δ‖τδ)), exact values.
    (100, 1.0, 1 / 2, 1.0),
    (3, 2.0, 1 / 3, 1 / 2),
    (6, 2.0, 1 / 3, 1 / 4),
    (2, 3.0, 1 / 4, 1 / 3),
    (4, 3.0, 1 / 4, 1 / 9),
])
def test_hoeffding_reference_values(num_samples, tau, delta, expected):
  assert evr.hoeffding(num_samples, tau, delta) == pytest.approx(expected, rel=1e-14)


def test_hoeffding_is_false_acceptance_bound_in_other_parameterisation():
  for n, tau, delta in [(10, 2.0, 0.1), (10**6, 3.5, 1e-5), (10**12, 1.001, 1e-10)]:
    assert evr.hoeffding(n, tau, delta) == pytest.approx(
        evr.false_acceptance_bound(n, delta, tau * delta), rel=1e-12)


def test_false_acceptance_bound_properties():
  assert evr.false_acceptance_bound(100, 0.2, 0.2) == 1.0
  assert evr.false_acceptance_bound(100, 0.3, 0.2) == 1.0
  assert evr.false_acceptance_bound(5, 0.5, 1.0) == 0.0  # mean 1 ⇒ δ̂ = 1 surely
  assert evr.false_acceptance_bound(5, 0.0, 0.5) == pytest.approx(0.5**5, rel=1e-15)
  # Fact 4.2 exponent, and monotone: fewer acceptances with more samples or larger true δ.
  q = [evr.false_acceptance_bound(n, 1e-5, 3e-5) for n in (10**4, 10**5, 10**6)]
  assert q[0] > q[1] > q[2] > 0.0
  assert q[1] == pytest.approx(math.exp(-1e5 * evr.bernoulli_kl(1e-5, 3e-5)), rel=1e-14)
  assert (evr.false_acceptance_bound(10**5, 1e-5, 4e-5)
          < evr.false_acceptance_bound(10**5, 1e-5, 3e-5))


# ---------------------------------------------------------------------------
# Overall δ
# ---------------------------------------------------------------------------


@pytest.mark.parametrize('num_samples, base, expected, rtol', [
    # reference-values.md §4 [jp-run: jax_privacy get_overall_delta; reproduced from the
    # formula of spec 000 §8.3]. Ours is the exact minimum (mpmath-checked below), 1e-11
    # below jax_privacy's bounded-Brent value at most.
    (10**4, 1e-3, 3.1151987672809987e-3, 1e-9),
    (10**6, 1e-5, 3.7797754229450275e-5, 1e-9),
    (10**7, 1e-6, 4.092370060837331e-6, 1e-9),
    # The two 4-digit entries; the parenthesised 10-digit values are the references.
    (2 * 10**5, 5e-3, 0.0057833187, 1e-6),
    (2 * 10**4, 5e-3, 0.0075413320, 1e-6),
])
def test_overall_delta_reference_values(num_samples, base, expected, rtol):
  assert evr.overall_delta(num_samples, base) == pytest.approx(expected, rel=rtol)


@needs_mpmath
@pytest.mark.parametrize('num_samples, base', [
    (10**4, 1e-3), (10**7, 1e-6), (2 * 10**4, 5e-3), (7, 0.3), (10**12, 1e-10),
    (10**12, 0.999999), (10**3, 1e-100), (10**12, 1e-300),
])
def test_overall_delta_is_the_true_minimum(num_samples, base):
  # Oracle: root of the derivative in 40-digit mpmath. The returned value is the
  # objective at a feasible τ, so it can only sit above the minimum (by rounding here).
  value, excess = evr._minimise(num_samples, base)
  expected = _overall_delta_mpmath(num_samples, base, 1.0 + excess)
  assert value == pytest.approx(expected, rel=1e-14)
  assert value >= expected * (1 - 1e-15)


def test_overall_delta_is_below_every_tau():
  n, base = 10**5, 1e-4
  value = evr.overall_delta(n, base)
  taus = np.concatenate([1.0 + np.geomspace(1e-6, 1.0 / base - 1.0, 300), [1.0, 1.0 / base]])
  at_tau = np.array([evr.overall_delta_at(n, base, t) for t in taus])
  assert np.all(value <= at_tau)
  assert evr.overall_delta_at(n, base, 1.0) == 1.0  # q(1) = 1
  assert evr.overall_delta_at(n, base, 1.0 / base) == pytest.approx(1.0, rel=1e-15)


@pytest.mark.parametrize('num_samples', [10, 10**3, 10**5, 10**7, 10**9])
def test_overall_delta_increasing_in_base_delta(num_samples):
  bases = np.geomspace(1e-9, 0.9, 40)
  values = np.array([evr.overall_delta(num_samples, b) for b in bases])
  assert np.all(np.diff(values) > 0.0)
  assert np.all(values >= bases)
  assert np.all(values <= 1.0)


@pytest.mark.parametrize('base', [1e-8, 1e-5, 1e-3, 0.05, 0.5])
def test_overall_delta_decreasing_in_num_samples(base):
  counts = [1, 2, 10, 100, 10**3, 10**4, 10**5, 10**6, 10**8, 10**10, 10**12]
  values = np.array([evr.overall_delta(n, base) for n in counts])
  assert np.all(np.diff(values) <= 0.0)
  assert values[-1] < values[0]
  assert np.all((values >= base) & (values <= 1.0))


def test_overall_delta_limits():
  # N = 1, δ_b → 0: min_x x + (1 − x)² = 3/4. Large N: δ_overall → δ_b.
  assert evr.overall_delta(1, 1e-300) == pytest.approx(0.75, rel=1e-12)
  assert evr.overall_delta(10**12, 1e-3) == pytest.approx(1e-3, rel=1e-3)
  assert evr.overall_delta(np.int64(10**4), np.float64(1e-3)) == evr.overall_delta(10**4, 1e-3)


# ---------------------------------------------------------------------------
# Base δ
# ---------------------------------------------------------------------------


@pytest.mark.parametrize('num_samples, target, expected, exact_digits', [
    # reference-values.md §4 [jp-run: jax_privacy get_base_delta], tolerance 1e-4 × target.
    # jax_privacy steps one x-tolerance (1e-4·target) down from an optimiser result;
    # ours is the largest valid δ_b to 1e-7 relative, so it may only be higher.
    (1000, 0.1, 0.06698749625420028, True),  # jax_privacy's _FAILURE_DELTA
    (10**4, 1e-2, 6.032232199550037e-3, True),
    (10**5, 1e-3, 5.574574840091988e-4, True),
    (2 * 10**7, 1e-5, 6.187342084795904e-6, True),
    (2 * 10**5, 1e-2, 0.008979, False),  # 4 significant digits
    (2 * 10**4, 1e-2, 0.007070, False),
])
def test_base_delta_reference_values(num_samples, target, expected, exact_digits):
  value = evr.base_delta(num_samples, target)
  assert abs(value - expected) <= 1e-4 * target
  if exact_digits:
    assert value >= expected
  assert evr.overall_delta(num_samples, value) <= target


@pytest.mark.parametrize('num_samples, target', [
    (100, 0.2), (1000, 0.1), (10**4, 1e-2), (10**6, 1e-4), (10**8, 1e-6), (10**12, 1e-10),
])
def test_base_delta_round_trip(num_samples, target):
  value = evr.base_delta(num_samples, target)
  assert 0.0 < value < target
  assert evr.overall_delta(num_samples, value) <= target  # never above the target
  # Largest to 1e-6 relative: a slightly larger δ_b already fails.
  assert evr.overall_delta(num_samples, value * (1 + 1e-6)) > target


def test_base_delta_too_few_samples_says_how_many_are_needed():
  # N = 10⁶, target 1e-5: lim_{δ_b→0} δ_overall = min_x x + (1−x)^{N+1} ≈ 1.48e-5 > target
  # (jax_privacy raises its own validation error here).
  needed = evr.minimum_samples(0.5e-5, 1e-5)
  with pytest.raises(ValueError, match=r'num_samples=1000000 is too small') as info:
    evr.base_delta(10**6, 1e-5)
  assert str(needed) in str(info.value)
  assert evr.base_delta(needed, 1e-5) >= 0.5e-5
  with pytest.raises(ValueError, match='too small'):
    evr.base_delta(1, 0.5)


# ---------------------------------------------------------------------------
# Minimum number of samples
# ---------------------------------------------------------------------------


@pytest.mark.parametrize('base, target, expected', [
    # reference-values.md §4 [jp-run: jax_privacy minimum_samples_to_calibrate]; exact.
    (5e-3, 1e-2, 5788),
    (8e-4, 1e-3, 588_622),
    (5e-6, 1e-5, 10_745_967),
])
def test_minimum_samples_reference_values_and_minimality(base, target, expected):
  n = evr.minimum_samples(base, target)
  assert n == expected and isinstance(n, int)
  assert evr.overall_delta(n, base) <= target
  assert evr.overall_delta(n - 1, base) > target  # N − 1 fails
  assert evr.base_delta(n, target) >= base  # and base_delta(N, target) succeeds


def test_minimum_samples_large_counts():
  # δ_b close to the target needs N far beyond 1e12; the count stays an exact Python int.
  n = evr.minimum_samples(0.5e-10, 1e-10)
  assert isinstance(n, int) and 10**12 < n < 10**13
  assert evr.overall_delta(n, 0.5e-10) <= 1e-10 < evr.overall_delta(n - 1, 0.5e-10)
  assert evr.minimum_samples(0.5, 0.9) >= 1


# ---------------------------------------------------------------------------
# Argument validation
# ---------------------------------------------------------------------------


@pytest.mark.parametrize('call, name', [
    (lambda: evr.bernoulli_kl(-0.1, 0.5), 'a'),
    (lambda: evr.bernoulli_kl(0.5, [0.2, 1.5]), 'b'),
    (lambda: evr.bernoulli_kl(np.nan, 0.5), 'a'),
    (lambda: evr.false_acceptance_bound(0, 0.1, 0.2), 'num_samples'),
    (lambda: evr.false_acceptance_bound(10, 1.5, 0.2), 'threshold'),
    (lambda: evr.false_acceptance_bound(10, 0.1, 0.0), 'true_delta'),
    (lambda: evr.hoeffding(10, 0.5, 0.1), 'tau'),
    (lambda: evr.hoeffding(10, 20.0, 0.1), 'tau'),
    (lambda: evr.hoeffding(10, 2.0, 0.0), 'delta'),
    (lambda: evr.overall_delta(0, 1e-3), 'num_samples'),
    (lambda: evr.overall_delta(-5, 1e-3), 'num_samples'),
    (lambda: evr.overall_delta(100, 0.0), 'base_delta'),
    (lambda: evr.overall_delta(100, 1.0), 'base_delta'),
    (lambda: evr.overall_delta(100, math.nan), 'base_delta'),
    (lambda: evr.overall_delta_at(100, 1e-3, 0.5), 'tau'),
    (lambda: evr.base_delta(100, 0.0), 'target_delta'),
    (lambda: evr.base_delta(100, 1.0), 'target_delta'),
    (lambda: evr.base_delta(0, 0.1), 'num_samples'),
    (lambda: evr.minimum_samples(0.0, 0.1), 'base_delta'),
    (lambda: evr.minimum_samples(0.1, 1.0), 'target_delta'),
    (lambda: evr.minimum_samples(0.1, 0.1), 'base_delta must be < target_delta'),
    (lambda: evr.minimum_samples(0.2, 0.1), 'base_delta must be < target_delta'),
])
def test_bad_values_name_the_argument(call, name):
  with pytest.raises(ValueError, match=name):
    call()


@pytest.mark.parametrize('call', [
    lambda: evr.overall_delta(1e4, 1e-3),  # a float count (jaxacct convention: TypeError)
    lambda: evr.overall_delta(True, 1e-3),
    lambda: evr.base_delta(1000, '0.1'),
])
def test_wrong_types_are_type_errors_naming_the_argument(call):
  with pytest.raises(TypeError, match='num_samples|target_delta'):
    call()
