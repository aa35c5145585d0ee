"""Examples of every sampling-scheme family, for tests that run each family (issue 44).

``EXAMPLES`` maps a family's config name (``scheme.type``) to small schemes of it. The shipped
families are listed here; a new family may instead call ``register`` from its own test module
(at import, like a ``KernelContract`` class): ``tests/test_schemes.py`` names a family of
``jaxacct/schemes/`` that has no example, no Monte Carlo kernel or no kernel contract class.
"""

from __future__ import annotations

import jaxacct

EXAMPLES: dict[str, list[jaxacct.schemes.SamplingScheme]] = {}


def register(name: str, *schemes: jaxacct.schemes.SamplingScheme) -> None:
  """Adds ``schemes`` as examples of the family registered as ``name``."""
  EXAMPLES.setdefault(name, []).extend(schemes)


register('poisson', jaxacct.Poisson(sampling_prob=0.5, iterations=3),
         jaxacct.Poisson(sampling_prob=0.1, iterations=6, truncated_batch_size=25,
                         dataset_size=200))
register('bminsep', jaxacct.BMinSep(sampling_prob=0.5, iterations=3, min_sep=2),
         jaxacct.BMinSep(sampling_prob=0.25, iterations=4, min_sep=2, warm_start=False))
register('balls_in_bins', jaxacct.BallsInBins(iterations=3, cycle_length=2))
register('cyclic_poisson', jaxacct.CyclicPoisson(sampling_prob=0.5, iterations=3, cycle_length=2))
register('multi_attribution', jaxacct.MultiAttributionBMinSep(
    sampling_prob=0.3, iterations=3, min_sep=2, max_examples_per_user=2))
