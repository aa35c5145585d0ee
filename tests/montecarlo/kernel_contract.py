"""The contract every Monte Carlo scheme kernel runs (``jaxacct.montecarlo.engine.kernels.base``).

``KernelContract`` is not collected itself (its name does not start with ``Test``). A kernel
family's test class (``test_kernel_contract.py``) subclasses it and supplies:

- ``kernel``: the registered kernel class it covers;
- ``iterations`` and ``scheme(iterations)``: one small scheme (n ≤ 4 rounds) of that family,
  accounted with the band ``c_col`` (≤ 2 entries) at σ = 1;
- ``components()``: the exact dominating pair of that mechanism, enumerated by the
  brute-force oracles of ``tests/oracles`` (``Component``s: the law of the released
  batch sizes, and given them the participation mixtures P and Q).

Every test here then runs for that kernel, per direction:

1. shapes: ``sample_mean``, ``log_ratio`` and ``log_ratios_for_sigmas`` of the float64 build
   return the documented shapes and dtypes at two (N, n) sizes (abstract evaluation, nothing
   compiles), and the compiled loss program returns float64 outputs and finite losses (the
   pair is a mixture of Gaussians with full support, so ln P/Q is finite at every y);
2. keys: the same key gives the same bits; another key other losses, and other participation
   draws as often as two independent draws of the law differ; a block computed in another
   call, at another position, next to other blocks, has the same bits (a sample depends only
   on its own key);
3. devices and call sizes (``test_bitwise_identical_on_one_and_several_devices``, slow): one
   subprocess with 2 virtual CPU devices (4 if this process has 2), in calls of the fewest
   blocks per device allowed, computes every family's samples (in the
   directions where it draws participations: ``fingerprints``), which must be bitwise those
   of this process;
4. the brute-force oracle: every drawn loss equals the enumerated ln P/Q of its output; the
   draws at σ → 0 follow the enumerated law (χ²); δ̂(ε) agrees with the exact δ(ε)
   (enumeration, and quadrature over y) within 5 standard errors.

``test_every_registered_kernel_has_a_contract_class`` fails, naming the kernel, when
``kernels.registered()`` holds a kernel without a test class here. Both module-level tests are
imported by ``test_kernel_contract.py``, where pytest collects them.

Cost: compilation dominates (README, "Developing": a kernel takes seconds to compile), so a
family has one mechanism shape and every test reuses the same compiled loss program
(``sampling.OneSigma``, one block size and call size): σ → 0 draws and other keys are traced
values. The samples of a (family, direction) are computed once per process (``_RUNS``).
"""

from __future__ import annotations

import dataclasses
import hashlib
import math
import pathlib

import jax
import numpy as np
import pytest

import jaxacct
from jaxacct.conventions import DIRECTIONS
from jaxacct.montecarlo.engine import kernels, sampling
from jaxacct.montecarlo.engine import keys as keys_lib
from jaxacct.montecarlo.engine.sharding import SampleMesh
from oracles import brute_force, chi_square

FLOAT64 = np.dtype(np.float64)
SIGMA = 1.0
# σ → 0: y = C·x + σz is then the participation draw C·x to 1e-8 (same kernel, same compiled
# program: σ is traced), rounded to DRAW_DECIMALS to name the draw.
TINY_SIGMA = 1e-9
DRAW_DECIMALS = 6
BLOCK_SIZE = 1024
BLOCKS_PER_CALL = 32  # per device: a call of one device holds 32 768 samples
NUM_BLOCKS = 256  # N = 2¹⁸ samples per direction for δ̂
KEY, OTHER_KEY = 11, 12
EPSILONS = np.array([0.0, 0.5, 1.0])
NUM_SIGMAS = 3  # candidates of the abstract log_ratios_for_sigmas

