"""Individual accounting in the training loop (seed 004 §5): the filter on device against the
float64 host filter, dropped examples contribute exactly 0, counts against a host replay of
the norms, bitwise resume, and the refusals."""

from __future__ import annotations

import dataclasses

import jax
import jax.numpy as jnp
import numpy as np
import optax
import pytest

import jaxacct
from jaxacct import individual
from jaxacct.batching import batches
from jaxacct.individual import epsilons as epsilons_lib
from jaxacct.individual import tracking as tracking_lib
from jaxacct.training import step as step_lib

M, STEPS, SIGMA, CLIP = 24, 12, 2.0, 1.0


def _loss(params, x, y):
  return 0.5 * jnp.square(jnp.dot(params['w'], x) + params['b'] - y)


def _data():
  rng = np.random.default_rng(0)
  # per-example scales spread the gradient norms around the clip norm
  scale = np.geomspace(0.05, 3.0, M).astype(np.float32)[:, None]
  return (rng.normal(size=(M, 3)).astype(np.float32) * scale,
          rng.normal(size=M).astype(np.float32) * scale[:, 0])


PARAMS = {'w': jnp.zeros(3), 'b': jnp.zeros(())}


def _run(scheme, accountant, seed=3, **options):
  x, y = _data()
  mechanism = jaxacct.MatrixMechanism(scheme, jaxacct.BandedToeplitz([1.0]), SIGMA)
  return jaxacct.training.train(_loss, PARAMS, optax.sgd(0.2), mechanism,
                                jaxacct.training.TrainingData(batches(scheme, M, seed,
                                                                      batch_size=M), x, y),
                                clip_norm=CLIP, key=jax.random.key(seed), individual=accountant,
                                run=jaxacct.training.TrainOptions(**options))


def _host_ratios(params_before, examples):
  """Clipped-norm ratios recomputed on the host (float64) at each step's parameters."""
  x, y = _data()
  ratios = []
  for params in params_before:
    w, b = (np.asarray(params[k], np.float64) for k in ('w', 'b'))
    residual = x[examples] @ w + b - y[examples]
    norms = np.abs(residual) * np.sqrt(np.sum(x[examples].astype(np.float64) ** 2, 1) + 1)
    ratios.append(np.minimum(norms, CLIP) / CLIP)
  return np.array(ratios).T  # (examples, steps)


def _trajectory(scheme, accountant):
  states = []
  result = _run(scheme, accountant, on_step=states.append)
  before = [PARAMS] + [s.params for s in states[:-1]]
  return result, states, before


FULL = jaxacct.Poisson(sampling_prob=1.0, iterations=STEPS)
BUDGET = 0.9  # about 3 worst-case steps of 1/σ = 0.5: the filter really drops


@pytest.mark.parametrize('retest', [False, True])
def test_full_batch_filter_matches_the_float64_host_filter(retest):
  accountant = individual.IndividualAccountant(delta=1e-5, filter_budget=BUDGET, retest=retest)
  result, states, before = _trajectory(FULL, accountant)
  ratios = _host_ratios(before, np.arange(M))
  host = individual.GDPFilter(BUDGET, SIGMA, retest=retest)
  host_state = host.init(M)
  tracking = result.tracking
  for t, state in enumerate(states):
    host_state, host_mask = host.step(host_state, ratios[:, t])
    active = np.asarray(state.individual.active)
    # the device only over-charges (ratio margin 2⁻¹², charges rounded up): it never admits
    # an example the exact filter drops, and differs only within that margin of the budget
    assert not np.any(active & ~host_mask)
    near = np.abs(host_state.spent + (ratios[:, t] / SIGMA) ** 2 - BUDGET**2) < 1e-3 * BUDGET**2
    assert np.all((active == host_mask) | near)
    spent = tracking.spent_mu(state.individual) ** 2
    assert np.all(spent <= BUDGET**2)  # never beyond B (the guarantee)
    assert np.all(spent >= host_state.spent - 1e-12)
    assert int(state.individual.active_counts[t]) == int(np.sum(active))
  assert 0 < int(np.sum(states[-1].individual.active)) < M  # some dropped, some not
  np.testing.assert_allclose(tracking.spent_mu(states[-1].individual),
                             np.sqrt(host_state.spent), rtol=1e-3, atol=1e-12)
  epsilons = result.individual_epsilons()
  assert np.all(epsilons <= float(individual.gdp_epsilon(BUDGET, 1e-5)) + 1e-12)


