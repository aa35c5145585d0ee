"""The config key reference (``config.key_table``, ``jaxacct config --keys``,
docs/config-keys.md) is the schema validation uses: every key a config may hold is in it, its
stated ranges are the ones enforced, its defaults the ones that apply, and the committed page is
what the command prints, so it cannot go stale."""

from __future__ import annotations

import pathlib
import re
import subprocess
import sys

import pytest

from jaxacct import cli
from jaxacct import config as config_lib
from jaxacct import strategy
from jaxacct.cli import config_keys

ROOT = pathlib.Path(__file__).resolve().parents[1]
PAGE = ROOT / 'docs' / 'config-keys.md'
MINIMAL = {'scheme': {'type': 'poisson', 'iterations': 4, 'sampling_prob': 0.5},
           'strategy': {'c_col': [1.0]}}


@pytest.fixture(scope='module')
def rows() -> dict[str, config_lib.KeyRow]:
  return {row.key: row for section in config_lib.key_table() for row in section.rows}


@pytest.mark.multiprocess
def test_the_committed_page_is_what_the_command_prints():
  """A fresh process (only the package's own families and strategies registered) prints
  docs/config-keys.md byte for byte; regenerate it with the command in the message."""
  done = subprocess.run([sys.executable, '-m', 'jaxacct', 'config', '--keys', '--markdown'],
                        capture_output=True, text=True, timeout=120, cwd=ROOT)
  assert done.returncode == 0, done.stderr
  assert PAGE.read_text() == done.stdout, (
      'docs/config-keys.md is stale: run `jaxacct config --keys --markdown > '
      'docs/config-keys.md`')


def test_the_readme_links_the_page():
  assert '(docs/config-keys.md)' in (ROOT / 'README.md').read_text()


def test_every_key_a_config_may_hold_is_listed_once(rows):
  expected = {f'scheme.{key}' for key in config_lib.scheme_keys()}
  expected |= {f'strategy.{key}' for key in config_lib.strategy_keys()}
  for section, keys in config_lib.SCHEMA.items():
    if section not in ('scheme', 'strategy'):
      expected |= {section} if keys is None else {f'{section}.{key}' for key in keys}
  listed = [row.key for section in config_lib.key_table() for row in section.rows]
  assert len(listed) == len(set(listed))
  assert set(listed) == expected
  assert set(config_lib.VALUE_TYPES) | set(config_lib.DEFAULTS) <= set(listed)
  for row in rows.values():
    assert row.type and row.meaning, row  # every key says what it is and does


def _outside(value_type):
  """A value the value type refuses, or None (no range to step out of)."""
  name = type(value_type).__name__
  if name == '_Integer':
    return value_type.minimum - 1
  if name == '_Real':
    return value_type.low if value_type.low_open else value_type.low - 1.0
  if name == '_Choice' and not callable(value_type.allowed):
    return 'not-a-choice'
  return None


def test_the_stated_ranges_are_the_ones_enforced(rows):
  """Each checked key's row shows the bound its check enforces (the same object), and a
  value just outside it is refused at load, naming the key."""
  checked = 0
  for path, value_type in config_lib.VALUE_TYPES.items():
    bad = _outside(value_type)
    if bad is None:
      continue
    row_type = rows[path].type
    if isinstance(bad, str):
      assert row_type == 'one of ' + ', '.join(value_type.allowed)
    else:
      bound = value_type.minimum if isinstance(bad, int) else value_type.low
      assert f'{bound:g}' in row_type or f'{bound:,}' in row_type, (path, row_type)
    section, _, key = path.rpartition('.')
    raw = {**MINIMAL, **({section: {key: bad}} if section else {key: bad})}
    with pytest.raises(config_lib.ConfigError, match=re.escape(path)):
      config_lib._check(raw)  # pylint: disable=protected-access
    checked += 1
  assert checked >= 30


