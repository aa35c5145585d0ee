"""Streaming correlated noise C⁻¹Z for DP-BandMF training (device code).

DP-BandMF releases G + C⁻¹Z (seed 000 §1–2). For a banded lower-triangular
Toeplitz C with band c = (c₀, …, c_{m−1}), row t of W = C⁻¹Z solves
Σ_{k<m} c_k W_{t−k} = Z_t, i.e.

    W_t = (Z_t − Σ_{k=1}^{m−1} c_k W_{t−k}) / c₀,

so only the last m − 1 rows (each shaped like the model parameters) are kept:
memory O(m·d), time O(m·d) per step. Z_t is drawn from the key of step t of
the *training* stream (``keys.purpose_key(key, "training")``, disjoint from
every accounting stream), so a run resumed from a saved ``NoiseState``
reproduces the noise bit for bit.
"""

from __future__ import annotations

from typing import Any, NamedTuple

import jax
import jax.numpy as jnp

from jaxacct.montecarlo import keys as keys_lib


class NoiseState(NamedTuple):
  """The last m − 1 noise rows W_{t−1}, …, W_{t−m+1} (newest first), a params-shaped pytree
  whose leaves have a leading axis of length m − 1 (zeros before step 0)."""

  history: Any


def init_noise_state(num_bands: int, params: Any) -> NoiseState:
  """Zero history for a band of ``num_bands`` coefficients and parameters shaped like ``params``."""
  return NoiseState(jax.tree_util.tree_map(
      lambda leaf: jnp.zeros((num_bands - 1,) + jnp.shape(leaf), jnp.result_type(leaf)), params))


def step_key(training_key: jax.Array, step: jax.Array) -> jax.Array:
  """Key of step t of the training stream: fold_in(fold_in(key, t >> 20), t & (2²⁰ − 1)).

  The same (block, index) coordinates as the accounting streams
  (``montecarlo.keys``), computed in uint32 so that it runs without x64; steps
  are int32 (< 2³¹), far beyond any training run.
  """
  t = jnp.asarray(step).astype(jnp.uint32)
  block = t >> keys_lib.KEY_BLOCK_BITS
  within = t & jnp.uint32(keys_lib.KEY_BLOCK_SIZE - 1)
  return jax.random.fold_in(jax.random.fold_in(training_key, block), within)


def standard_normal_like(key: jax.Array, params: Any) -> Any:
  """Z_t: independent N(0, 1) entries shaped like ``params`` (leaf j from fold_in(key, j))."""
  leaves, treedef = jax.tree_util.tree_flatten(params)
  draws = [jax.random.normal(jax.random.fold_in(key, j), jnp.shape(leaf), jnp.result_type(leaf))
           for j, leaf in enumerate(leaves)]
  return jax.tree_util.tree_unflatten(treedef, draws)


def correlated_noise(c_col: jax.Array, state: NoiseState, z: Any) -> tuple[Any, NoiseState]:
  """(W_t, next state) from Z_t by the banded forward recursion (module docstring).

  Args:
    c_col: the band (c₀, …, c_{m−1}) of C, c₀ > 0 (traced).
    state: the previous m − 1 rows.
    z: Z_t, shaped like the parameters.

  References:
    Choquette-Choo et al., "(Amplified) banded matrix factorization", NeurIPS
    2023, §2 (noise C⁻¹Z generated online for banded C); seed 000 §1.
  """
  tail = c_col[1:]

  def row(z_leaf, history):
    correction = jnp.tensordot(tail.astype(z_leaf.dtype), history, axes=1,
                               precision=jax.lax.Precision.HIGHEST)
    w = (z_leaf - correction) / c_col[0].astype(z_leaf.dtype)
    return w, jnp.concatenate([w[None], history], axis=0)[:history.shape[0]]

  pairs = jax.tree_util.tree_map(row, z, state.history)
  w = jax.tree_util.tree_map(lambda _, pair: pair[0], z, pairs)
  history = jax.tree_util.tree_map(lambda _, pair: pair[1], z, pairs)
  return w, NoiseState(history)
