"""PRNG key discipline: every random draw is a function of where it is drawn.

A sample's key is ``fold_in``-derived from (key, direction, block, index in
block), never from a running chain of splits, so results are bitwise identical
for any chunk size and any number of devices. ``fold_in`` takes 32-bit data, so
the global sample index g is folded as two coordinates, block = g >> 20 and
index = g & (2²⁰ − 1): indices up to 2⁵² never wrap (a single fold of g would
wrap at 2³² ≈ 4.3·10⁹ samples). Purposes (estimation, verification, training)
are folded in before the direction by the layers that own those streams; the
plain samplers use a fourth purpose, ``sampling``, so they never reproduce an
estimation or verification stream.

The 32-bit device program (``precision="float32"``, no 64-bit type on device) derives the
same keys from uint32 coordinates computed on the host (``block_coordinates``) and draws
the same random words: a 64-bit word of ``jax.random.bits(key, shape, uint64)`` is the pair
(hi, lo) of 32-bit threefry outputs that ``word_pairs`` returns, so both precisions sample
the same real-valued outputs from a key.
"""

from __future__ import annotations

import numbers

import jax
import jax.numpy as jnp
import numpy as np

from jax.extend.random import threefry_2x32

from jaxacct.conventions import DirectionStream, Purpose
from jaxacct.errors import InputError, InputTypeError

KEY_BLOCK_BITS = 20
KEY_BLOCK_SIZE = 1 << KEY_BLOCK_BITS
MAX_SAMPLE_INDEX = 1 << (KEY_BLOCK_BITS + 32)
DIRECTION_CODES = {d.name.lower(): int(d) for d in DirectionStream}


def canonicalize_key(key) -> jax.Array:
  """Returns a typed JAX key; converts a legacy ``uint32[2]`` key; rejects anything else."""
  if isinstance(key, jax.Array) and jax.dtypes.issubdtype(key.dtype, jax.dtypes.prng_key):
    if key.shape != ():
      raise InputError(f'key must be a single key (shape ()), got shape {key.shape}')
    return key
  if isinstance(key, (jax.Array, np.ndarray)) and key.dtype == np.uint32 and key.shape == (2,):
    return jax.random.wrap_key_data(jnp.asarray(key))
  raise InputTypeError(
      f'key must be a JAX PRNG key, got {key!r}; create one with jax.random.key(seed)')


# jax.random.key(seed) keeps only the low 32 bits of a seed without 64-bit types.
SEED_LIMIT = 2**32


def check_seed(name: str, value) -> int:
  """``value`` as an int seed in [0, 2**32); ``InputTypeError`` / ``InputError`` naming
  ``name`` otherwise (a larger seed would be folded onto another one's key)."""
  if isinstance(value, bool) or not isinstance(value, numbers.Integral):
    raise InputTypeError(argument=name, value=value,
                         requirement=f'must be an integer seed in [0, 2**32), got {value!r}')
  if not 0 <= int(value) < SEED_LIMIT:
    raise InputError(argument=name,
                     requirement=f'must be in [0, 2**32) (jax.random.key keeps 32 bits without '
                     f'64-bit types), got {value}', value=value)
  return int(value)


def key_from(key, name: str = 'key') -> jax.Array:
  """A typed JAX key from a key or an int seed (``jax.random.key(seed)``, the seed checked by
  ``check_seed``; STYLE §2: canonicalised once, never a default key)."""
  if isinstance(key, numbers.Integral) and not isinstance(key, bool):
    return jax.random.key(check_seed(name, key))
  return canonicalize_key(key)


def direction_key(key: jax.Array, direction: str) -> jax.Array:
  """The stream of one direction: separate draws for ``remove`` and ``add``."""
  return jax.random.fold_in(key, DIRECTION_CODES[str(direction)])


# 'sampling' is the stream of the plain samplers (sample_privacy_losses, sample_outputs).
PURPOSE_CODES = {p.name.lower(): int(p) for p in Purpose}


def check_num_samples(num_samples) -> int:
  """num_samples as int in [1, 2⁵²]: beyond 2⁵² the (block, index) coordinates would wrap."""
  from jaxacct import _validate  # local: keys stays importable on its own
  num_samples = _validate.integer_at_least('num_samples', num_samples, 1)
  if num_samples > MAX_SAMPLE_INDEX:
    raise InputError(f'num_samples must be <= 2**52 (keys would repeat beyond), got {num_samples}')
  return num_samples


def purpose_key(key: jax.Array, purpose: str | Purpose) -> jax.Array:
  """The key of one stream purpose: estimation, verification and training never share draws."""
  code = int(purpose) if isinstance(purpose, Purpose) else PURPOSE_CODES[purpose]
  return jax.random.fold_in(key, code)


def host_stream_key(key: jax.Array, purpose: str | Purpose, direction: str) -> jax.Array:
  """The root of the host-drawn part of a (purpose, direction) stream: the tilted law's
  α-tuples (``montecarlo/engine/tilted.py``), fold_in(key, TILTED_TUPLES) → purpose →
  direction. Its own level-1 code keeps it apart from every sample key of the run, and the
  purpose below it keeps estimation's tuples apart from verification's."""
  return direction_key(purpose_key(purpose_key(key, Purpose.TILTED_TUPLES), purpose), direction)


@jax.jit
def _block_key_words(stream_key, high, low):
  return jax.vmap(lambda h, l: jax.random.key_data(
      jax.random.fold_in(jax.random.fold_in(stream_key, h), l)))(high, low)


