"""Multi-attribution b-min-sep batch sampling (Dong & Ganesh (2026) §6, Algorithms 3 and 4).

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
O(|S_i|·users per example), not O(m). Host code.

References:
  Andy Dong and Arun Ganesh, "Privacy Amplification for BandMF via b-Min-Sep Subsampling",
  arXiv:2602.09338 (v2): §6.1 (Algorithm 3, simulated warm start), §6.2 (Theorem 6.1; the warm start
  accounted as a cold start), §6.3 (Algorithm 4, Conjecture 6.2), §7.3 (p by a search on empirical
  batch sizes) (docs/references.md).
"""

from __future__ import annotations

from typing import Iterator, Literal

import numpy as np

from jaxacct import _validate
from jaxacct.batching.attribution import AttributionGraph
from jaxacct.errors import InputError, InputTypeError
from jaxacct.schemes import multi_attribution

Exclusion = Literal['sampled', 'participated']
EXCLUSIONS: tuple[str, ...] = multi_attribution.MultiAttributionBMinSep.EXCLUSIONS


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
    burn_in: rounds run and discarded first (the warm start of Dong & Ganesh (2026) §6.1;
      accounting it as a cold start is valid for Algorithm 3 because dropping
      a prefix is post-processing).

  References:
    Dong & Ganesh, arXiv 2602.09338v2, §6.2 (Algorithms 3 and 4), §6.4.
  """
  if not isinstance(graph, AttributionGraph):
    raise InputTypeError(f'graph must be a jaxacct.AttributionGraph, got {graph!r}')
  p = _validate.probability('sampling_prob', sampling_prob)
  b = _validate.integer_at_least('min_sep', min_sep, 1)
  n = _validate.integer_at_least('iterations', iterations, 1)
  burn_in = _validate.integer_at_least('burn_in', burn_in, 0)
  _validate.one_of('exclusion', exclusion, EXCLUSIONS)
  if isinstance(rng, (int, np.integer)) and not isinstance(rng, bool):
    rng = np.random.default_rng(_validate.integer_at_least('rng', rng, 0))
  if not isinstance(rng, np.random.Generator):
    raise InputTypeError(f'rng must be a np.random.Generator or an int seed, got {rng!r}')
  return multi_attribution.attribution_rounds(graph, p, b, n, rng, exclusion, burn_in)


def sampling_prob_for_batch_size(graph: AttributionGraph, *, expected_batch_size: float,
                                 min_sep: int, rng: int, exclusion: Exclusion = 'sampled',
                                 rounds: int = 200, burn_in: int = 200,
                                 tolerance: float = 1e-3) -> float:
  """The smallest p whose empirical mean batch size (after ``burn_in`` rounds) reaches the target.

  There is no closed form for multi-attribution sampling, so, as in Dong &
  Ganesh (2026) §7.3, p is searched on the empirical mean batch size over ``rounds``
  rounds. The mean batch is not monotone in p: every sampled example bars its
  users' examples, so at p = 1 almost every batch is empty. The search
  therefore walks a geometric grid of p up to the first value that reaches the
  target, then bisects below it (the rising branch). Every evaluation uses the
  same seed (common random numbers). The answer is a function of the public
  graph and a seed, and the accountant takes it as given.

  Raises:
    ValueError: no p reaches the target on this graph (the message gives the
      largest mean batch seen).
  """
  target = _validate.positive_finite('expected_batch_size', expected_batch_size)
  seed = _validate.integer_at_least('rng', rng, 0)

  def mean_batch(p: float) -> float:
    sizes = [batch.size for batch in multi_attribution_batches(
        graph, sampling_prob=p, min_sep=min_sep, iterations=rounds, rng=seed,
        exclusion=exclusion, burn_in=burn_in)]
    return float(np.mean(sizes))

  low, best = 0.0, 0.0
  for high in np.geomspace(1e-6, 1.0, 49):  # ratio ~1.33 between grid points
    size = mean_batch(float(high))
    if size >= target:
      break
    low, best = float(high), max(best, size)
  else:
    raise InputError(f'expected_batch_size must be <= {best:.1f} (the largest mean batch over '
                     f'sampling_prob in [1e-6, 1] on this graph with min_sep = {min_sep}), got '
                     f'{target}')
  high = float(high)
  while high - low > tolerance * high:
    mid = 0.5 * (low + high)
    low, high = (mid, high) if mean_batch(mid) < target else (low, mid)
  return high
