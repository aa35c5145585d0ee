"""Deterministic (ε, δ) bounds used as initial guesses and as the EVR fallback.

- ``max_sensitivity_squared``: max over participation patterns of ‖C·x‖², by scheme.
- ``gaussian_delta`` / ``gaussian_sigma``: the exact (analytic) Gaussian mechanism.
- ``gaussian_epsilon``: ε(δ) of the Gaussian mechanism (bisection on the exact δ(ε)).
- ``unamplified_sigma``: σ for which a mechanism is (ε, δ)-DP with no
  amplification: the mixture P = Σ p_x N(Cx, σ²I) against Q = N(0, σ²I) is
  dominated, in both directions, by N(Δ, σ²) vs N(0, σ²) with Δ = max_x ‖Cx‖
  (joint convexity of the hockey-stick divergence, and the Gaussian
  divergence depends only on ‖Cx‖/σ). Because ``noise_multiplier`` is not
  normalised by ‖c_col‖, Δ carries the column norms of C: this is the "σ scaled
  by the maximum column norm of C" rule.
- ``dpsgd_sigma``: σ of Poisson-subsampled DP-SGD by dp_accounting's PLD (the
  calibration's initial guess; not a bound for b-min-sep, which can need less).

References:
  Balle & Wang, "Improving the Gaussian mechanism for differential privacy",
  ICML 2018, Theorem 8 (analytic Gaussian).
  Andy Dong and Arun Ganesh, "Privacy Amplification for BandMF via b-Min-Sep Subsampling",
  arXiv:2602.09338 (v2): App. A (fallback M_k of Algorithm 5), App. B, App. D, §3 (cyclic Poisson)
  (docs/references.md).
  Arun Ganesh, "Tighter Privacy Analysis for Truncated Poisson Sampling", arXiv:2508.15089: §3.1
  (the remark after Theorem 3.1: truncated cyclic Poisson) (docs/references.md).
"""

from __future__ import annotations

import math
import sys

from scipy import special

from jaxacct import _validate, schemes
from jaxacct._precision import scoped_x64
from jaxacct.schemes.participation import Cyclic
from jaxacct.strategies.banded_toeplitz import BandedToeplitz
from jaxacct.strategy import Strategy
from jaxacct.errors import InputError, InputTypeError


@scoped_x64
def max_sensitivity_squared(scheme, matrix: BandedToeplitz) -> float:
  """max over the scheme's participation patterns x of ‖C·x‖² (exact for these schemes).

  Truncation (zero-out adjacency) does not change it: coupling the sampling
  and truncation randomness under D and D′, the zero example ⊥ takes exactly
  the batch slots the sensitive example takes, so the released sums differ by
  C·x' with x' the rounds where it survived, a sub-pattern of a scheme pattern
  x; with C ≥ 0 the cross terms are non-negative, so ‖C·x'‖ ≤ ‖C·x‖. (The
  pair of Dong & Ganesh (2026) App. D, x^P = 2 vs x^Q = −1, is a dominating pair for
  amplification, not the worst-case sensitivity.)

  For a dense ``LowerTriangular`` C (Poisson: r = 1; BMinSep: r = min_sep) it
  is the upper bound ``lower_triangular.sensitivity_bound_squared`` (Dong &
  Ganesh (2026) App. B), exact for r = 1. Each scheme family's formula is its
  ``SamplingScheme.max_sensitivity_squared`` (``jaxacct/schemes/``).

  Rounded up: the scheme's float64 value is built from non-negative terms (C ≥ 0) through at
  most ~3n + 2 roundings on any path (n the rounds: Gram entries, App. B's programme, the
  separated sum), so its relative error is below γ_{3n+2} ≈ (3n + 2)·2⁻⁵³ (Higham (2002)
  §3.1); it is raised by (n² + 8n)·2⁻⁵², far above that (~10⁻⁸ at n = 7200), so that the
  Gaussian fallback's Δ never falls below the exact one.
  """
  value = float(scheme.max_sensitivity_squared(matrix))
  rounds = scheme.iterations
  return value * (1.0 + (rounds * rounds + 8 * rounds) * 2.0**-52)


