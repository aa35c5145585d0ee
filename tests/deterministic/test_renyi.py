"""The ``"renyi"`` accountant (seed 002 §3) under the contract, against brute force, closed
forms and the Monte Carlo estimate of the same pair."""

import dataclasses
import math

import jax
import numpy as np
import pytest
from scipy import special

import jaxacct
from jaxacct.deterministic import base, random_allocation, renyi

from accountant_contract import AccountantContract, Calibration, Case, mechanism
from oracles import random_allocation as oracle

BALLS = jaxacct.BallsInBins(iterations=12, cycle_length=4)  # k = 3 epochs


class TestRenyiAccountant(AccountantContract):
  name = 'renyi'
  consistency_slack = 1e-9  # ε(δ) and δ(ε) minimise the same closed forms over the orders

  def supported_cases(self):
    return [
        Case('dpsgd-k3', mechanism(BALLS, sigma=1.5)),
        Case('banded-k3', mechanism(BALLS, c_col=[1.0, 0.5, 0.25], sigma=2.0)),
        Case('banded-partial-epoch', mechanism(jaxacct.BallsInBins(iterations=10, cycle_length=4),
                                               c_col=[1.0, 0.6], sigma=1.5)),
        Case('dense-bisr', mechanism(BALLS, matrix=jaxacct.banded_inverse_square_root(12, 2),
                                     sigma=2.0)),
        Case('add_remove-small-budget', mechanism(BALLS, c_col=[1.0, 0.5], sigma=1.5),
             {'adjacency': 'add_remove', 'bandwidths': [1, 2], 'alpha_max': 24,
              'max_transitions': 25_000}),
    ]

  def unsupported_cases(self):
    return [
        Case('poisson', mechanism(jaxacct.Poisson(sampling_prob=0.25, iterations=12))),
        Case('cyclic_poisson', mechanism(jaxacct.CyclicPoisson(
            sampling_prob=0.5, iterations=12, cycle_length=4))),
        Case('replace_one', mechanism(BALLS), {'adjacency': 'replace_one'}),
    ]

  def calibration_case(self):
    return Calibration(BALLS, jaxacct.BandedToeplitz([1.0, 0.5]), epsilon=2.0, delta=1e-5,
                       tolerance=1e-3)


def _gram(scheme, c_col):
  return random_allocation.gram_matrix(scheme, jaxacct.BandedToeplitz(c_col))


def _remove(gram, sigma, alpha, bandwidth):
  """ρ(α) of the recursion at one bandwidth (τ bound included)."""
  truncated, tau = renyi.truncated_gram(gram, bandwidth)
  sums = renyi.RemoveRecursion(gram.shape[0], bandwidth, alpha).log_sums(truncated / sigma**2)
  return renyi.remove_divergences(sums, gram.shape[0], sigma, tau)[alpha - 2]


# (n, b, band length, α): b ≤ 3p − 4 (the printed cycle closure double-counts) included, and
# n not a multiple of b (a partial last epoch).
RECURSION_CASES = [(6, 6, 1, 3), (10, 5, 1, 4), (12, 6, 2, 3), (21, 7, 3, 3), (7, 7, 3, 3),
                   (18, 9, 4, 3), (9, 3, 2, 4), (10, 5, 3, 3), (8, 4, 3, 3), (10, 4, 3, 3),
                   (12, 6, 4, 3), (16, 8, 4, 3), (7, 3, 2, 3), (11, 4, 2, 4), (5, 2, 2, 5)]


@pytest.mark.parametrize('n, b, band, alpha', RECURSION_CASES,
                         ids=[f'n{n}-b{b}-p{p}-a{a}' for n, b, p, a in RECURSION_CASES])
