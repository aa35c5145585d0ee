"""Issue 43 item 5: one report folder per command under the config's report root
(``<root>/estimate``, ``calibrate``, ``calibrate-estimate``, ``plan``, ``train``;
``cli._folders.output_dir``), so no command overwrites another's files and a rerun replaces
only its own report; a refused or failed run leaves no folder behind (``check_writable``
probes and removes what it made, ``leaving_no_new_empty_folders`` clears what a run made
before it stopped).

The commands run in-process on the quickstart config with its deterministic accountant
(``unamplified_gaussian``: closed form, about a second) where the layout, not the accounting, is
under test.
"""

import json
import pathlib

import pytest

import jaxacct
from jaxacct import cli
from jaxacct import report
from jaxacct.cli import _folders

CONFIGS = pathlib.Path(__file__).resolve().parents[1] / 'configs'
QUICK = str(CONFIGS / 'quickstart.yaml')
DETERMINISTIC = ['--set', 'accountant=unamplified_gaussian']


def _files(root: pathlib.Path) -> list[str]:
  """Every path under ``root``, relative and sorted (folders too)."""
  return sorted(str(path.relative_to(root)) for path in root.rglob('*'))


def _run(capsys, *argv) -> tuple[int, str]:
  code = cli.main(list(argv))
  return code, capsys.readouterr().out


def test_estimate_then_calibrate_keep_both_reports_each_in_its_folder(tmp_path, capsys):
  root = tmp_path / 'out'
  code, printed = _run(capsys, 'estimate', QUICK, '--out', str(root), *DETERMINISTIC)
  assert code == 0 and printed.splitlines()[-1] == f'report: {root / "estimate"}'
  estimate = (root / 'estimate' / 'estimate.json').read_text()
  code, printed = _run(capsys, 'calibrate', QUICK, '--out', str(root), *DETERMINISTIC)
  assert code == 0 and printed.splitlines()[-1] == f'report: {root / "calibrate"}'
  assert _files(root) == ['calibrate', 'calibrate/calibration.json', 'calibrate/delta.png',
                          'estimate', 'estimate/delta.png', 'estimate/estimate.json']
  assert (root / 'estimate' / 'estimate.json').read_text() == estimate  # untouched
  for path in (root / 'estimate' / 'estimate.json', root / 'calibrate' / 'calibration.json'):
    assert json.loads(path.read_text())['report_schema'] == report.REPORT_SCHEMA == 3


def test_without_out_the_root_is_the_config_name_or_report_output_dir(tmp_path, capsys):
  # conftest runs each test in tmp_path: the default root is reports/<config name> there.
  code, printed = _run(capsys, 'estimate', QUICK, '--json', *DETERMINISTIC)
  assert code == 0 and json.loads(printed)['report'] == str(
      pathlib.Path('reports') / 'quickstart' / 'estimate')
  assert (tmp_path / 'reports' / 'quickstart' / 'estimate' / 'estimate.json').is_file()
  configured = tmp_path / 'configured'
  code, printed = _run(capsys, 'estimate', QUICK, '--json', *DETERMINISTIC, '--set',
                       f'report.output_dir={configured}')
  assert code == 0 and json.loads(printed)['report'] == str(configured / 'estimate')
  assert _files(configured) == ['estimate', 'estimate/delta.png', 'estimate/estimate.json']


def test_a_rerun_replaces_its_own_report_only(tmp_path, capsys):
  """A Monte Carlo estimate after a deterministic one: its delta_hat.png replaces the
  earlier delta.png in estimate/ (the folder holds one report), and calibrate/ and a file of
  the user's in estimate/ are left as they were."""
  root = tmp_path / 'out'
  assert _run(capsys, 'calibrate', QUICK, '--out', str(root), *DETERMINISTIC)[0] == 0
  assert _run(capsys, 'estimate', QUICK, '--out', str(root), *DETERMINISTIC)[0] == 0
  (root / 'estimate' / 'notes.txt').write_text('mine')
  calibration = (root / 'calibrate' / 'calibration.json').read_bytes()
  code, printed = _run(capsys, 'estimate', QUICK, '--out', str(root), '--json', '--set',
                       'monte_carlo.num_samples=2000')
  assert code == 0 and json.loads(printed)['method'] == 'estimate'
  assert _files(root / 'estimate') == ['delta_hat.png', 'estimate.json', 'notes.txt']
  assert (root / 'calibrate' / 'calibration.json').read_bytes() == calibration
  assert _files(root / 'calibrate') == ['calibration.json', 'delta.png']


@pytest.mark.parametrize('argv', [
    ['estimate', QUICK, '--set', 'scheme.min_sep=0'],  # a bad config value
    # refused from its projection inside the run, after the output checks
    ['estimate', QUICK, '--set', 'monte_carlo.num_samples=1e12'],
    ['estimate', QUICK, '--set', 'accelerator_scale=true'],  # refused after the output checks
    ['calibrate', QUICK, '--set', 'calibration.fallback=nope'],
    ['train', str(CONFIGS / 'digits_dpsgd.yaml'), '--set', 'scheme.dataset_size=1000'],
], ids=['bad-set', 'over-budget', 'accelerator-scale', 'bad-fallback', 'train-dataset-size'])
def test_a_refused_run_leaves_no_folder(argv, tmp_path, capsys):
  out, checkpoint = tmp_path / 'new' / 'out', tmp_path / 'new' / 'checkpoint'
  before = _files(tmp_path)
  assert cli.main(argv + ['--out', str(out), '--checkpoint', str(checkpoint)]) == 2
  assert capsys.readouterr().err.splitlines()[-1].startswith('jaxacct: error: ')
  assert not (tmp_path / 'new').exists()
  # The user's state (ledger, secret) lives apart, under tmp_path/user-state: nothing else.
  assert [p for p in _files(tmp_path) if p not in before and not p.startswith('user-state')] == []