def gaussian_delta(noise_multiplier: float, sensitivity: float, epsilon: float) -> float:
  """δ(ε) of the Gaussian mechanism N(Δ, σ²) vs N(0, σ²) (Balle & Wang 2018, Thm 8), both directions.

  δ = Φ(Δ/(2σ) − εσ/Δ) − e^ε Φ(−Δ/(2σ) − εσ/Δ), evaluated in log space and rounded up: each
  log term moved by ``_log_ndtr_allowance`` in the direction that enlarges δ (the difference
  cancels where ε is large, so float64 rounding alone under-reported δ by up to 1.5·10⁻⁸
  relative against 60-digit mpmath; tests/deterministic/test_unamplified.py).
  """
  sigma = _validate.positive_finite('noise_multiplier', noise_multiplier)
  sensitivity = _validate.positive_finite('sensitivity', sensitivity)
  epsilon = _validate.finite_real('epsilon', epsilon)
  a = sensitivity / (2 * sigma) - epsilon * sigma / sensitivity
  b = -sensitivity / (2 * sigma) - epsilon * sigma / sensitivity
  log_first = special.log_ndtr(a)
  log_second = epsilon + special.log_ndtr(b)
  log_first += _log_ndtr_allowance(a, log_first)
  log_second -= _log_ndtr_allowance(b, log_second - epsilon) + _ROUNDING * abs(epsilon)
  if log_second >= log_first:
    return 0.0
  value = min(1.0, float(math.exp(log_first) * -math.expm1(log_second - log_first)))
  # Below the smallest normal float the product loses its relative accuracy (or underflows to
  # 0): δ ≤ Φ(a) is then below it, which is returned instead.
  return max(value, sys.float_info.min)


# A relative float64 allowance far above the few ulps of each operation below (2⁻⁵² ≈ 2.2e-16).
_ROUNDING = 64 * 2.0**-52


def _log_ndtr_allowance(x: float, log_value: float) -> float:
  """An upper bound on |computed − exact| of ln Φ(x) at a computed x (Balle & Wang's terms).

  x carries a few ulps of relative error, moving ln Φ by |x|·(d/dx ln Φ): ≤ |x|(|x| + 1) for
  x < 0 (φ(x)/Φ(x) ≤ |x| + 1, Birnbaum's Mills-ratio bound), ≤ 0.3 for x ≥ 0 (x·φ(x)/Φ(x));
  scipy's ``log_ndtr`` adds a few ulps of relative error on its value. Where a = Δ/(2σ) − εσ/Δ
  cancels (ε ≥ 0), its absolute error is relative to Δ/(2σ) + εσ/Δ = |b|, not to a, and the
  first term's allowance alone can fall short; the second term's covers it: e^ε φ(b) = φ(a),
  so e^ε Φ(b) ≥ φ(a)/(|b| + 1) and its allowance lowers e^ε Φ(b) by ≥ 64 ulps·|b|·φ(a), ~20×
  the ~3 ulps·|b|·φ(a) that a's error moves Φ(a) (re-derived and stress-tested against mpmath
  by an independent review, 200,000 cases: none below the exact δ above 2.2·10⁻³⁰⁸). For
  x ≥ 0 the slope term is bounded so that large x (negative ε) cannot overflow δ's exponent."""
  slope = abs(x) * (abs(x) + 1.0) if x < 0 else 1.0
  return _ROUNDING * (1.0 + abs(log_value) + slope)


