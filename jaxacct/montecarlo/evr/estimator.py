"""Streaming Monte Carlo estimates of δ(ε) for both directions (host driver + device reductions).

δ̂(ε) = (1/N)·Σ_s (1 − e^{ε − L_s})₊ estimates the hockey-stick divergence
H_{e^ε} of each direction (Dong & Ganesh (2026) §2.5 and its footnote 1):
``remove`` draws y ~ P with L = ln P/Q, ``add`` draws y ~ Q with L = ln Q/P, each
from its own stream.

How a run is laid out (so results are bitwise reproducible):

- samples are grouped in *blocks* of ``block_size``; sample g of a stream has
  the key fold_in(fold_in(stream, g >> 20), g & (2²⁰ − 1)) whatever block or
  device computes it (``keys.py``);
- each device call evaluates a whole number of blocks per device (sharded over
  a ``Mesh`` of all local devices) and reduces every block on device to float64
  per-ε sums of the terms and of their squares (and optional histogram counts);
- the host adds the per-block sums **in block order, in float64**.

Hence the result depends only on (key, purpose, mechanism, ε grid, block size,
number of samples), not on blocks per call or device count. Memory is
independent of the number of samples; counts are Python ints (≥ 10¹² is fine).
The accumulator (``EstimatorState``) is a small JSON-serialisable object that
lets a later run resume without changing any key.

Where the code runs: per-block reductions are JAX (device); accumulation,
standard errors and ε̂(δ) are NumPy (host).

References:
  Andy Dong and Arun Ganesh, "Privacy Amplification for BandMF via b-Min-Sep Subsampling",
  arXiv:2602.09338 (v2): §2.5 (Monte Carlo accounting; both directions: footnote 1), App. A
  (docs/references.md).
"""

from __future__ import annotations

import dataclasses
import hashlib
import json

import numpy as np

from jaxacct import _validate
from jaxacct._precision import scoped_x64
from jaxacct.conventions import DIRECTIONS, Method
from jaxacct.deterministic import tilt_bound
from jaxacct.mechanism import MatrixMechanism
from jaxacct.montecarlo.evr import checkpoint as checkpoint_lib
from jaxacct.montecarlo.engine import kernels, sampling, stream
from jaxacct.montecarlo.evr import plan as plan_lib
from jaxacct.montecarlo.evr import precision as precision_lib
from jaxacct.montecarlo.evr import resolution as resolution_lib
from jaxacct.montecarlo.evr.resolution import Resolution as Resolution
from jaxacct.montecarlo.evr import tilted as tilted_lib
from jaxacct.montecarlo.evr import tilted_plan
from jaxacct.montecarlo.engine import keys as keys_lib
from jaxacct.montecarlo.engine.sharding import SampleMesh
from jaxacct.montecarlo.engine.stream import hockey_stick_terms as hockey_stick_terms
from jaxacct.montecarlo.engine.stream import mean_and_standard_error as mean_and_standard_error
from jaxacct import progress as progress_lib
from jaxacct.errors import InputError
from jaxacct import options as options_lib


