"""DP-BandMF training pieces: streamed noise, clipping and masking, the loop's checks (issue 7).

Oracles: the dense solve C⁻¹Z (noise), a hand-written numpy clipped sum
(clipping/masking) and the exact covariance C⁻¹C⁻ᵀ (within 5 standard errors
of the sample covariance, s.e._ij = sqrt((Σ_ii Σ_jj + Σ_ij²)/N)).
"""

import jax
import jax.numpy as jnp
import numpy as np
import optax
import pytest

import jaxacct
from jaxacct.batching import batches
from jaxacct.training import noise as noise_lib
from jaxacct.training import step as step_lib

C_COL = np.array([1.0, 0.6, 0.3])


def _stream(key, params, steps, c_col=C_COL, inverse_band=(1.0,)):
  state = noise_lib.init_noise_state((len(c_col), len(inverse_band)), params)
  rows, zs = [], []
  for t in range(steps):
    z = noise_lib.standard_normal_like(noise_lib.step_key(key, jnp.asarray(t)), params)
    w, state = noise_lib.correlated_noise(jnp.asarray(c_col), jnp.asarray(inverse_band), state, z)
    rows.append(w)
    zs.append(z)
  return rows, zs


@pytest.mark.parametrize('form', ['banded C', 'banded inverse (BISR)'])
def test_streamed_noise_equals_the_dense_solve(form):
  n = 8
  params = {'a': jnp.zeros(3), 'b': jnp.zeros((2, 2))}
  if form == 'banded C':
    bands = dict(c_col=C_COL)
    c = np.asarray(jaxacct.BandedToeplitz(C_COL).materialize(n))
  else:
    bisr = jaxacct.banded_inverse_square_root(n, 3)
    bands = dict(c_col=(1.0,), inverse_band=bisr.inverse_band())
    c = bisr.entries
    np.testing.assert_allclose(bisr.inverse_band(), [1.0, -0.5, -0.125], rtol=1e-12)
  with jax.enable_x64(True):
    params = jax.tree_util.tree_map(lambda x: x.astype(jnp.float64), params)
    rows, zs = _stream(jax.random.key(1), params, n, **bands)
    for leaf in ('a', 'b'):
      z = np.stack([np.asarray(r[leaf]).ravel() for r in zs])
      w = np.stack([np.asarray(r[leaf]).ravel() for r in rows])
      np.testing.assert_allclose(w, np.linalg.solve(c, z), rtol=1e-12, atol=1e-12)


def test_streamed_noise_covariance_is_c_inverse_c_inverse_transpose():
  n, num = 6, 20_000
  keys = jax.random.split(jax.random.key(0), num)

  def one(key):
    rows, _ = _stream(key, jnp.zeros(()), n)
    return jnp.stack(rows)

  with jax.enable_x64(True):
    w = np.asarray(jax.jit(jax.vmap(one))(keys))
  c_inv = np.linalg.inv(np.asarray(jaxacct.BandedToeplitz(C_COL).materialize(n)))
  want = c_inv @ c_inv.T
  standard_error = np.sqrt((np.outer(np.diag(want), np.diag(want)) + want**2) / num)
  assert np.all(np.abs(np.cov(w.T) - want) < 5 * standard_error)


def _linear_loss(params, x, y):
  return 0.5 * jnp.square(jnp.dot(params['w'], x) + params['b'] - y)


def test_padding_contributes_zero_even_when_its_gradient_is_not_finite():
  x = np.array([[1.0, 2.0, 3.0], [np.inf, 0.0, 0.0]])
  params = {'w': np.ones(3), 'b': np.array(0.0)}
  got = step_lib.clipped_gradient_sum(_linear_loss, params, x, np.zeros(2), np.array([True, False]),
                                      100.0)
  want = step_lib.clipped_gradient_sum(_linear_loss, params, x[:1], np.zeros(1), np.array([True]),
                                       100.0)
  np.testing.assert_allclose(got['w'], want['w'])
  assert np.all(np.isfinite(got['w']))


def test_clipped_masked_sum_equals_a_hand_computed_one():
  rng = np.random.default_rng(0)
  x, y = rng.normal(size=(5, 3)) * 3, rng.normal(size=5)
  params = {'w': np.array([0.5, -1.0, 0.2]), 'b': np.array(0.1)}
  mask = np.array([True, True, False, True, True])
  clip = 1.5
  got = step_lib.clipped_gradient_sum(_linear_loss, params, x, y, mask, clip)
  want_w, want_b = np.zeros(3), 0.0
  for e in range(5):
    residual = x[e] @ params['w'] + params['b'] - y[e]
    g = np.concatenate([residual * x[e], [residual]])
    g = g * min(1.0, clip / np.linalg.norm(g)) * mask[e]
    want_w, want_b = want_w + g[:3], want_b + g[3]
  np.testing.assert_allclose(got['w'], want_w, rtol=1e-5)
  np.testing.assert_allclose(got['b'], want_b, rtol=1e-5)


