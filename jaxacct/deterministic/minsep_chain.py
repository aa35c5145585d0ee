"""The α-tuple chain of b-min-sep sampling: ln Z_α exactly, and exact draws of the tilted law.

For the remove-direction pair P = Σ_x p_x N(Cx, σ²I), Q = N(0, σ²I) of a sampling scheme with a
b-banded C (Dong & Ganesh (2026) §2.4, §5) and an integer order α ≥ 1,

    Z_α = E_Q[(P/Q)^α] = Σ_{x_1 … x_α} Π_j p_{x_j} · exp(Σ_{j<l} ⟨Cx_j, Cx_l⟩/σ²)
        = exp((α − 1)·D_α(P‖Q))

(expand (P/Q)^α as a sum over α-tuples of patterns and take the Gaussian moment generating
function E_Q exp(⟨t, y⟩/σ²) = exp(‖t‖²/(2σ²)); the same step as the integer-α Rényi divergence
of the sampled Gaussian, Mironov, Talwar & Zhang (2019), arXiv:1908.10530, §3.3). The tilted
law Q_α ∝ P^α Q^{1−α} is the mixture Σ π_α(x_1 … x_α) N(C·Σ_j x_j, σ²I), with
π_α ∝ Π_j p_{x_j} exp(Σ_{j<l} ⟨Cx_j, Cx_l⟩/σ²): ``TupleChain`` draws from π_α.

**The chain.** One example's participation is a Markov chain with a single branching state
(``ChainLaw``): in the *eligible* state it participates with probability p (and moves to
``join``) or not (``skip``); every other state moves deterministically. Each state also
records how many rounds ago the example last participated, when that is fewer than the number
of bands (its ``lag``; otherwise "none"). Laws:

- b-min-sep (Dong & Ganesh (2026) §4, Fig. 1; Algorithm 1 cold, Algorithm 2 warm start):
  state d ∈ {1, …, b} = rounds since the last participation, capped at b (d = b: eligible,
  also "never"); cold start d₀ = b; warm start d₀ = b w.p. 1/(1 + (b − 1)p) and d₀ = k w.p.
  p/(1 + (b − 1)p) for k = 1 … b − 1 (a participation in the virtual round −k, which adds
  nothing to Cx). p is the probability *given eligibility* (``sampling_prob``). Poisson is
  b = 1 (one state).
- cyclic Poisson (Dong & Ganesh (2026) §3, §4.1) with a uniformly random phase
  (``partition="independent"``) or phase 0 (``"equal_split"``, the worst phase the Monte Carlo
  kernel uses): state r = (t − phase) mod T, eligible at r = 0, plus a flag "participated at
  the last eligible round" kept while r < bands; fixed-bin balls-in-bins is the case p = 1
  (Dong & Ganesh (2026) §2.3; needs bands ≤ T here).

With bands ≤ the separation (b, or T), two participations of one example never share a
non-zero Gram entry except through the last one, so the α chains' joint state determines the
interaction: when k chains participate in round t, the exponent gains
k(k − 1)/2·G[t, t]/σ² + k·Σ_l G[t − λ_l, t]/σ² over the other chains' lags λ_l < bands. G is
the Gram matrix CᵀC of the *finite* n×n C (``gram_diagonals``): it is Toeplitz except in the
last bands − 1 rounds, where the columns of C are cut at row n.

**Symmetry.** The weight is symmetric in the α chains, so the joint chain is lumped exactly
onto multisets of states: C(S + α − 1, α) states for S per-chain states
(b-min-sep: S = b; ``state_count``). From a multiset with e eligible chains, k of them
participate in C(e, k) labelled ways with the same weight and the same successor multiset,
and the interaction above depends only on the counts. The forward pass over the n rounds
gives ln Z_α; forward filtering / backward sampling draws multiset paths, and the labelled
tuple is then uniform given the path (a uniform permutation of the initial multiset, a
uniform choice of which k eligible chains participate).

Cost: with K multiset states and K′ ≤ (α + 1)K transitions, the forward pass is O(n·K′) time
and O(K) memory (a state with one incoming transition — most of them — is one gather per
round; the few with several, a logsumexp); ``TupleChain`` keeps a message every ⌈√n⌉ rounds
and recomputes one block at a time when sampling (O(√n·K) memory). Sampling costs one more
forward pass for *all* the draws of a ``draw_blocks`` call plus O(n·num·α) (the backward step
evaluates only the incoming transitions of the sampled states). ``state_budget`` refuses
larger state spaces. At the §7.4 shape (K = 2.83·10⁶ at α = 3, n = 7200) a forward pass
takes ~1 min on the project's CPU.

Where the code runs: host NumPy, float64, log space throughout (logsumexp over incoming
transitions; no exponential of a large number). This is the host reference; a device estimator
is built separately.

References:
  Andy Dong and Arun Ganesh, "Privacy Amplification for BandMF via b-Min-Sep Subsampling",
  arXiv:2602.09338 (v2): §2.4 (the dominating pair), §3 (cyclic Poisson, balls-in-bins), §4
  (Algorithms 1 and 2, Fig. 1), §5 (b-banded C) (docs/references.md).
  Ilya Mironov, Kunal Talwar and Li Zhang, "Rényi Differential Privacy of the Sampled Gaussian
  Mechanism", arXiv:1908.10530 (2019), §3.3 (integer orders by the binomial expansion).
"""

