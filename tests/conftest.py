"""Shared test configuration.

The library must give float64 results without the global x64 flag, so tests
run with JAX's default configuration and never flip it at import time (a test
that needs it uses the ``jax.enable_x64`` context manager). Hypothesis is
derandomised so every run checks the same examples.

JAX's persistent compilation cache is on for the whole run and every process it
starts (CLI runs, forced-device scripts, notebook kernels inherit the environment set
here, before JAX is imported): ``.jax-compilation-cache/`` in the checkout (ignored by
git), or ``JAX_COMPILATION_CACHE_DIR`` if set; ``JAX_ENABLE_COMPILATION_CACHE=false``
turns it off. JAX keys an entry on the program, the compile options, the devices and
the JAX/XLA versions, so a stale entry is never used, and an entry that does not
decompress or deserialise is recompiled (a warning, not an error: see
``filterwarnings`` in pyproject.toml); ``tests/test_pinned_values.py`` checks both ways.

Tiers (markers registered in pyproject.toml): ``slow`` (over ~10 s), ``notebook``,
``multiprocess``. ``pytest --durations-report=PATH`` writes the durations report
(``durations_report.py``).
"""

import gc
import os
import pathlib
import tempfile

ROOT = pathlib.Path(__file__).resolve().parents[1]
COMPILATION_CACHE = ROOT / '.jax-compilation-cache'

# Hermetic: the environment's JAX flags (a user who exports JAX_ENABLE_X64=1 for accounting
# work) and jaxacct's own state variables never reach the suite; the library must not depend
# on them (it scopes x64 itself). Removed before JAX is imported, here and in every child.
for _flag in ('JAX_ENABLE_X64', 'JAX_DEFAULT_DTYPE_BITS', 'JAX_DEFAULT_MATMUL_PRECISION',
              'JAX_NUMPY_DTYPE_PROMOTION', 'JAX_NUMPY_RANK_PROMOTION', 'JAX_DEBUG_NANS',
              'JAX_DEBUG_INFS', 'JAX_DISABLE_JIT', 'JAX_PLATFORMS', 'JAX_PLATFORM_NAME',
              'XLA_FLAGS', 'JAXACCT_SECRET', 'JAXACCT_PEER_TIMEOUT'):
  os.environ.pop(_flag, None)
_STATE = tempfile.mkdtemp(prefix='jaxacct-test-state-')
os.environ['XDG_STATE_HOME'] = os.path.join(_STATE, 'state')
os.environ['XDG_CACHE_HOME'] = os.path.join(_STATE, 'cache')

# Set before JAX is imported, so this process and its children read it at JAX import.
os.environ.setdefault('JAX_COMPILATION_CACHE_DIR', str(COMPILATION_CACHE))
# Cache every program, however quick its compile: the suite's programs are small and many.
os.environ.setdefault('JAX_PERSISTENT_CACHE_MIN_COMPILE_TIME_SECS', '0')
os.environ.setdefault('JAX_PERSISTENT_CACHE_MIN_ENTRY_SIZE_BYTES', '-1')

import hypothesis  # pylint: disable=wrong-import-position
import jax  # pylint: disable=wrong-import-position
import pytest  # pylint: disable=wrong-import-position

import durations_report  # pylint: disable=wrong-import-position

hypothesis.settings.register_profile(
    'jaxacct', derandomize=True, deadline=None, max_examples=25, print_blob=True)
hypothesis.settings.load_profile('jaxacct')


def pytest_addoption(parser):
  durations_report.pytest_addoption(parser)


def pytest_configure(config):
  if jax.config.jax_enable_compilation_cache:
    pathlib.Path(jax.config.jax_compilation_cache_dir).mkdir(parents=True, exist_ok=True)
  durations_report.pytest_configure(config)


def pytest_collection_modifyitems(items):
  """Files that start processes or notebooks run first, then other files with ``slow`` tests,
  then the rest (stable within each): under ``pytest-xdist``'s ``--dist loadfile`` the longest
  files then overlap the many short ones instead of ending the run on one worker."""
  rank = {}
  for item in items:
    marks = {mark.name for mark in item.iter_markers()}
    level = 0 if marks & {'multiprocess', 'notebook'} else 1 if 'slow' in marks else 2
    rank[item.path] = min(level, rank.get(item.path, 2))
  items.sort(key=lambda item: rank[item.path])


# Every compiled XLA:CPU executable keeps memory mappings until it is freed, and the suite
# compiles thousands of programs in one process: near the kernel's vm.max_map_count (65,530
# by default) the next compile segfaults (seen at 88 % of the suite, 63,774 mappings). After a
# module with many mappings alive, the compile caches are dropped; later modules recompile
# only what they use (from the persistent cache).
_MAX_MAPPINGS_KEPT = 30_000


def _mapping_count() -> int | None:
  try:
    with open('/proc/self/maps', 'rb') as maps:
      return sum(1 for _ in maps)
  except OSError:  # not Linux: no such limit to guard
    return None


@pytest.fixture(autouse=True, scope='module')
def _release_compiled_programs():
  yield
  count = _mapping_count()
  if count is not None and count > _MAX_MAPPINGS_KEPT:
    jax.clear_caches()
    gc.collect()


# The float32 self-test's cache (montecarlo/engine/selftest32.py): one per run, never the user's.
os.environ['JAXACCT_CACHE_DIR'] = tempfile.mkdtemp(prefix='jaxacct-test-cache-')

# Session-scoped fixtures run before the per-module and per-test ledgers below: they get a
# session ledger, never the user's.
os.environ['JAXACCT_LEDGER'] = os.path.join(
    tempfile.mkdtemp(prefix='jaxacct-test-ledger-'), 'ledger.json')


@pytest.fixture(autouse=True, scope='module')
def _module_attempt_ledger(tmp_path_factory):
  """Each module's module-scoped fixtures charge a ledger of their own: every API call charges
  the user's ledger by default, and modules verify the same mechanisms with other seeds."""
  previous = os.environ['JAXACCT_LEDGER']
  os.environ['JAXACCT_LEDGER'] = str(tmp_path_factory.mktemp('module-ledger') / 'ledger.json')
  yield
  os.environ['JAXACCT_LEDGER'] = previous


@pytest.fixture(autouse=True)
def _own_working_directory(tmp_path, monkeypatch):
  """Each test runs in its own folder: a CLI run without --out writes ``reports/<config>`` there,
  never into the checkout (where the README's main command leaves its report and charge)."""
  monkeypatch.chdir(tmp_path)


@pytest.fixture(autouse=True)
def _own_attempt_ledger(tmp_path, monkeypatch):
  """Each test's CLI runs (and their subprocesses) charge a ledger of their own, never the
  user's (``ledger.default_path``): tests calibrate the same configs with other seeds."""
  monkeypatch.setenv('JAXACCT_LEDGER', str(tmp_path / 'user-state' / 'ledger.json'))
