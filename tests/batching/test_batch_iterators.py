"""Batch iterators sample what the accountant analyses (issue 7).

Oracle: the exact law of one example's participation pattern
(``oracles.brute_force.participation_law``). In every scheme here the examples
are exchangeable, and under b-min-sep and (cyclic) Poisson independent, so the
patterns of all examples of many short runs are compared with it by χ²
(threshold p > 1e-3: a false alarm once in 1000 runs per test; the seeds are
fixed, so the suite is deterministic).
"""

import numpy as np
import pytest

import jaxacct
from jaxacct.batching import batches, iterators
from oracles import brute_force, chi_square


def _patterns(scheme, m, runs, seed=0, **kwargs):
  """(runs·m, n) participation indicators of every example over independent runs."""
  rows = []
  for run in range(runs):
    x = np.zeros((m, scheme.iterations), int)
    for i, batch in enumerate(batches(scheme, m, np.random.default_rng([seed, run]), **kwargs)):
      real = batch.indices[batch.mask]
      assert len(np.unique(real)) == batch.size == real.size
      x[real, i] = 1
    rows.append(x)
  return np.concatenate(rows)


def _law(patterns_and_log_probs):
  patterns, log_probs = patterns_and_log_probs
  return {tuple(p.astype(int)): float(np.exp(lp)) for p, lp in zip(patterns, log_probs)}


@pytest.mark.parametrize('warm', [False, True])
def test_bminsep_patterns_follow_the_exact_chain(warm):
  n, p, b, m = 6, 0.3, 3, 40
  scheme = jaxacct.BMinSep(sampling_prob=p, iterations=n, min_sep=b, warm_start=warm)
  x = _patterns(scheme, m, 200, seed=int(warm))
  law = _law(brute_force.participation_law('bminsep', iterations=n, sampling_prob=p, min_sep=b,
                                           warm_start=warm))
  assert chi_square.p_value(map(tuple, x), law) > 1e-3


def test_poisson_and_balls_in_bins_and_cyclic_poisson_patterns():
  n, m = 6, 30
  cases = [
      (jaxacct.Poisson(sampling_prob=0.2, iterations=n),
       brute_force.participation_law('poisson', iterations=n, sampling_prob=0.2)),
      (jaxacct.BallsInBins(iterations=n, cycle_length=3),
       brute_force.participation_law('balls_in_bins', iterations=n, cycle_length=3)),
      (jaxacct.CyclicPoisson(sampling_prob=0.6, iterations=n, cycle_length=2),
       brute_force.participation_law('cyclic_poisson', iterations=n, sampling_prob=0.6,
                                     cycle_length=2, partition='independent')),
  ]
  for k, (scheme, law) in enumerate(cases):
    x = _patterns(scheme, m, 150, seed=10 + k)
    assert chi_square.p_value(map(tuple, x), _law(law)) > 1e-3, scheme


def test_balls_in_bins_bins_are_fixed_and_equal_split_groups_balanced():
  scheme = jaxacct.BallsInBins(iterations=12, cycle_length=4)
  seen = [set(b.indices) for b in batches(scheme, 50, 3)]
  for i in range(4, 12):
    assert seen[i] == seen[i - 4]
  assert set().union(*seen[:4]) == set(range(50))
  assert sum(len(s) for s in seen[:4]) == 50
  equal = jaxacct.CyclicPoisson(sampling_prob=1.0, iterations=4, cycle_length=4,
                                partition='equal_split')
  sizes = sorted(b.size for b in batches(equal, 50, 3))
  assert sizes == [12, 12, 13, 13]


def test_min_sep_is_never_violated_and_warm_start_batch_is_stationary_from_step_one():
  m, n, b, p = 400, 40, 5, 0.1
  scheme = jaxacct.BMinSep(sampling_prob=p, iterations=n, min_sep=b, warm_start=True)
  sizes = np.zeros((60, n))
  for run in range(60):
    last = np.full(m, -b)
    for i, batch in enumerate(batches(scheme, m, run)):
      real = batch.indices[batch.mask]
      assert np.all(i - last[real] >= b)
      last[real] = i
      sizes[run, i] = batch.size
  expected = scheme.expected_participation_rate * m  # p/(1 + (b−1)p)·m
  per_round = sizes.mean(axis=0)
  standard_error = np.sqrt(expected / 60)  # Var ≤ mean for these sums of dependent Bernoullis
  assert np.all(np.abs(per_round - expected) < 5 * standard_error)
  assert abs(per_round[0] - expected) < 5 * standard_error  # no cold-start spike at step 1


