"""jaxacct.interop.jax_privacy: jax_privacy 2.0's objects in, jaxacct's out, and back (issue 32).

Two kinds of checks:

- the mappings: each supported jax_privacy strategy gives the jaxacct scheme or strategy built
  by hand from the same fields (``==``) and back, and every unsupported one is refused with its
  reason;
- the external cross-check (issue 32 item 4): the participation patterns that jax_privacy's
  own ``batch_iterator`` yields follow the law jaxacct accounts for ``to_scheme(strategy)``.
  The oracle is the exact law of one example's pattern from the brute-force enumerators
  (``oracles.brute_force.participation_law``; for truncation the App. D joint law of
  ``oracles.truncated_brute_force.truncated_sample_law``, marginalised to the example's
  batches after truncation), compared by χ² (``oracles.chi_square``) at p > 1e-4 with fixed
  seeds (deterministic; a false alarm would be a 1e-4 event per case). Where examples are
  independent (untruncated Poisson, b-min-sep, balls-in-bins, cyclic Poisson with independent
  bins) all examples of every run are samples; where they are not (equal groups, truncation)
  one example per run is, the same one every run. The same samples must reject a
  deliberately wrong law (warm vs cold start, a smaller min_sep, no truncation, Poisson at the
  same rate) at p < 1e-12, so the test can fail; and the same law must reject a truncation
  that keeps the lowest example ids instead of a uniformly random subset.
"""

import ast
import dataclasses
import importlib
import pathlib
import sys

import jax
import jax.numpy as jnp
import numpy as np
import pytest

import jaxacct
from jaxacct import square_root_coefficients
from oracles import brute_force, chi_square, truncated_brute_force

jax_privacy = pytest.importorskip('jax_privacy')

from jax_privacy import batch_selection as bs  # noqa: E402
from jax_privacy.experimental import execution_plan  # noqa: E402
from jax_privacy.matrix_factorization import banded, buffered_toeplitz, toeplitz  # noqa: E402
from jaxacct.interop import jax_privacy as interop  # noqa: E402

INDEPENDENT, EQUAL_SPLIT = bs.PartitionType.INDEPENDENT, bs.PartitionType.EQUAL_SPLIT
PACKAGE = pathlib.Path(jaxacct.__file__).parent / 'interop'


# ------------------------------------------------------------------------------ mappings
@dataclasses.dataclass(frozen=True)
class Mapping:
  strategy: object  # jax_privacy
  scheme: jaxacct.schemes.SamplingScheme  # jaxacct, built by hand
  dataset_size: int | None = None
  canonical: bool = True  # from_scheme(scheme) == strategy


