"""YAML run configurations → mechanisms and run settings (host code).

A config is a YAML mapping of sections (``scheme`` and ``strategy`` are required). ``KEYS`` is
the schema: every key with its value type (checked, and normalised, when the config is loaded,
before any compute; unknown keys are errors that name the key and the valid ones), its default
and its meaning. The keys of ``scheme`` are the registered scheme families' fields
(``scheme_keys``) and those of ``strategy`` the registered strategy config keys
(``strategy_keys``). ``key_table`` lists them all; ``jaxacct config --keys`` prints it, and
docs/config-keys.md is its Markdown. Configs of every kind are in ``configs/``.

References:
  Andy Dong and Arun Ganesh, "Privacy Amplification for BandMF via b-Min-Sep Subsampling",
  arXiv:2602.09338 (v2): §6 (multi-attribution), §7.1 (MSE grid), App. B, App. C
  (docs/references.md).
  Arun Ganesh, "Tighter Privacy Analysis for Truncated Poisson Sampling", arXiv:2508.15089
  (docs/references.md).
  Jan Schuchardt and Nikita Kalinin, "Sampling-Free Privacy Accounting for Matrix Mechanisms under
  Random Allocation", arXiv:2601.21636 (docs/references.md).
  Antti Koskela, Marlon Tobaben and Antti Honkela, "Individual Privacy Accounting with Gaussian
  Differential Privacy", arXiv:2209.15596 (docs/references.md).
"""

from __future__ import annotations

import copy
import dataclasses
import difflib
import importlib
import inspect
import logging
import pathlib
import re
import types
import typing
from typing import Any, Callable

import numpy as np
import yaml

from jaxacct import accounting, schemes
from jaxacct.conventions import ADJACENCIES as ADJACENCIES
from jaxacct.deterministic import base as deterministic
from jaxacct import strategy as strategy_lib  # keys registered by the strategy modules
from jaxacct.mechanism import MatrixMechanism
from jaxacct import errors
from jaxacct import options as options_lib
from jaxacct.errors import InputError

_LOG = logging.getLogger(__name__)


class ConfigError(InputError):
  """A configuration that cannot be turned into a run (the message is one line)."""


class ConfigSpelling(errors.Spelling):
  """A library refusal's arguments as a config's keys (``describe``): the keys are the
  request's argument names, and a ``monte_carlo.X`` field is ``X`` of the command's section
  (``calibration`` for calibrate, train and plan; ``monte_carlo`` for estimate)."""

  def __init__(self, section: str = 'calibration'):
    self.section = section

  def name(self, argument: str) -> str:
    head, _, field = argument.partition('.')
    return f'{self.section}.{field}' if head == 'monte_carlo' and field else argument

  def assign(self, argument: str, value: Any) -> str:
    return f'{self.name(argument)}: {_yaml_scalar(value)}'

  def suggest(self, argument: str, value: Any) -> str:
    key, shown = self.name(argument), _yaml_scalar(value)
    return f'--set {key}={shown} (or {key}: {shown} in the config)'


def _yaml_scalar(value: Any) -> str:
  """``value`` as written in a YAML config (``2``, ``true``, ``monte_carlo``)."""
  return value if isinstance(value, str) else yaml.safe_dump(value).partition('\n')[0]


def describe(error: BaseException, section: str = 'calibration') -> str:
  """``error`` in a config's terms: a library ``InputError`` written from its fields with the
  config's keys (``ConfigSpelling``; ``section``: where the command's Monte Carlo options
  live), anything else as its text."""
  if isinstance(error, InputError):
    return error.render(ConfigSpelling(section))
  return str(error)


def _did_you_mean(given: str, valid) -> str:
  """" (did you mean X?)" for the closest valid key, or "" when none is close."""
  close = difflib.get_close_matches(str(given), [str(v) for v in valid], n=1, cutoff=0.6)
  return f' (did you mean {close[0]}?)' if close else ''


# Keys that were renamed: refused naming the new one (pre-1.0; CHANGELOG.md).
_RENAMED = {'monte_carlo.dtype': 'monte_carlo.precision (float64, float32 or auto)'}


def _check(raw: Any) -> dict:
  if not isinstance(raw, dict):
    raise ConfigError(f'a config must be a mapping of sections, got {type(raw).__name__}')
  for old, new in _RENAMED.items():
    section, _, key = old.partition('.')
    if key in (raw.get(section) or {}):
      raise ConfigError(f'{old} is now {new}')
  for key, value in raw.items():
    if key not in SCHEMA:
      raise ConfigError(f'unknown key {key}{_did_you_mean(key, SCHEMA)}; valid keys: '
                        f'{", ".join(SCHEMA)}')
    allowed = {'scheme': scheme_keys, 'strategy': strategy_keys}.get(key, lambda: SCHEMA[key])()
    if allowed is None:
      continue
    if not isinstance(value, dict):
      raise ConfigError(f'{key} must be a mapping with keys {", ".join(allowed)}')
    for sub in value:
      if sub not in allowed:
        raise ConfigError(f'unknown key {key}.{sub}{_did_you_mean(sub, allowed)}; valid keys: '
                          f'{", ".join(allowed)}')
  for required in ('scheme', 'strategy'):
    if required not in raw:
      raise ConfigError(f'missing section {required}')
  return _checked_values(raw)


# ------------------------------------------------------------------ value types, checked at load
_MAX_INT = 2**53  # every count is an exact float64 integer


def _number(value: Any) -> Any:
  """``value``, or the number a string spells (YAML reads ``1e7``, without a dot, as text);
  None for a string that is no number."""
  if isinstance(value, str):
    try:
      return float(value)
    except ValueError:
      return None
  return value


# Each value type checks and normalises a value at load (``type(path, value)``, an error
# naming ``path``) and describes itself for the key reference: ``kind`` and ``values``, read
# one after the other ("integer ≥ 2", "real in (0, 1)", "one of auto, float32, float64").
@dataclasses.dataclass(frozen=True)
class _Integer:
  """An integer in [minimum, maximum] (a whole number written ``1e7`` or ``1.0e7`` counts)."""

  minimum: int
  maximum: int = _MAX_INT
  kind = 'integer'

  @property
  def values(self) -> str:
    bounds = ([f'≥ {self.minimum:,}'] if self.minimum > -_MAX_INT else []) + (
        [f'≤ {self.maximum:,}'] if self.maximum < _MAX_INT else [])
    return ', '.join(bounds)

  def __call__(self, path: str, value: Any) -> int:
    number = _number(value)
    if isinstance(number, bool) or not isinstance(number, (int, float)) or (
        isinstance(number, float) and not (np.isfinite(number) and number.is_integer())):
      raise ConfigError(f'{path} must be an integer, got {value!r}')
    number = int(number)
    if number < self.minimum:
      raise ConfigError(f'{path} must be an integer >= {self.minimum}, got {value!r}')
    if number > self.maximum:
      raise ConfigError(f'{path} must be an integer <= {self.maximum:,}, got {value!r}')
    return number


