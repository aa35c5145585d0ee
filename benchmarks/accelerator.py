"""The production path on whatever backend JAX sees, in one call.

For each Monte Carlo family and precision, prints the samples/s of the verification program
(one draw shared by 1 and by 8 noise multipliers, as ``verify`` runs it; the fastest of 15
calls of one block per device after compiling), the float32/float64
ratio, and whether the compiled 32-bit program holds any 64-bit type on this backend. It
then checks, on this backend, the float32 accuracy assumptions that the certified margin
rests on (``jaxacct/montecarlo/engine/margin.py``): exp, expm1, log, log1p, 1/x, logaddexp and the
noise transform (ndtri on 2·10⁷ tail probabilities; ``--exhaustive`` sweeps all 5.4·10⁸
float32 inputs, as ``tests/montecarlo/test_program32.py`` does on CPU). A failed assumption is
printed as FAIL: float32 verification must not be trusted on that backend until the margin's
constants are raised.

Runs in under 5 minutes on a 2-core CPU (most of it compiling); on a GPU or TPU the shapes are
the same, so the first accelerator this project gets measures the production shape
(n = 7200, b = 256, 256 bands) in one call:

  python benchmarks/accelerator.py [--exhaustive] [--skip-production]
"""

from __future__ import annotations

import argparse
import re
import time

import jax
import jax.numpy as jnp
import numpy as np
from scipy import special

import jaxacct
from jaxacct import BandedToeplitz, square_root_coefficients
from jaxacct.montecarlo.engine import kernels, margin, noise, program32, sharding
from jaxacct.montecarlo.evr import plan

U = 2.0**-24
_WIDE = re.compile(r'\b(f64|s64|u64|c128)\[')


def _families(production: bool):
  def mech(scheme, bands):
    return jaxacct.MatrixMechanism(scheme, BandedToeplitz(square_root_coefficients(bands)), 1.0)
  rows = [
      ('poisson n=1000', mech(jaxacct.Poisson(sampling_prob=0.05, iterations=1000), 1)),
      ('b-min-sep cold n=1000 b=16', mech(jaxacct.BMinSep(sampling_prob=0.05, iterations=1000,
                                                          min_sep=16), 16)),
      ('b-min-sep warm n=1000 b=16', mech(jaxacct.BMinSep(sampling_prob=0.05, iterations=1000,
                                                          min_sep=16, warm_start=True), 16)),
      ('balls-in-bins n=1000 T=16', mech(jaxacct.BallsInBins(iterations=1000, cycle_length=16),
                                         16)),
      ('cyclic Poisson n=1000 T=16', mech(jaxacct.CyclicPoisson(
          sampling_prob=0.5, iterations=1000, cycle_length=16), 16)),
      ('multi-attribution k=4 b=16', mech(jaxacct.MultiAttributionBMinSep(
          sampling_prob=0.01, iterations=1000, min_sep=16, max_examples_per_user=4), 16)),
      ('LowerTriangular b-min-sep n=256', jaxacct.MatrixMechanism(
          jaxacct.BMinSep(sampling_prob=0.05, iterations=256, min_sep=16, warm_start=True),
          jaxacct.LowerTriangular(BandedToeplitz(square_root_coefficients(16)).materialize(256)),
          1.0)),
      ('truncated b-min-sep b=16', mech(jaxacct.BMinSep(
          sampling_prob=0.05, iterations=1000, min_sep=16, truncated_batch_size=70,
          dataset_size=1000), 16)),
  ]
  if production:
    rows.append(('production n=7200 b=256 warm', mech(jaxacct.BMinSep(
        sampling_prob=0.03, iterations=7200, min_sep=256, warm_start=True), 256)))
  return rows


