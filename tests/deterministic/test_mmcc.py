"""The "mmcc" accountant (seed 003): contract, exact reductions, reference values, brute-force
tail bounds and soundness against Monte Carlo with exact losses."""

from __future__ import annotations

import fractions
import itertools
import math

import numpy as np
import pytest
from scipy import special

import jaxacct
from jaxacct.deterministic import base, mixture_pld, mmcc

from accountant_contract import AccountantContract, Calibration, Case, mechanism

POISSON = jaxacct.Poisson(sampling_prob=0.25, iterations=8)
COARSE = {'bad_event_delta': 1e-7, 'value_discretization_interval': 1e-2}


def dense_bisr(n: int) -> jaxacct.LowerTriangular:
  return jaxacct.banded_inverse_square_root(n, 2)


class TestMMCCAccountant(AccountantContract):
  name = 'mmcc'
  consistency_slack = 2e-4  # δ(ε) inverts ε(δ) to a relative 1e-4 when δ₁ = δ/2

  def supported_cases(self):
    return [
        Case('three-bands', mechanism(POISSON, c_col=[1.0, 0.5, 0.25], sigma=2.0), COARSE),
        Case('dense-bisr', mechanism(jaxacct.Poisson(sampling_prob=0.2, iterations=6),
                                     matrix=dense_bisr(6), sigma=2.5), COARSE),
        Case('add_remove-bminsep1', mechanism(
            jaxacct.BMinSep(sampling_prob=0.3, iterations=5, min_sep=1), c_col=[1.0, 0.6],
            sigma=2.0), {**COARSE, 'adjacency': 'add_remove'}),
        Case('default-half-delta', mechanism(jaxacct.Poisson(sampling_prob=0.2, iterations=6),
                                             c_col=[1.0, 0.5], sigma=2.0),
             {'value_discretization_interval': 1e-2}),
    ]

  def unsupported_cases(self):
    return [
        Case('balls-in-bins', mechanism(jaxacct.BallsInBins(iterations=6, cycle_length=3)),
             COARSE),
        Case('cyclic-poisson', mechanism(jaxacct.CyclicPoisson(sampling_prob=0.2, iterations=6,
                                                               cycle_length=2),
                                         c_col=[1.0, 0.5]), COARSE),
        Case('bminsep-2', mechanism(jaxacct.BMinSep(sampling_prob=0.2, iterations=6,
                                                    min_sep=2), c_col=[1.0, 0.5]), COARSE),
        Case('truncated', mechanism(jaxacct.Poisson(sampling_prob=0.2, iterations=4,
                                                    truncated_batch_size=30,
                                                    dataset_size=100)), COARSE),
        Case('replace_one', mechanism(POISSON, c_col=[1.0, 0.5]),
             {**COARSE, 'adjacency': 'replace_one'}),
    ]

  def calibration_case(self):
    return Calibration(jaxacct.Poisson(sampling_prob=0.2, iterations=6),
                       jaxacct.BandedToeplitz([1.0, 0.5]), epsilon=2.0, delta=1e-5,
                       tolerance=1e-2, options=COARSE)


# ---------------------------------------------------------------- exact reductions
def test_identity_is_poisson_dpsgd_through_dp_accounting():
  # C = I: no prefix overlaps, so no tail bound, δ₁ = 0, every p̃ = p and every row the same
  # subsampled Gaussian: MMCC is DP-SGD (seed 003 App. B.5: ε = .806 at n = 128, p = 1/128,
  # σ = 1, δ = 1e-6; dp_accounting 0.8063956). Both are pessimistic on a 1e-4 grid.
  from dp_accounting.pld import privacy_loss_distribution
  n, p, sigma, delta = 128, 1 / 128, 1.0, 1e-6
  mech = mechanism(jaxacct.Poisson(sampling_prob=p, iterations=n), sigma=sigma)
  curve = base.get('mmcc').privacy_curve(mech, value_discretization_interval=1e-4)
  reference = privacy_loss_distribution.from_gaussian_mechanism(
      sigma, sampling_prob=p, value_discretization_interval=1e-4).self_compose(n)
  assert curve.explain(delta)['tail_bounds'] == 0
  assert curve.explain(delta)['distinct_rows'] == 1
  assert curve.explain(delta)['bad_event_delta'] == 0.0
  ours = curve.epsilon_for_delta(delta)
  assert ours == pytest.approx(reference.get_epsilon_for_delta(delta), abs=2e-4)
  assert ours == pytest.approx(0.8063956, abs=1e-3)
  for eps in (0.3, 0.8, 1.5):
    assert curve.delta_for_epsilon(eps) == pytest.approx(reference.get_delta_for_epsilon(eps),
                                                         rel=1e-3)


