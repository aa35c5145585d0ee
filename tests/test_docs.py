"""Every promise in the docs runs as written.

- Every ```python block of README.md and docs/*.md runs in a fresh process (its own working
  folder and attempt ledger), and what its comments say a ``print`` shows is what it prints.
  The convention: the comment on a top-level ``print(...)`` statement's last line, and the
  comment-only lines right after it, are the first lines that call prints (an explanatory
  comment after a print is set apart by a blank line). ``…`` in a line stands for any text.
  Each number of a comment is compared with the printed one to one unit of its last shown
  digit: the blocks fix their keys, so on one platform the output is bitwise the same every
  run; the unit absorbs a rounding boundary moved by another XLA version's summation order,
  and anything larger is a changed result the doc must follow.
- Every ```bash block: its ``jaxacct ...`` commands run (``--out`` into a temporary folder, a
  temporary ledger); its setup commands (``python3 -m venv``, ``pip install``) are not run,
  but every extra they name must exist in pyproject.toml, and a ``pytest -m`` expression may
  name only registered markers. Any other command fails the test, so a new kind of command
  gets a rule here before it reaches the README.
- The README states no test counts (they change with every commit; the README says how to
  count), extras keep names no normaliser changes, the install commands in ``MissingExtraError``
  messages work without a package index entry, ``jaxacct.training`` / ``jaxacct.interop``
  import on first access, ``jaxacct --version`` and the help's examples work, and no text a
  user reads cites internal issue or seed numbers instead of papers.

Blocks that calibrate or train take over 10 s and are marked ``slow`` (measured on the 2-core
CPU, quiet / with another job on both cores: the README's "What is here" 12 / 41 s, the
jax_privacy snippet 22 / 45 s; with the suite's compilation cache, the quickstart calibration
9 s and the digits training 27 s); every block that starts a process is marked
``multiprocess``.
"""

from __future__ import annotations

import ast
import dataclasses
import io
import math
import os
import pathlib
import re
import shlex
import subprocess
import sys
import textwrap
import tokenize
import tomllib

import pytest

ROOT = pathlib.Path(__file__).resolve().parents[1]
DOCS = (ROOT / 'README.md', *sorted((ROOT / 'docs').glob('*.md')))
PYPROJECT = tomllib.loads((ROOT / 'pyproject.toml').read_text())
EXTRAS = PYPROJECT['project']['optional-dependencies']
MARKERS = {line.split(':')[0].strip()
           for line in PYPROJECT['tool']['pytest']['ini_options']['markers']}

# A block doing any of these takes over ~10 s on the 2-core CPU (module docstring).
SLOW_CALLS = ('calibrate_noise_multiplier', 'calibrated_plan', 'jaxacct.account(',
              'jaxacct calibrate', 'jaxacct train')
BLOCK_TIMEOUT_SECONDS = 900


@dataclasses.dataclass(frozen=True)
class Block:
  """A fenced code block: its file, the line of its first code line, language and code."""
  path: pathlib.Path
  line: int
  language: str
  code: str

  @property
  def id(self) -> str:
    return f'{self.path.relative_to(ROOT)}:{self.line}'


def code_blocks(path: pathlib.Path) -> list[Block]:
  """Every fenced block (```language ... ```) of a Markdown file."""
  blocks, language, start, lines = [], None, 0, []
  for number, line in enumerate(path.read_text().splitlines(), start=1):
    fence = re.match(r'^\s*```\s*([\w+-]*)\s*$', line)
    if fence and language is None:
      language, start, lines = fence.group(1) or 'text', number + 1, []
    elif fence and not fence.group(1):
      blocks.append(Block(path, start, language, textwrap.dedent('\n'.join(lines)) + '\n'))
      language = None
    elif language is not None:
      lines.append(line)
  assert language is None, f'{path.name}: a code block opened at line {start - 1} never closes'
  return blocks


