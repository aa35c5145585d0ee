"""Streaming correlated noise C⁻¹Z for DP-BandMF training (device code).

DP-BandMF releases G + C⁻¹Z (seed 000 §1–2). Two Toeplitz forms of C stream
with bounded memory:

* C banded with band c = (c₀, …, c_{m−1}) (BandMF): row t of W = C⁻¹Z solves
  Σ_{k<m} c_k W_{t−k} = Z_t, so W_t = (Z_t − Σ_{k=1}^{m−1} c_k W_{t−k}) / c₀;
* C⁻¹ banded with band h (BISR, BandInvMF): W_t = Σ_{k<m} h_k Z_{t−k}.

Both are the one recursion W_t = (Σ_k h_k Z_{t−k} − Σ_{k≥1} c_k W_{t−k}) / c₀
with c = (1) or h = (1), keeping the last rows of Z and of W: memory
O((len(h) + len(c))·d), time the same per step. Z_t is drawn from the key of step
t of the *training* stream (``keys.purpose_key(key, "training")``, disjoint from
every accounting stream), so a run resumed from a saved ``NoiseState``
reproduces the noise bit for bit.
"""

from __future__ import annotations

from typing import Any, NamedTuple

import jax
import jax.numpy as jnp

from jaxacct.montecarlo import keys as keys_lib


class NoiseState(NamedTuple):
  """The last rows of Z (len(h) − 1) and of W (len(c) − 1), newest first: params-shaped
  pytrees whose leaves have that leading axis (zeros before step 0)."""

  z_history: Any
  w_history: Any


def init_noise_state(band_lengths: tuple[int, int], params: Any) -> NoiseState:
  """Zero history for bands of lengths (len(c), len(h)) and parameters shaped like ``params``."""
  def zeros(length):
    return jax.tree_util.tree_map(
        lambda leaf: jnp.zeros((length - 1,) + jnp.shape(leaf), jnp.result_type(leaf)), params)
  c_length, h_length = band_lengths
  return NoiseState(zeros(h_length), zeros(c_length))


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


def _push(row: jax.Array, history: jax.Array) -> jax.Array:
  return jnp.concatenate([row[None], history], axis=0)[:history.shape[0]]


def _weighted(coefficients: jax.Array, history: jax.Array) -> jax.Array:
  return jnp.tensordot(coefficients.astype(history.dtype), history, axes=1,
                       precision=jax.lax.Precision.HIGHEST)


def correlated_noise(c_col: jax.Array, inverse_band: jax.Array, state: NoiseState,
                     z: Any) -> tuple[Any, NoiseState]:
  """(W_t, next state) from Z_t by the recursion of the module docstring.

  Args:
    c_col: the band (c₀, …, c_{m−1}) of C, c₀ > 0, or (1.0,) when C⁻¹ is banded.
    inverse_band: the band h of C⁻¹, or (1.0,) when C is banded.
    state: the previous rows.
    z: Z_t, shaped like the parameters.

  References:
    Choquette-Choo et al., "(Amplified) banded matrix factorization", NeurIPS
    2023, §2 (noise C⁻¹Z generated online for banded C); Kalinin, Lampert,
    arXiv 2505.12128 (banded C⁻¹); seed 000 §1.
  """
  def row(z_leaf, z_history, w_history):
    mixed = inverse_band[0].astype(z_leaf.dtype) * z_leaf + _weighted(inverse_band[1:], z_history)
    w = (mixed - _weighted(c_col[1:], w_history)) / c_col[0].astype(z_leaf.dtype)
    return w, _push(z_leaf, z_history), _push(w, w_history)

  triples = jax.tree_util.tree_map(row, z, state.z_history, state.w_history)
  pick = lambda i: jax.tree_util.tree_map(lambda _, t: t[i], z, triples)  # noqa: E731
  return pick(0), NoiseState(pick(1), pick(2))
