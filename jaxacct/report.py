"""Run reports: a JSON record and PNG plots (host code; matplotlib figures drawn without pyplot,
so the process's backend and figure state are untouched).

References:
  Antti Koskela, Marlon Tobaben and Antti Honkela, "Individual Privacy Accounting with Gaussian
  Differential Privacy", arXiv:2209.15596: Figs 1 and 6 (individual ε histograms; active examples
  per epoch) (docs/references.md).
"""

from __future__ import annotations

import json
import pathlib
import tempfile
import time
from typing import TYPE_CHECKING

import numpy as np

from jaxacct import _files
from jaxacct.conventions import DIRECTIONS, Direction

if TYPE_CHECKING:  # the report module stays importable without the JAX engine
  from jaxacct.montecarlo.evr.calibration import CalibrationRecord


def _figure(figsize, ncols: int = 1, **options):
  """(figure, axes) of a ``matplotlib.figure.Figure`` made directly: no pyplot, so the
  process's backend and pyplot's figure registry are left as they are (nothing to close)."""
  from matplotlib.figure import Figure  # host only, and only when a figure is drawn
  fig = Figure(figsize=figsize)
  return fig, fig.subplots(1, ncols, **options)


def _save_figure(fig, path: pathlib.Path) -> None:
  """Saves ``fig`` as a PNG atomically (a kill leaves the old figure or the new one, never a
  truncated file)."""
  _files.write_atomically(path, lambda handle: fig.savefig(handle, dpi=120, format='png'))


REPORT_SCHEMA = 3
"""Version of the JSON reports' layout (``report_schema`` in every file); bumped when a key
changes meaning or disappears, or the files move. 2: individual accounting, ``curve`` of
δ̂(ε), schema field. 3: one folder per command under the report root (``<root>/estimate``,
``calibrate``, ``calibrate-estimate``, ``plan``, ``train``: ``cli._folders.output_dir``), where
2 wrote every command's files into the root itself."""


def write_json(folder: pathlib.Path, name: str, payload: dict) -> pathlib.Path:
  """``payload`` as indented JSON with the ``report_schema`` version, written atomically."""
  folder.mkdir(parents=True, exist_ok=True)
  path = folder / name
  _files.write_atomically(path, json.dumps({'report_schema': REPORT_SCHEMA, **payload}, indent=2))
  return path


def describe(mechanism) -> str:
  """One line naming the mechanism: scheme and its parameters, n, strategy, σ."""
  return (f'{mechanism.scheme.summary()}, n={mechanism.iterations}, {mechanism.matrix.summary}, '
          f'σ={mechanism.noise_multiplier:.4g}')


def _log_floor(values) -> float:
  """A y-axis floor a decade below the smallest positive value (1e-300 if none)."""
  positive = np.asarray(values, float)
  positive = positive[positive > 0]
  return 10.0 ** (np.floor(np.log10(positive.min())) - 1) if positive.size else 1e-300


def _mark_release(ax, released, threshold, label: str = 'released') -> None:
  if threshold is not None:
    ax.axhline(threshold, color='tab:red', linestyle='--', linewidth=1,
               label=f'verification threshold δ_b = {threshold:.3g}')
  if released is not None:
    epsilon, delta = released
    ax.axhline(delta, color='k', linestyle=':', linewidth=1, label=f'target δ = {delta:.3g}')
    if epsilon is not None and np.isfinite(epsilon):
      ax.plot([epsilon], [delta], marker='*', markersize=14, color='k', linestyle='none',
              label=f'{label} (ε, δ) = ({epsilon:.4g}, {delta:.3g})')


def _banner(fig, text: str | None) -> None:
  """``text`` (e.g. "estimate, not a guarantee") in red capitals across the top of ``fig``."""
  if text:
    fig.text(0.5, 0.995, text.upper(), ha='center', va='top', color='tab:red',
             fontsize=11, fontweight='bold')