@dataclasses.dataclass(frozen=True)
class _Real:
  """A finite number in the interval from ``low`` to ``high`` (open or closed ends)."""

  low: float
  high: float = np.inf
  low_open: bool = dataclasses.field(default=True, kw_only=True)
  high_open: bool = dataclasses.field(default=True, kw_only=True)
  what: str | None = dataclasses.field(default=None, kw_only=True)  # said with a refusal
  kind = 'real'

  @property
  def values(self) -> str:
    return '' if self.low == -np.inf and self.high == np.inf else f'in {self._interval()}'

  def _interval(self) -> str:
    finite_high = np.isfinite(self.high)
    return (('(' if self.low_open else '[') + f'{self.low:g}, '
            + (f'{self.high:g}' if finite_high else '∞')
            + (')' if self.high_open or not finite_high else ']'))

  def __call__(self, path: str, value: Any) -> float:
    number = _number(value)
    if isinstance(number, bool) or not isinstance(number, (int, float)) or not np.isfinite(
        number):
      raise ConfigError(f'{path} must be a finite number, got {value!r}')
    below = number <= self.low if self.low_open else number < self.low
    above = number >= self.high if self.high_open else number > self.high
    if below or above:
      raise ConfigError(f'{path} must be in {self._interval()}'
                        f'{f" ({self.what})" if self.what else ""}, got {value!r}')
    return float(number)


class _Boolean:
  kind, values = 'boolean', ''

  def __call__(self, path: str, value: Any) -> bool:
    if not isinstance(value, bool):
      raise ConfigError(f'{path} must be true or false, got {value!r}')
    return value


class _Text:
  kind, values = 'string', ''

  def __call__(self, path: str, value: Any) -> str:
    if not isinstance(value, str) or not value:
      raise ConfigError(f'{path} must be a non-empty string, got {value!r}')
    return value


class _Mapping:
  kind, values = 'mapping', ''

  def __call__(self, path: str, value: Any) -> dict:
    if not isinstance(value, dict) or not all(isinstance(k, str) for k in value):
      raise ConfigError(f'{path} must be a mapping of names to values, got {value!r}')
    return value


@dataclasses.dataclass(frozen=True)
class _Choice:
  """One of ``allowed`` (a callable: the names registered when the config is read)."""

  allowed: tuple[str, ...] | Callable[[], Any]
  kind = 'one of'

  @property
  def values(self) -> str:
    return ', '.join(self.names())

  def names(self) -> tuple[str, ...]:
    return tuple(self.allowed() if callable(self.allowed) else self.allowed)

  def __call__(self, path: str, value: Any) -> str:
    allowed = self.names()
    if value not in allowed:
      raise ConfigError(f'{path} must be one of {", ".join(allowed)}, got {value!r}'
                        + _did_you_mean(value, allowed))
    return value


class _RegisteredAccountant(_Choice):
  """A registered deterministic accountant's name (``calibration.fallback``), read when the
  config is loaded (an accountant registered by importing its module counts)."""

  def __init__(self):
    super().__init__(deterministic.available)

  def __call__(self, path: str, value: Any) -> str:
    names = self.names()
    if not isinstance(value, str) or value not in names:
      raise ConfigError(f'{path}: unknown deterministic accountant {value!r}'
                        f'{_did_you_mean(value, names)}; it must be a registered one: '
                        f'{", ".join(names)}')
    return value


class _AccountantName(_Choice):
  """``accountant``: a non-empty name at load; ``accountant_choice`` checks it against the
  accountants registered by then (naming them)."""

  def __init__(self):
    super().__init__(accounting.accountant_choices)

  def __call__(self, path: str, value: Any) -> str:
    return _TEXT(path, value)


@dataclasses.dataclass(frozen=True)
class _Reals:
  """A non-empty list of finite numbers (each ≥ 0 when ``nonnegative``)."""

  nonnegative: bool = False
  kind = 'list of reals'

  @property
  def values(self) -> str:
    return '(each ≥ 0)' if self.nonnegative else ''

  def __call__(self, path: str, value: Any) -> list[float]:
    if not isinstance(value, (list, tuple)) or not value:
      raise ConfigError(f'{path} must be a non-empty list of numbers, got {value!r}')
    item = _Real(0.0, low_open=False) if self.nonnegative else _Real(-np.inf)
    return [item(f'{path}[{i}]', v) for i, v in enumerate(value)]


@dataclasses.dataclass(frozen=True)
class _Section:
  """A section of keys; ``registered``: its keys come from registries (the scheme families'
  fields, the strategies' config keys), not from ``KEYS``."""

  registered: bool = False
  kind, values = 'section', ''


_BOOLEAN, _TEXT, _MAPPING = _Boolean(), _Text(), _Mapping()
_DELTA = _Real(0.0, 1.0)
_POSITIVE = _Real(0.0)
_SEED = _Integer(0)
_COUNT = _Integer(1)
_NO_DEFAULT = object()  # a key the config's DEFAULTS do not hold


@dataclasses.dataclass(frozen=True)
class Key:
  """One key of the config schema (``KEYS``).

  Attributes:
    path: ``section.key``, or a top-level key or section.
    value: its value type: checks and normalises the value at load (the error names the
      key) and describes it (``kind``, ``values``) for the key reference; a ``_Section``
      for a section.
    meaning: what it does, for the key reference.
    default: the config's own default (``DEFAULTS``, read by ``setting``): a value no
      library function defaults.
    library: ``"module:function"`` whose keyword argument of the key's name applies where
      the config leaves the key out (the reference reads the default from its signature).
    default_text: what leaving the key out means, where a value alone would not say it
      (a default computed at run time, a required key).
    checked: checked at load by ``value`` (False: by the code that reads it, e.g. the
      scheme's fields by its family's annotations and constructor).
  """

  path: str
  value: Any
  meaning: str
  default: Any = _NO_DEFAULT
  library: str | None = None
  default_text: str | None = None
  checked: bool = True


_CALIBRATE = 'jaxacct.options:MonteCarloOptions'
_TRAIN = 'jaxacct.training.task:train_task'
_INDIVIDUAL = 'jaxacct.individual.tracking:IndividualAccountant'

