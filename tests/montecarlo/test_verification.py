"""Algorithm 5, the deterministic fallback and σ calibration (seed 000 App. A)."""

import math

import jax
import numpy as np
import pytest

import jaxacct
from jaxacct.deterministic import pld
from jaxacct import square_root_coefficients
from jaxacct.montecarlo.evr import bounds as evr, verification
from oracles import brute_force


@pytest.fixture
def ledger():
  """One session's verification ledger, shared by the calls of a test."""
  return verification.VerificationLedger()


@pytest.mark.parametrize('accepted, expected', [
    ([True, True, True, True], 0),            # all pass: the least private candidate
    ([False, True, True, True], 1),           # the first fails
    ([False, False, False, True], 3),         # all Monte Carlo candidates fail: fallback
    ([True, False, True, True], 2),           # non-monotone: stop at the first rejection from the top
    ([True, True, False, True], 3),
    ([True], 0),
])
def test_released_index(accepted, expected):
  assert verification.released_index(accepted) == expected


# Fallback: exact max ‖Cx‖² against the brute-force enumeration of every participation pattern,
# with the unnormalised 4 square-root coefficients (‖c‖ > 1), and the Gaussian bound it implies.
C4 = square_root_coefficients(4)
SENSITIVITY_CASES = [
    (jaxacct.BMinSep(sampling_prob=.5, iterations=10, min_sep=4), 'bminsep',
     dict(sampling_prob=.5, min_sep=4, warm_start=True), C4),
    (jaxacct.Poisson(sampling_prob=.5, iterations=6), 'poisson', dict(sampling_prob=.5), C4[:1]),
    (jaxacct.CyclicPoisson(sampling_prob=.5, iterations=9, cycle_length=4), 'cyclic_poisson',
     dict(sampling_prob=.5, cycle_length=4, partition='independent'), C4),
    (jaxacct.BallsInBins(iterations=9, cycle_length=2), 'balls_in_bins', dict(cycle_length=2), C4),
]


@pytest.mark.parametrize('scheme, kind, kwargs, c_col', SENSITIVITY_CASES,
                         ids=[k for _, k, _, _ in SENSITIVITY_CASES])
def test_max_sensitivity_matches_enumeration(scheme, kind, kwargs, c_col):
  patterns, _ = brute_force.participation_law(kind, iterations=scheme.iterations, **kwargs)
  modes = patterns @ brute_force.strategy_matrix(c_col, scheme.iterations).T
  expected = float(np.max(np.sum(modes**2, axis=1)))
  got = pld.max_sensitivity_squared(scheme, jaxacct.BandedToeplitz(c_col))
  assert got == pytest.approx(expected, rel=1e-12)


def test_gaussian_reference_values():
  # reference-values.md §7 [dpa]: get_sigma_gaussian(ε, 1e-5) for sensitivity 1 (1e-6 relative).
  for epsilon, sigma in [(0.5, 7.031827), (1, 3.730632), (2, 1.993812), (8, 0.600229)]:
    assert pld.gaussian_sigma(epsilon, 1e-5, 1.0) == pytest.approx(sigma, rel=1e-6)
  # §8 analytic δ(ε): σ = 1, ε = 1 -> 1.269367e-1; σ = 2, ε = 2 -> 9.439169e-6.
  assert pld.gaussian_delta(1.0, 1.0, 1.0) == pytest.approx(1.269367e-1, rel=1e-6)
  assert pld.gaussian_delta(2.0, 1.0, 2.0) == pytest.approx(9.439169e-6, rel=1e-6)


