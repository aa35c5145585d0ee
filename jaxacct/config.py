"""YAML run configurations → mechanisms and run settings (host code).

Schema (every key below; unknown keys are errors that name the key and the valid ones)::

  scheme:                      # the sampling scheme (public information)
    type: bminsep | poisson | balls_in_bins | cyclic_poisson | multi_attribution
                               # or any registered family (jaxacct.schemes.families())
    <field>: value             # the family's dataclass fields (e.g. iterations, sampling_prob,
                               # min_sep, warm_start, cycle_length, partition,
                               # truncated_batch_size, dataset_size, max_examples_per_user,
                               # exclusion, accept_conjecture_6_2: see the class docstrings),
    expected_batch_size: float # or the parameters of its from_expected_batch_size (with
                               # dataset_size: p from the expected batch size)
  strategy:                    # exactly one registered key (strategy.config_key, registered
                               # by the strategy modules), and that key's options:
    c_col: [floats]
    square_root_bands: int     # the square-root (FHU) coefficients
    optimized_bands: int       # optimize_banded_toeplitz(iterations, bands) (Dong & Ganesh
                               #   (2026) §7.1)
    normalize: bool            # divide c_col by its norm (default false)
    inverse_square_root_bands: int  # BISR: dense C whose inverse is banded (Dong & Ganesh
                                    #   (2026) App. B bounds)
    optimized_inverse_bands: int    # BandInvMF by optax, C >= 0, for the scheme's min_sep
  noise_multiplier: float      # σ for `estimate` (calibrate searches σ itself)
  accountant: auto | monte_carlo | pld | unamplified_gaussian | renyi | conditional_composition
                               # or any registered deterministic accountant; auto: the tightest
                               # deterministic one where one supersedes Monte Carlo (truncated
                               # Poisson / cyclic Poisson, balls_in_bins), else monte_carlo
  accountant_options:          # keyword options of the deterministic accountant, e.g. renyi's
    bandwidths: [ints]         #   bandwidths / alpha_max / max_transitions (checked by it)
  adjacency: zero_out | add_remove | replace_one   # deterministic accountants that cover it
                               # (default zero_out, the only one of monte_carlo)
  monte_carlo:                 # `estimate`
    num_samples: int           # per direction
    seed: int
    epsilons: [floats]
    precision: auto | float32 | float64   # the device program of `estimate` and `calibrate`
                               # (default float64; float32: the 32-bit program with its
                               # certified margin; auto: float32 on TPU/GPU, the faster on CPU)
    dtype: float64 | float32   # legacy spelling of precision for `estimate`
  calibration:                 # `calibrate` (and the δ at which `estimate` reports ε̂)
    epsilon: float
    delta: float               # target overall δ
    num_samples: int           # verification samples (default: the minimum for δ_b)
    base_delta: float          # default δ/2
    grid_ratio: float          # default 1.01
    shared_draws: bool         # default true
    estimation_samples: int
    num_candidates: int        # default 8
    fallback: str              # accountant proving the last candidate σ_up (default
                               # unamplified_gaussian, every scheme; pld where it supports it)
    attempt: int               # declares the k-th verification of this (scheme, strategy, ε, δ)
                               # (the attempt ledger refuses an undeclared retry)
    seed: int
  report:
    output_dir: str            # default reports/<config name>
  training:                    # `train`: a training task (jaxacct/training/task.py)
    task: <module>:<factory>   # a module or a .py file (relative to the config) whose factory
                               # returns a jaxacct.training.TrainingTask (scheme.dataset_size =
                               # its training set size); e.g. ../examples/digits.py:task
    task_options: {}           # keyword arguments of the factory (digits: test_fraction,
                               # split_seed, hidden)
    dataset: digits            # legacy: task ../examples/digits.py:task, with the legacy keys
    test_fraction: float       #   test_fraction (default 0.2: 1437 training images),
    split_seed: int            #   split_seed (default 0) and hidden (MLP width, default 64)
    hidden: int                #   as its task_options
    clip_norm: float           # default 1.0
    learning_rate: float       # SGD with momentum (default 0.5)
    momentum: float            # default 0.9
    seed: int                  # batches and noise; omit it in a private run (OS entropy, not
                               # reported): a known seed regenerates the noise
    noise: bool                # false: non-private baseline (default true)
  individual:                  # `train`: individual accounting (Koskela et al. (2022); DP-SGD /
                               #   DP-GD only)
    delta: float               # δ of the individual ε (default calibration.delta)
    filter_epsilon: float      # full batch (sampling_prob 1) only: the individual GDP filter
                               #   with the budget B of (filter_epsilon, delta)
    filter_budget: float       # or B (μ-GDP) itself
    retest: bool               # re-test dropped examples (default false: drops are permanent)
    track: int                 # p < 1: track a public random subset of this many (default all)
    track_seed: int            # the subset's seed (default 0)
    method: pld | rdp          # p < 1 readout (default pld)
    grid_size: int             # σ̃ grid (default 100)
    inflation: float           # σ̃ grid from σ to σ·inflation (default 15)
  attribution:                 # multi_attribution on a synthetic multi-author graph (Dong &
                               #   Ganesh (2026) §6):
    num_examples: int          #   synthetic_power_law_graph, then bound_contributions(k_u), then
    num_users: int             #   p for expected_batch_size by sampling_prob_for_batch_size
    seed: int
    expected_batch_size: float
    max_neighbourhood_size: int   # optional k_e (App. C)
  accelerator_scale: bool      # refuse to run on CPU unless --force
  description: str

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
import difflib
import inspect
import logging
import pathlib
import types
import typing
from typing import Any

import numpy as np
import yaml

from jaxacct import accounting, schemes
from jaxacct.conventions import ADJACENCIES as ADJACENCIES
from jaxacct.conventions import Adjacency
from jaxacct.deterministic import accountant as deterministic_functions
from jaxacct.deterministic import base as deterministic
from jaxacct import strategy as strategy_lib  # keys registered by the strategy modules
from jaxacct.mechanism import MatrixMechanism
from jaxacct.errors import InputError

_LOG = logging.getLogger(__name__)
SCHEMA: dict[str, Any] = {
    'scheme': None,  # 'type' and the registered families' fields: scheme_keys()
    'strategy': None,  # the registered strategy keys and their options: strategy_keys()
    'noise_multiplier': None,
    'accountant': None,
    'accountant_options': None,
    'adjacency': None,
    'monte_carlo': ('num_samples', 'seed', 'epsilons', 'precision', 'dtype'),
    'calibration': ('epsilon', 'delta', 'num_samples', 'base_delta', 'grid_ratio', 'shared_draws',
                    'estimation_samples', 'num_candidates', 'fallback', 'attempt', 'seed'),
    'report': ('output_dir',),
    'attribution': ('num_examples', 'num_users', 'seed', 'expected_batch_size',
                    'max_neighbourhood_size'),
    'training': ('task', 'task_options', 'dataset', 'test_fraction', 'split_seed', 'clip_norm',
                 'learning_rate', 'momentum', 'hidden', 'seed', 'noise'),
    'individual': ('delta', 'filter_epsilon', 'filter_budget', 'retest', 'track', 'track_seed',
                   'method', 'grid_size', 'inflation'),
    'accelerator_scale': None,
    'description': None,
}


class ConfigError(InputError):
  """A configuration that cannot be turned into a run (the message is one line)."""


def _did_you_mean(given: str, valid) -> str:
  """" (did you mean X?)" for the closest valid key, or "" when none is close."""
  close = difflib.get_close_matches(str(given), [str(v) for v in valid], n=1, cutoff=0.6)
  return f' (did you mean {close[0]}?)' if close else ''


def _check(raw: Any) -> dict:
  if not isinstance(raw, dict):
    raise ConfigError(f'a config must be a mapping of sections, got {type(raw).__name__}')
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


def _integer(minimum: int, maximum: int = _MAX_INT):
  def check(path: str, value: Any):
    number = value
    if isinstance(value, str):  # YAML reads 1e7 (no dot) as a string
      try:
        number = float(value)
      except ValueError:
        number = None
    if isinstance(number, bool) or not isinstance(number, (int, float)) or (
        isinstance(number, float) and not (np.isfinite(number) and number.is_integer())):
      raise ConfigError(f'{path} must be an integer, got {value!r}')
    number = int(number)
    if number < minimum:
      raise ConfigError(f'{path} must be an integer >= {minimum}, got {value!r}')
    if number > maximum:
      raise ConfigError(f'{path} must be an integer <= {maximum:,}, got {value!r}')
    return number
  return check


def _real(low: float, high: float = np.inf, *, low_open: bool = True, high_open: bool = True,
          what: str | None = None):
  def check(path: str, value: Any):
    number = value
    if isinstance(value, str):
      try:
        number = float(value)
      except ValueError:
        number = None
    if isinstance(number, bool) or not isinstance(number, (int, float)) or not np.isfinite(
        number):
      raise ConfigError(f'{path} must be a finite number, got {value!r}')
    below = number <= low if low_open else number < low
    above = number >= high if high_open else number > high
    if below or above:
      interval = (('(' if low_open else '[') + f'{low:g}, ' + (f'{high:g}' if np.isfinite(high)
                                                                else '∞')
                  + (')' if high_open or not np.isfinite(high) else ']'))
      raise ConfigError(f'{path} must be in {interval}{f" ({what})" if what else ""}, got '
                        f'{value!r}')
    return float(number)
  return check


def _boolean(path: str, value: Any):
  if not isinstance(value, bool):
    raise ConfigError(f'{path} must be true or false, got {value!r}')
  return value


def _text(path: str, value: Any):
  if not isinstance(value, str) or not value:
    raise ConfigError(f'{path} must be a non-empty string, got {value!r}')
  return value


def _registered_accountant(path: str, value: Any):
  """A registered deterministic accountant's name (``calibration.fallback``), read when the
  config is loaded (an accountant registered by importing its module counts)."""
  names = deterministic.available()
  if not isinstance(value, str) or value not in names:
    raise ConfigError(f'{path}: unknown deterministic accountant {value!r}'
                      f'{_did_you_mean(value, names)}; it must be a registered one: '
                      f'{", ".join(names)}')
  return value


def _choice(*allowed: str):
  def check(path: str, value: Any):
    if value not in allowed:
      raise ConfigError(f'{path} must be one of {", ".join(allowed)}, got {value!r}'
                        + _did_you_mean(value, allowed))
    return value
  return check


def _mapping(path: str, value: Any):
  if not isinstance(value, dict) or not all(isinstance(k, str) for k in value):
    raise ConfigError(f'{path} must be a mapping of names to values, got {value!r}')
  return value


def _reals(*, nonnegative: bool = False):
  def check(path: str, value: Any):
    if not isinstance(value, (list, tuple)) or not value:
      raise ConfigError(f'{path} must be a non-empty list of numbers, got {value!r}')
    item = _real(0.0, low_open=False) if nonnegative else _real(-np.inf)
    return [item(f'{path}[{i}]', v) for i, v in enumerate(value)]
  return check


_DELTA = _real(0.0, 1.0)
_POSITIVE = _real(0.0)
_SEED = _integer(0)
_COUNT = _integer(1)
VALUE_TYPES: dict[str, Any] = {
    'noise_multiplier': _POSITIVE, 'accountant': _text,
    'adjacency': _choice(*ADJACENCIES),
    'monte_carlo.num_samples': _integer(2), 'monte_carlo.seed': _SEED,
    'monte_carlo.epsilons': _reals(nonnegative=True),
    'monte_carlo.dtype': _choice('float64', 'float32'),
    'monte_carlo.precision': _choice('auto', 'float32', 'float64'),
    'calibration.epsilon': _POSITIVE, 'calibration.delta': _DELTA,
    'calibration.num_samples': _integer(2), 'calibration.base_delta': _DELTA,
    'calibration.grid_ratio': _real(1.0, what='> 1: the σ grid steps up by it'),
    'calibration.shared_draws': _boolean, 'calibration.estimation_samples': _integer(2),
    'calibration.num_candidates': _COUNT, 'calibration.fallback': _registered_accountant,
    'calibration.attempt': _COUNT, 'calibration.seed': _SEED,
    'report.output_dir': _text,
    'training.task': _text, 'training.task_options': _mapping,
    'training.dataset': _choice('digits'), 'training.test_fraction': _DELTA, 'training.split_seed': _SEED,
    'training.clip_norm': _POSITIVE, 'training.learning_rate': _POSITIVE,
    'training.momentum': _real(0.0, 1.0, low_open=False), 'training.hidden': _COUNT,
    'training.seed': _SEED, 'training.noise': _boolean,
    'individual.delta': _DELTA, 'individual.filter_epsilon': _POSITIVE,
    'individual.filter_budget': _POSITIVE, 'individual.retest': _boolean,
    'individual.track': _COUNT, 'individual.track_seed': _SEED,
    'individual.method': _choice('pld', 'rdp'), 'individual.grid_size': _integer(2),
    'individual.inflation': _real(1.0, what='the σ̃ grid runs from σ to σ·inflation'),
    'attribution.num_examples': _COUNT, 'attribution.num_users': _COUNT,
    'attribution.seed': _SEED, 'attribution.expected_batch_size': _POSITIVE,
    'attribution.max_neighbourhood_size': _COUNT,
    'accelerator_scale': _boolean, 'description': _text,
}
"""The type and range of every config value, checked (and normalised: ``1e7`` → 10000000)
when a config is loaded, before any compute; errors name the key. The scheme's values are
typed by its family's annotations (``_scheme_value``) and ranged by its constructor."""


