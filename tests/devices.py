"""Runs a test script in a fresh interpreter with N forced CPU devices (host-platform split)."""

from __future__ import annotations

import json
import os
import pathlib
import subprocess
import sys

ROOT = pathlib.Path(__file__).resolve().parents[1]


def run_on_devices(script: str, count: int, *args: str, env: dict | None = None) -> dict:
  """The JSON object the script prints last, run with ``count`` XLA host devices, ``args`` as
  its ``sys.argv[1:]`` and ``env`` added to this process's environment."""
  env = dict(os.environ, **(env or {}),
             XLA_FLAGS=f'--xla_force_host_platform_device_count={count}')
  env['PYTHONPATH'] = os.pathsep.join([str(ROOT), env.get('PYTHONPATH', '')])
  out = subprocess.run([sys.executable, '-c', script, *args], env=env, capture_output=True,
                       text=True, check=False, cwd=ROOT)
  assert out.returncode == 0, out.stderr
  return json.loads(out.stdout.strip().splitlines()[-1])