def plot_delta_hat(folder: pathlib.Path, epsilons, delta_hat: dict, standard_error: dict,
                   title: str, *, num_samples: int, released=None, threshold=None,
                   point_label: str = 'released', name: str = 'delta_hat.png',
                   banner: str | None = None, remove_floor=None) -> pathlib.Path:
  """Monte Carlo δ̂(ε) of both directions on a log scale, with ±2 standard-error bands clipped
  to the plotted range (a lower edge ≤ 0 is drawn at the axis floor), the target and released
  (ε, δ) and the verification threshold when given. Points with δ̂ = 0 (no sample's loss
  above ε) are not drawn; below 3/N nothing is resolved. ``banner``: a line across the top
  (an estimated σ's "estimate, not a guarantee"). ``remove_floor``: per ε, the resolution
  3·M(α, ε)/N of a tilted remove direction (terms ≤ M), drawn dashed; 3/N is then the add
  direction's."""
  folder.mkdir(parents=True, exist_ok=True)
  fig, ax = _figure((7, 4.5))
  _banner(fig, banner)
  eps = np.asarray(epsilons, float)
  means = [np.asarray(delta_hat[d], float) for d in DIRECTIONS]
  reference = [v for v in (threshold, None if released is None else released[1]) if v]
  floor = min(_log_floor(np.concatenate(means + [np.asarray(reference, float)])),
              0.3 / num_samples)
  for direction, mean, colour in zip(DIRECTIONS, means, ('tab:blue', 'tab:orange')):
    band = 2 * np.asarray(standard_error[direction], float)
    shown = mean > 0
    ax.plot(eps[shown], mean[shown], color=colour, linewidth=1.5, label=f'δ̂(ε), {direction}')
    ax.fill_between(eps[shown], np.maximum(mean - band, floor)[shown], (mean + band)[shown],
                    color=colour, alpha=0.2, linewidth=0,
                    label=f'±2 s.e. ({direction}; clipped at the axis)')
  ax.axhline(3.0 / num_samples, color='0.5', linewidth=0.8,
             label=f'3/N: resolution of N = {num_samples:,} samples'
             + ('' if remove_floor is None else ' (add)'))
  if remove_floor is not None:
    ax.plot(eps, np.asarray(remove_floor, float), color='tab:blue', linewidth=0.8,
            linestyle='--', label='3·M(α, ε)/N: resolution of the tilted remove direction')
  _mark_release(ax, released, threshold, point_label)
  ax.set_yscale('log')
  ax.set_ylim(bottom=floor, top=1.0)
  ax.set_xlabel('ε (privacy loss bound, nats)')
  ax.set_ylabel('δ̂(ε)  (Monte Carlo hockey-stick estimate)')
  ax.set_title(title, fontsize=9)
  ax.legend(fontsize=7, loc='lower left')
  ax.grid(alpha=0.3, which='major')
  fig.tight_layout(rect=(0, 0, 1, 0.96) if banner else None)
  path = folder / name
  _save_figure(fig, path)
  return path


def plot_delta_curve(folder: pathlib.Path, epsilons, deltas, title: str, *,
                     released=None, point_label: str = 'released') -> pathlib.Path:
  """A proven δ(ε) curve (deterministic accountant, max over directions) on a log scale, down
  to 10⁻⁶ of the target δ (or 10⁻²⁰): smaller δ are of no use to a reader."""
  folder.mkdir(parents=True, exist_ok=True)
  fig, ax = _figure((7, 4.5))
  eps, deltas = np.asarray(epsilons, float), np.asarray(deltas, float)
  shown = deltas > 0
  ax.plot(eps[shown], deltas[shown], color='tab:blue', label='proven δ(ε), max over directions')
  _mark_release(ax, released, None, point_label)
  ax.set_yscale('log')
  readable = 1e-6 * released[1] if released is not None else 1e-20
  bottom = max(_log_floor(deltas), readable)
  ax.set_ylim(bottom=bottom, top=1.0)
  visible = eps[deltas >= bottom]  # stop the x-axis where the curve leaves the plot
  right = max(visible.max() if visible.size else eps.max(),
              1.5 * released[0] if released is not None and np.isfinite(released[0]) else 0.0)
  ax.set_xlim(left=0.0, right=min(1.05 * right, eps.max()) if right > 0 else None)
  ax.set_xlabel('ε (privacy loss bound, nats)')
  ax.set_ylabel('δ(ε)  (upper bound)')
  ax.set_title(title, fontsize=9)
  ax.legend(fontsize=7)
  ax.grid(alpha=0.3)
  fig.tight_layout()
  path = folder / 'delta.png'
  _save_figure(fig, path)
  return path


def curve_epsilons(epsilons, released: float | None = None, points: int = 61) -> list[float]:
  """A fine ε grid for a report's curve: 0 to 1.5 × the largest ε of interest, with those ε
  themselves included."""
  given = [float(e) for e in epsilons] + ([float(released)] if released is not None else [])
  top = 1.5 * max(given + [1e-3])
  return sorted(set(np.linspace(0.0, top, points).tolist()) | set(given))


