"""Multi-attribution b-min-sep accounting (seed 000 §6, Theorem 6.1).

Oracle: ``tests/oracles/multi_attribution.py`` enumerates every participation
vector of Theorem 6.1's model (x_i ~ Binomial(k_u, p) when the previous b − 1
rounds are empty) from its definition, with a dense C. Tolerance
1e-10·max(1, |L|) (observed ≤ 1e-14).
"""

import dataclasses

import jax
import numpy as np
import pytest

import jaxacct
from jaxacct.deterministic import pld
from jaxacct.montecarlo.engine import kernels, sampling
from oracles import brute_force, chi_square
from oracles import multi_attribution as oracle


def _mechanism(k, b, c_col, p=0.35, n=5, sigma=0.9):
  scheme = jaxacct.MultiAttributionBMinSep(sampling_prob=p, iterations=n, min_sep=b,
                                           max_examples_per_user=k)
  return jaxacct.MatrixMechanism(scheme, jaxacct.BandedToeplitz(np.asarray(c_col)), sigma)


@pytest.mark.parametrize('k', [1, 2, 3])
@pytest.mark.parametrize('b', [1, 2, 3])
def test_recursion_matches_enumeration(k, b):
  rng = np.random.default_rng(10 * k + b)
  c_col = np.concatenate([[rng.uniform(0.4, 1.0)], rng.uniform(0.0, 1.0, b - 1)])
  p = float(rng.uniform(0.1, 0.9))
  mech = _mechanism(k, b, c_col, p=p, n=6)
  y = rng.normal(size=(8, 6)) + rng.choice([0.0, 1.0, 2.0], size=(8, 6))
  got = np.asarray(jaxacct.privacy_loss(mech, y, 'remove'))
  want = oracle.privacy_loss(y, c_col, 0.9, p, b, k)
  np.testing.assert_array_less(np.abs(got - want), 1e-10 * np.maximum(1.0, np.abs(want)))


def test_one_example_per_user_equals_the_example_level_engine():
  # k_u = 1 (one user per example after bounding): exactly cold-start b-min-sep.
  multi = _mechanism(1, 3, [1.0, 0.6, 0.3], n=20)
  plain = jaxacct.MatrixMechanism(
      jaxacct.BMinSep(sampling_prob=0.35, iterations=20, min_sep=3, warm_start=False),
      multi.matrix, 0.9)
  key = jax.random.key(2)
  for direction in ('remove', 'add'):
    np.testing.assert_array_equal(jaxacct.sample_privacy_losses(key, multi, 500, direction),
                                  jaxacct.sample_privacy_losses(key, plain, 500, direction))


# Pinned before MultiAttributionKernel.build stopped returning the b-min-sep kernel (issue 44):
# sample_privacy_losses(key(5), _mechanism(1, 2, [1.0, 0.6], n=6), 6, direction, dtype) at
# commit 6191ea9, as float.hex.
ONE_EXAMPLE_PER_USER_LOSSES = {
    ('float64', 'remove'): ['0x1.4ecf88224e532p+0', '-0x1.08542827e7c70p+0',
                            '-0x1.bd399fa880ed6p-3', '-0x1.e37e3a2b8199dp-2',
                            '-0x1.fabba979050ddp-2', '-0x1.1d8a1e6c84c54p-3'],
    ('float64', 'add'): ['0x1.53a64eebf325ep-1', '0x1.996c1c5c9aa4ap+0', '0x1.b5ba582bea3d1p-1',
                         '-0x1.22feb7ea54e57p+0', '0x1.3426820d3e816p+0', '0x1.9e52aebc3fc02p+0'],
    ('float32', 'remove'): ['0x1.4ecf900000000p+0', '-0x1.08542a0000000p+0',
                            '-0x1.bd39800000000p-3', '-0x1.e37e300000000p-2',
                            '-0x1.fabba60000000p-2', '-0x1.1d8a280000000p-3'],
    ('float32', 'add'): ['0x1.53a6500000000p-1', '0x1.996c1e0000000p+0', '0x1.b5ba580000000p-1',
                         '-0x1.22feb60000000p+0', '0x1.3426800000000p+0', '0x1.9e52b00000000p+0'],
}


@pytest.mark.parametrize('dtype', ['float64', 'float32'])
def test_one_example_per_user_draws_are_pinned(dtype):
  # k_u = 1 is served by the b-min-sep kernel of its cold-start chain (Theorem 6.1): the same
  # kernel, so the same streams and bits, as before and as BMinSep(warm_start=False).
  multi = _mechanism(1, 2, [1.0, 0.6], n=6)
  kernel = kernels.kernel_for(multi, np.dtype(dtype))
  assert kernel == kernels.bminsep.BMinSepKernel(6, 2, False, dtype)
  assert kernels.kernel_class(multi.scheme) is kernels.bminsep.BMinSepKernel
  for direction in ('remove', 'add'):
    losses = jaxacct.sample_privacy_losses(jax.random.key(5), multi, 6, direction, dtype=dtype)
    assert [float(v).hex() for v in np.asarray(losses)] == ONE_EXAMPLE_PER_USER_LOSSES[
        dtype, direction]


