"""Reports leave the process's state alone (issue 30): no matplotlib backend switch, no pyplot
figures left open, and library code logs instead of printing."""

import logging
import struct


from jaxacct import config as config_lib
from jaxacct import report


def test_plots_keep_the_backend_and_open_no_pyplot_figure(tmp_path):
  import matplotlib
  import matplotlib.pyplot as plt
  before = matplotlib.get_backend()
  matplotlib.use('svg')  # a backend a user might have chosen; the old code forced Agg
  try:
    open_figures = len(plt.get_fignums())
    path = report.plot_delta_curve(tmp_path, [0.5, 1.0, 2.0], [1e-2, 1e-3, 1e-5], 'curve',
                                   released=(1.0, 1e-3))
    assert matplotlib.get_backend() == 'svg'
    assert len(plt.get_fignums()) == open_figures
    data = path.read_bytes()  # a real PNG, whatever the backend
    assert data[:8] == b'\x89PNG\r\n\x1a\n'
    assert struct.unpack('>II', data[16:24]) == (840, 540)  # 7 × 4.5 in at 120 dpi
  finally:
    matplotlib.use(before)


def test_attribution_summary_is_logged_not_printed(caplog, capsys):
  raw = {'scheme': {'type': 'multi_attribution', 'iterations': 20, 'min_sep': 2,
                    'max_examples_per_user': 2},
         'attribution': {'num_examples': 400, 'num_users': 150, 'expected_batch_size': 5}}
  with caplog.at_level(logging.INFO, logger='jaxacct'):
    p = config_lib.attribution_sampling_prob(raw)
  assert 0.0 < p < 1.0
  assert capsys.readouterr() == ('', '')
  assert any(r.name == 'jaxacct.config' and 'kept' in r.getMessage() and 'sampling_prob' in
             r.getMessage() for r in caplog.records)
