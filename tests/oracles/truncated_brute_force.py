"""Brute-force oracle for truncated b-min-sep Monte Carlo accounting.

Independent reference for seed 000 (Dong & Ganesh, arXiv 2602.09338) App. D,
spec 000 §5. It imports neither jax nor jaxacct and does *not* use the P/R and
Q/R recursions of App. D (spec 000 §5.3-5.4): every quantity is computed from
the definition of the mechanism.

Mechanism (App. D, spec 000 §5.1). Batches are formed by b-min-sep sampling,
Alg. 1 (cold start: every example starts available) or Alg. 2 (warm start:
each example's initial chain state is drawn from the stationary law). Every
batch is then padded to ``B = truncated_batch_size`` or, if larger, truncated
to a uniformly random subset of size B. A sampled example removed by
truncation still counts as a participant: it is barred for the next b-1
rounds. The adversary additionally sees ``r_i``, the number of *non-sensitive*
examples sampled in round i before truncation (``rest_batch_sizes``).

Dominating pair (Lemma D.1, Corollary D.2, zero-out adjacency). Conditioned on
r, truncation happens in round i iff ``r_i >= B`` and then the sensitive
example, if sampled, survives w.p. ``t_i = B / (r_i + 1)``. Per round

  x^P_i = 2 if sampled, r_i >= B and it survives; 1 if sampled and r_i < B;
          0 otherwise,
  x^Q_i = -1 if sampled, r_i >= B and it survives; 0 otherwise,

and P = E[N(C x^P, sigma^2 I)], Q = E[N(C x^Q, sigma^2 I)], both expectations
over the *same* joint law of (participation, survival). With R = N(0, sigma^2
I) this oracle evaluates

  ln P(y)/Q(y) = logsumexp_k [lp_k + g(C x^P_k, y)]
                 - logsumexp_k [lp_k + g(C x^Q_k, y)],
  g(mu, y) = (2 <mu, y> - ||mu||^2) / (2 sigma^2) = ln N(mu)/R (y),

by enumerating all participation patterns and survival outcomes
(`truncated_participation_law`), and, independently, by a forward algorithm
over the sensitive example's Markov chain (`truncated_privacy_loss_forward`).
The law of r itself (`rest_batch_size_law`) is an exact dynamic program over
the counts of non-sensitive examples per chain state.

Conventions: 0-indexed rounds i = 0..n-1; ``C`` is the n x n lower-triangular
banded Toeplitz matrix with ``C[i + k, i] = c_col[k]`` for ``i + k < n``
(columns truncated at row n); clip norm 1, noise std sigma. b-min-sep chain
states: 0 = available, k in {1..b-1} = barred for the next k rounds; from 0 the
example joins w.p. p and moves to b-1, otherwise stays at 0; k -> k-1.
"""

from __future__ import annotations

import itertools
import math
from collections.abc import Sequence
from fractions import Fraction

import numpy as np
from scipy import special

from . import brute_force as bf

#: Largest n accepted by the enumeration (at most 3**n rows are built).
MAX_ITERATIONS = 12


def _log(x: float | np.ndarray) -> np.ndarray:
  """Natural log mapping 0 to -inf without emitting a divide warning."""
  with np.errstate(divide="ignore"):
    return np.log(np.asarray(x, dtype=np.float64))


# ---------------------------------------------------------------------------
# Argument checking.
# ---------------------------------------------------------------------------


def _check_prob(p) -> float:
  p = float(p)
  if not 0.0 <= p <= 1.0:
    raise ValueError(f"sampling_prob must be in [0, 1], got {p}.")
  return p


def _check_pos_int(v, name: str) -> int:
  if (isinstance(v, (bool, np.bool_)) or not isinstance(v, (int, np.integer))
      or int(v) < 1):
    raise ValueError(f"{name} must be a positive integer, got {v!r}.")
  return int(v)


def _check_warm(warm_start) -> bool:
  if not isinstance(warm_start, (bool, np.bool_)):
    raise ValueError(f"warm_start must be True/False, got {warm_start!r}.")
  return bool(warm_start)