# δ̂ is the mean of N = 2¹⁸ i.i.d. terms in [0, 1], so it is normal to within the CLT's
# error, with the estimated standard error s.e. (≤ 1e-3 here): |δ̂ − δ| > 5 s.e. has
# probability 6e-7 per comparison (6 per family; the keys are fixed, so a pass is
# reproducible and another seed fails with probability < 2e-5 for the whole suite). The exact
# δ carries the quadrature's error: the integrand (P − e^ε Q)₊ has a kink, so the grid's error
# is O(step²): against a grid of half (2-d) or a quarter (3-d) the step, QUADRATURE_STEPS moved
# δ by at most 1e-5 (2-d) and 5.3e-5 (3-d) in the five families (the mixtures' masses are 1 to
# 1e-13: the tails are covered). QUADRATURE_ERROR bounds it with a factor 4 to spare, and is
# ~0.3 s.e. Modelling errors fail it: an ignored warm start moves δ̂ by ~30 s.e., a sampler
# whose p is 0.01 too large (multi-attribution) by ~12.
STANDARD_ERRORS = 5.0
QUADRATURE_STEPS = {1: 0.05, 2: 0.05, 3: 0.2}  # × σ, by the dimension of the span of the means
QUADRATURE_WIDTH = 7.0  # the grid reaches 7σ beyond every mean (tail mass < 1e-11 per axis)
QUADRATURE_ERROR = 2e-4
# Pointwise, a kernel's loss and the enumerated one are two float64 evaluations of one
# quantity (recursions against a log-sum-exp over patterns): measured ≤ 5e-15 apart (|L| ≤ 10
# here); the tolerance leaves room for other XLA builds, while a modelling error moves an O(1)
# loss by far more.
LOSS_TOLERANCE = 1e-9
# The χ² test of the σ → 0 draws (the convention of tests/oracles/chi_square.py's users).
MIN_P_VALUE = 1e-3


# -- the exact pair, by enumeration


@dataclasses.dataclass(frozen=True)
class Mixture:
  """The law Σ_k w_k N(C·x_k, σ²I): participation vectors x_k (K, n) and ln w_k (K,)."""

  patterns: np.ndarray
  log_weights: np.ndarray


@dataclasses.dataclass(frozen=True)
class Component:
  """One conditional dominating pair: with ``probability`` the released batch sizes are
  ``info`` (a tuple of n ints; None when the kernel releases none), and then y ~ ``remove``
  (P) or ``add`` (Q), with means through the strategy matrix ``matrix`` (n, n)."""

  probability: float
  info: tuple | None
  matrix: np.ndarray
  remove: Mixture
  add: Mixture

  def means(self, direction: str) -> np.ndarray:
    return brute_force.mode_vectors(getattr(self, direction).patterns, self.matrix)

  def log_ratios(self, y: np.ndarray, sigma: float) -> np.ndarray:
    """ln P(y)/Q(y) by enumeration (``brute_force.privacy_loss`` of each mixture)."""
    p, q = (brute_force.privacy_loss(m.patterns, m.log_weights, self.matrix, y, sigma)
            for m in (self.remove, self.add))
    return p - q


def untruncated(law: tuple[np.ndarray, np.ndarray], c_col) -> list[Component]:
  """The pair of an untruncated scheme: P the participation law's mixture, Q = N(0, σ²I)."""
  patterns, log_probs = law
  n = patterns.shape[1]
  return [Component(1.0, None, brute_force.strategy_matrix(c_col, n),
                    Mixture(np.asarray(patterns, float), np.asarray(log_probs, float)),
                    Mixture(np.zeros((1, n)), np.zeros(1)))]


def _rounded(rows: np.ndarray) -> list[tuple]:
  return [tuple(row) for row in np.round(rows, DRAW_DECIMALS).tolist()]


def draw_names(samples: 'Samples') -> list[tuple]:
  """The draw of each sample at σ → 0: (its released batch sizes or None, C·x rounded)."""
  y, sizes, _ = samples.rows
  width = 0 if sizes is None else sizes.shape[1]
  rows = np.round(y, DRAW_DECIMALS) if sizes is None else np.concatenate(
      [sizes, np.round(y, DRAW_DECIMALS)], axis=1)
  unique, inverse = np.unique(rows, axis=0, return_inverse=True)  # name each distinct draw once
  names = [(None if sizes is None else tuple(int(v) for v in row[:width]),
            tuple(row[width:].tolist())) for row in unique]
  return [names[i] for i in inverse.reshape(-1)]


