"""Samplers of the sensitive example's participation and of the mean C·x (device, JAX).

Each sampler draws, for a chunk of samples with one key each, the
participation pattern x of the sensitive example under its scheme and returns
the noiseless output mean C·x, batch-major ``(num_samples, iterations)``.
Kernels are not jit-compiled here: ``sampling.py`` composes and jits them.

Randomness per sample (folded from the sample's key by purpose): 0 → the
per-round Bernoulli trials, 1 → the warm-start state / phase / bin; for
truncated schemes 3 → the other examples' batch sizes (then by round),
4 → survival of truncation, 5 → their warm-start history (noise uses 2);
6 → the multiplicities of multi-attribution participations. A
Bernoulli(p) trial compares a raw 64-bit word with ⌊p·2⁶⁴⌋ (exact to 2⁻⁶⁴,
cheaper than forming a float uniform).

References:
  seed 000: Dong & Ganesh, arXiv 2602.09338v2, §2.2–2.4, §4 (Fig. 1 Markov
  chain, Algorithms 1 and 2), spec 000 §4.5.
"""

from __future__ import annotations

import functools

import jax
import jax.numpy as jnp
from jax import lax

from jaxacct.matrices import BandedToeplitz
from jaxacct.montecarlo._spec import FFT_MIN_BANDS, KernelSpec, SchemeParams
from jaxacct.montecarlo.binomial import (InversionTable, binomial, inversion_table, table_binomial,
                                         table_uniforms)


def _bernoulli_trials(keys: jax.Array, length: int, sampling_prob: jax.Array) -> jax.Array:
  """Bernoulli(p) trials, batch-major bool (N, length); P[True] = ⌊p·2⁶⁴⌋/2⁶⁴ (or 1 at p = 1).

  Rounding p down by < 2⁻⁶⁴ changes the pattern law by a total variation of at
  most n·2⁻⁶⁴ per sample, negligible against any δ reported.
  """
  words = jax.vmap(lambda k: jax.random.bits(jax.random.fold_in(k, 0), (length,), jnp.uint64))(keys)
  below_one = sampling_prob < 1.0
  # float64 → uint64 is exact here: p·2⁶⁴ < 2⁶⁴ has at most 53 significant bits.
  threshold = jnp.where(below_one, sampling_prob, 0.0) * 2.0**64
  return (words < threshold.astype(jnp.uint64)) | ~below_one


def _start_key(keys: jax.Array) -> jax.Array:
  return jax.vmap(lambda k: jax.random.fold_in(k, 1))(keys)


def mean_of_separated_participations(x: jax.Array, c_col: jax.Array) -> jax.Array:
  """C·x for participations at least len(c_col) rounds apart, batch-major (N, n).

  Columns of separated participations do not overlap, so row r of C·x is
  x_t·c[r − t] for the last participation t ≤ r with r − t < len(c), else 0.
  Short bands use m shifted multiply-adds (fast, fused); long bands an O(n)
  ``cummax`` and gather instead of an O(n·m) product.

  Args:
    x: ``(N, n)`` participation indicators (bool) or weights (the truncated
      pair's x^P ∈ {2, 1, 0}, x^Q ∈ {−1, 0}; a zero weight adds nothing, and
      its separation from other participations is all that matters), batch-major.
    c_col: ``(m,)`` band of C.
  """
  num, n = x.shape
  m = c_col.shape[0]
  weights = x.astype(c_col.dtype)
  if m < FFT_MIN_BANDS:
    padded = jnp.pad(weights, ((0, 0), (m - 1, 0)))
    mean = c_col[0] * padded[:, m - 1:]
    for k in range(1, m):
      mean = mean + c_col[k] * padded[:, m - 1 - k:m - 1 - k + n]
    return mean
  rounds = jnp.arange(n, dtype=jnp.int32)[None, :]
  last = lax.cummax(jnp.where(weights != 0, rounds, jnp.int32(-m - 1)), axis=1)
  gap = rounds - last
  weight = jnp.take_along_axis(weights, jnp.clip(last, 0, n - 1), axis=1)
  return jnp.where(gap < m, weight * c_col[jnp.clip(gap, 0, m - 1)], 0.0)


