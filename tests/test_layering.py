"""The package's layering (ARCHITECTURE.md, "Layering"): imports go down only.

Each unit of ``jaxacct`` (a dotted prefix in ``LAYERS``) has a layer; a module may import from
its own layer or a lower one, and inside a package of ``INNER`` the same holds between its
modules (montecarlo: the engine set never imports the evr set). The test reads every module's
imports (``ast``, nothing is imported) and names each import that goes up, with its file and
line: import statements (relative, local and ``TYPE_CHECKING`` ones too), ``import_module`` /
``__import__`` calls with a constant name, and 'jaxacct.a.b:name' references (config.py's
``library=``). A call whose name is not a constant is a finding, unless it is a package importing
its own children (f'{__name__}.…'), a constant prefix, or marked ``# layering: user module``.
"""

from __future__ import annotations

import ast
import importlib.util
import pathlib
import re
import sys

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

# Inside a package, the same rule between its modules (dotted names below the package; a
# module's unit is the longest name listed, ``__init__`` the package itself). montecarlo is two
# sub-packages (ARCHITECTURE.md, "Layering"): the engine lowest, then EVR. ``engine.kernels``
# is the family modules and the package.
ENGINE = (
    ('engine', 'engine.sharding', 'engine.keys', 'engine.margin', 'engine.binomial',
     'engine.binomial32', 'engine.watchdog'),
    ('engine.noise', 'engine.kernels.base', 'engine.kernels._common', 'engine.kernels.history32'),
    ('engine.kernels',),
    ('engine.program32',),
    ('engine.sampling', 'engine.selftest32'),
    ('engine.stream',),
    ('engine.tilted',),
)
EVR = (
    ('evr', 'evr.bounds', 'evr.search_start', 'evr.resolution'),
    ('evr.ledger', 'evr.checkpoint'),
    ('evr.tilted',), ('evr.tilted_search',), ('evr.tilted_plan',),
    ('evr.plan',), ('evr.precision',), ('evr.estimator',), ('evr.candidates',),
    ('evr.verification',), ('evr.calibration',),
)
INNER = {'montecarlo': ENGINE + EVR + (('__init__',),)}
INNER_RANK = {package: {unit: rank for rank, units in enumerate(layers) for unit in units}
              for package, layers in INNER.items()}
# Sets of a package whose first may never import the second.
NEVER = {'montecarlo': ('engine', {u for units in ENGINE for u in units},
                        'evr', {u for units in EVR for u in units})}
# Units outside the package that its first set of NEVER may not import (below in LAYERS).
NEVER_OUTSIDE = {'montecarlo': ('deterministic', 'individual')}
# Edges NEVER forbids that the tree has today, each with its reason (to be emptied, not grown).
# (The last one, sampling → options for MIN_BLOCKS_PER_CALL, ended when options moved to the
# ground layer, jaxacct/options.py.)
ALLOWED: set[tuple[str, str]] = set()
# Dynamic imports whose argument is not a constant, by (module, function), with the reason.
DYNAMIC = {
    # Reads the 'jaxacct.a.b:name' library= references, which count as imports where written.
    ('jaxacct.config', 'library_default'),
}
USER_MODULE = '# layering: user module'  # marks a dynamic import of the user's own module
_REFERENCE = re.compile(r'jaxacct(\.\w+)+:\w+')


def _longest(name: str, known) -> str | None:
  """The longest dotted prefix of ``name`` in ``known``."""
  parts = name.split('.')
  for end in range(len(parts), 0, -1):
    if '.'.join(parts[:end]) in known:
      return '.'.join(parts[:end])
  return None


def _unit(module: str) -> str | None:
  """The unit of a ``jaxacct`` module name: its longest prefix in ``RANK`` (``jaxacct``
  itself, or a name it exports: ``__init__``)."""
  parts = module.split('.')
  if parts[0] != 'jaxacct':
    return None
  return _longest('.'.join(parts[1:]), RANK) or '__init__'


def _own_unit(module: str) -> str | None:
  """The unit of a module of the tree (None if ``LAYERS`` has none for it)."""
  rest = module.partition('.')[2]
  return _longest(rest, RANK) if rest else '__init__'


def _module_of(path: pathlib.Path, root: pathlib.Path) -> str:
  """The dotted name of a file under ``root`` (a package: its ``__init__.py``)."""
  parts = path.relative_to(root.parent).with_suffix('').parts
  return '.'.join(parts[:-1] if parts[-1] == '__init__' else parts)


