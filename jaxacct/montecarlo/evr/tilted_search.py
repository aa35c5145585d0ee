"""The σ search of a tilted calibration: where δ̂(σ) crosses δ_b, on the estimation stream.

The plain calibration's sweeps share one draw across 16 σ (``candidates.py``); tilted draws
depend on σ (the α-tuples' law π_α does), so a tilted calibration bisects instead, one tilted
estimate per σ (``tilted.run_tilted_sweep`` with N_est draws per direction on the key
fold_in(key, 2¹⁶ + j) of the j-th evaluation, estimation purpose: never the verification's
draws). A direction whose proven bound at σ is ≤ δ_b (the remove direction's M(α, ε), the add
direction's (A1) or Rényi bound, ``tilted.direction_proposals``) passes without samples. A σ
fails without samples when M(α, ε) ≥ 1 (the tilted verification cannot take it), and, unless
``estimation_samples`` is given, when its tilted remove direction would need more than
``MAX_DEFAULT_SAMPLES`` samples (M/δ_b above 400: its verification would need ~20·M/δ_b, so
candidates there cost hours; the search then settles where the tilt verifies affordably, a
larger σ; a plain add direction's ~50/δ_b is not capped, as in a plain calibration). Before
the order-α tables (a minute at the §7.4 shape), the α = 2 chain (about a second there) fails
small σ whose M(α, ε) it shows to be ≥ 1 (``decided_by_order_two``); a σ asked twice (the
bracket's growth re-asks σ/2) is evaluated once.

Search: ``deterministic._search.smallest_passing_sigma`` (the deterministic calibrations'
monotone search) from the initial guess, with σ ≥ σ_up passing by the fallback's proof: the
bracket grows by factors of 2 until it straddles the boundary (δ̂ > δ_b in a direction below,
≤ above), then bisects in ln σ until its ends are one ``grid_ratio`` apart. The answer only
places Algorithm 5's candidate grid: the guarantee comes from the verification
(``verification.py``), which draws fresh samples on another stream, so the search's noise and
its shortcuts can cost samples or utility, never soundness.

Every evaluation is a checkpoint phase (``tilted-search-j``, its σ): a calibration resumed
from its checkpoint replays the finished ones bitwise and goes on.

References:
  Andy Dong and Arun Ganesh, "Privacy Amplification for BandMF via b-Min-Sep Subsampling",
  arXiv:2602.09338 (v2): App. A (Algorithm 5, the candidate grid) (docs/references.md).
"""

from __future__ import annotations

import math
import typing

import jax

from jaxacct import progress as progress_lib
from jaxacct.conventions import CANDIDATE_TAG, DIRECTIONS, Direction
from jaxacct.deterministic import tilt_bound
from jaxacct.deterministic._search import smallest_passing_sigma
from jaxacct.errors import InputError
from jaxacct.mechanism import MatrixMechanism
from jaxacct.montecarlo.engine import sampling
from jaxacct.montecarlo.evr import checkpoint as checkpoint_lib
from jaxacct.montecarlo.evr import tilted as tilted_lib

# The search's lower end: far below any σ a verification could accept here (it only places
# the candidate grid; a σ this small fails the estimate at once).
SIGMA_FLOOR = 1e-6


class Evaluation(typing.NamedTuple):
  """One σ of the search: the max-direction δ̂ (0 where a bound certifies the direction), the
  larger standard error, and the samples per direction it drew."""

  sigma: float
  delta_hat: float
  standard_error: float
  samples: dict


MIN_DEFAULT_SAMPLES = 1000
MAX_DEFAULT_SAMPLES = 20_000
"""The most tilted remove-direction samples a search evaluation draws by default
(``default_samples``): a σ whose remove direction would need more fails unsampled. A plain
add direction's ~50/δ_b is not capped (a plain calibration needs as many)."""


def default_samples(support: float, base_delta: float, add_certified: bool) -> int:
  """N_est per direction when none is given: ⌈50·S/δ_b⌉, at least 1000, with S = M(α, ε) when
  the add direction is certified and 1 when it is sampled plainly (a ~15 % relative error on
  δ̂ at δ_b, as ``bounds.default_estimation_samples``; the plain add direction needs ~50/δ_b).
  Above ``MAX_DEFAULT_SAMPLES`` the search fails σ unsampled (``boundary``)."""
  scale = support if add_certified else 1.0
  return max(MIN_DEFAULT_SAMPLES, math.ceil(50.0 * scale / base_delta))


