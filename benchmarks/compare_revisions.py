"""Monte Carlo throughput of two revisions of jaxacct in one run: a base git revision vs the working tree.

A redesign of the package must not slow the Monte Carlo kernels: ``benchmarks/mc_throughput.py``
before and after, in one run, with no configuration slower beyond noise. This script times the
public sampler

  jaxacct.sample_privacy_losses(key, mechanism, num_samples, direction, dtype=...)

of two revisions side by side:

  * base: a git revision (``--base REV``, default ``30f774c``, the last commit before the redesign),
    checked out with ``git worktree add --detach /tmp/jaxacct-base-<rev> <rev>`` (reused when it
    is already there at that commit; never modified);
  * current: the working tree this script lives in, uncommitted edits included.

Prints µs per sample (generation + loss, one direction), median and minimum over ``--repeats``
calls, for

  * ``bminsep_warm`` / ``bminsep_cold``: b-min-sep warm / cold start, n = 1000, b = 16, p = 0.5
    (float64 and float32);
  * ``balls_in_bins``: n = 1000, cycle T = 16;
  * ``cyclic_poisson``: n = 1000, T = 16, p = 0.5 (independent partition);
  * ``poisson_dpsgd``: Poisson DP-SGD, n = 1000, p = 0.05, one band (c = [1]);
  * ``truncated_bminsep``: warm b-min-sep, n = 1000, b = 16, p = 0.05, dataset size m = 20,000,
    B = 642. The batch size of a warm b-min-sep round is Binomial(m, p₀), p₀ = p/(1 + (b − 1)p)
    = 1/35, mean 571.4, s.d. 23.6; B = mean + 3 s.d. truncates ~0.13% of rounds (~1.3 of 1000);
  * ``multi_attribution``: MultiAttributionBMinSep, n = 1000, b = 16, p = 0.05, k_u = 2;
  * ``dense_bisr``: dense LowerTriangular ``banded_inverse_square_root(1000, 4)`` under cold
    b-min-sep b = 16, p = 0.1 (App. B bounds; as in mc_throughput.py);
  * ``production``: b-min-sep warm, n = 7200, b = 256, p = 0.03;

each in "remove" and "add", float64 unless stated, with σ = 1 and the square-root ("FHU") band
c_k = Π_{j≤k}(2j−1)/(2j) normalised to ‖c‖₂ = 1 (16 coefficients, 256 at production), built
with numpy here exactly as ``mc_throughput.fhu_coefficients`` does, so both revisions get
bitwise the same inputs. Only the public API is used in the workers (internals differ).

How. Two long-lived worker processes (this file with ``--worker TREE``), one per revision, each
with ``PYTHONPATH=TREE`` and its cwd in TREE; each checks that ``jaxacct.__file__`` is under its
tree (printed), and at the end that every loaded ``jaxacct.*`` module is. The parent (which does
not import jax) sends JSON-line commands over stdin/stdout:

  * ``prepare``: build the mechanism and compile by a warm-up call (seed 0) and a second call
    (seed 1); compile s = first − second, reported separately;
  * ``time``: one call with ``jax.random.key(seed)``, ended by ``jax.block_until_ready``; returns
    the seconds and a sha256 of the returned float64 losses (hashed after the clock stops).

Repetitions are interleaved: for repetition r = 0 … R−1, for every (config, dtype, direction),
time base then current — current then base on odd r, to cancel drift and which-ran-last effects.
Both revisions use the same seed (1000 + r) in repetition r. Samples per call are a multiple of
1024 (whole blocks for both revisions): ``--samples S`` (default 32,768: ~0.6–1 s per call on a
2-core Xeon) for a config costing like float64 b-min-sep at n = 1000, divided by a per-config
cost weight (which includes the scaling by n: ×8 at the production shape) and doubled for
float32. ``--quick``: 2 repeats, S = 2048.

Verdict rule, per (config, dtype, direction), on the R per-call µs/sample b_r (base) and c_r
(current): ratio = median(c)/median(b); noise s = max(IQR(b)/median(b), IQR(c)/median(c)) (IQR by
linear interpolation: for R = 5 the 2nd-to-4th sorted values); tolerance t = max(2s, 0.02).
"slower" if ratio > 1 + t, "faster" if ratio < 1 − t, else "same". The 2% floor stands for the
run-to-run variation that the within-run spread does not see (code layout, allocator state). A
verdict is marked "*" when other processes used ≥ 0.25 cores during any of that row's timed
pairs, and "?" when R < 3 (no usable spread: the tolerance is then the 2% floor alone); below
R = 5 it is indicative.

Bitwise check: the redesign must be bitwise neutral, so every timed call's losses are hashed; the
column "bitwise equal" is "yes" when base and current agree for every repetition's seed (the
first repetition alone is also reported in the JSON).

The machine is shared: before each repetition the parent waits (up to ``--wait-idle`` s; default
60, 0 with ``--quick``) until other processes use < 0.25 cores (the approach of
mc_throughput.wait_for_idle, re-implemented here because importing mc_throughput would import
jax and the working tree's jaxacct into the parent, and because the workers' CPU time must not
count as background load). It reports the cores other processes used during each row's calls
("bg cores"; /proc/stat minus the parent's and the workers' own CPU time).

Output: the machine (CPU model, cores, jax version, devices), the two revisions (commit, whether
jaxacct/ differs, a fingerprint of its *.py files at start and end: a change means someone edited
the tree during the run), one progress line per timed pair, then a Markdown table ready for
benchmarks/RESULTS.md. ``--json PATH`` also writes every call's seconds and hashes.

Usage (from the repository root, with the virtualenv's python):

  python benchmarks/compare_revisions.py                       # full run (~5 min on 2 cores)
  python benchmarks/compare_revisions.py --quick --only bminsep_warm   # smoke run (~15 s)
  python benchmarks/compare_revisions.py --base 30f774c --only production,dense_bisr \\
      --repeats 7 --json /tmp/compare.json

Not measured here: mc_throughput.py's jax_privacy ratios, floors and component timings (those use
internals). Fairness notes: see ``FAIRNESS`` below (also printed with ``--help``).
"""

