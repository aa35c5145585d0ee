"""Monotone searches shared by the deterministic calibrations (host code)."""

from __future__ import annotations

import math


def _bisections(ratio: float, tolerance: float) -> int:
  """Probes a bisection on ln σ makes to shrink a bracket of ``ratio`` to ``tolerance``."""
  if ratio - 1.0 <= tolerance:
    return 0
  return max(0, math.ceil(math.log2(math.log(ratio) / math.log1p(tolerance))))


def smallest_passing_sigma(meets, *, tolerance: float, floor: float, start: float = 1.0,
                           step: float = 2.0, progress=None, stage: str = 'σ search') -> float:
  """Smallest σ ≥ ``floor`` (rounded up, to ``tolerance`` relative) with ``meets(σ)``.

  ``meets`` must be monotone (δ(ε) decreases in σ: a larger σ is a
  post-processing of a smaller one by added noise), so a bisection on ln σ
  suffices. The bracket grows from ``start`` by factors of ``step`` (a good guess and a
  small step keep an accountant away from σ far below the answer, where PLD grids grow like
  1/σ²). Returns ``floor`` if it already meets the target (valid, conservative).

  ``progress(probes_done, probes_expected, stage)`` (``jaxacct.progress``) is called after
  every probe; ``probes_expected`` counts the bisection left once the bracket is known, and
  assumes the next bracket probe closes it while it is being found.
  """
  done = 0
  bisections = _bisections(step, tolerance)

  def probe(sigma, expected_after):
    nonlocal done
    passed = bool(meets(sigma))
    done += 1
    if progress is not None:
      progress(done, max(done, done + expected_after(passed)), stage)
    return passed

  def finished(sigma):
    if progress is not None:
      progress(done, done, stage)
    return sigma

  high = max(float(start), floor)
  # Before the bracket closes: this probe, one below it and the bisection are left.
  while not probe(high, lambda passed: (1 + bisections) if passed else (2 + bisections)):
    high *= step
  low = high / step
  while probe(low, lambda passed: (1 + bisections) if passed else bisections):
    if low <= floor:
      return finished(floor)
    low, high = max(low / step, floor), low
  while high / low - 1.0 > tolerance:
    mid = math.sqrt(low * high)
    ratio = math.sqrt(high / low)  # the bracket after this probe, either way
    if probe(mid, lambda passed: _bisections(ratio, tolerance)):
      high = mid
    else:
      low = mid
  return finished(high)
