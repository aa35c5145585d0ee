"""Bad input through the CLI (issue 17): every case exits with code 2 before any compute, and
its one-line message names the key or option at fault."""

from __future__ import annotations

import pathlib

import pytest

from jaxacct import cli

CONFIGS = pathlib.Path(__file__).resolve().parents[1] / 'configs'
QUICK = str(CONFIGS / 'quickstart.yaml')
DPSGD = str(CONFIGS / 'digits_dpsgd_individual.yaml')

CASES = [
    # (command, config, extra arguments, text the message must contain)
    ('calibrate', QUICK, ['--set', 'calibration.epsilon=-1'], 'calibration.epsilon'),
    ('calibrate', QUICK, ['--set', 'calibration.epsilon=inf'], 'calibration.epsilon'),
    ('calibrate', QUICK, ['--set', 'calibration.epsilon=abc'], 'calibration.epsilon'),
    ('calibrate', QUICK, ['--set', 'calibration.delta=0'], 'calibration.delta'),
    ('calibrate', QUICK, ['--set', 'calibration.delta=1.5'], 'calibration.delta'),
    ('calibrate', QUICK, ['--set', 'calibration.base_delta=-0.1'], 'calibration.base_delta'),
    ('calibrate', QUICK, ['--set', 'calibration.grid_ratio=1'], 'calibration.grid_ratio'),
    ('calibrate', QUICK, ['--set', 'calibration.num_samples=1e30'], 'calibration.num_samples'),
    ('calibrate', QUICK, ['--set', 'calibration.num_samples=2.5'], 'calibration.num_samples'),
    ('calibrate', QUICK, ['--set', 'calibration.estimation_samples=0'],
     'calibration.estimation_samples'),
    ('calibrate', QUICK, ['--set', 'calibration.num_candidates=0'], 'calibration.num_candidates'),
    ('calibrate', QUICK, ['--set', 'calibration.shared_draws=maybe'], 'calibration.shared_draws'),
    ('calibrate', QUICK, ['--set', 'calibration.attempt=0'], 'calibration.attempt'),
    ('calibrate', QUICK, ['--set', 'calibration.seed=-3'], 'calibration.seed'),
    ('calibrate', QUICK, ['--set', 'calibration.tolerance=1'], 'calibration.tolerance'),
    ('estimate', QUICK, ['--set', 'monte_carlo.num_samples=1e30'], 'monte_carlo.num_samples'),
    ('estimate', QUICK, ['--set', 'monte_carlo.num_samples=-5'], 'monte_carlo.num_samples'),
    ('estimate', QUICK, ['--set', 'monte_carlo.num_samples=many'], 'monte_carlo.num_samples'),
    ('estimate', QUICK, ['--set', 'monte_carlo.seed=1.5'], 'monte_carlo.seed'),
    ('estimate', QUICK, ['--set', 'monte_carlo.epsilons=[]'], 'monte_carlo.epsilons'),
    ('estimate', QUICK, ['--set', 'monte_carlo.epsilons=[1, -2]'], 'monte_carlo.epsilons[1]'),
    ('estimate', QUICK, ['--set', 'monte_carlo.epsilons=1'], 'monte_carlo.epsilons'),
    ('estimate', QUICK, ['--set', 'monte_carlo.dtype=float16'], 'monte_carlo.dtype'),
    ('estimate', QUICK, ['--set', 'noise_multiplier=0'], 'noise_multiplier'),
    ('estimate', QUICK, ['--set', 'noise_multiplier=-1'], 'noise_multiplier'),
    ('estimate', QUICK, ['--set', 'scheme.iterations=0'], 'scheme.iterations'),
    ('estimate', QUICK, ['--set', 'scheme.iterations=12.5'], 'scheme.iterations'),
    ('estimate', QUICK, ['--set', 'scheme.type=shuffle'], 'scheme.type'),
    # A key of another family (issue 30): named with the family, not a constructor TypeError.
    ('estimate', QUICK, ['--set', 'scheme.type=balls_in_bins'],
     'scheme.min_sep is not a key of scheme.type balls_in_bins'),
    ('estimate', QUICK, ['--set', 'scheme.min_sep=0'], 'scheme.min_sep'),
    ('estimate', QUICK, ['--set', 'scheme.warm_start=yes please'], 'scheme.warm_start'),
    ('estimate', QUICK, ['--set', 'scheme.expected_batch_size=-64'],
     'scheme.expected_batch_size'),
    ('estimate', QUICK, ['--set', 'scheme.dataset_size=0'], 'scheme.dataset_size'),
    ('estimate', QUICK, ['--set', 'scheme.sampling_prob=2'], 'scheme.sampling_prob'),
    ('estimate', QUICK, ['--set', 'scheme.partition=random'], 'scheme.partition'),
    ('estimate', QUICK, ['--set', 'scheme.colour=red'], 'scheme.colour'),
    ('estimate', QUICK, ['--set', 'strategy.square_root_bands=0'], 'strategy.square_root_bands'),
    ('estimate', QUICK, ['--set', 'strategy.c_col=[1, nan]'], 'strategy.c_col[1]'),
    ('estimate', QUICK, ['--set', 'strategy.normalize=1'], 'strategy.normalize'),
    ('estimate', QUICK, ['--set', 'accountant=magic'], 'accountant'),
    ('estimate', QUICK, ['--set', 'adjacency=swap'], 'adjacency'),
    ('estimate', QUICK, ['--set', 'report.output_dir=[1]'], 'report.output_dir'),
    ('estimate', QUICK, ['--set', 'accelerator_scale=2'], 'accelerator_scale'),
    ('estimate', QUICK, ['--set', 'monte_carlo'], '--set'),
    ('estimate', QUICK, ['--set', 'a.b.c=1'], '--set'),
    ('estimate', QUICK, ['--out', '/proc/forbidden/report'], '--out'),
    ('estimate', QUICK, ['--checkpoint', '/proc/forbidden/ckpt'], '--checkpoint'),
    ('estimate', QUICK, ['--checkpoint-interval', '0'], '--checkpoint-interval'),
    ('estimate', QUICK, ['--process-id', '1'], '--distributed'),
    ('estimate', str(CONFIGS / 'missing.yaml'), [], 'missing.yaml'),
    ('plan', QUICK, ['--devices', '0'], '--devices'),
    ('plan', QUICK, ['--samples-per-second', '-5'], '--samples-per-second'),
    ('plan', str(CONFIGS / 'digits_dpgd_filter.yaml'), [], 'accountant: pld'),  # nothing sampled
    ('plan', str(CONFIGS / 'balls_in_bins_auto.yaml'), [], 'accountant: auto'),
    ('calibrate', QUICK, ['--ledger', '/proc/forbidden/ledger.json'], '--ledger'),
    ('train', DPSGD, ['--set', 'training.clip_norm=0'], 'training.clip_norm'),
    ('train', DPSGD, ['--set', 'training.momentum=1'], 'training.momentum'),
    ('train', DPSGD, ['--set', 'training.test_fraction=1'], 'training.test_fraction'),
    ('train', DPSGD, ['--set', 'training.hidden=0'], 'training.hidden'),
    ('train', DPSGD, ['--set', 'training.noise=off'], 'training.noise'),
    ('train', DPSGD, ['--set', 'individual.delta=0'], 'individual.delta'),
    ('train', DPSGD, ['--set', 'individual.grid_size=1'], 'individual.grid_size'),
    ('train', DPSGD, ['--set', 'individual.inflation=0.5'], 'individual.inflation'),
    ('train', DPSGD, ['--set', 'individual.method=gdp'], 'individual.method'),
    ('train', DPSGD, ['--set', 'individual.track=0'], 'individual.track'),
    ('estimate', str(CONFIGS / 'multi_attribution.yaml'),
     ['--set', 'attribution.num_users=-1'], 'attribution.num_users'),
    # Issue 31: the closest valid key or value, and the config's words for Monte Carlo.
    ('estimate', QUICK, ['--set', 'monte_carlo.num_sample=10'],
     'unknown key monte_carlo.num_sample (did you mean num_samples?)'),
    ('estimate', QUICK, ['--set', 'calibraton.delta=0.1'],
     'unknown key calibraton (did you mean calibration?)'),
    ('estimate', QUICK, ['--set', 'scheme.warm_star=true'],
     'unknown key scheme.warm_star (did you mean warm_start?)'),
    ('estimate', QUICK, ['--set', 'scheme.cycle_lenght=4'],
     'unknown key scheme.cycle_lenght (did you mean cycle_length?)'),
    ('estimate', QUICK, ['--set', 'accountant=pdl'], "got 'pdl' (did you mean pld?)"),
    ('estimate', QUICK, ['--set', 'monte_carlo.precision=flaot32'],
     "got 'flaot32' (did you mean float32?)"),
    ('estimate', QUICK, ['--set', 'accountant=pld'],
     'or accountant: monte_carlo (the Monte Carlo accountant)'),
]


