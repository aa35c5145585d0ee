"""The deterministic-accountant contract and its registry (host code).

A *deterministic accountant* proves (ε, δ) statements about a ``MatrixMechanism`` without
sampling: a closed form, or a PLD composed by dp_accounting. Every accountant subclasses
``DeterministicAccountant`` (abstract; concrete accountants are final and implement only the
``_``-prefixed hooks) and answers the same questions:

- ``supports(mechanism, **options)``: None when it accounts the mechanism under these
  options, else a one-line reason (which accountant, or Monte Carlo, covers it instead);
- ``size_refusal(mechanism, **options)``: None when it can build the curve at the mechanism's
  σ, else why not (a σ so small that a PLD grid would not fit: ``_grid.py``); unlike
  ``supports`` it depends on σ, and ``"auto"`` leaves such an accountant out;
- ``privacy_curve(mechanism, **options)``: the mechanism's ``PrivacyCurve`` (δ(ε) and ε(δ)
  per direction or their maximum), built once and queried many times;
- ``delta_for_epsilon`` / ``epsilon_for_delta``: one point of that curve;
- ``sigma`` / ``calibrate``: the smallest noise multiplier meeting (ε, δ), with its
  ``Guarantee`` (method ``"deterministic"``, ``accountant`` = the accountant's ``name``);
- ``supersedes_monte_carlo(mechanism)``: whether it is an accountant of record for the
  mechanism, because the Monte Carlo engine accounts it by a looser pair or not at all, or
  only with high probability at a far greater cost (a config's ``accountant: auto`` asks
  this, and then takes the tightest supporting deterministic accountant).

Conventions (``jaxacct.conventions``): ``direction`` is ``"remove"`` (H(P‖Q), the example
present under P), ``"add"`` (H(Q‖P)) or None for the maximum over both, which is the (ε, δ)
statement; ``adjacency`` is ``"zero_out"`` (default), ``"add_remove"`` or ``"replace_one"``,
and an accountant that cannot honour the requested adjacency does not support the call.
``noise_multiplier`` is not normalised by ‖c_col‖.

Every argument is checked before any compute: ValueError naming the argument, its value and
the allowed range (δ ∈ (0, 1), finite ε ≥ 0, a known direction, an adjacency the accountant
covers); ``UnsupportedMechanismError`` (a ValueError) naming the accountants that do support
the mechanism; TypeError for an option the accountant does not take.

The registry (``register``, ``get``, ``available``, ``supporting``) is filled by importing
``jaxacct.deterministic``: each accountant module decorates its class with ``@register``.
``jaxacct.epsilon_for_delta`` / ``delta_for_epsilon`` / ``calibrate_deterministic`` look
accountants up by name, or take the tightest supported one for ``accountant="auto"``.

References:
  Jan Schuchardt and Nikita Kalinin, "Sampling-Free Privacy Accounting for Matrix Mechanisms under
  Random Allocation", arXiv:2601.21636 (docs/references.md).
"""

from __future__ import annotations

import abc
import dataclasses
import math
import types
import typing
from typing import Any, Callable, ClassVar, Mapping

from jaxacct import _validate
from jaxacct.conventions import ADJACENCIES, DIRECTIONS, Adjacency, Direction, Method
from jaxacct.guarantee import Guarantee
from jaxacct.mechanism import MatrixMechanism, check_mechanism
from jaxacct import progress as progress_lib
from jaxacct.errors import InputError, InputTypeError

# What a refusal offers when no deterministic accountant covers a mechanism (an error's
# ``alternatives``: the CLI writes ``accountant: monte_carlo``, Python ``accountant='monte_carlo'``)
MONTE_CARLO_ALTERNATIVE = {'monte_carlo': 'the Monte Carlo accountant'}
# accountant choices that are not registry entries
RESERVED_NAMES = ('auto', 'monte_carlo', 'tightest')
MIN_TOLERANCE = 1e-12  # the finest relative σ tolerance any accountant promises


class UnsupportedMechanismError(InputError):
  """An accountant was asked about a mechanism (or adjacency) it does not cover."""


