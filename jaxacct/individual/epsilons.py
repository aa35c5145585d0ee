"""Individual ε of every tracked example from its realised clipped-norm ratios.

Example i's step t is a Poisson-subsampled (rate q) Gaussian mechanism with noise multiplier
σ̃_{i,t} = σ / r_{i,t}, r_{i,t} = c_{i,t}/C its clipped gradient norm over the clip norm
(Koskela et al. (2022) App. D.2; σ is a noise multiplier). ``individual_epsilons`` composes that
heterogeneous sequence for every example at once:

- ``"gdp"`` (q = 1 only): μ_i = √(Σ_t r²)/σ, exact (Thm 2), then ε of μ_i-GDP;
- ``"rdp"``: the Feldman–Zrnic individual RDP, Σ_t ρ(q, σ̃_{i,t}, α) over a grid of orders
  (fractional and large), converted by dp_accounting's ``compute_epsilon``; exact per-order
  ρ for q = 1 (α r²/(2σ²)), σ̃ bucketed down for q < 1;
- ``"pld"``: dp_accounting's pessimistic PLDs of the subsampled Gaussian for each bucket of σ̃
  on one loss lattice, every example's counts composed at once by the FFT products of App. D
  (``grid_composition``: the same lattice convolution as dp_accounting's composition chain,
  measured ~10⁴× faster at 10⁴ steps), both orderings, ε(δ) the max over them. Examples with
  equal bucket counts share one composition.

Bucketing (App. D.2, Eq. (D.2)): σ̃ is rounded **down** to the grid σ·(1 + j·(s − 1)/(m − 1)),
j = 0..m−1 (``inflation`` s, ``grid_size`` m), i.e. r rounded up; σ̃ above σ·s goes to σ·s;
r = 0 costs nothing. Less noise is a post-processing-dominating pair, so the bucketed ε is
at least the exact ε of the realised sequence (App. D Thm 2).

What the result means: the tight ε of the *realised* sequence of per-step parameters, as
Koskela et al. (2022) §5 (Fig. 1) and App. D report it — not a filter guarantee (that is
``filter.GDPFilter`` for q = 1: Thm 2 needs the budget fixed in advance and every step's
parameter predictable). Individual ε values are functions of private data (gradient norms):
publishing them leaks (a point the paper does not discuss).

References:
  Antti Koskela, Marlon Tobaben and Antti Honkela, "Individual Privacy Accounting with Gaussian
  Differential Privacy", arXiv:2209.15596: §3.3 (Thm 2), §5 (Fig. 1), App. D.2–D.3 (Eq. (D.2), App.
  D Thm 2) (docs/references.md).
  Feldman & Zrnic, "Individual Privacy Accounting via a Rényi Filter", NeurIPS 2021; Mironov,
  Talwar & Zhang, "Rényi Differential Privacy of the Sampled Gaussian Mechanism", 2019.
"""

from __future__ import annotations

import functools
import logging

import numpy as np

from jaxacct import _validate
from jaxacct.deterministic.base import check_delta
from jaxacct.conventions import DIRECTIONS
from jaxacct.individual import gdp, grid_composition
from jaxacct.errors import InputError

METHODS = ('pld', 'rdp', 'gdp')
ORDERS = np.concatenate([np.linspace(1.05, 2.0, 20), np.linspace(2.1, 10.0, 80),
                         np.arange(11.0, 64.0), np.unique(np.round(np.geomspace(64, 4096, 60)))])
"""Rényi orders of the RDP route: fractional up to 10, integers up to 4096 (a coarse integer grid
makes the RDP route needlessly loose; dp_accounting's series for fractional orders does not
converge at large α)."""


MAX_TABLE_BYTES = 1 << 32
"""The largest host table the accountant builds (4 GiB): the (num_examples, grid_size) bucket
counts, refused beyond it naming the argument (split the examples: each ε_i depends only on
its own row)."""

_PLD_TAIL_SD = 10.0  # dp_accounting's Gaussian PLD covers about ±10 s.d. of the noise

TAIL_SHARE = 1e-6
"""The ``pld`` route's FFT windows leave at most this share of δ outside per side (the upper
tail is added to δ: ``grid_composition``)."""


def check_ratios(clipped_norm_ratios) -> np.ndarray:
  """(num_examples, iterations) float64 ratios c/C in [0, 1] (ValueError naming the problem)."""
  shape = np.shape(clipped_norm_ratios)
  if len(shape) != 2 or 0 in shape:
    raise InputError(f'clipped_norm_ratios must have shape (num_examples, iterations) with both '
                     f'> 0, got shape {shape}')
  return gdp.check_ratio_values(clipped_norm_ratios)


