"""Tilted estimates of δ(ε): the remove direction drawn from the law tilted by the privacy loss.

``estimate_delta(..., monte_carlo=MonteCarloOptions(proposal='tilted', tilt_order=α))`` runs
here. For the remove-direction pair P = Σ_x p_x N(Cx, σ²I), Q = N(0, σ²I) (Dong & Ganesh (2026)
§2.4), L = ln P/Q and an integer order α ≥ 2, y is drawn from Q_α ∝ P^αQ^{1−α} — an α-tuple of
patterns τ ~ π_α ∝ Π_j p_{x_j} exp(Σ_{j<l} ⟨Cx_j, Cx_l⟩/σ²), then y ~ N(C·Σ_j x_j, σ²I) — and
weighted by w = Z_α e^{−(α−1)L}:

    δ_remove(ε) = E_{Q_α}[X],  X = w·(1 − e^{ε−L})₊ ≤ M(α, ε) = Z_α e^{−(α−1)ε}(α−1)^{α−1}/α^α

(docs/proofs/tilting.md (a), (b); M is Canonne, Kamath & Steinke (2020) Prop. 12). The terms
X/M lie in [0, 1], so the estimate's standard error is ≤ M·√(δ/(M·N)) = √(Mδ/N) instead of
plain sampling's ~√(δ/N): the samples needed scale with M/δ, not 1/δ.

What is exact, and which way it errs:

- Z_α is ``tilt_bound.partition``'s, rounded up (closed forms for Poisson and fixed-phase
  cyclic Poisson, Schuchardt & Kalinin's recursion for balls-in-bins, the tuple chain for
  b-min-sep and random-phase cyclic Poisson); a larger Z only raises every term (tilting.md
  (b)). Where Z_α comes from another computation than the sampler (the closed forms, the
  recursion), the sampler's own normaliser (the chain's forward pass) must not exceed it:
  refused before any draw otherwise. Where it is the chain's own value the chain's exactness
  is what counts (``minsep_chain``'s enumeration tests).
- Tuples are exact draws of π_α (``minsep_chain.TupleChain``: forward filtering / backward
  sampling on the host, float64), on a host generator keyed per block by the run's key
  (``engine/tilted.py``): bitwise the same for any blocks per call, devices or resume.
- L is the scheme kernel's exact loss; every term is checked against M on device and the run
  raises ``TermAboveBoundError`` if one exceeds it beyond float64 rounding — never clipped.
- The add direction is drawn plainly (y ~ Q, the plain estimate's draws and sums, bitwise): no
  exact tilt of Q is known for these mixtures (``tilt_bound``, "Add direction"); the result
  says so (``proposal``).

Covered (``refusal``), each with a ``BandedToeplitz`` C: untruncated Poisson with one band
(C = c·I); b-min-sep, cold or warm start, with at most b bands; cyclic Poisson, either
partition, with at most T bands; fixed-bin balls-in-bins with at most T bands. The tuples
come from ``minsep_chain``'s laws (b-min-sep, Poisson as b = 1; cyclic with a random or a
fixed phase, balls-in-bins as p = 1), the loss from each scheme's own kernel (the mixture over
the phase included), so both sides are the scheme's exact pair. Refused before any
compute, with the reason: truncated schemes, multi-attribution, a dense ``LowerTriangular``
C, more bands than the separation (balls-in-bins: its Z_α is exact for any band count, but
the tuple chain needs bands ≤ T), an order whose tuple chain exceeds the state budget, and
the 32-bit program (``MonteCarloOptions``).

**Verification** (``verification.verify`` with ``proposal='tilted'``): each Monte Carlo
candidate k gets its own tilt and program (its tuples depend on its σ), on the independent key
fold_in(key, 2¹⁶ + k). The remove direction's terms lie in [0, S], S = max_k M_k
(``direction_proposals``); the add direction is certified without samples when a proven bound
on its δ is ≤ δ_b (``add_bound``: (A1) ε ≥ −ln Pr[x = 0], ``minsep_renyi``'s (A2) Gibbs'
inequality against reference laws and (A3) unamplified Gaussian, and a product mechanism's
Rényi bound), else drawn plainly. Each direction has its own N
(``bounds.resolve_direction_sizes``) and the release is the maximum over the directions of
Fact 4.2 on its (N, S) (``bounds.overall_delta_by_direction``; docs/proofs/
review-per-direction.md); when every direction is certified the release is deterministic. A
tilted calibration searches σ with ``tilted_search`` and verifies here.

Where the code runs: Z_α, M and the tuples on the host (NumPy, float64); y, L and the term sums
on device (``engine/tilted.py``).

References:
  Andy Dong and Arun Ganesh, "Privacy Amplification for BandMF via b-Min-Sep Subsampling",
  arXiv:2602.09338 (v2): §2.4, §2.5, §4 (docs/references.md).
  Clément L. Canonne, Gautam Kamath and Thomas Steinke, "The Discrete Gaussian for Differential
  Privacy", arXiv:2004.00010: Prop. 12 (docs/references.md).
  Ilya Mironov, Kunal Talwar and Li Zhang, "Rényi Differential Privacy of the Sampled Gaussian
  Mechanism", arXiv:1908.10530: §3.3 (docs/references.md).
  Jan Schuchardt and Nikita Kalinin, "Sampling-Free Privacy Accounting for Matrix Mechanisms
  under Random Allocation", arXiv:2601.21636: Algorithm 1, Lemma 3.4 (docs/references.md).
"""

