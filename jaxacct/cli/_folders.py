"""The CLI's report folders: where each command writes (``<report root>/<command>/``, the
layout of ``report.REPORT_SCHEMA`` 3), what may be written there, and leaving no new empty
folder behind a run that fails. Under ``jax.distributed`` only process 0 writes.
"""

from __future__ import annotations

import contextlib
import os
import pathlib
import shutil

from jaxacct import config as config_lib
from jaxacct.montecarlo.evr import ledger as ledger_lib
from jaxacct.montecarlo.engine import sharding


def write_on_leader(function, *args, **kwargs) -> None:
  """Writes a report file on process 0 only (every process computed the same result)."""
  if sharding.is_leader():
    function(*args, **kwargs)


def report_root(args, raw) -> pathlib.Path:
  """The config's report root: ``--out DIR``, else the config's ``report.output_dir``, else
  ``reports/<config name>``. Each command writes into its own folder under it
  (``output_dir``)."""
  if args.out:
    return pathlib.Path(args.out)
  configured = raw.get('report', {}).get('output_dir')
  return pathlib.Path(configured) if configured else pathlib.Path('reports') / pathlib.Path(
      args.config).stem


def report_name(args) -> str:
  """The command's folder under the report root: the subcommand (``estimate``,
  ``calibrate``, ``plan``, ``train``), and ``calibrate-estimate`` for ``calibrate
  --estimate-only`` (an estimated σ̂ never sits beside a verified one)."""
  return f'{args.command}-estimate' if getattr(args, 'estimate_only', False) else args.command


def output_dir(args, raw) -> pathlib.Path:
  """The command's report folder, ``<report root>/<command>`` (``report_root``,
  ``report_name``; the layout of ``report.REPORT_SCHEMA`` 3): one command's report never
  overwrites another's, and a rerun of a command replaces only its own (``keep_only``)."""
  return report_root(args, raw) / report_name(args)


# Every file name a command's report can hold, by its folder (``report_name``): a rerun
# removes those of them it did not write (``keep_only``), so its folder holds its report only.
REPORT_FILES = {
    'estimate': ('estimate.json', 'delta_hat.png', 'delta.png'),
    'calibrate': ('calibration.json', 'candidates.png', 'delta_hat.png', 'delta.png'),
    'calibrate-estimate': ('calibration_estimate.json', 'candidates_estimate.png',
                           'delta_hat_estimate.png'),
    'train': ('training.json', 'training.png', 'individual_epsilons.png'),
    'plan': ('plan.json',),
}


def keep_only(args, folder: pathlib.Path, written) -> None:
  """After a run's report is written (process 0): removes the files of its command's
  ``REPORT_FILES`` in ``folder`` that the run did not write (``written``: names), e.g. an
  earlier Monte Carlo estimate's ``delta_hat.png`` after a deterministic one wrote
  ``delta.png``. Other files are never touched."""
  if not sharding.is_leader():
    return
  for name in set(REPORT_FILES.get(report_name(args), ())) - set(written):
    with contextlib.suppress(FileNotFoundError):
      (folder / name).unlink()


def _missing_folders(folder: pathlib.Path) -> list[pathlib.Path]:
  """``folder`` and its ancestors that do not exist yet, deepest first."""
  missing = []
  for path in (folder, *folder.parents):
    if path.exists() or path.is_symlink():
      break
    missing.append(path)
  return missing


def _remove_empty(folders) -> None:
  """Removes each of ``folders`` (deepest first) that is an empty directory; a folder that
  holds anything, or is gone, is left as it is."""
  for folder in sorted(folders, key=lambda path: len(path.parts), reverse=True):
    with contextlib.suppress(OSError):  # not empty, not there, not ours to remove
      folder.rmdir()


# Room a run needs in its folders: reports (a JSON and up to three PNGs of ~100 KiB) and
# checkpoints (float64 sums per candidate and ε, written beside the previous file) stay well
# under this; the ledger grows by a line per verification.
_FOLDER_ROOM = 4 << 20


_LEDGER_ROOM = 256 << 10


