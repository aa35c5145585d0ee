"""The scheme-kernel registry, strategy views, the stream accumulator and the ledger (issue 12)."""

import dataclasses

import jax
import numpy as np
import pytest

import jaxacct
from jaxacct.montecarlo.engine import kernels, sampling, stream
from jaxacct.montecarlo.engine.kernels import base
from jaxacct.montecarlo.evr.verification import VerificationLedger

BAND = jaxacct.BandedToeplitz([1.0, 0.5])


@pytest.mark.parametrize('scheme, kernel_type', [
    (jaxacct.Poisson(sampling_prob=0.2, iterations=8), kernels.bminsep.BMinSepKernel),
    (jaxacct.BMinSep(sampling_prob=0.2, iterations=8, min_sep=2), kernels.bminsep.BMinSepKernel),
    (jaxacct.BMinSep(sampling_prob=0.2, iterations=8, min_sep=2, truncated_batch_size=2,
                     dataset_size=6), kernels.truncated.TruncatedBMinSepKernel),
    (jaxacct.CyclicPoisson(sampling_prob=0.2, iterations=8, cycle_length=2),
     kernels.cyclic_poisson.CyclicPoissonKernel),
    (jaxacct.BallsInBins(iterations=8, cycle_length=2), kernels.balls_in_bins.BallsInBinsKernel),
    (jaxacct.MultiAttributionBMinSep(sampling_prob=0.2, iterations=8, min_sep=2,
                                     max_examples_per_user=2),
     kernels.multi_attribution.MultiAttributionKernel),
])
def test_registry_finds_each_family(scheme, kernel_type):
  band = jaxacct.BandedToeplitz([1.0]) if scheme.max_band_length == 1 else BAND
  kernel = kernels.kernel_for(jaxacct.MatrixMechanism(scheme, band, 1.0), np.dtype(np.float64))
  assert type(kernel) is kernel_type
  assert hash(kernel) == hash(dataclasses.replace(kernel))  # static: hashable, by value


def test_refusals_name_the_reason():
  truncated_cyclic = jaxacct.CyclicPoisson(sampling_prob=0.5, iterations=8, cycle_length=2,
                                           partition='equal_split', truncated_batch_size=2,
                                           dataset_size=10)
  with pytest.raises(ValueError, match='deterministically by jaxacct.cyclic_poisson_pld'):
    kernels.kernel_class(truncated_cyclic)
  algorithm_4 = jaxacct.MultiAttributionBMinSep(sampling_prob=0.2, iterations=8, min_sep=2,
                                                max_examples_per_user=2, exclusion='participated')
  with pytest.raises(ValueError, match='Conjecture 6.2'):
    kernels.kernel_class(algorithm_4)
  with pytest.raises(TypeError, match='no Monte Carlo kernel'):
    kernels.kernel_class(object())


def test_registration_errors():
  with pytest.raises(TypeError, match='schemes must list'):
    base.register(type('Empty', (base.SchemeKernel,), {}))
  with pytest.raises(ValueError, match='already registered'):
    base.register(kernels.bminsep.BMinSepKernel)


@pytest.mark.parametrize('warm_start', [True, False])
def test_bminsep_with_min_sep_one_is_poisson_bitwise(warm_start):
  # b = 1: every example is always eligible, so warm and cold start and Poisson coincide.
  poisson = jaxacct.MatrixMechanism(jaxacct.Poisson(sampling_prob=0.3, iterations=12),
                                    jaxacct.BandedToeplitz([1.0]), 0.8)
  bminsep = dataclasses.replace(poisson, scheme=jaxacct.BMinSep(
      sampling_prob=0.3, iterations=12, min_sep=1, warm_start=warm_start))
  f64 = np.dtype(np.float64)
  assert kernels.kernel_for(poisson, f64) == kernels.kernel_for(bminsep, f64)
  for direction in ('remove', 'add'):
    np.testing.assert_array_equal(
        jaxacct.sample_privacy_losses(jax.random.key(1), poisson, 50, direction),
        jaxacct.sample_privacy_losses(jax.random.key(1), bminsep, 50, direction))
  assert (poisson.scheme.max_sensitivity_squared(poisson.matrix)
          == bminsep.scheme.max_sensitivity_squared(bminsep.matrix))


@pytest.mark.parametrize('matrix', [jaxacct.BandedToeplitz([1.0, 0.5, 0.25]),
                                    jaxacct.banded_inverse_square_root(7, 2)])
