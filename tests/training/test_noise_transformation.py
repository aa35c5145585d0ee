"""``jaxacct.training.noise_transformation``: DP-BandMF noise as an optax transformation (issue 32).

Oracles: ``train`` itself (the gradient its optimiser receives, recorded, at zero clipped
gradients: then it is the noise alone, bit for bit); the dense triangular solve C⁻¹Z of
scipy on C built from its definition (Toeplitz from c, or the strategy's dense entries for
BISR), with Z regenerated from the documented key derivation written out with raw
``jax.random`` calls; the exact covariance (σκ)²·C⁻¹C⁻ᵀ; a host NumPy replay of a user's
clip–noise–SGD loop.
"""

import jax
import jax.numpy as jnp
import numpy as np
import optax
import pytest
import scipy.linalg

import jaxacct
import jaxacct.training
from jaxacct.batching import batches
from jaxacct.conventions import Purpose

M, SIGMA, CLIP = 40, 0.7, 1.3
BANDED_C = (1.5, 0.6, 0.3)  # c₀ ≠ 1: the division by c₀ is exercised, not skipped
FORMS = ('banded C', 'BISR')


def _mechanism(form: str, n: int) -> jaxacct.MatrixMechanism:
  scheme = jaxacct.BMinSep(sampling_prob=0.15, iterations=n, min_sep=3)
  matrix = (jaxacct.BandedToeplitz(BANDED_C) if form == 'banded C'
            else jaxacct.banded_inverse_square_root(n, 3))  # inverse band (1, −1/2, −1/8)
  return jaxacct.MatrixMechanism(scheme, matrix, SIGMA)


def _dense_c(mechanism: jaxacct.MatrixMechanism, n: int) -> np.ndarray:
  """C from its definition: Toeplitz from c (banded C), the dense entries (BISR)."""
  if isinstance(mechanism.matrix, jaxacct.BandedToeplitz):
    column = np.zeros(n)
    column[:len(BANDED_C)] = BANDED_C
    return scipy.linalg.toeplitz(column, np.zeros(n))
  return np.asarray(mechanism.matrix.entries, np.float64)


def _oracle_z(key, n: int, shapes) -> list[np.ndarray]:
  """Z (n × leaf size per leaf, float64) from the documented derivation, without jaxacct:
  step t of the training stream is fold_in(fold_in(fold_in(key, TRAINING), t >> 20),
  t & (2²⁰ − 1)), and leaf j draws from fold_in(step key, j)."""
  stream = jax.random.fold_in(key, int(Purpose.TRAINING))
  rows = []
  for t in range(n):
    step = jax.random.fold_in(jax.random.fold_in(stream, t >> 20), t & (2**20 - 1))
    rows.append([np.asarray(jax.random.normal(jax.random.fold_in(step, j), shape, jnp.float64))
                 .ravel() for j, shape in enumerate(shapes)])
  return [np.stack([row[j] for row in rows]) for j in range(len(shapes))]


def _run(update, state, updates_per_step):
  outputs = []
  for updates in updates_per_step:
    out, state = update(updates, state)
    outputs.append(out)
  return outputs, state


def _recorder() -> optax.GradientTransformation:
  """An 'optimiser' whose state is the gradient it was last given; parameters stay put."""
  return optax.GradientTransformation(
      lambda params: jax.tree_util.tree_map(jnp.zeros_like, params),
      lambda updates, state, params=None: (jax.tree_util.tree_map(jnp.zeros_like, updates),
                                           updates))