def _has_wide_types(mechanism) -> bool:
  """True when a compiled 32-bit block program of ``mechanism`` holds a 64-bit type."""
  with jax.enable_x64(True):
    mesh = sharding.SampleMesh.over(jax.local_devices()[:1])
    kernel = kernels.kernel_for(mechanism, np.dtype(np.float32))
    program = program32.Program32(mechanism, kernel, np.asarray([1.0, 1.5]), 64, mesh)
    params, view, sigmas, kappas = program._inputs
    stream = jax.random.key(0)
    with program32.scope():
      texts = [program32.block_components.lower(
          program._coordinates(0, 1), stream, params, view, kernel=kernel, direction='remove',
          block_size=64, mesh=mesh.mesh).compile().as_text()]
      mean, z, info = program._components(stream, 0, 1, 'remove')
      texts.append(program32.block_losses_for_sigmas.lower(
          mean, z, info, sigmas, kappas, params, view, kernel=kernel, direction='remove',
          mesh=mesh.mesh).compile().as_text())
  return any(_WIDE.search(text) for text in texts)


def throughput(production: bool) -> None:
  print(f'backend {jax.default_backend()}, {jax.local_device_count()} local device(s): '
        'samples/s of the verification program (one draw, K σ)')
  print(f'{"family":32s} {"K":>2s} {"float64":>12s} {"float32":>12s} {"ratio":>6s}  64-bit types')
  for name, mechanism in _families(production):
    refused = program32.refusal(mechanism, kernels.kernel_for(mechanism, np.dtype(np.float32)))
    wide = 'n/a' if refused else ('FOUND' if _has_wide_types(mechanism) else 'none')
    for k in (1, 8):
      rates = {}
      for dtype in ('float64', 'float32'):
        if dtype == 'float32' and refused:
          continue
        rates[dtype] = 1.0 / plan.seconds_per_sample(mechanism, np.dtype(dtype), k, calls=15,
                                                      statistic=np.min)
      f32 = rates.get('float32')
      print(f'{name:32s} {k:2d} {rates["float64"]:12,.0f} '
            + (f'{f32:12,.0f} {f32 / rates["float64"]:6.2f}' if f32 else f'{"—":>12s} {"—":>6s}')
            + f'  {wide}', flush=True)
    if refused:
      print(f'  float32: {refused}')


def _ulps(fn, reference, x) -> float:
  x = np.asarray(x, np.float32)
  with jax.enable_x64(False):
    got = np.asarray(jax.jit(fn)(x)).astype(np.float64)
  exact = reference(x.astype(np.float64))
  return float(np.max(np.abs(got - exact) / np.abs(exact)) / U)


