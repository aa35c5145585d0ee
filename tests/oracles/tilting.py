"""Brute-force oracle for the Rényi-tilted Monte Carlo estimator (docs/proofs/tilting.md).

Independent reference code (numpy/scipy only; no jax, no jaxacct) for the statements derived in
docs/proofs/tilting.md:

* (a) for integer α ≥ 2 the tilted law Q_α ∝ P^α Q^{1−α} of the mixture pair
  P = Σ_x p_x N(Cx, σ²I), Q = N(0, σ²I) is the mixture over ordered α-tuples of patterns
  (x_1 … x_α) with law π_α ∝ Π_j p_{x_j} · exp(I), I = Σ_{j<l} ⟨Cx_j, Cx_l⟩/σ², of
  N(C Σ_j x_j, σ²I); its normaliser is Z_α = E_iid[e^I] = exp((α − 1) D_α(P‖Q)).
  ``tilted_law`` enumerates all K^α tuples of the exact pattern law (``brute_force``).
* (b) the weight w = Z_α e^{−(α−1)L} (L = ln P/Q) turns Q_α-expectations into P-expectations,
  and X = w (1 − e^{ε−L})₊ ≤ M(α, ε) = Z_α e^{−(α−1)ε} (α−1)^{α−1}/α^α.
* (d) the b-min-sep Markov chain on the joint state of α chains gives Z_α by a forward pass
  and exact tuple draws by forward filtering / backward sampling (``BminsepTiltChain``);
  checked here against the enumeration, not assumed.
* (e) the add-direction facts (L ≥ ln Pr[x = 0]) and the per-round (product) tilt.
* (c), (f) the EVR arithmetic with a support bound M (``overall_delta``, ``minimum_samples``).

Exact hockey-stick divergences come from quadrature for n ∈ {1, 2} (``hockey_stick``): with
C ≥ 0 the loss is non-decreasing in the last coordinate, so {L > ε} is a half-line in y_n for
each y_1 and only a smooth one-dimensional integral remains.

Conventions follow ``brute_force``: rounds 0-indexed, σ the noise standard deviation (clip
norm 1), C an explicit n×n matrix (``brute_force.strategy_matrix``).
"""

from __future__ import annotations

import dataclasses
import itertools
import math

import numpy as np
from scipy import integrate, optimize, special, stats

from . import brute_force as bf

MAX_TUPLES = 4_000_000


def _log(x):
  with np.errstate(divide="ignore"):
    return np.log(np.asarray(x, dtype=np.float64))


# ---------------------------------------------------------------------------
# (b) the support bound
# ---------------------------------------------------------------------------


def log_kappa(alpha: float) -> float:
  """ln[(α − 1)^{α−1} / α^α] = max_{t ≥ 1} ln(t^{1−α} − t^{−α}) (attained at t = α/(α−1))."""
  alpha = float(alpha)
  if not alpha > 1.0:
    raise ValueError(f"alpha must be > 1, got {alpha}")
  return (alpha - 1.0) * math.log(alpha - 1.0) - alpha * math.log(alpha)


def log_support_bound(log_z: float, alpha: float, eps: float) -> float:
  """ln M(α, ε) = ln Z_α − (α − 1)ε + ln κ_α: the a.s. bound on X = w(1 − e^{ε−L})₊.

  Equal to the Canonne–Kamath–Steinke (2020, Prop. 12) conversion
  δ = e^{(α−1)(D_α − ε)} (1 − 1/α)^α / (α − 1) with (α − 1) D_α = ln Z_α.
  """
  return float(log_z) - (float(alpha) - 1.0) * float(eps) + log_kappa(alpha)


def cks_delta(renyi_divergence: float, alpha: float, eps: float) -> float:
  """CKS (2020) Prop. 12 written as printed there: e^{(α−1)(D−ε)}/(α−1) · (1 − 1/α)^α."""
  a = float(alpha)
  return math.exp((a - 1.0) * (renyi_divergence - eps) + a * math.log1p(-1.0 / a)) / (a - 1.0)


def tilted_integrand_max(alpha: float, eps: float, losses: np.ndarray) -> np.ndarray:
  """e^{−(α−1)L}(1 − e^{ε−L})₊ at the given losses (X / Z_α)."""
  losses = np.asarray(losses, dtype=np.float64)
  with np.errstate(over="ignore"):
    hinge = -np.expm1(np.minimum(eps - losses, 0.0))
    return np.exp(-(alpha - 1.0) * losses) * hinge