@dataclasses.dataclass(frozen=True)
class EstimatorState:
  """Serialisable accumulator of a streaming estimate (enough to extend a run).

  It is one candidate's ``stream.BlockSums`` — the sums a checkpoint folder stores for the
  same run (``totals``/``of_totals``) — with the run's identity: extending an estimate in
  memory (``estimate_delta(state=…)``) and resuming it from a checkpoint continue the same
  sums with the same keys, so both give the bits of one uninterrupted run.

  Attributes:
    fingerprint: hash of everything that determines the samples and the sums
      (mechanism, ε grid, histogram edges, block size, dtype, purpose, key).
    key_data: the key's raw uint32 words (the run's seed).
    purpose: the stream purpose (``"estimation"`` or ``"verification"``).
    epsilons: the ε grid.
    block_size: samples per reduction block.
    num_samples: samples accumulated per direction.
    sums / sums_of_squares: per direction, per ε float64 sums of the terms.
    histogram: per direction, loss counts per bin (``None`` without edges).
    histogram_edges: bin upper edges (losses are rounded up to them).
  """

  fingerprint: str
  key_data: tuple[int, ...]
  purpose: str
  epsilons: tuple[float, ...]
  block_size: int
  num_samples: int
  sums: dict
  sums_of_squares: dict
  histogram: dict | None
  histogram_edges: tuple[float, ...] | None

  @classmethod
  def of_totals(cls, totals: stream.BlockSums, **fields) -> 'EstimatorState':
    """The state of a one-candidate stream whose float64 sums are ``totals``."""
    return cls(sums={d: totals.sums[d][0].tolist() for d in DIRECTIONS},
               sums_of_squares={d: totals.squares[d][0].tolist() for d in DIRECTIONS},
               histogram=(None if totals.counts is None
                          else {d: totals.counts[d][0].tolist() for d in DIRECTIONS}),
               **fields)

  def totals(self) -> stream.BlockSums:
    """The stream sums this state holds: what a checkpoint of the same run stores."""
    return stream.BlockSums.from_dict({
        'sums': {d: [self.sums[d]] for d in DIRECTIONS},
        'squares': {d: [self.sums_of_squares[d]] for d in DIRECTIONS},
        'counts': (None if self.histogram is None
                   else {d: [self.histogram[d]] for d in DIRECTIONS})})

  def to_json(self) -> str:
    return json.dumps(dataclasses.asdict(self))

  @classmethod
  def from_json(cls, text: str) -> 'EstimatorState':
    raw = json.loads(text)
    for name in ('key_data', 'epsilons', 'histogram_edges'):
      if raw[name] is not None:
        raw[name] = tuple(raw[name])
    return cls(**raw)


