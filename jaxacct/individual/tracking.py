"""Individual accounting inside the training loop (device state, host readout).

``IndividualAccountant`` says what to record; the training step (``jaxacct.training``) updates
an ``IndividualState`` pytree with the clipped-norm ratios r = min(‖g‖, C)/C of the step's
parameters (before its noise: predictable, as Koskela et al. (2022) Alg. 1 requires):

- **Full batch** (Poisson with p = 1, DP-GD): every example's r comes from the step's own
  per-example gradients; the state is each example's spent Σ μ² = Σ r²/σ² in int32 fixed point
  (units of U/2²⁹, every charge rounded **up**), so the exact GDP readout (Thm 2) is an upper
  bound and resuming is bitwise. With a ``filter_budget`` B the step runs the individual GDP
  filter (Alg. 1, ``GDPFilter``'s rule in integers: U = B², an example passes iff spent + charge
  ≤ 2²⁹ units) and masks the dropped examples' clipped gradients out of the sum before the
  noise is added; the active count of every step is recorded.
- **Poisson, p < 1** (DP-SGD): a separate per-example-norm pass over the ``tracked`` examples
  at the step's parameters, every step whether sampled or not (App. D.2), bucketed on the σ̃ grid of
  ``epsilons`` (r rounded **up**) into int32 counts (tracked × grid_size); the readout is
  ``epsilons_from_counts`` (PLD or RDP). There is no filter: a subsampled step has no useful
  per-step GDP parameter (the paper gives none; see ``filter``).

Soundness margins: r is computed in the training precision; it is inflated by 2⁻¹² relative
(≫ float32 rounding of the norm) before charging or bucketing, the float32 grid is rounded
down, and charges are rounded up — each only over-charges. Scope: DP-SGD / DP-GD with
independent noise (a one-band strategy C = c₀·I, effective noise multiplier σ/c₀) and
untruncated Poisson sampling; banded C (BandMF) is refused: dropping an example does not
remove its earlier rows' contributions from later releases (the paper treats independent
per-step noise only), no proof yet.

Individual ε values and active counts are functions of private data (not discussed in the
paper): they are for the data holder, not for release.

References:
  Antti Koskela, Marlon Tobaben and Antti Honkela, "Individual Privacy Accounting with Gaussian
  Differential Privacy", arXiv:2209.15596: §3.3 (Thm 2), §4 (Algorithm 1, Thm 1), App. D
  (docs/references.md).
"""

from __future__ import annotations

import dataclasses
from typing import NamedTuple

import jax
import jax.numpy as jnp
import numpy as np

from jaxacct import _validate
from jaxacct.individual import epsilons as epsilons_lib
from jaxacct.individual import gdp
from jaxacct.errors import InputError, InputTypeError
from jaxacct.schemes.participation import MinSepChain

UNITS = 1 << 29
"""Fixed-point units of the full-batch budget (2²⁹ units = U; int32 holds spent + any charge)."""
RATIO_MARGIN = 2.0**-12
"""Relative inflation of every recorded ratio (covers the training precision's rounding)."""
METHODS = ('pld', 'rdp')  # readouts for p < 1; p = 1 is always exact GDP


@dataclasses.dataclass(frozen=True)
class IndividualAccountant:
  """What the training loop records for individual accounting (module docstring).

  Attributes:
    delta: δ ∈ (0, 1) of the reported individual ε.
    filter_budget: B > 0 runs the individual GDP filter (full batch only); None records only.
    retest: the filter re-tests dropped examples every step (Alg. 1 as printed) instead of
      dropping them for good (default; ``GDPFilter``).
    tracked: dataset indices of the examples to track under Poisson p < 1 (None: all); full
      batch always tracks all.
    method: readout for p < 1, ``"pld"`` or ``"rdp"`` (``individual_epsilons``).
    grid_size, inflation: the σ̃ grid for p < 1 (``individual_epsilons``).
  """

  delta: float
  filter_budget: float | None = None
  retest: bool = False
  tracked: tuple[int, ...] | None = None
  method: str = 'pld'
  grid_size: int = 100
  inflation: float = 15.0

  def __post_init__(self):
    from jaxacct.deterministic.base import check_delta
    check_delta(self.delta)
    if self.filter_budget is not None:
      _validate.positive_finite('filter_budget', self.filter_budget)
    _validate.one_of('method', self.method, METHODS)
    _validate.integer_at_least('grid_size', self.grid_size, 2)
    _validate.positive_finite('inflation', self.inflation)
    if self.inflation <= 1.0:
      raise InputError(f'inflation must be > 1, got {self.inflation}')
    if self.tracked is not None:
      tracked = np.asarray(self.tracked)
      if tracked.ndim != 1 or tracked.size == 0 or not np.issubdtype(tracked.dtype, np.integer):
        raise InputError('tracked must be a non-empty sequence of dataset indices')
      if np.unique(tracked).size != tracked.size or np.min(tracked) < 0:
        raise InputError('tracked must hold distinct non-negative dataset indices')

  @classmethod
  def with_filter_for(cls, *, epsilon: float, delta: float, **options) -> 'IndividualAccountant':
    """The full-batch filter whose budget B is the largest μ with μ-GDP ⇒ (ε, δ)-DP."""
    return cls(delta=delta, filter_budget=gdp.gdp_budget(epsilon, delta), **options)


