"""Deterministic accountants (host code: NumPy/SciPy and dp_accounting, no sampling).

- ``base``: the contract (``DeterministicAccountant``, ``PrivacyCurve``) and the registry.
- ``pld_accountant``: ``"pld"``, the PLD accountants of Poisson (and b-min-sep with b = 1)
  and cyclic Poisson, truncated or not; ``mechanism_pld``.
- ``unamplified``: ``"unamplified_gaussian"``, the EVR fallback for every scheme.
- ``accountant``: the public functions ``delta_for_epsilon``, ``epsilon_for_delta`` and
  ``calibrate_deterministic`` (by name or ``"auto"``, the tightest supported one).
- ``pld``: Gaussian and unamplified bounds, DP-SGD σ, cyclic-Poisson BandMF PLD.
- ``mmcc``: ``"mmcc"``, MMCC (Choquette-Choo et al. (2023)) for Poisson with any C ≥ 0.
- ``mixture_pld``: PMFs of Gaussian-mixture pairs, their composition, bounds off a bad event.
- ``truncated_poisson``: Ganesh (2025) (truncated Poisson sampling): regimes, exact
  dominating pairs, PLD composition, calibration of σ, T and B.

Importing this package imports each of its public modules (found, not listed), which
registers the accountants: a new accountant is one module here with an ``@register``-ed class
whose ``tie_order`` places it (``"tightest"`` gives ties to the lower one).

References:
  Christopher A. Choquette-Choo, Arun Ganesh, Thomas Steinke and Abhradeep Thakurta, "Privacy
  Amplification for Matrix Mechanisms", arXiv:2310.15526 (v2; ICLR 2024) (docs/references.md).
  Arun Ganesh, "Tighter Privacy Analysis for Truncated Poisson Sampling", arXiv:2508.15089
  (docs/references.md).
"""

import importlib as _importlib
import pkgutil as _pkgutil

# Every public module, in name order; the registry orders the accountants by tie_order.
for _module in _pkgutil.iter_modules(__path__):
  if not _module.name.startswith('_'):
    _importlib.import_module(f'{__name__}.{_module.name}')