MAPPINGS = {
    'poisson': Mapping(bs.CyclicPoissonSampling(sampling_prob=0.3, iterations=6),
                       jaxacct.Poisson(sampling_prob=0.3, iterations=6)),
    # One group under either partition type: the same sampler; from_scheme gives the default.
    'poisson_independent': Mapping(
        bs.CyclicPoissonSampling(sampling_prob=0.3, iterations=6, partition_type=INDEPENDENT),
        jaxacct.Poisson(sampling_prob=0.3, iterations=6), canonical=False),
    'poisson_truncated': Mapping(
        bs.CyclicPoissonSampling(sampling_prob=0.5, iterations=5, truncated_batch_size=1),
        jaxacct.Poisson(sampling_prob=0.5, iterations=5, truncated_batch_size=1, dataset_size=4),
        dataset_size=4),
    'cyclic_independent': Mapping(
        bs.CyclicPoissonSampling(sampling_prob=0.6, iterations=9, cycle_length=3,
                                 partition_type=INDEPENDENT),
        jaxacct.CyclicPoisson(sampling_prob=0.6, iterations=9, cycle_length=3,
                              partition='independent')),
    'cyclic_equal_split': Mapping(
        bs.CyclicPoissonSampling(sampling_prob=0.6, iterations=9, cycle_length=3),
        jaxacct.CyclicPoisson(sampling_prob=0.6, iterations=9, cycle_length=3,
                              partition='equal_split')),
    'cyclic_truncated': Mapping(
        bs.CyclicPoissonSampling(sampling_prob=0.5, iterations=6, cycle_length=2,
                                 truncated_batch_size=1, partition_type=EQUAL_SPLIT),
        jaxacct.CyclicPoisson(sampling_prob=0.5, iterations=6, cycle_length=2,
                              partition='equal_split', truncated_batch_size=1, dataset_size=8),
        dataset_size=8),
    'balls_in_bins': Mapping(bs.BallsInBinsSampling(iterations=7, cycle_length=3),
                             jaxacct.BallsInBins(iterations=7, cycle_length=3)),
    'bminsep_cold': Mapping(
        bs.BMinSepSampling(sampling_prob=0.4, iterations=8, min_sep=3, warm_start=False),
        jaxacct.BMinSep(sampling_prob=0.4, iterations=8, min_sep=3, warm_start=False)),
    'bminsep_warm': Mapping(
        bs.BMinSepSampling(sampling_prob=0.4, iterations=8, min_sep=3),
        jaxacct.BMinSep(sampling_prob=0.4, iterations=8, min_sep=3, warm_start=True)),
    'bminsep_truncated': Mapping(
        bs.BMinSepSampling(sampling_prob=0.7, iterations=5, min_sep=3, truncated_batch_size=1),
        jaxacct.BMinSep(sampling_prob=0.7, iterations=5, min_sep=3, warm_start=True,
                        truncated_batch_size=1, dataset_size=4),
        dataset_size=4),
    'bminsep_truncated_cold': Mapping(
        bs.BMinSepSampling(sampling_prob=0.5, iterations=5, min_sep=2, warm_start=False,
                           truncated_batch_size=3),
        jaxacct.BMinSep(sampling_prob=0.5, iterations=5, min_sep=2, warm_start=False,
                        truncated_batch_size=3, dataset_size=40),
        dataset_size=40),
}


@pytest.mark.parametrize('case', list(MAPPINGS))
def test_to_scheme_and_from_scheme_equal_the_hand_built_objects(case):
  mapping = MAPPINGS[case]
  scheme = interop.to_scheme(mapping.strategy, dataset_size=mapping.dataset_size)
  assert scheme == mapping.scheme and type(scheme) is type(mapping.scheme)
  back = interop.from_scheme(mapping.scheme)
  assert interop.to_scheme(back, dataset_size=mapping.dataset_size) == mapping.scheme
  if mapping.canonical:
    assert back == mapping.strategy and type(back) is type(mapping.strategy)
  else:
    assert back == bs.CyclicPoissonSampling(sampling_prob=0.3, iterations=6)


def test_numpy_fields_map_to_python_scalars():
  strategy = bs.BMinSepSampling(sampling_prob=np.float64(0.25), iterations=np.int64(4),
                                min_sep=np.int32(2), warm_start=np.bool_(False))
  scheme = interop.to_scheme(strategy)
  assert scheme == jaxacct.BMinSep(sampling_prob=0.25, iterations=4, min_sep=2, warm_start=False)
  assert repr(scheme) == repr(jaxacct.BMinSep(sampling_prob=0.25, iterations=4, min_sep=2,
                                              warm_start=False))