def bucket_ratios(grid_size: int, inflation: float) -> np.ndarray:
  """The ratio grid r_j = 1/(1 + j(s − 1)/(m − 1)), descending from 1 to 1/s (σ̃ = σ/r linear
  in j, as App. D.2's σ-grid)."""
  steps = np.arange(grid_size, dtype=np.float64)
  spread = (inflation - 1.0) / max(grid_size - 1, 1)
  return 1.0 / (1.0 + steps * spread)


def bucket_indices(ratios: np.ndarray, grid: np.ndarray) -> np.ndarray:
  """Position in the descending grid of each ratio rounded **up** (σ̃ rounded down)."""
  spread = (grid[0] / grid[-1] - 1.0) / max(grid.size - 1, 1)
  with np.errstate(divide='ignore'):
    guess = np.floor((1.0 / ratios - 1.0) / spread)
  index = np.clip(np.nan_to_num(guess, posinf=grid.size - 1), 0, grid.size - 1).astype(np.int64)
  # the arithmetic guess may be off by one where 1/r is within rounding of a grid point: settle
  # on the last grid ratio ≥ r by exact comparisons against the grid itself
  # (relative error ~1e-15 in the guess: one step either way suffices)
  index -= (grid[index] < ratios) & (index > 0)
  following = np.minimum(index + 1, grid.size - 1)
  index += (grid[following] >= ratios) & (following > index)
  return index


