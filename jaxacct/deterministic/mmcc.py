"""The ``"mmcc"`` accountant: MMCC (Choquette-Choo et al. (2023)) for Poisson sampling, any C ≥ 0.

Matrix-mechanism conditional composition (Choquette-Choo, Ganesh, Steinke, Thakurta, ICLR 2024,
Algorithms 1–2, Theorem 4.8). With every participation's contribution aligned (the worst case,
proof of Thm 4.8 Step 1), output row i given rows 1..i−1 is a mixture of Gaussians whose
sensitivity is Σ_j C_ij·1[the example took part in round j]. Lemma 4.9 bounds the posterior
participation probabilities, given the past outputs θ, by

    p_ij = sigmoid(logit p + (2⟨θ_{1:i−1}, C_{1:i−1,j}⟩ − ‖C_{1:i−1,j}‖²)/(2σ²)),

independent across j (a product mixture, PMoG: Cor. 4.4 makes it dominate), and
Algorithm 2 replaces the unknown ⟨θ, C_{1:i−1,j}⟩ by a bound that holds except with
probability 2δ′ — z·σ·‖C_{1:i−1,j}‖ for the noise (z = Φ⁻¹(1 − δ′), taken by ``ndtri`` on the
upper tail, never ``ppf(1 − δ′)``) plus s_ij ≥ the (1 − δ′)-quantile of
Σ_{j′} x_{j′}⟨C_{1:i−1,j}, C_{1:i−1,j′}⟩, x_{j′} ~ Bern(p):

    ε_ij = z‖C_{1:i−1,j}‖/σ + (2 s_ij − ‖C_{1:i−1,j}‖²)/(2σ²),   p̃_ij = sigmoid(logit p + ε_ij).

s_ij is the sum of the t largest Gram entries ⟨C_{1:i−1,j}, C_{1:i−1,j′}⟩, t the exact
(1 − δ′)-quantile of the participation count (App. B.3). Two exact refinements beyond the
paper: the count is Bin(k, p) over the k columns with a *positive* Gram entry (the others add
zero: k ≤ 2b − 1 for a b-banded C instead of i), and the union bound runs over the bounds
taken, nnz(C) minus one first non-zero per column (the paper's nnz(C) − n when C has a
non-zero diagonal): δ′ = δ₁ / (2·count).

Conditional composition (Thm 3.1) then gives δ(ε) ≤ δ_PLD(ε) + δ₁ for the PLD composing the n
row pairs (N(S_i, σ²) with S_i = Σ_j C_ij·Bern(p̃_ij), N(0, σ²)), "remove"; "add" by symmetry
(Lemma 2.4; the bad event is as unlikely under N(0, σ²I), where s ≥ 0 only widens it). Each
row's S_i lives on a lattice: C rounded *up* to multiples of Δ₂ (Lemma 4.3 / Cor. 4.4: a larger
sensitivity dominates), its PMF the exact convolution of two-point PMFs, mass lost to underflow
put on the largest atom and atoms below ``NEGLIGIBLE_MASS`` merged into the next atom above
(both stochastically larger: pessimistic). Row pairs become dp_accounting's pessimistic
``MixtureGaussianPrivacyLoss`` PMFs (``mixture_pld``, grid Δ₁) and are composed; rows with the
same lattice atoms and p̃ (banded Toeplitz C: every row from 2b − 1 on, App. B.4; C = I: all)
share one PMF, composed with itself.

Covered: ``Poisson`` (untruncated) and ``BMinSep(min_sep=1)`` (the same scheme) with any
``BandedToeplitz`` (any band count) or ``LowerTriangular`` C. Not covered, with the reason:
truncated Poisson (participations are not independent), Dong–Ganesh b-min-sep with b > 1 (not
the "b-min-sep sampling" of Choquette-Choo et al. (2023) App. A, which is jaxacct's
``CyclicPoisson``), ``CyclicPoisson`` (the "pld" accountant is exact for it with at most
``cycle_length`` bands, which App. A's Generalized-MMCC reproduces; more bands are not accepted
by ``MatrixMechanism``), balls-in-bins and multi-attribution.

References:
  Christopher A. Choquette-Choo, Arun Ganesh, Thomas Steinke and Abhradeep Thakurta, "Privacy
  Amplification for Matrix Mechanisms", arXiv:2310.15526 (v2; ICLR 2024): Thm 3.1, Lemmas 4.3,
  4.9, Cor. 4.4, Algorithms 1–2, Thm 4.8, §4.2, App. A, App. B.1–B.4 (docs/references.md).
  Jan Schuchardt and Nikita Kalinin, "Sampling-Free Privacy Accounting for Matrix Mechanisms under
  Random Allocation", arXiv:2601.21636 (docs/references.md).
"""

