"""jaxacct: JAX-native privacy accounting for DP-SGD and DP-BandMF.

Public API (re-exported; nothing is computed at import).
"""

from jaxacct.matrices import BandedToeplitz as BandedToeplitz
from jaxacct.mechanism import MatrixMechanism as MatrixMechanism
from jaxacct.montecarlo.sampling import privacy_loss as privacy_loss
from jaxacct.montecarlo.sampling import sample_privacy_losses as sample_privacy_losses
from jaxacct.schemes import BallsInBins as BallsInBins
from jaxacct.schemes import BMinSep as BMinSep
from jaxacct.schemes import CyclicPoisson as CyclicPoisson
from jaxacct.schemes import Poisson as Poisson

__all__ = [
    'BallsInBins',
    'BandedToeplitz',
    'BMinSep',
    'CyclicPoisson',
    'MatrixMechanism',
    'Poisson',
    'privacy_loss',
    'sample_privacy_losses',
]

__version__ = '0.1.0.dev0'
