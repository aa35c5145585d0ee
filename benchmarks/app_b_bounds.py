"""How loose are the App. B bounds (Dong & Ganesh (2026)) for dense C? Gap between the two
bounds on the same y.

For BISR (4 inverse bands) and BandInvMF (4 bands, optimised for r = 8) at
n = 200, r = 8, σ = 1.5, expected batch 100 of 4000 (warm start): the
``remove`` upper bound minus the ``add`` lower bound on ln P/Q for y ~ P (the
exact loss lies in between), and δ̂(ε) of both directions with the bounds.
Not a timing benchmark; run: ``python benchmarks/app_b_bounds.py``.
"""

from __future__ import annotations

import os
import sys

sys.path.insert(0, os.path.dirname(os.path.dirname(os.path.abspath(__file__))))

import jax  # noqa: E402
import numpy as np  # noqa: E402

import jaxacct  # noqa: E402
from jaxacct.montecarlo.engine import sampling  # noqa: E402

N, R, SIGMA = 200, 8, 1.5


def main() -> None:
  scheme = jaxacct.BMinSep.from_expected_batch_size(expected_batch_size=100, dataset_size=4000,
                                                    iterations=N, min_sep=R)
  for name, matrix in (('BISR, 4 inverse bands', jaxacct.banded_inverse_square_root(N, 4)),
                       ('BandInvMF, 4 bands (r = 8)',
                        jaxacct.optimize_banded_inverse(N, 4, min_sep=R))):
    mechanism = jaxacct.MatrixMechanism(scheme, matrix, SIGMA)
    with jax.enable_x64(True):
      y, _ = sampling.sample_outputs(jax.random.key(0), mechanism, 20_000, 'remove')
    upper = np.asarray(jaxacct.privacy_loss(mechanism, y, 'remove'))
    lower = -np.asarray(jaxacct.privacy_loss(mechanism, y, 'add'))
    gap = upper - lower
    estimate = jaxacct.estimate_delta(jax.random.key(1), mechanism, [1.0, 2.0], 50_000)
    print(f'{name}: upper − lower bound on ln P/Q, y ~ P: mean {gap.mean():.3f}, median '
          f'{np.median(gap):.3f}, max {gap.max():.3f} nats; δ̂(1), δ̂(2): remove '
          f'{estimate.delta_hat["remove"].round(5).tolist()}, add '
          f'{estimate.delta_hat["add"].round(5).tolist()}')


if __name__ == '__main__':
  main()