# ---------------------------------------------------------------------------
# (a) the tilted law by enumeration
# ---------------------------------------------------------------------------


@dataclasses.dataclass(frozen=True)
class TiltedLaw:
  """Exact tilted law of a Gaussian-mixture pair at integer order α.

  Attributes:
    alpha: the order.
    sigma: noise standard deviation.
    patterns: (K, n) participation patterns of P; log_probs their log probabilities.
    c_matrix: (n, n) strategy matrix.
    tuples: (K^α, α) pattern indices of every ordered tuple.
    log_pi: (K^α,) ln π_α of each tuple (sums to 1 in probability).
    log_z: ln Z_α = (α − 1) D_α(P‖Q).
    means: (R, n) distinct means C Σ_j x_j of the y-mixture; log_mean_probs their ln mass.
  """
  alpha: int
  sigma: float
  patterns: np.ndarray
  log_probs: np.ndarray
  c_matrix: np.ndarray
  tuples: np.ndarray
  log_pi: np.ndarray
  log_z: float
  means: np.ndarray
  log_mean_probs: np.ndarray

  @property
  def renyi_divergence(self) -> float:
    return self.log_z / (self.alpha - 1)

  def loss(self, y: np.ndarray) -> np.ndarray:
    """L(y) = ln P(y)/Q(y) (brute force over patterns)."""
    return bf.privacy_loss(self.patterns, self.log_probs, self.c_matrix, y, self.sigma)

  def log_density_q(self, y: np.ndarray) -> np.ndarray:
    y = np.atleast_2d(np.asarray(y, dtype=np.float64))
    n = y.shape[-1]
    return (-0.5 * np.sum(y**2, axis=-1) / self.sigma**2
            - n * math.log(self.sigma) - 0.5 * n * math.log(2 * math.pi))

  def log_density_p(self, y: np.ndarray) -> np.ndarray:
    return self.log_density_q(y) + np.atleast_1d(self.loss(np.atleast_2d(y)))

  def log_density_tilted(self, y: np.ndarray) -> np.ndarray:
    """ln Q_α(y) from the mixture representation (claim (a)), not from P and Q."""
    y = np.atleast_2d(np.asarray(y, dtype=np.float64))
    n = y.shape[-1]
    sq = np.sum((y[None, :, :] - self.means[:, None, :])**2, axis=-1)  # (R, N)
    comp = (-0.5 * sq / self.sigma**2 - n * math.log(self.sigma)
            - 0.5 * n * math.log(2 * math.pi))
    return special.logsumexp(self.log_mean_probs[:, None] + comp, axis=0)

  def log_weight(self, y: np.ndarray) -> np.ndarray:
    """ln w(y) = ln Z_α − (α − 1) L(y)."""
    return self.log_z - (self.alpha - 1) * np.atleast_1d(self.loss(np.atleast_2d(y)))

  def log_support_bound(self, eps: float) -> float:
    return log_support_bound(self.log_z, self.alpha, eps)

  def tuple_patterns(self, k: int) -> np.ndarray:
    """(α, n) patterns of tuple number k."""
    return self.patterns[self.tuples[k]]


def interaction_matrix(patterns: np.ndarray, c_matrix: np.ndarray,
                       sigma: float) -> np.ndarray:
  """H[a, b] = ⟨C x_a, C x_b⟩ / σ² between patterns (K, K)."""
  modes = bf.mode_vectors(patterns, c_matrix)
  return modes @ modes.T / float(sigma)**2


