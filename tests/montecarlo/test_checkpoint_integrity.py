"""Saved state that cannot be edited into a wrong number (issue 42 item 3).

A fault campaign moved a checkpoint's ``current.stream.block`` forward with its SHA-256
recomputed, and a calibration skipped verification blocks yet released σ as verified with
the full N. Here each of the campaign's edits is refused, naming the file and the field:
edits signed with the right secret by the sample counts (position ↔ counts ↔ layout), edits
without it by the MAC. A kill and resume still gives the uninterrupted run's bits.

The runs are the estimate of tests/montecarlo/test_checkpoint_and_ledger.py (9000 samples,
9 blocks of 1024 per direction, calls of two blocks): one program, compiled once. The secret
of each test lies beside its own ledger (tests/conftest.py moves ``JAXACCT_LEDGER`` per test).
"""

import json
import os
import pathlib
import threading

import jax
import numpy as np
import pytest

import jaxacct
from jaxacct import _files, _secret
from jaxacct.montecarlo.evr import checkpoint as checkpoint_lib
from jaxacct.montecarlo.engine import stream

from test_checkpoint_and_ledger import CANDIDATES, EPSILONS, MECHANISM, Stop, _stop_after

NUM_SAMPLES, BLOCK = 9000, 1024  # 9 blocks per direction, the last holding 808 samples


@pytest.fixture(autouse=True)
def _secret_beside_the_ledger(monkeypatch):
  """Each test's secret is the default one, beside its own ledger, whatever the caller's
  environment names."""
  monkeypatch.delenv(_secret.ENVIRONMENT_VARIABLE, raising=False)


def _never(*args):
  raise AssertionError('computed before refusing')


def _estimate(folder=None, progress=None):
  return jaxacct.estimate_delta(jax.random.key(3), MECHANISM, EPSILONS, NUM_SAMPLES,
                                run=jaxacct.RunOptions(
                                    checkpoint=folder, progress=progress, blocks_per_call=2,
                                    checkpoint_interval=1e-9))


def _document(folder: pathlib.Path) -> dict:
  return json.loads((folder / 'checkpoint.json').read_text())


@pytest.fixture(scope='module')
def saved(tmp_path_factory):
  """The uninterrupted estimate; the checkpoint document of the run killed after 7 calls
  (the "add" direction at block 4) and of its resumed, finished run; the secret that signed
  them (the module's own, by ``JAXACCT_SECRET``)."""
  folder = tmp_path_factory.mktemp('saved')
  with pytest.MonkeyPatch.context() as patch:
    patch.setenv(_secret.ENVIRONMENT_VARIABLE, str(folder / 'secret'))
    reference = _estimate()
    with pytest.raises(Stop):  # remove: 5 calls (2+2+2+2+1 blocks); add: 2 calls
      _estimate(folder / 'run', progress=_stop_after(7))
    stopped = _document(folder / 'run')
    resumed = _estimate(folder / 'run')
    finished = _document(folder / 'run')
    secret = (folder / 'secret').read_bytes()
  return dict(reference=reference, stopped=stopped, resumed=resumed, finished=finished,
              secret=secret)


def _install(tmp_path, saved, document='stopped') -> pathlib.Path:
  """This test's copy of a saved checkpoint (in tmp_path/run) and of the secret that signed
  it (beside this test's ledger, where ``_secret.secret_path()`` finds it); the checkpoint."""
  secret = _secret.secret_path()
  assert secret == tmp_path / 'user-state' / 'secret'
  secret.parent.mkdir(parents=True, exist_ok=True)
  handle = os.open(secret, os.O_WRONLY | os.O_CREAT | os.O_EXCL, 0o600)
  os.write(handle, saved['secret'])
  os.close(handle)
  path = tmp_path / 'run' / 'checkpoint.json'
  path.parent.mkdir()
  path.write_text(json.dumps(saved[document]))
  return path


def _resign(path: pathlib.Path, edit) -> None:
  """Applies ``edit`` to the body and rewrites it with its SHA-256 and a MAC under this
  user's secret (what the secret's owner can do)."""
  body = json.loads(path.read_text())['body']
  edit(body)
  _files.write_checked_json(path, body, keyed=True)