def test_bminsep_min_sep_one_maps_to_the_poisson_sampler():
  """At b = 1 the b-min-sep chain is Poisson sampling (one participation model), so from_scheme
  returns what it returns for the equal Poisson scheme, for either start (jax_privacy 2.0.0
  cannot run BMinSepSampling(min_sep=1, warm_start=True): a multinomial over no history
  slots). to_scheme keeps the family it is given."""
  warm = bs.BMinSepSampling(sampling_prob=0.5, iterations=3, min_sep=1, warm_start=True)
  with pytest.raises(ValueError, match='pvals'):
    list(warm.batch_iterator(5, rng=0))
  assert interop.to_scheme(warm) == jaxacct.BMinSep(sampling_prob=0.5, iterations=3, min_sep=1,
                                                    warm_start=True)
  cold = bs.BMinSepSampling(sampling_prob=1, iterations=3, min_sep=1, warm_start=False)
  assert interop.to_scheme(cold) == jaxacct.BMinSep(sampling_prob=1.0, iterations=3, min_sep=1,
                                                    warm_start=False)
  for warm_start in (True, False):
    back = interop.from_scheme(jaxacct.BMinSep(sampling_prob=0.5, iterations=3, min_sep=1,
                                               warm_start=warm_start))
    assert back == interop.from_scheme(jaxacct.Poisson(sampling_prob=0.5, iterations=3))
    assert back == bs.CyclicPoissonSampling(sampling_prob=0.5, iterations=3)
    assert len(list(back.batch_iterator(5, rng=0))) == 3
  truncated = dict(sampling_prob=0.5, iterations=3, truncated_batch_size=2, dataset_size=5)
  assert interop.from_scheme(jaxacct.BMinSep(min_sep=1, **truncated)) == \
      interop.from_scheme(jaxacct.Poisson(**truncated))


def test_equal_split_never_samples_the_remainder_and_groups_have_the_smaller_size():
  """EQUAL_SPLIT with m mod T ≠ 0: every group has ⌊m/T⌋ examples (one of the sizes jaxacct's
  truncated cyclic accountant takes the worst over) and m mod T examples are never sampled
  (trivially private): the 'equal_split' accounting of a fixed phase covers both."""
  strategy = bs.CyclicPoissonSampling(sampling_prob=1.0, iterations=6, cycle_length=3)
  for seed in range(5):
    batches = list(strategy.batch_iterator(7, rng=seed))
    assert [b.size for b in batches] == [2] * 6
    assert len(set().union(*map(set, batches))) == 6


class _MyPoisson(bs.CyclicPoissonSampling):
  """A subclass: its batch_iterator could be anything."""


REFUSALS = {
    'fixed_batch': (lambda: interop.to_scheme(bs.FixedBatchSampling(batch_size=3, iterations=4)),
                    jaxacct.InputError, ['FixedBatchSampling', 'replace-one', 'batch_size']),
    'fixed_batch_replace': (
        lambda: interop.to_scheme(bs.FixedBatchSampling(batch_size=3, iterations=4, replace=True)),
        jaxacct.InputError, ['replace=True', 'several times in one batch']),
    'user_level': (
        lambda: interop.to_scheme(bs.UserSelectionStrategy(
            bs.CyclicPoissonSampling(sampling_prob=0.5, iterations=3))),
        jaxacct.InputError, ['UserSelectionStrategy', 'user-level', 'base_strategy']),
    'subclass': (lambda: interop.to_scheme(_MyPoisson(sampling_prob=0.5, iterations=3)),
                 jaxacct.InputError, ['_MyPoisson', 'override batch_iterator']),
    'truncated_independent_groups': (
        lambda: interop.to_scheme(bs.CyclicPoissonSampling(
            sampling_prob=0.5, iterations=4, cycle_length=2, truncated_batch_size=2,
            partition_type=INDEPENDENT), dataset_size=10),
        jaxacct.InputError, ['CyclicPoissonSampling', "partition='independent'",
                             'group sizes are random']),
    'truncated_without_dataset_size': (
        lambda: interop.to_scheme(bs.BMinSepSampling(sampling_prob=0.5, iterations=4, min_sep=2,
                                                     truncated_batch_size=2)),
        jaxacct.InputError, ['BMinSepSampling', 'truncated_batch_size=2', 'dataset_size=']),
    'dataset_size_without_truncation': (
        lambda: interop.to_scheme(bs.BallsInBinsSampling(iterations=4, cycle_length=2),
                                  dataset_size=10),
        jaxacct.InputError, ['BallsInBinsSampling', 'dataset_size', 'does not truncate']),
    'sampling_prob_zero': (
        lambda: interop.to_scheme(bs.BMinSepSampling(sampling_prob=0.0, iterations=4, min_sep=2)),
        jaxacct.InputError, ['BMinSepSampling', 'sampling_prob must be in (0, 1]']),
    'truncated_batch_size_zero': (
        lambda: interop.to_scheme(bs.CyclicPoissonSampling(
            sampling_prob=0.5, iterations=4, truncated_batch_size=0), dataset_size=10),
        jaxacct.InputError,
        ['CyclicPoissonSampling', 'truncated_batch_size must be an integer >= 1']),
    'bad_partition': (
        lambda: interop.to_scheme(bs.CyclicPoissonSampling(
            sampling_prob=0.5, iterations=4, cycle_length=2, partition_type='independent')),
        jaxacct.InputError, ['partition_type must be PartitionType']),
    'not_a_strategy': (lambda: interop.to_scheme(jaxacct.Poisson(sampling_prob=0.5, iterations=3)),
                       jaxacct.InputTypeError, ['batch_selection_strategy must be']),
    'multi_attribution': (
        lambda: interop.from_scheme(jaxacct.MultiAttributionBMinSep(
            sampling_prob=0.5, iterations=3, min_sep=2, max_examples_per_user=2)),
        jaxacct.InputError, ['MultiAttributionBMinSep', 'no jax_privacy 2.0 sampler']),
    'from_not_a_scheme': (lambda: interop.from_scheme(bs.BallsInBinsSampling(iterations=3,
                                                                             cycle_length=2)),
                          jaxacct.InputTypeError, ['scheme must be a jaxacct scheme']),
}


