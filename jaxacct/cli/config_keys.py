"""``jaxacct config --keys``: every config key with its type and range, default and meaning,
read from the key table of ``jaxacct/config.py`` (``config.key_table``: ``KEYS`` and the keys
of the registered scheme families and strategies). ``--markdown`` prints the same as
Markdown: docs/config-keys.md is that output, and a test keeps it so.

It takes no config file, so it is not a ``Command``: ``_entry`` adds its parser
(``add_parser``) beside theirs and answers it directly."""

from __future__ import annotations

import argparse
import re
import textwrap

from jaxacct import config as config_lib

_WIDTH = 100

MARKDOWN_INTRO = """\
# Config keys

Every key of a `jaxacct` run configuration (YAML): its type and range, its default and what it
does. This page is generated from the key table in `jaxacct/config.py` by
`jaxacct config --keys --markdown` (`tests/test_config_keys.py` checks that it is unchanged);
`jaxacct config --keys` prints the same in a terminal. The `scheme` and `strategy` keys are
those of the scheme families and strategies registered when it runs.

Every value is checked when a config is loaded, before any compute, and an unknown key is an
error naming the valid ones. `--set section.key=value` overrides a key from the command line
(e.g. `--set calibration.attempt=2`). A default with a function's name in brackets is that
library function's keyword default. Example configs: `configs/` (`configs/quickstart.yaml`,
`configs/dpsgd.yaml`).
"""


def _markdown_cell(text: str) -> str:
  """``text`` safe in a Markdown table cell: ``|`` escaped, and ``<``/``>`` outside code
  spans written as entities (a bare ``<config file name>`` would read as an HTML tag)."""
  parts = re.split(r'(`[^`]*`)', text.replace('|', '\\|'))
  return ''.join(part if part.startswith('`') else
                 part.replace('<', '&lt;').replace('>', '&gt;') for part in parts)


def markdown(sections=None) -> str:
  """The key reference as Markdown (docs/config-keys.md): one table per section."""
  sections = config_lib.key_table() if sections is None else sections
  lines = [MARKDOWN_INTRO]
  for section in sections:
    lines.append(f'## `{section.name}`' if section.name else '## Top-level keys')
    lines += ['', _markdown_cell(section.meaning), '', '| key | type | default | meaning |',
              '|---|---|---|---|']
    for row in section.rows:
      lines.append(f'| `{row.key}` | {_markdown_cell(row.type)} | '
                   f'{_markdown_cell(row.default)} | {_markdown_cell(row.meaning)} |')
    lines.append('')
  return '\n'.join(lines)


def text(sections=None) -> str:
  """The key reference for a terminal: per section its purpose, then per key a line with its
  type and default and its meaning indented below it."""
  sections = config_lib.key_table() if sections is None else sections
  def wrap(words: str, first: int, rest: int) -> str:
    return textwrap.fill(words, _WIDTH, initial_indent=' ' * first, subsequent_indent=' ' * rest,
                         break_on_hyphens=False, break_long_words=False)

  lines = []
  for section in sections:
    lines.append(wrap(f'{section.name or "top-level keys"}: {section.meaning}', 0, 0))
    for row in section.rows:
      head = f'{row.key}: {row.type}' + (f'; default {row.default}' if row.default else '')
      lines.append(wrap(head, 2, 4))
      if row.meaning:
        lines.append(wrap(row.meaning, 6, 6))
    lines.append('')
  return '\n'.join(lines)


def add_parser(subparsers) -> None:
  """Adds ``jaxacct config`` to ``jaxacct``'s subcommands (``_entry._parser``): it takes no
  config file, so it is no ``Command``; ``_entry`` answers it with ``answer``."""
  parser = subparsers.add_parser(
      'config', help='the config key reference (docs/config-keys.md)',
      description='The config key reference: every key of a run configuration with its type '
                  'and range, default and meaning (docs/config-keys.md).')
  parser.add_argument('--keys', action='store_true', required=True,
                      help='print every config key')
  parser.add_argument('--markdown', action='store_true',
                      help='as Markdown (the text of docs/config-keys.md)')
  parser.set_defaults(answer=answer)


def answer(args: argparse.Namespace) -> int:
  """``jaxacct config --keys [--markdown]``: prints the reference; returns the exit code 0
  (argparse exits with 2 on a bad flag)."""
  print(markdown() if args.markdown else text(), end='')
  return 0
