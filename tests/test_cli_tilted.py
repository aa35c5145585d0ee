"""``jaxacct estimate`` with the tilted proposal (``monte_carlo.proposal: tilted``,
``monte_carlo.tilt_order``): end to end on the tiny b-min-sep of tests/montecarlo/test_tilted.py
(n = 12, b = 3, 3 bands, σ = 1.6), its JSON against the API's ``estimate_delta`` with the same
key and grid, its printed table and announcement, and the refusals at load."""

import json

import jax
import pytest
import yaml

import jaxacct
from jaxacct import cli
from jaxacct import config as config_lib
from jaxacct import report
from jaxacct.cli import estimate as estimate_command

EPSILONS = [1.0, 2.0, 2.5]
CONFIG = {
    'scheme': {'type': 'bminsep', 'sampling_prob': 0.3, 'iterations': 12, 'min_sep': 3,
               'warm_start': True},
    'strategy': {'c_col': [1.0, 0.5, 0.25]}, 'noise_multiplier': 1.6,
    'accountant': 'monte_carlo',
    'monte_carlo': {'proposal': 'tilted', 'tilt_order': 3, 'num_samples': 3000,
                    'epsilons': EPSILONS},
    'calibration': {'delta': 1e-3},
}
TILTED_KEYS = ['proposal', 'tilt_order', 'log_z', 'log_z_method', 'tables_digest', 'support']


def _config(tmp_path, **monte_carlo):
  config = {**CONFIG, 'monte_carlo': {**CONFIG['monte_carlo'], **monte_carlo}}
  config['monte_carlo'] = {k: v for k, v in config['monte_carlo'].items() if v is not None}
  path = tmp_path / 'tilted.yaml'
  path.write_text(yaml.safe_dump(config))
  return path


def test_a_tilted_estimate_runs_end_to_end_and_equals_the_api(tmp_path, capsys):
  assert cli.main(['estimate', str(_config(tmp_path)), '--json', '--out', str(tmp_path)]) == 0
  captured = capsys.readouterr()
  printed = json.loads(captured.out)
  # Projected against the default budget first (tilted_plan.tilted_sampling_seconds): said
  # on stderr, never silently.
  assert 'the remove direction tilted (α = 3)' in captured.err
  assert 'timed against the budget' in captured.err
  folder = tmp_path / 'estimate'
  written = json.loads((folder / 'estimate.json').read_text())
  assert (folder / 'delta_hat.png').is_file()
  assert {k: v for k, v in written.items() if k != 'report_schema'} == {
      k: v for k, v in printed.items() if k != 'report'}
  # The API with the config's key (seed 0) and the command's grid (the table's ε and the
  # figure's): the same draws, so the same bits.
  raw = config_lib.load(_config(tmp_path))
  api = jaxacct.estimate_delta(
      jax.random.key(0), config_lib.mechanism_from(raw), report.curve_epsilons(EPSILONS), 3000,
      monte_carlo=jaxacct.MonteCarloOptions(proposal='tilted', tilt_order=3))
  rows = api.to_dict(EPSILONS)
  assert printed['delta_hat'] == rows['delta_hat'] and printed['epsilons'] == EPSILONS
  assert printed['standard_error'] == rows['standard_error']
  assert {key: printed[key] for key in TILTED_KEYS} == {key: rows[key] for key in TILTED_KEYS}
  assert printed['proposal'] == {'remove': 'tilted', 'add': 'plain'}
  assert printed['tilt_order'] == 3 and printed['log_z_method'] == 'chain'
  assert len(printed['tables_digest']) == 32  # the tuple chain's tables (TupleChain.digest)
  assert len(printed['support']) == len(EPSILONS)
  assert printed['curve'] == api.to_dict()
  assert printed['seed'] == 0 and printed['method'] == 'estimate'
  # The resolution is the tilted estimate's own (each direction above its own floor).
  assert printed['resolution'] == api.resolved_epsilon(1e-3)._asdict()
  assert printed['epsilon'] == printed['resolution']['epsilon']
  # The printed table names the tilted direction and each direction's floor.
  estimate_command.COMMAND.print_human(printed)
  table = capsys.readouterr().out
  assert 'tilted remove direction (α = 3)' in table
  assert '(3/N)' in table  # the add direction's δ̂ at ε = 2.5 is below 3/N = 1e-3


