"""Binomial draws per lane and round (the truncated b-min-sep hot path): jaxacct vs jax.random.

Times n = 1000 rounds × N = 1024 lanes inside a ``lax.scan`` (as the batch-size
sampler runs them: one draw per sample per round, per-lane keys), for the
benchmark's truncated config (count 3000, p = 1/2) and the Dong & Ganesh (2026) §7.4
production shape (count 14.3·10⁶, p = 1.25·10⁻⁴). Prints ns per draw and the
ratio. Run: ``python benchmarks/binomial.py``.
"""

from __future__ import annotations

import os
import sys
import time

sys.path.insert(0, os.path.dirname(os.path.dirname(os.path.abspath(__file__))))

import jax  # noqa: E402
import jax.numpy as jnp  # noqa: E402

from jaxacct.montecarlo.engine import binomial  # noqa: E402
from jaxacct.montecarlo.engine import keys as keys_lib  # noqa: E402

ROUNDS, LANES, REPEATS = 1000, 1024, 5


def _jax_random(keys, counts, prob):
  return jax.vmap(lambda k, c: jax.random.binomial(k, c, prob, dtype=jnp.float64))(
      keys, counts.astype(jnp.float64)).astype(jnp.int64)


def _scan(sampler, prob):
  def run(keys, counts):
    def step(_, i):
      return None, sampler(jax.vmap(lambda k: jax.random.fold_in(k, i))(keys), counts, prob)
    return jax.lax.scan(step, None, jnp.arange(ROUNDS, dtype=jnp.uint32))[1]
  return jax.jit(run)


def _table_scan(table, prob):
  def run(keys, counts):
    uniforms = binomial.table_uniforms(keys, ROUNDS)
    def step(_, xs):
      i, u = xs
      return None, binomial.table_binomial(
          u, counts, prob, table, lambda: jax.vmap(lambda k: jax.random.fold_in(k, i))(keys))
    return jax.lax.scan(step, None, (jnp.arange(ROUNDS, dtype=jnp.uint32), uniforms))[1]
  return jax.jit(run)


def _best(fn, *args) -> float:
  jax.block_until_ready(fn(*args))
  best = float('inf')
  for _ in range(REPEATS):
    start = time.perf_counter()
    jax.block_until_ready(fn(*args))
    best = min(best, time.perf_counter() - start)
  return best / (ROUNDS * LANES) * 1e9


def main() -> None:
  print(f'jax {jax.__version__}; {ROUNDS} rounds × {LANES} lanes in lax.scan; best of {REPEATS}')
  with jax.enable_x64(True):
    keys = keys_lib.sample_keys(jax.random.key(0), jnp.asarray(0, jnp.int64), LANES)
    # Tables as the batch-size sampler builds them: a row per count around 377, or one row
    # (K = 14.28e6) plus a Binomial(count − K, p) remainder.
    cases = (('count 377, p 0.5', 377, 0.5, (230, 294, 0.5, 0)),
             ('production: count 14.3e6, p 1.25e-4', 14_290_000, 1.25e-4,
              (14_283_059, 1, 1.25e-4, 31_875)))
    for label, count, prob, table_args in cases:
      counts = jnp.full((LANES,), count, jnp.int64)
      ours = _best(_scan(binomial.binomial, prob), keys, counts)
      table = _best(_table_scan(binomial.inversion_table(*table_args), prob), keys, counts)
      theirs = _best(_scan(_jax_random, prob), keys, counts)
      print(f'  {label:<38} jaxacct BTRS {ours:7.1f} ns/draw   table {table:7.1f} ns/draw   '
            f'jax.random.binomial {theirs:7.1f} ns/draw   (×{theirs / ours:4.2f}, '
            f'×{theirs / table:4.2f})')


if __name__ == '__main__':
  main()