from __future__ import annotations

import dataclasses
import math

import numpy as np

from jaxacct import _validate
from jaxacct import options as options_lib
from jaxacct import progress as progress_lib
from jaxacct._precision import scoped_x64
from jaxacct.conventions import DIRECTIONS, Direction
from jaxacct.deterministic import minsep_chain, minsep_renyi, tilt_bound
from jaxacct.errors import InputError
from jaxacct.mechanism import MatrixMechanism
from jaxacct.montecarlo.engine import kernels, stream
from jaxacct.montecarlo.engine import keys as keys_lib
from jaxacct.montecarlo.engine.sharding import SampleMesh
from jaxacct.montecarlo.engine.tilted import TermAboveBoundError as TermAboveBoundError
from jaxacct.montecarlo.engine.tilted import TiltedDraws, host_blocks_for
from jaxacct.montecarlo.evr import bounds
from jaxacct.montecarlo.evr import checkpoint as checkpoint_lib
from jaxacct.montecarlo.evr import resolution as resolution_lib
from jaxacct.schemes.participation import FixedBins


def refusal(mechanism: MatrixMechanism) -> str | None:
  """None when the tilted proposal covers ``mechanism`` (module docstring), else the reason."""
  reason = tilt_bound.refusal(mechanism, Direction.REMOVE.value)
  if reason is not None:
    return reason
  model = mechanism.scheme.participation.model
  bands = len(mechanism.matrix.banded_coefficients())
  if isinstance(model, FixedBins) and bands > model.cycle_length:
    return (f'{bands} bands exceed the cycle length {model.cycle_length} of BallsInBins: its '
            'Z_α is exact (Schuchardt & Kalinin (2026) Algorithm 1: the "renyi" accountant) '
            'but the tuple chain that draws the tilted law needs bands ≤ the cycle length')
  return None


def _require_covered(mechanism: MatrixMechanism) -> None:
  reason = refusal(mechanism)
  if reason is not None:
    raise InputError(argument='mechanism', requirement=f'is not covered by the tilted proposal: '
                     f'{reason}', suggestion={'monte_carlo.proposal': 'plain'})


def sampler_states(mechanism: MatrixMechanism, order: int) -> tuple[int, str]:
  """(states, law name) of a tilted run at ``order``: the larger of ln Z_α's recursion
  (``tilt_bound.state_space``) and the tuple chain that draws π_α (C(S + α − 1, α) multisets
  of its law's S states; they differ for balls-in-bins and the product mechanisms)."""
  states, _ = tilt_bound.state_space(mechanism, order)
  law = minsep_chain.law_for(mechanism.scheme, len(mechanism.matrix.banded_coefficients()))
  return max(states, minsep_chain.multiset_count(law.num_states, order)), law.name


