"""The ``jaxacct`` command on the shipped configs (small overrides keep it fast)."""

import dataclasses
import importlib
import json
import shutil
import math
import pathlib

import jax
import numpy as np
import pytest
import yaml

import jaxacct
import jaxacct.montecarlo.evr.bounds
from jaxacct import cli
from jaxacct import config as config_lib

CONFIGS = pathlib.Path(__file__).resolve().parents[1] / 'configs'
REQUIRED = {'noise_multiplier', 'epsilon', 'delta', 'verified', 'method', 'num_samples', 'seed'}


@pytest.mark.slow
def test_estimate_json(tmp_path, capsys):
  code = cli.main(['estimate', str(CONFIGS / 'quickstart.yaml'), '--json', '--out', str(tmp_path),
                   '--set', 'monte_carlo.num_samples=3000'])
  assert code == 0
  result = json.loads(capsys.readouterr().out)
  assert REQUIRED <= result.keys()
  assert result['method'] == 'estimate' and result['verified'] is False
  assert result['num_samples'] == 3000 and result['seed'] == 0
  for direction in ('remove', 'add'):
    deltas = result['delta_hat'][direction]
    assert len(deltas) == 4 and all(0 <= d <= 1 for d in deltas)
    assert deltas == sorted(deltas, reverse=True)  # δ̂(ε) is non-increasing in ε
    assert len(result['standard_error'][direction]) == 4
  folder = tmp_path / 'estimate'  # the command's own folder under --out (issue 43 item 5)
  assert (folder / 'estimate.json').is_file() and (folder / 'delta_hat.png').is_file()
  # Issue 31: δ = 1e-3 is below 3/N = 1e-3 of 3000 samples: no (ε, δ) is marked or reported.
  assert result['epsilon'] is None
  assert result['resolution']['needed_samples'] == 3001
  assert 'below the resolution 3/N' in result['resolution']['reason']


def test_an_estimate_resolves_only_what_its_samples_resolve():
  mech = jaxacct.MatrixMechanism(jaxacct.BMinSep(sampling_prob=0.25, iterations=4, min_sep=2),
                                 jaxacct.BandedToeplitz([1.0, 0.5]), 1.0)
  result = jaxacct.estimate_delta(jax.random.key(1), mech, [0.0, 0.5, 1.0, 2.0], 4096,
                                  monte_carlo=jaxacct.MonteCarloOptions(block_size=1024))
  error = np.maximum(result.standard_error['remove'], result.standard_error['add'])
  upper = result.delta_hat_max + 2 * error
  # Measured at this seed: δ̂(2) = 4.30e-3 with δ̂ + 2·s.e. = 5.68e-3, above 3/N = 7.3e-4.
  assert result.delta_hat_max[3] < 5e-3 < upper[3] and 3 / 4096 < 5e-3
  assert result.resolved_epsilon(float(upper[2]) * 1.0001).epsilon == 1.0
  assert result.resolved_epsilon(0.999).epsilon == 0.0
  # δ̂(2) < δ < its upper bound: not resolved; the samples that would resolve it.
  unresolved = result.resolved_epsilon(5e-3)
  expected = math.ceil(4096 * (2 * error[3] / (5e-3 - result.delta_hat_max[3]))**2) + 1
  assert unresolved.epsilon is None and unresolved.needed_samples == expected > 4096
  below = result.resolved_epsilon(1e-4)  # δ below 3/N = 7.3e-4
  assert below == (None, 30001, below.reason) and '3/N' in below.reason
  short = result.resolved_epsilon(4e-3)  # no ε of the grid has δ̂ < δ: the grid is short
  assert short.epsilon is None and short.needed_samples is None and 'ε grid' in short.reason


@pytest.mark.slow
def test_calibrate_json(tmp_path, capsys):
  code = cli.main(['calibrate', str(CONFIGS / 'quickstart.yaml'), '--json', '--out', str(tmp_path),
                   '--set', 'calibration.delta=0.02', '--set', 'calibration.epsilon=1.0'])
  assert code == 0
  result = json.loads(capsys.readouterr().out)
  assert REQUIRED <= result.keys()
  assert result['verified'] is True and result['method'] in ('verified_mc', 'fallback')
  assert result['delta'] <= 0.02 and result['epsilon'] == 1.0
  folder = tmp_path / 'calibrate'
  assert (folder / 'calibration.json').is_file() and (folder / 'candidates.png').is_file()


