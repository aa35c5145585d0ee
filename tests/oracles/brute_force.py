"""Brute-force privacy-loss oracle for matrix mechanisms with sampled participation.

This module is an independent reference implementation used to test jaxacct. It
deliberately imports neither jax nor jaxacct and does not use the O(n) privacy
loss recursion of spec 000 §4: every sampling scheme is described by its full
law over participation patterns, obtained by enumerating all 2**n binary vectors
(or the T fixed bins) and multiplying the transition probabilities of the
sampler. The privacy loss of the dominating pair

  P = sum_x p_x N(C x, sigma^2 I),   Q = N(0, sigma^2 I)

is then evaluated exactly as

  ln P(y)/Q(y) = logsumexp_x [log p_x + (2 <C x, y> - ||C x||^2) / (2 sigma^2)].

Conventions: rounds are 0-indexed (round 0 is column 0 of a pattern), patterns
are float64 rows of shape ``(K, n)``, returned in ascending lexicographic order
with round 0 the most significant position, identical patterns merged and
zero-probability patterns dropped. The law is therefore canonical, so two
schemes have the same law iff the returned arrays agree (up to round-off in the
log probabilities).

Feasible for ``iterations <= 12`` (enumeration cost O(2**n * n * b)).
"""

from __future__ import annotations

from collections.abc import Sequence

import numpy as np
from scipy import special

MAX_ITERATIONS = 16

_KINDS = ("poisson", "bminsep", "balls_in_bins", "cyclic_poisson")
_PARTITIONS = ("independent", "equal_split")


def _log(x: float | np.ndarray) -> np.ndarray:
  """Natural log mapping 0 to -inf without emitting a divide warning."""
  with np.errstate(divide="ignore"):
    return np.log(np.asarray(x, dtype=np.float64))


def _all_binary(n: int) -> np.ndarray:
  """All 2**n binary vectors as a bool array, in ascending lexicographic order.

  Args:
    n: Vector length.

  Returns:
    Bool array of shape ``(2**n, n)``; column 0 is the most significant bit.
  """
  idx = np.arange(2**n, dtype=np.int64)
  shifts = n - 1 - np.arange(n, dtype=np.int64)
  return ((idx[:, None] >> shifts[None, :]) & 1).astype(bool)


def _canonical(patterns: np.ndarray,
               log_probs: np.ndarray) -> tuple[np.ndarray, np.ndarray]:
  """Merges identical patterns, drops zero-probability ones and sorts rows.

  Args:
    patterns: Array of shape ``(K, n)`` with 0/1 entries.
    log_probs: Array of shape ``(K,)``; ``-inf`` marks probability zero.

  Returns:
    ``(patterns, log_probs)`` with unique rows in ascending lexicographic order
    (round 0 most significant), float64 patterns and finite log probabilities.
  """
  patterns = np.asarray(patterns, dtype=np.float64)
  log_probs = np.asarray(log_probs, dtype=np.float64)
  keep = np.isfinite(log_probs)
  patterns, log_probs = patterns[keep], log_probs[keep]
  uniq, inverse = np.unique(patterns, axis=0, return_inverse=True)
  inverse = np.asarray(inverse).reshape(-1)
  merged = np.full(uniq.shape[0], -np.inf)
  np.logaddexp.at(merged, inverse, log_probs)
  return uniq, merged


def _check_prob(p: float | None, kind: str) -> float:
  if p is None:
    raise ValueError(f"kind={kind!r} requires sampling_prob.")
  p = float(p)
  if not 0.0 <= p <= 1.0:
    raise ValueError(f"sampling_prob must be in [0, 1], got {p}.")
  return p


def _check_pos_int(v: int | None, name: str, kind: str) -> int:
  if v is None:
    raise ValueError(f"kind={kind!r} requires {name}.")
  if isinstance(v, bool) or int(v) != v or int(v) < 1:
    raise ValueError(f"{name} must be a positive integer, got {v!r}.")
  return int(v)


