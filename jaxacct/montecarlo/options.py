"""How a Monte Carlo run executes, as one frozen object (``RunOptions``).

``estimate_delta``, ``verify``, ``calibrate_noise_multiplier`` and ``capacity_plan`` take
``run=RunOptions(...)``: the devices, blocks per call, progress callback, checkpoint folder
and interval, attempt ledger and time budget. None of them changes a result's bits (results
are identical for any device count, call size or resume; the ledger only refuses or charges
a retry, and the budget only refuses before compute), so one ``RunOptions`` can serve a whole
session of verifications and calibrations. A ``ledger`` is for those only: ``estimate_delta``
and ``estimate_delta_for_sigmas`` verify nothing and refuse a ``RunOptions`` holding one
(rather than leave it silently unused), and ``capacity_plan``, which plans a calibration and
takes that calibration's options, reads only its devices and blocks per call. The same names
are still accepted as keywords of those functions (their signatures before ``RunOptions``
existed); giving a field both ways is refused.
"""

from __future__ import annotations

import dataclasses
from typing import Any

from jaxacct import _validate
from jaxacct import progress as progress_lib
from jaxacct.errors import InputError, InputTypeError


# A compiled program evaluates its call's blocks in a loop (lax.map); with one block per call
# XLA drops the loop and fuses the block's arithmetic into the call's, and its FMA contractions
# then differ (the multi-attribution loss moved by ~1e-14 at one block per call; any number
# >= 2 gives the same bits). Two blocks per device per call at least keeps every sample's bits
# independent of the call size.
MIN_BLOCKS_PER_CALL = 2


@dataclasses.dataclass(frozen=True, kw_only=True)
class RunOptions:
  """The execution of a Monte Carlo run (module docstring).

  Attributes:
    devices: a non-empty sequence of ``jax.Device`` (e.g. ``jax.devices()[:2]``) or a
      ``jax.sharding.Mesh`` (its devices, in order) to shard over; default None: every device of
      every process (under ``jax.distributed`` all processes pass the same value). A platform
      name such as ``'gpu'`` is refused: pass ``jax.devices('gpu')``, which also says whether
      that platform exists here. Stored as a tuple of devices.
    blocks_per_call: blocks per device per call, at least ``MIN_BLOCKS_PER_CALL`` = 2
      (performance only; default keeps ~8 MB of outputs per device).
    progress: ``progress(samples_done, samples_total, stage)`` after each call
      (``jaxacct.progress.Progress``); None (default): a bar or a line every 30 s on stderr
      when a person is watching (a terminal or Jupyter, not pytest;
      ``jaxacct.progress.interactive``); False: none.
    checkpoint: a folder (or ``checkpoint.Checkpoint``) where the run saves its state; calling
      again with the same arguments resumes from it bitwise (``montecarlo/checkpoint.py``).
    checkpoint_interval: seconds between saves (> 0; default 60).
    ledger: the attempt ledger of verifications: a file path for a ``FileLedger`` or a ledger
      object (default None: the user's ledger file, ``ledger.default_path()``, the CLI's too;
      an in-memory ``VerificationLedger()`` opts out and its releases say "attempts unchecked").
    max_seconds: refuse, before any sample is drawn, a run whose measured projection exceeds
      it (``plan.OverBudgetError``); None: nothing is timed or refused.
  """

  devices: Any = None
  blocks_per_call: int | None = None
  progress: progress_lib.Progress | None = None
  checkpoint: Any = None
  checkpoint_interval: float = 60.0
  ledger: Any = None
  max_seconds: float | None = None

  def __post_init__(self):
    if self.devices is not None:
      object.__setattr__(self, 'devices', check_devices(self.devices))
    if self.blocks_per_call is not None:
      _validate.integer_at_least('blocks_per_call', self.blocks_per_call, MIN_BLOCKS_PER_CALL)
    _validate.positive_finite('checkpoint_interval', self.checkpoint_interval)
    if self.max_seconds is not None:
      _validate.positive_finite('max_seconds', self.max_seconds)
    if self.progress not in (None, False) and not callable(self.progress):
      raise InputTypeError(f'progress must be callable (samples_done, samples_total, stage) '
                           f'or False, got {self.progress!r}')


def check_devices(devices) -> tuple:
  """``devices`` as a non-empty tuple of ``jax.Device`` (a ``Mesh``: its devices in order);
  ``InputTypeError`` / ``InputError`` naming ``devices`` otherwise, before any compute."""
  import jax  # local: options must stay importable without initialising a backend
  allowed = ('a non-empty sequence of jax devices (e.g. jax.devices()) or a '
             'jax.sharding.Mesh')
  if isinstance(devices, (str, bytes)):
    raise InputTypeError(f'devices must be {allowed}, got the string {devices!r}: a platform '
                         f'name is not accepted; pass jax.devices({devices!r}) for its devices')
  if isinstance(devices, jax.sharding.Mesh):
    devices = devices.devices.ravel().tolist()
  try:
    listed = tuple(devices)
  except TypeError:
    raise InputTypeError(f'devices must be {allowed}, got {devices!r}') from None
  if not listed:
    raise InputError(f'devices must be {allowed}, got an empty {type(devices).__name__}')
  strangers = [d for d in listed if not isinstance(d, jax.Device)]
  if strangers:
    raise InputTypeError(f'devices must be {allowed}, got {strangers[0]!r} among them')
  if len(set(listed)) != len(listed):
    raise InputError(f'devices must not repeat a device, got {list(listed)}')
  return listed


_DEFAULTS = {field.name: field.default for field in dataclasses.fields(RunOptions)}


def run_keywords(arguments: dict) -> dict:
  """The ``RunOptions`` fields among a function's ``arguments`` (its ``locals()`` on entry)."""
  return {name: arguments[name] for name in _DEFAULTS if name in arguments}


def resolve(run: RunOptions | None, function: str, **keywords) -> RunOptions:
  """The options of a call of ``function``: ``run``, or the run keywords it was given.

  ``keywords`` are the legacy keyword arguments, each None when not given (the functions'
  signatures default them to None; ``RunOptions`` states the defaults once); giving one of
  them with ``run`` is an ``InputError`` naming it, even when its value equals the default.
  """
  unknown = set(keywords) - set(_DEFAULTS)
  if unknown:
    raise TypeError(f'resolve: not RunOptions fields: {sorted(unknown)}')
  given = {name: value for name, value in keywords.items() if value is not None}
  if run is None:
    run = RunOptions(**given)
  elif not isinstance(run, RunOptions):
    raise InputTypeError(f'run must be a jaxacct.RunOptions, got {run!r}')
  elif given:
    raise InputError(f'{function}: {", ".join(sorted(given))} given both as keyword(s) and in '
                     'run=RunOptions(...); give each once')
  shown = progress_lib.for_caller(run.progress)
  return run if shown is run.progress else dataclasses.replace(run, progress=shown)
