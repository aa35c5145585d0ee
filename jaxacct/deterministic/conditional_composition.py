"""The ``"conditional_composition"`` accountant of fixed-bin balls-in-bins (Schuchardt & Kalinin
(2026) §4, App. D–F).

The pair P = (1/b) Σ_i N(m_i, σ²I), Q = N(0, σ²I) of ``random_allocation`` does not factorise
over steps. Conditional composition (Schuchardt & Kalinin (2026) Lemma 4.1, a special case of
Choquette-Choo et al. 2024, Thm 3.1) bounds it by a product of one-dimensional pairs plus the
cost δ_E of the histories on which those pairs fail:

    H_γ(P‖Q) ≤ H_γ(×_n P^(n) ‖ ×_n Q^(n)) + δ_E,

with, at step n, P^(n) = Σ_i p_i^(n) N(c_i, σ²), Q^(n) = N(0, σ²) ("remove"; "add" swaps
them), c_1 ≤ … ≤ c_b the step-n slot means sorted, and weights from upper bounds λ̄_i on the
reverse hazard λ_i(y) = P(z = i | z ≤ i, y_{1:n−1}) (Corollary 4.4, with the product index of
the printed text corrected to j): p_i = λ̄_i Π_{j>i}(1 − λ̄_j), λ̄_1 = 1. By Lemma 4.5,
λ̄_i = 1/(1 + (i − 1)·e^{τ_i}) for a lower bound τ_i on the "ternary" loss

    L_i(y) = ln[(1/(i−1)) Σ_{j<i} N(y | μ_j, σ²I) / N(y | μ_i, σ²I)]     (μ: prefix means).

The basis (not in the paper; exact). The pair is fixed by the Gram matrix of the means up to
a rotation (Q is rotation invariant), so the steps may be taken in any orthonormal basis in
which every slot mean stays ≥ 0 (Lemma 4.2 needs non-negative component means). Two uses:
g equal step columns v are one step with mean √g·v plus g − 1 steps where every slot has mean
0 (independent N(0, σ²) under P and Q alike, which H_γ ignores), so equal columns are merged
(``reduced_means``: k epochs of DP-SGD become one epoch at σ/√k, since the later epochs' steps
are what conditional composition handles worst); and the steps may be taken in any order —
the curve composes the forward or the reversed order, whichever scores better
(``ConditionalCompositionCurve.order``; a banded C with decaying coefficients reveals a slot
more slowly backwards), each a complete proof.

The bad event, and the printed k = i … b. Lemma 4.1 charges δ_E = Pr_P[some λ_i(y) > λ̄_i]
with y under the true marginal of the prefix, (1/b) Σ_{k=1}^b N(μ_k, σ²I); Algorithm 4 / App.
F print the reference measure (1/b) Σ_{k=i}^b N(μ_k, σ²I). Through Lemma 4.1 alone that is an
under-count: components k < i are dropped although their prefixes occur, e.g. in the first
epoch of DP-SGD the slots after n have prefix 0 = μ_n, so their Pr[L_i < τ] equals slot n's
and the printed sum misses all but one of b − n + 1 equal terms. It is nevertheless sound,
by a finer argument (ours, not the paper's) that needs even less, the k = i term alone:

  1. Replace each step-n conditional Σ_i w_i(y) N(c_i, σ²) (w(y): the posterior of z given
     the prefix) by one whose weights w̃(y) are stochastically dominated by p^(n); then every
     conditional is dominated by (P^(n), Q^(n)) (Lemma 4.2), so the modified P̃ satisfies
     H_γ(P̃‖Q) ≤ H_γ(×P^(n)‖×Q^(n)) (adaptive composition of dominating pairs), and
     H_γ(P‖Q) ≤ H_γ(P̃‖Q) + TV(P, P̃) with TV(P, P̃) ≤ Σ_n E_{y~P} TV(w(y), w̃(y)) (hybrid
     argument, prefixes drawn from P).
  2. Moving the excess upper-tail mass max_i (W_i − P_i)_+ (W, P: Pr[z ≥ i] under w, p) to
     the lowest slot gives such a w̃, and telescoping Π(1 − λ̄_j) − Π(1 − λ_j) gives
     TV(w, w̃) ≤ Σ_{i≥2} (λ_i(y) − λ̄_i)_+ Π_{j>i}(1 − λ_j(y)) = Σ_i w_i(y)(1 − λ̄_i/λ_i(y))_+.
  3. E_{y~P}[w_i(y) f(y)] = (1/b) E_{y~N(μ_i, σ²I)}[f(y)] (Bayes), and 1 − λ̄_i/λ_i(y) =
     (1 − λ̄_i)(1 − e^{L_i(y) − τ_i}) wherever L_i(y) < τ_i. So
         δ_E = Σ_n Σ_i (1/b)(1 − λ̄_i) E_{y~N(μ_i)}[(1 − e^{L_i(y) − τ_i})_+],
     at most (1/b) Pr_{N(μ_i)}[L_i < τ_i] per bound: the printed form's own term, its other
     terms (k > i) only add. The module takes this cost; the brute-force test in
     tests/deterministic/test_conditional_composition.py checks every step on tiny cases.

"Add" has no latent slot (Q first), so the modification is made to Q: write w(y) =
(1 − κ)a + κu with a ≼ p^(n) (a's reverse hazards min(λ_i(y), λ̄_i)), so that P's conditional
is (1 − κ)A + κU with A = Σ_i a_i N(c_i, σ²); replacing Q's conditional N(0, σ²) by
(1 − κ)N(0, σ²) + κU gives a pair dominated by (N(0, σ²), A) for every γ ≥ 0 (the κU parts
cancel at γ ≥ 1; at γ < 1, H_γ ≥ 1 − γ), hence by (Q^(n), P^(n)), at a cost TV ≤ κ(y) ≤
Σ_i λ_i(y)(1 − e^{L_i(y) − τ_i})_+ (ratios of the two reverse-hazard products), so
δ_E = Σ_n Σ_i E_{y~N(0, σ²I)}[λ_i(y)(1 − e^{L_i(y) − τ_i})_+], at most Pr_{N(0)}[L_i < τ_i]
(Theorem 4.8's tail). In both directions only the ranks above the lowest group of equal step
means count (the group acts as one component whose λ̄ is 1).

Each cost is evaluated on the variational lower bound X = E_ψ[L_{i,j}] − KL(ψ‖uniform) ≤ L_i
(Theorem 4.8, D.3), Gaussian under N(μ_i, σ²I) and N(0, σ²I) alike, in closed form
(``_log_partial_hockey_stick``); ψ ranges over App. F's family (Option 3: softmax(−‖μ_i −
μ_j‖²/t), t ∈ {∞ (uniform), 10^−1, 10^−½, 1, 10^½, 10}), the least cost kept. Components
identical to μ_i get ψ_j = 0 (Remark D.5); their terms are exactly 1, so with s of them
L_i ≥ ln(s/(i − 1) + e^X) (not in the paper; tighter than its KL offset). For "add", the
factor λ_i(y) ≤ 1/(1 + (i − 1)(s/(i − 1) + e^X)), decreasing in X, is bounded piecewise by its
values on a grid of points below the threshold (``_log_costs``). The bounds share δ_E (the union
bound over the bounds taken): each gets δ_E·w/Σw with w = e^{c²/σ²} − 1 for its component's
step mean c (``allocation``; not in the paper, which splits evenly), and τ_i is the largest
value whose cost fits its share. App. E's "hybrid" max-bound allocation has no proof and is
not offered.

Only the bounds that matter are taken (not in the paper; exact): the slots of the lowest group
of equal step means share one Gaussian and their total weight is Π_{j above}(1 − λ̄_j)
whatever their own λ̄, and a slot whose predecessors all share its prefix has L_i ≡ 0.

Each step pair's PLD PMF is dp_accounting's own pessimistic connect-the-dots construction of
``MixtureGaussianPrivacyLoss`` (``mixture_pld``, with its inverse loss vectorised). The
N PMFs are composed by dp_accounting (``DensePLDPmf.compose``, FFT convolution) in a balanced
tree, and δ(ε) = δ_PLD(ε) + δ_E per direction.

Host code (NumPy, SciPy, dp_accounting); float64 throughout.

References:
  Jan Schuchardt and Nikita Kalinin, "Sampling-Free Privacy Accounting for Matrix Mechanisms
  under Random Allocation", arXiv:2601.21636 (Schuchardt & Kalinin (2026)), Lemmas 4.1–4.5,
  Corollary 4.4, Theorems 4.6, 4.8, D.3, Algorithm 4, Remark D.5, App. E–F; Choquette-Choo et
  al., "Privacy Amplification for Matrix Mechanisms", ICLR 2024, Thm 3.1, Cor. 4.4; Zhu, Dong
  & Wang, "Optimal Accounting of Differential Privacy via Characteristic Function", AISTATS
  2022, Thm 10 (adaptive composition of dominating pairs).
"""

