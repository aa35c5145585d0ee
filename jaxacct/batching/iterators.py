"""Batch iterators that sample exactly what the accountant analysed (host code).

``batches(scheme, dataset_size, rng)`` yields the index batches of any
jaxacct sampling scheme, one per round, for ``scheme.iterations`` rounds:

==========================  =======================================================
scheme                      round i
==========================  =======================================================
``Poisson``                 every example independently with probability p
``BMinSep`` (cold / warm)   every *eligible* example with probability p; a sampled
                            example is ineligible for the next b − 1 rounds
                            (Alg. 1; Alg. 2 starts from the stationary state)
``BallsInBins``             the fixed bin i mod T (bins drawn once, uniformly)
``CyclicPoisson``           the group i mod T, each member with probability p
``MultiAttributionBMinSep`` Algorithm 3 / 4 on an attribution graph
==========================  =======================================================

Work per round is O(batch): a Binomial count of uniformly chosen examples (the
same law as independent coins), and for b-min-sep a pool of eligible examples
kept as a permutation with its inverse, so that drawing a batch and releasing
the batch of b − 1 rounds earlier are O(batch) swaps. Initialisation is O(m).

Fixed batch shapes for XLA: with ``batch_size=K`` every batch is padded to K
with a mask; a batch larger than K **raises** — cutting it would change the
mechanism — unless the scheme itself truncates (``truncated_batch_size``, which
then sets K), in which case a uniformly random subset of K examples is kept and
(b-min-sep) the examples cut away stay ineligible for b − 1 rounds, exactly as
seed 000 App. D and seed 001 assume.

References:
  Dong, Ganesh, arXiv 2602.09338v2, Algorithms 1–4, App. D; Ganesh, arXiv
  2508.15089 (truncated Poisson); Choquette-Choo et al., NeurIPS 2023 (cyclic
  Poisson, balls-in-bins).
"""

from __future__ import annotations

import collections
import dataclasses
from typing import Iterator, NamedTuple

import numpy as np

from jaxacct import _validate, schemes
from jaxacct.batching.attribution import AttributionGraph
from jaxacct.batching.multi_attribution import multi_attribution_batches
from jaxacct.errors import InputError, InputTypeError


class Batch(NamedTuple):
  """One round's batch.

  Attributes:
    indices: int64 example ids, sorted; padded with 0 to the fixed batch size
      when there is one.
    mask: bool, True for real examples (same shape as ``indices``).
    size: the number of real examples.
  """

  indices: np.ndarray
  mask: np.ndarray
  size: int


def _generator(rng) -> np.random.Generator:
  if isinstance(rng, np.random.Generator):
    return rng
  if isinstance(rng, (int, np.integer)) and not isinstance(rng, bool) and rng >= 0:
    return np.random.default_rng(int(rng))
  raise InputTypeError(f'rng must be a np.random.Generator or a non-negative int seed, got {rng!r}')


def _seed_sequence(generator: np.random.Generator) -> np.random.SeedSequence:
  """A child seed sequence of ``generator`` (advances its spawn counter, not its stream)."""
  seed = getattr(generator.bit_generator, 'seed_seq', None)
  if isinstance(seed, np.random.SeedSequence):
    return seed.spawn(1)[0]
  return np.random.SeedSequence(generator.integers(0, 2**63, size=4))


class _EligiblePool:
  """The eligible examples as the prefix ``order[:size]`` of a permutation of range(m).

  ``position`` is the inverse permutation. Drawing k examples moves them to the
  end of the prefix and shrinks it; releasing moves them to just after it and
  grows it: O(k log k) swaps each, independent of m.
  """

  def __init__(self, m: int):
    dtype = np.int32 if m < 2**31 else np.int64
    self.order = np.arange(m, dtype=dtype)
    self.position = np.arange(m, dtype=dtype)
    self.size = m

  def _gather_into(self, positions: np.ndarray, start: int) -> None:
    """Permutes so that the entries at ``positions`` occupy [start, start + len(positions))."""
    count = positions.size
    inside = (positions >= start) & (positions < start + count)
    movers = positions[~inside]
    free = np.setdiff1d(np.arange(start, start + count), positions[inside], assume_unique=True)
    leaving, arriving = self.order[movers], self.order[free]
    self.order[movers], self.order[free] = arriving, leaving
    self.position[arriving], self.position[leaving] = movers, free

  def draw(self, count: int, rng: np.random.Generator) -> np.ndarray:
    positions = rng.choice(self.size, count, replace=False)
    chosen = self.order[positions].astype(np.int64)
    self._gather_into(positions, self.size - count)
    self.size -= count
    return chosen

  def release(self, ids: np.ndarray) -> None:
    self._gather_into(self.position[ids].astype(np.int64), self.size)
    self.size += ids.size