def choose_order(mechanism: MatrixMechanism, epsilon: float, orders=None, *,
                 state_budget: int = tilt_bound.DEFAULT_STATE_BUDGET) -> tilt_bound.OrderChoice:
  """The order α of ``orders`` (default 2 … 8) with the smallest M(α, ε) among those a tilted
  run of ``mechanism`` can draw within ``state_budget`` (``sampler_states``: for balls-in-bins
  the tuple chain's states, not only the ln Z_α recursion's), by ``tilt_bound.choose_order``.

  Raises:
    InputError: naming ``mechanism`` when the tilt does not cover it, ``state_budget`` when no
      order fits it.
  """
  _require_covered(mechanism)
  budget = _validate.integer_at_least('state_budget', state_budget, 1)
  orders = list(range(2, tilt_bound.DEFAULT_ALPHA_MAX + 1) if orders is None else orders)
  if not orders:
    raise InputError('orders must not be empty')
  orders = [_validate.integer_at_least('orders', alpha, 2) for alpha in orders]
  fitting = [alpha for alpha in orders if sampler_states(mechanism, alpha)[0] <= budget]
  if not fitting:
    raise InputError(argument='state_budget', value=budget,
                     requirement=f'admits none of the tilt orders {list(orders)}: α = '
                     f'{min(orders)} needs {sampler_states(mechanism, min(orders))[0]:,} '
                     'tuple-chain states')
  return tilt_bound.choose_order(mechanism, epsilon, fitting, state_budget=budget)


def resolve_proposal(proposal: str, order: int | None, mechanisms, epsilon: float,
                     precision: str, *, state_budget: int = tilt_bound.DEFAULT_STATE_BUDGET,
                     orders=None, bounded_at_candidates: bool = True
                     ) -> tuple[str, int | None]:
  """(``"plain"``, None) or (``"tilted"``, α) for a verification of the Monte Carlo candidates
  ``mechanisms`` at ε. ``"plain"`` and ``"tilted"`` are returned as given; ``"auto"`` is
  ``"tilted"`` when the tilt covers the candidates (``refusal``) at float64 and M(α, ε) < 1 at
  every candidate — α = ``order``, else the order of the smallest M at the first candidate
  (the smallest σ: the largest M; ``choose_order`` among ``orders``, default α ≤ 8, within the
  default state budget, or ``state_budget``) — and ``"plain"`` otherwise (also when no order
  of ``orders`` fits). ``bounded_at_candidates=False`` drops the M < 1 condition: a
  calibration's "candidate" is its search's first guess, often below the boundary, and the
  search fails a σ with M ≥ 1 itself (``tilted_search.resolve_order``)."""
  if proposal != 'auto':
    return proposal, order
  if not mechanisms or precision != 'float64' or refusal(mechanisms[0]) is not None:
    return 'plain', None
  if order is None:
    if orders is not None and not list(orders):
      return 'plain', None
    try:
      order = choose_order(mechanisms[0], epsilon, orders, state_budget=state_budget).alpha
    except InputError:  # no order fits the state budget
      return 'plain', None
  for mechanism in mechanisms:
    states, _ = sampler_states(mechanism, order)
    if states > state_budget:
      return 'plain', None
    if not bounded_at_candidates:
      continue
    log_z = tilt_bound.partition(mechanism, order, state_budget=state_budget).log_z
    if not tilt_bound.log_support_bound(log_z, order, epsilon) < 0.0:
      return 'plain', None
  return 'tilted', order