BLOCKS = [block for path in DOCS for block in code_blocks(path)]
PYTHON_BLOCKS = [block for block in BLOCKS if block.language == 'python']
BASH_BLOCKS = [block for block in BLOCKS if block.language in ('bash', 'sh', 'shell')]


def _marks(block: Block, starts_processes: bool):
  marks = [pytest.mark.multiprocess] if starts_processes else []
  if any(call in block.code for call in SLOW_CALLS):
    marks.append(pytest.mark.slow)
  return marks


def test_the_docs_have_the_blocks_this_file_checks():
  """The extractor finds the README's blocks (a broken fence would silently skip them), and
  every block is one of the languages checked here."""
  assert len(PYTHON_BLOCKS) >= 2 and len(BASH_BLOCKS) >= 4
  assert {block.language for block in BLOCKS} <= {'python', 'bash', 'sh', 'shell'}, (
      [block.id for block in BLOCKS if block.language not in ('python', 'bash', 'sh', 'shell')])


# ------------------------------------------------------------------ python blocks: expected output
@dataclasses.dataclass(frozen=True)
class ExpectedPrint:
  """A top-level ``print`` statement (lines ``first``–``last`` of the block) and the lines its
  comments say it prints."""
  first: int
  last: int
  lines: tuple[str, ...]


def expected_prints(code: str) -> list[ExpectedPrint]:
  """The top-level ``print(...)`` statements with output comments (module docstring)."""
  comments = {}
  for token in tokenize.generate_tokens(io.StringIO(code).readline):
    if token.type == tokenize.COMMENT:
      comments[token.start[0]] = token.string
  source_lines = code.splitlines()
  found = []
  for statement in ast.parse(code).body:
    if not (isinstance(statement, ast.Expr) and isinstance(statement.value, ast.Call)
            and isinstance(statement.value.func, ast.Name) and statement.value.func.id == 'print'):
      continue
    lines, number = [], statement.end_lineno
    if number in comments:
      lines.append(comments[number])
    number += 1
    while number <= len(source_lines) and source_lines[number - 1].lstrip().startswith('#'):
      lines.append(source_lines[number - 1].strip())
      number += 1
    if lines:
      found.append(ExpectedPrint(statement.lineno, statement.end_lineno,
                                 tuple(re.sub(r'^#\s?', '', line) for line in lines)))
  return found


_NUMBER = r'[-+]?(?:\d+\.\d*|\.\d+|\d+)(?:[eE][-+]?\d+)?'


def _normalise(line: str) -> str:
  return ' '.join(line.split())


def _last_digit_unit(number: str) -> float:
  """One unit of the last digit shown: '1.72251' -> 1e-5, '2.858e-05' -> 1e-8, '75013' -> 1."""
  mantissa, _, exponent = number.lower().lstrip('+-').partition('e')
  decimals = len(mantissa.partition('.')[2])
  return 10.0 ** (int(exponent or 0) - decimals)


def line_mismatch(expected: str, actual: str) -> str | None:
  """None when ``actual`` is what ``expected`` says (same text, ``…`` for any text, each number
  within one unit of its last shown digit), else the reason."""
  expected, actual = _normalise(expected), _normalise(actual)
  pattern, numbers = '', []
  for part in re.split(f'(…|{_NUMBER})', expected):
    if part == '…':
      pattern += '.*?'
    elif part and re.fullmatch(_NUMBER, part):
      pattern += f'({_NUMBER})'
      numbers.append(part)
    else:
      pattern += re.escape(part)
  match = re.fullmatch(pattern, actual)
  if match is None:
    return 'the text differs'
  for shown, printed in zip(numbers, match.groups()):
    if not math.isclose(float(printed), float(shown), rel_tol=0.0,
                        abs_tol=_last_digit_unit(shown) * (1 + 1e-9)):
      return f'{printed} is not {shown} to its last shown digit'
  return None


