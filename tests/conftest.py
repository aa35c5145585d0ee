"""Shared test configuration.

The library must give float64 results without the global x64 flag, so tests
run with JAX's default configuration and never flip it at import time (a test
that needs it uses the ``jax.enable_x64`` context manager). Hypothesis is
derandomised so every run checks the same examples.
"""

import gc

import hypothesis
import jax
import pytest

hypothesis.settings.register_profile(
    'jaxacct', derandomize=True, deadline=None, max_examples=25, print_blob=True)
hypothesis.settings.load_profile('jaxacct')


# Every compiled XLA:CPU executable keeps memory mappings until it is freed, and the suite
# compiles thousands of programs in one process: near the kernel's vm.max_map_count (65,530
# by default) the next compile segfaults (seen at 88 % of the suite, 63,774 mappings). After a
# module with many mappings alive, the compile caches are dropped; later modules recompile
# only what they use.
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
