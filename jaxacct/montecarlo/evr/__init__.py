"""Estimate-Verify-Release on top of the engine (Dong & Ganesh (2026) App. A): failure-bound
arithmetic (``bounds``), estimation (``estimator``, ``candidates``; ``tilted``: the remove
direction drawn from the law tilted by the privacy loss), verification and
calibration (``verification``, ``calibration``, ``search_start``), plans and precision
(``plan``, ``precision``), resumable runs (``checkpoint``) and the attempt ledger (``ledger``).

References:
  Andy Dong and Arun Ganesh, "Privacy Amplification for BandMF via b-Min-Sep Subsampling",
  arXiv:2602.09338 (v2), App. A; Chua et al., AISTATS 2025, Fact 4.2 (docs/references.md).
"""
