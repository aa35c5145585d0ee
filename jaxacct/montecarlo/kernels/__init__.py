"""Scheme kernels of the Monte Carlo engine: one module per scheme family, one protocol.

``base.py`` defines the protocol (``SchemeKernel``) and the registry; each family module
registers its kernel when imported here:

==================================  =================================================
module                              schemes
==================================  =================================================
``bminsep``                         ``Poisson``, ``BMinSep`` (untruncated)
``truncated``                       ``Poisson``, ``BMinSep`` with truncation (App. D)
``cyclic_poisson``                  ``CyclicPoisson``
``balls_in_bins``                   ``BallsInBins``
``multi_attribution``               ``MultiAttributionBMinSep`` (Theorem 6.1)
==================================  =================================================

Where the code runs: the kernels' device functions are JAX (un-jitted; ``sampling.py`` jits
them); ``build`` and ``params`` run on the host.
"""

from jaxacct.montecarlo.kernels import balls_in_bins as balls_in_bins
from jaxacct.montecarlo.kernels import bminsep as bminsep
from jaxacct.montecarlo.kernels import cyclic_poisson as cyclic_poisson
from jaxacct.montecarlo.kernels import multi_attribution as multi_attribution
from jaxacct.montecarlo.kernels import truncated as truncated
from jaxacct.montecarlo.kernels.base import NoInfo as NoInfo
from jaxacct.montecarlo.kernels.base import SchemeKernel as SchemeKernel
from jaxacct.montecarlo.kernels.base import kernel_class as kernel_class
from jaxacct.montecarlo.kernels.base import kernel_for as kernel_for
from jaxacct.montecarlo.kernels.base import registered as registered