@dataclasses.dataclass(frozen=True, eq=False)
class Tilt:
  """The tilt of one mechanism at one order, on an ε grid (host, float64).

  Attributes:
    order: α ≥ 2.
    log_z: ln Z_α of the weights, rounded up (``tilt_bound.partition``).
    method: how it was computed (``tilt_bound.LogPartition.method``).
    states: the size of the recursion behind it.
    sampler_log_z: the tuple sampler's own ln Z_α (its forward pass, not rounded): at most
      ``log_z``.
    epsilons: the grid, float64 (E,).
    log_support: ln M(α, ε) per ε (``tilt_bound.log_support_bound`` at ``log_z``), (E,).
    chain: the ``minsep_chain.TupleChain`` that draws π_α.
    tables_digest: ``chain.digest()``: the host tables behind the draws and ln Z_α, in the
      run's fingerprint, its ledger record and its ``Guarantee.tilt``.
  """

  order: int
  log_z: float
  method: str
  states: int
  sampler_log_z: float
  epsilons: np.ndarray
  log_support: np.ndarray
  chain: minsep_chain.TupleChain = dataclasses.field(repr=False)
  tables_digest: str

  def tuples(self, rngs, count: int) -> np.ndarray:
    """``count`` exact draws of π_α from each generator of ``rngs``, one forward pass for all:
    bool (len(rngs), count, α, n) (``TupleChain.draw_blocks``)."""
    return self.chain.draw_blocks(rngs, count)

  def identity(self) -> dict:
    """JSON-ready: what a checkpoint of a tilted run is checked against on resume."""
    return {'proposal': 'tilted', 'order': self.order, 'log_z': self.log_z,
            'method': self.method, 'log_support': self.log_support.tolist(),
            'tables_digest': self.tables_digest}


def tilt_for(mechanism: MatrixMechanism, order: int, epsilons, *,
             state_budget: int = tilt_bound.DEFAULT_STATE_BUDGET) -> Tilt:
  """The ``Tilt`` of ``mechanism`` at order α on ``epsilons``: ln Z_α rounded up and its M per
  ε (``tilt_bound``; Mironov, Talwar & Zhang (2019) §3.3 for Poisson, the tuple chain of
  ``minsep_chain`` for b-min-sep), and the tuple sampler of π_α.

  Raises:
    InputError: naming ``mechanism`` when it is not covered (``refusal``), ``tilt_order``
      when α is not an integer ≥ 2 or its chain exceeds ``state_budget`` — before any compute;
      naming ``mechanism`` when the sampler's own normaliser exceeds the rounded-up ln Z_α
      (the weights would not be conservative) — before any draw.
  """
  _require_covered(mechanism)
  order = _validate.integer_at_least('tilt_order', order, 2)
  grid = np.asarray(epsilons, np.float64).reshape(-1)
  budget = _validate.integer_at_least('state_budget', state_budget, 1)
  states, law_name = sampler_states(mechanism, order)
  if states > budget:
    raise InputError(argument='monte_carlo.tilt_order', value=order,
                     requirement=f'needs {states:,} tuple-chain states for {law_name}, above '
                     f'the state budget {budget:,}; use a smaller order')
  coefficients = mechanism.matrix.banded_coefficients()
  chain = minsep_chain.TupleChain(minsep_chain.law_for(mechanism.scheme, coefficients.size),
                                  coefficients, float(mechanism.noise_multiplier), order,
                                  mechanism.iterations, state_budget=budget)
  # The chain's own forward pass is the exact value where ``tilt_bound`` runs the same chain
  # (b-min-sep, random-phase cyclic Poisson); elsewhere it is checked against ``tilt_bound``'s
  # independent computation below: the closed forms of Poisson and fixed-phase cyclic Poisson
  # (Mironov, Talwar & Zhang (2019) §3.3, per round) and balls-in-bins' recursion
  # (Schuchardt & Kalinin (2026) Algorithm 1).
  partition = (tilt_bound.chain_partition(chain)
               if tilt_bound.state_space(mechanism, order)[1] == 'chain'
               else tilt_bound.partition(mechanism, order, state_budget=budget))
  if not chain.log_z <= partition.log_z:
    raise InputError(argument='mechanism', requirement=(
        f'has a tuple sampler whose normaliser ln Z_α = {chain.log_z!r} exceeds the rounded-up '
        f'{partition.method} value {partition.log_z!r} (α = {order}): the weights would not be '
        'conservative; refused'))
  log_support = np.asarray([tilt_bound.log_support_bound(partition.log_z, order, float(e))
                            for e in grid])
  return Tilt(order=order, log_z=partition.log_z, method=partition.method,
              states=partition.states, sampler_log_z=chain.log_z, epsilons=grid,
              log_support=log_support, chain=chain, tables_digest=chain.digest())