class CurveTooLargeError(InputError):
  """An accountant covers the mechanism but not at its σ: its grids would be too large to build
  (``DeterministicAccountant.size_refusal``; ``deterministic/_grid.py``)."""


# ---------------------------------------------------------------- argument checks
def check_epsilon(epsilon) -> float:
  """ε: a finite real ≥ 0."""
  value = _validate.real_number('epsilon', epsilon)
  if not (math.isfinite(value) and value >= 0.0):
    raise InputError(f'epsilon must be finite and >= 0, got {value}')
  return value


def check_delta(delta) -> float:
  """δ ∈ (0, 1) (open: δ = 1 says nothing and δ = 0 needs ε = ∞ for a Gaussian mechanism)."""
  value = _validate.real_number('delta', delta)
  if not (math.isfinite(value) and 0.0 < value < 1.0):
    raise InputError(f'delta must be in (0, 1), got {value}')
  return value


def check_direction(direction) -> str | None:
  """``"remove"``, ``"add"`` (or a ``Direction``) or None (the maximum over both)."""
  if direction is None:
    return None
  if direction not in DIRECTIONS:
    raise InputError(f'direction must be one of {", ".join(map(repr, DIRECTIONS))} or None (the '
                     f'maximum over both), got {direction!r}')
  return Direction(direction).value


def check_tolerance(tolerance) -> float:
  """Relative σ tolerance in [1e-12, 0.5)."""
  value = _validate.real_number('tolerance', tolerance)
  if not (math.isfinite(value) and MIN_TOLERANCE <= value < 0.5):
    raise InputError(f'tolerance must be in [{MIN_TOLERANCE:g}, 0.5), got {value}')
  return value


def _check_adjacency(value) -> str:
  return Adjacency(_validate.one_of('adjacency', value, ADJACENCIES)).value


@dataclasses.dataclass(frozen=True)
class Option:
  """A keyword option of an accountant: its default and its check (value → canonical value).

  The check raises ValueError/TypeError naming the option before any compute.
  """

  default: Any
  check: Callable[[Any], Any]


ADJACENCY = Option('zero_out', _check_adjacency)
"""The ``adjacency`` option, which every accountant takes (``DeterministicAccountant``)."""


# ---------------------------------------------------------------- privacy curves
class PrivacyCurve(abc.ABC):
  """δ(ε) and ε(δ) of one mechanism under one accountant (abstract; curves are final).

  Implementations give one direction at a time (``_delta``, ``_epsilon``); the maximum over
  directions is taken here, so it always equals one of them.
  """

  @typing.final
  def delta_for_epsilon(self, epsilon: float, *, direction: str | None = None) -> float:
    """δ(ε) in ``direction`` (``"remove"`` or ``"add"``), or the max over both (None); never
    below 0 (a hockey-stick divergence is ≥ 0: a PLD's float64 tail can cancel to −1e-14)."""
    epsilon, direction = check_epsilon(epsilon), check_direction(direction)
    if direction is not None:
      return max(0.0, float(self._delta(epsilon, direction)))
    return max(0.0, *(float(self._delta(epsilon, d)) for d in DIRECTIONS))

  @typing.final
  def epsilon_for_delta(self, delta: float, *, direction: str | None = None) -> float:
    """The smallest ε ≥ 0 with δ(ε) ≤ ``delta`` in ``direction``, or the max over both (None)."""
    delta, direction = check_delta(delta), check_direction(direction)
    if direction is not None:
      return float(self._epsilon(delta, direction))
    return max(float(self._epsilon(delta, d)) for d in DIRECTIONS)

  def explain(self, delta: float) -> dict:
    """Accountant-specific details of what gives ε(δ) (e.g. the Rényi order, bandwidth and
    τ per direction); empty when there is nothing more to say."""
    del delta
    return {}

  # Cost model of ``auto`` (TightestCurve): curves are queried cheapest first, and a costly
  # one is asked only whether it beats the best answer so far (``_delta_below``). 1: a
  # closed form or one composed PLD / RDP vector answers every ε; larger: a δ(ε) query
  # builds new compositions (the bad-event curves of MMCC and conditional composition).
  relative_cost: typing.ClassVar[int] = 1

  def _delta_below(self, epsilon: float, direction: str, bound: float) -> float:
    """min(δ(ε), ``bound``) of one direction; a curve may return ``bound`` as soon as it
    knows its own δ(ε) is not below it (without computing it)."""
    return min(float(self._delta(epsilon, direction)), bound)

  @abc.abstractmethod
  def _delta(self, epsilon: float, direction: str) -> float:
    """δ(ε) of one direction (arguments already checked)."""

  @abc.abstractmethod
  def _epsilon(self, delta: float, direction: str) -> float:
    """ε(δ) of one direction (arguments already checked)."""