def test_a_dropped_example_contributes_exactly_zero():
  accountant = individual.IndividualAccountant(delta=1e-5, filter_budget=BUDGET)
  mechanism = jaxacct.MatrixMechanism(FULL, jaxacct.BandedToeplitz([1.0]), SIGMA)
  tracking = tracking_lib.bind(accountant, mechanism, M)
  x, y = _data()
  optimizer = optax.sgd(1.0)
  full = tracking.init()
  dropped = np.array([3, 17, 20])
  spent = np.asarray(full.spent).copy()
  spent[dropped] = tracking_lib.UNITS  # budget used up: any positive charge fails
  state = step_lib.init_state(PARAMS, optimizer, (1, 1), full._replace(spent=jnp.asarray(spent)))
  params = {'w': jnp.array([0.3, -0.2, 0.1]), 'b': jnp.array(0.05)}
  state = state._replace(params=params, opt_state=optimizer.init(params))
  def step(inputs, labels):
    return step_lib.train_step(
        state, inputs, labels, jnp.ones(M, bool),
        spec=step_lib.StepSpec(_loss, optimizer, tracking.spec),
        noise=step_lib.NoiseArgs(
            training_key=jax.random.key(0), c_col=jnp.ones(1), inverse_band=jnp.ones(1),
            noise_scale=jnp.float32(0.0), clip_norm=jnp.float32(CLIP),
            normalizer=jnp.float32(M)),
        tracking=step_lib.TrackingArgs(indices=jnp.arange(M, dtype=jnp.int32),
                                       **tracking.traced()))

  new = step(x, y)
  # whatever the dropped examples hold (even NaN) the update is bitwise the same
  poisoned_x, poisoned_y = x.copy(), y.copy()
  poisoned_x[dropped[:2]] *= 1e3
  poisoned_x[dropped[2]] = np.nan
  poisoned = step(poisoned_x, poisoned_y)
  keep = np.ones(M, bool)
  keep[dropped] = False
  total = step_lib.clipped_gradient_sum(_loss, params, x, y, jnp.asarray(keep), CLIP)
  for leaf in ('w', 'b'):  # noise off: the update is the active examples' clipped sum
    np.testing.assert_array_equal(np.asarray(new.params[leaf]),
                                  np.asarray(poisoned.params[leaf]))
    np.testing.assert_allclose(np.asarray(new.params[leaf]),
                               np.asarray(params[leaf] - total[leaf] / M), rtol=1e-5, atol=1e-7)
  assert not np.any(np.asarray(new.individual.active)[dropped])
  np.testing.assert_array_equal(np.asarray(new.individual.spent)[dropped], spent[dropped])


@pytest.mark.slow
def test_poisson_counts_match_a_host_replay_of_the_norms():
  tracked = (0, 5, 11, 23)
  scheme = jaxacct.Poisson(sampling_prob=0.25, iterations=STEPS)
  accountant = individual.IndividualAccountant(delta=1e-5, tracked=tracked, grid_size=30,
                                               inflation=6.0)
  result, _, before = _trajectory(scheme, accountant)
  ratios = _host_ratios(before, np.array(tracked))
  inflated = np.minimum(ratios * (1 + tracking_lib.RATIO_MARGIN), 1.0)
  grid = epsilons_lib.bucket_ratios(30, 6.0)
  counts = np.asarray(result.state.individual.counts)
  # every tracked example is charged every step (P7), sampled or not
  assert np.all(counts.sum(axis=1) == STEPS)
  np.testing.assert_array_equal(counts, epsilons_lib.bucket_counts(inflated, grid))
  got = result.individual_epsilons()
  want = individual.individual_epsilons(inflated, sampling_prob=0.25, noise_multiplier=SIGMA,
                                        delta=1e-5, grid_size=30, inflation=6.0)
  np.testing.assert_array_equal(got, want)
  assert np.all(got <= result.tracking.worst_case_epsilon() + 1e-12)
  assert got.min() < 0.5 * result.tracking.worst_case_epsilon()  # small norms cost less


