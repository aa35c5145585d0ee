"""Capacity plan of a tilted calibration: the search it is projected to make, and what it costs.

A tilted calibration (``calibration._calibrate_tilted``) spends its time on the host as much as
on the device: per σ it builds the order-α tuple chain (``tilted.tilt_for``: ln Z_α and the
forward messages; ~40 s at the §7.4 shape, α = 3), each host pass of tuple draws recomputes the
forward messages and then samples every tuple backwards (``TupleChain.draw_blocks``), and the
device computes y, L and the terms per call (``engine/tilted.py``). The number of σ and their
samples follow from the search (``tilted_search.boundary``), so this plan **replays that search**
with the same arithmetic and rules, deciding each σ without sampling:

- by the search's own rules where it decides without samples: the α = 2 chain's "fails"
  (exact: computed here as the search computes it), M(α, ε) ≥ 1, the ``MAX_DEFAULT_SAMPLES``
  cap, M(α, ε) ≤ δ_b, and the add direction's (A1)/Rényi certificate (``tilted.add_bound``,
  exact); M(α, ε) is exact where ln Z_α is computed here — the search's first σ, at every σ when
  the order-α recursion is cheap (``CHEAP_WORK``) and, for α > 2, the first replay's boundary —
  and elsewhere modelled from the exact ln Z₂ by a power law
  through those two (``modelled_log_z``): the search is replayed a second time with both. ln Z_α
  moves fast with σ near the boundary (×16 in M(α, ε) over 3 % of σ at §7.4), so a model
  error moves the replayed σ by a few grid steps, not the number of σ;
- modelled where the search samples: a sampled σ is taken to pass when ``proxy_delta`` — min
  over the orders α′ known there of M(α′, ε) − F(α′, ε), F = e^{−(α′−1)ε}(α′−1)^{α′−1}/α′^α′
  being M's value at Z = 1 (σ → ∞) — is ≤ ``BOUNDARY_SUPPORT_RATIO``·δ_b. The orders known: the
  run's α, α = 2 where the search asks it first, and every α′ ≤ 16 whose recursion is cheap
  (``CHEAP_WORK``: closed forms, small chains), computed exactly at each σ. The best order's
  M tracks δ within a bounded factor; the run's own order, chosen at the initial guess, may be
  far from the best at the boundary (its M then overstates δ by 10²). A plainly sampled add
  direction is taken to pass with it. The plan lists the σ it replayed and which it modelled.

The verification is then projected at the replayed boundary (``search_start.candidate_grid``):
each candidate's tables, its remove samples N(S) (``bounds.resolve_direction_sizes`` with
S = max_k M_k, the smallest candidate's M, computed there) and its plain add samples unless
certified; and, when asked,
the report curve (plain draws at the released σ, as ``jaxacct calibrate`` draws it).

Measured here, once each: the starting points (σ_up, guess: cached, the run reuses them), the
α = 2 and order-α tables at the first σ of the search, ``TIMED_BLOCKS`` blocks of tuple draws
in one pass (the forward
recomputation's seconds apart from the per-tuple ones: ``draw_blocks(clock=)``), and the device
calls of both directions at the run's call shape (compiled and timed after compiling; the
run, in the same process, finds them compiled). A projection, never a guarantee: the
verification's samples and the release do not depend on it.

Host code around short device runs.

References:
  Andy Dong and Arun Ganesh, "Privacy Amplification for BandMF via b-Min-Sep Subsampling",
  arXiv:2602.09338 (v2): App. A (Algorithm 5), §7.4 (docs/references.md).
"""

from __future__ import annotations

import dataclasses
import math
import time
import typing

import jax
import numpy as np

from jaxacct import _validate
from jaxacct import options as options_lib
from jaxacct import progress as progress_lib
from jaxacct._precision import scoped_x64
from jaxacct.conventions import DIRECTIONS, Direction
from jaxacct.deterministic import tilt_bound
from jaxacct.deterministic._search import smallest_passing_sigma
from jaxacct.errors import InputError
from jaxacct.mechanism import MatrixMechanism
from jaxacct.montecarlo.engine import kernels, sampling, stream
from jaxacct.montecarlo.engine import keys as keys_lib
from jaxacct.montecarlo.engine.sharding import SampleMesh
from jaxacct.montecarlo.engine.tilted import TiltedDraws, host_blocks_for
from jaxacct.montecarlo.evr import bounds, search_start, tilted_search
from jaxacct.montecarlo.evr import tilted as tilted_lib

BOUNDARY_SUPPORT_RATIO = 12.0
"""``proxy_delta``/δ_b at or below which the plan takes a sampled σ to pass (the search passes
where δ̂ ≤ δ_b, so at its boundary δ ≈ δ_b). The best integer order's conversion is a bounded
multiple of δ — min over α′ ∈ 2…16 of M(α′, ε) / the exact δ (dp_accounting's PLD) measured
3.2–10.7 on DP-SGD (q = 0.01, n = 1000; ε ∈ {1, 2, 4}, δ from 10⁻⁶ to 10⁻²) and 6.9–8.3 on
cyclic Poisson (n = 400, T = 8, 8 bands, ε = 3, δ from 2·10⁻⁷ to 3·10⁻⁶) — while one order's
is not (α = 4 on that cyclic Poisson: 40 at δ = 2.6·10⁻⁶, 285 at 2.2·10⁻⁷: it put the replayed
boundary at σ = 2.12 against the search's 1.33). Where only α ≤ 3 is known (the §7.4 shape) the
verified boundaries had M(3, ε)/δ_b = 20.7 (§7.4) and 16.5 (the quickstart): with 12 the §7.4
replay follows the real search's nine σ exactly (M moves ×16 over 3 % of σ there)."""