@dataclasses.dataclass(frozen=True)
class DeltaEstimate:
  """δ̂(ε) per direction with standard errors, from an ``EstimatorState``.

  ``delta_hat[d]`` and ``standard_error[d]`` are float64 arrays over
  ``epsilons``; the standard error is the sample standard deviation of the
  terms over √N. ``delta_hat_max`` is the max over both directions.
  """

  epsilons: np.ndarray
  delta_hat: dict
  standard_error: dict
  num_samples: int
  key_data: tuple[int, ...]
  state: EstimatorState

  @property
  def delta_hat_max(self) -> np.ndarray:
    return np.maximum(*(self.delta_hat[d] for d in DIRECTIONS))

  def __repr__(self) -> str:
    """One line: N and δ̂(ε), max over directions, at up to four ε (the state is not shown)."""
    shown = range(self.epsilons.size) if self.epsilons.size <= 4 else (0, self.epsilons.size - 1)
    error = np.maximum(*(self.standard_error[d] for d in DIRECTIONS))
    points = ', '.join(f'δ̂({self.epsilons[i]:.4g})={self.delta_hat_max[i]:.4g}±{error[i]:.2g}'
                       for i in shown)
    more = '' if self.epsilons.size <= 4 else f' ({self.epsilons.size} ε in all)'
    return (f'DeltaEstimate(num_samples={self.num_samples} per direction, {points}{more}; '
            'max over directions; an estimate, not a guarantee)')

  def to_dict(self, epsilons=None) -> dict:
    """JSON-ready: ``epsilons``, ``delta_hat`` and ``standard_error`` per direction and
    ``num_samples`` (per direction), on the estimate's grid or on the listed ``epsilons``
    (each must be a grid point)."""
    rows = resolution_lib.grid_rows(self.epsilons, epsilons)
    return {'epsilons': self.epsilons[rows].tolist(),
            'delta_hat': {d: self.delta_hat[d][rows].tolist() for d in DIRECTIONS},
            'standard_error': {d: self.standard_error[d][rows].tolist() for d in DIRECTIONS},
            'num_samples': self.num_samples}

  def resolved_epsilon(self, delta: float, *, z: float = 2.0) -> 'Resolution':
    """The smallest grid ε whose δ̂(ε) is resolved below ``delta`` by these samples: its upper
    confidence bound max over directions of δ̂ + z·s.e. is below ``delta``, and ``delta``
    is above the resolution 3/N of N samples (the "rule of three": with no term above 0 in N
    draws, δ up to 3/N is not excluded at 95 %). Otherwise ``epsilon`` is None and
    ``needed_samples`` says how many samples per direction would resolve it (from the
    s.e.'s 1/√N scaling at the first ε where δ̂ < ``delta``; None when no grid ε has
    δ̂ < ``delta``: the grid, not N, is then short). The estimator and its standard error
    are the sample mean of Dong & Ganesh (2026) §2.5 and its usual standard error
    (``resolution.resolve``, which a tilted estimate shares with its own floors).
    """
    return resolution_lib.resolve(self.epsilons, self.delta_hat, self.standard_error,
                                  self.num_samples, delta, z=z)

  def epsilon_for_delta(self, delta: float) -> float:
    """ε̂(δ): the smallest ε with δ̂(ε) ≤ δ in both directions (``inf`` if none).

    With a histogram, δ̂ is evaluated from the rounded-up losses (conservative:
    each loss is replaced by its bin's upper edge) and ε is found by bisection
    to 1e-9; without one, the answer is the smallest grid ε that qualifies.
    """
    delta = _validate.probability('delta', delta)
    if self.state.histogram is None:
      qualifying = self.epsilons[self.delta_hat_max <= delta]
      return float(qualifying.min()) if qualifying.size else float('inf')
    edges = np.asarray(self.state.histogram_edges + (np.inf,))
    counts = {d: np.asarray(self.state.histogram[d], np.float64) for d in DIRECTIONS}

    def delta_at(eps):
      return max(float(np.dot(counts[d], _terms_np(eps, edges))) / self.num_samples
                 for d in DIRECTIONS)

    if delta_at(edges[-2]) > delta:
      return float('inf')  # mass in the overflow bin: no finite ε is certified by the histogram
    low, high = -1.0, float(edges[-2])
    while delta_at(low) <= delta and low > -1e6:
      low *= 2.0
    while high - low > 1e-9 * max(1.0, abs(high)):
      mid = 0.5 * (low + high)
      low, high = (low, mid) if delta_at(mid) <= delta else (mid, high)
    return high


@dataclasses.dataclass(frozen=True, kw_only=True)
class EstimateReport:
  """A Monte Carlo estimate of a mechanism's δ(ε) as a report states it (``to_dict``, the
  ``estimate.json`` of ``jaxacct estimate``): an estimate, not a guarantee.

  Attributes:
    mechanism: the mechanism estimated.
    estimate: its ``DeltaEstimate`` (on a grid holding ``epsilons``: the figure's), or a
      ``tilted.TiltedDeltaEstimate``, whose rows add the proposal per direction, α, ln Z_α
      and its method and M(α, ε) per ε, and whose resolution has a floor per direction.
    epsilons: the table's ε.
    delta: the target δ at which the resolved ε is reported, or None.
    precision: the device program's ``PrecisionChoice`` (``montecarlo/evr/precision.py``).
  """

  mechanism: MatrixMechanism
  estimate: DeltaEstimate | tilted_lib.TiltedDeltaEstimate
  epsilons: list
  delta: float | None
  precision: precision_lib.PrecisionChoice

  @property
  def resolution(self) -> Resolution | None:
    """The ε the samples resolve at ``delta`` (``DeltaEstimate.resolved_epsilon``: δ̂ + 2·s.e.
    below δ, δ above each direction's floor, 3/N for plain terms), or None without a target."""
    return None if self.delta is None else self.estimate.resolved_epsilon(self.delta)

  def to_dict(self) -> dict:
    """JSON-ready: σ, the resolved ε at δ (None when unresolved), the scheme and its
    description, the key words as ``seed`` (as ``Guarantee.to_dict``), the precision and why,
    the ``resolution``, the table's rows (``DeltaEstimate.to_dict(epsilons)``) and the whole
    grid as ``curve``."""
    resolution = self.resolution
    scheme = self.mechanism.scheme.to_dict()
    return {
        'noise_multiplier': float(self.mechanism.noise_multiplier),
        'epsilon': None if resolution is None else resolution.epsilon, 'delta': self.delta,
        'verified': False, 'method': Method.ESTIMATE.value,
        'accountant': 'monte_carlo',  # accounting.MONTE_CARLO, the request's name for it
        'conjectural': self.mechanism.scheme.conjectural, 'bounded': self.mechanism.bounded,
        'scheme': scheme, 'sampling_prob': scheme.get('sampling_prob'),  # None: no p
        'expected_participation_rate': self.mechanism.scheme.expected_participation_rate,
        'seed': [int(w) for w in self.estimate.key_data],
        'precision': self.precision.precision, 'precision_reason': self.precision.reason,
        'resolution': None if resolution is None else resolution._asdict(),
        # epsilons, delta_hat, standard_error, N (tilted: and the proposal, α, ln Z_α, M)
        **self.estimate.to_dict(self.epsilons),
        'curve': self.estimate.to_dict(),
    }


