"""The ``SamplingScheme`` interface, the helpers its families share and the family registry
(``register``: one registration per family; ``jaxacct.schemes`` lists the families).

References:
  Andy Dong and Arun Ganesh, "Privacy Amplification for BandMF via b-Min-Sep Subsampling",
  arXiv:2602.09338 (v2): Fig. 1, App. B (docs/references.md).
"""

from __future__ import annotations

import abc
import numbers
import dataclasses
import typing
from collections.abc import Iterator
from typing import Any, ClassVar

import numpy as np

from jaxacct import _validate
from jaxacct.errors import InputError, InputTypeError
from jaxacct.schemes.participation import MinSepChain, Participation
from jaxacct.schemes.participation import Partition as Partition  # families' annotations



class SamplingScheme(abc.ABC):
  """Interface of every batch sampling scheme (abstract; concrete schemes are final)."""

  def _store_python_scalars(self) -> None:
    """Fields given as NumPy (or 0-d array) scalars, Fractions or Decimals are stored as Python
    scalars, and integers given for float fields as floats, so that equal values give equal
    schemes, reprs and ledger entries (``BMinSep(sampling_prob=np.float64(0.04))`` is
    ``BMinSep(sampling_prob=0.04)``, ``Poisson(sampling_prob=1)`` is
    ``Poisson(sampling_prob=1.0)``); a value that is not exactly a float (``Fraction(1, 3)``)
    is refused. Called first by every ``__post_init__``."""
    for field in dataclasses.fields(self):
      value = getattr(self, field.name)
      # type(), not isinstance: np.float64 is a float subclass with another repr.
      if type(value) not in (bool, int, float, str, type(None)) and \
          getattr(value, 'shape', None) == () and hasattr(value, 'item'):
        if isinstance(value, np.floating) and np.finfo(value.dtype).bits < 64:
          # np.float32(0.01) is 0.009999999776…: neither it nor a silent rounding to 0.01
          # is what the user accounts for (a rounding up would under-state p).
          raise InputTypeError(
              argument=field.name, value=value, requirement=
              f'= {value!r} is a {value.dtype} ({float(value)!r} exactly); pass '
              f'a Python float (e.g. {field.name}={float(np.format_float_positional(value))})')
        value = value.item()
      if isinstance(value, numbers.Real) and type(value) not in (bool, int, float):
        # A Fraction or Decimal: kept only if it is exactly a float (the accountants compute
        # in float64; the ledger compares schemes by their float values).
        if isinstance(value, numbers.Integral):
          value = int(value)
        elif float(value) != value:
          raise InputTypeError(argument=field.name, value=value,
                               requirement=f'= {value!r} is not exactly a float; pass a float')
        else:
          value = float(value)
      if type(value) is int and str(field.type).split(' |')[0] == 'float':
        value = float(value)  # sampling_prob=1 is sampling_prob=1.0: one repr, one ledger entry
      object.__setattr__(self, field.name, value)

  config_name: ClassVar[str]  # set by @register: the value of a config's scheme.type
  needs_graph: ClassVar[bool] = False  # training batches need an AttributionGraph

  iterations: int

  @property
  @abc.abstractmethod
  def expected_participation_rate(self) -> float:
    """Stationary marginal probability p₀ that an example is in a given round."""

  @property
  @abc.abstractmethod
  def max_band_length(self) -> int | None:
    """Longest ``c_col`` the exact accountant supports (``None``: no limit)."""

  @property
  def band_limit_name(self) -> str:
    """Name of the field that bounds ``len(c_col)``, for error messages."""
    return 'min_sep'

  @property
  def participation(self) -> Participation:
    """The participation model accountants and strategies ask (``schemes/participation.py``),
    never the family. Not a dataclass field: ``to_dict()`` and ledger entries do not see it.

    Default: no model (a user family that declares none: only the Monte Carlo and unamplified
    accountants apply); every shipped family overrides it.
    """
    return Participation(model=None, truncation=None, iterations=self.iterations)

  @property
  def min_sep_chain(self) -> int | None:
    """r when one example's participation is the r-min-sep chain of Dong & Ganesh (2026) Fig. 1,
    else None (read from ``participation``).

    That is: at most one participation per round, at least r rounds apart, drawn by the
    cold- or warm-start chain with a per-round probability p (Poisson: r = 1). The
    App. B bounds for a dense strategy need exactly this.
    """
    model = self.participation.model
    return model.min_sep if isinstance(model, MinSepChain) else None

  @property
  def conjectural(self) -> bool:
    """True when the scheme's Monte Carlo accounting rests on an unproven conjecture."""
    return False

  @abc.abstractmethod
  def max_sensitivity_squared(self, strategy) -> float:
    """max over the scheme's participation patterns x of ‖C·x‖² (host; the EVR fallback's Δ²).

    Exact for C ≥ 0 with a band no longer than the scheme's separation; for a dense
    ``LowerTriangular`` the strategy's App. B bound (Dong & Ganesh (2026)). Truncation does not
    change it (``deterministic.pld.max_sensitivity_squared`` explains why).
    """

  @property
  def truncates(self) -> bool:
    """True when batches larger than ``truncated_batch_size`` < ``dataset_size`` are cut.

    B ≥ dataset_size is allowed and means no batch can ever be cut: such a
    scheme is accounted exactly like the untruncated one.
    """
    size = getattr(self, 'truncated_batch_size', None)
    return size is not None and size < self.dataset_size

  @abc.abstractmethod
  def sampled_rounds(self, dataset_size: int, rng: np.random.Generator,
                     graph=None) -> Iterator[np.ndarray]:
    """The training batch sampler: yields the sampled sets S_1, …, S_n (int64 example ids of
    range(dataset_size), before truncation), drawn from ``rng`` only.

    ``jaxacct.batching.batches`` truncates, sorts, pads and masks them; a scheme that
    ``needs_graph`` receives the ``AttributionGraph`` as ``graph``.
    """

  def check_training_data(self, dataset_size: int, graph=None) -> None:
    """Raises ``InputError`` when ``dataset_size`` (or ``graph``) cannot be trained with this
    scheme (``batching.batches`` calls it before drawing). Default: anything goes."""
    del dataset_size, graph

  def summary(self) -> str:
    """One line naming the scheme and its parameters, for reports and plot titles."""
    parts = [template.format(getattr(self, name)) for name, template in self.summary_fields
             if getattr(self, name) is not None]
    return f'{type(self).__name__} ({", ".join(parts)})'

  def to_dict(self) -> dict:
    """The scheme as JSON: ``type`` (its class name) and its public fields."""
    return {'type': type(self).__name__, **dataclasses.asdict(self)}

  # (field, format) pairs that ``summary`` prints, in order.
  summary_fields: ClassVar[tuple[tuple[str, str], ...]] = ()


