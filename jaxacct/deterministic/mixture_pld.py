"""PLD PMFs of Gaussian-mixture pairs and their composition (host code, dp_accounting).

Both the conditional composition of Schuchardt & Kalinin (2026) and the MMCC of Choquette-Choo
et al. (2023) bound a correlated-noise mechanism
by a product of one-dimensional pairs (Σ_i p_i N(c_i, σ²), N(0, σ²)) with c_i ≥ 0, one per
step or row. This module builds each pair's pessimistic PLD PMF with dp_accounting's own
connect-the-dots construction of ``MixtureGaussianPrivacyLoss`` (with its inverse loss
vectorised: bit for bit the same PMF, ~30× faster) and composes PMFs in a balanced tree.

References:
  Christopher A. Choquette-Choo, Arun Ganesh, Thomas Steinke and Abhradeep Thakurta, "Privacy
  Amplification for Matrix Mechanisms", arXiv:2310.15526 (v2; ICLR 2024): Thm 3.1 (conditional
  composition), App. B.1 (the MoG privacy loss and its pessimistic inverse) (docs/references.md).
  Jan Schuchardt and Nikita Kalinin, "Sampling-Free Privacy Accounting for Matrix Mechanisms under
  Random Allocation", arXiv:2601.21636: §4 (Lemma 4.1), App. B.2 (docs/references.md).
  Doroshenko et al., "Connect the Dots", arXiv 2207.04380.
"""

from __future__ import annotations

import abc
import concurrent.futures
import math
import os
import time

import numpy as np

from jaxacct import _validate
from jaxacct.conventions import Direction
from jaxacct.deterministic import pld_pmfs
from jaxacct.deterministic.base import PrivacyCurve
from jaxacct.errors import InputError


def merged(means: np.ndarray, log_p: np.ndarray) -> tuple[np.ndarray, np.ndarray]:
  """Components with equal means merged (exact: their Gaussians coincide), probabilities
  summed in log space; zero-probability components dropped."""
  values, inverse = np.unique(means, return_inverse=True)
  total = np.full(values.size, -np.inf)
  np.logaddexp.at(total, inverse.ravel(), log_p)
  keep = total > -np.inf
  return values[keep], np.exp(total[keep])


def mixture_pmf(means: np.ndarray, log_p: np.ndarray, noise_multiplier: float, direction: str,
               discretization: float):
  """The pessimistic PLD PMF (dp_accounting, connect-the-dots) of the mixture pair in
  ``direction``: remove (Σ p_i N(c_i, σ²), N(0, σ²)), add the reverse (components with
  equal means merged; ``log_p`` may hold −∞).

  Built by dp_accounting's own construction for one direction (``pld_pmfs.monotone_loss_pmf``)
  with a vectorised inverse of the mixture's loss (``pld_pmfs.fast_mixture_loss_class``).
  """
  from dp_accounting.pld import privacy_loss_distribution, privacy_loss_mechanism
  values, probs = merged(means, log_p)
  if values.size == 1:  # a deterministic sensitivity: the Gaussian mechanism (no mixture)
    return pld_pmfs.direction_pmf(privacy_loss_distribution.from_gaussian_mechanism(
        noise_multiplier, sensitivity=float(values[0]), pessimistic_estimate=True,
        value_discretization_interval=discretization, log_mass_truncation_bound=-50,
        use_connect_dots=True), direction)
  adjacency = (privacy_loss_mechanism.AdjacencyType.REMOVE if direction == Direction.REMOVE
               else privacy_loss_mechanism.AdjacencyType.ADD)
  loss = pld_pmfs.fast_mixture_loss_class()(noise_multiplier, values.tolist(), probs.tolist(),
                                     pessimistic_estimate=True, log_mass_truncation_bound=-50,
                                     adjacency_type=adjacency)
  try:
    return pld_pmfs.monotone_loss_pmf(loss, discretization)
  except (ValueError, TypeError):
    # dp_accounting 0.6.0 fails on two kinds of float64 residue, met at small σ (e.g. σ = 0.3
    # in conditional composition): Σp = 1 − 1 ulp (it reads the ulp as a mass at mean 0, and
    # its two evaluations of ln(1 − Σp) disagree: "a must be greater than b"; so does a mass at
    # mean 0 far below 1e-16) and a component of mass ~1e-95 (its tail bracket misses by one
    # rounding and its search returns None). The mixture with those masses moved to larger
    # means dominates it in both directions (Choquette-Choo et al. (2023) Lemma 4.3 /
    # Cor. 4.4, as ``mmcc.row_sensitivity`` merges light atoms upward): its PMF is a
    # pessimistic one. Only a PMF that failed is rebuilt; every other keeps its bits.
    heavier = _moved_up(values, probs)
    if heavier is None:
      raise
    return pld_pmfs.monotone_loss_pmf(
        pld_pmfs.fast_mixture_loss_class()(
            noise_multiplier, heavier[0].tolist(), heavier[1].tolist(),
            pessimistic_estimate=True, log_mass_truncation_bound=-50, adjacency_type=adjacency),
        discretization) if heavier[0].size > 1 else mixture_pmf(
            heavier[0], np.log(heavier[1]), noise_multiplier, direction, discretization)


