"""Multi-attribution b-min-sep batch sampling (seed 000 §6.2, Algorithms 3 and 4), host code.

Every example belongs to a public set of users (``AttributionGraph``). An
example is *excluded* in round i when one of its users was *touched* in the
previous b − 1 rounds; a user is touched in round j when one of its examples is
in

- the interim sample S_j (``exclusion="sampled"``, Algorithm 3, whose
  accounting is Theorem 6.1), or
- the realised batch B_j (``exclusion="participated"``, Algorithm 4, whose
  accounting by Theorem 6.1 rests on the unproven Conjecture 6.2).

Both rules are "some user of e' shares a user with some e ∈ S_j (B_j)", i.e.
e' ∈ N(e), kept per user: each user stores the last round it was touched.
S_i includes every example independently with probability p; it is drawn as
a Binomial(m, p) count of uniformly chosen examples, so a round costs
O(|S_i|·users per example), not O(m).
"""

from __future__ import annotations

from typing import Iterator, Literal

import numpy as np

from jaxacct import _validate
from jaxacct.batching.attribution import AttributionGraph

Exclusion = Literal['sampled', 'participated']
EXCLUSIONS: tuple[str, ...] = ('sampled', 'participated')


def multi_attribution_batches(graph: AttributionGraph, *, sampling_prob: float, min_sep: int,
                              iterations: int, rng: np.random.Generator | int,
                              exclusion: Exclusion = 'sampled',
                              burn_in: int = 0) -> Iterator[np.ndarray]:
  """Yields the batches B_1, …, B_n of Algorithm 3 (or 4) as sorted int64 example ids.

  Args:
    graph: the public attribution graph (after contribution bounding).
    sampling_prob: p ∈ (0, 1], the interim sampling probability.
    min_sep: b ≥ 1: a user takes part at most once in any b consecutive rounds.
    iterations: n ≥ 1 batches yielded.
    rng: ``np.random.Generator`` or int seed (all randomness comes from it).
    exclusion: ``"sampled"`` (Algorithm 3) or ``"participated"`` (Algorithm 4).
    burn_in: rounds run and discarded first (the warm start of seed 000 §6.4;
      accounting it as a cold start is valid for Algorithm 3 because dropping
      a prefix is post-processing).

  References:
    Dong & Ganesh, arXiv 2602.09338v2, §6.2 (Algorithms 3 and 4), §6.4.
  """
  if not isinstance(graph, AttributionGraph):
    raise TypeError(f'graph must be a jaxacct.AttributionGraph, got {graph!r}')
  p = _validate.probability('sampling_prob', sampling_prob)
  b = _validate.integer_at_least('min_sep', min_sep, 1)
  n = _validate.integer_at_least('iterations', iterations, 1)
  burn_in = _validate.integer_at_least('burn_in', burn_in, 0)
  _validate.one_of('exclusion', exclusion, EXCLUSIONS)
  if isinstance(rng, (int, np.integer)) and not isinstance(rng, bool):
    rng = np.random.default_rng(_validate.integer_at_least('rng', rng, 0))
  if not isinstance(rng, np.random.Generator):
    raise TypeError(f'rng must be a np.random.Generator or an int seed, got {rng!r}')
  return _rounds(graph, p, b, n, rng, exclusion, burn_in)


def _rounds(graph, p, b, n, rng, exclusion, burn_in) -> Iterator[np.ndarray]:
  m = graph.num_examples
  indptr, users = graph.indptr, graph.users
  # Last round each user was touched; "never" is far enough back to be eligible.
  touched = np.full(graph.num_users, -b, dtype=np.int64)
  for i in range(burn_in + n):
    size = rng.binomial(m, p)
    sampled = np.sort(rng.choice(m, size=size, replace=False)) if size else np.zeros(0, np.int64)
    starts, ends = indptr[sampled], indptr[sampled + 1]
    counts = ends - starts
    # Users of each sampled example, flattened, with the example's position in ``sampled``.
    flat = users[np.repeat(starts, counts) + _ranges(counts)]
    owner = np.repeat(np.arange(sampled.size), counts)
    blocked_user = touched[flat] > i - b  # touched within rounds i − b + 1 … i − 1
    excluded = np.zeros(sampled.size, bool)
    np.logical_or.at(excluded, owner, blocked_user)
    batch = sampled[~excluded]
    if exclusion == 'sampled':
      touched[flat] = i
    else:
      touched[flat[~excluded[owner]]] = i
    if i >= burn_in:
      yield batch


def _ranges(counts: np.ndarray) -> np.ndarray:
  """Concatenation of arange(c) for c in counts."""
  total = int(counts.sum())
  if total == 0:
    return np.zeros(0, np.int64)
  offsets = np.repeat(np.cumsum(counts) - counts, counts)
  return np.arange(total, dtype=np.int64) - offsets