class IndividualState(NamedTuple):
  """The recorded quantities (a pytree; int32 and bool only, so resuming is bitwise).

  Attributes:
    spent: full batch: (m,) spent Σ μ² in units of U/2²⁹; p < 1: (0,).
    active: full batch: (m,) still active under the filter; p < 1: (0,).
    counts: p < 1: (tracked, grid_size) steps per σ̃ bucket; full batch: (0, grid_size).
    active_counts: (iterations,) active examples at each step (full batch; −1 before it ran).
  """

  spent: jax.Array
  active: jax.Array
  counts: jax.Array
  active_counts: jax.Array


class DeviceSpec(NamedTuple):
  """The static (shape-determining) part of the step's tracking: hashable."""

  full_batch: bool
  filtering: bool
  retest: bool
  grid_size: int


@dataclasses.dataclass(frozen=True)
class Tracking:
  """An ``IndividualAccountant`` bound to a mechanism and dataset: what the step needs.

  Attributes:
    accountant: the configuration.
    sampling_prob: p of the Poisson scheme.
    noise_multiplier: the effective σ (mechanism σ over the strategy's c₀).
    iterations: steps of the run.
    dataset_size: m.
    tracked: dataset indices tracked (p < 1), all for full batch.
    unit: U/2²⁹ in μ² (full batch).
  """

  accountant: IndividualAccountant
  sampling_prob: float
  noise_multiplier: float
  iterations: int
  dataset_size: int
  tracked: np.ndarray
  unit: float

  @property
  def full_batch(self) -> bool:
    return self.sampling_prob == 1.0

  @property
  def spec(self) -> DeviceSpec:
    return DeviceSpec(self.full_batch, self.accountant.filter_budget is not None,
                      self.accountant.retest, self.accountant.grid_size)

  def grid(self) -> np.ndarray:
    """The float64 ratio grid of the p < 1 buckets (``epsilons.bucket_ratios``)."""
    return epsilons_lib.bucket_ratios(self.accountant.grid_size, self.accountant.inflation)

  def traced(self) -> dict:
    """The step's traced arrays: the charge factor (units per r², rounded up) and the float32
    ratio grid rounded down (r ≤ grid32 ⇒ r ≤ grid64)."""
    factor = np.float32(1.0 / (self.unit * self.noise_multiplier**2) * (1 + 2.0**-20))
    grid = self.grid()
    grid32 = grid.astype(np.float32)
    grid32 = np.where(grid32.astype(np.float64) > grid, np.nextafter(grid32, np.float32(0)),
                      grid32).astype(np.float32)
    return dict(charge_factor=jnp.asarray(np.nextafter(factor, np.float32(np.inf))),
                ratio_grid=jnp.asarray(grid32))

  def init(self) -> IndividualState:
    """Nothing spent, everyone active, no counts."""
    m = self.dataset_size if self.full_batch else 0
    tracked = 0 if self.full_batch else self.tracked.size
    return IndividualState(jnp.zeros((m,), jnp.int32), jnp.ones((m,), bool),
                           jnp.zeros((tracked, self.accountant.grid_size), jnp.int32),
                           jnp.full((self.iterations,), -1, jnp.int32))

  def check_state(self, state) -> None:
    """Raises unless ``state`` is an ``IndividualState`` of this tracking's shapes."""
    if not isinstance(state, IndividualState):
      raise InputTypeError(f'individual_state must be a jaxacct.individual.IndividualState, got '
                      f'{type(state).__name__}')
    expected = jax.tree_util.tree_map(np.shape, self.init())
    if jax.tree_util.tree_map(np.shape, state) != expected:
      raise InputError(f'individual_state has shapes {jax.tree_util.tree_map(np.shape, state)} '
                       f'but this run needs {expected}: it is from another run or accountant')

  # ---------------------------------------------------------------- host readout
  def spent_mu(self, state: IndividualState) -> np.ndarray:
    """Full batch: every example's μ_i = √(Σ μ²) (upper bound: charges rounded up)."""
    return np.sqrt(np.asarray(state.spent, np.float64) * self.unit)

  def epsilons(self, state: IndividualState) -> np.ndarray:
    """Every tracked example's ε(δ) so far: exact GDP of its spent μ_i (full batch, Thm 2), or
    ``epsilons_from_counts`` of its buckets (p < 1: the realised-sequence ε, not a filter
    guarantee)."""
    if self.full_batch:
      return gdp.gdp_epsilon(self.spent_mu(state), self.accountant.delta)
    return self._counts_readout(np.asarray(state.counts, np.int64))

  def worst_case_epsilon(self, steps: int | None = None) -> float:
    """ε(δ) of an example with every ratio 1 for ``steps`` (default all) steps, by the same
    readout: what a worst-case accountant charges everyone."""
    steps = self.iterations if steps is None else steps
    if self.full_batch:
      return float(gdp.gdp_epsilon(np.sqrt(steps) / self.noise_multiplier, self.accountant.delta))
    counts = np.zeros((1, self.accountant.grid_size), np.int64)
    counts[0, 0] = steps
    return float(self._counts_readout(counts)[0])

  def _counts_readout(self, counts: np.ndarray) -> np.ndarray:
    """``epsilons_from_counts`` with this run's q, σ, δ, method and grid."""
    return epsilons_lib.epsilons_from_counts(
        counts, sampling_prob=self.sampling_prob, noise_multiplier=self.noise_multiplier,
        delta=self.accountant.delta, method=self.accountant.method,
        grid_size=self.accountant.grid_size, inflation=self.accountant.inflation)