def test_an_absurd_estimate_is_refused_from_its_projection_before_compute(tmp_path, capsys):
  """Issue 29: 10¹² samples would run for months; the estimate times a block (the library's
  ``max_seconds``) and refuses it over --max-minutes in one line (with --force it would run)."""
  code = cli.main(['estimate', str(CONFIGS / 'quickstart.yaml'), '--out', str(tmp_path),
                   '--set', 'monte_carlo.num_samples=1000000000000'])
  err = capsys.readouterr().err
  assert code == 2 and ('the Monte Carlo estimate (monte_carlo.num_samples = 1,000,000,000,000, '
                        'float64) is projected to take') in err
  assert 'over the --max-minutes budget of 30 min: pass --force' in err
  assert err.count('jaxacct: error') == 1
  assert not (tmp_path / 'estimate').exists()  # refused: no report folder either


def test_a_full_disk_is_refused_before_compute(tmp_path, capsys, monkeypatch):
  """Issue 29: a report folder without room for the outputs is refused before any compute
  (a real tiny file system where one can be made; here the free space is simulated)."""
  import collections
  usage = collections.namedtuple('usage', 'total used free')
  monkeypatch.setattr(shutil, 'disk_usage', lambda path: usage(1 << 16, 0, 1 << 16))
  code = cli.main(['calibrate', str(CONFIGS / 'quickstart.yaml'), '--out', str(tmp_path / 'out')])
  err = capsys.readouterr().err
  out = tmp_path / 'out'
  assert code == 2 and (f'the report folder {out / "calibrate"} (under --out {out}): only 64 KiB '
                        'free') in err
  assert not out.exists()  # neither the probe nor the folders made to hold it are left behind


def _run_on_a_tiny_file_system(mount: pathlib.Path, size: str, *command):
  """Runs the CLI in a user and mount namespace with a ``size`` tmpfs at ``mount`` (skips
  where the kernel does not let an unprivileged user make one)."""
  import shutil
  import subprocess
  import sys
  if shutil.which('unshare') is None:
    pytest.skip('no unshare(1) to make a tiny file system')
  mount.mkdir()
  script = f'mount -t tmpfs -o size={size} tmpfs "$1" && shift && exec "$@"'
  done = subprocess.run(['unshare', '--user', '--map-root-user', '--mount', 'sh', '-c', script,
                         'sh', str(mount), sys.executable, '-m', 'jaxacct.cli', *command],
                        capture_output=True, text=True, timeout=300, check=False)
  if done.returncode != 0 and 'mount' in done.stderr and 'jaxacct' not in done.stderr:
    pytest.skip(f'cannot mount a tmpfs here: {done.stderr.strip()}')
  return done


@pytest.mark.parametrize('flag', ['--out', '--checkpoint'])
def test_a_real_tiny_file_system_is_refused_before_compute(tmp_path, flag):
  """Issue 29: on a real 64 KiB file system (a tmpfs) the report or checkpoint folder is
  refused before any compute, exit 2, one line naming the flag, the folder and the room."""
  tiny = tmp_path / 'tiny'
  others = ['--out', str(tmp_path / 'out')] if flag == '--checkpoint' else []
  done = _run_on_a_tiny_file_system(tiny, '64k', 'calibrate', str(CONFIGS / 'quickstart.yaml'),
                                    flag, str(tiny), *others)
  assert done.returncode == 2, done.stderr
  where = (f'the report folder {tiny / "calibrate"} (under --out {tiny})' if flag == '--out'
           else f'{flag} {tiny}')
  assert f'{where}: only 64 KiB free, the run needs about 4096 KiB' in done.stderr
  assert 'calibrating' not in done.stderr and done.stderr.count('\n') == 1


@pytest.mark.parametrize('override, message', [
    ('bogus=1', 'unknown key bogus; valid keys: scheme'),
    ('monte_carlo.sample_count=5', 'unknown key monte_carlo.sample_count; valid keys: num_samples'),
    ('scheme.min_sep=0', 'min_sep must be an integer >= 1'),
])
def test_bad_config_is_a_one_line_error(override, message, capsys):
  assert cli.main(['estimate', str(CONFIGS / 'quickstart.yaml'), '--set', override]) == 2
  err = capsys.readouterr().err.strip()
  assert '\n' not in err and message in err


