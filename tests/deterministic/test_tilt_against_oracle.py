"""The library's exact ln Z_α (deterministic/tilt_bound.py, minsep_chain.py) against the
independent brute-force oracle of tests/oracles/tilting.py (written from the derivation in
docs/proofs/tilting.md without reading the library): every α-tuple of patterns enumerated."""

import numpy as np
import pytest

import jaxacct
from jaxacct.deterministic import tilt_bound
from oracles import tilting as oracle

CASES = [
    ('bminsep', dict(sampling_prob=0.35, min_sep=3, warm_start=False), [1.0, 0.6, 0.3], 7, 0.9),
    ('bminsep', dict(sampling_prob=0.35, min_sep=3, warm_start=True), [1.0, 0.6, 0.3], 7, 0.9),
    ('bminsep', dict(sampling_prob=0.5, min_sep=2, warm_start=True), [1.0, 0.8], 8, 1.3),
    ('poisson', dict(sampling_prob=0.2), [1.0], 6, 0.7),
    ('cyclic_poisson', dict(sampling_prob=0.6, cycle_length=3, partition='independent'),
     [1.0, 0.5], 7, 1.0),
    ('cyclic_poisson', dict(sampling_prob=0.6, cycle_length=3, partition='equal_split'),
     [1.0, 0.5], 7, 1.0),
    ('balls_in_bins', dict(cycle_length=3), [1.0, 0.7, 0.2], 7, 1.1),
]
SCHEMES = {'bminsep': jaxacct.BMinSep, 'poisson': jaxacct.Poisson,
           'cyclic_poisson': jaxacct.CyclicPoisson, 'balls_in_bins': jaxacct.BallsInBins}


@pytest.mark.parametrize('alpha', [2, 3])
@pytest.mark.parametrize('kind, fields, band, n, sigma', CASES,
                         ids=[f'{c[0]}-{i}' for i, c in enumerate(CASES)])
def test_log_partition_equals_the_independent_enumeration(kind, fields, band, n, sigma, alpha):
  scheme = SCHEMES[kind](iterations=n, **fields)
  mechanism = jaxacct.MatrixMechanism(scheme, jaxacct.BandedToeplitz(band), sigma)
  computed = tilt_bound.partition(mechanism, alpha)
  law = oracle.tilted_law_for(kind, band, n, sigma, alpha, **fields)
  np.testing.assert_allclose(computed.computed, law.log_z, rtol=1e-12, atol=1e-13)
  assert computed.log_z >= law.log_z  # rounded up, never below the exact value
  # M(α, ε), the Canonne–Kamath–Steinke bound, is the oracle's at the same ln Z.
  for epsilon in (0.3, 1.0, 2.5):
    np.testing.assert_allclose(tilt_bound.log_support_bound(law.log_z, alpha, epsilon),
                               oracle.log_support_bound(law.log_z, alpha, epsilon), rtol=1e-13)


PRODUCT_CASES = [case for case in CASES if case[0] == 'poisson'
                 or case[1].get('partition') == 'equal_split']


@pytest.mark.parametrize('alpha', [2, 3])
@pytest.mark.parametrize('kind, fields, band, n, sigma', PRODUCT_CASES,
                         ids=[f'{c[0]}-{i}' for i, c in enumerate(PRODUCT_CASES)])
def test_add_log_partition_is_the_oracles_product_of_rounds(kind, fields, band, n, sigma, alpha):
  # The oracle's one-round add tilt (SciPy quadrature of ∫Q^αP^{1−α}, tilting.md (e)), summed
  # over the rounds of phase 0 with their column norms cut at row n.
  scheme = SCHEMES[kind](iterations=n, **fields)
  mechanism = jaxacct.MatrixMechanism(scheme, jaxacct.BandedToeplitz(band), sigma)
  computed = tilt_bound.partition(mechanism, alpha, direction='add')
  cycle = fields.get('cycle_length', 1)
  norms = [float(np.sum(np.square(band[:min(len(band), n - t)]))) for t in range(0, n, cycle)]
  expected = sum(oracle.one_round_add_tilt(fields['sampling_prob'], np.sqrt(s), sigma, alpha,
                                           1.0)['log_z'] for s in norms)
  np.testing.assert_allclose(computed.computed, expected, rtol=1e-10, atol=1e-12)
  assert computed.log_z >= expected - 1e-12  # the certified upper end
