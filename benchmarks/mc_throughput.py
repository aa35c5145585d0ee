"""Monte Carlo privacy-loss throughput: jaxacct vs jax_privacy 2.0.0, and float32 accuracy.

Prints µs per sample (generation + loss, each direction) for

  * b-min-sep warm and cold start, n = 1000, b = 16, p = 0.5;
  * balls-in-bins, n = 1000, cycle T = 16;
  * the production shape: b-min-sep warm, n = 7200, b = 256, p = 0.03;

all with the square-root ("FHU") band c_k = Π_{j≤k}(2j−1)/(2j) (16 or 256
coefficients, normalised to ‖c‖₂ = 1) and σ = 1, in float64 and with
``dtype=jnp.float32`` kernels (jaxacct returns float64 losses either way).
When jax-privacy is installed the same configurations run through
``jax_privacy.experimental.monte_carlo.sample_generation.get_privacy_loss_sample``
(positive_sample=True ≙ "remove", False ≙ "add"), interleaved with the jaxacct
runs (round-robin over repeats), and the ratios are printed.

Timing: every jaxacct kernel is compiled by a warm-up call first (the first
call's extra time is reported as compile time); each figure is the minimum
over ``--repeats`` timed calls, each ended by ``block_until_ready``.

It also prints this machine's floor per sample and direction,
n·(t_normal + t_logaddexp + m·t_fma), from element rates measured on (n, N)
arrays, and (``--components``, on by default) where the time of one jaxacct
chunk goes.

``--accuracy`` measures the float32 kernels against float64 on 10⁵ samples
drawn with the same key (the float32 path consumes the same random bits):
max |ΔL| and δ̂(ε) for both dtypes, per direction.

Usage (from the repository root):

  python benchmarks/mc_throughput.py            # full throughput run
  python benchmarks/mc_throughput.py --quick    # smoke run, small sample counts
  python benchmarks/mc_throughput.py --accuracy # float32-vs-float64 accuracy

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
  from jax_privacy.experimental.monte_carlo import sample_generation as jp_sample_generation  # noqa: E402
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

  def mechanism(self) -> jaxacct.MatrixMechanism:
    if self.kind == 'bminsep':
      scheme = jaxacct.BMinSep(sampling_prob=self.sampling_prob, iterations=self.iterations,
                               min_sep=self.period, warm_start=self.warm_start)
    else:
      scheme = jaxacct.BallsInBins(iterations=self.iterations, cycle_length=self.period)
    return jaxacct.MatrixMechanism(scheme, jaxacct.BandedToeplitz(fhu_coefficients(self.bands)),
                                   NOISE_MULTIPLIER)

  def jp_strategy(self):
    if self.kind == 'bminsep':
      return jp_batch_selection.BMinSepSampling(
          sampling_prob=self.sampling_prob, iterations=self.iterations, min_sep=self.period,
          warm_start=self.warm_start)
    return jp_batch_selection.BallsInBinsSampling(iterations=self.iterations,
                                                  cycle_length=self.period)


def configs(quick: bool) -> list[Config]:
  s1000, s7200, jp7200 = (1024, 128, 128) if quick else (4096, 512, 256)
  return [
      Config('bminsep-warm n=1000 b=16 p=.5', 'bminsep', 1000, 16, 16, 0.5, True, s1000, s1000),
      Config('bminsep-cold n=1000 b=16 p=.5', 'bminsep', 1000, 16, 16, 0.5, False, s1000, s1000),
      Config('balls-in-bins n=1000 T=16', 'balls_in_bins', 1000, 16, 16, 1.0, True, s1000,
             s1000),
      Config('production n=7200 b=256 p=.03 warm', 'bminsep', 7200, 256, 256, 0.03, True, s7200,
             jp7200, production=True),
  ]


# ----------------------------------------------------------------------------- timing helpers


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
        num_samples=config.jp_samples)
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

  @property
  def ratio(self) -> float | None:
    return None if self.us_jp is None else self.us_jp / self.us_jaxacct


def run_throughput(cfgs: list[Config], repeats: int, use_jp: bool, log=print) -> list[Row]:
  rows: list[Row] = []
  for config in cfgs:
    mechanism = config.mechanism()
    c_col = fhu_coefficients(config.bands)
    strategy = config.jp_strategy() if use_jp else None
    for direction in DIRECTIONS:
      # Warm-up (compilation) of both dtypes; jax_privacy needs none but gets one untimed call
      # too, so page faults / allocator growth are out of its timings as well.
      compile_s = {}
      for dname, dtype in DTYPES:
        first = _timed(_jaxacct_call(config, mechanism, dtype, direction, 0))
        again = _timed(_jaxacct_call(config, mechanism, dtype, direction, 1))
        compile_s[dname] = max(0.0, first - again)
      if use_jp:
        _timed(_jp_call(config, strategy, c_col, direction, 0))
      best = {dname: float('inf') for dname, _ in DTYPES}
      best_jp = float('inf')
      for r in range(repeats):  # interleaved round-robin
        for dname, dtype in DTYPES:
          best[dname] = min(best[dname],
                            _timed(_jaxacct_call(config, mechanism, dtype, direction, 2 + r)))
        if use_jp:
          best_jp = min(best_jp, _timed(_jp_call(config, strategy, c_col, direction, 2 + r)))
      us_jp = best_jp / config.jp_samples * 1e6 if use_jp else None
      for dname, _ in DTYPES:
        row = Row(config.name, dname, direction, best[dname] / config.samples * 1e6, us_jp,
                  compile_s[dname])
        rows.append(row)
        log(f'  {row.config:<38} {row.dtype:<8} {row.direction:<7} '
            f'jaxacct {row.us_jaxacct:8.2f} µs'
            + ('' if us_jp is None else f'   jax_privacy {us_jp:8.2f} µs   ×{row.ratio:6.2f}'))
  return rows


# ----------------------------------------------------------------------------- floor


def _min_time(fn, *args, repeats: int = 5) -> float:
  jax.block_until_ready(fn(*args))
  return min(_timed(lambda: fn(*args)) for _ in range(repeats))


def element_rates(n: int, num: int, bands: int = 16) -> dict[str, dict[str, float]]:
  """ns per element on (n, num) arrays, per dtype: exact-tail normal, jax.random.normal,
  logaddexp, and one multiply-add of a ``bands``-term shifted sum (the sliding dot product)."""
  from jaxacct.montecarlo import noise  # internal; only for the floor
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
          'fma': _min_time(fma, x) / (elements * bands) * 1e9,
      }
  return rates


def floor_us(rates: dict[str, float], n: int, bands: int, normal: str = 'normal_exact_tail'):
  return n * (rates[normal] + rates['logaddexp'] + bands * rates['fma']) * 1e-3


# ----------------------------------------------------------------------------- components


def components(config: Config, chunk: int, log=print) -> dict[str, dict[str, float]]:
  """µs/sample of the pieces of one jaxacct chunk (internals; best effort).

  Times, each as its own jitted function with materialised inputs: per-sample
  keys, exact-tail noise, participation + C·x, the sliding dot products, the
  loss recursion (from d), and the library's fused chunk kernel per direction.
  """
  from jaxacct.montecarlo import keys as keys_lib
  from jaxacct.montecarlo import losses, noise, participation, sampling
  from jaxacct.montecarlo._spec import kernel_spec

  out: dict[str, dict[str, float]] = {}
  mechanism = config.mechanism()
  n = config.iterations
  with jax.enable_x64(True):
    p, sigma, matrix = sampling._traced_params(mechanism)  # pylint: disable=protected-access
    stream = keys_lib.direction_key(jax.random.key(0), 'remove')
    first = jnp.asarray(0, jnp.int64)
    for dname, dtype in DTYPES:
      spec = kernel_spec(mechanism, np.dtype(dtype))
      res: dict[str, float] = {}
      sample_keys_fn = jax.jit(lambda k: keys_lib.sample_keys(k, first, chunk))
      res['keys'] = _min_time(sample_keys_fn, stream)
      skeys = sample_keys_fn(stream)

      def noise_fn(ks, dtype=dtype):
        nk = jax.vmap(lambda k: jax.random.fold_in(k, 2))(ks)
        return jax.vmap(lambda k: noise.standard_normal(k, (n,), dtype))(nk).T

      noise_fn = jax.jit(noise_fn)
      res['noise (exact tails, per-sample keys)'] = _min_time(noise_fn, skeys)
      mean_fn = jax.jit(lambda ks, spec=spec: participation.sample_mean(spec, ks, p, matrix))
      res['participation + C·x'] = _min_time(mean_fn, skeys)
      y = (sigma.astype(dtype) * noise_fn(skeys) + mean_fn(skeys).astype(dtype))
      c_col = matrix.c_col.astype(dtype)
      sdp = jax.jit(lambda v: losses.sliding_dot_products(v, c_col))
      res['sliding dot products'] = _min_time(sdp, y)
      d = sdp(y)
      if config.kind == 'bminsep':
        norms = matrix.column_squared_norms(n).astype(dtype)[:, None]

        def rec(dd, spec=spec, norms=norms, dtype=dtype):
          ell = (2.0 * dd - norms) / (2.0 * jnp.square(sigma)).astype(dtype)
          return losses.bminsep_log_ratio(ell, p, spec.period, spec.warm_start)
      else:
        modes = participation.balls_in_bins_modes(n, config.period, matrix.c_col)

        def rec(dd, spec=spec, modes=modes):
          return losses.balls_in_bins_log_ratio(dd, sigma, spec.period, modes)
      res['loss from d (recursion / mode sums)'] = _min_time(jax.jit(rec), d)
      res['log_ratio (sliding + loss), unfused input'] = _min_time(
          jax.jit(lambda v, spec=spec: losses.log_ratio(spec, v, p, sigma, matrix)), y)
      for direction in DIRECTIONS:
        fused = lambda k, spec=spec, direction=direction: sampling._sample_chunk(  # pylint: disable=protected-access
            k, first, p, sigma, matrix, spec=spec, chunk=chunk, direction=direction)
        res[f'library chunk kernel, {direction}'] = _min_time(fused, stream)
      res = {k: v / chunk * 1e6 for k, v in res.items()}
      out[dname] = res
      for k, v in res.items():
        log(f'  {dname:<8} {k:<44} {v:8.2f} µs/sample')
  return out


# ----------------------------------------------------------------------------- accuracy


def delta_hat(losses: np.ndarray, eps: float) -> tuple[float, float]:
  """MC estimate of δ(ε) = E[(1 − e^{ε−L})₊] and its standard error."""
  terms = -np.expm1(np.minimum(eps - losses, 0.0))
  return float(terms.mean()), float(terms.std(ddof=1) / np.sqrt(terms.size))


def run_accuracy(cfgs: list[Config], num_samples: int, epsilons: list[float], seed: int,
                 log=print) -> list[dict[str, Any]]:
  results = []
  for config in cfgs:
    mechanism = config.mechanism()
    for direction in DIRECTIONS:
      key = jax.random.key(seed)
      l64 = np.asarray(jaxacct.sample_privacy_losses(key, mechanism, num_samples, direction,
                                                     dtype=jnp.float64))
      l32 = np.asarray(jaxacct.sample_privacy_losses(key, mechanism, num_samples, direction,
                                                     dtype=jnp.float32))
      diff = np.abs(l32 - l64)
      entry: dict[str, Any] = {
          'config': config.name, 'direction': direction, 'num_samples': num_samples,
          'seed': seed, 'max_abs_dL': float(diff.max()), 'mean_abs_dL': float(diff.mean()),
          'max_rel_dL': float((diff / np.maximum(np.abs(l64), 1.0)).max()),
          'L64_range': [float(l64.min()), float(l64.max())], 'delta': []}
      log(f'  {config.name} {direction}: N={num_samples} max|ΔL|={entry["max_abs_dL"]:.3e} '
          f'mean|ΔL|={entry["mean_abs_dL"]:.3e} L∈[{l64.min():.2f}, {l64.max():.2f}]')
      for eps in epsilons:
        d64, se64 = delta_hat(l64, eps)
        d32, _ = delta_hat(l32, eps)
        entry['delta'].append({'eps': eps, 'delta64': d64, 'delta32': d32, 'se64': se64,
                               'abs_change': d32 - d64,
                               'rel_change': (d32 - d64) / d64 if d64 > 0 else float('nan')})
        log(f'    ε={eps:<5g} δ̂64={d64:.6e} δ̂32={d32:.6e} Δ={d32 - d64:+.3e} '
            f'(rel {((d32 - d64) / d64 if d64 > 0 else float("nan")):+.2e}; MC s.e. {se64:.2e})')
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
            f'{"ratio":>7} {"both dirs":>10} {"compile s":>10}')
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
        print(f'{r.config:<38} {r.dtype:<8} {r.direction:<7} {r.us_jaxacct:11.2f} {jp:>12} '
              f'{ratio:>7} {both_s:>10} {r.compile_s:10.2f}')
  return both


GOALS = {  # (production?, dtype) -> (goal, stretch)
    (False, 'float64'): (3.0, None), (True, 'float64'): (2.0, None),
    (False, 'float32'): (8.0, 10.0), (True, 'float32'): (4.0, None),
}


def print_goals(both, cfgs: list[Config]) -> list[dict[str, Any]]:
  out = []
  print('\nGoals (both directions together, vs single-process jax_privacy):')
  for config in cfgs:
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
  parser.add_argument('--only', default=None,
                      help='comma-separated substrings: run only matching configurations')
  parser.add_argument('--json', default=None, help='also write the results to this JSON file')
  args = parser.parse_args(argv)

  cfgs = configs(args.quick)
  if args.only:
    keys = [s.strip() for s in args.only.split(',')]
    cfgs = [c for c in cfgs if any(k in c.name for k in keys)]
  info = machine_info()
  print('machine:', json.dumps(info))
  report: dict[str, Any] = {'machine': info, 'argv': sys.argv[1:]}

  if args.accuracy:
    num = args.accuracy_samples or (10_000 if args.quick else 100_000)
    acc_cfgs = [c for c in configs(args.quick) if c.name.startswith('bminsep-warm')]
    if args.accuracy_production:
      acc_cfgs += [c for c in configs(args.quick) if c.production]
    print(f'\nfloat32 kernels vs float64, same key, {num} samples per direction, σ = '
          f'{NOISE_MULTIPLIER}, ‖c‖ = 1:')
    report['accuracy'] = run_accuracy(acc_cfgs, num, [0.5, 1.0, 2.0, 4.0, 8.0], seed=2026)
  else:
    use_jp = (jp_sample_generation is not None) and not args.no_jax_privacy
    repeats = args.repeats or (2 if args.quick else 5)
    print(f'\njax_privacy: {JAX_PRIVACY_VERSION if use_jp else "not run"}; repeats = {repeats} '
          '(min taken); σ = 1, ‖c‖ = 1')
    for c in cfgs:
      print(f'  {c.name}: jaxacct {c.samples} samples/call, jax_privacy {c.jp_samples} '
            'samples/call')
    print('\nthroughput (µs per sample, generation + loss):')
    rows = run_throughput(cfgs, repeats, use_jp)
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
      comp_cfg = [c for c in cfgs if c.name.startswith('bminsep-warm')]
      if comp_cfg:
        print(f'\ncomponents of one jaxacct chunk ({comp_cfg[0].name}, 1024 samples), each '
              'jitted separately with materialised inputs:')
        try:
          report['components'] = components(comp_cfg[0], 1024)
        except Exception as exc:  # pylint: disable=broad-except  (internals may move)
          print(f'  component timing failed (internals changed?): {exc!r}')
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