from __future__ import annotations

import dataclasses
import hashlib
import math
import typing
import time

import numpy as np
from scipy import special

from jaxacct import _validate
from jaxacct.errors import InputError
from jaxacct.schemes.participation import Cyclic, FixedBins, MinSepChain, UserLevel

DEFAULT_STATE_BUDGET = 2_000_000
"""Multiset states the chain accepts by default (a few hundred MB of tables at α = 3; the
forward pass at n = 7200 takes about a minute per million states on the project's CPU)."""

_NO_LAG = 0  # the lag index of "no participation within the band"


# ---------------------------------------------------------------- one example's chain
@dataclasses.dataclass(frozen=True, eq=False)
class ChainLaw:
  """One example's participation chain with a single branching (eligible) state.

  Attributes:
    name: what it models (reports and errors).
    bands: the most bands of C the lags cover (≤ the chain's separation).
    log_initial: (S,) ln of the law of the state at round 0.
    eligible: the state in which the example participates with probability p.
    skip: (S,) the next state when the example does not participate (every state).
    join: the next state after a participation.
    lag: (S,) int: rounds since the last participation if it can still interact with the
      current round (1 ≤ lag < bands), else 0.
    log_p, log_q: ln p and ln(1 − p) (−inf when p = 1).
  """

  name: str
  bands: int
  log_initial: np.ndarray
  eligible: int
  skip: np.ndarray
  join: int
  lag: np.ndarray
  log_p: float
  log_q: float

  @property
  def num_states(self) -> int:
    return int(self.log_initial.size)


def _log_probabilities(sampling_prob: float) -> tuple[float, float]:
  p = _validate.probability('sampling_prob', sampling_prob)
  return math.log(p), (math.log1p(-p) if p < 1.0 else -math.inf)


def min_sep_law(sampling_prob: float, min_sep: int, warm_start: bool, bands: int) -> ChainLaw:
  """b-min-sep (Dong & Ganesh (2026) Fig. 1; Algorithm 1 cold, Algorithm 2 warm start).

  State index i ↔ d = i + 1 rounds since the last participation (d = b: eligible).
  """
  b = _validate.integer_at_least('min_sep', min_sep, 1)
  bands = _validate.integer_at_least('bands', bands, 1)
  if bands > b:
    raise InputError(f'the tuple chain needs bands <= min_sep (Dong & Ganesh (2026) §5: a '
                     f'b-banded C), got {bands} bands with min_sep = {b}')
  log_p, log_q = _log_probabilities(sampling_prob)
  p = math.exp(log_p)
  d = np.arange(1, b + 1)
  if warm_start and b > 1:
    # Algorithm 2: eligible w.p. 1/(1 + (b−1)p), else a virtual participation k = 1 … b − 1
    # rounds ago, each w.p. p/(1 + (b−1)p).
    log_norm = math.log1p((b - 1) * p)
    log_initial = np.full(b, log_p - log_norm)
    log_initial[b - 1] = -log_norm
  else:
    log_initial = np.full(b, -np.inf)
    log_initial[b - 1] = 0.0
  return ChainLaw(name=f'{"warm" if warm_start and b > 1 else "cold"}-start {b}-min-sep',
                  bands=bands, log_initial=log_initial, eligible=b - 1,
                  skip=np.minimum(d, b - 1), join=0,
                  lag=np.where(d < bands, d, _NO_LAG), log_p=log_p, log_q=log_q)