@pytest.mark.slow
def test_fallback_is_private_for_unnormalised_coefficients():
  # 16 square-root coefficients (‖c‖² ≈ 2.3, not normalised): σ_up must carry the column norm.
  scheme = jaxacct.BMinSep(sampling_prob=0.5, iterations=48, min_sep=16)
  matrix = jaxacct.BandedToeplitz(square_root_coefficients(16))
  epsilon, base = 1.0, 1e-2
  sigma_up = pld.unamplified_sigma(scheme, matrix, epsilon=epsilon, delta=base)
  sensitivity = math.sqrt(pld.max_sensitivity_squared(scheme, matrix))
  assert sensitivity > 2.0 * math.sqrt(1.0) and sigma_up > pld.gaussian_sigma(epsilon, base, 1.0)
  assert pld.gaussian_delta(sigma_up, sensitivity, epsilon) <= base
  # Monte Carlo at σ_up, both directions: below δ_b (the bound is loose, so δ̂ is far below).
  estimate = jaxacct.estimate_delta(jax.random.key(0), jaxacct.MatrixMechanism(scheme, matrix, sigma_up),
                                    [epsilon], 20_000)
  for direction in ('remove', 'add'):
    assert estimate.delta_hat[direction][0] + 3 * estimate.standard_error[direction][0] <= base


POISSON = jaxacct.Poisson(sampling_prob=0.1, iterations=20)
IDENTITY = jaxacct.BandedToeplitz([1.0])


def _candidates(sigmas, scheme=POISSON, matrix=IDENTITY):
  return [jaxacct.MatrixMechanism(scheme, matrix, s) for s in sigmas]


@pytest.mark.slow
def test_verify_end_to_end_and_refuses_reruns(ledger):
  sigma_up = pld.unamplified_sigma(POISSON, IDENTITY, epsilon=1.0, delta=5e-4)
  cands = _candidates([1.2, 1.7, 2.0, sigma_up])
  result = jaxacct.verify(jax.random.key(100), cands, epsilon=1.0, delta=1e-3,
                          run=jaxacct.RunOptions(ledger=ledger))
  # PLD σ at δ_b = 5e-4 is 1.6005 (dp_accounting): 1.2 must fail, 1.7 and 2.0 pass.
  assert result.accepted == (False, True, True, True) and result.index == 1
  g = result.guarantee
  assert g.method == 'verified_mc' and g.verified and g.noise_multiplier == 1.7
  assert g.base_delta == 5e-4 and g.num_samples == jaxacct.minimum_samples(5e-4, 1e-3)
  assert g.delta == pytest.approx(jaxacct.overall_delta(g.num_samples, 5e-4)) and g.delta <= 1e-3
  # The same run reproduces; another key, or other candidates or N for the same mechanism
  # and (ε, δ), without declaring the attempt is refused.
  again = jaxacct.verify(jax.random.key(100), cands, epsilon=1.0, delta=1e-3,
                         run=jaxacct.RunOptions(ledger=ledger))
  assert again.delta_hat == result.delta_hat and again.guarantee.attempts == 1
  with pytest.raises(ValueError, match='attempt=2'):
    jaxacct.verify(jax.random.key(101), cands, epsilon=1.0, delta=1e-3,
                   run=jaxacct.RunOptions(ledger=ledger))
  with pytest.raises(ValueError, match='attempt=2'):
    jaxacct.verify(jax.random.key(100), cands[1:], epsilon=1.0, delta=1e-3,
                   run=jaxacct.RunOptions(ledger=ledger))
  with pytest.raises(ValueError, match='attempt=2'):
    jaxacct.verify(jax.random.key(100), cands, epsilon=1.0, delta=1e-3,
                   monte_carlo=jaxacct.MonteCarloOptions(num_samples=200_000, base_delta=5e-4),
                   run=jaxacct.RunOptions(ledger=ledger))
  # A declared second attempt is charged a union bound: the first run (N = g.num_samples) could
  # back this claim and is charged at its own N, which costs more than 2·q at N = 200,000.
  second = jaxacct.verify(jax.random.key(101), cands, epsilon=1.0, delta=1e-3,
                          monte_carlo=jaxacct.MonteCarloOptions(
                              num_samples=200_000, base_delta=5e-4, attempt=2),
                          run=jaxacct.RunOptions(ledger=ledger))
  assert second.guarantee.attempts == 2
  assert second.guarantee.delta == evr.overall_delta(200_000, 5e-4, attempts=2,
                                                     earlier=[(g.num_samples, 5e-4)])
  assert second.guarantee.delta > evr.overall_delta(200_000, 5e-4, attempts=2)


