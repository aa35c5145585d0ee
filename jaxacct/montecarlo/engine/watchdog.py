"""The peer watchdog of a ``jax.distributed`` run: a hung peer ends this process cleanly.

A peer that dies (killed, crashed) breaks the next collective, and the CLI turns that error
into exit code 1 and one line. A peer that *hangs* (SIGSTOP, a stuck host, a network cut
that drops packets) breaks nothing: the survivors wait in their collective until the
coordination service's heartbeat timeout (100 s by default), and then the runtime ends every
process with ``LOG(FATAL)``: SIGABRT and a C++ stack dump ("Check failure stack trace").
jax 0.10's ``jax.distributed.initialize`` offers only that timeout
(``heartbeat_timeout_seconds``), not a way to handle it, and a SIGABRT handler cannot make
the end clean. So this module watches the peers itself, in Python, ahead of the runtime.

Mechanism. ``start(timeout=...)`` starts two daemon threads in this process:

* the *beater* writes a counter under ``jaxacct/watchdog/<process id>`` in the coordination
  service's key-value store every ``poll_interval(timeout)`` seconds (1 s, less for timeouts
  under 5 s) and reads every process's counter back; a peer's counter that changed proves
  the peer was alive, whatever its main thread is doing (XLA releases the GIL while it
  compiles, executes and waits in a collective);
* the *judge* wakes at the same interval, and when a peer's counter has not changed for
  ``timeout`` seconds, or no key-value round has finished for ``timeout`` seconds (the
  coordination service, which lives in process 0, is not answering), it prints one line on
  stderr (``jaxacct: error: a process of the distributed run was lost (...)``, naming the
  process and the timeout) and ends this process with ``os._exit(1)``: no shutdown barrier,
  no abort.

Guarantees (``tests/montecarlo/test_distributed.py`` checks them on loopback):

* a peer that stops answering, process 0 (which holds the coordination service) included,
  ends this process with exit code 1 within ``bound_seconds(timeout) = timeout + 2 *
  poll_interval(timeout)`` seconds of its last beat (plus one key-value round trip, and the
  scheduling delay of a loaded machine); a peer is judged only after ``timeout`` seconds in
  which this process read its counter without change. Measured from SIGSTOP to exit on a
  shared 2-core machine: 4.1 to 6.4 s for timeout 5 (10 runs, either process stopped),
  59.8 and 60.4 s for the default 60;
* this holds whatever this process's main thread is doing, as long as it does not hold the
  GIL for a poll interval or more: a device call in flight, a compilation and a collective
  release it (measured: the threads ran every 50 ms through both), so the length of a
  device call does not enter the bound;
* the runtime's own heartbeat must be longer, or it aborts first: it fires between half of
  ``heartbeat_timeout_seconds`` and all of it after the peer stopped (measured: 8.5 s of 10,
  17.5 s of 30), so pass ``heartbeat_timeout_seconds=runtime_heartbeat_seconds(timeout)``
  (at least 100, JAX's default, and > 2 · ``bound_seconds``) to ``jax.distributed.initialize``;
  ``jaxacct --distributed`` does.

Not guaranteed:

* a process that marked itself done (``stop()``, or its exit, below) is no longer watched by
  its peers; one that hangs after that (in the runtime's shutdown barrier) is the runtime's;
* a peer whose Python threads are starved for ``timeout`` seconds (a C extension holding the
  GIL that long) is judged hung: choose the timeout above the longest such stall;
* this process being stopped itself (Ctrl-Z, a suspended laptop) does not blame the peers:
  when the judge wakes late by more than ``timeout / 2``, every clock restarts;
* one key-value write and read per process per poll interval: fine for tens of processes;
  a thousand processes put a thousand reads of a thousand keys per second on process 0.

At exit (``atexit``, before JAX's own shutdown) this process writes ``done`` and waits, still
watching, until every peer is done or ``bound_seconds(timeout) + poll_interval(timeout)``
have passed, then stops its threads, so that the runtime's shutdown barrier is met by
processes that have all arrived. A peer that is done is not watched any more; a peer whose
entry changes back from ``done`` to a counter (a ``start`` after ``stop``) is watched again.

Library use (the CLI does this with ``--distributed --peer-timeout SECONDS``)::

  timeout = 30.0
  jax.distributed.initialize(
      ..., heartbeat_timeout_seconds=watchdog.runtime_heartbeat_seconds(timeout))
  watchdog.start(timeout=timeout)   # on every process, right after initialize
  ...                               # the run; a checkpoint folder makes it resumable
  watchdog.stop()                   # before an explicit jax.distributed.shutdown();
                                    # exit does it by itself

Host code: no JAX device work. It reads the client of ``jax.distributed`` from
``jax._src.distributed.global_state`` (jax 0.10 has no public accessor), in ``_client``.
"""