def _check_rest(rest_batch_sizes) -> np.ndarray:
  """Validates r: non-negative integers, shape (n,) or (N, n), n >= 1."""
  r = np.asarray(rest_batch_sizes)
  if r.ndim not in (1, 2) or r.shape[-1] < 1:
    raise ValueError(f"rest_batch_sizes must have shape (n,) or (N, n), got "
                     f"{r.shape}.")
  if r.dtype.kind == "f":
    if not np.all(np.isfinite(r)) or np.any(r != np.round(r)):
      raise ValueError("rest_batch_sizes must be integers.")
  elif r.dtype.kind not in "iu":
    raise ValueError(f"rest_batch_sizes must be integers, got {r.dtype}.")
  r = r.astype(np.int64)
  if np.any(r < 0):
    raise ValueError("rest_batch_sizes must be non-negative.")
  return r


def _check_c(c_col) -> np.ndarray:
  c = np.asarray(c_col, dtype=np.float64).reshape(-1)
  if c.size == 0 or not np.all(np.isfinite(c)):
    raise ValueError("c_col must be a non-empty finite vector.")
  return c


def _truncation(r: np.ndarray, big_b: int) -> tuple[np.ndarray, np.ndarray,
                                                    np.ndarray]:
  """Truncation flags and log survival / removal probabilities given r.

  Args:
    r: Rest batch sizes (any shape).
    big_b: Truncated batch size B.

  Returns:
    ``(trunc, log_t, log_1mt)``: ``trunc = r >= B``; where ``trunc`` holds,
    ``log_t = ln(B / (r + 1))`` and ``log_1mt = ln((r + 1 - B) / (r + 1))``;
    elsewhere both are 0 (unused).
  """
  trunc = r >= big_b
  denom = r.astype(np.float64) + 1.0
  log_t = np.where(trunc, np.log(big_b / denom), 0.0)
  log_1mt = np.where(trunc, _log(np.maximum(denom - big_b, 1.0) / denom), 0.0)
  return trunc, log_t, log_1mt


def _initial_state_weights(p, b: int, warm: bool) -> list:
  """Law of the initial chain state (Alg. 1: state 0; Alg. 2: stationary).

  Works with floats or `fractions.Fraction` (then the result is exact).

  Args:
    p: Sampling probability given eligibility.
    b: Min-sep.
    warm: Alg. 2 if True.

  Returns:
    List of length b: probability of states 0..b-1. Warm start: state 0 w.p.
    1/(1+(b-1)p), each k in {1..b-1} w.p. p/(1+(b-1)p).
  """
  zero = p * 0
  if not warm:
    return [zero + 1] + [zero] * (b - 1)
  z = 1 + (b - 1) * p
  return [1 / z] + [p / z] * (b - 1)


# ---------------------------------------------------------------------------
# Law of the sensitive example: participation pattern x in {0,1}^n.
# ---------------------------------------------------------------------------


def _pattern_log_probs(x: np.ndarray, p: float, b: int,
                       warm: bool) -> np.ndarray:
  """Log probability of each participation pattern under b-min-sep.

  Written from the exclusion rule of Alg. 1/2 (not from a chain simulation):
  given the first round J in which the example is eligible, round i is
  eligible iff ``i >= J`` and the example did not participate in rounds
  ``i-b+1 .. i-1``; every eligible round contributes p (participation) or 1-p,
  a participation in an ineligible round has probability 0. Cold start
  (Alg. 1): J = 0. Warm start (Alg. 2): J = 0 w.p. 1/(1+(b-1)p), J = j w.p.
  p/(1+(b-1)p) for j = 1..b-1 (an initial state k is a virtual participation
  in round -(b-j), j = b-k, which bars rounds 0..j-1).

  Args:
    x: Bool array of shape ``(K, n)``.
    p: Sampling probability given eligibility.
    b: Min-sep.
    warm: Alg. 2 if True.

  Returns:
    Float64 array of shape ``(K,)`` (``-inf`` for impossible patterns).
  """
  k_rows, n = x.shape
  log_p, log_q = _log(p), _log(1.0 - p)
  weights = _initial_state_weights(p, b, warm)
  total = np.full(k_rows, -np.inf)
  for first_eligible, w in enumerate(weights):
    if w == 0:
      continue
    lp = np.full(k_rows, float(np.log(w)))
    for i in range(n):
      recent = np.any(x[:, max(0, i - b + 1):i], axis=1)
      eligible = (i >= first_eligible) & ~recent
      lp = lp + np.where(eligible, np.where(x[:, i], log_p, log_q),
                         np.where(x[:, i], -np.inf, 0.0))
    total = np.logaddexp(total, lp)
  return total


