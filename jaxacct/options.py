"""What a run is asked to do beyond the science: two frozen options objects.

``MonteCarloOptions`` says how a Monte Carlo answer is formed (sample counts, δ_b, the declared
attempt, shared draws, precision, the σ grid, the fallback): it changes results and is part of
a run's identity. ``RunOptions`` says how a run executes (devices, blocks per call, progress,
checkpoint folder and interval, attempt ledger, time budget): it never changes a result's
bits (results are identical for any device count, call size or resume; the ledger only
refuses or charges a retry, the budget only refuses before compute), so one ``RunOptions``
can serve a whole session.

The public drivers (``account``, ``calibrate``, ``estimate_delta``, ``verify``, ``capacity_plan``,
…) take both objects whole (``monte_carlo=``, ``run=``); the scientific arguments (scheme,
strategy, ε, δ, σ, key) stay explicit. A driver refuses an options field it does not use
(``MonteCarloOptions.used_by``) rather than drop it silently. The keywords these objects
replaced raise ``InputTypeError`` naming their new place (``moved``; CHANGELOG 0.2.0).

Ground layer: imports nothing of the Monte Carlo engine, EVR or the accountants (the ledger
is checked by its protocol, ``AttemptLedger``; a fallback accountant by name or object later,
by the driver that uses it).

References:
  Andy Dong and Arun Ganesh, "Privacy Amplification for BandMF via b-Min-Sep Subsampling",
  arXiv:2602.09338 (v2), App. A (Algorithm 5: N, δ_b, candidates, fallback); Chua et al.,
  AISTATS 2025, Fact 4.2 (the sample count).
"""

from __future__ import annotations

import dataclasses
import functools
import inspect
import os
import pathlib
from typing import Any, Protocol, runtime_checkable

from jaxacct import _validate
from jaxacct import progress as progress_lib
from jaxacct.errors import InputError, InputTypeError


# A compiled program evaluates its call's blocks in a loop (lax.map); with one block per call
# XLA drops the loop and fuses the block's arithmetic into the call's, and its FMA contractions
# then differ (the multi-attribution loss moved by ~1e-14 at one block per call; any number
# >= 2 gives the same bits). Two blocks per device per call at least keeps every sample's bits
# independent of the call size.
MIN_BLOCKS_PER_CALL = 2

PRECISIONS = ('auto', 'float32', 'float64')
# How the remove direction's outputs are drawn: from P ('plain') or from the law tilted by the
# privacy loss ('tilted', montecarlo/evr/tilted.py).
PROPOSALS = ('plain', 'tilted', 'auto')


@runtime_checkable
class AttemptLedger(Protocol):
  """What a driver needs of an attempt ledger (``montecarlo/evr/ledger.py``: ``FileLedger``,
  ``VerificationLedger``): where it lives, whether it persists, and how it charges a run."""

  persistent: bool

  @property
  def location(self) -> str: ...

  def charge(self, mechanism, record, attempt, within_delta): ...


