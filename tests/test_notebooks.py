"""The notebooks run end to end (fast mode, JAXACCT_FAST=1) in a fresh kernel."""

import os
import pathlib

import pytest

pytestmark = [pytest.mark.notebook, pytest.mark.slow]

nbformat = pytest.importorskip('nbformat')
nbclient = pytest.importorskip('nbclient')

NOTEBOOKS = sorted((pathlib.Path(__file__).parent.parent / 'notebooks').glob('*.ipynb'))


@pytest.mark.parametrize('path', NOTEBOOKS, ids=lambda p: p.name)
def test_notebook_runs(path, monkeypatch):
  monkeypatch.setenv('JAXACCT_FAST', '1')
  monkeypatch.setenv('PYTHONPATH', os.pathsep.join(
      [str(path.parent.parent), os.environ.get('PYTHONPATH', '')]))
  notebook = nbformat.read(path, as_version=4)
  nbclient.NotebookClient(notebook, timeout=600, kernel_name='python3',
                          resources={'metadata': {'path': str(path.parent)}}).execute()
  errors = [o for cell in notebook.cells if cell.cell_type == 'code'
            for o in cell.get('outputs', []) if o.get('output_type') == 'error']
  assert not errors
