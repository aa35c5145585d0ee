"""The strategy-matrix interface: what every C gives the accountants and the training loop.

A strategy matrix C (n×n, lower-triangular, entrywise non-negative) enters jaxacct in three
places, and each goes through one method of ``Strategy``:

- **Monte Carlo kernels** ask for a *view* of C for a scheme (``kernel_view``): a pytree of
  device arrays (traced, so new values of the same shape do not recompile) with the products
  the loss recursions need — d = Cᵀy (``transpose_products``), the mean C·x of separated
  participations (``separated_mean``), the per-round charge s_i subtracted in
  ℓ_i = (2d_i − s_i)/(2σ²) for each direction (``charge``), the balls-in-bins mode vectors
  (``phase_modes``) — whether the resulting loss is exact (``exact``) or a bound
  conservative in the direction asked for (Dong & Ganesh (2026) App. B), and the float32
  rounding of those products (``rounding_shape``, the 32-bit program's margin).
- **Deterministic bounds** ask for column norms, the worst-case sensitivity of
  separated participations (``separated_sensitivity_squared``), the band of a banded
  Toeplitz C (``banded_coefficients``, None otherwise) and the fixed-bin phase sums
  (``phase_sums``).
- **Training** asks for the bands of the streamed noise C⁻¹Z (``noise_bands``).

A strategy also says which schemes it can be accounted with (``check_scheme``, called by
``MatrixMechanism`` before any compute) and has a cached, hashable ``fingerprint`` (ledgers,
checkpoints, estimator states).

Implementations live in ``jaxacct/strategies/``: ``jaxacct.BandedToeplitz``
(``banded_toeplitz.py``: exact losses) and ``jaxacct.LowerTriangular`` (``lower_triangular.py``:
App. B bounds). A new strategy is one module there: it subclasses ``Strategy``, with a view
class next to it, registers its config keys (``config_key``) and lists its public names in
``EXPORTED``; the package finds it, and no other module branches on the strategy's type.

References:
  Andy Dong and Arun Ganesh, "Privacy Amplification for BandMF via b-Min-Sep Subsampling",
  arXiv:2602.09338 (v2): §7.1 (prefix-sum MSE), App. B (r-min-sep bounds) (docs/references.md).
  Jan Schuchardt and Nikita Kalinin, arXiv:2601.21636: the fixed-bin slot means
  (``phase_sums``) of balls-in-bins (docs/references.md).
"""

from __future__ import annotations

import abc
import dataclasses
from typing import Any, Callable, NamedTuple, Protocol

import jax
import numpy as np
from jaxacct.errors import InputError, InputTypeError


class RoundingShape(NamedTuple):
  """Host numbers of a view that bound its float32 products (the 32-bit program's margin,
  ``montecarlo/engine/margin.py`` steps 2–5), all float64 upper bounds.

  Attributes:
    mean_max: ≥ max |entry of C·x| over participation patterns x ∈ {0, 1}ⁿ of the scheme.
    mean_roundings: float32 roundings per entry of ``separated_mean`` (γ of it, plus u for
      the entries of C rounded to float32).
    column_abs_sum: ≥ max_i Σ_k |C_ki|, the weight of y in one d_i = (Cᵀy)_i.
    product_roundings: float32 roundings per term of ``transpose_products`` (any order).
    charge_max: ≥ max_i s_i over both directions.
    charge_roundings: relative float32 error of ``charge`` in units of u, on ``charge_max``.
  """

  mean_max: float
  mean_roundings: int
  column_abs_sum: float
  product_roundings: int
  charge_max: float
  charge_roundings: float


class StrategyView(Protocol):
  """Device-side view of C for one scheme: a pytree whose leaves are traced arrays.

  Its Python type is part of the pytree structure, so ``jit`` compiles one program per view
  type and shape and the kernels call its methods without branching on the strategy.
  """

  exact: bool
  """True when the losses computed with this view are exact; False for bounds (App. B)."""

  def transpose_products(self, y: jax.Array) -> jax.Array:
    """d = Cᵀy row-wise for batch-major y (N, n), in y's dtype."""

  def separated_mean(self, x: jax.Array, dtype) -> jax.Array:
    """C·x row-wise for batch-major participation weights x (N, n) whose non-zero entries
    are at least the scheme's separation apart."""

  def charge(self, direction: str, iterations: int) -> jax.Array:
    """(n,) per-round squared norm s_i charged by the recursion's ℓ_i for ``direction``."""

  def rounding_shape(self, iterations: int) -> RoundingShape:
    """Host: the float32 rounding bounds of this view's products (the 32-bit program)."""

  @property
  def one_output_per_product(self) -> bool:
    """True when each d_i involves one y_j (a one-coefficient band): the 32-bit margin is
    then taken per round rather than per sample (static: from shapes)."""