def bminsep_participation(spec: KernelSpec, keys: jax.Array, sampling_prob: jax.Array) -> jax.Array:
  """Participation under b-min-sep (Alg. 1 cold / Alg. 2 warm), batch-major bool (N, n).

  The Markov chain of seed 000 Fig. 1 as a renewal process (spec 000 §4.5): an
  available example joins after a Geometric(p) number of rounds (support
  {1, 2, …}) and is then barred for b − 1 rounds, so participation times are
  t₁ = J + G₁ − 1 and t_{k+1} = t_k + (b − 1) + G_{k+1}, with at most
  K = ⌈n/b⌉ of them before round n. J is the first eligible round: 0 (cold
  start) or, for warm start, the stationary law of Alg. 2: 0 w.p.
  1/(1 + (b−1)p), else uniform on {1, …, b−1}. K geometric draws per sample
  replace n Bernoulli trials; b = 1 (Poisson) keeps the per-round trials.
  G = 1 + ⌊ln U / ln(1 − p)⌋ with U = (W + ½)·2⁻⁶⁴ from a 64-bit word W
  (Pr[G > k] = (1 − p)^k; at p = 1, ln(1 − p) = −∞ gives G = 1). U rounds to
  1.0 with probability ~2⁻⁵⁴ (forcing G = 1): a total-variation error of at most
  n·2⁻⁵⁴ per sample, far below any δ reported.
  """
  n, b = spec.iterations, spec.period
  if b == 1:
    return _bernoulli_trials(keys, n, sampling_prob)
  num_gaps = -(-n // b)
  words = jax.vmap(lambda k: jax.random.bits(jax.random.fold_in(k, 0), (num_gaps,), jnp.uint64))(
      keys)
  uniform = (words.astype(jnp.float64) + 0.5) * 2.0**-64
  log_stay = jnp.log1p(-sampling_prob)
  # Rounds waited, capped at n + 1 (later participations fall outside the run anyway).
  waits = jnp.minimum(jnp.floor(jnp.log(uniform) / log_stay), n + 1.0).astype(jnp.int64)
  if spec.warm_start:
    v = jax.vmap(lambda k: jax.random.uniform(k, (), jnp.float64))(_start_key(keys))
    p_available = 1.0 / (1.0 + (b - 1) * sampling_prob)
    rank = jnp.floor((v - p_available) / (1.0 - p_available) * (b - 1)).astype(jnp.int32)
    first_eligible = jnp.where(v < p_available, 0, 1 + jnp.clip(rank, 0, b - 2))
  else:
    first_eligible = jnp.zeros(keys.shape[0], jnp.int32)
  # t_k = J + Σ_{j≤k} (G_j − 1) + (k − 1)·b  (0-based k − 1 = column index).
  times = (first_eligible[:, None].astype(jnp.int64) + jnp.cumsum(waits, axis=1)
           + b * jnp.arange(num_gaps, dtype=jnp.int64)[None, :])  # int64: no overflow for any n
  return jax.vmap(lambda t: jnp.zeros(n, bool).at[t].set(True, mode='drop'))(times)


def cyclic_poisson_participation(spec: KernelSpec, keys: jax.Array,
                                 sampling_prob: jax.Array) -> jax.Array:
  """Participation under cyclic Poisson, batch-major bool (N, n).

  ``independent``: a uniform phase s per sample; ``equal_split``: phase 0 (the
  worst phase, see ``CyclicPoisson``). One Bernoulli(p) trial per round of the phase.
  """
  n, cycle = spec.iterations, spec.period
  trials = _bernoulli_trials(keys, -(-n // cycle), sampling_prob)  # (N, cycles)
  if spec.partition == 'independent':
    phase = jax.vmap(lambda k: jax.random.randint(k, (), 0, cycle))(_start_key(keys))
  else:
    phase = jnp.zeros(keys.shape[0], jnp.int32)
  in_phase = (jnp.arange(n)[None, :] % cycle) == phase[:, None]
  return in_phase & jnp.repeat(trials, cycle, axis=1)[:, :n]


def balls_in_bins_modes(iterations: int, cycle_length: int, c_col: jax.Array) -> jax.Array:
  """The T mode vectors m_j = C·1[i ≡ j (mod T)], shape (T, n), in O(T·n).

  Exact also when len(c) > T (the shifted copies of c then overlap): row r of
  m_j is Σ c_k over k ≤ min(r, m−1) with k ≡ r − j (mod T), read from strided
  cumulative sums of c (seed 000 §2.3).
  """
  n, cycle = iterations, cycle_length
  m = c_col.shape[0]
  padded = jnp.pad(c_col, (0, -(-m // cycle) * cycle - m))
  strided_cumsum = jnp.cumsum(padded.reshape(-1, cycle), axis=0).reshape(-1)
  bins = jnp.arange(cycle)[:, None]
  rounds = jnp.arange(n)[None, :]
  k_max = jnp.minimum(rounds, m - 1)
  k_star = k_max - jnp.mod(k_max - (rounds - bins), cycle)
  return jnp.where(k_star >= 0, strided_cumsum[jnp.clip(k_star, 0, None)], 0.0)


def stationary_history(spec: KernelSpec, keys: jax.Array, params: SchemeParams) -> jax.Array:
  """Warm-start history of the m − 1 other examples: (N, b − 1) counts, column k − 1 = state k.

  Under Algorithm 2 every example is independently in state 0 (available) w.p.
  1/(1 + (b−1)p) and in each barred state k ∈ {1, …, b−1} (it joined in virtual
  round −k) w.p. p/(1 + (b−1)p); the counts are one multinomial draw, taken
  as b − 1 conditional binomials (spec 000 §5.5).
  """
  b = spec.period
  p = params.sampling_prob
  others = params.dataset_size - 1
  state_prob = p / (1.0 + (b - 1) * p)
  history_keys = jax.vmap(lambda k: jax.random.fold_in(k, 5))(keys)

  def draw(remaining, k):
    # Pr[state k | not in states 1 … k − 1] for categories in the order 1, …, b − 1, 0.
    conditional = jnp.minimum(state_prob / (1.0 - (k.astype(jnp.float64) - 1) * state_prob), 1.0)
    count = binomial(jax.vmap(lambda key: jax.random.fold_in(key, k))(history_keys), remaining,
                      conditional)
    return remaining - count, count

  _, counts = lax.scan(draw, jnp.broadcast_to(others, keys.shape[:1]).astype(jnp.int64),
                       jnp.arange(1, b, dtype=jnp.uint32))
  return counts.T


# Table fast path for the batch-size draws: the pool size k is covered to 8 s.d., by one CDF row
# per count if that takes at most _TABLE_MAX_ENTRIES entries, else by one row plus a remainder
# Binomial(k − K, p) of mean at most _TABLE_MAX_EXTRA_MEAN (small p).
_TABLE_WINDOW_SD = 8.0
_TABLE_MAX_EXTRA_MEAN = 4.0
_TABLE_MAX_ENTRIES = 1 << 20


@functools.lru_cache(maxsize=32)  # schemes are frozen and hashable; building takes ~0.1 s
def batch_size_table(scheme) -> InversionTable | None:
  """Host: the ``InversionTable`` for a truncated scheme's batch-size draws, or None.

  Under warm start each other example is barred independently w.p. (b − 1)p₀,
  so the pool size is k = (m − 1) − Binomial(m − 1, (b − 1)p₀), mean μ and
  s.d. s; the table covers k ∈ [μ − 8s, μ + 8s] (b = 1: k = m − 1 exactly).
  Counts outside (cold-start rounds, far tails) fall back to the exact general
  sampler, so the table only affects speed. None when p > 1/2 or no table of
  at most 2²⁰ entries covers the window.
  """
  p = float(scheme.sampling_prob)
  others = scheme.dataset_size - 1
  if p > 0.5 or others < 1:
    return None
  barred = (scheme.min_sep - 1) * scheme.expected_participation_rate
  mean = others * (1.0 - barred)
  spread = _TABLE_WINDOW_SD * (others * barred * (1.0 - barred)) ** 0.5
  base = max(0, int(mean - spread))
  top = min(others, int(mean + spread) + 1)
  row_length = 2 * (9.0 * (top * p * (1.0 - p)) ** 0.5 + 2.0) + 1.0
  if (top - base + 1) * row_length <= _TABLE_MAX_ENTRIES:
    return inversion_table(base, top - base + 1, p, 0)
  max_extra = int(_TABLE_MAX_EXTRA_MEAN / p)
  if base + max_extra < top:
    return None
  return inversion_table(base, 1, p, max_extra)


def rest_batch_sizes(spec: KernelSpec, keys: jax.Array, params: SchemeParams) -> jax.Array:
  """The other examples' pre-truncation batch sizes r, batch-major int32 (N, n).

  r_i ~ Binomial(k_i, p) with k_i = (m − 1) − Σ_{j=i−b+1}^{i−1} r_j: examples
  sampled in the last b − 1 rounds are barred, including those truncated away
  (seed 000 App. D; spec 000 §5.5). Cold start has no history; warm start
  starts from ``stationary_history``. A ``lax.scan`` over rounds keeps the last
  b − 1 counts in a circular buffer (before round i, slot i mod (b − 1) holds
  r_{i−b+1}, the count leaving the window after round i; it is carried
  alongside).
  """
  n, b = spec.iterations, spec.period
  num = keys.shape[0]
  p = params.sampling_prob
  table = params.batch_size_table
  others = jnp.broadcast_to(params.dataset_size - 1, (num,)).astype(jnp.int64)
  rest_keys = jax.vmap(lambda k: jax.random.fold_in(k, 3))(keys)
  # Separate subtrees: 0 → the table path's uniforms (all rounds, drawn up front), 1 → one key
  # per round for the general sampler (the table path's rare fallback).
  table_keys = jax.vmap(lambda k: jax.random.fold_in(k, 0))(rest_keys)
  round_keys = jax.vmap(lambda k: jax.random.fold_in(k, 1))(rest_keys)
  uniforms = table_uniforms(table_keys, n) if table is not None else jnp.zeros((n, 0))

  def draw(i, u, counts):
    def keys_of_round():
      return jax.vmap(lambda k: jax.random.fold_in(k, i))(round_keys)
    if table is None:
      return binomial(keys_of_round(), counts, p)
    return table_binomial(u, counts, p, table, keys_of_round)

  rounds = jnp.arange(n, dtype=jnp.uint32)
  if b == 1:
    _, rest = lax.scan(lambda _, xs: (None, draw(xs[0], xs[1], others)), None, (rounds, uniforms))
    return rest.T.astype(jnp.int32)
  if spec.warm_start:
    history = stationary_history(spec, keys, params)  # column k − 1: joined in round −k
    # Round −k lives in slot (−k) mod (b − 1).
    slots = (-jnp.arange(1, b)) % (b - 1)
    buffer = jnp.zeros((b - 1, num), jnp.int64).at[slots].set(history.T)
  else:
    buffer = jnp.zeros((b - 1, num), jnp.int64)

  def step(carry, xs):
    buffer, blocked, leaving = carry
    i, u = xs
    draws = draw(i, u, others - blocked)
    buffer = lax.dynamic_update_index_in_dim(buffer, draws, i % (b - 1), axis=0)
    # Read the next leaving count *after* the write: reading the slot before overwriting it
    # made XLA copy the whole (b − 1, N) buffer every round (measured 6× slower at b = 256).
    upcoming = lax.dynamic_index_in_dim(buffer, (i + 1) % (b - 1), keepdims=False)
    return (buffer, blocked + draws - leaving, upcoming), draws

  _, rest = lax.scan(step, (buffer, jnp.sum(buffer, axis=0), buffer[0]), (rounds, uniforms))
  return rest.T.astype(jnp.int32)


def truncated_weights(x: jax.Array, rest: jax.Array, keys: jax.Array, params: SchemeParams,
                      direction: str) -> jax.Array:
  """The coefficients x^P (``remove``) or x^Q (``add``) of Corollary D.2, (N, n) int8.

  In a round where the sensitive example participates and r_i ≥ B (truncation),
  it survives w.p. t_i = B/(r_i + 1); then x^P = 2 and x^Q = −1. Without
  truncation x^P = 1, x^Q = 0; otherwise both are 0.
  """
  n = x.shape[1]
  words = jax.vmap(lambda k: jax.random.bits(jax.random.fold_in(k, 4), (n,), jnp.uint64))(keys)
  uniform = (words.astype(jnp.float64) + 0.5) * 2.0**-64
  bound = params.truncated_batch_size
  truncation = rest >= bound
  survives = uniform * (rest.astype(jnp.float64) + 1.0) < bound.astype(jnp.float64)
  kept = x & truncation & survives
  if direction == 'add':
    return jnp.where(kept, -1, 0).astype(jnp.int8)
  return jnp.where(kept, 2, jnp.where(x & ~truncation, 1, 0)).astype(jnp.int8)


def sample_mean(spec: KernelSpec, keys: jax.Array, params: SchemeParams,
                matrix, direction: str = 'remove'):
  """C·x of one draw of the sensitive example's participation per key, batch-major (N, n).

  Returns ``(C·x, r)``: r is the (N, n) int32 array of the other examples'
  batch sizes for truncated schemes (C·x is then C·x^P or C·x^Q of
  Corollary D.2 by ``direction``), ``None`` otherwise (``add`` then has no signal
  and callers skip this function). ``matrix`` is a ``BandedToeplitz`` or, for
  ``spec.dense``, ``lower_triangular.RMinSepTerms``.
  """
  if spec.dense:  # RMinSepTerms: C·x = x Cᵀ row-wise (seed 000 App. B; x is r-separated)
    entries = matrix.entries.astype(spec.dtype)
    x = bminsep_participation(spec, keys, params.sampling_prob).astype(spec.dtype)
    return jnp.matmul(x, entries.T, precision=lax.Precision.HIGHEST), None
  if spec.truncated:
    rest = rest_batch_sizes(spec, keys, params)
    x = bminsep_participation(spec, keys, params.sampling_prob)
    weights = truncated_weights(x, rest, keys, params, direction)
    return mean_of_separated_participations(weights, matrix.c_col), rest
  return _untruncated_mean(spec, keys, params.sampling_prob, matrix), None


def _untruncated_mean(spec: KernelSpec, keys: jax.Array, sampling_prob: jax.Array,
                      matrix: BandedToeplitz) -> jax.Array:
  c_col = matrix.c_col
  if spec.kind == 'balls_in_bins':
    bins = jax.vmap(lambda k: jax.random.randint(k, (), 0, spec.period))(_start_key(keys))
    return balls_in_bins_modes(spec.iterations, spec.period, c_col)[bins]
  if spec.multiplicity > 1:
    return mean_of_separated_participations(
        multi_attribution_participation(spec, keys, sampling_prob), c_col)
  sampler = {'bminsep': bminsep_participation,
             'cyclic_poisson': cyclic_poisson_participation}[spec.kind]
  return mean_of_separated_participations(sampler(spec, keys, sampling_prob), c_col)


def multiplicity_log_weights(sampling_prob: jax.Array, multiplicity: int) -> tuple[jax.Array,
                                                                                   jax.Array]:
  """(log p_u, log of the zero-truncated Binomial(k_u, p) pmf at j = 1 … k_u), float64.

  p_u = 1 − (1 − p)^{k_u} = Pr[Binomial(k_u, p) ≥ 1] (seed 000 Theorem 6.1).
  """
  k = multiplicity
  log_q = jnp.log1p(-sampling_prob)
  log_p_u = jnp.log(-jnp.expm1(k * log_q))
  j = jnp.arange(1, k + 1, dtype=jnp.float64)
  log_choose = (jax.scipy.special.gammaln(k + 1.0) - jax.scipy.special.gammaln(j + 1.0)
                - jax.scipy.special.gammaln(k - j + 1.0))
  # (k − j)·log(1 − p) is 0·(−inf) = nan at p = 1 for j = k: use where.
  log_pmf = log_choose + j * jnp.log(sampling_prob) + jnp.where(j < k, (k - j) * log_q, 0.0)
  return log_p_u, log_pmf - log_p_u


def multi_attribution_participation(spec: KernelSpec, keys: jax.Array,
                                    sampling_prob: jax.Array) -> jax.Array:
  """A user's participation counts x under Theorem 6.1's model, batch-major int (N, n).

  The user's participation rounds are cold-start b-min-sep with p_u (geometric
  gaps, ``bminsep_participation``); each carries an independent
  zero-truncated Binomial(k_u, p) count, drawn by inversion of its k_u-entry CDF.
  """
  log_p_u, log_weights = multiplicity_log_weights(sampling_prob, spec.multiplicity)
  rounds = bminsep_participation(spec, keys, jnp.exp(log_p_u))
  words = jax.vmap(lambda k: jax.random.bits(jax.random.fold_in(k, 6), (spec.iterations,),
                                             jnp.uint64))(keys)
  uniform = ((words >> 11).astype(jnp.float64) + 0.5) * 2.0**-53
  cdf = jnp.cumsum(jnp.exp(log_weights))[:-1]  # Pr[count ≤ j], j = 1 … k_u − 1
  counts = 1 + jnp.sum(uniform[..., None] > cdf, axis=-1)
  return jnp.where(rounds, counts, 0)