def tilted_law(patterns: np.ndarray, log_probs: np.ndarray, c_matrix: np.ndarray,
               sigma: float, alpha: int) -> TiltedLaw:
  """The exact tilted law by enumerating all K^α ordered tuples (claim (a)).

  Raises:
    ValueError: α not an integer ≥ 2, or more than MAX_TUPLES tuples.
  """
  if isinstance(alpha, bool) or int(alpha) != alpha or int(alpha) < 2:
    raise ValueError(f"alpha must be an integer >= 2, got {alpha!r}")
  alpha = int(alpha)
  patterns = np.asarray(patterns, dtype=np.float64)
  log_probs = np.asarray(log_probs, dtype=np.float64)
  k = patterns.shape[0]
  if k**alpha > MAX_TUPLES:
    raise ValueError(f"{k}**{alpha} tuples is too many to enumerate")
  h = interaction_matrix(patterns, c_matrix, sigma)
  tuples = np.array(list(itertools.product(range(k), repeat=alpha)), dtype=np.int64)
  log_w = log_probs[tuples].sum(axis=1)
  inter = np.zeros(tuples.shape[0])
  for j in range(alpha):
    for l in range(j + 1, alpha):
      inter += h[tuples[:, j], tuples[:, l]]
  log_unnorm = log_w + inter
  log_z = float(special.logsumexp(log_unnorm))
  log_pi = log_unnorm - log_z
  modes = bf.mode_vectors(patterns, c_matrix)
  means_all = modes[tuples].sum(axis=1)  # (K^α, n)
  means, inverse = np.unique(np.round(means_all, 12), axis=0, return_inverse=True)
  inverse = np.asarray(inverse).reshape(-1)
  log_mean_probs = np.full(means.shape[0], -np.inf)
  np.logaddexp.at(log_mean_probs, inverse, log_pi)
  # Use the exact (unrounded) mean of a representative for each group.
  rep = np.zeros(means.shape[0], dtype=np.int64)
  rep[inverse] = np.arange(inverse.size)
  return TiltedLaw(alpha, float(sigma), patterns, log_probs, np.asarray(c_matrix, np.float64),
                   tuples, log_pi, log_z, means_all[rep], log_mean_probs)


def tilted_law_for(kind: str, c_col, iterations: int, sigma: float, alpha: int,
                   **scheme_kwargs) -> TiltedLaw:
  """``tilted_law`` for a named scheme of ``brute_force.participation_law``."""
  patterns, log_probs = bf.participation_law(kind, iterations=iterations, **scheme_kwargs)
  return tilted_law(patterns, log_probs, bf.strategy_matrix(c_col, iterations), sigma, alpha)


def poisson_log_z(p: float, sigma: float, alpha: int, rounds: int = 1,
                  col_norm: float = 1.0) -> float:
  """ln Z_α for Poisson sampling with C = col_norm·I over ``rounds`` rounds (product).

  One round (Mironov, Talwar & Zhang 2019, the integer-α binomial expansion): with k of the α
  chains present, I = C(k, 2)·col_norm²/σ², so
  Z_α = Σ_k C(α, k) p^k (1 − p)^{α−k} exp(k(k − 1) col_norm² / (2σ²)).
  """
  ks = np.arange(alpha + 1)
  terms = (special.gammaln(alpha + 1) - special.gammaln(ks + 1) - special.gammaln(alpha - ks + 1)
           + special.xlogy(ks, p) + special.xlog1py(alpha - ks, -p)
           + ks * (ks - 1) * col_norm**2 / (2.0 * sigma**2))
  return rounds * float(special.logsumexp(terms))


# ---------------------------------------------------------------------------
# (d) the b-min-sep chain on α copies: forward pass and FFBS
# ---------------------------------------------------------------------------


