"""Where the σ search of a calibration starts: the fallback's σ_up and the initial guess (host).

Both are deterministic accountant calls (seconds on a CPU), made once per (scheme, strategy,
fallback, ε, δ_b) in a process: the capacity plan that precedes a calibration computes them
(its projection then counts their time once, not twice) and the calibration reuses them.

References:
  Andy Dong and Arun Ganesh, "Privacy Amplification for BandMF via b-Min-Sep Subsampling",
  arXiv:2602.09338 (v2): App. A, Algorithm 5 (the fallback candidate M_k) (docs/references.md).
"""

from __future__ import annotations

import functools

import numpy as np

from jaxacct.deterministic import base as accountants
from jaxacct.deterministic import pld
from jaxacct.errors import InputError, InputTypeError

DEFAULT_FALLBACK = 'unamplified_gaussian'
"""The fallback accountant of Algorithm 5 unless one is given: valid for every scheme."""

SWEEP_CANDIDATES = 16  # σ per estimation sweep (one shared draw serves all)
COARSE_RATIO = 1.05  # between neighbouring σ of a coarse sweep: 16 σ span a factor ~2


def coarse_sweep(centre: float) -> np.ndarray:
  """The σ of a coarse estimation sweep around ``centre``: centre · 1.05^k, k = −8 … 7."""
  half = SWEEP_CANDIDATES // 2
  return centre * COARSE_RATIO ** np.arange(-half, half)


def fallback_accountant(fallback) -> accountants.DeterministicAccountant:
  """The deterministic accountant that proves Algorithm 5's last candidate M_k.

  Args:
    fallback: a registered accountant name, a ``DeterministicAccountant``, or None for
      ``DEFAULT_FALLBACK`` (the unamplified Gaussian bound, which covers every scheme).
  """
  if fallback is None:
    fallback = DEFAULT_FALLBACK
  if isinstance(fallback, accountants.DeterministicAccountant):
    return fallback
  if not isinstance(fallback, str):
    raise InputTypeError(f'fallback must be a deterministic accountant or its registered name '
                         f'({", ".join(accountants.available())}), got {fallback!r}')
  return accountants.get(fallback)



def check_fallback(fallback: accountants.DeterministicAccountant, mechanism) -> None:
  """InputError unless ``fallback`` supports ``mechanism`` (zero-out adjacency)."""
  reason = fallback.supports(mechanism)
  if reason is not None:
    raise InputError(f'fallback accountant {fallback.name!r} cannot prove the last candidate '
                     f'({reason}); the default fallback {DEFAULT_FALLBACK!r} covers every scheme')


@functools.lru_cache(maxsize=16)
def fallback_and_guess(scheme, matrix, fallback, epsilon: float,
                       base_delta: float) -> tuple[float, float]:
  """(σ_up, the search's initial guess): the fallback accountant's σ at (ε, δ_b) (Algorithm 5's
  last candidate), and Poisson DP-SGD's PLD σ at the expected participation rate times the
  maximum column norm of C, capped at σ_up. Cached per arguments (all hashable and immutable)."""
  sigma_up = fallback.sigma(scheme, matrix, epsilon=epsilon, delta=base_delta)
  column_norm = float(matrix.max_column_norm(scheme.iterations))
  guess = column_norm * pld.dpsgd_sigma(scheme.expected_participation_rate, scheme.iterations,
                                        epsilon=epsilon, delta=base_delta)
  return float(sigma_up), float(min(guess, sigma_up))


def candidate_grid(boundary: float, sigma_up: float, grid_ratio: float,
                   num_candidates: int) -> list[float]:
  """Algorithm 5's candidates around the estimated boundary σ̂ (Dong & Ganesh (2026) App. A:
  candidates at powers of the grid ratio): ``num_candidates`` σ̂·r^j, a quarter of them below
  σ̂, those under σ_up, then σ_up (the fallback's, proven)."""
  below = max(1, num_candidates // 4)
  grid = boundary * grid_ratio ** np.arange(-below, num_candidates - below, dtype=np.float64)
  return [float(s) for s in grid if s < sigma_up] + [float(sigma_up)]
