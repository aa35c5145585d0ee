"""Estimate-Verify-Release with the tilted remove direction (verification.py, evr/tilted.py,
bounds.resolve_direction_sizes, ledger per-direction records) and the add direction's (A1)
certificate (tilt_bound.add_vanishing_epsilon).

Oracles: the sizes and released δ recomputed from bounds' primitives per direction
(docs/proofs/review-per-direction.md); −ln Pr[x = 0] from an independent Markov-chain power
computation and the Poisson closed form; plain draws whose add-direction losses never exceed
it. Tolerances: exact (the same floats) unless stated.
"""

import dataclasses
import json
import math

import jax
import numpy as np
import pytest

import jaxacct
from jaxacct.deterministic import minsep_renyi, tilt_bound
from jaxacct.montecarlo.engine import stream
from jaxacct.montecarlo.evr import bounds, ledger, plan, tilted

# The tiny b-min-sep of test_tilted.py (n = 12, b = 3, warm start, 3 bands): −ln p₀ ≈ 4.04.
BMINSEP = jaxacct.MatrixMechanism(
    jaxacct.BMinSep(sampling_prob=0.3, iterations=12, min_sep=3, warm_start=True),
    jaxacct.BandedToeplitz([1.0, 0.5, 0.25]), 1.6)
FALLBACK_SIGMA = 2.31  # unamplified_gaussian is (4.5, 5e-6)-DP above ≈ 2.3073


def _candidates(*sigmas):
  return [dataclasses.replace(BMINSEP, noise_multiplier=s) for s in sigmas]


def _verify(candidates, epsilon, delta, order, *, key=3, ledger_object=None, **run):
  return jaxacct.verify(
      jax.random.key(key), candidates, epsilon=epsilon, delta=delta,
      monte_carlo=jaxacct.MonteCarloOptions(proposal='tilted', tilt_order=order),
      run=jaxacct.RunOptions(ledger=ledger_object or jaxacct.VerificationLedger(), **run))


@pytest.fixture(scope='module')
def certified_add():
  return _verify(_candidates(1.5, 1.7, FALLBACK_SIGMA), 4.5, 1e-5, 3)


def test_a_tilted_release_with_the_add_direction_certified(certified_add):
  result = certified_add
  guarantee = result.guarantee
  assert guarantee.method == 'verified_mc' and result.accepted == (True, True, True)
  tilts = [tilted.tilt_for(m, 3, [4.5]) for m in _candidates(1.5, 1.7)]
  supports = [math.exp(tilt.log_support[0]) for tilt in tilts]
  support, base = max(supports), 5e-6
  n = bounds.minimum_samples(base, 1e-5, support=support)
  assert 0 < n < 1000  # plain: 10,745,967 per direction
  assert guarantee.tilt['directions'] == {'remove': [n, support], 'add': [0, base]}
  assert guarantee.tilt['proposal'] == {'remove': 'tilted', 'add': 'certified'}
  assert guarantee.tilt['support'] == supports[0] and guarantee.num_samples == n
  # The released candidate's host tables, by digest (a rebuild gives the same tables).
  assert guarantee.tilt['tables_digest'] == tilts[0].tables_digest
  # The release: max over the directions, the add one certified at δ_b (formula 2).
  assert guarantee.delta == max(bounds.overall_delta(n, base, support=support), base)
  assert guarantee.delta <= 1e-5
  assert result.delta_hat['add'] == [None, None]  # certified: no draws, no δ̂
  assert json.loads(guarantee.to_json())['tilt'] == guarantee.tilt


def test_the_add_direction_is_sampled_plainly_below_its_threshold():
  # ε = 2 < −ln p₀ ≈ 4.04, and at the first candidate (σ = 1) the least proven add bound
  # ((A2): 0.053) is above δ_b = 0.025: the add direction needs plain terms and their N (σ = 2
  # is released).
  assert tilted.add_bound(_candidates(1.0, 2.0, 4.0), 2.0) > 0.025
  result = _verify(_candidates(1.0, 2.0, 4.0), 2.0, 0.05, 2)
  assert result.guarantee.noise_multiplier == 2.0
  base = 0.025
  support = math.exp(tilted.tilt_for(_candidates(1.0)[0], 2, [2.0]).log_support[0])
  expected = {'remove': [bounds.minimum_samples(base, 0.05, support=support), support],
              'add': [bounds.minimum_samples(base, 0.05), 1.0]}
  assert expected['remove'][0] < expected['add'][0]
  assert result.guarantee.tilt['directions'] == expected
  assert result.guarantee.tilt['proposal'] == {'remove': 'tilted', 'add': 'plain'}
  assert {d: int(result.sums.samples[d][0]) for d in expected} == {
      d: n for d, (n, _) in expected.items()}
  assert result.guarantee.delta == max(
      bounds.overall_delta(expected['remove'][0], base, support=support),
      bounds.overall_delta(expected['add'][0], base))