def cyclic_law(sampling_prob: float, cycle_length: int, bands: int, random_phase: bool) -> ChainLaw:
  """Cyclic Poisson (Dong & Ganesh (2026) §3, §4.1): Bernoulli(p) in the rounds of one phase.

  States: r = 0 (eligible; index 0), then (r, not participated) for r = 1 … T − 1 (index r),
  then (r, participated at the last eligible round) for r = 1 … min(bands, T) − 1 (index
  T − 1 + r). ``random_phase``: the phase is uniform (r₀ uniform); else phase 0 (r₀ = 0).
  p = 1 with a random phase is fixed-bin balls-in-bins.
  """
  t = _validate.integer_at_least('cycle_length', cycle_length, 1)
  bands = _validate.integer_at_least('bands', bands, 1)
  if bands > t:
    raise InputError(f'the tuple chain needs bands <= cycle_length, got {bands} bands with '
                     f'cycle_length = {t}')
  log_p, log_q = _log_probabilities(sampling_prob)
  size = t + bands - 1
  skip = np.zeros(size, np.int64)
  lag = np.full(size, _NO_LAG, np.int64)
  skip[0] = 1 % t
  for r in range(1, t):
    skip[r] = r + 1 if r + 1 < t else 0
  for r in range(1, bands):  # (r, participated): index t − 1 + r; r + 1 ≤ bands ≤ T
    lag[t - 1 + r] = r
    skip[t - 1 + r] = (t + r if r + 1 < bands else r + 1) if r + 1 < t else 0
  join = t if bands > 1 else 1 % t
  log_initial = np.full(size, -np.inf)
  if random_phase:
    log_initial[:t] = -math.log(t)
  else:
    log_initial[0] = 0.0
  return ChainLaw(name=f'cyclic Poisson T = {t} ({"random" if random_phase else "fixed"} phase)',
                  bands=bands, log_initial=log_initial, eligible=0, skip=skip, join=join,
                  lag=lag, log_p=log_p, log_q=log_q)


def law_for(scheme, bands: int) -> ChainLaw:
  """The ``ChainLaw`` of a scheme's participation model (``scheme.participation``); refuses
  (``InputError`` naming ``scheme``) what it does not model."""
  participation = scheme.participation
  truncation = participation.truncation
  if truncation is not None and truncation.cuts:
    raise InputError(f'scheme: truncated batches (truncated_batch_size = '
                     f'{truncation.batch_size}) are not a product of per-example chains '
                     '(the released batch sizes couple them, Dong & Ganesh (2026) App. D)')
  match participation.model:
    case MinSepChain(sampling_prob=p, min_sep=b, warm_start=warm):
      return min_sep_law(p, b, warm, bands)
    case Cyclic(sampling_prob=p, cycle_length=t, partition=partition):
      return cyclic_law(p, t, bands, partition == 'independent')
    case FixedBins(cycle_length=t):
      return cyclic_law(1.0, t, bands, True)
    case UserLevel():
      raise InputError(f'scheme: {type(scheme).__name__} (multi-attribution) has no tuple chain '
                       'here (Binomial multiplicities per participation)')
  raise InputError(f'scheme: no tuple chain for {type(scheme).__name__}')


# ---------------------------------------------------------------- the finite Gram matrix
def gram_diagonals(coefficients, iterations: int) -> np.ndarray:
  """G[t − δ, t] of the finite n×n banded Toeplitz C (G = CᵀC): float64 (bands, n), 0 where
  t − δ < 0.

  G[s, t] = Σ_{i=δ}^{min(m−1, n−1−s)} c_i c_{i−δ} for δ = t − s ≥ 0: the columns are cut at
  row n, so the last m − 1 rounds differ from the Toeplitz value (Dong & Ganesh (2026) §5).
  """
  c = _validate.band_coefficients('coefficients', coefficients)
  n = _validate.integer_at_least('iterations', iterations, 1)
  m = c.size
  out = np.zeros((m, n))
  for delta in range(min(m, n)):
    prefix = np.cumsum(c[delta:] * c[:m - delta])  # prefix[j − δ] = Σ_{i=δ}^{j} c_i c_{i−δ}
    t = np.arange(delta, n)
    upper = np.minimum(m - 1, n - 1 - (t - delta))
    out[delta, delta:] = prefix[upper - delta]
  return out


def apply_band(coefficients, patterns: np.ndarray) -> np.ndarray:
  """C·x for every row x of ``patterns`` (..., n): Σ_i c_i x[r − i] (float64)."""
  c = np.asarray(coefficients, np.float64)
  x = np.asarray(patterns, np.float64)
  n, m = x.shape[-1], min(c.size, x.shape[-1])
  if m <= 64:
    out = c[0] * x
    for i in range(1, m):
      out[..., i:] += c[i] * x[..., :n - i]
    return out
  length = 1 << (n + m - 1).bit_length()
  spectrum = np.fft.rfft(x, length, axis=-1) * np.fft.rfft(c[:m], length)
  return np.fft.irfft(spectrum, length, axis=-1)[..., :n]


# ---------------------------------------------------------------- multiset states
def state_count(min_sep: int, alpha: int) -> int:
  """C(b + α − 1, α): the multiset states of α b-min-sep chains (b states each)."""
  b = _validate.integer_at_least('min_sep', min_sep, 1)
  alpha = _validate.integer_at_least('alpha', alpha, 1)
  return math.comb(b + alpha - 1, alpha)