from __future__ import annotations

import atexit
import math
import os
import sys
import threading
import time
from typing import Any

from jaxacct import _validate
from jaxacct.errors import InputError

DEFAULT_TIMEOUT = 60.0
"""Seconds of silence after which a peer is judged hung (``--peer-timeout``'s default)."""

TIMEOUT_ENV = 'JAXACCT_PEER_TIMEOUT'
"""The environment variable the CLI reads when ``--peer-timeout`` is not given."""

_KEYS = 'jaxacct/watchdog/'
_DONE = 'done'
_DEFAULT_HINT = ('Rerun on every host; a run with a checkpoint folder (RunOptions(checkpoint=...)) '
                 'resumes from its last saved block')


def poll_interval(timeout: float) -> float:
  """Seconds between two key-value rounds, and between two judgements: 1 s, or
  ``timeout / 5`` when that is shorter."""
  return min(1.0, timeout / 5.0)


def bound_seconds(timeout: float) -> float:
  """The longest time from a peer's last sign of life to this process's exit:
  ``timeout + 2 * poll_interval(timeout)`` (one interval before the change is seen, one
  before the judge looks), plus one key-value round trip (milliseconds on a LAN)."""
  return timeout + 2.0 * poll_interval(timeout)


def runtime_heartbeat_seconds(timeout: float) -> int:
  """A ``heartbeat_timeout_seconds`` for ``jax.distributed.initialize`` under which the
  watchdog fires first: the runtime may abort from half its heartbeat timeout on (measured),
  so twice ``bound_seconds`` plus 10 s, and never less than JAX's default of 100 s."""
  return max(100, math.ceil(2.0 * bound_seconds(timeout)) + 10)


def _client() -> tuple[Any, int, int]:
  """The ``jax.distributed`` client, this process's id and the process count."""
  from jax._src import distributed  # pylint: disable=import-outside-toplevel
  state = distributed.global_state
  if state.client is None:
    raise InputError('watchdog.start needs jax.distributed.initialize(...) first: the '
                     'watchdog talks through its coordination service')
  return state.client, int(state.process_id), int(state.num_processes)