def gaussian_sigma(epsilon: float, delta: float, sensitivity: float) -> float:
  """Smallest σ (to 1e-12 relative, rounded up) with gaussian_delta(σ, Δ, ε) ≤ δ."""
  epsilon = _validate.finite_real('epsilon', epsilon)
  delta = _validate.probability('delta', delta)
  sensitivity = _validate.positive_finite('sensitivity', sensitivity)
  low, high = 1e-6 * sensitivity, sensitivity
  while gaussian_delta(high, sensitivity, epsilon) > delta:
    low, high = high, 2 * high
  while gaussian_delta(low, sensitivity, epsilon) <= delta and low > 1e-300:
    low /= 2
  while high / low - 1 > 1e-12:
    mid = math.sqrt(low * high)
    low, high = (low, mid) if gaussian_delta(mid, sensitivity, epsilon) <= delta else (mid, high)
  return high


def gaussian_epsilon(noise_multiplier: float, sensitivity: float, delta: float) -> float:
  """Smallest ε ≥ 0 (to 1e-12 relative, rounded up) with gaussian_delta(σ, Δ, ε) ≤ δ.

  δ(ε) of the Gaussian mechanism is strictly decreasing in ε, so a bisection finds it; the
  returned ε always meets δ (0.0 when ε = 0 already does). Balle & Wang 2018, Thm 8.
  """
  sigma = _validate.positive_finite('noise_multiplier', noise_multiplier)
  sensitivity = _validate.positive_finite('sensitivity', sensitivity)
  delta = _validate.probability('delta', delta)
  if gaussian_delta(sigma, sensitivity, 0.0) <= delta:
    return 0.0
  low, high = 0.0, 1.0
  while gaussian_delta(sigma, sensitivity, high) > delta:
    low, high = high, 2 * high
  # Each step halves the bracket: ~40 steps reach 1e-12 relative, plus log2(1/ε) while low = 0.
  for _ in range(2000):
    if high - low <= 1e-12 * high:
      break
    mid = 0.5 * (low + high)
    low, high = (low, mid) if gaussian_delta(sigma, sensitivity, mid) <= delta else (mid, high)
  return high


def unamplified_sigma(scheme, matrix: BandedToeplitz, *, epsilon: float, delta: float) -> float:
  """σ_up: the mechanism is (ε, δ)-DP at any σ ≥ σ_up, with no amplification credit.

  The Gaussian σ (``gaussian_sigma``, Balle & Wang 2018, Thm 8) for the sensitivity
  Δ = √(max_x ‖C·x‖²) (``max_sensitivity_squared``); the fallback M_k of Algorithm 5
  (Dong & Ganesh, arXiv 2602.09338v2, App. A). The ``"unamplified_gaussian"`` accountant
  (``jaxacct.deterministic.unamplified``) returns exactly this σ.
  """
  return gaussian_sigma(epsilon, delta, math.sqrt(max_sensitivity_squared(scheme, matrix)))


def dpsgd_sigma(sampling_prob: float, steps: int, *, epsilon: float, delta: float,
                tolerance: float = 1e-3, discretization: float = 1e-3) -> float:
  """σ of Poisson-subsampled DP-SGD (add/remove) for (ε, δ) by dp_accounting PLD calibration.

  Defaults are for an initial guess (coarse, fast: ``tolerance`` relative to the
  bracket's upper end, PLD ``discretization`` interval); pass 1e-6 / 1e-4 for
  reference-grade values.
  """
  sampling_prob = _validate.probability('sampling_prob', sampling_prob)
  steps = _validate.integer_at_least('steps', steps, 1)
  import dp_accounting  # local import: heavy, only needed for initial guesses
  from dp_accounting.pld import pld_privacy_accountant

  def event(sigma):
    return dp_accounting.SelfComposedDpEvent(
        dp_accounting.PoissonSampledDpEvent(sampling_prob, dp_accounting.GaussianDpEvent(sigma)),
        steps)

  # Bracket: the unamplified Gaussian σ (sensitivity √steps) is always enough; a
  # lower end far below ~0.1 makes the PLD grid explode, and is never needed here.
  upper = gaussian_sigma(epsilon, delta, math.sqrt(steps))
  lower = 0.1 * min(1.0, upper)
  try:
    return float(dp_accounting.calibrate_dp_mechanism(
        lambda: pld_privacy_accountant.PLDAccountant(value_discretization_interval=discretization),
        event, epsilon, delta, dp_accounting.ExplicitBracketInterval(lower, upper),
        tol=tolerance * upper))
  except ValueError:
    # No sign change in the bracket: the coarse PLD puts σ_up's ε a hair above the target
    # (full batches, sampling_prob 1: the pessimistic grid, not the exact Gaussian). An
    # initial guess only, so the safe end is returned; the calibration that starts from it
    # checks its own σ.
    return upper


