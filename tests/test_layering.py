"""The package's layering (ARCHITECTURE.md, "Layering"): imports go down only.

Each top-level unit of ``jaxacct`` has a layer; a module may import from its own layer or a
lower one. The test reads every module's imports (``ast``, nothing is imported) and names
each import that goes up, with its file and line.
"""

from __future__ import annotations

import ast
import pathlib

import pytest

PACKAGE = pathlib.Path(__file__).resolve().parents[1] / 'jaxacct'

# Lowest first; a unit may import units of its own layer or of the layers before it.
LAYERS = (
    ('_version', 'errors', '_validate', '_precision', '_secret', '_files', 'conventions',
     'guarantee', 'progress', 'options'),
    ('schemes', 'strategy'),
    ('strategies', 'matrices', 'lower_triangular', 'mechanism'),
    ('deterministic',),
    ('individual',),
    ('montecarlo',),
    ('batching', 'training', 'accounting'),
    ('config', 'report', 'cli', 'interop', '__init__', '__main__'),
)
RANK = {unit: rank for rank, units in enumerate(LAYERS) for unit in units}


def _unit(module: str) -> str | None:
  """The top-level unit of a ``jaxacct`` module name (``jaxacct`` itself: ``__init__``)."""
  parts = module.split('.')
  if parts[0] != 'jaxacct':
    return None
  return parts[1] if len(parts) > 1 else '__init__'


def _imports(path: pathlib.Path):
  """(line, imported unit) of every ``jaxacct`` import in a file."""
  for node in ast.walk(ast.parse(path.read_text())):
    if isinstance(node, ast.ImportFrom) and node.module and node.level == 0:
      if node.module == 'jaxacct':  # from jaxacct import x: x is the unit
        for alias in node.names:
          yield node.lineno, alias.name
      elif _unit(node.module):
        yield node.lineno, _unit(node.module)
    elif isinstance(node, ast.Import):
      for alias in node.names:
        if _unit(alias.name):
          yield node.lineno, _unit(alias.name)


def _upward_imports(root: pathlib.Path) -> list[str]:
  problems = []
  for path in sorted(root.rglob('*.py')):
    relative = path.relative_to(root.parent)
    unit = _unit('.'.join(relative.with_suffix('').parts))
    assert unit in RANK, f'{relative}: unit {unit!r} has no layer in LAYERS'
    for line, target in _imports(path):
      assert target in RANK, f'{relative}:{line}: imported unit {target!r} has no layer'
      if RANK[target] > RANK[unit]:
        problems.append(f'{relative}:{line}: {unit} (layer {RANK[unit]}) imports {target} '
                        f'(layer {RANK[target]})')
  return problems


def test_imports_go_down_only():
  assert _upward_imports(PACKAGE) == []


def test_an_upward_import_is_named(tmp_path):
  """The check can fail: a deterministic accountant importing the Monte Carlo kernels (the
  arrow issue 30 removed) is reported with its file and line."""
  package = tmp_path / 'jaxacct'
  (package / 'deterministic').mkdir(parents=True)
  (package / 'schemes.py').write_text('from jaxacct import _validate\n')
  (package / 'deterministic' / 'pld.py').write_text(
      'import math\nfrom jaxacct.montecarlo import kernels\n')
  assert _upward_imports(package) == [
      'jaxacct/deterministic/pld.py:2: deterministic (layer 3) imports montecarlo (layer 5)']


def test_every_unit_has_a_layer():
  units = {_unit('.'.join(p.relative_to(PACKAGE.parent).with_suffix('').parts))
           for p in PACKAGE.rglob('*.py')}
  assert units <= set(RANK), sorted(units - set(RANK))


def test_every_strategy_module_is_found_and_exported():
  """A new strategy is one module in ``jaxacct/strategies/``: the package imports it, and
  ``jaxacct`` exports its ``EXPORTED`` names (issue 30's file count)."""
  import importlib
  import jaxacct
  modules = sorted(p.stem for p in (PACKAGE / 'strategies').glob('*.py') if p.stem != '__init__')
  assert modules == ['banded_toeplitz', 'lower_triangular']
  for name in modules:
    module = importlib.import_module(f'jaxacct.strategies.{name}')
    assert module.EXPORTED, name
    for exported in module.EXPORTED:
      assert getattr(jaxacct, exported) is getattr(module, exported)
      assert exported in jaxacct.__all__
  # The old paths (jaxacct.matrices, jaxacct.lower_triangular) are deprecated aliases:
  # tests/test_matrices.py::test_the_old_module_paths_are_deprecated_aliases.