def test_one_example_per_user_keeps_the_conjecture_refusal():
  scheme = jaxacct.MultiAttributionBMinSep(sampling_prob=0.2, iterations=8, min_sep=2,
                                           max_examples_per_user=1, exclusion='participated')
  with pytest.raises(ValueError, match='unproven Conjecture 6.2'):
    kernels.kernel_class(scheme)
  accepted = dataclasses.replace(scheme, accept_conjecture_6_2=True)
  assert kernels.kernel_class(accepted) is kernels.bminsep.BMinSepKernel
  assert kernels.kernel_class(dataclasses.replace(accepted, max_examples_per_user=2)) is (
      kernels.multi_attribution.MultiAttributionKernel)


@pytest.mark.parametrize('k, b', [(2, 2), (3, 1)])
def test_sampler_law_matches_the_model(k, b):
  # C = I, σ ≈ 0: y reads the participation counts x exactly.
  mech = _mechanism(k, b, [1.0], p=0.4, n=4, sigma=1e-9)
  y, _ = sampling.sample_outputs(jax.random.key(3), mech, 20_000, 'remove')
  x = np.rint(np.asarray(y)).astype(int)
  patterns, probabilities = oracle.pattern_law(4, b, 0.4, k)
  law = dict(zip(map(tuple, patterns.tolist()), probabilities))
  assert chi_square.p_value(map(tuple, x.tolist()), law) > 1e-3


def test_unamplified_sensitivity_is_the_worst_pattern():
  c_col = [1.0, 0.7, 0.2]
  mech = _mechanism(3, 3, c_col, n=7)
  patterns, _ = oracle.pattern_law(7, 3, 0.5, 3)
  dense = brute_force.strategy_matrix(np.asarray(c_col), 7)
  worst = np.max(np.sum((patterns @ dense.T) ** 2, axis=1))
  assert pld.max_sensitivity_squared(mech.scheme, mech.matrix) == pytest.approx(worst, rel=1e-12)


def test_user_rates_and_bad_inputs():
  scheme = jaxacct.MultiAttributionBMinSep(sampling_prob=0.2, iterations=5, min_sep=4,
                                           max_examples_per_user=3)
  p_u = 1 - 0.8**3
  assert scheme.user_sampling_prob == pytest.approx(p_u, rel=1e-14)
  assert scheme.expected_participation_rate == pytest.approx(p_u / (1 + 3 * p_u), rel=1e-14)
  with pytest.raises(ValueError, match='max_examples_per_user must be an integer >= 1, got 0'):
    jaxacct.MultiAttributionBMinSep(sampling_prob=0.2, iterations=5, min_sep=4,
                                    max_examples_per_user=0)
  with pytest.raises(TypeError, match='max_examples_per_user must be an integer'):
    jaxacct.MultiAttributionBMinSep(sampling_prob=0.2, iterations=5, min_sep=4,
                                    max_examples_per_user=2.0)
  with pytest.raises(ValueError, match='c_col must have at most min_sep = 2 entries'):
    _mechanism(2, 2, [1.0, 0.5, 0.2])


def test_algorithm_4_accounting_needs_the_conjecture_flag_and_is_labelled():
  scheme = jaxacct.MultiAttributionBMinSep(sampling_prob=0.2, iterations=8, min_sep=2,
                                           max_examples_per_user=2, exclusion='participated')
  matrix = jaxacct.BandedToeplitz([1.0, 0.5])
  with pytest.raises(ValueError, match='unproven Conjecture 6.2'):
    jaxacct.sample_privacy_losses(jax.random.key(0), jaxacct.MatrixMechanism(scheme, matrix, 1.0),
                                  10, 'remove')
  accepted = jaxacct.MultiAttributionBMinSep(sampling_prob=0.2, iterations=8, min_sep=2,
                                             max_examples_per_user=2, exclusion='participated',
                                             accept_conjecture_6_2=True)
  sigma_up = pld.unamplified_sigma(accepted, matrix, epsilon=1.0, delta=0.05)
  candidates = [jaxacct.MatrixMechanism(accepted, matrix, s) for s in (0.8 * sigma_up, sigma_up)]
  result = jaxacct.verify(jax.random.key(1), candidates, epsilon=1.0, delta=0.1)
  assert result.index == 0  # amplification: below the unamplified σ passes
  assert result.guarantee.method == 'conjectural' and not result.guarantee.verified
  with pytest.raises(ValueError, match='exclusion must be one of'):
    jaxacct.MultiAttributionBMinSep(sampling_prob=0.2, iterations=8, min_sep=2,
                                    max_examples_per_user=2, exclusion='batches')