from __future__ import annotations

import functools
import math
import typing

import numpy as np
from scipy import special

from jaxacct.conventions import DIRECTIONS, Direction
from jaxacct.deterministic import _grid, mixture_pld, random_allocation, renyi
from jaxacct.deterministic._search import smallest_passing_sigma
from jaxacct.deterministic.base import DeterministicAccountant, Option, register
from jaxacct.errors import InputError

TEMPERATURES = (math.inf, 10**-1, 10**-0.5, 1.0, 10**0.5, 10.0)
_BISECTIONS = 80  # enough to reach _GRID from any bracket below 2^48
_SQRT2 = math.sqrt(2.0)
_ROUNDING = 1e-12  # relative allowance for erfcx / ndtr rounding (accurate to ~1e-15)
_OVERSHOOTS = tuple(2.0**k for k in range(-2, 9))  # add: θ − x_k in units of ξ/max(1, |z|)


def _prefix_labels(labels: np.ndarray, column: np.ndarray) -> np.ndarray:
  """Class labels of the slots' prefix vectors after appending ``column`` (equal prefixes ⇔
  equal labels, decided exactly)."""
  _, relabelled = np.unique(np.stack([labels.astype(np.float64), column], axis=1), axis=0,
                            return_inverse=True)
  return relabelled.ravel()


def _variational_terms(gram: np.ndarray, rows: np.ndarray, ranks: np.ndarray,
                       below: np.ndarray, distance: np.ndarray, noise_multiplier: float,
                       temperature: float):
  """For the slots ``rows`` (ranks ``ranks``) and ψ^(i) = softmax(−‖μ_i − μ_j‖²/t) over the
  allowed j (``below``: μ_j ranked before μ_i and ≠ μ_i; uniform at t = ∞): (ξ, ν under
  y ~ N(0, σ²I), ν under y ~ N(μ_i, σ²I)) of the variational bound
  X = E_ψ[L_{i,j}] − KL(ψ‖uniform on the i − 1 predecessors) ~ N(ν, ξ²) (Theorem D.3 /
  Corollary D.4, written with the prefix Gram matrix K)."""
  logits = np.zeros(below.shape) if math.isinf(temperature) else -distance / temperature
  logits = np.where(below, logits, -np.inf)
  has = below.any(axis=1)
  top = np.where(has, np.max(logits, axis=1, initial=-np.inf), 0.0)
  shifted = logits - top[:, None]
  weights = np.exp(shifted)  # 0 where not allowed
  total = np.where(has, weights.sum(axis=1), 1.0)
  weights /= total[:, None]
  log_weights_ = np.where(below, shifted - np.log(total)[:, None], 0.0)
  # KL(ψ‖uniform on the i − 1 predecessors) = Σ_j ψ_j (ln ψ_j + ln(i − 1)).
  predecessors = np.log(np.maximum(ranks.astype(np.float64), 1.0))
  kl = (weights * (log_weights_ + predecessors[:, None])).sum(axis=1)
  diagonal = np.diag(gram)
  own = diagonal[rows]
  mixed = weights @ gram  # row r: Σ_j ψ_j K_{j,·}
  cross = mixed[np.arange(rows.size), rows]
  spread = np.maximum(own - 2.0 * cross + (mixed * weights).sum(axis=1), 0.0)
  xi = np.sqrt(spread) / noise_multiplier
  variance = noise_multiplier**2
  # E_ψ L_{i,j}(y) = yᵀ(E_ψ μ_j − μ_i)/σ² + (‖μ_i‖² − E_ψ‖μ_j‖²)/(2σ²): at y = 0 the second
  # term; at y = μ_i it is −E_ψ‖μ_i − μ_j‖²/(2σ²).
  at_zero = (own - weights @ diagonal) / (2.0 * variance) - kl
  at_own = -np.maximum(own - 2.0 * cross + weights @ diagonal, 0.0) / (2.0 * variance) - kl
  return xi, at_zero, at_own