def draw_law(components: list[Component], direction: str) -> dict:
  """(batch sizes, C·x) → probability: the law of one sample's draws in ``direction``."""
  law: dict = {}
  for component in components:
    weights = component.probability * np.exp(getattr(component, direction).log_weights)
    for mean, weight in zip(_rounded(component.means(direction)), weights):
      law[component.info, mean] = law.get((component.info, mean), 0.0) + float(weight)
  return law


def exact_losses(components: list[Component], y: np.ndarray, batch_sizes: np.ndarray | None,
                 direction: str) -> np.ndarray:
  """The loss of each output: ln P/Q (``remove``) or ln Q/P (``add``) of its component."""
  by_info = {component.info: component for component in components}
  if batch_sizes is None:
    losses = by_info[None].log_ratios(y, SIGMA)
  else:
    rows, group = np.unique(batch_sizes, axis=0, return_inverse=True)
    group = group.reshape(-1)
    losses = np.empty(len(y))
    for g, row in enumerate(rows):
      losses[group == g] = by_info[tuple(row.tolist())].log_ratios(y[group == g], SIGMA)
  return losses if direction == 'remove' else -losses


def exact_deltas(components: list[Component], epsilons: np.ndarray) -> dict[str, np.ndarray]:
  """δ(ε) per direction: Σ Pr[info]·∫(P − e^ε Q)₊ dy (``add``: P and Q swapped), at σ = SIGMA.

  P/Q depends on y only through its projection on the span of the means, and the reference
  R = N(0, σ²I) projects to a standard Gaussian there, so each integral is taken over that
  span (dimension ≤ n; at most 3 allowed) on a grid of step ``QUADRATURE_STEPS[dimension]``·σ,
  with P/R and Q/R enumerated by ``brute_force.privacy_loss``.
  """
  sigma = SIGMA
  growth = np.exp(epsilons)[:, None]
  deltas = {d: np.zeros(len(epsilons)) for d in DIRECTIONS}
  for component in components:
    means = {d: component.means(d) for d in DIRECTIONS}
    _, singular, basis = np.linalg.svd(np.concatenate(list(means.values())))
    basis = basis[:int(np.sum(singular > 1e-9))].T  # (n, r), orthonormal
    reduced = {d: means[d] @ basis for d in DIRECTIONS}
    everything = np.concatenate([*reduced.values(), np.zeros((1, basis.shape[1]))])
    step = QUADRATURE_STEPS[basis.shape[1]] * sigma
    axes = [np.arange(low - QUADRATURE_WIDTH * sigma, high + QUADRATURE_WIDTH * sigma, step)
            for low, high in zip(everything.min(axis=0), everything.max(axis=0))]
    grid = np.stack(np.meshgrid(*axes, indexing='ij'), axis=-1).reshape(-1, len(axes))
    cell = step ** len(axes)
    log_reference = (-0.5 * np.sum(grid * grid, axis=1) / sigma**2
                     - 0.5 * len(axes) * math.log(2 * math.pi * sigma**2))
    identity = np.eye(len(axes))
    density = {d: np.exp(log_reference + brute_force.privacy_loss(
        reduced[d], getattr(component, d).log_weights, identity, grid, sigma))
        for d in DIRECTIONS}
    for d in DIRECTIONS:  # the grid holds each mixture: the quadrature's own check
      assert abs(density[d].sum() * cell - 1.0) < 1e-9, (component.info, d)
    first, second = density['remove'][None, :], density['add'][None, :]
    deltas['remove'] += component.probability * cell * np.maximum(
        first - growth * second, 0.0).sum(axis=1)
    deltas['add'] += component.probability * cell * np.maximum(
        second - growth * first, 0.0).sum(axis=1)
  return deltas


# -- the samples, from the compiled loss program


