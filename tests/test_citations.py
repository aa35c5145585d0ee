"""Citations a user can follow (docs/references.md): no internal tags or paths outside the repo.

Docstrings, comments, error messages and the docs cite the papers by authors and year plus the
paper's own location ("Dong & Ganesh (2026) §5, Eq. (1)"). The project's internal tags ("seed
000", "spec 002 §2.4"), the internal digests' pitfall lists and paths outside the repository
("../shared/…") mean nothing to a user, so any of them fails this test, named by file and line.
A module that cites a paper by its short form lists the full citation (its arXiv id) in the
"References:" block of its module docstring.
"""

from __future__ import annotations

import ast
import pathlib
import re

ROOT = pathlib.Path(__file__).resolve().parents[1]
SCANNED = ('jaxacct', 'examples', 'configs', 'docs', 'README.md', 'ARCHITECTURE.md')
TEXT_SUFFIXES = {'.py', '.md', '.yaml', '.yml', '.txt', '.rst', '.toml', '.json', '.ipynb'}

FORBIDDEN = re.compile(
    r'\b(?:seed|spec)s?[ -]?00\d\b'          # "seed 000", "Spec 002", "seed-001"
    r'|\.\./shared|/work/shared'              # paths outside the repository
    r'|reference-(?:values|libraries)\.md'    # the internal digests' reference files
    r'|\bpitfall\s+P?\d',                     # the internal digests' pitfall numbers
    re.IGNORECASE)

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