# Components lighter than this are merged into the next mean up when dp_accounting fails
# on a mixture (``mixture_pmf``): a mass it cannot tell from 1 − Σp in float64 (whose
# rounding is ~1e-16), far above it, and below any δ worth reporting.
_NEGLIGIBLE_MASS = 1e-12


def _moved_up(values: np.ndarray, probs: np.ndarray) -> tuple[np.ndarray, np.ndarray] | None:
  """(means, masses) with every mass below ``_NEGLIGIBLE_MASS`` merged into the next mean up
  (the largest mean keeps its own) and, without a mean 0, the residue 1 − Σp put on the
  largest mean; None when that changes nothing. Stochastically larger: pessimistic."""
  keep = probs >= _NEGLIGIBLE_MASS
  keep[-1] = True
  kept = np.flatnonzero(keep)
  masses = np.zeros(kept.size)
  np.add.at(masses, np.searchsorted(kept, np.arange(values.size)), probs)
  means = values[kept]
  if means[0] > 0.0:
    while masses.sum() < 1.0:  # the residue onto the largest mean, to the last ulp
      masses[-1] = np.nextafter(masses[-1] + (1.0 - masses.sum()), 2.0)
  if means.size == values.size and np.array_equal(masses, probs):
    return None
  return means, masses


def mixture_pmfs(pairs, noise_multiplier: float, direction: str, discretization: float) -> list:
  """``mixture_pmf`` of every (means, log_p) pair, in order, built on up to one thread per
  core available to this process.

  Each PMF is built alone (no shared state) and NumPy releases the GIL inside the inverse
  loss's reductions, where the time goes, so threads give the same PMFs bit for bit at close
  to the core count's speed-up.
  """
  pairs = list(pairs)
  workers = min(len(pairs), len(os.sched_getaffinity(0)) if hasattr(os, 'sched_getaffinity')
                else os.cpu_count() or 1)
  def build(pair):
    means, log_p = pair
    return mixture_pmf(means, log_p, noise_multiplier, direction, discretization)
  if workers <= 1:
    return [build(pair) for pair in pairs]
  with concurrent.futures.ThreadPoolExecutor(workers) as pool:
    return list(pool.map(build, pairs))


def compose(pmfs: list, tail_mass_truncation: float = 1e-15):
  """The composition of PLD PMFs, pairwise in a balanced tree (same result as a chain, at
  a fraction of the FFT sizes)."""
  level = [pmf.to_dense_pmf() for pmf in pmfs]  # small supports come back sparse
  while len(level) > 1:
    level = [level[i].compose(level[i + 1], tail_mass_truncation=tail_mass_truncation)
             if i + 1 < len(level) else level[i] for i in range(0, len(level), 2)]
  return level[0]


# ---------------------------------------------------------------- bound off a bad event
_INVERSE_PRECISION = 1e-4  # relative: δ(ε) without a fixed δ_E is found to within this
# The PLD grid of a ``coarse_copy`` (at least): ~10× fewer points than the default 1e-3, and a
# more pessimistic PLD.
COARSE_DISCRETIZATION = 1e-2
_CACHED_COMPOSITIONS = 48