def test_the_add_direction_is_certified_by_a_reference_law_below_its_threshold():
  # ε = 2 < −ln p₀: (A1) does not apply, but Gibbs' inequality against a reference law
  # (minsep_renyi's (A2)) bounds the add δ of both candidates by 4.3e-4 ≤ δ_b = 0.025.
  bound = minsep_renyi.plan_for(BMINSEP).add_delta(1.6, 2.0)
  assert bound.bound == 'reference_law' and bound.value < 0.025
  assert tilted.add_bound(_candidates(1.6, 4.0), 2.0) == bound.value  # the larger σ: smaller
  result = _verify(_candidates(1.6, 4.0), 2.0, 0.05, 2)
  support = math.exp(tilted.tilt_for(BMINSEP, 2, [2.0]).log_support[0])
  n = bounds.minimum_samples(0.025, 0.05, support=support)
  assert result.guarantee.tilt['directions'] == {'remove': [n, support], 'add': [0, 0.025]}
  assert result.guarantee.tilt['proposal'] == {'remove': 'tilted', 'add': 'certified'}
  assert int(result.sums.samples['add'][0]) == 0


def test_bitwise_identical_whatever_the_blocks_per_call(certified_add):
  other = _verify(_candidates(1.5, 1.7, FALLBACK_SIGMA), 4.5, 1e-5, 3, blocks_per_call=3)
  for d in ('remove', 'add'):
    np.testing.assert_array_equal(other.sums.sums[d], certified_add.sums.sums[d])
  assert other.guarantee == certified_add.guarantee


def test_the_ledger_records_each_direction_and_counts_a_plain_retry(tmp_path):
  path = tmp_path / 'ledger.json'
  first = _verify(_candidates(1.5, FALLBACK_SIGMA), 4.5, 1e-5, 3,
                  ledger_object=jaxacct.FileLedger(path))
  (record,) = jaxacct.FileLedger(path).runs(BMINSEP)  # reloaded from the file
  sizes = first.guarantee.tilt['directions']
  assert record.directions == sizes and record.num_samples == sizes['remove'][0]
  assert record.triple('add') == (0, 5e-6, 5e-6)
  assert json.loads(record.run)['proposal'] == 'tilted'
  with pytest.raises(ledger.UndeclaredRetryError):  # another proposal is another attempt
    jaxacct.verify(jax.random.key(4), _candidates(1.5, FALLBACK_SIGMA), epsilon=4.5, delta=1e-5,
                   run=jaxacct.RunOptions(ledger=jaxacct.FileLedger(path)))
  charge = ledger.charge_of([record], 2, 4.5, 1e-5)
  assert charge.earlier == {'remove': ((sizes['remove'][0], 5e-6, sizes['remove'][1]),),
                            'add': ((0, 5e-6, 5e-6),)}
  # Runs recorded without per-direction sizes keep their one triple in both directions.
  plain = ledger.RunRecord(run='x', epsilon=4.5, delta=1e-5, num_samples=100, base_delta=5e-6,
                           overall_delta=1e-5)
  assert 'directions' not in plain.to_dict()
  assert ledger.charge_of([plain], 2, 4.5, 1e-5).earlier == {
      'remove': ((100, 5e-6, 1.0),), 'add': ((100, 5e-6, 1.0),)}


@pytest.mark.parametrize('directions', [
    {'remove': [10, 0.5]},                          # a direction missing
    {'remove': [10, 0.5], 'add': [0, 0.5]},        # 0 samples with support above δ_b
    {'remove': [10, 1.5], 'add': [0, 5e-6]},       # support above 1
    {'remove': [-1, 0.5], 'add': [0, 5e-6]},
])
def test_malformed_direction_sizes_are_refused(directions):
  record = {'run': 'x', 'epsilon': 1.0, 'delta': 1e-5, 'num_samples': 10, 'base_delta': 5e-6,
            'overall_delta': 1e-5, 'directions': directions}
  with pytest.raises(ledger.LedgerError, match='directions'):
    ledger.RunRecord.from_dict(record, 'runs[0]')


def test_max_seconds_refuses_a_tilted_verification_before_the_ledger_is_charged():
  # The candidates' tables are built, then their draws projected (a host pass and one call
  # per direction timed here): 10⁷ remove samples per candidate are far over 1 s.
  held = jaxacct.VerificationLedger()
  with pytest.raises(plan.OverBudgetError, match=r'tilted verification of 1 candidate\(s\)'):
    jaxacct.verify(jax.random.key(3), _candidates(1.5, FALLBACK_SIGMA), epsilon=4.5, delta=1e-5,
                   monte_carlo=jaxacct.MonteCarloOptions(proposal='tilted', tilt_order=3,
                                                         num_samples=10_000_000),
                   run=jaxacct.RunOptions(ledger=held, max_seconds=1.0))
  assert held.runs(BMINSEP) == ()