@pytest.mark.parametrize('case', list(REFUSALS))
def test_refusals_name_the_object_the_field_and_the_reason(case):
  call, error, fragments = REFUSALS[case]
  with pytest.raises(error) as caught:
    call()
  for fragment in fragments:
    assert fragment in str(caught.value), (fragment, str(caught.value))


# ---------------------------------------------------------------------------- strategies
def test_toeplitz_coefficients_become_banded_toeplitz():
  expected = jaxacct.BandedToeplitz([1.0, 0.5, 0.25])
  for given in ([1.0, 0.5, 0.25], (1.0, 0.5, 0.25), np.array([1.0, 0.5, 0.25, 0.0, 0.0]),
                jnp.array([1.0, 0.5, 0.25], jnp.float32),
                toeplitz.pad_coefs_to_n(jnp.array([1.0, 0.5, 0.25]), 6)):
    assert interop.to_strategy(given) == expected  # trailing zeros: the same C
  # jax_privacy's square-root ("FHU") coefficients against jaxacct's own, both in float64:
  # a cumulative product of k rounded ratios each, so within a few ulp (rtol 1e-14).
  with jax.enable_x64(True):
    theirs = toeplitz.optimal_max_error_strategy_coefs(12)
  np.testing.assert_allclose(interop.to_strategy(theirs).c_col, square_root_coefficients(12),
                             rtol=1e-14, atol=0)