def _log_partial_hockey_stick(nu, xi, theta, upper):
  """ln E[(1 − e^{X−θ}) 1{X < u}] for X ~ N(ν, ξ²), u ≤ θ (arrays, broadcast), rounded up.

  The closed form is Φ(z) − e^{ν−θ+ξ²/2} Φ(z − ξ), z = (u − ν)/ξ. For z ≤ 0 (every tail that
  matters) it is evaluated as ½e^{−z²/2}[erfcx(−z/√2) − e^{u−θ} erfcx((ξ − z)/√2)]: no
  overflow, and the difference of two nearly equal tails loses only erfcx's rounding, for
  which a relative 1e-12 of the first term is added. Never above ln Φ(z), the probability
  bound it refines. ξ = 0: (1 − e^{ν−θ}) 1{ν < u}.
  """
  nu, xi, theta, upper = np.broadcast_arrays(*(np.asarray(v, np.float64)
                                               for v in (nu, xi, theta, upper)))
  positive = xi > 0
  scale = np.where(positive, xi, 1.0)
  z = np.where(positive, (upper - nu) / scale, 0.0)
  with np.errstate(divide='ignore', over='ignore', invalid='ignore'):
    below = np.minimum(z, 0.0)
    first = special.erfcx(-below / _SQRT2)
    second = np.exp(upper - theta) * special.erfcx((scale - below) / _SQRT2)
    tail = (-0.5 * below**2 - math.log(2.0)
            + np.log(np.maximum(first - second, 0.0) + _ROUNDING * first))
    above = np.maximum(z, 0.0)
    body = special.ndtr(above) - np.exp(nu - theta + 0.5 * scale**2
                                        + special.log_ndtr(above - scale))
    bulk = np.log(np.maximum(body, 0.0) + _ROUNDING)
    gaussian = np.minimum(np.where(z <= 0.0, tail, bulk), special.log_ndtr(z))
    step = np.where(nu < upper, np.log(-np.expm1(nu - theta)) + math.log1p(_ROUNDING),
                    -np.inf)
  return np.where(positive, gaussian, step)


class _BoundInputs(typing.NamedTuple):
  """What a bound's cost depends on, per bound (columns): the variational X ~ N(ν, ξ²) of
  each temperature (rows) under the direction's measure, the identical predecessors' share
  s/(i − 1), ln(i − 1), and whether any predecessor differs from μ_i."""

  nu: np.ndarray     # (T, R)
  xi: np.ndarray     # (T, R)
  share: np.ndarray  # (R,)
  log_predecessors: np.ndarray  # (R,)
  has: np.ndarray    # (R,) bool

  @classmethod
  def concatenate(cls, parts) -> '_BoundInputs':
    return cls(*(np.concatenate(fields, axis=-1) for fields in zip(*parts)))


def _bound_inputs(gram: np.ndarray, identical: np.ndarray, rank: np.ndarray, rows: np.ndarray,
                  noise_multiplier: float, direction: str, temperatures) -> _BoundInputs:
  """``_BoundInputs`` of the slots ``rows``, slots in any order: ``rank`` gives each slot's
  place in the step's sorted order, ``identical`` (rows, b) whether μ_j = μ_row exactly."""
  ranks = rank[rows]
  earlier = rank[None, :] < ranks[:, None]
  below = earlier & ~identical
  diagonal = np.diag(gram)
  distance = np.maximum(diagonal[rows][:, None] + diagonal[None, :] - 2.0 * gram[rows], 0.0)
  terms = [_variational_terms(gram, rows, ranks, below, distance, noise_multiplier, t)
           for t in temperatures]
  predecessors = np.maximum(ranks, 1).astype(np.float64)  # i − 1
  own = direction == Direction.REMOVE
  return _BoundInputs(np.stack([at_own if own else at_zero for _, at_zero, at_own in terms]),
                      np.stack([xi for xi, _, _ in terms]),
                      (identical & earlier).sum(axis=1) / predecessors, np.log(predecessors),
                      below.any(axis=1))


def _log_costs(inputs: _BoundInputs, tau: np.ndarray, direction: str, b: int) -> np.ndarray:
  """ln of each bound's bad-event cost at τ (module docstring), increasing in τ.

  With a = s/(i − 1): L_i ≥ ln(a + e^X), so L_i < τ needs X < θ = τ + ln A, A = 1 − a e^{−τ},
  and (1 − e^{L_i − τ})_+ ≤ A (1 − e^{X − θ})_+; A ≤ 0 means L_i ≥ τ surely (cost 0).
  """
  with np.errstate(divide='ignore', invalid='ignore', over='ignore'):
    log_a = np.log1p(-inputs.share * np.exp(-tau))
  finite = np.isfinite(log_a)  # nan (A < 0) and −∞ (A = 0): no cost
  log_a = np.where(finite, log_a, 0.0)
  theta = tau + log_a
  nu, xi = inputs.nu, inputs.xi
  if direction == Direction.REMOVE:
    # (1/b)(1 − λ̄(τ)) E_{y~N(μ_i)}[(1 − e^{L_i − τ})_+], 1 − λ̄ = (i − 1)e^τ/(1 + (i − 1)e^τ).
    hockey = _log_partial_hockey_stick(nu, xi, theta[None], theta[None]).min(axis=0)
    not_hazard = -np.logaddexp(0.0, -(inputs.log_predecessors + tau))
    cost = -math.log(b) + not_hazard + log_a + hockey
  else:
    # E_{y~N(0)}[λ_i(y)(1 − e^{L_i − τ})_+], λ_i ≤ λ(X) := 1/(1 + (i − 1)(a + e^X)), which
    # decreases in X: on points x_0 < … < x_{K−1} < x_K = θ, λ ≤ λ(x_k) on [x_k, x_{k+1})
    # and ≤ 1 below x_0, so with J_k = E[(1 − e^{X−θ}); X < x_k] (Abel summation, every
    # coefficient ≥ 0, so rounded-up J_k keep it an upper bound):
    #   cost/A ≤ (1 − λ(x_0)) J_0 + Σ_{0<k<K} (λ(x_{k−1}) − λ(x_k)) J_k + λ(x_{K−1}) J_K.
    theta = theta[None, :, None]
    nu, xi = nu[:, :, None], xi[:, :, None]
    z = (theta - nu) / np.where(xi > 0, xi, 1.0)
    unit = xi / np.maximum(1.0, -z)  # the overshoot θ − X has scale ξ/|z| in a deep tail
    with np.errstate(divide='ignore', invalid='ignore'):
      # where λ(x) = 2^−j, j = 1 … 30: stretches over which λ halves, wherever λ is not tiny
      # (nan where a ≥ (2^j − 1)/(i − 1): λ never that large)
      halvings = np.log(np.expm1(np.arange(1, 31) * math.log(2.0))[None, :]
                        / np.exp(inputs.log_predecessors)[:, None] - inputs.share[:, None])
    gaps = np.concatenate([unit * np.asarray(_OVERSHOOTS), theta - nu,
                           np.broadcast_to(theta - halvings[None], unit.shape[:2] + (30,))],
                          axis=2)
    gaps = np.where(np.isfinite(gaps) & (gaps > 0), gaps, 0.0)  # no crossover: nan, ∞ → 0
    gaps = -np.sort(-gaps, axis=2)  # descending: the points x ascending
    points = theta - gaps  # (T, R, K) ascending, all ≤ θ (ties give empty stretches)
    with np.errstate(divide='ignore', over='ignore'):
      log_share = np.log(inputs.share)[None, :, None]
      log_c = inputs.log_predecessors[None, :, None]
      odds = log_c + np.logaddexp(log_share, points)  # ln((i − 1)(a + e^x))
      log_hazard = -np.logaddexp(0.0, odds)             # ln λ(x_k)
      below = _log_partial_hockey_stick(nu, xi, theta, points)   # ln J_k, k < K
      whole = _log_partial_hockey_stick(nu, xi, theta, theta)    # ln J_K
      # λ(x_{k−1}) − λ(x_k) = λ(x_{k−1}) λ(x_k) (i − 1)(e^{x_k} − e^{x_{k−1}}), no cancellation.
      drops = (log_hazard[..., :-1] + log_hazard[..., 1:] + log_c + points[..., 1:]
               + np.log(-np.expm1(points[..., :-1] - points[..., 1:])))
      terms = np.concatenate([(odds + log_hazard)[..., :1] + below[..., :1],
                              drops + below[..., 1:], log_hazard[..., -1:] + whole], axis=2)
    cost = log_a + special.logsumexp(terms, axis=2).min(axis=0)
  return np.where(finite, cost, -np.inf)