# ---------------------------------------------------------------- the contract
class DeterministicAccountant(abc.ABC):
  """Interface of a deterministic accountant (abstract; concrete accountants are final).

  Class attributes of a concrete accountant:
    name: the registry key (an identifier, not ``"auto"``, ``"monte_carlo"`` or
      ``"tightest"``).
    tie_order: its place in the registry (an int, unique): ``available()`` lists the
      accountants by it, and ``"tightest"`` gives a tie to the lower one. Set explicitly, so
      the order does not depend on how the package's modules are found.
    references: citations of the results it implements (paper, arXiv id and version, theorem).
    adjacencies: the adjacencies it covers for at least one mechanism.
    options: its keyword options besides ``adjacency`` (name → ``Option``).
    sigma_floor: the lowest σ ``calibrate`` tries (returned when it already meets the target).
    amplified: False for a bound that ignores the sampling (``unamplified_gaussian``):
      ``"auto"`` never chooses it, so a loose answer is never returned without being asked.

  Concrete accountants implement the hooks ``_refusal``, ``_curve``, ``_sigma`` and
  ``_supersedes_monte_carlo``; the public methods below check every argument first and are
  not overridden.
  """

  name: ClassVar[str]
  tie_order: ClassVar[int]
  references: ClassVar[tuple[str, ...]]
  adjacencies: ClassVar[tuple[str, ...]]
  options: ClassVar[Mapping[str, Option]] = types.MappingProxyType({})
  sigma_floor: ClassVar[float] = 0.0
  amplified: ClassVar[bool] = True

  # -- public, final
  @typing.final
  def option_names(self) -> tuple[str, ...]:
    """Every keyword option this accountant takes (``adjacency`` first)."""
    return ('adjacency', *self.options)

  @typing.final
  def supports(self, mechanism: MatrixMechanism, **options) -> str | None:
    """None when this accountant accounts ``mechanism`` under ``options``, else the reason.

    Raises:
      TypeError: ``mechanism`` is not a ``MatrixMechanism``, or an option it does not take.
      ValueError: an option value outside its range.
    """
    mechanism = check_mechanism(mechanism)
    return self._refusal(mechanism, self._resolve(options))

  @typing.final
  def supersedes_monte_carlo(self, mechanism: MatrixMechanism) -> bool:
    """True when this is an accountant of record for ``mechanism`` (zero-out adjacency).

    That is: it supports the mechanism and either the Monte Carlo engine accounts it by a
    looser dominating pair or not at all (truncated Poisson), or this accountant proves a
    deterministic bound of the same pair that Monte Carlo gives only with high probability,
    at a far greater cost (balls-in-bins: Schuchardt & Kalinin (2026); untruncated Poisson,
    whose exact PLD Monte Carlo could only estimate and verify at δ_b < δ). Where Monte Carlo
    accounts a tighter pair (cyclic Poisson with independent phases: it mixes over the phase)
    it is False and Monte Carlo stays the default.
    """
    mechanism = check_mechanism(mechanism)
    options = self._resolve({})
    return self._refusal(mechanism, options) is None and bool(
        self._supersedes_monte_carlo(mechanism))

  @typing.final
  def size_refusal(self, mechanism: MatrixMechanism, **options) -> str | None:
    """None when the curve of a supported ``mechanism`` can be built at its σ, else the reason:
    a σ so small that a grid would be too large (``deterministic/_grid.py``). Unlike
    ``supports`` it depends on σ; a calibration, which chooses σ, does not ask it. None for a
    mechanism it does not support (``supports`` says why)."""
    mechanism = check_mechanism(mechanism)
    resolved = self._resolve(options)
    if self._refusal(mechanism, resolved) is not None:
      return None
    return self._size_refusal(mechanism, resolved)

  @typing.final
  def privacy_curve(self, mechanism: MatrixMechanism, **options) -> PrivacyCurve:
    """The mechanism's δ(ε) / ε(δ) curve under this accountant (built once, queried often).

    Raises:
      UnsupportedMechanismError: the accountant does not cover ``mechanism`` / ``options``.
      CurveTooLargeError: it does, but not at this σ (``size_refusal``), before any compute.
    """
    mechanism = check_mechanism(mechanism)
    resolved = self._resolve(options)
    self._require(mechanism, resolved, options)
    reason = self._size_refusal(mechanism, resolved)
    if reason is not None:
      raise CurveTooLargeError(f'accountant {self.name!r} cannot build this curve: {reason}')
    return self._curve(mechanism, resolved)

  @typing.final
  def delta_for_epsilon(self, mechanism: MatrixMechanism, epsilon: float, *,
                        direction: str | None = None, **options) -> float:
    """δ(ε) of ``mechanism`` in ``direction`` (None: the max over both directions)."""
    epsilon, direction = check_epsilon(epsilon), check_direction(direction)
    return self.privacy_curve(mechanism, **options).delta_for_epsilon(epsilon,
                                                                      direction=direction)

  @typing.final
  def epsilon_for_delta(self, mechanism: MatrixMechanism, delta: float, *,
                        direction: str | None = None, **options) -> float:
    """ε(δ) of ``mechanism`` in ``direction`` (None: the max over both directions)."""
    delta, direction = check_delta(delta), check_direction(direction)
    return self.privacy_curve(mechanism, **options).epsilon_for_delta(delta, direction=direction)

  @typing.final
  def sigma(self, scheme, matrix, *, epsilon: float, delta: float, tolerance: float = 1e-4,
            progress=None, **options) -> float:
    """The smallest σ (rounded up, to ``tolerance`` relative, ≥ ``sigma_floor``) with ε(δ) ≤ ε.

    At the returned σ the mechanism is (ε, δ)-DP by this accountant; at σ·(1 − 2·tolerance)
    it is not (unless σ is the floor). ``progress(probes_done, probes_expected, stage)``
    (``jaxacct.progress``) is called after every probe of the search, with the stage
    "σ search with <name>".
    """
    probe, resolved, epsilon, delta, tolerance = self._calibration_inputs(
        scheme, matrix, epsilon, delta, tolerance, options)
    return float(self._sigma(probe, epsilon, delta, tolerance, resolved,
                             self._named(progress)))

  @typing.final
  def calibrate(self, scheme, matrix, *, epsilon: float, delta: float, tolerance: float = 1e-4,
                progress=None, **options) -> tuple[MatrixMechanism, Guarantee]:
    """(mechanism at ``sigma(...)``, its ``Guarantee``: method ``"deterministic"``, this accountant)."""
    probe, resolved, epsilon, delta, tolerance = self._calibration_inputs(
        scheme, matrix, epsilon, delta, tolerance, options)
    sigma = float(self._sigma(probe, epsilon, delta, tolerance, resolved,
                              self._named(progress)))
    mechanism = dataclasses.replace(probe, noise_multiplier=sigma)
    return mechanism, Guarantee(epsilon=epsilon, delta=delta, method=Method.DETERMINISTIC,
                                noise_multiplier=sigma, adjacency=resolved['adjacency'],
                                accountant=self.name)

  def __repr__(self) -> str:
    return f'{type(self).__name__}(name={self.name!r})'

  def _named(self, progress):
    """``progress`` with this accountant's name in every stage ("σ search with renyi");
    None: a ``Reporter`` when a person is watching (``progress.for_caller``); False: none."""
    progress = progress_lib.for_caller(progress)
    if progress is None:
      return None
    return lambda done, total, stage: progress(done, total, f'{stage} with {self.name}')

  # -- hooks
  @abc.abstractmethod
  def _refusal(self, mechanism: MatrixMechanism, options: dict) -> str | None:
    """None if supported under the (checked, complete) ``options``, else a one-line reason."""

  @abc.abstractmethod
  def _curve(self, mechanism: MatrixMechanism, options: dict) -> PrivacyCurve:
    """The curve of a supported mechanism."""

  @abc.abstractmethod
  def _sigma(self, probe: MatrixMechanism, epsilon: float, delta: float, tolerance: float,
             options: dict, progress=None) -> float:
    """The calibrated σ for ``probe``'s scheme and matrix (``probe`` is supported);
    ``progress`` goes to ``smallest_passing_sigma``."""

  @abc.abstractmethod
  def _supersedes_monte_carlo(self, mechanism: MatrixMechanism) -> bool:
    """See ``supersedes_monte_carlo`` (called only for supported mechanisms)."""

  def _size_refusal(self, mechanism: MatrixMechanism, options: dict) -> str | None:
    """See ``size_refusal`` (called only for supported mechanisms); default None: a closed
    form or a curve whose cost does not grow as σ shrinks or grows."""
    del mechanism, options
    return None

  # -- helpers
  def _resolve(self, options: Mapping[str, Any]) -> dict:
    """Checked options with defaults filled; TypeError for an option this accountant lacks."""
    specs = {'adjacency': ADJACENCY, **self.options}
    unknown = [name for name in options if name not in specs]
    if unknown:
      raise InputTypeError(f'accountant {self.name!r} got an unexpected option '
                      f'{", ".join(map(repr, unknown))}; it takes: {", ".join(specs)}')
    return {name: spec.check(options[name]) if name in options else spec.default
            for name, spec in specs.items()}

  def _require(self, mechanism: MatrixMechanism, resolved: dict, given: Mapping) -> None:
    reason = self._refusal(mechanism, resolved)
    if reason is not None:
      others = alternatives(mechanism, given)
      raise UnsupportedMechanismError(
          f'does not support this mechanism: {reason}' + ('' if set(others) - {'monte_carlo'}
          else f'; no registered deterministic accountant ({", ".join(available())}) does'),
          argument='accountant', value=self.name, alternatives=others)

  def _calibration_inputs(self, scheme, matrix, epsilon, delta, tolerance, options):
    epsilon, delta = check_epsilon(epsilon), check_delta(delta)
    tolerance = check_tolerance(tolerance)
    resolved = self._resolve(options)
    probe = MatrixMechanism(scheme, matrix, 1.0)  # checks the scheme/strategy pairing
    self._require(probe, resolved, options)
    return probe, resolved, epsilon, delta, tolerance