@pytest.mark.parametrize('form', FORMS)
def test_adds_bit_for_bit_the_noise_train_adds(form):
  n = 5
  mechanism = _mechanism(form, n)
  x = np.random.default_rng(0).normal(size=(M, 3)).astype(np.float32)
  y = np.zeros(M, np.float32)
  # Zero per-example gradients: train's optimiser then receives (0 + σκW_t)/B̄, the noise alone
  # (no clipped sum to fuse with), which the transformation must reproduce exactly.
  zero_loss = lambda p, a, b: 0.0 * (jnp.dot(p['w'], a) + p['b'] - b)  # noqa: E731
  params = {'w': jnp.zeros(3, jnp.float32), 'b': jnp.zeros((), jnp.float32)}
  recorded = []
  result = jaxacct.training.train(zero_loss, params, _recorder(), mechanism,
                                  jaxacct.training.TrainingData(batches(mechanism.scheme, M, 1,
                                                                        batch_size=20), x, y),
                                  clip_norm=CLIP, key=jax.random.key(7),
                                  run=jaxacct.training.TrainOptions(
                                      on_step=lambda s: recorded.append(
                                          jax.tree_util.tree_map(np.asarray, s.opt_state))))
  # B̄ = p₀·m, p₀ = p/(1 + (b − 1)p) under warm-start b-min-sep: 40·0.15/1.3 ≈ 4.615, not a
  # power of two, so a division rounded differently would show.
  assert result.normalizer == pytest.approx(M * 0.15 / 1.3, rel=1e-12)

  tx = jaxacct.training.noise_transformation(mechanism, key=jax.random.key(7), clip_norm=CLIP,
                                             normalizer=result.normalizer)
  zeros = jax.tree_util.tree_map(jnp.zeros_like, params)
  outputs, state = _run(jax.jit(tx.update), tx.init(params), [zeros] * n)
  assert len(recorded) == n
  for t in range(n):
    for leaf in ('w', 'b'):
      np.testing.assert_array_equal(np.asarray(outputs[t][leaf]), recorded[t][leaf])
    assert np.any(recorded[t]['w'] != 0)  # the noise is on
  assert int(state.step) == int(result.state.step) == n
  for ours, trains in zip(jax.tree_util.tree_leaves(state.noise),
                          jax.tree_util.tree_leaves(result.state.noise)):
    np.testing.assert_array_equal(np.asarray(ours), np.asarray(trains))


@pytest.mark.parametrize('form', FORMS)
def test_equals_the_dense_solve_of_c_inverse_z(form):
  n, key = 8, jax.random.key(11)
  mechanism = _mechanism(form, n)
  shapes = ((3,), (2, 2))
  rng = np.random.default_rng(1)
  with jax.enable_x64(True):
    params = {'a': jnp.zeros(shapes[0], jnp.float64), 'b': jnp.zeros(shapes[1], jnp.float64)}
    sums = [{'a': rng.normal(size=shapes[0]), 'b': rng.normal(size=shapes[1])} for _ in range(n)]
    tx = jaxacct.training.noise_transformation(mechanism, key=key, clip_norm=CLIP)
    outputs, state = _run(jax.jit(tx.update), tx.init(params), sums)
    z = _oracle_z(key, n, shapes)
  c = _dense_c(mechanism, n)
  for j, leaf in enumerate(('a', 'b')):
    got = np.stack([np.asarray(out[leaf]).ravel() for out in outputs])
    assert got.dtype == np.float64
    want = np.stack([s[leaf].ravel() for s in sums]) + SIGMA * CLIP * scipy.linalg.solve_triangular(
        c, z[j], lower=True)
    # Both sides are float64 evaluations of the same linear map: rounding of n = 8 steps of a
    # 3-term recursion with |coefficients| ≤ 1.5 is ~1e-14; a wrong band, key, scale or leaf
    # order is off by O(1).
    np.testing.assert_allclose(got, want, rtol=1e-12, atol=1e-12)
  assert int(state.step) == n and state.step.dtype == jnp.int32