def test_line_mismatch_reads_numbers_and_ellipses():
  assert line_mismatch('sigma = 3.85415 by pld', 'sigma = 3.85416 by pld') is None
  assert line_mismatch('sigma = 3.85415 by pld', 'sigma = 3.85417 by pld') is not None
  assert line_mismatch('d(2)=2.858e-05±7.5e-06; …', 'd(2)=2.858e-05±7.5e-06; max, more') is None
  assert line_mismatch('d(2)=2.858e-05', 'd(2)=2.86e-05') is not None
  assert line_mismatch('Guarantee(epsilon=2, …)', 'Guarantee(noise_multiplier=4, epsilon=2)') \
      is not None
  assert line_mismatch('a  b  = 1', 'a b = 1') is None
  assert line_mismatch('num_samples=75013', 'num_samples=75014') is None  # one unit: integers too
  assert line_mismatch('num_samples=75013', 'num_samples=75016') is not None


def test_expected_prints_are_the_print_comments():
  code = textwrap.dedent('''\
      x = 1  # not output
      print(x)  # 1
      # 2
      y = 2
      print(y,
            x)
      #   three
      # four

      # an explanation, not output
      print(y)
      ''')
  assert expected_prints(code) == [ExpectedPrint(2, 2, ('1', '2')),
                                   ExpectedPrint(5, 6, ('  three', 'four'))]


_BEGIN, _END = '<<jaxacct-docs-print {}>>', '<</jaxacct-docs-print {}>>'


def _instrument(code: str, prints: list[ExpectedPrint]) -> str:
  """The block with a marker line printed before and after each checked ``print``."""
  lines = code.splitlines()
  for index, expected in sorted(enumerate(prints), key=lambda pair: -pair[1].first):
    lines.insert(expected.last, f'print({_END.format(index)!r}, flush=True)')
    lines.insert(expected.first - 1, f'print({_BEGIN.format(index)!r}, flush=True)')
  return '\n'.join(lines) + '\n'


def _env(tmp_path: pathlib.Path) -> dict:
  return dict(os.environ, JAXACCT_LEDGER=str(tmp_path / 'state' / 'ledger.json'))


def run_python_block(code: str, where: str, tmp_path: pathlib.Path) -> list[str]:
  """Runs ``code`` in a fresh process (working folder and ledger under ``tmp_path``); returns
  each way its output differs from its print comments (empty: it prints what they say)."""
  prints = expected_prints(code)
  script = tmp_path / 'block.py'
  script.write_text(_instrument(code, prints))
  work = tmp_path / 'work'
  work.mkdir()
  result = subprocess.run([sys.executable, str(script)], cwd=work, env=_env(tmp_path),
                          capture_output=True, text=True, timeout=BLOCK_TIMEOUT_SECONDS)
  if result.returncode != 0:
    return [f'{where} failed:\n{result.stderr[-3000:]}']
  problems = []
  for index, expected in enumerate(prints):
    output = result.stdout.split(_BEGIN.format(index) + '\n', 1)[1]
    output = output.split(_END.format(index), 1)[0].splitlines()
    at = f'{where}: the print at block line {expected.first}'
    if len(output) < len(expected.lines):
      problems.append(f'{at} printed {len(output)} lines, its comments show '
                      f'{len(expected.lines)}: {output}')
    for shown, printed in zip(expected.lines, output):
      reason = line_mismatch(shown, printed)
      if reason is not None:
        problems.append(f'{at}: {reason}\n  comment: {shown}\n  printed: {printed}')
  return problems


@pytest.mark.multiprocess
def test_a_comment_that_is_not_the_output_is_named(tmp_path):
  code = textwrap.dedent('''\
      print(1.25, 'x')  # 1.25 x
      print('two\\nlines')
      # two
      # lines
      print(2.5)  # 2.7
      print('a')
      # a
      # b
      ''')
  problems = run_python_block(code, 'block', tmp_path)
  assert len(problems) == 2, problems
  assert 'line 5: 2.5 is not 2.7' in problems[0] and 'line 6 printed 1 lines' in problems[1]