# ---------------------------------------------------------------- registry
class AccountantRegistry:
  """Deterministic accountants by name, in ``tie_order``."""

  def __init__(self):
    self._accountants: dict[str, DeterministicAccountant] = {}

  def register(self, accountant):
    """Registers an accountant instance, or a class (as a decorator: registers ``cls()``).

    Raises:
      TypeError: not a ``DeterministicAccountant``.
      ValueError: a reserved or invalid name, a name already registered, a missing
        ``tie_order`` or one another accountant has.
    """
    instance = accountant() if isinstance(accountant, type) else accountant
    if not isinstance(instance, DeterministicAccountant):
      raise InputTypeError(f'register expects a DeterministicAccountant (class or instance), got '
                      f'{accountant!r}')
    name = instance.name
    if not (isinstance(name, str) and name.isidentifier()) or name in RESERVED_NAMES:
      raise InputError(f'an accountant name must be an identifier other than '
                       f'{", ".join(RESERVED_NAMES)}, got {name!r}')
    if name in self._accountants:
      raise InputError(f'a deterministic accountant named {name!r} is already registered '
                       f'({self._accountants[name]!r})')
    order = getattr(instance, 'tie_order', None)
    if not isinstance(order, int) or isinstance(order, bool):
      raise InputTypeError(f'accountant {name!r} needs an int class attribute tie_order (its '
                           f'place in the registry), got {order!r}')
    taken = [other.name for other in self._accountants.values() if other.tie_order == order]
    if taken:
      raise InputError(f'accountant {name!r} has tie_order {order}, as {taken[0]!r} does: '
                       'give it another')
    self._accountants = dict(sorted({**self._accountants, name: instance}.items(),
                                    key=lambda item: item[1].tie_order))
    return accountant

  def get(self, name: str) -> DeterministicAccountant:
    """The accountant registered as ``name``; ValueError listing the registered names if none."""
    if not isinstance(name, str):
      raise InputTypeError(f'accountant must be a name (str), got {name!r}')
    try:
      return self._accountants[name]
    except KeyError:
      raise InputError(f'unknown deterministic accountant {name!r}; registered: '
                       f'{", ".join(self._accountants) or "none"}') from None

  def available(self) -> tuple[str, ...]:
    """The registered names, in ``tie_order``."""
    return tuple(self._accountants)

  def accountants(self) -> tuple[DeterministicAccountant, ...]:
    """The registered accountants, in ``tie_order``."""
    return tuple(self._accountants.values())

  def supporting(self, mechanism: MatrixMechanism, **options) -> tuple[str, ...]:
    """Names of the accountants that support ``mechanism`` under ``options``.

    Each accountant is asked with the options it takes; an option it does not take is not
    held against it (``accountant="auto"`` would not pass it).
    """
    mechanism = check_mechanism(mechanism)
    return tuple(a.name for a in self.accountants()
                 if a.supports(mechanism, **taken_options(a, options)) is None)

  def superseding_monte_carlo(self, mechanism: MatrixMechanism) -> str | None:
    """The first accountant that ``supersedes_monte_carlo(mechanism)``, or None."""
    for accountant in self.accountants():
      if accountant.supersedes_monte_carlo(mechanism):
        return accountant.name
    return None