@dataclasses.dataclass(frozen=True)
class Samples:
  """Host copies of loss-program calls, blocks in order: y (blocks, block_size, n), the released
  batch sizes (same shape, or None) and the losses (blocks, block_size)."""

  y: np.ndarray
  batch_sizes: np.ndarray | None
  losses: np.ndarray

  def blocks(self, index) -> 'Samples':
    """The blocks ``index`` (a slice or a list of block positions), in that order."""
    return Samples(*(None if a is None else a[index]
                     for a in (self.y, self.batch_sizes, self.losses)))

  @property
  def rows(self) -> tuple[np.ndarray, np.ndarray | None, np.ndarray]:
    """(y (N, n), batch sizes (N, n) or None, losses (N,)), one row per sample."""
    n = self.y.shape[-1]
    sizes = None if self.batch_sizes is None else self.batch_sizes.reshape(-1, n)
    return self.y.reshape(-1, n), sizes, self.losses.reshape(-1)

  def arrays(self) -> list[np.ndarray]:
    return [a for a in (self.y, self.batch_sizes, self.losses) if a is not None]

  def digest(self) -> str:
    """SHA-256 of every bit (and shape and dtype) of the samples."""
    sha = hashlib.sha256()
    for array in self.arrays():
      sha.update(f'{array.shape}{array.dtype}'.encode())
      sha.update(np.ascontiguousarray(array).tobytes())
    return sha.hexdigest()


def assert_same_bits(actual: Samples, expected: Samples) -> None:
  for got, want in zip(actual.arrays(), expected.arrays(), strict=True):
    assert got.shape == want.shape and got.dtype == want.dtype
    differ = got.view(np.uint8).reshape(got.shape[:2] + (-1,)) != want.view(np.uint8).reshape(
        want.shape[:2] + (-1,))
    assert not differ.any(), f'{np.any(differ, axis=-1).sum()} samples differ in their bits'


@dataclasses.dataclass(frozen=True)
class Run:
  """The samples every test of a (family, direction) reads (``KernelContract.run``).

  ``call_blocks`` blocks make one call (``BLOCKS_PER_CALL`` per device); ``reference`` is
  key KEY's blocks [0, NUM_BLOCKS); the others hold the blocks of its first call: ``again``
  computed again (by a new program: the host parameters are derived again), ``other_key``
  under OTHER_KEY, ``moved`` by two calls in which each half sits at the other half's
  positions, next to blocks from beyond NUM_BLOCKS; ``draws`` and ``other_draws`` at
  σ = TINY_SIGMA under each key.
  """

  call_blocks: int
  reference: Samples
  again: Samples
  other_key: Samples
  moved: Samples
  draws: Samples
  other_draws: Samples

  @property
  def first_call(self) -> Samples:
    """The reference's blocks of its first call (those the other fields hold)."""
    return self.reference.blocks(slice(self.call_blocks))


_RUNS: dict[tuple[type, str], Run] = {}
_EXACT: dict[type, tuple[list[Component], dict]] = {}


def _stream_key(seed: int, direction: str) -> jax.Array:
  return keys_lib.direction_key(keys_lib.purpose_key(jax.random.key(seed), 'estimation'),
                                direction)


def _calls(program: sampling.OneSigma, seed: int, direction: str, *block_lists) -> Samples:
  """The samples of the given calls (each a list of global block ids), in that order."""
  parts = []
  with jax.enable_x64(True):
    for blocks in block_lists:
      (y, info), losses = program.outputs_and_losses(
          _stream_key(seed, direction), program.mesh.place(np.asarray(blocks, np.int64)),
          direction)
      sizes = program.kernel.batch_sizes_of(info)
      parts.append((np.asarray(y), None if sizes is None else np.asarray(sizes),
                    np.asarray(losses)))
  y, sizes, losses = zip(*parts)
  return Samples(np.concatenate(y), None if sizes[0] is None else np.concatenate(sizes),
                 np.concatenate(losses))


def _program(contract: 'KernelContract', sigma: float = SIGMA) -> sampling.OneSigma:
  """The float64 loss program of the contract's mechanism, over every device of the process."""
  mechanism = contract.mechanism(sigma=sigma)
  return sampling.OneSigma(mechanism, kernels.kernel_for(mechanism, FLOAT64), BLOCK_SIZE,
                           SampleMesh.over())


