"""Exact partition functions Z_α of the tilted law, and the bound every tilted term obeys.

Tilting by the privacy loss (remove direction, y ~ P): for an integer order α ≥ 2 draw y from
Q_α ∝ P^α Q^{1−α} and weigh it by w = Z_α·e^{−(α−1)L(y)}, L = ln P/Q, where

    Z_α = E_Q[(P/Q)^α] = e^{(α−1)·D_α(P‖Q)}.

Then E_{Q_α}[w·(1 − e^{ε−L})₊] = E_P[(1 − e^{ε−L})₊] = δ(ε), and every term is at most

    M(α, ε) = Z_α·e^{−(α−1)ε}·(α − 1)^{α−1}/α^α

(the maximum over L ≥ ε of e^{−(α−1)L}(1 − e^{ε−L}), at e^L = e^ε·α/(α − 1)). M is exactly
the (ε, δ) conversion of the Rényi divergence D_α = ln Z_α/(α − 1) of Canonne, Kamath & Steinke
(2020), arXiv:2004.00010, Prop. 12 (Schuchardt & Kalinin (2026) Theorem 3.1;
``renyi.log_delta_from_divergence``), so M ≤ δ_target already certifies without samples, and a
tilted estimate has bounded terms. Z_α must be exact or rounded up, never estimated.

``log_partition(mechanism, α)`` asks the scheme's participation model (``MinSepChain``,
``Cyclic``, ``FixedBins``; ``truncates``) and the strategy's band (``banded_coefficients``) and
computes ln Z_α of the remove direction by:

- **Poisson with C = c·I** (one band; also ``BMinSep(min_sep=1)``): per round the integer-α
  binomial sum of Mironov, Talwar & Zhang (2019), arXiv:1908.10530, §3.3,
  Σ_k C(α, k) p^k (1 − p)^{α−k} exp(c² k(k − 1)/(2σ²)), to the power n.
- **cyclic Poisson, ``equal_split``** (the phase-0 pair of the Monte Carlo kernel; bands ≤ T):
  the rounds of phase 0 have disjoint windows, so ln Z_α is the sum over them of the same
  binomial sum with the round's (truncated) squared column norm s_t in place of c².
- **b-min-sep** (b > 1, cold or warm start) and **cyclic Poisson, ``independent``** (a mixture
  over the phase, not a product): the exact α-tuple chain of ``minsep_chain``.
- **fixed-bin balls-in-bins**: Schuchardt & Kalinin (2026) Lemma 3.2 / Algorithm 1 as
  ``renyi.RemoveRecursion`` runs it, at the cyclic bandwidth of the Gram matrix (exact, τ = 0):
  ln Z_α = ln S(α) + ln α! − α ln T (any band count, partial epochs included).

Refused, with the reason (``refusal``): truncated schemes (the released batch sizes make the
pair another one), multi-attribution, a dense ``LowerTriangular`` C (its App. B bounds bound
the loss, not Z), more bands than the scheme's separation (except balls-in-bins), and state
spaces above ``state_budget``.

**Add direction** (``direction="add"``): Z'_α = ∫Q^αP^{1−α} = e^{(α−1)D_α(Q‖P)}, the normaliser
of the tilt of Q by L' = ln Q/P (docs/proofs/tilting.md (e)). Only the product mechanisms are
covered — Poisson with C = c·I and cyclic Poisson ``equal_split`` with bands ≤ T — one
one-dimensional moment per round, which has no closed form (a negative power) and is
computed as a certified bracket by ``tilt_partition``; ``log_z`` is its upper end. Every other
scheme is refused: for a mixture over patterns that is no product (b-min-sep, random-phase
cyclic Poisson, balls-in-bins) Q^αP^{1−α} = Q·(P/Q)^{−(α−1)} has no finite mixture form and no
exact normaliser is known (Poisson with a banded C ≠ I is refused for the same reason).

Rounding: the returned remove-direction ln Z_α is the float64 value plus
16·u·(operations + 1)·(1 + |ln Z_α|) (u = 2⁻⁵³, operations = rounds or slots of the
recursion): an allowance for the log-space rounding, about a hundred times the differences
seen against exhaustive enumeration; it is not a proved error bound. The add direction's is
the upper end of ``tilt_partition``'s bracket (a quadrature bound plus a stated rounding
margin).

Where the code runs: host NumPy/SciPy, float64, log space.

References:
  Andy Dong and Arun Ganesh, "Privacy Amplification for BandMF via b-Min-Sep Subsampling",
  arXiv:2602.09338 (v2): §2.4, §3, §4 (docs/references.md).
  Jan Schuchardt and Nikita Kalinin, "Sampling-Free Privacy Accounting for Matrix Mechanisms under
  Random Allocation", arXiv:2601.21636: Theorem 3.1, Lemma 3.2, Algorithm 1 (docs/references.md).
  Ilya Mironov, Kunal Talwar and Li Zhang, "Rényi Differential Privacy of the Sampled Gaussian
  Mechanism", arXiv:1908.10530 (2019), §3.3.
  Clément Canonne, Gautam Kamath and Thomas Steinke, "The Discrete Gaussian for Differential
  Privacy", NeurIPS 2020, arXiv:2004.00010, Prop. 12.
"""