CHEAP_WORK = 20_000_000
"""States × rounds of an order's recursion at or below which the plan computes its ln Z_α at
every σ it replays (~0.1 s; closed forms always): exact M for the run's order, and the orders
2…16 of ``proxy_delta``. Above it, ln Z_α of the run's order is modelled (``modelled_log_z``)."""

PROXY_ORDERS = range(2, 17)


# Blocks of tuples drawn to time the sampler: the per-round overhead of the backward pass is
# shared by a pass's tuples, so one small block would overstate the per-tuple cost.
TIMED_BLOCKS = 4


@dataclasses.dataclass(frozen=True)
class TiltCosts:
  """Seconds measured here for one σ of a tilted run (one process, the run's devices).

  Attributes:
    order_two: the α = 2 chain the search asks first at each σ (0 when α = 2 or over budget).
    tables: the order-α tilt (``tilted.tilt_for``: the chain's forward pass and ln Z_α).
    add_bound: the add direction's bound (``tilted.add_bound``; Poisson: ~30 quadratures),
      asked at every σ whose M(α, ε) < 1.
    forward: one host pass's recomputation of the forward messages (``draw_blocks``).
    per_tuple: host seconds per α-tuple drawn beyond the recomputation.
    remove_call / add_call: one device call of the tilted remove direction (tuples given) and
      of the plain add direction, at the run's call shape.
    compile: the excess of the first calls over the timed ones (both directions).
  """

  order_two: float
  tables: float
  add_bound: float
  forward: float
  per_tuple: float
  remove_call: float
  add_call: float
  compile: float


@dataclasses.dataclass(frozen=True)
class Probe:
  """One σ of the replayed search: how it is decided (``"order two"``, ``"M >= 1"``, ``"over
  cap"``, ``"certified"`` or ``"sampled"``), whether it passes, its samples per direction, M(α,
  ε) (modelled where ``modelled``), its projected seconds, and where sampled the
  ``proxy_delta`` that decided it (else None)."""

  sigma: float
  outcome: str
  passes: bool
  samples: dict
  support: float
  modelled: bool
  seconds: float
  proxy: float | None = None


@dataclasses.dataclass(frozen=True)
class TiltedCapacityPlan:
  """What a tilted calibration costs (module docstring).

  Attributes:
    order: α. base_delta: δ_b. sigma_up / initial_guess: the search's starting points.
    anchors: ((σ, ln Z₂, ln Z_α), …) where ln Z_α was computed here (the search's first σ
      and, for α > 2, the first replay's boundary): the model of the other σ
      (``modelled_log_z``).
    probes: the replayed search, in order (``Probe``).
    boundary: the σ the replayed search ends at (the candidates' centre).
    candidates: the Monte Carlo candidates projected (the fallback's σ_up not included).
    verification_samples: per direction, N per candidate (0: certified).
    support: S = max_k M_k of the candidates (the smallest candidate's, computed).
    costs: ``TiltCosts``.
    block_size / blocks_per_call / host_blocks: the run's block, call and host-pass sizes.
    initial_seconds / plan_seconds: the starting points, and this plan's measurements (the
      run recomputes both).
    order_seconds: choosing α (``proposal='auto'`` without ``tilt_order``: ln Z_α of every
      searchable order at the first guess, ``tilted_search.resolve_order``; ~0 when α is
      given), which the run repeats.
    search_seconds / verification_seconds / report_seconds / figure_seconds: the phases.
    seconds_here: the run in a fresh process; seconds_after_plan: after this plan in this
      process (its compiles and starting points reused; the run's tables and draws are its
      own).
  """

  order: int
  base_delta: float
  sigma_up: float
  initial_guess: float
  anchors: tuple
  probes: tuple
  boundary: float
  candidates: tuple
  verification_samples: dict
  support: float
  costs: TiltCosts
  block_size: int
  blocks_per_call: int
  host_blocks: int
  initial_seconds: float
  plan_seconds: float
  order_seconds: float
  search_seconds: float
  verification_seconds: float
  report_seconds: float
  figure_seconds: float
  seconds_here: float
  seconds_after_plan: float

  def to_dict(self) -> dict:
    record = dataclasses.asdict(self)
    record['proposal'] = 'tilted'
    return record


