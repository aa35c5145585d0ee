"""The individual GDP filter (Koskela et al. (2022) Alg. 1) for full-batch DP-GD (host, float64).

Every step t, example i's conditional GDP parameter is μ_{i,t} = r_{i,t}/σ with r = c/C its
clipped gradient norm ratio at the parameters the step uses (predictable: computed before the
step's noise, from a^(t−1) as in Alg. 1). The filter keeps i active while its spent Σ μ² plus
this step's μ² stays within B² (the check includes the current step: Alg. 1 tests μ_1 … μ_t);
an inactive example's clipped gradient is masked out of the sum *before* the noise is added (it
contributes exactly 0, the noise is unchanged, and the sum is divided by a public constant, so
the mechanism stays the sum of App. C.2), and it is charged 0.
By Thm 1 (Sec. 4) every example's guarantee is then B-GDP under add/remove, in both orderings,
i.e. (ε, δ_B(ε))-DP for every ε (Cor. 2). The filter needs q = 1: a Poisson-subsampled step has no
useful per-step GDP parameter (the paper gives none; the smallest μ that dominates one such
step is of the order of 1/σ, far above q/σ: jaxacct's computation, not in the paper).

Drop semantics (``retest``): by default a dropped example stays dropped (the authors' code);
``retest=True`` re-tests it every step with its charge frozen, as Alg. 1 is printed (an example
whose later μ is small enough re-enters). Both are B-GDP: dropping more is always allowed.

Floating point: the sums are float64, and an example passes only if (spent + μ²)·(1 + 1e-10)
≤ B², a slack in the safe direction covering the rounding of up to 10⁶ additions.

References:
  Antti Koskela, Marlon Tobaben and Antti Honkela, "Individual Privacy Accounting with Gaussian
  Differential Privacy", arXiv:2209.15596: §3.3 (Thm 2: composition in squares), §4 (Algorithm 1,
  Thm 1), App. C.1 (Cor. 2), App. C.2 (docs/references.md).
  Feldman & Zrnic, NeurIPS 2021, Thm 4.3.
"""

from __future__ import annotations

import dataclasses
from typing import NamedTuple

import numpy as np

from jaxacct import _validate
from jaxacct.individual import gdp
from jaxacct.errors import InputError

_SLACK = 1e-10


class FilterState(NamedTuple):
  """Per-example spent Σ μ² (float64) and whether each example is still active."""

  spent: np.ndarray
  active: np.ndarray


@dataclasses.dataclass(frozen=True)
class GDPFilter:
  """Koskela et al. (2022) Algorithm 1 with GDP budget B (module docstring).

  Attributes:
    budget: B > 0, the GDP parameter every example's guarantee is bounded by.
    noise_multiplier: σ > 0 (noise std σC on the sum of clipped gradients).
    retest: re-test dropped examples every step (Alg. 1 as printed) instead of dropping them
      for good (default).
  """

  budget: float
  noise_multiplier: float
  retest: bool = False

  def __post_init__(self):
    _validate.positive_finite('budget', self.budget)
    _validate.positive_finite('noise_multiplier', self.noise_multiplier)

  @classmethod
  def for_target(cls, *, epsilon: float, delta: float, noise_multiplier: float,
                 retest: bool = False) -> 'GDPFilter':
    """The filter whose budget B is the largest μ with μ-GDP ⇒ (ε, δ)-DP (``gdp.gdp_budget``)."""
    return cls(gdp.gdp_budget(epsilon, delta), noise_multiplier, retest)

  def init(self, num_examples: int) -> FilterState:
    """Nothing spent, everyone active."""
    n = _validate.integer_at_least('num_examples', num_examples, 1)
    return FilterState(np.zeros(n), np.ones(n, bool))

  def step(self, state: FilterState, clipped_norm_ratios) -> tuple[FilterState, np.ndarray]:
    """One step: (the new state, the mask of examples whose gradients enter this step's sum).

    Args:
      state: the state before the step.
      clipped_norm_ratios: (num_examples,) r = min(‖g‖, C)/C ∈ [0, 1] at the step's parameters.
    """
    if np.shape(clipped_norm_ratios) != state.spent.shape:
      raise InputError(f'clipped_norm_ratios must have shape {state.spent.shape} (one per '
                       f'example), got {np.shape(clipped_norm_ratios)}')
    ratios = gdp.check_ratio_values(clipped_norm_ratios)
    charge = (ratios / self.noise_multiplier) ** 2
    fits = (state.spent + charge) * (1 + _SLACK) <= self.budget**2
    mask = fits if self.retest else fits & state.active
    return FilterState(state.spent + np.where(mask, charge, 0.0), mask), mask

  def epsilon(self, delta: float) -> float:
    """ε(δ) every example is guaranteed: that of B-GDP (Cor. 2)."""
    return float(gdp.gdp_epsilon(self.budget, delta))

  def spent_epsilons(self, state: FilterState, delta: float) -> np.ndarray:
    """ε(δ) of each example's spent √(Σ μ²)-GDP so far (≤ ``epsilon(delta)``)."""
    return gdp.gdp_epsilon(np.sqrt(state.spent), delta)
