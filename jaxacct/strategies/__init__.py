"""The strategy matrices C of the matrix mechanism: one module per family.

``jaxacct/strategy.py`` is the interface (``Strategy``, its Monte Carlo view, config keys);
each module here implements it and is found by importing this package, so a new strategy is
its module alone:

- ``banded_toeplitz``: ``BandedToeplitz``, banded Toeplitz C for DP-BandMF (exact losses);
- ``lower_triangular``: ``LowerTriangular``, any lower-triangular C ≥ 0 (Dong & Ganesh
  (2026) App. B r-min-sep loss bounds), with BISR and BandInvMF builders.

A module lists in ``EXPORTED`` the names ``jaxacct`` exports at the top level; its
``@strategy.config_key`` functions become config keys when it is imported here.
(``jaxacct.matrices`` and ``jaxacct.lower_triangular``, the old paths, are deprecated aliases of
the same module objects: ``old_path``.)

References:
  Andy Dong and Arun Ganesh, "Privacy Amplification for BandMF via b-Min-Sep Subsampling",
  arXiv:2602.09338 (v2): App. B (docs/references.md).
"""

from __future__ import annotations

import importlib
import pkgutil
import types
import warnings

__all__: list[str] = []
for _module_info in sorted(pkgutil.iter_modules(__path__), key=lambda m: m.name):
  _module = importlib.import_module(f'{__name__}.{_module_info.name}')
  for _name in getattr(_module, 'EXPORTED', ()):
    globals()[_name] = getattr(_module, _name)
    __all__.append(_name)
del _module_info, _module, _name

# The modules' paths before this package: deprecated aliases of the same module objects, read
# as ``jaxacct.matrices`` (``jaxacct.__getattr__``) or imported (``jaxacct/matrices.py``).
OLD_PATHS = {'matrices': 'banded_toeplitz', 'lower_triangular': 'lower_triangular'}


def old_path(name: str) -> types.ModuleType:
  """The module once named ``jaxacct.<name>``, after a ``DeprecationWarning`` naming where its
  names are now, at the line that read or imported it (past the import machinery's frames)."""
  module = importlib.import_module(f'{__name__}.{OLD_PATHS[name]}')
  warnings.warn(f'jaxacct.{name} is deprecated: import {", ".join(module.EXPORTED)} from jaxacct, '
                f'other names from {module.__name__}', DeprecationWarning, stacklevel=3)
  return module