def test_missing_file(capsys):
  assert cli.main(['estimate', 'does/not/exist.yaml']) == 2
  assert 'config file not found' in capsys.readouterr().err


@pytest.mark.parametrize('path', sorted(CONFIGS.glob('*.yaml')), ids=lambda p: p.name)
def test_every_shipped_config_is_valid(path):
  raw = config_lib.load(path)
  scheme = config_lib.scheme_from(raw)
  assert scheme.iterations >= 1
  assert yaml.safe_load(path.read_text())['calibration']['delta'] < 1


@pytest.mark.slow
@pytest.mark.parametrize('name', ['truncated_poisson_dpsgd.yaml', 'truncated_cyclic_poisson.yaml'])
def test_deterministic_accountant_from_the_cli(name, tmp_path, capsys):
  # accountant: auto picks the seed-001 PLD for truncated Poisson / cyclic Poisson.
  small = ['--set', 'scheme.iterations=40']
  assert cli.main(['estimate', str(CONFIGS / name), '--json', '--out', str(tmp_path)] + small) == 0
  result = json.loads(capsys.readouterr().out)
  assert REQUIRED <= result.keys()
  assert result['method'] == 'deterministic' and result['verified'] is True
  assert result['adjacency'] == 'zero_out' and result['accountant'] == 'pld'
  deltas = result['delta_of_epsilon']
  assert deltas == sorted(deltas, reverse=True) and 0 < deltas[0] < 1
  assert (tmp_path / 'estimate' / 'delta.png').is_file()
  if name != 'truncated_poisson_dpsgd.yaml':
    # The CLI's deterministic calibration is one code path for every accountant (the σ search
    # of each is tested in tests/deterministic): run once, on truncated Poisson (a PLD σ
    # search of ~15 probes, ~25 s here; the cyclic one costs more).
    return
  assert cli.main(['calibrate', str(CONFIGS / name), '--json', '--out', str(tmp_path)] + small) == 0
  calibrated = json.loads(capsys.readouterr().out)
  assert calibrated['method'] == 'deterministic' and calibrated['noise_multiplier'] > 0


@pytest.mark.slow
def test_truncated_bminsep_estimate_from_the_cli(tmp_path, capsys):
  code = cli.main(['estimate', str(CONFIGS / 'truncated_bminsep_small.yaml'), '--json', '--out',
                   str(tmp_path), '--set', 'monte_carlo.num_samples=2000', '--set',
                   'scheme.iterations=40'])
  assert code == 0
  result = json.loads(capsys.readouterr().out)
  assert result['method'] == 'estimate' and len(result['delta_hat']['add']) == 4


@pytest.mark.parametrize('override, message', [
    ('accountant=pld', 'accountant: pld: covers poisson and cyclic_poisson'),
    ('adjacency=replace_one', 'adjacency: replace_one: Monte Carlo accounting is for zero-out '
     'adjacency (equal to add/remove without truncation); the accountants that cover '
     'replace_one: pld'),
    ('accountant=magic', 'accountant must be one of auto, monte_carlo, pld'),
    ('scheme.truncated_batch_size=0', 'truncated_batch_size must be an integer >= 1, got 0'),
])
def test_bad_accountant_choices(override, message, capsys):
  assert cli.main(['estimate', str(CONFIGS / 'truncated_bminsep_small.yaml'), '--set',
                   override]) == 2
  assert message in capsys.readouterr().err


def test_truncation_refused_where_no_accountant_exists(capsys):
  assert cli.main(['estimate', str(CONFIGS / 'truncated_cyclic_poisson.yaml'), '--set',
                   'scheme.partition=independent']) == 2
  assert "needs partition='equal_split'" in capsys.readouterr().err
  assert cli.main(['estimate', str(CONFIGS / 'truncated_cyclic_poisson.yaml'), '--set',
                   'adjacency=add_remove']) == 2
  assert 'removing an example changes the dataset size' in capsys.readouterr().err
  assert cli.main(['estimate', str(CONFIGS / 'truncated_cyclic_poisson.yaml'), '--set',
                   'accountant=monte_carlo']) == 2
  assert 'no Monte Carlo accountant for truncated CyclicPoisson' in capsys.readouterr().err


