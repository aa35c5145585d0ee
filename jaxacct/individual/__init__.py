"""Individual privacy accounting (Koskela et al. (2022)).

- ``gdp``: μ-GDP conversions (``gdp_delta``, ``gdp_epsilon``, ``gdp_budget``) and fully adaptive
  composition in squares (``composed_mu``).
- ``epsilons``: ``individual_epsilons`` — every example's ε from its realised clipped-norm
  ratios, by PLD, RDP (Feldman–Zrnic) or exact GDP (full batch).
- ``filter``: ``GDPFilter``, the individual GDP filter of Alg. 1 (full-batch DP-GD).
- ``grid_composition``: the σ-grid FFT products of App. D behind ``individual_epsilons``'s PLD.
- ``tracking``: ``IndividualAccountant`` and its ``IndividualState`` for the training loop
  (``jaxacct.training.train(..., individual=...)``).

References:
  Antti Koskela, Marlon Tobaben and Antti Honkela, "Individual Privacy Accounting with Gaussian
  Differential Privacy", arXiv:2209.15596: Algorithm 1, App. D (docs/references.md).
"""

from jaxacct.individual.epsilons import epsilons_from_counts as epsilons_from_counts
from jaxacct.individual.epsilons import individual_epsilons as individual_epsilons
from jaxacct.individual.filter import GDPFilter as GDPFilter
from jaxacct.individual.gdp import composed_mu as composed_mu
from jaxacct.individual.gdp import gdp_budget as gdp_budget
from jaxacct.individual.gdp import gdp_delta as gdp_delta
from jaxacct.individual.gdp import gdp_epsilon as gdp_epsilon
from jaxacct.individual.tracking import IndividualAccountant as IndividualAccountant
from jaxacct.individual.tracking import IndividualState as IndividualState
