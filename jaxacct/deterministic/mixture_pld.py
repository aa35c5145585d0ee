"""PLD PMFs of Gaussian-mixture pairs and their composition (host code, dp_accounting).

Both seed 002's conditional composition and seed 003's MMCC bound a correlated-noise mechanism
by a product of one-dimensional pairs (Σ_i p_i N(c_i, σ²), N(0, σ²)) with c_i ≥ 0, one per
step or row. This module builds each pair's pessimistic PLD PMF with dp_accounting's own
connect-the-dots construction of ``MixtureGaussianPrivacyLoss`` (with its inverse loss
vectorised: bit for bit the same PMF, ~30× faster) and composes PMFs in a balanced tree.

References:
  Choquette-Choo et al., "Privacy Amplification for Matrix Mechanisms", ICLR 2024, App. B.1
  (the MoG privacy loss and its pessimistic inverse); Doroshenko et al., "Connect the Dots",
  arXiv 2207.04380.
"""

from __future__ import annotations

import abc
import math

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
  return pld_pmfs.monotone_loss_pmf(loss, discretization)


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


class BadEventCurve(PrivacyCurve):
  """δ(ε) = δ_PLD(ε) + δ_E and ε(δ) = ε_PLD(δ − δ_E) per direction, for a PLD that dominates the
  mechanism off a bad event of probability ≤ δ_E (Choquette-Choo et al., ICLR 2024, Thm 3.1;
  seed 002 Lemma 4.1). Abstract: subclasses build the composed PMF (``_compose``).

  With ``bad_event_delta`` None, δ_E is half the δ asked for (both papers' choice): ε(δ) =
  ε_PLD(δ/2) with δ_E = δ/2, and δ(ε) is the smallest δ (by bisection on ln δ, to a relative
  ``_INVERSE_PRECISION``, rounded up) with ε(δ) ≤ ε — so each answer is a proven pair, at the
  price of ~15 compositions per δ(ε) query (give δ_E to make δ(ε) one lookup). Each
  (direction, δ_E)'s composition is built on first use, then kept.
  """

  def __init__(self, bad_event_delta: float | None):
    self.bad_event_delta = None if bad_event_delta is None else float(bad_event_delta)
    self._composed = {}

  @abc.abstractmethod
  def _compose(self, direction: str, bad_event_delta: float):
    """The composed PLD PMF (dp_accounting) of ``direction`` whose pairs hold off a bad event
    of probability ≤ ``bad_event_delta``."""

  @property
  @abc.abstractmethod
  def tail_bound_count(self) -> int:
    """How many tail bounds the pairs rely on; with none there is no bad event (δ_E = 0)."""

  def bad_event_for(self, delta: float) -> float:
    """δ_E used for a target δ: 0 without tail bounds, else the fixed one or δ/2."""
    if self.tail_bound_count == 0:
      return 0.0
    return delta / 2 if self.bad_event_delta is None else self.bad_event_delta

  def composed(self, direction: str, bad_event_delta: float):
    """The composed PLD PMF of ``direction`` at δ_E (dp_accounting ``DensePLDPmf``), cached."""
    key = (direction, bad_event_delta)
    if key not in self._composed:
      self._composed[key] = self._compose(direction, bad_event_delta)
    return self._composed[key]

  def _delta(self, epsilon: float, direction: str) -> float:
    if self.bad_event_delta is not None or self.tail_bound_count == 0:
      bad_event = self.bad_event_for(1.0)  # δ_E does not depend on δ here
      return min(1.0, float(self.composed(direction, bad_event).get_delta_for_epsilon(epsilon))
                 + bad_event)
    # The smallest δ with ε(δ) ≤ ε: bracket by factors of 10 in δ, then bisect ln δ. `high`
    # always meets ε, so the answer is a δ this accountant proves.
    high = 1e-6
    while high < 0.5 and self._epsilon(high, direction) > epsilon:
      high = min(0.5, high * 10)
    if self._epsilon(high, direction) > epsilon:
      return 1.0
    low = high / 10
    while self._epsilon(low, direction) <= epsilon:
      if low < 1e-300:
        return low
      low, high = low / 10, low
    while high / low - 1.0 > _INVERSE_PRECISION:
      middle = math.sqrt(low * high)
      low, high = (low, middle) if self._epsilon(middle, direction) <= epsilon else (middle, high)
    return high

  def _epsilon(self, delta: float, direction: str) -> float:
    bad_event = self.bad_event_for(delta)
    if delta <= bad_event:
      return math.inf  # the bad event alone may cost δ_E
    return max(0.0, float(self.composed(direction, bad_event).get_epsilon_for_delta(
        delta - bad_event)))


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