KEYS: tuple[Key, ...] = (
    Key('scheme', _Section(registered=True),
        'The sampling scheme (public information), required: `type` picks a registered family '
        '(jaxacct.schemes.families()), the other keys are its fields (a key without a default '
        'is required by the families that take it) or the parameters of its '
        'from_expected_batch_size (expected_batch_size and dataset_size instead of '
        'sampling_prob). The ranges are checked by the family\'s constructor.'),
    Key('scheme.type', None, 'The scheme family.', default_text='required', checked=False),
    Key('scheme.expected_batch_size', None,
        'The expected batch size: with dataset_size, sets sampling_prob (the family\'s '
        'from_expected_batch_size). Give it or sampling_prob, not both.',
        default_text='sampling_prob instead', checked=False),
    Key('strategy', _Section(registered=True),
        'The strategy matrix C: exactly one of the strategy keys below (each registered by a '
        'strategy module), with that key\'s options. C = I (DP-SGD) is `c_col: [1.0]`. '
        'Required.'),
    Key('noise_multiplier', _POSITIVE,
        'σ of `estimate` and `plan` (not normalised by the column norm of C); `calibrate` '
        'searches σ itself.', default_text='required by estimate'),
    Key('accountant', _AccountantName(),
        'Who accounts the mechanism: a deterministic accountant by name, monte_carlo, or auto: '
        'the tightest deterministic accountant where one supersedes Monte Carlo for the '
        'mechanism (e.g. pld for Poisson with C = I, renyi and conditional_composition for '
        'balls-in-bins), else monte_carlo (e.g. b-min-sep).', default=accounting.AUTO),
    Key('accountant_options', _MAPPING,
        'Keyword options of the deterministic accountant (e.g. renyi\'s bandwidths, alpha_max, '
        'max_transitions), checked by it.', default_text='{}', checked=False),
    Key('adjacency', _Choice(ADJACENCIES),
        'The neighbouring relation: zero_out (Monte Carlo\'s only one), or add_remove / '
        'replace_one for the deterministic accountants that cover them.', default='zero_out'),
    Key('monte_carlo', _Section(), 'The Monte Carlo estimate of `estimate`.'),
    Key('monte_carlo.num_samples', _Integer(2), 'Samples per direction.', default=100_000),
    Key('monte_carlo.seed', _SEED, 'The estimate\'s random key.', default=0),
    Key('monte_carlo.epsilons', _Reals(nonnegative=True),
        'The ε of the printed δ̂(ε) table (the figure adds a fine grid up to 1.5 × the largest).',
        default=[1.0]),
    Key('monte_carlo.precision', _Choice(('auto', 'float32', 'float64')),
        'The device program of `estimate`: float64; float32, the 32-bit program with its '
        'certified margin; auto, float32 on TPU/GPU and the faster one on a CPU. (Also read by '
        '`calibrate` and `train` when calibration.precision is not given: deprecated.)',
        library=_CALIBRATE),
    Key('monte_carlo.proposal', _Choice(('plain', 'tilted')),
        'The law of `estimate`\'s draws: plain, each direction sampled directly (remove: '
        'y ~ P, add: y ~ Q); tilted, the remove '
        'direction drawn from the law tilted by the privacy loss and weighted back, every term '
        '≤ M(α, ε), the add direction plain or certified by a proven bound. tilted covers '
        'untruncated Poisson with one band, b-min-sep with bands ≤ b, cyclic Poisson and '
        'fixed-bin balls-in-bins with bands ≤ T, in float64.', library=_CALIBRATE),
    Key('monte_carlo.tilt_order', _Integer(2),
        'The order α of proposal tilted (refused without it); '
        'jaxacct.montecarlo.evr.tilted.choose_order gives the α of the smallest M.',
        library=_CALIBRATE, default_text='required with proposal tilted'),
    Key('monte_carlo.tilt_state_budget', _Integer(1),
        'The largest tuple-chain state count the tilt of `estimate` may build (the §7.4 shape '
        'at α = 3 needs 2,829,056).', library=_CALIBRATE, default_text='2,000,000'),
    Key('calibration', _Section(),
        'The (ε, δ) target of `calibrate` and `train`, and the Estimate-Verify-Release search '
        '(`estimate` reports its ε̂ at calibration.delta).'),
    Key('calibration.epsilon', _POSITIVE, 'Target ε.',
        default_text='required by calibrate and train'),
    Key('calibration.delta', _DELTA, 'Target overall δ.',
        default_text='required by calibrate and train'),
    Key('calibration.num_samples', _Integer(2),
        'Verification samples per direction and candidate (at least the minimum that proves the '
        'overall δ at δ_b: Fact 4.2 of Chua et al.).',
        library=_CALIBRATE, default_text='the minimum for δ_b at the declared attempt'),
    Key('calibration.base_delta', _DELTA, 'The verification threshold δ_b.',
        library=_CALIBRATE, default_text='δ/2'),
    Key('calibration.grid_ratio', _Real(1.0, what='> 1: the σ grid steps up by it'),
        'Ratio between consecutive candidate σ.', library=_CALIBRATE),
    Key('calibration.shared_draws', _BOOLEAN,
        'Common random numbers across the candidate σ.', library=_CALIBRATE),
    Key('calibration.estimation_samples', _Integer(2),
        'Samples per direction of each estimation sweep (they only place the candidate grid).',
        library=_CALIBRATE, default_text='min(⌊N/4⌋, ⌈50/δ_b⌉), at least 1000'),
    Key('calibration.num_candidates', _COUNT,
        'Monte Carlo candidates verified in one pass (plus the fallback σ_up).',
        library=_CALIBRATE),
    Key('calibration.fallback', _RegisteredAccountant(),
        'The deterministic accountant that proves the last candidate, σ_up: unamplified_gaussian '
        'covers every scheme, pld gives a smaller σ_up where it applies.',
        library=_CALIBRATE, default_text='unamplified_gaussian'),
    Key('calibration.precision', _Choice(('auto', 'float32', 'float64')),
        'The device program of the Monte Carlo calibration of `calibrate` and `train` (as '
        'monte_carlo.precision for `estimate`).', library=_CALIBRATE),
    Key('calibration.attempt', _COUNT,
        'Declares the k-th verification of this mechanism (scheme, and strategy up to scale) '
        'at any target: the attempt ledger refuses an undeclared retry.', library=_CALIBRATE),
    Key('calibration.proposal', _Choice(options_lib.PROPOSALS),
        'The law of the calibration\'s Monte Carlo draws: plain; tilted, the remove direction '
        'drawn from the law tilted by the privacy loss (every term ≤ M(α, ε): ~M/δ samples '
        'instead of ~1/δ; the add direction certified by a bound where one holds, else plain), '
        'the σ search a bisection of tilted estimates; auto, tilted where it covers the '
        'mechanism, M < 1 and the add direction has a proven bound ≤ δ_b near the boundary, '
        'else plain. The plan (`jaxacct plan`, --max-minutes) replays the '
        'tilted search and times its host tables, tuple draws and device calls.',
        library=_CALIBRATE),
    Key('calibration.tilt_order', _Integer(2),
        'The order α of proposal tilted (required with it; optional with auto).',
        library=_CALIBRATE, default_text='required with proposal tilted'),
    Key('calibration.tilt_state_budget', _Integer(1),
        'The largest tuple-chain state count a tilt may build (the §7.4 shape at α = 3 needs '
        '2,829,056).', library=_CALIBRATE, default_text='2,000,000'),
    Key('calibration.seed', _SEED, 'The calibration\'s random key.', default=0),
    Key('report', _Section(), 'Where the report (JSON and PNGs) goes.'),
    Key('report.output_dir', _TEXT,
        'The report root (`--out` overrides it): each command writes its report into a folder '
        'of its name there (estimate, calibrate, train, plan).',
        default_text='reports/NAME, NAME the config file\'s name without .yaml'),
    Key('attribution', _Section(),
        'scheme.type multi_attribution on a synthetic multi-author graph (Dong & Ganesh (2026) '
        '§6): synthetic_power_law_graph, then bound_contributions to '
        'scheme.max_examples_per_user, then sampling_prob for expected_batch_size.'),
    Key('attribution.num_examples', _COUNT, 'Examples of the graph.', default_text='required'),
    Key('attribution.num_users', _COUNT, 'Users of the graph.', default_text='required'),
    Key('attribution.seed', _SEED, 'Seed of the graph, the bounding and p.', default=0),
    Key('attribution.expected_batch_size', _POSITIVE,
        'The batch size that sets sampling_prob.', default_text='required'),
    Key('attribution.max_neighbourhood_size', _COUNT,
        'The optional bound k_e on every example\'s neighbourhood (Dong & Ganesh (2026) App. C).',
        default_text='no bound'),
    Key('training', _Section(), 'The training of `train` (jaxacct/training/task.py).'),
    Key('training.task', _TEXT,
        'A module or a .py file (relative to the config) and a factory returning a '
        'jaxacct.training.TrainingTask, as `<module>:<factory>` (e.g. '
        '../examples/digits.py:task); scheme.dataset_size must be its training set size.',
        default_text='required by train (or the legacy dataset)'),
    Key('training.task_options', _MAPPING,
        'Keyword arguments of the factory (digits: test_fraction, split_seed, hidden).',
        default_text='{}'),
    Key('training.dataset', _Choice(('digits',)),
        'Legacy: the task ../examples/digits.py:task, with the legacy keys below as its '
        'task_options.'),
    Key('training.test_fraction', _DELTA, 'Legacy digits option: the test share.',
        default_text='0.2 (1437 training images)'),
    Key('training.split_seed', _SEED, 'Legacy digits option: the split\'s seed.',
        default_text='0'),
    Key('training.hidden', _COUNT, 'Legacy digits option: the MLP\'s width.',
        default_text='64'),
    Key('training.clip_norm', _POSITIVE, 'Per-example clipping norm.', library=_TRAIN),
    Key('training.learning_rate', _POSITIVE, 'SGD with momentum: the learning rate.',
        library=_TRAIN),
    Key('training.momentum', _Real(0.0, 1.0, low_open=False), 'SGD\'s momentum.',
        library=_TRAIN),
    Key('training.seed', _SEED,
        'Seed of the batches and the noise. Omit it in a private run: anyone with a known seed '
        'regenerates the noise.', library=_TRAIN,
        default_text='OS entropy, not reported'),
    Key('training.noise', _BOOLEAN, 'false: a non-private baseline (no noise, no calibration).',
        default=True),
    Key('individual', _Section(),
        'Individual accounting in `train` (Koskela et al. (2022)); DP-SGD / DP-GD only.'),
    Key('individual.delta', _DELTA, 'δ of the individual ε.', default_text='calibration.delta'),
    Key('individual.filter_epsilon', _POSITIVE,
        'Full batch (sampling_prob 1) only: the individual GDP filter with the budget of '
        '(filter_epsilon, delta).', default_text='no filter'),
    Key('individual.filter_budget', _POSITIVE, 'Or that budget B (μ-GDP) itself.',
        default_text='no filter'),
    Key('individual.retest', _BOOLEAN, 'Re-test dropped examples (false: drops are permanent).',
        library=_INDIVIDUAL),
    Key('individual.track', _COUNT,
        'With sampling_prob below 1: track a public random subset of this many examples.',
        default_text='all examples'),
    Key('individual.track_seed', _SEED, 'The tracked subset\'s seed.', default=0),
    Key('individual.method', _Choice(('pld', 'rdp')), 'The readout with sampling_prob below 1.',
        library=_INDIVIDUAL),
    Key('individual.grid_size', _Integer(2), 'Points of the σ̃ grid.', library=_INDIVIDUAL),
    Key('individual.inflation', _Real(1.0, what='the σ̃ grid runs from σ to σ·inflation'),
        'The σ̃ grid runs from σ to σ·inflation.', library=_INDIVIDUAL),
    Key('accelerator_scale', _BOOLEAN,
        'The config needs accelerators: refused on a CPU unless --force.', default=False),
    Key('description', _TEXT, 'One line about the config.'),
)
"""Every key of a config: its type and range (checked, and normalised: ``1e7`` → 10000000, when
a config is loaded, before any compute; errors name the key), its default and meaning. The
scheme's and strategy's keys come from their registries (``scheme_keys``, ``strategy_keys``;
``key_table`` lists them too). ``SCHEMA``, ``VALUE_TYPES`` and ``DEFAULTS`` are read from it,
and ``jaxacct config --keys`` prints it (docs/config-keys.md)."""