class BadEventCurve(PrivacyCurve):
  """δ(ε) = δ_PLD(ε) + δ_E and ε(δ) = ε_PLD(δ − δ_E) per direction, for a PLD that dominates the
  mechanism off a bad event of probability ≤ δ_E (Choquette-Choo et al., ICLR 2024, Thm 3.1;
  Schuchardt & Kalinin (2026) Lemma 4.1). Abstract: subclasses build the composed PMF
  (``_compose``).

  With ``bad_event_delta`` None, δ_E is half the δ asked for (both papers' choice): ε(δ) =
  ε_PLD(δ/2) with δ_E = δ/2, and δ(ε) is the smallest δ (to a relative
  ``_INVERSE_PRECISION``, rounded up) with ε(δ) ≤ ε — so each answer is a proven pair, at the
  price of a few compositions per δ(ε) query (``_smallest_delta``; give δ_E to make δ(ε) one
  lookup). Each
  (direction, δ_E)'s composition is built on first use, then kept.
  """

  def __init__(self, bad_event_delta: float | None):
    self.bad_event_delta = None if bad_event_delta is None else float(bad_event_delta)
    self._composed = {}
    self._known = {}  # (direction, δ) → ε(δ), which a composition is too large to keep
    # (direction, δ_E) → seconds of each composition built: what ``curve_plan`` counts and times
    self.composition_seconds: dict[tuple[str, float], float] = {}

  @abc.abstractmethod
  def _compose(self, direction: str, bad_event_delta: float):
    """The composed PLD PMF (dp_accounting) of ``direction`` whose pairs hold off a bad event
    of probability ≤ ``bad_event_delta``."""

  @property
  @abc.abstractmethod
  def tail_bound_count(self) -> int:
    """How many tail bounds the pairs rely on; with none there is no bad event (δ_E = 0)."""

  @abc.abstractmethod
  def coarse_copy(self) -> BadEventCurve:
    """The same curve on coarser grids (``COARSE_DISCRETIZATION``, and the accountant's own
    coarsening): the same queries compose at about the same δ_E, each ~10 times faster.
    ``curve_plan`` replays a run on it to count its compositions; MMCC's σ search uses it for
    its first pass. Its answers are never reported."""

  def bad_event_for(self, delta: float) -> float:
    """δ_E used for a target δ: 0 without tail bounds, else the fixed one or δ/2."""
    if self.tail_bound_count == 0:
      return 0.0
    return delta / 2 if self.bad_event_delta is None else self.bad_event_delta

  def composed(self, direction: str, bad_event_delta: float):
    """The composed PLD PMF of ``direction`` at δ_E (dp_accounting ``DensePLDPmf``), cached
    (the last ``_CACHED_COMPOSITIONS``: a δ(ε) grid of a report probes hundreds)."""
    key = (direction, bad_event_delta)
    if key in self._composed:
      self._composed[key] = self._composed.pop(key)  # most recently used last
    else:
      started = time.perf_counter()
      self._composed[key] = self._compose(direction, bad_event_delta)
      self.composition_seconds[key] = time.perf_counter() - started
      while len(self._composed) > _CACHED_COMPOSITIONS:
        del self._composed[next(iter(self._composed))]
    return self._composed[key]

  relative_cost = 100  # a δ(ε) query with δ_E = δ/2 composes new PLDs (base.PrivacyCurve)

  def _fixed_bad_event(self) -> bool:
    return self.bad_event_delta is not None or self.tail_bound_count == 0

  def _delta(self, epsilon: float, direction: str) -> float:
    if self._fixed_bad_event():
      bad_event = self.bad_event_for(1.0)  # δ_E does not depend on δ here
      return min(1.0, float(self.composed(direction, bad_event).get_delta_for_epsilon(epsilon))
                 + bad_event)
    return self._smallest_delta(epsilon, direction, None)

  def _delta_below(self, epsilon: float, direction: str, bound: float) -> float:
    if self._fixed_bad_event() or bound >= 0.5:
      return min(self._delta(epsilon, direction), bound)
    # ε(δ) decreases in δ, so ε(bound) > ε means δ(ε) > bound: one composition, not a search.
    if self._epsilon(bound, direction) > epsilon:
      return bound
    return min(self._smallest_delta(epsilon, direction, bound), bound)

  def _smallest_delta(self, epsilon: float, direction: str, high: float | None) -> float:
    """The smallest δ (to a relative ``_INVERSE_PRECISION``, rounded up) with ε(δ) ≤ ε, given
    a ``high`` known to meet it (or None). ε(δ) decreases in δ; the bracket [low, high] on
    ln δ always has ε(high) ≤ ε < ε(low), so the answer is a δ this accountant proves.

    Brackets are found on decades and then half decades (fixed points whose compositions
    every ε query and ``report_curve`` share, so the answer depends on (ε, direction) only,
    not on earlier queries), then narrowed
    by regula falsi on ln δ with the Illinois modification (ε(δ) is close to linear in ln δ,
    so a handful of compositions replace bisection's ~15); every third step bisects, so a
    kink cannot stall it.
    """
    # Decades as 10.0 ** integer, so every query (and report_curve) hits the same cache keys.
    if high is None:
      exponent = -6
      while exponent < 0 and self._epsilon(10.0 ** exponent, direction) > epsilon:
        exponent += 1
      high = 0.5 if exponent == 0 else 10.0 ** exponent
      if self._epsilon(high, direction) > epsilon:
        return 1.0
    exponent = math.floor(math.log10(high) - 1e-12)  # the decade just below
    while self._epsilon(10.0 ** exponent, direction) <= epsilon:
      if exponent < -300:
        return 10.0 ** exponent
      high, exponent = 10.0 ** exponent, exponent - 1
    low = 10.0 ** exponent
    half = 10.0 ** ((2 * exponent + 1) / 2)  # the half decade (report_curve's grid point)
    if low < half < high:
      low, high = (low, half) if self._epsilon(half, direction) <= epsilon else (half, high)
    return self._narrowed(epsilon, direction, low, high)

  def _narrowed(self, epsilon: float, direction: str, low: float, high: float) -> float:
    """``_smallest_delta`` within a bracket: ε(low) > ε ≥ ε(high)."""
    x_low, x_high = math.log(low), math.log(high)
    g_low = self._epsilon(low, direction) - epsilon     # > 0 (inf when δ ≤ δ_E)
    g_high = self._epsilon(high, direction) - epsilon   # ≤ 0
    side, step = 0, 0
    while math.exp(x_high - x_low) - 1.0 > _INVERSE_PRECISION:
      step += 1
      if step % 3 == 0 or not math.isfinite(g_low) or g_low == g_high:
        x = 0.5 * (x_low + x_high)
      else:
        x = x_high - g_high * (x_high - x_low) / (g_high - g_low)
        # Keep the probe strictly inside, and off the ends by a little, so each step shrinks.
        margin = 0.01 * (x_high - x_low)
        x = min(max(x, x_low + margin), x_high - margin)
      g = self._epsilon(math.exp(x), direction) - epsilon
      if g <= 0:
        x_high, g_high = x, g
        if side == -1:
          g_low *= 0.5  # Illinois: the stale end's weight halves
        side = -1
      else:
        x_low, g_low = x, g
        if side == 1:
          g_high *= 0.5
        side = 1
    return math.exp(x_high)

  def _epsilon(self, delta: float, direction: str) -> float:
    if (direction, delta) in self._known:
      return self._known[direction, delta]
    bad_event = self.bad_event_for(delta)
    if delta <= bad_event:
      return math.inf  # the bad event alone may cost δ_E
    epsilon = max(0.0, float(self.composed(direction, bad_event).get_epsilon_for_delta(
        delta - bad_event)))
    self._known[direction, delta] = epsilon
    return epsilon


def check_bad_event_delta(value):
  """The ``bad_event_delta`` option: None (δ/2) or a real in (0, 1)."""
  if value is None:
    return None
  value = _validate.real_number('bad_event_delta', value)
  if not 0.0 < value < 1.0:
    raise InputError(f'bad_event_delta must be in (0, 1), got {value}')
  return value


def check_discretization(value):
  """The ``value_discretization_interval`` option (Δ₁): a finite real > 0."""
  return _validate.positive_finite('value_discretization_interval', value)