def test_views_match_the_dense_matrix(matrix):
  # Oracle: C materialised by NumPy; x 3-separated so the banded mean formula applies.
  n = 7
  scheme = jaxacct.BMinSep(sampling_prob=0.5, iterations=n, min_sep=3)
  c = np.asarray(matrix.materialize(n))
  rng = np.random.default_rng(0)
  y = rng.normal(size=(4, n))
  x = np.zeros((4, n), bool)
  x[:, [0, 3, 6]] = True
  x[1, 3] = False
  with jax.enable_x64(True):
    view = jax.tree_util.tree_map(np.asarray, matrix.kernel_view(scheme))
    np.testing.assert_allclose(view.transpose_products(y), y @ c, rtol=1e-13, atol=1e-13)
    np.testing.assert_allclose(view.separated_mean(x, 'float64'), x @ c.T, rtol=1e-13)
    remove, add = (np.asarray(view.charge(d, n)) for d in ('remove', 'add'))
  np.testing.assert_allclose(remove, np.sum(c * c, axis=0), rtol=1e-13)
  assert view.exact == matrix.exact
  assert np.all(add >= remove) and (np.array_equal(add, remove) == matrix.exact)


def test_dense_fingerprint_is_hashed_once():
  matrix = jaxacct.banded_inverse_square_root(16, 3)
  assert matrix.fingerprint is matrix.fingerprint  # cached: not n² values per call
  assert hash(matrix) == hash(jaxacct.banded_inverse_square_root(16, 3))


def test_block_sums_round_trip():
  totals = stream.BlockSums.zeros(2, 3, 4)
  totals.add('remove', 1, np.ones((2, 3)), np.full((2, 3), 2.0), np.ones((2, 4), np.int64))
  again = stream.BlockSums.from_dict(totals.to_dict())
  for table in ('sums', 'squares', 'counts'):
    for d in ('remove', 'add'):
      np.testing.assert_array_equal(getattr(again, table)[d], getattr(totals, table)[d])
  np.testing.assert_array_equal(again.sums['remove'], [[0, 0, 0], [2, 2, 2]])
  assert again.counts['remove'].dtype == np.int64


def test_ledger_charges_retries_of_the_mechanism_at_any_target():
  from jaxacct.montecarlo.evr import ledger as ledger_lib
  ledger = VerificationLedger()
  mechanism = jaxacct.MatrixMechanism(jaxacct.Poisson(sampling_prob=0.1, iterations=4),
                                      jaxacct.BandedToeplitz([1.0]), 1.0)

  def record(run, delta=1e-5):
    return ledger_lib.RunRecord(run=run, epsilon=1.0, delta=delta, num_samples=10**7,
                                base_delta=delta / 2, overall_delta=1.0)
  released = lambda charge: 1e-6
  assert ledger.charge(mechanism, record('run a'), 1, released)[0].attempts == 1
  assert ledger.charge(mechanism, record('run a'), 1, released)[0].attempts == 1  # reproduces
  with pytest.raises(ValueError, match='attempt=2'):
    ledger.charge(mechanism, record('run b'), 1, released)
  assert ledger.charge(mechanism, record('run b'), 2, released)[0].attempts == 2
  assert [r.run for r in ledger.runs(mechanism)] == ['run a', 'run b']
  with pytest.raises(ValueError, match='attempt=3'):  # another target is another attempt too
    ledger.charge(mechanism, record('run c', delta=1e-6), 1, released)


def test_traced_params_do_not_recompile_for_new_values():
  mechanism = jaxacct.MatrixMechanism(jaxacct.BMinSep(sampling_prob=0.3, iterations=10,
                                                      min_sep=2), BAND, 1.0)
  kernel = kernels.kernel_for(mechanism, np.dtype(np.float64))
  other = jaxacct.MatrixMechanism(jaxacct.BMinSep(sampling_prob=0.6, iterations=10, min_sep=2),
                                  jaxacct.BandedToeplitz([2.0, 0.1]), 3.0)
  assert kernels.kernel_for(other, np.dtype(np.float64)) == kernel  # p, σ, c_col are traced
  with jax.enable_x64(True):
    shapes = [jax.tree_util.tree_map(lambda a: (np.shape(a), np.asarray(a).dtype),
                                     sampling.traced_params(m, kernel)) for m in (mechanism, other)]
  assert shapes[0] == shapes[1]