@pytest.mark.slow
def test_last_iterate_mixture_reference_values():
  # Seed 003 App. B.5: DP-SGD's last iterate on linear losses is one MoG with sensitivity
  # Binom(128, 1/128) and noise √128·σ. Its PMF comes from ``row_sensitivity`` (128 unit
  # atoms, all p̃ = 1/128: the exact binomial). reference-values.md §10: add 0.2908267 (the
  # paper's one-directional .291), max over both 0.4199444.
  n = 128
  atoms, mass = mmcc.row_sensitivity(np.ones(n, np.int64), np.full(n, special.logit(1 / n)))
  binomial = special.comb(n, atoms) * (1 / n)**atoms * (1 - 1 / n)**(n - atoms)
  # Below the top atom: the binomial; the top atom also holds the rounding deficit of the
  # convolution (≤ a few ulps, put there to stay pessimistic) and the merged negligible tail.
  assert atoms[-1] == n and mass[-1] <= 1e-15
  np.testing.assert_allclose(mass[:-1], binomial[:-1], rtol=1e-9, atol=1e-30)
  epsilons = {}
  for direction in ('remove', 'add'):
    pmf = mixture_pld.mixture_pmf(atoms.astype(np.float64), np.log(mass), math.sqrt(n),
                                  direction, 1e-4)
    epsilons[direction] = pmf.get_epsilon_for_delta(1e-6)
  assert epsilons['add'] == pytest.approx(0.2908267, abs=1e-3)
  assert max(epsilons.values()) == pytest.approx(0.4199444, abs=1e-3)


# ---------------------------------------------------------------- tail bounds
def _exact_tail_quantile(k: int, p: fractions.Fraction, significance: float) -> int:
  pmf = [math.comb(k, m) * p**m * (1 - p)**(k - m) for m in range(k + 1)]
  for t in range(k + 1):
    if sum(pmf[t + 1:]) <= significance:
      return t
  return k


@pytest.mark.parametrize('p', [fractions.Fraction(1, 3), fractions.Fraction(1, 50)])
def test_participation_quantile_is_the_exact_binomial_tail_quantile(p):
  for k in range(0, 13):
    for significance in (0.3, 1e-2, 1e-5, 1e-12):
      assert mmcc.participation_quantile(k, float(p), significance) == _exact_tail_quantile(
          k, p, significance), (k, significance)


def _random_lower_triangular(n: int, seed: int) -> np.ndarray:
  rng = np.random.default_rng(seed)
  entries = np.tril(rng.uniform(0.0, 1.0, (n, n)) * (rng.uniform(size=(n, n)) < 0.7))
  np.fill_diagonal(entries, 1.0)
  return entries


@pytest.mark.parametrize('seed', [0, 1])
def test_tail_bound_sums_dominate_the_exact_quantile_by_enumeration(seed):
  # s_ij (recovered from p̃) ≥ the exact (1 − δ′)-quantile of Σ_j′ x_j′ ⟨C_{1:i−1,j}, C_{1:i−1,j′}⟩
  # over all 2^(i−1) participation patterns; p̃ = p exactly where C_{1:i−1,j} = 0.
  n, p, sigma = 7, 0.3, 1.7
  entries = _random_lower_triangular(n, seed)
  bounds = mmcc.tail_bounds(entries, p, sigma, bad_event_delta=0.4)
  assert bounds.count == mmcc.bound_count(entries) > 0
  assert bounds.significance == pytest.approx(0.4 / (2 * bounds.count))
  assert bounds.z == pytest.approx(-special.ndtri(bounds.significance))
  checked = 0
  for i in range(n):
    prefix = entries[:i]
    gram = prefix.T @ prefix
    for j in np.flatnonzero(entries[i]):
      epsilon = bounds.logits[i, j] - special.logit(p)
      norm2 = gram[j, j]
      if norm2 == 0:
        assert epsilon == 0.0
        continue
      s = ((epsilon - bounds.z * math.sqrt(norm2) / sigma) * 2 * sigma**2 + norm2) / 2
      values, probs = [], []
      for pattern in itertools.product((0, 1), repeat=i):
        x = np.array(pattern)
        values.append(float(x @ gram[j, :i]))
        probs.append(p**x.sum() * (1 - p)**(i - x.sum()))
      order = np.argsort(values)
      tail = np.cumsum(np.asarray(probs)[order][::-1])[::-1]  # Pr[S ≥ values[order][k]]
      exact = next(np.asarray(values)[order][k] for k in range(len(values))
                   if k + 1 == len(values) or tail[k + 1] <= bounds.significance)
      assert s >= exact * (1 - 1e-12) - 1e-12, (i, j, s, exact)
      assert special.expit(bounds.logits[i, j]) >= p
      checked += 1
  assert checked >= 8