def _inner(module: str) -> tuple[str, str] | None:
  """(package, unit) of a ``jaxacct`` module inside a package of ``INNER``, else None."""
  rest = module.partition('.')[2]
  package = _longest(rest, INNER)
  if package is None:
    return None
  return package, _longest(rest[len(package) + 1:], INNER_RANK[package]) or '__init__'


def _function_at(tree: ast.AST) -> dict[int, str]:
  """The enclosing function's name of each call's line."""
  names = {}
  for node in ast.walk(tree):
    if isinstance(node, (ast.FunctionDef, ast.AsyncFunctionDef)):
      for inner in ast.walk(node):
        if isinstance(inner, ast.Call):
          names.setdefault(inner.lineno, node.name)
  return names


def _imports(path: pathlib.Path, module: str):
  """(line, imported ``jaxacct`` module, or a finding as text) of every import in a file:
  statements (relative ones resolved, local and ``TYPE_CHECKING`` ones too), calls of
  ``import_module`` / ``__import__``, and 'jaxacct.a.b:name' references."""
  text = path.read_text()
  lines = text.splitlines()
  tree = ast.parse(text)
  package = module if path.name == '__init__.py' else module.rpartition('.')[0]
  functions = None
  for node in ast.walk(tree):
    if isinstance(node, ast.ImportFrom):
      base = (importlib.util.resolve_name('.' * node.level + (node.module or ''), package)
              if node.level else node.module)
      for alias in node.names:  # each name may be a submodule
        yield node.lineno, f'{base}.{alias.name}'
    elif isinstance(node, ast.Import):
      for alias in node.names:
        yield node.lineno, alias.name
    elif (isinstance(node, ast.Call) and node.args and
          getattr(node.func, 'attr', getattr(node.func, 'id', None))
          in ('import_module', '__import__')):
      argument = node.args[0]
      if isinstance(argument, ast.Constant) and isinstance(argument.value, str):
        yield node.lineno, argument.value
      elif (isinstance(argument, ast.JoinedStr) and
            isinstance(argument.values[0], ast.FormattedValue) and
            getattr(argument.values[0].value, 'id', None) == '__name__'):
        pass  # f'{__name__}.…': the package importing its own children
      elif (isinstance(argument, ast.JoinedStr) and
            isinstance(argument.values[0], ast.Constant) and
            argument.values[0].value.startswith('jaxacct.')):
        yield node.lineno, argument.values[0].value.rstrip('.')
      elif not any(USER_MODULE in line for line in lines[node.lineno - 1:node.end_lineno]):
        functions = functions or _function_at(tree)
        if (module, functions.get(node.lineno)) not in DYNAMIC:
          yield node.lineno, 'a dynamic import (not a constant name)'
    elif (isinstance(node, ast.Constant) and isinstance(node.value, str)
          and _REFERENCE.fullmatch(node.value)):
      yield node.lineno, node.value.partition(':')[0]


def _upward_imports(root: pathlib.Path) -> list[str]:
  """Every import that goes up (between units of ``LAYERS``, or inside a package of
  ``INNER``), every engine → evr edge, every dynamic import not accounted for."""
  problems = []
  for path in sorted(root.rglob('*.py')):
    relative = path.relative_to(root.parent)
    module = _module_of(path, root)
    unit = _own_unit(module)
    assert unit in RANK, f'{relative}: unit {unit!r} has no layer in LAYERS'
    inner = _inner(module)
    for line, imported in _imports(path, module):
      if imported.startswith('a dynamic import'):
        problems.append(f'{relative}:{line}: {imported}')
        continue
      target = _unit(imported)
      if target is None:
        continue
      if RANK[target] > RANK[unit]:
        problems.append(f'{relative}:{line}: {unit} (layer {RANK[unit]}) imports {target} '
                        f'(layer {RANK[target]})')
      if inner is None:
        continue
      package, mine = inner
      low, low_set, high, high_set = NEVER.get(package, ('', (), '', ()))
      if mine in low_set and target in NEVER_OUTSIDE.get(package, ()):
        problems.append(f'{relative}:{line}: {package}.{mine} ({low}) imports {target}')
      into = _inner(imported)
      if into is None or into[0] != package:
        continue
      theirs, ranks = into[1], INNER_RANK[package]
      if mine in low_set and theirs in high_set:
        if (f'{package}.{mine}', f'{package}.{theirs}') not in ALLOWED:
          problems.append(f'{relative}:{line}: {package}.{mine} ({low}) imports '
                          f'{package}.{theirs} ({high})')
      elif ranks[theirs] > ranks[mine]:
        problems.append(f'{relative}:{line}: {package}.{mine} (layer {ranks[mine]} of '
                        f'{package}) imports {package}.{theirs} (layer {ranks[theirs]})')
  return problems