def test_defaults_are_the_ones_that_apply(rows):
  """A config default is what ``setting`` answers for a config without the key; a library
  default names the function whose keyword of that name has it."""
  for path, default in config_lib.DEFAULTS.items():
    assert config_lib.setting(MINIMAL, path) == default
    assert rows[path].default == config_lib._shown(default)  # pylint: disable=protected-access
  libraries = [key for key in config_lib.KEYS if key.library is not None]
  assert len(libraries) >= 15
  for key in libraries:
    value, function = config_lib.library_default(key)
    assert rows[key.path].default.endswith(f'({function})')
    if key.default_text is None:
      assert value is not None and rows[key.path].default.startswith(
          config_lib._shown(value))  # pylint: disable=protected-access
  assert rows['calibration.grid_ratio'].default == '1.01 (MonteCarloOptions)'
  attempt = next(key for key in config_lib.KEYS if key.path == 'calibration.attempt')
  assert config_lib.library_default(attempt) == (1, 'MonteCarloOptions')
  assert rows['training.learning_rate'].default == '0.5 (train_task)'


def test_registered_keys_come_with_their_own_docs(rows, monkeypatch):
  """Scheme fields and strategy keys are read from their registries: a family's field from
  its annotations and "Attributes:" docstring, a new strategy key with its builder's
  docstring and options as soon as it is registered."""
  assert rows['scheme.warm_start'] == config_lib.KeyRow(
      'scheme.warm_start', 'boolean', 'true',
      'bminsep: Algorithm 2 (True) or Algorithm 1 (False).')
  assert rows['scheme.partition'].type == 'one of independent, equal_split'
  assert rows['scheme.iterations'] == config_lib.KeyRow('scheme.iterations', 'integer', '',
                                                        'n ≥ 1.')
  assert 'DP-SGD' in rows['strategy.c_col'].meaning
  assert rows['strategy.normalize'].default == 'false'
  monkeypatch.setattr(strategy, '_CONFIG_KEYS', dict(strategy._CONFIG_KEYS))

  @strategy.config_key('flat_bands', 'count', options={'height': 'reals'})
  def flat(value, *, iterations, min_sep, height=(1.0,)):
    """m equal bands.

    Options:
      height: their value.
    """
    del value, iterations, min_sep, height

  table = {row.key: row for section in config_lib.key_table() for row in section.rows}
  assert table['strategy.flat_bands'] == config_lib.KeyRow(
      'strategy.flat_bands', 'integer ≥ 1', '', 'm equal bands.')
  assert table['strategy.height'] == config_lib.KeyRow(
      'strategy.height', 'list of reals', '[1.0]', 'their value. (with flat_bands)')


def test_the_command_prints_the_reference(capsys):
  assert cli.main(['config', '--keys']) == 0
  out = capsys.readouterr().out
  for section in config_lib.key_table():
    for row in section.rows:
      assert f'{row.key}: {row.type}' in ' '.join(out.split())
  assert max(len(line) for line in out.splitlines()) <= 100  # wrapped for a terminal
  assert cli.main(['config', '--keys', '--markdown']) == 0
  assert capsys.readouterr().out == config_keys.markdown()
  with pytest.raises(SystemExit) as exited:  # the reference is the only thing it prints
    cli.main(['config'])
  assert exited.value.code == 2 and '--keys' in capsys.readouterr().err
  with pytest.raises(SystemExit):  # listed in `jaxacct --help`
    cli.main(['--help'])
  assert 'config key reference' in capsys.readouterr().out


def test_markdown_cells_are_escaped():
  cell = config_keys._markdown_cell  # pylint: disable=protected-access
  assert cell('a | b < c, `x<y>`') == 'a \\| b &lt; c, `x<y>`'


def test_docstring_entries_read_google_sections():
  doc = '''One line.

  Attributes:
    a, b: first
      continued.
    c: third.

  Returns:
    d: not an attribute.
  '''
  assert config_lib._docstring_entries(doc) == {  # pylint: disable=protected-access
      'a': 'first continued.', 'b': 'first continued.', 'c': 'third.'}
  assert config_lib._docstring_entries(None) == {}  # pylint: disable=protected-access
