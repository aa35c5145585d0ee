"""Issue 42 items 1, 2 and 4: attempts counted per mechanism whatever the target, the user's
ledger by default, a declared retry that can pass — and the union bound they charge."""

import json
from fractions import Fraction

import jax
import numpy as np
import pytest

import jaxacct
from jaxacct.montecarlo.evr import bounds as evr
from jaxacct.montecarlo.engine import keys as keys_lib
from jaxacct.montecarlo.evr import ledger as ledger_lib
from jaxacct.montecarlo.evr import verification

SCHEME = jaxacct.BMinSep(sampling_prob=0.3, iterations=24, min_sep=4, warm_start=True)
MATRIX = jaxacct.BandedToeplitz([1.0, 0.5, 0.25])
MECHANISM = jaxacct.MatrixMechanism(SCHEME, MATRIX, 1.1)
# The verification program of tests/montecarlo/test_checkpoint_and_ledger.py (2 σ, calls of 4
# blocks): its compile is shared.
CANDIDATES = [MECHANISM, jaxacct.MatrixMechanism(SCHEME, MATRIX, 1.3),
              jaxacct.MatrixMechanism(SCHEME, MATRIX, 40.0)]


def _verify(key, *, epsilon=1.0, delta=0.05, ledger=None, candidates=CANDIDATES, **options):
  return jaxacct.verify(jax.random.key(key), candidates, epsilon=epsilon, delta=delta,
                        monte_carlo=jaxacct.MonteCarloOptions(**options),
                        run=jaxacct.RunOptions(blocks_per_call=4, ledger=ledger))


def _record(run, *, epsilon=1.0, delta=1e-3, n=10**5, base=5e-4):
  return ledger_lib.RunRecord(run=run, epsilon=epsilon, delta=delta, num_samples=n,
                              base_delta=base, overall_delta=1.0)


def _described(mechanism) -> str:
  return json.dumps(ledger_lib.mechanism_description(mechanism), sort_keys=True)


# ---- item 1: one mechanism, whatever the target, scale or number types ----

def test_a_near_duplicate_target_with_a_new_seed_is_a_counted_retry():
  """The campaign's ε + 1e-10 with another seed: refused, and charged twice when declared."""
  first = _verify(0, num_samples=3000)
  assert first.guarantee.attempts == 1 and first.guarantee.attempts_checked is True
  with pytest.raises(ledger_lib.UndeclaredRetryError, match='attempt=2'):
    _verify(5, epsilon=1.0000000001, num_samples=3000)
  second = _verify(5, epsilon=1.0000000001, num_samples=3000, attempt=2)
  assert second.guarantee.attempts == 2
  # The first run's claim (ε = 1 ≤ 1.0000000001) could back this one: it is charged at its own
  # (N, δ_b) — its δ_b, derived for one attempt, is larger than this run's.
  assert second.base_delta < first.base_delta
  assert second.guarantee.delta == evr.overall_delta(
      3000, second.base_delta, attempts=2, earlier=[(3000, first.base_delta)]) <= 0.05
  # A third run at a looser target is counted too (attempt 3), though it cannot be backed.
  with pytest.raises(ledger_lib.UndeclaredRetryError, match='attempt=3'):
    _verify(6, epsilon=3.0, delta=0.2, num_samples=3000)


@pytest.mark.parametrize('other', [
    jaxacct.MatrixMechanism(SCHEME, jaxacct.BandedToeplitz([3.7, 1.85, 0.925]), 4.07),
    jaxacct.MatrixMechanism(jaxacct.BMinSep(sampling_prob=np.float64(0.3), iterations=np.int64(24),
                                            min_sep=4, warm_start=True), MATRIX, 2.0),
    jaxacct.MatrixMechanism(jaxacct.BMinSep(sampling_prob=Fraction(3, 10) * 1.0, iterations=24,
                                            min_sep=4), MATRIX, 2.0),
    jaxacct.MatrixMechanism(jaxacct.BMinSep(sampling_prob=0.3 * (1 + 1e-9), iterations=24,
                                            min_sep=4), MATRIX, 2.0),
], ids=['rescaled-strategy', 'numpy-scalars', 'fraction-as-float', 'near-duplicate-p'])
def test_equal_or_rescaled_mechanisms_share_the_attempts(other):
  ledger = ledger_lib.VerificationLedger()
  ledger.charge(MECHANISM, _record('a'), 1, lambda charge: 1e-3)
  with pytest.raises(ledger_lib.UndeclaredRetryError):
    ledger.charge(other, _record('b', epsilon=2.0), 1, lambda charge: 1e-3)
  assert ledger.charge(other, _record('b', epsilon=2.0), 2, lambda charge: 1e-3)[0].attempts == 2