def test_dense_and_column_normalised_strategies_become_lower_triangular():
  dense = np.asarray(toeplitz.materialize_lower_triangular(jnp.array([1.0, 0.5]), 4))
  assert interop.to_strategy(dense) == jaxacct.LowerTriangular(dense)
  with jax.enable_x64(True):  # their matrices in float64, to compare at round-off
    normalised = banded.ColumnNormalizedBanded.default(n=6, bands=3)
    theirs = np.asarray(normalised.materialize())
    config = execution_plan.BandMFExecutionPlanConfig(
        strategy=np.array([1.0, 0.5, 0.25]), iterations=6, noise_multiplier=1.0, epsilon=None,
        delta=None, column_normalize=True)
    # The plan's C is the inverse of the noising matrix it streams (Alg. 9, rows rescaled).
    plan_c = np.linalg.inv(np.asarray(toeplitz.inverse_as_streaming_matrix(
        config.strategy, column_normalize_for_n=6).materialize(6)))
  ours = interop.to_strategy(normalised)
  assert isinstance(ours, jaxacct.LowerTriangular)
  np.testing.assert_allclose(ours.entries, theirs, rtol=0, atol=1e-15)
  np.testing.assert_allclose(np.linalg.norm(ours.entries, axis=0), 1.0, rtol=1e-15)
  from_config = interop.to_strategy(config)
  assert isinstance(from_config, jaxacct.LowerTriangular)
  np.testing.assert_allclose(from_config.entries, plan_c, rtol=0, atol=1e-15)
  plain = dataclasses.replace(config, column_normalize=False)
  assert interop.to_strategy(plain) == jaxacct.BandedToeplitz([1.0, 0.5, 0.25])


STRATEGY_REFUSALS = {  # (a function building what is given, the error, message fragments)
    'streaming_matrix': (lambda: toeplitz.inverse_as_streaming_matrix(jnp.array([1.0, 0.5])),
                         jaxacct.InputError, ['StreamingMatrix', 'C⁻¹', 'coefficients']),
    'blt': (lambda: buffered_toeplitz.BufferedToeplitz.build(buf_decay=[0.5], output_scale=[0.3],
                                                             dtype=jnp.float32),
            jaxacct.InputError, ['BufferedToeplitz', 'materialize(n)']),
    'negative': (lambda: [1.0, -0.5], jaxacct.InputError, ['non-negative']),
    'not_lower_triangular': (lambda: np.array([[1.0, 0.5], [0.0, 1.0]]), jaxacct.InputError,
                             ['lower-triangular']),
    'three_dimensional': (lambda: np.ones((2, 2, 2)), jaxacct.InputError, ['shape (2, 2, 2)']),
    'jaxacct_strategy': (lambda: jaxacct.BandedToeplitz([1.0]), jaxacct.InputTypeError,
                         ['already a jaxacct strategy']),
    'other': (lambda: 'abc', jaxacct.InputTypeError, ['strategy must be']),
}


@pytest.mark.parametrize('case', list(STRATEGY_REFUSALS))
def test_strategies_that_cannot_be_mapped_exactly_are_refused(case):
  build, error, fragments = STRATEGY_REFUSALS[case]
  given = build()
  with pytest.raises(error) as caught:
    interop.to_strategy(given)
  for fragment in fragments:
    assert fragment in str(caught.value), (fragment, str(caught.value))


def test_the_scheme_argument_applies_jaxaccts_own_band_rule():
  """to_strategy(scheme=) refuses exactly what Strategy.check_scheme refuses (the rule every
  MatrixMechanism applies), with its message: bands ≤ min_sep / cycle_length for b-min-sep and
  cyclic Poisson; no limit for balls-in-bins (a mixture over the bins' modes, exact for any C)
  or for untruncated Poisson (MMCC)."""
  coefficients = [1.0, 0.5, 0.25, 0.125]
  four_bands = jaxacct.BandedToeplitz(coefficients)
  accepted = [jaxacct.BMinSep(sampling_prob=0.5, iterations=8, min_sep=4),
              jaxacct.BallsInBins(iterations=8, cycle_length=2),
              jaxacct.Poisson(sampling_prob=0.5, iterations=8),
              bs.BMinSepSampling(sampling_prob=0.5, iterations=8, min_sep=5)]
  for scheme in accepted:
    assert interop.to_strategy(coefficients, scheme=scheme) == four_bands
  refused = [jaxacct.BMinSep(sampling_prob=0.5, iterations=8, min_sep=3),
             jaxacct.CyclicPoisson(sampling_prob=0.5, iterations=8, cycle_length=3),
             jaxacct.Poisson(sampling_prob=0.5, iterations=8, truncated_batch_size=2,
                             dataset_size=10),
             bs.CyclicPoissonSampling(sampling_prob=0.5, iterations=8, cycle_length=2)]
  for scheme in refused:
    accounted = scheme if isinstance(scheme, jaxacct.schemes.SamplingScheme) else \
        interop.to_scheme(scheme)
    with pytest.raises(jaxacct.InputError) as rule:
      four_bands.check_scheme(accounted)
    with pytest.raises(jaxacct.InputError) as caught:
      interop.to_strategy(coefficients, scheme=scheme)
    assert str(rule.value) in str(caught.value) and '4 bands' in str(caught.value)
  dense = np.tril(np.ones((4, 4)))
  with pytest.raises(jaxacct.InputError, match='iterations = 8; they must be equal'):
    interop.to_strategy(dense, scheme=jaxacct.BMinSep(sampling_prob=0.5, iterations=8, min_sep=2))


