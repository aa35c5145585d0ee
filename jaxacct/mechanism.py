"""The matrix mechanism being accounted: sampling scheme + strategy matrix + noise.

Conventions (shared with jax_privacy and dp_accounting so users can switch):

- ``noise_multiplier`` σ is the noise standard deviation divided by the clip
  norm. It is **not** normalised by the column norm of C: the sensitive
  example's contribution to the output y = C·x + σ·z is C·x with the given
  ``c_col``, so rescaling ``c_col`` changes the guarantee.
- Adjacency is zero-out (Dong & Ganesh (2026) Def. 2.1): the neighbouring dataset replaces
  one example by one whose gradient is zero. Without truncation it equals
  add/remove.
- Directions of the hockey-stick divergence: ``"remove"`` is H(P‖Q) with
  y ~ P (example present) and privacy loss ln P(y)/Q(y); ``"add"`` is H(Q‖P)
  with y ~ Q = N(0, σ²I) and loss ln Q(y)/P(y). A guarantee is the max over both.

References:
  Andy Dong and Arun Ganesh, "Privacy Amplification for BandMF via b-Min-Sep Subsampling",
  arXiv:2602.09338 (v2): Def. 2.1, §2.3–2.4 (DP-MF and its worst case), §5 (Theorem 5.1), App. B
  (docs/references.md).
  Christopher A. Choquette-Choo, Arun Ganesh, Thomas Steinke and Abhradeep Thakurta, "Privacy
  Amplification for Matrix Mechanisms", arXiv:2310.15526 (v2; ICLR 2024): Lemma 4.5
  (docs/references.md).
"""

from __future__ import annotations

import dataclasses

from jaxacct import _validate
from jaxacct.conventions import DIRECTIONS as DIRECTIONS
from jaxacct.conventions import Direction as Direction
from jaxacct.schemes import SamplingScheme
from jaxacct.strategy import Strategy, check_strategy
from jaxacct.errors import InputError, InputTypeError


@dataclasses.dataclass(frozen=True)
class MatrixMechanism:
  """DP-MF with correlated noise, reduced to its dominating pair (Dong & Ganesh (2026) §2.4).

  The release G + C⁻¹Z is post-processing-equivalent to y = C·x + σ·z, where x
  is the sensitive example's participation vector drawn by ``scheme`` (Lemma 4.5
  of Choquette-Choo et al. (2023), as used in Dong & Ganesh (2026) §2.4). Hence
  P = Σ_x p_x N(Cx, σ²I) and Q = N(0, σ²I).

  Attributes:
    scheme: the batch sampling scheme.
    matrix: the strategy matrix C (lower-triangular, non-negative): banded
      Toeplitz (exact accounting) or dense ``LowerTriangular`` (App. B bounds for
      Poisson or BMinSep(min_sep=r) without truncation; exact for BallsInBins;
      iterations = n of C).
    noise_multiplier: σ > 0, finite.

  Raises:
    ValueError: if ``len(c_col)`` exceeds what the scheme's exact accountant
      supports (``min_sep`` for b-min-sep, 1 for Poisson, ``cycle_length`` for
      cyclic Poisson; Theorem 5.1 of Dong & Ganesh (2026) needs a b-banded C), a dense C
      is paired with a scheme App. B does not cover, or σ is not positive.
  """

  scheme: SamplingScheme
  matrix: Strategy
  noise_multiplier: float

  def __post_init__(self):
    if not isinstance(self.scheme, SamplingScheme):
      raise InputTypeError(f'scheme must be a jaxacct sampling scheme, got {self.scheme!r}')
    check_strategy(self.matrix)
    if _validate.real_number('noise_multiplier', self.noise_multiplier) == 0.0:
      raise InputError('noise_multiplier σ = 0 is not differentially private (no noise); '
                       'pass σ > 0')
    _validate.positive_finite('noise_multiplier', self.noise_multiplier)
    self.matrix.check_scheme(self.scheme)

  @property
  def bounded(self) -> bool:
    """True when the accountant reports bounds (Dong & Ganesh (2026) App. B), not the exact loss."""
    return not self.matrix.exact_for(self.scheme)

  @property
  def iterations(self) -> int:
    return self.scheme.iterations


def check_mechanism(value, argument: str = 'mechanism') -> MatrixMechanism:
  """``value`` if it is a ``MatrixMechanism``; a TypeError naming ``argument`` otherwise."""
  if not isinstance(value, MatrixMechanism):
    raise InputTypeError(f'{argument} must be a jaxacct.MatrixMechanism, got {value!r}')
  return value
