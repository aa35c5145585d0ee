"""``jaxacct calibrate CONFIG``: the smallest σ passing Estimate-Verify-Release
(``calibrate_noise_multiplier``) at the config's (ε, δ), or a deterministic accountant's
smallest σ (``calibrate_deterministic``), with its report curve and figures."""

from __future__ import annotations

import time

import jax

from jaxacct import config as config_lib
from jaxacct import report
from jaxacct.conventions import Purpose
from jaxacct.montecarlo import keys as keys_lib
from jaxacct.montecarlo.calibration import CalibrationRecord
from jaxacct.montecarlo.estimator import estimate_delta
from jaxacct.cli.common import (Command, reporter, calibrated, calibration_section,
                                check_budget, check_state_files,
                                deterministic_curve, output_dir, plan_mechanism,
                                print_deterministic, print_footer, run_options,
                                scheme_and_matrix, with_prefix_error, write_on_leader)


def _calibrate(args, raw) -> dict:
  calibration_section(raw)  # a config error before the strategy is built
  stand_in, _ = plan_mechanism(raw)  # an optimised band is built after the checks below
  check_state_files(args, raw, ledger=config_lib.accountant_from(
      raw, stand_in.scheme, stand_in.matrix) == config_lib.MONTE_CARLO, mechanism=stand_in)
  projected = check_budget(args, raw)
  started = time.perf_counter()  # the run the plan projects: calibration and report curve
  mechanism, g, payload, found = calibrated(args, raw, *scheme_and_matrix(raw))
  with_prefix_error(mechanism, payload)
  folder = output_dir(args, raw)
  # The released σ and its guarantee first (atomically), the curve and the figures after.
  write_on_leader(report.write_json, folder, 'calibration.json', payload)
  title = f'{report.describe(mechanism)} (released σ)' + (
      f', float32 program (margin η ≤ {g.margin:.1e})' if g.margin is not None else '')
  if isinstance(found, CalibrationRecord):
    # δ̂(ε) at the released σ on a fine ε grid, from the report stream (fresh draws, as many
    # as one estimation sweep): an illustration of the released σ, not part of the guarantee
    key = keys_lib.purpose_key(jax.random.key(int(config_lib.setting(raw, 'calibration.seed'))),
                               Purpose.REPORT)
    curve = estimate_delta(key, mechanism, report.curve_epsilons([g.epsilon]),
                           found.estimation_samples, precision=g.precision,
                           run=run_options(args, reporter(args, 'report curve'),
                                            'report-curve'))
    payload['curve'] = curve.to_dict()
    write_on_leader(report.plot_delta_hat, folder, curve.epsilons, curve.delta_hat,
                    curve.standard_error,
                    f'{title}\nδ̂(ε) from {found.estimation_samples:,} fresh samples per '
                    f'direction; verified with N = {g.num_samples:,}',
                    num_samples=found.estimation_samples,
                    released=(g.epsilon, g.delta), threshold=g.base_delta)
    write_on_leader(report.plot_candidates, folder, found, g.noise_multiplier, title)
  else:
    payload['curve'] = deterministic_curve(args, found, [g.epsilon], g.epsilon, g.delta)
    write_on_leader(report.plot_delta_curve, folder, payload['curve']['epsilons'],
                    payload['curve']['delta'], f'{title}\nproven δ(ε) by {g.accountant}',
                    released=(g.epsilon, g.delta))
  payload['plan_check'] = {'projected_seconds': projected,
                           'measured_seconds': time.perf_counter() - started}
  write_on_leader(report.write_json, folder, 'calibration.json', payload)
  payload['report'] = str(folder)
  return payload


def _print(payload: dict) -> None:
  if payload['method'] == 'deterministic':
    print_deterministic(payload, table=False)
  else:
    print(f'noise_multiplier σ = {payload["noise_multiplier"]:.6g} is ({payload["epsilon"]}, '
          f'{payload["delta"]:.4g})-DP [{payload["method"]}'
          + (f' by {payload["accountant"]}' if payload.get('accountant') else '')
          + f'; verified={payload["verified"]}; '
          + ('App. B loss bounds (upper bound); ' if payload.get('bounded') else '')
          + (f'float32 program, certified margin η ≤ {payload["margin"]:.2g}; '
             if payload.get('precision') == 'float32' and payload.get('margin') is not None
             else '') +
          f'{payload["num_samples"]:,} verification samples per direction, base δ '
          f'{payload["base_delta"]:.4g}, seed {payload["seed"]}; {payload["seconds"]:.1f} s]')
  print_footer(payload)

COMMAND = Command(name='calibrate', help='smallest σ verified by Estimate-Verify-Release',
                  run=_calibrate, print_human=_print, order=2, charges_ledger=True)