def _reference(program: sampling.OneSigma, direction: str,
               blocks_per_call: int = BLOCKS_PER_CALL) -> Samples:
  size = blocks_per_call * program.mesh.size
  return _calls(program, KEY, direction, *(range(b, b + size) for b in range(
      0, NUM_BLOCKS, size))).blocks(slice(NUM_BLOCKS))


def compute_run(contract: 'KernelContract', direction: str) -> Run:
  program, tiny = _program(contract), _program(contract, TINY_SIGMA)
  size = BLOCKS_PER_CALL * program.mesh.size
  half = size // 2
  first = list(range(size))
  spare = list(range(NUM_BLOCKS, NUM_BLOCKS + size))
  moved = _calls(program, KEY, direction, first[half:] + spare[:half],
                 spare[half:] + first[:half])  # blocks half…size−1, then 0…half−1
  return Run(
      size, _reference(program, direction),
      _calls(dataclasses.replace(program), KEY, direction, first),
      _calls(program, OTHER_KEY, direction, first),
      moved.blocks(list(range(size + half, 2 * size)) + list(range(half))),
      _calls(tiny, KEY, direction, first), _calls(tiny, OTHER_KEY, direction, first))


class KernelContract:
  """Inherited tests of the contract (see the module docstring)."""

  kernel: type | None = None
  iterations: int = 0
  c_col: tuple[float, ...] = (1.0, 0.5)

  # -- supplied by subclasses
  def scheme(self, iterations: int):
    """The family's small scheme with ``iterations`` rounds."""
    raise NotImplementedError

  def components(self) -> list[Component]:
    """The exact pair of ``mechanism()`` by enumeration (``tests/oracles``)."""
    raise NotImplementedError

  # -- plumbing
  def pytest_generate_tests(self, metafunc):
    if 'direction' in metafunc.fixturenames:  # every per-direction test, once per direction
      metafunc.parametrize('direction', DIRECTIONS)

  def mechanism(self, iterations: int | None = None, sigma: float = SIGMA):
    return jaxacct.MatrixMechanism(self.scheme(iterations or self.iterations),
                                   jaxacct.BandedToeplitz(list(self.c_col)), sigma)

  def run(self, direction: str) -> Run:
    if (type(self), direction) not in _RUNS:
      _RUNS[type(self), direction] = compute_run(self, direction)
    return _RUNS[type(self), direction]

  def exact(self) -> tuple[list[Component], dict]:
    """(components, exact δ(EPSILONS) per direction), enumerated once per family."""
    if type(self) not in _EXACT:
      components = self.components()
      _EXACT[type(self)] = components, exact_deltas(components, EPSILONS)
    return _EXACT[type(self)]

  # -- the contract: the registered kernel
  def test_case_builds_the_declared_kernel(self):
    kernel = kernels.kernel_for(self.mechanism(), FLOAT64)
    assert type(kernel) is self.kernel and self.kernel in kernels.registered(), type(kernel)
    # A kernel class builds itself: the class that accepts the scheme is the built kernel's.
    assert type(kernel) is kernels.kernel_class(self.mechanism().scheme), type(kernel)
    assert (kernel.iterations, kernel.dtype) == (self.iterations, 'float64')
    again = dataclasses.replace(kernel)  # a static jit argument: equal and hashed by value
    assert kernel == again and hash(kernel) == hash(again)
    components, _ = self.exact()
    assert kernel.releases_batch_sizes == (components[0].info is not None)
    assert math.isclose(sum(c.probability for c in components), 1.0, rel_tol=1e-12)

  # -- 1. shapes and dtypes
  def test_sampler_and_losses_have_the_documented_shapes(self, direction):
    key_type = jax.random.key(0).dtype
    for num, n in ((5, self.iterations), (12, self.iterations + 2)):
      mechanism = self.mechanism(n)
      with jax.enable_x64(True):
        kernel = kernels.kernel_for(mechanism, FLOAT64)
        params, sigma, view = sampling.traced_params(mechanism, kernel)
        keys = jax.ShapeDtypeStruct((num,), key_type)
        outputs = jax.ShapeDtypeStruct((num, n), FLOAT64)
        sigmas = jax.ShapeDtypeStruct((NUM_SIGMAS,), FLOAT64)
        if kernel.has_signal(direction):
          mean, info = jax.eval_shape(
              lambda k, p, v: kernel.sample_mean(k, p, v, direction), keys, params, view)
          assert (mean.shape, mean.dtype) == ((num, n), FLOAT64), mean
        else:
          mean, info = None, kernel.empty_info()
        sizes = kernel.batch_sizes_of(info)
        if kernel.releases_batch_sizes:
          assert (sizes.shape, sizes.dtype) == ((num, n), np.int32), sizes
        else:
          assert sizes is None and not jax.tree_util.tree_leaves(info), info
        loss = jax.eval_shape(
            lambda d, p, s, v, i: kernel.log_ratio(d, p, s, v, i, direction),
            outputs, params, sigma, view, info)
        assert (loss.shape, loss.dtype) == ((num,), FLOAT64), loss
        losses = jax.eval_shape(
            lambda dm, dz, p, s, v, i: kernel.log_ratios_for_sigmas(dm, dz, p, s, v, i,
                                                                    direction),
            None if mean is None else outputs, outputs, params, sigmas, view, info)
        assert (losses.shape, losses.dtype) == ((NUM_SIGMAS, num), FLOAT64), losses

  def test_loss_program_gives_float64_outputs_and_finite_losses(self, direction):
    run = self.run(direction)
    reference = run.reference
    shape = (NUM_BLOCKS, BLOCK_SIZE, self.iterations)
    assert (reference.y.shape, reference.y.dtype) == (shape, FLOAT64)
    assert (reference.losses.shape, reference.losses.dtype) == (shape[:2], FLOAT64)
    if reference.batch_sizes is not None:
      assert (reference.batch_sizes.shape, reference.batch_sizes.dtype) == (shape, np.int32)
    assert np.all(np.isfinite(reference.y)) and np.all(np.isfinite(reference.losses))

  # -- 2. keys
  def test_the_same_key_gives_the_same_bits(self, direction):
    run = self.run(direction)
    assert_same_bits(run.again, run.first_call)

  def test_another_key_gives_other_draws(self, direction):
    run = self.run(direction)
    losses = run.first_call.losses
    assert not np.isin(run.other_key.losses, losses).any()
    # At σ → 0 the draws of the two keys differ as often as two independent draws of the law:
    # with probability 1 − Σ p², to within 5 binomial standard deviations.
    components, _ = self.exact()
    expected = 1.0 - sum(p * p for p in draw_law(components, direction).values())
    differ = np.array([a != b for a, b in zip(draw_names(run.draws),
                                              draw_names(run.other_draws), strict=True)])
    spread = STANDARD_ERRORS * math.sqrt(expected * (1.0 - expected) / differ.size)
    assert abs(differ.mean() - expected) <= spread + 1e-12, (differ.mean(), expected)

  def test_a_sample_depends_only_on_its_own_key(self, direction):
    run = self.run(direction)
    assert_same_bits(run.moved, run.first_call)

  # -- 4. the brute-force oracle
  def test_losses_equal_the_enumerated_losses(self, direction):
    run = self.run(direction)
    y, sizes, losses = run.first_call.rows
    components, _ = self.exact()
    np.testing.assert_allclose(losses, exact_losses(components, y, sizes, direction),
                               rtol=LOSS_TOLERANCE, atol=LOSS_TOLERANCE)

  def test_draws_follow_the_enumerated_law(self, direction):
    run = self.run(direction)
    components, _ = self.exact()
    law = draw_law(components, direction)
    draws = draw_names(run.draws) + draw_names(run.other_draws)
    if len(law) == 1:  # no participation in this direction (y ~ Q = N(0, σ²I))
      assert set(draws) == set(law), set(draws) - set(law)
    else:
      assert chi_square.p_value(draws, law) > MIN_P_VALUE

  def test_delta_hat_agrees_with_the_enumerated_delta(self, direction):
    _, _, losses = self.run(direction).reference.rows
    _, exact = self.exact()
    terms = -np.expm1(np.minimum(EPSILONS[:, None] - losses[None, :], 0.0))
    delta_hat = terms.mean(axis=1)
    standard_error = terms.std(axis=1, ddof=1) / math.sqrt(losses.size)
    error = np.abs(delta_hat - exact[direction])
    assert np.all(error <= STANDARD_ERRORS * standard_error + QUADRATURE_ERROR), (
        delta_hat, exact[direction], standard_error)