class BminsepTiltChain:
  """Exact forward filtering / backward sampling of π_α for b-min-sep (claim (d)).

  State of one chain before round r: k ∈ {0, …, b−1}, the number of rounds it is still barred
  (0 = available; after a participation at round t the state is b − m at round t + m,
  m = 1 … b). A chain in state k > 0 at round r last participated at round r − (b − k).
  Joint state: the α-tuple of states (b^α of them). Per-round term, with G = CᵀC/σ²:

    I_r(k, e) = C(#{j: e_j = 1}, 2)·G[r, r]
                + Σ_{j: e_j = 1} Σ_{l: k_l > 0, t_l ≥ 0} G[t_l, r],   t_l = r − (b − k_l),

  where e_j ∈ {0, 1} is chain j's participation at round r (only if k_j = 0). Each unordered
  pair of participations of two different chains at distance d < b is counted once, at the
  later round; pairs at distance ≥ b have G = 0 because C is b-banded (bands ≤ b). Warm start:
  an initial barred state comes from a virtual participation at a round < 0, which has no
  output column, hence t_l < 0 contributes nothing. The finite horizon enters only through G
  (G[s, t] = Σ_{i ≥ max(s,t)}^{n−1} C[i,s]C[i,t]: truncated near the end).
  """

  def __init__(self, c_matrix: np.ndarray, p: float, b: int, warm_start: bool,
               sigma: float, alpha: int, gram: np.ndarray | None = None):
    """``gram`` overrides G = CᵀC/σ² (only to show that a wrong Gram changes Z_α)."""
    c_matrix = np.asarray(c_matrix, dtype=np.float64)
    n = c_matrix.shape[0]
    band = np.abs(np.subtract.outer(np.arange(n), np.arange(n)))
    if np.any((c_matrix != 0) & ((band >= b) | (np.tri(n) == 0))):
      raise ValueError("C must be lower triangular with bands <= b")
    self.n, self.p, self.b, self.alpha = n, float(p), int(b), int(alpha)
    self.warm_start = bool(warm_start)
    self.gram = (c_matrix.T @ c_matrix / float(sigma)**2 if gram is None
                 else np.asarray(gram, dtype=np.float64))
    self.states = list(itertools.product(range(self.b), repeat=self.alpha))
    self.log_init = self._log_init()
    # forward[r][state] = ln of the summed weight of histories reaching `state` before round r.
    self.forward = [self.log_init]
    for r in range(n):
      nxt: dict = {}
      for state, lf in self.forward[-1].items():
        for decision, log_step in self.moves(r, state):
          new = self.next_state(state, decision)
          nxt[new] = np.logaddexp(nxt.get(new, -np.inf), lf + log_step)
      self.forward.append(nxt)
    self.log_z = float(special.logsumexp(list(self.forward[-1].values())))

  def _log_init(self) -> dict:
    b, p = self.b, self.p
    if self.warm_start:
      single = np.full(b, math.log(p / (1.0 + (b - 1) * p)) if p > 0 else -np.inf)
      single[0] = -math.log1p((b - 1) * p)
    else:
      single = np.full(b, -np.inf)
      single[0] = 0.0
    out = {}
    for state in self.states:
      value = float(sum(single[k] for k in state))
      if np.isfinite(value):
        out[state] = value
    return out

  def moves(self, r: int, state: tuple):
    """(decision, ln[transition probability] + I_r) for every allowed decision at round r."""
    b, p, g = self.b, self.p, self.gram
    free = [j for j, k in enumerate(state) if k == 0]
    for choice in itertools.product((0, 1), repeat=len(free)):
      decision = [0] * self.alpha
      for j, e in zip(free, choice):
        decision[j] = e
      m = sum(choice)
      if (m > 0 and p == 0.0) or (m < len(free) and p == 1.0):
        continue
      log_step = m * math.log(p) if m else 0.0
      if len(free) - m:
        log_step += (len(free) - m) * math.log1p(-p)
      inter = m * (m - 1) / 2 * g[r, r]
      if m:
        for l, k in enumerate(state):
          if k > 0:
            t = r - (b - k)
            if t >= 0:
              inter += m * g[t, r]
      yield tuple(decision), log_step + inter

  def next_state(self, state: tuple, decision: tuple) -> tuple:
    return tuple(self.b - 1 if e else max(k - 1, 0) for k, e in zip(state, decision))

  def _backward_options(self, r: int, new_state: tuple):
    """(previous state, decision, ln weight) of every move at round r that ends in new_state."""
    out = []
    for state, lf in self.forward[r].items():
      for decision, log_step in self.moves(r, state):
        if self.next_state(state, decision) == new_state:
          out.append((state, decision, lf + log_step))
    return out

  def sample(self, rng: np.random.Generator) -> tuple[np.ndarray, float]:
    """One exact draw: ((α, n) patterns, ln π'(path)) with π' the FFBS path probability."""
    finals = list(self.forward[-1].items())
    logs = np.array([v for _, v in finals])
    probs = np.exp(logs - special.logsumexp(logs))
    i = rng.choice(len(finals), p=probs)
    state, log_prob = finals[i][0], float(math.log(probs[i]))
    x = np.zeros((self.alpha, self.n))
    for r in range(self.n - 1, -1, -1):
      opts = self._backward_options(r, state)
      logs = np.array([o[2] for o in opts])
      probs = np.exp(logs - special.logsumexp(logs))
      i = rng.choice(len(opts), p=probs)
      state, decision = opts[i][0], opts[i][1]
      x[:, r] = decision
      log_prob += float(math.log(probs[i]))
    return x, log_prob

  def induced_pattern_law(self) -> dict:
    """Exact law of the FFBS output on pattern tuples: {bytes of (α, n) uint8 array: prob}.

    Enumerates every backward path with its sampling probability (tiny cases only)."""
    out: dict = {}
    finals = list(self.forward[-1].items())
    logs = np.array([v for _, v in finals])
    norm = special.logsumexp(logs)

    def walk(r, state, log_prob, cols):
      if r < 0:
        x = np.array(cols[::-1], dtype=np.uint8).T.reshape(self.alpha, self.n)
        key = x.tobytes()
        out[key] = out.get(key, 0.0) + math.exp(log_prob)
        return
      opts = self._backward_options(r, state)
      lo = np.array([o[2] for o in opts])
      lnorm = special.logsumexp(lo)
      for (prev, decision, lw) in opts:
        walk(r - 1, prev, log_prob + lw - lnorm, cols + [decision])

    for state, lf in finals:
      walk(self.n - 1, state, lf - norm, [])
    return out


