"""How large a PLD grid gets at a given σ, and the refusal when it is too large (host code).

A pessimistic connect-the-dots PLD (Doroshenko et al., arXiv 2207.04380) of a pair of
Gaussian mixtures with common σ whose component means span ``spread`` covers the privacy loss
between the pair's truncation points. For the Gaussian pair N(μ, 1) vs N(0, 1), μ = spread/σ,
the loss is L(y) = μy − μ²/2 on y ∈ [−z, μ + z] (z ≈ 10 for the tail mass e⁻⁵⁰ that
dp_accounting and ``truncated_poisson`` drop), a range of width μ² + 2zμ; mixtures and
subsampling only narrow it. The grid therefore has about (μ² + 2zμ)/Δ points for a step Δ
(``grid_points``): a σ ten times smaller needs ~100 times as many, and σ = 1e-8 asks NumPy
for more than it can allocate. Measured on one CPU, ~4 µs per point to build a PMF.

Each accountant that builds such grids (``pld``, ``mmcc``, ``conditional_composition``)
refuses, before any compute, a mechanism whose widest pair would need more than
``MAX_GRID_POINTS`` points (``refusal``): a few seconds per pair PMF (e.g. the ``pld``
accountant at σ/‖c‖ ≈ 0.08 with its default Δ = 1e-4). The refusal names the grid step that
would fit, which is still a pessimistic bound, only a looser one. A huge σ needs no such
care: its grid is a few points.
"""

from __future__ import annotations

import math

# Half-width of the kept loss range in noise standard deviations (tail mass ~e⁻⁵⁰ dropped).
TAIL_STANDARD_DEVIATIONS = 10.0
# The most points (``grid_points``' estimate) one pair's PLD PMF may have.
MAX_GRID_POINTS = 4_000_000


def loss_width(separation: float) -> float:
  """μ² + 2zμ: the width of the privacy-loss range a grid covers, for a pair whose component
  means span ``separation`` = μ noise standard deviations (module docstring)."""
  return separation * (separation + 2.0 * TAIL_STANDARD_DEVIATIONS)


def grid_points(separation: float, discretization: float) -> float:
  """About how many points the PLD PMF of such a pair has on a grid of step ``discretization``
  (an upper estimate: subsampled pairs have about half as many)."""
  return loss_width(separation) / discretization


def refusal(noise_multiplier: float, spread: float, discretization: float, *,
            what: str = 'its PLD grid',
            option: str = 'value_discretization_interval') -> str | None:
  """None when a pair of component means spanning ``spread`` at σ = ``noise_multiplier`` fits
  ``MAX_GRID_POINTS`` on the grid step ``discretization``; else the one-line reason, naming
  σ, the grid it would need, the step ``option`` that would fit and the alternatives."""
  if spread <= 0.0 or not math.isfinite(spread):
    return None
  separation = spread / noise_multiplier
  points = grid_points(separation, discretization)
  if points <= MAX_GRID_POINTS:
    return None
  fitting = _two_digits_up(loss_width(separation) / MAX_GRID_POINTS)
  return (f'noise_multiplier={noise_multiplier:g} is too small for {what} ({option}='
          f'{discretization:g}): a pair {separation:.3g} noise standard deviations apart needs '
          f'~{points:.2g} grid points, more than {MAX_GRID_POINTS:.0e}; use {option} >= '
          f'{fitting:.3g} (a coarser grid, still a pessimistic bound), a larger noise_multiplier, '
          'or accountant="unamplified_gaussian" (a bound at any σ that ignores the sampling)')


def _two_digits_up(value: float) -> float:
  """``value`` rounded up to two significant digits (a step shown that surely fits)."""
  scale = 10.0 ** (math.floor(math.log10(value)) - 1)
  return math.ceil(value * (1.0 + 1e-9) / scale) * scale