def host_block_seeds(stream_key: jax.Array, block_ids) -> list[int]:
  """Host: one 64-bit seed per block of a host-drawn stream (``host_stream_key``): the two
  words (hi, lo) of fold_in(fold_in(stream_key, block >> 32), block & (2³² − 1)) as
  hi·2³² + lo, the key of ``np.random.Philox`` for that block's generator. A block's draws are
  then a function of (key, purpose, direction, block) only, whatever call or device asks."""
  ids = np.asarray(block_ids, np.int64).reshape(-1)
  if ids.size and (ids.min() < 0 or ids.max() >= 2**52):
    raise InputError(f'block ids must be in [0, 2**52), got {ids.min()} … {ids.max()}')
  words = np.asarray(_block_key_words(stream_key, (ids >> 32).astype(np.uint32),
                                      (ids & 0xFFFFFFFF).astype(np.uint32)))
  if words.shape[-1] != 2:
    raise InputError(f'host seeds need a 2-word (threefry) key, got {words.shape[-1]} words')
  return [(int(hi) << 32) | int(lo) for hi, lo in words]


def keys_for_indices(stream_key: jax.Array, indices: jax.Array) -> jax.Array:
  """Keys of the samples with the given global indices (int64) of one stream.

  Sample g gets fold_in(fold_in(stream_key, g >> 20), g & (2²⁰ − 1)).
  """
  index = indices.astype(jnp.int64)
  block = (index >> KEY_BLOCK_BITS).astype(jnp.uint32)
  within = (index & (KEY_BLOCK_SIZE - 1)).astype(jnp.uint32)
  return jax.vmap(lambda b, i: jax.random.fold_in(jax.random.fold_in(stream_key, b), i))(
      block, within)


def sample_keys(stream_key: jax.Array, first_index: jax.Array, count: int) -> jax.Array:
  """Keys of the samples ``first_index, …, first_index + count − 1`` of a stream.

  Args:
    stream_key: the key of one (purpose, direction) stream.
    first_index: int64 scalar, global index of the first sample (traced).
    count: static number of samples.
  """
  return keys_for_indices(stream_key, first_index.astype(jnp.int64) + jnp.arange(count, dtype=jnp.int64))


def key_words(key: jax.Array) -> tuple[int, ...]:
  """The raw uint32 words of a typed key (a run's public seed, as recorded in reports)."""
  return tuple(int(w) for w in np.asarray(jax.random.key_data(key)).ravel())


def block_coordinates(block_ids, block_size: int) -> np.ndarray:
  """Host: the key coordinates of each block's first sample as uint32 (k, 2).

  Row j is (g >> 20, g & (2²⁰ − 1)) for g = block_ids[j]·block_size, the two numbers
  ``keys_for_indices`` folds in; both fit 32 bits for g < 2⁵² (``MAX_SAMPLE_INDEX``).
  """
  first = np.asarray(block_ids, np.int64) * np.int64(block_size)
  return np.stack([first >> KEY_BLOCK_BITS, first & (KEY_BLOCK_SIZE - 1)],
                  axis=-1).astype(np.uint32)


def block_keys32(stream_key: jax.Array, coordinates: jax.Array, block_size: int) -> jax.Array:
  """32-bit device code: the keys of one block's samples from its ``block_coordinates`` row.

  Equal to ``sample_keys(stream_key, first, block_size)``: the index within a key block
  carries into the key block when it passes 2²⁰ (block sizes need not divide 2²⁰).
  """
  within = coordinates[1] + jnp.arange(block_size, dtype=jnp.uint32)
  block = coordinates[0] + (within >> KEY_BLOCK_BITS)
  within = within & jnp.uint32(KEY_BLOCK_SIZE - 1)
  return jax.vmap(lambda b, i: jax.random.fold_in(jax.random.fold_in(stream_key, b), i))(
      block, within)


def word_pairs(key: jax.Array, length: int) -> tuple[jax.Array, jax.Array]:
  """32-bit device code: the words of ``jax.random.bits(key, (length,), uint64)`` as (hi, lo).

  With the partitionable threefry (JAX's default) the 64-bit word i is
  (t₁ << 32) | t₂ for (t₁, t₂) = threefry2x32(key, (0, i)); otherwise the 2·length
  outputs of threefry2x32(key, 0 … 2·length − 1) split in halves are (hi…, lo…).
  ``tests/montecarlo/test_program32.py`` checks the equality in both modes.
  """
  index = jnp.arange(length, dtype=jnp.uint32)
  if jax.config.jax_threefry_partitionable:
    counts = jnp.concatenate([jnp.zeros(length, jnp.uint32), index])
  else:
    counts = jnp.arange(2 * length, dtype=jnp.uint32)
  words = threefry_2x32(jax.random.key_data(key), counts)
  return words[:length], words[length:]


def split_in_two32(key: jax.Array) -> tuple[jax.Array, jax.Array]:
  """32-bit device code: the two keys of ``jax.random.split(key)``.

  JAX's own split lowers a 64-bit iota under the partitionable threefry; here the same
  threefry outputs come from ``word_pairs``: with the partitionable threefry, key i is the
  pair (t₁, t₂) of counter (0, i), i.e. (hi_i, lo_i); otherwise the four outputs of counters
  0 … 3 in order, i.e. (hi₀, hi₁) and (lo₀, lo₁). Tested equal in both modes.
  """
  hi, lo = word_pairs(key, 2)
  if jax.config.jax_threefry_partitionable:
    pairs = (jnp.stack([hi[0], lo[0]]), jnp.stack([hi[1], lo[1]]))
  else:
    pairs = (hi, lo)
  impl = jax.random.key_impl(key)
  return tuple(jax.random.wrap_key_data(pair, impl=impl) for pair in pairs)
