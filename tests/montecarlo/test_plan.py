"""The capacity plan's library decisions that the CLI used to make: whether a run is worth
timing (``plan.needs_timing``, one gate for the calibration's announcement and a budget) and
the report's figures in every projected wall time (``capacity_plan(figure_seconds=)``)."""

import pytest

import jaxacct
from jaxacct.montecarlo.evr import plan as plan_lib

MECHANISM = jaxacct.MatrixMechanism(jaxacct.Poisson(sampling_prob=0.1, iterations=8),
                                    jaxacct.BandedToeplitz([1.0, 0.5]), 1.0)


def test_a_run_is_timed_only_when_the_slowest_rate_could_exceed_the_seconds():
  rate = plan_lib.SLOWEST_SAMPLE_ROUNDS_PER_SECOND
  # 2 directions × N draws × n = 8 rounds at the slowest rate: exactly 10 s for this N.
  num_samples = int(10.0 * rate / (2 * 8))
  assert not plan_lib.needs_timing(MECHANISM, num_samples, 10.0)  # could take 10 s: not more
  assert plan_lib.needs_timing(MECHANISM, num_samples + 1, 10.0)
  assert not plan_lib.needs_timing(MECHANISM, num_samples + 1, 10.0, devices=2)
  assert not plan_lib.needs_timing(MECHANISM, 10**15, None)  # no budget: nothing to time


def test_figure_seconds_join_every_wall_time_but_not_the_device_hours():
  # A given throughput: nothing is compiled; only the starting points are computed (timed).
  def planned(figures):
    return plan_lib.capacity_plan(MECHANISM, epsilon=2.0, delta=1e-3, samples_per_second=1e4,
                                  target_devices=4, report_epsilons=[1.0, 2.0],
                                  figure_seconds=figures)
  without, with_figures = planned(0.0), planned(7.0)
  assert (without.figure_seconds, with_figures.figure_seconds) == (0.0, 7.0)
  assert with_figures.seconds_after_plan == without.seconds_after_plan + 7.0
  # The starting points are measured in each plan: compare what is left of the totals.
  for plan, figures in ((without, 0.0), (with_figures, 7.0)):
    assert plan.seconds_here - plan.initial_seconds == pytest.approx(
        without.seconds_after_plan + figures, rel=1e-12)
    assert plan.seconds_on_target - plan.initial_seconds == pytest.approx(
        without.seconds_after_plan / 4 + figures, rel=1e-12)
    assert plan.device_hours_on_target == pytest.approx(
        (plan.seconds_on_target - figures) * 4 / 3600, rel=1e-12)
    assert plan.to_dict()['figure_seconds'] == figures
  with pytest.raises(jaxacct.InputError, match='figure_seconds must be >= 0'):
    planned(-1.0)