@dataclasses.dataclass(frozen=True, kw_only=True)
class TiltedDeltaEstimate:
  """δ̂(ε) per direction with the remove direction drawn from the tilted law (module docstring):
  an estimate, not a guarantee.

  Attributes:
    epsilons: the ε grid, float64 (E,).
    delta_hat / standard_error: per direction, float64 (E,): the remove direction's are
      M·mean(X/M) and M·(s.d. of X/M)/√N, the add direction's the plain estimate's.
    proposal: per direction, ``"tilted"`` or ``"plain"`` (the add direction is drawn plainly).
    order: α.
    log_z: ln Z_α of the weights (rounded up); method: how it was computed.
    tables_digest: the tuple sampler's tables (``Tilt.tables_digest``).
    support: M(α, ε) per ε: the bound on every remove term (and itself a Rényi bound on
      δ_remove(ε), Canonne, Kamath & Steinke (2020) Prop. 12).
    largest_scaled_term: per ε, the largest X/M drawn by this call (≤ 1 up to rounding:
      checked; a run resumed from a checkpoint reports its resumed part's).
    num_samples: N per direction.
    key_data: the run key's words.
  """

  epsilons: np.ndarray
  delta_hat: dict
  standard_error: dict
  proposal: dict
  order: int
  log_z: float
  method: str
  support: np.ndarray
  largest_scaled_term: np.ndarray
  num_samples: int
  key_data: tuple[int, ...]
  tables_digest: str

  @property
  def delta_hat_max(self) -> np.ndarray:
    return np.maximum(*(self.delta_hat[d] for d in DIRECTIONS))

  def to_dict(self, epsilons=None) -> dict:
    """JSON-ready: every attribute, arrays as lists, ``method`` "estimate"; on the estimate's
    grid or on the listed ``epsilons`` (each a grid point: the per-ε values are their rows)."""
    rows = resolution_lib.grid_rows(self.epsilons, epsilons)
    return {'method': 'estimate', 'epsilons': self.epsilons[rows].tolist(),
            'delta_hat': {d: self.delta_hat[d][rows].tolist() for d in DIRECTIONS},
            'standard_error': {d: self.standard_error[d][rows].tolist() for d in DIRECTIONS},
            'proposal': dict(self.proposal), 'tilt_order': self.order, 'log_z': self.log_z,
            'log_z_method': self.method, 'tables_digest': self.tables_digest,
            'support': self.support[rows].tolist(),
            'largest_scaled_term': self.largest_scaled_term[rows].tolist(),
            'num_samples': self.num_samples, 'seed': list(self.key_data)}

  def resolved_epsilon(self, delta: float, *, z: float = 2.0) -> resolution_lib.Resolution:
    """As ``DeltaEstimate.resolved_epsilon`` (``resolution.resolve``), each direction above its
    own floor: 3·M(α, ε)/N for the tilted remove direction (its terms lie in [0, M]), 3/N for
    the plain add direction — a δ below the add direction's floor is not resolved, whatever
    the remove direction resolves; the reason names the direction that limits it."""
    supports = {d: (resolution_lib.Support(self.support, f'tilted {d} direction',
                                           f'3·M(α = {self.order}, ε)/N')
                    if self.proposal[d] == 'tilted' else
                    resolution_lib.Support(np.ones(self.epsilons.size), f'plain {d} direction',
                                           '3/N')) for d in DIRECTIONS}
    return resolution_lib.resolve(self.epsilons, self.delta_hat, self.standard_error,
                                  self.num_samples, delta, z=z, supports=supports)


