"""YAML run configurations → mechanisms (host code).

Schema (unknown keys are errors that name the key and the valid ones)::

  scheme:                    # exactly one scheme
    type: bminsep | poisson | balls_in_bins | cyclic_poisson
    iterations: int
    sampling_prob: float     # or expected_batch_size + dataset_size
    min_sep: int             # bminsep
    warm_start: bool         # bminsep (default true)
    cycle_length: int        # balls_in_bins, cyclic_poisson
    partition: independent | equal_split   # cyclic_poisson
  strategy:                  # exactly one of
    c_col: [floats]
    square_root_bands: int   # the square-root (FHU) coefficients, seed 000 §7.1
    normalize: bool          # divide c_col by its norm (default false)
  noise_multiplier: float
  monte_carlo:
    num_samples: int         # per direction
    seed: int
    epsilons: [floats]
    dtype: float64 | float32
"""

from __future__ import annotations

import pathlib
from typing import Any

import numpy as np
import yaml

from jaxacct import schemes
from jaxacct.matrices import BandedToeplitz, square_root_coefficients
from jaxacct.mechanism import MatrixMechanism

_SCHEMES = {'bminsep': schemes.BMinSep, 'poisson': schemes.Poisson,
            'balls_in_bins': schemes.BallsInBins, 'cyclic_poisson': schemes.CyclicPoisson}
_TOP_KEYS = ('scheme', 'strategy', 'noise_multiplier', 'monte_carlo')
_SCHEME_KEYS = ('type', 'iterations', 'sampling_prob', 'expected_batch_size', 'dataset_size',
                'min_sep', 'warm_start', 'cycle_length', 'partition')
_STRATEGY_KEYS = ('c_col', 'square_root_bands', 'normalize')
_MC_KEYS = ('num_samples', 'seed', 'epsilons', 'dtype')


class ConfigError(ValueError):
  """A configuration file that cannot be turned into a run."""


def _check_keys(section: str, mapping: Any, allowed: tuple[str, ...]) -> dict:
  if not isinstance(mapping, dict):
    raise ConfigError(f'{section} must be a mapping, got {mapping!r}')
  for key in mapping:
    if key not in allowed:
      raise ConfigError(f'unknown key {section}.{key}; valid keys: {", ".join(allowed)}'
                        if section else f'unknown key {key}; valid keys: {", ".join(allowed)}')
  return mapping


def load(path: str | pathlib.Path) -> dict:
  """Reads and checks a YAML config; raises ``ConfigError`` (missing file, bad key)."""
  path = pathlib.Path(path)
  if not path.is_file():
    raise ConfigError(f'config file not found: {path}')
  raw = yaml.safe_load(path.read_text())
  _check_keys('', raw, _TOP_KEYS)
  for section, allowed in (('scheme', _SCHEME_KEYS), ('strategy', _STRATEGY_KEYS),
                           ('monte_carlo', _MC_KEYS)):
    if section not in raw:
      raise ConfigError(f'missing section {section}')
    _check_keys(section, raw[section], allowed)
  return raw


def mechanism_from(raw: dict) -> MatrixMechanism:
  """Builds the ``MatrixMechanism`` a checked config describes."""
  scheme_cfg = dict(raw['scheme'])
  kind = scheme_cfg.pop('type', None)
  if kind not in _SCHEMES:
    raise ConfigError(f'scheme.type must be one of {", ".join(_SCHEMES)}, got {kind!r}')
  cls = _SCHEMES[kind]
  if 'expected_batch_size' in scheme_cfg or 'dataset_size' in scheme_cfg:
    scheme = cls.from_expected_batch_size(**scheme_cfg)
  else:
    scheme = cls(**scheme_cfg)
  strategy = raw['strategy']
  if ('c_col' in strategy) == ('square_root_bands' in strategy):
    raise ConfigError('strategy needs exactly one of c_col, square_root_bands')
  c_col = (np.asarray(strategy['c_col'], float) if 'c_col' in strategy
           else square_root_coefficients(strategy['square_root_bands']))
  if strategy.get('normalize', False):
    c_col = c_col / np.linalg.norm(c_col)
  return MatrixMechanism(scheme, BandedToeplitz(c_col), raw['noise_multiplier'])
