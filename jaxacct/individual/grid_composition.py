"""Per-example composition of σ-grid bucket PLDs by FFT products (host code).

Each example's bucket counts k_b (``epsilons.bucket_counts``) say how many of its steps were
the Poisson-subsampled Gaussian with noise multiplier σ_b. The bucket PLDs are dp_accounting's
pessimistic (connect-the-dots) PMFs on one loss lattice of step Δ, so an example's composed
PLD is the lattice convolution Π_b PLD_b^{*k_b} — exactly what dp_accounting's
``self_compose``/``compose`` chain computes, but done for every example at once (App. D.1):

    F(composed_i) = exp( Σ_b k_b · log F(PLD_b) − 2πi f s_i / n ),

one real (num_examples × buckets) @ (buckets × frequencies) product for all examples, then
one inverse FFT per example; ``log F`` is any branch of the complex logarithm, since k_b are
integers. The phase term moves example i's window to start at its own lattice offset s_i
(App. D's per-example shift), so one FFT size n serves all.

Soundness of the window (aliasing; App. D.1 truncates the PLD to [−L, L]): the cyclic FFT
folds mass outside the window [w_i, w_i + n) back into it.
- Mass below w_i (w_i ≤ 0 always) lands somewhere with weight ≥ its true weight 0 in
  δ(ε ≥ 0): conservative.
- Mass at or above w_i + n is *added* to δ as the Chernoff bound
  P(S_i ≥ (w_i + n)Δ) ≤ min_λ exp(Σ_b k_b ψ_b(λ) − λ(w_i + n)Δ), ψ_b the log-MGF of the bucket
  PMF (exact sums over its atoms), or 0 when the window reaches the composed support's end.
- The windows are chosen so both tails are ≤ ``tail_bound`` per example; if that needs more
  than ``max_fft_size`` points the call fails naming the parameters to change.
- The infinity masses compose as 1 − Π_b (1 − ∞_b)^{k_b}, added to δ.
- Floating point: negative FFT round-off is clipped to 0 and ``ROUNDOFF_ALLOWANCE`` per unit
  of mass is added to δ (measured round-off is below 1e-13; tests pin the result to
  dp_accounting's own chain).
Both orderings (remove and add PMFs: Thm 1 bounds both, App. D.3 gives the remove pair only)
are composed; ε is the larger.

References:
  Antti Koskela, Marlon Tobaben and Antti Honkela, "Individual Privacy Accounting with Gaussian
  Differential Privacy", arXiv:2209.15596: App. D (D.1: Lemma 1; D.2: Thm 2; D.3), §4 (Thm 1)
  (docs/references.md).
  Koskela, Jälkö, Prediger & Honkela, AISTATS 2021 (Fourier accountant, aliasing);
  Doroshenko et al., PoPETs 2022 (connect-the-dots PLDs, dp_accounting).
"""

from __future__ import annotations

import dataclasses
import functools

import numpy as np
from scipy import fft as sp_fft
from scipy import special

from jaxacct.conventions import DIRECTIONS
from jaxacct.deterministic import pld_pmfs
from jaxacct.errors import InputError

ROUNDOFF_ALLOWANCE = 1e-11
"""Absolute δ added per composition for FFT round-off (measured ≤ 1e-13 at n = 2²⁰)."""

_LAMBDAS = np.geomspace(1e-3, 1e3, 61)  # Chernoff exponents (both tails)
_LOG_FLOOR = -745.0  # log|F| below this is exp-underflow: 0 → stays 0 (and 0·floor = 0)
_CHUNK_ELEMENTS = 1 << 23  # examples per chunk × FFT size: ~64 MB per float64 array


@dataclasses.dataclass(frozen=True)
class BucketPMFs:
  """The bucket PLD PMFs of one direction on a common lattice of step ``discretization``.

  Attributes:
    discretization: Δ, the lattice step of the losses.
    lower: (buckets,) lattice index of each PMF's first atom.
    probs: tuple of the PMFs' finite atoms (float64 arrays).
    log_finite: (buckets,) ln(1 − ∞_b), the log of each PMF's finite mass share.
    log_mgf: (buckets, 2, λ's) ψ_b(±λ) = ln Σ_j p_{b,j} e^{±λ ℓ_j} over the finite atoms.
  """

  discretization: float
  lower: np.ndarray
  probs: tuple
  log_finite: np.ndarray
  log_mgf: np.ndarray

  @property
  def upper(self) -> np.ndarray:
    """(buckets,) lattice index of each PMF's last atom."""
    return self.lower + np.array([p.size for p in self.probs]) - 1