def test_all_fail_releases_the_fallback():
  sigma_up = pld.unamplified_sigma(POISSON, IDENTITY, epsilon=1.0, delta=5e-2)
  result = jaxacct.verify(jax.random.key(7), _candidates([0.5, 0.6, sigma_up]), epsilon=1.0,
                          delta=1e-1)
  assert result.accepted == (False, False, True)
  assert result.guarantee.method == 'fallback' and result.guarantee.noise_multiplier == sigma_up


def test_verify_bad_input():
  sigma_up = pld.unamplified_sigma(POISSON, IDENTITY, epsilon=1.0, delta=5e-4)
  with pytest.raises(ValueError, match='strictly increasing noise_multiplier'):
    jaxacct.verify(jax.random.key(0), _candidates([2.0, 1.5, sigma_up]), epsilon=1.0, delta=1e-3)
  with pytest.raises(ValueError, match='deterministic accountant'):
    jaxacct.verify(jax.random.key(0), _candidates([1.0, 2.0]), epsilon=1.0, delta=1e-3)
  with pytest.raises(ValueError, match='one scheme'):
    jaxacct.verify(jax.random.key(0), [jaxacct.MatrixMechanism(POISSON, IDENTITY, 1.0),
                                       jaxacct.MatrixMechanism(jaxacct.Poisson(
                                           sampling_prob=.2, iterations=20), IDENTITY, 50.0)],
                   epsilon=1.0, delta=1e-3)
  with pytest.raises(ValueError, match='at least 588622 samples are needed'):
    jaxacct.verify(jax.random.key(0), _candidates([1.0, sigma_up]), epsilon=1.0, delta=1e-3,
                   monte_carlo=jaxacct.MonteCarloOptions(num_samples=1000, base_delta=8e-4))
  with pytest.raises(ValueError, match='base_delta must be < delta'):
    jaxacct.verify(jax.random.key(0), _candidates([1.0, sigma_up]), epsilon=1.0, delta=1e-3,
                   monte_carlo=jaxacct.MonteCarloOptions(base_delta=2e-3))
  with pytest.raises(ValueError, match='delta must be in'):
    jaxacct.verify(jax.random.key(0), _candidates([1.0, sigma_up]), epsilon=1.0, delta=1.5)
  with pytest.raises(TypeError, match='key must be a JAX PRNG key'):
    jaxacct.verify(3, _candidates([1.0, sigma_up]), epsilon=1.0, delta=1e-3)


@pytest.fixture(scope='module')
def poisson_pld_sigma() -> float:
  """dp_accounting PLD σ for Poisson DP-SGD (q = 0.1, T = 20, ε = 1) at δ_b = 5e-4: 1.60054
  (PLD, 1e-4 discretisation, tolerance 1e-6: ~10 s, computed once for the tests using it)."""
  return pld.dpsgd_sigma(0.1, 20, epsilon=1.0, delta=5e-4, tolerance=1e-6, discretization=1e-4)


