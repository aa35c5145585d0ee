"""The one progress protocol of every long computation, and a reporter for people.

Every public long run takes ``progress(done, total, stage)`` (``Progress``): Monte Carlo runs
count samples over both directions ("estimate", "estimation sweep 2", "verification",
"report curve"), training counts steps ("training"), a deterministic σ search counts probes
("σ search (conditional_composition)"). ``done`` starts again at 0 with each stage; ``total``
is exact for sample and step counts, and for a σ search the number of probes the search will
make if its bracket holds (it grows while the bracket is being found), so an ETA is honest
about what is known.

``Reporter`` turns those calls into what a person sees on stderr (process 0 only): a tqdm bar
on a terminal, otherwise (a log, a batch job, ``--json``) a plain line every ``interval``
seconds with the rate and ETA, so a long run is never silent.
"""

from __future__ import annotations

import math
import os
import sys
import time
from typing import Callable

import jax
import tqdm

from jaxacct.errors import InputError

Progress = Callable[[int, int, str], None]
"""``progress(done, total, stage)``: the public progress callback (module docstring)."""


def staged(progress: Progress | None, stage: str) -> Callable[[int, int], None] | None:
  """A ``(done, total)`` callback reporting to ``progress`` under ``stage`` (None: None)."""
  if progress is None:
    return None
  return lambda done, total: progress(done, total, stage)


ENVIRONMENT_VARIABLE = 'JAXACCT_PROGRESS'


def interactive() -> bool:
  """True where a person watches: stderr is a terminal or the process is a Jupyter/IPython
  kernel, and neither pytest runs nor ``$JAXACCT_PROGRESS`` is ``0`` (``1`` forces it on)."""
  forced = os.environ.get(ENVIRONMENT_VARIABLE)
  if forced in ('0', '1'):
    return forced == '1'
  if 'PYTEST_CURRENT_TEST' in os.environ:
    return False
  return sys.stderr.isatty() or 'ipykernel' in sys.modules


def for_caller(progress) -> Progress | None:
  """The progress callback of a public long call: ``progress`` when given, none for
  ``progress=False`` (the flag that turns it off), and a ``Reporter`` when the caller gave
  nothing and a person is watching (``interactive``)."""
  if progress is False:
    return None
  if progress is None:
    return Reporter() if interactive() else None
  return progress


def format_seconds(seconds: float) -> str:
  """``seconds`` in the largest unit that keeps it ≥ 1 (s, min, h, days)."""
  if not math.isfinite(seconds):
    return 'unknown'
  for unit, size in (('days', 86400.0), ('h', 3600.0), ('min', 60.0)):
    if seconds >= size:
      return f'{seconds / size:,.1f} {unit}'
  return f'{seconds:,.1f} s'


class Reporter:
  """``Progress`` shown on stderr (module docstring).

  Args:
    label: a stage name shown instead of the one the run reports (e.g. "report curve").
    interval: seconds between plain lines off a terminal (> 0).
    unit: what ``done`` counts ("samples", "steps", "probes").
    terminal: draw a tqdm bar (default: when stderr is a terminal).
    quiet_seconds: off a terminal, a stage that finishes within this many seconds prints
      nothing (its "done" line only when it took longer).
  """

  def __init__(self, label: str | None = None, *, interval: float = 30.0,
               unit: str = 'samples', terminal: bool | None = None,
               quiet_seconds: float = 5.0):
    self.enabled = jax.process_index() == 0
    self.terminal = sys.stderr.isatty() if terminal is None else bool(terminal)
    if not (isinstance(interval, (int, float)) and 0 < interval < float('inf')):
      raise InputError(f'interval must be a finite number of seconds > 0, got {interval!r}')
    self.label, self.interval, self.unit = label, float(interval), unit
    self.quiet_seconds = float(quiet_seconds)
    self.bar = None
    self.stage = None

  def __call__(self, done: int, total: int, stage: str) -> None:
    if not self.enabled:
      return
    stage = self.label or stage
    if self.terminal:
      self._bar(done, total, stage)
      return
    now = time.perf_counter()
    if self.stage != stage or done < self.done:
      self.stage, self.started, self.last, self.first = stage, now, now, done
    self.done = done
    finished = done >= total
    if now - self.last >= self.interval or (finished and now - self.started >= self.quiet_seconds):
      self.last = now
      rate = (done - self.first) / max(now - self.started, 1e-9)
      eta = (total - done) / rate if rate > 0 else float('inf')
      print(f'jaxacct: {stage}: {done:,}/{total:,} {self.unit} ({100 * done / total:.0f} %), '
            f'{rate:,.1f}/s, ' + ('done' if finished else f'ETA {format_seconds(eta)}'),
            file=sys.stderr, flush=True)

  def _bar(self, done: int, total: int, stage: str) -> None:
    if self.bar is None or self.bar.desc != stage or done < self.bar.n:
      self.close()
      self.bar = tqdm.tqdm(total=total, initial=done, desc=stage, unit=f' {self.unit}',
                           unit_scale=True, file=sys.stderr, leave=True, dynamic_ncols=True)
    if self.bar.total != total:  # a σ search's total grows while its bracket is found
      self.bar.total = total
      self.bar.refresh()
    self.bar.update(done - self.bar.n)
    if done >= total:
      self.close()

  def close(self) -> None:
    if self.bar is not None:
      self.bar.close()
      self.bar = None