def multiset_count(num_states: int, alpha: int) -> int:
  """C(S + α − 1, α): multisets of size α over S per-chain states."""
  return math.comb(num_states + alpha - 1, alpha)


def _sorted_tuples(size: int, alpha: int) -> np.ndarray:
  """Every non-decreasing α-tuple over range(size), lexicographic: (C(size + α − 1, α), α)."""
  rows = np.arange(size, dtype=np.int64)[:, None]
  for _ in range(alpha - 1):
    last = rows[:, -1]
    repeat = size - last
    base = np.repeat(rows, repeat, axis=0)
    values = np.repeat(last, repeat) + (np.arange(repeat.sum())
                                        - np.repeat(np.cumsum(repeat) - repeat, repeat))
    rows = np.concatenate([base, values[:, None]], axis=1)
  return rows


def _log_arrangements(rows: np.ndarray) -> np.ndarray:
  """ln(α!/Π_s m_s!) for sorted rows: the number of labelled tuples of each multiset."""
  alpha = rows.shape[1]
  run = np.ones(rows.shape[0])
  log_denominator = np.zeros(rows.shape[0])
  for column in range(1, alpha):
    run = np.where(rows[:, column] == rows[:, column - 1], run + 1.0, 1.0)
    log_denominator += np.log(run)
  return math.lgamma(alpha + 1.0) - log_denominator


class _Transitions(typing.NamedTuple):
  source: np.ndarray      # (T,) int64
  count: np.ndarray       # (T,) float64: k, the chains participating
  log_weight: np.ndarray  # (T,) ln C(e, k) p^k q^{e−k}
  incoming: np.ndarray    # (K, max_in) int64: transitions into each state, padded with T
  joining: np.ndarray     # (J,) the transitions with k ≥ 1 (the only ones with an interaction)
  single_target: np.ndarray      # states with exactly one incoming transition …
  single_transition: np.ndarray  # … and that transition
  multi_target: np.ndarray       # states with several incoming transitions (or none) …
  multi_incoming: np.ndarray     # … and theirs, padded with T


def _codes(rows: np.ndarray, size: int) -> np.ndarray:
  weights = size ** np.arange(rows.shape[1] - 1, -1, -1, dtype=np.int64)
  return rows @ weights


def _transitions(law: ChainLaw, rows: np.ndarray) -> _Transitions:
  size, alpha = law.num_states, rows.shape[1]
  codes = _codes(rows, size)  # ascending: rows are lexicographic
  is_eligible = rows == law.eligible
  eligible = is_eligible.sum(axis=1)
  rank = np.cumsum(is_eligible, axis=1) - 1
  moved = law.skip[rows]
  sources, counts, weights, targets = [], [], [], []
  for k in range(alpha + 1):
    source = np.flatnonzero(eligible >= k)
    if source.size == 0:
      break
    e = eligible[source]
    log_weight = (special.gammaln(e + 1.0) - special.gammaln(k + 1.0)
                  - special.gammaln(e - k + 1.0) + k * law.log_p)
    stay = e - k
    with np.errstate(invalid='ignore'):  # 0·ln 0 when p = 1 and no chain stays
      log_weight = log_weight + np.where(stay > 0, stay * law.log_q, 0.0)
    keep = np.isfinite(log_weight)
    source, log_weight = source[keep], log_weight[keep]
    new = np.where(is_eligible[source] & (rank[source] < k), law.join, moved[source])
    new.sort(axis=1)
    target = np.searchsorted(codes, _codes(new, size))
    sources.append(source)
    counts.append(np.full(source.size, float(k)))
    weights.append(log_weight)
    targets.append(target)
  source = np.concatenate(sources)
  target = np.concatenate(targets)
  order = np.argsort(target, kind='stable')
  target_sorted = target[order]
  in_degree = np.bincount(target_sorted, minlength=rows.shape[0])
  start = np.cumsum(in_degree) - in_degree
  slot = np.arange(target_sorted.size) - start[target_sorted]
  incoming = np.full((rows.shape[0], max(int(in_degree.max()), 1)), source.size, np.int64)
  incoming[target_sorted, slot] = order
  count = np.concatenate(counts)
  single = np.flatnonzero(in_degree == 1)
  multi = np.flatnonzero(in_degree != 1)
  return _Transitions(source, count, np.concatenate(weights), incoming,
                      np.flatnonzero(count > 0), single, incoming[single, 0], multi,
                      incoming[multi])