@dataclasses.dataclass(frozen=True, kw_only=True)
class MonteCarloOptions:
  """How a Monte Carlo answer is formed (module docstring); every field is part of the run's
  identity (ledger and checkpoint), so the names equal the ledger's and checkpoints' keys.

  Attributes:
    num_samples: verification samples N per direction and candidate (``verify``,
      ``calibrate``, ``account``, ``capacity_plan``); None: the minimum for ``base_delta`` and
      the declared ``attempt`` (``verification.sample_size``). A given N too few for this
      attempt is refused before any compute, naming the N that suffices.
    base_delta: δ_b of Algorithm 5 (Dong & Ganesh (2026), App. A); None: δ/2, or the largest
      one N supports.
    estimation_samples: samples per direction of each estimation sweep of a calibration;
      None: min(⌊N/4⌋, ⌈50/δ_b⌉), at least 1000 (``evr.default_estimation_samples``).
    attempt: the 1-based index of this verification of the mechanism at any target
      (``montecarlo/evr/ledger.py``: the union bound over recorded runs).
    shared_draws: common random numbers across candidate σ (``montecarlo/evr/candidates.py``).
    precision: ``"float64"`` (default), ``"float32"`` (the 32-bit program with its certified
      margin, ``montecarlo/engine/margin.py``) or ``"auto"`` (``montecarlo/evr/precision.py``); one choice,
      resolved once per request.
    grid_ratio: ratio between consecutive candidate σ, in (1, 2].
    num_candidates: Monte Carlo candidates verified (plus the fallback), ≥ 1.
    block_size: samples per reduction block of ``estimate_delta`` /
      ``estimate_delta_for_sigmas`` (part of the estimate's identity); None: the default of
      ``sampling.default_block_size``.
    fallback: the deterministic accountant proving the last candidate (a registered name or an
      accountant object); None: ``"unamplified_gaussian"``.
    estimate_only: a calibration stops after its estimation sweeps and returns σ̂ with its
      range: an estimate, not a guarantee (``calibration.SigmaEstimate``).
    proposal: ``"plain"`` (default: y ~ P) or ``"tilted"``: the remove direction is drawn from
      the law tilted by the privacy loss, Q_α ∝ P^αQ^{1−α}, and weighted back, every term
      bounded by M(α, ε) (``montecarlo/evr/tilted.py``; the add direction stays plain, or is
      certified without samples by a proven bound ≤ δ_b: (A1), the product mechanisms' Rényi
      bound, ``minsep_renyi``'s (A2)/(A3)). Used by ``estimate_delta``, ``verify``, ``account``
      and ``calibrate`` (float64, untruncated: Poisson with one band, b-min-sep with bands ≤ b,
      cyclic Poisson and fixed-bin balls-in-bins with bands ≤ T); ``capacity_plan`` projects a
      tilted calibration (``montecarlo/evr/tilted_plan.py``: the search replayed, host and
      device costs timed). ``"auto"`` (``verify``, ``account``, ``calibrate``): ``"tilted"``
      where it covers the mechanism at float64 with M < 1, at ``tilt_order`` or else the
      order of the smallest M (``montecarlo.evr.tilted.choose_order`` at the first
      candidate), and ``"plain"`` otherwise (``montecarlo/evr/tilted.py``,
      ``resolve_proposal``); the release records what ran.
    tilt_order: the order α ≥ 2 of ``"tilted"`` (required with it; optional with ``"auto"``;
      refused with ``"plain"``); ``montecarlo.evr.tilted.choose_order`` gives the α of the
      smallest M.
    tilt_state_budget: the largest tuple-chain state count a tilt may build (``verify``,
      ``account``, ``calibrate``); None: ``deterministic.tilt_bound.DEFAULT_STATE_BUDGET`` (2·10⁶). An order
      over it is refused (``"tilted"``) or not chosen (``"auto"``); host memory and seconds grow
      with it (the §7.4 shape at α = 3: 2,829,056 states, ~2 min on one core).
  """

  num_samples: int | None = None
  base_delta: float | None = None
  estimation_samples: int | None = None
  attempt: int = 1
  shared_draws: bool = True
  precision: str = 'float64'
  grid_ratio: float = 1.01
  num_candidates: int = 8
  block_size: int | None = None
  fallback: Any = None
  estimate_only: bool = False
  proposal: str = 'plain'
  tilt_order: int | None = None
  tilt_state_budget: int | None = None

  def __post_init__(self):
    def put(name, value):
      object.__setattr__(self, name, value)
    if self.num_samples is not None:
      put('num_samples', _validate.integer_at_least('num_samples', self.num_samples, 1))
    if self.base_delta is not None:
      put('base_delta', _validate.probability('base_delta', self.base_delta))
    if self.estimation_samples is not None:
      put('estimation_samples',
          _validate.integer_at_least('estimation_samples', self.estimation_samples, 1))
    put('attempt', _validate.integer_at_least('attempt', self.attempt, 1))
    put('shared_draws', _validate.boolean('shared_draws', self.shared_draws))
    put('precision', _validate.one_of('precision', self.precision, PRECISIONS))
    ratio = _validate.real_number('grid_ratio', self.grid_ratio)
    if not 1.0 < ratio <= 2.0:
      raise InputError(f'grid_ratio must be in (1, 2], got {ratio}')
    put('grid_ratio', ratio)
    put('num_candidates', _validate.integer_at_least('num_candidates', self.num_candidates, 1))
    if self.block_size is not None:
      put('block_size', _validate.integer_at_least('block_size', self.block_size, 1))
    put('estimate_only', _validate.boolean('estimate_only', self.estimate_only))
    self._check_proposal(put)
    if self.fallback is not None and not isinstance(self.fallback, str) and not hasattr(
        self.fallback, 'delta_for_epsilon'):
      raise InputTypeError(f'fallback must be a registered accountant name or a deterministic '
                           f'accountant, got {self.fallback!r}')

  def _check_proposal(self, put) -> None:
    put('proposal', _validate.one_of('proposal', self.proposal, PROPOSALS))
    if self.tilt_state_budget is not None:
      put('tilt_state_budget',
          _validate.integer_at_least('tilt_state_budget', self.tilt_state_budget, 1))
      if self.proposal == 'plain':
        raise InputError(argument='monte_carlo.tilt_state_budget', value=self.tilt_state_budget,
                         requirement="bounds the tilt's tuple chain; with proposal='plain' it "
                         'must be None', suggestion={'monte_carlo.proposal': 'auto'})
    if self.proposal == 'plain':
      if self.tilt_order is not None:
        raise InputError(argument='monte_carlo.tilt_order', value=self.tilt_order,
                         requirement=f"is the order of proposal='tilted'; with proposal="
                         f"'plain' it must be None, got {self.tilt_order!r}",
                         suggestion={'monte_carlo.proposal': 'tilted'})
      return
    if self.proposal == 'auto':
      if self.tilt_order is not None:
        put('tilt_order', _validate.integer_at_least('tilt_order', self.tilt_order, 2))
      return  # resolved per run: float32 or an uncovered mechanism resolves to plain
    if self.tilt_order is None:
      raise InputError(argument='monte_carlo.tilt_order',
                       requirement="is required with proposal='tilted': an integer α >= 2 "
                       '(jaxacct.montecarlo.evr.tilted.choose_order gives the α of the smallest '
                       'support bound M)', suggestion={'monte_carlo.tilt_order': 2})
    put('tilt_order', _validate.integer_at_least('tilt_order', self.tilt_order, 2))
    if self.precision != 'float64':
      # The 32-bit program's margin η would inflate M by e^{2(α−1)η}: not proven yet.
      raise InputError(argument='monte_carlo.precision', value=self.precision,
                       requirement="must be 'float64' with proposal='tilted' (the 32-bit "
                       "program's certified margin does not cover the tilted weights yet)",
                       suggestion={'monte_carlo.precision': 'float64'})

  def used_by(self, function: str, fields) -> MonteCarloOptions:
    """``self`` if every field ``function`` does not use keeps its default; else
    ``InputError`` naming ``monte_carlo.<field>`` (a field given where it is not used would be
    silently dropped)."""
    unused = [field.name for field in dataclasses.fields(self)
              if field.name not in fields and getattr(self, field.name) != field.default]
    if unused:
      raise InputError(f'{function} does not use monte_carlo.{unused[0]} (got '
                       f'{getattr(self, unused[0])!r}); it uses '
                       f'{", ".join(sorted(fields)) or "no Monte Carlo option"}')
    return self


