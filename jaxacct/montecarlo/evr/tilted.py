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

- Z_α is ``tilt_bound.partition``'s, rounded up (closed form for Poisson, the tuple chain for
  b-min-sep); a larger Z only raises every term (tilting.md (b)). The sampler's own normaliser
  (the chain's forward pass) must not exceed it: refused before any draw otherwise.
- Tuples are exact draws of π_α (``minsep_chain.TupleChain``: forward filtering / backward
  sampling on the host, float64), on a host generator keyed per block by the run's key
  (``engine/tilted.py``): bitwise the same for any blocks per call, devices or resume.
- L is the scheme kernel's exact loss; every term is checked against M on device and the run
  raises ``TermAboveBoundError`` if one exceeds it beyond float64 rounding — never clipped.
- The add direction is drawn plainly (y ~ Q, the plain estimate's draws and sums, bitwise): no
  exact tilt of Q is known for these mixtures (``tilt_bound``, "Add direction"); the result
  says so (``proposal``).

Covered: untruncated Poisson with one band (C = c·I) and b-min-sep, cold or warm start, with a
``BandedToeplitz`` of at most b bands (``refusal``). Refused before any compute, with the
reason: truncated schemes, multi-attribution, a dense ``LowerTriangular`` C, more bands than
the separation, cyclic Poisson and balls-in-bins (their Z_α is known, their tuples are not
drawn here yet), an order whose tuple chain exceeds the state budget, and the 32-bit program
(``MonteCarloOptions``). This is an estimate, not a guarantee: verification (Fact 4.2 on X/M,
``bounds.py``'s support M) is not wired yet.

Where the code runs: Z_α, M and the tuples on the host (NumPy, float64); y, L and the term sums
on device (``engine/tilted.py``).

References:
  Andy Dong and Arun Ganesh, "Privacy Amplification for BandMF via b-Min-Sep Subsampling",
  arXiv:2602.09338 (v2): §2.4, §2.5, §4 (docs/references.md).
  Clément L. Canonne, Gautam Kamath and Thomas Steinke, "The Discrete Gaussian for Differential
  Privacy", arXiv:2004.00010: Prop. 12 (docs/references.md).
  Ilya Mironov, Kunal Talwar and Li Zhang, "Rényi Differential Privacy of the Sampled Gaussian
  Mechanism", arXiv:1908.10530: §3.3 (docs/references.md).
"""

from __future__ import annotations

import dataclasses

import numpy as np

from jaxacct import _validate
from jaxacct import options as options_lib
from jaxacct import progress as progress_lib
from jaxacct._precision import scoped_x64
from jaxacct.conventions import DIRECTIONS, Direction
from jaxacct.deterministic import minsep_chain, tilt_bound
from jaxacct.errors import InputError
from jaxacct.mechanism import MatrixMechanism
from jaxacct.montecarlo.engine import kernels, stream
from jaxacct.montecarlo.engine import keys as keys_lib
from jaxacct.montecarlo.engine.sharding import SampleMesh
from jaxacct.montecarlo.engine.tilted import TermAboveBoundError as TermAboveBoundError
from jaxacct.montecarlo.engine.tilted import TiltedDraws
from jaxacct.montecarlo.evr import checkpoint as checkpoint_lib
from jaxacct.schemes.participation import MinSepChain


def refusal(mechanism: MatrixMechanism) -> str | None:
  """None when the tilted proposal covers ``mechanism`` (module docstring), else the reason."""
  reason = tilt_bound.refusal(mechanism, Direction.REMOVE.value)
  if reason is not None:
    return reason
  model = mechanism.scheme.participation.model
  if not isinstance(model, MinSepChain):
    return (f'the tilted proposal draws the tuples of Poisson and b-min-sep chains only; '
            f'{type(mechanism.scheme).__name__} ({type(model).__name__}) is not covered yet: '
            "use proposal='plain'")
  return None


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
  """

  order: int
  log_z: float
  method: str
  states: int
  sampler_log_z: float
  epsilons: np.ndarray
  log_support: np.ndarray
  chain: minsep_chain.TupleChain = dataclasses.field(repr=False)

  def tuples(self, rng: np.random.Generator, count: int) -> np.ndarray:
    """``count`` exact draws of π_α from ``rng``: bool (count, α, n)."""
    return self.chain.draw(rng, count)

  def identity(self) -> dict:
    """JSON-ready: what a checkpoint of a tilted run is checked against on resume."""
    return {'proposal': 'tilted', 'order': self.order, 'log_z': self.log_z,
            'method': self.method, 'log_support': self.log_support.tolist()}


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
  reason = refusal(mechanism)
  if reason is not None:
    raise InputError(argument='mechanism', requirement=f'is not covered by the tilted proposal: '
                     f'{reason}', alternatives={"monte_carlo.proposal='plain'": None})
  order = _validate.integer_at_least('tilt_order', order, 2)
  grid = np.asarray(epsilons, np.float64).reshape(-1)
  states, method = tilt_bound.state_space(mechanism, order)
  budget = _validate.integer_at_least('state_budget', state_budget, 1)
  coefficients = mechanism.matrix.banded_coefficients()
  law = minsep_chain.law_for(mechanism.scheme, coefficients.size)
  chain_states = minsep_chain.multiset_count(law.num_states, order)
  if max(states, chain_states) > budget:
    raise InputError(argument='monte_carlo.tilt_order', value=order,
                     requirement=f'needs {max(states, chain_states):,} tuple-chain states for '
                     f'{law.name}, above the state budget {budget:,}; use a smaller order')
  chain = minsep_chain.TupleChain(law, coefficients, float(mechanism.noise_multiplier), order,
                                  mechanism.iterations, state_budget=budget)
  # The chain's own forward pass is b-min-sep's exact value; Poisson's is checked against the
  # closed form (Mironov, Talwar & Zhang (2019) §3.3) below.
  partition = (tilt_bound.chain_partition(chain) if method == 'chain'
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
              log_support=log_support, chain=chain)


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

  @property
  def delta_hat_max(self) -> np.ndarray:
    return np.maximum(*(self.delta_hat[d] for d in DIRECTIONS))

  def to_dict(self) -> dict:
    """JSON-ready: every attribute, arrays as lists, ``method`` "estimate"."""
    return {'method': 'estimate', 'epsilons': self.epsilons.tolist(),
            'delta_hat': {d: self.delta_hat[d].tolist() for d in DIRECTIONS},
            'standard_error': {d: self.standard_error[d].tolist() for d in DIRECTIONS},
            'proposal': dict(self.proposal), 'tilt_order': self.order, 'log_z': self.log_z,
            'log_z_method': self.method, 'support': self.support.tolist(),
            'largest_scaled_term': self.largest_scaled_term.tolist(),
            'num_samples': self.num_samples, 'seed': list(self.key_data)}


@scoped_x64
def run_tilted_estimate(key, mechanism: MatrixMechanism, tilt: Tilt, num_samples: int, *,
                        purpose: str, block_size: int, identity: dict,
                        run: options_lib.RunOptions) -> TiltedDeltaEstimate:
  """The tilted estimate of ``mechanism`` on ``tilt``'s grid from ``num_samples`` draws per
  direction of the ``purpose`` stream (library-internal: ``estimate_delta`` validates and
  calls it; progress under the stage "estimate").

  Args:
    key: a typed key (canonicalised). tilt: ``tilt_for``'s. identity: the plain run's
      checkpoint identity, to which the tilt's is added. run: as ``estimate_delta``'s but for
      ``max_seconds``, which is not used (the tilted program is not projected yet:
      ``estimate_delta`` refuses it).

  Raises:
    TermAboveBoundError: a term above M beyond rounding (no result is returned).
  """
  key = keys_lib.canonicalize_key(key)
  kernel = kernels.kernel_for(mechanism, np.dtype(np.float64))
  mesh = SampleMesh.over(run.devices)
  purpose_key = keys_lib.purpose_key(key, purpose)
  largest = np.zeros(tilt.epsilons.size)  # of the blocks this call computes (not a resumed part)
  program = TiltedDraws(
      mechanism=mechanism, kernel=kernel, block_size=block_size, mesh=mesh, tuples=tilt.tuples,
      tuple_key=keys_lib.host_stream_key(key, purpose, Direction.REMOVE.value),
      order=tilt.order, log_z=tilt.log_z, log_support=tilt.log_support,
      observe=lambda block_largest: np.maximum(largest, block_largest.max(axis=0), out=largest))
  saved = checkpoint_lib.open_checkpoint(
      run.checkpoint, {**identity, 'run': 'tilted_estimate', **tilt.identity()},
      run.checkpoint_interval)
  phase = checkpoint_lib.Phase(saved, 'estimate', identity=num_samples)
  state = phase.start(stream.StreamState(stream.BlockSums.zeros(1, tilt.epsilons.size)))
  stream.accumulate(lambda direction: keys_lib.direction_key(purpose_key, direction), program,
                    state, num_samples=num_samples, first_block=0, block_size=block_size,
                    blocks_per_call=run.blocks_per_call, mesh=mesh, epsilons=tilt.epsilons,
                    edges=None, progress=progress_lib.staged(run.progress, 'estimate'),
                    after_call=phase.after_call)
  phase.finish(state)
  support = np.exp(tilt.log_support)
  delta_hat, standard_error = {}, {}
  for d in DIRECTIONS:
    mean, error = stream.mean_and_standard_error(state.totals.sums[d][0],
                                                 state.totals.squares[d][0], num_samples)
    scale = support if d == Direction.REMOVE else 1.0
    delta_hat[d], standard_error[d] = scale * mean, scale * error
  return TiltedDeltaEstimate(
      epsilons=tilt.epsilons, delta_hat=delta_hat, standard_error=standard_error,
      proposal={Direction.REMOVE.value: 'tilted', Direction.ADD.value: 'plain'},
      order=tilt.order, log_z=tilt.log_z, method=tilt.method, support=support,
      largest_scaled_term=largest, num_samples=num_samples,
      key_data=keys_lib.key_words(key))