def assumptions(exhaustive: bool) -> None:
  print('float32 assumptions of the margin on this backend (measured ≤ assumed):')
  rng = np.random.default_rng(0)
  x = rng.uniform(-87.0, 88.0, 10**7)
  positive = np.exp(rng.uniform(-80.0, 80.0, 10**7))
  positive = positive[np.abs(np.log(positive)) > 1e-2]
  small = rng.uniform(1e-30, 0.5, 10**7)
  rows = [('exp', _ulps(jnp.exp, np.exp, x), margin.EXP_ULPS),
          ('expm1 (x ≤ 0)', _ulps(jnp.expm1, np.expm1, -np.abs(x[np.abs(x) > 1e-30])),
           margin.EXPM1_ULPS),
          ('log', _ulps(jnp.log, np.log, positive), margin.LOG_ULPS),
          ('log1p(−x)', _ulps(lambda v: jnp.log1p(-v), lambda v: np.log1p(-v), small),
           margin.LOG_ULPS),
          ('1/x', _ulps(lambda v: 1.0 / v, lambda v: 1.0 / v, positive), margin.DIVIDE_ULPS)]
  worst = 0.0
  for p in (2.4e-6, 1e-5, 1e-6, 0.05, 0.5, 0.999999):
    log_q = np.float32(np.log1p(-p))
    v = np.concatenate([rng.uniform(-60.0, 30.0, 10**6),
                        np.log(p) + rng.uniform(-0.5, 0.5, 10**6)]).astype(np.float32)
    with jax.enable_x64(False):
      got = np.asarray(jax.jit(jnp.logaddexp)(log_q, v)).astype(np.float64)
    exact = np.logaddexp(np.float64(log_q), v.astype(np.float64))
    posterior = np.exp(v - exact)
    # The assumption: ≤ LOGADDEXP_ULPS·scale + u|Δ|π (margin.py); measured in units of scale.
    scale = U * (np.abs(exact) + np.minimum(1.0, 2.0 * posterior))
    difference = U * np.abs(v.astype(np.float64) - np.float64(log_q)) * posterior
    worst = max(worst, float(np.max((np.abs(got - exact) - difference) / scale)))
  rows.append(('logaddexp(log q, v) − u|Δ|π', worst, margin.LOGADDEXP_ULPS))
  below_one = rng.uniform(0.999, 1.0, 10**6).astype(np.float32)
  rows.append(('log just below 1 (relative)', _ulps(jnp.log, np.log, below_one[below_one < 1]),
               margin.LOG_ULPS))
  near_one = rng.uniform(1.0, 3.0, 10**7).astype(np.float32)
  with jax.enable_x64(False):
    got = np.asarray(jax.jit(jnp.log)(near_one)).astype(np.float64)
  exact = np.log(near_one.astype(np.float64))
  rows.append(('log on [1, 3] (absolute, in u)', float(np.max(np.abs(got - exact)) / U),
               margin.LOG_ULPS))
  dense = 0.0
  for n in (256, 2048):  # LowerTriangular views: any-order products, γ_n (margin step 4)
    c = np.tril(rng.uniform(0.0, 1.0, (n, n))).astype(np.float32)
    y = (rng.standard_normal((512, n)) * np.exp(rng.uniform(-8, 8, (512, 1)))).astype(np.float32)
    with jax.enable_x64(False):
      got = np.asarray(jax.jit(lambda a, b: jnp.matmul(
          a, b, precision=jax.lax.Precision.HIGHEST))(y, c)).astype(np.float64)
    exact = y.astype(np.float64) @ c.astype(np.float64)
    bound = margin.gamma(n) * (np.abs(y).astype(np.float64) @ c.astype(np.float64))
    dense = max(dense, float(np.max(np.abs(got - exact) / bound)))
  rows.append(('dense matmul / γ_n bound', dense, 1.0))
  transform = jax.jit(lambda u: -jax.scipy.special.ndtri(u))
  low, high = (int(np.float32(v).view(np.uint32)) for v in (2.0**-66, 0.5))
  step = 1 << 24
  starts = (range(low, high + 1, step) if exhaustive
            else np.linspace(low, high - (1 << 20), 20).astype(np.int64))
  size = step if exhaustive else 1 << 20
  ndtri = 0.0
  with jax.enable_x64(False):
    for start in starts:
      u = np.arange(int(start), min(int(start) + size, high + 1), dtype=np.uint32).view(np.float32)
      z = np.asarray(transform(u)).astype(np.float64)
      exact = -special.ndtri(u.astype(np.float64))
      ndtri = max(ndtri, float(np.max(np.abs(z - exact) / (U * (1.0 + np.abs(z))))))
  rows.append(('ndtri + rounding of u (noise)', ndtri + 3.8, noise.NORMAL32_ERROR_ULPS))
  for name, measured, assumed in rows:
    print(f'  {name:30s} {measured:6.2f} ≤ {assumed:4.1f}  {"ok" if measured <= assumed else "FAIL"}')


def main() -> None:
  parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
  parser.add_argument('--exhaustive', action='store_true',
                      help='check ndtri on every float32 input (~30 s on a CPU)')
  parser.add_argument('--skip-production', action='store_true',
                      help='leave out the n = 7200, 256-band shape (its compile is the longest)')
  args = parser.parse_args()
  started = time.perf_counter()
  throughput(not args.skip_production)
  assumptions(args.exhaustive)
  print(f'done in {time.perf_counter() - started:.0f} s')


if __name__ == '__main__':
  main()
