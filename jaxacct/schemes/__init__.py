"""Batch sampling schemes as frozen configurations of public information.

A scheme says *how* batches are formed; it holds only public parameters
(never the dataset size of an untruncated run, never randomness). The same
object drives the Monte Carlo accountant (``jaxacct.montecarlo``) and, in a
later module, the training data pipeline, so what is trained is what is
accounted.

Notation (the symbols of Dong & Ganesh (2026); Ganesh (2025) writes n for the
dataset size):

===========================  ======  ==============================================
API name                     paper   meaning
===========================  ======  ==============================================
``iterations``               n       number of training rounds
``sampling_prob``            p       probability of sampling an *eligible* example
``min_sep``                  b       rounds between two participations (b-min-sep)
``cycle_length``             T or b  period of balls-in-bins / cyclic Poisson
``expected_participation_    p₀      marginal per-round participation rate
rate``
``truncated_batch_size``     B       fixed batch size: longer batches are cut to a
                                     uniformly random subset of size B (Ganesh
                                     (2025); Dong & Ganesh (2026) App. D writes B_max)
``dataset_size``             m       number of examples; public only under truncation
===========================  ======  ==============================================

Truncation (fixed batch shapes for XLA): short batches are padded (no privacy
cost) and batches larger than B are cut to a uniformly random subset of size B.
Its accountants need the dataset size, so it becomes public information and
the guarantee is for zero-out adjacency (Ganesh (2025) Def. 2.1: one example
replaced by one with zero gradient). Truncated accountants exist for
``Poisson`` (Ganesh (2025), ``jaxacct.truncated_poisson_pld``; Monte Carlo by
Dong & Ganesh (2026) App. D with b = 1), ``BMinSep`` (Dong & Ganesh (2026)
App. D, Monte Carlo) and ``CyclicPoisson(partition="equal_split")`` (Ganesh
(2025) §3.1, the remark after Theorem 3.1; deterministic); other schemes refuse
the fields.

Shape-determining fields (``iterations``, ``min_sep``, ``cycle_length``,
``warm_start``, ``partition``) are static for ``jax.jit``; ``sampling_prob`` is
traced, so a new value does not recompile.

One module per family (``poisson``, ``bminsep``, ``balls_in_bins``, ``cyclic_poisson``,
``multi_attribution``), each a frozen dataclass registered with ``@base.register(name)``:
that registration gives the config name (``scheme.type``), the config keys and their types
(the dataclass fields), the training batch sampler (``sampled_rounds``), the fallback's
sensitivity bound (``max_sensitivity_squared``) and the report line (``summary``). Every
module of this package is imported here, so a new family is its module plus its Monte Carlo
kernel (``jaxacct/montecarlo/engine/kernels/``); ``families()`` lists them. Each family also
reports its participation model (``participation.py``: ``scheme.participation``), which
accountants and strategies ask instead of the family.

References:
  Andy Dong and Arun Ganesh, "Privacy Amplification for BandMF via b-Min-Sep Subsampling",
  arXiv:2602.09338 (v2): §3–4 (the schemes), App. D (truncated b-min-sep) (docs/references.md).
  Arun Ganesh, "Tighter Privacy Analysis for Truncated Poisson Sampling", arXiv:2508.15089: Def.
  2.1, Algorithm 1, §3.1 (docs/references.md).
"""

from __future__ import annotations

import importlib
import pkgutil

from jaxacct.schemes.base import Partition as Partition
from jaxacct.schemes.base import SamplingScheme as SamplingScheme
from jaxacct.schemes.base import config_fields as config_fields
from jaxacct.schemes.base import families as families
from jaxacct.schemes.base import register as register

for _module in pkgutil.iter_modules(__path__):
  if not _module.name.startswith('_') and _module.name != 'base':
    importlib.import_module(f'{__name__}.{_module.name}')

# Each family's class by its own name: jaxacct.schemes.BMinSep, and `from jaxacct.schemes
# import *` in jaxacct/__init__.py.
globals().update({cls.__name__: cls for cls in families().values()})
__all__ = sorted(cls.__name__ for cls in families().values())