from __future__ import annotations

import functools
import math
import typing
from typing import NamedTuple

import numpy as np
from scipy import special, stats

from jaxacct import _validate
from jaxacct.conventions import DIRECTIONS, Adjacency
from jaxacct.deterministic import _grid, conditional_composition, mixture_pld, pld
from jaxacct.deterministic._search import smallest_passing_sigma
from jaxacct.deterministic.base import DeterministicAccountant, Option, register
from jaxacct.errors import InputError
from jaxacct.schemes.participation import Cyclic, FixedBins, MinSepChain

DEFAULT_DISCRETIZATION = 1e-3  # Δ₁, the PLD grid
DEFAULT_SENSITIVITY_STEPS = 100  # Δ₂ = max C / 100 unless given
COARSE_LATTICE = 4  # a coarse copy's Δ₂ is this × Δ₂ (fewer distinct rows; more pessimistic)
NEGLIGIBLE_MASS = 1e-30  # sensitivity atoms lighter than this merge into the next one up
REFINEMENT = 64  # the convolution lattice is up to this many times finer than Δ₂ ...
MAX_SUPPORT = 1 << 16  # ... while a row's PMF has at most this many points
_QUANTILE_MARGIN = 1e-9  # ln-space slack making the binomial quantile err upward


def strategy_entries(matrix, iterations: int) -> np.ndarray:
  """C as a dense float64 n×n array (host)."""
  return np.asarray(matrix.materialize(iterations), dtype=np.float64)


def bound_count(entries: np.ndarray) -> int:
  """The number of tail bounds Algorithm 2 takes: entries C_ij > 0 below the first non-zero of
  column j (at the first, C_{1:i−1,j} = 0 and p̃ = p exactly). nnz(C) − n for a C with a
  non-zero diagonal."""
  positive = entries > 0
  return int(positive.sum() - positive.any(axis=0).sum())


def participation_quantile(count: int, sampling_prob: float, significance: float) -> int:
  """The smallest t with Pr[Bin(count, p) > t] ≤ ``significance`` (exact binomial tail,
  App. B.3), erring upward by a relative 1e-9 in ln Pr."""
  if count == 0 or sampling_prob >= 1.0:
    return count
  log_tail = stats.binom.logsf(np.arange(count + 1), count, sampling_prob)
  passing = log_tail <= math.log(significance) - _QUANTILE_MARGIN * abs(math.log(significance))
  return int(np.argmax(passing)) if passing.any() else count


def _index(positions: np.ndarray):
  """A slice for sorted contiguous positions (views instead of fancy-index copies: dense rows)."""
  if positions.size and positions[-1] - positions[0] + 1 == positions.size:
    return slice(int(positions[0]), int(positions[-1]) + 1)
  return positions


class TailSums(NamedTuple):
  """The σ-free part of Algorithm 2 (shared by every σ of a calibration): where a bound is
  taken (``needed``: C_ij > 0 and C_{1:i−1,j} ≠ 0), s_ij and ‖C_{1:i−1,j}‖² there (0 elsewhere),
  the per-bound significance δ′, z = Φ⁻¹(1 − δ′) and the number of bounds."""

  needed: np.ndarray
  sums: np.ndarray
  norms: np.ndarray
  significance: float
  z: float
  count: int


class TailBounds(NamedTuple):
  """Algorithm 2's output: ``logits`` (n×n) of p̃_ij where C_ij > 0 (logit p elsewhere),
  the per-bound significance δ′, z = Φ⁻¹(1 − δ′) and the number of bounds taken."""

  logits: np.ndarray
  significance: float
  z: float
  count: int