def _schema(keys) -> dict[str, Any]:
  """section → its keys (None: a top-level key, or a section of registered keys)."""
  schema: dict[str, Any] = {}
  for key in keys:
    section, _, sub = key.path.partition('.')
    if not sub:
      listed = isinstance(key.value, _Section) and not key.value.registered
      schema[section] = () if listed else None
    elif schema[section] is not None:
      schema[section] += (sub,)
  return schema


SCHEMA: dict[str, Any] = _schema(KEYS)
"""Section → the keys it takes (None: a top-level key, or ``scheme`` / ``strategy``, whose keys
are registered: ``scheme_keys``, ``strategy_keys``); unknown keys are errors naming the key."""

VALUE_TYPES: dict[str, Any] = {key.path: key.value for key in KEYS
                               if key.checked and not isinstance(key.value, _Section)}
"""The value type of every key checked at load (``KEYS``); the scheme's values are typed by its
family's annotations (``_scheme_value``) and ranged by its constructor."""

DEFAULTS: dict[str, Any] = {key.path: key.default for key in KEYS
                            if key.default is not _NO_DEFAULT}
"""The config's own defaults: values a config may leave out that no library function
defaults (the library's keyword defaults, e.g. ``train_task``'s learning rate or
``calibrate_noise_multiplier``'s grid ratio, apply where a key is left out; ``setting``)."""


def calibration_precision(raw: dict) -> str | None:
  """The config's ``calibration.precision`` (``calibrate``, ``train``), None when not given.
  The legacy ``monte_carlo.precision`` stands in for it (``load`` warns once)."""
  given = (raw.get('calibration') or {}).get('precision')
  return (raw.get('monte_carlo') or {}).get('precision') if given is None else given


