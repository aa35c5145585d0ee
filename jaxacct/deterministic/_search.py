"""Monotone searches shared by the deterministic calibrations (host code)."""

from __future__ import annotations

import math


def smallest_passing_sigma(meets, *, tolerance: float, floor: float) -> float:
  """Smallest σ ≥ ``floor`` (rounded up, to ``tolerance`` relative) with ``meets(σ)``.

  ``meets`` must be monotone (δ(ε) decreases in σ: a larger σ is a
  post-processing of a smaller one by added noise), so a bisection on ln σ
  suffices. Returns ``floor`` if it already meets the target (valid, conservative).
  """
  high = 1.0
  while not meets(high):
    high *= 2.0
  low = high / 2.0
  while meets(low):
    if low <= floor:
      return floor
    low, high = max(low / 2.0, floor), low
  while high / low - 1.0 > tolerance:
    mid = math.sqrt(low * high)
    low, high = (low, mid) if meets(mid) else (mid, high)
  return high
