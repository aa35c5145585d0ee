"""The capacity plan of a tilted calibration (montecarlo/evr/tilted_plan.py).

Oracles: the host-pass rule against ``TiltedDraws.draw_tuples`` itself (a counting sampler);
the replayed search against ``tilted_search``'s own rules with exact ln Z_α where the plan does
not model it, and against the real calibration's search on the same mechanism (same bracket,
same number of σ); the verification's N against ``bounds.resolve_direction_sizes``; the
projection's arithmetic from its parts. Tolerances: exact unless stated. Timings are recorded,
never asserted.
"""

import dataclasses
import math

import jax
import numpy as np
import pytest

import jaxacct
from jaxacct.conventions import DIRECTIONS
from jaxacct.deterministic import tilt_bound
from jaxacct.montecarlo.engine import kernels, keys as keys_lib
from jaxacct.montecarlo.engine.sharding import SampleMesh
from jaxacct.montecarlo.engine.tilted import TiltedDraws
from jaxacct.montecarlo.evr import bounds, calibration, plan, tilted, tilted_plan, tilted_search

# The tiny b-min-sep of test_tilted.py (n = 12, b = 3, warm start, 3 bands).
BMINSEP = jaxacct.MatrixMechanism(
    jaxacct.BMinSep(sampling_prob=0.3, iterations=12, min_sep=3, warm_start=True),
    jaxacct.BandedToeplitz([1.0, 0.5, 0.25]), 1.6)
OPTIONS = jaxacct.MonteCarloOptions(proposal='tilted', tilt_order=3, num_candidates=4)
EPSILON, DELTA = 4.5, 1e-5


@pytest.fixture(scope='module')
def projected():
  # α = 3 of this chain is cheap (``CHEAP_WORK``): ln Z₃ exact at every σ replayed.
  return plan.capacity_plan(BMINSEP, epsilon=EPSILON, delta=DELTA, monte_carlo=OPTIONS,
                            run=jaxacct.RunOptions(progress=False))


@pytest.fixture(scope='module')
def projected_modelled():
  # The same plan with no order cheap: ln Z₃ modelled, as at the §7.4 shape.
  with pytest.MonkeyPatch.context() as patch:
    patch.setattr(tilted_plan, 'CHEAP_WORK', 0)
    return plan.capacity_plan(BMINSEP, epsilon=EPSILON, delta=DELTA, monte_carlo=OPTIONS,
                              run=jaxacct.RunOptions(progress=False))


def _oracle_proxy(sigma: float, log_z3: float, orders) -> float:
  """min over ``orders`` (exact) and α = 3 (``log_z3``) of M(α′, ε) − M(α′, ε)|_(Z = 1),
  from ``tilt_bound`` directly."""
  mechanism = dataclasses.replace(BMINSEP, noise_multiplier=sigma)
  values = {alpha: tilt_bound.partition(mechanism, alpha).log_z for alpha in orders}
  values[3] = log_z3
  return max(0.0, min(
      math.exp(min(0.0, tilt_bound.log_support_bound(z, a, EPSILON)))
      - math.exp(tilt_bound.log_support_bound(0.0, a, EPSILON)) for a, z in values.items()))


@pytest.mark.parametrize('num_blocks, call_blocks, host_blocks', [
    (1, 2, 5), (7, 2, 5), (10, 2, 5), (11, 4, 3), (9, 3, 9), (40, 2, 97), (5, 8, 2), (11, 2, 97),
    (130, 2, 97)])