def check_writable(folder: pathlib.Path, name: str, room: int = _FOLDER_ROOM, *,
                   given: str | None = None) -> None:
  """Raises ConfigError naming ``name``, ``folder`` and ``given`` (the flag or key that chose
  it) unless files can be created in ``folder`` and it has ``room`` bytes free: before any
  compute, so a long run cannot fail at its end (a full disk found after a day of verification
  would lose the released σ). The probe leaves nothing behind: the folders it creates to
  write its probe file are removed again (the run creates them when it writes), so a run
  refused afterwards leaves no empty folder."""
  where = f'{name} {folder}' + (f' ({given})' if given else '')
  created = _missing_folders(folder)
  try:
    folder.mkdir(parents=True, exist_ok=True)
    probe = folder / f'.jaxacct-write-test-{os.getpid()}'
    try:
      probe.write_bytes(b'\0' * 4096)
    finally:
      if probe.exists():
        probe.unlink()
    free = shutil.disk_usage(folder).free
  except OSError as error:
    raise config_lib.ConfigError(f'{where}: cannot write there '
                                 f'({error.strerror or error})') from None
  finally:
    _remove_empty(created)
  if free < room:
    raise config_lib.ConfigError(f'{where}: only {free >> 10} KiB free, the run needs '
                                 f'about {room >> 10} KiB there; free some space or choose '
                                 'another folder')


def check_outputs(args, raw) -> None:
  """The report folder, checkpoint folder and ledger file of the run are writable (probed
  without leaving a folder behind, ``check_writable``)."""
  if not sharding.is_leader():
    return
  root = report_root(args, raw)
  given = (f'under --out {root}' if args.out else f'under report.output_dir {root}'
           if raw.get('report', {}).get('output_dir') else '--out chooses another root')
  check_writable(output_dir(args, raw), 'the report folder', given=given)
  if args.checkpoint:
    check_writable(pathlib.Path(args.checkpoint), '--checkpoint')
  if args.command_object.charges_ledger:  # the ledger it charges: --ledger or the user's
    check_writable(ledger_path(args).parent, '--ledger' if args.ledger else
                    f'the attempt ledger\'s folder (${ledger_lib.ENVIRONMENT_VARIABLE}, --ledger)',
                    _LEDGER_ROOM)


def run_folders(args, raw) -> list[pathlib.Path]:
  """The folders a run may create: its report folder, its ``--checkpoint`` folder and, for a
  command that charges the attempt ledger, the ledger's folder."""
  folders = [output_dir(args, raw)]
  if args.checkpoint:
    folders.append(pathlib.Path(args.checkpoint))
  if args.command_object.charges_ledger:
    folders.append(ledger_path(args).parent)
  return folders


@contextlib.contextmanager
def leaving_no_new_empty_folders(folders):
  """When the block raises (a run refused or failed after its checks: over its budget, an
  undeclared retry, a failed computation), removes the folders it created that are still
  empty: those of ``folders`` and their ancestors that did not exist before it, and new
  subfolders of an existing one (a checkpoint's ``report-curve``). A folder that holds
  anything — a checkpoint to resume from, a ``calibration.json`` recording a ledger charge —
  is kept. Process 0 only (the one that writes)."""
  folders = [pathlib.Path(folder) for folder in folders]
  missing = {path for folder in folders for path in _missing_folders(folder)}
  children = {folder: set(_subfolders(folder)) for folder in folders}
  try:
    yield
  except BaseException:
    if sharding.is_leader():
      new = set(missing)  # ancestors included: removed only if empty, never walked
      for folder in folders:  # a new subfolder's own subfolders are new too
        for child in set(_subfolders(folder)) - children[folder]:
          new.update((child, *_tree(child)))
      _remove_empty(new)
    raise


def _subfolders(folder: pathlib.Path) -> list[pathlib.Path]:
  """The folders directly in ``folder`` (none if it is not a readable folder)."""
  try:
    return [path for path in folder.iterdir() if path.is_dir() and not path.is_symlink()]
  except OSError:
    return []


def _tree(folder: pathlib.Path) -> list[pathlib.Path]:
  """Every folder under ``folder`` (a folder the run created, so a small tree)."""
  return [pathlib.Path(root) / name for root, names, _ in os.walk(folder) for name in names]


def ledger_path(args) -> pathlib.Path:
  """``--ledger``, or the user's ledger (``$JAXACCT_LEDGER``, else the XDG state folder): the
  attempt ledger of calibrate, shared by every report folder (``ledger.default_path``)."""
  return pathlib.Path(args.ledger) if args.ledger else ledger_lib.default_path()