def test_banded_rows_share_by_offset_and_match_row_by_row():
  # Banded Toeplitz with b bands: rows from 2b − 1 on carry the same lattice atoms and p̃
  # (App. B.4), so 2b − 1 distinct rows; composing every row one by one gives the same PLD.
  n, bands = 14, 3
  mech = mechanism(jaxacct.Poisson(sampling_prob=0.2, iterations=n),
                   c_col=[1.0, 0.6, 0.3], sigma=2.0)
  curve = base.get('mmcc').privacy_curve(mech, **COARSE)
  rows = curve.pairs(1e-7)
  assert len(rows.atoms) == 2 * bands - 1 and sum(rows.multiplicity) == n
  pmfs = []
  for atoms, mass, count in zip(rows.atoms, rows.probabilities, rows.multiplicity):
    pmfs += [mixture_pld.mixture_pmf(atoms * curve.sensitivity_step, np.log(mass), 2.0,
                                     'remove', 1e-2)] * count
  one_by_one = mixture_pld.compose(pmfs)
  for delta in (1e-3, 1e-5):
    assert curve.epsilon_for_delta(delta, direction='remove') == pytest.approx(
        one_by_one.get_epsilon_for_delta(delta - 1e-7), abs=2e-2)
  # The same matrix given densely is the same mechanism, and sharing is decided bitwise.
  dense = jaxacct.LowerTriangular(np.asarray(mech.matrix.materialize(n)))
  dense_curve = base.get('mmcc').privacy_curve(mechanism(mech.scheme, matrix=dense, sigma=2.0),
                                               **COARSE)
  assert dense_curve.epsilon_for_delta(1e-5) == curve.epsilon_for_delta(1e-5)


@pytest.mark.parametrize('factor', [1, 3])
def test_lattice_rounding_dominates_the_exact_sensitivity(factor):
  # Each row's PMF (entries rounded up to the fine lattice, convolved, the sums rounded up to
  # Δ₂ = factor × the fine step) is stochastically larger than the exact Σ_j C_ij Bern(p̃_ij),
  # and no coarser than needed: each sum is rounded up by less than the rounding allows.
  rng = np.random.default_rng(3)
  values = rng.uniform(0.05, 1.0, 6)
  logits = rng.normal(-1.0, 1.0, 6)
  step = 0.07
  units = mmcc.lattice_units(values, step / factor)
  assert np.all(units * (step / factor) >= values)
  assert np.all((units - 1) * (step / factor) < values)
  atoms, mass = mmcc.coarsened(*mmcc.row_sensitivity(units, logits), factor)
  assert mass.sum() == pytest.approx(1.0, abs=1e-15)
  exact_values, exact_probs = [], []
  for pattern in itertools.product((0, 1), repeat=6):
    x = np.array(pattern)
    exact_values.append(x @ values)
    exact_probs.append(np.prod(np.where(x, special.expit(logits), special.expit(-logits))))
  for threshold in np.linspace(0, values.sum() + step, 60):
    exact = sum(q for v, q in zip(exact_values, exact_probs) if v >= threshold)
    ours = mass[atoms * step >= threshold].sum()
    assert ours >= exact - 1e-12, threshold
    # Rounded by at most 6 fine steps plus one Δ₂: the shifted exact tail bounds ours.
    shifted = sum(q for v, q in zip(exact_values, exact_probs)
                  if v + 6 * step / factor + step >= threshold)
    assert ours <= shifted + 1e-12, threshold


def test_refinement_keeps_the_row_support_bounded():
  entries = np.tril(np.full((40, 40), 0.3))
  factor = mmcc.refinement(entries, 0.01)
  assert 1 <= factor <= mmcc.REFINEMENT
  assert mmcc.lattice_units(entries, 0.01 / factor).sum(axis=1).max() <= mmcc.MAX_SUPPORT
  assert mmcc.refinement(np.eye(4), 0.01) == mmcc.REFINEMENT


