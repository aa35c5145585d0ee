"""Monte Carlo privacy-loss throughput: jaxacct vs jax_privacy 2.0.0, and float32 accuracy.

Prints µs per sample (generation + loss, each direction) for

  * b-min-sep warm and cold start, n = 1000, b = 16, p = 0.5;
  * balls-in-bins, n = 1000, cycle T = 16;
  * the production shape: b-min-sep warm, n = 7200, b = 256, p = 0.03;

all with the square-root ("FHU") band c_k = Π_{j≤k}(2j−1)/(2j) (16 or 256
coefficients, normalised to ‖c‖₂ = 1) and σ = 1, in float64 and with
``dtype=jnp.float32`` kernels (jaxacct returns float64 losses either way).
When jax-privacy is installed (``pip install jax-privacy==2.0.0``; it is not among the
package's extras, and without it no ratio is printed) the same configurations run through
``jax_privacy.experimental.monte_carlo.sample_generation.get_privacy_loss_sample``
(positive_sample=True ≙ "remove", False ≙ "add"), interleaved with the jaxacct
runs (round-robin over repeats), and the ratios are printed.

Timing: every jaxacct kernel is compiled by a warm-up call first (the first
call's extra time is reported as compile time); each figure is the minimum
over ``--repeats`` timed calls, each ended by ``block_until_ready``.

It also prints this machine's floor per sample and direction,
n·(t_normal + t_logaddexp + m·t_fma), from element rates measured on (n, N)
arrays, and where the time of one jaxacct chunk goes (component timings; skip
with ``--no-components``). ``--variants`` also times benchmark-local rewrites of
two kernel steps (evidence for library speed-ups; the library is not changed).

The machine is shared: before each timed block the script waits (up to
``--wait-idle`` s) until other processes use < 0.25 cores, and it reports how
many cores they used during the block ("bg cores").

``--accuracy`` measures the float32 kernels against float64 on 10⁵ samples
drawn with the same key (the float32 path consumes the same random bits):
max |ΔL| and δ̂(ε) for both dtypes, per direction.

Usage (from the repository root):

  python benchmarks/mc_throughput.py --variants   # full throughput run (~3 min)
  python benchmarks/mc_throughput.py --quick      # smoke run, small sample counts
  python benchmarks/mc_throughput.py --accuracy --accuracy-production
                                                  # float32-vs-float64 accuracy (~2.5 min)

Results and their interpretation: benchmarks/RESULTS.md.

If ``import jaxacct`` fails, run with ``PYTHONPATH=.``.
"""

from __future__ import annotations

import argparse
import dataclasses
import json
import os
import platform
import sys
import time
from typing import Any, Callable

import numpy as np

sys.path.insert(0, os.path.dirname(os.path.dirname(os.path.abspath(__file__))))

import jax  # noqa: E402
import jax.numpy as jnp  # noqa: E402

import jaxacct  # noqa: E402

try:
  from jax_privacy import batch_selection as jp_batch_selection  # noqa: E402
  from jax_privacy.experimental.monte_carlo import (  # noqa: E402
      sample_generation as jp_sample_generation)
  try:
    from importlib.metadata import version as _pkg_version
    JAX_PRIVACY_VERSION = _pkg_version('jax-privacy')
  except Exception:  # pylint: disable=broad-except
    JAX_PRIVACY_VERSION = 'unknown'
except ImportError:
  jp_batch_selection = None
  jp_sample_generation = None
  JAX_PRIVACY_VERSION = None

DIRECTIONS = ('remove', 'add')
DTYPES = (('float64', jnp.float64), ('float32', jnp.float32))
NOISE_MULTIPLIER = 1.0


def fhu_coefficients(bands: int, normalise: bool = True) -> np.ndarray:
  """c_k = Π_{j≤k}(2j−1)/(2j), k = 0…bands−1 (optionally divided by ‖c‖₂)."""
  j = np.arange(1, bands, dtype=np.float64)
  c = np.concatenate([[1.0], np.cumprod((2.0 * j - 1.0) / (2.0 * j))])
  return c / np.linalg.norm(c) if normalise else c


@dataclasses.dataclass(frozen=True)
class Config:
  name: str
  kind: str  # 'bminsep' or 'balls_in_bins'
  iterations: int
  period: int  # min_sep b or cycle_length T
  bands: int
  sampling_prob: float = 1.0
  warm_start: bool = True
  samples: int = 4096  # jaxacct samples per timed call
  jp_samples: int = 4096  # jax_privacy samples per timed call
  production: bool = False
  truncated_batch_size: int | None = None  # Dong & Ganesh (2026) App. D (with dataset_size)
  dataset_size: int | None = None
  # multi-attribution (Dong & Ganesh (2026) §6; no jax_privacy MC)
  max_examples_per_user: int | None = None
  dense_inverse_bands: int | None = None  # dense BISR C, r-min-sep bounds (App. B; not in jax_privacy)

  @property
  def has_jax_privacy(self) -> bool:
    return self.max_examples_per_user is None and self.dense_inverse_bands is None

  def mechanism(self, noise_multiplier: float = NOISE_MULTIPLIER) -> jaxacct.MatrixMechanism:
    if self.max_examples_per_user is not None:
      scheme = jaxacct.MultiAttributionBMinSep(
          sampling_prob=self.sampling_prob, iterations=self.iterations, min_sep=self.period,
          max_examples_per_user=self.max_examples_per_user)
    elif self.kind == 'bminsep':
      scheme = jaxacct.BMinSep(sampling_prob=self.sampling_prob, iterations=self.iterations,
                               min_sep=self.period, warm_start=self.warm_start,
                               truncated_batch_size=self.truncated_batch_size,
                               dataset_size=self.dataset_size)
    else:
      scheme = jaxacct.BallsInBins(iterations=self.iterations, cycle_length=self.period)
    if self.dense_inverse_bands is not None:
      matrix = jaxacct.banded_inverse_square_root(self.iterations, self.dense_inverse_bands)
    else:
      matrix = jaxacct.BandedToeplitz(fhu_coefficients(self.bands))
    return jaxacct.MatrixMechanism(scheme, matrix, noise_multiplier)

  def jp_strategy(self):
    if self.kind == 'bminsep':
      return jp_batch_selection.BMinSepSampling(
          sampling_prob=self.sampling_prob, iterations=self.iterations, min_sep=self.period,
          warm_start=self.warm_start, truncated_batch_size=self.truncated_batch_size)
    return jp_batch_selection.BallsInBinsSampling(iterations=self.iterations,
                                                  cycle_length=self.period)


