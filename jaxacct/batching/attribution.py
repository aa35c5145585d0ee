"""Attribution graphs (example → users) and greedy contribution bounding.

Host code (NumPy, scipy.sparse), no JAX. The graph is public under
fixed-graph adjacency (one user's examples all replaced by ⊥; arXiv
2503.03622 §2, Dong & Ganesh (2026) §6), so preprocessing that reads only the graph
costs no privacy.

Storage and cost: the incidence matrix A (examples × users) in CSR form,
``users[indptr[e]:indptr[e + 1]]`` = U(e) sorted without repeats, plus the
transpose (D_u per user), built lazily: O(num_examples + num_users + edges)
int64 words. N(e) = {e' : U(e') ∩ U(e) ≠ ∅} ∪ {e} is the pattern of A·Aᵀ
(plus the diagonal), which costs Σ_u |D_u|² multiply-adds
(``neighbourhood_cost``, also a bound on its entries). On a power-law graph a
user with d examples contributes d², so the raw graph can be expensive, the
bounded one (|D_u| ≤ k_u, cost ≤ k_u · edges) never is. Products run in row
blocks of ≲ ``_BLOCK_COST`` multiply-adds (bounded memory); the full boolean N
takes ≈ 5 bytes per entry.

Contribution bounding is the greedy baseline of arXiv 2503.03622 (§4,
Algorithm 2; jax_privacy's ``greedy_contribution_bound`` implements it for
k = 1): visit examples in ascending |U(e)| and keep one iff each of its users
has fewer than k_u kept examples. Ties are ordered uniformly at random from
the caller's ``rng``: a deterministic function of graph and seed. An example
is kept at most once (the paper's with-duplicates variant, used in Dong & Ganesh
(2026) §7.3, is not implemented). The optional k_e (Dong & Ganesh (2026) App. C)
bounds |N(e)| in the *kept* graph, the one Algorithm 3 samples from: e is kept only if
afterwards every kept e' (e included) has |N(e')| ≤ k_e. Both bounds are
downward closed, so the result is maximal: no dropped example can be added
back without violating one. k_e is a utility knob (a large N(e) blocks many
examples in Algorithm 3); the privacy analysis (Theorem 6.1) uses k_u only.

References:
  A. Ganesh, R. McKenna, B. McMahan, A. Smith, F. Wu, "It's My Data Too:
  Private ML for Datasets with Multi-User Training Examples", arXiv 2503.03622
  (ICML 2025): fixed-graph DP (§2), greedy contribution bounding (§4, Alg. 2).
  Andy Dong and Arun Ganesh, "Privacy Amplification for BandMF via b-Min-Sep Subsampling",
  arXiv:2602.09338 (v2): §6 (fixed-graph adjacency, k_u), §6.1 (N(e), Algorithm 3), §6.2 (Theorem
  6.1), §7.3, App. C (k_e, rule of thumb b·p·k_e < 1) (docs/references.md).
"""

from __future__ import annotations

import collections
import dataclasses
import functools
import itertools
import math
import numbers
from collections.abc import Iterable, Iterator, Sequence
from typing import Any

import numpy as np
import scipy.sparse

from jaxacct import _validate
from jaxacct.errors import InputError, InputTypeError

# Multiply-adds of A·Aᵀ per row block: bounds the peak memory of the product
# (≈ 12 bytes per multiply-add for scipy's output arrays, so ≈ 100 MB).
_BLOCK_COST = 1 << 23

_KEPT, _OVER_USER_BUDGET, _OVER_NEIGHBOURHOOD_BOUND = 0, 1, 2


def _id_array(name: str, values: Any) -> np.ndarray:
  """Returns ``values`` as a 1-D int64 array of non-negative ids."""
  array = np.asarray(values)
  if array.ndim != 1:
    raise InputError(f'{name} must be a 1-D sequence of integer ids, got shape {array.shape}')
  if array.size == 0:
    return np.zeros(0, dtype=np.int64)
  if array.dtype == np.bool_ or array.dtype.kind not in 'iu':
    raise InputTypeError(f'{name} must hold integers, got dtype {array.dtype}')
  if array.dtype.kind == 'i' and array.min() < 0:
    position = int(np.argmax(array < 0))
    raise InputError(f'{name} must be >= 0, got {array[position]} at position {position}')
  return array.astype(np.int64, copy=False)