@functools.lru_cache(maxsize=8)
def bucket_pmfs(sampling_prob: float, sigmas: tuple, discretization: float,
                direction: str) -> BucketPMFs:
  """dp_accounting's pessimistic PLD of the subsampled Gaussian for each σ_b (one direction).

  Cached: a training run's reports and a notebook's sweeps reuse the same grid.
  """
  from dp_accounting.pld import privacy_loss_distribution
  if direction not in DIRECTIONS:
    raise InputError(f'direction must be one of {DIRECTIONS}, got {direction!r}')
  lower, probs, log_finite, log_mgf = [], [], [], []
  for sigma in sigmas:
    pld = privacy_loss_distribution.from_gaussian_mechanism(
        float(sigma), sampling_prob=sampling_prob, value_discretization_interval=discretization,
        pessimistic_estimate=True, use_connect_dots=True)
    start, atoms, infinity = pld_pmfs.dense_atoms(pld_pmfs.direction_pmf(pld, direction))
    losses = (start + np.arange(atoms.size)) * discretization
    positive = atoms > 0
    lower.append(start)
    probs.append(atoms)
    log_finite.append(np.log1p(-infinity))
    exponents = np.multiply.outer(np.array([1.0, -1.0])[:, None] * _LAMBDAS, losses[positive])
    log_mgf.append(special.logsumexp(exponents, b=atoms[positive], axis=-1))
  return BucketPMFs(discretization, np.array(lower, np.int64), tuple(probs),
                    np.array(log_finite), np.array(log_mgf))


def _fft_size(points: int) -> int:
  return sp_fft.next_fast_len(int(points), real=True)


def _windows(counts: np.ndarray, table: BucketPMFs, log_tail: float):
  """Per example: window start w_i ≤ 0 and the end of the range it must hold (lattice indices)
  such that each tail outside has mass ≤ e^{log_tail}, clipped to the composed support."""
  psi = counts @ table.log_mgf.reshape(len(table.probs), -1)  # (examples, 2·λ's)
  psi_up, psi_down = psi[:, :_LAMBDAS.size], psi[:, _LAMBDAS.size:]
  delta = table.discretization
  top = np.min((psi_up - log_tail) / _LAMBDAS, axis=1)
  bottom = np.max((log_tail - psi_down) / _LAMBDAS, axis=1)
  support_low = counts @ table.lower
  support_high = counts @ table.upper
  start = np.minimum(np.maximum(np.floor(bottom / delta), support_low), 0).astype(np.int64)
  end = np.minimum(np.ceil(top / delta), support_high).astype(np.int64)
  return start, np.maximum(end, start), support_high, psi_up


def _bandwidths(counts: np.ndarray, log_magnitude: np.ndarray) -> np.ndarray:
  """Per example, a number of frequencies above which |Π_b F_b^{k_b}| < e^{−745} (so exp gives
  exactly 0 there): Σ_b k_b max_{f′ ≥ f} ln|F_b(f′)| is non-increasing in f; probed on a
  coarse grid, the first probe below the floor bounds the bandwidth from above."""
  envelope = np.maximum.accumulate(log_magnitude[:, ::-1], axis=1)[:, ::-1]
  size = log_magnitude.shape[1]
  probes = np.unique(np.concatenate([np.geomspace(1, size, 64).astype(np.int64) - 1, [size - 1]]))
  below = counts.astype(np.float64) @ envelope[:, probes] < _LOG_FLOOR
  first = np.where(below.any(axis=1), np.argmax(below, axis=1), probes.size - 1)
  return np.where(below.any(axis=1), probes[first] + 1, size)


def _upper_tail(psi_up: np.ndarray, threshold: np.ndarray, beyond: np.ndarray) -> np.ndarray:
  """Chernoff bound on P(S ≥ threshold) (0 where the support ends below it)."""
  bound = np.exp(np.min(psi_up - _LAMBDAS * threshold[:, None], axis=1))
  return np.where(beyond, 0.0, np.minimum(bound, 1.0))


_BLOCK = 128  # atoms per block of the coarse-to-fine ε search