class Watchdog:
  """The two threads of one ``start``; ``start`` and ``stop`` are the interface."""

  def __init__(self, client: Any, process_id: int, num_processes: int, timeout: float,
               hint: str):
    self.timeout = timeout
    self.poll = poll_interval(timeout)
    self._client, self._id, self._hint = client, process_id, hint
    self._peers = [p for p in range(num_processes) if p != process_id]
    now = time.monotonic()
    self._lock = threading.Lock()
    self._seen: dict[int, str] = {}                    # peer -> last value read
    self._changed = {p: now for p in self._peers}      # peer -> when its value last changed
    self._done: set[int] = set()                       # peers whose entry reads 'done'
    self._round = now                                  # when a key-value round last finished
    self._leaving = threading.Event()                  # write 'done' from now on
    self._wake = threading.Event()                     # start the next round now
    self._marked = threading.Event()                   # 'done' is written
    self._stopped = threading.Event()
    self._threads = [threading.Thread(target=target, name=f'jaxacct-watchdog-{name}',
                                      daemon=True)
                     for name, target in (('beater', self._beat), ('judge', self._judge))]

  def _current(self) -> bool:
    """False once jax.distributed was shut down (or re-initialised) under this watchdog."""
    from jax._src import distributed  # pylint: disable=import-outside-toplevel
    return distributed.global_state.client is self._client

  def _beat(self) -> None:
    key, count = f'{_KEYS}{self._id}', 0
    while not self._stopped.is_set():
      if not self._current():
        self._stopped.set()
        return
      leaving = self._leaving.is_set()
      try:
        self._client.key_value_set(key, _DONE if leaving else str(count), allow_overwrite=True)
        entries = self._client.key_value_dir_get(_KEYS)
      except Exception:  # pylint: disable=broad-except  # the judge sees the rounds stop
        entries = None
      if entries is not None:
        now = time.monotonic()
        with self._lock:
          self._round = now
          for name, value in entries:
            try:
              peer = int(name.rsplit('/', 1)[1])
            except ValueError:
              continue
            if peer == self._id or peer not in self._changed:
              continue
            if value == _DONE:
              self._done.add(peer)
            else:
              self._done.discard(peer)
            if self._seen.get(peer) != value:
              self._seen[peer], self._changed[peer] = value, now
        if leaving:
          self._marked.set()
        count += 1
      # Leaving: quicker rounds, so that the exit sees the peers' 'done' soon.
      self._wake.wait(self.poll / 4 if leaving else self.poll)
      self._wake.clear()

  def _judge(self) -> None:
    last = time.monotonic()
    while not self._stopped.wait(self.poll):
      now = time.monotonic()
      with self._lock:
        if now - last > self.poll + self.timeout / 2:
          # This process was stopped or starved itself: restart every clock.
          self._round = now
          self._changed = {p: now for p in self._changed}
        last = now
        silent = [p for p in self._peers
                  if p not in self._done and now - self._changed[p] > self.timeout]
        late = now - self._round > self.timeout
      if (silent or late) and self._current() and not self._stopped.is_set():
        if silent:
          names = ', '.join(str(p) for p in silent)
          reason = (f'process{"es" if len(silent) > 1 else ""} {names} gave no sign of life '
                    f'for {self.timeout:g} s: hung, stopped or cut off')
        else:
          reason = (f'the coordination service (process 0) did not answer for '
                    f'{self.timeout:g} s: process 0 hung, stopped or cut off')
        _exit(f'jaxacct: error: a process of the distributed run was lost ({reason}); '
              f'this process stops too. {self._hint}')

  def start(self) -> None:
    for thread in self._threads:
      thread.start()
    atexit.register(self._at_exit)

  def stop(self, *, wait_for_peers: bool = False) -> None:
    """Writes ``done`` (at most ``bound_seconds`` of waiting for the write), then, with
    ``wait_for_peers``, waits still watching until every peer is done (at most
    ``bound_seconds + poll``), and stops the threads."""
    atexit.unregister(self._at_exit)
    if self._stopped.is_set():
      return
    self._leaving.set()
    self._wake.set()
    deadline = time.monotonic() + bound_seconds(self.timeout) + self.poll
    self._marked.wait(bound_seconds(self.timeout))
    while wait_for_peers and time.monotonic() < deadline and not self._stopped.is_set():
      with self._lock:
        if self._done.issuperset(self._peers):
          break
      time.sleep(self.poll / 4)
    self._stopped.set()
    self._wake.set()
    for thread in self._threads:
      if thread is not threading.current_thread():
        thread.join(self.poll + 1.0)  # an RPC in flight on a dead coordinator: give up

  def _at_exit(self) -> None:
    self.stop(wait_for_peers=True)


def _exit(message: str) -> None:
  """Prints ``message`` and ends the process at once (no atexit, no shutdown barrier)."""
  try:
    sys.stdout.flush()
    print(message, file=sys.stderr, flush=True)
  finally:
    os._exit(1)  # pylint: disable=protected-access


_running: Watchdog | None = None


def start(*, timeout: float = DEFAULT_TIMEOUT, hint: str = _DEFAULT_HINT) -> Watchdog:
  """Starts watching the peers of this ``jax.distributed`` process (see the module docstring).

  Call it on every process right after ``jax.distributed.initialize``, which should be given
  ``heartbeat_timeout_seconds=runtime_heartbeat_seconds(timeout)``. With one process there
  is nothing to watch and no thread starts.

  Args:
    timeout: seconds without a sign of life from a peer (or an answer from the coordination
      service) after which this process prints one line and exits with code 1; finite, > 0.
    hint: the end of that line: what the user can do (rerun, resume).

  Returns:
    The running ``Watchdog`` (``stop()`` stops it).

  Raises:
    InputError: ``timeout`` is not finite and > 0, jax.distributed is not initialised, or a
      watchdog is already running (``stop()`` it first).
  """
  global _running  # pylint: disable=global-statement
  timeout = _validate.positive_finite('timeout', timeout)
  if _running is not None and not _running._stopped.is_set():  # pylint: disable=protected-access
    raise InputError('watchdog.start: a watchdog is already running; call watchdog.stop() first')
  client, process_id, num_processes = _client()
  _running = Watchdog(client, process_id, num_processes, timeout, hint)
  if num_processes > 1:
    _running.start()
  else:
    _running._stopped.set()  # pylint: disable=protected-access
  return _running


def stop(*, wait_for_peers: bool = True) -> None:
  """Marks this process done for its peers' watchdogs, waits (still watching, at most
  ``bound_seconds(timeout) + poll_interval(timeout)``) until every peer is done too unless
  ``wait_for_peers`` is False, and stops watching; no-op when no watchdog runs. Call it
  before an explicit ``jax.distributed.shutdown()``, whose barrier then finds every process
  arrived (exit does the same by itself)."""
  if _running is not None:
    _running.stop(wait_for_peers=wait_for_peers)