_GRID = 2.0**-30  # τ is searched on multiples of this (~1e-9): see _largest_passing


def _largest_passing(log_cost, start: np.ndarray, log_budget) -> np.ndarray:
  """The largest multiple τ of ``_GRID`` (per bound) with ``log_cost(τ) ≤ log_budget``, for a
  cost increasing in τ, from a ``start`` that passes (where rounding alone made it fail:
  −∞, i.e. λ̄ = 1, always valid).

  On a fixed grid the answer is a monotone function of the budget (a larger δ_E never gives
  a smaller τ), which a bisection to a tolerance is not: δ(ε) inverts ε(δ) through it.
  """
  start = np.floor(start / _GRID) * _GRID  # lower: still passes
  valid = log_cost(start) <= log_budget
  low = np.where(valid, start, 0.0)
  step = np.ones_like(low)
  high = low + step
  for _ in range(12):  # grow the bracket: with a large budget τ passes far above its start
    passes = valid & (log_cost(high) <= log_budget)
    if not passes.any():
      break
    low = np.where(passes, high, low)
    step = np.where(passes, 4.0 * step, step)
    high = low + step
  for _ in range(_BISECTIONS):
    if np.all(high - low <= _GRID):
      break
    middle = np.floor(0.5 * (low + high) / _GRID) * _GRID
    passes = log_cost(middle) <= log_budget
    low, high = np.where(passes, middle, low), np.where(passes, high, middle)
  return np.where(valid, low, -np.inf)


def _solve(inputs: _BoundInputs, significance, direction: str, b: int) -> np.ndarray:
  """τ of each bound: the largest with cost ≤ its ``significance`` (a scalar or one per
  bound); 0 (exact) without a non-identical predecessor (L_i ≡ 0), −∞ (λ̄ = 1) where no cost
  is allowed."""
  if inputs.has.size == 0:
    return np.zeros(0)
  significance = np.broadcast_to(np.asarray(significance, np.float64), inputs.has.shape)
  allowed = significance > 0.0
  budget = np.where(allowed, significance, 1.0)
  # A start that passes: each temperature's probability bound Φ((τ − ν)/ξ) bounds its cost
  # (times 1/b for remove); and ln a, below which L_i ≥ τ surely.
  level = np.minimum(budget * (b if direction == Direction.REMOVE else 1), 0.5)
  start = (inputs.nu + inputs.xi * special.ndtri(level)).max(axis=0)
  with np.errstate(divide='ignore'):
    start = np.maximum(start, np.log(inputs.share))
  tau = _largest_passing(lambda t: _log_costs(inputs, t, direction, b), start, np.log(budget))
  return np.where(inputs.has, np.where(allowed, tau, -np.inf), 0.0)


def allocation(step_means: np.ndarray, noise_multiplier: float) -> np.ndarray:
  """The shares of δ_E given to bounds on components of step means c (> 0): ∝ e^{c²/σ²} − 1,
  the χ² divergence of N(c, σ²) from N(0, σ²), so that the bounds on the components that leak
  most get most (not in the paper; any fixed shares summing to 1 keep the union bound)."""
  ratio = (np.asarray(step_means, np.float64) / noise_multiplier)**2
  with np.errstate(divide='ignore'):
    log_weight = ratio + np.log(-np.expm1(-ratio))  # ln(e^{c²/σ²} − 1), no overflow
  weight = np.exp(log_weight - log_weight.max())
  return weight / weight.sum() * (1.0 - 1e-12)  # rounded so that the shares sum to ≤ 1


def _tail_bounds(gram: np.ndarray, identical: np.ndarray, rank: np.ndarray, rows: np.ndarray,
                 noise_multiplier: float, significance: float, direction: str,
                 temperatures=TEMPERATURES) -> np.ndarray:
  """τ of the slots ``rows`` (``tail_bounds``), slots in any order (``_bound_inputs``)."""
  inputs = _bound_inputs(gram, identical, rank, rows, noise_multiplier, direction,
                         temperatures)
  return _solve(inputs, significance, direction, gram.shape[0])