def _poisson_law(n: int, p: float) -> tuple[np.ndarray, np.ndarray]:
  x = _all_binary(n)
  log_p, log_q = _log(p), _log(1.0 - p)
  lp = np.zeros(x.shape[0])
  for i in range(n):
    lp = lp + np.where(x[:, i], log_p, log_q)
  return x, lp


def _bminsep_initial_law(p: float, b: int, warm_start: bool) -> np.ndarray:
  """Log probabilities of the initial chain state 0..b-1.

  State 0 = available; state k > 0 = barred for the next k rounds.

  Args:
    p: Sampling probability given eligibility.
    b: Min-sep.
    warm_start: Algorithm 2 (stationary start) if True, else Algorithm 1.

  Returns:
    Array of shape ``(b,)`` of log probabilities.
  """
  law = np.zeros(b)
  if warm_start:
    z = 1.0 + (b - 1) * p
    law[0] = 1.0 / z
    law[1:] = p / z
  else:
    law[0] = 1.0
  return _log(law)


def _bminsep_law(n: int, p: float, b: int,
                 warm_start: bool) -> tuple[np.ndarray, np.ndarray]:
  """Pattern law of b-min-sep sampling by running the chain on all 2**n vectors.

  Args:
    n: Number of rounds.
    p: Sampling probability given eligibility.
    b: Min-sep (an example participates at most once in any b consecutive
      rounds).
    warm_start: Algorithm 2 if True, Algorithm 1 (cold start) otherwise.

  Returns:
    ``(patterns, log_probs)`` over all 2**n vectors (-inf for impossible ones).
  """
  x = _all_binary(n)
  log_p, log_q = _log(p), _log(1.0 - p)
  init = _bminsep_initial_law(p, b, warm_start)
  total = np.full(x.shape[0], -np.inf)
  for s0 in range(b):
    if not np.isfinite(init[s0]):
      continue
    lp = np.full(x.shape[0], init[s0])
    state = np.full(x.shape[0], s0, dtype=np.int64)
    for i in range(n):
      xi = x[:, i]
      avail = state == 0
      step = np.where(
          avail,
          np.where(xi, log_p, log_q),
          np.where(xi, -np.inf, 0.0),  # barred: participation impossible
      )
      lp = lp + step
      state = np.where(avail, np.where(xi, b - 1, 0), state - 1)
    total = np.logaddexp(total, lp)
  return x, total


def _balls_in_bins_law(n: int, cycle: int) -> tuple[np.ndarray, np.ndarray]:
  rounds = np.arange(n)
  patterns = np.stack([(rounds % cycle) == j for j in range(cycle)])
  return patterns, np.full(cycle, -np.log(cycle))


def _cyclic_poisson_law(n: int, p: float, cycle: int,
                        partition: str) -> tuple[np.ndarray, np.ndarray]:
  x = _all_binary(n)
  phase_of_round = np.arange(n) % cycle
  if partition == "independent":
    phases = range(cycle)
    log_w = -np.log(cycle)
  else:  # equal_split: the sensitive example sits in the first subset.
    phases = range(1)
    log_w = 0.0
  total = np.full(x.shape[0], -np.inf)
  log_p, log_q = _log(p), _log(1.0 - p)
  for s in phases:
    eligible = phase_of_round == s
    outside = np.any(x & ~eligible[None, :], axis=1)
    lp = np.full(x.shape[0], log_w)
    for i in np.flatnonzero(eligible):
      lp = lp + np.where(x[:, i], log_p, log_q)
    lp = np.where(outside, -np.inf, lp)
    total = np.logaddexp(total, lp)
  return x, total