@pytest.mark.parametrize('monte_carlo, message', [
    ({'proposal': None}, 'monte_carlo.tilt_order is the order of proposal'),
    ({'tilt_order': None}, 'monte_carlo.tilt_order is required with proposal'),
    ({'proposal': None, 'tilt_order': None, 'tilt_state_budget': 10**6},
     "monte_carlo.tilt_state_budget bounds the tilt's tuple chain"),
    ({'tilt_state_budget': 5}, 'tuple-chain states'),
], ids=['order-without-tilted', 'tilted-without-order', 'budget-without-tilted',
        'budget-below-the-chain'])
def test_inconsistent_tilt_keys_are_refused_before_compute(
    tmp_path, capsys, monte_carlo, message):
  path = _config(tmp_path, **monte_carlo)
  if 'tuple-chain states' not in message:  # a budget below the chain is known at the tables
    with pytest.raises(config_lib.ConfigError, match=message):
      config_lib.load(path)
  assert cli.main(['estimate', str(path), '--out', str(tmp_path)]) == 2
  assert message in capsys.readouterr().err
  assert not (tmp_path / 'estimate').exists()  # refused before any compute


def test_overrides_complete_a_tilted_config_before_it_is_checked(tmp_path):
  path = _config(tmp_path, tilt_order=None)
  raw = config_lib.load(path, ['monte_carlo.tilt_order=2'])
  assert raw['monte_carlo']['tilt_order'] == 2
  with pytest.raises(config_lib.ConfigError, match='monte_carlo.tilt_order must be an integer'):
    config_lib.load(path, ['monte_carlo.tilt_order=2.5'])


def _calibration_config(tmp_path, *, num_candidates: int, seed: int, tilt_order: int = 3):
  """A tilted calibration of the tiny b-min-sep at (4.5, 10⁻⁵), α = 3 by default (−ln p₀ ≈
  4.04 ≤ ε: the add direction is certified by (A1)), written to tmp_path/calibrate.yaml."""
  config = {'scheme': CONFIG['scheme'], 'strategy': CONFIG['strategy'],
            'calibration': {'epsilon': 4.5, 'delta': 1e-5, 'proposal': 'tilted',
                            'tilt_order': tilt_order, 'num_candidates': num_candidates,
                            'seed': seed}}
  path = tmp_path / 'calibrate.yaml'
  path.write_text(yaml.safe_dump(config))
  return path


def test_a_tilted_calibration_runs_end_to_end_and_records_each_direction(tmp_path, capsys):
  path = _calibration_config(tmp_path, num_candidates=4, seed=1)
  ledger = tmp_path / 'ledger.json'
  assert cli.main(['calibrate', str(path), '--out', str(tmp_path), '--ledger', str(ledger)]) == 0
  captured = capsys.readouterr()
  # The tilted capacity plan first (tilted_plan.py), its projection recorded beside the run's.
  assert 'capacity plan of the tilted calibration (α = 3)' in captured.err
  assert 'the σ search replayed from σ' in captured.err
  assert 'remove' in captured.out and '(certified)' in captured.out
  written = json.loads((tmp_path / 'calibrate' / 'calibration.json').read_text())
  assert written['method'] == 'verified_mc' and written['delta'] <= 1e-5
  assert written['tilt']['tilt_order'] == 3
  assert written['tilt']['directions']['add'][0] == 0
  assert written['plan_check']['projected_seconds'] > 0.0
  assert (tmp_path / 'calibrate' / 'candidates.png').is_file()
  (run,) = jaxacct.FileLedger(ledger).runs(config_lib.mechanism_from(config_lib.load(path), 1.0))
  assert run.directions == written['tilt']['directions']