# -- module-level tests (imported by test_kernel_contract.py, where pytest collects them)


def contract_classes() -> list[type[KernelContract]]:
  """Every concrete subclass of ``KernelContract`` defined so far (those with a ``kernel``)."""
  found, pending = set(), [KernelContract]
  while pending:
    for subclass in pending.pop().__subclasses__():
      pending.append(subclass)
      if subclass.kernel is not None:
        found.add(subclass)
  return sorted(found, key=lambda c: (c.__module__, c.__qualname__))


def test_every_registered_kernel_has_a_contract_class():
  classes = contract_classes()
  covered = {contract.kernel for contract in classes}
  missing = [kernel.__name__ for kernel in kernels.registered() if kernel not in covered]
  assert not missing, (f'registered Monte Carlo kernels without a KernelContract test class in '
                       f'tests/montecarlo/test_kernel_contract.py: {", ".join(missing)}')
  uncollected = [c.__qualname__ for c in classes if not c.__name__.startswith('Test')]
  assert not uncollected, f'pytest does not collect these contract classes: {uncollected}'


def fingerprints(blocks_per_call: int = BLOCKS_PER_CALL) -> dict[str, dict[str, str]]:
  """The digest of every contract class's reference samples on all devices, computed in calls
  of ``blocks_per_call`` blocks per device, per direction in which its kernel draws
  participations (``has_signal``; without one, the outputs are noise and the loss is the
  kernel's ``log_ratio``, which the other direction runs too)."""
  digests = {}
  for contract in contract_classes():
    program = _program(contract())
    digests[contract.__qualname__] = {
        d: (_RUNS[contract, d].reference
            if (contract, d) in _RUNS and blocks_per_call == BLOCKS_PER_CALL
            else _reference(program, d, blocks_per_call)).digest()
        for d in DIRECTIONS if program.kernel.has_signal(d)}
  return digests