# ------------------------------------------------------------------------ the optional extra
def test_a_missing_or_untested_jax_privacy_raises_missing_extra_error(monkeypatch):
  with monkeypatch.context() as patch:
    patch.setitem(sys.modules, 'jax_privacy', None)  # `import jax_privacy` now fails
    for call in (lambda: interop.to_scheme(None), lambda: interop.from_scheme(None),
                 lambda: interop.to_strategy([1.0])):
      with pytest.raises(jaxacct.MissingExtraError) as caught:
        call()
      assert interop.INSTALL in str(caught.value)
      assert isinstance(caught.value, ImportError)
  for version in ('2.1.0', '1.9.3', '3.0.0.dev1'):
    with monkeypatch.context() as patch:
      patch.setattr(jax_privacy, '__version__', version)
      with pytest.raises(jaxacct.MissingExtraError) as caught:
        interop.to_scheme(bs.BallsInBinsSampling(iterations=3, cycle_length=2))
      assert f'found jax_privacy {version}' in str(caught.value) and '2.0.x' in str(caught.value)
  with monkeypatch.context() as patch:
    patch.setattr(jax_privacy, '__version__', '2.0.7')
    assert interop.to_scheme(bs.BallsInBinsSampling(iterations=3, cycle_length=2)) == \
        jaxacct.BallsInBins(iterations=3, cycle_length=2)


def test_importing_the_package_does_not_import_jax_privacy(monkeypatch):
  for path in (PACKAGE / '__init__.py', PACKAGE / 'jax_privacy.py'):
    tree = ast.parse(path.read_text())
    for node in tree.body:  # module level only: the functions import it when called
      names = ([alias.name for alias in node.names] if isinstance(node, ast.Import) else
               [node.module or ''] if isinstance(node, ast.ImportFrom) else [])
      assert not any(name.split('.')[0] == 'jax_privacy' for name in names), (path, node.lineno)
  monkeypatch.setitem(sys.modules, 'jax_privacy', None)
  importlib.reload(importlib.import_module('jaxacct.interop'))
  importlib.reload(interop)  # executes the module again without jax_privacy


# --------------------------------------------------- external cross-check (issue 32, item 4)
def _law(pairs) -> dict:
  patterns, log_probs = pairs
  return {tuple(int(v) for v in row): float(np.exp(lp)) for row, lp in zip(patterns, log_probs)}


def _truncated_law(dataset_size, sampling_prob, min_sep, batch_size, rounds, warm) -> dict:
  """One example's batches after truncation, marginalised from the App. D joint law of (rest
  batch sizes r, x^P): the example is in a batch iff x^P > 0 (Corollary D.2)."""
  law: dict = {}
  joint = truncated_brute_force.truncated_sample_law(dataset_size, sampling_prob, min_sep,
                                                     batch_size, rounds, warm)
  for (_, x_p, _), probability in joint.items():
    pattern = tuple(int(v > 0) for v in x_p)
    law[pattern] = law.get(pattern, 0.0) + probability
  return law