class _Gathered(typing.NamedTuple):
  source: np.ndarray      # the transitions' sources (the transitions' shape)
  log_weight: np.ndarray  # their ln C(e, k)p^k q^{e−k}, −inf at padding
  joining: np.ndarray     # flat positions of the transitions with k ≥ 1 …
  counts: np.ndarray      # … their k …
  lags: np.ndarray        # … and their sources' lag indices (J, α)


def _logsumexp_columns(values: np.ndarray) -> np.ndarray:
  """ln Σ_i exp(values[i, :]) per column (−inf for a column of −inf): a few incoming slots
  by many states, reduced across the short axis."""
  peak = values.max(axis=0)
  safe = np.where(np.isfinite(peak), peak, 0.0)
  with np.errstate(divide='ignore'):
    return safe + np.log(np.exp(values - safe).sum(axis=0))


def _logsumexp_rows(values: np.ndarray) -> np.ndarray:
  peak = values.max(axis=1)
  safe = np.where(np.isfinite(peak), peak, 0.0)
  with np.errstate(divide='ignore'):
    return safe + np.log(np.exp(values - safe[:, None]).sum(axis=1))


# ---------------------------------------------------------------- the tuple chain
class TupleChain:
  """The α-tuple chain of a ``ChainLaw`` with a banded C: ln Z_α and exact draws of π_α.

  Args:
    law: one example's chain (``min_sep_law``, ``cyclic_law`` or ``law_for(scheme, bands)``).
    coefficients: c_0 … c_{m−1} of the banded Toeplitz C (m = bands, at most the law's
      separation).
    noise_multiplier: σ > 0.
    alpha: the order α ≥ 1 (α = 1 draws from P's own pattern law).
    iterations: n ≥ 1.
    state_budget: the most multiset states accepted (``InputError`` above it).
    checkpoint_interval: rounds between stored forward messages (default ⌈√n⌉).

  Attributes:
    log_z: ln Z_α (float64; the plain computed value, not rounded up).
    num_states: the multiset states C(S + α − 1, α).
  """

  def __init__(self, law: ChainLaw, coefficients, noise_multiplier: float, alpha: int,
               iterations: int, *, state_budget: int = DEFAULT_STATE_BUDGET,
               checkpoint_interval: int | None = None):
    self.law = law
    self.alpha = _validate.integer_at_least('alpha', alpha, 1)
    self.iterations = n = _validate.integer_at_least('iterations', iterations, 1)
    sigma = _validate.positive_finite('noise_multiplier', noise_multiplier)
    self.coefficients = _validate.band_coefficients('coefficients', coefficients)
    if self.coefficients.size > law.bands:
      raise InputError(f'coefficients: {self.coefficients.size} bands, but the chain {law.name} '
                       f'tracks lags for {law.bands} (build the law with bands = '
                       'len(coefficients))')
    budget = _validate.integer_at_least('state_budget', state_budget, 1)
    self.num_states = multiset_count(law.num_states, self.alpha)
    if self.num_states > budget:
      raise InputError(
          f'alpha = {self.alpha} with {law.num_states} chain states ({law.name}) needs '
          f'C({law.num_states + self.alpha - 1}, {self.alpha}) = {self.num_states} multiset '
          f'states, above state_budget = {budget}; use a smaller alpha (or min_sep), or raise '
          'state_budget')
    if law.num_states ** self.alpha >= 2**62:  # states are keyed by base-S int64 codes
      raise InputError(f'alpha = {self.alpha} with {law.num_states} chain states: S^alpha '
                       'overflows the int64 state keys; use a smaller alpha')
    self.rows = _sorted_tuples(law.num_states, self.alpha)
    self.transitions = _transitions(law, self.rows)
    # g_t[λ] = G[t − λ, t]/σ² (λ = 0: the diagonal, also the "no lag" slot of lags, set to 0).
    self.noise_multiplier = sigma
    self._scaled_diagonals = np.zeros((law.bands, n))
    self._scaled_diagonals[:self.coefficients.size] = (gram_diagonals(self.coefficients, n)
                                                       / sigma**2)
    # Per state, its single incoming transition (padding where it has several or none: the
    # multi targets, recomputed by logsumexp over theirs, stored one column per incoming slot):
    # one gather per round instead of a gather over every transition and a scatter.
    tr = self.transitions
    first = np.full(self.num_states, tr.source.size)
    first[tr.single_target] = tr.single_transition
    self._single = self._gathered(first)
    self._multi = self._gathered(tr.multi_incoming.T)
    log_initial = law.log_initial[self.rows].sum(axis=1) + _log_arrangements(self.rows)
    if checkpoint_interval is None:
      checkpoint_interval = math.isqrt(n - 1) + 1  # ⌈√n⌉
    self.checkpoint_interval = _validate.integer_at_least('checkpoint_interval',
                                                          checkpoint_interval, 1)
    self._checkpoints = [log_initial]
    # Two buffers in turn (no fresh K-entry array per round); checkpoints are copies.
    message, spare = log_initial.copy(), np.empty_like(log_initial)
    for t in range(n):
      message, spare = self._advance(message, t, out=spare), message
      if (t + 1) % self.checkpoint_interval == 0 and t + 1 < n:
        self._checkpoints.append(message.copy())
    self._final = message
    self.log_z = float(_logsumexp_rows(message[None, :])[0])

  def digest(self) -> str:
    """A hex digest of the tables that define the draws and ln Z_α: the law, C's scaled Gram
    diagonals, the multiset states and transitions, the initial and final forward messages
    (float64 bytes, BLAKE2b; not the checkpoint interval, on which the draws do not depend).
    Two chains with equal digests draw the same tuples from the same generator; a resumed
    tilted run refuses tables whose digest differs (another NumPy, platform or input)."""
    hasher = hashlib.blake2b(digest_size=16)
    law = self.law
    hasher.update(repr((law.name, law.bands, law.eligible, law.join, law.log_p, law.log_q,
                        self.alpha, self.iterations, self.noise_multiplier)).encode())
    tr = self.transitions
    for array in (law.log_initial, law.skip, law.lag, self.coefficients,
                  self._scaled_diagonals, self.rows, tr.source, tr.count, tr.log_weight,
                  tr.incoming, self._checkpoints[0], self._final):
      hasher.update(np.ascontiguousarray(array).tobytes())
    return hasher.hexdigest()

  # One round: ln w_t of a transition is its ln C(e, k)p^k q^{e−k} plus, when k chains join in
  # round t, k(k − 1)/2·G[t, t]/σ² + k·Σ_l G[t − λ_l, t]/σ² over the other chains' lags λ_l.
  def _interaction(self, counts: np.ndarray, lags: np.ndarray, t: int) -> np.ndarray:
    """The round-t interaction of transitions joining ``counts`` chains from states whose
    chains have ``lags`` (rows of α lag indices)."""
    g = self._scaled_diagonals[:, t].copy()  # g[λ] = G[t − λ, t]/σ²; g[0] the diagonal …
    diagonal = g[0]
    g[_NO_LAG] = 0.0  # … and also the "no lag" slot, which adds nothing
    return counts * (g[lags].sum(axis=1) + 0.5 * (counts - 1.0) * diagonal)

  def _gathered(self, transitions: np.ndarray) -> '_Gathered':
    """What ``_values`` needs of the given transitions (any shape; the padding index of
    ``incoming`` gives −inf), looked up once."""
    tr = self.transitions
    # C order throughout: ``_values`` adds the interaction through a flat view.
    transitions = np.ascontiguousarray(transitions)
    valid = transitions < tr.source.size
    index = np.where(valid, transitions, 0)
    source = np.ascontiguousarray(tr.source[index])
    counts = tr.count[index]
    joining = np.flatnonzero(valid & (counts > 0))
    return _Gathered(source, np.where(valid, tr.log_weight[index], -np.inf), joining,
                     counts.reshape(-1)[joining],
                     self.law.lag[self.rows[source.reshape(-1)[joining]]])

  def _values(self, gathered: '_Gathered', message: np.ndarray, t: int,
              out: np.ndarray | None = None) -> np.ndarray:
    """F_t[source] + ln w_t of the gathered transitions (−inf at padding), into ``out`` when
    given (C-ordered, their shape)."""
    values = np.take(message, gathered.source, out=out)
    values += gathered.log_weight
    # ``source`` is C-ordered (``_gathered``), so the flat reshape is a view of ``values``.
    values.reshape(-1)[gathered.joining] += self._interaction(gathered.counts, gathered.lags, t)
    return values

  def _advance(self, message: np.ndarray, t: int, out: np.ndarray | None = None) -> np.ndarray:
    """F_{t+1} from F_t (into ``out`` when given): the single-incoming states by one gather,
    the others by logsumexp over their incoming transitions (the same arithmetic for both)."""
    new = self._values(self._single, message, t, out)
    if self.transitions.multi_target.size:
      new[self.transitions.multi_target] = _logsumexp_columns(
          self._values(self._multi, message, t))
    return new

  # ------------------------------------------------------------ sampling
  def sample(self, rng, num: int) -> tuple[np.ndarray, np.ndarray]:
    """``num`` exact draws of π_α by forward filtering / backward sampling.

    Args:
      rng: a ``np.random.Generator`` or an int seed.
      num: draws ≥ 1.

    Returns:
      (patterns, log_prob): bool (num, α, n), the α participation patterns of each draw in
      a uniformly random order of the chains; float64 (num,), ln π_α of the tuple
      (``log_prob``).
    """
    patterns = self.draw(rng, num)
    return patterns, self.log_prob(patterns)

  def draw(self, rng, num: int) -> np.ndarray:
    """The patterns of ``sample`` alone (the same draws from the same ``rng``), without their
    log-probabilities (a quarter of the host time at α = 8, n = 1000): bool (num, α, n)."""
    return self.draw_blocks([rng], num)[0]

  def draw_blocks(self, rngs, num: int, *, clock: dict | None = None) -> np.ndarray:
    """``draw(rng, num)`` for every generator of ``rngs``, bitwise, with one recomputation of
    the forward messages for all of them: bool (len(rngs), num, α, n). ``clock``: a dict to
    which the seconds of the recomputation are added under ``"forward"`` (a capacity plan
    tells the per-pass cost from the per-tuple one; the draws do not depend on it).

    The recomputation is one forward pass over the K states (O(n·K′), minutes at K ~ 10⁶),
    the rest O(n·num·α) per generator: drawing many blocks together divides the dominant cost
    by their number. Each generator makes the same calls in the same order as ``draw`` makes on
    it alone (uniforms for the last state, then per round backwards, then the labelling's),
    so a block's patterns do not depend on which generators (distinct objects) come with it;
    and NumPy's uniform doubles drawn as one array equal the same draws made one call at a
    time, so they do not depend on ``checkpoint_interval`` either (tested;
    docs/proofs/review-search-shortcut.md)."""
    rngs = [np.random.default_rng(rng) for rng in rngs]
    if not rngs:
      raise InputError('rngs: at least one generator is needed')
    num = _validate.integer_at_least('num', num, 1)
    n, tr, blocks = self.iterations, self.transitions, len(rngs)
    counts = np.zeros((blocks * num, n), np.int16)
    # The last state ∝ F_n (one cumulative table for all draws).
    cumulative = np.cumsum(np.exp(self._final - self._final.max()))
    uniform = np.concatenate([rng.random(num) for rng in rngs])
    state = np.minimum(np.searchsorted(cumulative, uniform * cumulative[-1], side='right'),
                       cumulative.size - 1)
    rows = np.arange(blocks * num)
    boundaries = list(range(0, n, self.checkpoint_interval)) + [n]
    segment = np.empty((self.checkpoint_interval, self.num_states))
    for block in range(len(boundaries) - 2, -1, -1):
      start, stop = boundaries[block], boundaries[block + 1]
      # The block's messages F_start … F_{stop−1}, recomputed into one buffer (fresh arrays
      # of K entries each round would page-fault ~2 GB per block at K ~ 10⁶).
      messages = segment[:stop - start]
      messages[0] = self._checkpoints[block]
      started = time.perf_counter()
      for t in range(start, stop - 1):
        self._advance(messages[t - start], t, out=messages[t - start + 1])
      if clock is not None:
        clock['forward'] = clock.get('forward', 0.0) + time.perf_counter() - started
      # Round stop − 1 − i uses uniforms[i] (each generator's next stop − start uniforms).
      uniforms = np.concatenate([rng.random((stop - start, num)) for rng in rngs], axis=1)
      for i, t in enumerate(range(stop - 1, start - 1, -1)):
        candidates = tr.incoming[state]
        logits = self._values(self._gathered(candidates), messages[t - start], t)
        choice = candidates[rows, _categorical(uniforms[i], logits)]
        counts[:, t] = tr.count[choice]
        state = tr.source[choice]
    patterns = self._label(rngs, self.rows[state], counts)
    return patterns.reshape(blocks, num, self.alpha, n)

  def _label(self, rngs, initial: np.ndarray, counts: np.ndarray) -> np.ndarray:
    """Labelled patterns given multiset paths (generator g's draws are rows g·num … of
    ``initial`` and ``counts``): uniform among the consistent labellings."""
    law, (total, n) = self.law, counts.shape
    num = total // len(rngs)
    state = np.concatenate([rng.permuted(initial[g * num:(g + 1) * num], axis=1)
                            for g, rng in enumerate(rngs)])
    patterns = np.zeros((total, self.alpha, n), bool)
    positions = np.broadcast_to(np.arange(self.alpha), (total, self.alpha))
    rank = np.empty((total, self.alpha), np.int64)
    for start in range(0, n, self.checkpoint_interval):
      stop = min(n, start + self.checkpoint_interval)
      uniforms = np.concatenate([rng.random((stop - start, num, self.alpha)) for rng in rngs],
                                axis=1)
      for t in range(start, stop):
        eligible = state == law.eligible
        keys = np.where(eligible, uniforms[t - start], 2.0)
        # The rank of each key: the inverse of its sorting permutation (one sort, one scatter).
        np.put_along_axis(rank, np.argsort(keys, axis=1), positions, axis=1)
        joins = rank < counts[:, t:t + 1]
        patterns[:, :, t] = joins
        state = np.where(joins, law.join, law.skip[state])
    return patterns

  # ------------------------------------------------------------ exact log-probabilities
  def log_prob(self, patterns) -> np.ndarray:
    """ln π_α(x_1 … x_α) = Σ_j ln p_{x_j} + Σ_{j<l} ⟨Cx_j, Cx_l⟩/σ² − ln Z_α, (num,).

    p_x is computed from the chain (the warm start's initial state summed out) and
    ⟨Cx_j, Cx_l⟩ from C·x directly (not from the forward pass), −inf for an impossible pattern.
    """
    x = np.asarray(patterns, bool)
    if x.ndim != 3 or x.shape[1:] != (self.alpha, self.iterations):
      raise InputError(f'patterns must have shape (num, {self.alpha}, {self.iterations}), got '
                       f'{x.shape}')
    single = pattern_log_prob(self.law, x.reshape(-1, self.iterations))
    single = single.reshape(x.shape[0], self.alpha).sum(axis=1)
    means = apply_band(self.coefficients, x)
    pairs = np.zeros(x.shape[0])
    for j in range(self.alpha):
      for l in range(j + 1, self.alpha):
        pairs += np.einsum('sr,sr->s', means[:, j], means[:, l])
    return single + pairs / self.noise_multiplier**2 - self.log_z