def figure_seconds(epsilons=(1.0, 2.0)) -> float:
  """Seconds to draw and write one report figure here (the report's own cost, which a run's
  plan adds to its projection), timed on a figure like calibrate's δ̂(ε) on ``epsilons`` (into
  a temporary folder): the first drawing imports matplotlib, which the run then finds
  imported, so the second one is the figure's own cost."""
  eps = np.asarray(epsilons, float)
  curve = {d: np.exp(-eps) for d in DIRECTIONS}
  spread = {d: 0.01 * np.exp(-eps) for d in DIRECTIONS}
  with tempfile.TemporaryDirectory() as folder:
    seconds = []
    for _ in range(2):
      start = time.perf_counter()
      plot_delta_hat(pathlib.Path(folder), eps, curve, spread, 'plan', num_samples=1000,
                     released=(float(eps[len(eps) // 2]), 1e-3), threshold=5e-4)
      seconds.append(time.perf_counter() - start)
  return seconds[-1]


def plot_candidates(folder: pathlib.Path, record: CalibrationRecord,
                    chosen: float, title: str = '', *, estimate: dict | None = None,
                    per_direction: dict | None = None,
                    name: str = 'candidates.png') -> pathlib.Path:
  """Estimation sweeps and verified candidates: max-direction δ̂ against σ, with δ_b.

  The σ axis spans the sweeps, the verified candidates and ``chosen``. σ_up, the fallback's σ
  (Estimate-Verify-Release's last candidate, proven without sampling; often 3–30× σ), is drawn
  on it only when that widens it by at most 1.5×; beyond, an arrow at the right edge names it
  (and the legend), so the candidates are never squeezed into a strip. A verified calibration
  adds a second panel zoomed on the verified candidates (a linear σ axis spanning them alone),
  each accepted or rejected against δ_b.

  ``estimate``: an estimate-only calibration's ``SigmaEstimate.to_dict()``: ``chosen`` is
  then σ̂, drawn with its range and the sweeps' ±2 s.e. bars under its label ("estimate,
  not a guarantee") as a banner and in the legend (nothing was verified: one panel).
  ``per_direction``: direction → its verification N as text when the directions differ (a
  tilted verification: the zoom's title names each)."""
  from matplotlib import ticker  # host only, and only when a figure is drawn

  def sigma_up_off_scale(axes) -> None:
    # The sweeps' δ̂ fall from top left to bottom right: the top right is empty.
    axes.annotate(f'σ_up = {sigma_up:.4g}\n({sigma_up / chosen:.3g}× σ) →', xy=(1.0, 0.93),
                  xytext=(0.97, 0.93), xycoords='axes fraction', ha='right', va='center',
                  fontsize=7, color='tab:purple',
                  bbox={'facecolor': 'white', 'edgecolor': 'none', 'alpha': 0.8, 'pad': 1},
                  arrowprops={'arrowstyle': '->', 'color': 'tab:purple'})

  verification = record.verification
  verified = bool(verification.delta_hat[Direction.REMOVE]) and not estimate
  if verified:
    fig, (ax, zoom) = _figure((10, 4.4), 2, gridspec_kw={'width_ratios': (3, 2)})
  else:
    fig, ax = _figure((6, 4.4) if estimate else (6, 4))
  if estimate:
    _banner(fig, estimate['label'])
  shown = [record.base_delta]
  for i, sweep in enumerate(record.sweeps):
    sigmas, values = np.asarray(sweep.sigmas), np.asarray(sweep.delta_hat)
    drawn = values > 0
    if estimate and len(sweep.standard_error) == len(values):
      error = 2 * np.asarray(sweep.standard_error)
      lower = np.minimum(error, values - _log_floor(values))  # a bar ≤ 0 ends at the floor
      ax.errorbar(sigmas[drawn], values[drawn], yerr=[lower[drawn], error[drawn]], fmt='.',
                  color='0.6', elinewidth=0.6,
                  label='estimation sweeps, ±2 s.e. (δ̂ = 0 not drawn)' if i == 0 else None)
      shown.extend((values + error).tolist())
    else:
      ax.plot(sigmas[drawn], values[drawn], '.', color='0.6',
              label='estimation sweeps (δ̂ = 0 not drawn)' if i == 0 else None)
    shown.extend(values.tolist())
  candidates = np.asarray(verification.sigmas[:-1])  # the last one is σ_up (the fallback)
  if verified:
    # A direction certified without samples (a tilted verification) has no δ̂ (None): the
    # worst drawn one is shown, 0 (the axis floor) when neither was drawn.
    worst = np.nan_to_num(np.fmax(*(np.asarray(verification.delta_hat[d], np.float64)
                                    for d in (Direction.REMOVE, Direction.ADD))))
    accepted = np.asarray(verification.accepted[:-1], bool)
    # δ̂ = 0 sits on the axis floor, so every verified candidate is drawn.
    floor = _log_floor(shown + worst.tolist())
    for axes in (ax, zoom):
      for passed, marker, colour, label in ((True, 'o', 'tab:green', 'verified: accepted'),
                                            (False, 'x', 'tab:red', 'verified: rejected')):
        chosen_ones = accepted == passed
        if chosen_ones.any():
          axes.plot(candidates[chosen_ones], np.maximum(worst[chosen_ones], floor), marker,
                    color=colour, label=label)
    shown.extend(worst.tolist())
  sigma_up = record.sigma_up
  searched = [s for sweep in record.sweeps for s in sweep.sigmas] + candidates.tolist()
  span = [min(searched + [chosen]) / 1.05, max(searched + [chosen]) * 1.05]
  if not estimate and span[0] <= sigma_up <= 1.5 * span[1]:
    span[1] = max(span[1], sigma_up * 1.05)  # near enough to be drawn on the axis
  off = not span[0] <= sigma_up <= span[1]
  up_label = (f'σ_up = {sigma_up:.4g} (proven by {record.fallback_accountant})'
              + (', off the plot' + ('' if estimate else ' →') if off else ''))
  if off:
    ax.plot([], [], color='tab:purple', linestyle='-.', alpha=0.7, label=up_label)
    if not estimate:  # an estimate's figure names it in the legend only
      sigma_up_off_scale(ax)
  else:
    ax.axvline(sigma_up, color='tab:purple', linestyle='-.', alpha=0.7, label=up_label)
  ax.axhline(record.base_delta, color='tab:red', linestyle='--',
             label=f'verification threshold δ_b = {record.base_delta:.3g}')
  if estimate:
    ax.axvspan(estimate['low'], estimate['high'], color='tab:orange', alpha=0.15,
               label=f'range [{estimate["low"]:.4g}, {estimate["high"]:.4g}] (δ̂ ± 2 s.e. '
                     'crosses δ_b)')
    ax.axvline(chosen, color='k', linestyle=':',
               label=f'estimated σ̂ = {chosen:.4g} ({estimate["label"]})')
  else:
    ax.axvline(chosen, color='k', linestyle=':', label=f'released σ = {chosen:.4g}')
  ax.set_yscale('log')
  ax.set_xscale('log')  # the sweeps' σ span a factor of several
  ax.set_xlim(*span)
  if span[1] / span[0] < 20:  # within a decade or so the log locator leaves gaps: even steps
    ax.xaxis.set_major_locator(ticker.MaxNLocator(nbins=8, steps=(1, 2, 2.5, 5, 10)))
    ax.xaxis.set_minor_locator(ticker.NullLocator())
  ax.xaxis.set_major_formatter(ticker.FormatStrFormatter('%g'))
  ax.xaxis.set_minor_formatter(ticker.FormatStrFormatter('%g'))
  ax.tick_params(axis='x', which='minor', labelsize=7)
  ax.set_ylim(bottom=_log_floor(shown), top=1.0)
  ax.set_xlabel('noise multiplier σ (log scale)')
  ax.set_ylabel('max-direction δ̂ at the target ε')
  ax.set_title(title or ('σ estimate: the estimation sweeps, nothing verified' if estimate
                         else 'Estimate-Verify-Release: σ search'), fontsize=9)
  # Small σ have large δ̂ and large σ small ones: the bottom left is empty.
  ax.legend(fontsize=7 if estimate or verified else 8, loc='lower left' if verified else 'best')
  if verified:  # the zoom: the verified candidates alone, on a linear σ axis
    low, high = float(candidates.min()), float(candidates.max())
    pad = 0.08 * (high - low) if high > low else 0.01 * high
    zoom.set_xlim(low - pad, high + pad)
    if low - pad <= sigma_up <= high + pad:
      zoom.axvline(sigma_up, color='tab:purple', linestyle='-.', alpha=0.7)
    else:
      sigma_up_off_scale(zoom)
    zoom.axhline(record.base_delta, color='tab:red', linestyle='--')
    zoom.axvline(chosen, color='k', linestyle=':')
    values = np.maximum(worst, floor).tolist() + [record.base_delta]
    zoom.set_yscale('log')
    zoom.set_ylim(bottom=min(values) / 2, top=max(values) * 2)
    zoom.set_xlabel('noise multiplier σ (linear scale)')
    zoom.set_title(f'verified candidates (N = {record.num_samples:,} per direction)'
                   if per_direction is None else 'verified candidates\nN: ' + ', '.join(
                       f'{d} {n}' for d, n in per_direction.items()), fontsize=9)
    zoom.grid(alpha=0.3, which='both')
  fig.tight_layout(rect=(0, 0, 1, 0.95) if estimate else None)
  path = folder / name
  _save_figure(fig, path)
  return path


def plot_training(folder: pathlib.Path, payload: dict, title: str) -> pathlib.Path:
  """Training loss and test metric against the step (``train_task``'s ``history``), the
  guarantee (or "not private") in the title."""
  folder.mkdir(parents=True, exist_ok=True)
  history = payload['history']
  fig, axes = _figure((10, 4), 2)
  axes[0].plot(history['steps'], history['train_loss'], color='tab:blue')
  axes[0].set_xlabel('step')
  axes[0].set_ylabel('mean training loss (≤ 512 training examples)')
  axes[1].plot(history['steps'], history['test_metric'], color='tab:green')
  axes[1].set_xlabel('step')
  axes[1].set_ylabel('test metric (the task\'s evaluate, e.g. accuracy)')
  for ax in axes:
    ax.grid(alpha=0.3)
  privacy = ('no noise: not private' if payload['method'] == 'nonprivate' else
             f'σ = {payload["noise_multiplier"]:.4g}: ({payload["epsilon"]:.4g}, '
             f'{payload["delta"]:.3g})-DP [{payload["method"]}'
             + (f' by {payload["accountant"]}' if payload.get('accountant') else '') + ']')
  fig.suptitle(f'{title}\n{privacy}; test metric {payload["accuracy"]:.4f}', fontsize=9)
  fig.tight_layout()
  path = folder / 'training.png'
  _save_figure(fig, path)
  return path


def plot_individual(folder: pathlib.Path, summary: dict, title: str) -> pathlib.Path:
  """Histogram of the individual ε against the worst case (and the filter's guarantee); with
  a filter, the active examples per epoch beside it (as in Koskela et al. (2022) Figs 1, 6)."""
  folder.mkdir(parents=True, exist_ok=True)
  filtering = summary['active_per_epoch'] is not None and summary['filter_epsilon'] is not None
  fig, axes = _figure((10 if filtering else 6, 4), 2 if filtering else 1, squeeze=False)
  ax = axes[0, 0]
  epsilons = np.asarray(summary['epsilons'])
  ax.hist(epsilons, bins=40, color='tab:blue', alpha=0.8,
          label=f'individual ε ({summary["method"]}, {summary["tracked"]} examples)')
  ax.axvline(summary['worst_case_epsilon'], color='tab:red', linestyle='--',
             label=f'worst case ε = {summary["worst_case_epsilon"]:.3g}')
  if summary['filter_epsilon'] is not None:
    ax.axvline(summary['filter_epsilon'], color='k', linestyle=':',
               label=f'filter guarantee ε = {summary["filter_epsilon"]:.3g}')
  ax.set_xlabel(f'ε at δ = {summary["delta"]:.3g}')
  ax.set_ylabel('examples')
  ax.set_title(title)
  # Below the axes: the worst-case line sits at the right edge, where a legend inside would be.
  ax.legend(fontsize=8, loc='upper center', bbox_to_anchor=(0.5, -0.18), ncol=1, frameon=False)
  if filtering:
    active = summary['active_per_epoch']
    axes[0, 1].plot(np.arange(1, len(active) + 1), active, color='tab:green')
    axes[0, 1].set_xlabel('epoch')
    axes[0, 1].set_ylabel('active examples (not yet filtered out)')
    axes[0, 1].set_ylim(bottom=0)
    axes[0, 1].set_title('individual GDP filter')
  fig.tight_layout()
  path = folder / 'individual_epsilons.png'
  _save_figure(fig, path)
  return path