def _warn_legacy_precision(raw: dict) -> None:
  if (raw.get('calibration') and 'precision' not in raw['calibration']
      and 'precision' in (raw.get('monte_carlo') or {})):
    _LOG.warning('monte_carlo.precision applies to calibrate and train only until the next '
                 'release: give calibration.precision: %s', raw['monte_carlo']['precision'])


def setting(raw: dict, path: str):
  """The value of ``path`` ("section.key" or a top-level key) in a loaded config, or its
  ``DEFAULTS`` entry when the config leaves it out (KeyError for a key without one)."""
  section, _, key = path.rpartition('.')
  holder = (raw.get(section) or {}) if section else raw
  if key in holder and holder[key] is not None:
    return holder[key]
  return DEFAULTS[path]


def library_keywords(raw: dict, section: str, names) -> dict:
  """The keys of ``section`` among ``names`` that the config gives: keyword arguments for a
  library function whose own defaults apply to the others."""
  given = raw.get(section) or {}
  return {name: given[name] for name in names if name in given}


def scheme_keys() -> tuple[str, ...]:
  """The keys of the scheme section: ``type`` and every registered family's config fields."""
  keys = {'type': None}
  for family in schemes.families().values():
    keys.update(dict.fromkeys(schemes.config_fields(family)))
  return tuple(keys)


def _annotation_type(annotation: Any):
  """The value type of a family field's annotation (int, float, bool, a Literal, or optional
  ones), or None where the constructor alone can check it (e.g. a field that must stay None)."""
  allowed = [a for a in typing.get_args(annotation) if a is not type(None)] if isinstance(
      annotation, types.UnionType) else [annotation]
  if len(allowed) != 1:
    return None
  kind = allowed[0]
  if typing.get_origin(kind) is typing.Literal:
    return _Choice(typing.get_args(kind))
  return {bool: _BOOLEAN, int: _Integer(-_MAX_INT), float: _Real(-np.inf)}.get(kind)


def _scheme_value(path: str, annotation: Any, value: Any):
  """``value`` coerced to a family field's annotated type (``_annotation_type``); its range is
  the scheme constructor's to check (``scheme_from``)."""
  value_type = _annotation_type(annotation)
  return value if value_type is None else value_type(path, value)


def _checked_values(raw: dict) -> dict:
  scheme = raw.get('scheme')
  if isinstance(scheme, dict) and 'type' in scheme:
    families = schemes.families()
    if scheme['type'] not in families:
      raise ConfigError(f'scheme.type must be one of {", ".join(families)}, got '
                        f'{scheme["type"]!r}')
    fields = schemes.config_fields(families[scheme['type']])
    for sub, item in scheme.items():
      if sub in fields and item is not None:
        scheme[sub] = _scheme_value(f'scheme.{sub}', fields[sub], item)
  strategy = raw.get('strategy')
  if isinstance(strategy, dict):
    kinds = {name: kind for key in strategy_lib.config_keys().values()
             for name, kind in ((key.name, key.kind), *key.options)}
    for sub, item in strategy.items():
      if sub in kinds and item is not None:
        strategy[sub] = _strategy_value(f'strategy.{sub}', kinds[sub], item)
  for key, value in raw.items():
    if isinstance(value, dict) and SCHEMA[key] is not None:
      for sub, item in value.items():
        path = f'{key}.{sub}'
        if path in VALUE_TYPES and item is not None:
          value[sub] = VALUE_TYPES[path](path, item)
    elif key in VALUE_TYPES and value is not None:
      raw[key] = VALUE_TYPES[key](key, value)
  return raw


def apply_overrides(raw: dict, overrides: list[str]) -> dict:
  """Applies ``--set section.key=value`` overrides (values parsed as YAML scalars)."""
  raw = copy.deepcopy(raw)
  for item in overrides:
    if '=' not in item:
      raise ConfigError(f'--set expects key=value, got {item!r}')
    path, text = item.split('=', 1)
    value = yaml.safe_load(text)
    parts = path.split('.')
    if len(parts) == 1:
      raw[parts[0]] = value
    elif len(parts) == 2:
      raw.setdefault(parts[0], {})
      if not isinstance(raw[parts[0]], dict):
        raise ConfigError(f'--set {path}: {parts[0]} is not a section')
      raw[parts[0]][parts[1]] = value
    else:
      raise ConfigError(f'--set keys have the form section.key, got {path!r}')
  return _check(raw)


def load(path: str | pathlib.Path, overrides: list[str] = ()) -> dict:
  """Reads and checks a YAML config; raises ``ConfigError`` (missing file, bad key)."""
  path = pathlib.Path(path)
  if not path.is_file():
    raise ConfigError(f'config file not found: {path}')
  try:
    raw = yaml.safe_load(path.read_text())
  except yaml.YAMLError as error:
    raise ConfigError(f'{path} is not valid YAML: {str(error).splitlines()[0]}') from error
  except UnicodeDecodeError as error:
    raise ConfigError(f'{path} is not a YAML text file: {error}') from None
  if raw is None:
    raise ConfigError(f'{path} is empty: a config is a YAML mapping with at least the sections '
                      'scheme and strategy (see configs/quickstart.yaml)')
  if not isinstance(raw, dict):
    raise ConfigError(f'{path} must hold a YAML mapping of sections (scheme, strategy, …), got '
                      f'a {type(raw).__name__}')
  raw = apply_overrides(_check(raw), list(overrides))
  _check_proposal(raw)
  _warn_legacy_precision(raw)
  return raw


TILT_KEYS = ('proposal', 'tilt_order', 'tilt_state_budget')
"""The ``monte_carlo`` keys of ``estimate``'s proposal (``MonteCarloOptions`` fields)."""


def tilt_options(raw: dict) -> dict:
  """The ``TILT_KEYS`` the config gives, as ``MonteCarloOptions`` keywords."""
  return {name: value for name, value in library_keywords(raw, 'monte_carlo', TILT_KEYS).items()
          if value is not None}


def _check_proposal(raw: dict) -> None:
  """``monte_carlo.proposal``, ``tilt_order`` and ``tilt_state_budget`` together, by
  ``MonteCarloOptions``' own rule (the order is required with tilted and refused without it,
  the budget refused with plain), on the config as overridden; the refusal names the key."""
  given = tilt_options(raw)
  try:
    options_lib.MonteCarloOptions(**given)
  except InputError as error:
    raise ConfigError(describe(error, 'monte_carlo')) from None