def truncated_participation_law(
    rest_batch_sizes: Sequence[int] | np.ndarray,
    sampling_prob: float,
    min_sep: int,
    truncated_batch_size: int,
    warm_start: bool,
) -> tuple[np.ndarray, np.ndarray, np.ndarray]:
  """Exact law of the Corollary D.2 vectors (x^P, x^Q) given r (seed 000 App. D).

  Enumerates every participation pattern of the sensitive example under
  b-min-sep (Alg. 1 cold / Alg. 2 warm start) together with every survival
  outcome in the rounds where it participated and truncation occurs
  (``r_i >= B``; survival w.p. ``t_i = B/(r_i+1)``). A truncated-away
  participation still bars the next b-1 rounds. Per round (Corollary D.2):
  ``x^P_i = 2`` (sampled, truncated round, survived), ``1`` (sampled, no
  truncation), ``0`` otherwise; ``x^Q_i = -1`` iff ``x^P_i = 2``, else 0.

  Args:
    rest_batch_sizes: r, shape ``(n,)``: non-sensitive examples sampled in each
      round before truncation (public). 1 <= n <= `MAX_ITERATIONS`.
    sampling_prob: p in [0, 1], probability given eligibility.
    min_sep: b >= 1.
    truncated_batch_size: B >= 1 (B_max).
    warm_start: Alg. 2 if True, Alg. 1 otherwise.

  Returns:
    ``(x_p, x_q, log_probs)``: float64 arrays of shapes ``(K, n)``, ``(K, n)``
    and ``(K,)``. Rows are the distinct outcomes (x^P determines x^Q given r)
    of non-zero probability, in ascending lexicographic order of x^P (round 0
    most significant); outcomes with the same x^P are merged (e.g. "not
    sampled" and "sampled but truncated away" both give x^P = 0 in that
    round). ``exp(log_probs)`` sums to 1.
  """
  r = _check_rest(rest_batch_sizes)
  if r.ndim != 1:
    raise ValueError(f"rest_batch_sizes must have shape (n,), got {r.shape}.")
  n = r.shape[0]
  if n > MAX_ITERATIONS:
    raise ValueError(f"n={n} too large for enumeration (max {MAX_ITERATIONS}).")
  p = _check_prob(sampling_prob)
  b = _check_pos_int(min_sep, "min_sep")
  big_b = _check_pos_int(truncated_batch_size, "truncated_batch_size")
  warm = _check_warm(warm_start)
  trunc, log_t, log_1mt = _truncation(r, big_b)

  # u_i: 0 = not sampled, 1 = sampled and kept (survived or no truncation),
  # 2 = sampled and truncated away (only possible in truncation rounds).
  options = [(0, 1, 2) if tr else (0, 1) for tr in trunc]
  u = np.array(list(itertools.product(*options)), dtype=np.int64)
  u = u.reshape(-1, n)
  lp = _pattern_log_probs(u > 0, p, b, warm)
  lp = lp + np.sum(np.where((u == 1) & trunc, log_t, 0.0), axis=1)
  lp = lp + np.sum(np.where(u == 2, log_1mt, 0.0), axis=1)
  x_p = np.where(u == 1, np.where(trunc, 2.0, 1.0), 0.0)

  keep = np.isfinite(lp)
  x_p, lp = x_p[keep], lp[keep]
  uniq, inverse = np.unique(x_p, axis=0, return_inverse=True)
  inverse = np.asarray(inverse).reshape(-1)
  merged = np.full(uniq.shape[0], -np.inf)
  np.logaddexp.at(merged, inverse, lp)
  x_q = np.where(uniq == 2.0, -1.0, 0.0)
  return uniq, x_q, merged