def test_truncation_keeps_a_uniform_subset_and_blocks_the_whole_sample():
  rng = np.random.default_rng(0)
  ids = np.arange(7)
  kept = [tuple(sorted(iterators._uniform_subset(ids, 3, rng))) for _ in range(7000)]
  from itertools import combinations
  law = {c: 1 / 35 for c in combinations(range(7), 3)}
  assert chi_square.p_value(kept, law) > 1e-3
  # The sampled sets (what truncation cuts from) keep the min-sep, so cut examples stay blocked.
  scheme = jaxacct.BMinSep(sampling_prob=0.5, iterations=30, min_sep=4, warm_start=False,
                           truncated_batch_size=3, dataset_size=40)
  last = np.full(40, -4)
  for i, sampled in enumerate(scheme.sampled_rounds(40, np.random.default_rng(1))):
    assert np.all(i - last[sampled] >= 4)
    last[sampled] = i
  out = list(batches(scheme, 40, 1))
  assert all(batch.indices.shape == (3,) and batch.size <= 3 for batch in out)
  assert any(batch.size == 3 for batch in out)


def test_padding_masks_sum_to_the_real_batch_size():
  scheme = jaxacct.Poisson(sampling_prob=0.1, iterations=20)
  for batch in batches(scheme, 100, 0, batch_size=40):
    assert batch.indices.shape == (40,) and batch.mask.sum() == batch.size
    assert np.all(batch.indices[~batch.mask] == 0)


def test_bad_input_is_refused():
  poisson = jaxacct.Poisson(sampling_prob=0.5, iterations=3)
  with pytest.raises(RuntimeError, match='cannot be cut'):
    list(batches(poisson, 100, 0, batch_size=10))
  truncated = jaxacct.Poisson(sampling_prob=0.5, iterations=3, truncated_batch_size=5,
                              dataset_size=20)
  with pytest.raises(ValueError, match='dataset_size'):
    batches(truncated, 21, 0)
  with pytest.raises(ValueError, match='batch_size'):
    batches(truncated, 20, 0, batch_size=6)
  with pytest.raises(ValueError, match='cycle_length'):
    batches(jaxacct.BallsInBins(iterations=3, cycle_length=4), 3, 0)
  with pytest.raises(TypeError, match='rng'):
    batches(poisson, 10, 1.5)
  with pytest.raises(TypeError, match='graph'):
    batches(jaxacct.MultiAttributionBMinSep(sampling_prob=0.1, iterations=3, min_sep=2,
                                            max_examples_per_user=1), 10, 0)


def test_same_seed_replays_and_multi_attribution_batches_come_through():
  scheme = jaxacct.BMinSep(sampling_prob=0.2, iterations=10, min_sep=3)
  first = [b.indices.tolist() for b in batches(scheme, 50, 7)]
  assert first == [b.indices.tolist() for b in batches(scheme, 50, 7)]
  again = batches(scheme, 50, np.random.default_rng(7))  # one iterator, two passes: a replay
  assert [b.indices.tolist() for b in again] == [b.indices.tolist() for b in again]
  assert first != [b.indices.tolist() for b in batches(scheme, 50, 8)]
  graph = jaxacct.AttributionGraph.from_user_lists([[0], [0, 1], [2], [3]], num_users=4)
  multi = jaxacct.MultiAttributionBMinSep(sampling_prob=0.5, iterations=6, min_sep=2,
                                          max_examples_per_user=2)
  out = list(batches(multi, 4, 0, graph=graph, batch_size=4))
  assert len(out) == 6 and all(b.indices.shape == (4,) for b in out)
