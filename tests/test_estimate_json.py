"""``jaxacct estimate``'s JSON is the library's result (``CurveReport.to_dict`` for a
deterministic accountant, ``EstimateReport.to_dict`` for Monte Carlo) plus the command's context
(the config's seed, the report folder), and keeps every key and value of the reports written
before those results existed (report_schema 3: keys listed below in their order, as the CLI
wrote them at commit 980637f, when it built both dicts by hand)."""

import json
import pathlib

import jax
import pytest

import jaxacct
from jaxacct import cli
from jaxacct import config as config_lib
from jaxacct import report
from jaxacct.deterministic import accountant

CONFIGS = pathlib.Path(__file__).resolve().parents[1] / 'configs'

DETERMINISTIC_KEYS = [
    'noise_multiplier', 'epsilon', 'delta', 'verified', 'method', 'adjacency', 'accountant',
    'num_samples', 'seed', 'epsilons', 'delta_of_epsilon', 'delta_of_epsilon_by_direction',
    'accountant_options', 'explanation', 'curve']
MONTE_CARLO_KEYS = [
    'noise_multiplier', 'epsilon', 'delta', 'verified', 'method', 'accountant', 'conjectural',
    'bounded', 'scheme', 'sampling_prob', 'expected_participation_rate', 'seed', 'precision',
    'precision_reason', 'resolution', 'epsilons', 'delta_hat', 'standard_error', 'num_samples',
    'curve']


def _run(tmp_path, capsys, config: str, *overrides: str) -> tuple[dict, dict]:
  """(the printed JSON, estimate.json) of ``jaxacct estimate``."""
  sets = [item for override in overrides for item in ('--set', override)]
  assert cli.main(['estimate', str(CONFIGS / config), '--json', '--out', str(tmp_path),
                   *sets]) == 0
  printed = json.loads(capsys.readouterr().out)
  written = json.loads((tmp_path / 'estimate' / 'estimate.json').read_text())
  return printed, written


def test_a_deterministic_estimate_keeps_its_keys_and_values(tmp_path, capsys):
  # A closed-form accountant keeps it quick; "auto"'s naming: the last test below.
  overrides = ('accountant=unamplified_gaussian', 'scheme.iterations=32',
               'strategy.square_root_bands=2')
  printed, written = _run(tmp_path, capsys, 'quickstart.yaml', *overrides)
  assert list(printed) == DETERMINISTIC_KEYS + ['report']
  assert list(written) == ['report_schema'] + DETERMINISTIC_KEYS
  assert {key: written[key] for key in DETERMINISTIC_KEYS} == {
      key: printed[key] for key in DETERMINISTIC_KEYS}
  raw = config_lib.load(CONFIGS / 'quickstart.yaml', list(overrides))
  curve = accountant.privacy_curve(config_lib.mechanism_from(raw),
                                   accountant='unamplified_gaussian', adjacency='zero_out')
  delta = raw['calibration']['delta']
  assert printed['epsilon'] == curve.epsilon_for_delta(delta)
  assert printed['explanation'] == curve.explain(delta)
  assert {key: printed[key] for key in ('noise_multiplier', 'delta', 'verified', 'method',
                                        'adjacency', 'accountant', 'num_samples', 'seed',
                                        'accountant_options')} == {
      'noise_multiplier': 1.0, 'delta': delta, 'verified': True, 'method': 'deterministic',
      'adjacency': 'zero_out', 'accountant': 'unamplified_gaussian', 'num_samples': 0,
      'seed': None, 'accountant_options': {}}
  epsilons = [float(e) for e in config_lib.setting(raw, 'monte_carlo.epsilons')]
  assert printed['epsilons'] == epsilons
  by_direction = printed['delta_of_epsilon_by_direction']
  assert by_direction == {d: [curve.delta_for_epsilon(e, direction=d) for e in epsilons]
                          for d in ('remove', 'add')}
  assert printed['delta_of_epsilon'] == [max(pair) for pair in zip(*by_direction.values())]
  # The figure's points reach down to 1e-6 δ, the figure's floor.
  assert printed['curve'] == accountant.report_curve(
      curve, epsilons + [printed['epsilon']], floor=1e-6 * delta)


def test_a_monte_carlo_estimate_keeps_its_keys_and_values(tmp_path, capsys):
  overrides = ('monte_carlo.num_samples=20000', 'scheme.iterations=32',
               'strategy.square_root_bands=2', 'calibration.delta=0.05')
  printed, written = _run(tmp_path, capsys, 'quickstart.yaml', *overrides)
  assert list(printed) == MONTE_CARLO_KEYS + ['report']
  assert list(written) == ['report_schema'] + MONTE_CARLO_KEYS
  assert {key: written[key] for key in MONTE_CARLO_KEYS} == {
      key: printed[key] for key in MONTE_CARLO_KEYS}
  raw = config_lib.load(CONFIGS / 'quickstart.yaml', list(overrides))
  mechanism = config_lib.mechanism_from(raw)
  epsilons = [float(e) for e in config_lib.setting(raw, 'monte_carlo.epsilons')]
  estimate = jaxacct.estimate_delta(jax.random.key(0), mechanism,
                                    report.curve_epsilons(epsilons), 20000)
  resolution = estimate.resolved_epsilon(0.05)
  assert resolution.epsilon == printed['epsilon'] == 0.2  # as at 980637f
  assert printed['resolution'] == resolution._asdict()
  assert {key: printed[key] for key in ('delta', 'verified', 'method', 'accountant', 'seed',
                                        'precision', 'precision_reason')} == {
      'delta': 0.05, 'verified': False, 'method': 'estimate', 'accountant': 'monte_carlo',
      'seed': 0, 'precision': 'float64', 'precision_reason': 'requested'}
  scheme = mechanism.scheme.to_dict()
  assert (printed['scheme'], printed['sampling_prob']) == (scheme, scheme['sampling_prob'])
  assert (printed['noise_multiplier'], printed['conjectural'], printed['bounded'],
          printed['expected_participation_rate']) == (1.0, False, False, 0.03125)
  assert {key: printed[key] for key in ('epsilons', 'delta_hat', 'standard_error',
                                        'num_samples')} == estimate.to_dict(epsilons)
  assert printed['curve'] == estimate.to_dict()


@pytest.mark.parametrize('delta', [None, 1e-5])
def test_a_curve_report_without_a_target_names_no_epsilon(delta):
  """The library result itself: without a target δ it asks no ε(δ) and, for ``"auto"``, names
  no single accountant."""
  from jaxacct.deterministic import curve_report
  mechanism = jaxacct.MatrixMechanism(jaxacct.Poisson(sampling_prob=0.1, iterations=10),
                                      jaxacct.BandedToeplitz([1.0]), 1.0)
  curves = {'pld': accountant.privacy_curve(mechanism, accountant='pld'),
            'unamplified_gaussian': accountant.privacy_curve(
                mechanism, accountant='unamplified_gaussian')}
  curve = accountant.TightestCurve(curves)
  result = curve_report.curve_report(mechanism, curve, [1.0, 2.0], accountant='auto',
                                     adjacency='zero_out', delta=delta)
  assert list(result.to_dict()) == DETERMINISTIC_KEYS
  if delta is None:
    assert (result.accountant, result.epsilon, result.explanation) == ('auto', None, None)
    assert result.points == accountant.report_curve(curve, [1.0, 2.0], floor=1e-20)
  else:
    assert result.accountant == 'pld' == curve.chosen(delta)  # amplified beats unamplified
    assert result.epsilon == curve.epsilon_for_delta(delta)
    assert min(result.points['delta']) >= curve_report.FIGURE_FLOOR * delta