def test_refusals_before_compute():
  # α = 3 at σ = 0.7: Z_3 ≈ 6e7, M(3, 0.5) ≫ 1: the tilt cannot beat plain terms.
  with pytest.raises(jaxacct.InputError) as refused:
    _verify(_candidates(0.7, 9.0), 0.5, 1e-2, 3)
  assert refused.value.argument == 'monte_carlo.tilt_order'
  truncated = jaxacct.MatrixMechanism(
      jaxacct.BMinSep(sampling_prob=0.3, iterations=12, min_sep=3, warm_start=True,
                      truncated_batch_size=5, dataset_size=20),
      jaxacct.BandedToeplitz([1.0, 0.5]), 1.5)
  with pytest.raises(jaxacct.InputError) as refused:
    _verify([truncated, dataclasses.replace(truncated, noise_multiplier=9.0)], 4.5, 1e-3, 2)
  assert refused.value.argument == 'mechanism'


# ------------------------------------------------------------------ (A1): −ln Pr[x = 0]
def _never_participating(p: float, b: int, n: int, warm: bool) -> float:
  """Pr[x = 0] of one example's b-min-sep chain by matrix powers (an independent oracle):
  state k = rounds since the last participation, capped at b (k = b: eligible)."""
  transition = np.zeros((b + 1, b + 1))  # k → k + 1 (cap b); eligible: join (→ 1) or stay
  for k in range(1, b):
    transition[k, k + 1] = 1.0
  transition[b, 1], transition[b, b] = p, 1.0 - p
  if warm:  # the stationary law of the chain
    values, vectors = np.linalg.eig(transition[1:, 1:].T)
    start = np.real(vectors[:, np.argmin(np.abs(values - 1.0))])
    start = np.concatenate([[0.0], start / start.sum()])
  else:
    start = np.zeros(b + 1)
    start[b] = 1.0
  silent = transition.copy()
  silent[b, 1] = 0.0  # the rounds in which the example does not take part
  return float(start @ np.linalg.matrix_power(silent, n) @ np.ones(b + 1))


@pytest.mark.parametrize('p,b,n,warm', [(0.3, 3, 10, True), (0.3, 3, 10, False),
                                        (0.05, 4, 9, True), (0.5, 2, 7, True)])
def test_add_threshold_is_minus_log_p0_rounded_up(p, b, n, warm):
  mechanism = jaxacct.MatrixMechanism(
      jaxacct.BMinSep(sampling_prob=p, iterations=n, min_sep=b, warm_start=warm),
      jaxacct.BandedToeplitz([1.0]), 1.0)
  exact = -math.log(_never_participating(p, b, n, warm))
  threshold = tilt_bound.add_vanishing_epsilon(mechanism)
  assert exact <= threshold <= exact * (1 + 1e-10) + 1e-12


def test_add_threshold_of_poisson_and_the_uncovered():
  poisson = jaxacct.MatrixMechanism(jaxacct.Poisson(sampling_prob=0.01, iterations=1000),
                                    jaxacct.BandedToeplitz([1.0]), 1.0)
  exact = -1000 * math.log1p(-0.01)
  assert exact <= tilt_bound.add_vanishing_epsilon(poisson) <= exact + 1e-9
  bins = jaxacct.MatrixMechanism(jaxacct.BallsInBins(iterations=12, cycle_length=4),
                                 jaxacct.BandedToeplitz([1.0]), 1.0)
  assert tilt_bound.add_vanishing_epsilon(bins) is None  # every example takes part


def test_no_plain_add_loss_exceeds_the_threshold():
  # σ = 0.5: most mixture terms are tiny for y ~ Q, so L' = ln Q/P comes close to −ln p₀.
  mechanism = dataclasses.replace(BMINSEP, noise_multiplier=0.5)
  threshold = tilt_bound.add_vanishing_epsilon(mechanism)
  below = threshold - 0.5
  result = jaxacct.estimate_delta(jax.random.key(5), mechanism, [below, threshold], 20_000)
  assert result.delta_hat['add'][1] == 0.0 < result.delta_hat['add'][0]


# ------------------------------------------------------------------ the arithmetic
@pytest.mark.parametrize('n,base,attempts,earlier', [
    (None, None, 1, ()), (5000, None, 1, ()), (None, 1e-3, 1, ()), (None, None, 2, ()),
    (None, None, 2, ((40_000, 2e-3),)), (20_000, 4e-3, 3, ((40_000, 2e-3), (9000, 1e-3)))])
def test_plain_direction_sizes_are_resolve_sample_size_bit_for_bit(n, base, attempts, earlier):
  triples = tuple((m, b, 1.0) for m, b in earlier)
  plain = bounds.DirectionProposal()
  sizes, got_base = bounds.resolve_direction_sizes(
      1e-2, n, base, {'remove': plain, 'add': plain}, attempts=attempts,
      earlier={'remove': triples, 'add': triples})
  expected = bounds.resolve_sample_size(1e-2, n, base, attempts=attempts, earlier=earlier)
  assert (sizes['remove'].num_samples, got_base) == expected
  assert sizes['add'] == sizes['remove']