def tail_bounds(gram: np.ndarray, identical: np.ndarray, noise_multiplier: float,
                significance: float, direction: str,
                temperatures=TEMPERATURES) -> np.ndarray:
  """τ_i (slots in sorted order): lower bounds on the ternary losses L_i whose bad-event cost is
  at most ``significance`` each (module docstring, "The bad event").

  Remove: (1/b)·(1 − λ̄_i)·E_{y~N(μ_i, σ²I)}[(1 − e^{L_i(y) − τ_i})_+] ≤ β, where
  λ̄_i = 1/(1 + (i − 1)e^{τ_i}); this is at most (1/b)·Pr_{y~N(μ_i)}[L_i < τ_i], the
  printed k = i … b reference measure's own term. Add: E_{y~N(0, σ²I)}[λ_i(y)(1 −
  e^{L_i(y) − τ_i})_+] ≤ β, at most Pr_{N(0)}[L_i < τ_i] (Theorem 4.8). Both evaluated on the
  Gaussian variational bound (Theorem D.3 / Corollary D.4) in closed form; τ_i is the largest
  passing value, found by bisection (every cost increases in τ).

  Args:
    gram: K_jk = ⟨μ_j, μ_k⟩ of the prefix means, rows and columns in the step's sorted order.
    identical: identical[i, j] when μ_i = μ_j exactly.
    noise_multiplier: σ.
    significance: β, the share of δ_E allowed to each bound.
    direction: ``"remove"`` or ``"add"``.
    temperatures: the variational family's temperatures (App. F, Option 3; ∞ = uniform ψ).

  Returns:
    τ (b,) with τ_1 = 0 unused (λ̄_1 = 1); τ_i = 0 when every predecessor equals μ_i
    (L_i ≡ 0); s identical predecessors count exactly (L_i ≥ ln(s/(i − 1) + e^X), Remark
    D.5); −∞ (λ̄_i = 1) where no bound passes.
  """
  b = gram.shape[0]
  rows = np.arange(b)
  return _tail_bounds(gram, identical, rows, rows, noise_multiplier, significance, direction,
                      temperatures)


def log_weights(tau: np.ndarray) -> np.ndarray:
  """ln p_i = ln λ̄_i + Σ_{j>i} ln(1 − λ̄_j), λ̄_i = 1/(1 + (i−1)e^{τ_i}), λ̄_1 = 1 (Cor. 4.4,
  Lemma 4.5), in log space; τ_i = −∞ gives λ̄_i = 1 (always a valid upper bound)."""
  b = tau.size
  ranks = np.arange(b, dtype=np.float64)  # i − 1
  with np.errstate(divide='ignore'):
    odds = np.log(ranks) + tau  # ln((i − 1) e^τ); −inf at i = 1
  log_hazard = -np.logaddexp(0.0, odds)          # ln λ̄_i
  log_survive = -np.logaddexp(0.0, -odds)         # ln(1 − λ̄_i) (−inf at i = 1)
  later = np.concatenate([np.cumsum(log_survive[::-1])[::-1][1:], [0.0]])
  return log_hazard + later


def _schedule(means: np.ndarray):
  """Per step: (the slots in sorted order of the step's means, each slot's rank, the prefix
  class labels, the size of the lowest group of equal means, the slots whose reverse hazard
  must be bounded).

  Only the slots ranked above the lowest group of equal step means need a bound: the lowest
  group's total weight is Π_{j above}(1 − λ̄_j) whatever its own λ̄ (λ̄_1 = 1 telescopes),
  and its members share one Gaussian, so λ̄ = 1 at its top rank (the trivial upper bound) is
  exact for the mixture. Slots whose predecessors all have their prefix (L_i ≡ 0) need no
  tail bound either. The union bound then runs over the bounds actually taken.
  """
  b, steps = means.shape
  labels = np.zeros(b, np.int64)
  plan = []
  for n in range(steps):
    column = means[:, n]
    order = np.argsort(column, kind='stable')
    rank = np.empty(b, np.int64)
    rank[order] = np.arange(b)
    sorted_column = column[order]
    lowest = int(np.searchsorted(sorted_column, sorted_column[0], side='right'))
    # A bound is needed unless every earlier-ranked slot shares the slot's prefix class:
    # from the first rank whose class differs from rank 1's on.
    sorted_labels = labels[order]
    changes = np.flatnonzero(sorted_labels != sorted_labels[0])
    first = max(lowest, int(changes[0]) if changes.size else b)
    plan.append((order, rank, labels, lowest, order[first:]))
    labels = _prefix_labels(labels, column)
  return plan


def reduced_means(means: np.ndarray) -> np.ndarray:
  """The slot means (b, N′) of the same pair with equal step columns merged and zero columns
  dropped (module docstring, "The basis"): g equal columns v become one column √g·v (rounded
  up), in the order of their first occurrence. At least one column is kept.

  Exact: an orthogonal map of the g coordinates sends them to one coordinate with means √g·v
  and g − 1 coordinates where every slot has mean 0, which are N(0, σ²) under P and Q alike
  and independent of the rest, so H_γ is unchanged (H_γ(P×R‖Q×R) = H_γ(P‖Q)). With k epochs
  of a banded C (p ≤ b) the epochs after the first repeat its steady columns: N = kb steps
  become b + p − 1 (DP-SGD: b, one epoch at σ/√k).
  """
  columns, inverse, counts = np.unique(means.T, axis=0, return_inverse=True,
                                       return_counts=True)
  first = np.full(columns.shape[0], means.shape[1])
  np.minimum.at(first, inverse.ravel(), np.arange(means.shape[1]))
  keep = np.argsort(first)
  # √g rounded up, and then each product: a column scaled up dominates (noise scaled down).
  scale = np.where(counts[keep] > 1, np.sqrt(counts[keep]) * (1.0 + 2.0**-50), 1.0)
  reduced = columns[keep].T * scale[None, :]
  nonzero = np.any(reduced != 0.0, axis=0)
  return reduced[:, nonzero] if nonzero.any() else reduced[:, :1]


def step_orders(means: np.ndarray) -> dict[str, np.ndarray]:
  """The step orders the curve composes, each a complete bound of the same pair (module
  docstring, "The basis"): ``"forward"``, the ``reduced_means`` in time order, and
  ``"reversed"`` unless reversing gives the same means up to relabelling the slots (DP-SGD)."""
  forward = reduced_means(means)
  backward = forward[:, ::-1]

  def slots(m):  # the rows as a multiset
    return m[np.lexsort(m.T[::-1])]

  if np.array_equal(slots(forward), slots(backward)):
    return {'forward': forward}
  return {'forward': forward, 'reversed': backward}