def scheme_from(raw: dict):
  scheme_cfg = dict(raw['scheme'])
  kind = scheme_cfg.pop('type', None)
  families = schemes.families()
  if kind not in families:
    raise ConfigError(f'scheme.type must be one of {", ".join(families)}, got {kind!r}')
  cls = families[kind]
  if 'attribution' in raw:
    if not cls.needs_graph:
      raise ConfigError('the attribution section is for scheme.type multi_attribution')
    scheme_cfg['sampling_prob'] = attribution_sampling_prob(raw)
  if 'expected_batch_size' in scheme_cfg:
    if not hasattr(cls, 'from_expected_batch_size'):
      raise ConfigError(f'scheme.expected_batch_size is not available for {kind} (the batch size '
                        'depends on the attribution graph); give scheme.sampling_prob')
    build = cls.from_expected_batch_size
  else:
    build = cls
  # A key of another scheme family (e.g. min_sep after --set scheme.type=balls_in_bins) is a
  # config error naming the key and the family, not a TypeError from the constructor.
  accepted = set(inspect.signature(build).parameters)
  for key in scheme_cfg:
    if key not in accepted and build is not cls and key in inspect.signature(cls).parameters:
      raise ConfigError(f'scheme.{key} cannot be given with scheme.expected_batch_size (which '
                        f'sets the scheme from the batch size): give one of them')
    if key not in accepted:
      raise ConfigError(f'scheme.{key} is not a key of scheme.type {kind}'
                        f'{_did_you_mean(key, accepted)}; its keys: '
                        f'{", ".join(["type", *sorted(accepted)])}')
  try:
    return build(**scheme_cfg)
  except ConfigError:
    raise
  except InputError as error:  # the constructor's check, named by its config key (scheme.…)
    raise error.within('scheme') from None


def attribution_sampling_prob(raw: dict) -> float:
  """p of a config's multi-attribution run: graph → contribution bounding → p for the batch size.

  The graph is synthetic (``synthetic_power_law_graph``); every step is seeded,
  so the result is reproducible and public. A summary is logged (logger ``jaxacct.config``,
  INFO; the CLI shows it on stderr).
  """
  from jaxacct.batching import attribution, multi_attribution
  cfg, scheme_cfg = raw['attribution'], raw['scheme']
  for key in ('num_examples', 'num_users', 'expected_batch_size'):
    if key not in cfg:
      raise ConfigError(f'attribution.{key} is required')
  seed = int(setting(raw, 'attribution.seed'))
  graph = attribution.synthetic_power_law_graph(cfg['num_examples'], cfg['num_users'], rng=seed)
  bounded = attribution.bound_contributions(
      graph, max_examples_per_user=scheme_cfg.get('max_examples_per_user', 1),
      max_neighbourhood_size=cfg.get('max_neighbourhood_size'), rng=seed)
  p = multi_attribution.sampling_prob_for_batch_size(
      bounded.graph, expected_batch_size=cfg['expected_batch_size'],
      min_sep=scheme_cfg.get('min_sep', 1), rng=seed,
      exclusion=scheme_cfg.get('exclusion', 'sampled'))
  _LOG.info('attribution: %s examples, %s users; kept %s after bounding to %s per user; '
            'sampling_prob %.6g for expected batch %s', f'{graph.num_examples:,}',
            f'{graph.num_users:,}', f'{bounded.num_kept:,}', bounded.max_examples_per_user, p,
            cfg['expected_batch_size'])
  return p


def strategy_keys() -> tuple[str, ...]:
  """The keys of the strategy section: every registered strategy key and its options."""
  keys = {}
  for key in strategy_lib.config_keys().values():
    keys.update(dict.fromkeys([key.name, *(name for name, _ in key.options)]))
  return tuple(keys)


# The value types of the strategy config keys' kinds (``strategy.CONFIG_KINDS``).
_STRATEGY_KINDS = {'count': _COUNT, 'reals': _Reals(), 'boolean': _BOOLEAN}


def _strategy_value(path: str, kind: str, value: Any):
  return _STRATEGY_KINDS[kind](path, value)


def matrix_from(raw: dict, iterations: int) -> strategy_lib.Strategy:
  """The config's strategy: its one registered key (``strategy.config_key``) built."""
  section = raw['strategy']
  keys = strategy_lib.config_keys()
  given = [name for name in keys if name in section]
  if len(given) != 1:
    raise ConfigError(f'strategy needs exactly one of {", ".join(keys)}')
  key = keys[given[0]]
  options = dict(key.options)
  for name in section:
    if name != key.name and name not in options:
      raise ConfigError(f'strategy.{name} does not apply to strategy.{key.name} (its keys: '
                        f'{", ".join([key.name, *options]) })')
  return key.build(section[key.name], iterations=iterations,
                   min_sep=raw['scheme'].get('min_sep'),
                   **{name: section[name] for name in options if name in section})


def timing_stand_in(raw: dict, iterations: int):
  """(a strategy of the config's shape that is cheap to build, a note), or None when the
  config's own strategy is cheap (``ConfigKey.timing_stand_in``; the capacity plan)."""
  for name, key in strategy_lib.config_keys().items():
    if name in raw['strategy'] and key.timing_stand_in is not None:
      return key.timing_stand_in(raw['strategy'][name], iterations=iterations)
  return None


MONTE_CARLO = accounting.MONTE_CARLO
AUTO = accounting.AUTO
accountant_choices = accounting.accountant_choices


def accountant_options(raw: dict) -> dict:
  """``accountant_options``: a mapping of option names (the accountant checks names and values)."""
  options = raw.get('accountant_options') or {}
  if not isinstance(options, dict) or not all(isinstance(k, str) for k in options):
    raise ConfigError(f'accountant_options must be a mapping of option names to values, got '
                      f'{options!r}')
  if options and raw.get('accountant', AUTO) in (AUTO, MONTE_CARLO):
    raise ConfigError('accountant_options need a deterministic accountant: set accountant: to '
                      'one of ' + ', '.join(deterministic.available()))
  return dict(options)


def accountant_choice(raw: dict, scheme, matrix) -> accounting.AccountantChoice:
  """The config's ``accountant:`` resolved for its mechanism (``accounting.choose``, once per
  run: the CLI passes the choice on): its ``name`` is ``"monte_carlo"``, a deterministic
  accountant's name, or ``"auto"`` for the tightest of the deterministic accountants that
  support the config (``jaxacct.deterministic.accountant``).

  ``auto`` in a config is deterministic when some registered accountant supersedes Monte
  Carlo for the mechanism (``DeterministicAccountant.supersedes_monte_carlo``): truncated
  Poisson and truncated cyclic Poisson (``pld``: the pairs of Ganesh (2025), and no Monte Carlo
  kernel for the latter) and fixed-bin balls-in-bins (``renyi`` and ``conditional_composition``,
  Schuchardt & Kalinin (2026): proofs in seconds to minutes of the pair Monte Carlo samples);
  then every supporting accountant runs and the tightest answer is reported with its name.
  Otherwise ``auto`` is ``monte_carlo``. A deterministic choice must support the mechanism under
  the config's ``adjacency``; Monte Carlo is for zero-out adjacency only.

  Raises:
    ConfigError: an unknown accountant or adjacency, or a choice that cannot account the
      config (the message gives the accountant's reason).
  """
  choices = accountant_choices()
  choice = raw.get('accountant', AUTO)
  if choice not in choices:
    raise ConfigError(f'accountant must be one of {", ".join(choices)}, got {choice!r}'
                      + _did_you_mean(choice, choices))
  options = accountant_options(raw)
  adjacency = setting(raw, 'adjacency')
  if adjacency not in ADJACENCIES:
    raise ConfigError(f'adjacency must be one of {", ".join(ADJACENCIES)}, got {adjacency!r}'
                      + _did_you_mean(adjacency, ADJACENCIES))
  probe = MatrixMechanism(scheme, matrix, 1.0)
  # the library's one resolution (accounting.choose): its refusals carry their argument and
  # alternatives as fields, which the CLI writes as config keys (describe)
  return accounting.choose(probe, choice, adjacency=adjacency, accountant_options=options)