@pytest.mark.parametrize('form', FORMS)
def test_noise_covariance_is_sigma_kappa_squared_c_inverse_c_inverse_transpose(form):
  # The dense-solve test proves noise = σκC⁻¹Z for Z drawn from the documented keys; this one
  # checks the law end to end (distinct keys per step, the scale), over 20 000 keys.
  n, num = 6, 20_000
  mechanism = _mechanism(form, n)

  def path(key):
    tx = jaxacct.training.noise_transformation(mechanism, key=key, clip_norm=CLIP)
    def step(state, _):
      noise, state = tx.update(jnp.zeros((), jnp.float32), state)
      return state, noise
    return jax.lax.scan(step, tx.init(jnp.zeros((), jnp.float32)), None, length=n)[1]

  w = np.asarray(jax.jit(jax.vmap(path))(jax.random.split(jax.random.key(0), num)), np.float64)
  c_inv = np.linalg.inv(_dense_c(mechanism, n))
  want = (SIGMA * CLIP)**2 * c_inv @ c_inv.T
  # s.e. of a Gaussian sample covariance: sqrt((Σ_ii Σ_jj + Σ_ij²)/N); 5 s.e. over 21 entries
  # fails a correct implementation with probability < 1e-5 (and the key is fixed).
  standard_error = np.sqrt((np.outer(np.diag(want), np.diag(want)) + want**2) / num)
  assert np.all(np.abs(np.cov(w.T) - want) < 5 * standard_error)


@pytest.mark.parametrize('form', FORMS)
def test_resumes_bit_for_bit_from_a_saved_state(form):
  n, cut, key = 7, 3, jax.random.key(5)
  mechanism = _mechanism(form, n)
  params = {'w': jnp.zeros((2, 3), jnp.float32), 'b': jnp.zeros(2, jnp.float32)}
  rng = np.random.default_rng(2)
  sums = [jax.tree_util.tree_map(lambda p: rng.normal(size=p.shape).astype(np.float32), params)
          for _ in range(n)]
  tx = jaxacct.training.noise_transformation(mechanism, key=key, clip_norm=CLIP, normalizer=6.0)
  update = jax.jit(tx.update)
  full, full_state = _run(update, tx.init(params), sums)

  _, state = _run(update, tx.init(params), sums[:cut])
  saved = jax.tree_util.tree_map(np.asarray, state)  # e.g. what a checkpoint writes
  assert all(isinstance(leaf, np.ndarray) for leaf in jax.tree_util.tree_leaves(saved))
  # A new process: a fresh transformation (its own compile) and the restored arrays. Its key
  # seeds init only: the restored state carries the run's key data, so another key changes
  # nothing (the documented contract; a state alone resumes its noise).
  fresh = jaxacct.training.noise_transformation(mechanism, key=jax.random.key(999),
                                                clip_norm=CLIP, normalizer=6.0)
  rest, rest_state = _run(jax.jit(fresh.update), jax.tree_util.tree_map(jnp.asarray, saved),
                          sums[cut:])
  for got, want in zip(jax.tree_util.tree_leaves((rest, rest_state)),
                       jax.tree_util.tree_leaves((full[cut:], full_state))):
    np.testing.assert_array_equal(np.asarray(got), np.asarray(want))
  assert int(rest_state.step) == n


def _linear_loss(params, x, y):
  return 0.5 * jnp.square(jnp.dot(params['w'], x) + params['b'] - y)