def summary(tracking: Tracking, state: IndividualState, steps: int) -> dict:
  """A JSON-ready account of a run's individual ε after ``steps`` steps (for reports).

  Keys: ``delta``, ``method`` (``"gdp"`` for full batch), ``tracked``, ``epsilons`` (every
  tracked example's ε), ``quantiles`` (0, 10, 50, 90, 100 %), ``worst_case_epsilon`` (every
  ratio 1 for ``steps`` steps, same readout), ``filter_epsilon`` (the filter's guarantee or
  None), ``steps_per_epoch`` and ``active_per_epoch`` (active examples at the end of each
  epoch; full batch only).
  """
  epsilons = tracking.epsilons(state)
  accountant = tracking.accountant
  per_epoch = max(1, round(1.0 / tracking.sampling_prob))
  active = np.asarray(state.active_counts)[:steps]
  return {
      'delta': accountant.delta,
      'method': 'gdp' if tracking.full_batch else accountant.method,
      'tracked': int(tracking.tracked.size),
      'epsilons': epsilons.tolist(),
      'quantiles': dict(zip(('0', '10', '50', '90', '100'),
                            np.quantile(epsilons, [0, 0.1, 0.5, 0.9, 1.0]).tolist())),
      'worst_case_epsilon': tracking.worst_case_epsilon(steps),
      'filter_epsilon': (None if accountant.filter_budget is None else
                         float(gdp.gdp_epsilon(accountant.filter_budget, accountant.delta))),
      'steps_per_epoch': per_epoch,
      'active_per_epoch': (active[per_epoch - 1::per_epoch].tolist() if tracking.full_batch
                           else None),
  }


def check_parameter_precision(params) -> None:
  """Refuses parameters below float32: the clipped gradients themselves are rounded in the
  parameters' precision (bf16: ~0.4 % over C), beyond ``RATIO_MARGIN``."""
  for leaf in jax.tree_util.tree_leaves(params):
    dtype = jnp.asarray(leaf).dtype
    if jnp.issubdtype(dtype, jnp.floating) and jnp.finfo(dtype).bits < 32:
      raise InputError(f'individual accounting needs float32 or float64 parameters, got {dtype}: '
                       'its rounding of the clipped gradients exceeds the 2⁻¹² margin the '
                       'recorded ratios carry')


