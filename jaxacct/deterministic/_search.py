"""Monotone searches shared by the deterministic calibrations (host code)."""

from __future__ import annotations

import math
import time


def smallest_passing_sigma(meets, *, tolerance: float, floor: float, start: float = 1.0,
                           step: float = 2.0, progress=None) -> float:
  """Smallest σ ≥ ``floor`` (rounded up, to ``tolerance`` relative) with ``meets(σ)``.

  ``meets`` must be monotone (δ(ε) decreases in σ: a larger σ is a
  post-processing of a smaller one by added noise), so a bisection on ln σ
  suffices. The bracket grows from ``start`` by factors of ``step`` (a good guess and a
  small step keep an accountant away from σ far below the answer, where PLD grids grow like
  1/σ²). Returns ``floor`` if it already meets the target (valid, conservative).
  ``progress(σ, passed, seconds)`` is called after every probe (the CLI shows slow searches).
  """
  if progress is not None:
    plain = meets

    def meets(sigma):
      started = time.perf_counter()
      passed = plain(sigma)
      progress(float(sigma), bool(passed), time.perf_counter() - started)
      return passed

  high = max(float(start), floor)
  while not meets(high):
    high *= step
  low = high / step
  while meets(low):
    if low <= floor:
      return floor
    low, high = max(low / step, floor), low
  while high / low - 1.0 > tolerance:
    mid = math.sqrt(low * high)
    low, high = (low, mid) if meets(mid) else (mid, high)
  return high