def enumerated_pattern_law(law: TiltedLaw) -> dict:
  """π_α from ``tilted_law`` keyed like ``BminsepTiltChain.induced_pattern_law``."""
  out: dict = {}
  for k in range(law.tuples.shape[0]):
    key = law.tuple_patterns(k).astype(np.uint8).tobytes()
    out[key] = out.get(key, 0.0) + math.exp(law.log_pi[k])
  return out


def interaction(patterns_tuple: np.ndarray, c_matrix: np.ndarray, sigma: float) -> float:
  """I(τ) = Σ_{j<l} ⟨C x_j, C x_l⟩ / σ² for an (α, n) tuple, from the dense Gram matrix."""
  modes = np.asarray(patterns_tuple, np.float64) @ np.asarray(c_matrix, np.float64).T
  total = modes.sum(axis=0)
  return float((total @ total - np.sum(modes * modes)) / 2.0 / sigma**2)


# ---------------------------------------------------------------------------
# Exact hockey-stick divergences by quadrature (n ∈ {1, 2})
# ---------------------------------------------------------------------------

_GL_NODES = 160
_INNER_NODES = 96
_SPAN = 13.0  # ±13σ around the mixture means


def _modes(patterns, c_matrix):
  return bf.mode_vectors(patterns, c_matrix)


def _loss_fn(patterns, log_probs, c_matrix, sigma):
  modes = _modes(patterns, c_matrix)
  norms = np.sum(modes**2, axis=1)
  log_probs = np.asarray(log_probs, np.float64)

  def loss(y):  # y: (..., n)
    y = np.asarray(y, np.float64)
    expo = log_probs + (2.0 * y @ modes.T - norms) / (2.0 * sigma**2)
    return special.logsumexp(expo, axis=-1)

  return loss, modes


def _threshold(loss_at, level, lo, hi):
  """t with loss_at(t) = level for a non-decreasing loss_at; ±inf if never crossed."""
  if loss_at(hi) <= level:
    return np.inf
  if loss_at(lo) > level:
    return -np.inf
  return optimize.brentq(lambda t: loss_at(t) - level, lo, hi, xtol=1e-14, rtol=1e-15,
                         maxiter=500)


def _tail_masses(t, y_first, modes, log_probs, sigma, upper):
  """Returns (P-mass, Q-mass) of {y_n > t} (upper) or {y_n < t}, jointly with y_1 density."""
  w = np.exp(np.asarray(log_probs, np.float64))
  last = modes[:, -1]
  z = (t - last) / sigma
  zq = t / sigma
  if upper:
    pm_cond, qm_cond = stats.norm.sf(z), stats.norm.sf(zq)
  else:
    pm_cond, qm_cond = stats.norm.cdf(z), stats.norm.cdf(zq)
  if y_first is None:
    return float(w @ pm_cond), float(qm_cond)
  dens_p = stats.norm.pdf((y_first - modes[:, 0]) / sigma) / sigma
  dens_q = stats.norm.pdf(y_first / sigma) / sigma
  return float(w @ (dens_p * pm_cond)), float(dens_q * qm_cond)


