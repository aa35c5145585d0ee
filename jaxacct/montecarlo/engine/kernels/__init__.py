"""Scheme kernels of the Monte Carlo engine: one module per scheme family, one protocol.

``base.py`` defines the protocol (``SchemeKernel``) and the registry; each family module
registers its kernel (``@register``) and is imported here by discovery (every public module of
this package), so a new family's kernel is one new module:

==================================  =================================================
module                              schemes
==================================  =================================================
``bminsep``                         ``Poisson``, ``BMinSep`` (untruncated),
                                    ``MultiAttributionBMinSep`` with k_u = 1
``truncated``                       ``Poisson``, ``BMinSep`` with truncation (App. D)
``cyclic_poisson``                  ``CyclicPoisson``
``balls_in_bins``                   ``BallsInBins``
``multi_attribution``               ``MultiAttributionBMinSep`` with k_u ≥ 2 (Theorem 6.1)
==================================  =================================================

``history32`` (the 32-bit warm-start history of ``truncated``) and ``_common`` are helpers.

Where the code runs: the kernels' device functions are JAX (un-jitted; ``sampling.py`` jits
them); ``build`` and ``params`` run on the host.
"""

from jaxacct.montecarlo.engine.kernels.base import NoInfo as NoInfo
from jaxacct.montecarlo.engine.kernels.base import SchemeKernel as SchemeKernel
from jaxacct.montecarlo.engine.kernels.base import kernel_class as kernel_class
from jaxacct.montecarlo.engine.kernels.base import kernel_for as kernel_for
from jaxacct.montecarlo.engine.kernels.base import registered as registered

import importlib as _importlib
import pkgutil as _pkgutil

for _module in _pkgutil.iter_modules(__path__):
  if not _module.name.startswith('_') and _module.name != 'base':
    _importlib.import_module(f'{__name__}.{_module.name}')