class Strategy(abc.ABC):
  """Interface of a strategy matrix C (abstract; concrete strategies are final)."""

  exact: bool
  """Monte Carlo losses with this strategy are exact (True) or App. B bounds (False)."""

  def exact_for(self, scheme) -> bool:
    """Whether Monte Carlo losses of ``scheme`` with this C are exact (default ``exact``)."""
    del scheme
    return self.exact

  @property
  @abc.abstractmethod
  def num_bands(self) -> int:
    """Length of the non-zero part of a column (n for a dense C)."""

  @property
  @abc.abstractmethod
  def summary(self) -> str:
    """A few words naming C for reports and plot titles (e.g. ``"4 bands"``, ``"C = I"``)."""

  @abc.abstractmethod
  def column_squared_norms(self, iterations: int) -> jax.Array:
    """s_i = ‖C e_i‖² for the n×n matrix, (n,)."""

  @abc.abstractmethod
  def max_column_norm(self, iterations: int | None = None) -> jax.Array:
    """max_i ‖C e_i‖₂, the single-participation L2 sensitivity."""

  @abc.abstractmethod
  def materialize(self, iterations: int) -> jax.Array:
    """C as a dense (n, n) array (tests, small n)."""

  @abc.abstractmethod
  def prefix_error(self, iterations: int) -> float:
    """(1/n)‖A C⁻¹‖_F² (times σ²: the prefix-sum MSE, Dong & Ganesh (2026) §7.1)."""

  @property
  @abc.abstractmethod
  def fingerprint(self) -> tuple:
    """Hashable public identity (cached: computing it may hash n² values)."""

  def scale_free_sketch(self) -> tuple[str, tuple[float, ...]]:
    """(kind, numbers): the strategy up to scale, for the attempt ledger (``ledger.py``).

    C and σ rescaled together are one mechanism, so two strategies that differ by a positive
    factor must give the same kind and the same numbers up to rounding (the ledger compares
    them within a relative 10⁻⁶); different strategies may collide (more attempts are then
    counted, which is conservative). Default: the exact ``fingerprint`` and no numbers — a
    strategy that keeps it lets a rescaled copy count as another mechanism, so every shipped
    strategy overrides it.
    """
    return f'fingerprint {self.fingerprint!r}', ()

  @abc.abstractmethod
  def check_scheme(self, scheme) -> None:
    """Raises ValueError if mechanisms of ``scheme`` with this C cannot be accounted."""

  @abc.abstractmethod
  def kernel_view(self, scheme) -> StrategyView:
    """The host arrays of this C the Monte Carlo kernels of ``scheme`` need (a pytree)."""

  @abc.abstractmethod
  def separated_sensitivity_squared(self, min_sep: int, iterations: int) -> float:
    """max (or an upper bound) of ‖C·x‖² over 0/1 patterns x with participations ≥ min_sep
    rounds apart."""

  def banded_coefficients(self) -> np.ndarray | None:
    """The band c (float64, host) when C is banded Toeplitz (C[i + k, i] = c_k), else None.

    Accountants whose reductions need banded columns (cyclic Poisson's PLD, the tuple chain,
    MMCC's cheap rows) ask this instead of the strategy's type. Default: None.
    """
    return None

  @abc.abstractmethod
  def phase_sums(self, cycle_length: int, iterations: int) -> np.ndarray:
    """m_j = Σ_{r ≡ j (mod T)} C[:, r] for j < T = ``cycle_length``: float64 (T, n) (host).

    The slot means of fixed-bin balls-in-bins (Schuchardt & Kalinin (2026) Lemma 2.8), the
    same modes the Monte Carlo kernel uses.
    """

  @abc.abstractmethod
  def noise_bands(self) -> tuple[np.ndarray, np.ndarray]:
    """(c, h) of the streamed training noise W with Σ c_k W_{t−k} = Σ h_k Z_{t−k}.

    Raises TypeError when C⁻¹Z cannot be streamed with bounded memory.
    """


def check_strategy(matrix: Any) -> Strategy:
  """Raises TypeError unless ``matrix`` is a jaxacct strategy matrix."""
  if not isinstance(matrix, Strategy):
    raise InputTypeError(f'matrix must be a jaxacct.BandedToeplitz or jaxacct.LowerTriangular, got '
                    f'{matrix!r}')
  return matrix


# ------------------------------------------------------------ strategies as config keys
@dataclasses.dataclass(frozen=True)
class ConfigKey:
  """A key of a config's ``strategy:`` section that builds a strategy (``config_key``).

  Attributes:
    name: the key (e.g. ``square_root_bands``); a config gives exactly one such key.
    kind: its value's type: ``"count"`` (an integer ≥ 1) or ``"reals"`` (a list of numbers).
    build: ``build(value, *, iterations, min_sep, **options)`` → the ``Strategy``
      (``min_sep``: the config scheme's, or None).
    options: further keys of the section it reads, with their kinds (e.g. ``normalize``:
      ``"boolean"``); another key's options are refused with it.
    timing_stand_in: for a strategy that is costly to build (an optimisation), ``stand_in(value,
      *, iterations)`` → (a strategy of the same shape, a note): the capacity plan times that.
  """

  name: str
  kind: str
  build: Callable[..., Strategy]
  options: tuple[tuple[str, str], ...] = ()
  timing_stand_in: Callable[..., tuple[Strategy, str]] | None = None


_CONFIG_KEYS: dict[str, ConfigKey] = {}
CONFIG_KINDS = ('count', 'reals', 'boolean')


def config_key(name: str, kind: str, *, options: dict[str, str] | None = None,
               timing_stand_in: Callable[..., tuple[Strategy, str]] | None = None):
  """Decorator: registers ``build`` as the config key ``strategy.<name>`` (``ConfigKey``).

  A strategy module registers its keys where it defines the class, so a new strategy is its
  module (and the import that exports it).
  """
  options = dict(options or {})
  if kind not in CONFIG_KINDS[:2] or any(k not in CONFIG_KINDS for k in options.values()):
    raise InputError(f'a strategy config key is a count or reals, its options one of '
                     f'{", ".join(CONFIG_KINDS)}; got {kind!r} and {options!r}')

  def register(build: Callable[..., Strategy]) -> Callable[..., Strategy]:
    if name in _CONFIG_KEYS:
      raise InputError(f'strategy config key {name!r} is already registered')
    _CONFIG_KEYS[name] = ConfigKey(name, kind, build, tuple(options.items()), timing_stand_in)
    return build
  return register


def config_keys() -> dict[str, ConfigKey]:
  """Every registered strategy config key, in registration order."""
  return dict(_CONFIG_KEYS)