def _categorical(uniform: np.ndarray, logits: np.ndarray) -> np.ndarray:
  """Index per row drawn ∝ exp(logits) (rows with finite maximum), by inverse CDF of the
  row's uniform in [0, 1)."""
  peak = logits.max(axis=1, keepdims=True)
  weights = np.exp(logits - peak)
  cumulative = np.cumsum(weights, axis=1)
  threshold = uniform[:, None] * cumulative[:, -1:]
  return np.minimum((cumulative <= threshold).sum(axis=1), logits.shape[1] - 1)


def pattern_log_prob(law: ChainLaw, patterns) -> np.ndarray:
  """ln p_x of each row x of ``patterns`` (num, n) under one example's chain (−inf if
  impossible); the initial state is summed out (warm start, random phase)."""
  x = np.asarray(patterns, bool)
  num, n = x.shape
  size = law.num_states
  # Never-participating trajectories from each initial state: the state at round t and the
  # eligible rounds passed before t.
  trajectory = np.empty((size, n + 1), np.int64)
  trajectory[:, 0] = np.arange(size)
  for t in range(n):
    trajectory[:, t + 1] = law.skip[trajectory[:, t]]
  eligible = trajectory == law.eligible
  passed = np.concatenate([np.zeros((size, 1), np.int64), np.cumsum(eligible, axis=1)[:, :-1]],
                          axis=1)
  any_join = x.any(axis=1)
  first = np.where(any_join, x.argmax(axis=1), n)
  waits = passed[:, first].T  # (num, S)
  with np.errstate(invalid='ignore'):
    log_wait = np.where(waits > 0, waits * law.log_q, 0.0)
  join_term = np.where(eligible[:, first].T, law.log_p, -np.inf)
  log_start = law.log_initial[None, :] + log_wait + np.where(any_join[:, None], join_term, 0.0)
  result = _logsumexp_rows(log_start)
  # After the first participation the state is determined by x.
  state = np.full(num, law.join)
  for t in range(n):
    active = t > first
    if not active.any():
      continue
    is_eligible = state == law.eligible
    joins = x[:, t]
    add = np.where(joins, np.where(is_eligible, law.log_p, -np.inf),
                   np.where(is_eligible, law.log_q, 0.0))
    with np.errstate(invalid='ignore'):
      result = result + np.where(active, add, 0.0)
    state = np.where(active, np.where(joins, law.join, law.skip[state]), state)
  return result


def log_partition(scheme, coefficients, sigma: float, alpha: int, *,
                  state_budget: int = DEFAULT_STATE_BUDGET) -> float:
  """ln Z_α = (α − 1)·D_α(P‖Q) of ``scheme`` with the banded Toeplitz C of ``coefficients``.

  Exact (float64, log space; not rounded up). Refuses (``InputError``) schemes without a
  tuple chain (``law_for``), more bands than the separation, and state spaces above
  ``state_budget``.
  """
  c = _validate.band_coefficients('coefficients', coefficients)
  law = law_for(scheme, c.size)
  return TupleChain(law, c, sigma, alpha, scheme.iterations, state_budget=state_budget).log_z