def mechanism_from(raw: dict, noise_multiplier: float | None = None) -> MatrixMechanism:
  """Builds the ``MatrixMechanism`` a checked config describes."""
  scheme = scheme_from(raw)
  sigma = raw.get('noise_multiplier') if noise_multiplier is None else noise_multiplier
  if sigma is None:
    raise ConfigError('noise_multiplier is required for this command')
  return MatrixMechanism(scheme, matrix_from(raw, scheme.iterations), sigma)


def individual_from(raw: dict, dataset_size: int):
  """The config's ``IndividualAccountant`` (None without an ``individual`` section)."""
  section = raw.get('individual')
  if section is None:
    return None
  from jaxacct.individual import gdp
  from jaxacct.individual.tracking import IndividualAccountant
  section = dict(section)
  delta = section.pop('delta', (raw.get('calibration') or {}).get('delta'))
  if delta is None:
    raise ConfigError('individual.delta is required (or calibration.delta)')
  if 'filter_epsilon' in section and 'filter_budget' in section:
    raise ConfigError('give one of individual.filter_epsilon and individual.filter_budget')
  try:
    if 'filter_epsilon' in section:
      epsilon = section.pop('filter_epsilon')
      if not isinstance(epsilon, (int, float)) or not 0 < epsilon < float('inf'):
        raise ConfigError(f'individual.filter_epsilon must be a number > 0, got {epsilon!r}')
      section['filter_budget'] = gdp.gdp_budget(epsilon, delta)
    track = section.pop('track', None)
    seed = section.pop('track_seed', DEFAULTS['individual.track_seed'])
    if track is not None:
      if not isinstance(track, int) or not 1 <= track <= dataset_size:
        raise ConfigError(f'individual.track must be an integer in [1, {dataset_size}], got '
                          f'{track!r}')
      rng = np.random.default_rng(int(seed))
      section['tracked'] = tuple(sorted(int(i) for i in rng.choice(dataset_size, track,
                                                                   replace=False)))
    return IndividualAccountant(delta=delta, **section)
  except InputError as error:  # the accountant's own check, under the config's section
    if isinstance(error, ConfigError):
      raise
    raise error.within('individual') from None
  except TypeError as error:  # an unexpected key: Python's own message
    raise ConfigError(f'individual: {error}') from error


# The digits example of a source checkout: the task of the legacy `training.dataset: digits`.
_DIGITS_TASK = pathlib.Path(__file__).resolve().parents[1] / 'examples' / 'digits.py'
_LEGACY_DIGITS_OPTIONS = ('test_fraction', 'split_seed', 'hidden')


def training_task_from(raw: dict, base: pathlib.Path):
  """The config's ``TrainingTask`` (``training.task`` + ``task_options``; the legacy
  ``dataset: digits`` and its keys name the digits example), loaded before any compute."""
  from jaxacct.training import task as task_lib  # local: flax and optax only for training
  training = raw.get('training')
  if not training:
    raise ConfigError('this config has no training section: `train` needs training.task (e.g. '
                      '../examples/digits.py:task) and the run settings')
  options = dict(training.get('task_options') or {})
  legacy = {k: training[k] for k in _LEGACY_DIGITS_OPTIONS if k in training}
  if 'task' in training:
    if 'dataset' in training or legacy:
      raise ConfigError('training.task replaces the legacy training.dataset, test_fraction, '
                        'split_seed and hidden: give them as training.task_options')
    spec = training['task']
  else:
    if not _DIGITS_TASK.is_file():
      raise ConfigError('training.dataset: digits is the digits example of a jaxacct source '
                        f'checkout ({_DIGITS_TASK} is missing): give training.task')
    spec = f'{_DIGITS_TASK}:task'
    options.update(legacy)
  try:
    return task_lib.load_task(spec, options, base)
  except InputError as error:
    raise ConfigError(str(error)) from None


# ------------------------------------------------------------------ the key reference
@dataclasses.dataclass(frozen=True)
class KeyRow:
  """One key as the reference shows it (``key_table``): ``type`` is its kind and range (e.g.
  "integer ≥ 2", "real in (0, 1)", "one of auto, float32, float64"), ``default`` what leaving
  it out means ("" where there is nothing to say), ``meaning`` what it does."""

  key: str
  type: str
  default: str
  meaning: str


@dataclasses.dataclass(frozen=True)
class KeySection:
  """A section of the reference: ``name`` ("" for the keys outside any section), what it is
  for, and its keys."""

  name: str
  meaning: str
  rows: tuple[KeyRow, ...]


def key_table() -> tuple[KeySection, ...]:
  """Every config key with its type and range, default and meaning, in sections: ``KEYS``,
  with the scheme families' fields and the strategy keys registered now (``scheme_keys``,
  ``strategy_keys``; their meanings from the families' "Attributes:" and the strategy
  builders' docstrings). ``jaxacct config --keys`` prints it; docs/config-keys.md is its
  Markdown (``jaxacct config --keys --markdown``)."""
  sections: list[KeySection | None] = []
  top: list[KeyRow] = []
  for key in KEYS:
    if '.' in key.path:
      continue
    if not isinstance(key.value, _Section):
      if not top:
        sections.append(None)  # the top-level keys go where the first one is
      top.append(_row(key))
      continue
    rows = [_row(sub) for sub in KEYS if sub.path.startswith(f'{key.path}.')]
    if key.path == 'scheme':
      rows = _scheme_rows(rows)
    elif key.path == 'strategy':
      rows += _strategy_rows()
    sections.append(KeySection(key.path, key.meaning, tuple(rows)))
  return tuple(KeySection('', 'Keys outside any section.', tuple(top)) if section is None
               else section for section in sections)


def _type_text(value_type: Any) -> str:
  return f'{value_type.kind} {value_type.values}'.strip() if value_type is not None else ''


def _shown(value: Any) -> str:
  """A default as YAML writes it (``true``, ``null``, ``[1.0]``)."""
  if isinstance(value, bool):
    return 'true' if value else 'false'
  if value is None:
    return 'null'
  if isinstance(value, (list, tuple)):
    return '[' + ', '.join(_shown(item) for item in value) + ']'
  if isinstance(value, float):
    return repr(value)
  return str(value)