def monte_carlo_options(value, function: str, fields) -> MonteCarloOptions:
  """``value`` (None: the defaults) checked as ``function``'s ``monte_carlo`` argument."""
  if value is None:
    return MonteCarloOptions()
  if not isinstance(value, MonteCarloOptions):
    raise InputTypeError(f'monte_carlo must be a jaxacct.MonteCarloOptions, got {value!r}')
  return value.used_by(function, fields)


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
    checkpoint: a folder (str or path; stored as a ``pathlib.Path``) where the run saves its
      state; calling again with the same arguments resumes from it bitwise
      (``montecarlo/evr/checkpoint.py``). None: no checkpoint.
    checkpoint_interval: seconds between saves (> 0; default 60).
    ledger: the attempt ledger of verifications, an object: ``jaxacct.FileLedger(path)`` or an
      in-memory ``jaxacct.VerificationLedger()``, which opts out (its releases say "attempts
      unchecked"); default None: the user's ledger file (``ledger.default_path()``, the CLI's
      too). A path is refused naming ``jaxacct.FileLedger(path)``.
    max_seconds: refuse, before any sample is drawn, a run whose measured projection exceeds
      it (``plan.OverBudgetError``); None: nothing is timed or refused.
  """

  devices: tuple | None = None
  blocks_per_call: int | None = None
  progress: progress_lib.Progress | bool | None = None
  checkpoint: pathlib.Path | None = None
  checkpoint_interval: float = 60.0
  ledger: AttemptLedger | None = None
  max_seconds: float | None = None

  def __post_init__(self):
    if self.devices is not None:
      object.__setattr__(self, 'devices', check_devices(self.devices))
    if self.blocks_per_call is not None:
      _validate.integer_at_least('blocks_per_call', self.blocks_per_call, MIN_BLOCKS_PER_CALL)
    if self.checkpoint is not None:
      if not isinstance(self.checkpoint, (str, os.PathLike)):
        raise InputTypeError(f'checkpoint must be a folder path or None, got {self.checkpoint!r}')
      object.__setattr__(self, 'checkpoint', pathlib.Path(self.checkpoint))
    _validate.positive_finite('checkpoint_interval', self.checkpoint_interval)
    if self.ledger is not None and not isinstance(self.ledger, AttemptLedger):
      remedy = (f'jaxacct.FileLedger({str(self.ledger)!r})'
                if isinstance(self.ledger, (str, os.PathLike)) else 'jaxacct.FileLedger(path)')
      raise InputTypeError(f'ledger must be a ledger object ({remedy}, or '
                           f'jaxacct.VerificationLedger() to opt out) or None, got '
                           f'{self.ledger!r}')
    if self.max_seconds is not None:
      _validate.positive_finite('max_seconds', self.max_seconds)
    if self.progress not in (None, False) and not callable(self.progress):
      raise InputTypeError(f'progress must be callable (samples_done, samples_total, stage) '
                           f'or False, got {self.progress!r}')

  def for_caller(self) -> RunOptions:
    """``self`` with ``progress=None`` resolved (``progress.for_caller``)."""
    shown = progress_lib.for_caller(self.progress)
    return self if shown is self.progress else dataclasses.replace(self, progress=shown)


def run_options(value) -> RunOptions:
  """``value`` (None: the defaults) checked as a ``run`` argument, progress resolved."""
  if value is None:
    value = RunOptions()
  elif not isinstance(value, RunOptions):
    raise InputTypeError(f'run must be a jaxacct.RunOptions, got {value!r}')
  return value.for_caller()


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


_RUN_FIELDS = frozenset(field.name for field in dataclasses.fields(RunOptions))
_MONTE_CARLO_FIELDS = frozenset(field.name for field in dataclasses.fields(MonteCarloOptions))


def moved_to(*, run: str = 'jaxacct.RunOptions', fields=_RUN_FIELDS, monte_carlo: bool = True,
             positional: str | None = None):
  """A decorator refusing the keywords that left a function for its options objects, naming the
  new place (CHANGELOG 0.2.0): ``fields`` moved to ``run=<run>(...)``, and with ``monte_carlo``
  the ``MonteCarloOptions`` fields (and ``dtype``, now ``monte_carlo.precision``); a keyword the
  function does not take, where it has ``accountant_options``, is named as one of those; more
  positional arguments than it takes get ``positional`` (what they became) as the message.
  ``inspect.signature`` shows the new signature only."""
  fields = frozenset(fields)

  def decorate(function):
    parameters = inspect.signature(function).parameters
    most = sum(1 for p in parameters.values()
               if p.kind in (p.POSITIONAL_ONLY, p.POSITIONAL_OR_KEYWORD))

    @functools.wraps(function)
    def wrapper(*args, **kwargs):
      if positional is not None and len(args) > most:
        raise InputTypeError(f'{function.__name__} takes {most} positional arguments, got '
                             f'{len(args)}: {positional} (CHANGELOG 0.2.0)')
      for name in kwargs:
        if name in parameters:
          continue
        if monte_carlo and name == 'dtype':
          raise InputTypeError(f'{function.__name__}: dtype= moved to monte_carlo='
                               f'jaxacct.MonteCarloOptions(precision=\'float32\' or '
                               f'\'float64\') (CHANGELOG 0.2.0)')
        places = ((fields, f'run={run}'),) + (
            ((_MONTE_CARLO_FIELDS, 'monte_carlo=jaxacct.MonteCarloOptions'),) if monte_carlo
            else ())
        for moved_fields, place in places:
          if name in moved_fields:
            raise InputTypeError(f'{function.__name__}: {name}= moved to {place}({name}=...) '
                                 f'(CHANGELOG 0.2.0)')
        if 'accountant_options' in parameters:  # the deterministic accountants' **options
          raise InputTypeError(f'{function.__name__}: {name}= is not an argument; a '
                               f'deterministic accountant\'s option goes in accountant_options='
                               f'{{{name!r}: ...}} (CHANGELOG 0.2.0)')
      return function(*args, **kwargs)
    return wrapper
  return decorate


# The drivers of Monte Carlo accounting: RunOptions and MonteCarloOptions fields moved.
moved = moved_to()