def test_noise_off_step_is_sgd_on_the_clipped_mean():
  rng = np.random.default_rng(1)
  x, y = rng.normal(size=(4, 3)).astype(np.float32), rng.normal(size=4).astype(np.float32)
  params = {'w': jnp.ones(3), 'b': jnp.zeros(())}
  optimizer = optax.sgd(0.1)
  state = step_lib.init_state(params, optimizer, (3, 1))
  mask = jnp.array([True, True, True, False])
  new = step_lib.train_step(state, x, y, mask, spec=step_lib.StepSpec(_linear_loss, optimizer),
                            noise=step_lib.NoiseArgs(training_key=jax.random.key(0),
                                                     c_col=jnp.asarray(C_COL, jnp.float32),
                                                     inverse_band=jnp.ones(1, jnp.float32),
                                                     noise_scale=jnp.float32(0.0),
                                                     clip_norm=jnp.float32(1.0),
                                                     normalizer=jnp.float32(2.5)))
  total = step_lib.clipped_gradient_sum(_linear_loss, params, x, y, mask, 1.0)
  for leaf in ('w', 'b'):
    np.testing.assert_allclose(new.params[leaf], params[leaf] - 0.1 * total[leaf] / 2.5,
                               rtol=1e-6)
  assert int(new.step) == 1


def _setup(m=40, n=5):
  scheme = jaxacct.BMinSep(sampling_prob=0.1, iterations=n, min_sep=2)
  mechanism = jaxacct.MatrixMechanism(scheme, jaxacct.BandedToeplitz([1.0, 0.5]), 1.0)
  rng = np.random.default_rng(0)
  data = rng.normal(size=(m, 3)).astype(np.float32), rng.normal(size=m).astype(np.float32)
  return scheme, mechanism, data


def test_dense_strategies_train_only_when_their_inverse_is_banded():
  scheme, _, (x, y) = _setup(n=6)
  params = {'w': jnp.zeros(3), 'b': jnp.zeros(())}
  kwargs = dict(clip_norm=1.0, key=jax.random.key(0))
  bisr = jaxacct.MatrixMechanism(scheme, jaxacct.banded_inverse_square_root(6, 2), 1.0)
  result = jaxacct.training.train(_linear_loss, params, optax.sgd(0.1), bisr,
                                  jaxacct.training.TrainingData(batches(scheme, 40, 0,
                                                                        batch_size=20), x, y),
                                  **kwargs)
  assert int(result.state.step) == 6
  dense = np.tril(np.ones((6, 6))) + np.diag(np.arange(1.0, 7.0))  # not Toeplitz: no band
  assert jaxacct.LowerTriangular(dense).inverse_band() is None
  other = jaxacct.MatrixMechanism(scheme, jaxacct.LowerTriangular(dense), 1.0)
  with pytest.raises(TypeError, match='banded'):
    jaxacct.training.train(_linear_loss, params, optax.sgd(0.1), other,
                           jaxacct.training.TrainingData(batches(scheme, 40, 0, batch_size=20), x,
                                                         y),
                           **kwargs)


def test_loop_checks_its_inputs():
  scheme, mechanism, (x, y) = _setup()
  params = {'w': jnp.zeros(3), 'b': jnp.zeros(())}
  it = batches(scheme, 40, 0, batch_size=20)
  kwargs = dict(clip_norm=1.0, key=jax.random.key(0))
  other = jaxacct.BMinSep(sampling_prob=0.2, iterations=5, min_sep=2)
  with pytest.raises(ValueError, match='disagree'):
    jaxacct.training.train(_linear_loss, params, optax.sgd(0.1), mechanism,
                           jaxacct.training.TrainingData(batches(other, 40, 0, batch_size=20), x,
                                                         y),
                           **kwargs)
  with pytest.raises(ValueError, match='40 examples|dataset_size'):
    jaxacct.training.train(_linear_loss, params, optax.sgd(0.1), mechanism,
                           jaxacct.training.TrainingData(it, x[:30], y[:30]), **kwargs)
  with pytest.raises(ValueError, match='clip_norm'):
    jaxacct.training.train(_linear_loss, params, optax.sgd(0.1), mechanism,
                           jaxacct.training.TrainingData(it, x, y), clip_norm=0.0,
                           key=jax.random.key(0))
  with pytest.raises(ValueError, match='per-example'):
    jaxacct.training.train(lambda p, a, b: a * p['w'], params, optax.sgd(0.1), mechanism,
                           jaxacct.training.TrainingData(it, x, y), **kwargs)
  with pytest.raises(ValueError, match='below one example'):
    tiny = jaxacct.BMinSep(sampling_prob=0.01, iterations=5, min_sep=2)
    jaxacct.training.train(_linear_loss, params, optax.sgd(0.1),
                           jaxacct.MatrixMechanism(tiny, mechanism.matrix, 1.0),
                           jaxacct.training.TrainingData(batches(tiny, 40, 0, batch_size=20), x, y),
                           **kwargs)


