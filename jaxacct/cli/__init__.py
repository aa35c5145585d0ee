"""The ``jaxacct`` command (host code).

- ``jaxacct estimate CONFIG``: streaming Monte Carlo δ̂(ε) of both directions
  (``estimate_delta``) for the config's mechanism, with standard errors.
- ``jaxacct calibrate CONFIG``: the smallest σ passing Estimate-Verify-Release
  (``calibrate_noise_multiplier``) at the config's (ε, δ).
- ``jaxacct train CONFIG``: calibrate σ as ``calibrate`` does, then train the
  config's training task (``training.task``; ``examples/digits.py``) on batches of the scheme
  with that σ; reports test accuracy with the guarantee.
- ``jaxacct config --keys``: every config key with its type and range, default and meaning
  (``config.key_table``; ``--markdown`` prints docs/config-keys.md).

With a deterministic accountant (``accountant: pld``, ``renyi`` or any registered name;
``auto`` takes the tightest deterministic one for truncated Poisson, truncated cyclic Poisson
and balls-in-bins) both commands go through the accountant contract
(``jaxacct.deterministic.base``) instead: ``estimate`` reports the proven δ(ε) (max over
directions, and per direction) and ε(δ), ``calibrate`` the smallest σ
(``calibrate_deterministic``). Every payload names the ``accountant`` that gave its answer
(``monte_carlo`` for Monte Carlo estimates) and, for ``auto``, every one evaluated in its
``explanation``.

Options: ``--set section.key=value`` (repeatable) overrides config values;
``--json`` prints one JSON object on stdout; ``--out DIR`` chooses the report
root, under which each command writes its own folder ``DIR/<command>/`` (JSON with a
``report_schema`` version, PNG); ``--max-minutes M`` refuses a Monte
Carlo calibration, or an estimate large enough to be timed first, projected (and printed) to
take longer here (default 30); ``--force`` lifts that default budget (never a
``--max-minutes`` given explicitly) and runs an accelerator-scale config on CPU; ``--debug``
prints the traceback of an internal error. Every config value and option is checked before
any compute.
Progress (rate, ETA) goes to stderr: a bar on a terminal, otherwise a line every 30 s.
``train`` with an ``individual:`` section records per-example privacy (Koskela et al.
(2022)).

Exit codes: 0 ok; 2 bad input (a config or argument the library refused, naming it; a
missing file or extra; a file that cannot be written); 1 anything else — an internal error
(a bug, or a failure such as a σ search that cannot bracket), reported in one line, with
the traceback behind ``--debug``.

References:
  Antti Koskela, Marlon Tobaben and Antti Honkela, "Individual Privacy Accounting with Gaussian
  Differential Privacy", arXiv:2209.15596 (docs/references.md).
"""

from jaxacct.cli._entry import is_bad_input as is_bad_input
from jaxacct.cli._entry import main as main

__all__ = ['is_bad_input', 'main']