@pytest.mark.parametrize('other', [
    jaxacct.MatrixMechanism(SCHEME, jaxacct.BandedToeplitz([1.0, 0.6, 0.25]), 1.1),
    jaxacct.MatrixMechanism(jaxacct.BMinSep(sampling_prob=0.31, iterations=24, min_sep=4),
                            MATRIX, 1.1),
    jaxacct.MatrixMechanism(jaxacct.BMinSep(sampling_prob=0.3, iterations=25, min_sep=4),
                            MATRIX, 1.1),
    jaxacct.MatrixMechanism(jaxacct.BMinSep(sampling_prob=0.3, iterations=24, min_sep=4,
                                            warm_start=False), MATRIX, 1.1),
], ids=['other-band', 'other-p', 'other-n', 'cold-start'])
def test_other_mechanisms_are_counted_apart(other):
  ledger = ledger_lib.VerificationLedger()
  ledger.charge(MECHANISM, _record('a'), 1, lambda charge: 1e-3)
  assert ledger.charge(other, _record('b'), 1, lambda charge: 1e-3)[0].attempts == 1


def test_a_rescaled_dense_strategy_is_the_same_mechanism():
  entries = np.tril(np.random.default_rng(3).uniform(0.1, 1.0, (6, 6)))
  scheme = jaxacct.BMinSep(sampling_prob=0.2, iterations=6, min_sep=2)
  one = jaxacct.MatrixMechanism(scheme, jaxacct.LowerTriangular(entries), 1.0)
  scaled = jaxacct.MatrixMechanism(scheme, jaxacct.LowerTriangular(entries * 0.37), 0.37)
  other = jaxacct.MatrixMechanism(scheme, jaxacct.LowerTriangular(entries * (1 + np.eye(6))), 1.0)
  ledger = ledger_lib.VerificationLedger()
  ledger.charge(one, _record('a'), 1, lambda charge: 1e-3)
  assert len(ledger.runs(scaled)) == 1 and len(ledger.runs(other)) == 0


def test_numbers_are_canonical_and_a_fraction_that_is_no_float_is_refused():
  assert _described(jaxacct.MatrixMechanism(jaxacct.Poisson(sampling_prob=1, iterations=4),
                                            jaxacct.BandedToeplitz([1.0]), 1.0)) == \
      _described(jaxacct.MatrixMechanism(jaxacct.Poisson(sampling_prob=np.float64(1.0),
                                                         iterations=4),
                                         jaxacct.BandedToeplitz([1]), 1.0))
  with pytest.raises(jaxacct.InputError, match='sampling_prob = Fraction.*not exactly a float'):
    jaxacct.BMinSep(sampling_prob=Fraction(1, 3), iterations=24, min_sep=4)
  # A float32 is refused, not read as its float64 value nor rounded to the decimal it shows.
  with pytest.raises(jaxacct.InputTypeError, match=r'float32 \(0.009999999776482582 exactly\)'):
    jaxacct.Poisson(sampling_prob=np.float32(0.01), iterations=4)


# ---- the union bound over runs that could back the claim ----

def test_earlier_runs_are_charged_at_their_own_settings():
  n, base = 100_000, 5e-4
  two = evr.overall_delta(n, base, attempts=2)
  assert evr.overall_delta(n, base, attempts=2, earlier=[(n, base)]) == two  # bitwise
  # A backing run with fewer samples could falsely accept more often: it costs more.
  weaker = evr.overall_delta(n, base, attempts=2, earlier=[(20_000, base)])
  assert weaker > two
  # Independent check at the chosen level: Q = q_this + q_earlier ≥ 2·q_this there.
  assert weaker <= evr.overall_delta(20_000, base, attempts=2)
  # Monotone in the earlier run's samples.
  values = [evr.overall_delta(n, base, attempts=2, earlier=[(m, base)])
            for m in (10_000, 30_000, 100_000, 10**6)]
  assert values == sorted(values, reverse=True)
  with pytest.raises(jaxacct.InputError, match='earlier lists 2 runs'):
    evr.overall_delta(n, base, attempts=2, earlier=[(n, base), (n, base)])