from __future__ import annotations

import argparse
import dataclasses
import hashlib
import json
import os
import platform
import subprocess
import sys
import time
from typing import Any

FAIRNESS = """\
What could make the comparison unfair:
  * both workers use the same interpreter, virtualenv (jax/jaxlib), environment (XLA_FLAGS,
    JAX_* variables) and device set; only PYTHONPATH and cwd differ. The editable install of the
    working tree stays on sys.meta_path but after PYTHONPATH, so the base worker's jaxacct (and every
    submodule, resolved through jaxacct.__path__) comes from the worktree: checked at start and end;
  * the working tree is read when the current worker imports a module: if someone edits jaxacct/
    during the run, the fingerprint printed at the end differs and the figures mix two states;
  * per-mechanism host caches (e.g. dense C's cross-term bounds, jit caches keyed on the
    mechanism) are filled by the two warm-up calls in both revisions; a revision that caches more
    across *different* mechanism objects is not rewarded, since each config reuses one object;
  * a persistent compilation cache (JAX_COMPILATION_CACHE_DIR) would shrink the compile-time
    column only; throughput is measured after compilation either way;
  * the idle worker sleeps on its pipe while the other one runs, but both stay resident (memory,
    XLA thread pools); the order alternates every repetition, so what is left is symmetric;
  * the number of samples per call is the same for both, and a multiple of 1024 (whole blocks
    today); if the redesign changed block sizes, padding work would count against it, as it should
    for users calling the public sampler.
"""

REPO = os.path.dirname(os.path.dirname(os.path.abspath(__file__)))
DIRECTIONS = ('remove', 'add')
NOISE_MULTIPLIER = 1.0
DEFAULT_BASE = '30f774c'
SAMPLE_GRANULE = 1024
IDLE_THRESHOLD = 0.25
SEED_OFFSET = 1000


# ----------------------------------------------------------------------------- configurations