@pytest.mark.parametrize('block', [pytest.param(block, id=block.id, marks=_marks(block, True))
                                   for block in PYTHON_BLOCKS])
def test_python_block_runs_and_prints_what_its_comments_say(block, tmp_path):
  assert run_python_block(block.code, block.id, tmp_path) == []


# --------------------------------------------------------------------------------- bash blocks
def _commands(code: str) -> list[list[str]]:
  """The block's commands: each line split by the shell's rules (comments dropped), then at
  ``&&``."""
  commands = []
  for line in code.splitlines():
    words = shlex.split(line, comments=True)
    while words:
      cut = words.index('&&') if '&&' in words else len(words)
      commands.append(words[:cut])
      words = words[cut + 1:]
  return commands


def _kind(argv: list[str]) -> str:
  program = pathlib.Path(argv[0]).name
  if program.startswith('python') and argv[1:3] == ['-m', 'venv']:
    return 'venv'
  if program.startswith('pip') or (program.startswith('python') and argv[1:3] == ['-m', 'pip']):
    return 'pip'
  if program == 'jaxacct':
    return 'jaxacct'
  if program.startswith('python') and argv[1:3] == ['-m', 'pytest']:
    return 'pytest'
  raise AssertionError(f'a doc block runs {shlex.join(argv)!r}: give it a rule in '
                       'tests/test_docs.py (run it, or check what it needs)')


def _requested_extras(argv: list[str]) -> set[str]:
  """The extras a ``pip install`` command names ('.[a,b]', 'jaxacct[a] @ git+…')."""
  assert 'install' in argv, f'{shlex.join(argv)!r}: only pip install is expected in the docs'
  extras = set()
  for argument in argv[argv.index('install') + 1:]:
    if not argument.startswith('-'):
      for group in re.findall(r'\[([^\]]*)\]', argument.split(' @ ')[0]):
        extras.update(name.strip() for name in group.split(','))
  return extras


def _check_setup(argv: list[str], where: str) -> None:
  if _kind(argv) == 'pip':
    missing = _requested_extras(argv) - set(EXTRAS)
    assert not missing, f'{where}: extras {sorted(missing)} are not in pyproject.toml'
  elif _kind(argv) == 'pytest' and '-m' in argv[3:]:
    options = argv[3:]  # after `python -m pytest`
    expression = options[options.index('-m') + 1]
    names = set(re.findall(r'\w+', expression)) - {'and', 'or', 'not'}
    assert names <= MARKERS, f'{where}: unregistered markers {sorted(names - MARKERS)}'


def _starts_processes(block: Block) -> bool:
  return any(_kind(argv) == 'jaxacct' for argv in _commands(block.code))


@pytest.mark.parametrize('block', [
    pytest.param(block, id=block.id, marks=_marks(block, _starts_processes(block)))
    for block in BASH_BLOCKS])
def test_bash_block_runs(block, tmp_path):
  """Setup lines are checked (extras, markers), never run; ``jaxacct`` lines run from a
  temporary folder, with paths of the repository made absolute, ``--out`` there and a
  temporary ledger."""
  for number, argv in enumerate(_commands(block.code)):
    where = f'{block.id}: {shlex.join(argv)}'
    if _kind(argv) != 'jaxacct':
      _check_setup(argv, where)
      continue
    arguments = [str(ROOT / word) if (ROOT / word).is_file() else word for word in argv[1:]]
    if '--out' not in arguments:
      arguments += ['--out', str(tmp_path / f'out{number}')]
    result = subprocess.run([sys.executable, '-m', 'jaxacct.cli', *arguments], cwd=tmp_path,
                            env=_env(tmp_path), capture_output=True, text=True,
                            timeout=BLOCK_TIMEOUT_SECONDS)
    assert result.returncode == 0, f'{where} failed:\n{result.stderr[-3000:]}'


