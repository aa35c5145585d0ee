"""Deterministic accountants (host code: NumPy/SciPy and dp_accounting, no sampling).

- ``pld``: Gaussian and unamplified bounds, DP-SGD σ, cyclic-Poisson BandMF PLD.
- ``truncated_poisson``: seed 001 (truncated Poisson sampling): regimes, exact
  dominating pairs, PLD composition, calibration of σ, T and B.
- ``accountant``: a whole mechanism's PLD (``mechanism_pld``) and σ calibration
  on it (``calibrate_deterministic``).
"""