def _terms_np(epsilon: float, losses: np.ndarray) -> np.ndarray:
  with np.errstate(invalid='ignore'):
    return np.where(np.isinf(losses) & (losses > 0), 1.0,
                    -np.expm1(np.minimum(epsilon - losses, 0.0)))


def delta_from_losses(epsilon: float, losses, counts=None) -> float:
  """δ̂(ε) = weighted mean of (1 − e^{ε − L})₊ over given losses (host, float64).

  Args:
    epsilon: ε (finite).
    losses: privacy losses L (1-D); +inf counts as a term of 1.
    counts: optional non-negative integer weights (histogram-compressed samples).
  """
  epsilon = _validate.finite_real('epsilon', epsilon)
  values = np.asarray(losses, dtype=np.float64).ravel()
  if values.size == 0:
    raise InputError('losses must be non-empty')
  weights = np.ones_like(values) if counts is None else np.asarray(counts, np.float64).ravel()
  if weights.shape != values.shape or np.any(weights < 0):
    raise InputError('counts must be non-negative and match losses in length')
  return float(np.dot(weights, _terms_np(epsilon, values)) / weights.sum())


def fingerprint(mechanism, kernel, epsilons, edges, block_size, purpose, key_data) -> str:
  """Hash of everything that determines a stream's samples and sums (resume check)."""
  payload = repr((kernel, mechanism.scheme, float(mechanism.noise_multiplier),
                  mechanism.matrix.fingerprint,
                  tuple(epsilons), edges, block_size, str(purpose), key_data))
  return hashlib.sha256(payload.encode()).hexdigest()[:32]


def check_epsilons(epsilons) -> np.ndarray:
  """The ε grid as a float64 array: a non-empty 1-D list of finite reals."""
  grid = _validate.real_array('epsilons', epsilons, 'a non-empty 1-D list')
  if grid.ndim != 1 or grid.size == 0:
    raise InputError(f'epsilons must be a non-empty 1-D list of numbers, got {epsilons!r}')
  if not np.all(np.isfinite(grid)):
    raise InputError(f'epsilons must be finite, got {grid.tolist()}')
  return grid


def _check_edges(histogram_edges):
  if histogram_edges is None:
    return None
  edges = _validate.real_array('histogram_edges', histogram_edges, 'a 1-D list')
  if edges.ndim != 1 or edges.size == 0 or not np.all(np.isfinite(edges)):
    raise InputError('histogram_edges must be a non-empty 1-D list of finite numbers')
  if np.any(np.diff(edges) <= 0):
    raise InputError('histogram_edges must be strictly increasing')
  return tuple(edges.tolist())