def test_direction_sizes_certified_and_refused():
  # Both directions certified at the target: no sample, δ_b = δ.
  Proposal = bounds.DirectionProposal
  sizes, base = bounds.resolve_direction_sizes(
      1e-5, None, None, {'remove': Proposal(4e-6, 4e-6), 'add': Proposal(1.0, 0.0)})
  assert base == 1e-5 and sizes == {'remove': (0, 1e-5), 'add': (0, 1e-5)}
  assert bounds.overall_delta_by_direction(sizes, base) == 1e-5
  # A bound between δ_b and δ: the direction is sampled (with its own term range).
  sizes, base = bounds.resolve_direction_sizes(
      1e-5, None, None, {'remove': Proposal(1e-3, 1e-3), 'add': Proposal(1.0, 7e-6)})
  assert base == 5e-6 and sizes['add'] == (bounds.minimum_samples(5e-6, 1e-5), 1.0)
  assert sizes['remove'] == (bounds.minimum_samples(5e-6, 1e-5, support=1e-3), 1e-3)
  with pytest.raises(jaxacct.InputError, match='num_samples=') as refused:
    bounds.resolve_direction_sizes(1e-5, 100, 5e-6, {'remove': Proposal(1e-3, 1e-3),
                                                     'add': Proposal()})
  assert 'too small' in str(refused.value)


def test_direction_sizes_check_what_certified_directions_do_not_use():
  Proposal = bounds.DirectionProposal
  certified = {'remove': Proposal(1e-3, 1e-3), 'add': Proposal(1.0, 0.0)}  # both, at 4e-3
  with pytest.raises(jaxacct.InputError, match='num_samples must be an integer'):
    bounds.resolve_direction_sizes(1e-2, -1, 4e-3, certified)
  with pytest.raises(jaxacct.InputError, match='keys would repeat'):
    bounds.resolve_direction_sizes(1e-2, 2**53, 4e-3, certified)
  # An earlier plain run is charged in a certified direction too; no N helps (was a ValueError).
  with pytest.raises(jaxacct.InputError, match='earlier verification run'):
    bounds.resolve_direction_sizes(
        1e-4, None, 6e-5, {'remove': Proposal(1.0, 1e-6), 'add': Proposal(1.0, 0.0)},
        attempts=2, earlier={'remove': ((40_000, 2e-3, 1.0),), 'add': ()})


def test_a_layout_with_per_direction_sizes_round_trips_and_counts():
  layout = stream.Layout.of({'remove': 700, 'add': 0}, 256)
  assert layout.per_direction == (700, 0) and layout.blocks_in(0) == 3 and layout.blocks_in(1) == 0
  assert stream.Layout.from_dict(layout.to_dict()) == layout
  assert stream.Layout.of({'remove': 9, 'add': 9}, 4).to_dict() == {
      'num_samples': 9, 'block_size': 4, 'first_block': 0, 'num_programs': 1}
  bad = dict(layout.to_dict(), per_direction=[700, 800])
  with pytest.raises(jaxacct.InputError, match='per_direction'):
    stream.Layout.from_dict(bad)
  fresh = stream.StreamState(stream.BlockSums.zeros(1, 1))
  assert fresh.blocks_remaining(num_samples={'remove': 700, 'add': 0}, first_block=0,
                                block_size=256) == 3


def test_account_verifies_a_mechanism_with_the_tilt():
  mechanism = _candidates(1.5)[0]
  guarantee = jaxacct.account(
      mechanism, epsilon=4.5, delta=1e-5, key=jax.random.key(3), accountant='monte_carlo',
      monte_carlo=jaxacct.MonteCarloOptions(proposal='tilted', tilt_order=3),
      run=jaxacct.RunOptions(ledger=jaxacct.VerificationLedger()))
  assert guarantee.method == 'verified_mc' and guarantee.delta <= 1e-5
  assert guarantee.tilt['tilt_order'] == 3 and guarantee.tilt['directions']['add'][0] == 0
  with pytest.raises(jaxacct.InputError) as refused:  # ε is not estimated with the tilt
    jaxacct.account(mechanism, delta=1e-5, key=jax.random.key(3), accountant='monte_carlo',
                    monte_carlo=jaxacct.MonteCarloOptions(proposal='tilted', tilt_order=3),
                    run=jaxacct.RunOptions(ledger=jaxacct.VerificationLedger()))
  assert refused.value.argument == 'epsilon'