def test_install_commands_name_extras_that_exist():
  """Every ``pip install`` with extras anywhere in the README, docs and notebooks' README —
  in code blocks or inline code — names extras of pyproject.toml."""
  texts = [*DOCS, ROOT / 'notebooks' / 'README.md']
  commands = [command for path in texts
              for command in re.findall(r"pip install[^`\n]*\[[^`\n]*", path.read_text())]
  assert commands
  for command in commands:
    missing = _requested_extras(shlex.split(command, comments=True)) - set(EXTRAS)
    assert not missing, f'{command!r}: extras {sorted(missing)} are not in pyproject.toml'


# ------------------------------------------------------------------------------ extras, installs
def _normalised(name: str) -> str:
  """PEP 685's (and PEP 503's) normal form of an extra's name."""
  return re.sub(r'[-_.]+', '-', name).lower()


def test_extra_names_survive_every_normaliser():
  """pip ≥ 23.3 normalises extras (PEP 685: 'jax_privacy' becomes 'jax-privacy' in the
  metadata), pip 23.2 looks the name up as given and, failing, ignores the extra with only a
  warning: a name equal to its normal form works with both."""
  for name, requirements in EXTRAS.items():
    assert name == _normalised(name), f'extra {name!r}: call it {_normalised(name)!r}-free'
    for requirement in requirements:
      for group in re.findall(r'^jaxacct\[([^\]]*)\]', requirement):
        for extra in group.split(','):
          assert extra.strip() in EXTRAS, f'extra {name!r} refers to a missing {extra!r}'


def test_missing_extra_messages_name_commands_that_work(tmp_path):
  """jaxacct is not on the package index: a message names the extra's own requirements (they
  install anywhere) or an install from a clone, never ``pip install 'jaxacct[…]'``."""
  from jaxacct.interop import jax_privacy as interop  # pylint: disable=import-outside-toplevel
  from jaxacct.training import task  # pylint: disable=import-outside-toplevel
  import jaxacct  # pylint: disable=import-outside-toplevel

  for requirement in EXTRAS['jaxprivacy']:
    assert f"pip install '{requirement}'" in interop.INSTALL
  assert "pip install -e '.[jaxprivacy]'" in interop.INSTALL
  module = tmp_path / 'needs_missing.py'
  module.write_text('import jaxacct_no_such_module_for_the_test\n')
  with pytest.raises(jaxacct.MissingExtraError) as caught:
    task.load_task(f'{module}:factory')
  message = str(caught.value)
  for requirement in EXTRAS['train']:
    assert f"'{requirement}'" in message
  assert "pip install -e '.[train]'" in message
  for text in (interop.INSTALL, message):
    assert "install 'jaxacct[" not in text


# --------------------------------------------------------------------------- README statements
def test_readme_states_no_test_counts():
  """Counts go stale with every commit; the README says how to get them (``pytest
  --collect-only -q -m slow | tail -1``) instead."""
  readme = (ROOT / 'README.md').read_text()
  assert 'pytest --collect-only -q -m slow | tail -1' in readme
  stated = re.findall(r'\b\d[\d,]* of \d[\d,]{2,}\b', readme)  # "119 of 1632"
  stated += re.findall(r'\b\d[\d,]{2,} (?:tests|passed|test cases)\b', readme)  # "1632 tests"
  header_with_counts = [line for line in readme.splitlines()
                        if line.startswith('|') and re.search(r'\|\s*tests\s*\|', line)]
  assert not stated and not header_with_counts, (stated, header_with_counts)


_INTERNAL_NUMBERS = re.compile(r'\b(?:seed|spec|issues?|stop)[ _#-]*\d+\b', re.IGNORECASE)


def _comments(text: str) -> str:
  """The comments of a TOML or YAML file (from each line's first # on)."""
  return '\n'.join(line[line.index('#'):] for line in text.splitlines() if '#' in line)