@options_lib.moved
@scoped_x64
def estimate_delta(key, mechanism: MatrixMechanism, epsilons, num_samples: int, *,
                   histogram_edges=None, state: EstimatorState | None = None,
                   monte_carlo: options_lib.MonteCarloOptions | None = None,
                   run: options_lib.RunOptions | None = None
                   ) -> DeltaEstimate | tilted_lib.TiltedDeltaEstimate:
  """Streaming MC estimate of δ(ε) = H_{e^ε} for both directions (Dong & Ganesh (2026) §2.5).

  Args:
    key: a typed JAX key (the run's seed; legacy uint32 keys are converted).
    mechanism: the mechanism to account.
    epsilons: the ε grid (non-empty, finite).
    num_samples: samples per direction (total, including a resumed ``state``).
    histogram_edges: optional increasing loss bin edges; each loss is rounded
      **up** to its bin's upper edge (losses above the last edge count as +∞),
      so histogram-based δ̂ is conservative.
    state: a previous run's ``EstimatorState`` to extend (same fingerprint;
      its ``num_samples`` must be a multiple of ``block_size``).
    monte_carlo: ``MonteCarloOptions``; an estimate uses ``precision`` (``"float64"``;
      ``"float32"``: the 32-bit program with its certified margin — each term is evaluated at
      ε − η and block sums are rounded up, so δ̂ is ≥ that of the exact losses,
      ``montecarlo/engine/margin.py``; ``"auto"``: ``montecarlo/evr/precision.py``) and ``block_size``
      (samples per reduction block, part of the result's identity; default
      ``sampling.default_block_size(iterations)``). Sums are float64. With
      ``proposal='tilted'`` and ``tilt_order=α`` the remove direction is drawn from the law
      tilted by the privacy loss and weighted back, each term bounded by M(α, ε) (float64
      only; ``montecarlo/evr/tilted.py``: Poisson with C = c·I, b-min-sep with bands ≤ b,
      cyclic Poisson and balls-in-bins with bands ≤ T; no ``histogram_edges`` or ``state``;
      ``tilt_state_budget`` bounds its tuple chain; ``run.max_seconds`` projects its host
      tuple draws and device calls after the host tables,
      ``tilted_plan.tilted_sampling_seconds``); the add direction stays plain.
      Other fields are refused (an estimate verifies nothing).
    run: ``RunOptions``: devices (default every device of every process; under
      ``jax.distributed`` all processes call this with the same arguments), blocks per call,
      progress (stage "estimate"), checkpoint (a folder where the run saves its state every
      ``checkpoint_interval`` seconds and at its end; calling again with the same arguments
      resumes from it bitwise, ``montecarlo/evr/checkpoint.py``) and ``max_seconds`` (one call of
      the program is timed first, after its compile, and a run projected longer is refused
      with ``plan.OverBudgetError`` before any sample is drawn). Its ``ledger`` must be None:
      an estimate charges no attempt, so a ledger here is refused rather than silently unused.

  Returns:
    ``DeltaEstimate`` with δ̂ and standard errors per direction; with ``proposal='tilted'``
    a ``tilted.TiltedDeltaEstimate`` (the same per-direction δ̂ and standard errors, with the
    proposal per direction, α, ln Z_α and M per ε).

  Raises:
    tilted.TermAboveBoundError: a tilted term above its bound M (never clipped).

  The estimate uses the key's *estimation* stream only; the verification stream
  is reachable only through ``evr.verify``, so candidates cannot be chosen by
  peeking at the draws that will verify them.

  References:
    Wang et al. 2023 (MC accounting); Dong & Ganesh (2026), §2.5 (the estimator),
    App. A (verification). Float64 accumulation, streaming and per-block keys are
    this implementation's (not in the paper).
  """
  monte_carlo = options_lib.monte_carlo_options(monte_carlo, 'estimate_delta',
                                                 ESTIMATE_FIELDS)
  run = options_lib.run_options(run)
  if run.ledger is not None:  # before any compute: a ledger given here would protect nothing
    raise InputError('estimate_delta does not verify: ledger is not used; pass it to '
                     f'verify/calibrate (got run.ledger = {run.ledger!r}; give '
                     'an estimate a RunOptions without one: dataclasses.replace(run, '
                     'ledger=None))')
  if monte_carlo.proposal == 'auto':
    raise InputError(argument='monte_carlo.proposal', value='auto',
                     requirement="is for verify and account; an estimate takes 'plain' or "
                     "'tilted' with its tilt_order (montecarlo.evr.tilted.choose_order("
                     'mechanism, ε) gives the order of the smallest M at an ε)',
                     suggestion={'monte_carlo.proposal': 'tilted'})
  return run_estimate(key, mechanism, epsilons, num_samples, purpose='estimation',
                      precision=monte_carlo.precision, block_size=monte_carlo.block_size,
                      histogram_edges=histogram_edges, state=state, run=run,
                      tilt_order=monte_carlo.tilt_order,
                      tilt_state_budget=monte_carlo.tilt_state_budget)


