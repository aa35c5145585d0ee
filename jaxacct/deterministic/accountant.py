"""Deterministic (PLD) accounting of a whole mechanism, and σ calibration on it (host code).

For the schemes whose dominating pair composes into 1-D pairs, a PLD is exact
up to pessimistic discretisation and needs no Monte Carlo:

- ``Poisson`` (DP-SGD; one band): untruncated, the Poisson-subsampled Gaussian
  (dp_accounting); truncated, the seed-001 pairs (``truncated_poisson``);
- ``CyclicPoisson``: the reduction to ⌈n/T⌉ Poisson rounds (``pld``), with
  truncation the seed-001 reduction over the group sizes.

``noise_multiplier`` is not normalised by ‖c_col‖, so every round is charged the
maximum column norm of C (σ_eff = σ/‖c‖_max, conservative for the truncated
last columns).
"""

from __future__ import annotations

import dataclasses

from jaxacct import _validate, schemes
from jaxacct.deterministic import pld, truncated_poisson
from jaxacct.deterministic._search import smallest_passing_sigma
from jaxacct.guarantee import Guarantee
from jaxacct.mechanism import MatrixMechanism

ADJACENCIES = truncated_poisson.ADJACENCIES


def mechanism_pld(mechanism: MatrixMechanism, *, adjacency: str = 'zero_out',
                  value_discretization_interval: float = 1e-4):
  """The PLD (both directions, pessimistic) of a Poisson or cyclic-Poisson mechanism.

  Args:
    mechanism: scheme ``Poisson`` or ``CyclicPoisson`` (truncated or not).
    adjacency: ``"zero_out"`` (default; equals ``"add_remove"`` without
      truncation), ``"add_remove"`` (truncated Poisson: for the fixed public
      dataset size) or ``"replace_one"``.
    value_discretization_interval: PLD grid step.

  Returns:
    An object with ``get_epsilon_for_delta`` / ``get_delta_for_epsilon`` (max
    over directions): a dp_accounting ``PrivacyLossDistribution`` or a
    ``truncated_poisson.WorstCasePLD``.

  Raises:
    TypeError: for other schemes (they need Monte Carlo accounting).
    ValueError: an adjacency the scheme's accountant does not cover.

  References:
    Ganesh, arXiv 2508.15089, Thms 3.1, 3.3, 3.4 (truncation); Choquette-Choo
    et al., NeurIPS 2023 (cyclic Poisson); Dong & Ganesh, arXiv 2602.09338v2, §3.
  """
  if not isinstance(mechanism, MatrixMechanism):
    raise TypeError(f'mechanism must be a jaxacct.MatrixMechanism, got {mechanism!r}')
  adjacency = _validate.one_of('adjacency', adjacency, ADJACENCIES)
  d = _validate.positive_finite('value_discretization_interval', value_discretization_interval)
  scheme, matrix, sigma = mechanism.scheme, mechanism.matrix, mechanism.noise_multiplier
  if mechanism.bounded:
    raise TypeError('a dense LowerTriangular strategy has no deterministic accountant here (its '
                    'columns overlap across rounds); use the Monte Carlo accountant, which '
                    'applies the r-min-sep bounds of seed 000 App. B')
  if isinstance(scheme, schemes.Poisson):
    sigma_eff = sigma / float(matrix.max_column_norm(scheme.iterations))
    if scheme.truncates:
      return truncated_poisson.truncated_poisson_pld(
          scheme.dataset_size, float(scheme.sampling_prob), scheme.truncated_batch_size,
          sigma_eff, scheme.iterations, adjacency, value_discretization_interval=d)
    from dp_accounting import privacy_accountant
    from dp_accounting.pld import privacy_loss_distribution as pld_lib
    relation = (privacy_accountant.NeighboringRelation.REPLACE_ONE if adjacency == 'replace_one'
                else privacy_accountant.NeighboringRelation.ADD_OR_REMOVE_ONE)
    single = pld_lib.from_gaussian_mechanism(sigma_eff, sampling_prob=float(scheme.sampling_prob),
                                             value_discretization_interval=d,
                                             neighboring_relation=relation)
    return single if scheme.iterations == 1 else single.self_compose(scheme.iterations)
  if isinstance(scheme, schemes.CyclicPoisson):
    if scheme.truncates:
      return truncated_poisson.truncated_cyclic_poisson_pld(
          scheme, matrix, sigma, adjacency=adjacency, value_discretization_interval=d)
    if adjacency == 'replace_one':
      raise ValueError("adjacency='replace_one' is not implemented for untruncated cyclic Poisson; "
                       "use 'zero_out' (equal to add/remove there)")
    return pld.cyclic_poisson_pld(scheme, matrix, sigma, value_discretization_interval=d)
  raise TypeError(f'no deterministic accountant for {type(scheme).__name__}; use the Monte Carlo '
                  'accountant (estimate_delta / calibrate_noise_multiplier)')


def calibrate_deterministic(scheme, matrix, *, epsilon: float, delta: float,
                            adjacency: str = 'zero_out', value_discretization_interval: float = 1e-4,
                            tolerance: float = 1e-4) -> tuple[MatrixMechanism, Guarantee]:
  """Smallest σ (to ``tolerance`` relative, rounded up) with ε(δ) ≤ ``epsilon`` by ``mechanism_pld``.

  Returns:
    (mechanism at that σ, its ``Guarantee`` with method ``"deterministic"``).

  References:
    as ``mechanism_pld``.
  """
  epsilon = _validate.finite_real('epsilon', epsilon)
  delta = _validate.probability('delta', delta)
  tolerance = _validate.positive_finite('tolerance', tolerance)
  probe = MatrixMechanism(scheme, matrix, 1.0)
  mechanism_pld(probe, adjacency=adjacency)  # fails fast on an unsupported scheme / adjacency

  def meets(sigma: float) -> bool:
    pld_ = mechanism_pld(dataclasses.replace(probe, noise_multiplier=sigma), adjacency=adjacency,
                         value_discretization_interval=value_discretization_interval)
    return float(pld_.get_delta_for_epsilon(epsilon)) <= delta

  sigma = smallest_passing_sigma(meets, tolerance=tolerance, floor=truncated_poisson.SIGMA_FLOOR)
  mechanism = dataclasses.replace(probe, noise_multiplier=sigma)
  return mechanism, Guarantee(epsilon=epsilon, delta=delta, method='deterministic',
                              noise_multiplier=sigma, adjacency=adjacency)