def host_passes(num_blocks: int, call_blocks: int, host_blocks: int) -> list[int]:
  """Blocks drawn by each host pass of a run of ``num_blocks`` blocks in calls of
  ``call_blocks`` (the rule of ``TiltedDraws.draw_tuples``: a pass draws whole calls, as many
  as ``host_blocks`` holds and at least one, up to the call that holds the run's last block —
  its padding blocks included)."""
  calls = -(-num_blocks // call_blocks)
  per_pass = max(1, host_blocks // call_blocks)
  return [call_blocks * min(per_pass, calls - first)
          for first in range(0, calls, per_pass)]


class _Projector:
  """Seconds of a tilted run's phases from ``TiltCosts`` and the run's sizes."""

  def __init__(self, costs: TiltCosts, block_size: int, call_blocks: int, host_blocks: int):
    self.costs, self.block_size = costs, block_size
    self.call_blocks, self.host_blocks = call_blocks, host_blocks

  def calls(self, samples: int) -> int:
    return -(-samples // (self.call_blocks * self.block_size))

  def sampling(self, samples: dict) -> float:
    """One candidate's draws: ``samples[d]`` per direction (0: none)."""
    remove, add = samples[Direction.REMOVE.value], samples[Direction.ADD.value]
    seconds = self.calls(add) * self.costs.add_call
    if remove:
      blocks = -(-remove // self.block_size)
      passes = host_passes(blocks, self.call_blocks, self.host_blocks)
      seconds += (len(passes) * self.costs.forward
                  + sum(passes) * self.block_size * self.costs.per_tuple
                  + self.calls(remove) * self.costs.remove_call)
    return seconds


def _timed(function, *args, **kwargs):
  started = time.perf_counter()
  value = function(*args, **kwargs)
  return value, time.perf_counter() - started


def _device_costs(mechanism: MatrixMechanism, tilt, block, *, block_size: int,
                  blocks_per_call: int, mesh: SampleMesh,
                  directions=DIRECTIONS) -> tuple[float, float, float]:
  """(remove call, add call, compiles) in seconds: ``stream.accumulate`` over one call of each
  of ``directions`` (0 for the others) of a ``TiltedDraws`` whose sampler returns ``block``
  (tuples drawn here) for every block — the device work of the run's calls without their host
  draws — first compiling, then timed."""
  call_samples = blocks_per_call * mesh.size * block_size
  program = TiltedDraws(
      mechanism=mechanism, kernel=kernels.kernel_for(mechanism, np.dtype(np.float64)),
      block_size=block_size, mesh=mesh,
      tuples=lambda rngs, count: np.broadcast_to(block, (len(rngs),) + block.shape),
      tuple_key=keys_lib.host_stream_key(jax.random.key(0), 'estimation', 'remove'),
      order=tilt.order, log_z=tilt.log_z, log_support=tilt.log_support)
  stream_key = keys_lib.purpose_key(jax.random.key(0), 'estimation')

  def once(direction: str) -> float:
    counts = {d: call_samples if d == direction else 0 for d in DIRECTIONS}
    state = stream.StreamState(stream.BlockSums.zeros(1, tilt.epsilons.size))
    _, seconds = _timed(stream.accumulate, lambda d: keys_lib.direction_key(stream_key, d),
                        program, state, num_samples=counts, first_block=0,
                        block_size=block_size, blocks_per_call=blocks_per_call, mesh=mesh,
                        epsilons=tilt.epsilons, edges=None)
    return seconds

  seconds, compiles = {d: 0.0 for d in DIRECTIONS}, 0.0
  for direction in directions:
    first = once(direction)
    seconds[direction] = once(direction)
    compiles += max(0.0, first - seconds[direction])
  return seconds[Direction.REMOVE.value], seconds[Direction.ADD.value], compiles


class _Measured(typing.NamedTuple):
  tilt: tilted_lib.Tilt
  log_z2: float
  order_two: bool  # the search asks the α = 2 chain first at each σ
  projector: '_Projector'  # its costs: every ``TiltCosts`` of the first σ


def _measure(first: MatrixMechanism, order: int, epsilon: float, *, budget: int,
             mesh: SampleMesh, blocks_per_call: int | None, progress) -> _Measured:
  """The measurements at the search's first σ (``first``): the α = 2 and order-α tables, the
  add bound, a host pass of ``TIMED_BLOCKS`` blocks of draws, the device calls."""
  iterations = first.iterations
  two_states, _ = tilt_bound.state_space(first, 2)
  progress_lib.announce(progress, f'timing the α = {order} tilt at σ = '
                                  f'{float(first.noise_multiplier):.6g} (host tables: a minute '
                                  f'at the §7.4 shape) and a host pass of {TIMED_BLOCKS} blocks '
                                  'of tuple draws…')
  tilt, table_seconds = _timed(tilted_lib.tilt_for, first, order, [epsilon],
                               state_budget=budget)
  log_z2, two_seconds = tilt.log_z, table_seconds
  if order > 2:
    log_z2, two_seconds = _timed(lambda: tilt_bound.partition(first, 2,
                                                              state_budget=budget).log_z)
  # The add direction's bound is asked at every σ too (Poisson: ~30 quadratures).
  _, add_seconds = _timed(tilted_lib.add_bound, [first], epsilon)
  order_two = order > 2 and two_states <= budget
  sampler = _sampling_costs(first, tilt, mesh=mesh, blocks_per_call=blocks_per_call,
                            progress=progress)
  costs = dataclasses.replace(sampler.costs, order_two=two_seconds if order_two else 0.0,
                              tables=table_seconds, add_bound=add_seconds)
  return _Measured(tilt, log_z2, order_two,
                   _Projector(costs, sampler.block_size, sampler.call_blocks,
                              sampler.host_blocks))


def _sampling_costs(mechanism: MatrixMechanism, tilt, *, mesh: SampleMesh,
                    blocks_per_call: int | None, progress, directions=DIRECTIONS,
                    block_size: int | None = None) -> _Projector:
  """A ``_Projector`` of ``mechanism``'s draws at its built ``tilt`` (tables not charged): a
  host pass of ``TIMED_BLOCKS`` blocks (forward recomputation timed apart from the per-tuple
  work; only when the remove direction is among ``directions``) and one compiled, then one
  timed device call per direction of ``directions`` at the run's call shape (the others
  cost 0)."""
  iterations = mechanism.iterations
  block_size = block_size or sampling.default_block_size(iterations)
  blocks_per_call = blocks_per_call or sampling.default_blocks_per_call(block_size, iterations)
  host_blocks = host_blocks_for(block_size, tilt.order, iterations)
  clock, timed_blocks = {}, min(host_blocks, TIMED_BLOCKS)
  block, draw_seconds = None, 0.0
  if Direction.REMOVE.value in directions:
    rngs = [np.random.Generator(np.random.Philox(key=b)) for b in range(timed_blocks)]
    drawn, draw_seconds = _timed(tilt.chain.draw_blocks, rngs, block_size, clock=clock)
    block = drawn[0]
  forward = clock.get('forward', 0.0)
  names = {Direction.REMOVE.value: 'tilted remove', Direction.ADD.value: 'plain add'}
  progress_lib.announce(progress, 'compiling and timing the '
                                  f'{" and ".join(names[d] for d in directions)} calls '
                                  f'({blocks_per_call} blocks of {block_size:,} per device)…')
  remove_call, add_call, compiles = _device_costs(
      mechanism, tilt, block, block_size=block_size, blocks_per_call=blocks_per_call,
      mesh=mesh, directions=directions)
  costs = TiltCosts(order_two=0.0, tables=0.0, add_bound=0.0, forward=forward,
                    per_tuple=max(0.0, draw_seconds - forward) / (timed_blocks * block_size),
                    remove_call=remove_call, add_call=add_call, compile=compiles)
  return _Projector(costs, block_size, blocks_per_call * mesh.size, host_blocks)


@scoped_x64
def tilted_sampling_seconds(mechanisms, tilts, samples: dict, *, run: options_lib.RunOptions,
                            block_size: int, state: stream.StreamState | None = None) -> float:
  """Projected seconds of drawing ``samples[d]`` per direction (0: none) for each of
  ``mechanisms`` at its built ``tilts[k]`` in blocks of ``block_size`` — a tilted
  verification's or estimate's sampling, so that ``run.max_seconds`` can refuse it before any
  sample (``verification.verify``, ``estimate_delta``) — or, from a resumed ``state``, what it
  has left (``StreamState.blocks_left``). Measured here on the first mechanism
  (``_sampling_costs``: its tuple draws and device calls, which the run then reuses compiled)
  and scaled per mechanism by the host-pass rule of ``TiltedDraws`` (``host_passes``); the
  compiles are included, the tables (already built) are not."""
  remaining = [dict(samples)] * len(mechanisms)
  if state is not None:
    remaining = [{d: min(samples[d], blocks[i] * block_size) for i, d in enumerate(DIRECTIONS)}
                 for blocks in state.blocks_left(num_samples=samples, first_block=0,
                                                 block_size=block_size,
                                                 num_programs=len(mechanisms))]
  directions = tuple(d for d in DIRECTIONS if any(r[d] for r in remaining))
  if not directions:
    return 0.0
  projector = _sampling_costs(mechanisms[0], tilts[0], mesh=SampleMesh.over(run.devices),
                              blocks_per_call=run.blocks_per_call, progress=run.progress,
                              directions=directions, block_size=block_size)
  return projector.costs.compile + sum(projector.sampling(r) for r in remaining)


class _LogPartitions:
  """ln Z₂ (exact, computed as asked, once per σ), ln Z_α (exact where cheap or at the anchors,
  else ``modelled_log_z``) and the proxy of δ (``proxy_delta``) of one scheme and strategy at
  any σ."""

  def __init__(self, scheme, matrix, order: int, budget: int, sigma: float, log_z2: float,
               log_z: float, epsilon: float):
    self.scheme, self.matrix, self.order, self.budget = scheme, matrix, order, budget
    self.epsilon = epsilon
    self._two = {sigma: log_z2}
    self._exact = {sigma: log_z}
    self.anchors = [(sigma, log_z2, log_z)]
    self.cheap_orders = cheap_orders(MatrixMechanism(scheme, matrix, sigma), budget)

  def _partition(self, sigma: float, alpha: int) -> float:
    return tilt_bound.partition(MatrixMechanism(self.scheme, self.matrix, sigma), alpha,
                                state_budget=self.budget).log_z

  def order_two(self, sigma: float) -> float:
    if sigma not in self._two:
      self._two[sigma] = self._partition(sigma, 2)
    return self._two[sigma]

  def is_exact(self, sigma: float) -> bool:
    return sigma in self._exact or self.order in self.cheap_orders

  def compute(self, sigma: float) -> float:
    """ln Z_α at σ, computed (the order-α chain's forward pass) and kept: exact there."""
    if sigma not in self._exact:
      self._exact[sigma] = self._partition(sigma, self.order)
    return self._exact[sigma]

  def anchor(self, sigma: float) -> None:
    """``compute`` at σ, and the model anchored there."""
    self.anchors.append((sigma, self.order_two(sigma), self.compute(sigma)))

  def log_z(self, sigma: float) -> tuple[float, bool]:
    """(ln Z_α at σ, whether modelled): exact at the anchors, for α = 2 and for a cheap α."""
    if sigma in self._exact:
      return self._exact[sigma], False
    if self.order == 2:
      return self.order_two(sigma), False
    if self.order in self.cheap_orders:
      return self.compute(sigma), False
    return modelled_log_z(self.order_two(sigma), self.anchors, self.order), True

  def proxy_delta(self, sigma: float, log_z: float, order_two: bool) -> float:
    """min over the orders known at σ of M(α′, ε) − F(α′, ε) (``proxy_delta``): the run's α
    (``log_z``, exact or modelled), the cheap orders (exact), and α = 2 when the search asks
    it first (``order_two``)."""
    known = {self.order: log_z}
    if order_two:
      known[2] = self.order_two(sigma)
    for alpha in self.cheap_orders:
      if alpha not in known:
        known[alpha] = self.order_two(sigma) if alpha == 2 else self._partition(sigma, alpha)
    return proxy_delta(known, self.epsilon)


def cheap_orders(mechanism: MatrixMechanism, budget: int) -> tuple[int, ...]:
  """The orders of ``PROXY_ORDERS`` that ``is_cheap`` (states do not depend on σ)."""
  return tuple(alpha for alpha in PROXY_ORDERS if is_cheap(mechanism, alpha, budget))


def is_cheap(mechanism: MatrixMechanism, alpha: int, budget: int) -> bool:
  """Whether ln Z_α of ``mechanism`` is cheap enough to compute at every σ of the replayed
  search (states × rounds ≤ ``CHEAP_WORK``, closed forms always; within the state ``budget``):
  the plan then uses it exactly, not modelled."""
  states, _ = tilt_bound.state_space(mechanism, alpha)
  return states <= budget and (states <= 1 or states * mechanism.iterations <= CHEAP_WORK)


def proxy_delta(log_partitions: dict, epsilon: float) -> float:
  """The plan's proxy of δ(ε) at a σ where the search samples: min over the orders α′ of
  ``log_partitions`` (α′ → ln Z_α′) of M(α′, ε) − F(α′, ε), with M the conversion of the
  tilted term bound (``tilt_bound.log_support_bound``: the δ of Canonne, Kamath & Steinke
  (2020) Prop. 12 at D_α = ln Z_α/(α − 1)) and F its value at Z = 1 (σ → ∞: M − F → 0 as δ
  does). The best order's M is a bounded multiple of δ where a single order's is not
  (``BOUNDARY_SUPPORT_RATIO``): a projection's model, never a bound."""
  values = [math.exp(min(0.0, tilt_bound.log_support_bound(log_z, alpha, epsilon)))
            - math.exp(tilt_bound.log_support_bound(0.0, alpha, epsilon))
            for alpha, log_z in log_partitions.items()]
  return max(0.0, min(values))


AUTO_BOUNDARY_TOLERANCE = 0.02  # the proxy boundary only decides plain vs tilted


def resolve_calibration_order(monte_carlo, scheme, matrix, *, guess: float, sigma_up: float,
                              epsilon: float, base_delta: float, precision: str,
                              state_budget: int, progress=None) -> tuple[str, int | None]:
  """(proposal, α) of a calibration: ``tilted_search.resolve_order``, and then, for
  ``proposal='auto'``, plain where the tilt would cost more than it saves.

  The tilt saves samples in the remove direction only. Where the add direction is not
  certified by a proven bound ≤ δ_b near the boundary, it is sampled plainly at ~50/δ_b per
  searched σ, without the plain sweeps' draws shared across 16 σ, and the tilted calibration
  is slower than the plain one (the quickstart at (2, 10⁻⁵): 41 min projected against 4.4).
  So ``auto`` keeps the tilt when ``tilted.add_bound`` ≤ δ_b at the σ where ``proxy_delta``
  over the cheap orders (``is_cheap``) reaches ``BOUNDARY_SUPPORT_RATIO``·δ_b — the plan's
  model of the search's boundary — or when no order is cheap (the §7.4 shape, whose add
  direction (A1) certifies), and chooses plain otherwise, said under ``progress``. The choice
  moves cost, never soundness: either proposal verifies what it releases."""
  first = MatrixMechanism(scheme, matrix, guess)
  proposal, order = tilted_search.resolve_order(monte_carlo, first, epsilon, base_delta,
                                                precision, state_budget)
  if monte_carlo.proposal != 'auto' or proposal == 'plain':
    return proposal, order
  cheap = cheap_orders(first, state_budget)
  if not cheap:
    return proposal, order

  def passes(sigma: float) -> bool:
    mechanism = MatrixMechanism(scheme, matrix, sigma)
    return proxy_delta({alpha: tilt_bound.partition(mechanism, alpha,
                                                    state_budget=state_budget).log_z
                        for alpha in cheap}, epsilon) <= BOUNDARY_SUPPORT_RATIO * base_delta

  boundary = min(float(sigma_up), smallest_passing_sigma(
      passes, tolerance=AUTO_BOUNDARY_TOLERANCE, floor=tilted_search.SIGMA_FLOOR,
      start=min(float(guess), float(sigma_up))))
  add = tilted_lib.add_bound([MatrixMechanism(scheme, matrix, boundary)], epsilon)
  if add is not None and add <= base_delta:
    return proposal, order
  progress_lib.announce(progress, f"proposal 'auto': plain sampling — near the boundary (σ ≈ "
                                  f'{boundary:.4g}) the add direction has no proven bound ≤ '
                                  f'δ_b (best {"none" if add is None else f"{add:.3g}"}), so '
                                  'it would be sampled plainly per searched σ, slower than the '
                                  "plain sweeps' shared draws")
  return 'plain', None


def _verification_samples(candidates, model: _LogPartitions, *, delta: float,
                          base_delta: float, epsilon: float, monte_carlo) -> tuple[dict, float]:
  """(N per direction, S) of the tilted verification of ``candidates`` (the fallback's σ_up
  not among them), sized as ``verification.py`` sizes it (``bounds.resolve_direction_sizes``
  on ``tilted.direction_proposals``' bounds, S from ``model``: computed at the smallest
  candidate by the plan); ``InputError`` where S ≥ 1, which the verification would refuse
  after the search."""
  order = model.order
  supports = [math.exp(tilt_bound.log_support_bound(
      model.log_z(float(m.noise_multiplier))[0], order, epsilon)) for m in candidates]
  support = max(supports) if supports else 0.0
  if support >= 1.0:
    raise InputError(argument='monte_carlo.tilt_order', value=order, requirement=(
        f'is projected to give the candidates from σ ≈ '
        f'{float(candidates[0].noise_multiplier):.6g} the support bound M(α, ε) = '
        f'{support:.4g} >= 1 (modelled): the tilted verification would refuse them after the '
        'search; choose another order'), suggestion={'monte_carlo.proposal': 'plain'})
  if not candidates:
    return {d: 0 for d in DIRECTIONS}, support
  sizes, _ = bounds.resolve_direction_sizes(
      delta, monte_carlo.num_samples, base_delta, {
          Direction.REMOVE.value: bounds.DirectionProposal(support, support),
          Direction.ADD.value: bounds.DirectionProposal(
              1.0, tilted_lib.add_bound(candidates, epsilon))},
      attempts=monte_carlo.attempt)
  return {d: int(sizes[d].num_samples) for d in DIRECTIONS}, support


def refuse_estimate_only(monte_carlo: options_lib.MonteCarloOptions) -> None:
  """``InputError`` naming ``monte_carlo.estimate_only`` when set with a tilted proposal: a
  tilted calibration (and so its plan) has no estimate-only mode yet."""
  if monte_carlo.estimate_only:
    raise InputError(argument='monte_carlo.estimate_only', requirement=(
        f'is not available with proposal={monte_carlo.proposal!r} yet'),
        suggestion={'monte_carlo.proposal': 'plain'})


@scoped_x64
def tilted_capacity_plan(mechanism: MatrixMechanism, *, epsilon: float, delta: float,
                         monte_carlo: options_lib.MonteCarloOptions, report_epsilons=None,
                         figure_seconds: float = 0.0, run: options_lib.RunOptions | None = None
                         ) -> TiltedCapacityPlan | None:
  """The capacity plan of ``calibrate_noise_multiplier`` with ``monte_carlo.proposal`` tilted
  (or ``"auto"``), or None when ``"auto"`` resolves to plain sampling at the initial guess
  (``tilted.resolve_proposal``, as the calibration decides): the replayed search of the module
  docstring, the verification at its boundary, and their seconds from measurements here.

  Args:
    mechanism: scheme and strategy (σ is not used).
    epsilon, delta: as ``calibrate_noise_multiplier``.
    report_epsilons: the ε grid of the report curve drawn after the calibration (the CLI's),
      or None.
    figure_seconds: seconds of the report's figures (host), added to the projections.
    monte_carlo: the calibration's ``MonteCarloOptions`` (``proposal`` ``"tilted"`` with its
      ``tilt_order``, or ``"auto"``).
    run: ``RunOptions`` (its devices, blocks per call and progress; the rest is the run's).

  Raises:
    InputError: before any sample, as the calibration would (the tilt does not cover the
      mechanism, an order over the state budget).

  References:
    Dong & Ganesh (2026) App. A and §7.4; Chua et al., AISTATS 2025, Fact 4.2.
  """
  if not isinstance(monte_carlo, options_lib.MonteCarloOptions):
    raise InputError(argument='monte_carlo', value=monte_carlo,
                     requirement='must be a MonteCarloOptions')
  if monte_carlo.proposal == 'plain':
    raise InputError(argument='monte_carlo.proposal', value='plain', requirement=(
        "must be 'tilted' or 'auto' here (plan.capacity_plan plans a plain calibration)"))
  refuse_estimate_only(monte_carlo)
  sampling.check_mechanism(mechanism)
  epsilon = _validate.finite_real('epsilon', epsilon)
  delta = _validate.probability('delta', delta)
  base = monte_carlo.base_delta if monte_carlo.base_delta is not None else delta / 2
  if not 0.0 < base < delta:
    raise InputError(argument='monte_carlo.base_delta', value=base,
                     requirement=f'must lie in (0, delta = {delta})')
  figure_seconds = _validate.finite_real('figure_seconds', figure_seconds)
  if figure_seconds < 0:
    raise InputError(argument='figure_seconds', value=figure_seconds, requirement='must be >= 0')
  given = None if run is None else run.progress
  run = options_lib.run_options(run)
  progress = False if given is False else run.progress
  mesh = SampleMesh.over(run.devices)
  budget = monte_carlo.tilt_state_budget or tilt_bound.DEFAULT_STATE_BUDGET
  fallback = search_start.fallback_accountant(monte_carlo.fallback)
  search_start.check_fallback(fallback, mechanism)
  started = time.perf_counter()
  progress_lib.announce(progress, 'planning the tilted calibration: the σ search\'s starting '
                                  f'points (the {fallback.name} fallback\'s σ_up and the '
                                  'initial guess)…')
  (sigma_up, guess), initial_seconds = _timed(search_start.fallback_and_guess, mechanism.scheme,
                                              mechanism.matrix, fallback, epsilon, base)
  scheme, matrix = mechanism.scheme, mechanism.matrix
  start = min(float(guess), float(sigma_up))
  (proposal, order), order_seconds = _timed(
      resolve_calibration_order, monte_carlo, scheme, matrix, guess=guess, sigma_up=sigma_up,
      epsilon=epsilon, base_delta=base, precision=monte_carlo.precision, state_budget=budget,
      progress=progress)
  if proposal == 'plain':
    return None
  first = MatrixMechanism(scheme, matrix, start)

  with progress_lib.heartbeat(progress, 'the tilted plan\'s measurements'):
    measured = _measure(first, order, epsilon, budget=budget, mesh=mesh,
                        blocks_per_call=run.blocks_per_call, progress=progress)
  projector = measured.projector
  costs = projector.costs
  model = _LogPartitions(scheme, matrix, order, budget, start, measured.log_z2,
                         measured.tilt.log_z, epsilon)

  def replay() -> tuple[list[Probe], float]:
    probes: list[Probe] = []

    def meets(sigma: float) -> bool:
      if sigma >= sigma_up:
        return True  # by the fallback's proof, as in the search
      if not any(p.sigma == sigma for p in probes):  # each σ once, as in the search
        probes.append(_probe(MatrixMechanism(scheme, matrix, sigma), order=order,
                             epsilon=epsilon, base_delta=base, order_two=measured.order_two,
                             estimation_samples=monte_carlo.estimation_samples, model=model,
                             projector=projector))
      return next(p.passes for p in probes if p.sigma == sigma)

    found = smallest_passing_sigma(meets, tolerance=monte_carlo.grid_ratio - 1.0,
                                   floor=tilted_search.SIGMA_FLOOR, start=start)
    return probes, min(found, float(sigma_up))

  progress_lib.announce(progress, 'replaying the σ search on the α = 2 chain…')
  probes, boundary = replay()
  if order > 2 and boundary < sigma_up and not model.is_exact(boundary):
    # The model's second anchor where the candidates lie, and the search replayed with both.
    progress_lib.announce(progress, f'the α = {order} tables at the replayed boundary σ = '
                                    f'{boundary:.6g}, and the search replayed again…')
    with progress_lib.heartbeat(progress, f'the α = {order} tables'):
      model.anchor(boundary)
    probes, boundary = replay()
  grid = search_start.candidate_grid(boundary, sigma_up, monte_carlo.grid_ratio,
                                     monte_carlo.num_candidates)[:-1]
  if grid and not model.is_exact(grid[0]):
    # S = max_k M_k is the smallest candidate's M (M falls with σ): computed, not modelled,
    # so the verification's N is exact at the replayed boundary (one more table).
    progress_lib.announce(progress, f'the α = {order} tables at the smallest candidate σ = '
                                    f'{grid[0]:.6g} (the verification\'s support bound)…')
    with progress_lib.heartbeat(progress, f'the α = {order} tables'):
      model.compute(grid[0])
  plan_seconds = time.perf_counter() - started - initial_seconds
  verification, support = _verification_samples(
      [MatrixMechanism(scheme, matrix, s) for s in grid], model, delta=delta, base_delta=base,
      epsilon=epsilon, monte_carlo=monte_carlo)
  verification_seconds = (len(grid) * (costs.tables + projector.sampling(verification))
                          + costs.add_bound)
  report_seconds = 0.0
  if report_epsilons is not None:
    drawn = [max(p.samples.values()) for p in probes]
    curve = max(max(drawn or [0]), tilted_search.MIN_DEFAULT_SAMPLES)
    report_seconds = 2 * projector.calls(curve) * costs.add_call  # plain, both directions
  search_seconds = sum(p.seconds for p in probes)
  after_plan = (order_seconds + search_seconds + verification_seconds + report_seconds
                + figure_seconds)
  block_size, blocks_per_call = projector.block_size, projector.call_blocks // mesh.size
  return TiltedCapacityPlan(
      order=order, base_delta=base, sigma_up=float(sigma_up), initial_guess=float(guess),
      anchors=tuple(sorted(model.anchors)), probes=tuple(probes), boundary=boundary,
      candidates=tuple(grid), verification_samples=verification, support=support, costs=costs,
      block_size=block_size, blocks_per_call=blocks_per_call, host_blocks=projector.host_blocks,
      initial_seconds=initial_seconds, plan_seconds=plan_seconds - order_seconds,
      order_seconds=order_seconds, search_seconds=search_seconds, verification_seconds=verification_seconds,
      report_seconds=report_seconds, figure_seconds=figure_seconds,
      seconds_here=after_plan + initial_seconds + costs.compile, seconds_after_plan=after_plan)


def modelled_log_z(log_z2: float, anchors, order: int) -> float:
  """ln Z_α at a σ where only ln Z₂ is computed, from ``anchors`` ((σ, ln Z₂, ln Z_α) where
  both are): a power law ln Z_α = c·(ln Z₂)^k through the anchors — k from two anchors (exact
  at both), 1 with one (ln Z_α ∝ ln Z₂). The §7.4 shape at α = 3 shows why not a constant
  ratio: ln Z₃/ln Z₂ is 20.4, 15.0 and 12.2 at σ = 0.419, 0.437 and 0.449 (ln Z₂ = 0.80,
  0.59, 0.50), where the power law's k is ≈ 2.1 on both intervals. Where ln Z₂ ≤ 0 (no
  interaction) ln Z_α is taken as α(α−1)/2·ln Z₂, an unamplified Gaussian's relation."""
  usable = [(two, alpha) for _, two, alpha in anchors if two > 0.0 and alpha > 0.0]
  if log_z2 <= 0.0 or not usable:
    return order * (order - 1) / 2.0 * log_z2
  (two_low, alpha_low), (two_high, alpha_high) = min(usable), max(usable)
  exponent = 1.0
  if two_high > two_low:
    exponent = math.log(alpha_high / alpha_low) / math.log(two_high / two_low)
  return alpha_low * math.exp(exponent * math.log(log_z2 / two_low))


def _probe(mechanism: MatrixMechanism, *, order: int, epsilon: float, base_delta: float,
           order_two: bool, estimation_samples: int | None, model: _LogPartitions,
           projector: _Projector) -> Probe:
  """One σ of the replayed search: ``tilted_search.boundary``'s rules (module docstring), the
  α = 2 chain first where the search asks it (``order_two``), ln Z_α from ``model``."""
  sigma = float(mechanism.noise_multiplier)
  costs = projector.costs
  seconds = costs.order_two
  none = {d: 0 for d in DIRECTIONS}
  if order_two and tilted_search.fails_by_order_two(model.order_two(sigma), order, epsilon):
    return Probe(sigma, 'order two', False, none, 1.0, False, seconds)
  seconds += costs.tables
  value, modelled = model.log_z(sigma)
  log_support = tilt_bound.log_support_bound(value, order, epsilon)
  support = math.exp(min(log_support, 0.0))
  if not log_support < 0.0:
    return Probe(sigma, 'M >= 1', False, none, 1.0, modelled, seconds)
  seconds += costs.add_bound
  add = tilted_lib.add_bound([mechanism], epsilon)
  certified = {Direction.REMOVE.value: support <= base_delta,
               Direction.ADD.value: add is not None and add <= base_delta}
  count = estimation_samples or tilted_search.default_samples(
      support, base_delta, certified[Direction.ADD.value])
  if (estimation_samples is None and not certified[Direction.REMOVE.value]
      and tilted_search.default_samples(support, base_delta, True)
      > tilted_search.MAX_DEFAULT_SAMPLES):
    return Probe(sigma, 'over cap', False, none, support, modelled, seconds)
  samples = {d: 0 if certified[d] else count for d in DIRECTIONS}
  if not any(samples.values()):
    return Probe(sigma, 'certified', True, samples, support, modelled, seconds)
  proxy = model.proxy_delta(sigma, value, order_two)
  return Probe(sigma, 'sampled', proxy <= BOUNDARY_SUPPORT_RATIO * base_delta, samples, support,
               modelled, seconds + projector.sampling(samples), proxy)