def _epsilons_from_window(pmf: np.ndarray, start: np.ndarray, delta_left: np.ndarray,
                          discretization: float) -> np.ndarray:
  """Smallest ε ≥ 0 with Σ_{ℓ > ε} (1 − e^{ε−ℓ}) p_ℓ ≤ δ′ per row (window losses (w_i + a)Δ).

  On [ℓ_j, ℓ_{j+1}] δ(ε) = T1_j − e^ε T2_j with T1_j, T2_j the mass and e^{−ℓ}-weighted mass
  of the atoms above j, and δ(ℓ_j) is non-increasing in j: the crossing block is found from
  block sums, then the crossing atom inside it. Weights e^{−(a−c)Δ} (c the window centre)
  replace per-atom exponentials. ``pmf`` is overwritten.
  """
  rows, n = pmf.shape
  if n * discretization > 1400:  # e^{±nΔ/2} must stay finite
    raise InputError(f'the FFT window spans {n * discretization:.4g} nats of privacy loss: the '
                     'individual losses are too large for this route (ε in the hundreds)')
  index = np.arange(rows)
  zero = -start  # the last atom with ℓ ≤ 0 (w_i ≤ 0, so it is in the window)
  np.maximum(pmf, 0.0, out=pmf)  # FFT round-off below 0 (see ROUNDOFF_ALLOWANCE)
  for i in range(rows):  # only ℓ > 0 enters δ(ε ≥ 0)
    pmf[i, :zero[i] + 1] = 0.0
  centre = n // 2
  blocks = -(-n // _BLOCK)
  padded = np.zeros((rows, blocks * _BLOCK))
  padded[:, :n] = pmf
  scale = np.exp(-(np.arange(blocks * _BLOCK) - centre) * discretization)
  shaped = padded.reshape(rows, blocks, _BLOCK)
  mass = shaped.sum(axis=2)
  weighted = np.einsum('rkb,kb->rk', shaped, scale.reshape(blocks, _BLOCK))
  # mass above each block boundary kB − 1 (k = 0 … blocks): sums over blocks ≥ k
  above = np.concatenate([np.cumsum(mass[:, ::-1], axis=1)[:, ::-1], np.zeros((rows, 1))], 1)
  above_weighted = np.concatenate(
      [np.cumsum(weighted[:, ::-1], axis=1)[:, ::-1], np.zeros((rows, 1))], 1)
  boundary = np.arange(blocks + 1) * _BLOCK - 1
  with np.errstate(over='ignore'):
    at_boundary = above - above_weighted / np.exp(-(boundary - centre) * discretization)
  over = (at_boundary > delta_left[:, None]) & (boundary > zero[:, None])
  last = np.sum(over, axis=1)  # boundaries past the zero atom with δ > δ′ form a prefix there
  # the block to search atom by atom: the one after the last boundary past the zero atom with
  # δ > δ′, or the block holding the first positive atom; it starts at boundary k
  first_after_zero = (zero + 1) // _BLOCK + 1  # k of the first boundary kB − 1 > zero
  # (clipped: only a δ′ ≤ 0, answered ∞ by the caller, or a window without positive atoms,
  # answered 0, could point past the last block)
  k = np.minimum(np.where(last > 0, first_after_zero + last - 1, first_after_zero - 1),
                 blocks - 1)
  fine_start = boundary[k]  # atoms fine_start … fine_start + B − 1 hold the crossing
  # T1, T2 strictly above each of those atoms: suffix sums inside the block (sums of
  # non-negative terms only: no cancellation however far the weights spread) plus the sums
  # above the block
  columns = fine_start[:, None] + np.arange(1, _BLOCK + 1)  # the block's atoms, ≥ 0
  taken = np.take_along_axis(padded, columns, 1)
  weights = scale[columns]
  t1 = above[index, k + 1][:, None] + np.cumsum(taken[:, ::-1], 1)[:, ::-1]
  t2 = above_weighted[index, k + 1][:, None] + np.cumsum((taken * weights)[:, ::-1], 1)[:, ::-1]
  atoms = fine_start[:, None] + np.arange(_BLOCK)
  with np.errstate(over='ignore'):
    at_atoms = t1 - t2 / np.exp(-(atoms - centre) * discretization)
  fine_over = (at_atoms > delta_left[:, None]) & (atoms > zero[:, None])
  last_over = np.max(np.where(fine_over, np.arange(_BLOCK), -1), axis=1)
  j = np.where(last_over >= 0, fine_start + last_over, zero)  # the zero atom: no atom over
  offset = np.clip(j - fine_start, 0, _BLOCK - 1)
  t1_j = t1[index, offset]
  t2_j = t2[index, offset]
  with np.errstate(divide='ignore', invalid='ignore'):
    # ε on [max(ℓ_j, 0), ℓ_{j+1}]: T1_j − e^ε T2_j = δ′, true T2_j = t2_j · e^{−(w_i + c)Δ}
    solved = np.log((t1_j - delta_left) / t2_j) + (start + centre) * discretization
  low = np.maximum((start + j) * discretization, 0.0)
  high = (start + j + 1) * discretization
  epsilon = np.clip(np.nan_to_num(solved, nan=np.inf), low, high)
  # δ(0) = Σ_{ℓ_a > 0} p_a (1 − e^{−ℓ_a}), e^{−ℓ_a} = e^{−(w+c)Δ}·scale_a
  delta_at_zero = above[:, 0] - above_weighted[:, 0] * np.exp(-(start + centre) * discretization)
  return np.where(delta_at_zero <= delta_left, 0.0, epsilon)


def composed_epsilons(counts: np.ndarray, table: BucketPMFs, delta: float, *,
                      tail_bound: float, max_fft_size: int) -> np.ndarray:
  """ε(δ) of Π_b PLD_b^{*k_b} for each row of ``counts`` in one direction (module docstring).

  Args:
    counts: (examples, buckets) non-negative integers.
    table: ``bucket_pmfs`` of the same buckets.
    delta: the δ of ε(δ).
    tail_bound: the largest mass each window may leave outside per side.
    max_fft_size: refuse windows longer than this.

  Returns:
    (examples,) float64 ε (∞ when the infinity and tail masses alone exceed δ).
  """
  counts = np.asarray(counts, np.int64)
  start, end, support_high, psi_up = _windows(counts, table, np.log(tail_bound))
  width = int(np.max(end - start)) + 1
  n = _fft_size(max(width, 2))
  if n > max_fft_size:
    raise InputError(
        f'the composed PLD needs an FFT window of {n} points (loss range '
        f'{np.min(start) * table.discretization:.3g} … {np.max(end) * table.discretization:.3g} '
        f'at step {table.discretization:g}) but max_fft_size = {max_fft_size}: raise '
        'max_fft_size or value_discretization_interval')
  log_spectrum = np.empty((len(table.probs), n // 2 + 1), np.complex128)
  for b, atoms in enumerate(table.probs):
    folded = np.bincount(np.arange(atoms.size) % n, weights=atoms, minlength=n)
    with np.errstate(divide='ignore'):
      log_spectrum[b] = np.log(sp_fft.rfft(folded))
  log_spectrum.real = np.maximum(log_spectrum.real, _LOG_FLOOR)
  finite = np.exp(counts @ table.log_finite)
  threshold = (start + n) * table.discretization
  tail = _upper_tail(psi_up, threshold, start + n > support_high)
  delta_left = delta - (1.0 - finite) - tail - ROUNDOFF_ALLOWANCE
  # the product's index 0 is the loss Σ_b k_b lower_b; move it to window index (that − start)
  shifts = np.mod(counts @ table.lower - start, n)
  bandwidth = _bandwidths(counts, log_spectrum.real)
  order = np.argsort(bandwidth, kind='stable')  # chunks of similar bandwidth
  epsilons = np.empty(counts.shape[0])
  chunk = max(1, _CHUNK_ELEMENTS // n)
  for lo in range(0, counts.shape[0], chunk):
    rows = order[lo:lo + chunk]
    width = int(np.max(bandwidth[rows]))
    frequencies = np.arange(width, dtype=np.int64)
    phase = np.mod(np.multiply.outer(shifts[rows], frequencies), n) * (2 * np.pi / n)
    weights = counts[rows].astype(np.float64)
    spectrum = np.exp(weights @ log_spectrum.real[:, :width]
                      + 1j * (weights @ log_spectrum.imag[:, :width] - phase))
    pmf = sp_fft.irfft(spectrum, n, axis=1, workers=-1)  # zero above the bandwidth
    epsilons[rows] = _epsilons_from_window(pmf, start[rows], delta_left[rows],
                                           table.discretization)
  return np.where(delta_left > 0, epsilons, np.inf)