# The MonteCarloOptions fields an estimate uses.
ESTIMATE_FIELDS = frozenset({'precision', 'block_size', 'proposal', 'tilt_order',
                             'tilt_state_budget'})


@scoped_x64
def run_estimate(key, mechanism: MatrixMechanism, epsilons, num_samples: int, *, purpose: str,
                 precision: str = 'float64',
                 block_size: int | None = None, histogram_edges=None,
                 state: EstimatorState | None = None,
                 run: options_lib.RunOptions = options_lib.RunOptions(),
                 tilt_order: int | None = None, tilt_state_budget: int | None = None
                 ) -> DeltaEstimate | tilted_lib.TiltedDeltaEstimate:
  """``estimate_delta`` on the stream of ``purpose`` (library-internal); progress is
  reported under the stage "estimate". ``tilt_order``: the tilted proposal's α (None: plain);
  ``tilt_state_budget``: its chain's state budget (None: ``tilt_bound``'s default)."""
  sampling.check_mechanism(mechanism)
  grid = check_epsilons(epsilons)
  num_samples = keys_lib.check_num_samples(num_samples)
  if block_size is None:
    block_size = sampling.default_block_size(mechanism.iterations)
  block_size = _validate.integer_at_least('block_size', block_size, 1)
  _validate.one_of('purpose', purpose, ('estimation', 'verification'))
  max_seconds = plan_lib.check_max_seconds(run.max_seconds)
  edges = _check_edges(histogram_edges)
  choice = precision_lib.choose(precision, mechanism)
  key = keys_lib.canonicalize_key(key)
  key_data = keys_lib.key_words(key)
  kernel = kernels.kernel_for(mechanism, choice.dtype)
  run_fingerprint = fingerprint(mechanism, kernel, grid.tolist(), edges, block_size, purpose,
                                key_data)
  if tilt_order is not None:
    return _tilted(key, mechanism, grid, num_samples, tilt_order, purpose=purpose,
                   precision=choice.precision, block_size=block_size, edges=edges, state=state,
                   identity={'estimator': run_fingerprint, 'num_samples': num_samples}, run=run,
                   state_budget=tilt_state_budget or tilt_bound.DEFAULT_STATE_BUDGET)
  bins = None if edges is None else len(edges) + 1
  if state is None:
    first_block = 0
    totals = stream.BlockSums.zeros(1, grid.size, bins)
  else:
    if state.fingerprint != run_fingerprint:
      raise InputError('state was produced by a different run (mechanism, epsilons, key, '
                       'purpose, dtype, block_size or histogram_edges differ); cannot resume')
    if state.num_samples % block_size:
      raise InputError(f'cannot resume from num_samples = {state.num_samples}, which is not a '
                       f'multiple of block_size = {block_size}')
    if num_samples < state.num_samples:
      raise InputError(f'num_samples must be >= the resumed state\'s {state.num_samples}, '
                       f'got {num_samples}')
    first_block = state.num_samples // block_size
    totals = state.totals()

  mesh = SampleMesh.over(run.devices)
  purpose_key = keys_lib.purpose_key(key, purpose)
  saved = checkpoint_lib.open_checkpoint(
      run.checkpoint, {'run': 'estimate', 'estimator': run_fingerprint, 'num_samples': num_samples,
                   'extends_samples': 0 if state is None else state.num_samples,
                   **({} if choice.precision == 'float64' else {'precision': choice.precision})},
      run.checkpoint_interval)
  phase = checkpoint_lib.Phase(saved, 'estimate', identity=num_samples)
  run_state = phase.start(stream.StreamState(totals))
  program = stream.one_sigma_program(mechanism, kernel, block_size, mesh)
  plan_lib.refuse_projected(f'the Monte Carlo estimate of {num_samples:,} samples per direction',
                            max_seconds, program, mesh, run_state, num_samples=num_samples,
                            block_size=block_size, blocks_per_call=run.blocks_per_call,
                            first_block=first_block)
  stream.accumulate(lambda direction: keys_lib.direction_key(purpose_key, direction),
                    program, run_state,
                    num_samples=num_samples, first_block=first_block, block_size=block_size,
                    blocks_per_call=run.blocks_per_call, mesh=mesh, epsilons=grid, edges=edges,
                    progress=progress_lib.staged(run.progress, 'estimate'),
                    after_call=phase.after_call)
  phase.finish(run_state)
  return estimate_from_state(EstimatorState.of_totals(
      run_state.totals, fingerprint=run_fingerprint, key_data=key_data, purpose=purpose,
      epsilons=tuple(grid.tolist()), block_size=block_size, num_samples=num_samples,
      histogram_edges=edges))