def test_recursion_equals_brute_force_enumeration(n, b, band, alpha):
  # Eq. (5) summed over all b^α slot tuples (oracle) vs Algorithm 1 at the exact cyclic
  # bandwidth of G: the same number up to float64 summation order (1e-11 relative).
  rng = np.random.default_rng(n * 100 + b * 10 + band)
  c_col = np.sort(rng.uniform(0.2, 1.0, band))[::-1]
  scheme = jaxacct.BallsInBins(iterations=n, cycle_length=b)
  gram = _gram(scheme, c_col)
  with jax.enable_x64(True):
    dense = np.asarray(jaxacct.BandedToeplitz(c_col).materialize(n))
  np.testing.assert_allclose(gram, oracle.gram(dense, b), rtol=1e-14, atol=1e-14)
  exact = random_allocation.cyclic_bandwidth(gram)
  assert exact <= min(band, b // 2 + 1)
  for sigma in (0.7, 1.6):
    got = _remove(gram, sigma, alpha, exact)
    assert got == pytest.approx(oracle.renyi_remove_by_tuples(gram, sigma, alpha), rel=1e-11)


def test_every_order_comes_from_one_run():
  # The recursion's terms do not depend on α (only the truncation m ≤ α does), so a run to
  # α_max gives every smaller order: compare with separate runs to α.
  gram = _gram(jaxacct.BallsInBins(iterations=15, cycle_length=5), [1.0, 0.7])
  truncated, tau = renyi.truncated_gram(gram, 2)
  full = renyi.RemoveRecursion(5, 2, 9).log_sums(truncated / 1.3**2)
  for alpha in range(2, 10):
    alone = renyi.RemoveRecursion(5, 2, alpha).log_sums(truncated / 1.3**2)
    assert full[alpha] == pytest.approx(alone[alpha], rel=1e-13)


def test_tau_bound_is_an_upper_bound_that_tightens_with_the_bandwidth():
  # Non-banded C (|inverse of a banded matrix|, spec 002 §8: n = 12, b = 6, k = 2, σ = 3,
  # α = 3): every bandwidth gives ≥ the exact value, non-increasing in p, exact at p = 4
  # (= ⌊b/2⌋ + 1, where every pair is inside the band and τ = 0).
  n, b, sigma, alpha = 12, 6, 3.0, 3
  matrix = jaxacct.LowerTriangular(np.abs(np.linalg.inv(
      np.eye(n) + np.diag(np.full(n - 1, 0.5), -1) + np.diag(np.full(n - 2, 0.3), -2))))
  gram = random_allocation.gram_matrix(jaxacct.BallsInBins(iterations=n, cycle_length=b), matrix)
  exact = oracle.renyi_remove_by_tuples(gram, sigma, alpha)
  bounds = [_remove(gram, sigma, alpha, p) for p in range(1, b // 2 + 2)]
  assert all(value >= exact * (1 - 1e-12) for value in bounds)
  assert all(a >= b_ * (1 - 1e-12) for a, b_ in zip(bounds, bounds[1:]))
  assert bounds[-1] == pytest.approx(exact, rel=1e-11) and bounds[0] > exact * 1.05


def test_one_slot_is_the_gaussian_mechanism():
  # b = 1: P = N(m, σ²I) in both directions, R_α = α‖m‖²/(2σ²) (spec 002 §2.5 note).
  scheme = jaxacct.BallsInBins(iterations=5, cycle_length=1)
  c_col = [1.0, 0.5, 0.25]
  gram = _gram(scheme, c_col)
  norm2 = float(gram[0, 0])
  sigma = 1.7
  for alpha in (2, 3, 7, 40):
    assert _remove(gram, sigma, alpha, 1) == pytest.approx(alpha * norm2 / (2 * sigma**2),
                                                           rel=1e-12)
  a, c = renyi.add_divergence_terms(gram, sigma)
  assert a + (5.5 - 1) * c == pytest.approx(5.5 * norm2 / (2 * sigma**2), rel=1e-14)


@pytest.mark.parametrize('epochs, slots, sigma', [(1, 10, 0.8), (3, 7, 1.5), (2, 50, 0.6)])
def test_dpsgd_closed_forms(epochs, slots, sigma):
  # C = I: G = k·I_b. R₂ = ln(1 + (e^{k/σ²} − 1)/b) (oracle closed form), and as α grows
  # ρ(α) − (αk/(2σ²) − ln b) → 0⁺ (the all-equal tuples dominate eq. (5)); the gap falls below
  # float64 resolution of ρ (~1e-14 here) well before α = 60.
  scheme = jaxacct.BallsInBins(iterations=epochs * slots, cycle_length=slots)
  gram = _gram(scheme, [1.0])
  np.testing.assert_array_equal(gram, epochs * np.eye(slots))
  assert _remove(gram, sigma, 2, 1) == pytest.approx(
      oracle.dpsgd_renyi2(epochs, slots, sigma), rel=1e-12)
  assert _remove(gram, sigma, 2, 1) == pytest.approx(
      math.log1p(math.expm1(epochs / sigma**2) / slots), rel=1e-12)
  gaps = [_remove(gram, sigma, alpha, 1) - (alpha * epochs / (2 * sigma**2) - math.log(slots))
          for alpha in (20, 60, 120)]
  assert all(gap >= -1e-12 for gap in gaps) and gaps[0] >= gaps[1] - 1e-12 >= gaps[2] - 2e-12
  assert gaps[0] < 0.1 and abs(gaps[-1]) < 1e-9


def test_dpsgd_sigma_scales_with_the_root_of_the_epochs():
  # C = I: G = k·I_b enters only as G/σ², so σ_{b,k} = √k·σ_{b,1} (issue 14): the curves at
  # (k, √k·σ) and (1, σ) are the same function, and so are the calibrated σ.
  slots, sigma = 8, 0.9
  one = mechanism(jaxacct.BallsInBins(iterations=slots, cycle_length=slots), sigma=sigma)
  accountant = base.get('renyi')
  for epochs in (2, 5):
    many = mechanism(jaxacct.BallsInBins(iterations=epochs * slots, cycle_length=slots),
                     sigma=math.sqrt(epochs) * sigma)
    for delta in (1e-3, 1e-6):
      assert accountant.epsilon_for_delta(many, delta) == pytest.approx(
          accountant.epsilon_for_delta(one, delta), rel=1e-10)
    sigma_one = accountant.sigma(one.scheme, one.matrix, epsilon=1.0, delta=1e-5,
                                 tolerance=1e-6)
    sigma_many = accountant.sigma(many.scheme, many.matrix, epsilon=1.0, delta=1e-5,
                                  tolerance=1e-6)
    assert sigma_many == pytest.approx(math.sqrt(epochs) * sigma_one, rel=3e-6)


def test_add_bound_and_conversion_match_the_oracle():
  scheme = jaxacct.BallsInBins(iterations=6, cycle_length=3)
  gram = _gram(scheme, [1.0, 0.5])
  a, c = renyi.add_divergence_terms(gram, 3.0)
  for alpha in (1.5, 2.0, 3.0, 10.0):
    assert a + (alpha - 1) * c == pytest.approx(oracle.renyi_add_bound(gram, 3.0, alpha),
                                                rel=1e-13)
  for rho, alpha in ((0.3, 2), (1.2, 5), (0.05, 40)):
    for delta in (1e-2, 1e-7):
      epsilon = float(renyi.epsilon_from_divergence(rho, alpha, delta))
      assert epsilon == pytest.approx(oracle.epsilon_from_renyi(rho, alpha, delta), rel=1e-12)
      assert math.exp(renyi.log_delta_from_divergence(rho, alpha, epsilon)) == pytest.approx(
          delta, rel=1e-10)


# Soundness against Monte Carlo: every ε the accountant proves at δ must have an MC δ̂ at that
# ε no larger than δ (plus 4 standard errors), per direction. Shared fixed-bin cases.
MC_CASES = [
    ('dpsgd-k1', jaxacct.BallsInBins(iterations=20, cycle_length=20), [1.0], 0.9, 1e-2),
    ('dpsgd-k3', jaxacct.BallsInBins(iterations=24, cycle_length=8), [1.0], 1.2, 1e-2),
    ('banded-k2', jaxacct.BallsInBins(iterations=20, cycle_length=10), [1.0, 0.6, 0.3], 1.1,
     3e-2),
    ('banded-partial', jaxacct.BallsInBins(iterations=17, cycle_length=6), [1.0, 0.5], 1.0, 3e-2),
]


@pytest.mark.parametrize('name, scheme, c_col, sigma, delta', MC_CASES,
                         ids=[case[0] for case in MC_CASES])
def test_epsilon_is_sound_against_monte_carlo(name, scheme, c_col, sigma, delta):
  mech = mechanism(scheme, c_col=c_col, sigma=sigma)
  curve = base.get('renyi').privacy_curve(mech)
  epsilons = [curve.epsilon_for_delta(delta, direction=d) for d in ('remove', 'add')]
  estimate = jaxacct.estimate_delta(jax.random.key(len(name)), mech, epsilons, 40_000)
  for index, direction in enumerate(('remove', 'add')):
    delta_hat = float(estimate.delta_hat[direction][index])
    error = float(estimate.standard_error[direction][index])
    assert delta_hat <= delta + 4 * error, (direction, epsilons[index], delta_hat, error)


def test_explain_names_the_order_bandwidth_and_tau():
  mech = mechanism(BALLS, c_col=[1.0, 0.5, 0.25], sigma=2.0)
  curve = base.get('renyi').privacy_curve(mech)
  report = curve.explain(1e-5)
  assert report['remove']['epsilon'] == curve.epsilon_for_delta(1e-5, direction='remove')
  assert report['add']['epsilon'] == curve.epsilon_for_delta(1e-5, direction='add')
  assert 2 <= report['remove']['alpha'] <= renyi.DEFAULT_ALPHA_MAX
  assert report['remove']['bandwidth'] in [r.bandwidth for r in curve.rungs]
  assert report['remove']['tau'] >= 0.0
  # The exact rung (τ = 0) is the cyclic bandwidth of G: 3 for a band of length 3.
  assert [r.tau for r in curve.rungs if r.bandwidth == 3] == [0.0]


def test_bad_options_are_refused_with_the_allowed_range():
  mech = mechanism(BALLS, c_col=[1.0, 0.5], sigma=1.5)
  accountant = base.get('renyi')
  with pytest.raises(ValueError, match='alpha_max must be an integer >= 2'):
    accountant.epsilon_for_delta(mech, 1e-5, alpha_max=1)
  with pytest.raises(ValueError, match='alpha_max must be in'):
    accountant.epsilon_for_delta(mech, 1e-5, alpha_max=10**6)
  with pytest.raises(ValueError, match='bandwidths must be an integer >= 1'):
    accountant.epsilon_for_delta(mech, 1e-5, bandwidths=[0])
  with pytest.raises(ValueError, match='bandwidths must not be empty'):
    accountant.epsilon_for_delta(mech, 1e-5, bandwidths=[])
  with pytest.raises(ValueError, match='max_transitions must be an integer >= 6'):
    accountant.epsilon_for_delta(mech, 1e-5, max_transitions=2)
  # An explicit (bandwidth, order) beyond the budget: the message gives the count, the
  # memory, and the ways out.
  with pytest.raises(ValueError, match=r'bandwidth 2 at alpha = 64 needs C\(68, 4\) = 8.14e\+05 '
                                       r'recursion transitions .* smaller alpha_max, a smaller '
                                       r'bandwidth .* raise max_transitions'):
    accountant.epsilon_for_delta(mech, 1e-5, bandwidths=[2], alpha_max=64,
                                 max_transitions=100_000)
  # C with negative entries cannot even be built (Lemma 2.8 needs C ≥ 0).
  with pytest.raises(ValueError, match='non-negative'):
    jaxacct.BandedToeplitz([1.0, -0.5])


def test_config_and_command_run_the_renyi_accountant(tmp_path, capsys):
  import json
  import pathlib
  from jaxacct import cli
  from jaxacct import config as config_lib
  config = str(pathlib.Path(__file__).parents[2] / 'configs' / 'balls_in_bins_renyi.yaml')
  small = ['--json', '--out', str(tmp_path), '--set', 'scheme.iterations=40',
           '--set', 'scheme.cycle_length=10']
  assert cli.main(['estimate', config] + small) == 0
  estimate = json.loads(capsys.readouterr().out)
  assert estimate['accountant'] == 'renyi' and estimate['method'] == 'deterministic'
  assert estimate['explanation']['remove']['bandwidth'] == 4  # the exact cyclic band
  assert estimate['explanation']['remove']['tau'] == 0.0
  assert cli.main(['calibrate', config] + small) == 0
  calibrated = json.loads(capsys.readouterr().out)
  raw = config_lib.load(config, ['scheme.iterations=40', 'scheme.cycle_length=10'])
  scheme = config_lib.scheme_from(raw)
  assert calibrated['noise_multiplier'] == base.get('renyi').sigma(
      scheme, config_lib.matrix_from(raw, scheme.iterations), epsilon=4.0, delta=1e-5,
      max_transitions=300_000)
  assert calibrated['explanation']['remove']['epsilon'] <= 4.0
  # Options are the accountant's: an unknown one is a one-line config error (exit 2), and
  # options need a named deterministic accountant.
  assert cli.main(['estimate', config, '--set', 'accountant_options.bogus=1'] + small) == 2
  assert "unexpected option 'bogus'" in capsys.readouterr().err
  assert cli.main(['estimate', config, '--set', 'accountant=auto'] + small) == 2
  assert 'accountant_options need a deterministic accountant' in capsys.readouterr().err