DEFAULTS: dict[str, Any] = {
    'adjacency': 'zero_out',
    'monte_carlo.num_samples': 100_000, 'monte_carlo.seed': 0, 'monte_carlo.epsilons': [1.0],
    'calibration.seed': 0, 'training.noise': True,
}
"""The config's own defaults: values a config may leave out that no library function
defaults (the library's keyword defaults, e.g. ``train_task``'s learning rate or
``calibrate_noise_multiplier``'s grid ratio, apply where a key is left out; ``setting``)."""


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


def _scheme_value(path: str, annotation: Any, value: Any):
  """``value`` coerced to a family field's annotated type (int, float, bool, a Literal, or
  optional ones); its range is the scheme constructor's to check (``scheme_from``)."""
  allowed = [a for a in typing.get_args(annotation) if a is not type(None)] if isinstance(
      annotation, types.UnionType) else [annotation]
  if len(allowed) != 1:
    return value  # e.g. a field that must stay None: the constructor says why
  kind = allowed[0]
  if typing.get_origin(kind) is typing.Literal:
    return _choice(*typing.get_args(kind))(path, value)
  if kind is bool:
    return _boolean(path, value)
  if kind is int:
    return _integer(-_MAX_INT)(path, value)
  if kind is float:
    return _real(-np.inf)(path, value)
  return value


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
  return apply_overrides(_check(raw), list(overrides))


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
  except InputError as error:  # the constructor's range check: name the config key
    message = str(error)
    named = message.split(' ', 1)[0] in scheme_cfg
    raise ConfigError(f'scheme.{message}' if named else f'scheme: {message}') from None


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
  seed = int(cfg.get('seed', 0))
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


