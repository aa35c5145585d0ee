"""Reports leave the process's state alone (no matplotlib backend switch, no pyplot figures left
open, and library code logs instead of printing), and their figures stay readable."""

import logging
import struct

import pytest

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


# The quickstart calibration's record (`jaxacct calibrate configs/quickstart.yaml`, its seed 0:
# released σ = 1.17498), every other point of the first sweep, values rounded to 3 digits.
_SWEEP_SIGMAS = (0.6175, 0.6808, 0.7506, 0.8276, 0.9124, 1.0059, 1.109, 1.2227)
_SWEEP_DELTAS = (0.119, 0.0711, 0.0395, 0.02, 0.00896, 0.0034, 0.00113, 0.000312)
_CANDIDATES = (1.1633, 1.175, 1.1867, 1.1986, 1.2106, 1.2227, 1.2349, 1.2473)
_REMOVE = (5.57e-4, 4.89e-4, 4.28e-4, 3.75e-4, 3.28e-4, 2.85e-4, 2.48e-4, 2.14e-4)
_ADD = (2e-6, 1.28e-6, 7.78e-7, 5.18e-7, 2.55e-7, 0.0, 0.0, 0.0)
_RELEASED = 1.17498


def _quickstart_record(sigma_up: float):
  from jaxacct.montecarlo.evr import calibration
  return calibration.CalibrationRecord(
      base_delta=5e-4, num_samples=75_013, sigma_up=sigma_up, initial_guess=0.9124,
      estimation_samples=18_753,
      sweeps=(calibration.SweepRecord(_SWEEP_SIGMAS, _SWEEP_DELTAS),),
      verification=calibration.VerificationRecord(
          _CANDIDATES + (sigma_up,), (False,) + (True,) * 8,
          {'remove': list(_REMOVE), 'add': list(_ADD)}),
      fallback_accountant='unamplified_gaussian')


@pytest.mark.parametrize('ratio', [1.2, 5.0, 30.0], ids=lambda r: f'sigma_up={r:g}x')
def test_candidates_figure_spans_the_candidates_whatever_sigma_up(ratio, tmp_path, monkeypatch):
  """σ_up (the fallback's σ, often 3–30× the released σ) never stretches the σ axes: the
  zoomed panel spans the verified candidates alone, the search panel the sweeps and the
  candidates (σ_up on it only when it widens it by at most 1.5×, else an arrow names it)."""
  figures = []
  save = report._save_figure  # pylint: disable=protected-access

  def keep(fig, path):
    figures.append(fig)
    save(fig, path)
  monkeypatch.setattr(report, '_save_figure', keep)
  sigma_up = ratio * _RELEASED
  path = report.plot_candidates(tmp_path, _quickstart_record(sigma_up), _RELEASED, 'quickstart')
  assert path == tmp_path / 'candidates.png' and path.read_bytes()[:8] == b'\x89PNG\r\n\x1a\n'
  search, zoom = figures[0].axes
  low, high = zoom.get_xlim()
  assert low < min(_CANDIDATES) and max(_CANDIDATES) < high < sigma_up
  assert (max(_CANDIDATES) - min(_CANDIDATES)) / (high - low) > 0.8  # not a strip
  low, high = search.get_xlim()
  assert low < min(_SWEEP_SIGMAS) and max(_CANDIDATES) < high
  texts = [text.get_text() for ax in (search, zoom) for text in ax.texts]
  if ratio < 1.5:  # near enough: drawn on the axis
    assert high >= sigma_up and not any('σ_up' in text.get_text() for text in search.texts)
  else:  # off the axis, which stays as at any other σ_up
    assert high < 1.5 * max(_CANDIDATES)
    assert sum(f'σ_up = {sigma_up:.4g}' in text for text in texts) == 2
  assert any(f'σ_up = {sigma_up:.4g}' in text.get_text()
             for text in search.get_legend().get_texts())