def hockey_stick(patterns, log_probs, c_matrix, sigma: float, eps: float,
                 direction: str = "remove") -> float:
  """Exact H_{e^ε}(P‖Q) ("remove") or H_{e^ε}(Q‖P) ("add") for n ∈ {1, 2}, C ≥ 0.

  remove: δ = P(L > ε) − e^ε Q(L > ε);  add: δ = Q(L < −ε) − e^ε P(L < −ε).
  L is non-decreasing in y_n (C ≥ 0), so each event is a half-line in y_n given y_1; the
  outer integral over y_1 (n = 2) is Gauss–Legendre on ±13σ around the means.
  """
  patterns = np.asarray(patterns, np.float64)
  c_matrix = np.asarray(c_matrix, np.float64)
  n = patterns.shape[1]
  if n not in (1, 2):
    raise ValueError("quadrature oracle supports n in {1, 2}")
  if np.any(c_matrix < 0):
    raise ValueError("C must be entrywise non-negative")
  if direction not in ("remove", "add"):
    raise ValueError(direction)
  loss, modes = _loss_fn(patterns, log_probs, c_matrix, sigma)
  if not np.any(modes[:, -1] > 0):
    raise ValueError("need a mode with a positive last coordinate")
  level = eps if direction == "remove" else -eps
  upper = direction == "remove"
  hi_mean = float(np.max(modes))
  lo_t, hi_t = -60.0 * sigma, hi_mean + 60.0 * sigma

  def event_masses(y1):
    if n == 1:
      t = _threshold(lambda v: float(loss(np.array([v]))), level, lo_t, hi_t)
    else:
      t = _threshold(lambda v: float(loss(np.array([y1, v]))), level, lo_t, hi_t)
    return _tail_masses(t, None if n == 1 else y1, modes, log_probs, sigma, upper)

  if n == 1:
    pm, qm = event_masses(None)
  else:
    a, b = -_SPAN * sigma + float(np.min(modes[:, 0])), _SPAN * sigma + float(np.max(modes[:, 0]))
    x, wts = np.polynomial.legendre.leggauss(_GL_NODES)
    ys = 0.5 * (b - a) * x + 0.5 * (b + a)
    pm = qm = 0.0
    for y1, wt in zip(ys, wts * 0.5 * (b - a)):
      p1, q1 = event_masses(y1)
      pm += wt * p1
      qm += wt * q1
  if upper:
    return max(pm - math.exp(eps) * qm, 0.0)
  return max(qm - math.exp(eps) * pm, 0.0)


def tilted_expectation_of_x(law: TiltedLaw, eps: float) -> float:
  """E_{Q_α}[w (1 − e^{ε−L})₊] by quadrature against the mixture density of Q_α (n ∈ {1, 2}).

  Claim (b) says this equals H_{e^ε}(P‖Q); computed from Q_α's mixture representation and w,
  never from P's density, so agreement with ``hockey_stick`` checks (a) and (b) together.
  """
  n = law.patterns.shape[1]
  if n not in (1, 2):
    raise ValueError("n must be 1 or 2")
  loss, modes = _loss_fn(law.patterns, law.log_probs, law.c_matrix, law.sigma)
  sigma = law.sigma
  top = float(np.max(law.means)) + _SPAN * sigma

  def integrand(y):
    y = np.atleast_2d(y)
    ly = loss(y)
    lx = law.log_density_tilted(y) + law.log_z - (law.alpha - 1) * ly
    return np.exp(lx) * (-np.expm1(np.minimum(eps - ly, 0.0)))

  lo_t, hi_t = -60.0 * sigma, float(np.max(modes)) + 60.0 * sigma
  if n == 1:
    t = _threshold(lambda v: float(loss(np.array([v]))), eps, lo_t, hi_t)
    if not np.isfinite(t):
      return 0.0 if t > 0 else float("nan")
    val, _ = integrate.quad(lambda v: float(integrand(np.array([[v]]))[0]), t, max(top, t + 1.0),
                            epsabs=1e-15, epsrel=1e-11, limit=400)
    return val
  a = -_SPAN * sigma + float(np.min(law.means[:, 0]))
  b = _SPAN * sigma + float(np.max(law.means[:, 0]))
  x, wts = np.polynomial.legendre.leggauss(_GL_NODES)
  xi, wi = np.polynomial.legendre.leggauss(_INNER_NODES)
  total = 0.0
  for y1, wt in zip(0.5 * (b - a) * x + 0.5 * (b + a), wts * 0.5 * (b - a)):
    t = _threshold(lambda v: float(loss(np.array([y1, v]))), eps, lo_t, hi_t)
    if t == np.inf:
      continue
    t = max(t, -_SPAN * sigma - 1.0)
    hi = max(top, t + 1.0)
    # The integrand is smooth on [t, hi] (the hinge vanishes at t): Gauss–Legendre.
    v = 0.5 * (hi - t) * xi + 0.5 * (hi + t)
    pts = np.stack([np.full_like(v, y1), v], axis=1)
    total += wt * 0.5 * (hi - t) * float(wi @ integrand(pts))
  return total


