"""A durations report of the test suite, grouped by file, with JAX compile time told apart.

``pytest --durations-report=PATH`` writes a Markdown report: wall time per file, how much of it
was JAX compilation (tracing, lowering to StableHLO and the XLA compile or persistent-cache
read: the union of those spans, so nested traces are not counted twice) and the rest ("run");
the slowest tests; and every test over the ``slow`` threshold that carries no ``slow`` marker —
a list to act on, never an assertion (timing is not tested). Works under ``pytest-xdist``:
each worker measures its own tests and ships the figures in the report's ``user_properties``.

A test's time is its setup, call and teardown, so a module-scoped fixture counts for the first
test that needs it. Compilation inside a subprocess the test starts (CLI runs, forced-device
scripts, notebook kernels) is not seen here and counts as run time.
"""

from __future__ import annotations

import collections
import datetime
import os
import pathlib
import platform
import time

import pytest

#: Over this many seconds a test belongs to the ``slow`` tier (README, "Developing").
SLOW_SECONDS = 10.0
#: JAX's monitoring events of compilation (``jax._src.dispatch``).
_COMPILE_EVENTS = frozenset({
    '/jax/core/compile/jaxpr_trace_duration',
    '/jax/core/compile/jaxpr_to_mlir_module_duration',
    '/jax/core/compile/backend_compile_duration',
})
_COMPILE_PROPERTY = 'jax_compile_seconds'
TIERS = ('slow', 'notebook', 'multiprocess')


def _union_length(spans: list[tuple[float, float]]) -> float:
  """Total length of the union of intervals (nested traces overlap their parents)."""
  total, end = 0.0, -float('inf')
  for start, stop in sorted(spans):
    if stop <= end:
      continue
    total += stop - max(start, end)
    end = stop
  return total


class CompileClock:
  """Collects the time spans of JAX compile events while a test runs (one per process)."""

  def __init__(self):
    self.spans: list[tuple[float, float]] = []
    from jax import monitoring  # pylint: disable=import-outside-toplevel
    monitoring.register_event_time_span_listener(self._listen)

  def _listen(self, event: str, start: float, end: float, **kwargs) -> None:
    del kwargs
    if event in _COMPILE_EVENTS:
      self.spans.append((start, end))

  def take(self) -> float:
    seconds, self.spans = _union_length(self.spans), []
    return seconds


class DurationsReport:
  """The plugin behind ``--durations-report`` (see the module docstring)."""

  def __init__(self, path: pathlib.Path, is_worker: bool):
    self.path = path
    self.is_worker = is_worker
    self.clock = CompileClock()
    self.tests: dict[str, dict] = collections.defaultdict(
        lambda: {'seconds': 0.0, 'compile': 0.0, 'markers': set()})
    self.started = time.time()
    self.workers: set[str] = set()

  # -- every process: measure
  def pytest_runtest_logstart(self, nodeid, location):
    del nodeid, location
    self.clock.take()  # compilation between tests (collection, imports) is nobody's

  @pytest.hookimpl(hookwrapper=True)
  def pytest_runtest_makereport(self, item, call):
    outcome = yield
    del item, call
    outcome.get_result().user_properties.append((_COMPILE_PROPERTY, self.clock.take()))

  # -- the controller (or the only process): collect and write
  def pytest_runtest_logreport(self, report):
    if self.is_worker:
      return
    node = getattr(report, 'node', None)  # the xdist worker that ran it
    self.workers.add(getattr(getattr(node, 'gateway', None), 'id', 'main'))
    test = self.tests[report.nodeid]
    test['seconds'] += report.duration
    test['compile'] += sum(v for k, v in report.user_properties if k == _COMPILE_PROPERTY)
    test['markers'] |= {m for m in TIERS if m in report.keywords}

  def pytest_sessionfinish(self, session):
    if self.is_worker:
      return
    del session
    self.path.write_text(self.render(time.time() - self.started))

  def render(self, wall: float) -> str:
    tests = self.tests
    files = collections.defaultdict(lambda: {'count': 0, 'seconds': 0.0, 'compile': 0.0,
                                             'slowest': 0.0})
    for nodeid, test in tests.items():
      row = files[nodeid.split('::')[0]]
      row['count'] += 1
      row['seconds'] += test['seconds']
      row['compile'] += test['compile']
      row['slowest'] = max(row['slowest'], test['seconds'])
    total = sum(t['seconds'] for t in tests.values())
    compile_total = sum(t['compile'] for t in tests.values())
    lines = [
        '# Test durations',
        '',
        f'{datetime.datetime.now(datetime.UTC):%Y-%m-%d %H:%M} UTC; {len(tests)} tests; '
        f'wall {wall:.0f} s with {len(self.workers) or 1} worker(s); summed test time '
        f'{total:.0f} s, of which JAX compilation {compile_total:.0f} s; {os.cpu_count()} cores, '
        f'{platform.machine()}, Python {platform.python_version()}.',
        '',
        '"compile" is tracing, lowering and the XLA compile (or persistent-cache read) seen in',
        'the test process; a subprocess\'s compilation counts as "run". Times include setup and',
        'teardown, so a shared fixture is charged to the first test that uses it.',
        '',
        '## By file',
        '',
        '| file | tests | total s | compile s | run s | slowest test s |',
        '|---|---:|---:|---:|---:|---:|',
    ]
    for name, row in sorted(files.items(), key=lambda kv: -kv[1]['seconds']):
      lines.append(f'| {name} | {row["count"]} | {row["seconds"]:.1f} | {row["compile"]:.1f} | '
                   f'{row["seconds"] - row["compile"]:.1f} | {row["slowest"]:.1f} |')
    folders = collections.defaultdict(lambda: [0, 0.0])
    for name, row in files.items():
      folder = str(pathlib.PurePosixPath(name).parent)
      folders[folder][0] += row['count']
      folders[folder][1] += row['seconds']
    lines += ['', '## By folder', '', '| folder | tests | total s |', '|---|---:|---:|']
    for folder, (count, seconds) in sorted(folders.items()):
      lines.append(f'| {folder} | {count} | {seconds:.1f} |')
    ranked = sorted(tests.items(), key=lambda kv: -kv[1]['seconds'])
    lines += ['', '## Slowest 20 tests', '', '| test | markers | total s | compile s |',
              '|---|---|---:|---:|']
    for nodeid, test in ranked[:20]:
      lines.append(f'| `{nodeid}` | {", ".join(sorted(test["markers"])) or "-"} | '
                   f'{test["seconds"]:.1f} | {test["compile"]:.1f} |')
    unmarked = [(n, t) for n, t in ranked
                if t['seconds'] > SLOW_SECONDS and 'slow' not in t['markers']]
    lines += ['', f'## Unmarked tests over {SLOW_SECONDS:.0f} s', '']
    if unmarked:
      lines += ['Mark these `slow` or make them faster:', '', '| test | total s |', '|---|---:|']
      lines += [f'| `{n}` | {t["seconds"]:.1f} |' for n, t in unmarked]
    else:
      lines.append('None.')
    return '\n'.join(lines) + '\n'


def pytest_addoption(parser):
  parser.addoption('--durations-report', metavar='PATH', default=None,
                   help='write a Markdown durations report (by file, compile vs run, slowest '
                        'tests, unmarked tests over the slow threshold) to PATH')


def pytest_configure(config):
  path = config.getoption('--durations-report')
  if path:
    is_worker = hasattr(config, 'workerinput')
    config.pluginmanager.register(DurationsReport(pathlib.Path(path), is_worker),
                                  'jaxacct-durations-report')