def searchable_orders(epsilon: float, base_delta: float, orders=None) -> list[int]:
  """The orders of ``orders`` (default 2 … 8) at which a capped search (no
  ``estimation_samples``) can pass some σ below σ_up at (ε, δ_b).

  M(α, ε) = Z_α·F(α, ε) with F = e^{−(α−1)ε}(α−1)^{α−1}/α^α (``tilt_bound.log_support_bound``
  at ln Z = 0) and Z_α = E_Q[(P/Q)^α] ≥ (E_Q[P/Q])^α = 1 (Jensen), so M ≥ F at every σ. A σ
  passes unsampled only when M ≤ δ_b, and one whose remove direction is not certified fails
  unsampled when ⌈50·M/δ_b⌉ > ``MAX_DEFAULT_SAMPLES`` (``boundary``), i.e. M > 400·δ_b:
  with F above 400·δ_b every σ below σ_up fails, the search ends at σ_up, and the
  candidates sit just below the fallback's σ, whatever the run costs. ``calibration`` refuses
  such an order when given, and ``proposal='auto'`` chooses among the others."""
  orders = range(2, tilt_bound.DEFAULT_ALPHA_MAX + 1) if orders is None else orders
  ceiling = math.log(max(1.0, MAX_DEFAULT_SAMPLES / 50.0) * base_delta)
  return [alpha for alpha in orders
          if tilt_bound.log_support_bound(0.0, alpha, epsilon) <= ceiling]


def resolve_order(monte_carlo, mechanism: MatrixMechanism, epsilon: float, base_delta: float,
                  precision: str, state_budget: int) -> tuple[str, int | None]:
  """(proposal, α) of a tilted calibration whose search starts at ``mechanism`` (its initial
  guess): ``tilted.resolve_proposal`` with ``proposal='auto'`` choosing among the
  ``searchable_orders`` when the search is capped (no ``estimation_samples``), the order of
  the smallest M at the guess, whether or not that M is below 1 there (the search fails such
  σ itself; the guess is often below the boundary, where a small order wins).

  Raises:
    InputError: naming ``monte_carlo.tilt_order`` when the given order can pass no σ of the
      capped search (before any compute), with the smallest that can.
  """
  order = monte_carlo.tilt_order
  searchable = (None if monte_carlo.estimation_samples is not None
                else searchable_orders(epsilon, base_delta))
  if (monte_carlo.proposal != 'plain' and order is not None and searchable is not None
      and order not in searchable_orders(epsilon, base_delta, [order])):
    floor = math.exp(tilt_bound.log_support_bound(0.0, order, epsilon))
    larger = searchable_orders(epsilon, base_delta,
                               range(order + 1, tilt_bound.DEFAULT_ALPHA_MAX + 1))
    raise InputError(
        argument='monte_carlo.tilt_order', value=order,
        requirement=(f'cannot pass any σ of the tilted search at (ε, δ_b) = ({epsilon:g}, '
                     f'{base_delta:.3g}): M(α, ε) ≥ e^{{−(α−1)ε}}(α−1)^{{α−1}}/α^α = '
                     f'{floor:.3g} at every σ, above {max(1, MAX_DEFAULT_SAMPLES // 50)}·δ_b '
                     '(the search\'s sample cap), so its candidates would sit just below the '
                     'fallback\'s σ'
                     + (f'; the smallest order that can is {larger[0]}' if larger else '')
                     + ' (estimation_samples lifts the cap)'),
        suggestion={'monte_carlo.tilt_order': larger[0]} if larger else None)
  return tilted_lib.resolve_proposal(monte_carlo.proposal, order, [mechanism], epsilon,
                                     precision, state_budget=state_budget, orders=searchable,
                                     bounded_at_candidates=False)


def decided_by_order_two(mechanism: MatrixMechanism, order: int, epsilon: float,
                         state_budget: int) -> bool | None:
  """False when the α = 2 tuple chain alone shows that the order-α evaluation would fail σ
  (M(α, ε) ≥ 1), else None. At the §7.4 shape the α = 2 chain has ~3·10⁴ states (about a
  second) and the α = 3 chain ~3·10⁶ (about a minute), so small σ are failed cheaply.

  Z_α = E_P[(P/Q)^{α−1}] ≥ (E_P[P/Q])^{α−1} = Z₂^{α−1} (Jensen; equivalently the Rényi
  divergence is nondecreasing in its order, van Erven & Harremoës (2014), Thm. 3), so
  (α−1)·ln Z₂ − (α−1)ε + ln((α−1)^{α−1}/α^α) ≥ 0 implies M(α, ε) ≥ 1. ln Z₂ is rounded up
  (``tilt_bound.partition``): the test can be wrong only within ~1e-11 of M = 1, and the search
  only places candidates (the verification recomputes every bound on its own stream), so
  such an error moves candidates, never a guarantee. There is no "passes" shortcut: a σ that
  M(2, ε) certifies may still have M(α, ε) ≥ 1, which the order-α verification refuses
  (docs/proofs/review-search-shortcut.md). None when α = 2 or the α = 2 chain is over
  ``state_budget``.
  """
  if order <= 2:
    return None
  states, _ = tilt_bound.state_space(mechanism, 2)
  if states > state_budget:
    return None
  log_z = tilt_bound.partition(mechanism, 2, state_budget=state_budget).log_z
  return False if fails_by_order_two(log_z, order, epsilon) else None


