"""``jaxacct.calibrate``: one call whatever accountant answers (issue 44), the choice made once
(``accounting.choose``) with its reason, and a result that says what answered.

Oracles: ``calibrate_noise_multiplier`` and ``calibrate_deterministic`` called directly (the
same searches: bitwise equal answers), and the PLD accountant of dp_accounting through
``pld`` for the deterministic choice.
"""

from __future__ import annotations

import json

import jax
import pytest

import jaxacct
from jaxacct import accounting
from jaxacct.deterministic import accountant as deterministic

# test_estimate_only.py's mechanism and options: its compiled programs are the same shapes.
WARM = jaxacct.BMinSep(sampling_prob=0.3, iterations=24, min_sep=4, warm_start=True)
BANDS = jaxacct.BandedToeplitz([1.0, 0.5, 0.25])
SMALL = jaxacct.MonteCarloOptions(num_samples=30_000, estimation_samples=2000, num_candidates=2,
                                  grid_ratio=1.05)
POISSON = jaxacct.Poisson(sampling_prob=0.05, iterations=20)
IDENTITY = jaxacct.BandedToeplitz([1.0])


def test_monte_carlo_is_chosen_for_b_min_sep_and_gives_the_bits_of_the_direct_call():
  run = jaxacct.RunOptions(ledger=jaxacct.VerificationLedger())
  result = jaxacct.calibrate(WARM, BANDS, epsilon=1.0, delta=0.05, key=5, monte_carlo=SMALL,
                             run=run)
  direct = jaxacct.calibrate_noise_multiplier(WARM, BANDS, epsilon=1.0, delta=0.05,
                                              key=jax.random.key(5), monte_carlo=SMALL, run=run)
  assert result.choice.name == 'monte_carlo' and result.choice.requested == 'auto'
  assert 'no registered deterministic accountant supersedes Monte Carlo for BMinSep' in (
      result.choice.reason)
  assert result.guarantee == direct.guarantee and result.record == direct.record
  assert result.explain()['fallback'] == 'unamplified_gaussian'
  document = json.loads(json.dumps(result.to_dict()))
  assert document['choice']['name'] == 'monte_carlo' and document['method'] == 'verified_mc'


def test_a_superseding_deterministic_accountant_answers_auto_with_the_bits_of_its_search():
  result = jaxacct.calibrate(POISSON, IDENTITY, epsilon=1.0, delta=1e-5)
  mechanism, guarantee = deterministic.calibrate_deterministic(POISSON, IDENTITY, epsilon=1.0,
                                                               delta=1e-5)
  assert result.choice.name == 'auto' and 'pld supersedes Monte Carlo for Poisson' in (
      result.choice.reason)
  assert result.mechanism == mechanism and result.guarantee == guarantee
  assert result.record is None and result.candidates == () and result.charge is None
  explained = result.explain()
  assert explained['curve']['accountant'] == guarantee.accountant
  # The curve at the released σ proves the target: ε(δ) ≤ ε.
  assert result.curve.epsilon_for_delta(1e-5) <= 1.0
  assert json.loads(json.dumps(result.to_dict()))['choice']['name'] == 'auto'


@pytest.mark.parametrize('arguments, message', [
    (dict(accountant='pld', key=3), 'calibrate: key is for Monte Carlo calibration'),
    (dict(accountant='pld', monte_carlo=jaxacct.MonteCarloOptions(attempt=2)),
     'calibrate: monte_carlo is for Monte Carlo'),
    (dict(monte_carlo=jaxacct.MonteCarloOptions(estimate_only=True)),
     'monte_carlo.estimate_only: auto calibrates this mechanism deterministically'),
    (dict(accountant='monte_carlo'), 'key: Monte Carlo calibration'),
    (dict(accountant='monte_carlo', key=1, accountant_options={'tolerance': 1e-5}),
     'accountant_options: tolerance is an option of a deterministic σ search'),
    (dict(accountant='monte_carlo', key=1, accountant_options={'bandwidths': 2}),
     'accountant_options: bandwidths are options of a deterministic accountant'),
    (dict(accountant='gaussian'), 'accountant must be one of'),
    (dict(accountant='monte_carlo', key=1, adjacency='add_remove'),
     "adjacency='add_remove': Monte Carlo accounting is for zero-out adjacency"),
    (dict(accountant='mmcc', accountant_options={'bandwidths': 2}), 'mmcc'),
    (dict(num_samples=10), 'num_samples= moved to monte_carlo'),
    # jax.random.key keeps 32 bits without 64-bit types: 2**32 would be seed 0's key
    (dict(accountant='monte_carlo', key=2**32), r'key must be in \[0, 2\*\*32\)'),
    (dict(accountant='monte_carlo', key=-1), r'key must be in \[0, 2\*\*32\)'),
])
def test_refusals_name_the_argument_before_any_compute(arguments, message):
  with pytest.raises(jaxacct.InputError, match=message):
    jaxacct.calibrate(POISSON, IDENTITY, epsilon=1.0, delta=1e-5, **arguments)


def test_choose_is_the_one_resolution_and_says_why():
  probe = jaxacct.MatrixMechanism(WARM, BANDS, 1.0)
  assert accounting.choose(probe).name == 'monte_carlo'
  named = accounting.choose(jaxacct.MatrixMechanism(POISSON, IDENTITY, 1.0), 'pld')
  assert (named.name, named.reason) == ('pld', 'requested')
  with pytest.raises(jaxacct.InputError, match="accountant='pld': covers poisson and cyclic_poisson schemes"):
    accounting.choose(probe, 'pld')
