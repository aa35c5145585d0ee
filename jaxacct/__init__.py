"""jaxacct: JAX-native privacy accounting for DP-SGD and DP-BandMF.

Public API (re-exported; nothing is computed at import). ``jaxacct.training`` and
``jaxacct.interop`` are imported on first access (``import jaxacct; jaxacct.training``), so
``import jaxacct`` stays light and needs no optional extra.
"""

import importlib as _importlib
from typing import TYPE_CHECKING as _TYPE_CHECKING

from jaxacct._version import __version__ as __version__
from jaxacct.accounting import calibrate as calibrate
from jaxacct.accounting import NotVerifiedError as NotVerifiedError
from jaxacct.accounting import account as account
from jaxacct.batching.attribution import AttributionGraph as AttributionGraph
from jaxacct.batching.attribution import bound_contributions as bound_contributions
from jaxacct import individual as individual
from jaxacct.deterministic.accountant import calibrate_deterministic as calibrate_deterministic
from jaxacct.deterministic.accountant import delta_for_epsilon as delta_for_epsilon
from jaxacct.deterministic.accountant import epsilon_for_delta as epsilon_for_delta
from jaxacct.deterministic.accountant import mechanism_pld as mechanism_pld
from jaxacct.deterministic.pld import cyclic_poisson_pld as cyclic_poisson_pld
from jaxacct.deterministic.truncated_poisson import truncated_poisson_pld as truncated_poisson_pld
from jaxacct.deterministic.truncated_poisson import truncation_regimes as truncation_regimes
from jaxacct.errors import InputError as InputError
from jaxacct.errors import InputTypeError as InputTypeError
from jaxacct.errors import MissingExtraError as MissingExtraError
from jaxacct.guarantee import Guarantee as Guarantee
from jaxacct.mechanism import MatrixMechanism as MatrixMechanism
from jaxacct.montecarlo.evr.calibration import Calibration as Calibration
from jaxacct.montecarlo.evr.calibration import calibrate_noise_multiplier as calibrate_noise_multiplier
from jaxacct.montecarlo.evr.estimator import DeltaEstimate as DeltaEstimate
from jaxacct.montecarlo.evr.estimator import estimate_delta as estimate_delta
from jaxacct.montecarlo.evr.bounds import base_delta as base_delta
from jaxacct.montecarlo.evr.bounds import minimum_samples as minimum_samples
from jaxacct.montecarlo.evr.bounds import overall_delta as overall_delta
from jaxacct.montecarlo.evr.verification import verify as verify
from jaxacct.options import MonteCarloOptions as MonteCarloOptions
from jaxacct.options import RunOptions as RunOptions
from jaxacct.montecarlo.evr.ledger import FileLedger as FileLedger
from jaxacct.montecarlo.evr.ledger import VerificationLedger as VerificationLedger
from jaxacct.montecarlo.engine.sampling import privacy_loss as privacy_loss
from jaxacct.montecarlo.engine.sampling import sample_privacy_losses as sample_privacy_losses
from jaxacct.montecarlo.engine.sampling import sample_truncated_privacy_losses as sample_truncated_privacy_losses
from jaxacct import schemes as schemes
from jaxacct.schemes import *  # every registered scheme family (Poisson, BMinSep, …)  # noqa: F401,F403
from jaxacct import strategies as strategies
from jaxacct.strategies import *  # every strategy module's EXPORTED names  # noqa: F401,F403

__all__ = [
    'account',
    'calibrate',
    'NotVerifiedError',
    'AttributionGraph',
    'base_delta',
    'bound_contributions',
    'calibrate_deterministic',
    'calibrate_noise_multiplier',
    'Calibration',
    'cyclic_poisson_pld',
    'DeltaEstimate',
    'delta_for_epsilon',
    'epsilon_for_delta',
    'estimate_delta',
    'Guarantee',
    'InputError',
    'InputTypeError',
    'MatrixMechanism',
    'MissingExtraError',
    'mechanism_pld',
    'minimum_samples',
    'overall_delta',
    'privacy_loss',
    'RunOptions',
    'MonteCarloOptions',
    'FileLedger',
    'VerificationLedger',
    'sample_privacy_losses',
    'sample_truncated_privacy_losses',
    'truncated_poisson_pld',
    'truncation_regimes',
    'verify',
    *schemes.__all__,  # every registered scheme family
    *strategies.__all__,  # every strategy module's exported names
]


# Subpackages imported on first attribute access (PEP 562), not by ``import jaxacct``.
_LAZY_SUBPACKAGES = ('interop', 'training')

if _TYPE_CHECKING:  # type checkers and IDEs see them as attributes
  from jaxacct import interop as interop
  from jaxacct import training as training


def __getattr__(name: str):
  if name in _LAZY_SUBPACKAGES:
    return _importlib.import_module(f'{__name__}.{name}')  # also sets it on this module
  if name in strategies.OLD_PATHS:  # deprecated; warns at every read
    return strategies.old_path(name)
  raise AttributeError(f'module {__name__!r} has no attribute {name!r}')


def __dir__() -> list[str]:
  return sorted({*globals(), *_LAZY_SUBPACKAGES})