@dataclasses.dataclass(frozen=True)
class TiltedSweep:
  """δ̂(ε) per candidate and direction of tilted programs (``run_tilted_sweep``).

  Attributes:
    delta_hat / standard_error: per direction, float64 (K, E): the remove direction's
      M_k·mean(X/M_k) and M_k·(s.d. of X/M_k)/√N, the add direction's the plain estimate's; a
      direction of 0 samples (certified without samples) has 0 and 0.
    largest_scaled_term: (K, E), the largest X/M_k drawn by this call (≤ 1 up to rounding).
    sums: the stream accumulator (``stream.BlockSums``; remove sums are of X/M_k).
    samples: per direction, N.
  """

  delta_hat: dict
  standard_error: dict
  largest_scaled_term: np.ndarray
  sums: stream.BlockSums
  samples: dict


@scoped_x64
def run_tilted_sweep(keys, mechanisms, tilts, samples: dict, *, purpose: str, block_size: int,
                     run: options_lib.RunOptions, phase: checkpoint_lib.Phase,
                     progress=None) -> TiltedSweep:
  """Runs one ``TiltedDraws`` program per candidate k (``mechanisms[k]`` at ``tilts[k]``, its
  draws on the ``purpose`` streams of ``keys[k]``), ``samples[d]`` draws in direction d (0: none),
  through the one stream driver; ``phase`` resumes and saves it (library-internal: ``estimate``
  and ``verify`` check their arguments and call it).

  Raises:
    TermAboveBoundError: a term above its M beyond rounding (no result is returned).
  """
  mesh = SampleMesh.over(run.devices)
  grid = tilts[0].epsilons
  largest = np.zeros((len(tilts), grid.size))  # of the blocks this call computes
  counts = {d: int(samples[d]) for d in DIRECTIONS}
  state = saved_state(phase, len(tilts), grid.size)
  for k, (key, mechanism, tilt) in enumerate(zip(keys, mechanisms, tilts)):
    key = keys_lib.canonicalize_key(key)
    purpose_key = keys_lib.purpose_key(key, purpose)
    program = TiltedDraws(
        mechanism=mechanism, kernel=kernels.kernel_for(mechanism, np.dtype(np.float64)),
        block_size=block_size, mesh=mesh, tuples=tilt.tuples,
        tuple_key=keys_lib.host_stream_key(key, purpose, Direction.REMOVE.value),
        order=tilt.order, log_z=tilt.log_z, log_support=tilt.log_support,
        host_blocks=host_blocks_for(block_size, tilt.order, mechanism.iterations),
        observe=lambda block_largest, k=k: np.maximum(largest[k], block_largest.max(axis=0),
                                                      out=largest[k]))
    stream.accumulate(lambda direction, p=purpose_key: keys_lib.direction_key(p, direction),
                      program, state, program_index=k, num_programs=len(tilts),
                      candidate_offset=k, num_samples=counts, first_block=0,
                      block_size=block_size, blocks_per_call=run.blocks_per_call, mesh=mesh,
                      epsilons=grid, edges=None, progress=progress, after_call=phase.after_call)
  phase.finish(state)
  supports = np.exp(np.stack([tilt.log_support for tilt in tilts]))  # (K, E)
  delta_hat, standard_error = {}, {}
  for d in DIRECTIONS:
    if counts[d] == 0:
      delta_hat[d] = standard_error[d] = np.zeros((len(tilts), grid.size))
      continue
    mean, error = stream.mean_and_standard_error(state.totals.sums[d], state.totals.squares[d],
                                                 counts[d])
    scale = supports if d == Direction.REMOVE else 1.0
    delta_hat[d], standard_error[d] = scale * mean, scale * error
  return TiltedSweep(delta_hat, standard_error, largest, state.totals, counts)


def estimate_phase(run: options_lib.RunOptions, identity: dict, tilt: Tilt,
                   num_samples: int) -> checkpoint_lib.Phase:
  """The checkpoint phase of a tilted estimate (``run.checkpoint``; the plain run's
  ``identity`` with the tilt's): what ``run_tilted_estimate`` resumes from."""
  saved = checkpoint_lib.open_checkpoint(
      run.checkpoint, {**identity, 'run': 'tilted_estimate', **tilt.identity()},
      run.checkpoint_interval)
  return checkpoint_lib.Phase(saved, 'estimate', identity=num_samples)