def configs(quick: bool) -> list[Config]:
  # jax_privacy vectorises its b-min-sep recursion over samples, so its µs/sample falls as the
  # batch grows (measured here: warm n=1000 remove 94 → 81 → 73 µs at 1024 → 4096 → 16384
  # samples); it is given large batches so the comparison is against its best. Its
  # balls-in-bins path loops over samples in Python, so the batch size does not matter there.
  if quick:
    s1000, jp1000, jp_bib, s7200, jp7200 = 1024, 1024, 256, 128, 128
  else:
    s1000, jp1000, jp_bib, s7200, jp7200 = 4096, 16384, 4096, 1024, 1024
  return [
      Config('bminsep-warm n=1000 b=16 p=.5', 'bminsep', 1000, 16, 16, 0.5, True, s1000, jp1000),
      Config('bminsep-cold n=1000 b=16 p=.5', 'bminsep', 1000, 16, 16, 0.5, False, s1000, jp1000),
      Config('balls-in-bins n=1000 T=16', 'balls_in_bins', 1000, 16, 16, 1.0, True, s1000,
             jp_bib),
      # Truncated b-min-sep (Dong & Ganesh (2026) App. D): n=1000, b=16, 3200 examples,
      # B=110 (p = .5 gives p0 = 1/17.5, expected batch 183 > B: truncation in most rounds).
      Config('truncated bminsep n=1000 b=16 m=3200 B=110', 'bminsep', 1000, 16, 16, 0.5, True,
             s1000, jp1000, truncated_batch_size=110, dataset_size=3200),
      Config('production n=7200 b=256 p=.03 warm', 'bminsep', 7200, 256, 256, 0.03, True, s7200,
             jp7200, production=True),
      # Multi-attribution b-min-sep (Dong & Ganesh (2026) Theorem 6.1), k_u examples per user,
      # cold start.
      *[Config(f'multi-attribution n=1000 b=16 k_u={k}', 'bminsep', 1000, 16, 16, 0.1, False,
               s1000, jp1000, max_examples_per_user=k) for k in (1, 2, 4)],
      # Dense BISR C (C⁻¹ 4-banded) under r-min-sep, r = 16: App. B bounds, O(n²)/sample.
      Config('r-min-sep dense BISR n=1000 r=16 (App. B)', 'bminsep', 1000, 16, 1000, 0.1, False,
             s1000, jp1000, dense_inverse_bands=4),
      # Dong & Ganesh (2026) §7.4 as run: truncated to B = 2048 over 14,745,600 examples,
      # expected batch 1793.
      Config('truncated production n=7200 b=256 B=2048', 'bminsep', 7200, 256, 256,
             _PRODUCTION_P, True, s7200, jp7200, truncated_batch_size=2048,
             dataset_size=14_745_600),
  ]


_PRODUCTION_P0 = 1793 / 14_745_600
# p given eligibility (Dong & Ganesh (2026) §4)
_PRODUCTION_P = _PRODUCTION_P0 / (1 - 255 * _PRODUCTION_P0)


# ----------------------------------------------------------------------------- timing helpers


def _cpu_snapshot() -> tuple[float, float, float, float] | None:
  """(busy s of all CPUs, wall s, this process's CPU s); None where /proc/stat is missing."""
  try:
    with open('/proc/stat', encoding='ascii') as fh:
      vals = [int(v) for v in fh.readline().split()[1:9]]
  except OSError:
    return None
  hz = os.sysconf('SC_CLK_TCK')
  busy = (sum(vals) - vals[3] - vals[4]) / hz
  t = os.times()
  return busy, time.monotonic(), t.user + t.system, 0.0


def others_cores(before, after) -> float | None:
  """Average number of cores other processes kept busy between two snapshots."""
  if before is None or after is None:
    return None
  wall = after[1] - before[1]
  return max(0.0, (after[0] - before[0]) - (after[2] - before[2])) / wall if wall > 0 else None


def wait_for_idle(max_wait: float, threshold: float = 0.25, log=print) -> float | None:
  """Waits (≤ max_wait s) until other processes use < ``threshold`` cores; returns their use."""
  deadline = time.monotonic() + max_wait
  while True:
    before = _cpu_snapshot()
    time.sleep(2.0)
    used = others_cores(before, _cpu_snapshot())
    if used is None or used < threshold or time.monotonic() >= deadline:
      if used is not None and used >= threshold:
        log(f'  (machine still busy: other processes use {used:.2f} cores; timing anyway)')
      return used


def _timed(fn: Callable[[], Any]) -> float:
  t0 = time.perf_counter()
  jax.block_until_ready(fn())
  return time.perf_counter() - t0


def _jaxacct_call(config: Config, mechanism, dtype, direction: str, seed: int):
  return lambda: jaxacct.sample_privacy_losses(jax.random.key(seed), mechanism, config.samples,
                                               direction, dtype=dtype)


def _jp_call(config: Config, strategy, c_col, direction: str, seed: int):
  def run():
    loss, _ = jp_sample_generation.get_privacy_loss_sample(
        strategy, NOISE_MULTIPLIER, c_col, seed=seed, positive_sample=(direction == 'remove'),
        num_samples=config.jp_samples, dataset_size=config.dataset_size)
    return loss
  return run


@dataclasses.dataclass
class Row:
  config: str
  dtype: str
  direction: str
  us_jaxacct: float
  us_jp: float | None
  compile_s: float
  others_cores: float | None = None  # cores other processes used during this block

  @property
  def ratio(self) -> float | None:
    return None if self.us_jp is None else self.us_jp / self.us_jaxacct


def _available_dtypes(mechanism, log) -> list:
  """DTYPES without float32 when the library refuses it for ``mechanism`` (the
  b-min-sep kernel's float32 is the 32-bit program, which serves exact banded C only)."""
  try:
    jaxacct.sample_privacy_losses(jax.random.key(0), mechanism, 1, 'remove',
                                  dtype=jnp.float32)
  except ValueError as refused:
    log(f'  {mechanism.scheme!r}: float32 refused ({refused})')
    return [d for d in DTYPES if d[0] != 'float32']
  return list(DTYPES)