def test_imports_go_down_only():
  assert _upward_imports(PACKAGE) == []


def test_every_allowed_edge_is_still_there(monkeypatch):
  """``ALLOWED`` and ``DYNAMIC`` only shrink: each entry still names an edge of the tree."""
  monkeypatch.setattr(sys.modules[__name__], 'ALLOWED', set())
  monkeypatch.setattr(sys.modules[__name__], 'DYNAMIC', set())
  found = _upward_imports(PACKAGE)
  for source, target in ALLOWED:
    assert any(f' {source} (engine) imports {target} (evr)' in f for f in found), source
  for module, function in DYNAMIC:
    path = module.replace('.', '/') + '.py'
    assert any(f.startswith(f'{path}:') and 'dynamic import' in f for f in found), function


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


def _tree(tmp_path, files: dict[str, str]) -> pathlib.Path:
  """A synthetic ``jaxacct`` package of ``files`` (path: source)."""
  package = tmp_path / 'jaxacct'
  for name, source in files.items():
    (package / name).parent.mkdir(parents=True, exist_ok=True)
    (package / name).write_text(source)
  return package


def test_an_upward_relative_import_is_named(tmp_path):
  package = _tree(tmp_path, {
      'schemes/__init__.py': 'from . import base\nfrom .base import x\n',
      'schemes/base.py': 'from .. import _validate\nfrom ..montecarlo import sampling\n',
      'montecarlo/engine/sampling.py': 'from . import keys\nfrom ..evr.calibration import search\n'})
  assert _upward_imports(package) == [
      'jaxacct/montecarlo/engine/sampling.py:2: montecarlo.engine.sampling (engine) imports '
      'montecarlo.evr.calibration (evr)',
      'jaxacct/schemes/base.py:2: schemes (layer 1) imports montecarlo (layer 5)']


def test_an_upward_constant_import_module_is_named(tmp_path):
  package = _tree(tmp_path, {'strategy.py': (
      'import importlib\n'
      "importlib.import_module('jax')\n"
      "accounting = importlib.import_module('jaxacct.accounting')\n"
      "__import__('jaxacct.config')\n"),
      'deterministic/__init__.py': (
          'import importlib, typing\n'
          "importlib.import_module(f'{__name__}.pld')\n"  # its own children: allowed
          'if typing.TYPE_CHECKING:\n  from jaxacct import training\n'
          "_RUN = 'jaxacct.montecarlo.evr.calibration:calibrate_noise_multiplier'\n")})
  assert _upward_imports(package) == [
      'jaxacct/deterministic/__init__.py:4: deterministic (layer 3) imports training (layer 6)',
      'jaxacct/deterministic/__init__.py:5: deterministic (layer 3) imports montecarlo (layer 5)',
      'jaxacct/strategy.py:3: strategy (layer 1) imports accounting (layer 6)',
      'jaxacct/strategy.py:4: strategy (layer 1) imports config (layer 7)']


def test_a_dynamic_import_of_another_package_is_named(tmp_path):
  package = _tree(tmp_path, {
      'schemes/__init__.py': (
          'import importlib\n'
          "importlib.import_module(f'jaxacct.cli.{name}')\n"
          'importlib.import_module(name)\n'
          "importlib.import_module('.'.join(parts))\n"),
      'training/task.py': (
          'import importlib\n'
          f'module = importlib.import_module(where)  {USER_MODULE}\n')})
  assert _upward_imports(package) == [
      'jaxacct/schemes/__init__.py:2: schemes (layer 1) imports cli (layer 7)',
      'jaxacct/schemes/__init__.py:3: a dynamic import (not a constant name)',
      'jaxacct/schemes/__init__.py:4: a dynamic import (not a constant name)']