def test_host_passes_follow_the_samplers_own_rule(num_blocks, call_blocks, host_blocks):
  # Oracle: TiltedDraws.draw_tuples driven call by call as stream.accumulate drives it, with a
  # sampler that records how many blocks each pass draws.
  passes = []

  def sampler(rngs, count):
    passes.append(len(rngs))
    return np.zeros((len(rngs), count, 2, 3), bool)

  draws = TiltedDraws(
      mechanism=BMINSEP, kernel=kernels.kernel_for(BMINSEP, np.dtype(np.float64)),
      block_size=4, mesh=SampleMesh.over(jax.local_devices()[:1]), tuples=sampler,
      tuple_key=keys_lib.host_stream_key(jax.random.key(0), 'estimation', 'remove'),
      order=2, log_z=0.0, log_support=np.zeros(1), host_blocks=host_blocks)
  for first in range(0, num_blocks, call_blocks):
    draws.draw_tuples(np.arange(first, first + call_blocks), last_block=num_blocks)
  assert tilted_plan.host_passes(num_blocks, call_blocks, host_blocks) == passes
  # Every block of every call (the last call's padding too) is drawn once: no pass re-draws
  # blocks, and none is started for the remainder of a call (each costs a forward pass).
  assert sum(passes) == -(-num_blocks // call_blocks) * call_blocks


def _check_monotone(result) -> None:
  # A monotone search: every passing σ lies above every failing one; the boundary passes and
  # the largest failing σ is within one grid ratio below it.
  passing = [p.sigma for p in result.probes if p.passes]
  failing = [p.sigma for p in result.probes if not p.passes]
  assert min(passing) > max(failing) and result.boundary == min(passing)
  assert result.boundary / max(failing) <= OPTIONS.grid_ratio


def test_a_cheap_order_is_exact_at_every_replayed_sigma(projected):
  result = projected
  assert len(result.anchors) == 1  # no second anchor: nothing to model
  for probe in result.probes:
    mechanism = dataclasses.replace(BMINSEP, noise_multiplier=probe.sigma)
    assert not probe.modelled
    if probe.outcome in ('order two', 'M >= 1'):
      continue
    log_z3 = tilt_bound.partition(mechanism, 3).log_z
    assert probe.support == math.exp(tilt_bound.log_support_bound(log_z3, 3, EPSILON))
    if probe.outcome == 'sampled':  # the proxy over every order 2…16 of this small chain
      assert probe.proxy == pytest.approx(_oracle_proxy(probe.sigma, log_z3, range(2, 17)),
                                          rel=1e-12)
      assert probe.passes == (probe.proxy
                              <= tilted_plan.BOUNDARY_SUPPORT_RATIO * result.base_delta)
    else:
      assert probe.proxy is None
  assert any(probe.outcome == 'sampled' for probe in result.probes)
  _check_monotone(result)


def test_the_replayed_search_follows_the_searchs_rules(projected_modelled):
  result = projected_modelled
  assert isinstance(result, tilted_plan.TiltedCapacityPlan)
  assert result.order == 3 and result.base_delta == DELTA / 2
  first = result.probes[0]
  assert first.sigma == min(result.initial_guess, result.sigma_up) and not first.modelled
  # Exact at the first σ: the tilt's own M(α, ε).
  exact = tilted.tilt_for(dataclasses.replace(BMINSEP, noise_multiplier=first.sigma), 3,
                          [EPSILON])
  assert first.support == math.exp(exact.log_support[0])
  # The model: a power law in ln Z₂ through the anchors (the first σ and the first replay's
  # boundary), where ln Z_α and ln Z₂ are exact.
  anchors = result.anchors
  assert len(anchors) == 2 and first.sigma in [sigma for sigma, _, _ in anchors]
  for sigma, two, alpha in anchors:
    mechanism = dataclasses.replace(BMINSEP, noise_multiplier=sigma)
    assert two == tilt_bound.partition(mechanism, 2).log_z
    assert alpha == pytest.approx(tilt_bound.partition(mechanism, 3).log_z, rel=1e-12)
    assert tilted_plan.modelled_log_z(two, anchors, 3) == pytest.approx(alpha, rel=1e-12)
  for probe in result.probes:
    mechanism = dataclasses.replace(BMINSEP, noise_multiplier=probe.sigma)
    if probe.outcome == 'order two':
      assert tilted_search.decided_by_order_two(mechanism, 3, EPSILON, 10**6) is False
      continue
    if probe.modelled:
      expected = tilted_plan.modelled_log_z(tilt_bound.partition(mechanism, 2).log_z,
                                            anchors, 3)
      assert probe.support == pytest.approx(
          math.exp(tilt_bound.log_support_bound(expected, 3, EPSILON)), rel=1e-12)
    else:
      assert probe.sigma in [sigma for sigma, _, _ in anchors]
    if probe.outcome == 'sampled':  # the proxy over α = 3 (as given) and the α = 2 chain
      log_z3 = math.log(probe.support) - tilt_bound.log_support_bound(0.0, 3, EPSILON)
      assert probe.proxy == pytest.approx(_oracle_proxy(probe.sigma, log_z3, [2]), rel=1e-9)
      assert probe.passes == (probe.proxy
                              <= tilted_plan.BOUNDARY_SUPPORT_RATIO * result.base_delta)
  assert any(probe.outcome == 'sampled' for probe in result.probes)
  _check_monotone(result)
  # The verification's support bound: the smallest candidate's M, computed (not modelled).
  smallest = dataclasses.replace(BMINSEP, noise_multiplier=result.candidates[0])
  assert result.support == pytest.approx(math.exp(tilt_bound.log_support_bound(
      tilt_bound.partition(smallest, 3).log_z, 3, EPSILON)), rel=1e-12)


def test_the_model_of_ln_z_is_a_power_law_through_its_anchors():
  # Oracle: ln Z_α = 2·(ln Z₂)^2.1 (the §7.4 shape's local exponent at α = 3), known exactly.
  anchors = ((0.4, 0.8, 2 * 0.8**2.1), (0.5, 0.5, 2 * 0.5**2.1))
  for two in (0.3, 0.6, 0.7, 1.2):
    assert tilted_plan.modelled_log_z(two, anchors, 3) == pytest.approx(2 * two**2.1,
                                                                      rel=1e-12)
  # One anchor: proportional; no interaction (ln Z₂ ≤ 0): an unamplified Gaussian's α(α−1)/2.
  assert tilted_plan.modelled_log_z(0.25, anchors[:1], 3) == pytest.approx(
      0.25 / 0.8 * anchors[0][2], rel=1e-12)
  assert tilted_plan.modelled_log_z(0.0, anchors, 4) == 0.0
  assert tilted_plan.modelled_log_z(-1e-3, (), 4) == pytest.approx(-6e-3, rel=1e-12)


def test_the_verification_and_the_projection_add_up(projected):
  result = projected
  grid = calibration.search_start.candidate_grid(result.boundary, result.sigma_up,
                                                 OPTIONS.grid_ratio, OPTIONS.num_candidates)
  assert result.candidates == tuple(grid[:-1])
  sizes, _ = bounds.resolve_direction_sizes(DELTA, None, DELTA / 2, {
      'remove': bounds.DirectionProposal(result.support, result.support),
      'add': bounds.DirectionProposal(1.0, 0.0)})
  assert result.verification_samples == {d: sizes[d].num_samples for d in DIRECTIONS}
  assert result.verification_samples['add'] == 0 < result.verification_samples['remove']
  costs = result.costs
  assert result.search_seconds == pytest.approx(sum(p.seconds for p in result.probes))
  for probe in result.probes:  # every σ past the α = 2 test builds the order-α tables
    assert probe.seconds >= costs.order_two + (costs.tables if probe.outcome != 'order two'
                                               else 0.0)
  assert result.verification_seconds == pytest.approx(
      len(result.candidates) * costs.tables + costs.add_bound + len(result.candidates)
      * tilted_plan._Projector(costs, result.block_size, result.blocks_per_call,
                               result.host_blocks).sampling(result.verification_samples))
  assert result.seconds_after_plan == pytest.approx(
      result.order_seconds + result.search_seconds + result.verification_seconds
      + result.report_seconds + result.figure_seconds)
  assert result.seconds_here == pytest.approx(result.seconds_after_plan
                                              + result.initial_seconds + costs.compile)
  assert min(costs.tables, costs.forward, costs.per_tuple, costs.remove_call) > 0.0
  record = result.to_dict()
  assert record['proposal'] == 'tilted' and len(record['probes']) == len(result.probes)


def test_the_sampling_projection_counts_passes_calls_and_tuples():
  costs = tilted_plan.TiltCosts(order_two=0.0, tables=1.0, add_bound=0.0, forward=10.0,
                                per_tuple=0.5,
                                remove_call=3.0, add_call=2.0, compile=0.0)
  projector = tilted_plan._Projector(costs, block_size=4, call_blocks=2, host_blocks=5)
  # 30 remove samples: 8 blocks, 4 calls, passes of 2 whole calls (5 blocks hold 2 calls).
  assert tilted_plan.host_passes(8, 2, 5) == [4, 4]
  expected = 2 * 10.0 + (4 + 4) * 4 * 0.5 + 4 * 3.0
  assert projector.sampling({'remove': 30, 'add': 0}) == expected
  assert projector.sampling({'remove': 0, 'add': 9}) == 2 * 2.0


@pytest.mark.parametrize('arguments, argument', [
    ({'samples_per_second': 1e6}, 'samples_per_second'),
    ({'target_devices': 64}, 'target_devices'),
])
def test_what_a_tilted_plan_cannot_honour_is_refused_first(monkeypatch, arguments, argument):
  def fail(*args, **kwargs):
    raise AssertionError('computed before refusing')
  monkeypatch.setattr(tilted_plan.tilted_lib, 'tilt_for', fail)
  with pytest.raises(jaxacct.InputError) as refused:
    plan.capacity_plan(BMINSEP, epsilon=EPSILON, delta=DELTA, monte_carlo=OPTIONS, **arguments)
  assert refused.value.argument == argument


@pytest.mark.parametrize('arguments, argument', [
    ({'delta': 1.5}, 'delta'),
    ({'monte_carlo': jaxacct.MonteCarloOptions()}, 'monte_carlo.proposal'),
    ({'monte_carlo': jaxacct.MonteCarloOptions(proposal='tilted', tilt_order=3,
                                               base_delta=2e-5)}, 'monte_carlo.base_delta'),
    ({'figure_seconds': -1.0}, 'figure_seconds'),
])
def test_a_tilted_plans_bad_input_is_named_before_any_compute(monkeypatch, arguments, argument):
  def fail(*args, **kwargs):
    raise AssertionError('computed before refusing')
  monkeypatch.setattr(tilted_plan.search_start, 'fallback_and_guess', fail)
  given = {'epsilon': EPSILON, 'delta': DELTA, 'monte_carlo': OPTIONS, **arguments}
  with pytest.raises(jaxacct.InputError) as refused:
    tilted_plan.tilted_capacity_plan(BMINSEP, **given)
  assert refused.value.argument == argument


def test_a_tilted_calibration_over_its_budget_is_refused_before_the_search(monkeypatch):
  def fail(*args, **kwargs):
    raise AssertionError('searched before refusing')
  monkeypatch.setattr(tilted_search, 'boundary', fail)
  with pytest.raises(plan.OverBudgetError) as refused:
    jaxacct.calibrate_noise_multiplier(
        BMINSEP.scheme, BMINSEP.matrix, epsilon=EPSILON, delta=DELTA, key=jax.random.key(1),
        monte_carlo=OPTIONS, run=jaxacct.RunOptions(ledger=jaxacct.VerificationLedger(),
                                                    max_seconds=1e-3))
  assert refused.value.run == 'the tilted calibration' and refused.value.seconds > 1e-3


@pytest.mark.parametrize('epsilon, sigma', [(1.0, 1.2), (2.0, 1.0), (4.0, 0.7)])
def test_the_best_orders_conversion_is_a_bounded_multiple_of_delta(epsilon, sigma):
  # Oracle: dp_accounting's PLD (``pld``, exact up to its discretisation, pessimistic) for
  # DP-SGD (q = 0.01, n = 1000; δ from 3·10⁻⁶ to 2·10⁻⁴ here). M(α′, ε) ≥ δ at every order
  # (Canonne, Kamath & Steinke (2020) Prop. 12), and F = M|_(Z = 1) is below 10⁻⁷·δ at the
  # best order, so the proxy is ≥ δ; its upper end is the plan's pass ratio (measured 3.2–10.7
  # on this mechanism, ``BOUNDARY_SUPPORT_RATIO``).
  mechanism = jaxacct.MatrixMechanism(jaxacct.Poisson(sampling_prob=0.01, iterations=1000),
                                      jaxacct.BandedToeplitz([1.0]), sigma)
  assert all(tilted_plan.is_cheap(mechanism, alpha, 10**6) for alpha in tilted_plan.PROXY_ORDERS)
  proxy = tilted_plan.proxy_delta({alpha: tilt_bound.partition(mechanism, alpha).log_z
                                   for alpha in tilted_plan.PROXY_ORDERS}, epsilon)
  delta = jaxacct.delta_for_epsilon(mechanism, epsilon, accountant='pld', direction='remove')
  assert delta <= proxy <= tilted_plan.BOUNDARY_SUPPORT_RATIO * delta


def test_auto_keeps_the_tilt_only_where_the_add_direction_is_certified(monkeypatch):
  # proposal='auto' in a calibration: tilted where tilted.add_bound ≤ δ_b at the proxy's
  # boundary (the search's model), plain otherwise; a given 'tilted' is never overridden, and
  # without a cheap order (no proxy) the tilt is kept.
  asked = []

  def bound(value):
    return lambda mechanisms, epsilon: asked.append(mechanisms[0].noise_multiplier) or value

  arguments = dict(guess=1.2, sigma_up=2.31, epsilon=EPSILON, base_delta=DELTA / 2,
                   precision='float64', state_budget=10**6)
  auto = jaxacct.MonteCarloOptions(proposal='auto')
  resolve = tilted_plan.resolve_calibration_order
  monkeypatch.setattr(tilted_plan.tilted_lib, 'add_bound', bound(1.0))
  assert resolve(auto, BMINSEP.scheme, BMINSEP.matrix, **arguments) == ('plain', None)
  # Asked once, at the proxy's boundary: passing there, failing one tolerance step below.
  (sigma,) = asked
  cheap = tilted_plan.cheap_orders(BMINSEP, arguments['state_budget'])

  def proxy(s):
    mechanism = dataclasses.replace(BMINSEP, noise_multiplier=s)
    return tilted_plan.proxy_delta({a: tilt_bound.partition(mechanism, a).log_z
                                    for a in cheap}, EPSILON)

  ceiling = tilted_plan.BOUNDARY_SUPPORT_RATIO * DELTA / 2
  assert proxy(sigma) <= ceiling < proxy(sigma / (1 + 2 * tilted_plan.AUTO_BOUNDARY_TOLERANCE))
  monkeypatch.setattr(tilted_plan.tilted_lib, 'add_bound', bound(0.0))
  proposal, order = resolve(auto, BMINSEP.scheme, BMINSEP.matrix, **arguments)
  assert proposal == 'tilted' and order >= 2
  monkeypatch.setattr(tilted_plan.tilted_lib, 'add_bound', bound(1.0))
  assert resolve(OPTIONS, BMINSEP.scheme, BMINSEP.matrix, **arguments) == ('tilted', 3)
  monkeypatch.setattr(tilted_plan, 'CHEAP_WORK', 0)
  assert resolve(auto, BMINSEP.scheme, BMINSEP.matrix, **arguments)[0] == 'tilted'