@pytest.mark.slow
def test_dp_sgd_is_verified_at_a_small_delta_from_few_samples():
  # The goal: DP-SGD (Poisson q = 0.01, n = 1000, σ = 1) verified at δ = 1e-8 from
  # ≤ 1e4 samples per direction (plain: ~1.2e10). ε is where the PLD's remove δ is 2e-9, so
  # the candidate passes at δ_b = 5e-9; the add direction is certified by its Rényi bound
  # (M'(α', ε) ≈ 3e-16 at α' ≈ 30, far below δ_b): no add sample.
  mechanism = jaxacct.MatrixMechanism(jaxacct.Poisson(sampling_prob=0.01, iterations=1000),
                                      jaxacct.BandedToeplitz([1.0]), 1.0)
  epsilon = jaxacct.epsilon_for_delta(mechanism, 2e-9, accountant='pld', direction='remove')
  guarantee = jaxacct.account(
      mechanism, epsilon=epsilon, delta=1e-8, key=jax.random.key(11), accountant='monte_carlo',
      monte_carlo=jaxacct.MonteCarloOptions(proposal='tilted', tilt_order=8),
      run=jaxacct.RunOptions(ledger=jaxacct.VerificationLedger()))
  assert guarantee.method == 'verified_mc' and guarantee.delta <= 1e-8
  sizes = guarantee.tilt['directions']
  assert 0 < sizes['remove'][0] <= 10_000 and sizes['add'][0] == 0
  assert guarantee.tilt['proposal'] == {'remove': 'tilted', 'add': 'certified'}
  bound = tilted.add_bound([mechanism], epsilon)
  assert 0.0 < bound < 5e-9
  pld = jaxacct.delta_for_epsilon(mechanism, epsilon, accountant='pld', direction='remove')
  assert guarantee.delta_hat['remove'] <= 5e-9 and abs(guarantee.delta_hat['remove'] - pld) < pld


def test_auto_tilts_where_it_covers_and_helps_and_samples_plainly_elsewhere():
  options = jaxacct.MonteCarloOptions(proposal='auto')
  mechanisms = _candidates(1.5, 1.7)
  proposal, order = tilted.resolve_proposal('auto', None, mechanisms, 4.5, 'float64')
  expected = tilt_bound.choose_order(mechanisms[0], 4.5).alpha
  assert (proposal, order) == ('tilted', expected)
  result = jaxacct.verify(jax.random.key(3), _candidates(1.5, 1.7, FALLBACK_SIGMA), epsilon=4.5,
                          delta=1e-5, monte_carlo=options,
                          run=jaxacct.RunOptions(ledger=jaxacct.VerificationLedger()))
  assert result.guarantee.tilt['tilt_order'] == expected
  # Uncovered (truncated), float32, or M ≥ 1 at every order: plain.
  truncated = jaxacct.MatrixMechanism(
      jaxacct.BMinSep(sampling_prob=0.3, iterations=12, min_sep=3, warm_start=True,
                      truncated_batch_size=5, dataset_size=20),
      jaxacct.BandedToeplitz([1.0, 0.5]), 1.5)
  assert tilted.resolve_proposal('auto', None, [truncated], 4.5, 'float64') == ('plain', None)
  assert tilted.resolve_proposal('auto', None, mechanisms, 4.5, 'float32') == ('plain', None)
  assert tilted.resolve_proposal('auto', 3, _candidates(0.7), 0.5, 'float64') == ('plain', None)
  with pytest.raises(jaxacct.InputError) as refused:  # an estimate needs an explicit order
    jaxacct.estimate_delta(jax.random.key(0), BMINSEP, [1.0], 100, monte_carlo=options)
  assert refused.value.argument == 'monte_carlo.proposal'


def test_the_state_budget_bounds_the_order():
  mechanisms = _candidates(1.5)
  states = {a: tilt_bound.state_space(mechanisms[0], a)[0] for a in (2, 3)}
  assert states[2] < states[3]
  # A budget admitting α = 2 only: auto takes 2 (or plain), an explicit α = 3 is refused.
  proposal, order = tilted.resolve_proposal('auto', None, mechanisms, 4.5, 'float64',
                                            state_budget=states[2])
  assert (proposal, order) == ('tilted', 2)
  assert tilted.resolve_proposal('auto', None, mechanisms, 4.5, 'float64',
                                 state_budget=states[2] - 1) == ('plain', None)
  with pytest.raises(jaxacct.InputError, match='state budget') as refused:
    jaxacct.verify(jax.random.key(3), _candidates(1.5, FALLBACK_SIGMA), epsilon=4.5, delta=1e-5,
                   monte_carlo=jaxacct.MonteCarloOptions(proposal='tilted', tilt_order=3,
                                                         tilt_state_budget=states[2]),
                   run=jaxacct.RunOptions(ledger=jaxacct.VerificationLedger()))
  assert refused.value.argument == 'monte_carlo.tilt_order'
  with pytest.raises(jaxacct.InputError) as refused:
    jaxacct.MonteCarloOptions(tilt_state_budget=10)
  assert refused.value.argument == 'monte_carlo.tilt_state_budget'