# ---------------------------------------------------------------- soundness
def _exact_monte_carlo_delta(entries, p, sigma, epsilon, direction, samples, seed):
  """δ̂(ε) and its standard error with the exact loss: all 2^n participation patterns."""
  n = entries.shape[0]
  rng = np.random.default_rng(seed)
  patterns = np.array(list(itertools.product((0, 1), repeat=n)), dtype=np.float64)
  means = patterns @ entries.T  # (2^n, n): C x
  log_w = patterns.sum(1) * math.log(p) + (n - patterns.sum(1)) * math.log1p(-p)
  if direction == 'remove':
    picks = rng.random((samples, n)) < p
    y = picks @ entries.T + sigma * rng.standard_normal((samples, n))
  else:
    y = sigma * rng.standard_normal((samples, n))
  exponent = (2 * y @ means.T - (means * means).sum(1)) / (2 * sigma**2) + log_w
  loss = special.logsumexp(exponent, axis=1)  # ln P(y)/Q(y)
  if direction == 'add':
    loss = -loss
  values = -np.expm1(np.minimum(epsilon - loss, 0.0))  # max(0, 1 − e^{ε − L})
  return values.mean(), values.std() / math.sqrt(samples)


@pytest.mark.parametrize('n,c_col,dense,sigma,p', [
    (6, (1.0, 0.5), False, 1.0, 0.3),
    (8, (1.0, 0.7, 0.4), False, 1.5, 0.15),
    (6, None, True, 1.2, 0.25),
])
def test_mmcc_bounds_exact_monte_carlo(n, c_col, dense, sigma, p):
  # Issue 15: MMCC's ε ≥ the Monte Carlo ε minus its error, with the exact privacy loss of
  # Poisson BandMF (every participation pattern enumerated); checked as δ̂(ε_MMCC) ≤ δ + 4 s.e.
  delta = 1e-2
  scheme = jaxacct.Poisson(sampling_prob=p, iterations=n)
  mech = (mechanism(scheme, matrix=dense_bisr(n), sigma=sigma) if dense
          else mechanism(scheme, c_col=list(c_col), sigma=sigma))
  entries = mmcc.strategy_entries(mech.matrix, n)
  curve = base.get('mmcc').privacy_curve(mech)
  for direction in ('remove', 'add'):
    epsilon = curve.epsilon_for_delta(delta, direction=direction)
    delta_hat, error = _exact_monte_carlo_delta(entries, p, sigma, epsilon, direction,
                                                100_000, seed=n)
    assert delta_hat <= delta + 4 * error, (direction, epsilon, delta_hat, error)


def test_monte_carlo_oracle_catches_a_bound_without_tail_bounds(monkeypatch):
  # Power of the check above: with p̃ = p in every row (seed 003 §4.5: "as if each row were
  # independent", roughly a lower bound) the remove direction's ε is too small, and the exact
  # Monte Carlo δ̂ at that ε exceeds δ by far more than 4 standard errors.
  n, p, sigma, delta = 8, 0.15, 1.5, 1e-2
  mech = mechanism(jaxacct.Poisson(sampling_prob=p, iterations=n), c_col=[1.0, 0.7, 0.4],
                   sigma=sigma)
  honest = mmcc.tail_bounds
  monkeypatch.setattr(mmcc, 'tail_bounds', lambda entries, prob, *args: honest(
      entries, prob, *args)._replace(logits=np.full((n, n), special.logit(prob))))
  epsilon = base.get('mmcc').privacy_curve(mech).epsilon_for_delta(delta, direction='remove')
  delta_hat, error = _exact_monte_carlo_delta(mmcc.strategy_entries(mech.matrix, n), p, sigma,
                                              epsilon, 'remove', 100_000, seed=n)
  assert delta_hat > delta + 4 * error, (epsilon, delta_hat, error)


def test_epsilon_decreases_in_sigma_and_finer_lattice_is_no_looser():
  scheme = jaxacct.Poisson(sampling_prob=0.1, iterations=10)
  accountant = base.get('mmcc')
  epsilons = [accountant.epsilon_for_delta(mechanism(scheme, c_col=[1.0, 0.55, 0.3],
                                                     sigma=sigma), 1e-5, **COARSE)
              for sigma in (0.8, 1.2, 2.0, 4.0)]
  assert all(a > b for a, b in zip(epsilons, epsilons[1:])), epsilons
  mech = mechanism(scheme, c_col=[1.0, 0.55, 0.3], sigma=1.2)
  coarse = accountant.epsilon_for_delta(mech, 1e-5, sensitivity_discretization=0.1, **COARSE)
  fine = accountant.epsilon_for_delta(mech, 1e-5, sensitivity_discretization=0.05, **COARSE)
  assert fine <= coarse + 1e-2  # 0.05 divides 0.1: the finer lattice rounds up no further


