"""Host-side data preparation: attribution graphs and (later) batch iterators.

Where the code runs: everything in ``jaxacct.batching`` is host code (NumPy and
scipy.sparse, randomness from a ``np.random.Generator`` named ``rng``); nothing
here touches JAX devices. It prepares the *public* inputs the accountant
analyses, so what is trained is what is accounted: ``attribution`` holds the
example → users hypergraph of the multi-attribution (user-level) setting and
the greedy contribution bounding that precedes multi-attribution b-min-sep
sampling (Dong & Ganesh (2026) §6, App. C); ``multi_attribution`` samples its batches
(Algorithms 3 and 4); ``iterators.batches`` yields the batches of every
sampling scheme, padded (and, for truncating schemes only, cut) to a fixed size.

Notation (Dong & Ganesh (2026) §6 and App. C; Ganesh, McKenna, McMahan, Smith,
Wu, "It's My Data Too", arXiv 2503.03622):

==========================  ======  ==============================================
API name                    paper   meaning
==========================  ======  ==============================================
``users_of(e)``             U(e)    users the example e is attributed to
``examples_of(u)``          D_u     examples attributed to user u
``neighbourhood(e)``        N(e)    {e' : U(e') ∩ U(e) ≠ ∅}, always including e
``max_examples_per_user``   k_u     contribution bound: examples kept per user
``max_neighbourhood_size``  k_e     optional bound on |N(e)| in the kept graph
==========================  ======  ==============================================

References:
  Andy Dong and Arun Ganesh, "Privacy Amplification for BandMF via b-Min-Sep Subsampling",
  arXiv:2602.09338 (v2): §6 (multi-attribution: Algorithms 3 and 4), App. C, App. D
  (docs/references.md).
"""

from __future__ import annotations

from jaxacct.batching.attribution import AttributionGraph as AttributionGraph
from jaxacct.batching.attribution import BoundedAttribution as BoundedAttribution
from jaxacct.batching.attribution import bound_contributions as bound_contributions
from jaxacct.batching.attribution import (
    rule_of_thumb_max_neighbourhood_size as rule_of_thumb_max_neighbourhood_size)
from jaxacct.batching.iterators import Batch as Batch
from jaxacct.batching.iterators import BatchIterator as BatchIterator
from jaxacct.batching.iterators import batches as batches
from jaxacct.batching.multi_attribution import (
    multi_attribution_batches as multi_attribution_batches)

__all__ = [
    'AttributionGraph',
    'Batch',
    'batches',
    'BatchIterator',
    'BoundedAttribution',
    'bound_contributions',
    'multi_attribution_batches',
    'rule_of_thumb_max_neighbourhood_size',
]