def _refused(path: pathlib.Path, match: str):
  """The refusal of opening ``path``'s checkpoint (the CLI's early check) and of resuming
  from it, both before any compute, naming the file; the file is kept."""
  before = path.read_bytes()
  with pytest.raises(checkpoint_lib.CheckpointError, match=match) as opened:
    checkpoint_lib.check_file(path.parent)
  with pytest.raises(checkpoint_lib.CheckpointError, match=match) as resumed:
    _estimate(path.parent, progress=_never)
  for refusal in (opened, resumed):
    assert str(path) in str(refusal.value)
  assert path.read_bytes() == before
  return resumed.value


def test_a_killed_run_resumes_bitwise_and_counts_its_samples(saved):
  stream_state = saved['stopped']['body']['current']['stream']
  assert (stream_state['program'], stream_state['direction'], stream_state['block']) == (0, 1, 4)
  assert stream_state['totals']['samples'] == {'remove': [NUM_SAMPLES], 'add': [4 * BLOCK]}
  assert stream_state['totals']['blocks'] == {'remove': [9], 'add': [4]}
  assert stream_state['layout'] == dict(num_samples=NUM_SAMPLES, block_size=BLOCK,
                                        first_block=0, num_programs=1)
  final = saved['finished']['body']['completed']['estimate']['stream']
  assert final['totals']['samples'] == {'remove': [NUM_SAMPLES], 'add': [NUM_SAMPLES]}
  assert saved['stopped']['body']['format'] == 2 and 'mac' in saved['stopped']
  for d in ('remove', 'add'):
    assert saved['resumed'].delta_hat[d].tolist() == saved['reference'].delta_hat[d].tolist()
    assert (saved['resumed'].standard_error[d].tolist()
            == saved['reference'].standard_error[d].tolist())


def _set(*keys_and_value):
  """An edit setting body[k1][k2]…[kn] = value (a callable value maps the old one)."""
  *keys, value = keys_and_value
  def edit(body):
    table = body
    for key in keys[:-1]:
      table = table[key]
    table[keys[-1]] = value(table[keys[-1]]) if callable(value) else value
  return edit


CURRENT = ('current', 'stream')
SAMPLES = (*CURRENT, 'totals', 'samples')


@pytest.mark.parametrize('edit, match', [
    # The campaign's edit: the position moved forward, counts left: blocks 4-6 would be skipped.
    (_set(*CURRENT, 'block', 7), r'current\.stream\.totals\.samples\.add\[0\] = 4096 .* must '
                                 r'be 7168 .*current\.stream\.block'),
    (_set(*CURRENT, 'block', 2), r'current\.stream\.totals\.samples\.add\[0\] = 4096 .* must '
                                 r'be 2048'),
    (_set(*CURRENT, 'direction', 0), r'current\.stream\.totals\.samples\.remove\[0\] = 9000 '
                                     r'.* must be 4096'),
    (_set(*SAMPLES, 'remove', 0, lambda n: n - BLOCK),
     r'current\.stream\.totals\.samples\.remove\[0\] = 7976 .* must be 9000 \(a finished '
     r'direction holds all N = 9000'),
    (_set(*CURRENT, 'totals', 'blocks', 'add', 0, 5), r'current\.stream\.totals\.blocks\.add'
                                                     r'\[0\] = 5 .* must be 4'),
    # Counts moved with the block, but the last block holds 808 samples, not 1024.
    (lambda body: [_set(*CURRENT, 'block', 9)(body), _set(*SAMPLES, 'add', 0, 9 * BLOCK)(body),
                   _set(*CURRENT, 'totals', 'blocks', 'add', 0, 9)(body)],
     r'current\.stream\.totals\.samples\.add\[0\] = 9216 .* must be 9000'),
    (_set(*CURRENT, 'block', 10**9), r'current\.stream\.block = 1000000000 is outside this '
                                     r'run\'s blocks \[0, 9\]'),
    (_set(*CURRENT, 'layout', 'block_size', 512), r'current\.stream\.totals\.blocks\.remove'
                                                  r'\[0\] = 9 .* must be 18'),
    (_set(*SAMPLES, 'add', 0, 2.5), r'current\.stream\.totals\.samples\.add\[0\] must be an '
                                    r'integer'),
    (_set(*CURRENT, 'totals', 'samples', None), r'current\.stream\.totals\.samples is missing'),
    (_set(*CURRENT, 'layout', None), r'current\.stream\.layout must be a mapping'),
], ids=['block-forward', 'block-back', 'direction-back', 'counts', 'block-count',
        'counts-with-block', 'block-1e9', 'layout-block-size', 'count-not-integer',
        'no-counts', 'no-layout'])
