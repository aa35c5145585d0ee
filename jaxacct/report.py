"""Run reports: a JSON record and PNG plots (host code; matplotlib, Agg backend)."""

from __future__ import annotations

import json
import pathlib
from typing import TYPE_CHECKING

import numpy as np

from jaxacct.conventions import DIRECTIONS, Direction

if TYPE_CHECKING:  # the report module stays importable without the JAX engine
  from jaxacct.montecarlo.calibration import CalibrationRecord


def _plt():
  import matplotlib
  matplotlib.use('Agg')
  import matplotlib.pyplot as plt
  return plt


def write_json(folder: pathlib.Path, name: str, payload: dict) -> pathlib.Path:
  folder.mkdir(parents=True, exist_ok=True)
  path = folder / name
  path.write_text(json.dumps(payload, indent=2))
  return path


def plot_delta_hat(folder: pathlib.Path, epsilons, delta_hat: dict, standard_error: dict,
                   title: str) -> pathlib.Path:
  """δ̂(ε) of both directions on a log scale with ±2 standard-error bands."""
  plt = _plt()
  folder.mkdir(parents=True, exist_ok=True)
  fig, ax = plt.subplots(figsize=(6, 4))
  eps = np.asarray(epsilons)
  for direction, colour in zip(DIRECTIONS, ('tab:blue', 'tab:orange')):
    mean = np.asarray(delta_hat[direction])
    band = 2 * np.asarray(standard_error[direction])
    ax.plot(eps, mean, marker='o', color=colour, label=f'{direction}')
    ax.fill_between(eps, np.maximum(mean - band, 1e-300), mean + band, color=colour, alpha=0.2)
  ax.set_yscale('log')
  ax.set_xlabel('ε')
  ax.set_ylabel('δ̂(ε)  (±2 s.e.)')
  ax.set_title(title)
  ax.legend()
  fig.tight_layout()
  path = folder / 'delta_hat.png'
  fig.savefig(path, dpi=120)
  plt.close(fig)
  return path


def plot_delta_curve(folder: pathlib.Path, epsilons, deltas, title: str) -> pathlib.Path:
  """A proven δ(ε) curve (deterministic accountant) on a log scale."""
  plt = _plt()
  folder.mkdir(parents=True, exist_ok=True)
  fig, ax = plt.subplots(figsize=(6, 4))
  ax.plot(np.asarray(epsilons), np.maximum(np.asarray(deltas), 1e-300), marker='o')
  ax.set_yscale('log')
  ax.set_xlabel('ε')
  ax.set_ylabel('δ(ε)')
  ax.set_title(title)
  fig.tight_layout()
  path = folder / 'delta.png'
  fig.savefig(path, dpi=120)
  plt.close(fig)
  return path


def plot_candidates(folder: pathlib.Path, record: CalibrationRecord,
                    chosen: float) -> pathlib.Path:
  """Estimation sweeps and verified candidates: max-direction δ̂ against σ, with δ_b."""
  plt = _plt()
  fig, ax = plt.subplots(figsize=(6, 4))
  for i, sweep in enumerate(record.sweeps):
    ax.plot(sweep.sigmas, np.maximum(sweep.delta_hat, 1e-300), '.', color='0.6',
            label='estimation sweeps' if i == 0 else None)
  verification = record.verification
  if verification.delta_hat[Direction.REMOVE]:
    sigmas = verification.sigmas[:-1]
    worst = np.maximum(verification.delta_hat[Direction.REMOVE],
                       verification.delta_hat[Direction.ADD])
    ax.plot(sigmas, np.maximum(worst, 1e-300), 'o', color='tab:green', label='verification')
  ax.axhline(record.base_delta, color='tab:red', linestyle='--', label='δ_b')
  ax.axvline(chosen, color='k', linestyle=':', label=f'released σ = {chosen:.4g}')
  ax.set_yscale('log')
  ax.set_xlabel('noise multiplier σ')
  ax.set_ylabel('max-direction δ̂(ε)')
  ax.legend(fontsize=8)
  fig.tight_layout()
  path = folder / 'candidates.png'
  fig.savefig(path, dpi=120)
  plt.close(fig)
  return path


def plot_individual(folder: pathlib.Path, summary: dict, title: str) -> pathlib.Path:
  """Histogram of the individual ε against the worst case (and the filter's guarantee); with
  a filter, the active examples per epoch beside it (seed 004 Figs 1, 6)."""
  plt = _plt()
  folder.mkdir(parents=True, exist_ok=True)
  filtering = summary['active_per_epoch'] is not None and summary['filter_epsilon'] is not None
  fig, axes = plt.subplots(1, 2 if filtering else 1, figsize=(10 if filtering else 6, 4),
                           squeeze=False)
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
  ax.legend(fontsize=8)
  if filtering:
    active = summary['active_per_epoch']
    axes[0, 1].plot(np.arange(1, len(active) + 1), active, color='tab:green')
    axes[0, 1].set_xlabel('epoch')
    axes[0, 1].set_ylabel('active examples (not yet filtered out)')
    axes[0, 1].set_ylim(bottom=0)
    axes[0, 1].set_title('individual GDP filter')
  fig.tight_layout()
  path = folder / 'individual_epsilons.png'
  fig.savefig(path, dpi=120)
  plt.close(fig)
  return path
