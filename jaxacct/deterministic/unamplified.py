"""The ``"unamplified_gaussian"`` accountant: the EVR fallback, valid for every scheme.

With no credit for sampling, the mechanism's pair P = Σ_x p_x N(Cx, σ²I), Q = N(0, σ²I) is
dominated in both directions by the Gaussian pair N(Δ, σ²) vs N(0, σ²) with
Δ = √(max_x ‖C·x‖²) over the scheme's participation patterns x (joint convexity of the
hockey-stick divergence; the Gaussian divergence depends only on ‖Cx‖/σ, and is symmetric, so
``remove`` and ``add`` get the same bound). ``noise_multiplier`` is not normalised by
‖c_col‖: Δ carries the column norms of C. Truncation (zero-out adjacency) does not change Δ
(``pld.max_sensitivity_squared``); for a dense ``LowerTriangular`` C, Δ² is the App. B upper
bound. Zero-out adjacency only.

References:
  Balle & Wang, "Improving the Gaussian Mechanism for Differential Privacy", ICML 2018,
  Theorem 8 (analytic Gaussian δ(ε)). Dong & Ganesh, "Privacy Amplification for BandMF via
  b-Min-Sep Subsampling", arXiv 2602.09338v2, App. A (the fallback M_k of Algorithm 5) and
  App. B (sensitivity bound for dense C).
"""

from __future__ import annotations

import math
import typing

from jaxacct.conventions import Adjacency
from jaxacct.deterministic import pld
from jaxacct.deterministic.base import DeterministicAccountant, PrivacyCurve, register


@typing.final
class GaussianCurve(PrivacyCurve):
  """δ(ε) of N(Δ, σ²) vs N(0, σ²), the same in both directions (Balle & Wang 2018, Thm 8).

  Attributes:
    noise_multiplier: σ.
    sensitivity: Δ.
  """

  def __init__(self, noise_multiplier: float, sensitivity: float):
    self.noise_multiplier = float(noise_multiplier)
    self.sensitivity = float(sensitivity)

  def _delta(self, epsilon: float, direction: str) -> float:
    del direction  # symmetric pair
    return pld.gaussian_delta(self.noise_multiplier, self.sensitivity, epsilon)

  def _epsilon(self, delta: float, direction: str) -> float:
    del direction
    return pld.gaussian_epsilon(self.noise_multiplier, self.sensitivity, delta)


@register
@typing.final
class UnamplifiedGaussianAccountant(DeterministicAccountant):
  """The unamplified Gaussian bound (see the module docstring); every scheme, zero-out only.

  ``calibrate`` returns exactly ``pld.unamplified_sigma`` (solved to 1e-12 relative, which
  meets every ``tolerance`` the contract allows); ``evr.verify`` uses it as the fallback σ_up.
  """

  name = 'unamplified_gaussian'

  tie_order = 20
  references = (
      'Balle & Wang, "Improving the Gaussian Mechanism for Differential Privacy", ICML 2018, '
      'Theorem 8 (analytic Gaussian)',
      'Dong & Ganesh, "Privacy Amplification for BandMF via b-Min-Sep Subsampling", arXiv '
      '2602.09338v2, App. A (fallback M_k of Algorithm 5), App. B (dense C sensitivity bound)',
  )
  adjacencies = (Adjacency.ZERO_OUT.value,)
  amplified = False  # "auto" does not choose it: ask for it by name

  def _refusal(self, mechanism, options):
    del mechanism  # max_sensitivity_squared covers every scheme and strategy
    if options['adjacency'] != Adjacency.ZERO_OUT:
      return (f'unamplified_gaussian covers zero_out adjacency only, not '
              f"{options['adjacency']}; use pld where it applies")
    return None

  def _curve(self, mechanism, options):
    del options
    sensitivity = math.sqrt(pld.max_sensitivity_squared(mechanism.scheme, mechanism.matrix))
    return GaussianCurve(mechanism.noise_multiplier, sensitivity)

  def _sigma(self, probe, epsilon, delta, tolerance, options, progress=None):
    del tolerance, options, progress  # gaussian_sigma's bracket is 1e-12 relative, instant
    return pld.unamplified_sigma(probe.scheme, probe.matrix, epsilon=epsilon, delta=delta)

  def _supersedes_monte_carlo(self, mechanism):
    del mechanism  # never tighter than the amplified Monte Carlo accountant
    return False