def _tilted(key, mechanism, grid, num_samples, order, *, purpose, precision, block_size, edges,
            state, identity, run, state_budget: int) -> tilted_lib.TiltedDeltaEstimate:
  """The tilted proposal's estimate (``tilted.run_tilted_estimate``), after its refusals."""
  unused = "is not available with proposal='tilted' ({}): give None"
  for argument, given, requirement in (
      ('histogram_edges', edges is not None,
       unused.format('its losses are drawn under the tilted law, not P')),
      ('state', state is not None, unused.format('extend a tilted run through run.checkpoint')),
      ('monte_carlo.precision', precision != 'float64',
       "must resolve to 'float64' with proposal='tilted' (the float64 program only)")):
    if given:
      raise InputError(argument=argument, requirement=requirement)
  tilt = tilted_lib.tilt_for(mechanism, order, grid, state_budget=state_budget)
  if run.max_seconds is not None:  # the host tables are built: what is left is projected
    samples = {d: num_samples for d in DIRECTIONS}
    state = tilted_lib.saved_state(tilted_lib.estimate_phase(run, identity, tilt, num_samples),
                                   1, tilt.epsilons.size)
    plan_lib.refuse_over_budget(
        f'the tilted estimate of {num_samples:,} samples per direction',
        tilted_plan.tilted_sampling_seconds([mechanism], [tilt], samples, run=run,
                                            block_size=block_size, state=state),
        run.max_seconds)
  return tilted_lib.run_tilted_estimate(key, mechanism, tilt, num_samples, purpose=purpose,
                                        block_size=block_size, identity=identity, run=run)


def estimate_from_state(state: EstimatorState) -> DeltaEstimate:
  """δ̂(ε) and standard errors from accumulated sums (host, float64)."""
  n = state.num_samples
  delta_hat, standard_error = {}, {}
  for d in DIRECTIONS:
    delta_hat[d], standard_error[d] = mean_and_standard_error(
        state.sums[d], state.sums_of_squares[d], n)
  return DeltaEstimate(epsilons=np.asarray(state.epsilons), delta_hat=delta_hat,
                       standard_error=standard_error, num_samples=n,
                       key_data=state.key_data, state=state)