def run_throughput(cfgs: list[Config], repeats: int, use_jp: bool, max_wait: float = 0.0,
                   log=print, statistic: str = 'min',
                   per_repeat: Callable[[Config, str], None] | None = None) -> list[Row]:
  """µs per sample of every config, dtype and direction; ``statistic`` of the interleaved
  repeats ('min' or 'median'). ``per_repeat(config, dtype name)`` runs after each timed
  jaxacct call (the matrix times the floor there, in the same minutes as the kernel)."""
  reduce = {'min': min, 'median': lambda ts: float(np.median(ts))}[statistic]
  rows: list[Row] = []
  for config in cfgs:
    mechanism = config.mechanism()
    dtypes = _available_dtypes(mechanism, log)
    c_col = fhu_coefficients(config.bands)
    use_jp_here = use_jp and config.has_jax_privacy
    strategy = config.jp_strategy() if use_jp_here else None
    for direction in DIRECTIONS:
      if max_wait > 0:
        wait_for_idle(max_wait, log=log)
      snap = _cpu_snapshot()
      # Warm-up (compilation) of both dtypes; jax_privacy needs none but gets one untimed call
      # too, so page faults / allocator growth are out of its timings as well.
      compile_s = {}
      for dname, dtype in dtypes:
        first = _timed(_jaxacct_call(config, mechanism, dtype, direction, 0))
        again = _timed(_jaxacct_call(config, mechanism, dtype, direction, 1))
        compile_s[dname] = max(0.0, first - again)
      if use_jp_here:
        _timed(_jp_call(config, strategy, c_col, direction, 0))
      times: dict[str, list[float]] = {dname: [] for dname, _ in dtypes}
      times_jp: list[float] = []
      for r in range(repeats):  # interleaved round-robin
        for dname, dtype in dtypes:
          times[dname].append(_timed(_jaxacct_call(config, mechanism, dtype, direction, 2 + r)))
          if per_repeat is not None:
            per_repeat(config, dname)
        if use_jp_here:
          times_jp.append(_timed(_jp_call(config, strategy, c_col, direction, 2 + r)))
      best = {dname: reduce(ts) for dname, ts in times.items()}
      us_jp = reduce(times_jp) / config.jp_samples * 1e6 if use_jp_here else None
      others = others_cores(snap, _cpu_snapshot())
      for dname, _ in dtypes:
        row = Row(config.name, dname, direction, best[dname] / config.samples * 1e6, us_jp,
                  compile_s[dname], others)
        rows.append(row)
        log(f'  {row.config:<38} {row.dtype:<8} {row.direction:<7} '
            f'jaxacct {row.us_jaxacct:8.2f} µs'
            + ('' if us_jp is None else f'   jax_privacy {us_jp:8.2f} µs   ×{row.ratio:6.2f}')
            + ('' if others is None else f'   (other processes: {others:.2f} cores)'))
  return rows


# ----------------------------------------------------------------------------- floor


def _min_time(fn, *args, repeats: int = 10) -> float:
  jax.block_until_ready(fn(*args))
  return min(_timed(lambda: fn(*args)) for _ in range(repeats))


def element_rates(n: int, num: int, bands: int = 16) -> dict[str, dict[str, float]]:
  """ns per element on (n, num) arrays, per dtype: exact-tail normal, jax.random.normal,
  logaddexp, and one multiply-add of a ``bands``-term shifted sum (the sliding dot product)."""
  from jaxacct.montecarlo.engine import noise  # internal; only for the floor
  rates: dict[str, dict[str, float]] = {}
  elements = n * num
  with jax.enable_x64(True):
    key = jax.random.key(0)
    for dname, dtype in DTYPES:
      exact = jax.jit(lambda k, dtype=dtype: noise.standard_normal(k, (n, num), dtype))
      plain = jax.jit(lambda k, dtype=dtype: jax.random.normal(k, (n, num), dtype))
      x = jax.random.normal(key, (n, num), dtype)
      y = jax.random.normal(jax.random.key(1), (n, num), dtype)
      lae = jax.jit(jnp.logaddexp)
      c = jnp.asarray(np.linspace(1.0, 0.1, bands), dtype)

      def shifted_sum(v, c=c):
        padded = jnp.pad(v, ((0, bands - 1), (0, 0)))
        d = c[0] * v
        for k in range(1, bands):
          d = d + c[k] * padded[k:k + n]
        return d

      fma = jax.jit(shifted_sum)
      rates[dname] = {
          'normal_exact_tail': _min_time(exact, key) / elements * 1e9,
          'normal_jax_random': _min_time(plain, key) / elements * 1e9,
          'logaddexp': _min_time(lae, x, y) / elements * 1e9,
          'exp': _min_time(jax.jit(jnp.exp), x) / elements * 1e9,
          'fma': _min_time(fma, x) / (elements * bands) * 1e9,
      }
  return rates


def floor_kernels(n: int, num: int, dtype) -> dict[str, Callable[[], Any]]:
  """Compiled thunks of the floor's element kernels on (n, num) arrays: exact-tail normals
  (per sample key, as the kernels draw them; key splitting included), exp, and a 16-tap
  shifted sum (its time / 16 is one multiply-add)."""
  from jaxacct.montecarlo.engine import noise  # internal; only for the floor
  with jax.enable_x64(True):
    key = jax.random.key(0)
    x = jax.random.normal(key, (n, num), dtype)
    c = jnp.asarray(np.linspace(1.0, 0.1, 16), dtype)

    def shifted_sum(v):
      padded = jnp.pad(v, ((0, 15), (0, 0)))
      d = c[0] * v
      for k in range(1, 16):
        d = d + c[k] * padded[k:k + n]
      return d

    # As the kernels draw them: n words per sample key, transformed as one (num, n) array.
    normal = jax.jit(lambda k: noise.standard_normals_per_key(
        jax.random.split(k, num), n, dtype))
    exp, fma = jax.jit(jnp.exp), jax.jit(shifted_sum)
    calls = {'normal_exact_tail': lambda: normal(key), 'exp': lambda: exp(x),
             'fma': lambda: fma(x)}

  def in_x64(call):
    def run():
      with jax.enable_x64(True):  # the compiled (x64) program, not a float32 retrace
        return call()
    return run
  thunks = {name: in_x64(call) for name, call in calls.items()}
  for thunk in thunks.values():
    jax.block_until_ready(thunk())
  return thunks


def floor_us(rates: dict[str, float], n: int, bands: int, normal: str = 'normal_exact_tail',
             transcendental: str = 'logaddexp'):
  """n·(t_normal + t_transcendental + m·t_fma) µs: the per-sample work of one direction.

  ``transcendental='exp'`` is the floor of the linear-domain recursion (one exp
  per round and sample); ``'logaddexp'`` the floor of the log-space one (runs A–C).
  """
  return n * (rates[normal] + rates[transcendental] + bands * rates['fma']) * 1e-3


# ----------------------------------------------------------------------------- components


def kernel_layout() -> str:
  """'time' if the library's kernels take (n, N) arrays, 'batch' if (N, n) (probed, not assumed)."""
  from jaxacct.strategies.banded_toeplitz import sliding_dot_products
  with jax.enable_x64(True):
    probe = np.zeros((3, 5))
    probe[1, 2] = 1.0
    d = np.asarray(sliding_dot_products(jnp.asarray(probe), jnp.asarray([1.0, 10.0])))
  return 'time' if d[0, 2] == 10.0 else 'batch'