def cyclic_poisson_pld(scheme, matrix: BandedToeplitz, noise_multiplier: float, *,
                       value_discretization_interval: float = 1e-4):
  """dp_accounting PLD (add/remove, pessimistic) of cyclic-Poisson BandMF: a deterministic accountant.

  With ``len(c_col) ≤ cycle_length`` the rounds of one phase have disjoint
  output windows, so the mechanism is the composition of ⌈n/T⌉ Poisson-subsampled
  Gaussians (Dong & Ganesh (2026) §3; the reduction of jax_privacy's
  ``amplified_bandmf_event``). Each round is charged the maximum column norm of
  C (σ_eff = σ/‖c‖, conservative for the truncated last columns), because
  ``noise_multiplier`` is not normalised by ‖c_col‖. Phase 0 is the worst
  phase (``schemes.CyclicPoisson``), and the random-phase (``independent``)
  variant is a mixture over phases of fixed-phase mechanisms against the same
  Q, hence dominated by the worst phase in both directions (joint convexity of
  the hockey-stick divergence): the PLD bounds both partitions.

  A truncating scheme (``scheme.truncates``: ``equal_split`` groups with
  B < dataset size) is routed to
  ``truncated_poisson.truncated_cyclic_poisson_pld`` (the reduction of Ganesh (2025) §3.1,
  zero-out adjacency, worst over the group sizes).

  Returns:
    a ``dp_accounting.pld.privacy_loss_distribution.PrivacyLossDistribution``
    (``get_epsilon_for_delta`` / ``get_delta_for_epsilon``); for a truncating
    scheme with two group sizes, a ``truncated_poisson.WorstCasePLD`` with the
    same two methods.

  References:
    Choquette-Choo et al., "(Amplified) banded matrix factorization", NeurIPS
    2023 (cyclic Poisson amplification); Dong & Ganesh, arXiv 2602.09338v2, §3;
    Ganesh, arXiv 2508.15089, remark after Thm 3.1 (truncation).
  """
  from dp_accounting.pld import privacy_loss_distribution as pld_lib
  if not (isinstance(scheme, schemes.SamplingScheme)
          and isinstance(scheme.participation.model, Cyclic)):
    raise InputTypeError(f'scheme must be a jaxacct.CyclicPoisson, got {scheme!r}')
  if not isinstance(matrix, Strategy) or matrix.banded_coefficients() is None:
    raise InputTypeError(f'matrix must be a jaxacct.BandedToeplitz (the cyclic-Poisson reduction needs '
                    f'banded columns), got {matrix!r}')
  model = scheme.participation.model
  if scheme.truncates:
    from jaxacct.deterministic import truncated_poisson  # local: only truncating schemes need it
    return truncated_poisson.truncated_cyclic_poisson_pld(
        scheme, matrix, noise_multiplier, adjacency='zero_out',
        value_discretization_interval=value_discretization_interval)
  if matrix.num_bands > model.cycle_length:
    raise InputError(f'c_col must have at most cycle_length = {model.cycle_length} entries, '
                     f'got {matrix.num_bands}')
  sigma = _validate.positive_finite('noise_multiplier', noise_multiplier)
  column_norm = float(matrix.max_column_norm(scheme.iterations))
  rounds = -(-scheme.iterations // model.cycle_length)
  single = pld_lib.from_gaussian_mechanism(
      sigma / column_norm, sampling_prob=float(model.sampling_prob),
      value_discretization_interval=value_discretization_interval)
  return single.self_compose(rounds)