def _uniform_subset(ids: np.ndarray, count: int, rng: np.random.Generator) -> np.ndarray:
  return ids if ids.size <= count else ids[rng.choice(ids.size, count, replace=False)]


def _poisson_rounds(scheme: schemes.Poisson, m: int, rng) -> Iterator[np.ndarray]:
  p = float(scheme.sampling_prob)
  for _ in range(scheme.iterations):
    yield rng.choice(m, rng.binomial(m, p), replace=False).astype(np.int64)


def _bminsep_rounds(scheme: schemes.BMinSep, m: int, rng) -> Iterator[np.ndarray]:
  """The sampled sets S_i; all of S_i is blocked for b − 1 rounds, also what truncation cuts."""
  p, b = float(scheme.sampling_prob), scheme.min_sep
  pool = _EligiblePool(m)
  blocked: collections.deque = collections.deque()
  if scheme.warm_start and b > 1:
    # Algorithm 2's stationary state: eligible w.p. 1/(1 + (b−1)p), else sampled in one of
    # the b − 1 previous rounds, each w.p. p/(1 + (b−1)p).
    weights = np.array([1.0] + [p] * (b - 1)) / (1.0 + (b - 1) * p)
    counts = rng.multinomial(m, weights)
    for count in counts[1:]:
      blocked.append(pool.draw(int(count), rng))
  for _ in range(scheme.iterations):
    sampled = pool.draw(int(rng.binomial(pool.size, p)), rng)
    blocked.append(sampled)
    if len(blocked) > b - 1:
      pool.release(blocked.popleft())  # sampled b − 1 rounds ago: eligible next round
    yield sampled


def _groups(assignment: np.ndarray, count: int) -> list[np.ndarray]:
  order = np.argsort(assignment, kind='stable')
  bounds = np.concatenate([[0], np.cumsum(np.bincount(assignment, minlength=count))])
  return [order[bounds[g]:bounds[g + 1]].astype(np.int64) for g in range(count)]


def _balls_in_bins_rounds(scheme: schemes.BallsInBins, m: int, rng) -> Iterator[np.ndarray]:
  bins = _groups(rng.integers(scheme.cycle_length, size=m), scheme.cycle_length)
  for i in range(scheme.iterations):
    yield bins[i % scheme.cycle_length]


def _cyclic_poisson_rounds(scheme: schemes.CyclicPoisson, m: int, rng) -> Iterator[np.ndarray]:
  t, p = scheme.cycle_length, float(scheme.sampling_prob)
  if scheme.partition == 'equal_split':
    permutation = rng.permutation(m)
    groups = [permutation[g::t].astype(np.int64) for g in range(t)]  # sizes ⌊m/T⌋ or ⌈m/T⌉
  else:
    groups = _groups(rng.integers(t, size=m), t)
  for i in range(scheme.iterations):
    group = groups[i % t]
    yield group[rng.choice(group.size, rng.binomial(group.size, p), replace=False)]


@dataclasses.dataclass(frozen=True, eq=False)
class BatchIterator:
  """Re-iterable batches of ``scheme`` over ``dataset_size`` examples (see ``batches``).

  Every ``iter()`` replays the same batches: the iterator holds one seed
  sequence (spawned from ``rng`` once, at construction) and each pass starts a
  fresh generator from it. A resumed loop that skips the first t batches thus
  continues the very run it interrupted (mixing rounds of two different runs
  would break the min-sep the accountant assumes). For another run, build a
  new iterator.
  """

  scheme: schemes.SamplingScheme
  dataset_size: int
  seed: np.random.SeedSequence
  batch_size: int | None
  graph: AttributionGraph | None = None

  @property
  def iterations(self) -> int:
    return self.scheme.iterations

  def __len__(self) -> int:
    return self.scheme.iterations

  def _sampled(self, rng: np.random.Generator) -> Iterator[np.ndarray]:
    return _ROUND_SAMPLERS[type(self.scheme)](self.scheme, self.dataset_size, rng, self.graph)

  def _rounds(self, rng: np.random.Generator) -> Iterator[np.ndarray]:
    keep = self.scheme.truncated_batch_size if self.scheme.truncates else None
    for sampled in self._sampled(rng):
      yield sampled if keep is None else _uniform_subset(sampled, keep, rng)

  def __iter__(self) -> Iterator[Batch]:
    capacity = self.batch_size
    for i, ids in enumerate(self._rounds(np.random.default_rng(self.seed))):
      ids = np.sort(ids)
      if capacity is None:
        yield Batch(ids, np.ones(ids.size, bool), int(ids.size))
        continue
      if ids.size > capacity:
        raise RuntimeError(
            f'round {i}: the batch has {ids.size} examples, more than batch_size = {capacity}. '
            f'{type(self.scheme).__name__} without truncated_batch_size is accounted with every '
            'sampled example, so the batch cannot be cut: raise batch_size, or use a scheme with '
            'truncated_batch_size (and its truncated accountant)')
      padded = np.zeros(capacity, np.int64)
      padded[:ids.size] = ids
      yield Batch(padded, np.arange(capacity) < ids.size, int(ids.size))