def test_a_user_loop_with_optax_chain_under_jit_matches_a_host_replay():
  n, lr, normalizer, key = 5, 0.3, 3.0, jax.random.key(9)
  mechanism = _mechanism('banded C', n)
  rng = np.random.default_rng(3)
  x, y = rng.normal(size=(4, 3)) * 2, rng.normal(size=4)
  masks = rng.random(size=(n, 4)) < 0.7
  with jax.enable_x64(True):
    tx = optax.chain(jaxacct.training.noise_transformation(mechanism, key=key, clip_norm=CLIP,
                                                           normalizer=normalizer),
                     optax.sgd(lr))

    @jax.jit
    def step(params, opt_state, mask):
      total = jaxacct.training.clipped_gradient_sum(_linear_loss, params, x, y, mask, CLIP)
      updates, opt_state = tx.update(total, opt_state, params)
      return optax.apply_updates(params, updates), opt_state

    params = {'w': jnp.zeros(3, jnp.float64), 'b': jnp.zeros((), jnp.float64)}
    opt_state = tx.init(params)
    for mask in masks:
      params, opt_state = step(params, opt_state, jnp.asarray(mask))
    z_b, z_w = _oracle_z(key, n, ((), (3,)))  # leaves in tree order: 'b', then 'w'
  assert isinstance(opt_state[0], jaxacct.training.NoiseTransformationState)
  assert int(opt_state[0].step) == n

  # Host replay: θ ← θ − lr·(Σ_e mask_e·clip(∇ℓ_e, κ) + σκ(C⁻¹Z)_t)/B̄, the noise densely.
  c = _dense_c(mechanism, n)
  noise_w = SIGMA * CLIP * scipy.linalg.solve_triangular(c, z_w, lower=True)
  noise_b = SIGMA * CLIP * scipy.linalg.solve_triangular(c, z_b, lower=True)[:, 0]
  w, b = np.zeros(3), 0.0
  for t, mask in enumerate(masks):
    residual = x @ w + b - y
    grads = np.concatenate([residual[:, None] * x, residual[:, None]], axis=1)
    scale = np.minimum(1.0, CLIP / np.maximum(np.linalg.norm(grads, axis=1), 1e-300)) * mask
    total = scale @ grads
    w = w - lr * (total[:3] + noise_w[t]) / normalizer
    b = b - lr * (total[3] + noise_b[t]) / normalizer
  # float64 on both sides; 5 steps of a 4-example linear model move rounding to ~1e-15.
  np.testing.assert_allclose(np.asarray(params['w']), w, rtol=1e-10, atol=1e-12)
  np.testing.assert_allclose(float(params['b']), b, rtol=1e-10, atol=1e-12)


def test_refuses_bad_arguments_naming_them():
  mechanism = _mechanism('banded C', 6)
  key = jax.random.key(0)
  make = jaxacct.training.noise_transformation
  dense = np.tril(np.ones((6, 6))) + np.diag(np.arange(1.0, 7.0))  # not Toeplitz: no band
  other = jaxacct.MatrixMechanism(jaxacct.BMinSep(sampling_prob=0.15, iterations=6, min_sep=2),
                                  jaxacct.LowerTriangular(dense), 1.0)
  with pytest.raises(jaxacct.InputError,
                     match=r'mechanism\.matrix \(LowerTriangular\) in O\(bands·d\).*not Toeplitz'):
    make(other, key=key, clip_norm=1.0)
  with pytest.raises(jaxacct.InputTypeError, match='mechanism must be a jaxacct.MatrixMechanism'):
    make(mechanism.matrix, key=key, clip_norm=1.0)
  for bad in (0.0, -1.0, float('nan'), float('inf')):
    with pytest.raises(jaxacct.InputError, match='clip_norm must be finite and > 0'):
      make(mechanism, key=key, clip_norm=bad)
  with pytest.raises(TypeError, match="'clip_norm'"):
    make(mechanism, key=key)  # pylint: disable=missing-kwoa
  with pytest.raises(TypeError, match="'key'"):
    make(mechanism, clip_norm=1.0)  # pylint: disable=missing-kwoa
  for bad in (None, 0):
    with pytest.raises(jaxacct.InputTypeError, match='key must be a JAX PRNG key'):
      make(mechanism, key=bad, clip_norm=1.0)
  with pytest.raises(jaxacct.InputError, match='normalizer must be finite and > 0'):
    make(mechanism, key=key, clip_norm=1.0, normalizer=0.0)
  # Updates that do not fit the state's history (another model, or an edited band) are refused
  # at trace time, naming the history.
  tx = make(mechanism, key=key, clip_norm=1.0)
  state = tx.init(jnp.zeros(3, jnp.float32))
  with pytest.raises(jaxacct.InputError, match=r'state\.noise\.w_history holds shape \(2, 3\).*'
                                               r'need \(2, 4\)'):
    tx.update(jnp.zeros(4, jnp.float32), state)
  edited = state._replace(coefficients=state.coefficients._replace(c_col=jnp.ones(2)))
  with pytest.raises(jaxacct.InputError, match=r'w_history holds shape \(2, 3\).*need \(1, 3\)'):
    tx.update(jnp.zeros(3, jnp.float32), edited)
