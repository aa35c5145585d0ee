"""Checkpoint files and the persistent attempt ledger (issue 13): resume bitwise, refuse
another run's or a corrupt checkpoint, charge attempts across ledger objects on one file."""

import dataclasses
import json
import os
import pathlib
import threading

import jax
import pytest

import jaxacct
from jaxacct.montecarlo.evr import checkpoint as checkpoint_lib
from jaxacct.montecarlo.evr import ledger as ledger_lib

MECHANISM = jaxacct.MatrixMechanism(
    jaxacct.BMinSep(sampling_prob=0.3, iterations=24, min_sep=4, warm_start=True),
    jaxacct.BandedToeplitz([1.0, 0.5, 0.25]), 1.1)
EPSILONS = [0.5, 1.0, 2.0]


class Stop(Exception):
  pass


def _stop_after(calls: int):
  seen = []
  def progress(done, total, stage):
    seen.append(done)
    if len(seen) == calls:
      raise Stop
  return progress


@pytest.mark.slow
def test_estimate_resumes_bitwise_after_an_interruption(tmp_path):
  run = jaxacct.RunOptions(blocks_per_call=2, checkpoint_interval=1e-9, checkpoint=tmp_path)
  # The reference in one call of the default size (42 blocks: the program of this file's other
  # estimates), the interrupted and resumed runs in calls of two blocks.
  reference = jaxacct.estimate_delta(jax.random.key(3), MECHANISM, EPSILONS, 9000)
  with pytest.raises(Stop):  # 9 blocks per direction, two per call (5 calls): stop in "add"
    jaxacct.estimate_delta(jax.random.key(3), MECHANISM, EPSILONS, 9000,
                           run=dataclasses.replace(run, progress=_stop_after(7)))
  saved = json.loads((tmp_path / 'checkpoint.json').read_text())['body']['current']
  assert saved['stream']['direction'] == 1 and saved['stream']['block'] == 4
  resumed = jaxacct.estimate_delta(jax.random.key(3), MECHANISM, EPSILONS, 9000, run=run)
  for d in ('remove', 'add'):
    assert resumed.delta_hat[d].tolist() == reference.delta_hat[d].tolist()
    assert resumed.standard_error[d].tolist() == reference.standard_error[d].tolist()
  # A finished run is returned from the checkpoint without computing.
  again = jaxacct.estimate_delta(jax.random.key(3), MECHANISM, EPSILONS, 9000,
                                 run=dataclasses.replace(run, progress=_stop_after(1)))
  assert again.delta_hat['add'].tolist() == reference.delta_hat['add'].tolist()


def test_checkpoint_of_another_run_is_refused_naming_what_differs(tmp_path):
  jaxacct.estimate_delta(jax.random.key(3), MECHANISM, EPSILONS, 2000,
                         run=jaxacct.RunOptions(checkpoint=tmp_path))
  with pytest.raises(checkpoint_lib.CheckpointError, match='num_samples differs'):
    jaxacct.estimate_delta(jax.random.key(3), MECHANISM, EPSILONS, 3000,
                           run=jaxacct.RunOptions(checkpoint=tmp_path))
  with pytest.raises(checkpoint_lib.CheckpointError, match='estimator differs'):
    jaxacct.estimate_delta(jax.random.key(4), MECHANISM, EPSILONS, 2000,
                           run=jaxacct.RunOptions(checkpoint=tmp_path))