def test_bounds_alone_certify_without_samples_or_a_charge():
  # α = 3 at σ = 2.0, ε = 4.5, target δ = 2·M(3, 4.5): the remove bound M is below the
  # target, so no remove sample is needed, and ε ≥ −ln p₀ ≈ 4.04 certifies the add direction:
  # a deterministic statement at the largest bound, M.
  mechanism = _candidates(2.0)[0]
  support = math.exp(tilted.tilt_for(mechanism, 3, [4.5]).log_support[0])
  delta = 2 * support
  ledger_object = jaxacct.VerificationLedger()
  result = _verify([mechanism, dataclasses.replace(mechanism, noise_multiplier=9.0)], 4.5,
                   delta, 3, ledger_object=ledger_object)
  guarantee = result.guarantee
  assert guarantee.method == 'deterministic' and guarantee.accountant == 'tilt_bound'
  assert guarantee.delta == support and guarantee.num_samples == 0
  assert guarantee.tilt['proposal'] == {'remove': 'certified', 'add': 'certified'}
  assert guarantee.tilt['directions'] == {'remove': [0, support], 'add': [0, 0.0]}
  assert ledger_object.runs(mechanism) == ()  # nothing drawn, nothing charged


def test_a_tilted_verification_resumes_from_its_checkpoint_as_the_same_attempt(tmp_path,
                                                                              certified_add):
  class Stop(Exception):
    pass

  def stop_after_one_call(done, total, stage):
    raise Stop

  folder, ledger_path = tmp_path / 'verify', tmp_path / 'ledger.json'
  candidates = _candidates(1.5, 1.7, FALLBACK_SIGMA)
  common = dict(ledger_object=jaxacct.FileLedger(ledger_path), checkpoint=folder,
                blocks_per_call=2)
  with pytest.raises(Stop):
    _verify(candidates, 4.5, 1e-5, 3, checkpoint_interval=1e-9, progress=stop_after_one_call,
            **common)
  seen = []
  resumed = _verify(candidates, 4.5, 1e-5, 3,
                    progress=lambda done, total, stage: seen.append(done), **common)
  assert seen and seen[0] > 0  # went on from the saved blocks
  for d in ('remove', 'add'):
    np.testing.assert_array_equal(resumed.sums.sums[d], certified_add.sums.sums[d])
  assert resumed.guarantee.delta == certified_add.guarantee.delta
  assert len(jaxacct.FileLedger(ledger_path).runs(BMINSEP)) == 1  # one attempt, not two


# ------------------------------------------------------------------ calibration
def test_the_order_two_chain_fails_only_sigma_whose_order_three_bound_is_at_least_one():
  """``tilted_search.decided_by_order_two``: False only where the order-3 tilt's own M is ≥ 1
  (D₃ ≥ D₂), never True (a σ that M(2, ε) certifies may have M(3, ε) ≥ 1, which the order-3
  verification refuses: docs/proofs/review-search-shortcut.md), None at order 2."""
  from jaxacct.montecarlo.evr import tilted_search

  def mechanism(sigma):
    return dataclasses.replace(BMINSEP, noise_multiplier=sigma)

  def decided(sigma, epsilon, order=3):
    return tilted_search.decided_by_order_two(mechanism(sigma), order, epsilon, 2_000_000)

  def log_support(sigma, epsilon, order):
    return tilt_bound.log_support_bound(tilt_bound.partition(mechanism(sigma), order).log_z,
                                        order, epsilon)

  for sigma in (0.3, 0.5):
    assert decided(sigma, 4.5) is False and log_support(sigma, 4.5, 3) >= 0.0
  assert log_support(0.8, 4.5, 3) >= 0.0 and decided(0.8, 4.5) is None  # D₂ alone too weak
  assert decided(1.35, 4.5) is None and decided(0.3, 4.5, order=2) is None
  # At ε = 20 M(2, ε) certifies σ = 5 (≤ 5e-6), yet no pass is reported from it.
  assert log_support(5.0, 20.0, 2) <= math.log(5e-6) and decided(5.0, 20.0) is None


def test_the_search_asks_each_sigma_once_and_fails_the_unaffordable_ones(monkeypatch):
  """A σ whose estimate would need more than ``MAX_DEFAULT_SAMPLES`` fails unsampled (its
  verification would cost as much); no σ is evaluated twice (the bracket re-asks σ/2)."""
  from jaxacct.montecarlo.evr import tilted_search
  monkeypatch.setattr(tilted_search, 'MAX_DEFAULT_SAMPLES', 1000)
  base = 5e-6
  found, evaluations = tilted_search.boundary(
      jax.random.key(1), BMINSEP.scheme, BMINSEP.matrix, order=3, state_budget=2_000_000,
      epsilon=4.5, base_delta=base, sigma_up=FALLBACK_SIGMA, guess=1.0, grid_ratio=1.01,
      estimation_samples=None, saved=None, run=jaxacct.RunOptions(progress=None))
  sigmas = [e.sigma for e in evaluations]
  assert len(set(sigmas)) == len(sigmas)
  supports = {e.sigma: math.exp(tilted.tilt_for(dataclasses.replace(BMINSEP, noise_multiplier=
                                                                    e.sigma), 3, [4.5])
                                .log_support[0]) for e in evaluations}
  sampled = [e for e in evaluations if any(e.samples.values())]
  assert sampled and all(e.samples["remove"] == 1000 for e in sampled)
  unaffordable = [e for e in evaluations if not any(e.samples.values())
                  and 1.0 > supports[e.sigma] > 1000 * base / 50]
  assert unaffordable and all(e.delta_hat == 1.0 for e in unaffordable)
  # Every σ at or above the answer is affordable: the candidates' verification is.
  assert all(supports[s] * 50 / base <= 1000 for s in sigmas if s >= found)
  assert found <= FALLBACK_SIGMA


