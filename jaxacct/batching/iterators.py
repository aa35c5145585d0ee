"""Batch iterators that sample exactly what the accountant analysed (host code).

``batches(scheme, dataset_size, rng)`` yields the index batches of any registered
sampling scheme, one per round, for ``scheme.iterations`` rounds: round i is the scheme's own
sampler (``SamplingScheme.sampled_rounds``, in its module under ``jaxacct/schemes/``), e.g.
every eligible example with probability p for b-min-sep (a sampled example is ineligible for
the next b − 1 rounds; Alg. 2 starts from the stationary state), the fixed bin i mod T for
balls-in-bins, Algorithm 3 / 4 on an attribution graph for multi-attribution. Work per round
is O(batch): a Binomial count of uniformly chosen examples (the same law as independent
coins), and for b-min-sep a pool of eligible examples kept as a permutation with its inverse
(``schemes/_pool.py``). Initialisation is O(m).

Fixed batch shapes for XLA: with ``batch_size=K`` every batch is padded to K
with a mask; a batch larger than K **raises** — cutting it would change the
mechanism — unless the scheme itself truncates (``truncated_batch_size``, which
then sets K), in which case a uniformly random subset of K examples is kept and
(b-min-sep) the examples cut away stay ineligible for b − 1 rounds, exactly as
Dong & Ganesh (2026) App. D and Ganesh (2025) assume.

References:
  Andy Dong and Arun Ganesh, "Privacy Amplification for BandMF via b-Min-Sep Subsampling",
  arXiv:2602.09338 (v2): Algorithms 1–4, App. D (docs/references.md).
  Arun Ganesh, "Tighter Privacy Analysis for Truncated Poisson Sampling", arXiv:2508.15089:
  Algorithm 1 (truncated Poisson) (docs/references.md).
  Choquette-Choo et al., NeurIPS 2023 (cyclic Poisson, balls-in-bins).
"""

from __future__ import annotations

import dataclasses
from typing import Iterator, NamedTuple

import numpy as np

from jaxacct import _validate, schemes
from jaxacct.batching.attribution import AttributionGraph
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


def _uniform_subset(ids: np.ndarray, count: int, rng: np.random.Generator) -> np.ndarray:
  return ids if ids.size <= count else ids[rng.choice(ids.size, count, replace=False)]


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
    return self.scheme.sampled_rounds(self.dataset_size, rng, self.graph)

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
  if not isinstance(scheme, schemes.SamplingScheme):
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
  if scheme.needs_graph and graph is not None and not isinstance(graph, AttributionGraph):
    raise InputTypeError(f'{type(scheme).__name__} batches need graph=AttributionGraph (after '
                         f'contribution bounding), got {graph!r}')
  scheme.check_training_data(m, graph)
  return BatchIterator(scheme, m, _seed_sequence(generator), batch_size, graph)