def test_position_and_counts_that_disagree_are_refused_even_signed(tmp_path, saved, edit,
                                                                   match):
  """Signed with the right secret (SHA and MAC recomputed), still refused on opening."""
  path = _install(tmp_path, saved)
  _resign(path, edit)
  _refused(path, match)


def test_a_verification_moved_forward_is_refused_before_compute(tmp_path):
  """The campaign's edit in a verification of two candidates (the program of
  test_checkpoint_and_ledger.py's verifications: calls of 4 blocks; 9 blocks per direction):
  stopped after its first call, its block moved forward and re-signed with the right secret,
  the resumed run is refused naming the field when it opens the checkpoint."""
  def run(progress=None):
    return jaxacct.verify(jax.random.key(2), CANDIDATES, epsilon=1.0, delta=0.05,
                          monte_carlo=jaxacct.MonteCarloOptions(num_samples=NUM_SAMPLES),
                          run=jaxacct.RunOptions(blocks_per_call=4, checkpoint=tmp_path,
                                                 checkpoint_interval=1e-9, progress=progress))
  with pytest.raises(Stop):
    run(_stop_after(1))
  path = tmp_path / 'checkpoint.json'
  stopped = json.loads(path.read_text())['body']['current']
  assert stopped['phase'] == 'verification' and stopped['stream']['block'] == 4
  assert stopped['stream']['totals']['samples'] == {'remove': [4096, 4096], 'add': [0, 0]}
  _resign(path, _set(*CURRENT, 'block', 8))
  with pytest.raises(checkpoint_lib.CheckpointError,
                     match=r'current\.stream\.totals\.samples\.remove\[0\] = 4096 .* must be '
                           r'8192 .*current\.stream\.block'):
    run(_never)


def test_edits_without_the_secret_are_refused_by_the_mac(tmp_path, saved):
  """Halved sums with a recomputed SHA-256: without a MAC, with the old one, with another
  user's secret."""
  path = _install(tmp_path, saved)
  document = json.loads(path.read_text())
  body = document['body']
  for table in ('sums', 'squares'):
    for d in ('remove', 'add'):
      body['current']['stream']['totals'][table][d] = [
          [v / 2 for v in row] for row in body['current']['stream']['totals'][table][d]]
  _files.write_checked_json(path, body)  # a valid SHA-256, no MAC
  _refused(path, r'has no MAC \(edited, or written with another user\'s secret')
  path.write_text(json.dumps({'body': body, 'sha256': _files._digest(body),
                              'mac': document['mac']}))  # the old MAC
  _refused(path, r'fails its MAC check: edited, or written with another user\'s secret')
  path.write_text(json.dumps({'body': body, 'sha256': _files._digest(body),
                              'mac': _files.mac(body, bytes(32))}))  # another secret
  _refused(path, r'fails its MAC check')
  # Any field is covered: the fingerprint, the finished phases, the charge.
  for edit in (_set('fingerprint', 'num_samples', 9001), _set('completed', 'x', {}),
               _set('charge', {'ledger': None, 'guarantee': 'g', 'run': 'r'})):
    body = json.loads(json.dumps(saved['stopped']['body']))
    edit(body)
    path.write_text(json.dumps({'body': body, 'sha256': _files._digest(body),
                                'mac': document['mac']}))
    _refused(path, 'fails its MAC check')


def test_a_finished_phase_short_of_n_is_refused(tmp_path, saved):
  path = _install(tmp_path, saved, 'finished')
  phase = ('completed', 'estimate', 'stream')
  _resign(path, _set(*phase, 'totals', 'samples', 'add', 0, NUM_SAMPLES - BLOCK))
  _refused(path, r'completed\.estimate\.stream\.totals\.samples\.add\[0\] = 7976 .* must be '
                 r'9000 \(a finished direction holds all N = 9000 samples\)')
  # A "finished" phase whose position and counts were moved back together (consistent):
  # refused as not final.
  path.write_text(json.dumps(saved['finished']))
  _resign(path, lambda body: [
      _set(*phase, 'program', 0)(body), _set(*phase, 'direction', 1)(body),
      _set(*phase, 'block', 8)(body), _set(*phase, 'totals', 'samples', 'add', 0, 8 * BLOCK)(body),
      _set(*phase, 'totals', 'blocks', 'add', 0, 8)(body)])
  _refused(path, r'completed\.estimate\.stream\.program = 0 .*a finished phase ends at '
                 r'program 1')
  # Untouched, it is the finished run: returned without computing.
  path.write_text(json.dumps(saved['finished']))
  again = _estimate(path.parent, progress=_never)
  assert again.delta_hat['add'].tolist() == saved['reference'].delta_hat['add'].tolist()