def bind(accountant: IndividualAccountant, mechanism, dataset_size: int) -> Tracking:
  """Checks that ``accountant`` applies to ``mechanism`` (module docstring) and binds it."""
  if not isinstance(accountant, IndividualAccountant):
    raise InputTypeError(f'individual must be a jaxacct.individual.IndividualAccountant, got '
                    f'{accountant!r}')
  scheme = mechanism.scheme
  participation = scheme.participation
  model = participation.model
  # Independent Poisson(p) rounds, untruncated: Poisson, or BMinSep(min_sep=1) (the same chain).
  if not (isinstance(model, MinSepChain) and model.min_sep == 1) or \
      participation.truncation is not None:
    raise InputError(f'individual accounting covers untruncated Poisson sampling (DP-SGD) and '
                     f'full batches (Poisson with sampling_prob = 1), not {scheme!r} (Koskela '
                     'et al. (2022) analyse only these)')
  c_col, inverse_band = mechanism.matrix.noise_bands()
  if len(c_col) != 1 or len(inverse_band) != 1:
    raise InputError('individual accounting needs independent noise (a one-band strategy, '
                     'DP-SGD/DP-GD): with banded C a dropped example\'s earlier rows still '
                     'enter later releases, and the filter has no proof for that (Koskela et al. '
                     '(2022) treat independent noise only)')
  sigma = mechanism.noise_multiplier / abs(float(c_col[0]) / float(inverse_band[0]))
  full_batch = model.sampling_prob == 1.0
  if accountant.filter_budget is not None and not full_batch:
    raise InputError(f'filter_budget needs full-batch training (sampling_prob = 1, got '
                     f'{model.sampling_prob}): a subsampled step has no useful per-step GDP '
                     'parameter (Koskela et al. (2022) give none); record without a filter')
  if full_batch or accountant.tracked is None:  # the filter must cover every example
    tracked = np.arange(dataset_size)
  else:
    tracked = np.asarray(accountant.tracked, np.int64)
    if np.max(tracked) >= dataset_size:
      raise InputError(f'tracked holds index {np.max(tracked)} but the dataset has '
                       f'{dataset_size} examples')
  if accountant.filter_budget is not None:
    unit = accountant.filter_budget**2 / UNITS
  else:  # the worst case total T/σ² is 2²⁹ units: int32 holds every sum
    unit = scheme.iterations / sigma**2 / UNITS
  return Tracking(accountant, float(model.sampling_prob), float(sigma), scheme.iterations,
                  dataset_size, tracked, unit)


# -------------------------------------------------------------------- device code
def clipped_ratios(norms: jax.Array, clip_norm: jax.Array) -> jax.Array:
  """r = min(‖g‖, C)/C inflated by ``RATIO_MARGIN`` (≤ 1); a non-finite norm counts as 1."""
  ratios = jnp.minimum(jnp.minimum(norms, clip_norm) / clip_norm * (1 + RATIO_MARGIN), 1.0)
  return jnp.where(jnp.isfinite(norms), ratios, 1.0)


def full_batch_update(spec: DeviceSpec, state: IndividualState, step: jax.Array,
                      indices: jax.Array, mask: jax.Array, ratios: jax.Array,
                      charge_factor: jax.Array) -> tuple[IndividualState, jax.Array]:
  """Charge (and filter) the batch's examples: (new state, the slots whose gradients enter).

  Alg. 1's order: the check includes this step's charge; a dropped example is charged 0.
  Padded slots (mask False) neither charge nor change anyone.
  """
  ceiling = float(UNITS + 128)  # > the budget (exact in float32), so spent + charge fits int32
  charge = jnp.ceil(jnp.minimum(ratios * ratios * charge_factor, ceiling)).astype(jnp.int32)
  spent = state.spent[indices]
  if spec.filtering:
    fits = spent + charge <= UNITS
    keep = fits if spec.retest else fits & state.active[indices]
  else:
    keep = jnp.ones_like(mask)
  enter = mask & keep
  slots = jnp.where(mask, indices, state.spent.shape[0])  # padded slots scatter nowhere
  new_spent = state.spent.at[slots].add(jnp.where(enter, charge, 0), mode='drop')
  new_active = state.active.at[slots].set(keep, mode='drop')
  active_counts = state.active_counts.at[step].set(jnp.sum(new_active, dtype=jnp.int32))
  return IndividualState(new_spent, new_active, state.counts, active_counts), enter


def bucket_update(state: IndividualState, ratios: jax.Array,
                  ratio_grid: jax.Array) -> IndividualState:
  """Count each tracked example's ratio in the bucket of the last grid ratio ≥ r (σ̃ rounded
  down); r = 0 is not counted (no loss)."""
  bucket = jnp.sum(ratio_grid[None, :] >= ratios[:, None], axis=1) - 1  # grid descends from 1
  hit = (jnp.arange(ratio_grid.shape[0])[None, :] == bucket[:, None]) & (ratios[:, None] > 0)
  return state._replace(counts=state.counts + hit.astype(jnp.int32))