@pytest.mark.parametrize('case', ['filter', 'poisson'])
def test_resumed_run_with_the_accountant_equals_the_uninterrupted_one(case):
  if case == 'filter':
    scheme = FULL
    accountant = individual.IndividualAccountant(delta=1e-5, filter_budget=BUDGET)
  else:
    scheme = jaxacct.Poisson(sampling_prob=0.25, iterations=STEPS)
    accountant = individual.IndividualAccountant(delta=1e-5, tracked=(1, 2, 3), grid_size=20)
  full = _run(scheme, accountant)
  saved = []
  _run(scheme, accountant, on_step=lambda s: saved.append(s) if int(s.step) == 5 else None)
  resumed = _run(scheme, accountant, state=saved[0])
  for a, b in zip(jax.tree_util.tree_leaves(full.state), jax.tree_util.tree_leaves(resumed.state)):
    np.testing.assert_array_equal(np.asarray(a), np.asarray(b))
  with pytest.raises(ValueError, match='no individual accountant'):
    _run(scheme, None, state=saved[0])
  with pytest.raises(ValueError, match='another run'):
    other = individual.IndividualAccountant(delta=1e-5, tracked=(1, 2), grid_size=20)
    _run(jaxacct.Poisson(sampling_prob=0.25, iterations=STEPS), other, state=saved[0])


def test_bminsep_with_min_sep_one_binds_as_the_equal_poisson_scheme():
  """BMinSep(min_sep=1) is Poisson sampling (one participation model): it is tracked exactly as
  the Poisson scheme is (a widening: it was refused by family before)."""
  accountant = individual.IndividualAccountant(delta=1e-5, tracked=(1, 5))
  matrix = jaxacct.BandedToeplitz([1.0])
  poisson = tracking_lib.bind(
      accountant, jaxacct.MatrixMechanism(jaxacct.Poisson(sampling_prob=0.5, iterations=4),
                                          matrix, SIGMA), M)
  for warm_start in (True, False):
    scheme = jaxacct.BMinSep(sampling_prob=0.5, iterations=4, min_sep=1, warm_start=warm_start)
    bound = tracking_lib.bind(accountant, jaxacct.MatrixMechanism(scheme, matrix, SIGMA), M)
    for field in dataclasses.fields(poisson):
      np.testing.assert_array_equal(getattr(bound, field.name), getattr(poisson, field.name))
  with pytest.raises(ValueError, match='untruncated Poisson'):
    tracking_lib.bind(accountant, jaxacct.MatrixMechanism(jaxacct.BMinSep(
        sampling_prob=0.5, iterations=4, min_sep=1, truncated_batch_size=20, dataset_size=M),
        matrix, SIGMA), M)


def test_refusals_name_the_reason():
  accountant = individual.IndividualAccountant(delta=1e-5)
  x, y = _data()

  def train(scheme, matrix, acc=accountant):
    mechanism = jaxacct.MatrixMechanism(scheme, matrix, SIGMA)
    return jaxacct.training.train(_loss, PARAMS, optax.sgd(0.1), mechanism,
                                  jaxacct.training.TrainingData(batches(scheme, M, 0,
                                                                        batch_size=M), x, y),
                                  clip_norm=CLIP, key=jax.random.key(0), individual=acc)

  with pytest.raises(ValueError, match='independent noise'):
    train(jaxacct.Poisson(sampling_prob=0.5, iterations=4), jaxacct.BandedToeplitz([1.0, 0.5]))
  with pytest.raises(ValueError, match='untruncated Poisson'):
    train(jaxacct.BMinSep(sampling_prob=0.2, iterations=4, min_sep=2),
          jaxacct.BandedToeplitz([1.0]))
  with pytest.raises(ValueError, match='full-batch'):
    train(jaxacct.Poisson(sampling_prob=0.5, iterations=4), jaxacct.BandedToeplitz([1.0]),
          individual.IndividualAccountant(delta=1e-5, filter_budget=1.0))
  with pytest.raises(ValueError, match='tracked holds index 99'):
    train(jaxacct.Poisson(sampling_prob=0.5, iterations=4), jaxacct.BandedToeplitz([1.0]),
          individual.IndividualAccountant(delta=1e-5, tracked=(1, 99)))
  with pytest.raises(TypeError, match='IndividualAccountant'):
    train(FULL, jaxacct.BandedToeplitz([1.0]), {'delta': 1e-5})
  for bad, match in (({'delta': 0.0}, 'delta'), ({'delta': 1e-5, 'filter_budget': -1.0},
                                                  'filter_budget'),
                     ({'delta': 1e-5, 'method': 'gdp'}, 'method'),
                     ({'delta': 1e-5, 'tracked': (1, 1)}, 'distinct'),
                     ({'delta': 1e-5, 'inflation': 1.0}, 'inflation')):
    with pytest.raises(ValueError, match=match):
      individual.IndividualAccountant(**bad)