def test_an_engine_to_evr_edge_is_named(tmp_path):
  """Inside montecarlo: engine → evr, a downward edge inside evr, an upward one inside engine,
  and engine → deterministic."""
  package = _tree(tmp_path, {
      'montecarlo/__init__.py': '', 'montecarlo/engine/__init__.py': '',
      'montecarlo/evr/__init__.py': '', 'montecarlo/engine/kernels/__init__.py': '',
      'montecarlo/engine/stream.py': (
          'from jaxacct.montecarlo.evr import ledger\n'
          'from jaxacct.montecarlo.evr.bounds import check\n'
          'from jaxacct.montecarlo.evr import precision\n'
          'from jaxacct.montecarlo.engine import keys\n'
          'from jaxacct.deterministic import pld\n'),
      'montecarlo/engine/kernels/bminsep.py': (
          'from jaxacct.montecarlo.engine import sampling\nfrom . import base\n'),
      'montecarlo/evr/calibration.py': (
          'from jaxacct.montecarlo.evr import plan\nfrom jaxacct.montecarlo.engine import stream\n')})
  stream = 'jaxacct/montecarlo/engine/stream.py'
  assert _upward_imports(package) == [
      'jaxacct/montecarlo/engine/kernels/bminsep.py:1: montecarlo.engine.kernels (layer 2 of '
      'montecarlo) imports montecarlo.engine.sampling (layer 4)',
      f'{stream}:1: montecarlo.engine.stream (engine) imports montecarlo.evr.ledger (evr)',
      f'{stream}:2: montecarlo.engine.stream (engine) imports montecarlo.evr.bounds (evr)',
      f'{stream}:3: montecarlo.engine.stream (engine) imports montecarlo.evr.precision (evr)',
      f'{stream}:5: montecarlo.engine.stream (engine) imports deterministic']


def test_the_montecarlo_sets_are_its_modules():
  """Every module of montecarlo is in one set (``ls jaxacct/montecarlo``), and each set name
  is a module there."""
  modules = {'.'.join(p.relative_to(PACKAGE / 'montecarlo').with_suffix('').parts)
             for p in (PACKAGE / 'montecarlo').rglob('*.py')}
  units = {unit for units in INNER['montecarlo'] for unit in units}
  assert {_longest(m.removesuffix('.__init__'), units) or m for m in modules} == units
  assert units - {'kernels'} <= {m.removesuffix('.__init__') for m in modules}


def test_every_unit_has_a_layer():
  missing = [p.name for p in PACKAGE.rglob('*.py') if _own_unit(_module_of(p, PACKAGE)) is None]
  assert not missing, missing
  assert _own_unit('jaxacct.newunit') is None


def _without_a_strategy(modules) -> list[str]:
  """The modules whose ``EXPORTED`` names no ``jaxacct.strategy.Strategy`` subclass."""
  from jaxacct.strategy import Strategy  # pylint: disable=import-outside-toplevel
  return [module.__name__ for module in modules
          if not any(isinstance(value, type) and issubclass(value, Strategy)
                     for value in (getattr(module, n) for n in getattr(module, 'EXPORTED', ())))]


def test_a_strategy_module_without_a_strategy_is_named():
  """The negative case: a helper module among the strategies (no ``Strategy`` exported)."""
  import types
  import jaxacct
  helper = types.ModuleType('jaxacct.strategies.helper')
  helper.EXPORTED = ('square',)
  helper.square = lambda x: x * x
  assert _without_a_strategy([jaxacct.strategies.banded_toeplitz, helper,
                              types.ModuleType('jaxacct.strategies.empty')]) == [
                                  'jaxacct.strategies.helper', 'jaxacct.strategies.empty']


def test_every_strategy_module_is_found_and_exported():
  """A new strategy is one module in ``jaxacct/strategies/``: the package imports it, and
  ``jaxacct`` exports its ``EXPORTED`` names (issue 30's file count)."""
  import importlib
  import jaxacct
  modules = sorted(p.stem for p in (PACKAGE / 'strategies').glob('*.py') if p.stem != '__init__')
  assert 'banded_toeplitz' in modules
  assert _without_a_strategy(
      importlib.import_module(f'jaxacct.strategies.{name}') for name in modules) == []
  for name in modules:
    module = importlib.import_module(f'jaxacct.strategies.{name}')
    for exported in module.EXPORTED:
      assert getattr(jaxacct, exported) is getattr(module, exported)
      assert exported in jaxacct.__all__
  # The old paths (jaxacct.matrices, jaxacct.lower_triangular) are deprecated aliases:
  # tests/test_matrices.py::test_the_old_module_paths_are_deprecated_aliases.


def test_the_clis_shared_module_stays_small():
  """Issue 44, "the CLI translates, nothing more": the commands turn flags and configs into
  library requests and render the answers, and library decisions (budget gates, plan totals,
  report contents) live in the library, so what the commands share stays small."""
  lines = len((PACKAGE / 'cli' / 'common.py').read_text().splitlines())
  assert lines <= 300, (f'jaxacct/cli/common.py has {lines} lines (at most 300): move a '
                        'library decision into the library, one command\'s code into its module')