def _check_below(name: str, ids: np.ndarray, bound: int, bound_name: str) -> None:
  if ids.size and ids.max() >= bound:
    position = int(np.argmax(ids >= bound))
    raise InputError(f'{name} must be in [0, {bound_name}) = [0, {bound}), '
                     f'got {ids[position]} at position {position}')


def _index(name: str, value: Any, size: int, size_name: str) -> int:
  value = _validate.integer_at_least(name, value, 0)
  if value >= size:
    raise InputError(f'{name} must be in [0, {size_name}) = [0, {size}), got {value}')
  return value


def _read_only(array: np.ndarray) -> np.ndarray:
  array.flags.writeable = False
  return array


def _as_generator(rng: Any) -> np.random.Generator:
  if isinstance(rng, np.random.Generator):
    return rng
  if isinstance(rng, numbers.Integral) and not isinstance(rng, bool):
    if rng < 0:
      raise InputError(f'rng must be a non-negative int seed or a Generator, got {rng}')
    return np.random.default_rng(int(rng))
  raise InputTypeError('rng must be a numpy.random.Generator or a non-negative int seed, got '
                  f'{rng!r} (there is no default: pass a seed so the selection is reproducible)')


@dataclasses.dataclass(frozen=True, kw_only=True, eq=False)
class AttributionGraph:
  """Immutable example → users hypergraph in CSR form.

  Build it with ``from_user_lists`` or ``from_edges``, which sort and merge
  repeated (example, user) pairs (U(e) is a set); the constructor expects
  canonical CSR and checks it. Arrays are copied and made read-only; equality
  is identity (``eq=False``). Ids are ``0 … num_examples − 1`` and
  ``0 … num_users − 1``; users without examples are allowed.

  Examples without users are refused unless ``allow_unattributed=True``: no
  user's bound covers them (fixed-graph adjacency never replaces them), so
  they usually mean a missing attribution (jax_privacy's ``MultiOwnerGraph``
  refuses them too). When allowed, N(e) = {e} and bounding keeps them.

  >>> g = AttributionGraph.from_user_lists([[0, 1], [1], [2]])
  >>> g.neighbourhood(0).tolist(), g.max_neighbourhood_size
  ([0, 1], 2)

  Attributes:
    indptr: int64, shape ``(num_examples + 1,)``; ``indptr[0] = 0``.
    users: int64, shape ``(num_edges,)``, strictly increasing within each row.
    num_users: number of user ids.
    allow_unattributed: whether examples with no users are accepted.

  References:
    arXiv 2503.03622 §2 (multi-attribution, fixed-graph DP); Dong & Ganesh
    (2026) §6.1 (N(e), Algorithm 3 line 1).
  """

  indptr: np.ndarray
  users: np.ndarray
  num_users: int
  allow_unattributed: bool = False

  def __post_init__(self):
    num_users = _validate.integer_at_least('num_users', self.num_users, 0)
    indptr = np.array(_id_array('indptr', self.indptr), dtype=np.int64)
    users = np.array(_id_array('users', self.users), dtype=np.int64)
    if indptr.size == 0 or indptr[0] != 0 or indptr[-1] != users.size:
      raise InputError('indptr must have num_examples + 1 entries, start at 0 and end at '
                       f'len(users) = {users.size}, got {indptr[:3]}…{indptr[-3:]}')
    degrees = np.diff(indptr)
    if np.any(degrees < 0):
      raise InputError('indptr must be non-decreasing')
    _check_below('users', users, num_users, 'num_users')
    row_start = np.zeros(users.size, dtype=bool)
    row_start[indptr[:-1][degrees > 0]] = True
    if np.any((np.diff(users) <= 0) & ~row_start[1:]):
      raise InputError('users must be strictly increasing within each example (sorted, no '
                       'repeats); from_user_lists and from_edges sort and de-duplicate')
    if not self.allow_unattributed and np.any(degrees == 0):
      empty = np.flatnonzero(degrees == 0)
      raise InputError(
          f'{empty.size} example(s) have no users, e.g. {empty[:10].tolist()}; no user\'s '
          'bound covers an unattributed example (fixed-graph adjacency never replaces it). '
          'Pass allow_unattributed=True if that is intended.')
    object.__setattr__(self, 'indptr', _read_only(indptr))
    object.__setattr__(self, 'users', _read_only(users))
    object.__setattr__(self, 'num_users', num_users)
    object.__setattr__(self, 'allow_unattributed', bool(self.allow_unattributed))

  @classmethod
  def from_user_lists(cls, user_lists: Iterable[Sequence[int]], *, num_users: int | None = None,
                      allow_unattributed: bool = False) -> AttributionGraph:
    """Builds the graph from ``user_lists[e]`` = the user ids of example e.

    Repeats are merged; ``num_users`` defaults to ``max id + 1``. Raises
    ``TypeError`` for non-integer ids and ``ValueError`` for negative or
    out-of-range ids and (without ``allow_unattributed``) empty lists.
    """
    try:
      lists = list(user_lists)
      lengths = np.fromiter((len(x) for x in lists), dtype=np.int64, count=len(lists))
    except TypeError as error:
      raise InputTypeError('user_lists must be a sequence holding one sequence of user ids per '
                      f'example, got {type(user_lists).__name__}: {error}') from error
    flat = _id_array('user_lists (flattened)', list(itertools.chain.from_iterable(lists)))
    examples = np.repeat(np.arange(len(lists), dtype=np.int64), lengths)
    return cls._from_edges(examples, flat, len(lists), num_users, allow_unattributed,
                           'user ids in user_lists')

  @classmethod
  def from_edges(cls, example_ids: Any, user_ids: Any, *, num_examples: int | None = None,
                 num_users: int | None = None,
                 allow_unattributed: bool = False) -> AttributionGraph:
    """Builds the graph from aligned edges ``(example_ids[i], user_ids[i])``.

    Repeated pairs are merged; ``num_examples`` and ``num_users`` default to
    ``max id + 1`` (examples without edges need ``allow_unattributed``).
    Raises ``TypeError`` for non-integer ids and ``ValueError`` for unequal
    lengths, negative or out-of-range ids, or unattributed examples.
    """
    examples = _id_array('example_ids', example_ids)
    users = _id_array('user_ids', user_ids)
    if examples.shape != users.shape:
      raise InputError('example_ids and user_ids must have the same length, got '
                       f'{examples.size} and {users.size}')
    if num_examples is None:
      num_examples = int(examples.max()) + 1 if examples.size else 0
    num_examples = _validate.integer_at_least('num_examples', num_examples, 0)
    _check_below('example_ids', examples, num_examples, 'num_examples')
    return cls._from_edges(examples, users, num_examples, num_users, allow_unattributed,
                           'user_ids')

  @classmethod
  def _from_edges(cls, examples, users, num_examples, num_users, allow_unattributed,
                  users_name) -> AttributionGraph:
    if num_users is None:
      num_users = int(users.max()) + 1 if users.size else 0
    num_users = _validate.integer_at_least('num_users', num_users, 0)
    _check_below(users_name, users, num_users, 'num_users')
    order = np.lexsort((users, examples))
    examples, users = examples[order], users[order]
    distinct = np.ones(users.size, dtype=bool)
    distinct[1:] = (examples[1:] != examples[:-1]) | (users[1:] != users[:-1])
    examples, users = examples[distinct], users[distinct]
    indptr = np.zeros(num_examples + 1, dtype=np.int64)
    np.cumsum(np.bincount(examples, minlength=num_examples), out=indptr[1:])
    return cls(indptr=indptr, users=users, num_users=num_users,
               allow_unattributed=allow_unattributed)

  @property
  def num_examples(self) -> int:
    return self.indptr.size - 1

  @property
  def num_edges(self) -> int:
    return self.users.size

  @functools.cached_property
  def example_degrees(self) -> np.ndarray:
    """|U(e)| for every example, int64 ``(num_examples,)``."""
    return _read_only(np.diff(self.indptr))

  @functools.cached_property
  def user_degrees(self) -> np.ndarray:
    """|D_u| for every user, int64 ``(num_users,)``."""
    return _read_only(np.bincount(self.users, minlength=self.num_users).astype(np.int64))

  @functools.cached_property
  def user_indptr(self) -> np.ndarray:
    """Transpose CSR row pointers: D_u = ``user_examples[user_indptr[u]:user_indptr[u + 1]]``."""
    return _read_only(np.concatenate([[0], np.cumsum(self.user_degrees)]))

  @functools.cached_property
  def user_examples(self) -> np.ndarray:
    """Transpose CSR column indices (example ids, ascending within each user)."""
    edge_example = np.repeat(np.arange(self.num_examples, dtype=np.int64), self.example_degrees)
    return _read_only(edge_example[np.argsort(self.users, kind='stable')])

  def users_of(self, example: int) -> np.ndarray:
    """U(e): the sorted user ids of ``example`` (a read-only view)."""
    e = _index('example', example, self.num_examples, 'num_examples')
    return self.users[self.indptr[e]:self.indptr[e + 1]]

  def examples_of(self, user: int) -> np.ndarray:
    """D_u: the sorted example ids of ``user`` (a read-only view)."""
    u = _index('user', user, self.num_users, 'num_users')
    return self.user_examples[self.user_indptr[u]:self.user_indptr[u + 1]]

  def neighbourhood(self, example: int) -> np.ndarray:
    """N(e) = {e' : U(e') ∩ U(e) ≠ ∅} ∪ {e}, sorted; cost Σ_{u ∈ U(e)} |D_u|."""
    e = _index('example', example, self.num_examples, 'num_examples')
    parts = [self.examples_of(u) for u in self.users_of(e).tolist()]
    return np.unique(np.concatenate(parts + [np.array([e], dtype=np.int64)]))

  @functools.cached_property
  def incidence_matrix(self) -> scipy.sparse.csr_array:
    """A: ``(num_examples, num_users)`` CSR with ``A[e, u] = 1`` iff u ∈ U(e) (int32)."""
    return scipy.sparse.csr_array(
        (np.ones(self.num_edges, dtype=np.int32), self.users, self.indptr),
        shape=(self.num_examples, self.num_users))

  @functools.cached_property
  def neighbourhood_cost(self) -> int:
    """Σ_u |D_u|²: multiply-adds of A·Aᵀ and an upper bound on Σ_e |N(e)| for attributed e."""
    return int(np.dot(self.user_degrees, self.user_degrees))

  def _neighbourhood_blocks(self) -> Iterator[tuple[int, int, scipy.sparse.csr_array]]:
    """Yields ``(start, stop, A[start:stop]·Aᵀ)`` with ≲ ``_BLOCK_COST`` multiply-adds each."""
    a = self.incidence_matrix
    a_t = scipy.sparse.csr_array(
        (np.ones(self.num_edges, dtype=np.int32), self.user_examples, self.user_indptr),
        shape=(self.num_users, self.num_examples))
    row_cost = np.cumsum(a @ self.user_degrees)
    start = 0
    while start < self.num_examples:
      done = row_cost[start - 1] if start else 0
      stop = max(int(np.searchsorted(row_cost, done + _BLOCK_COST, side='right')), start + 1)
      yield start, stop, a[start:stop] @ a_t
      start = stop

  @functools.cached_property
  def neighbourhood_sizes(self) -> np.ndarray:
    """|N(e)| for every example, int64; time Σ_u |D_u|², memory one row block."""
    sizes = np.ones(self.num_examples, dtype=np.int64)
    for start, stop, block in self._neighbourhood_blocks():
      sizes[start:stop] = np.maximum(np.diff(block.indptr), 1)
    return _read_only(sizes)

  @property
  def max_neighbourhood_size(self) -> int:
    """max_e |N(e)| (0 for an empty graph)."""
    return int(self.neighbourhood_sizes.max()) if self.num_examples else 0

  def neighbourhood_matrix(self, *, max_entries: int = 10**8) -> scipy.sparse.csr_array:
    """All N(e) as a boolean ``(num_examples, num_examples)`` CSR matrix (row e = N(e)).

    Column indices are sorted and the diagonal is set. ≈ 5 bytes per entry;
    ``neighbourhood_sizes.sum()`` ≤ ``neighbourhood_cost`` + unattributed
    entries. Raises ``ValueError`` as soon as more than ``max_entries`` would
    be stored (use ``neighbourhood_sizes`` for sizes only).
    """
    max_entries = _validate.integer_at_least('max_entries', max_entries, 0)
    indptr_parts, index_parts, total = [np.zeros(1, dtype=np.int64)], [], 0
    unattributed = self.example_degrees == 0
    for start, stop, block in self._neighbourhood_blocks():
      if np.any(unattributed[start:stop]):
        rows = np.flatnonzero(unattributed[start:stop])
        block = block + scipy.sparse.csr_array(
            (np.ones(rows.size, dtype=np.int32), (rows, rows + start)), shape=block.shape)
      block.sort_indices()
      if total + block.nnz > max_entries:
        raise InputError(f'the neighbourhood matrix has more than max_entries={max_entries} '
                         f'entries (neighbourhood_cost = {self.neighbourhood_cost}); raise '
                         'max_entries, bound contributions first, or use neighbourhood_sizes')
      indptr_parts.append(block.indptr[1:].astype(np.int64) + total)
      index_parts.append(block.indices)
      total += block.nnz
    indices = np.concatenate(index_parts) if index_parts else np.zeros(0, dtype=np.int32)
    return scipy.sparse.csr_array(
        (np.ones(total, dtype=bool), indices, np.concatenate(indptr_parts)),
        shape=(self.num_examples, self.num_examples))

  def restrict(self, example_ids: Any) -> AttributionGraph:
    """The subgraph on ``example_ids`` (distinct), re-indexed: new example i = ``example_ids[i]``.

    User ids are unchanged (``num_users`` too), so users may be left without
    examples.
    """
    ids = _id_array('example_ids', example_ids)
    _check_below('example_ids', ids, self.num_examples, 'num_examples')
    if np.unique(ids).size != ids.size:
      raise InputError('example_ids must be distinct')
    lengths = self.example_degrees[ids]
    indptr = np.zeros(ids.size + 1, dtype=np.int64)
    np.cumsum(lengths, out=indptr[1:])
    edges = np.repeat(self.indptr[ids] - indptr[:-1], lengths) + np.arange(indptr[-1])
    return AttributionGraph(indptr=indptr, users=self.users[edges], num_users=self.num_users,
                            allow_unattributed=self.allow_unattributed)