def test_a_consistent_layout_of_another_run_is_refused_before_compute(tmp_path, saved):
  """A forged but self-consistent state (N = 10240 with counts to match), signed with the
  secret, passes the opening check; the run that resumes it refuses it before any compute,
  naming the file and the field."""
  path = _install(tmp_path, saved)
  _resign(path, lambda body: [
      _set(*CURRENT, 'layout', 'num_samples', 10 * BLOCK)(body),
      _set(*SAMPLES, 'remove', 0, 10 * BLOCK)(body),
      _set(*CURRENT, 'totals', 'blocks', 'remove', 0, 10)(body)])
  checkpoint_lib.check_file(path.parent)  # consistent in itself
  with pytest.raises(checkpoint_lib.CheckpointError,
                     match=r'current\.stream\.layout\.num_samples is 10240, this run has '
                           r'9000') as refusal:
    _estimate(path.parent, progress=_never)
  assert str(path) in str(refusal.value)
  # The projection of a max_seconds run reads the same layout: refused before its probe.
  with pytest.raises(checkpoint_lib.CheckpointError, match='layout.num_samples is 10240'):
    jaxacct.estimate_delta(jax.random.key(3), MECHANISM, EPSILONS, NUM_SAMPLES,
                           run=jaxacct.RunOptions(
                               checkpoint=path.parent, progress=_never, blocks_per_call=2,
                               max_seconds=3600))


def test_a_checkpoint_without_its_secret_is_refused_and_says_what_to_do(tmp_path, saved,
                                                                       monkeypatch):
  path = _install(tmp_path, saved)
  elsewhere = tmp_path / 'other-machine' / 'secret'
  monkeypatch.setenv(_secret.ENVIRONMENT_VARIABLE, str(elsewhere))
  refusal = _refused(path, r'signed with a secret this user does not have: .*other-machine/'
                           r'secret\' does not exist.*copy the writer\'s secret file to .*'
                           r'other-machine/secret\' \(mode 600\), or name it with '
                           r'JAXACCT_SECRET')
  assert isinstance(refusal, ValueError) and not elsewhere.exists()  # never re-signed
  # The secret copied over: the run resumes and gives the uninterrupted run's bits.
  elsewhere.parent.mkdir()
  elsewhere.write_bytes(saved['secret'])
  elsewhere.chmod(0o600)
  resumed = _estimate(path.parent)
  assert resumed.delta_hat['add'].tolist() == saved['reference'].delta_hat['add'].tolist()


def test_a_secret_readable_by_others_or_of_the_wrong_size_is_refused(tmp_path, saved):
  path = _install(tmp_path, saved)
  secret = _secret.secret_path()
  secret.chmod(0o640)
  _refused(path, r'cannot be checked: the secret file .*user-state/secret\' has mode 0640: it '
                 r'must be readable and writable by its owner only.*chmod 600')
  with pytest.raises(checkpoint_lib.CheckpointError, match='cannot be signed: .*mode 0640'):
    _estimate(tmp_path / 'new-run', progress=_never)  # a new run, before any compute
  with pytest.raises(_secret.SecretError, match='mode 0640'):
    _files.write_checked_json(tmp_path / 'x.json', {}, keyed=True)
  secret.chmod(0o600)
  secret.write_bytes(saved['secret'][:16])
  _refused(path, r'secret\' holds 16 bytes, not 32')
  secret.write_bytes(saved['secret'] + b'\n')
  _refused(path, rf'secret\' holds over 32 bytes')