def bucket_counts(ratios: np.ndarray, grid: np.ndarray) -> np.ndarray:
  """(num_examples, grid_size) counts of each example's ratios rounded **up** to the grid
  (σ̃ down: pessimistic); ratios of 0 are not counted (no loss)."""
  examples, steps = ratios.shape
  counts = np.zeros((examples, grid.size), np.int64)
  rows_per_chunk = max(1, (1 << 24) // steps)
  for lo in range(0, examples, rows_per_chunk):
    block = ratios[lo:lo + rows_per_chunk]
    flat = (np.arange(block.shape[0])[:, None] * grid.size + bucket_indices(block, grid))
    counts[lo:lo + block.shape[0]] = np.bincount(
        flat[block > 0], minlength=block.shape[0] * grid.size).reshape(-1, grid.size)
  return counts


@functools.lru_cache(maxsize=16)
def _rdp_table_cached(sampling_prob: float, sigmas: tuple) -> np.ndarray:
  table = _rdp_table(sampling_prob, np.asarray(sigmas))
  table.setflags(write=False)  # shared between calls
  return table


def _rdp_table(sampling_prob: float, sigmas: np.ndarray) -> np.ndarray:
  """ρ(q, σ_b, α) for every bucket and order (dp_accounting's subsampled-Gaussian RDP)."""
  # pylint: disable=protected-access  # dp_accounting 0.6.0 (pinned) keeps it module-private;
  # RdpAccountant composes exactly this function (tested against it).
  from dp_accounting.rdp import rdp_privacy_accountant
  # dp_accounting logs a warning for every fractional order whose series does not converge
  # (small σ) and returns NaN there; NaN is read as "no bound at this order" below.
  absl_logger = logging.getLogger('absl')
  level = absl_logger.level
  absl_logger.setLevel(logging.ERROR)
  try:
    table = np.array([rdp_privacy_accountant._compute_rdp_poisson_subsampled_gaussian(
        sampling_prob, float(s), ORDERS) for s in sigmas])
  finally:
    absl_logger.setLevel(level)
  return np.where(np.isnan(table), np.inf, table)  # an order it cannot bound is no bound


def _rdp_epsilons(rdp: np.ndarray, delta: float) -> np.ndarray:
  """min over orders of the RDP → (ε, δ) conversion, row by row: dp_accounting's
  ``compute_epsilon`` (Canonne, Kamath & Steinke 2020, Prop. 12; Asoodeh et al. 2021), in
  one vectorised expression (pinned against it in the tests)."""
  orders = ORDERS[None, :]
  with np.errstate(invalid='ignore'):
    converted = rdp + np.log1p(-1.0 / orders) - np.log(delta * orders) / (orders - 1.0)
  converted = np.where(orders > 1.01, converted, np.inf)
  # δ ≤ √(1 − e^{−KL}) already (KL ≤ ρ(α) for every α > 1): ε = 0; NaN (∞ − ∞) is no bound
  free = delta**2 + np.expm1(-rdp) > 0
  converted = np.where(free, 0.0, np.nan_to_num(converted, nan=np.inf))
  return np.maximum(np.min(converted, axis=1), 0.0)


def _pld_epsilons(counts: np.ndarray, sampling_prob: float, sigmas: np.ndarray, delta: float,
                  discretization: float, max_fft_size: int) -> np.ndarray:
  unique, inverse = np.unique(counts, axis=0, return_inverse=True)
  epsilons = np.zeros(unique.shape[0])
  for direction in DIRECTIONS:
    table = grid_composition.bucket_pmfs(sampling_prob, tuple(sigmas.tolist()), discretization,
                                         direction)
    epsilons = np.maximum(epsilons, grid_composition.composed_epsilons(
        unique, table, delta, tail_bound=TAIL_SHARE * delta, max_fft_size=max_fft_size))
  return epsilons[inverse.ravel()]


def individual_epsilons(clipped_norm_ratios, *, sampling_prob: float, noise_multiplier: float,
                        delta: float, method: str = 'pld', grid_size: int = 100,
                        inflation: float = 15.0,
                        value_discretization_interval: float = 1e-4,
                        max_fft_size: int = 1 << 22) -> np.ndarray:
  """ε_i(δ) of every example from its realised clipped-norm ratios (module docstring).

  Args:
    clipped_norm_ratios: (num_examples, iterations), r = min(‖g‖, C)/C ∈ [0, 1], recorded at
      the parameters each step used, for every step (sampled or not: Koskela et al. (2022)
      App. D.2 charges every step).
    sampling_prob: q ∈ (0, 1] (1: full-batch DP-GD).
    noise_multiplier: σ > 0 (noise std σC on the sum of clipped gradients).
    delta: δ ∈ (0, 1).
    method: ``"pld"`` (default), ``"rdp"`` or ``"gdp"`` (q = 1 only).
    grid_size, inflation: the σ̃ grid of ``pld`` and ``rdp`` (m ≥ 2 points from σ to σ·s).
    value_discretization_interval: the PLD lattice step of ``pld`` (connect-the-dots,
      pessimistic; ε grows by ~1 % at 1e-3 against 1e-4 over 10⁴ steps).
    max_fft_size: ``pld`` refuses (naming this and the lattice step) when the composed PLDs
      need a longer FFT window than this to hold all but 10⁻⁶·δ of their mass.

  Returns:
    float64 (num_examples,) array of ε_i.
  """
  ratios = check_ratios(clipped_norm_ratios)
  options = _check_options(sampling_prob, noise_multiplier, delta, method, grid_size, inflation,
                           value_discretization_interval, max_fft_size)
  sampling_prob, sigma, delta, method = (options[k] for k in
                                         ('sampling_prob', 'sigma', 'delta', 'method'))
  if method == 'gdp':
    return gdp.gdp_epsilon(gdp.composed_mu(ratios, sigma), delta)
  if method == 'rdp' and sampling_prob == 1.0:
    # q = 1: ρ_i(α) = α Σ_t r²/(2σ²) exactly, no grid needed.
    squares = np.sum(ratios * ratios, axis=1) / (2 * sigma**2)
    return _rdp_epsilons(squares[:, None] * ORDERS[None, :], delta)
  table_bytes = ratios.shape[0] * options['grid_size'] * 8
  if table_bytes > MAX_TABLE_BYTES:
    raise InputError(
        f'clipped_norm_ratios has {ratios.shape[0]:,} examples: their bucket counts (num_examples '
        f'× grid_size = {options["grid_size"]}) need {table_bytes / 2**30:.1f} GiB, over '
        f'{MAX_TABLE_BYTES / 2**30:.0f} GiB; pass the examples in batches (each ε_i depends only '
        'on its own row) or a smaller grid_size')
  counts = bucket_counts(ratios, bucket_ratios(options['grid_size'], options['inflation']))
  return _epsilons_of_counts(counts, **options)


def _check_options(sampling_prob, noise_multiplier, delta, method, grid_size, inflation,
                   value_discretization_interval, max_fft_size) -> dict:
  options = dict(sampling_prob=_validate.probability('sampling_prob', sampling_prob),
                 sigma=_validate.positive_finite('noise_multiplier', noise_multiplier),
                 delta=check_delta(delta), method=_validate.one_of('method', method, METHODS),
                 grid_size=_validate.integer_at_least('grid_size', grid_size, 2),
                 inflation=_validate.positive_finite('inflation', inflation),
                 discretization=_validate.positive_finite('value_discretization_interval',
                                                          value_discretization_interval),
                 max_fft_size=_validate.integer_at_least('max_fft_size', max_fft_size, 16))
  if options['inflation'] <= 1.0:
    raise InputError(f'inflation must be > 1 (the grid runs from σ to σ·inflation), got '
                     f'{inflation}')
  if options['method'] == 'pld':
    # One step's PLD spans ≈ (2·z·σ + 1)/σ² in loss (sensitivity 1, z s.d. of the noise each
    # side); dp_accounting builds it whole on the lattice before any window check (38 GiB at
    # σ = 10⁻³), so a lattice over MAX_TABLE_BYTES is refused here, naming the arguments.
    sigma = options['sigma']
    points = (2.0 * _PLD_TAIL_SD * sigma + 1.0) / (sigma * sigma * options['discretization'])
    if points * 8 > MAX_TABLE_BYTES:
      raise InputError(
          f'noise_multiplier = {noise_multiplier} is too small for method="pld": one step\'s '
          f'privacy-loss distribution spans ~{points:.3g} lattice points at '
          f'value_discretization_interval = {value_discretization_interval} '
          f'({points * 8 / 2**30:.0f} GiB); use method="rdp", or a larger '
          'value_discretization_interval')
  if options['method'] == 'gdp' and options['sampling_prob'] < 1.0:
    raise InputError(f'method="gdp" is exact only for full-batch DP-GD (sampling_prob = 1, '
                     f'got {sampling_prob}): a subsampled Gaussian step is not q/σ-GDP '
                     '(Koskela et al. (2022) use the GDP route without subsampling only); use '
                     'method="pld" or "rdp"')
  return options


def _epsilons_of_counts(counts, *, sampling_prob, sigma, delta, method, grid_size, inflation,
                        discretization, max_fft_size) -> np.ndarray:
  sigmas = sigma / bucket_ratios(grid_size, inflation)
  if method == 'rdp':
    table = _rdp_table_cached(sampling_prob, tuple(sigmas.tolist()))  # ~0.2 s per bucket
    # Σ_b k_b ρ_b(α) with 0·∞ = 0 (an unused bucket adds nothing, a used one with ρ = ∞ rules
    # that order out).
    unbounded = np.isinf(table)
    rdp = counts @ np.where(unbounded, 0.0, table)
    rdp = np.where((counts > 0).astype(np.int64) @ unbounded.astype(np.int64) > 0, np.inf, rdp)
    return _rdp_epsilons(rdp, delta)
  if method == 'gdp':  # q = 1 on the grid: μ² = Σ_b k_b r_b²/σ²
    squares = counts @ (bucket_ratios(grid_size, inflation) ** 2)
    return gdp.gdp_epsilon(np.sqrt(squares) / sigma, delta)
  return _pld_epsilons(counts, sampling_prob, sigmas, delta, discretization, max_fft_size)


def epsilons_from_counts(counts, *, sampling_prob: float, noise_multiplier: float, delta: float,
                         method: str = 'pld', grid_size: int = 100, inflation: float = 15.0,
                         value_discretization_interval: float = 1e-4,
                         max_fft_size: int = 1 << 22) -> np.ndarray:
  """``individual_epsilons`` from bucket counts already made (e.g. by the training loop).

  Args:
    counts: (num_examples, grid_size) non-negative integers: example i's steps whose σ̃ was
      rounded down to grid point b (``bucket_counts``; ratios of 0 not counted).
    Others: as ``individual_epsilons`` (the grid must be the one the counts were made on).

  Returns:
    float64 (num_examples,) array of ε_i.
  """
  options = _check_options(sampling_prob, noise_multiplier, delta, method, grid_size, inflation,
                           value_discretization_interval, max_fft_size)
  counts = np.asarray(counts)
  if (counts.ndim != 2 or counts.shape[1] != options['grid_size']
      or not np.issubdtype(counts.dtype, np.integer) or np.any(counts < 0)):
    raise InputError(f'counts must be a (num_examples, grid_size = {grid_size}) array of '
                     f'non-negative integers, got shape {counts.shape} and dtype {counts.dtype}')
  return _epsilons_of_counts(counts.astype(np.int64), **options)