_DEVICE_SCRIPT = '''
import importlib, json, sys
sys.path[:0] = sys.argv[1:3]
import jax
import kernel_contract
for module in sys.argv[3:]:
  importlib.import_module(module)
from jaxacct import options
print(json.dumps({'devices': len(jax.devices()),
                  'fingerprints': kernel_contract.fingerprints(options.MIN_BLOCKS_PER_CALL)}))
'''


@pytest.mark.multiprocess
@pytest.mark.slow
def test_bitwise_identical_on_one_and_several_devices():
  # One subprocess for every family: its mesh spans 2 devices (4 if this process has 2), and
  # its calls hold the fewest blocks per device allowed (options.MIN_BLOCKS_PER_CALL; this
  # process's hold BLOCKS_PER_CALL); each sample's bits must not change. At one block per call
  # the multi-attribution losses moved in their last bits (XLA drops the loop over blocks).
  from devices import run_on_devices  # pylint: disable=import-outside-toplevel
  here = pathlib.Path(__file__).resolve().parent
  modules = sorted({contract.__module__ for contract in contract_classes()})
  local = {'devices': len(jax.devices()), 'fingerprints': fingerprints()}
  count = 4 if local['devices'] == 2 else 2
  remote = run_on_devices(_DEVICE_SCRIPT, count, str(here.parent), str(here), *modules)
  assert remote['devices'] == count != local['devices']
  differ = [f'{name} ({direction})' for name, digests in local['fingerprints'].items()
            for direction, digest in digests.items()
            if remote['fingerprints'][name][direction] != digest]
  assert not differ, (f'other bits on {count} devices in calls of the fewest blocks than on '
                      f'{local["devices"]}: {differ}')