def taken_options(accountant: DeterministicAccountant, options: Mapping) -> dict:
  """The subset of ``options`` that ``accountant`` takes (what ``"auto"`` passes it)."""
  names = accountant.option_names()
  return {k: v for k, v in options.items() if k in names}


_REGISTRY = AccountantRegistry()


def register(accountant):
  """Registers a deterministic accountant (class decorator or instance); see ``AccountantRegistry``."""
  return _REGISTRY.register(accountant)


def get(name: str) -> DeterministicAccountant:
  """The registered accountant ``name`` (ValueError listing the registered names otherwise)."""
  return _REGISTRY.get(name)


def available() -> tuple[str, ...]:
  """Names of the registered deterministic accountants, in ``tie_order``."""
  return _REGISTRY.available()


def accountants() -> tuple[DeterministicAccountant, ...]:
  """The registered accountants, in ``tie_order``."""
  return _REGISTRY.accountants()


def supporting(mechanism: MatrixMechanism, **options) -> tuple[str, ...]:
  """Names of the registered accountants that support ``mechanism`` under ``options``."""
  return _REGISTRY.supporting(mechanism, **options)


def superseding_monte_carlo(mechanism: MatrixMechanism) -> str | None:
  """The registered accountant of record for ``mechanism`` (see ``supersedes_monte_carlo``)."""
  return _REGISTRY.superseding_monte_carlo(mechanism)


def alternatives(mechanism: MatrixMechanism, options: Mapping) -> dict[str, str | None]:
  """What a refusal of an accountant for ``mechanism`` offers instead (an ``InputError``'s
  ``alternatives``): the registered accountants that support it under ``options``, then the
  Monte Carlo accountant (zero-out adjacency, the only one it accounts)."""
  try:
    names = supporting(mechanism, **options)
  except (TypeError, ValueError):  # an option value another accountant rejects
    names = ()
  adjacency = options.get('adjacency', Adjacency.ZERO_OUT.value)
  return {**dict.fromkeys(names),
          **(MONTE_CARLO_ALTERNATIVE if adjacency == Adjacency.ZERO_OUT.value else {})}