from __future__ import annotations

import math
import typing

import numpy as np
from scipy import special

from jaxacct import _validate
from jaxacct.conventions import Direction
from jaxacct.deterministic import minsep_chain, random_allocation, renyi, tilt_partition
from jaxacct.errors import InputError
from jaxacct.schemes.participation import Cyclic, FixedBins, MinSepChain, UserLevel

DEFAULT_ALPHA_MAX = 8
DEFAULT_STATE_BUDGET = minsep_chain.DEFAULT_STATE_BUDGET
_ROUNDING = 16.0 * 2.0**-53


def _check_alpha(alpha) -> int:
  return _validate.integer_at_least('alpha', alpha, 2)


def _check_direction(direction) -> str:
  return _validate.one_of('direction', direction, tuple(d.value for d in Direction))


def log_support_bound(log_z: float, alpha: int, epsilon: float) -> float:
  """ln M(α, ε) = ln Z_α − (α − 1)ε + (α − 1) ln(α − 1) − α ln α.

  Every tilted term Z_α e^{−(α−1)L}(1 − e^{ε−L})₊ is ≤ M, and M is the δ of Canonne,
  Kamath & Steinke (2020) Prop. 12 at D_α = ln Z_α/(α − 1) (``renyi.log_delta_from_divergence``).
  """
  alpha = _check_alpha(alpha)
  log_z = _validate.finite_real('log_z', log_z)
  epsilon = _validate.finite_real('epsilon', epsilon)
  return log_z - (alpha - 1) * epsilon + (alpha - 1) * math.log(alpha - 1) - alpha * math.log(alpha)


def round_log_factors(sampling_prob: float, squared_norms, noise_multiplier: float,
                      alpha: int) -> np.ndarray:
  """ln Σ_k C(α, k) p^k (1 − p)^{α−k} exp(s k(k − 1)/(2σ²)) for each s in ``squared_norms``.

  The integer-α moment of one Poisson-subsampled Gaussian round with squared sensitivity s
  (Mironov, Talwar & Zhang (2019), arXiv:1908.10530, §3.3), in log space.
  """
  p = _validate.probability('sampling_prob', sampling_prob)
  sigma = _validate.positive_finite('noise_multiplier', noise_multiplier)
  alpha = _validate.integer_at_least('alpha', alpha, 1)
  s = np.asarray(squared_norms, np.float64)[..., None]
  k = np.arange(alpha + 1.0)
  log_q = math.log1p(-p) if p < 1.0 else -math.inf
  with np.errstate(invalid='ignore'):
    log_binomial = (special.gammaln(alpha + 1.0) - special.gammaln(k + 1.0)
                    - special.gammaln(alpha - k + 1.0) + k * math.log(p)
                    + np.where(k < alpha, (alpha - k) * log_q, 0.0))
  return special.logsumexp(log_binomial + s * k * (k - 1.0) / (2.0 * sigma**2), axis=-1)


def poisson_log_partition(sampling_prob: float, iterations: int, coefficient: float,
                          noise_multiplier: float, alpha: int) -> float:
  """ln Z_α of Poisson sampling with C = c·I: n times the per-round binomial sum (float64)."""
  n = _validate.integer_at_least('iterations', iterations, 1)
  c = _validate.positive_finite('coefficient', coefficient)
  return float(n * round_log_factors(sampling_prob, c * c, noise_multiplier, alpha))


def fixed_phase_log_partition(sampling_prob: float, iterations: int, cycle_length: int,
                              coefficients, noise_multiplier: float, alpha: int) -> float:
  """ln Z_α of cyclic Poisson with the example in phase 0 and bands ≤ T: a sum over the rounds
  t = 0, T, 2T, … < n of the binomial sum at s_t, the column norm cut at row n."""
  norms = tilt_partition.phase_zero_squared_norms(iterations, cycle_length, coefficients)
  return float(np.sum(round_log_factors(sampling_prob, norms, noise_multiplier, alpha)))