@dataclasses.dataclass(frozen=True, kw_only=True, eq=False)
class BoundedAttribution:
  """Result of ``bound_contributions``: the kept examples and why others were dropped.

  Example i of ``graph`` is original example ``kept_example_ids[i]``; users
  keep their ids. All id arrays are sorted, read-only, int64, and
  ``kept_example_ids``, ``dropped_over_user_budget`` and
  ``dropped_over_neighbourhood_bound`` partition the original examples.

  Attributes:
    graph: the bounded graph, every user with ≤ k_u examples and (if k_e is
      set) every example with |N(e)| ≤ k_e.
    kept_example_ids: original ids of the kept examples.
    dropped_over_user_budget: dropped because, at their turn, one of their
      users already had k_u kept examples.
    dropped_over_neighbourhood_bound: dropped because keeping them would have
      made |N(e')| > k_e for them or a kept neighbour e' (user budgets were
      fine at their turn).
    processing_order: the greedy order (original ids, |U(e)| non-decreasing).
    max_examples_per_user: k_u.
    max_neighbourhood_size: k_e, or None.
  """

  graph: AttributionGraph
  kept_example_ids: np.ndarray
  dropped_over_user_budget: np.ndarray
  dropped_over_neighbourhood_bound: np.ndarray
  processing_order: np.ndarray
  max_examples_per_user: int
  max_neighbourhood_size: int | None

  @property
  def num_original_examples(self) -> int:
    return self.processing_order.size

  @property
  def num_kept(self) -> int:
    return self.kept_example_ids.size

  def original_ids(self, bounded_ids: Any) -> np.ndarray:
    """Maps example ids of ``graph`` back to the original graph."""
    ids = _id_array('bounded_ids', bounded_ids)
    _check_below('bounded_ids', ids, self.num_kept, 'num_kept')
    return self.kept_example_ids[ids]

  def bounded_ids(self, original_ids: Any) -> np.ndarray:
    """Maps kept original example ids to ids of ``graph``; dropped ids are an error."""
    ids = _id_array('original_ids', original_ids)
    _check_below('original_ids', ids, self.num_original_examples, 'num_original_examples')
    positions = np.searchsorted(self.kept_example_ids, ids)
    found = positions < self.num_kept
    found[found] = self.kept_example_ids[positions[found]] == ids[found]
    if not np.all(found):
      raise InputError(f'original_ids holds dropped examples, e.g. {ids[~found][:10].tolist()}')
    return positions