def truncated_mode_vectors(x_p: np.ndarray, x_q: np.ndarray,
                           c_col: Sequence[float] | np.ndarray
                           ) -> tuple[np.ndarray, np.ndarray]:
  """Means C x^P and C x^Q of the mixture components, one row per outcome.

  Args:
    x_p: Shape ``(K, n)``.
    x_q: Shape ``(K, n)``.
    c_col: Band of C (truncated at row n).

  Returns:
    ``(C x_p, C x_q)`` as float64 arrays of shape ``(K, n)``.
  """
  x_p = np.asarray(x_p, dtype=np.float64)
  x_q = np.asarray(x_q, dtype=np.float64)
  c_mat = bf.strategy_matrix(_check_c(c_col), x_p.shape[1])
  return bf.mode_vectors(x_p, c_mat), bf.mode_vectors(x_q, c_mat)


# ---------------------------------------------------------------------------
# Privacy loss by enumeration.
# ---------------------------------------------------------------------------


def _prepare(y, rest_batch_sizes, c_col, noise_multiplier):
  y = np.asarray(y, dtype=np.float64)
  if y.ndim not in (1, 2) or y.shape[-1] < 1:
    raise ValueError(f"y must have shape (n,) or (N, n), got {y.shape}.")
  n = y.shape[-1]
  r = _check_rest(rest_batch_sizes)
  if r.shape[-1] != n:
    raise ValueError(f"rest_batch_sizes has {r.shape[-1]} rounds, y has {n}.")
  if r.ndim == 2 and (y.ndim != 2 or r.shape[0] != y.shape[0]):
    raise ValueError(f"per-sample rest_batch_sizes {r.shape} need y of shape "
                     f"{r.shape}, got {y.shape}.")
  sigma = float(noise_multiplier)
  if not sigma > 0:
    raise ValueError(f"noise_multiplier must be > 0, got {sigma}.")
  return y, r, _check_c(c_col), sigma


def truncated_log_ratios(
    y: np.ndarray,
    rest_batch_sizes: Sequence[int] | np.ndarray,
    c_col: Sequence[float] | np.ndarray,
    sampling_prob: float,
    min_sep: int,
    truncated_batch_size: int,
    noise_multiplier: float,
    warm_start: bool,
) -> tuple[np.ndarray, np.ndarray]:
  """``(ln P(y)/R(y), ln Q(y)/R(y))`` of the App. D pair, R = N(0, sigma^2 I).

  These are the two quantities the P/R and Q/R recursions of seed 000 App. D
  compute; here they are obtained by full enumeration (see
  `truncated_participation_law`). Arguments as in `truncated_privacy_loss`.

  Returns:
    Two float64 arrays of shape ``y.shape[:-1]``.
  """
  y, r, c, sigma = _prepare(y, rest_batch_sizes, c_col, noise_multiplier)
  n = y.shape[-1]
  c_mat = bf.strategy_matrix(c, n)

  def one(r_row, y_rows):
    x_p, x_q, lp = truncated_participation_law(
        r_row, sampling_prob, min_sep, truncated_batch_size, warm_start)
    return (bf.privacy_loss(x_p, lp, c_mat, y_rows, sigma),
            bf.privacy_loss(x_q, lp, c_mat, y_rows, sigma))

  if r.ndim == 1:
    return one(r, y)
  log_p = np.empty(y.shape[0])
  log_q = np.empty(y.shape[0])
  rows, inverse = np.unique(r, axis=0, return_inverse=True)
  inverse = np.asarray(inverse).reshape(-1)
  for g, r_row in enumerate(rows):
    sel = inverse == g
    log_p[sel], log_q[sel] = one(r_row, y[sel])
  return log_p, log_q