def gauss_legendre_box(fn, lows, highs, nodes: int = 160) -> float:
  """∫ fn over a box in n ∈ {1, 2} dims by tensor Gauss–Legendre (fn takes (N, n) arrays)."""
  x, w = np.polynomial.legendre.leggauss(nodes)
  grids, weights = [], []
  for lo, hi in zip(lows, highs):
    grids.append(0.5 * (hi - lo) * x + 0.5 * (hi + lo))
    weights.append(w * 0.5 * (hi - lo))
  mesh = np.stack(np.meshgrid(*grids, indexing="ij"), axis=-1).reshape(-1, len(lows))
  wmesh = np.prod(np.stack(np.meshgrid(*weights, indexing="ij"), axis=-1).reshape(-1, len(lows)),
                  axis=1)
  return float(np.sum(wmesh * fn(mesh)))


def renyi_moment_by_quadrature(law: TiltedLaw, nodes: int = 160) -> float:
  """ln ∫ Q (P/Q)^α dy by tensor Gauss–Legendre (n ∈ {1, 2}); compare with law.log_z."""
  n = law.patterns.shape[1]
  top = float(np.max(law.means))
  lows = [-_SPAN * law.sigma] * n
  highs = [top + _SPAN * law.sigma] * n

  def fn(y):
    return np.exp(law.log_density_q(y) + law.alpha * law.loss(y))

  return math.log(gauss_legendre_box(fn, lows, highs, nodes))


def tilted_mean_of_weight(law: TiltedLaw, nodes: int = 160) -> float:
  """∫ Q_α(y) w(y) dy by tensor Gauss–Legendre (claim (b): = 1)."""
  n = law.patterns.shape[1]
  top = float(np.max(law.means))
  lows = [-_SPAN * law.sigma] * n
  highs = [top + _SPAN * law.sigma] * n
  return gauss_legendre_box(lambda y: np.exp(law.log_density_tilted(y) + law.log_weight(y)),
                            lows, highs, nodes)


# ---------------------------------------------------------------------------
# (e) add direction: one-round (product-factor) tilt of Q^α P^{1−α}, any real α > 1
# ---------------------------------------------------------------------------


def one_round_add_tilt(q: float, col_norm: float, sigma: float, alpha: float, eps: float):
  """One round of a product mechanism, P = (1−q)N(0,σ²) + qN(c,σ²), Q = N(0,σ²) in the
  direction of c (1-D): the add-direction tilt Q'_α ∝ Q^α P^{1−α} by quadrature.

  Returns dict with ln Z'_α = ln ∫ Q^α P^{1−α}, δ_add = H_{e^ε}(Q‖P), the tilted estimate
  E_{Q'_α}[w'(1 − e^{ε−L'})₊] with w' = Z' e^{−(α−1)L'}, L' = ln Q/P, and ln M'.
  """
  c = float(col_norm)

  def lq(v):
    return stats.norm.logpdf(v / sigma) - math.log(sigma)

  def lp(v):
    return np.logaddexp(math.log1p(-q) + lq(v), math.log(q) + lq(v - c))

  def lprime(v):  # add-direction loss ln Q/P
    return lq(v) - lp(v)

  lo, hi = -40.0 * sigma - 10.0 * c * alpha, 40.0 * sigma + 10.0 * c * alpha
  z, _ = integrate.quad(lambda v: math.exp(alpha * lq(v) + (1 - alpha) * lp(v)), lo, hi,
                        epsabs=0, epsrel=1e-12, limit=500, points=[0.0, c])
  log_z = math.log(z)
  # L' is decreasing in v (c > 0): {L' > ε} = {v < t}.
  if lprime(lo) <= eps:
    delta = 0.0
    tilted = 0.0
  else:
    t = optimize.brentq(lambda v: lprime(v) - eps, lo, hi, xtol=1e-14)
    delta = float(stats.norm.cdf(t / sigma)
                  - math.exp(eps) * ((1 - q) * stats.norm.cdf(t / sigma)
                                     + q * stats.norm.cdf((t - c) / sigma)))

    def integrand(v):
      l = lprime(v)
      log_tilt = alpha * lq(v) + (1 - alpha) * lp(v) - log_z
      return math.exp(log_tilt + log_z - (alpha - 1) * l) * (-math.expm1(min(eps - l, 0.0)))

    tilted, _ = integrate.quad(integrand, lo, t, epsabs=1e-16, epsrel=1e-11, limit=500)
  return dict(log_z=log_z, delta=max(delta, 0.0), tilted=tilted,
              log_m=log_support_bound(log_z, alpha, eps))