def test_multi_attribution_scheme_from_a_config(tmp_path, capsys):
  config = tmp_path / 'multi.yaml'
  config.write_text(yaml.safe_dump({
      'scheme': {'type': 'multi_attribution', 'iterations': 24, 'sampling_prob': 0.05,
                 'min_sep': 4, 'max_examples_per_user': 2},
      'strategy': {'square_root_bands': 4, 'normalize': True},
      'noise_multiplier': 1.0, 'monte_carlo': {'num_samples': 2000, 'epsilons': [1.0, 2.0]},
      'calibration': {'epsilon': 2.0, 'delta': 1e-3}}))
  assert cli.main(['estimate', str(config), '--json', '--out', str(tmp_path)]) == 0
  result = json.loads(capsys.readouterr().out)
  assert result['method'] == 'estimate' and len(result['delta_hat']['remove']) == 2
  assert cli.main(['estimate', str(config), '--set', 'scheme.expected_batch_size=10']) == 2
  assert 'depends on the attribution graph' in capsys.readouterr().err


@pytest.mark.slow
def test_multi_attribution_config_on_a_synthetic_graph(tmp_path, capsys):
  code = cli.main(['estimate', str(CONFIGS / 'multi_attribution.yaml'), '--json', '--out',
                   str(tmp_path), '--set', 'monte_carlo.num_samples=2000', '--set',
                   'attribution.num_examples=3000', '--set', 'attribution.num_users=1200',
                   '--set', 'attribution.expected_batch_size=10'])
  assert code == 0
  captured = capsys.readouterr()
  result = json.loads(captured.out)
  assert result['method'] == 'estimate' and not result['conjectural']
  assert 0 < result['sampling_prob'] < 1 and 'kept' in captured.err


def _numpy_failure(*_):
  np.zeros(3).reshape(2, 2)  # a ValueError raised inside NumPy, not by a jaxacct check


def _library_bug(*_):
  return {}['missing']


@pytest.mark.parametrize('failure', [_numpy_failure, _library_bug])
def test_internal_errors_exit_1_with_traceback_behind_debug(monkeypatch, capsys, failure):
  from jaxacct.cli import estimate
  monkeypatch.setattr(estimate, 'COMMAND', dataclasses.replace(estimate.COMMAND, run=failure))
  config = str(CONFIGS / 'quickstart.yaml')
  assert cli.main(['estimate', config]) == 1
  err = capsys.readouterr().err
  assert 'internal error' in err and '--debug' in err and 'Traceback' not in err
  assert cli.main(['estimate', config, '--debug']) == 1
  err = capsys.readouterr().err
  assert 'Traceback' in err and failure.__name__ in err


def test_bad_input_is_told_apart_from_a_bug():
  import jaxacct
  with pytest.raises(jaxacct.InputError) as caught:  # also a ValueError, for callers' except
    jaxacct.Poisson(sampling_prob=2.0, iterations=3)
  assert isinstance(caught.value, ValueError) and cli.is_bad_input(caught.value)
  with pytest.raises(jaxacct.InputTypeError) as caught:
    jaxacct.Poisson(sampling_prob=0.5, iterations=3.5)
  assert isinstance(caught.value, TypeError) and cli.is_bad_input(caught.value)
  from jaxacct.deterministic import base as deterministic_base
  from jaxacct.montecarlo.evr import checkpoint, ledger, plan
  for error in (config_lib.ConfigError, checkpoint.CheckpointError, ledger.LedgerError,
                plan.OverBudgetError, deterministic_base.UnsupportedMechanismError,
                jaxacct.MissingExtraError):
    assert issubclass(error, jaxacct.InputError), error
  try:
    _numpy_failure()
  except ValueError as error:
    assert not cli.is_bad_input(error)
  # A TypeError of a jaxacct frame that no ``raise`` statement made (a call with the wrong
  # arguments) is a bug, not bad input.
  from jaxacct.montecarlo.engine import sharding
  with pytest.raises(TypeError) as caught:
    sharding.on_leader(lambda unexpected: None)
  assert not cli.is_bad_input(caught.value)
  assert cli.is_bad_input(config_lib.ConfigError('x')) and cli.is_bad_input(PermissionError('x'))
  assert not cli.is_bad_input(KeyError('x'))


@pytest.mark.parametrize('override, message', [
    ('calibration.fallback=pld', "fallback accountant 'pld' cannot prove the last candidate"),
    ('calibration.fallback=gaussian', "unknown deterministic accountant 'gaussian'"),
])
def test_bad_fallback_is_refused_before_compute(override, message, capsys):
  assert cli.main(['calibrate', str(CONFIGS / 'quickstart.yaml'), '--set', override]) == 2
  err = capsys.readouterr().err
  assert message in err and 'verify' not in err  # no progress line: nothing was sampled