def tail_sums(entries: np.ndarray, sampling_prob: float, bad_event_delta: float) -> TailSums:
  """The s_ij and prefix norms of ProbabilityTailBounds (Choquette-Choo et al. (2023) Algorithm 2),
  with the refinements of the module docstring; they do not depend on σ.

  The prefix Gram matrix G = C_{1:i−1,:}ᵀ C_{1:i−1,:} is updated by one row per step on the
  row's support (O(nnz(row)²)); s_ij is a top-t sum over the columns whose Gram entry with j is
  positive, t depending on their number (cached per count). ``entries`` may have more rows
  than columns (m×n, rows in release order, e.g. a binary tree's nodes: Choquette-Choo et al.
  (2023) Sec. 5–6).
  """
  rows, n = entries.shape
  count = bound_count(entries)
  significance = bad_event_delta / (2 * count) if count else 1.0
  z = float(-special.ndtri(significance))
  quantile = functools.lru_cache(maxsize=None)(
      lambda k: participation_quantile(k, sampling_prob, significance))
  needed = np.zeros((rows, n), bool)
  sums = np.zeros((rows, n))
  norms = np.zeros((rows, n))
  gram = np.zeros((n, n))
  for i in range(rows):
    support = np.flatnonzero(entries[i])
    if count:
      need = support[gram[support, support] > 0]
      if need.size:
        block = gram[_index(need)]
        block = block[:, _index(np.flatnonzero((block > 0).any(axis=0)))]
        counts, where = np.unique((block > 0).sum(axis=1), return_inverse=True)
        t = np.array([quantile(int(k)) for k in counts], np.int64)[where.ravel()]
        # Only the largest max(t) entries of a row can be in its top-t sum: partition, then
        # sort that slice (the same values in the same order as a full sort: bitwise equal).
        width = int(t.max())
        if 0 < width < block.shape[1]:
          block = np.partition(block, block.shape[1] - width, axis=1)[:, -width:]
        ordered = -np.sort(-block, axis=1)
        top = np.concatenate([np.zeros((need.size, 1)), np.cumsum(ordered, axis=1)], axis=1)
        needed[i, need] = True
        sums[i, need] = top[np.arange(need.size), t]
        norms[i, need] = gram[need, need]
    row = entries[i, support]
    where = _index(support)
    if isinstance(where, slice):
      gram[where, where] += np.outer(row, row)
    else:
      gram[np.ix_(support, support)] += np.outer(row, row)
  return TailSums(needed, sums, norms, significance, z, count)


def tail_bounds(entries: np.ndarray, sampling_prob: float, noise_multiplier: float,
                bad_event_delta: float, sums: TailSums | None = None) -> TailBounds:
  """ProbabilityTailBounds (Choquette-Choo et al. (2023) Algorithm 2) in logit space:
  ε_ij = z‖C_{1:i−1,j}‖/σ + (2 s_ij − ‖C_{1:i−1,j}‖²)/(2σ²), p̃_ij = sigmoid(logit p + ε_ij),
  from ``tail_sums`` (computed here unless given)."""
  if sums is None:
    sums = tail_sums(entries, sampling_prob, bad_event_delta)
  logit_p = math.inf if sampling_prob >= 1.0 else float(special.logit(sampling_prob))
  logits = np.full(entries.shape, logit_p)
  norm2, s = sums.norms[sums.needed], sums.sums[sums.needed]
  epsilon = (sums.z * np.sqrt(norm2) / noise_multiplier
             + (2.0 * s - norm2) / (2.0 * noise_multiplier**2))
  logits[sums.needed] = logit_p + epsilon
  return TailBounds(logits, sums.significance, sums.z, sums.count)


def lattice_units(values: np.ndarray, step: float) -> np.ndarray:
  """ceil(values / Δ₂) as integers, corrected so that units·Δ₂ ≥ values in float64."""
  units = np.ceil(values / step).astype(np.int64)
  return np.where(units * step < values, units + 1, units)