def bound_contributions(graph: AttributionGraph, *, max_examples_per_user: int,
                        max_neighbourhood_size: int | None = None,
                        rng: np.random.Generator | int) -> BoundedAttribution:
  """Greedy contribution bounding: ≤ k_u kept examples per user, optionally |N(e)| ≤ k_e.

  Visits the examples in ascending order of |U(e)|, ties in a uniformly
  random order drawn from ``rng``, and keeps example e iff every u ∈ U(e)
  has fewer than k_u kept examples (arXiv 2503.03622, Algorithm 2) and, with
  k_e set, after keeping e every kept e' sharing a user with e, and e
  itself, has |N(e')| ≤ k_e in the kept graph (Dong & Ganesh (2026) App. C). The kept
  set is maximal. Unattributed examples (``allow_unattributed``) are kept.
  Cost: a sort plus a Python loop, ≈ 2.5 s per 10⁶ examples (≈ 2× with k_e).

  >>> g = AttributionGraph.from_user_lists([[0], [0, 1], [1]])
  >>> r = bound_contributions(g, max_examples_per_user=1, rng=0)
  >>> r.kept_example_ids.tolist(), r.dropped_over_user_budget.tolist()
  ([0, 2], [1])

  Args:
    graph: the attribution graph.
    max_examples_per_user: k_u ≥ 1 (k_u = 0 would drop every attributed
      example and is refused).
    max_neighbourhood_size: k_e ≥ 1, or None for no neighbourhood bound
      (``rule_of_thumb_max_neighbourhood_size`` suggests a value).
    rng: ``np.random.Generator`` (advanced) or int seed ≥ 0; no default.

  Returns:
    A ``BoundedAttribution``.

  Raises:
    TypeError: ``graph`` is not an ``AttributionGraph``, a bound is not an
      integer, or ``rng`` is neither a Generator nor an int.
    ValueError: a bound < 1 or a negative seed.

  References:
    arXiv 2503.03622 §4, Algorithm 2 (jax_privacy ``greedy_contribution_bound``:
    k = 1, ascending |U(e)|, ties by id); Dong & Ganesh (2026) §6.2 (k_u),
    App. C (k_e).
  """
  if not isinstance(graph, AttributionGraph):
    raise InputTypeError(f'graph must be an AttributionGraph, got {type(graph).__name__}')
  k_u = _validate.integer_at_least('max_examples_per_user', max_examples_per_user, 1)
  k_e = (None if max_neighbourhood_size is None else
         _validate.integer_at_least('max_neighbourhood_size', max_neighbourhood_size, 1))
  rng = _as_generator(rng)
  permutation = rng.permutation(graph.num_examples)
  order = permutation[np.argsort(graph.example_degrees[permutation], kind='stable')]
  status = _greedy(graph.indptr.tolist(), graph.users.tolist(), order.tolist(),
                   graph.num_users, k_u, k_e)
  kept = np.flatnonzero(status == _KEPT)
  return BoundedAttribution(
      graph=graph.restrict(kept),
      kept_example_ids=_read_only(kept),
      dropped_over_user_budget=_read_only(np.flatnonzero(status == _OVER_USER_BUDGET)),
      dropped_over_neighbourhood_bound=_read_only(
          np.flatnonzero(status == _OVER_NEIGHBOURHOOD_BOUND)),
      processing_order=_read_only(order.astype(np.int64)),
      max_examples_per_user=k_u, max_neighbourhood_size=k_e)