def components(config: Config, chunk: int, log=print) -> dict[str, dict[str, float]]:
  """µs/sample of the pieces of one jaxacct chunk (library internals; best effort).

  The kernels' array layout (time-major (n, N) or batch-major (N, n)) is probed
  first, and every piece gets its inputs in that layout.
  Each piece is jitted on its own with materialised (row-major) inputs:
  per-sample keys, exact-tail noise, participation + C·x, the sliding dot
  products, the loss from d (b-min-sep recursion or balls-in-bins mode sums),
  ``log_ratio`` on a materialised y. "sum of parts" adds keys + noise
  (+ participation for remove) + log_ratio: what a chunk would cost if
  composing the pieces were free. "library, one chunk" is the public
  ``sample_privacy_losses`` for ``chunk`` samples (whatever its internals).
  """
  from jaxacct.conventions import Stream
  from jaxacct.strategies.banded_toeplitz import balls_in_bins_modes, sliding_dot_products
  from jaxacct.montecarlo.engine import keys as keys_lib
  from jaxacct.montecarlo.engine import kernels, noise, sampling
  from jaxacct.montecarlo.engine.kernels import balls_in_bins as bib_kernel
  from jaxacct.montecarlo.engine.kernels import bminsep as bminsep_kernel

  out: dict[str, dict[str, float]] = {}
  mechanism = config.mechanism()
  n = config.iterations
  time_major = kernel_layout() == 'time'
  log(f'  (kernel layout: {"time-major (n, N)" if time_major else "batch-major (N, n)"})')
  with jax.enable_x64(True):
    # Scheme parameters, σ and the strategy view do not depend on the kernel dtype.
    params, sigma, view = sampling.traced_params(
        mechanism, kernels.kernel_for(mechanism, np.dtype(np.float64)))
    stream = keys_lib.direction_key(jax.random.key(0), 'remove')
    first = jnp.asarray(0, jnp.int64)
    for dname, dtype in DTYPES:
      kernel = kernels.kernel_for(mechanism, np.dtype(dtype))
      res: dict[str, float] = {}
      sample_keys_fn = jax.jit(lambda k: keys_lib.sample_keys(k, first, chunk))
      res['keys'] = _min_time(sample_keys_fn, stream)
      skeys = sample_keys_fn(stream)

      def noise_fn(ks, dtype=dtype):
        nk = jax.vmap(lambda k: jax.random.fold_in(k, int(Stream.NOISE)))(ks)
        z = noise.standard_normals_per_key(nk, n, dtype)  # (N, n)
        return z.T if time_major else z

      noise_fn = jax.jit(noise_fn)
      res['noise (exact tails, per-sample keys)'] = _min_time(noise_fn, skeys)
      mean_fn = jax.jit(
          lambda ks, kernel=kernel: kernel.sample_mean(ks, params, view, 'remove')[0])
      res['participation + C·x'] = _min_time(mean_fn, skeys)
      z = noise_fn(skeys)
      mean = mean_fn(skeys).astype(dtype)
      if mean.shape != z.shape:
        mean = mean.T
      y = sigma.astype(dtype) * z + mean
      c_col = view.c_col.astype(dtype)
      sdp = jax.jit(lambda v, c_col=c_col: sliding_dot_products(v, c_col))
      res['sliding dot products'] = _min_time(sdp, y)
      d = sdp(y)
      if config.kind == 'bminsep':
        norms = view.charge('remove', n).astype(dtype)  # column norms (exact banded view)
        norms = norms[:, None] if time_major else norms[None, :]

        def rec(dd, kernel=kernel, norms=norms, dtype=dtype):
          ell = (2.0 * dd - norms) / (2.0 * jnp.square(sigma)).astype(dtype)
          return bminsep_kernel.log_ratio(ell, params.sampling_prob, kernel.min_sep,
                                          kernel.warm_start)
        rec_name = 'loss from d (ℓ + recursion)'
      else:
        modes = balls_in_bins_modes(n, config.period, view.c_col)

        def rec(dd, kernel=kernel, modes=modes):
          return bib_kernel.log_ratio(dd, sigma, kernel.cycle_length, modes)
        rec_name = 'loss from d (phase sums + logsumexp)'
      res[rec_name] = _min_time(jax.jit(rec), d)
      res['log_ratio on materialised y (sliding + loss)'] = _min_time(
          jax.jit(lambda v, kernel=kernel: sampling.log_ratio(
              kernel, v, params, sigma, view, kernels.NoInfo(), 'remove')), y)
      base = (res['keys'] + res['noise (exact tails, per-sample keys)']
              + res['log_ratio on materialised y (sliding + loss)'])
      for direction in DIRECTIONS:
        def whole(direction=direction, dtype=dtype):
          return jaxacct.sample_privacy_losses(jax.random.key(0), mechanism, chunk, direction,
                                               dtype=dtype)

        res[f'sum of parts, {direction}'] = base + (
            res['participation + C·x'] if direction == 'remove' else 0.0)
        res[f'library, one chunk (public API), {direction}'] = _min_time(whole)
      res = {k: v / chunk * 1e6 for k, v in res.items()}
      out[dname] = res
      for k, v in res.items():
        log(f'  {dname:<8} {k:<46} {v:8.2f} µs/sample')
  return out


