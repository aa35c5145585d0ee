"""Deterministic accountants (host code: NumPy/SciPy and dp_accounting, no sampling)."""