# ---------------------------------------------------------------------------
# (c) EVR arithmetic with a support bound
# ---------------------------------------------------------------------------


def bernoulli_kl(a: float, b: float) -> float:
  """KL(Bern(a) ‖ Bern(b)) = b φ(a/b) + (1 − b) φ((1 − a)/(1 − b)), φ(r) = r ln r − r + 1."""
  if a == b:
    return 0.0
  if b <= 0.0 or b >= 1.0:
    return math.inf
  r = a / b
  first = b * (special.xlogy(r, r) - r + 1.0)
  t = (b - a) / (1.0 - b)
  second = (1.0 - b) * ((1.0 + t) * math.log1p(t) - t)
  return float(first + second)


def _objective(n: float, base: float, m: float, top: float, tau: float) -> float:
  """τδ_b + q(τ)(top − τδ_b), q = exp(−N·KL(δ_b/M ‖ τδ_b/M)) (the remove direction)."""
  level = tau * base
  if level >= m:
    return level  # no candidate with support bound ≤ M can be worse than level: q = 0
  q = math.exp(-n * bernoulli_kl(base / m, level / m))
  return level + q * (top - level)


def overall_delta(num_samples: int, base: float, m: float = 1.0, top: str = "refined") -> float:
  """Remove-direction δ released by Algorithm 5 verified with N samples of X ∈ [0, M].

  top = "refined": min_τ τδ_b + q(τ)(M − τδ_b) (= M·δ_overall(N, δ_b/M) at M = 1's formula);
  top = "lead":    min_τ τδ_b + q(τ)(1 − τδ_b);
  both with q(τ) = exp(−N·KL(δ_b/M ‖ τδ_b/M)), τ ∈ (1, M/δ_b], and capped at M (a candidate's
  remove-direction δ never exceeds its support bound). M = 1 gives today's formula.
  """
  m = min(float(m), 1.0)
  if base >= m:
    return m
  top_value = m if top == "refined" else 1.0
  nf = float(num_samples)
  hi = math.log(m / base - 1.0)
  grid = np.linspace(min(-30.0, hi - 1.0), hi, 3001)
  vals = np.array([_objective(nf, base, m, top_value, 1.0 + math.exp(v)) for v in grid])
  i = int(np.argmin(vals))
  lo_v, hi_v = grid[max(i - 1, 0)], grid[min(i + 1, grid.size - 1)]
  best = float(vals[i])
  if hi_v > lo_v:
    res = optimize.minimize_scalar(
        lambda v: _objective(nf, base, m, top_value, 1.0 + math.exp(v)),
        bounds=(lo_v, hi_v), method="bounded", options={"xatol": 1e-12})
    best = min(best, float(res.fun))
  return min(best, m)


def minimum_samples(base: float, target: float, m: float = 1.0, top: str = "refined") -> int:
  """Smallest N with overall_delta(N, δ_b, M) ≤ target (doubling then bisection)."""
  if overall_delta(1, base, m, top) <= target:
    return 1
  lo, hi = 1, 2
  while overall_delta(hi, base, m, top) > target:
    lo, hi = hi, hi * 2
    if hi > 1 << 62:
      raise ValueError("target not reachable")
  while hi - lo > 1:
    mid = (lo + hi) // 2
    if overall_delta(mid, base, m, top) <= target:
      hi = mid
    else:
      lo = mid
  return hi


def scaled_binomial_acceptance(num_samples: int, base: float, true_delta: float,
                               m: float) -> tuple[float, float]:
  """(exact Pr[δ̂ ≤ δ_b], KL bound) for the extremal two-point law X ∈ {0, M}, mean δ.

  X = M·Bern(δ/M) is the law of mean δ on [0, M] that attains Hoeffding's exponent; the exact
  acceptance probability is a binomial CDF.
  """
  k = math.floor(num_samples * base / m + 1e-12)
  exact = float(stats.binom.cdf(k, num_samples, true_delta / m))
  bound = math.exp(-num_samples * bernoulli_kl(base / m, true_delta / m))
  return exact, bound