@pytest.mark.slow
def test_plan_of_the_production_config_is_finite(tmp_path, capsys):
  # Seed 000 §7.4 on this CPU: measured throughput (a stand-in band of the same length).
  # float64 only: the float32 program of this truncated warm-start shape takes ~90 s to compile.
  assert cli.main(['plan', str(CONFIGS / 'bminsep_production_7_4.yaml'), '--json', '--out',
                   str(tmp_path), '--devices', '256', '--precision', 'float64']) == 0
  payload = json.loads(capsys.readouterr().out)
  plan = payload['plan']
  assert plan['measured'] and plan['iterations'] == 7200 and plan['target_devices'] == 256
  assert plan['num_samples'] == jaxacct.minimum_samples(1.301e-8 / 2, 1.301e-8)
  for name in ('seconds_here', 'seconds_on_target', 'device_hours_on_target'):
    assert math.isfinite(plan[name]) and plan[name] > 0
  # Sampling scales with the devices; the compiles, the initial σ and the figures (measured
  # here) do not.
  assert plan['compile_seconds'] > 0 and plan['initial_seconds'] > 0
  sampled = plan['seconds_after_plan'] - plan['figure_seconds']
  fixed = plan['compile_seconds'] + plan['initial_seconds'] + plan['figure_seconds']
  assert plan['seconds_on_target'] == pytest.approx(sampled / 256 + fixed, rel=1e-9)
  assert plan['seconds_here'] == pytest.approx(sampled + fixed, rel=1e-9)
  assert 'square-root band' in payload['stand_in']
  assert (tmp_path / 'plan' / 'plan.json').is_file() and payload['report'] == str(tmp_path / 'plan')
  assert list(payload['plans']) == ['float64']


