"""The one progress protocol of every long computation, and a reporter for people.

Every public long run takes ``progress(done, total, stage)`` (``Progress``): Monte Carlo runs
count samples over both directions ("estimate", "estimation sweep 2", "verification",
"report curve"), training counts steps ("training"), a deterministic σ search counts probes
("σ search (conditional_composition)"). ``done`` starts again at 0 with each stage; ``total``
is exact for sample and step counts, and for a σ search the number of probes the search will
make if its bracket holds (it grows while the bracket is being found), so an ETA is honest
about what is known.

A run of several stages (a calibration: estimation sweeps, then the verification) may also
announce the stages still ahead with ``expect(progress, phases)``: a callback with an
``expect`` method (``Reporter`` has one) hears it, and a plain callable sees exactly the
``progress(done, total, stage)`` calls it always saw — the protocol is unchanged. Each
``Phase`` names its stage, its total, a label to show for it ("estimation sweep 1/2") and
the relative cost of one of its units, so a whole-run ETA can be given from the rate measured
so far.

A phase with no progress calls of its own (a compile, a plan's replay of queries, a
throughput measurement) says what starts with ``announce(progress, message)``: a callback
with an ``announce`` method (``Reporter``) prints it; a plain callable sees nothing (the
protocol is unchanged) and ``progress=False`` silences it; with no callback (None, the
library's default) it goes to a ``Reporter`` where a person watches (``interactive``), else to
the ``jaxacct`` logger at INFO, which the ``jaxacct`` command shows on stderr and a library
user sees only with INFO logging on — so a log file of the CLI never goes silent through a
long phase, and tests and scripts stay quiet.

``Reporter`` turns those calls into what a person sees on stderr (process 0 only): a tqdm bar
on a terminal, otherwise (a log, a batch job, ``--json``) a plain line at least every
``interval`` seconds while calls arrive (across stages: a run of many short stages is not
silent either) with the rate and ETA of the stage and, after ``expect``, of the whole run; a
stage's first line comes as soon as ``prompt_seconds`` (10 s) have passed without one, so a
slow stage says so early.
"""

from __future__ import annotations

import contextlib
import logging
import math
import os
import sys
import threading
import time
from typing import Callable, NamedTuple, Sequence

import jax
import tqdm

from jaxacct.errors import InputError

_LOG = logging.getLogger(__name__)  # under the library's logger, 'jaxacct'

Progress = Callable[[int, int, str], None]
"""``progress(done, total, stage)``: the public progress callback (module docstring)."""


def staged(progress: Progress | None, stage: str) -> Callable[[int, int], None] | None:
  """A ``(done, total)`` callback reporting to ``progress`` under ``stage`` (None: None)."""
  if progress is None:
    return None
  return lambda done, total: progress(done, total, stage)


class Phase(NamedTuple):
  """A stage of a run still ahead, as announced by ``expect``.

  Attributes:
    stage: the name its ``progress`` calls give (the third argument).
    total: the units it counts (its calls' ``total``).
    cost: the relative cost of one unit (seconds per unit where a plan measured them; any
      common scale otherwise): only ratios between the phases of one ``expect`` matter.
    label: what a reporter shows instead of ``stage`` (e.g. "estimation sweep 1/2"), or None.
  """

  stage: str
  total: int
  cost: float = 1.0
  label: str | None = None


def expect(progress: Progress | None, phases: Sequence[Phase]) -> None:
  """Tells ``progress`` the phases of a run still ahead, the one starting now first, when it
  listens (an ``expect(phases)`` method, as ``Reporter`` has); otherwise does nothing, so a
  plain ``progress(done, total, stage)`` callable sees the same calls as always. A run calls
  it again when its plan changes (a calibration that needs another sweep)."""
  listener = getattr(progress, 'expect', None)
  if callable(listener):
    listener(tuple(phases))