@pytest.mark.parametrize('damage', ['truncate', 'edit', 'empty', 'flipped-byte', 'directory'])
def test_corrupt_checkpoint_is_refused_and_kept(tmp_path, damage):
  jaxacct.estimate_delta(jax.random.key(3), MECHANISM, EPSILONS, 2000,
                         run=jaxacct.RunOptions(checkpoint=tmp_path))
  path = tmp_path / 'checkpoint.json'
  data = path.read_bytes()
  if damage == 'directory':
    path.unlink()
    path.mkdir()
  else:
    damaged = {'truncate': data[:len(data) // 2], 'edit': data.replace(b'"block"', b'"blok"'),
               'empty': b'', 'flipped-byte': data[:40] + bytes([data[40] ^ 0x80]) + data[41:]}
    path.write_bytes(damaged[damage])
  with pytest.raises(checkpoint_lib.CheckpointError,
                     match='cannot be read' if damage == 'directory' else 'corrupt'):
    jaxacct.estimate_delta(jax.random.key(3), MECHANISM, EPSILONS, 2000,
                           run=jaxacct.RunOptions(checkpoint=tmp_path))
  if damage != 'directory':
    assert path.read_bytes() == damaged[damage]  # never silently restarted


def test_unwritable_checkpoint_directory_is_refused_before_compute(tmp_path):
  blocker = tmp_path / 'file'
  blocker.write_text('')
  with pytest.raises(checkpoint_lib.CheckpointError, match='cannot be created'):
    jaxacct.estimate_delta(jax.random.key(3), MECHANISM, EPSILONS, 2000,
                           run=jaxacct.RunOptions(
                               checkpoint=blocker / 'sub', progress=_stop_after(1)))
  with pytest.raises(ValueError, match='checkpoint_interval must be finite and > 0, got 0'):
    jaxacct.estimate_delta(jax.random.key(3), MECHANISM, EPSILONS, 2000,
                           run=jaxacct.RunOptions(
                               checkpoint=tmp_path, checkpoint_interval=0, progress=_stop_after(1)))


def _run(name: str, epsilon: float = 1.0, delta: float = 1e-3, n: int = 10**5,
         base: float = 5e-4):
  return ledger_lib.RunRecord(run=name, epsilon=epsilon, delta=delta, num_samples=n,
                              base_delta=base, overall_delta=1.0)


def _attempts(ledger, run, attempt, check=lambda charge: 1e-3):
  return ledger.charge(MECHANISM, run, attempt, check)[0].attempts


def test_file_ledger_charges_attempts_across_objects_and_survives_a_crash(tmp_path):
  path = tmp_path / 'ledger.json'
  first, second = ledger_lib.FileLedger(path), ledger_lib.FileLedger(path)
  assert _attempts(first, _run('run-a'), 1) == 1
  assert _attempts(second, _run('run-a'), 1) == 1  # the same run again: not a new attempt
  with pytest.raises(ValueError, match='attempt=2'):
    _attempts(second, _run('run-b'), 1)
  def refuse(charge):
    raise ValueError(f'refused at {charge.attempts}')
  with pytest.raises(ValueError, match='refused at 2'):
    _attempts(second, _run('run-b'), 2, refuse)
  assert [r.run for r in first.runs(MECHANISM)] == ['run-a']  # a refused run is not recorded
  assert _attempts(first, _run('run-b'), 2) == 2
  # A crash mid-write leaves a temporary file beside an intact ledger.
  (tmp_path / '.ledger.json.99999.tmp').write_text('{"body": {"trunc')
  assert [r.run for r in ledger_lib.FileLedger(path).runs(MECHANISM)] == ['run-a', 'run-b']
  path.write_text(path.read_text()[:-10])
  with pytest.raises(ledger_lib.LedgerError, match='corrupt'):
    ledger_lib.FileLedger(path)


def test_file_ledger_lets_one_of_two_racing_processes_take_an_attempt(tmp_path):
  path = tmp_path / 'ledger.json'
  _attempts(ledger_lib.FileLedger(path), _run('run-a'), 1)
  outcomes = []
  def take(run):
    try:
      outcomes.append(_attempts(ledger_lib.FileLedger(path), _run(run), 2))
    except ValueError as error:
      outcomes.append(str(error))
  threads = [threading.Thread(target=take, args=(f'run-{i}',)) for i in 'bc']
  for t in threads:
    t.start()
  for t in threads:
    t.join()
  assert sorted(map(str, outcomes))[0] == '2' and 'attempt=3' in sorted(map(str, outcomes))[1]


def test_ledger_lock_timeout_and_bad_paths(tmp_path):
  import fcntl
  path = tmp_path / 'ledger.json'
  ledger = ledger_lib.FileLedger(path, lock_timeout=0.2)
  with open(tmp_path / 'ledger.json.lock', 'a+') as holder:
    fcntl.flock(holder.fileno(), fcntl.LOCK_EX)
    with pytest.raises(ledger_lib.LedgerError, match='could not be locked within 0.2 s'):
      _attempts(ledger, _run('run-a'), 1)
  with pytest.raises(ledger_lib.LedgerError, match='is a directory'):
    ledger_lib.FileLedger(tmp_path)
  with pytest.raises(TypeError, match='ledger must be'):
    ledger_lib.ledger_from(3)
  if os.geteuid() != 0:  # root writes anywhere
    locked = tmp_path / 'ro'
    locked.mkdir(mode=0o500)
    with pytest.raises(ledger_lib.LedgerError, match='not writable'):
      ledger_lib.FileLedger(locked / 'ledger.json')


def _stop_in(stage: str, calls: int, seen: list):
  """Progress callback recording (stage, done) and stopping after ``calls`` calls of ``stage``."""
  def progress(done, total, name):
    seen.append((name, done))
    if name == stage and sum(1 for s, _ in seen if s == stage) == calls:
      raise Stop
  return progress


@pytest.mark.slow
def test_resume_keeps_the_phase_in_progress_through_the_replay_of_finished_phases(tmp_path):
  """Issue 29: a calibration stopped inside verification resumes there, not at its block 0,
  also when stopped a second time (the replay of the sweeps never drops the saved phase)."""
  # 30 blocks of 1024 per direction in calls of 4 (performance only): 8 calls per direction in
  # verification, enough to stop at the third and twice one call later.
  target = dict(epsilon=1.0, delta=0.05, key=jax.random.key(5),
                monte_carlo=jaxacct.MonteCarloOptions(num_samples=30_000, estimation_samples=2000,
                                                      num_candidates=2, grid_ratio=1.2))
  scheme, matrix = MECHANISM.scheme, MECHANISM.matrix
  reference = jaxacct.calibrate_noise_multiplier(scheme, matrix, **target,
                                                 run=jaxacct.RunOptions(blocks_per_call=4))

  def resumable(progress=None):
    return jaxacct.RunOptions(blocks_per_call=4, checkpoint=tmp_path, checkpoint_interval=1e-9,
                              progress=progress)

  seen: list = []
  with pytest.raises(Stop):
    jaxacct.calibrate_noise_multiplier(scheme, matrix, **target,
                                       run=resumable(_stop_in('verification', 3, seen)))
  saved = json.loads((tmp_path / 'checkpoint.json').read_text())['body']['current']
  assert saved['phase'] == 'verification' and saved['stream']['block'] > 0
  stopped_at = [done for stage, done in seen if stage == 'verification'][-1]
  for _ in range(2):  # resume, stop again one call later; then finish
    seen = []
    with pytest.raises(Stop):
      jaxacct.calibrate_noise_multiplier(scheme, matrix, **target,
                                         run=resumable(_stop_in('verification', 1, seen)))
    assert [stage for stage, _ in seen] == ['verification']  # sweeps replayed without compute
    assert seen[0][1] > stopped_at  # the resumed verification went on from the saved block
    stopped_at = seen[0][1]
  resumed = jaxacct.calibrate_noise_multiplier(scheme, matrix, **target, run=resumable())
  assert resumed.guarantee.noise_multiplier == reference.guarantee.noise_multiplier
  assert resumed.record.to_dict() == reference.record.to_dict()


# ---- issue 29: a ledger that cannot be left behind, checkpoints checked field by field ----

def test_numpy_scalars_give_the_same_scheme_and_ledger_entry():
  import numpy as np
  plain = jaxacct.BMinSep(sampling_prob=0.04, iterations=24, min_sep=4, warm_start=True)
  typed = jaxacct.BMinSep(sampling_prob=np.float64(0.04), iterations=np.int64(24),
                          min_sep=np.int32(4), warm_start=np.bool_(True))
  assert typed == plain and repr(typed) == repr(plain) and hash(typed) == hash(plain)
  assert type(typed.sampling_prob) is float and type(typed.iterations) is int
  descriptions = {json.dumps(ledger_lib.mechanism_description(jaxacct.MatrixMechanism(
      scheme, MECHANISM.matrix, 1.0)), sort_keys=True) for scheme in (plain, typed)}
  assert len(descriptions) == 1


def test_default_ledger_is_the_users_and_can_be_moved(monkeypatch, tmp_path):
  monkeypatch.setenv('JAXACCT_LEDGER', str(tmp_path / 'mine.json'))
  assert ledger_lib.default_path() == tmp_path / 'mine.json'
  monkeypatch.delenv('JAXACCT_LEDGER')
  monkeypatch.setenv('XDG_STATE_HOME', str(tmp_path / 'state'))
  assert ledger_lib.default_path() == tmp_path / 'state' / 'jaxacct' / 'ledger.json'
  monkeypatch.delenv('XDG_STATE_HOME')
  assert str(ledger_lib.default_path()).endswith('.local/state/jaxacct/ledger.json')


# Two Monte Carlo candidates and the fallback (σ = 40), in calls of 4 blocks: the verification
# program of the resume test above (2 σ), which the capacity plans below time too.
CANDIDATES = [MECHANISM, jaxacct.MatrixMechanism(MECHANISM.scheme, MECHANISM.matrix, 1.3),
              jaxacct.MatrixMechanism(MECHANISM.scheme, MECHANISM.matrix, 40.0)]


def _verify(tmp_path, ledger):
  """A verification charging ``ledger``; a path is opened anew (as another call would)."""
  if isinstance(ledger, pathlib.Path):
    ledger = ledger_lib.FileLedger(ledger)
  return jaxacct.verify(jax.random.key(2), CANDIDATES, epsilon=1.0, delta=0.05,
                        monte_carlo=jaxacct.MonteCarloOptions(num_samples=3000),
                        run=jaxacct.RunOptions(blocks_per_call=4, ledger=ledger,
                                               checkpoint=tmp_path / 'checkpoint'))


def test_a_checkpoint_that_recorded_a_charge_refuses_a_ledger_that_lacks_it(tmp_path):
  ledger_path = tmp_path / 'ledger.json'
  first = _verify(tmp_path, ledger_path)
  assert first.charge['ledger'] == str(ledger_path.resolve())
  saved = json.loads((tmp_path / 'checkpoint' / 'checkpoint.json').read_text())['body']
  assert saved['charge'] == first.charge
  # The same run with the same ledger: returned from the checkpoint, not a new attempt.
  assert _verify(tmp_path, ledger_path).guarantee.attempts == 1
  with pytest.raises(ledger_lib.LedgerError, match='this run uses ledger'):
    _verify(tmp_path, tmp_path / 'other-ledger.json')
  with pytest.raises(ledger_lib.LedgerError, match='in-memory ledger'):
    _verify(tmp_path, ledger_lib.VerificationLedger())
  with pytest.raises(ledger_lib.LedgerError, match='user-state'):  # None: the user's ledger
    _verify(tmp_path, None)
  ledger_path.unlink()  # a deleted ledger would forget the attempt
  with pytest.raises(ledger_lib.LedgerError, match='no longer has it'):
    _verify(tmp_path, ledger_path)


def _edit_checkpoint(path, edit):
  """Applies ``edit`` to the checkpoint's body and rewrites it with a valid checksum."""
  from jaxacct import _files
  body = json.loads(path.read_text())['body']
  edit(body)
  _files.write_checked_json(path, body, keyed=True)


@pytest.mark.parametrize('edit, field', [
    (lambda b: b['current']['stream'].update(block=10**6), 'outside this run'),
    (lambda b: b['current']['stream'].update(block=-1), 'stream.block must be an integer'),
    (lambda b: b['current']['stream'].update(direction=5), 'stream.direction'),
    (lambda b: b['current']['stream'].pop('totals'), 'stream.totals is missing'),
    (lambda b: b['current']['stream']['totals']['sums'].update(add=[[1.0]]), 'totals.sums.add'),
    (lambda b: b['current']['stream']['totals']['squares'].update(remove=[['x'] * 3]),
     'totals.squares.remove'),
    (lambda b: b['current'].update(stream='garbage'), 'stream must be a mapping'),
    (lambda b: b.update(current=[1, 2]), 'current has the wrong type'),
    (lambda b: b.pop('completed'), 'completed is missing'),
    (lambda b: b.update(charge={'run': 3}), 'charge must hold'),
], ids=['block-out-of-range', 'negative-block', 'direction', 'no-totals', 'shape', 'not-numbers',
        'garbage-stream', 'current-type', 'no-completed', 'charge'])
def test_structural_edits_of_a_checkpoint_are_refused_naming_the_field(tmp_path, edit, field):
  with pytest.raises(Stop):  # 9 blocks per direction, two per call: stop mid-"remove"
    jaxacct.estimate_delta(jax.random.key(3), MECHANISM, EPSILONS, 9000,
                           run=jaxacct.RunOptions(
                               checkpoint=tmp_path, progress=_stop_after(2), blocks_per_call=2,
                               checkpoint_interval=1e-9))
  _edit_checkpoint(tmp_path / 'checkpoint.json', edit)
  error = checkpoint_lib.CheckpointError if field != 'outside this run' else ValueError
  with pytest.raises(error, match=field):
    jaxacct.estimate_delta(jax.random.key(3), MECHANISM, EPSILONS, 9000,
                           run=jaxacct.RunOptions(checkpoint=tmp_path, blocks_per_call=2))


def test_a_failed_write_names_the_path_and_leaves_no_temporary_file(tmp_path):
  import errno
  from jaxacct import _files
  def full_disk(handle):
    handle.write(b'partial')
    raise OSError(errno.ENOSPC, 'No space left on device')
  target = tmp_path / 'calibration.json'
  target.write_text('old')
  with pytest.raises(OSError, match=f'cannot write .*{target.name}.*No space left'):
    _files.write_atomically(target, full_disk)
  assert target.read_text() == 'old' and sorted(p.name for p in tmp_path.iterdir()) == [
      'calibration.json']


def test_calibration_refuses_attempt_zero_before_any_sweep():
  def never(*args):
    raise AssertionError('computed before refusing')
  with pytest.raises(ValueError, match='attempt must be'):
    jaxacct.calibrate_noise_multiplier(MECHANISM.scheme, MECHANISM.matrix, epsilon=1.0, delta=1e-3,
                                       key=jax.random.key(0),
                                       monte_carlo=jaxacct.MonteCarloOptions(attempt=0),
                                       run=jaxacct.RunOptions(progress=never))


# ---- issue 29: the API refuses a run projected over max_seconds, only when asked ----

def _never(*args):
  raise AssertionError('computed before refusing')


@pytest.mark.parametrize('bad', [0, -1.0, float('nan'), float('inf'), 'soon'])
def test_bad_max_seconds_is_refused_by_name(bad):
  with pytest.raises((ValueError, TypeError), match='max_seconds'):
    jaxacct.estimate_delta(jax.random.key(3), MECHANISM, EPSILONS, 9000,
                           run=jaxacct.RunOptions(max_seconds=bad, progress=_never))


def test_estimate_over_max_seconds_is_refused_before_any_sample(tmp_path):
  from jaxacct.montecarlo.evr import plan
  # 10¹¹ samples cannot run in a minute on any machine (block timing ≥ nanoseconds/sample).
  with pytest.raises(plan.OverBudgetError, match=r'estimate of 100,000,000,000 samples .* '
                                                 r'over max_seconds = 60: pass a larger'):
    jaxacct.estimate_delta(jax.random.key(3), MECHANISM, EPSILONS, 10**11,
                           run=jaxacct.RunOptions(
                               max_seconds=60, progress=_never, checkpoint=tmp_path))
  assert not (tmp_path / 'checkpoint.json').exists()  # nothing saved: nothing ran
  # Within the budget the answer is the one without a budget, bit for bit.
  budgeted = jaxacct.estimate_delta(jax.random.key(3), MECHANISM, EPSILONS, 9000,
                                    run=jaxacct.RunOptions(max_seconds=3600))
  plain = jaxacct.estimate_delta(jax.random.key(3), MECHANISM, EPSILONS, 9000)
  for d in ('remove', 'add'):
    assert budgeted.delta_hat[d].tolist() == plain.delta_hat[d].tolist()


def test_verification_over_max_seconds_is_refused_before_the_ledger_is_charged(tmp_path):
  from jaxacct.montecarlo.evr import plan
  ledger_path = tmp_path / 'ledger.json'
  with pytest.raises(plan.OverBudgetError, match='verification of 2 candidates'):
    jaxacct.verify(jax.random.key(2), CANDIDATES, epsilon=1.0, delta=0.05,
                   monte_carlo=jaxacct.MonteCarloOptions(num_samples=10**11),
                   run=jaxacct.RunOptions(blocks_per_call=4, max_seconds=1.0,
                                          ledger=ledger_lib.FileLedger(ledger_path),
                                          progress=_never))
  # Nothing was charged: the same run with a feasible N is attempt 1.
  done = jaxacct.verify(jax.random.key(2), CANDIDATES, epsilon=1.0, delta=0.05,
                        monte_carlo=jaxacct.MonteCarloOptions(num_samples=3000),
                        run=jaxacct.RunOptions(blocks_per_call=4,
                                               ledger=ledger_lib.FileLedger(ledger_path),
                                               max_seconds=3600))
  assert done.guarantee.attempts == 1


def test_calibration_over_max_seconds_is_refused_before_any_sweep():
  from jaxacct.montecarlo.evr import plan
  with pytest.raises(plan.OverBudgetError, match=r'calibration \(.* verification .* over '
                                                 r'max_seconds = 1\b'):
    # The plan times the resume test's programs (16 and 2 σ, calls of 4 blocks), compiled once.
    jaxacct.calibrate_noise_multiplier(MECHANISM.scheme, MECHANISM.matrix, epsilon=1.0, delta=1e-3,
                                       key=jax.random.key(0),
                                       monte_carlo=jaxacct.MonteCarloOptions(
                                           num_samples=10**11, num_candidates=2),
                                       run=jaxacct.RunOptions(blocks_per_call=4, max_seconds=1,
                                                              progress=_never))


def _blocks_left_by_enumeration(state, num_samples, first_block, block_size, num_programs):
  """Oracle: list every (program, direction, block) accumulate visits, in its order, and count
  those at or after the state's position."""
  total = -(-num_samples // block_size)
  order = [(p, d, b) for p in range(num_programs) for d in range(2)
           for b in range(first_block, total)]
  if state.block is None:
    position = (state.program, state.direction, first_block)
  else:
    position = (state.program, state.direction, state.block)
  return sum(1 for visit in order if visit >= position)


@pytest.mark.parametrize('program, direction, block', [
    (0, 0, None), (0, 0, 3), (0, 1, None), (0, 1, 7), (1, 0, 5), (1, 2, None), (2, 0, None),
    (0, 0, 9)])
@pytest.mark.parametrize('num_samples, first_block', [(9000, 0), (9000, 2), (8192, 0)])
def test_blocks_remaining_counts_what_accumulate_still_visits(program, direction, block,
                                                             num_samples, first_block):
  from jaxacct.montecarlo.engine import stream
  state = stream.StreamState(stream.BlockSums.zeros(1, 1), program, direction, block)
  if block is not None and block < first_block:
    block = state.block = first_block
  expected = _blocks_left_by_enumeration(state, num_samples, first_block, 1024, 2)
  assert state.blocks_remaining(num_samples=num_samples, first_block=first_block,
                                block_size=1024, num_programs=2) == expected


# ---- issue 31: an undeclared retry is refused before any compute ----

def _ledger_holding_another_run(path, mechanism, epsilon, delta, seed=7):
  """A file ledger that recorded one run of the mechanism with another key."""
  from jaxacct.montecarlo.engine import keys as keys_lib
  from jaxacct.montecarlo.evr import verification
  ledger = ledger_lib.FileLedger(path)
  n, base = jaxacct.montecarlo.evr.bounds.resolve_sample_size(delta, None, None)
  run = verification._run_identity(keys_lib.key_words(jax.random.key(seed)), (1.0, 2.0), n,
                                   base, True, 'float64', epsilon, delta)
  ledger.charge(mechanism, ledger_lib.RunRecord(run=run, epsilon=epsilon, delta=delta,
                                                num_samples=n, base_delta=base,
                                                overall_delta=1.0), 1, lambda charge: delta)
  return ledger


def test_an_undeclared_retry_is_refused_before_any_sweep_and_a_declared_one_is_not(tmp_path):
  _ledger_holding_another_run(tmp_path / 'ledger.json', MECHANISM, 1.0, 1e-3)
  with pytest.raises(ledger_lib.UndeclaredRetryError, match='attempt=2') as refusal:
    jaxacct.calibrate_noise_multiplier(MECHANISM.scheme, MECHANISM.matrix, epsilon=1.0, delta=1e-3,
                                       key=jax.random.key(0),
                                       run=jaxacct.RunOptions(
                                           progress=_never,
                                           ledger=ledger_lib.FileLedger(tmp_path / 'ledger.json')))
  assert refusal.value.required_attempt == 2 and isinstance(refusal.value, ValueError)
  # The same key as the recorded run could be its replay: let through to the full check.
  from jaxacct.montecarlo.evr import verification
  ledger = ledger_lib.FileLedger(tmp_path / 'ledger.json')
  n, base = jaxacct.montecarlo.evr.bounds.resolve_sample_size(1e-3, None, None)
  from jaxacct.montecarlo.engine import keys as keys_lib
  check = dict(epsilon=1.0, delta=1e-3, num_samples=n, base_delta=base, shared_draws=True)
  verification.check_retry(ledger, MECHANISM, key_data=keys_lib.key_words(jax.random.key(7)),
                           precision='float64', attempt=1, **check)
  verification.check_retry(ledger, MECHANISM, key_data=keys_lib.key_words(jax.random.key(0)),
                           precision=None, attempt=2, **check)  # declared
  with pytest.raises(ledger_lib.UndeclaredRetryError):  # another precision is another run
    verification.check_retry(ledger, MECHANISM, key_data=keys_lib.key_words(jax.random.key(7)),
                             precision='float32', attempt=1, **check)
  with pytest.raises(ledger_lib.UndeclaredRetryError):  # so is another target
    verification.check_retry(ledger, MECHANISM, key_data=keys_lib.key_words(jax.random.key(7)),
                             precision='float64', attempt=1,
                             **{**check, 'epsilon': 1.0000000001})


@pytest.mark.parametrize('guess, sweeps', [(0.05, 3), (1.8, 2), (40.0, 3)],
                         ids=['guess-far-below', 'guess-near', 'guess-far-above'])
def test_the_plan_projects_a_third_sweep_when_the_first_cannot_bracket(guess, sweeps):
  """Issue 31 item 3: one pilot call of the sweep program on the first coarse grid (16 σ
  around the guess) tells whether the search must move the grid before its fine sweep."""
  import numpy as np
  from jaxacct.montecarlo.engine import kernels, sampling
  from jaxacct.montecarlo.evr import plan
  from jaxacct.montecarlo.engine.sharding import SampleMesh
  # δ̂(ε = 1) of this mechanism crosses δ_b = 0.05 near σ = 1.8 (max over directions, 2·10⁴
  # samples: 0.106 at σ = 1.5, 0.037 at 2.0): a grid [0.68, 1.41] × 1.8 brackets it, one
  # around 0.05 is far below it (none passes), one around 40 far above (all pass).
  kernel = kernels.kernel_for(MECHANISM, np.dtype('float64'))
  block = sampling.default_block_size(kernel.iterations)
  got = plan.estimation_sweeps(MECHANISM, kernel, SampleMesh.over(jax.devices()[:1]), block, 4,
                               epsilon=1.0, base_delta=0.05, guess=guess, sigma_up=1e3)
  assert got == sweeps
