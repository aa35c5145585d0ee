"""Citations a user can follow (docs/references.md): no internal tags or paths outside the repo.

Docstrings, comments, error messages and the docs cite the papers by authors and year plus the
paper's own location ("Dong & Ganesh (2026) §5, Eq. (1)"). The project's internal tags ("seed
000", "spec 002 §2.4"), the internal digests' pitfall lists and paths outside the repository
("../shared/…") mean nothing to a user, so any of them fails this test, named by file and line.
So do the project's issue numbers ("issue 18", "Issues 12 and 30", "pre-issue-30") and seed/spec
numbers in everything a user reads: the package's and the benchmarks' sources (docstrings,
comments and messages), the notebooks' cells and notebooks/README.md, ARCHITECTURE.md, README.md,
the docs, examples, configs and pyproject.toml (its comments and descriptions are in every
install's metadata); the fact itself, or the paper and its own location, is what such text says
instead. A module that cites a paper by its short form lists the full citation (its arXiv id)
in the "References:" block of its module docstring.
"""

from __future__ import annotations

import ast
import json
import pathlib
import re

ROOT = pathlib.Path(__file__).resolve().parents[1]
SCANNED = ('jaxacct', 'examples', 'configs', 'docs', 'README.md', 'ARCHITECTURE.md',
           'pyproject.toml')
TEXT_SUFFIXES = {'.py', '.md', '.yaml', '.yml', '.txt', '.rst', '.toml', '.json', '.ipynb'}

FORBIDDEN = re.compile(
    r'\b(?:seed|spec)s?[ -]?00\d\b'          # "seed 000", "Spec 002", "seed-001"
    r'|\.\./shared|/work/shared'              # paths outside the repository
    r'|reference-(?:values|libraries)\.md'    # the internal digests' reference files
    r'|\bpitfall\s+P?\d',                     # the internal digests' pitfall numbers
    re.IGNORECASE)

# The project's internal numbering: seed/spec documents ("seed 003", "Spec-002") and issues
# ("issue 31 item 9", "Issues 30–31", "issue #12", "pre-issue-30"); a word right after an escape
# in a string literal (print(f'\nissue 18 …')) has no \b before it, hence the lookbehind.
INTERNAL_NUMBERS = re.compile(
    r'(?:\b|(?<=\\[nt]))(?:(?:seed|spec)s?[\s-]*0\d\d\b|issues?[\s-]+#?\d+)', re.IGNORECASE)

# Where users read: (folder or file, the suffixes scanned in it). Notebooks are scanned by cell
# source (markdown, code and its comments), not by their stored outputs.
USER_FACING = (('jaxacct', {'.py'}), ('benchmarks', {'.py'}), ('notebooks', {'.ipynb', '.md'}),
               ('examples', TEXT_SUFFIXES), ('configs', TEXT_SUFFIXES), ('docs', TEXT_SUFFIXES),
               ('README.md', None), ('ARCHITECTURE.md', None), ('pyproject.toml', None))

# Tags not replaced yet, as (file, tag): each is skipped only in that file and only with that
# text. Say what the tag stands for and delete its entry; the list is to become empty.
PENDING: list[tuple[str, str]] = []

# Short form used in running text → arXiv id of the full citation (docs/references.md).
PAPERS = {
    'Dong & Ganesh (2026)': 'arXiv:2602.09338',
    'Ganesh (2025)': 'arXiv:2508.15089',
    'Schuchardt & Kalinin (2026)': 'arXiv:2601.21636',
    'Choquette-Choo et al. (2023)': 'arXiv:2310.15526',
    'Koskela et al. (2022)': 'arXiv:2209.15596',
}


def _files():
  for name in SCANNED:
    path = ROOT / name
    if path.is_file():
      yield path
    elif path.is_dir():
      yield from (p for p in sorted(path.rglob('*'))
                  if p.is_file() and p.suffix in TEXT_SUFFIXES and '__pycache__' not in p.parts)


def test_no_internal_tags_or_outside_paths():
  problems = []
  for path in _files():
    for number, line in enumerate(path.read_text(errors='replace').splitlines(), 1):
      for match in FORBIDDEN.finditer(line):
        problems.append(f'{path.relative_to(ROOT)}:{number}: {match.group(0)!r} in {line.strip()!r}')
  assert not problems, ('cite papers by authors, year and the paper\'s own location '
                        '(docs/references.md), not by internal tags or paths:\n'
                        + '\n'.join(problems))


def test_modules_list_the_papers_they_cite():
  problems = []
  for path in sorted((ROOT / 'jaxacct').rglob('*.py')):
    text = path.read_text()
    docstring = ast.get_docstring(ast.parse(text)) or ''
    for short, arxiv in PAPERS.items():
      if short in text and arxiv not in docstring:
        problems.append(f'{path.relative_to(ROOT)}: cites {short} but its module docstring\'s '
                        f'"References:" lacks {arxiv}')
  assert not problems, '\n'.join(problems)


def test_references_page_lists_every_short_form():
  page = (ROOT / 'docs' / 'references.md').read_text()
  for short, arxiv in PAPERS.items():
    assert f'| {short} |' in page and arxiv in page, short


def _user_facing_texts():
  """(path relative to the root, where, text) of everything USER_FACING names: a file whole, a
  notebook cell by cell (its source; ``where`` names the cell, numbered from 0)."""
  for name, suffixes in USER_FACING:
    path = ROOT / name
    paths = [path] if path.is_file() else sorted(
        p for p in path.rglob('*') if p.is_file() and p.suffix in suffixes
        and '__pycache__' not in p.parts and '.ipynb_checkpoints' not in p.parts)
    for p in paths:
      relative = p.relative_to(ROOT).as_posix()
      if p.suffix == '.ipynb':
        for index, cell in enumerate(json.loads(p.read_text())['cells']):
          yield relative, f'{relative} cell {index}', ''.join(cell['source'])
      else:
        yield relative, relative, p.read_text(errors='replace')


def test_no_internal_numbers_where_users_read():
  problems = []
  for relative, where, text in _user_facing_texts():
    for number, line in enumerate(text.splitlines(), 1):
      for match in INTERNAL_NUMBERS.finditer(line):
        if (relative, match.group(0)) not in PENDING:
          problems.append(f'{where}:{number}: {match.group(0)!r} in {line.strip()!r}')
  assert not problems, ('say what an issue or seed number stood for (the fact, or the paper by '
                        'authors, year and its own location, docs/references.md):\n'
                        + '\n'.join(problems))


def test_every_user_facing_file_is_read():
  """The notebooks' README and pyproject.toml are among the texts checked (a path that moved
  would silently drop out of the scan)."""
  read = {relative for relative, _, _ in _user_facing_texts()}
  assert {'notebooks/README.md', 'pyproject.toml', 'README.md', 'docs/config-keys.md'} <= read
  assert ROOT / 'pyproject.toml' in set(_files())


def test_internal_numbers_pattern():
  for tagged in ('seed 000', 'Seed 003 §7', 'spec 002 §2.4', 'seed-001', 'issue 18',
                 '(Issue 5: truncation)', 'issues 12 and 30', 'Issues 31–32', 'issue #13',
                 'the pre-issue-30 keywords', r"print(f'\nissue 18 matrix')"):
    assert INTERNAL_NUMBERS.search(tagged), tagged
  for plain in ('seed 0', 'seed=1', 'key seed 42', 'an issue with 3 causes', 'specs 1 and 2',
                'seed_000'):
    assert not INTERNAL_NUMBERS.search(plain), plain
