"""Preprocessing for multi-attribution b-min-sep: graph, neighbourhoods, contribution bounding.

Synthetic power-law attribution graph (Dong & Ganesh (2026) §6, App. C):
10⁶ examples, 4·10⁵ users; users per example 1 + min(Zipf(2.5) − 1, 29)
(mean ≈ 1.8, like co-authors per paper); each edge picks its user with
probability ∝ a Pareto(2) popularity weight, so user degrees are heavy-tailed
(max ≈ 8·10³). Times, host only, one run each (a preprocessing step, not a hot
loop):

* graph construction from edge arrays and from per-example user lists;
* exact |N(e)| for every example of the raw graph (row blocks of A·Aᵀ) and
  the memory the full boolean N would take;
* greedy contribution bounding for k_u ∈ {1, 2, 4} (and k_u = 4 with the
  App. C bound k_e for b = 16, p = 0.01), then the full N of each bounded
  graph as a sparse matrix, with its memory.

Run: ``python benchmarks/attribution_preprocessing.py`` (≈ 1 min on 2 cores).
"""

from __future__ import annotations

import os
import platform
import sys
import time

sys.path.insert(0, os.path.dirname(os.path.dirname(os.path.abspath(__file__))))

import numpy as np  # noqa: E402
import scipy  # noqa: E402

from jaxacct.batching import attribution  # noqa: E402

NUM_EXAMPLES, NUM_USERS, SEED = 10**6, 400_000, 0
MATERIALISE_RAW_MAX_ENTRIES = 3 * 10**7


def _timed(fn, *args, **kwargs):
  start = time.perf_counter()
  result = fn(*args, **kwargs)
  return result, time.perf_counter() - start


def _matrix_bytes(matrix) -> int:
  return matrix.data.nbytes + matrix.indices.nbytes + matrix.indptr.nbytes


def main() -> None:
  print(f'machine: {platform.platform()}; {platform.processor() or platform.machine()}; '
        f'{os.cpu_count()} cpus; python {platform.python_version()}; numpy {np.__version__}; '
        f'scipy {scipy.__version__}')
  synthetic, seconds = _timed(attribution.synthetic_power_law_graph, NUM_EXAMPLES, NUM_USERS,
                              rng=SEED)
  print(f'synthetic_power_law_graph (edges + from_edges): {seconds:.2f} s')
  example_ids = np.repeat(np.arange(NUM_EXAMPLES), synthetic.example_degrees)
  graph, seconds = _timed(attribution.AttributionGraph.from_edges, example_ids, synthetic.users,
                          num_examples=NUM_EXAMPLES, num_users=NUM_USERS)
  print(f'from_edges: {graph.num_examples} examples, {graph.num_users} users, '
        f'{graph.num_edges} distinct edges in {seconds:.2f} s')
  lists = np.split(graph.users, graph.indptr[1:-1])
  lists = [x.tolist() for x in lists]
  _, seconds = _timed(attribution.AttributionGraph.from_user_lists, lists,
                      num_users=NUM_USERS)
  print(f'from_user_lists (10⁶ Python lists): {seconds:.2f} s')
  _, seconds = _timed(lambda: graph.user_examples)
  degrees = graph.user_degrees
  print(f'transpose: {seconds:.2f} s; user degrees max {degrees.max()}, median '
        f'{np.median(degrees[degrees > 0]):.0f}, users without examples {np.sum(degrees == 0)}; '
        f'|U(e)| max {graph.example_degrees.max()}, mean {graph.example_degrees.mean():.2f}')

  print(f'raw graph: neighbourhood_cost Σ_u |D_u|² = {graph.neighbourhood_cost:.3e}')
  sizes, seconds = _timed(lambda: graph.neighbourhood_sizes)
  entries = int(sizes.sum())
  print(f'raw |N(e)| for all examples: {seconds:.2f} s; max {sizes.max()}, mean '
        f'{sizes.mean():.0f}, median {np.median(sizes):.0f}; full N would hold {entries:.3e} '
        f'entries ≈ {entries * 5 / 2**20:.0f} MiB (bool data + int32 indices)')
  if entries <= MATERIALISE_RAW_MAX_ENTRIES:
    matrix, seconds = _timed(graph.neighbourhood_matrix)
    print(f'raw N matrix: {seconds:.2f} s, {_matrix_bytes(matrix) / 2**20:.0f} MiB')
  else:
    print(f'raw N matrix not built (> {MATERIALISE_RAW_MAX_ENTRIES:.0e} entries)')

  k_e = attribution.rule_of_thumb_max_neighbourhood_size(min_sep=16, sampling_prob=0.01)
  for k_u, bound in ((1, None), (2, None), (4, None), (4, k_e)):
    result, seconds = _timed(attribution.bound_contributions, graph,
                             max_examples_per_user=k_u, max_neighbourhood_size=bound, rng=SEED)
    bounded = result.graph
    matrix, n_seconds = _timed(bounded.neighbourhood_matrix)
    n_sizes = np.diff(matrix.indptr)
    print(f'k_u={k_u} k_e={bound}: bounding {seconds:.2f} s; kept {result.num_kept} '
          f'({result.num_kept / graph.num_examples:.1%}), dropped over user budget '
          f'{result.dropped_over_user_budget.size}, over k_e '
          f'{result.dropped_over_neighbourhood_bound.size}; max |D_u| '
          f'{bounded.user_degrees.max()}; N matrix {n_seconds:.2f} s, {matrix.nnz} entries, '
          f'{_matrix_bytes(matrix) / 2**20:.1f} MiB, max |N(e)| {n_sizes.max()}, mean '
          f'{n_sizes.mean():.2f}')


if __name__ == '__main__':
  main()