def test_the_secret_is_created_once_per_user_beside_the_ledger(tmp_path, monkeypatch):
  monkeypatch.delenv(_secret.ENVIRONMENT_VARIABLE, raising=False)
  ledger = tmp_path / 'state' / 'ledger.json'
  monkeypatch.setenv('JAXACCT_LEDGER', str(ledger))
  assert _secret.secret_path() == ledger.parent / 'secret'
  keys = []
  threads = [threading.Thread(target=lambda: keys.append(_secret.secret_key()))
             for _ in range(4)]
  for thread in threads:
    thread.start()
  for thread in threads:
    thread.join()
  assert len(keys) == 4 and len(set(keys)) == 1 and len(keys[0]) == 32  # one secret won
  assert (ledger.parent / 'secret').stat().st_mode & 0o777 == 0o600
  assert (ledger.parent / 'secret').read_bytes() == keys[0]
  # Without JAXACCT_LEDGER: the XDG state folder; JAXACCT_SECRET names the file outright.
  monkeypatch.delenv('JAXACCT_LEDGER')
  monkeypatch.setenv('XDG_STATE_HOME', str(tmp_path / 'xdg'))
  assert _secret.secret_path() == tmp_path / 'xdg' / 'jaxacct' / 'secret'
  monkeypatch.setenv(_secret.ENVIRONMENT_VARIABLE, str(tmp_path / 'named'))
  assert _secret.secret_path() == tmp_path / 'named'
  with pytest.raises(_secret.SecretError, match='does not exist'):
    _secret.secret_key(create=False)
  # A keyed document reads unkeyed too (its MAC unchecked), and keyed with its secret only.
  document = tmp_path / 'document.json'
  _files.write_checked_json(document, {'a': [1.5, None]}, keyed=True)
  assert _files.read_checked_json(document, 'document', ValueError) == {'a': [1.5, None]}
  assert _files.read_checked_json(document, 'document', ValueError,
                                  keyed=True) == {'a': [1.5, None]}
  (tmp_path / 'named').unlink()
  _secret.secret_key()  # a new secret: the document is another user's now
  with pytest.raises(ValueError, match='fails its MAC check'):
    _files.read_checked_json(document, 'document', ValueError, keyed=True)


def test_a_format_1_checkpoint_is_refused_with_what_to_do(tmp_path, saved):
  path = _install(tmp_path, saved)
  body = json.loads(json.dumps(saved['stopped']['body']))
  body['format'] = 1
  _files.write_checked_json(path, body)  # as version 1 wrote it: no MAC
  _refused(path, r'has format 1, written by an earlier jaxacct version .*finish that run with '
                 r'the version that wrote it, or remove the checkpoint')


def _visits(layout: stream.Layout):
  """Oracle: every (program, direction, block) ``accumulate`` visits, in its order."""
  return [(p, d, b) for p in range(layout.num_programs) for d in range(2)
          for b in range(layout.first_block, layout.total_blocks)]


@pytest.mark.parametrize('layout, candidates', [
    (stream.Layout(NUM_SAMPLES, BLOCK), 2), (stream.Layout(8192, BLOCK, 2, 3), 3),
    (stream.Layout(1000, 300, 1, 1), 1)], ids=['shared', 'independent-extended', 'masked'])
def test_expected_counts_are_what_accumulate_adds_block_by_block(layout, candidates):
  """At every position a run passes through (after each block, then at each direction's and
  program's end), the counts ``check`` expects are those of adding each block visited so
  far; a state one block off is refused."""
  size, n = layout.block_size, layout.num_samples
  samples = np.full((2, candidates), layout.first_block * size)
  blocks = np.full((2, candidates), layout.first_block)
  per_program = candidates // layout.num_programs
  positions = []
  for p, d, b in _visits(layout):
    owned = slice(p * per_program, (p + 1) * per_program)
    samples[d, owned] += min(size, n - b * size)
    blocks[d, owned] += 1
    positions.append(((p, d, b + 1), samples.copy(), blocks.copy()))
    if b + 1 == layout.total_blocks:  # the direction's end: accumulate's next position
      after = (p + 1, 0, None) if d == 1 else (p, d + 1, None)
      positions.append((after, samples.copy(), blocks.copy()))
  for (p, d, b), want_samples, want_blocks in positions:
    totals = stream.BlockSums.zeros(candidates, 1)
    totals.samples = {k: want_samples[i].copy() for i, k in enumerate(('remove', 'add'))}
    totals.blocks = {k: want_blocks[i].copy() for i, k in enumerate(('remove', 'add'))}
    totals.sums = {k: want_samples[i][:, None] * 0.5 for i, k in enumerate(('remove', 'add'))}
    state = stream.StreamState(totals, p, d, b, layout)
    state.check()
    restored = stream.StreamState.from_dict(json.loads(json.dumps(state.to_dict())))
    assert restored.to_dict() == state.to_dict()
    if b is not None and b > layout.first_block:
      state.block = b - 1
      with pytest.raises(ValueError, match=r'stream\.totals\.samples'):
        state.check()
  assert np.all(samples == n) and np.all(blocks == layout.total_blocks)