@pytest.mark.slow
def test_calibration_matches_pld_for_poisson_dpsgd(poisson_pld_sigma):
  # MC + grid error against the PLD σ: the 1.01 grid plus a few % of MC noise in δ.
  reference = poisson_pld_sigma
  calls = []
  result = jaxacct.calibrate_noise_multiplier(
      POISSON, IDENTITY, epsilon=1.0, delta=1e-3, key=jax.random.key(2),
      run=jaxacct.RunOptions(progress=lambda done, total, stage: calls.append((done, total,
                                                                               stage))))
  assert result.guarantee.method == 'verified_mc'
  assert reference / 1.03 <= result.mechanism.noise_multiplier <= reference * 1.03
  assert result.guarantee.delta <= 1e-3 and result.candidates[-1] > result.mechanism.noise_multiplier
  # Progress: one stage per estimation sweep, then the verification, each run to its total.
  stages = list(dict.fromkeys(stage for _, _, stage in calls))
  sweeps = len(result.record.sweeps)
  assert stages == [f'estimation sweep {i}' for i in range(1, sweeps + 1)] + ['verification']
  for stage in stages:
    counts = [(done, total) for done, total, s in calls if s == stage]
    assert counts[-1][0] == counts[-1][1] and all(
        a[0] < b[0] for a, b in zip(counts, counts[1:]))
  assert calls[-1][1] == 2 * result.record.num_samples  # shared draws: one program


@pytest.mark.slow
def test_bminsep_needs_less_noise_than_poisson(poisson_pld_sigma):
  # Same expected participation rate p0 = 0.1 and C = I; b-min-sep (b = 4) has less variance
  # in the participation count (seed 000 §4.1), so its calibrated σ is below Poisson's PLD σ.
  scheme = jaxacct.BMinSep.from_expected_batch_size(expected_batch_size=10, dataset_size=100,
                                                    iterations=20, min_sep=4)
  poisson_sigma = poisson_pld_sigma
  result = jaxacct.calibrate_noise_multiplier(scheme, IDENTITY, epsilon=1.0, delta=1e-3,
                                              key=jax.random.key(3))
  assert result.guarantee.verified
  assert result.mechanism.noise_multiplier < poisson_sigma / 1.02


def test_calibration_bad_input():
  with pytest.raises(ValueError, match='grid_ratio'):
    jaxacct.calibrate_noise_multiplier(POISSON, IDENTITY, epsilon=1.0, delta=1e-3,
                                       key=jax.random.key(0),
                                       monte_carlo=jaxacct.MonteCarloOptions(grid_ratio=1.0))
  with pytest.raises(ValueError, match='delta must be in'):
    jaxacct.calibrate_noise_multiplier(POISSON, IDENTITY, epsilon=1.0, delta=0.0,
                                       key=jax.random.key(0))


@pytest.mark.parametrize('iterations, cycle, q, sigma, expected', [
    (2000, 8, 0.04, 1.5, 2.05806),   # reference-values.md §9 [dpa]: 250 steps
    (1000, 4, 0.01, 1.0, 0.993477),  # reference-values.md §9 [dpa]: 250 steps
])
def test_cyclic_poisson_pld_matches_reference(iterations, cycle, q, sigma, expected):
  # C normalised to max column norm 1 (the reference's assumption); tolerance 1e-3 relative.
  c_col = np.asarray([1.0, 0.5, 0.25])[:min(3, cycle)]
  scheme = jaxacct.CyclicPoisson(sampling_prob=q, iterations=iterations, cycle_length=cycle,
                                 partition='equal_split')
  normalised = pld.cyclic_poisson_pld(scheme, jaxacct.BandedToeplitz(c_col / np.linalg.norm(c_col)),
                                      sigma)
  assert normalised.get_epsilon_for_delta(1e-5) == pytest.approx(expected, rel=1e-3)
  # Unnormalised c_col: σ is divided by the column norm, i.e. the same as σ/‖c‖ with unit columns.
  raw = pld.cyclic_poisson_pld(scheme, jaxacct.BandedToeplitz(c_col), sigma * np.linalg.norm(c_col))
  assert raw.get_epsilon_for_delta(1e-5) == pytest.approx(expected, rel=1e-3)


