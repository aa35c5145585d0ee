"""Host helpers the training batch samplers share (``SamplingScheme.sampled_rounds``)."""

from __future__ import annotations

import numpy as np

from jaxacct.errors import InputError


class EligiblePool:
  """The eligible examples as the prefix ``order[:size]`` of a permutation of range(m).

  ``position`` is the inverse permutation. Drawing k examples moves them to the
  end of the prefix and shrinks it; releasing moves them to just after it and
  grows it: O(k log k) swaps each, independent of m.
  """

  def __init__(self, m: int):
    dtype = np.int32 if m < 2**31 else np.int64
    self.order = np.arange(m, dtype=dtype)
    self.position = np.arange(m, dtype=dtype)
    self.size = m

  def _gather_into(self, positions: np.ndarray, start: int) -> None:
    """Permutes so that the entries at ``positions`` occupy [start, start + len(positions))."""
    count = positions.size
    inside = (positions >= start) & (positions < start + count)
    movers = positions[~inside]
    free = np.setdiff1d(np.arange(start, start + count), positions[inside], assume_unique=True)
    leaving, arriving = self.order[movers], self.order[free]
    self.order[movers], self.order[free] = arriving, leaving
    self.position[arriving], self.position[leaving] = movers, free

  def draw(self, count: int, rng: np.random.Generator) -> np.ndarray:
    positions = rng.choice(self.size, count, replace=False)
    chosen = self.order[positions].astype(np.int64)
    self._gather_into(positions, self.size - count)
    self.size -= count
    return chosen

  def release(self, ids: np.ndarray) -> None:
    self._gather_into(self.position[ids].astype(np.int64), self.size)
    self.size += ids.size


def groups(assignment: np.ndarray, count: int) -> list[np.ndarray]:
  """The example ids with each label 0 … count − 1 (``assignment[i]`` is example i's)."""
  order = np.argsort(assignment, kind='stable')
  bounds = np.concatenate([[0], np.cumsum(np.bincount(assignment, minlength=count))])
  return [order[bounds[g]:bounds[g + 1]].astype(np.int64) for g in range(count)]


def check_every_group_filled(dataset_size: int, cycle_length: int) -> None:
  """A cyclic scheme's T bins or groups each need examples: m ≥ T."""
  if dataset_size < cycle_length:
    raise InputError(argument='dataset_size', value=dataset_size,
                     requirement=f'must be >= cycle_length = {cycle_length} (every bin or '
                     f'group needs examples), got {dataset_size}')