# ---------------------------------------------------------------- choice and bad input
def test_auto_picks_mmcc_for_poisson_with_more_than_one_band():
  mech = mechanism(jaxacct.Poisson(sampling_prob=0.1, iterations=8), c_col=[1.0, 0.5],
                   sigma=2.0)
  assert mech.bounded and base.superseding_monte_carlo(mech) == 'mmcc'
  curve = jaxacct.deterministic.accountant.privacy_curve(mech, accountant='auto')
  assert curve.explain(1e-5)['accountant'] == 'mmcc'
  assert not base.get('mmcc').supersedes_monte_carlo(
      mechanism(jaxacct.Poisson(sampling_prob=0.1, iterations=8), sigma=2.0))
  with pytest.raises(ValueError, match='"mmcc"'):
    mech.matrix.kernel_view(mech.scheme)  # Monte Carlo refuses overlapping bands, naming mmcc


def test_bad_options_are_named():
  accountant = base.get('mmcc')
  mech = mechanism(POISSON, c_col=[1.0, 0.5], sigma=2.0)
  with pytest.raises(ValueError, match='sensitivity_discretization'):
    accountant.epsilon_for_delta(mech, 1e-5, sensitivity_discretization=0.0)
  with pytest.raises(ValueError, match=r'bad_event_delta must be in \(0, 1\)'):
    accountant.epsilon_for_delta(mech, 1e-5, bad_event_delta=1.5)
  with pytest.raises(ValueError, match='value_discretization_interval'):
    accountant.epsilon_for_delta(mech, 1e-5, value_discretization_interval=-1.0)
  assert accountant.epsilon_for_delta(mech, 1e-7, **COARSE) == math.inf
  with pytest.raises(ValueError, match='must exceed bad_event_delta'):
    accountant.sigma(POISSON, jaxacct.BandedToeplitz([1.0, 0.5]), epsilon=1.0, delta=1e-7,
                     **COARSE)
  with pytest.raises(ValueError, match='non-negative'):
    jaxacct.LowerTriangular([[1.0, 0.0], [-0.5, 1.0]])
  with pytest.raises(ValueError, match='only untruncated Poisson'):
    jaxacct.MatrixMechanism(jaxacct.BMinSep(sampling_prob=0.2, iterations=6, min_sep=2),
                            jaxacct.BandedToeplitz([1.0, 0.5, 0.2]), 1.0)


@pytest.mark.slow
def test_cli_estimate_of_the_mmcc_config_in_a_reduced_form(tmp_path, capsys):
  # configs/poisson_bandmf_mmcc.yaml at n = 16, 3 bands: 'auto' takes MMCC, the report curve is
  # built in bulk (proven ε(δ) points, both directions) and the table's δ(ε) are the library's.
  import json
  import pathlib
  from jaxacct import cli
  from jaxacct.strategies import banded_toeplitz
  config = pathlib.Path(__file__).parents[2] / 'configs' / 'poisson_bandmf_mmcc.yaml'
  small = ['--json', '--out', str(tmp_path), '--set', 'scheme.iterations=16', '--set',
           'strategy.square_root_bands=3', '--set', 'noise_multiplier=1.5', '--set',
           'monte_carlo.epsilons=[2.0, 4.0]']
  assert cli.main(['estimate', str(config)] + small) == 0
  captured = capsys.readouterr()
  estimate = json.loads(captured.out)
  assert estimate['accountant'] == 'mmcc'
  curve = estimate['curve']
  assert len(curve['epsilons']) >= 5
  assert np.all(np.diff(curve['epsilons']) > 0) and np.all(np.diff(curve['delta']) < 0)
  mechanism = jaxacct.MatrixMechanism(
      jaxacct.Poisson(sampling_prob=0.015625, iterations=16),
      jaxacct.BandedToeplitz(banded_toeplitz.square_root_coefficients(3)), 1.5)
  assert estimate['epsilons'] == [2.0, 4.0]
  assert estimate['delta_of_epsilon'] == [
      jaxacct.delta_for_epsilon(mechanism, e, accountant='mmcc') for e in (2.0, 4.0)]
  assert 1e-6 < estimate['delta_of_epsilon'][1] < estimate['delta_of_epsilon'][0] < 0.5
  assert (tmp_path / 'estimate' / 'delta.png').is_file()
  # The run was planned (issue 31: every run's plan, deterministic included) and says so.
  check = estimate['plan_check']
  assert check['projected_seconds'] > 0 and check['measured_seconds'] > 0
  assert 'PLD compositions' in captured.err and 'projected' in captured.err