def test_cyclic_poisson_monte_carlo_agrees_with_its_pld():
  # Equal-split cyclic Poisson with no truncated phase-0 column: the PLD reduction is exact
  # (up to pessimistic 1e-4 discretisation), so MC δ̂ per direction must agree within 4 s.e.
  c_col = np.asarray([1.0, 0.5]) / np.linalg.norm([1.0, 0.5])
  scheme = jaxacct.CyclicPoisson(sampling_prob=0.3, iterations=40, cycle_length=4,
                                 partition='equal_split')
  mechanism = jaxacct.MatrixMechanism(scheme, jaxacct.BandedToeplitz(c_col), 1.0)
  distribution = pld.cyclic_poisson_pld(scheme, mechanism.matrix, 1.0)
  estimate = jaxacct.estimate_delta(jax.random.key(12), mechanism, [0.5, 1.0], 100_000)
  # dp_accounting 0.6.0 has no public per-direction accessor (pinned version; see test_sampling).
  expected = {'remove': distribution._pmf_remove, 'add': distribution._pmf_add}
  for direction in ('remove', 'add'):
    for i, eps in enumerate([0.5, 1.0]):
      want = expected[direction].get_delta_for_epsilon(eps)
      got, se = estimate.delta_hat[direction][i], estimate.standard_error[direction][i]
      assert abs(got - want) <= 4 * se, (direction, eps, got, want, se)


# -- the fallback accountant (issue 12: verify(..., fallback=) takes an accountant)
def test_released_fallback_names_its_accountant():
  sigma_up = pld.unamplified_sigma(POISSON, IDENTITY, epsilon=1.0, delta=5e-2)
  result = jaxacct.verify(jax.random.key(7), _candidates([0.5, sigma_up]), epsilon=1.0,
                          delta=1e-1)
  assert result.guarantee.method == 'fallback'
  assert result.guarantee.accountant == verification.DEFAULT_FALLBACK == 'unamplified_gaussian'
  # A verified Monte Carlo candidate is proven by no deterministic accountant.
  passed = jaxacct.verify(jax.random.key(7), _candidates([3.0, sigma_up]), epsilon=1.0, delta=1e-1,
                          monte_carlo=jaxacct.MonteCarloOptions(
                              attempt=2))  # other candidates: a second attempt
  assert passed.guarantee.method == 'verified_mc' and passed.guarantee.accountant is None


@pytest.mark.slow
def test_pld_fallback_proves_a_smaller_last_candidate(monkeypatch):
  # Untruncated Poisson DP-SGD: the PLD σ at (ε, δ_b) is far below the unamplified one, so a
  # last candidate between them is refused by the default fallback and accepted by "pld".
  from jaxacct.deterministic import base
  pld_accountant = base.get('pld')
  # The PLD σ search (~15 PLD builds, most of this test's time) runs once: the refusal at the
  # end names the σ of the same search (same arguments), which verify would search again.
  searched = {}
  search = pld_accountant.sigma

  def sigma_once(*args, **kwargs):
    key = repr((args, sorted(kwargs.items())))
    if key not in searched:
      searched[key] = search(*args, **kwargs)
    return searched[key]

  monkeypatch.setattr(pld_accountant, 'sigma', sigma_once)
  sigma_pld = pld_accountant.sigma(POISSON, IDENTITY, epsilon=1.0, delta=5e-2)
  sigma_up = pld.unamplified_sigma(POISSON, IDENTITY, epsilon=1.0, delta=5e-2)
  assert sigma_pld < 0.5 * sigma_up
  last = 1.001 * sigma_pld
  with pytest.raises(ValueError, match=r"deterministic accountant \(fallback='unamplified_gauss"):
    jaxacct.verify(jax.random.key(7), _candidates([0.1, last]), epsilon=1.0, delta=1e-1)
  for fallback in ('pld', pld_accountant):
    result = jaxacct.verify(jax.random.key(7), _candidates([0.1, last]), epsilon=1.0, delta=1e-1,
                            monte_carlo=jaxacct.MonteCarloOptions(fallback=fallback))
    assert result.accepted == (False, True) and result.guarantee.accountant == 'pld'
    assert result.guarantee.noise_multiplier == last
  # Below the PLD σ, the error gives the σ that the fallback proves.
  with pytest.raises(ValueError, match=f'must be >= {sigma_pld}'):
    jaxacct.verify(jax.random.key(7), _candidates([0.1, 0.99 * sigma_pld]), epsilon=1.0, delta=1e-1,
                   monte_carlo=jaxacct.MonteCarloOptions(fallback='pld'))
  assert len(searched) == 1  # verify asked for the σ of the same (scheme, C, ε, δ_b)