def variants(chunk: int, log=print) -> dict[str, float]:
  """Benchmark-local rewrites of two steps of the library kernel (evidence for speed-ups).

  Written against the time-major (n, N) kernels measured in RESULTS.md; skipped
  when the library's kernels are batch-major (the rewrites are then moot).
  Nothing here changes the library: each variant re-composes library internals
  inside one jit and is checked against the library's chunk kernel.

  * balls-in-bins: ``_sum_by_phase`` as an unrolled sum of the ⌈n/T⌉ row
    slabs instead of ``reshape(-1, T, N).sum(axis=0)``;
  * b-min-sep: sliding dot products on the batch-major y (noise before its
    transpose to time-major, plus the transposed C·x for "remove") and one
    transpose of ℓ before the recursion.
  """
  from jaxacct.conventions import Stream
  from jaxacct.strategies.banded_toeplitz import balls_in_bins_modes, sliding_dot_products
  from jaxacct.montecarlo.engine import keys as keys_lib
  from jaxacct.montecarlo.engine import kernels, noise, sampling
  from jaxacct.montecarlo.engine import sharding as sharding_lib
  from jaxacct.montecarlo.engine.kernels import bminsep as bminsep_kernel

  results: dict[str, float] = {}
  if kernel_layout() != 'time':
    log('  skipped: the library kernels are batch-major; these rewrites target the time-major ones')
    return results
  n = 1000
  c = fhu_coefficients(16)
  bib = jaxacct.MatrixMechanism(jaxacct.BallsInBins(iterations=n, cycle_length=16),
                                jaxacct.BandedToeplitz(c), NOISE_MULTIPLIER)
  warm = jaxacct.MatrixMechanism(
      jaxacct.BMinSep(sampling_prob=0.5, iterations=n, min_sep=16, warm_start=True),
      jaxacct.BandedToeplitz(c), NOISE_MULTIPLIER)
  def unrolled_phase_sum(d, cycle):
    pad = -(-n // cycle) * cycle - n
    slabs = jnp.pad(d, ((0, pad), (0, 0))).reshape(-1, cycle, d.shape[1])
    total = slabs[0]
    for k in range(1, slabs.shape[0]):
      total = total + slabs[k]
    return total

  def batch_major_sliding(y_bm, c_col):
    m = c_col.shape[0]
    padded = jnp.pad(y_bm, ((0, 0), (0, m - 1)))
    out = c_col[0] * y_bm
    for k in range(1, m):
      out = out + c_col[k] * padded[:, k:k + n]
    return out

  with jax.enable_x64(True):
    first = jnp.asarray(0, jnp.int64)
    mesh = sharding_lib.sample_mesh(jax.local_devices()[:1])
    for dname, dtype in DTYPES:
      for label, mech in (('balls-in-bins', bib), ('bminsep-warm', warm)):
        kernel = kernels.kernel_for(mech, np.dtype(dtype))
        period = kernel.cycle_length if label == 'balls-in-bins' else kernel.min_sep
        params, sigma, view = sampling.traced_params(mech, kernel)
        for direction in DIRECTIONS:
          stream = keys_lib.direction_key(jax.random.key(0), direction)

          def lib(k, kernel=kernel, direction=direction, params=params, sigma=sigma, view=view):
            # The library's chunk: samples 0 … chunk − 1 as one block (draws, then losses).
            ids = jnp.zeros((1,), jnp.int64)
            outputs = sampling.block_outputs(ids, k, params, sigma, view, kernel=kernel,
                                             direction=direction, block_size=chunk, mesh=mesh)
            return sampling.block_losses(outputs, params, sigma, view, kernel=kernel,
                                         direction=direction, mesh=mesh)[0]

          @jax.jit
          def variant(k, kernel=kernel, direction=direction, params=params, sigma=sigma,
                      view=view, dtype=dtype, label=label, period=period):
            dt = jnp.dtype(dtype)
            sk = keys_lib.sample_keys(k, first, chunk)
            nk = jax.vmap(lambda q: jax.random.fold_in(q, int(Stream.NOISE)))(sk)
            z_bm = jax.vmap(lambda q: noise.standard_normal(q, (n,), dt))(nk)  # (N, n)
            c_col = view.c_col.astype(dt)
            if label == 'balls-in-bins':
              y = sigma.astype(dt) * z_bm.T
              if direction == 'remove':
                y = y + kernel.sample_mean(sk, params, view, 'remove')[0].astype(dt)
              d = sliding_dot_products(y, c_col)
              modes = balls_in_bins_modes(n, period, view.c_col)
              inner = unrolled_phase_sum(d, period)
              norms = jnp.sum(jnp.square(modes), axis=1).astype(dt)[:, None]
              scale = (1.0 / (2.0 * jnp.square(sigma))).astype(dt)
              loss = (jax.nn.logsumexp((2.0 * inner - norms) * scale, axis=0)
                      - jnp.log(period).astype(dt))
            else:
              y_bm = sigma.astype(dt) * z_bm
              if direction == 'remove':
                y_bm = y_bm + kernel.sample_mean(sk, params, view, 'remove')[0].astype(dt).T
              d_bm = batch_major_sliding(y_bm, c_col)
              norms = view.charge(direction, n).astype(dt)[None, :]
              ell = ((2.0 * d_bm - norms) * (1.0 / (2.0 * jnp.square(sigma))).astype(dt)).T
              loss = bminsep_kernel.log_ratio(ell, params.sampling_prob, period,
                                              kernel.warm_start)
            loss = loss.astype(jnp.float64)
            return loss if direction == 'remove' else -loss

          t_lib = _min_time(lib, stream) / chunk * 1e6
          t_var = _min_time(variant, stream) / chunk * 1e6
          diff = float(jnp.max(jnp.abs(lib(stream) - variant(stream))))
          what = ('unrolled phase sum' if label == 'balls-in-bins'
                  else 'batch-major sliding dot products')
          log(f'  {dname:<8} {label:<14} {direction:<7} library {t_lib:8.2f} µs   {what} '
              f'{t_var:8.2f} µs   ×{t_lib / t_var:5.2f}   max|ΔL| {diff:.1e}')
          results[f'{dname} {label} {direction}'] = {'library_us': t_lib, 'variant_us': t_var,
                                                     'max_abs_dL': diff}
  return results


# ----------------------------------------------------------------------------- accuracy


def delta_hat(losses: np.ndarray, eps: float) -> tuple[float, float]:
  """MC estimate of δ(ε) = E[(1 − e^{ε−L})₊] and its standard error."""
  terms = -np.expm1(np.minimum(eps - losses, 0.0))
  return float(terms.mean()), float(terms.std(ddof=1) / np.sqrt(terms.size))


def run_accuracy(cases: list[tuple[Config, float, list[float]]], num_samples: int, seed: int,
                 log=print) -> list[dict[str, Any]]:
  """float32 kernels vs float64 with the same key, per (config, σ, ε grid) and direction."""
  results = []
  for config, sigma, epsilons in cases:
    mechanism = config.mechanism(sigma)
    for direction in DIRECTIONS:
      key = jax.random.key(seed)
      l64 = np.asarray(jaxacct.sample_privacy_losses(key, mechanism, num_samples, direction,
                                                     dtype=jnp.float64))
      l32 = np.asarray(jaxacct.sample_privacy_losses(key, mechanism, num_samples, direction,
                                                     dtype=jnp.float32))
      diff = np.abs(l32 - l64)
      worst = int(diff.argmax())
      entry: dict[str, Any] = {
          'config': config.name, 'sigma': sigma, 'direction': direction,
          'num_samples': num_samples, 'seed': seed, 'max_abs_dL': float(diff.max()),
          'L64_at_max': float(l64[worst]), 'mean_abs_dL': float(diff.mean()),
          'rms_dL': float(np.sqrt(np.mean(np.square(l32 - l64)))),
          'mean_dL': float(np.mean(l32 - l64)),
          'max_rel_dL': float((diff / np.maximum(np.abs(l64), 1.0)).max()),
          'L64_range': [float(l64.min()), float(l64.max())], 'delta': []}
      log(f'  {config.name} σ={sigma:g} {direction}: N={num_samples} '
          f'max|ΔL|={entry["max_abs_dL"]:.3e} (at L={entry["L64_at_max"]:.2f}) '
          f'rms ΔL={entry["rms_dL"]:.2e} mean ΔL={entry["mean_dL"]:+.2e} '
          f'L∈[{l64.min():.2f}, {l64.max():.2f}]')
      for eps in epsilons:
        d64, se64 = delta_hat(l64, eps)
        d32, _ = delta_hat(l32, eps)
        rel = (d32 - d64) / d64 if d64 > 0 else float('nan')
        entry['delta'].append({'eps': eps, 'delta64': d64, 'delta32': d32, 'se64': se64,
                               'abs_change': d32 - d64, 'rel_change': rel})
        log(f'    ε={eps:<5g} δ̂64={d64:.6e} δ̂32={d32:.6e} Δ={d32 - d64:+.3e} '
            f'(rel {rel:+.2e}; MC s.e. of δ̂64 {se64:.2e})')
      results.append(entry)
  return results


# ----------------------------------------------------------------------------- reporting


def machine_info() -> dict[str, Any]:
  info = {'python': platform.python_version(), 'jax': jax.__version__,
          'jaxlib': getattr(jax.lib, '__version__', None) if hasattr(jax, 'lib') else None,
          'jax_privacy': JAX_PRIVACY_VERSION, 'numpy': np.__version__,
          'cpu_count': os.cpu_count(), 'devices': [str(d) for d in jax.devices()],
          'platform': platform.platform(), 'date': time.strftime('%Y-%m-%d %H:%M:%S %Z')}
  try:
    info['loadavg'] = os.getloadavg()
  except OSError:
    pass
  return info


def print_table(rows: list[Row], cfgs: list[Config]) -> dict[tuple[str, str], float | None]:
  header = (f'{"config":<38} {"dtype":<8} {"dir":<7} {"jaxacct µs":>11} {"jax_priv µs":>12} '
            f'{"ratio":>7} {"both dirs":>10} {"compile s":>10} {"bg cores":>9}')
  print(header)
  print('-' * len(header))
  both: dict[tuple[str, str], float | None] = {}
  for config in cfgs:
    for dname, _ in DTYPES:
      sel = [r for r in rows if r.config == config.name and r.dtype == dname]
      if not sel:
        continue
      tot = sum(r.us_jaxacct for r in sel)
      tot_jp = None if sel[0].us_jp is None else sum(r.us_jp for r in sel)
      both[(config.name, dname)] = None if tot_jp is None else tot_jp / tot
      for i, r in enumerate(sel):
        jp = '-' if r.us_jp is None else f'{r.us_jp:.2f}'
        ratio = '-' if r.ratio is None else f'{r.ratio:.2f}'
        both_s = ('' if i else ('-' if tot_jp is None else f'{tot_jp / tot:.2f}'))
        bg = '-' if r.others_cores is None else f'{r.others_cores:.2f}'
        print(f'{r.config:<38} {r.dtype:<8} {r.direction:<7} {r.us_jaxacct:11.2f} {jp:>12} '
              f'{ratio:>7} {both_s:>10} {r.compile_s:10.2f} {bg:>9}')
  return both


GOALS = {  # (production?, dtype) -> (goal, stretch)
    (False, 'float64'): (3.0, None), (True, 'float64'): (2.0, None),
    (False, 'float32'): (8.0, 10.0), (True, 'float32'): (4.0, None),
}


def print_goals(both, cfgs: list[Config]) -> list[dict[str, Any]]:
  out = []
  print('\nGoals (both directions together, vs single-process jax_privacy; goals were set for '
        'the untruncated configs only):')
  for config in cfgs:
    if config.truncated_batch_size is not None:
      continue
    for dname, _ in DTYPES:
      ratio = both.get((config.name, dname))
      if ratio is None:
        continue
      goal, stretch = GOALS[(config.production, dname)]
      status = 'met' if ratio >= goal else 'NOT met'
      if stretch is not None:
        status += f'; stretch ×{stretch:g} ' + ('met' if ratio >= stretch else 'not met')
      print(f'  {config.name:<38} {dname:<8} ×{ratio:5.2f}  goal ×{goal:g}: {status}')
      out.append({'config': config.name, 'dtype': dname, 'ratio': ratio, 'goal': goal,
                  'stretch': stretch, 'met': ratio >= goal})
  return out


# ------------------------------------------------------------------------ the --configs matrix


def matrix_configs(quick: bool) -> list[Config]:
  """The ``--configs`` matrix: p ∈ {0.05, 0.5} at n = 1000, b = 16 (warm and cold)
  and the production shape (n = 7200, b = 256) at its real p and at p = 0.03."""
  s1000, jp1000, s7200, jp7200 = (1024, 1024, 128, 128) if quick else (4096, 16384, 1024, 1024)
  out = []
  for p in (0.05, 0.5):
    for warm in (True, False):
      out.append(Config(f'bminsep-{"warm" if warm else "cold"} n=1000 b=16 p={p:g}', 'bminsep',
                        1000, 16, 16, p, warm, s1000, jp1000))
  out.append(Config(f'production n=7200 b=256 p={_PRODUCTION_P:.3g} warm', 'bminsep', 7200, 256,
                    256, _PRODUCTION_P, True, s7200, jp7200, production=True))
  out.append(Config('production n=7200 b=256 p=.03 warm', 'bminsep', 7200, 256, 256, 0.03, True,
                    s7200, jp7200, production=True))
  return out


MATRIX_GOALS = {  # (production?, dtype) -> both-directions ratio goal vs jax_privacy
    (False, 'float64'): 3.0, (True, 'float64'): 2.5,
    (False, 'float32'): 10.0, (True, 'float32'): 5.0,
}


def _program_time(program, stream_key, ids, direction: str, repeats: int) -> list[float]:
  jax.block_until_ready(program(stream_key, ids, direction))  # compile
  return [_timed(lambda: program(stream_key, ids, direction)) for _ in range(repeats)]


def sweep_cost(config: Config, num_sigmas: int, repeats: int, log=print) -> dict[str, Any]:
  """Time of ``num_sigmas`` candidates sharing one draw (``stream.SharedDraws``) against one σ
  (``sampling.OneSigma``) on the same blocks, float64, both directions; medians of interleaved
  repeats."""
  from jaxacct.montecarlo.engine import kernels, sampling, stream  # library internals (the programs)
  from jaxacct.montecarlo.engine import keys as keys_lib
  from jaxacct.montecarlo.engine.sharding import SampleMesh
  mechanism = config.mechanism()
  kernel = kernels.kernel_for(mechanism, np.dtype(np.float64))
  block = sampling.default_block_size(config.iterations)
  blocks = max(1, config.samples // block)
  mesh = SampleMesh.over(jax.local_devices())
  sigmas = np.geomspace(0.8, 1.6, num_sigmas)
  one = sampling.OneSigma(mechanism, kernel, block, mesh)
  many = stream.SharedDraws(mechanism, kernel, sigmas, block, mesh)
  out: dict[str, Any] = {'config': config.name, 'num_sigmas': num_sigmas,
                         'samples': blocks * block}
  with jax.enable_x64(True):
    ids = jnp.arange(blocks, dtype=jnp.int64)
    for direction in DIRECTIONS:
      key = keys_lib.direction_key(jax.random.key(0), direction)
      jax.block_until_ready(one(key, ids, direction))
      jax.block_until_ready(many(key, ids, direction))
      t_one, t_many = [], []
      for _ in range(repeats):
        t_one.append(_timed(lambda: one(key, ids, direction)))
        t_many.append(_timed(lambda: many(key, ids, direction)))
      one_us = float(np.median(t_one)) / (blocks * block) * 1e6
      many_us = float(np.median(t_many)) / (blocks * block) * 1e6
      out[direction] = {'one_sigma_us': one_us, 'sweep_us': many_us, 'ratio': many_us / one_us}
      log(f'  {config.name:<38} {direction:<7} one σ {one_us:8.2f} µs   {num_sigmas} σ shared '
          f'{many_us:8.2f} µs   ×{many_us / one_us:5.2f}')
  return out


def truncation_cost(quick: bool, repeats: int, log=print) -> dict[str, Any]:
  """Truncated production (B = 2048 of 14,745,600 examples) against the untruncated kernel at
  the same shape and p, float64, jaxacct only; medians of interleaved repeats."""
  samples = 128 if quick else 1024
  base = dict(kind='bminsep', iterations=7200, period=256, bands=256,
              sampling_prob=_PRODUCTION_P, warm_start=True, samples=samples, jp_samples=samples,
              production=True)
  untruncated = Config('production untruncated', **base)
  truncated = Config('production truncated B=2048', **base, truncated_batch_size=2048,
                     dataset_size=14_745_600)
  out: dict[str, Any] = {}
  for direction in DIRECTIONS:
    calls = {c.name: _jaxacct_call(c, c.mechanism(), jnp.float64, direction, 0)
             for c in (untruncated, truncated)}
    for call in calls.values():
      _timed(call)
    times: dict[str, list[float]] = {name: [] for name in calls}
    for _ in range(repeats):
      for name, call in calls.items():
        times[name].append(_timed(call))
    us = {name: float(np.median(ts)) / samples * 1e6 for name, ts in times.items()}
    ratio = us[truncated.name] / us[untruncated.name]
    out[direction] = {'untruncated_us': us[untruncated.name], 'truncated_us': us[truncated.name],
                      'ratio': ratio}
    log(f'  {direction:<7} untruncated {us[untruncated.name]:8.2f} µs   truncated '
        f'{us[truncated.name]:8.2f} µs   ×{ratio:5.2f} (goal ≤ 2)')
  return out


def run_matrix(args) -> dict[str, Any]:
  """The ``--configs`` matrix: throughput vs jax_privacy (medians of interleaved repeats), the floor
  per configuration, the cost of 16 shared σ and of truncation."""
  cfgs = matrix_configs(args.quick)
  if args.only:
    keys = [s.strip() for s in args.only.split(',')]
    cfgs = [c for c in cfgs if any(k in c.name for k in keys)]
  repeats = max(3, args.repeats or (3 if args.quick else 5))
  use_jp = (jp_sample_generation is not None) and not args.no_jax_privacy
  report: dict[str, Any] = {'repeats': repeats, 'statistic': 'median'}
  print(f'\nthroughput matrix: jax_privacy {JAX_PRIVACY_VERSION if use_jp else "not run"}; median '
        f'of {repeats} interleaved repeats; σ = 1, ‖c‖ = 1')
  floor_times: dict[tuple[str, str], list[float]] = {}
  rate_times: dict[tuple[int, str], dict[str, list[float]]] = {}
  element_kernels = {}

  def time_floor(config: Config, dname: str) -> None:
    """One timing of the floor's element kernels at this config's shape, beside its calls."""
    n = config.iterations
    num = 128 if n > 4000 else (256 if args.quick else 1024)
    if (n, dname) not in element_kernels:
      element_kernels[(n, dname)] = floor_kernels(n, num, dict(DTYPES)[dname])
    rates = {name: _timed(fn) / (n * num) * 1e9 * (1.0 / 16 if name == 'fma' else 1.0)
             for name, fn in element_kernels[(n, dname)].items()}
    for name, value in rates.items():
      rate_times.setdefault((n, dname), {}).setdefault(name, []).append(value)
    floor_times.setdefault((config.name, dname), []).append(
        floor_us(rates, n, config.bands, transcendental='exp'))

  rows = run_throughput(cfgs, repeats, use_jp, max_wait=0.0 if args.quick else args.wait_idle,
                        statistic='median', per_repeat=time_floor)
  print()
  both = print_table(rows, cfgs)
  report['rows'] = [dict(dataclasses.asdict(r), ratio=r.ratio) for r in rows]
  goals = []
  if use_jp:
    print('\ngoals (both directions, vs jax_privacy 2.0.0):')
    for config in cfgs:
      for dname, _ in DTYPES:
        ratio = both.get((config.name, dname))
        goal = MATRIX_GOALS[(config.production, dname)]
        print(f'  {config.name:<38} {dname:<8} ×{ratio:5.2f}  goal ×{goal:g}: '
              + ('met' if ratio >= goal else 'NOT met'))
        goals.append({'config': config.name, 'dtype': dname, 'ratio': ratio, 'goal': goal,
                      'met': ratio >= goal})
  report['goals'] = goals
  print('\nfloor per sample and direction = n·(t_normal + t_exp + m·t_fma) (the linear-domain '
        'recursion needs one exp per round), timed after every jaxacct call (median); ratio = '
        'measured / floor (goal ≤ 1.3 at n = 1000):')
  rates_by_shape = {f'{n} {dname}': {name: float(np.median(v)) for name, v in rates.items()}
                    for (n, dname), rates in rate_times.items()}
  for shape, rates in rates_by_shape.items():
    print(f'  rates n={shape:<14} ' + '  '.join(f'{k} {v:.3f} ns' for k, v in rates.items()))
  floors = []
  for config in cfgs:
    for dname, _ in DTYPES:
      floor = float(np.median(floor_times[(config.name, dname)]))
      measured = [r.us_jaxacct for r in rows if r.config == config.name and r.dtype == dname]
      print(f'  {config.name:<38} {dname:<8} floor {floor:8.2f} µs   measured '
            + ' / '.join(f'{m:.2f}' for m in measured)
            + f'   ×{max(measured) / floor:.2f} (worst direction)')
      floors.append({'config': config.name, 'dtype': dname, 'floor_us': floor,
                     'measured_us': measured, 'ratio_worst': max(measured) / floor})
  report['element_rates_ns'] = rates_by_shape
  report['floor'] = floors
  print('\n16 σ candidates sharing one draw vs one σ (float64; goal ≤ 6× at n = 1000, ≤ 4× at '
        'the production shape):')
  report['sweep'] = [sweep_cost(c, 16, repeats) for c in cfgs
                     if c.warm_start and (c.production or c.sampling_prob == 0.05)]
  print('\ntruncated production vs the untruncated kernel (float64, p as run):')
  report['truncation'] = truncation_cost(args.quick, repeats)
  return report


def main(argv=None) -> None:
  parser = argparse.ArgumentParser(description=__doc__.split('\n')[0])
  parser.add_argument('--quick', action='store_true', help='small sample counts (smoke run)')
  parser.add_argument('--accuracy', action='store_true',
                      help='float32-vs-float64 accuracy on --accuracy-samples samples instead of '
                           'the throughput run')
  parser.add_argument('--accuracy-samples', type=int, default=None,
                      help='default 10^5 (10^4 with --quick)')
  parser.add_argument('--accuracy-production', action='store_true',
                      help='also measure accuracy at the production shape (slow)')
  parser.add_argument('--repeats', type=int, default=None, help='timed repeats (default 5; 2 '
                      'with --quick)')
  parser.add_argument('--no-jax-privacy', action='store_true', help='skip the jax_privacy runs')
  parser.add_argument('--no-components', action='store_true', help='skip the component timings')
  parser.add_argument('--variants', action='store_true',
                      help='also time benchmark-local rewrites of two kernel steps (evidence for '
                           'possible library speed-ups)')
  parser.add_argument('--only', default=None,
                      help='comma-separated substrings: run only matching configurations')
  parser.add_argument('--configs', action='store_true',
                      help="the throughput matrix: p ∈ {0.05, 0.5} at n = 1000 (warm, cold) and the "
                           'production shape, medians of interleaved repeats, floor ratios, 16-σ '
                           'sweep and truncation cost')
  parser.add_argument('--json', default=None, help='also write the results to this JSON file')
  parser.add_argument('--wait-idle', type=float, default=120.0,
                      help='before each timed block wait up to this many seconds for other '
                           'processes to use < 0.25 cores (0: do not wait; default 120)')
  args = parser.parse_args(argv)

  cfgs = configs(args.quick)
  if args.only:
    keys = [s.strip() for s in args.only.split(',')]
    cfgs = [c for c in cfgs if any(k in c.name for k in keys)]
  info = machine_info()
  print('machine:', json.dumps(info))
  report: dict[str, Any] = {'machine': info, 'argv': sys.argv[1:]}

  if args.configs:
    report['matrix'] = run_matrix(args)
  elif args.accuracy:
    num = args.accuracy_samples or (10_000 if args.quick else 100_000)
    warm = [c for c in configs(args.quick) if c.name.startswith('bminsep-warm')][0]
    # σ = 1 is the throughput setting (large |L|, ε ≈ 16–24 at δ ~ 1e-1…1e-3); σ = 4 gives
    # a realistic range (δ ≈ 1e-1…1e-4 at ε = 1…6).
    cases = [(warm, 1.0, [4.0, 8.0, 16.0, 24.0]), (warm, 4.0, [1.0, 2.0, 4.0, 6.0])]
    if args.accuracy_production:
      prod = [c for c in configs(args.quick) if c.production][0]
      cases.append((prod, 1.0, [1.0, 2.0, 4.0, 8.0]))
    print(f'\nfloat32 kernels vs float64, same key, {num} samples per direction, ‖c‖ = 1:')
    report['accuracy'] = run_accuracy(cases, num, seed=2026)
  else:
    use_jp = (jp_sample_generation is not None) and not args.no_jax_privacy
    repeats = args.repeats or (2 if args.quick else 5)
    print(f'\njax_privacy: {JAX_PRIVACY_VERSION if use_jp else "not run"}; repeats = {repeats} '
          '(min taken); σ = 1, ‖c‖ = 1')
    for c in cfgs:
      print(f'  {c.name}: jaxacct {c.samples} samples/call, jax_privacy {c.jp_samples} '
            'samples/call')
    print('\nthroughput (µs per sample, generation + loss):')
    rows = run_throughput(cfgs, repeats, use_jp, max_wait=0.0 if args.quick else args.wait_idle)
    print()
    both = print_table(rows, cfgs)
    report['rows'] = [dict(dataclasses.asdict(r), ratio=r.ratio) for r in rows]
    if use_jp:
      report['goals'] = print_goals(both, cfgs)

    # Floor: n·(normal + logaddexp + m·fma) per sample per direction.
    chunk_1000 = 1024
    print('\nelement rates (ns/element on (n, N) arrays):')
    floors = []
    rates_by_shape = {}
    for n, num in ((1000, chunk_1000), (7200, 128)):
      if not any(c.iterations == n for c in cfgs):
        continue
      rates = element_rates(n, 256 if args.quick and n == 1000 else num)
      rates_by_shape[n] = rates
      for dname, r in rates.items():
        print(f'  n={n:<5} {dname:<8} ' + '  '.join(f'{k} {v:.3f}' for k, v in r.items()))
    print('\nfloor per sample per direction = n·(t_normal + t_logaddexp + m·t_fma):')
    for config in cfgs:
      rates = rates_by_shape[config.iterations]
      for dname, _ in DTYPES:
        f_exact = floor_us(rates[dname], config.iterations, config.bands)
        f_plain = floor_us(rates[dname], config.iterations, config.bands, 'normal_jax_random')
        measured = [r.us_jaxacct for r in rows if r.config == config.name and r.dtype == dname]
        print(f'  {config.name:<38} {dname:<8} floor {f_exact:8.2f} µs (with jax.random.normal '
              f'{f_plain:8.2f})   measured remove/add '
              + ' / '.join(f'{m:.2f}' for m in measured)
              + f'   ×{min(measured) / f_exact:.1f}–{max(measured) / f_exact:.1f} above floor')
        floors.append({'config': config.name, 'dtype': dname, 'floor_us': f_exact,
                       'floor_plain_normal_us': f_plain, 'measured_us': measured})
    report['element_rates_ns'] = rates_by_shape
    report['floor'] = floors

    if not args.no_components:
      report['components'] = {}
      for config in cfgs:
        if not (config.name.startswith('bminsep-warm') or config.kind == 'balls_in_bins'
                or config.production):
          continue
        chunk = 128 if config.production else 1024
        print(f'\ncomponents of one jaxacct chunk ({config.name}, {chunk} samples), each '
              'jitted separately with materialised inputs:')
        try:
          report['components'][config.name] = components(config, chunk)
        except Exception as exc:  # pylint: disable=broad-except  (internals may move)
          print(f'  component timing failed (internals changed?): {exc!r}')
    if args.variants:
      print('\nbenchmark-local variants of the chunk kernel (1024 samples, n = 1000):')
      try:
        report['variants'] = variants(1024)
      except Exception as exc:  # pylint: disable=broad-except  (internals may move)
        print(f'  variant timing failed (internals changed?): {exc!r}')
    try:
      report['loadavg_end'] = os.getloadavg()
    except OSError:
      pass
    print('\nload average at end:', report.get('loadavg_end'))

  if args.json:
    with open(args.json, 'w', encoding='utf-8') as fh:
      json.dump(report, fh, indent=1, default=str)


if __name__ == '__main__':
  main()