def test_plan_arithmetic_with_a_given_throughput(tmp_path, capsys):
  # 1000 one-σ samples/s per device, K σ at DEFAULT_CANDIDATE_COST: the projection is exact
  # arithmetic on the calls calibrate_noise_multiplier's defaults make (whole calls of the
  # default size, both directions), plus the initial σ and the figures, timed here.
  from jaxacct.montecarlo.evr import plan as plan_lib
  from jaxacct.montecarlo.engine import sampling
  assert cli.main(['plan', str(CONFIGS / 'quickstart.yaml'), '--json', '--out', str(tmp_path),
                   '--samples-per-second', '1000', '--devices', '4']) == 0
  plan = json.loads(capsys.readouterr().out)['plan']
  n, base = jaxacct.montecarlo.evr.bounds.resolve_sample_size(1e-3, None, None)
  estimation = max(1000, min(n // 4, math.ceil(50 / base)))
  per_call = sampling.default_blocks_per_call(1024, 128) * 1024  # samples, one device here
  assert plan['blocks_per_call'] * plan['block_size'] == per_call
  def call(k):  # one call in each direction, k σ sharing its draws
    return 2 * per_call * (1 + plan_lib.DEFAULT_CANDIDATE_COST * (k - 1)) / 1000
  def calls(samples):
    return math.ceil(samples / per_call)
  report = calls(estimation) * call(1)  # the report curve: one sweep's draws at one σ
  expected = 2 * calls(estimation) * call(16) + calls(n) * call(8) + report
  assert not plan['measured'] and plan['num_samples'] == n
  assert plan['compile_seconds'] == 0.0 and plan['report_seconds'] == pytest.approx(report)
  assert plan['seconds_after_plan'] == pytest.approx(expected + plan['figure_seconds'],
                                                     rel=1e-12)
  fixed = plan['initial_seconds'] + plan['figure_seconds']
  assert plan['seconds_here'] == pytest.approx(expected + fixed, rel=1e-12)
  assert plan['seconds_on_target'] == pytest.approx(expected / 4 + fixed, rel=1e-12)


@pytest.mark.slow
def test_accelerator_scale_calibrate_prints_the_plan_before_refusing_cpu(capsys):
  # The run precision's plan only (float64 here): the 32-bit §7.4 program is not compiled.
  assert cli.main(['calibrate', str(CONFIGS / 'bminsep_production_7_4.yaml')]) == 2
  err = capsys.readouterr().err
  assert 'capacity plan' in err and 'projected wall time here' in err
  assert '  float64: ' in err and '  float32: ' not in err and 'jaxacct plan' in err
  assert err.strip().splitlines()[-1].startswith('jaxacct: error: ') and 'accelerator-scale' in err


def test_an_accelerator_scale_config_with_the_tilt_is_not_refused_on_cpu(monkeypatch, capsys):
  # The refusal is the plain sampler's "days of CPU time"; with proposal tilted the run goes on
  # to its own plan (here: stopped where the command would start, before any compute).
  class Reached(Exception):
    pass

  def reached(*args, **kwargs):
    raise Reached

  module = importlib.import_module('jaxacct.cli.calibrate')
  monkeypatch.setattr(module, 'COMMAND', dataclasses.replace(module.COMMAND, run=reached))
  config = str(CONFIGS / 'bminsep_production_7_4.yaml')
  assert cli.main(['calibrate', config, '--set', 'scheme.truncated_batch_size=14745600',
                   '--set', 'calibration.proposal=tilted',
                   '--set', 'calibration.tilt_order=3']) == 1
  err = capsys.readouterr().err
  assert 'internal error (Reached)' in err and 'accelerator-scale' not in err


@pytest.mark.parametrize('flags, message', [
    # No coordinator here (or, later in a session, JAX already started): a one-line refusal.
    (['--distributed'], '--distributed: jax.distributed.initialize failed ('),
    (['--coordinator', 'localhost:1'], 'need --distributed'),
    (['--checkpoint-interval', '0'], '--checkpoint-interval must be > 0 seconds'),
])
def test_bad_run_flags_are_refused(flags, message, capsys, monkeypatch):
  monkeypatch.delenv('JAX_COORDINATOR_ADDRESS', raising=False)
  assert cli.main(['estimate', str(CONFIGS / 'quickstart.yaml'), *flags]) == 2
  assert message in capsys.readouterr().err


def test_corrupt_checkpoint_and_ledger_exit_2(tmp_path, capsys):
  """Refused before any compute, also before calibrate's throughput probe (issue 29)."""
  (tmp_path / 'checkpoint.json').write_text('{"body": {"format": 1')
  assert cli.main(['estimate', str(CONFIGS / 'quickstart.yaml'), '--checkpoint',
                   str(tmp_path)]) == 2
  assert 'is corrupt or truncated' in capsys.readouterr().err
  assert cli.main(['calibrate', str(CONFIGS / 'quickstart.yaml'), '--checkpoint',
                   str(tmp_path)]) == 2
  err = capsys.readouterr().err
  assert 'is corrupt or truncated' in err and 'capacity plan' not in err
  (tmp_path / 'ledger.json').write_text('not json')
  assert cli.main(['calibrate', str(CONFIGS / 'quickstart.yaml'), '--ledger',
                   str(tmp_path / 'ledger.json')]) == 2
  err = capsys.readouterr().err
  assert 'ledger' in err and 'is corrupt' in err and 'capacity plan' not in err


def test_each_subcommand_shows_only_its_own_flags(capsys):
  """Issue 30: one command object per module of jaxacct/cli/, with only the flags it uses."""
  from jaxacct.cli import _entry
  assert [c.name for c in _entry.commands()] == ['estimate', 'calibrate', 'train', 'plan']
  flags = {}
  for name in ('estimate', 'calibrate', 'train', 'plan'):
    with pytest.raises(SystemExit):
      cli.main([name, '--help'])
    flags[name] = capsys.readouterr().out
  assert '--ledger' not in flags['estimate'] and '--ledger' in flags['calibrate']
  assert '--ledger' in flags['train'] and '--checkpoint' in flags['estimate']
  for absent in ('--checkpoint', '--ledger', '--force', '--max-minutes'):
    assert absent not in flags['plan']
  assert '--devices' in flags['plan'] and '--devices' not in flags['calibrate']
  assert 'every key: `jaxacct config --keys`' in ' '.join(flags['estimate'].split())
  with pytest.raises(SystemExit) as exited:  # argparse: a flag of another subcommand
    cli.main(['estimate', str(CONFIGS / 'quickstart.yaml'), '--ledger', 'x.json'])
  assert exited.value.code == 2 and 'unrecognized arguments: --ledger' in capsys.readouterr().err