def _balls_in_bins(scheme, matrix, sigma: float, alpha: int, budget: int):
  """(ln Z_α, transitions per slot, slots) by Schuchardt & Kalinin (2026) Algorithm 1."""
  gram = random_allocation.gram_matrix(scheme, matrix)
  slots = gram.shape[0]
  bandwidth = min(random_allocation.cyclic_bandwidth(gram), slots // 2 + 1)
  states = renyi.transitions_per_slot(bandwidth, alpha)
  if states > budget:
    raise InputError(
        f'alpha = {alpha} with balls-in-bins bandwidth {bandwidth} needs '
        f'C({alpha + 2 * bandwidth}, {2 * bandwidth}) = {states} transitions per slot '
        f'(Schuchardt & Kalinin (2026) Algorithm 1), above state_budget = {budget}')
  truncated, tau = renyi.truncated_gram(gram, bandwidth)
  log_sums = renyi.RemoveRecursion(slots, bandwidth, alpha).log_sums(truncated / sigma**2)
  # (α − 1)·R_α = ln S(α) + ln α! − α ln T (+ α(α − 1)τ/(2σ²), 0 at the exact bandwidth).
  log_z = (float(log_sums[alpha]) + math.lgamma(alpha + 1.0) - alpha * math.log(slots)
           + alpha * (alpha - 1) * tau / (2.0 * sigma**2))
  return log_z, states, slots


# ---------------------------------------------------------------- the dispatcher
class LogPartition(typing.NamedTuple):
  """ln Z_α of one mechanism and order.

  Attributes:
    log_z: ln Z_α rounded up (module docstring, "Rounding").
    computed: the float64 value before rounding up.
    states: the recursion's size (chain: multiset states; balls-in-bins: transitions per
      slot; closed forms: 1).
    method: ``"poisson"``, ``"fixed_phase"``, ``"chain"`` or ``"balls_in_bins"`` (remove);
      ``"poisson_add"`` or ``"fixed_phase_add"`` (add: ``computed`` is then the quadrature's
      estimate and ``log_z`` the upper end of its certified bracket).
  """

  log_z: float
  computed: float
  states: int
  method: str


def refusal(mechanism, direction: str = 'remove') -> str | None:
  """None when ``log_partition`` covers ``mechanism`` in ``direction``, else the reason."""
  direction = _check_direction(direction)
  reason = _remove_refusal(mechanism)
  if reason is not None or direction == Direction.REMOVE:
    return reason
  if _add_method(mechanism) is None:
    bands = len(mechanism.matrix.banded_coefficients())
    return (f'the add direction of {type(mechanism.scheme).__name__} with '
            f'{bands} band(s) is not covered: Z\'_α = ∫Q^αP^{{1−α}} '
            'is computed only for product mechanisms (Poisson with one band, cyclic Poisson '
            "with partition='equal_split'); for a mixture that is no product Q·(P/Q)^{−(α−1)} "
            'has no finite mixture form and no exact normaliser is known')
  return None


def _product_method(mechanism) -> str | None:
  """``"poisson"`` (b = 1 with one band) / ``"fixed_phase"`` (equal-split cyclic Poisson): the
  product mechanisms, whose Z_α has a closed form per round; else None."""
  model = mechanism.scheme.participation.model
  bands = len(mechanism.matrix.banded_coefficients())
  if isinstance(model, MinSepChain) and model.min_sep == 1 and bands == 1:
    return 'poisson'
  if isinstance(model, Cyclic) and model.partition == 'equal_split':
    return 'fixed_phase'
  return None


def _add_method(mechanism) -> str | None:
  """``"poisson_add"`` / ``"fixed_phase_add"`` for the product mechanisms, else None."""
  method = _product_method(mechanism)
  return None if method is None else f'{method}_add'


def _remove_refusal(mechanism) -> str | None:
  scheme, matrix = mechanism.scheme, mechanism.matrix
  name = type(scheme).__name__
  participation = scheme.participation
  if scheme.truncates:
    return (f'{name} truncates batches (truncated_batch_size = '
            f'{participation.truncation.batch_size}): the pair of Dong & Ganesh (2026) App. D is '
            'not P = Σ p_x N(Cx, σ²I) vs N(0, σ²I)')
  coefficients = matrix.banded_coefficients()
  match participation.model:
    case FixedBins():
      separation = None  # any band count (Schuchardt & Kalinin (2026) Algorithm 1)
    case MinSepChain(min_sep=separation) | Cyclic(cycle_length=separation):
      pass
    case UserLevel():
      return (f'{name} (multi-attribution) is not covered: its participations carry Binomial '
              'multiplicities')
    case _:
      return f'no exact partition function for {name}'
  if coefficients is None:
    return (f'a dense {type(matrix).__name__} strategy has no exact Z_α here (its App. B bounds '
            'bound the loss, not Z_α); use a BandedToeplitz C')
  bands = len(coefficients)
  if separation is None:
    return None
  if bands > separation:
    return (f'{bands} bands exceed the separation {separation} of {name}: participations\' '
            'columns overlap and the tuple chain does not track them')
  return None


def state_space(mechanism, alpha: int, direction: str = 'remove') -> tuple[int, str]:
  """(size, method) of the recursion ``log_partition`` runs at ``alpha`` (no compute)."""
  reason = refusal(mechanism, direction)
  if reason is not None:
    raise InputError(f'mechanism: {reason}')
  alpha = _check_alpha(alpha)
  if direction == Direction.ADD:
    return 1, _add_method(mechanism)
  scheme, bands = mechanism.scheme, len(mechanism.matrix.banded_coefficients())
  if isinstance(scheme.participation.model, FixedBins):
    gram = random_allocation.gram_matrix(scheme, mechanism.matrix)
    bandwidth = min(random_allocation.cyclic_bandwidth(gram), gram.shape[0] // 2 + 1)
    return renyi.transitions_per_slot(bandwidth, alpha), 'balls_in_bins'
  method = _product_method(mechanism)
  if method is not None:
    return 1, method
  law = minsep_chain.law_for(scheme, bands)
  return minsep_chain.multiset_count(law.num_states, alpha), 'chain'


def partition(mechanism, alpha: int, *, state_budget: int = DEFAULT_STATE_BUDGET,
              direction: str = 'remove') -> LogPartition:
  """ln Z_α of the ``direction`` pair of ``mechanism`` (module docstring), with details:
  Z_α = ∫P^αQ^{1−α} (remove, default) or Z'_α = ∫Q^αP^{1−α} (add).

  Raises:
    InputError: naming ``mechanism`` and the reason when it is not covered, or ``alpha`` and
      the state count when the recursion exceeds ``state_budget``.
  """
  direction = _check_direction(direction)
  reason = refusal(mechanism, direction)
  if reason is not None:
    raise InputError(f'mechanism: {reason}')
  alpha = _check_alpha(alpha)
  budget = _validate.integer_at_least('state_budget', state_budget, 1)
  scheme, matrix = mechanism.scheme, mechanism.matrix
  sigma = float(mechanism.noise_multiplier)
  c = matrix.banded_coefficients()
  n = scheme.iterations
  model = scheme.participation.model
  if direction == Direction.ADD:
    method = _add_method(mechanism)
    if method == 'poisson_add':
      bracket = tilt_partition.poisson_add_log_partition(model.sampling_prob, n, float(c[0]),
                                                         sigma, alpha)
    else:
      bracket = tilt_partition.fixed_phase_add_log_partition(
          model.sampling_prob, n, model.cycle_length, c, sigma, alpha)
    return LogPartition(bracket.upper, bracket.estimate, 1, method)
  if isinstance(model, FixedBins):
    value, states, slots = _balls_in_bins(scheme, matrix, sigma, alpha, budget)
    return LogPartition(_round_up(value, slots), value, states, 'balls_in_bins')
  method = _product_method(mechanism)
  if method == 'poisson':
    value = poisson_log_partition(model.sampling_prob, n, float(c[0]), sigma, alpha)
    return LogPartition(_round_up(value, n), value, 1, 'poisson')
  if method == 'fixed_phase':
    value = fixed_phase_log_partition(model.sampling_prob, n, model.cycle_length, c, sigma,
                                      alpha)
    return LogPartition(_round_up(value, n), value, 1, 'fixed_phase')
  law = minsep_chain.law_for(scheme, c.size)
  return chain_partition(minsep_chain.TupleChain(law, c, sigma, alpha, n, state_budget=budget))


def chain_partition(chain: minsep_chain.TupleChain) -> LogPartition:
  """The ``LogPartition`` of a built tuple chain (method ``"chain"``): its forward pass's
  ln Z_α rounded up over its rounds (module docstring, "Rounding"); ``partition``'s value for
  the same chain, without a second forward pass for a caller that also samples from it."""
  return LogPartition(_round_up(chain.log_z, chain.iterations), chain.log_z, chain.num_states,
                      'chain')


def log_partition(mechanism, alpha: int, *, state_budget: int = DEFAULT_STATE_BUDGET,
                  direction: str = 'remove') -> float:
  """ln Z_α = (α − 1)·D_α(P‖Q) (remove) or (α − 1)·D_α(Q‖P) (add), rounded up
  (``partition(...).log_z``)."""
  return partition(mechanism, alpha, state_budget=state_budget, direction=direction).log_z


def _round_up(value: float, operations: int) -> float:
  return value + _ROUNDING * (operations + 1) * (1.0 + abs(value))


# ---------------------------------------------------------------- (A1): the add direction
def add_vanishing_epsilon(mechanism) -> float | None:
  """The ε from which the add direction's δ is exactly 0: −ln Pr[x = 0], rounded up; None
  when no pattern-free mass exists (balls-in-bins: every example takes part) or the scheme's
  pair is not the mixture one (truncated, multi-attribution).

  Add direction: y ~ Q = N(0, σ²I), L' = ln Q/P with P = Σ_x p_x N(Cx, σ²I). Every mixture
  term is ≥ 0 and the x = 0 one is Q itself, so P/Q ≥ p₀ := Pr[x = 0] and L' ≤ −ln p₀: every
  term (1 − e^{ε−L'})₊ vanishes for ε ≥ −ln p₀, whatever C and σ (docs/proofs/tilting.md;
  re-derived in docs/proofs/review-per-direction.md, claim 1). p₀ is the all-zero pattern's
  probability under one example's participation chain (``minsep_chain.pattern_log_prob``),
  and −ln p₀ is rounded up (a larger threshold certifies fewer ε: conservative).
  """
  scheme = mechanism.scheme
  participation = scheme.participation
  if scheme.truncates or isinstance(participation.model, (UserLevel, FixedBins)):
    return None
  law = minsep_chain.law_for(scheme, 1)
  log_p0 = float(minsep_chain.pattern_log_prob(
      law, np.zeros((1, mechanism.iterations), bool))[0])
  if not math.isfinite(log_p0):
    return None
  return _round_up(-log_p0, mechanism.iterations)


# ---------------------------------------------------------------- the order
class OrderRow(typing.NamedTuple):
  """One order of ``choose_order``'s table (``log_z``, ``log_bound`` None: over budget)."""

  alpha: int
  log_z: float | None
  log_bound: float | None
  states: int
  method: str


class OrderChoice(typing.NamedTuple):
  """The order with the smallest ln M(α, ε), and the table it was chosen from."""

  alpha: int
  log_z: float
  log_bound: float
  table: tuple[OrderRow, ...]


def choose_order(mechanism, epsilon: float, orders=None, *,
                 state_budget: int = DEFAULT_STATE_BUDGET,
                 direction: str = 'remove') -> OrderChoice:
  """The α in ``orders`` (default 2 … 8) minimising ln M(α, ε) in ``direction``, with every
  order's row.

  Orders whose recursion exceeds ``state_budget`` get a row with ``log_z = None`` and are not
  computed.

  Raises:
    InputError: naming ``mechanism`` when it is not covered, ``orders`` when empty or not
      integers ≥ 2, and ``state_budget`` when no order fits it.
  """
  epsilon = _validate.finite_real('epsilon', epsilon)
  budget = _validate.integer_at_least('state_budget', state_budget, 1)
  orders = range(2, DEFAULT_ALPHA_MAX + 1) if orders is None else orders
  orders = sorted({_validate.integer_at_least('orders', a, 2) for a in orders})
  if not orders:
    raise InputError('orders must not be empty')
  rows = []
  for alpha in orders:
    states, method = state_space(mechanism, alpha, direction)
    if states > budget:
      rows.append(OrderRow(alpha, None, None, states, method))
      continue
    value = partition(mechanism, alpha, state_budget=budget, direction=direction)
    rows.append(OrderRow(alpha, value.log_z, log_support_bound(value.log_z, alpha, epsilon),
                         value.states, value.method))
  computed = [row for row in rows if row.log_bound is not None]
  if not computed:
    raise InputError(f'state_budget = {budget} admits none of the orders {orders} (smallest '
                     f'needs {min(row.states for row in rows)} states)')
  best = min(computed, key=lambda row: row.log_bound)
  return OrderChoice(best.alpha, best.log_z, best.log_bound, tuple(rows))