def saved_state(phase: checkpoint_lib.Phase, num_candidates: int,
                grid_size: int) -> stream.StreamState:
  """The state a tilted sweep of ``num_candidates`` on a grid of ``grid_size`` ε resumes from
  in ``phase``: its saved one, else a fresh one."""
  return phase.start(stream.StreamState(stream.BlockSums.zeros(num_candidates, grid_size)))


@scoped_x64
def run_tilted_estimate(key, mechanism: MatrixMechanism, tilt: Tilt, num_samples: int, *,
                        purpose: str, block_size: int, identity: dict,
                        run: options_lib.RunOptions) -> TiltedDeltaEstimate:
  """The tilted estimate of ``mechanism`` on ``tilt``'s grid from ``num_samples`` draws per
  direction of the ``purpose`` stream (library-internal: ``estimate_delta`` validates and
  calls it; progress under the stage "estimate").

  Args:
    key: a typed key (canonicalised). tilt: ``tilt_for``'s. identity: the plain run's
      checkpoint identity, to which the tilt's is added (``estimate_phase``). run: as
      ``estimate_delta``'s but for ``max_seconds``, which is not used (``estimate_delta``
      projects the run first).

  Raises:
    TermAboveBoundError: a term above M beyond rounding (no result is returned).
  """
  key = keys_lib.canonicalize_key(key)
  sweep = run_tilted_sweep(
      [key], [mechanism], [tilt], {d: num_samples for d in DIRECTIONS}, purpose=purpose,
      block_size=block_size, run=run, phase=estimate_phase(run, identity, tilt, num_samples),
      progress=progress_lib.staged(run.progress, 'estimate'))
  return TiltedDeltaEstimate(
      epsilons=tilt.epsilons, delta_hat={d: sweep.delta_hat[d][0] for d in DIRECTIONS},
      standard_error={d: sweep.standard_error[d][0] for d in DIRECTIONS},
      proposal={Direction.REMOVE.value: 'tilted', Direction.ADD.value: 'plain'},
      order=tilt.order, log_z=tilt.log_z, method=tilt.method,
      support=np.exp(tilt.log_support), largest_scaled_term=sweep.largest_scaled_term[0],
      num_samples=num_samples, key_data=keys_lib.key_words(key),
      tables_digest=tilt.tables_digest)


def direction_proposals(mechanisms, tilts, epsilon: float) -> dict:
  """Per direction, the ``bounds.DirectionProposal`` of a tilted verification of the Monte
  Carlo candidates ``mechanisms`` (their ``tilts``) at ε:

  - remove: terms in [0, S] and bound S, S = max_k M(α, ε) over the candidates' tilts (each
    candidate's terms lie in [0, M_k] ⊆ [0, S] and its δ ≤ M_k, Canonne, Kamath & Steinke
    (2020) Prop. 12); refused (naming ``monte_carlo.tilt_order``) when S ≥ 1: plain terms
    would then do better (``bounds``, "Support bound M"). With no candidate, plain.
  - add: plain terms (no exact tilt of Q is known for these mixtures), with bound 0 when
    ε ≥ −ln Pr[x = 0] ((A1): every add term is 0, ``tilt_bound.add_vanishing_epsilon``),
    else the least proven add bound of ``add_bound`` ((A2) Gibbs' inequality, (A3) the
    unamplified Gaussian, and for product mechanisms the Rényi bound of their exact Z'), the
    largest over the candidates; else no bound. A bound ≤ δ_b certifies the direction
    without samples.
  """
  remove = bounds.DirectionProposal()
  if tilts:
    log_support = max(float(tilt.log_support[0]) for tilt in tilts)
    if not log_support < 0.0:
      raise InputError(argument='monte_carlo.tilt_order', value=tilts[0].order,
                       requirement=f'gives the support bound M(α, ε = {epsilon}) = '
                       f'{np.exp(log_support):.4g} >= 1: tilted terms would range wider than '
                       'plain ones; choose another order '
                       '(jaxacct.montecarlo.evr.tilted.choose_order)',
                       suggestion={'monte_carlo.proposal': 'plain'})
    support = float(np.exp(log_support))
    remove = bounds.DirectionProposal(support, support)
  return {Direction.REMOVE.value: remove,
          Direction.ADD.value: bounds.DirectionProposal(1.0, add_bound(mechanisms, epsilon))}