def _strategy_value(path: str, kind: str, value: Any):
  return {'count': _COUNT, 'reals': _reals(), 'boolean': _boolean}[kind](path, value)


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


def accountant_from(raw: dict, scheme, matrix) -> str:
  """``"monte_carlo"``, a deterministic accountant's name, or ``"auto"`` for the tightest of the
  deterministic accountants that support the config (``jaxacct.deterministic.accountant``).

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
  try:
    choice = accounting.choose_accountant(probe, choice, adjacency=adjacency)
  except InputError as error:
    raise ConfigError(str(error)) from None
  if choice == MONTE_CARLO:
    return choice
  if choice == AUTO:
    try:
      deterministic_functions.chosen_accountants(probe, AUTO, {'adjacency': adjacency},
                                                 at_sigma=False)  # σ: a placeholder
    except ValueError as error:  # none supports it: every accountant's reason
      raise ConfigError(f'accountant: auto: {_in_config_terms(error)}') from None
    return choice
  try:
    reason = deterministic.get(choice).supports(probe, adjacency=adjacency, **options)
  except (TypeError, ValueError) as error:  # an option the accountant does not take / refuses
    raise ConfigError(f'accountant_options: {error}') from None
  if reason is not None:
    raise ConfigError(f'accountant: {_in_config_terms(reason)}')
  return choice


def _in_config_terms(message) -> str:
  """A library refusal in a config's words: the Monte Carlo accountant is ``accountant:
  monte_carlo`` there, not the Python functions."""
  return (str(message)
          .replace(f'{deterministic.MONTE_CARLO_HINT}, or accountant: monte_carlo in a config',
                   'accountant: monte_carlo (the Monte Carlo accountant)')
          .replace(deterministic.MONTE_CARLO_HINT,
                   'accountant: monte_carlo (the Monte Carlo accountant)')
          .replace("accountant='unamplified_gaussian'", 'accountant: unamplified_gaussian'))


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
    seed = section.pop('track_seed', 0)
    if track is not None:
      if not isinstance(track, int) or not 1 <= track <= dataset_size:
        raise ConfigError(f'individual.track must be an integer in [1, {dataset_size}], got '
                          f'{track!r}')
      rng = np.random.default_rng(int(seed))
      section['tracked'] = tuple(sorted(int(i) for i in rng.choice(dataset_size, track,
                                                                   replace=False)))
    return IndividualAccountant(delta=delta, **section)
  except (TypeError, ValueError) as error:
    if isinstance(error, ConfigError):
      raise
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