def test_user_facing_text_cites_papers_not_internal_numbers():
  """No "seed 002", "Seed 000", "spec 123", "issue 7" or "stop 39" in what a user reads:
  papers by authors and title or arXiv id (docs/references.md), things by what they are.
  A key like ``seed: 0`` is a value, not a citation."""
  from jaxacct.cli import _entry  # pylint: disable=import-outside-toplevel

  texts = {str(path.relative_to(ROOT)): path.read_text()
           for path in (*DOCS, ROOT / 'notebooks' / 'README.md')}
  texts['pyproject.toml comments'] = _comments((ROOT / 'pyproject.toml').read_text())
  for path in sorted((ROOT / 'configs').glob('*.yaml')):
    texts[f'{path.relative_to(ROOT)} comments'] = _comments(path.read_text())
  parser = _entry._parser()  # pylint: disable=protected-access
  texts['jaxacct --help'] = parser.format_help()
  for action in parser._subparsers._group_actions:  # pylint: disable=protected-access
    for name, subparser in action.choices.items():
      texts[f'jaxacct {name} --help'] = subparser.format_help()
  found = {where: _INTERNAL_NUMBERS.findall(text) for where, text in texts.items()}
  assert not {where: hits for where, hits in found.items() if hits}
  assert _INTERNAL_NUMBERS.findall('seed 000 §7.1, Seed 002, spec 104, issue 43, issues 31–32')


# ------------------------------------------------------------------------- package and command
@pytest.mark.multiprocess
def test_subpackages_import_on_first_access_without_the_optional_extras():
  """``import jaxacct`` imports neither subpackage, lists both, and gives them on first access,
  also where the train and jaxprivacy extras (flax, scikit-learn, jax_privacy) are missing."""
  script = textwrap.dedent('''\
      import sys
      for missing in ('flax', 'sklearn', 'jax_privacy'):
        sys.modules[missing] = None  # `import missing` now raises ImportError
      import jaxacct
      assert 'jaxacct.training' not in sys.modules and 'jaxacct.interop' not in sys.modules
      assert {'training', 'interop'} <= set(dir(jaxacct))
      assert callable(jaxacct.training.noise_transformation)
      assert jaxacct.interop.__name__ == 'jaxacct.interop'
      import jaxacct.training
      assert jaxacct.training is sys.modules['jaxacct.training']
      try:
        jaxacct.no_such_attribute
      except AttributeError as error:
        assert 'no_such_attribute' in str(error)
      else:
        raise AssertionError('an unknown attribute must raise AttributeError')
      ''')
  result = subprocess.run([sys.executable, '-c', script], capture_output=True, text=True,
                          timeout=120)
  assert result.returncode == 0, result.stderr


def test_version_flag_prints_the_package_version(capsys):
  import jaxacct  # pylint: disable=import-outside-toplevel
  from jaxacct.cli import main  # pylint: disable=import-outside-toplevel

  with pytest.raises(SystemExit) as caught:
    main(['--version'])
  assert caught.value.code == 0
  assert capsys.readouterr().out == f'jaxacct {jaxacct.__version__}\n'


def test_help_examples_run_as_written(capsys):
  """The examples under ``jaxacct --help`` name configs of the repository, subcommands, flags
  and ``--set`` keys that exist, and cover calibrate, estimate, plan and train."""
  from jaxacct import config as config_lib  # pylint: disable=import-outside-toplevel
  from jaxacct.cli import _entry, main  # pylint: disable=import-outside-toplevel

  with pytest.raises(SystemExit):
    main(['--help'])
  text = capsys.readouterr().out
  examples = text.split('examples (from the repository root):\n', 1)[1].splitlines()
  commands = [shlex.split(line, comments=True) for line in examples if line.strip()]
  assert 3 <= len(commands) <= 4
  assert {argv[1] for argv in commands} == {'calibrate', 'estimate', 'plan', 'train'}
  for argv in commands:
    assert argv[0] == 'jaxacct'
    args = _entry._parser().parse_args(argv[1:])  # pylint: disable=protected-access
    config_lib.load(ROOT / args.config, args.set)  # the file exists and the keys are known