def participation_law(
    kind: str,
    *,
    iterations: int,
    sampling_prob: float | None = None,
    min_sep: int | None = None,
    warm_start: bool | None = None,
    cycle_length: int | None = None,
    partition: str | None = None,
) -> tuple[np.ndarray, np.ndarray]:
  """Exact law of the sensitive example's participation pattern.

  Args:
    kind: One of ``"poisson"``, ``"bminsep"``, ``"balls_in_bins"`` (fixed bin),
      ``"cyclic_poisson"``.
    iterations: Number of rounds n (1 <= n <= 16; n <= 12 is fast).
    sampling_prob: p. Poisson: per-round probability. b-min-sep: probability
      given eligibility. Cyclic Poisson: probability in each eligible round.
      Not used by balls-in-bins.
    min_sep: b for ``"bminsep"`` (b = 1 is Poisson).
    warm_start: ``"bminsep"`` only, required: False = Algorithm 1 (cold start,
      every example available), True = Algorithm 2 (initial state 0 w.p.
      1/(1+(b-1)p), state k in {1..b-1} w.p. p/(1+(b-1)p) each).
    cycle_length: T for ``"balls_in_bins"`` and ``"cyclic_poisson"``.
    partition: ``"cyclic_poisson"`` only: ``"independent"`` (random phase
      uniform on {0..T-1}, the default when None) or ``"equal_split"`` (phase
      fixed to 0, the worst case of a fixed partition).

  Returns:
    ``(patterns, log_probs)``: ``patterns`` float64 of shape ``(K, n)`` with
    0/1 entries, unique rows in ascending lexicographic order (round 0 most
    significant), every pattern of non-zero probability; ``log_probs`` float64
    of shape ``(K,)``.

  Raises:
    ValueError: unknown kind, missing or invalid parameters, or a parameter
      that the kind does not use.
  """
  if kind not in _KINDS:
    raise ValueError(f"Unknown kind {kind!r}; expected one of {_KINDS}.")
  n = _check_pos_int(iterations, "iterations", kind)
  if n > MAX_ITERATIONS:
    raise ValueError(f"iterations={n} too large for enumeration "
                     f"(max {MAX_ITERATIONS}).")
  used = {
      "poisson": {"sampling_prob"},
      "bminsep": {"sampling_prob", "min_sep", "warm_start"},
      "balls_in_bins": {"cycle_length"},
      "cyclic_poisson": {"sampling_prob", "cycle_length", "partition"},
  }[kind]
  given = {
      "sampling_prob": sampling_prob,
      "min_sep": min_sep,
      "warm_start": warm_start,
      "cycle_length": cycle_length,
      "partition": partition,
  }
  unused = sorted(k for k, v in given.items() if v is not None and k not in used)
  if unused:
    raise ValueError(f"kind={kind!r} does not take {unused}.")

  if kind == "poisson":
    x, lp = _poisson_law(n, _check_prob(sampling_prob, kind))
  elif kind == "bminsep":
    p = _check_prob(sampling_prob, kind)
    b = _check_pos_int(min_sep, "min_sep", kind)
    if not isinstance(warm_start, (bool, np.bool_)):
      raise ValueError("kind='bminsep' requires warm_start=True/False.")
    x, lp = _bminsep_law(n, p, b, bool(warm_start))
  elif kind == "balls_in_bins":
    x, lp = _balls_in_bins_law(
        n, _check_pos_int(cycle_length, "cycle_length", kind))
  else:
    p = _check_prob(sampling_prob, kind)
    t = _check_pos_int(cycle_length, "cycle_length", kind)
    part = "independent" if partition is None else partition
    if part not in _PARTITIONS:
      raise ValueError(f"Unknown partition {part!r}; expected {_PARTITIONS}.")
    x, lp = _cyclic_poisson_law(n, p, t, part)
  return _canonical(x, lp)


def strategy_matrix(c_col: Sequence[float] | np.ndarray,
                    iterations: int) -> np.ndarray:
  """Dense lower-triangular banded Toeplitz strategy matrix.

  Args:
    c_col: Band of the first column, ``C[i + k, i] = c_col[k]``. Truncated at
      ``iterations`` if longer; zero-padded otherwise.
    iterations: n.

  Returns:
    Float64 array of shape ``(n, n)``.
  """
  c = np.asarray(c_col, dtype=np.float64).reshape(-1)[:iterations]
  mat = np.zeros((iterations, iterations))
  for k, ck in enumerate(c):
    mat += ck * np.eye(iterations, k=-k)
  return mat


