"""The library's conventions as types: directions, adjacencies, methods and random sub-streams.

Every enum subclasses ``str`` (or ``int`` for stream codes), so a member equals its value:
``Direction.REMOVE == "remove"`` and ``Stream.NOISE == 2``. Public functions accept the plain
strings as before; the enums name them once, with their definitions.

Directions of the hockey-stick divergence (both are needed: Dong & Ganesh (2026) §2.5,
footnote 1; the names ``remove``/``add`` are jaxacct's):

- ``remove``: H(P‖Q) with y ~ P (the example is present), privacy loss ln P(y)/Q(y);
- ``add``: H(Q‖P) with y ~ Q, loss ln Q(y)/P(y). A guarantee is the max over both.

Random sub-streams. Every random draw is ``fold_in``-derived from the coordinates where it is
drawn (``montecarlo/engine/keys.py``): key → purpose → direction → (block, index) → per-sample
stream → (round or count). The integers folded at each level are listed here, once, and a
test checks that no two streams of one level share a code. Changing a code changes every
result drawn from it: the codes are part of each seed's meaning.

References:
  Andy Dong and Arun Ganesh, "Privacy Amplification for BandMF via b-Min-Sep Subsampling",
  arXiv:2602.09338 (v2): Def. 2.1 (zero-out adjacency), §2.5, App. A (docs/references.md).
  Arun Ganesh, "Tighter Privacy Analysis for Truncated Poisson Sampling", arXiv:2508.15089: Def. 2.1
  (docs/references.md).
"""

from __future__ import annotations

import enum


class Direction(str, enum.Enum):
  """Direction of the hockey-stick divergence (see the module docstring)."""

  REMOVE = 'remove'
  ADD = 'add'

  def __str__(self) -> str:
    return self.value


DIRECTIONS: tuple[str, ...] = tuple(d.value for d in Direction)


def signed_loss(loss, direction: str):
  """The loss of ``direction`` from ln P/Q: ``remove`` ln P/Q, ``add`` ln Q/P = −ln P/Q."""
  return loss if direction == Direction.REMOVE else -loss


class Adjacency(str, enum.Enum):
  """Neighbouring relation of a guarantee.

  - ``zero_out``: one example replaced by one with zero gradient (Dong & Ganesh (2026)
    Def. 2.1; Ganesh (2025) Def. 2.1); the Monte Carlo accountants' relation. Without truncation it
    equals add/remove.
  - ``add_remove``: one example added or removed (under truncation the dataset size
    stays public).
  - ``replace_one``: one example replaced by an arbitrary one.
  """

  ZERO_OUT = 'zero_out'
  ADD_REMOVE = 'add_remove'
  REPLACE_ONE = 'replace_one'

  def __str__(self) -> str:
    return self.value


ADJACENCIES: tuple[str, ...] = tuple(a.value for a in Adjacency)


class Method(str, enum.Enum):
  """How a ``Guarantee`` was obtained.

  - ``verified_mc``: Estimate-Verify-Release (Dong & Ganesh (2026) App. A, Algorithm 5);
  - ``fallback``: the last candidate of Algorithm 5, proven by a deterministic accountant;
  - ``deterministic``: a closed-form or PLD accountant;
  - ``estimate``: a Monte Carlo estimate only, **not** a guarantee;
  - ``conjectural``: verified, but the accounting model rests on an unproven conjecture.
  """

  VERIFIED_MC = 'verified_mc'
  FALLBACK = 'fallback'
  DETERMINISTIC = 'deterministic'
  ESTIMATE = 'estimate'
  CONJECTURAL = 'conjectural'

  def __str__(self) -> str:
    return self.value


METHODS: tuple[str, ...] = tuple(m.value for m in Method)
PROVEN_METHODS: tuple[str, ...] = (Method.VERIFIED_MC.value, Method.FALLBACK.value,
                                   Method.DETERMINISTIC.value)


class Purpose(enum.IntEnum):
  """Level 1: what a stream is for. Estimation, verification and training never share draws;
  ``SAMPLING`` is the plain samplers' stream (``sample_privacy_losses``)."""

  ESTIMATION = 1
  VERIFICATION = 2
  TRAINING = 3
  SAMPLING = 4
  REPORT = 5  # the report's δ̂(ε) curve at a released σ: an illustration, never a guarantee
  # The host generators of the tilted law's α-tuples (montecarlo/engine/tilted.py): below it
  # the run's purpose, the direction and the block are folded (``keys.host_stream_key``), so
  # tuples of estimation and verification never coincide and never equal a sample's key.
  TILTED_TUPLES = 6


class DirectionStream(enum.IntEnum):
  """Level 2: the stream of one direction inside a purpose."""

  REMOVE = 0
  ADD = 1


class Stream(enum.IntEnum):
  """Level 4: the sub-streams of one sample's key (folded after the (block, index) pair)."""

  TRIALS = 0            # per-round Bernoulli trials / geometric gaps of the participation chain
  START = 1             # warm-start state, cyclic phase or balls-in-bins bin
  NOISE = 2             # the Gaussian noise z
  REST_BATCH_SIZES = 3  # truncation: the other examples' batch sizes r (then RestStream)
  SURVIVAL = 4          # truncation: whether the sensitive example survives a cut batch
  HISTORY = 5           # truncation, warm start: the other examples' stationary history
  MULTIPLICITY = 6      # multi-attribution: the user's examples per participation


class RestStream(enum.IntEnum):
  """Level 5 under ``Stream.REST_BATCH_SIZES``."""

  TABLE = 0   # uniforms of the CDF-table fast path (all rounds, drawn up front)
  ROUNDS = 1  # one key per round for the general binomial sampler


class BinomialStream(enum.IntEnum):
  """Tags folded into a binomial draw's key (``montecarlo/engine/binomial.py``).

  The fallback's extra BTRS rounds use ``FALLBACK + round`` (rounds < 2²⁰); the table
  path's uniforms use ``TABLE``. They are offsets in one space, so they must not overlap.
  """

  TABLE = 7
  FALLBACK = 1 << 20


# An independent-keys σ sweep gives candidate j the key fold_in(key, CANDIDATE_TAG + j): far
# above the purpose codes, so a candidate's key never equals a purpose stream of the run key.
CANDIDATE_TAG = 1 << 16

# Level 1 and the candidate offsets share the first fold of the run key.
RUN_KEY_CODES: dict[str, int] = {**{f'purpose.{p.name}': int(p) for p in Purpose},
                                 'candidate_tag': CANDIDATE_TAG}