def test_the_order_is_chosen_among_those_a_tilted_run_can_draw():
  # Balls-in-bins, T = 100, 4 bands, σ = 4: ln Z_α's recursion stays small at every order
  # (tilt_bound alone picks α = 8), but the tuple chain has 103 states per chain, so
  # C(102 + α, α) = 5,356, 187,460, 4,967,690 multisets at α = 2, 3, 4: only α ≤ 3 fit the
  # default budget of 2·10⁶.
  balls = jaxacct.MatrixMechanism(jaxacct.BallsInBins(iterations=100, cycle_length=100),
                                  jaxacct.BandedToeplitz([1.0, 0.5, 0.375, 0.3125]), 4.0)
  assert [tilted.sampler_states(balls, a)[0] for a in (2, 3, 4)] == [5356, 187460, 4967690]
  assert tilt_bound.choose_order(balls, 1.0).alpha == 8
  choice = tilted.choose_order(balls, 1.0)
  assert choice.alpha == 3 and [row.alpha for row in choice.table] == [2, 3]
  assert tilted.resolve_proposal('auto', None, [balls], 1.0, 'float64') == ('tilted', 3)
  for orders, named in (([], 'orders must not be empty'), ([1], 'orders must be an integer'),
                        ([5, 6], 'state_budget')):
    with pytest.raises(jaxacct.InputError, match=named):
      tilted.choose_order(balls, 1.0, orders)


def test_a_calibration_chooses_its_order_among_those_its_search_can_pass():
  # At (ε, δ_b) = (3, 5e-7) no σ can pass α ≤ 3 (M ≥ M|_(Z=1) = 0.012, 3.7e-4 > 400·δ_b):
  # auto takes the order of the smallest M at the search's first guess among 4 … 8 — even at
  # σ = 0.5, where every M is ≥ 1 (the search fails such σ itself). A verification's rule
  # (M < 1 at its candidates, smallest M) would fall back to plain there and take α = 2 at
  # σ = 0.7, with which the search would fail every σ below σ_up.
  from jaxacct.montecarlo.evr import tilted_search
  assert tilted_search.searchable_orders(3.0, 5e-7) == [4, 5, 6, 7, 8]
  auto = jaxacct.MonteCarloOptions(proposal='auto')
  for sigma, verification in ((0.5, ('plain', None)), (0.7, ('tilted', 2))):
    guess = _candidates(sigma)[0]
    assert tilted.resolve_proposal('auto', None, [guess], 3.0, 'float64') == verification
    assert tilted_search.resolve_order(auto, guess, 3.0, 5e-7, 'float64',
                                       2_000_000) == ('tilted', 4)
  # Given estimation_samples, the search is not capped: every order is open to auto.
  uncapped = jaxacct.MonteCarloOptions(proposal='auto', estimation_samples=5000)
  assert tilted_search.resolve_order(uncapped, _candidates(0.7)[0], 3.0, 5e-7, 'float64',
                                     2_000_000) == ('tilted', 2)


def test_the_cap_is_on_the_tilted_direction_never_a_plain_one(monkeypatch):
  """At ε = 1.5 < −ln p₀ ≈ 4.04 the add direction is drawn plainly (~50/δ_b samples, as a
  plain calibration draws) unless a proven add bound certifies it: that alone never fails a
  σ; only the tilted remove direction's need is capped (the quickstart's search once failed
  every σ so)."""
  from jaxacct.montecarlo.evr import tilted_search
  monkeypatch.setattr(tilted_search, 'MAX_DEFAULT_SAMPLES', 2000)
  _, evaluations = tilted_search.boundary(
      jax.random.key(2), BMINSEP.scheme, BMINSEP.matrix, order=3, state_budget=2_000_000,
      epsilon=1.5, base_delta=5e-3, sigma_up=FALLBACK_SIGMA, guess=1.0, grid_ratio=1.05,
      estimation_samples=None, saved=None, run=jaxacct.RunOptions(progress=None))
  sampled = [e for e in evaluations if any(e.samples.values())]
  for e in sampled:  # plain add terms where no proven add bound is ≤ δ_b, else none
    bound = tilted.add_bound(_candidates(e.sigma), 1.5)
    assert e.samples['add'] == (0 if bound is not None and bound <= 5e-3 else 10_000), e
  assert any(e.samples['add'] == 10_000 > 2000 for e in sampled)