def mode_vectors(patterns: np.ndarray, c_matrix: np.ndarray) -> np.ndarray:
  """Means C x of the mixture components, one row per pattern.

  Args:
    patterns: Array of shape ``(K, n)``.
    c_matrix: Strategy matrix of shape ``(n, n)``.

  Returns:
    Array of shape ``(K, n)`` whose row k is ``C @ patterns[k]``.
  """
  patterns = np.asarray(patterns, dtype=np.float64)
  c_matrix = np.asarray(c_matrix, dtype=np.float64)
  if c_matrix.shape != (patterns.shape[1], patterns.shape[1]):
    raise ValueError(f"C has shape {c_matrix.shape}, expected "
                     f"{(patterns.shape[1],) * 2}.")
  return patterns @ c_matrix.T


def privacy_loss(patterns: np.ndarray, log_probs: np.ndarray,
                 c_matrix: np.ndarray, y: np.ndarray,
                 noise_multiplier: float) -> np.ndarray:
  """Exact privacy loss ln P(y)/Q(y) of the mixture dominating pair.

  Args:
    patterns: Participation patterns, shape ``(K, n)``.
    log_probs: Their log probabilities, shape ``(K,)`` (need not sum to one in
      log space exactly; no renormalisation is done).
    c_matrix: Strategy matrix, shape ``(n, n)``.
    y: Output sample(s), shape ``(n,)`` or ``(N, n)``.
    noise_multiplier: sigma > 0 (noise std with clip norm 1).

  Returns:
    Float64 losses of shape ``y.shape[:-1]`` (a 0-d array for a single y).
  """
  sigma = float(noise_multiplier)
  if not sigma > 0:
    raise ValueError(f"noise_multiplier must be > 0, got {sigma}.")
  modes = mode_vectors(patterns, c_matrix)  # (K, n)
  log_probs = np.asarray(log_probs, dtype=np.float64).reshape(-1)
  y = np.asarray(y, dtype=np.float64)
  if y.shape[-1] != modes.shape[1] or y.ndim not in (1, 2):
    raise ValueError(f"y has shape {y.shape}, expected (n,) or (N, n) with "
                     f"n={modes.shape[1]}.")
  y2 = np.atleast_2d(y)  # (N, n)
  norms = np.sum(modes**2, axis=1)  # (K,)
  expo = (log_probs[:, None] +
          (2.0 * modes @ y2.T - norms[:, None]) / (2.0 * sigma**2))  # (K, N)
  out = special.logsumexp(expo, axis=0)
  return out.reshape(y.shape[:-1])


def participation_rates(patterns: np.ndarray,
                        log_probs: np.ndarray) -> np.ndarray:
  """Marginal participation probability of each round, shape ``(n,)``."""
  return np.exp(np.asarray(log_probs)) @ np.asarray(patterns, dtype=np.float64)


def loss_for(kind: str, c_col: Sequence[float] | np.ndarray, y: np.ndarray,
             noise_multiplier: float, **scheme_kwargs) -> np.ndarray:
  """Exact privacy loss for a named scheme; n is taken from ``y.shape[-1]``.

  Args:
    kind: Scheme name, as in `participation_law`.
    c_col: Band of C (truncated at n if longer).
    y: Output sample(s), shape ``(n,)`` or ``(N, n)``.
    noise_multiplier: sigma.
    **scheme_kwargs: Keyword arguments of `participation_law` except
      ``iterations``.

  Returns:
    Losses of shape ``y.shape[:-1]``.
  """
  y = np.asarray(y, dtype=np.float64)
  n = y.shape[-1]
  patterns, log_probs = participation_law(kind, iterations=n, **scheme_kwargs)
  return privacy_loss(patterns, log_probs, strategy_matrix(c_col, n), y,
                      noise_multiplier)