def test_resumed_run_reproduces_the_uninterrupted_one():
  scheme, mechanism, (x, y) = _setup()
  params = {'w': jnp.zeros(3), 'b': jnp.zeros(())}
  run = dict(clip_norm=1.0, key=jax.random.key(3))
  full = jaxacct.training.train(_linear_loss, params, optax.adam(0.05), mechanism,
                                jaxacct.training.TrainingData(batches(scheme, 40, 9,
                                                                      batch_size=20), x, y),
                                **run)
  saved = []
  jaxacct.training.train(_linear_loss, params, optax.adam(0.05), mechanism,
                         jaxacct.training.TrainingData(batches(scheme, 40, 9, batch_size=20), x, y),
                         **run,
                         run=jaxacct.training.TrainOptions(
                             on_step=lambda s: saved.append(s) if int(s.step) == 2 else None))
  resumed = jaxacct.training.train(_linear_loss, params, optax.adam(0.05), mechanism,
                                   jaxacct.training.TrainingData(batches(scheme, 40, 9,
                                                                         batch_size=20), x, y),
                                   **run, run=jaxacct.training.TrainOptions(state=saved[0]))
  for leaf in ('w', 'b'):
    np.testing.assert_array_equal(np.asarray(full.state.params[leaf]),
                                  np.asarray(resumed.state.params[leaf]))
  # Resuming on the same iterator object replays its batches (no mixing of two runs).
  it = batches(scheme, 40, 9, batch_size=20)
  cut = jaxacct.training.train(_linear_loss, params, optax.adam(0.05), mechanism,
                               jaxacct.training.TrainingData(it, x, y), **run,
                               run=jaxacct.training.TrainOptions(state=saved[0]))
  np.testing.assert_array_equal(np.asarray(cut.state.params['w']), np.asarray(full.state.params['w']))
  wrong = saved[0]._replace(noise=saved[0].noise._replace(
      w_history=jax.tree_util.tree_map(lambda h: h[:0], saved[0].noise.w_history)))
  with pytest.raises(ValueError, match='bands'):
    jaxacct.training.train(_linear_loss, params, optax.adam(0.05), mechanism,
                           jaxacct.training.TrainingData(batches(scheme, 40, 9, batch_size=20), x,
                                                         y),
                           **run, run=jaxacct.training.TrainOptions(state=wrong))


_DEVICE_SCRIPT = r'''
import json, jax, jax.numpy as jnp, numpy as np, optax, jaxacct, jaxacct.training
from jaxacct.batching import batches
scheme = jaxacct.BMinSep(sampling_prob=0.2, iterations=6, min_sep=2)
mech = jaxacct.MatrixMechanism(scheme, jaxacct.BandedToeplitz([1.0, 0.5]), 1.0)
rng = np.random.default_rng(0)
x, y = rng.normal(size=(40, 3)).astype(np.float32), rng.normal(size=40).astype(np.float32)
loss = lambda p, a, b: 0.5 * jnp.square(jnp.dot(p['w'], a) - b)
out = {}
for count in (1, 2):
  result = jaxacct.training.train(
      loss, {'w': jnp.zeros(3)}, optax.sgd(0.1), mech,
      jaxacct.training.TrainingData(batches(scheme, 40, 1, batch_size=20), x, y), clip_norm=1.0,
      key=jax.random.key(2), run=jaxacct.training.TrainOptions(devices=jax.devices()[:count]))
  out[count] = np.asarray(result.state.params['w']).tolist()
  out[f'{count} used'] = len(result.state.params['w'].sharding.device_set)
print(json.dumps({'devices': len(jax.devices()), 'w': out}))
'''


@pytest.mark.slow
@pytest.mark.multiprocess
def test_two_devices_train_the_same_model_as_one():
  from devices import run_on_devices
  result = run_on_devices(_DEVICE_SCRIPT, 2)
  assert result['devices'] == 2 and result['w']['2 used'] == 2 and result['w']['1 used'] == 1
  # Same batches and noise; only the cross-device sum order differs (float32 rounding).
  np.testing.assert_allclose(result['w']['2'], result['w']['1'], rtol=1e-5, atol=1e-6)
  assert np.any(np.asarray(result['w']['1']) != 0)