def test_which_recorded_runs_back_a_claim():
  stricter = ledger_lib.RunRecord(run='s', epsilon=0.5, delta=1e-4, num_samples=10, base_delta=1e-5,
                                  overall_delta=9e-5)
  assert stricter.backs(1.0, 1e-3)  # ε and δ both stricter: it could be released as (1, 1e-3)
  assert not stricter.backs(0.4, 1e-3)  # its ε is weaker
  assert not stricter.backs(1.0, 5e-5)  # its released δ is weaker
  charge = ledger_lib.charge_of([stricter, _record('x', epsilon=9.0)], 3, 1.0, 1e-3)
  assert charge.attempts == 3 and charge.earlier == {d: ((10, 1e-5, 1.0),) for d in ('remove', 'add')}


# ---- item 2: the user's ledger by default; an in-memory one says so ----

def test_the_api_charges_the_users_ledger_by_default(tmp_path, monkeypatch):
  monkeypatch.setenv('JAXACCT_LEDGER', str(tmp_path / 'state' / 'ledger.json'))
  _verify(0, num_samples=3000)
  assert (tmp_path / 'state' / 'ledger.json').exists()
  with pytest.raises(ledger_lib.UndeclaredRetryError):  # the campaign's key(1) after key(0)
    _verify(1, num_samples=3000)
  memory = _verify(2, num_samples=3000, ledger=ledger_lib.VerificationLedger())
  assert memory.guarantee.attempts_checked is False
  assert 'attempts unchecked' in repr(memory.guarantee)
  assert json.loads(memory.guarantee.to_json())['attempts_checked'] is False
  assert jaxacct.Guarantee.from_json(memory.guarantee.to_json()) == memory.guarantee


# ---- item 4: a declared retry gets the samples it needs, or is refused before compute ----

def test_a_declared_retry_gets_the_minimum_samples_of_its_attempt(tmp_path):
  ledger = ledger_lib.FileLedger(tmp_path / 'ledger.json')
  key_data = keys_lib.key_words(jax.random.key(9))
  common = dict(epsilon=1.0, delta=1e-3, key_data=key_data, num_samples=None, base_delta=None,
                shared_draws=True, precision='float64')
  assert verification.sample_size(ledger, MECHANISM, attempt=1, **common) == (
      evr.minimum_samples(5e-4, 1e-3), 5e-4)
  # An earlier run at a weaker ε cannot back the claim: charged as this run (2·q).
  ledger.charge(MECHANISM, _record('weaker', epsilon=3.0, n=75_013), 1, lambda charge: 1e-3)
  n, base = verification.sample_size(ledger, MECHANISM, attempt=2, **common)
  assert n == evr.minimum_samples(5e-4, 1e-3, attempts=2) > evr.minimum_samples(5e-4, 1e-3)
  assert evr.overall_delta(n, base, attempts=2) <= 1e-3
  # An earlier run of the same claim with fewer samples than the retry's is charged its own
  # (larger) bound: the retry needs more samples than 2·q alone would ask.
  ledger.charge(MECHANISM, _record('backing', n=75_013), 2, lambda charge: 1e-3)
  n, base = verification.sample_size(ledger, MECHANISM, attempt=3, **common)
  earlier = [(75_013, 5e-4)]
  assert n == evr.minimum_samples(5e-4, 1e-3, attempts=3, earlier=earlier)
  assert n > evr.minimum_samples(5e-4, 1e-3, attempts=3)
  assert evr.overall_delta(n, base, attempts=3, earlier=earlier) <= 1e-3
  assert evr.overall_delta(n - 1, base, attempts=3, earlier=earlier) > 1e-3
  # Given samples too few for the declared attempt: refused, naming the num_samples that pass.
  with pytest.raises(jaxacct.InputError, match=f'num_samples={n}'):
    verification.sample_size(ledger, MECHANISM, attempt=3,
                             **{**common, 'num_samples': 75_013, 'base_delta': 5e-4})


# ---- item 5 (the ledger's and verify's inputs) ----