_DEVICE_SCRIPT = r'''
import json, jax, jax.numpy as jnp, numpy as np, optax, jaxacct, jaxacct.training
from jaxacct import individual
from jaxacct.batching import batches
rng = np.random.default_rng(0)
x = (rng.normal(size=(24, 3)) * np.geomspace(0.05, 3.0, 24)[:, None]).astype(np.float32)
y = rng.normal(size=24).astype(np.float32)
loss = lambda p, a, b: 0.5 * jnp.square(jnp.dot(p['w'], a) - b)
out = {}
for name, scheme, accountant in (
    ('filter', jaxacct.Poisson(sampling_prob=1.0, iterations=1),
     individual.IndividualAccountant(delta=1e-5, filter_budget=0.9)),
    ('poisson', jaxacct.Poisson(sampling_prob=0.25, iterations=1),
     individual.IndividualAccountant(delta=1e-5, tracked=(0, 3, 7, 20), grid_size=20))):
  mech = jaxacct.MatrixMechanism(scheme, jaxacct.BandedToeplitz([1.0]), 2.0)
  for count in (1, 2):
    result = jaxacct.training.train(
        loss, {'w': jnp.zeros(3)}, optax.sgd(0.1), mech,
        jaxacct.training.TrainingData(batches(scheme, 24, 1, batch_size=24), x, y), clip_norm=1.0,
        key=jax.random.key(2), individual=accountant,
        run=jaxacct.training.TrainOptions(devices=jax.devices()[:count]))
    state = result.state.individual
    out[f'{name} {count}'] = [np.asarray(leaf).tolist() for leaf in state]
print(json.dumps({'devices': len(jax.devices()), 'out': out}))
'''


@pytest.mark.slow
@pytest.mark.multiprocess
def test_two_devices_record_what_one_device_records():
  # One step from the same parameters: the per-example norms, and so every charge, bucket and
  # filter decision, do not depend on how the batch is sharded.
  from devices import run_on_devices
  result = run_on_devices(_DEVICE_SCRIPT, 2)
  assert result['devices'] == 2
  for name in ('filter', 'poisson'):
    assert result['out'][f'{name} 2'] == result['out'][f'{name} 1']
  assert any(v for v in result['out']['filter 1'][0])  # charges were made


def test_low_precision_parameters_are_refused():
  scheme = jaxacct.Poisson(sampling_prob=0.5, iterations=2)
  with pytest.raises(ValueError, match='float32 or float64 parameters'):
    jaxacct.training.train(
        _loss, {'w': jnp.zeros(3, jnp.bfloat16), 'b': jnp.zeros((), jnp.bfloat16)},
        optax.sgd(0.1), jaxacct.MatrixMechanism(scheme, jaxacct.BandedToeplitz([1.0]), SIGMA),
        jaxacct.training.TrainingData(batches(scheme, M, 0, batch_size=M), *_data()),
        clip_norm=CLIP,
        key=jax.random.key(0), individual=individual.IndividualAccountant(delta=1e-5))