def check_truncation(scheme) -> None:
  """Validates the (truncated_batch_size, dataset_size) pair of a scheme."""
  size, dataset = scheme.truncated_batch_size, scheme.dataset_size
  name = type(scheme).__name__
  if size is None:
    if dataset is not None:
      raise InputError(
          argument='dataset_size', value=dataset, requirement=
          f'is public information of {name} only when batches are truncated; pass '
          'truncated_batch_size too, or leave dataset_size=None (use from_expected_batch_size to '
          'derive sampling_prob from a dataset size)')
    return
  _validate.integer_at_least('truncated_batch_size', size, 1)
  if dataset is None:
    raise InputError(
        argument='dataset_size', requirement=
        f'is required when truncated_batch_size is set ({name} with B = {size}): the '
        'truncated accountants depend on it, so it is public (zero-out adjacency); '
        'truncated_batch_size >= dataset_size means no truncation')
  _validate.integer_at_least('dataset_size', dataset, 1)


def expected_rate(expected_batch_size, dataset_size) -> float:
  expected_batch_size = _validate.positive_finite('expected_batch_size', expected_batch_size)
  dataset_size = _validate.integer_at_least('dataset_size', dataset_size, 1)
  if expected_batch_size > dataset_size:
    raise InputError(
        argument='expected_batch_size', value=expected_batch_size, requirement=
        f'must be <= dataset_size ({dataset_size}), got {expected_batch_size}')
  return expected_batch_size / dataset_size


def truncation_fields(truncated_batch_size, dataset_size) -> dict:
  """Truncation fields for a constructor: the dataset size is kept only when truncating."""
  if truncated_batch_size is None:
    return {}
  return {'truncated_batch_size': truncated_batch_size, 'dataset_size': dataset_size}


def rate_within_period(expected_batch_size, dataset_size, period, period_name: str,
                        scheme_name: str) -> tuple[float, int]:
  """(p₀, period) after checking p₀ ≤ 1/period (an example joins at most once per period)."""
  rate = expected_rate(expected_batch_size, dataset_size)
  period = _validate.integer_at_least(period_name, period, 1)
  if rate * period > 1.0 + 1e-12:
    raise InputError(
        argument='expected_batch_size', value=expected_batch_size, requirement=
        f'must be <= dataset_size / {period_name} = {dataset_size / period} '
        f'for {scheme_name} (p must stay <= 1), got {expected_batch_size}')
  return rate, period




# ----------------------------------------------------------------------- the family registry
_FAMILIES: dict[str, type[SamplingScheme]] = {}


def register(config_name: str):
  """Class decorator: registers a scheme family under its config name (``scheme.type``).

  The registration is all a new family needs besides its Monte Carlo kernel
  (``montecarlo/engine/kernels/``): configs accept ``scheme.type: <config_name>`` with the class's
  dataclass fields (and those of its ``from_expected_batch_size``) as keys, typed by their
  annotations (``config_fields``); ``jaxacct.batching.batches`` trains its ``sampled_rounds``;
  reports print its ``summary``. Modules of this package are imported (and so registered)
  by ``jaxacct.schemes``; a user's own family registers when its module is imported.
  """
  if not isinstance(config_name, str) or not config_name.isidentifier():
    raise InputTypeError(f'config_name must be an identifier, got {config_name!r}')

  def decorate(cls: type[SamplingScheme]) -> type[SamplingScheme]:
    if not (isinstance(cls, type) and issubclass(cls, SamplingScheme)
            and dataclasses.is_dataclass(cls)):
      raise InputTypeError(f'@register needs a SamplingScheme dataclass, got {cls!r}')
    if _FAMILIES.get(config_name, cls) is not cls:
      raise InputError(f'scheme.type {config_name!r} is already registered for '
                       f'{_FAMILIES[config_name].__name__}')
    cls.config_name = config_name
    _FAMILIES[config_name] = cls
    return cls
  return decorate


def families() -> dict[str, type[SamplingScheme]]:
  """Every registered scheme family by config name, in registration order."""
  return dict(_FAMILIES)


def config_fields(cls: type[SamplingScheme]) -> dict[str, Any]:
  """The config keys of a family and their annotated types: its dataclass fields, then the
  further parameters of ``from_expected_batch_size`` (e.g. ``expected_batch_size``)."""
  fields = {}
  hints = typing.get_type_hints(cls)
  for field in dataclasses.fields(cls):
    if field.init:
      fields[field.name] = hints[field.name]
  build = getattr(cls, 'from_expected_batch_size', None)
  if build is not None:
    for name, annotation in typing.get_type_hints(build).items():
      if name != 'return':
        fields.setdefault(name, annotation)
  return fields