def step_pairs(means: np.ndarray, noise_multiplier: float, bad_event_delta: float,
               direction: str, temperatures=TEMPERATURES, *, bounds=None):
  """The per-step mixtures of Algorithm 4 for every step: (c (N, b) sorted step means,
  ln p (N, b)), the bounds sharing δ_E by ``allocation`` (union bound).

  The prefix Gram matrix and the classes of identical prefixes are updated step by step
  (O(R·b²) for the R bounds a step takes: ``_schedule``, R ≤ b − 1, and R = 1 for DP-SGD);
  the bounds of all steps are then solved together (one vectorised bisection).

  ``bounds`` replaces the tail bounds, with ``_tail_bounds``' signature less the temperatures,
  for the diagnostics of ``benchmarks/conditional_composition_gap.py`` (idealised bounds that
  are not proofs); the accountant never passes it.
  """
  b, steps = means.shape
  plan = _schedule(means)
  significance = bad_event_delta / max(sum(rows.size for *_, rows in plan), 1)
  gram = np.zeros((b, b))
  sorted_means = np.empty((steps, b))
  tau = np.zeros((steps, b))  # sorted order; 0 is exact where every predecessor is identical
  parts, places, components = [], [], []
  for n, (order, rank, labels, lowest, rows) in enumerate(plan):
    column = means[:, n]
    sorted_means[n] = column[order]
    tau[n, lowest - 1] = -np.inf  # λ̄ = 1 atop the lowest group (see _schedule)
    if b > 1 and rows.size:
      identical = labels[rows][:, None] == labels[None, :]
      if bounds is None:
        parts.append(_bound_inputs(gram, identical, rank, rows, noise_multiplier, direction,
                                   temperatures))
        places.append((np.full(rows.size, n), rank[rows]))
        components.append(column[rows])
      else:
        tau[n, rank[rows]] = bounds(gram, identical, rank, rows, noise_multiplier,
                                    significance, direction)
    support = np.flatnonzero(column)
    gram[np.ix_(support, support)] += np.outer(column[support], column[support])
  if parts:
    at_step, at_rank = (np.concatenate(index) for index in zip(*places))
    shares = allocation(np.concatenate(components), noise_multiplier)
    tau[at_step, at_rank] = _solve(_BoundInputs.concatenate(parts), bad_event_delta * shares,
                                   direction, b)
  weights = np.zeros((steps, b)) if b == 1 else np.stack([log_weights(t) for t in tau])
  return sorted_means, weights


def bound_count(means: np.ndarray) -> int:
  """The number of tail bounds conditional composition takes over all steps (``_schedule``):
  the union bound gives each δ_E divided by it."""
  return sum(rows.size for *_, rows in _schedule(means))


def step_deltas(sorted_means: np.ndarray, log_p: np.ndarray, noise_multiplier: float,
                epsilon: float, direction: str) -> np.ndarray:
  """H_{e^ε} of each step pair (N,), rounded down: each is a lower bound on the composition's
  δ(ε) (dropping the other steps is post-processing) — the cheap screen of
  ``ConditionalCompositionCurve._delta_below``.

  The loss ℓ(x) = ln Σ_i p_i e^{(c_i x − c_i²/2)/σ²} increases in x (c_i ≥ 0), so the set
  {ℓ > ε} (remove) or {ℓ < −ε} (add) is a half-line; its threshold is found by bisection, and
  any threshold gives P(S) − e^ε Q(S) ≤ H_{e^ε}, so the bisection's error only lowers it.
  """
  variance = noise_multiplier**2
  c, top = sorted_means, sorted_means.max(axis=1)

  def loss(x):
    return special.logsumexp(log_p + (c * x[:, None] - 0.5 * c**2) / variance, axis=1)

  target = epsilon if direction == Direction.REMOVE else -epsilon
  live = top > 0  # all means 0: P = Q, δ = 0
  safe = np.where(live, top, 1.0)
  with np.errstate(divide='ignore'):
    top_mass = special.logsumexp(np.where(c == top[:, None], log_p, -np.inf), axis=1)
  # loss(0) ≤ 0 ≤ ε; loss(high) ≥ ln p_top + (c_top·high − c_top²/2)/σ² ≥ target
  low = np.where(direction == Direction.REMOVE, 0.0, -1e4 * noise_multiplier)
  low = np.full(c.shape[0], low)
  high = np.maximum((max(target, 0.0) - top_mass) * variance / safe + safe / 2 + 1.0, 1.0)
  for _ in range(64):  # the threshold to ~1e-15 of the bracket: any threshold is valid
    middle = 0.5 * (low + high)
    above = loss(middle) > target
    low, high = np.where(above, low, middle), np.where(above, middle, high)
  # remove: S = {x > high} (ℓ > ε there); add: S = {x < low} (ℓ ≤ −ε there, or S tiny)
  z = (c - high[:, None]) / noise_multiplier
  with np.errstate(divide='ignore'):
    if direction == Direction.REMOVE:
      first = special.logsumexp(log_p + special.log_ndtr(z), axis=1)
      second = epsilon + special.log_ndtr(-high / noise_multiplier)
    else:
      first = special.log_ndtr(low / noise_multiplier)
      second = epsilon + special.logsumexp(
          log_p + special.log_ndtr((low[:, None] - c) / noise_multiplier), axis=1)
  value = np.exp(first) * (1.0 - 1e-12) - np.exp(second) * (1.0 + 1e-12)
  return np.where(live, np.maximum(value, 0.0), 0.0)


def log_second_moment(sorted_means: np.ndarray, log_p: np.ndarray,
                      noise_multiplier: float) -> float:
  """ln E_Q[(dP/dQ)²] of the product of the step pairs (P = ×_n Σ_i p_i N(c_i, σ²), Q =
  N(0, σ²I)): Σ_n ln Σ_{i,j} p_i p_j e^{c_i c_j/σ²}, the order-2 Rényi divergence times 1. The
  curve's cheap score for choosing a step order (a heuristic: either order is a proof)."""
  total = 0.0
  for means, log_weights_ in zip(sorted_means, log_p):
    values, probs = mixture_pld.merged(means, log_weights_)
    log_probs = np.log(probs)
    total += float(special.logsumexp(log_probs[:, None] + log_probs[None, :]
                                     + np.outer(values, values) / noise_multiplier**2))
  return total


# ---------------------------------------------------------------- curve and accountant
DEFAULT_DISCRETIZATION = 1e-3