@dataclasses.dataclass(frozen=True)
class Config:
  """One configuration: a scheme class of the public API with its keyword arguments and a matrix."""
  name: str
  label: str
  scheme: str  # public class name in jaxacct
  scheme_kwargs: dict[str, Any]
  matrix: dict[str, Any]  # {'fhu_bands': m} or {'inverse_square_root_bands': k}
  dtypes: tuple[str, ...] = ('float64',)
  weight: float = 1.0  # cost per sample relative to float64 b-min-sep at n = 1000

  def spec(self) -> dict[str, Any]:
    return {'name': self.name, 'scheme': self.scheme, 'scheme_kwargs': self.scheme_kwargs,
            'matrix': self.matrix, 'noise_multiplier': NOISE_MULTIPLIER}

  def samples(self, base_samples: int, dtype: str) -> int:
    wanted = base_samples / self.weight * (2.0 if dtype == 'float32' else 1.0)
    return max(SAMPLE_GRANULE, int(wanted) // SAMPLE_GRANULE * SAMPLE_GRANULE)


# Truncated b-min-sep: p₀ = p/(1 + (b−1)p) = 0.05/1.75; batch ~ Binomial(20000, p₀):
# mean 571.43, s.d. 23.56; B = 642 ≈ mean + 3 s.d.
_TRUNC_M = 20_000
_TRUNC_B = 642

CONFIGS = [
    Config('bminsep_warm', 'b-min-sep warm n=1000 b=16 p=.5', 'BMinSep',
           dict(sampling_prob=0.5, iterations=1000, min_sep=16, warm_start=True),
           {'fhu_bands': 16}, ('float64', 'float32')),
    Config('bminsep_cold', 'b-min-sep cold n=1000 b=16 p=.5', 'BMinSep',
           dict(sampling_prob=0.5, iterations=1000, min_sep=16, warm_start=False),
           {'fhu_bands': 16}, ('float64', 'float32')),
    Config('balls_in_bins', 'balls-in-bins n=1000 T=16', 'BallsInBins',
           dict(iterations=1000, cycle_length=16), {'fhu_bands': 16}, weight=0.5),
    Config('cyclic_poisson', 'cyclic Poisson n=1000 T=16 p=.5', 'CyclicPoisson',
           dict(sampling_prob=0.5, iterations=1000, cycle_length=16), {'fhu_bands': 16}),
    Config('poisson_dpsgd', 'Poisson DP-SGD n=1000 p=.05', 'Poisson',
           dict(sampling_prob=0.05, iterations=1000), {'fhu_bands': 1}, weight=0.5),
    Config('truncated_bminsep', f'truncated b-min-sep n=1000 b=16 p=.05 m={_TRUNC_M} B={_TRUNC_B}',
           'BMinSep', dict(sampling_prob=0.05, iterations=1000, min_sep=16, warm_start=True,
                           truncated_batch_size=_TRUNC_B, dataset_size=_TRUNC_M),
           {'fhu_bands': 16}, weight=4.0),
    Config('multi_attribution', 'multi-attribution n=1000 b=16 p=.05 k_u=2',
           'MultiAttributionBMinSep',
           dict(sampling_prob=0.05, iterations=1000, min_sep=16, max_examples_per_user=2),
           {'fhu_bands': 16}, weight=1.5),
    Config('dense_bisr', 'dense BISR(4) n=1000, b-min-sep cold b=16 p=.1', 'BMinSep',
           dict(sampling_prob=0.1, iterations=1000, min_sep=16, warm_start=False),
           {'inverse_square_root_bands': 4}, weight=2.0),
    Config('production', 'production n=7200 b=256 p=.03 warm', 'BMinSep',
           dict(sampling_prob=0.03, iterations=7200, min_sep=256, warm_start=True),
           {'fhu_bands': 256}, weight=8.0),
]


# ----------------------------------------------------------------------------- worker side


def fhu_coefficients(bands: int, normalise: bool = True):
  """c_k = Π_{j≤k}(2j−1)/(2j), k = 0…bands−1, divided by ‖c‖₂ (as mc_throughput.py)."""
  import numpy as np
  j = np.arange(1, bands, dtype=np.float64)
  c = np.concatenate([[1.0], np.cumprod((2.0 * j - 1.0) / (2.0 * j))])
  return c / np.linalg.norm(c) if normalise else c


def _under(path: str, tree: str) -> bool:
  return os.path.realpath(path).startswith(os.path.realpath(tree) + os.sep)


def worker_main(tree: str) -> int:
  """Serves JSON-line commands on the original stdout; everything else printed goes to stderr."""
  proto = os.fdopen(os.dup(1), 'w', buffering=1, encoding='utf-8')
  os.dup2(2, 1)
  commands = sys.stdin

  def send(obj):
    proto.write(json.dumps(obj) + '\n')
    proto.flush()

  import traceback
  try:
    import numpy as np
    import jax
    import jaxlib
    import jaxacct
  except Exception:  # pylint: disable=broad-except
    send({'ok': False, 'error': traceback.format_exc()})
    return 2
  file = os.path.realpath(jaxacct.__file__)
  send({'ok': _under(file, tree), 'file': file, 'tree': os.path.realpath(tree),
        'python': sys.version.split()[0], 'jax': jax.__version__, 'jaxlib': jaxlib.__version__,
        'numpy': np.__version__, 'devices': [str(d) for d in jax.devices()],
        'x64_global': bool(jax.config.jax_enable_x64), 'pid': os.getpid()})
  if not _under(file, tree):
    return 3

  dtypes = {'float64': jax.numpy.float64, 'float32': jax.numpy.float32}
  mechanisms: dict[str, Any] = {}
  prepared: dict[str, tuple] = {}

  def mechanism(spec):
    if spec['name'] not in mechanisms:
      scheme = getattr(jaxacct, spec['scheme'])(**spec['scheme_kwargs'])
      if 'fhu_bands' in spec['matrix']:
        matrix = jaxacct.BandedToeplitz(fhu_coefficients(spec['matrix']['fhu_bands']))
      else:
        matrix = jaxacct.banded_inverse_square_root(
            spec['scheme_kwargs']['iterations'], spec['matrix']['inverse_square_root_bands'])
      mechanisms[spec['name']] = jaxacct.MatrixMechanism(
          scheme=scheme, matrix=matrix, noise_multiplier=spec['noise_multiplier'])
    return mechanisms[spec['name']]

  def call(item, seed):
    mech, dtype, direction, num = prepared[item]
    key = jax.block_until_ready(jax.random.key(seed))
    t0 = time.perf_counter()
    out = jax.block_until_ready(
        jaxacct.sample_privacy_losses(key, mech, num, direction, dtype=dtype))
    seconds = time.perf_counter() - t0
    arr = np.asarray(out)
    digest = hashlib.sha256(f'{arr.dtype.str}{arr.shape}'.encode() + arr.tobytes()).hexdigest()
    return seconds, digest, arr.dtype.name

  for line in commands:
    if not line.strip():
      continue
    cmd = json.loads(line)
    try:
      if cmd['cmd'] == 'prepare':
        prepared[cmd['item']] = (mechanism(cmd['config']), dtypes[cmd['dtype']],
                                 cmd['direction'], int(cmd['samples']))
        first, _, _ = call(cmd['item'], 0)
        second, _, _ = call(cmd['item'], 1)
        send({'ok': True, 'first_s': first, 'second_s': second,
              'compile_s': max(0.0, first - second)})
      elif cmd['cmd'] == 'time':
        seconds, digest, dtype_name = call(cmd['item'], int(cmd['seed']))
        send({'ok': True, 'seconds': seconds, 'sha256': digest, 'out_dtype': dtype_name})
      elif cmd['cmd'] == 'modules':
        loaded = {name: getattr(mod, '__file__', None) for name, mod in list(sys.modules.items())
                  if name == 'jaxacct' or name.startswith('jaxacct.')}
        send({'ok': True, 'count': len(loaded),
              'outside': sorted(n for n, f in loaded.items() if f and not _under(f, tree))})
      elif cmd['cmd'] == 'quit':
        send({'ok': True})
        return 0
      else:
        send({'ok': False, 'error': f'unknown command {cmd["cmd"]!r}'})
    except Exception:  # pylint: disable=broad-except
      send({'ok': False, 'error': traceback.format_exc()})
  return 0


# ----------------------------------------------------------------------------- parent side


class WorkerError(RuntimeError):
  pass


class Worker:
  """One revision's worker process and its JSON-line pipe."""

  def __init__(self, label: str, tree: str):
    self.label = label
    self.tree = os.path.realpath(tree)
    env = dict(os.environ)
    env['PYTHONPATH'] = self.tree
    env.pop('PYTHONSTARTUP', None)
    self.proc = subprocess.Popen(
        [sys.executable, os.path.abspath(__file__), '--worker', self.tree],
        stdin=subprocess.PIPE, stdout=subprocess.PIPE, cwd=self.tree, env=env, text=True,
        encoding='utf-8', bufsize=1)
    self.hello = self._read()
    if not self.hello.get('ok'):
      raise WorkerError(f'{label} worker did not start: '
                        + (self.hello.get('error') or
                           f'jaxacct imported from {self.hello.get("file")}, not under {self.tree}'))

  def _read(self) -> dict[str, Any]:
    line = self.proc.stdout.readline()
    if not line:
      raise WorkerError(f'{self.label} worker exited (code {self.proc.wait()})')
    return json.loads(line)

  def request(self, **cmd) -> dict[str, Any]:
    self.proc.stdin.write(json.dumps(cmd) + '\n')
    self.proc.stdin.flush()
    return self._read()

  def close(self) -> None:
    if self.proc.poll() is None:
      try:
        self.request(cmd='quit')
        self.proc.wait(timeout=30)
      except Exception:  # pylint: disable=broad-except
        self.proc.kill()
        self.proc.wait()


def _git(*args: str, cwd: str = REPO) -> str:
  return subprocess.run(['git', *args], cwd=cwd, check=True, capture_output=True,
                        text=True).stdout.rstrip()


def base_worktree(rev: str) -> tuple[str, str]:
  """(path, full commit) of the detached worktree of ``rev`` under /tmp (created or reused)."""
  commit = _git('rev-parse', '--verify', f'{rev}^{{commit}}')
  path = f'/tmp/jaxacct-base-{commit[:7]}'
  if os.path.isdir(path):
    head = _git('rev-parse', 'HEAD', cwd=path)
    if head != commit:
      raise SystemExit(f'{path} exists at {head}, not at {commit}; remove it '
                       f'(git worktree remove {path}) or pick another --base')
    if _git('status', '--porcelain', '--untracked-files=no', cwd=path):
      print(f'warning: the base worktree {path} has local modifications', file=sys.stderr)
    return path, commit
  cmd = ['git', 'worktree', 'add', '--detach', path, commit]
  done = subprocess.run(cmd, cwd=REPO, capture_output=True, text=True)
  if done.returncode and 'already registered' in done.stderr:  # deleted from /tmp, still registered
    done = subprocess.run(cmd[:3] + ['-f'] + cmd[3:], cwd=REPO, capture_output=True, text=True)
  if done.returncode:
    raise SystemExit(f'git worktree add failed: {done.stderr.strip()}')
  return path, commit


def package_fingerprint(tree: str) -> str:
  """sha256 over the paths and contents of jaxacct/**/*.py in ``tree`` (16 hex digits)."""
  h = hashlib.sha256()
  root = os.path.join(tree, 'jaxacct')
  for dirpath, dirnames, filenames in os.walk(root):
    dirnames[:] = sorted(d for d in dirnames if d != '__pycache__')
    for name in sorted(filenames):
      if name.endswith('.py'):
        full = os.path.join(dirpath, name)
        h.update(os.path.relpath(full, tree).encode() + b'\0')
        try:
          with open(full, 'rb') as fh:
            h.update(fh.read())
        except OSError:
          h.update(b'<unreadable>')
  return h.hexdigest()[:16]


def _proc_cpu_seconds(pid: int) -> float:
  try:
    with open(f'/proc/{pid}/stat', encoding='ascii') as fh:
      rest = fh.read().rsplit(')', 1)[1].split()
    return (int(rest[11]) + int(rest[12])) / os.sysconf('SC_CLK_TCK')  # utime + stime
  except (OSError, IndexError, ValueError):
    return 0.0


def cpu_snapshot(pids: list[int]) -> tuple[float, float, float] | None:
  """(busy s of all CPUs, wall s, CPU s of this process and the workers); None without /proc."""
  try:
    with open('/proc/stat', encoding='ascii') as fh:
      vals = [int(v) for v in fh.readline().split()[1:9]]
  except OSError:
    return None
  busy = (sum(vals) - vals[3] - vals[4]) / os.sysconf('SC_CLK_TCK')
  t = os.times()
  return busy, time.monotonic(), t.user + t.system + sum(_proc_cpu_seconds(p) for p in pids)


def others_cores(before, after) -> float | None:
  """Average number of cores other processes kept busy between two snapshots."""
  if before is None or after is None:
    return None
  wall = after[1] - before[1]
  return max(0.0, (after[0] - before[0]) - (after[2] - before[2])) / wall if wall > 0 else None


def wait_for_idle(pids: list[int], max_wait: float, sample_s: float) -> float | None:
  """Waits (≤ max_wait s) until other processes use < IDLE_THRESHOLD cores; returns their use."""
  deadline = time.monotonic() + max_wait
  while True:
    before = cpu_snapshot(pids)
    time.sleep(sample_s)
    used = others_cores(before, cpu_snapshot(pids))
    if used is None or used < IDLE_THRESHOLD or time.monotonic() >= deadline:
      return used


def cpu_model() -> str:
  try:
    with open('/proc/cpuinfo', encoding='utf-8') as fh:
      for line in fh:
        if line.startswith('model name'):
          return line.split(':', 1)[1].strip()
  except OSError:
    pass
  return platform.processor() or 'unknown'


def _median(xs: list[float]) -> float:
  s = sorted(xs)
  k = len(s)
  return s[k // 2] if k % 2 else 0.5 * (s[k // 2 - 1] + s[k // 2])


def _percentile(xs: list[float], q: float) -> float:
  """Linear interpolation between closest ranks (numpy's default)."""
  s = sorted(xs)
  pos = (len(s) - 1) * q
  lo = int(pos)
  hi = min(lo + 1, len(s) - 1)
  return s[lo] + (s[hi] - s[lo]) * (pos - lo)


def rel_iqr(xs: list[float]) -> float:
  return (_percentile(xs, 0.75) - _percentile(xs, 0.25)) / _median(xs)


def verdict(base_us: list[float], cur_us: list[float]) -> tuple[float, float, str]:
  """(median ratio current/base, tolerance t, 'slower' | 'faster' | 'same'); rule in the docstring."""
  ratio = _median(cur_us) / _median(base_us)
  tol = max(2.0 * max(rel_iqr(base_us), rel_iqr(cur_us)), 0.02)
  word = 'slower' if ratio > 1.0 + tol else 'faster' if ratio < 1.0 - tol else 'same'
  return ratio, tol, word


@dataclasses.dataclass
class Item:
  config: Config
  dtype: str
  direction: str
  samples: int
  key: str = ''
  compile_s: dict[str, float] = dataclasses.field(default_factory=dict)
  us: dict[str, list[float]] = dataclasses.field(default_factory=lambda: {'base': [], 'current': []})
  sha: dict[str, list[str]] = dataclasses.field(default_factory=lambda: {'base': [], 'current': []})
  out_dtype: dict[str, str] = dataclasses.field(default_factory=dict)
  bg: list[float] = dataclasses.field(default_factory=list)
  error: str | None = None

  def __post_init__(self):
    self.key = f'{self.config.name}/{self.dtype}/{self.direction}'


def summarise(item: Item) -> dict[str, Any]:
  row: dict[str, Any] = {'config': item.config.name, 'label': item.config.label,
                         'dtype': item.dtype, 'direction': item.direction,
                         'samples_per_call': item.samples, 'compile_s': item.compile_s,
                         'error': item.error}
  if item.error or not item.us['base'] or not item.us['current']:
    return row
  b, c = item.us['base'], item.us['current']
  ratio, tol, word = verdict(b, c)
  busy = bool(item.bg) and max(item.bg) >= IDLE_THRESHOLD
  row.update({
      'base_us': b, 'current_us': c,
      'base_median_us': _median(b), 'base_min_us': min(b),
      'current_median_us': _median(c), 'current_min_us': min(c),
      'ratio_median': ratio, 'ratio_min': min(c) / min(b), 'tolerance': tol,
      'verdict': word, 'busy': busy,
      'bg_cores_mean': sum(item.bg) / len(item.bg) if item.bg else None,
      'bg_cores_max': max(item.bg) if item.bg else None,
      'bitwise_equal': item.sha['base'] == item.sha['current'],
      'bitwise_equal_first_call': item.sha['base'][:1] == item.sha['current'][:1],
      'sha256': item.sha, 'out_dtype': item.out_dtype})
  return row


def markdown_table(rows: list[dict[str, Any]]) -> str:
  out = ['| config | dtype | dir | N/call | base µs median / min | current µs median / min | '
         'ratio median (min) | ± noise | verdict | bitwise equal | compile s base / current | '
         'bg cores |',
         '|---|---|---|---:|---:|---:|---:|---:|---|---|---:|---:|']
  last = None
  for r in rows:
    label = r['label'] if r['label'] != last else ''
    last = r['label']
    comp = r['compile_s']
    comp_s = (f'{comp["base"]:.2f} / {comp["current"]:.2f}'
              if 'base' in comp and 'current' in comp else '-')
    if 'ratio_median' not in r:
      out.append(f'| {label} | {r["dtype"]} | {r["direction"]} | {r["samples_per_call"]} | '
                 f'- | - | - | - | error | - | {comp_s} | - |')
      continue
    verdict_s = r['verdict'] + ('?' if len(r['base_us']) < 3 else '') + ('*' if r['busy'] else '')
    if r['verdict'] == 'slower':
      verdict_s = f'**{verdict_s}**'
    bit = 'yes' if r['bitwise_equal'] else '**NO**'
    bg = '-' if r['bg_cores_mean'] is None else f'{r["bg_cores_mean"]:.2f}'
    out.append(
        f'| {label} | {r["dtype"]} | {r["direction"]} | {r["samples_per_call"]} | '
        f'{r["base_median_us"]:.2f} / {r["base_min_us"]:.2f} | '
        f'{r["current_median_us"]:.2f} / {r["current_min_us"]:.2f} | '
        f'{r["ratio_median"]:.3f} ({r["ratio_min"]:.3f}) | {r["tolerance"]:.3f} | {verdict_s} | '
        f'{bit} | {comp_s} | {bg} |')
  return '\n'.join(out)


def main(argv=None) -> int:
  argv = sys.argv[1:] if argv is None else argv
  if argv[:1] == ['--worker']:
    return worker_main(argv[1])

  parser = argparse.ArgumentParser(
      description=__doc__.split('\n')[0], epilog=FAIRNESS,
      formatter_class=argparse.RawDescriptionHelpFormatter)
  parser.add_argument('--base', default=DEFAULT_BASE,
                      help=f'base git revision (default {DEFAULT_BASE}, before the kernel '
                           'redesign)')
  parser.add_argument('--only', default=None,
                      help='comma-separated config names: '
                           + ', '.join(c.name for c in CONFIGS))
  parser.add_argument('--repeats', type=int, default=None,
                      help='interleaved timed repetitions (default 5; 2 with --quick)')
  parser.add_argument('--samples', type=int, default=None,
                      help='samples per call for a config costing like float64 b-min-sep at '
                           'n = 1000 (default 32768; 2048 with --quick); others are scaled by '
                           'their cost weight, float32 doubled; multiples of 1024')
  parser.add_argument('--quick', action='store_true', help='2 repeats, tiny sample counts')
  parser.add_argument('--wait-idle', type=float, default=None,
                      help='before each repetition wait up to this many seconds for other '
                           'processes to use < 0.25 cores (default 60; 0 with --quick)')
  parser.add_argument('--json', default=None, help='also write results and raw calls here')
  args = parser.parse_args(argv)

  repeats = args.repeats or (2 if args.quick else 5)
  base_samples = args.samples or (2048 if args.quick else 32768)
  max_wait = args.wait_idle if args.wait_idle is not None else (0.0 if args.quick else 60.0)
  cfgs = CONFIGS
  if args.only:
    wanted = [s.strip() for s in args.only.split(',') if s.strip()]
    unknown = sorted(set(wanted) - {c.name for c in CONFIGS})
    if unknown:
      parser.error(f'unknown config(s) {unknown}; choose from {[c.name for c in CONFIGS]}')
    cfgs = [c for c in CONFIGS if c.name in wanted]

  base_path, base_commit = base_worktree(args.base)
  head = _git('rev-parse', 'HEAD')
  dirty = _git('status', '--porcelain', '--', 'jaxacct').splitlines()
  fp_start = {'base': package_fingerprint(base_path), 'current': package_fingerprint(REPO)}
  revisions = {
      'base': {'rev': args.base, 'commit': base_commit, 'tree': base_path,
               'subject': _git('log', '-1', '--format=%s', base_commit),
               'fingerprint': fp_start['base']},
      'current': {'tree': REPO, 'head': head, 'jaxacct_status': dirty,
                  'fingerprint_start': fp_start['current']},
  }
  print(f'base:    {base_commit[:12]} "{revisions["base"]["subject"][:70]}" at {base_path}')
  print(f'current: working tree {REPO} (HEAD {head[:12]}, {len(dirty)} changed path(s) under '
        f'jaxacct/)')
  print(f'jaxacct/*.py fingerprint: base {fp_start["base"]}, current {fp_start["current"]}'
        + (' (identical)' if fp_start['base'] == fp_start['current'] else ''))

  workers: dict[str, Worker] = {}
  items: list[Item] = []
  calls: list[dict[str, Any]] = []
  try:
    for label, tree in (('base', base_path), ('current', REPO)):
      workers[label] = Worker(label, tree)
      print(f'{label:<8} worker pid {workers[label].proc.pid}: jaxacct from '
            f'{workers[label].hello["file"]}')
    hello = workers['current'].hello
    for key in ('jax', 'jaxlib', 'devices', 'x64_global'):
      if workers['base'].hello[key] != hello[key]:
        print(f'warning: workers differ in {key}: {workers["base"].hello[key]} vs {hello[key]}')
    try:
      loadavg = os.getloadavg()
    except OSError:
      loadavg = None
    machine = {'cpu': cpu_model(), 'cpu_count': os.cpu_count(),
               'affinity': len(os.sched_getaffinity(0)) if hasattr(os, 'sched_getaffinity')
               else None,
               'python': hello['python'], 'jax': hello['jax'], 'jaxlib': hello['jaxlib'],
               'numpy': hello['numpy'], 'devices': hello['devices'],
               'platform': platform.platform(), 'loadavg_start': loadavg,
               'date': time.strftime('%Y-%m-%d %H:%M:%S %Z')}
    print('machine:', json.dumps(machine))
    pids = [w.proc.pid for w in workers.values()]

    for config in cfgs:
      for dtype in config.dtypes:
        for direction in DIRECTIONS:
          items.append(Item(config, dtype, direction, config.samples(base_samples, dtype)))
    print(f'\nrepeats = {repeats} (interleaved; order base→current on even r, current→base on odd '
          f'r); seeds {SEED_OFFSET}…{SEED_OFFSET + repeats - 1}; σ = {NOISE_MULTIPLIER:g}, ‖c‖ = 1')
    print('\nprepare (build + compile by a warm-up call; compile s = first call − second call):')
    for item in items:
      for label in ('base', 'current'):
        res = workers[label].request(cmd='prepare', item=item.key, config=item.config.spec(),
                                     dtype=item.dtype, direction=item.direction,
                                     samples=item.samples)
        if not res['ok']:
          item.error = f'{label}: {res["error"]}'
          print(f'  {item.key}: {label} FAILED:\n{res["error"]}', file=sys.stderr)
          break
        item.compile_s[label] = res['compile_s']
      if item.error is None:
        print(f'  {item.key:<40} N={item.samples:<6} compile s base {item.compile_s["base"]:.2f}'
              f'  current {item.compile_s["current"]:.2f}')

    print('\ntimed calls (µs per sample):')
    for r in range(repeats):
      idle = wait_for_idle(pids, max_wait, 1.0 if max_wait == 0 else 2.0)
      print(f' repetition {r}: other processes used '
            + ('?' if idle is None else f'{idle:.2f}') + ' cores before it'
            + (' (still busy; timing anyway)' if idle is not None and idle >= IDLE_THRESHOLD
               else ''))
      order = ('base', 'current') if r % 2 == 0 else ('current', 'base')
      for item in items:
        if item.error:
          continue
        snap = cpu_snapshot(pids)
        got = {}
        for label in order:
          res = workers[label].request(cmd='time', item=item.key, seed=SEED_OFFSET + r)
          if not res['ok']:
            item.error = f'{label}: {res["error"]}'
            print(f'  {item.key}: {label} FAILED:\n{res["error"]}', file=sys.stderr)
            break
          got[label] = res
        if item.error:
          continue
        bg = others_cores(snap, cpu_snapshot(pids))
        if bg is not None:
          item.bg.append(bg)
        for label in ('base', 'current'):
          us = got[label]['seconds'] / item.samples * 1e6
          item.us[label].append(us)
          item.sha[label].append(got[label]['sha256'])
          item.out_dtype[label] = got[label]['out_dtype']
          calls.append({'item': item.key, 'revision': label, 'repetition': r,
                        'seed': SEED_OFFSET + r, 'seconds': got[label]['seconds'],
                        'samples': item.samples, 'sha256': got[label]['sha256'],
                        'position': order.index(label), 'bg_cores': bg})
        same = got['base']['sha256'] == got['current']['sha256']
        print(f'  r={r} {item.key:<40} base {item.us["base"][-1]:9.3f}  current '
              f'{item.us["current"][-1]:9.3f}  ×{item.us["current"][-1] / item.us["base"][-1]:.3f}'
              f'  {"bitwise =" if same else "BITWISE DIFFERENT"}'
              + ('' if bg is None else f'  bg {bg:.2f} cores'))

    for label, worker in workers.items():
      res = worker.request(cmd='modules')
      revisions[label]['modules_loaded'] = res.get('count')
      if res.get('outside'):
        print(f'warning: {label} worker loaded jaxacct modules from outside its tree: '
              f'{res["outside"]}')
  finally:
    for worker in workers.values():
      worker.close()

  fp_end = package_fingerprint(REPO)
  revisions['current']['fingerprint_end'] = fp_end
  if fp_end != fp_start['current']:
    print(f'\nWARNING: jaxacct/ in the working tree changed during the run (fingerprint '
          f'{fp_start["current"]} → {fp_end}); the "current" figures may mix two states.')
  rows = [summarise(item) for item in items]
  try:
    machine['loadavg_end'] = os.getloadavg()
  except OSError:
    pass

  print(f'\n{machine["cpu"]}, {machine["cpu_count"]} cores, jax {machine["jax"]} '
        f'(jaxlib {machine["jaxlib"]}), devices {machine["devices"]}, {machine["date"]}')
  print(f'base {base_commit[:7]} vs working tree (HEAD {head[:7]}'
        + (f' + {len(dirty)} changed path(s) under jaxacct/' if dirty else '') + '), '
        f'{repeats} interleaved repetitions; µs per sample (generation + loss, one direction); '
        'ratio = current/base; verdict "slower" if the median ratio > 1 + max(2·relative IQR, '
        '0.02)' + ('; ? = fewer than 3 repetitions' if repeats < 3 else '')
        + ('; * = other processes used ≥ 0.25 cores' if any(r.get('busy') for r in rows)
           else '') + ':\n')
  print(markdown_table(rows))
  timed = [r for r in rows if 'verdict' in r]
  slower = [r for r in timed if r['verdict'] == 'slower']
  unequal = [r for r in timed if not r['bitwise_equal']]
  print(f'\n{len(timed)} rows timed, {len(slower)} slower beyond noise'
        + (': ' + ', '.join(f'{r["config"]}/{r["dtype"]}/{r["direction"]}' for r in slower)
           if slower else '')
        + f'; bitwise equal in {len(timed) - len(unequal)} of {len(timed)}'
        + (f'; {len(rows) - len(timed)} failed' if len(rows) > len(timed) else ''))
  if repeats < 5:
    print(f'(only {repeats} repetition{"s" if repeats > 1 else ""}: the noise estimate, hence the '
          'verdict, is indicative)')

  if args.json:
    with open(args.json, 'w', encoding='utf-8') as fh:
      json.dump({'machine': machine, 'argv': argv, 'revisions': revisions,
                 'settings': {'repeats': repeats, 'base_samples': base_samples,
                              'wait_idle': max_wait, 'seed_offset': SEED_OFFSET},
                 'rows': rows, 'calls': calls}, fh, indent=1, default=str)
  return 0


if __name__ == '__main__':
  sys.exit(main())