def announce(progress, message: str) -> None:
  """Says that a phase without progress calls of its own starts now (``message``, e.g.
  "compiling the float64 program of 16 σ…"), or what it took once it is over (module
  docstring): to ``progress.announce`` when it has one (``Reporter``), nowhere for a plain
  callable or ``progress=False``, and for None (the caller gave nothing) to a ``Reporter``
  where a person watches (``interactive``), else to the ``jaxacct`` logger at INFO (the
  ``jaxacct`` command shows it on stderr; a library user only with INFO logging on)."""
  if progress is False:
    return
  if progress is None:
    if interactive():
      Reporter().announce(message)
    elif jax.process_index() == 0:
      _LOG.info('jaxacct: %s', message)
    return
  listener = getattr(progress, 'announce', None)
  if callable(listener):
    listener(message)


@contextlib.contextmanager
def heartbeat(progress, what: str, *, every: float = 10.0,
              count: Callable[[], int] | None = None):
  """Within it, a phase with no progress calls of its own (``what``: "the replay") says it is
  still going every ``every`` seconds (``announce``: "… still running after 20 s, 12
  compositions so far"), so a log never goes silent for longer: a daemon thread that only
  reads the clock and ``count()`` (how much is done, optional) and stops when the block ends.
  Nothing runs for ``progress=False``."""
  if progress is False:
    yield
    return
  stop = threading.Event()
  started = time.monotonic()

  def beat() -> None:
    while not stop.wait(every):
      done = '' if count is None else f', {count():,} so far'
      announce(progress, f'{what}: still running after '
                         f'{format_seconds(time.monotonic() - started)}{done}…')

  thread = threading.Thread(target=beat, name='jaxacct-heartbeat', daemon=True)
  thread.start()
  try:
    yield
  finally:
    stop.set()
    thread.join()


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

  Off a terminal it prints a line when ``interval`` seconds have passed since its last line
  (or since it was made), whichever stage the call belongs to — ``prompt_seconds`` for a
  stage's first line, so a slow stage says so early — and a "done" line for a stage that
  took longer than ``quiet_seconds``; ``announce`` prints a line at once (on a terminal
  above the bar). After ``expect`` it shows each planned stage by
  its label and adds the whole run's ETA: the rest of this stage and of the stages after it,
  in cost units, at the seconds per cost unit measured so far in the run (each stage's first
  call, which may hold a compile or a resumed position, is not counted).

  Args:
    label: a stage name shown instead of the one the run reports (e.g. "report curve").
    interval: seconds between plain lines off a terminal (> 0).
    unit: what ``done`` counts ("samples", "steps", "probes").
    terminal: draw a tqdm bar (default: when stderr is a terminal).
    quiet_seconds: off a terminal, a stage that finishes within this many seconds prints
      nothing (its "done" line only when it took longer).
    prompt_seconds: off a terminal, a stage's first line comes at its first call after this
      many seconds without a line (at most ``interval``).
  """

  def __init__(self, label: str | None = None, *, interval: float = 30.0,
               unit: str = 'samples', terminal: bool | None = None,
               quiet_seconds: float = 5.0, prompt_seconds: float = 10.0):
    self.enabled = jax.process_index() == 0
    self.terminal = sys.stderr.isatty() if terminal is None else bool(terminal)
    if not (isinstance(interval, (int, float)) and 0 < interval < float('inf')):
      raise InputError(f'interval must be a finite number of seconds > 0, got {interval!r}')
    self.label, self.interval, self.unit = label, float(interval), unit
    self.quiet_seconds = float(quiet_seconds)
    self.prompt_seconds = min(float(prompt_seconds), self.interval)
    self.bar = None
    self.stage = None
    self.stage_lines = 0  # plain lines printed in the current stage
    self.done_line: tuple | None = None  # (stage, done, total) of the last "done" line printed
    self.done = self.first = 0
    self.started = self.at = self.last = time.perf_counter()  # last: the last plain line
    self.phases: tuple[Phase, ...] = ()
    self.measured = [0.0, 0.0]  # seconds and cost units of the run's finished stages
    self.run_over = False  # the last announced stage finished: the next expect is a new run

  def expect(self, phases: Sequence[Phase]) -> None:
    """The stages still ahead of the run, the one starting now first (``progress.expect``)."""
    self._close_stage()
    if self.run_over:
      self.measured, self.run_over = [0.0, 0.0], False
    self.phases = tuple(phases)

  def __call__(self, done: int, total: int, stage: str) -> None:
    if not self.enabled:
      return
    now = time.perf_counter()
    if self.stage != stage or done < self.done:
      self._close_stage()
      if self.run_over:  # a stage after the planned run: a plan is no longer shown
        self.phases, self.measured, self.run_over = (), [0.0, 0.0], False
      self.stage, self.started, self.first, self.stage_lines = stage, now, done, 0
    self.done, self.at = done, now
    shown = self.label or self._phase_label(stage)
    whole = self.run_eta(done, total)
    if self.terminal:
      self._bar(done, total, shown, whole)
      return
    finished = done >= total
    if finished and self.done_line == (stage, done, total):
      return  # a caller that reports its end twice (a search's last probe) gets one line
    wait = self.interval if self.stage_lines else self.prompt_seconds
    if now - self.last >= wait or (finished and now - self.started >= self.quiet_seconds):
      self.last, self.stage_lines = now, self.stage_lines + 1
      self.done_line = (stage, done, total) if finished else None
      rate = (done - self.first) / max(now - self.started, 1e-9)
      eta = (total - done) / rate if rate > 0 else float('inf')
      # The stage's first report carries its compile (or host tables): no rate is known yet.
      pace = (f'{rate:,.1f}/s, ' + ('done' if finished else f'ETA {format_seconds(eta)}')
              if done > self.first else ('done' if finished else 'rate and ETA after the next call'))
      print(f'jaxacct: {shown}: {done:,}/{total:,} {self.unit} ({100 * done / total:.0f} %), '
            + pace
            + ('' if whole is None else f'; whole run: ETA {format_seconds(whole)}'),
            file=sys.stderr, flush=True)

  def announce(self, message: str) -> None:
    """Prints ``message`` at once (``progress.announce``): what starts now, or what a phase
    without progress calls took (process 0 only; on a terminal above the bar)."""
    if not self.enabled:
      return
    line = f'jaxacct: {message}'
    if self.terminal:
      tqdm.tqdm.write(line, file=sys.stderr)
    else:
      print(line, file=sys.stderr, flush=True)
    self.last = time.perf_counter()

  def _phase(self, stage: str) -> int | None:
    for index, phase in enumerate(self.phases):
      if phase.stage == stage:
        return index
    return None

  def _phase_label(self, stage: str) -> str:
    index = self._phase(stage)
    return stage if index is None else (self.phases[index].label or stage)

  def _close_stage(self) -> None:
    """Ends the current stage: adds it to the run's measured seconds and cost units."""
    if self.stage is None:
      return
    index = self._phase(self.stage)
    if index is not None:
      self.measured[0] += self.at - self.started
      self.measured[1] += (self.done - self.first) * self.phases[index].cost
      # The run's last stage is over: a later expect plans another run.
      self.run_over = index == len(self.phases) - 1 and self.done >= self.phases[index].total
    self.stage = None

  def run_eta(self, done: int, total: int) -> float | None:
    """Seconds left in the whole run after ``expect``: this stage's remaining units and the
    later stages', in cost units, at the seconds per cost unit measured so far (None before
    ``expect``, for a stage it did not announce, or before anything was measured)."""
    index = None if self.stage is None else self._phase(self.stage)
    if index is None:
      return None
    phases = self.phases
    seconds = self.measured[0] + (self.at - self.started)
    units = self.measured[1] + (done - self.first) * phases[index].cost
    if units <= 0 or seconds <= 0:
      return None
    left = max(total - done, 0) * phases[index].cost + sum(
        phase.total * phase.cost for phase in phases[index + 1:])
    return left * seconds / units

  def _bar(self, done: int, total: int, stage: str, whole: float | None) -> None:
    if self.bar is None or self.bar.desc != stage or done < self.bar.n:
      self.close()
      self.bar = tqdm.tqdm(total=total, initial=done, desc=stage, unit=f' {self.unit}',
                           unit_scale=True, file=sys.stderr, leave=True, dynamic_ncols=True)
    if self.bar.total != total:  # a σ search's total grows while its bracket is found
      self.bar.total = total
      self.bar.refresh()
    if whole is not None:
      self.bar.set_postfix_str(f'whole run: ETA {format_seconds(whole)}', refresh=False)
    self.bar.update(done - self.bar.n)
    if done >= total:
      self.close()

  def close(self) -> None:
    if self.bar is not None:
      self.bar.close()
      self.bar = None