@typing.final
class ConditionalCompositionCurve(mixture_pld.BadEventCurve):
  """δ(ε) = δ_PLD(ε) + δ_E and ε(δ) = ε_PLD(δ − δ_E) per direction (Schuchardt & Kalinin (2026)
  Lemma 4.1), the PLD composing the step pairs (``step_pairs``) of the ``reduced_means`` in one
  of the ``step_orders`` per direction (``order``) (``mixture_pld.BadEventCurve``).

  Attributes:
    means: the slot means (b, N); orders: ``step_orders(means)``; noise_multiplier: σ;
    bad_event_delta: δ_E or None (δ/2); discretization: the PLD grid step.
  """

  # δ_E at which the orders are compared when none is fixed: δ/2 at the usual δ = 1e-5.
  REFERENCE_BAD_EVENT = 5e-6

  def __init__(self, means: np.ndarray, noise_multiplier: float, bad_event_delta: float | None,
               discretization: float):
    super().__init__(bad_event_delta)
    self.means = means
    self.orders = step_orders(means)
    self.noise_multiplier = float(noise_multiplier)
    self.discretization = float(discretization)
    self._pairs = {}  # (order, direction, δ_E) → step_pairs: the screen's, reused to compose
    self._order = {}

  def coarse_copy(self) -> ConditionalCompositionCurve:
    """This curve on a PLD grid ≥ ``mixture_pld.COARSE_DISCRETIZATION``
    (``mixture_pld.BadEventCurve.coarse_copy``)."""
    return ConditionalCompositionCurve(self.means, self.noise_multiplier, self.bad_event_delta,
                                       max(self.discretization,
                                           mixture_pld.COARSE_DISCRETIZATION))

  def pairs(self, order: str, direction: str, bad_event_delta: float):
    """``step_pairs`` of one order (the last few kept: a screen then a composition share)."""
    key = (order, direction, bad_event_delta)
    if key not in self._pairs:
      self._pairs[key] = step_pairs(self.orders[order], self.noise_multiplier, bad_event_delta,
                                    direction)
      while len(self._pairs) > 4 * len(self.orders):
        del self._pairs[next(iter(self._pairs))]
    return self._pairs[key]

  def order(self, direction: str) -> str:
    """The step order composed in ``direction``: the one whose step pairs at the fixed δ_E (or
    ``REFERENCE_BAD_EVENT``) have the smaller ``log_second_moment``. Chosen once per curve, so
    every answer is one order's proof and ε(δ) stays monotone (composing both and keeping the
    smaller would cost a second composition per query for a rarely different answer)."""
    if direction not in self._order:
      if len(self.orders) == 1:
        self._order[direction] = next(iter(self.orders))
      else:
        reference = (self.REFERENCE_BAD_EVENT if self.bad_event_delta is None
                     else self.bad_event_delta)
        self._order[direction] = min(self.orders, key=lambda k: log_second_moment(
            *self.pairs(k, direction, reference), self.noise_multiplier))
    return self._order[direction]

  @functools.cached_property
  def tail_bound_counts(self) -> dict[str, int]:
    """The number of tail bounds of each order (``bound_count``)."""
    return {label: bound_count(m) for label, m in self.orders.items()}

  @property
  def tail_bound_count(self) -> int:
    """The most tail bounds of any order: with none, no order needs a bad event."""
    return max(self.tail_bound_counts.values())

  def significance(self, bad_event_delta: float, order: str = 'forward') -> float:
    """δ_E / the order's bound count: the mean cost allowed to a bound (``allocation`` gives
    each its own share)."""
    return bad_event_delta / max(self.tail_bound_counts[order], 1)

  def _compose(self, direction: str, bad_event_delta: float):
    order = self.order(direction)
    sorted_means, log_p = self.pairs(order, direction, bad_event_delta)
    return mixture_pld.compose([
        mixture_pld.mixture_pmf(sorted_means[n], log_p[n], self.noise_multiplier, direction,
                                self.discretization) for n in range(sorted_means.shape[0])])

  def _delta(self, epsilon: float, direction: str) -> float:
    # With δ_E = δ/2 the search returns 1.0 exactly when ε(0.5) > ε, after composing at every
    # decade from 1e-6 up (minutes at a small σ, where each composition is large). A single
    # step pair whose δ(ε) at δ_E = 0.25 already exceeds 0.25 proves ε(0.5) > ε without
    # composing (``_cannot_beat``'s argument): the same answer, from the step pairs alone.
    if not self._fixed_bad_event():
      sorted_means, log_p = self.pairs(self.order(direction), direction, 0.25)
      if step_deltas(sorted_means, log_p, self.noise_multiplier, epsilon,
                     direction).max() > 0.25:
        return 1.0
    return super()._delta(epsilon, direction)

  def _delta_below(self, epsilon: float, direction: str, bound: float) -> float:
    # ``auto`` asks whether δ(ε) beats the best so far: "no" without composing when a lower
    # bound shows it (``_cannot_beat``), or after one composition when ε(bound) > ε (ε(δ)
    # decreases in δ); else the curve's own search, so that ``auto`` answers exactly the
    # minimum of the answers asked alone (``BadEventCurve``'s search from the bound would
    # differ in the last digits).
    if bound < 1.0 and self._cannot_beat(epsilon, direction, bound):
      return bound
    if not self._fixed_bad_event() and bound < 0.5 and self._epsilon(bound, direction) > epsilon:
      return bound
    return min(self._delta(epsilon, direction), bound)

  def _cannot_beat(self, epsilon: float, direction: str, bound: float) -> bool:
    """True when δ(ε) ≥ ``bound`` follows from the step pairs alone (no composition).

    With δ_E = δ/2, a δ < bound needs δ_PLD(ε) ≤ δ/2 < bound/2 at δ_E = δ/2; a smaller δ_E
    gives stochastically larger weights (τ is monotone in the budget: ``_largest_passing``),
    hence pairs dominating those at δ_E = bound/2, whose largest single-step δ
    (``step_deltas``) bounds the composition's δ_PLD from below. With a fixed δ_E the
    condition is δ_PLD(ε) ≥ bound − δ_E.
    """
    if self._fixed_bad_event():
      bad_event = self.bad_event_for(1.0)
      needed = bound - bad_event
    else:
      bad_event = needed = bound / 2
    if needed <= 0.0:
      return True
    sorted_means, log_p = self.pairs(self.order(direction), direction, bad_event)
    return step_deltas(sorted_means, log_p, self.noise_multiplier, epsilon,
                       direction).max() >= needed

  def epsilon_floor(self, delta: float, direction: str) -> float:
    """A lower bound on ε(δ) in ``direction`` from the step pairs alone (no composition).

    ε(δ) is the least ε with δ_PLD(ε) ≤ δ − δ_E, and δ_PLD(ε) is at least every single step
    pair's δ (``step_deltas``), so ε(δ) exceeds every ε at which some step's δ is above
    δ − δ_E; the largest such ε is found by bisection (rounded down). For ``auto`` to skip
    the compositions where ε(δ) cannot beat the best so far (``TightestCurve`` does not ask).
    """
    bad_event = self.bad_event_for(delta)
    target = delta - bad_event
    if target <= 0.0:
      return math.inf
    sorted_means, log_p = self.pairs(self.order(direction), direction, bad_event)

    def above(epsilon):
      return step_deltas(sorted_means, log_p, self.noise_multiplier, epsilon,
                         direction).max() > target

    if not above(0.0):
      return 0.0
    low, high = 0.0, 1.0
    while above(high):
      low, high = high, 2.0 * high
      if high > 1e4:
        return low
    for _ in range(30):  # to ~1e-9 of the bracket; ``low`` always qualifies
      middle = 0.5 * (low + high)
      low, high = (middle, high) if above(middle) else (low, middle)
    return low

  def explain(self, delta: float) -> dict:
    """δ_E, the mean cost per bound and the number of tail bounds of each order, the steps
    before and after merging, and the order composed per direction."""
    bad_event = self.bad_event_for(delta)
    return {'bad_event_delta': bad_event,
            'significance': {k: self.significance(bad_event, k) for k in self.orders},
            'tail_bounds': dict(self.tail_bound_counts), 'steps': int(self.means.shape[1]),
            'merged_steps': int(self.orders['forward'].shape[1]),
            'order': {d: self.order(d) for d in DIRECTIONS},
            'allocation': 'union bound, shares ∝ e^{c²/σ²} − 1'}