@pytest.fixture(scope='module')
def tilted_calibration():
  # Under a budget it can keep: projected first (tilted_plan.py), then run whole (the budget
  # is not asked again by its phases; the resume test below runs it without one, same bits).
  return jaxacct.calibrate_noise_multiplier(
      BMINSEP.scheme, BMINSEP.matrix, epsilon=4.5, delta=1e-5, key=jax.random.key(1),
      monte_carlo=jaxacct.MonteCarloOptions(proposal='tilted', tilt_order=3, num_candidates=4),
      run=jaxacct.RunOptions(ledger=jaxacct.VerificationLedger(), max_seconds=3600.0))


def test_a_tilted_calibration_agrees_with_the_deterministic_brackets(tilted_calibration):
  # Plain Monte Carlo calibrates this mechanism to σ ≈ 1.351 at (4.5, 1e-5) from 10,745,967
  # samples per direction (measured once; too slow for the suite). The tilted one must release a
  # verified σ from its candidate grid below σ_up, near the estimated boundary, with few samples.
  result = tilted_calibration
  guarantee = result.guarantee
  assert guarantee.method == 'verified_mc' and guarantee.delta <= 1e-5
  assert guarantee.tilt['tilt_order'] == 3 and guarantee.num_samples < 5000
  sweeps = result.record.sweeps
  failed = [s.sigmas[0] for s in sweeps if s.delta_hat[0] > 5e-6]
  passed = [s.sigmas[0] for s in sweeps if s.delta_hat[0] <= 5e-6]
  assert failed and passed and max(failed) < min(passed) <= max(failed) * 1.01  # bisected
  assert guarantee.noise_multiplier in result.candidates[:-1]
  assert 1.30 < guarantee.noise_multiplier < 1.40  # within ~4 % of plain's 1.351
  # The candidates are the grid around the search's boundary, σ_up last (proven).
  assert result.candidates[-1] == result.record.sigma_up
  assert all(b / a == pytest.approx(1.01) for a, b in zip(result.candidates[:-2],
                                                          result.candidates[1:-1]))


def test_a_tilted_calibration_resumes_bitwise_and_counts_one_attempt(tmp_path, tilted_calibration):
  class Stop(Exception):
    pass

  calls = []

  def stop_at_the_third_call(done, total, stage):
    calls.append(stage)
    if len(calls) == 3:
      raise Stop

  options = jaxacct.MonteCarloOptions(proposal='tilted', tilt_order=3, num_candidates=4)
  folder, ledger_path = tmp_path / 'calibrate', tmp_path / 'ledger.json'

  def run(**extra):
    return jaxacct.calibrate_noise_multiplier(
        BMINSEP.scheme, BMINSEP.matrix, epsilon=4.5, delta=1e-5, key=jax.random.key(1),
        monte_carlo=options, run=jaxacct.RunOptions(
            ledger=jaxacct.FileLedger(ledger_path), checkpoint=folder, **extra))
  with pytest.raises(Stop):
    run(checkpoint_interval=1e-9, progress=stop_at_the_third_call)
  resumed = run()
  assert resumed.guarantee == dataclasses.replace(tilted_calibration.guarantee,
                                                  attempts_checked=True)
  assert resumed.record.sweeps == tilted_calibration.record.sweeps
  assert len(jaxacct.FileLedger(ledger_path).runs(BMINSEP)) == 1


def test_a_tilted_calibration_refuses_what_it_cannot_do_yet():
  with pytest.raises(jaxacct.InputError) as refused:
    jaxacct.calibrate_noise_multiplier(
        BMINSEP.scheme, BMINSEP.matrix, epsilon=4.5, delta=1e-5, key=jax.random.key(1),
        monte_carlo=jaxacct.MonteCarloOptions(proposal='tilted', tilt_order=3,
                                              estimate_only=True),
        run=jaxacct.RunOptions(ledger=jaxacct.VerificationLedger()))
  assert refused.value.argument == 'monte_carlo.estimate_only'


def test_the_plan_replays_the_real_searchs_bracket_and_count(tilted_calibration):
  # The capacity plan (tilted_plan.py) replays this calibration's search: the same start,
  # bracket and first bisection, and as many σ; it places its boundary where the best order's
  # conversion is 12·δ_b (``tilted_plan.proxy_delta``: 1.311 against the real 1.355, where
  # M(3, ε)/δ_b ≈ 48; the old rule, M(3, ε) ≤ 25·δ_b, gave up to 25 % above), so the later σ
  # differ. The compiles are the calibration's (same call shapes): nothing is compiled again.
  projected = plan.capacity_plan(
      BMINSEP, epsilon=4.5, delta=1e-5, monte_carlo=jaxacct.MonteCarloOptions(
          proposal='tilted', tilt_order=3, num_candidates=4),
      run=jaxacct.RunOptions(progress=False))
  real = tilted_calibration
  searched = [sweep.sigmas[0] for sweep in real.record.sweeps]
  replayed = [p.sigma for p in projected.probes]
  assert replayed[:3] == searched[:3]  # the start, the bracket's growth, its first bisection
  assert len(replayed) == len(searched)
  assert 0.95 < projected.boundary / real.record.sweeps[-1].sigmas[0] < 1.05