def test_a_tilted_calibration_whose_search_drew_nothing_still_reports(tmp_path, capsys,
                                                                       monkeypatch):
  # Every σ of the search decided without samples (here: the cap forced to 0 fails each
  # uncertified σ; α = 4, whose M at Z = 1, 1.4e-7, is below δ_b, so large σ can still be
  # certified and the order is accepted): the release comes from the candidates the search
  # placed, and the report curve still draws (it once asked for 0 samples and the command
  # failed after computing).
  from jaxacct.montecarlo.evr import tilted_search
  monkeypatch.setattr(tilted_search, 'MAX_DEFAULT_SAMPLES', 0)
  path = _calibration_config(tmp_path, num_candidates=2, seed=2, tilt_order=4)
  assert cli.main(['calibrate', str(path), '--out', str(tmp_path), '--ledger',
                   str(tmp_path / 'ledger.json')]) == 0
  assert 'treated as failing' in capsys.readouterr().err
  written = json.loads((tmp_path / 'calibrate' / 'calibration.json').read_text())
  assert written['method'] == 'verified_mc'
  assert written['record']['estimation_samples'] == 0  # the search drew nothing
  assert (tmp_path / 'calibrate' / 'delta_hat.png').is_file()


def test_an_order_the_capped_search_cannot_pass_is_refused_before_compute(tmp_path, capsys,
                                                                         monkeypatch):
  # At (4.5, 10⁻⁵), δ_b = 5·10⁻⁶, α = 2's M is ≥ e^{−4.5}/4 = 2.8e-3 at every σ, above the
  # 400·δ_b = 2e-3 a capped search can sample: refused, naming the order that can (3).
  from jaxacct.montecarlo.evr import tilted_search
  monkeypatch.setattr(tilted_search, 'boundary', None)  # never reached
  path = _calibration_config(tmp_path, num_candidates=2, seed=2, tilt_order=2)
  assert cli.main(['calibrate', str(path), '--out', str(tmp_path), '--ledger',
                   str(tmp_path / 'ledger.json')]) == 2
  err = capsys.readouterr().err
  assert 'calibration.tilt_order' in err and 'the smallest order that can is 3' in err
  assert 'calibration.tilt_order=3' in err
  assert tilted_search.searchable_orders(4.5, 5e-6) == [3, 4, 5, 6, 7, 8]
  assert tilted_search.searchable_orders(4.5, 5e-6 * 1.4) == [2, 3, 4, 5, 6, 7, 8]


def test_a_tilted_estimate_over_max_minutes_is_refused_before_any_sample(tmp_path, capsys):
  # 10⁸ samples per direction: projected (host draws and device calls timed) far over 1 min.
  path = _config(tmp_path, num_samples=100_000_000)
  assert cli.main(['estimate', str(path), '--max-minutes', '1', '--out', str(tmp_path)]) == 2
  err = capsys.readouterr().err
  assert 'timed against the budget' in err and 'projected to take' in err
  assert not (tmp_path / 'estimate' / 'estimate.json').exists()


def test_jaxacct_plan_projects_a_tilted_calibration(tmp_path, capsys):
  # `jaxacct plan` of a tilted calibration: the replayed search, each σ with its outcome, and
  # the verification (tilted_plan.py); plan.json holds the same projection.
  path = _calibration_config(tmp_path, num_candidates=4, seed=1)
  assert cli.main(['plan', str(path), '--out', str(tmp_path)]) == 0
  out = capsys.readouterr().out
  assert 'capacity plan of the tilted calibration (α = 3)' in out
  assert 'verification at the boundary σ ≈' in out and 'not timed' not in out
  written = json.loads((tmp_path / 'plan' / 'plan.json').read_text())['plan']
  assert written['proposal'] == 'tilted' and written['order'] == 3
  assert len(written['probes']) == out.count('    σ = ')
  assert written['verification_samples']['add'] == 0  # ε = 4.5 ≥ −ln p₀: (A1) certifies it
  assert written['seconds_after_plan'] > 0.0