def _multi_attribution_rounds(scheme: schemes.MultiAttributionBMinSep, m: int, rng,
                              graph) -> Iterator[np.ndarray]:
  del m  # the graph's examples
  return multi_attribution_batches(
      graph, sampling_prob=scheme.sampling_prob, min_sep=scheme.min_sep,
      iterations=scheme.iterations, rng=rng, exclusion=scheme.exclusion)


def _without_graph(rounds):
  return lambda scheme, m, rng, graph: rounds(scheme, m, rng)


# The round sampler of each scheme (schemes are final classes): a new scheme adds one entry.
_ROUND_SAMPLERS = {
    schemes.Poisson: _without_graph(_poisson_rounds),
    schemes.BMinSep: _without_graph(_bminsep_rounds),
    schemes.BallsInBins: _without_graph(_balls_in_bins_rounds),
    schemes.CyclicPoisson: _without_graph(_cyclic_poisson_rounds),
    schemes.MultiAttributionBMinSep: _multi_attribution_rounds,
}


def batches(scheme: schemes.SamplingScheme, dataset_size: int, rng, *,
            batch_size: int | None = None, graph: AttributionGraph | None = None
            ) -> BatchIterator:
  """Batches of ``scheme`` over examples 0 … dataset_size − 1 (module docstring for the laws).

  Args:
    scheme: any jaxacct sampling scheme (the one given to the accountant).
    dataset_size: m; must equal ``scheme.dataset_size`` for a truncating scheme,
      and ``graph.num_examples`` for multi-attribution.
    rng: ``np.random.Generator`` or int seed (for independent streams pass
      generators from ``np.random.Generator.spawn``). The batches are
      secret in a private run: use OS entropy (``np.random.default_rng()``), not
      a published seed.
    batch_size: fixed batch shape K (pad with a mask; a larger batch raises).
      A truncating scheme fixes K = ``truncated_batch_size`` (None or equal).
    graph: the attribution graph, required for ``MultiAttributionBMinSep``.

  Returns:
    A ``BatchIterator`` of ``scheme.iterations`` ``Batch`` es.

  References:
    Dong, Ganesh, arXiv 2602.09338v2, Algorithms 1–4 and App. D; Ganesh, arXiv
    2508.15089, §2 (truncation by a uniformly random subset).
  """
  if type(scheme) not in _ROUND_SAMPLERS:
    raise InputTypeError(f'scheme must be a jaxacct sampling scheme, got {scheme!r}')
  m = _validate.integer_at_least('dataset_size', dataset_size, 1)
  generator = _generator(rng)
  if scheme.truncates:
    if m != scheme.dataset_size:
      raise InputError(f'dataset_size must equal the truncated scheme\'s public dataset_size = '
                       f'{scheme.dataset_size} (its guarantee is for that size), got {m}')
    if batch_size is not None and batch_size != scheme.truncated_batch_size:
      raise InputError(f'batch_size must be None or truncated_batch_size = '
                       f'{scheme.truncated_batch_size} for a truncating scheme, got {batch_size}')
    batch_size = scheme.truncated_batch_size
  elif batch_size is not None:
    batch_size = _validate.integer_at_least('batch_size', batch_size, 1)
  if isinstance(scheme, schemes.MultiAttributionBMinSep):
    if not isinstance(graph, AttributionGraph):
      raise InputTypeError('MultiAttributionBMinSep batches need graph=AttributionGraph (after '
                      f'contribution bounding), got {graph!r}')
    if graph.num_examples != m:
      raise InputError(f'dataset_size must equal graph.num_examples = {graph.num_examples}, '
                       f'got {m}')
  elif isinstance(scheme, (schemes.BallsInBins, schemes.CyclicPoisson)) and m < scheme.cycle_length:
    raise InputError(f'dataset_size must be >= cycle_length = {scheme.cycle_length} (every bin '
                     f'or group needs examples), got {m}')
  return BatchIterator(scheme, m, _seed_sequence(generator), batch_size, graph)
