"""The plan of a deterministic report (``deterministic.curve_plan``): the run's queries
replayed on a coarse copy count its compositions, and the one composition the plan times at
full resolution is kept for the run. (Seconds are not asserted: no timing in tests; the
projected-vs-measured figures are in benchmarks/RESULTS.md, ``benchmarks/plan_accuracy.py``.)"""

from __future__ import annotations

import pytest

import jaxacct
from jaxacct.conventions import DIRECTIONS
from jaxacct.deterministic import accountant, curve_plan, mixture_pld, mmcc
from jaxacct.strategies import banded_toeplitz

# Poisson BSR with more bands than Poisson separates: MMCC, a composition per δ₁ = δ/2.
MECHANISM = jaxacct.MatrixMechanism(
    jaxacct.Poisson(sampling_prob=0.1, iterations=12),
    jaxacct.BandedToeplitz(banded_toeplitz.square_root_coefficients(3)), 1.5)
TARGET = 1e-5
# A PLD grid of 5e-3 (the coarse copy's is 1e-2): the same code paths as the default 1e-3 at a
# fraction of the cost.
GRID = {'value_discretization_interval': 5e-3}


def _queries(curve):
  """A report's queries: ε at the target δ, a δ(ε) search per direction, a fixed-δ point."""
  return (curve.epsilon_for_delta(TARGET),
          [curve.delta_for_epsilon(2.0, direction=d) for d in DIRECTIONS],
          curve.epsilon_for_delta(1e-3))


@pytest.mark.parametrize('auto', [False, True], ids=['mmcc', 'auto'])
def test_replay_counts_the_runs_compositions_and_the_timed_one_is_kept(auto):
  curve = accountant.privacy_curve(MECHANISM, accountant='auto' if auto else 'mmcc', **GRID)
  fine = curve.curves['mmcc'] if auto else curve
  assert isinstance(fine, mmcc.MMCCCurve)
  plan = curve_plan.plan_queries(curve, _queries)
  assert plan.compositions > 4 and plan.projected_seconds > 0
  timed = dict(fine.composition_seconds)
  # The plan composed two at full resolution, at the replay's largest and smallest δ_E
  assert len(timed) == 2 == len(plan.timed)
  assert sorted(b for _, b in timed) == sorted(b for b, _ in plan.timed)
  answers = _queries(curve)
  # The run kept the timed compositions (same seconds: not composed again) ...
  assert all(fine.composition_seconds[key] == seconds for key, seconds in timed.items())
  # ... and made about the compositions the coarse replay counted (the searches follow
  # slightly different ε(δ), so a few more or fewer).
  assert abs(len(fine.composition_seconds) - plan.compositions) <= max(2, plan.compositions // 5)
  if not auto:  # the plan does not change an answer: an unplanned curve gives the same ones
    assert _queries(accountant.privacy_curve(MECHANISM, accountant='mmcc', **GRID)) == answers


def test_coarse_copy_is_coarser_and_never_reported():
  curve = accountant.privacy_curve(MECHANISM, accountant='mmcc', **GRID)
  coarse = curve.coarse_copy()
  assert coarse.discretization == max(curve.discretization, mixture_pld.COARSE_DISCRETIZATION)
  assert coarse.sensitivity_step == mmcc.COARSE_LATTICE * curve.sensitivity_step
  # Pessimistic grids: the coarse ε(δ) is not below the fine one here.
  assert coarse.epsilon_for_delta(TARGET) >= curve.epsilon_for_delta(TARGET)


def test_nothing_to_plan_for_a_curve_of_cheap_queries():
  # Untruncated Poisson DP-SGD: one composed PLD answers every ε (pld); nothing is replayed.
  dpsgd = jaxacct.MatrixMechanism(jaxacct.Poisson(sampling_prob=0.1, iterations=12),
                                  jaxacct.BandedToeplitz([1.0]), 1.5)
  calls = []
  assert curve_plan.plan_queries(accountant.privacy_curve(dpsgd, accountant='pld'),
                                 calls.append) is None
  assert calls == []