def test_a_run_that_fails_after_making_its_checkpoint_folder_removes_it(tmp_path, capsys,
                                                                       monkeypatch):
  """The library makes the checkpoint folder when the run opens it: a run stopped after that
  (here an estimate refused from inside) removes it again while it is empty, and keeps a
  folder that holds anything (a saved checkpoint to resume from)."""
  from jaxacct.cli import estimate as estimate_command
  made = []

  def opens_then_stops(*args, run, **kwargs):
    folder = pathlib.Path(run.checkpoint)
    folder.mkdir(parents=True)
    (folder / 'part').mkdir()  # a second run's subfolder (calibrate's report-curve)
    made.append(folder)
    if len(made) == 2:
      (folder / 'checkpoint.json').write_text('{}')
    raise jaxacct.InputError('stopped')

  monkeypatch.setattr(estimate_command, 'estimate_delta', opens_then_stops)
  checkpoint = tmp_path / 'a' / 'checkpoint'
  out = tmp_path / 'out'
  argv = ['estimate', QUICK, '--out', str(out), '--checkpoint', str(checkpoint)]
  assert cli.main(argv) == 2
  assert made == [checkpoint] and not (tmp_path / 'a').exists() and not out.exists()
  assert cli.main(argv) == 2
  assert _files(tmp_path / 'a') == ['checkpoint', 'checkpoint/checkpoint.json']
  capsys.readouterr()


def test_new_empty_folders_are_removed_when_the_block_raises(tmp_path):
  existing = tmp_path / 'existing'
  (existing / 'old').mkdir(parents=True)
  fresh = tmp_path / 'fresh' / 'deep'
  with pytest.raises(RuntimeError):
    with _folders.leaving_no_new_empty_folders([existing, fresh]):
      (existing / 'new' / 'inner').mkdir(parents=True)  # new under an existing folder
      (existing / 'kept').mkdir()
      (existing / 'kept' / 'file').write_text('x')
      (fresh / 'a').mkdir(parents=True)
      raise RuntimeError('failed')
  assert _files(tmp_path) == ['existing', 'existing/kept', 'existing/kept/file', 'existing/old']
  with _folders.leaving_no_new_empty_folders([tmp_path / 'ok']):  # no failure: nothing removed
    (tmp_path / 'ok').mkdir()
  assert (tmp_path / 'ok').is_dir()


def test_the_write_probe_leaves_no_folder(tmp_path):
  target = tmp_path / 'a' / 'b' / 'c'
  _folders.check_writable(target, 'the report folder')
  assert not (tmp_path / 'a').exists()
  (tmp_path / 'file').write_text('x')
  with pytest.raises(jaxacct.InputError, match=r'the report folder .*file/sub \(under --out '):
    _folders.check_writable(tmp_path / 'file' / 'sub', 'the report folder',
                          given=f'under --out {tmp_path / "file"}')
  assert _files(tmp_path) == ['file']


@pytest.mark.parametrize('record, body', [
    (('calibrate', 'calibration.json'), lambda charge: {'charge': charge}),
    (('train', 'training.json'), lambda charge: {'calibration': {'charge': charge}}),
    (('calibration.json',), lambda charge: {'charge': charge}),  # report_schema 2's place
], ids=['calibrate', 'train', 'before-schema-3'])
def test_a_recorded_charge_is_checked_in_every_report_that_keeps_one(record, body, tmp_path,
                                                                    capsys):
  """A charge recorded by calibrate, by train, or where report_schema 2 kept it, must be in
  the ledger the run uses: checked before any compute, whichever command runs."""
  root = tmp_path / 'out'
  path = root.joinpath(*record)
  path.parent.mkdir(parents=True)
  charge = {'ledger': str(tmp_path / 'elsewhere.json'), 'guarantee': 'g', 'run': 'r'}
  path.write_text(json.dumps(body(charge)))
  assert cli.main(['calibrate', QUICK, '--out', str(root)]) == 2
  err = capsys.readouterr().err
  assert f"report '{path}' records a verification charged in ledger" in err
  assert 'capacity plan' not in err  # before the throughput probe


@pytest.mark.slow
def test_an_estimated_sigma_has_its_own_folder(tmp_path, capsys):
  """``calibrate --estimate-only`` writes ``calibrate-estimate/``, never into the verified
  calibration's ``calibrate/`` (the small b-min-sep config of tests/montecarlo/
  test_estimate_only.py)."""
  config = tmp_path / 'small.yaml'
  config.write_text(
      'scheme: {type: bminsep, iterations: 24, sampling_prob: 0.3, min_sep: 4, '
      'warm_start: true}\nstrategy: {c_col: [1.0, 0.5, 0.25]}\n'
      'calibration: {epsilon: 1.0, delta: 0.05, num_samples: 30000, estimation_samples: 2000, '
      'num_candidates: 2, grid_ratio: 1.05, seed: 0}\n')
  root = tmp_path / 'out'
  code, printed = _run(capsys, 'calibrate', str(config), '--estimate-only', '--out', str(root))
  assert code == 0 and printed.splitlines()[-1] == f'report: {root / "calibrate-estimate"}'
  assert _files(root) == ['calibrate-estimate', 'calibrate-estimate/calibration_estimate.json',
                          'calibrate-estimate/candidates_estimate.png',
                          'calibrate-estimate/delta_hat_estimate.png']