@pytest.mark.parametrize('command, config, extra, names', CASES,
                         ids=[f'{c[0]} {" ".join(c[2]) or pathlib.Path(c[1]).name}'
                              for c in CASES])
def test_bad_input_exits_2_naming_the_key(command, config, extra, names, capsys):
  code = cli.main([command, config, *extra])
  err = capsys.readouterr().err
  assert code == 2, err
  assert names in err, err
  assert err.count('\n') == 1 and 'Traceback' not in err  # one line, no traceback


def test_the_table_is_large_enough():
  assert len(CASES) >= 40


def test_a_calibration_over_the_time_budget_is_refused_with_its_plan(capsys):
  # δ = 1e-7 needs ~10⁸ verification samples: days here; the plan is printed first
  code = cli.main(['calibrate', QUICK, '--set', 'calibration.delta=1e-7', '--max-minutes', '1'])
  err = capsys.readouterr().err
  assert code == 2
  assert 'capacity plan' in err and 'projected wall time here' in err
  assert '--max-minutes budget of 1 min' in err and '--force' in err


def test_max_minutes_must_be_positive(capsys):
  assert cli.main(['calibrate', QUICK, '--max-minutes', '0']) == 2
  assert '--max-minutes' in capsys.readouterr().err


def test_an_undeclared_retry_is_refused_before_any_compute_with_the_set_that_declares_it(
    tmp_path, capsys):
  import jax
  import jaxacct
  from jaxacct import config as config_lib
  from jaxacct.montecarlo.engine import keys as keys_lib
  from jaxacct.montecarlo.evr import ledger as ledger_lib
  raw = config_lib.load(QUICK)
  mechanism = config_lib.mechanism_from(raw)
  n, base = jaxacct.montecarlo.evr.bounds.resolve_sample_size(1e-3, None, None)
  ledger = ledger_lib.FileLedger(tmp_path / 'ledger.json')
  # A run at another target (ε = 3) is an attempt at this mechanism too.
  ledger.charge(mechanism, ledger_lib.RunRecord(
      run=repr((keys_lib.key_words(jax.random.key(5)), (1.0,), n, base, True)), epsilon=3.0,
      delta=1e-3, num_samples=n, base_delta=base, overall_delta=1.0), 1, lambda charge: 1e-3)
  code = cli.main(['calibrate', QUICK, '--ledger', str(tmp_path / 'ledger.json'), '--out',
                   str(tmp_path / 'out')])
  err = capsys.readouterr().err
  assert code == 2
  assert 'declare it with --set calibration.attempt=2 (or calibration.attempt: 2 in' in err
  assert 'capacity plan' not in err and 'precision:' not in err  # nothing timed or run