@register
@typing.final
class ConditionalCompositionAccountant(DeterministicAccountant):
  """Schuchardt & Kalinin (2026)'s conditional-composition accountant for ``BallsInBins``
  (module docstring).

  Options:
    bad_event_delta: δ_E, the probability of the bad event on which the per-step pairs may
      fail. Default None: half the δ asked for (Schuchardt & Kalinin (2026) App. B.2, e.g. 5e-6
      at δ = 1e-5);
      δ(ε) then inverts ε(δ) (``ConditionalCompositionCurve``). A fixed δ_E makes ε(δ) = +∞
      for δ ≤ δ_E, and calibration needs δ > δ_E.
    value_discretization_interval: the PLD grid step (default 1e-3; pessimistic).
  Adjacency: ``zero_out`` and ``add_remove`` (the same pair: Schuchardt & Kalinin (2026)
  Lemma 2.8).
  """

  name = 'conditional_composition'

  tie_order = 40
  references = (
      'Schuchardt & Kalinin, "Sampling-Free Privacy Accounting for Matrix Mechanisms under '
      'Random Allocation", arXiv 2601.21636, Lemmas 4.1-4.5, Theorems 4.6, 4.8, D.3, '
      'Algorithm 4, Remark D.5, App. E-F',
      'Choquette-Choo et al., "Privacy Amplification for Matrix Mechanisms", ICLR 2024, Thm 3.1',
      'Doroshenko et al., "Connect the Dots", arXiv 2207.04380 (pessimistic PLD)',
      'Zhu, Dong & Wang, "Optimal Accounting of Differential Privacy via Characteristic '
      'Function", AISTATS 2022, Thm 10 (adaptive composition of dominating pairs)',
  )
  adjacencies = random_allocation.ADJACENCIES
  options = {'bad_event_delta': Option(None, mixture_pld.check_bad_event_delta),
             'value_discretization_interval': Option(DEFAULT_DISCRETIZATION,
                                                     mixture_pld.check_discretization)}
  sigma_floor = 0.05

  def _refusal(self, mechanism, options):
    return random_allocation.refusal(mechanism.scheme, mechanism.matrix, options['adjacency'],
                                     self.name)

  def _size_refusal(self, mechanism, options):
    # The widest step pair: Σ_i p_i N(c_i, σ²) vs N(0, σ²), c the merged step means
    # (``reduced_means``: g equal steps are one of mean √g·c).
    means = reduced_means(random_allocation.slot_means(mechanism.scheme, mechanism.matrix))
    return _grid.refusal(float(mechanism.noise_multiplier), float(np.max(means)),
                         options['value_discretization_interval'],
                         what="the 'conditional_composition' accountant's PLD grid")

  def _curve(self, mechanism, options):
    means = random_allocation.slot_means(mechanism.scheme, mechanism.matrix)
    return ConditionalCompositionCurve(means, mechanism.noise_multiplier,
                                       options['bad_event_delta'],
                                       options['value_discretization_interval'])

  def _sigma(self, probe, epsilon, delta, tolerance, options, progress=None):
    bad_event = delta / 2 if options['bad_event_delta'] is None else options['bad_event_delta']
    if delta <= bad_event:
      raise InputError(f'delta = {delta} must exceed bad_event_delta = {bad_event} (the bad '
                       'event alone may cost δ_E); Schuchardt & Kalinin (2026) take δ_E = δ/2')
    means = random_allocation.slot_means(probe.scheme, probe.matrix)

    def meets(sigma: float) -> bool:
      curve = ConditionalCompositionCurve(means, sigma, bad_event,
                                          options['value_discretization_interval'])
      return all(curve.epsilon_for_delta(delta, direction=d) <= epsilon for d in DIRECTIONS)

    # The bracket starts at the Rényi accountant's σ for the same target (seconds; the two
    # are usually within tens of per cent) and grows by 1.25: each probe composes N pairs,
    # and a σ far below the answer would make the PLD grids huge.
    guess = renyi.RenyiAccountant().sigma(probe.scheme, probe.matrix, epsilon=epsilon,
                                          delta=delta, tolerance=1e-2)
    return smallest_passing_sigma(meets, tolerance=tolerance, floor=self.sigma_floor,
                                  start=guess, step=1.25, progress=progress)

  def _supersedes_monte_carlo(self, mechanism):
    # Monte Carlo bounds the same pair only with high probability, after hours of sampling at
    # small δ; this proves a bound in seconds to minutes. Monte Carlo stays a choice.
    del mechanism
    return True