@pytest.mark.parametrize('body, field', [
    ({'format': 2, 'mechanisms': []}, 'mechanisms'),
    ({'format': 2, 'mechanisms': {'x-0': {'runs': []}}}, 'mechanisms.x-0'),
    ({'format': 2, 'legacy': [], 'mechanisms': {}}, 'legacy'),
    ({'format': 1, 'runs': {'g': 'not a list'}}, 'runs'),
    (['a', 'list'], 'the document'),
], ids=['mechanisms-list', 'entry-without-mechanism', 'legacy-list', 'format-1-runs', 'list'])
def test_a_checksum_valid_ledger_of_another_structure_is_a_named_ledger_error(tmp_path, body,
                                                                             field):
  from jaxacct import _files
  path = tmp_path / 'ledger.json'
  _files.write_checked_json(path, body, keyed=True)  # signed: only the structure is wrong
  with pytest.raises(ledger_lib.LedgerError, match=f"{field}"):
    ledger_lib.FileLedger(path)


def test_a_ledger_edited_without_the_secret_is_refused(tmp_path):
  """Removing a run (the campaign's way to forget an attempt) with the checksum recomputed."""
  from jaxacct import _files
  ledger = ledger_lib.FileLedger(tmp_path / 'ledger.json')
  ledger.charge(MECHANISM, _record('a'), 1, lambda charge: 1e-3)
  document = ledger._document()
  for entry in document['mechanisms'].values():
    entry['runs'] = []
  _files.write_checked_json(ledger.path, document)  # valid SHA-256, no MAC
  with pytest.raises(ledger_lib.LedgerError, match='MAC'):
    ledger_lib.FileLedger(ledger.path)
  _files.write_checked_json(ledger.path, {**document, 'format': 2}, keyed=False)
  text = json.loads(ledger.path.read_text())
  text['mac'] = '0' * 64  # a forged MAC
  ledger.path.write_text(json.dumps(text))
  with pytest.raises(ledger_lib.LedgerError, match='MAC'):
    ledger_lib.FileLedger(ledger.path)


def test_a_run_record_of_the_wrong_type_is_a_named_ledger_error(tmp_path):
  ledger = ledger_lib.FileLedger(tmp_path / 'ledger.json')
  ledger.charge(MECHANISM, _record('a'), 1, lambda charge: 1e-3)
  document = ledger._document()
  key = next(iter(document['mechanisms']))
  document['mechanisms'][key]['runs'][0]['num_samples'] = 'many'
  ledger_lib._write_ledger(ledger.path, document)
  with pytest.raises(ledger_lib.LedgerError, match=r'runs\[0\]'):
    ledger_lib.FileLedger(ledger.path)


def test_a_format_1_ledger_counts_its_runs_of_the_mechanism(tmp_path):
  from jaxacct import _files
  n, base = evr.resolve_sample_size(1e-3, None, None)
  old_target = repr((SCHEME, MATRIX.fingerprint, 1.0, 0.001))
  old_run = repr(((0, 7), (1.0, 2.0), n, base, True))
  _files.write_checked_json(tmp_path / 'ledger.json', {'format': 1, 'runs': {
      old_target: [old_run]}})
  ledger = ledger_lib.FileLedger(tmp_path / 'ledger.json')
  (run,) = ledger.runs(MECHANISM)
  assert (run.epsilon, run.num_samples, run.base_delta) == (1.0, n, base)
  with pytest.raises(ledger_lib.UndeclaredRetryError):  # another target of the same mechanism
    ledger.charge(MECHANISM, _record('new', epsilon=2.0), 1, lambda charge: 1e-3)
  ledger.charge(MECHANISM, _record('new', epsilon=2.0), 2, lambda charge: 1e-3)
  again = ledger_lib.FileLedger(tmp_path / 'ledger.json')  # rewritten as format 2, kept
  assert [r.run for r in again.runs(MECHANISM)] == ['format-1 ' + old_run, 'new']


def test_verify_refuses_a_single_mechanism_and_a_non_boolean_shared_draws():
  with pytest.raises(jaxacct.InputTypeError, match='got a single mechanism'):
    jaxacct.verify(jax.random.key(0), MECHANISM, epsilon=1.0, delta=0.05)
  with pytest.raises(jaxacct.InputTypeError, match="shared_draws must be True or False, got 'no'"):
    jaxacct.verify(jax.random.key(0), CANDIDATES, epsilon=1.0, delta=0.05,
                   monte_carlo=jaxacct.MonteCarloOptions(shared_draws='no'))
  with pytest.raises(jaxacct.InputTypeError, match="shared_draws must be True or False"):
    jaxacct.calibrate_noise_multiplier(SCHEME, MATRIX, epsilon=1.0, delta=0.05,
                                       key=jax.random.key(0),
                                       monte_carlo=jaxacct.MonteCarloOptions(shared_draws='no'))