def truncated_privacy_loss(
    y: np.ndarray,
    rest_batch_sizes: Sequence[int] | np.ndarray,
    c_col: Sequence[float] | np.ndarray,
    sampling_prob: float,
    min_sep: int,
    truncated_batch_size: int,
    noise_multiplier: float,
    warm_start: bool,
) -> np.ndarray:
  """Exact privacy loss ln P(y)/Q(y) of truncated b-min-sep (seed 000 App. D).

  P and Q are the zero-out dominating pair of Corollary D.2 (obtained from
  Lemma D.1) conditioned on the public rest batch sizes r, with the sensitive
  example's participation drawn by Alg. 1 (cold) or Alg. 2 (warm start) and
  survival ``B/(r_i+1)`` in truncated rounds. Computed by enumerating all
  (participation, survival) outcomes; no recursion is used. Positive samples
  (remove direction) use this loss on y ~ P, negative samples (add direction)
  use its negation on y ~ Q.

  Args:
    y: Output(s), shape ``(n,)`` or ``(N, n)``; 1 <= n <= `MAX_ITERATIONS`
      (n <= 10 is fast).
    rest_batch_sizes: r, integers >= 0, shape ``(n,)`` (shared by all y) or
      ``(N, n)`` (one row per y, which must then have shape ``(N, n)``).
    c_col: Band of the first column of C, ``C[i + k, i] = c_col[k]``
      (truncated at row n). Any length is accepted (the enumeration does not
      need ``len(c_col) <= min_sep``; the App. D recursions do).
    sampling_prob: p in [0, 1], given eligibility.
    min_sep: b >= 1.
    truncated_batch_size: B = B_max >= 1; truncation in round i iff r_i >= B.
    noise_multiplier: sigma > 0.
    warm_start: Alg. 2 if True, Alg. 1 otherwise (required).

  Returns:
    Float64 losses of shape ``y.shape[:-1]`` (0-d array for a single y).
  """
  log_p, log_q = truncated_log_ratios(
      y, rest_batch_sizes, c_col, sampling_prob, min_sep, truncated_batch_size,
      noise_multiplier, warm_start)
  return log_p - log_q


# ---------------------------------------------------------------------------
# Privacy loss by a forward algorithm over the chain (second derivation).
# ---------------------------------------------------------------------------


def _forward_log_ratio(y: np.ndarray, trunc: np.ndarray, log_t: np.ndarray,
                       log_1mt: np.ndarray, c: np.ndarray, p: float, b: int,
                       warm: bool, sigma: float, side: str) -> np.ndarray:
  """ln X(y)/R(y), X in {P, Q}, by a forward pass over chain trajectories.

  Hidden state before round i: (chain state s, window of the last m-1 values
  of x^X), m = band length. Round i: from s = 0 the example skips (1-p) or
  joins (p); from s = k > 0 it is barred and moves to k-1. A join emits
  ``x^X_i`` from its survival outcome (Corollary D.2) and moves the chain to
  b-1. The output density factorises over rows given x^X (C is lower
  triangular), ``ln N(mu_i, sigma^2)/N(0, sigma^2)(y_i)`` with
  ``mu_i = sum_k c_k x^X_{i-k}``, so the forward variable is exact. No
  band-length restriction and no use of the App. D recursions.

  Args:
    y: Shape ``(N, n)``.
    trunc, log_t, log_1mt: Per-sample truncation data, shape ``(N, n)``.
    c: Band, length m <= n.
    p: Sampling probability.
    b: Min-sep.
    warm: Alg. 2 start if True.
    sigma: Noise multiplier.
    side: ``"P"`` or ``"Q"``.

  Returns:
    Shape ``(N,)``.
  """
  num, n = y.shape
  m = c.shape[0]
  log_p, log_q = _log(p), _log(1.0 - p)
  zero_window = (0,) * (m - 1)
  alpha = {}
  for s, w in enumerate(_initial_state_weights(p, b, warm)):
    if w != 0:
      alpha[(s, zero_window)] = np.full(num, float(np.log(w)))
  s_join = b - 1
  for i in range(n):
    tr = trunc[:, i]
    if side == "P":
      joins = ((1, np.where(tr, -np.inf, 0.0)),
               (2, np.where(tr, log_t[:, i], -np.inf)),
               (0, np.where(tr, log_1mt[:, i], -np.inf)))
    else:
      joins = ((0, np.where(tr, log_1mt[:, i], 0.0)),
               (-1, np.where(tr, log_t[:, i], -np.inf)))
    new = {}

    def emit(s_next, window, x_i, log_w):
      full = window + (x_i,)  # x_{i-m+1}, ..., x_i
      mean = sum(c[k] * full[m - 1 - k] for k in range(m))
      val = log_w + (2.0 * mean * y[:, i] - mean**2) / (2.0 * sigma**2)
      key = (s_next, full[1:])
      new[key] = np.logaddexp(new[key], val) if key in new else val

    for (s, window), a in alpha.items():
      if s == 0:
        emit(0, window, 0, a + log_q)
        for x_i, lw in joins:
          emit(s_join, window, x_i, a + log_p + lw)
      else:
        emit(s - 1, window, 0, a)
    alpha = new
  return special.logsumexp(np.stack(list(alpha.values())), axis=0)