def row_sensitivity(units: np.ndarray, logits: np.ndarray) -> tuple[np.ndarray, np.ndarray]:
  """The PMF of S = Σ_j u_j·Bern(sigmoid(logit_j)) on the integer lattice, pessimistic:
  (atoms in units of Δ₂, their probabilities).

  Exact convolution of the two-point PMFs; probability lost to underflow goes to the largest
  atom, and atoms lighter than ``NEGLIGIBLE_MASS`` merge into the next atom above (both make
  S stochastically larger, Cor. 4.4).
  """
  top = int(units.sum())
  pmf = np.zeros(top + 1)
  pmf[0] = 1.0
  reach = 0
  for u, logit in zip(units.tolist(), logits.tolist()):
    q, r = special.expit(logit), special.expit(-logit)
    head = pmf[:reach + 1].copy()
    pmf[:reach + 1] = r * head
    pmf[u:u + reach + 1] += q * head
    reach += u
  deficit = 1.0 - pmf.sum()
  if deficit > 0:
    pmf[top] += deficit
  keep = pmf >= NEGLIGIBLE_MASS
  keep[top] = True
  kept = np.flatnonzero(keep)
  merged = np.zeros(kept.size)
  np.add.at(merged, np.searchsorted(kept, np.arange(top + 1)), pmf)
  return kept, merged