def _greedy(indptr: list[int], users: list[int], order: list[int], num_users: int, k_u: int,
            k_e: int | None) -> np.ndarray:
  """The sequential greedy on Python lists (faster than NumPy per element); per-example status."""
  status = np.full(len(indptr) - 1, _KEPT, dtype=np.int8)
  kept_count = [0] * num_users
  kept_of_user = collections.defaultdict(list)  # only filled when k_e is set
  size = [0] * (len(indptr) - 1)  # |N(e)| in the kept graph, for kept e
  for e in order:
    us = users[indptr[e]:indptr[e + 1]]
    if any(kept_count[u] >= k_u for u in us):
      status[e] = _OVER_USER_BUDGET
      continue
    if k_e is not None:
      neighbours = set()
      for u in us:
        neighbours.update(kept_of_user[u])
      # Keeping e adds exactly one example (e) to N(e') of each kept neighbour e'.
      if len(neighbours) + 1 > k_e or any(size[f] >= k_e for f in neighbours):
        status[e] = _OVER_NEIGHBOURHOOD_BOUND
        continue
      for f in neighbours:
        size[f] += 1
      size[e] = len(neighbours) + 1
      for u in us:
        kept_of_user[u].append(e)
    for u in us:
      kept_count[u] += 1
  return status