def test_fallback_bad_input():
  bins = jaxacct.BallsInBins(iterations=8, cycle_length=4)
  sigma_up = pld.unamplified_sigma(bins, IDENTITY, epsilon=1.0, delta=5e-2)
  cands = [jaxacct.MatrixMechanism(bins, IDENTITY, s) for s in (1.0, sigma_up)]
  with pytest.raises(ValueError, match="fallback accountant 'pld' cannot prove"):
    jaxacct.verify(jax.random.key(0), cands, epsilon=1.0, delta=1e-1,
                   monte_carlo=jaxacct.MonteCarloOptions(fallback='pld'))
  with pytest.raises(ValueError, match='unknown deterministic accountant'):
    jaxacct.verify(jax.random.key(0), cands, epsilon=1.0, delta=1e-1,
                   monte_carlo=jaxacct.MonteCarloOptions(fallback='gaussian'))
  with pytest.raises(TypeError,
                     match='fallback must be a registered accountant name or a deterministic accountant'):
    jaxacct.verify(jax.random.key(0), cands, epsilon=1.0, delta=1e-1,
                   monte_carlo=jaxacct.MonteCarloOptions(fallback=3))
  with pytest.raises(ValueError, match="fallback accountant 'pld' cannot prove"):
    jaxacct.calibrate_noise_multiplier(bins, IDENTITY, epsilon=1.0, delta=1e-1,
                                       key=jax.random.key(0),
                                       monte_carlo=jaxacct.MonteCarloOptions(fallback='pld'))


@pytest.mark.slow
def test_calibration_with_pld_fallback_records_it():
  # Truncated Poisson, where "pld" (seed 001) supports the mechanism: σ_up is the PLD σ at
  # (ε, δ_b), below the unamplified bound, and the record names the accountant.
  from jaxacct.deterministic import base
  # m = 50, B = 9 (issue 27: m = 100, B = 18 took 91 s, two PLD calibrations of 45 s each).
  scheme = jaxacct.Poisson(sampling_prob=0.1, iterations=20, truncated_batch_size=9,
                           dataset_size=50)
  # Two blocks per call (performance only): the runs need one or two blocks; a call of the
  # default size computes 51.
  result = jaxacct.calibrate_noise_multiplier(scheme, IDENTITY, epsilon=1.0, delta=1e-1,
                                              key=jax.random.key(4),
                                              monte_carlo=jaxacct.MonteCarloOptions(
                                                  fallback='pld', num_candidates=2),
                                              run=jaxacct.RunOptions(blocks_per_call=2))
  record = result.record
  assert record.fallback_accountant == 'pld' and record['fallback_accountant'] == 'pld'
  # σ_up is the PLD accountant's smallest σ (its contract: (ε, δ_b)-DP at σ, not at
  # σ·(1 − 2·10⁻⁴)); two δ(ε) evaluations instead of repeating its ~20-probe search.
  accountant = base.get('pld')
  sigma_up = record.sigma_up
  assert sigma_up == result.candidates[-1]
  assert accountant.delta_for_epsilon(jaxacct.MatrixMechanism(scheme, IDENTITY, sigma_up),
                                      1.0) <= record.base_delta
  assert accountant.delta_for_epsilon(jaxacct.MatrixMechanism(
      scheme, IDENTITY, sigma_up * (1 - 2e-4)), 1.0) > record.base_delta
  assert sigma_up < pld.unamplified_sigma(scheme, IDENTITY, epsilon=1.0, delta=record.base_delta)
  assert result.guarantee.accountant == ('pld' if result.guarantee.method == 'fallback' else None)