def library_default(key: Key) -> tuple[Any, str]:
  """(the default of ``key.library``'s keyword argument of the key's name, the function's
  name): what applies where a config leaves ``key`` out."""
  module, _, name = key.library.partition(':')
  function = getattr(importlib.import_module(module), name)
  field = key.path.rpartition('.')[2]
  if dataclasses.is_dataclass(function):  # an options object: its field's default
    return {f.name: f.default for f in dataclasses.fields(function)}[field], name
  return inspect.signature(function).parameters[field].default, name


def _row(key: Key) -> KeyRow:
  if key.library is not None:
    value, function = library_default(key)
    default = f'{key.default_text or _shown(value)} ({function})'
  elif key.default is not _NO_DEFAULT:
    default = _shown(key.default)
  else:
    default = key.default_text or ''
  return KeyRow(key.path, _type_text(key.value), default, key.meaning)


def _plain(text: str | None) -> str:
  """A docstring's text on one line, with Markdown's code marks (`x`, not ``x``)."""
  return ' '.join((text or '').split()).replace('``', '`')


def _first_paragraph(docstring: str | None) -> str:
  return _plain(inspect.cleandoc(docstring or '').split('\n\n')[0])


_ENTRY = re.compile(r'^([A-Za-z_][\w]*(?:, [A-Za-z_][\w]*)*): ?(.*)$')


def _docstring_entries(docstring: str | None) -> dict[str, str]:
  """The ``name: text`` entries of a Google-style docstring's Attributes, Args and Options
  sections (continuation lines joined; ``a, b: text`` gives both names the text)."""
  entries: dict[str, list[str]] = {}
  section = names = None  # the section's indent; the names of the entry being read
  entry_indent = 0
  for line in inspect.cleandoc(docstring or '').splitlines():
    indent, stripped = len(line) - len(line.lstrip()), line.strip()
    if stripped in ('Attributes:', 'Args:', 'Options:'):
      section, names = indent, None
    elif section is None:
      continue
    elif not stripped:
      names = None
    elif indent <= section:  # back at the section's indent: it is over
      section = names = None
    elif (match := _ENTRY.match(stripped)) and (names is None or indent <= entry_indent):
      names, entry_indent = match.group(1).split(', '), indent
      for name in names:
        entries[name] = [match.group(2)]
    elif names is not None:
      for name in names:
        entries[name].append(stripped)
  return {name: _plain(' '.join(text)) for name, text in entries.items()}


def _grouped(by_family: dict[str, str], *, sentences: bool = False) -> str:
  """Per-family texts as one: a text shared by every family that has the key is said once,
  differing ones each with their families ("integer (bminsep, poisson); null (balls_in_bins)",
  or as ``sentences``: "bminsep: p ∈ (0, 1], given eligibility. poisson: p ∈ (0, 1].")."""
  groups: dict[str, list[str]] = {}
  for family, text in by_family.items():
    groups.setdefault(text, []).append(family)
  if len(groups) == 1:
    return next(iter(groups))
  if sentences:
    return ' '.join(f'{", ".join(names)}: {text.rstrip(".")}.' for text, names in groups.items()
                    if text)
  return '; '.join(f'{text} ({", ".join(names)})' if text else f'({", ".join(names)})'
                   for text, names in groups.items())


def _annotation_text(annotation: Any) -> str:
  """The type of a family field's annotation ("integer", "real or null", "null")."""
  if annotation is type(None):
    return 'null'
  optional = isinstance(annotation, types.UnionType) and type(None) in typing.get_args(
      annotation)
  text = _type_text(_annotation_type(annotation)) or 'any'
  return f'{text} or null' if optional else text


def _scheme_rows(static: list[KeyRow]) -> list[KeyRow]:
  """The scheme section's rows: ``type``, then every registered family's config fields (their
  types from the annotations, defaults from the dataclass, meanings from the "Attributes:"
  docstring; ``KEYS``' own meaning where it has one, e.g. ``expected_batch_size``)."""
  families = schemes.families()
  types_, defaults, meanings = {}, {}, {}
  # Families with more keys first: their field order (sampling_prob, iterations, …) is kept.
  for family, cls in sorted(families.items(),
                            key=lambda item: -len(schemes.config_fields(item[1]))):
    described = _docstring_entries(cls.__doc__)
    field_defaults = {f.name: f.default for f in dataclasses.fields(cls) if f.init}
    for name, annotation in schemes.config_fields(cls).items():
      types_.setdefault(name, {})[family] = _annotation_text(annotation)
      default = field_defaults.get(name, dataclasses.MISSING)
      defaults.setdefault(name, {})[family] = ('' if default is dataclasses.MISSING
                                               else _shown(default))
      meanings.setdefault(name, {})[family] = described.get(name, '')
  given = {row.key.partition('.')[2]: row for row in static}
  rows = [dataclasses.replace(given['type'], type='one of ' + ', '.join(families))]
  # The keys most families take first (iterations, sampling_prob, …), then in family order.
  for name in sorted(types_, key=lambda name: -len(types_[name])):
    row = given.get(name)
    shared = row is not None and row.meaning or len(set(meanings[name].values())) == 1
    meaning = (row.meaning if row is not None and row.meaning
               else _grouped(meanings[name], sentences=True))
    if shared and len(types_[name]) < len(families):  # name the families that take it
      meaning = f'{", ".join(sorted(types_[name]))}: {meaning}'
    rows.append(KeyRow(f'scheme.{name}', _grouped(types_[name]),
                       row.default if row is not None and row.default else
                       _grouped(defaults[name]), meaning))
  return rows


def _strategy_rows() -> list[KeyRow]:
  """The strategy keys registered now (``strategy.config_key``), then their options: meanings
  from the builders' docstrings (the first paragraph; "Options:" entries), the options'
  defaults from the builders' signatures."""
  rows, options = [], {}
  for key in strategy_lib.config_keys().values():
    rows.append(KeyRow(f'strategy.{key.name}', _type_text(_STRATEGY_KINDS[key.kind]), '',
                       _first_paragraph(key.build.__doc__)))
    described = _docstring_entries(key.build.__doc__)
    parameters = inspect.signature(key.build).parameters
    for name, kind in key.options:
      default = parameters[name].default if name in parameters else inspect.Parameter.empty
      option = options.setdefault(name, {'keys': [], 'type': _type_text(_STRATEGY_KINDS[kind]),
                                         'default': '', 'meaning': ''})
      option['keys'].append(key.name)
      option['default'] = option['default'] or (
          '' if default is inspect.Parameter.empty else _shown(default))
      option['meaning'] = option['meaning'] or described.get(name, '')
  for name, option in options.items():
    rows.append(KeyRow(f'strategy.{name}', option['type'], option['default'],
                       f'{option["meaning"]} (with {", ".join(option["keys"])})'.lstrip()))
  return rows