def truncated_privacy_loss_forward(
    y: np.ndarray,
    rest_batch_sizes: Sequence[int] | np.ndarray,
    c_col: Sequence[float] | np.ndarray,
    sampling_prob: float,
    min_sep: int,
    truncated_batch_size: int,
    noise_multiplier: float,
    warm_start: bool,
) -> np.ndarray:
  """ln P(y)/Q(y) of seed 000 App. D (Corollary D.2) by a forward algorithm.

  Same pair and arguments as `truncated_privacy_loss`, computed differently:
  a forward (transfer-matrix) pass over the sensitive example's b-min-sep
  Markov chain (Alg. 1/2) joint with the last ``len(c_col)-1`` values of x^P
  (resp. x^Q). Cost O(N n b 3**(len(c_col)-1)), so unlike the enumeration it
  scales to large n. Per-sample r of shape ``(N, n)`` is supported natively.

  Returns:
    Float64 losses of shape ``y.shape[:-1]``.
  """
  y, r, c, sigma = _prepare(y, rest_batch_sizes, c_col, noise_multiplier)
  p = _check_prob(sampling_prob)
  b = _check_pos_int(min_sep, "min_sep")
  big_b = _check_pos_int(truncated_batch_size, "truncated_batch_size")
  warm = _check_warm(warm_start)
  n = y.shape[-1]
  y2 = np.atleast_2d(y)
  r2 = np.broadcast_to(r, y2.shape)
  trunc, log_t, log_1mt = _truncation(r2, big_b)
  c = c[:n]
  args = (y2, trunc, log_t, log_1mt, c, p, b, warm, sigma)
  out = _forward_log_ratio(*args, "P") - _forward_log_ratio(*args, "Q")
  return out.reshape(y.shape[:-1])


# ---------------------------------------------------------------------------
# Law of the rest batch sizes r.
# ---------------------------------------------------------------------------