def fails_by_order_two(log_z2: float, order: int, epsilon: float) -> bool:
  """Whether ln Z₂ (rounded up) shows M(α, ε) ≥ 1 (``decided_by_order_two``'s test)."""
  return tilt_bound.log_support_bound((order - 1) * log_z2, order, epsilon) >= 0.0


def boundary(key, scheme, matrix, *, order: int, state_budget: int, epsilon: float,
             base_delta: float, sigma_up: float, guess: float, grid_ratio: float,
             estimation_samples: int | None, saved, run) -> tuple[float, list[Evaluation]]:
  """(the smallest σ found to pass, every evaluation in order): the search of the module
  docstring. ``saved``: the calibration's checkpoint (None: none); ``run``: its
  ``RunOptions`` (progress under the stage "tilted search j")."""
  evaluations: list[Evaluation] = []
  decided: dict[float, bool] = {}  # the bracket's growth probes σ/2 again: asked once

  def passes(sigma: float) -> bool:
    if float(sigma) not in decided:
      decided[float(sigma)] = evaluate(float(sigma))
    return decided[float(sigma)]

  def unsampled(sigma: float, passed: bool) -> bool:
    evaluations.append(Evaluation(sigma, 0.0 if passed else 1.0, 0.0, {d: 0 for d in DIRECTIONS}))
    return passed

  def evaluate(sigma: float) -> bool:
    j = len(evaluations)
    mechanism = MatrixMechanism(scheme, matrix, sigma)
    if decided_by_order_two(mechanism, order, epsilon, state_budget) is False:
      return unsampled(sigma, False)  # placement only: the cheap order fails small σ
    # The host tables can take minutes (the §7.4 shape at α = 3): said, never silent.
    progress_lib.announce(run.progress, f'tilted search {j + 1}: σ = {sigma:.6g}, the α = '
                                        f'{order} tilt (host tables)…')
    tilt = tilted_lib.tilt_for(mechanism, order, [epsilon], state_budget=state_budget)
    if not tilt.log_support[0] < 0.0:
      # M(α, ε) ≥ 1: the tilted verification cannot take this σ (``direction_proposals``), so
      # it fails here, unsampled (δ ≤ 1 is all that is recorded).
      return unsampled(sigma, False)
    proposals = tilted_lib.direction_proposals([mechanism], [tilt], epsilon)
    certified = {d: proposals[d].bound is not None and proposals[d].bound <= base_delta
                 for d in DIRECTIONS}
    count = estimation_samples or default_samples(proposals[Direction.REMOVE].support,
                                                  base_delta, certified[Direction.ADD])
    support = proposals[Direction.REMOVE].support
    remove_need = default_samples(support, base_delta, True)
    if (estimation_samples is None and not certified[Direction.REMOVE]
        and remove_need > MAX_DEFAULT_SAMPLES):
      # Its verification would need ~20·M/δ_b remove samples: as costly as the estimate
      # refused here. Failing σ places the candidates where the tilt verifies affordably (a
      # larger σ: utility, never soundness; ``estimation_samples`` lifts the cap).
      progress_lib.announce(run.progress, f'tilted search {j + 1}: σ = {sigma:.6g} would need '
                                          f'{remove_need:,} tilted remove samples (M(α, ε)/δ_b '
                                          f'= {support / base_delta:.3g}): treated as failing')
      return unsampled(sigma, False)
    samples = {d: 0 if certified[d] else count for d in DIRECTIONS}
    delta_hat = {d: 0.0 for d in DIRECTIONS}
    error = 0.0
    if any(samples.values()):
      result = tilted_lib.run_tilted_sweep(
          [jax.random.fold_in(key, CANDIDATE_TAG + j)], [mechanism], [tilt], samples,
          purpose='estimation', block_size=sampling.default_block_size(mechanism.iterations),
          run=run, phase=checkpoint_lib.Phase(saved, f'tilted-search-{j}', float(sigma).hex()),
          progress=progress_lib.staged(run.progress, f'tilted search {j + 1}'))
      delta_hat = {d: float(result.delta_hat[d][0, 0]) for d in DIRECTIONS}
      error = float(max(result.standard_error[d][0, 0] for d in DIRECTIONS))
    evaluations.append(Evaluation(sigma, max(delta_hat.values()), error, samples))
    return evaluations[-1].delta_hat <= base_delta

  def meets(sigma: float) -> bool:
    return sigma >= sigma_up or passes(sigma)  # σ_up passes by the fallback's proof

  found = smallest_passing_sigma(meets, tolerance=grid_ratio - 1.0, floor=SIGMA_FLOOR,
                                 start=min(float(guess), float(sigma_up)))
  return min(found, float(sigma_up)), evaluations
