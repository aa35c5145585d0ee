"""Monte Carlo accounting of matrix mechanisms, in two parts.

``engine/``: the device programs and the host code that runs them — keys, draws, losses and
block sums (``kernels/`` one module per scheme family behind one protocol; ``noise``,
``binomial``, ``keys``: JAX device code; ``sampling`` jits the kernels into block programs and
is the thin host layer of the plain samplers; ``stream`` is the one driver that turns block
programs into block-ordered float64 sums; ``program32``, ``margin``, ``binomial32``,
``selftest32``: the 32-bit program and its certified margin; ``sharding``, ``watchdog``: devices
and distributed runs). It knows nothing of δ_b, attempts, ledgers, checkpoints or candidates.

``evr/``: what the sums mean — Estimate-Verify-Release (Dong & Ganesh (2026) App. A): the
failure-bound arithmetic (``bounds``, Fact 4.2 / Theorem A.1), δ̂ (``estimator``), σ sweeps
(``candidates``), Algorithm 5 (``verification``), the σ search (``calibration``,
``search_start``), capacity plans (``plan``), the precision choice (``precision``), resumable
state (``checkpoint``) and the attempt ledger (``ledger``). It imports the engine, never the
other way (``tests/test_layering.py``).

References:
  Andy Dong and Arun Ganesh, "Privacy Amplification for BandMF via b-Min-Sep Subsampling",
  arXiv:2602.09338 (v2), App. A (docs/references.md).
"""