def rest_batch_size_law(dataset_size: int, sampling_prob, min_sep: int,
                        iterations: int, warm_start: bool) -> dict:
  """Exact joint law of r = (r_0..r_{n-1}) under b-min-sep (Alg. 1/2).

  r_i is the number of the ``dataset_size - 1`` non-sensitive examples sampled
  in round i before truncation (seed 000 App. D; spec 000 §5.5). Each example
  runs its own b-min-sep chain independently (truncated-away examples still
  block). Exact dynamic program over the vector of counts of examples per
  chain state: with n_0 available examples, r_i ~ Binomial(n_0, p); the r_i
  joiners move to state b-1, the others at 0 stay, every k > 0 moves to k-1.
  Cold start: all examples in state 0. Warm start: the initial count vector is
  Multinomial(D-1; 1/(1+(b-1)p), p/(1+(b-1)p), ..., p/(1+(b-1)p)).

  Args:
    dataset_size: D >= 1 (D - 1 non-sensitive examples). Keep D <= ~8.
    sampling_prob: p in [0, 1]. A `fractions.Fraction` gives exact Fraction
      probabilities; anything else is converted to float.
    min_sep: b >= 1.
    iterations: n >= 1 (keep n <= ~5).
    warm_start: Alg. 2 if True, Alg. 1 otherwise.

  Returns:
    Dict mapping ``tuple(r)`` (length n, Python ints) to its probability
    (float, or Fraction), only outcomes of non-zero probability.
  """
  d = _check_pos_int(dataset_size, "dataset_size")
  b = _check_pos_int(min_sep, "min_sep")
  n = _check_pos_int(iterations, "iterations")
  warm = _check_warm(warm_start)
  p = sampling_prob if isinstance(sampling_prob, Fraction) else _check_prob(
      sampling_prob)
  if not 0 <= p <= 1:
    raise ValueError(f"sampling_prob must be in [0, 1], got {p}.")
  others = d - 1
  pi = _initial_state_weights(p, b, warm)

  # Initial count vectors (n_0, ..., n_{b-1}) and their probabilities.
  states = {}
  for counts in itertools.product(range(others + 1), repeat=b):
    if sum(counts) != others:
      continue
    coef = math.factorial(others)
    prob = p * 0 + 1
    for k, nk in enumerate(counts):
      coef //= math.factorial(nk)
      prob = prob * pi[k]**nk
    prob = coef * prob
    if prob != 0:
      states[(counts, ())] = prob

  for _ in range(n):
    new = {}
    for (counts, hist), prob in states.items():
      n0 = counts[0]
      for j in range(n0 + 1):
        w = math.comb(n0, j) * p**j * (1 - p)**(n0 - j)
        if w == 0:
          continue
        if b == 1:
          nxt = (n0,)
        else:
          nxt = ((n0 - j + counts[1],) + tuple(counts[2:]) + (j,))
        key = (nxt, hist + (j,))
        new[key] = new.get(key, 0) + prob * w
    states = new

  law = {}
  for (_, hist), prob in states.items():
    law[hist] = law.get(hist, 0) + prob
  return law


def truncated_sample_law(dataset_size: int, sampling_prob: float,
                         min_sep: int, truncated_batch_size: int,
                         iterations: int, warm_start: bool) -> dict:
  """Exact joint law of (r, x^P, x^Q) as produced by an App. D sampler.

  The sensitive example's chain is independent of the others', and survival
  is drawn given r, so the law is `rest_batch_size_law` times
  `truncated_participation_law`. Useful for frequency tests of a sampler that
  returns r together with y ~ N(C x^P, sigma^2 I) / N(C x^Q, sigma^2 I)
  (at tiny sigma the mode identifies x^P and x^Q).

  Args:
    dataset_size: D (public), >= 1.
    sampling_prob: p.
    min_sep: b.
    truncated_batch_size: B.
    iterations: n.
    warm_start: Alg. 2 if True (for all D examples), else Alg. 1.

  Returns:
    Dict mapping ``(r, x_p, x_q)`` (tuples of ints) to float probabilities.
  """
  rest = rest_batch_size_law(dataset_size, float(sampling_prob), min_sep,
                             iterations, warm_start)
  law = {}
  for r, pr in rest.items():
    x_p, x_q, lp = truncated_participation_law(
        r, sampling_prob, min_sep, truncated_batch_size, warm_start)
    for xp_row, xq_row, l in zip(x_p, x_q, lp):
      key = (r, tuple(int(v) for v in xp_row), tuple(int(v) for v in xq_row))
      law[key] = pr * float(np.exp(l))
  return law