def rule_of_thumb_max_neighbourhood_size(*, min_sep: int, sampling_prob: float) -> int:
  """The largest k_e with b·p·k_e < 1 (Dong & Ganesh (2026) App. C).

  In App. C's toy model (one example shared by n single-user examples), each
  sampling of the shared example costs ≈ (1 − p)(b − 1)/(b − 1 + 1/p)·n batch
  slots against a gain of 1; for p ≈ 0 and 1/p ≫ b keeping an example pays
  off iff b·p·|N(e)| < 1. The paper calls this a very rough guide that
  ignores the graph structure; it found no batch-size gain from k_e on arXiv
  with k_u = 2.

  >>> rule_of_thumb_max_neighbourhood_size(min_sep=16, sampling_prob=0.01)
  6

  Args:
    min_sep: b ≥ 1.
    sampling_prob: p in (0, 1], with b·p < 1.

  Returns:
    An integer k_e ≥ 1.

  Raises:
    ValueError: b·p ≥ 1 (the rule assumes 1/p ≫ b).
  """
  b = _validate.integer_at_least('min_sep', min_sep, 1)
  p = _validate.probability('sampling_prob', sampling_prob)
  b_p = b * p
  if b_p >= 1:
    raise InputError('the rule of thumb b·p·k_e < 1 needs min_sep·sampling_prob < 1 (it assumes '
                     f'1/p ≫ b), got {b}·{p} = {b_p}')
  k_e = math.floor(1 / b_p)
  return k_e - 1 if b_p * k_e >= 1 else k_e