def _phase_mixture(phase_zero: dict, period: int, iterations: int) -> dict:
  """Equal split: an example's group is uniform over the T groups (T divides m), and in its
  group's rounds it follows the law accounted for phase 0, moved to its phase."""
  assert iterations % period == 0
  law: dict = {}
  for phase in range(period):
    for pattern, probability in phase_zero.items():
      moved = tuple(np.roll(pattern, phase).tolist())
      law[moved] = law.get(moved, 0.0) + probability / period
  return law


def accounted_law(scheme, dataset_size: int) -> dict:
  """The exact law of one example's participation pattern that jaxacct accounts for
  ``scheme`` (from the brute-force oracles, not from jaxacct's code)."""
  n = scheme.iterations
  if isinstance(scheme, jaxacct.CyclicPoisson) and scheme.partition == 'equal_split':
    assert dataset_size % scheme.cycle_length == 0
    if scheme.truncates:  # truncated Poisson in a group of m/T (seed 001 §3 remark)
      rounds = n // scheme.cycle_length
      group = _truncated_law(dataset_size // scheme.cycle_length, scheme.sampling_prob, 1,
                             scheme.truncated_batch_size, rounds, False)
      phase_zero = {}
      for pattern, probability in group.items():
        full = np.zeros(n, int)
        full[::scheme.cycle_length] = pattern
        phase_zero[tuple(full.tolist())] = probability
    else:
      phase_zero = _law(brute_force.participation_law(
          'cyclic_poisson', iterations=n, sampling_prob=scheme.sampling_prob,
          cycle_length=scheme.cycle_length, partition='equal_split'))
    return _phase_mixture(phase_zero, scheme.cycle_length, n)
  if isinstance(scheme, jaxacct.CyclicPoisson):
    return _law(brute_force.participation_law(
        'cyclic_poisson', iterations=n, sampling_prob=scheme.sampling_prob,
        cycle_length=scheme.cycle_length, partition='independent'))
  if isinstance(scheme, jaxacct.BallsInBins):
    return _law(brute_force.participation_law('balls_in_bins', iterations=n,
                                              cycle_length=scheme.cycle_length))
  if scheme.truncates:  # Poisson (b = 1, cold) or BMinSep
    assert scheme.dataset_size == dataset_size
    return _truncated_law(dataset_size, scheme.sampling_prob, scheme.min_sep,
                          scheme.truncated_batch_size, n, scheme.warm_start)
  if isinstance(scheme, jaxacct.Poisson):
    return _law(brute_force.participation_law('poisson', iterations=n,
                                              sampling_prob=scheme.sampling_prob))
  return _law(brute_force.participation_law('bminsep', iterations=n,
                                            sampling_prob=scheme.sampling_prob,
                                            min_sep=scheme.min_sep,
                                            warm_start=scheme.warm_start))


def sampled_patterns(strategy, dataset_size: int, runs: int, seed: int, one_per_run: bool,
                     batch_iterator=None) -> list[tuple]:
  """Participation patterns from jax_privacy's own batch_iterator (fixed seeds).

  ``one_per_run``: only the last example's pattern, the same example every run, so that a
  rule that depends on example ids (e.g. truncation keeping the lowest ids) shows.
  """
  batch_iterator = batch_iterator or strategy.batch_iterator
  cap = getattr(strategy, 'truncated_batch_size', None)
  patterns = []
  for run in range(runs):
    x = np.zeros((dataset_size, strategy.iterations), np.int8)
    for i, batch in enumerate(batch_iterator(dataset_size, rng=np.random.default_rng([seed, run]))):
      assert np.unique(batch).size == batch.size  # a 0/1 pattern: no example twice in a batch
      assert cap is None or batch.size <= cap
      x[batch, i] = 1
    rows = x[-1:] if one_per_run else x
    patterns.extend(map(tuple, rows.tolist()))
  return patterns


def _replace(**changes):
  return lambda scheme: dataclasses.replace(scheme, **changes)


