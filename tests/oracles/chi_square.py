"""χ² goodness of fit of sampled outcomes against an exact law (shared by the sampler tests)."""

from __future__ import annotations

from collections.abc import Iterable, Mapping

import numpy as np
from scipy import stats


def p_value(outcomes: Iterable, law: Mapping) -> float:
  """χ² p-value of hashable ``outcomes`` against ``law`` (outcome → probability).

  Fails if an outcome is impossible under the law. Cells with expected count
  < 5 are pooled into one (validity of the χ² approximation); observed counts
  are rescaled to the expected total so that a law summing to 1 − ε in float
  does not bias the statistic.
  """
  counts: dict = {}
  for outcome in outcomes:
    counts[outcome] = counts.get(outcome, 0) + 1
  impossible = [outcome for outcome in counts if outcome not in law]
  assert not impossible, f'impossible outcomes: {impossible[:3]}'
  total = sum(counts.values())
  keys = sorted(law)
  expected = np.array([law[key] for key in keys], float) * total
  observed = np.array([counts.get(key, 0) for key in keys], float)
  small = expected < 5
  if small.any():
    expected = np.append(expected[~small], expected[small].sum())
    observed = np.append(observed[~small], observed[small].sum())
  return float(stats.chisquare(observed * expected.sum() / observed.sum(), expected).pvalue)