def synthetic_power_law_graph(num_examples: int, num_users: int, *,
                              rng: np.random.Generator | int, zipf_exponent: float = 2.5,
                              max_users_per_example: int = 30,
                              popularity_shape: float = 2.0) -> AttributionGraph:
  """A synthetic multi-author graph: heavy-tailed authors per paper and papers per author.

  Users per example are 1 + min(Zipf(``zipf_exponent``) − 1, max − 1) (mean
  ≈ 1.8 at 2.5, like co-authors per paper); each edge picks its user with
  probability ∝ a Pareto(``popularity_shape``) + 1 weight, so user degrees are
  heavy-tailed. For benchmarks and example configs (Dong & Ganesh (2026) §7.3 uses
  arXiv).
  """
  num_examples = _validate.integer_at_least('num_examples', num_examples, 1)
  num_users = _validate.integer_at_least('num_users', num_users, 1)
  cap = _validate.integer_at_least('max_users_per_example', max_users_per_example, 1)
  rng = _as_generator(rng)
  users_per_example = 1 + np.minimum(rng.zipf(zipf_exponent, num_examples) - 1, cap - 1)
  popularity = rng.pareto(popularity_shape, num_users) + 1.0
  user_ids = rng.choice(num_users, size=int(users_per_example.sum()),
                        p=popularity / popularity.sum())
  example_ids = np.repeat(np.arange(num_examples), users_per_example)
  return AttributionGraph.from_edges(example_ids, user_ids, num_examples=num_examples,
                                     num_users=num_users)