def coarsened(atoms: np.ndarray, mass: np.ndarray, factor: int) -> tuple[np.ndarray, np.ndarray]:
  """Atoms on the lattice Δ (integers) rounded up to the lattice factor·Δ, masses summed
  (stochastically larger: pessimistic)."""
  coarse, inverse = np.unique(-(-atoms // factor), return_inverse=True)
  total = np.zeros(coarse.size)
  np.add.at(total, inverse.ravel(), mass)
  return coarse, total


def refinement(entries: np.ndarray, step: float) -> int:
  """How many convolution lattice steps make one Δ₂: up to ``REFINEMENT`` while the finest
  row support stays within ``MAX_SUPPORT`` points. Each entry is rounded up to the fine lattice
  and only the row sums to Δ₂, so Δ₂ costs once per row instead of once per entry."""
  widest = int(lattice_units(entries, step).sum(axis=1).max())
  return int(np.clip(MAX_SUPPORT // max(widest, 1), 1, REFINEMENT))


class RowPairs(NamedTuple):
  """The distinct row pairs of MMCC: atoms in units of Δ₂ and probabilities per distinct row,
  how many rows share each, and the tail bounds they came from."""

  atoms: list
  probabilities: list
  multiplicity: list
  bounds: TailBounds


def row_pairs(entries: np.ndarray, sampling_prob: float, noise_multiplier: float,
              bad_event_delta: float, sensitivity_step: float,
              sums: TailSums | None = None) -> RowPairs:
  """Algorithm 1 lines 2–5 up to the PLDs: each row's PMoG sensitivity PMF (convolved on a
  lattice ``refinement`` times finer than Δ₂, then rounded up to Δ₂), rows with equal lattice
  entries and p̃ sharing one (App. B.4; exact, decided bitwise)."""
  bounds = tail_bounds(entries, sampling_prob, noise_multiplier, bad_event_delta, sums)
  factor = refinement(entries, sensitivity_step)
  fine_step = sensitivity_step / factor
  index: dict = {}
  atoms, probabilities, multiplicity = [], [], []
  for i in range(entries.shape[0]):
    support = np.flatnonzero(entries[i])
    if support.size == 0:
      continue  # an all-zero row releases nothing about the example
    units = lattice_units(entries[i, support], fine_step)
    logits = bounds.logits[i, support]
    key = (units.tobytes(), logits.tobytes())
    if key not in index:
      index[key] = len(atoms)
      kept, mass = coarsened(*row_sensitivity(units, logits), factor)
      atoms.append(kept)
      probabilities.append(mass)
      multiplicity.append(0)
    multiplicity[index[key]] += 1
  return RowPairs(atoms, probabilities, multiplicity, bounds)


@typing.final
class MMCCCurve(mixture_pld.BadEventCurve):
  """MMCC's δ(ε) = δ_PLD(ε) + δ₁ and ε(δ) = ε_PLD(δ − δ₁) per direction (Choquette-Choo et al.
  (2023) Thm 4.8; ``mixture_pld.BadEventCurve``: δ₁ = δ/2 unless ``bad_event_delta`` is given).

  Works for any non-negative C whose rows are in release order, also m×n with m > n (a tree's
  nodes, Choquette-Choo et al. (2023) Sec. 6); the accountant passes the strategy's n×n C.

  Attributes:
    entries: C (m×n); sampling_prob: p; noise_multiplier: σ; bad_event_delta: δ₁ or None;
    discretization: Δ₁; sensitivity_step: Δ₂; tail_sums: ``tail_sums`` per δ₁, which do not
      depend on σ, Δ₁ or Δ₂ (a calibration passes one mapping to the curves of all its σ).
  """

  def __init__(self, entries: np.ndarray, sampling_prob: float, noise_multiplier: float,
               bad_event_delta: float | None, discretization: float, sensitivity_step: float,
               tail_sums: dict | None = None):
    super().__init__(bad_event_delta)
    self.entries = entries
    self.sampling_prob = float(sampling_prob)
    self.noise_multiplier = float(noise_multiplier)
    self.discretization = float(discretization)
    self.sensitivity_step = float(sensitivity_step)
    self.tail_sums = {} if tail_sums is None else tail_sums
    self._pairs = {}

  @functools.cached_property
  def tail_bound_count(self) -> int:
    """Algorithm 2's bounds (``bound_count``); none (e.g. C diagonal) means no bad event."""
    return bound_count(self.entries)

  def pairs(self, bad_event_delta: float) -> RowPairs:
    """The distinct row pairs at δ₁ (shared by both directions), cached."""
    if bad_event_delta not in self._pairs:
      if bad_event_delta not in self.tail_sums:
        self.tail_sums[bad_event_delta] = tail_sums(self.entries, self.sampling_prob,
                                                    bad_event_delta)
      self._pairs[bad_event_delta] = row_pairs(
          self.entries, self.sampling_prob, self.noise_multiplier, bad_event_delta,
          self.sensitivity_step, self.tail_sums[bad_event_delta])
    return self._pairs[bad_event_delta]

  def _delta(self, epsilon: float, direction: str) -> float:
    # With δ₁ = δ/2 the search returns 1.0 exactly when ε(0.5) > ε, after composing at every
    # decade from 1e-6 up (minutes at a small σ). One row pair whose δ(ε) at δ₁ = 0.25
    # exceeds 0.25 proves it without composing (the composition's δ is at least each pair's:
    # dropping the other rows is post-processing): the same answer, from the pairs alone.
    if not self._fixed_bad_event():
      rows = self.pairs(0.25)
      width = max(atoms.size for atoms in rows.atoms)
      means = np.zeros((len(rows.atoms), width))
      log_p = np.full((len(rows.atoms), width), -np.inf)
      for i, (atoms, mass) in enumerate(zip(rows.atoms, rows.probabilities)):
        means[i, :atoms.size] = atoms * self.sensitivity_step
        with np.errstate(divide='ignore'):
          log_p[i, :atoms.size] = np.log(mass)
      if conditional_composition.step_deltas(means, log_p, self.noise_multiplier, epsilon,
                                             direction).max() > 0.25:
        return 1.0
    return super()._delta(epsilon, direction)

  def _compose(self, direction: str, bad_event_delta: float):
    rows = self.pairs(bad_event_delta)
    with np.errstate(divide='ignore'):
      log_masses = [np.log(mass) for mass in rows.probabilities]
    pmfs = mixture_pld.mixture_pmfs(
        [(atoms * self.sensitivity_step, log_mass)
         for atoms, log_mass in zip(rows.atoms, log_masses)],
        self.noise_multiplier, direction, self.discretization)
    return mixture_pld.compose([pmf if count == 1 else pmf.to_dense_pmf().self_compose(count)
                                for pmf, count in zip(pmfs, rows.multiplicity)])

  def coarse_copy(self) -> MMCCCurve:
    """This curve with Δ₁ ≥ ``mixture_pld.COARSE_DISCRETIZATION`` and Δ₂ × ``COARSE_LATTICE``
    (``mixture_pld.BadEventCurve.coarse_copy``); the tail sums are shared."""
    return MMCCCurve(self.entries, self.sampling_prob, self.noise_multiplier,
                     self.bad_event_delta,
                     max(self.discretization, mixture_pld.COARSE_DISCRETIZATION),
                     COARSE_LATTICE * self.sensitivity_step, self.tail_sums)

  def explain(self, delta: float) -> dict:
    """δ₁, the per-bound significance δ′ and z, the number of bounds, rows and distinct rows,
    Δ₂, and max p̃/p (Choquette-Choo et al. (2023) §4.2, "Tightness": roughly a bound on
    ε_MMCC / ε_true)."""
    bad_event = self.bad_event_for(delta)
    rows = self.pairs(bad_event)
    positive = self.entries > 0
    ratio = float(np.max(special.expit(rows.bounds.logits[positive]))) / self.sampling_prob
    taken = rows.bounds.count > 0  # without tail bounds there is no δ′ or z
    return {'bad_event_delta': bad_event,
            'significance': rows.bounds.significance if taken else None,
            'z': rows.bounds.z if taken else None, 'tail_bounds': rows.bounds.count,
            'rows': int(self.entries.shape[0]), 'distinct_rows': len(rows.atoms),
            'sensitivity_discretization': self.sensitivity_step,
            'max_amplification_ratio': ratio}


def _check_sensitivity_step(value):
  if value is None:
    return None
  return _validate.positive_finite('sensitivity_discretization', value)


def _refusal_for_scheme(scheme) -> str | None:
  """None for independent Poisson participations (the b-min-sep chain with b = 1, untruncated),
  else why not, by the participation model."""
  match scheme.participation.model:
    case MinSepChain(min_sep=1):
      if scheme.truncates:
        return ('truncated Poisson (a fixed batch size) makes participations dependent, and '
                "MMCC's Lemma 4.9 needs them independent; the 'pld' accountant covers it with "
                'one band, Monte Carlo otherwise')
      return None
    case MinSepChain():
      return ('b-min-sep sampling with min_sep > 1 (Dong & Ganesh) is not the "b-min-sep" of '
              "Choquette-Choo et al. (2023) App. A (that one is jaxacct's CyclicPoisson): its "
              "participations are not independent across rounds; use the 'pld' accountant (one "
              "band) or Monte Carlo")
    case Cyclic():
      return ("cyclic Poisson is the 'b-min-sep sampling' of Choquette-Choo et al. (2023) App. "
              "A; with at most cycle_length bands the 'pld' accountant is exact for it (App. "
              "A's Generalized-MMCC reduces to that analysis), and Generalized-MMCC for more "
              'bands is not implemented')
    case FixedBins():
      return ("balls-in-bins fixes one participation per epoch (not independent); use 'renyi' "
              "or 'conditional_composition' (Schuchardt & Kalinin (2026))")
  return (f'{type(scheme).__name__} participations are not independent Poisson draws; use '
          'Monte Carlo')


@register
@typing.final
class MMCCAccountant(DeterministicAccountant):
  """The MMCC of Choquette-Choo et al. (2023) for Poisson sampling with any non-negative
  lower-triangular C (module docstring).

  Options:
    bad_event_delta: δ₁, the probability budget of the tail bounds (Thm 4.8: δ = δ₁ + δ₂).
      Default None: δ₁ = δ₂ = δ/2 (the paper's choice); δ(ε) then inverts ε(δ). A fixed δ₁
      makes ε(δ) = +∞ for δ ≤ δ₁, and calibration needs δ > δ₁.
    value_discretization_interval: Δ₁, the PLD grid step (default 1e-3; pessimistic).
    sensitivity_discretization: Δ₂, the lattice C is rounded up to (default max C / 100; exact
      when every entry is a multiple of it, e.g. C = I). Smaller is tighter and slower: a
      row's PMF has up to ‖row‖₁/Δ₂ atoms.
  Adjacency: ``zero_out`` and ``add_remove`` (equal for untruncated Poisson).
  """

  name = 'mmcc'

  tie_order = 50
  references = (
      'Choquette-Choo, Ganesh, Steinke, Thakurta, "Privacy Amplification for Matrix Mechanisms", '
      'ICLR 2024, arXiv 2310.15526v2, Thm 3.1, Lemma 4.9, Cor. 4.4, Algorithms 1-2, Thm 4.8, '
      'App. B',
      'Doroshenko et al., "Connect the Dots", arXiv 2207.04380 (pessimistic PLD)',
  )
  adjacencies = (Adjacency.ZERO_OUT.value, Adjacency.ADD_REMOVE.value)
  options = {'bad_event_delta': Option(None, mixture_pld.check_bad_event_delta),
             'value_discretization_interval': Option(DEFAULT_DISCRETIZATION,
                                                     mixture_pld.check_discretization),
             'sensitivity_discretization': Option(None, _check_sensitivity_step)}
  sigma_floor = 0.05

  def _refusal(self, mechanism, options):
    if options['adjacency'] not in self.adjacencies:
      return (f"adjacency={options['adjacency']!r} is not covered by MMCC (Choquette-Choo et al. "
              "(2023) prove add/remove (their Lem. 2.4), equal to zero-out for untruncated "
              "Poisson); use 'zero_out'")
    return _refusal_for_scheme(mechanism.scheme)

  @staticmethod
  def _inputs(mechanism_or_probe, options):
    entries = strategy_entries(mechanism_or_probe.matrix, mechanism_or_probe.iterations)
    step = options['sensitivity_discretization']
    if step is None:
      step = float(entries.max()) / DEFAULT_SENSITIVITY_STEPS
    return entries, float(mechanism_or_probe.scheme.participation.model.sampling_prob), step

  def _size_refusal(self, mechanism, options):
    # The widest row pair: N(S, σ²) with S ≤ the largest row sum of C (every p̃ = 1), rounded
    # up to the lattice Δ₂ by at most one Δ₂ per entry of the row. A banded C's longest row is
    # its band (no n×n C is built for the check).
    band = mechanism.matrix.banded_coefficients()
    if band is not None:
      rows = band[None, :mechanism.iterations]
    else:
      rows = strategy_entries(mechanism.matrix, mechanism.iterations)
    step = options['sensitivity_discretization']
    step = float(rows.max()) / DEFAULT_SENSITIVITY_STEPS if step is None else step
    spread = float(np.max(rows.sum(axis=1) + step * (rows > 0).sum(axis=1)))
    return _grid.refusal(float(mechanism.noise_multiplier), spread,
                         options['value_discretization_interval'],
                         what="the 'mmcc' accountant's PLD grid")

  def _curve(self, mechanism, options):
    entries, sampling_prob, step = self._inputs(mechanism, options)
    return MMCCCurve(entries, sampling_prob, mechanism.noise_multiplier,
                     options['bad_event_delta'], options['value_discretization_interval'], step)

  def _sigma(self, probe, epsilon, delta, tolerance, options, progress=None):
    bad_event = delta / 2 if options['bad_event_delta'] is None else options['bad_event_delta']
    if delta <= bad_event:
      raise InputError(f'delta = {delta} must exceed bad_event_delta = {bad_event} (the tail '
                       'bounds alone may fail with probability δ₁); Choquette-Choo et al. (2023) '
                       'take δ₁ = δ/2')
    entries, sampling_prob, step = self._inputs(probe, options)
    discretization = options['value_discretization_interval']

    shared = {}  # the σ-free tail sums, computed once for every probe

    def meets_with(coarse: bool):
      def meets(sigma: float) -> bool:
        curve = MMCCCurve(entries, sampling_prob, sigma, bad_event, discretization, step, shared)
        curve = curve.coarse_copy() if coarse else curve
        return all(curve.epsilon_for_delta(delta, direction=d) <= epsilon for d in DIRECTIONS)
      return meets

    # A coarse pass (``coarse_copy``: ~40× cheaper per probe, and more pessimistic, so its σ is
    # about the answer from above) starts from the Gaussian mechanism of every participation
    # (sensitivity ‖C·1‖: MMCC with every p̃ = 1) and comes down by factors of 1.5; the fine
    # pass starts there and steps by 1.05, so its probes stay near the answer (a σ far below
    # it makes the PLD grids huge). Only the fine pass decides the result.
    start = pld.gaussian_sigma(epsilon, delta - bad_event,
                               float(np.linalg.norm(entries.sum(axis=1))))
    coarse = smallest_passing_sigma(meets_with(coarse=True), tolerance=4e-2,
                                    floor=self.sigma_floor, start=start, step=1.5,
                                    progress=progress, stage='σ search (coarse pass)')
    return smallest_passing_sigma(meets_with(coarse=False), tolerance=tolerance,
                                  floor=self.sigma_floor, start=coarse, step=1.05,
                                  progress=progress)

  def _supersedes_monte_carlo(self, mechanism):
    # Monte Carlo accounts overlapping columns under Poisson only by App. B bounds (dense C)
    # or not at all (BandedToeplitz with more than one band); MMCC proves a bound.
    return mechanism.bounded