def add_bound(mechanisms, epsilon: float) -> float | None:
  """A proven bound on every mechanism's add-direction δ at ε (``direction_proposals``), or
  None when none is below 1: per mechanism the least of

  - (A1) 0 when ε ≥ −ln Pr[x = 0] (``tilt_bound.add_vanishing_epsilon``);
  - ``minsep_renyi``'s add bounds ((A1) below its threshold, (A2) Gibbs' inequality against
    the reference laws — for balls-in-bins Schuchardt & Kalinin (2026) Lemma 3.4 converted
    exactly —, (A3) the unamplified Gaussian), each proven for the mixture pair of every
    scheme the tilt covers (``minsep_renyi``, "Add");
  - for a product mechanism (Poisson with one band, fixed-phase cyclic Poisson) the Rényi
    bound M'(α', ε) of its exact Z'_α' (upper end of ``tilt_partition``'s bracket), the
    smallest over α' ≤ ``ADD_ORDER_MAX``;

  and the largest over the mechanisms."""
  if not mechanisms:
    return None
  threshold = tilt_bound.add_vanishing_epsilon(mechanisms[0])  # σ-free: the scheme's p₀
  if threshold is not None and epsilon >= threshold:
    return 0.0
  worst = 0.0
  for mechanism in mechanisms:
    best = minsep_renyi.plan_for(mechanism).add_delta(float(mechanism.noise_multiplier),
                                                      epsilon).value
    if tilt_bound.refusal(mechanism, Direction.ADD.value) is None:
      best = min(best, math.exp(tilt_bound.choose_order(
          mechanism, epsilon, orders=range(2, ADD_ORDER_MAX + 1),
          direction=Direction.ADD.value).log_bound))
    worst = max(worst, best)
  return worst if worst < 1.0 else None


# The orders scanned for the add direction's Rényi bound: a product mechanism's Z'_α' is one
# quadrature per round (~0.07 s per order), and its best order is often far above the remove
# direction's (DP-SGD q = 0.01, n = 1000, σ = 1 at its PLD ε for δ = 10⁻⁸: α' = 30).
ADD_ORDER_MAX = 32


def _sizes_record(sizes) -> dict:
  return {d: [int(sizes[d].num_samples), float(sizes[d].support)] for d in DIRECTIONS}


def run_identity(tilts, sizes, order: int) -> dict:
  """What a tilted verification adds to its ledger identity and checkpoint fingerprint: the
  proposal, α, each direction's (N, support) and each candidate's ln Z_α, its method and its
  tables' digest."""
  return {'proposal': 'tilted', 'tilt_order': int(order), 'directions': _sizes_record(sizes),
          'log_z': [float(tilt.log_z) for tilt in tilts],
          'log_z_method': [tilt.method for tilt in tilts],
          'tables_digest': [tilt.tables_digest for tilt in tilts]}


def guarantee_record(tilt: Tilt, sizes, order: int) -> dict:
  """The ``Guarantee.tilt`` of a verified tilted release: proposal per direction, α, ln Z_α and
  its method and its tables' digest, the released candidate's M(α, ε), and each direction's
  (N, support)."""
  proposal = {d: ('certified' if sizes[d].num_samples == 0 else
                  'tilted' if d == Direction.REMOVE else 'plain') for d in DIRECTIONS}
  return {'proposal': proposal, 'tilt_order': int(order), 'log_z': float(tilt.log_z),
          'log_z_method': tilt.method, 'tables_digest': tilt.tables_digest,
          'support': float(np.exp(tilt.log_support[0])), 'directions': _sizes_record(sizes)}
