"""Algorithms 3 and 4 of seed 000 §6.2 (``batching/multi_attribution.py``).

Exact laws for a single user with k examples (all examples share the user):
- Algorithm 3 (exclusion by the interim samples S_j): a Markov chain on c, the
  rounds the user is still barred. Each round S ~ Binomial(k, p) is drawn; the
  batch is S if c = 0, else empty; any non-empty S (even while barred) resets
  c to b − 1. Blocks therefore last longer than b − 1 rounds, so its law is
  **not** Theorem 6.1's.
- Algorithm 4 (exclusion by realised batches): only a non-empty batch bars the
  user, which is exactly Theorem 6.1's model.
Theorem 6.1's proof needs Algorithm 3's participation to be stochastically
dominated by the model; we check increasing functionals (marginal tails, total
count) exactly for one user and within 4 s.e. for a user in a crowded graph.
"""

import collections

import numpy as np
import pytest
from scipy import stats

from jaxacct.batching import AttributionGraph
from jaxacct.batching.multi_attribution import multi_attribution_batches
from oracles import chi_square
from oracles import multi_attribution as model


def _alg3_law(k, p, b, n):
  """Exact law of the per-round batch sizes of one user with k examples under Algorithm 3."""
  pmf = stats.binom.pmf(np.arange(k + 1), k, p)
  states = {((), 0): 1.0}  # (pattern so far, rounds still barred)
  for _ in range(n):
    nxt = collections.defaultdict(float)
    for (pattern, barred), prob in states.items():
      for s, weight in enumerate(pmf):
        size = s if barred == 0 else 0
        after = b - 1 if s > 0 else max(barred - 1, 0)
        nxt[(pattern + (size,), after)] += prob * weight
    states = nxt
  law = collections.defaultdict(float)
  for (pattern, _), prob in states.items():
    law[pattern] += prob
  return dict(law)


def _patterns(graph, exclusion, p, b, n, runs, examples):
  """Per-run tuples of how many of ``examples`` each round's batch holds."""
  return [tuple(int(np.isin(batch, examples).sum()) for batch in multi_attribution_batches(
      graph, sampling_prob=p, min_sep=b, iterations=n, rng=seed, exclusion=exclusion))
          for seed in range(runs)]


K, P, B, N, RUNS = 2, 0.45, 3, 4, 4000


@pytest.mark.parametrize('exclusion', ['sampled', 'participated'])
def test_single_user_law(exclusion):
  graph = AttributionGraph.from_user_lists([[0]] * K)
  if exclusion == 'sampled':
    law = _alg3_law(K, P, B, N)
  else:
    patterns, probabilities = model.pattern_law(N, B, P, K)
    law = {tuple(row): q for row, q in zip(patterns.tolist(), probabilities)}
  assert chi_square.p_value(_patterns(graph, exclusion, P, B, N, RUNS, np.arange(K)), law) > 1e-3


def test_algorithm_3_differs_from_and_is_dominated_by_the_model():
  alg3 = _alg3_law(K, P, B, 6)
  patterns, probabilities = model.pattern_law(6, B, P, K)
  theorem = {tuple(row): q for row, q in zip(patterns.tolist(), probabilities)}
  assert alg3 != pytest.approx(theorem)  # longer blocks: a different law

  def tail(law, functional, level):
    return sum(q for x, q in law.items() if functional(x) >= level)
  for level in range(1, 2 * K + 1):
    assert tail(alg3, sum, level) <= tail(theorem, sum, level) + 1e-12
    for i in range(6):
      assert tail(alg3, lambda x: x[i], level) <= tail(theorem, lambda x: x[i], level) + 1e-12


def test_crowded_graph_user_is_dominated():
  # User 0 owns examples 0 and 1; example 1 is shared with user 1, who shares others, so
  # other users' samples block user 0 more often: still dominated by the model.
  lists = [[0], [0, 1], [1, 2], [2], [2, 3], [3]]
  graph = AttributionGraph.from_user_lists(lists)
  runs, n = 3000, 6
  counts = collections.Counter(_patterns(graph, 'sampled', P, B, n, runs, np.array([0, 1])))
  patterns, probabilities = model.pattern_law(n, B, P, 2)
  theorem = {tuple(row): q for row, q in zip(patterns.tolist(), probabilities)}
  for level in (1, 2, 3):
    empirical = sum(c for x, c in counts.items() if sum(x) >= level) / runs
    exact = sum(q for x, q in theorem.items() if sum(x) >= level)
    assert empirical <= exact + 4 * np.sqrt(exact * (1 - exact) / runs) + 1e-12


def test_min_separation_and_determinism():
  rng = np.random.default_rng(0)
  lists = [sorted(set(rng.integers(0, 30, size=rng.integers(1, 4)).tolist())) for _ in range(200)]
  graph = AttributionGraph.from_user_lists(lists)
  batches = list(multi_attribution_batches(graph, sampling_prob=0.1, min_sep=4, iterations=40,
                                           rng=5))
  again = list(multi_attribution_batches(graph, sampling_prob=0.1, min_sep=4, iterations=40,
                                          rng=np.random.default_rng(5)))
  assert all(np.array_equal(x, y) for x, y in zip(batches, again))
  last = {}
  for i, batch in enumerate(batches):
    users = {u for e in batch.tolist() for u in lists[e]}
    for u in users:
      assert i - last.get(u, -10) >= 4, 'a user took part twice within min_sep rounds'
    for u in users:
      last[u] = i


def test_bad_arguments():
  graph = AttributionGraph.from_user_lists([[0]])
  with pytest.raises(ValueError, match='exclusion must be one of'):
    next(multi_attribution_batches(graph, sampling_prob=0.1, min_sep=2, iterations=3, rng=0,
                                   exclusion='batches'))
  with pytest.raises(ValueError, match='min_sep must be an integer >= 1'):
    multi_attribution_batches(graph, sampling_prob=0.1, min_sep=0, iterations=3, rng=0)
  with pytest.raises(TypeError, match='rng must be a np.random.Generator or an int seed'):
    multi_attribution_batches(graph, sampling_prob=0.1, min_sep=2, iterations=3, rng=None)


def test_sampling_prob_for_batch_size_on_the_rising_branch():
  from jaxacct.batching import attribution
  from jaxacct.batching.multi_attribution import sampling_prob_for_batch_size
  graph = attribution.synthetic_power_law_graph(2000, 800, rng=1)
  p = sampling_prob_for_batch_size(graph, expected_batch_size=20, min_sep=4, rng=0, rounds=100,
                                   burn_in=50)
  sizes = [b.size for b in multi_attribution_batches(graph, sampling_prob=p, min_sep=4,
                                                     iterations=100, rng=0, burn_in=50)]
  assert 20 <= np.mean(sizes) < 21.5
  # At p = 1 every sampled example bars its users' examples: batches collapse.
  full = [b.size for b in multi_attribution_batches(graph, sampling_prob=1.0, min_sep=4,
                                                    iterations=20, rng=0, burn_in=5)]
  assert np.mean(full) < 20
  with pytest.raises(ValueError, match='expected_batch_size must be <='):
    sampling_prob_for_batch_size(graph, expected_batch_size=5000, min_sep=4, rng=0, rounds=20,
                                 burn_in=5)