def _poisson_at_the_same_rate(scheme):
  return jaxacct.Poisson(sampling_prob=scheme.expected_participation_rate,
                         iterations=scheme.iterations)


@dataclasses.dataclass(frozen=True)
class CrossCheck:
  dataset_size: int
  runs: int
  one_per_run: bool  # examples of one run are dependent (equal groups, truncation)
  wrong_laws: tuple  # scheme → a deliberately mismatched scheme
  seed: int


CROSS_CHECKS = {
    'poisson': CrossCheck(20, 1000, False, (_replace(sampling_prob=0.25),), 1),
    'cyclic_independent': CrossCheck(20, 1000, False, (_poisson_at_the_same_rate,), 2),
    'cyclic_equal_split': CrossCheck(12, 4000, True, (_poisson_at_the_same_rate,), 3),
    'balls_in_bins': CrossCheck(20, 500, False, (
        lambda s: jaxacct.CyclicPoisson(sampling_prob=0.9, iterations=s.iterations,
                                        cycle_length=s.cycle_length),), 4),
    'bminsep_cold': CrossCheck(20, 1000, False, (_replace(warm_start=True), _replace(min_sep=2)),
                               5),
    'bminsep_warm': CrossCheck(20, 1000, False, (_replace(warm_start=False), _replace(min_sep=2)),
                               6),
    'bminsep_truncated': CrossCheck(4, 3000, True, (
        _replace(truncated_batch_size=None, dataset_size=None), _replace(warm_start=False)), 7),
    'poisson_truncated': CrossCheck(4, 5000, True, (
        _replace(truncated_batch_size=None, dataset_size=None),), 8),
    'cyclic_truncated': CrossCheck(8, 4000, True, (
        _replace(truncated_batch_size=None, dataset_size=None),), 9),
}


@pytest.mark.parametrize('case', list(CROSS_CHECKS))
def test_jax_privacy_batches_follow_the_law_jaxacct_accounts(case):
  check, strategy = CROSS_CHECKS[case], MAPPINGS[case].strategy
  dataset_size = MAPPINGS[case].dataset_size
  scheme = interop.to_scheme(strategy, dataset_size=dataset_size)
  patterns = sampled_patterns(strategy, check.dataset_size, check.runs, check.seed,
                              check.one_per_run)
  p_value = chi_square.p_value(patterns, accounted_law(scheme, check.dataset_size))
  assert p_value > 1e-4, (case, len(patterns), p_value)
  for wrong in check.wrong_laws:  # the same samples reject a wrong law: the test can fail
    mismatched = wrong(scheme)
    assert mismatched != scheme
    wrong_p = chi_square.p_value(patterns, accounted_law(mismatched, check.dataset_size))
    assert wrong_p < 1e-12, (case, mismatched, wrong_p)


def test_a_truncation_that_depends_on_example_ids_is_rejected():
  """Which example a full batch drops matters: App. D (and jaxacct) keep a uniformly random
  subset of B. jax_privacy's own b-min-sep sampler without truncation, cut afterwards to the
  B lowest ids (the sampled set still blocks: App. D's history), fails the χ² that its
  uniform truncation passes (``test_jax_privacy_batches_follow_the_law_jaxacct_accounts``)."""
  mapping, check = MAPPINGS['bminsep_truncated'], CROSS_CHECKS['bminsep_truncated']
  cap = mapping.strategy.truncated_batch_size
  untruncated = dataclasses.replace(mapping.strategy, truncated_batch_size=None)

  def lowest_ids(num_examples, rng):
    return (np.sort(batch)[:cap] for batch in untruncated.batch_iterator(num_examples, rng))

  # The example tracked, the last id, is dropped from every full batch (χ² in the thousands).
  patterns = sampled_patterns(mapping.strategy, check.dataset_size, check.runs // 2, check.seed,
                              True, batch_iterator=lowest_ids)
  law = accounted_law(mapping.scheme, check.dataset_size)
  assert chi_square.p_value(patterns, law) < 1e-12
