"""EVR arithmetic with a support bound M (``montecarlo/evr/bounds.py``, ``support=``).

- ``support = 1`` (or omitted) keeps every number bit for bit: ``PINS`` are the outputs of
  evr.py as it was before the support bound existed (hex of the float64), on a grid of
  (N, δ_b, τ, attempts, earlier runs).
- With M < 1 the formulas are today's after δ_b → δ_b/M, target → target/M, result × M
  (docs/proofs/tilting.md (c), (g)); checked against that identity, against the independent
  oracle ``tests/oracles/tilting.py`` (written from the derivation), against the table of
  tilting.md (c), and against exact binomial acceptance probabilities of the extremal law
  X ∈ {0, M}.
- The union over earlier runs with their own supports, the charge 0 for levels ≥ M, no
  sample when M ≤ δ_b, and the refusals.
"""

from __future__ import annotations

import math
import struct

import numpy as np
import pytest

from jaxacct.errors import InputError
from jaxacct.montecarlo.evr import bounds as evr
from oracles import tilting as oracle


def _hex(value: float) -> str:
  return struct.pack('<d', value).hex()


# Outputs of evr.py before the support bound (float64 as little-endian hex; ints as they are).
PINS = [
    ('overall_delta', (1, 0.3), {'attempts': 1}, 'eee76ea9281eed3f'),
    ('overall_delta', (1, 0.3), {'attempts': 2}, '55ca45223002ef3f'),
    ('overall_delta', (1, 0.3), {'attempts': 3}, 'a88967c5fc73ef3f'),
    ('overall_delta', (1, 0.001), {'attempts': 1}, '480a0e072910e83f'),
    ('overall_delta', (1, 0.001), {'attempts': 2}, '1951403d3109ec3f'),
    ('overall_delta', (1, 0.001), {'attempts': 3}, '266fb585ce5bed3f'),
    ('overall_delta', (1, 1e-05), {'attempts': 1}, '1c4bd4994100e83f'),
    ('overall_delta', (1, 1e-05), {'attempts': 2}, '61ca0aae2300ec3f'),
    ('overall_delta', (1, 1e-05), {'attempts': 3}, '919532036e55ed3f'),
    ('overall_delta', (1, 3.3e-07), {'attempts': 1}, '76474fc10200e83f'),
    ('overall_delta', (1, 3.3e-07), {'attempts': 2}, 'c403fc780100ec3f'),
    ('overall_delta', (1, 3.3e-07), {'attempts': 3}, 'dcb232585655ed3f'),
    ('overall_delta', (7, 0.3), {'attempts': 1}, 'b4a290b8bca1e63f'),
    ('overall_delta', (7, 0.3), {'attempts': 2}, '2c4a57f82d2fe83f'),
    ('overall_delta', (7, 0.3), {'attempts': 3}, '6482000124eee83f'),
    ('overall_delta', (7, 0.001), {'attempts': 1}, '13b45edd54add63f'),
    ('overall_delta', (7, 0.001), {'attempts': 2}, '94e77dccdd95da3f'),
    ('overall_delta', (7, 0.001), {'attempts': 3}, 'c5d8001567b2dc3f'),
    ('overall_delta', (7, 1e-05), {'attempts': 1}, 'ae435dd79c65d63f'),
    ('overall_delta', (7, 1e-05), {'attempts': 2}, '5b3e2c96b951da3f'),
    ('overall_delta', (7, 1e-05), {'attempts': 3}, '58274bda9c70dc3f'),
    ('overall_delta', (7, 3.3e-07), {'attempts': 1}, 'cdcc2bf77164d63f'),
    ('overall_delta', (7, 3.3e-07), {'attempts': 2}, '32bf06c5a250da3f'),
    ('overall_delta', (7, 3.3e-07), {'attempts': 3}, '120200f4916fdc3f'),
    ('overall_delta', (1000, 0.3), {'attempts': 1}, '6722eee8dc7dd63f'),
    ('overall_delta', (1000, 0.3), {'attempts': 2}, 'd4fc5aa9c3b2d63f'),
    ('overall_delta', (1000, 0.3), {'attempts': 3}, '528460e129d0d63f'),
    ('overall_delta', (1000, 0.001), {'attempts': 1}, '6eb4658c8fe0863f'),
    ('overall_delta', (1000, 0.001), {'attempts': 2}, '2df6de0dc76d883f'),
    ('overall_delta', (1000, 0.001), {'attempts': 3}, 'd99e6601a654893f'),
    ('overall_delta', (1000, 1e-05), {'attempts': 1}, 'cbc65a3e2249803f'),
    ('overall_delta', (1000, 1e-05), {'attempts': 2}, '99c9dea905b2813f'),
    ('overall_delta', (1000, 1e-05), {'attempts': 3}, '87cb26eefd84823f'),
    ('overall_delta', (1000, 3.3e-07), {'attempts': 1}, '33d33f5ebb23803f'),
    ('overall_delta', (1000, 3.3e-07), {'attempts': 2}, '34e49d142b8c813f'),
    ('overall_delta', (1000, 3.3e-07), {'attempts': 3}, 'a8185bc1e45e823f'),
    ('overall_delta', (123457, 0.3), {'attempts': 1}, '0be4f76d788cd33f'),
    ('overall_delta', (123457, 0.3), {'attempts': 2}, '1f8119113290d33f'),
    ('overall_delta', (123457, 0.3), {'attempts': 3}, '7ad437a34c92d33f'),
    ('overall_delta', (123457, 0.001), {'attempts': 1}, '84181c24318b583f'),
    ('overall_delta', (123457, 0.001), {'attempts': 2}, '27b1775183d3583f'),
    ('overall_delta', (123457, 0.001), {'attempts': 3}, '6a51d50c02fd583f'),
    ('overall_delta', (123457, 1e-05), {'attempts': 1}, 'fa0aa1acda2e223f'),
    ('overall_delta', (123457, 1e-05), {'attempts': 2}, 'defe45f188fa223f'),
    ('overall_delta', (123457, 1e-05), {'attempts': 3}, '8094411c5771233f'),
    ('overall_delta', (123457, 3.3e-07), {'attempts': 1}, 'b9d03e0102981b3f'),
    ('overall_delta', (123457, 3.3e-07), {'attempts': 2}, 'a91f3038ff111d3f'),
    ('overall_delta', (123457, 3.3e-07), {'attempts': 3}, '7cc125f012ef1d3f'),
    ('overall_delta', (10000000, 0.3), {'attempts': 1}, 'be432bad573ed33f'),
    ('overall_delta', (10000000, 0.3), {'attempts': 2}, '245b2466b43ed33f'),
    ('overall_delta', (10000000, 0.3), {'attempts': 3}, 'eafebe2ee93ed33f'),
    ('overall_delta', (10000000, 0.001), {'attempts': 1}, 'ffebc82f2045513f'),
    ('overall_delta', (10000000, 0.001), {'attempts': 2}, '9a68d444eb4a513f'),
    ('overall_delta', (10000000, 0.001), {'attempts': 3}, '4a9cab983d4e513f'),
    ('overall_delta', (10000000, 1e-05), {'attempts': 1}, 'ba97f8523fa3f13e'),
    ('overall_delta', (10000000, 1e-05), {'attempts': 2}, 'b1ab70bbcdd1f13e'),
    ('overall_delta', (10000000, 1e-05), {'attempts': 3}, 'b1363954b3ecf13e'),
    ('overall_delta', (10000000, 3.3e-07), {'attempts': 1}, 'e7b022d390dcc63e'),
    ('overall_delta', (10000000, 3.3e-07), {'attempts': 2}, 'd50d97079686c73e'),
    ('overall_delta', (10000000, 3.3e-07), {'attempts': 3}, '7d689e9fb6e9c73e'),
    ('overall_delta', (2000000000, 0.3), {'attempts': 1}, 'e42d9bc21434d33f'),
    ('overall_delta', (2000000000, 0.3), {'attempts': 2}, '2c9e20941a34d33f'),
    ('overall_delta', (2000000000, 0.3), {'attempts': 3}, '851b06e91d34d33f'),
    ('overall_delta', (2000000000, 0.001), {'attempts': 1}, '47ac94499073503f'),
    ('overall_delta', (2000000000, 0.001), {'attempts': 2}, 'dff701d2ec73503f'),
    ('overall_delta', (2000000000, 0.001), {'attempts': 3}, 'e6a97e072274503f'),
    ('overall_delta', (2000000000, 1e-05), {'attempts': 1}, 'af303231b4e7e53e'),
    ('overall_delta', (2000000000, 1e-05), {'attempts': 2}, 'fc53ade524ece53e'),
    ('overall_delta', (2000000000, 1e-05), {'attempts': 3}, '3315d339b4eee53e'),
    ('overall_delta', (2000000000, 3.3e-07), {'attempts': 1}, '40d689d1df309c3e'),
    ('overall_delta', (2000000000, 3.3e-07), {'attempts': 2}, '1969bb9f054d9c3e'),
    ('overall_delta', (2000000000, 3.3e-07), {'attempts': 3}, '963fc1e64b5d9c3e'),
    ('overall_delta', (7, 0.01), {'attempts': 3, 'earlier': ((4, 0.006999999999999999),)}, '9ab42c89f30be13f'),
    ('overall_delta', (7, 0.01), {'attempts': 3, 'earlier': ((21, 0.013000000000000001), (1, 0.001))}, '376039770433e83f'),
    ('overall_delta', (7, 1e-05), {'attempts': 3, 'earlier': ((4, 7e-06),)}, '5da9d45d5a59e03f'),
    ('overall_delta', (7, 1e-05), {'attempts': 3, 'earlier': ((21, 1.3000000000000001e-05), (1, 1.0000000000000002e-06))}, '13712fc8551ae83f'),
    ('overall_delta', (123457, 0.01), {'attempts': 3, 'earlier': ((61729, 0.006999999999999999),)}, '51e76fc16f5c873f'),
    ('overall_delta', (123457, 0.01), {'attempts': 3, 'earlier': ((370371, 0.013000000000000001), (24691, 0.001))}, 'b344c8cad9748c3f'),
    ('overall_delta', (123457, 1e-05), {'attempts': 3, 'earlier': ((61729, 7e-06),)}, '65f1038998932d3f'),
    ('overall_delta', (123457, 1e-05), {'attempts': 3, 'earlier': ((370371, 1.3000000000000001e-05), (24691, 1.0000000000000002e-06))}, 'ed7edf2a32f43d3f'),
    ('overall_delta', (10000000, 0.01), {'attempts': 3, 'earlier': ((5000001, 0.006999999999999999),)}, 'f9d19c3a9ed1843f'),
    ('overall_delta', (10000000, 0.01), {'attempts': 3, 'earlier': ((30000000, 0.013000000000000001), (2000000, 0.001))}, '8dd754f102d88a3f'),
    ('overall_delta', (10000000, 1e-05), {'attempts': 3, 'earlier': ((5000001, 7e-06),)}, 'f351697c1ad5f13e'),
    ('overall_delta', (10000000, 1e-05), {'attempts': 3, 'earlier': ((30000000, 1.3000000000000001e-05), (2000000, 1.0000000000000002e-06))}, 'e46e813a3f11f23e'),
    ('overall_delta_at', (1, 0.3, 1.0), {}, '000000000000f03f'),
    ('hoeffding', (1, 1.0, 0.3), {}, '000000000000f03f'),
    ('false_acceptance_bound', (1, 0.3, 0.3), {}, '000000000000f03f'),
    ('overall_delta_at', (1, 0.3, 1.5), {}, 'a22f577f6330ef3f'),
    ('hoeffding', (1, 1.5, 0.3), {}, '9b56e45b8686ee3f'),
    ('false_acceptance_bound', (1, 0.3, 0.44999999999999996), {}, '9b56e45b8686ee3f'),
    ('overall_delta_at', (1, 0.3, 3.0), {}, 'a24afaa783f0ed3f'),
    ('hoeffding', (1, 3.0, 0.3), {}, 'aed48d1f49cad63f'),
    ('false_acceptance_bound', (1, 0.3, 0.8999999999999999), {}, 'aed48d1f49cad63f'),
    ('overall_delta_at', (1, 0.3, 3.3333333333333335), {}, '000000000000f03f'),
    ('hoeffding', (1, 3.3333333333333335, 0.3), {}, '0000000000000000'),
    ('false_acceptance_bound', (1, 0.3, 1.0), {}, '0000000000000000'),
    ('overall_delta_at', (1, 0.001, 1.0), {}, '000000000000f03f'),
    ('hoeffding', (1, 1.0, 0.001), {}, '000000000000f03f'),
    ('false_acceptance_bound', (1, 0.001, 0.001), {}, '000000000000f03f'),
    ('overall_delta_at', (1, 0.001, 1.5), {}, 'c45f66ca39ffef3f'),
    ('hoeffding', (1, 1.5, 0.001), {}, '1e542c7e39ffef3f'),
    ('false_acceptance_bound', (1, 0.001, 0.0015), {}, '1e542c7e39ffef3f'),
    ('overall_delta_at', (1, 0.001, 3.0), {}, '667345fc9ff8ef3f'),
    ('hoeffding', (1, 3.0, 0.001), {}, '69bce94d9af8ef3f'),
    ('false_acceptance_bound', (1, 0.001, 0.003), {}, '69bce94d9af8ef3f'),
    ('overall_delta_at', (1, 0.001, 1000.0), {}, '000000000000f03f'),
    ('hoeffding', (1, 1000.0, 0.001), {}, '0000000000000000'),
    ('false_acceptance_bound', (1, 0.001, 1.0), {}, '0000000000000000'),
    ('overall_delta_at', (1, 1e-05, 1.0), {}, '000000000000f03f'),
    ('hoeffding', (1, 1.0, 1e-05), {}, '000000000000f03f'),
    ('false_acceptance_bound', (1, 1e-05, 1e-05), {}, '000000000000f03f'),
    ('overall_delta_at', (1, 1e-05, 1.5), {}, 'b9867804feffef3f'),
    ('hoeffding', (1, 1.5, 1e-05), {}, 'cb937604feffef3f'),
    ('false_acceptance_bound', (1, 1e-05, 1.5000000000000002e-05), {}, 'cb937604feffef3f'),
    ('overall_delta_at', (1, 1e-05, 3.0), {}, 'aa6cc518edffef3f'),
    ('hoeffding', (1, 3.0, 1e-05), {}, '1142a018edffef3f'),
    ('false_acceptance_bound', (1, 1e-05, 3.0000000000000004e-05), {}, '1142a018edffef3f'),
    ('overall_delta_at', (1, 1e-05, 99999.99999999999), {}, 'ffffffffffffef3f'),
    ('hoeffding', (1, 99999.99999999999, 1e-05), {}, '1908468c0402a03c'),
    ('false_acceptance_bound', (1, 1e-05, 0.9999999999999999), {}, '1908468c0402a03c'),
    ('overall_delta_at', (1000, 0.3, 1.0), {}, '000000000000f03f'),
    ('hoeffding', (1000, 1.0, 0.3), {}, '000000000000f03f'),
    ('false_acceptance_bound', (1000, 0.3, 0.3), {}, '000000000000f03f'),
    ('overall_delta_at', (1000, 0.3, 1.5), {}, 'ccccccccccccdc3f'),
    ('hoeffding', (1000, 1.5, 0.3), {}, '6a0842e394bfae3b'),
    ('false_acceptance_bound', (1000, 0.3, 0.44999999999999996), {}, '6a0842e394bfae3b'),
    ('overall_delta_at', (1000, 0.3, 3.0), {}, 'ccccccccccccec3f'),
    ('hoeffding', (1000, 3.0, 0.3), {}, '0000000000000000'),
    ('false_acceptance_bound', (1000, 0.3, 0.8999999999999999), {}, '0000000000000000'),
    ('overall_delta_at', (1000, 0.3, 3.3333333333333335), {}, '000000000000f03f'),
    ('hoeffding', (1000, 3.3333333333333335, 0.3), {}, '0000000000000000'),
    ('false_acceptance_bound', (1000, 0.3, 1.0), {}, '0000000000000000'),
    ('overall_delta_at', (1000, 0.001, 1.0), {}, '000000000000f03f'),
    ('hoeffding', (1000, 1.0, 0.001), {}, '000000000000f03f'),
    ('false_acceptance_bound', (1000, 0.001, 0.001), {}, '000000000000f03f'),
    ('overall_delta_at', (1000, 0.001, 1.5), {}, '55c226cb391ded3f'),
    ('hoeffding', (1000, 1.5, 0.001), {}, '0b7996ad1d1ced3f'),
    ('false_acceptance_bound', (1000, 0.001, 0.0015), {}, '0b7996ad1d1ced3f'),
    ('overall_delta_at', (1000, 0.001, 3.0), {}, '788bf9fee90bda3f'),
    ('hoeffding', (1000, 3.0, 0.001), {}, '7713b996adeed93f'),
    ('false_acceptance_bound', (1000, 0.001, 0.003), {}, '7713b996adeed93f'),
    ('overall_delta_at', (1000, 0.001, 1000.0), {}, '000000000000f03f'),
    ('hoeffding', (1000, 1000.0, 0.001), {}, '0000000000000000'),
    ('false_acceptance_bound', (1000, 0.001, 1.0), {}, '0000000000000000'),
    ('overall_delta_at', (1000, 1e-05, 1.0), {}, '000000000000f03f'),
    ('hoeffding', (1000, 1.0, 1e-05), {}, '000000000000f03f'),
    ('false_acceptance_bound', (1000, 1e-05, 1e-05), {}, '000000000000f03f'),
    ('overall_delta_at', (1000, 1e-05, 1.5), {}, 'dabd636642f8ef3f'),
    ('hoeffding', (1000, 1.5, 1e-05), {}, '64b8c75e42f8ef3f'),
    ('false_acceptance_bound', (1000, 1e-05, 1.5000000000000002e-05), {}, '64b8c75e42f8ef3f'),
    ('overall_delta_at', (1000, 1e-05, 3.0), {}, '8c4cae9e7db6ef3f'),
    ('hoeffding', (1000, 3.0, 1e-05), {}, '88bf260e7db6ef3f'),
    ('false_acceptance_bound', (1000, 1e-05, 3.0000000000000004e-05), {}, '88bf260e7db6ef3f'),
    ('overall_delta_at', (1000, 1e-05, 99999.99999999999), {}, 'ffffffffffffef3f'),
    ('hoeffding', (1000, 99999.99999999999, 1e-05), {}, '0000000000000000'),
    ('false_acceptance_bound', (1000, 1e-05, 0.9999999999999999), {}, '0000000000000000'),
    ('overall_delta_at', (10000000, 0.3, 1.0), {}, '000000000000f03f'),
    ('hoeffding', (10000000, 1.0, 0.3), {}, '000000000000f03f'),
    ('false_acceptance_bound', (10000000, 0.3, 0.3), {}, '000000000000f03f'),
    ('overall_delta_at', (10000000, 0.3, 1.5), {}, 'ccccccccccccdc3f'),
    ('hoeffding', (10000000, 1.5, 0.3), {}, '0000000000000000'),
    ('false_acceptance_bound', (10000000, 0.3, 0.44999999999999996), {}, '0000000000000000'),
    ('overall_delta_at', (10000000, 0.3, 3.0), {}, 'ccccccccccccec3f'),
    ('hoeffding', (10000000, 3.0, 0.3), {}, '0000000000000000'),
    ('false_acceptance_bound', (10000000, 0.3, 0.8999999999999999), {}, '0000000000000000'),
    ('overall_delta_at', (10000000, 0.3, 3.3333333333333335), {}, '000000000000f03f'),
    ('hoeffding', (10000000, 3.3333333333333335, 0.3), {}, '0000000000000000'),
    ('false_acceptance_bound', (10000000, 0.3, 1.0), {}, '0000000000000000'),
    ('overall_delta_at', (10000000, 0.001, 1.0), {}, '000000000000f03f'),
    ('hoeffding', (10000000, 1.0, 0.001), {}, '000000000000f03f'),
    ('false_acceptance_bound', (10000000, 0.001, 0.001), {}, '000000000000f03f'),
    ('overall_delta_at', (10000000, 0.001, 1.5), {}, 'fa7e6abc7493583f'),
    ('hoeffding', (10000000, 1.5, 0.001), {}, '0000000000000000'),
    ('false_acceptance_bound', (10000000, 0.001, 0.0015), {}, '0000000000000000'),
    ('overall_delta_at', (10000000, 0.001, 3.0), {}, 'fa7e6abc7493683f'),
    ('hoeffding', (10000000, 3.0, 0.001), {}, '0000000000000000'),
    ('false_acceptance_bound', (10000000, 0.001, 0.003), {}, '0000000000000000'),
    ('overall_delta_at', (10000000, 0.001, 1000.0), {}, '000000000000f03f'),
    ('hoeffding', (10000000, 1000.0, 0.001), {}, '0000000000000000'),
    ('false_acceptance_bound', (10000000, 0.001, 1.0), {}, '0000000000000000'),
    ('overall_delta_at', (10000000, 1e-05, 1.0), {}, '000000000000f03f'),
    ('hoeffding', (10000000, 1.0, 1e-05), {}, '000000000000f03f'),
    ('false_acceptance_bound', (10000000, 1e-05, 1e-05), {}, '000000000000f03f'),
    ('overall_delta_at', (10000000, 1e-05, 1.5), {}, 'e5f14926457c183f'),
    ('hoeffding', (10000000, 1.5, 1e-05), {}, '7b831951b78d143f'),
    ('false_acceptance_bound', (10000000, 1e-05, 1.5000000000000002e-05), {}, '7b831951b78d143f'),
    ('overall_delta_at', (10000000, 1e-05, 3.0), {}, '6a1d554d1075ff3e'),
    ('hoeffding', (10000000, 3.0, 1e-05), {}, '92ab0d81e100cf37'),
    ('false_acceptance_bound', (10000000, 1e-05, 3.0000000000000004e-05), {}, '92ab0d81e100cf37'),
    ('overall_delta_at', (10000000, 1e-05, 99999.99999999999), {}, 'ffffffffffffef3f'),
    ('hoeffding', (10000000, 99999.99999999999, 1e-05), {}, '0000000000000000'),
    ('false_acceptance_bound', (10000000, 1e-05, 0.9999999999999999), {}, '0000000000000000'),
    ('base_delta', (10000, 0.01), {'attempts': 1}, 'c7fa741746b5783f'),
    ('base_delta', (100000, 0.001), {'attempts': 2}, '2745606b78df413f'),
    ('base_delta', (1000000, 0.001), {'attempts': 1}, '059b82be47a44b3f'),
    ('base_delta', (10000000, 1e-05), {'attempts': 1}, '6e889ca99251d43e'),
    ('minimum_samples', (0.005, 0.01), {'attempts': 1}, 5788),
    ('minimum_samples', (5e-06, 1e-05), {'attempts': 2}, 11226533),
    ('minimum_samples', (0.0005, 0.001), {'attempts': 3}, 82822),
    ('minimum_samples', (0.2, 0.5), {'attempts': 1}, 18),
    ('minimum_samples', (0.0008, 0.001), {'attempts': 2, 'earlier': ((100000000, 0.00072),)}, 588622),
    ('resolve_sample_size', (0.001, None, None), {}, [75013, 'fca9f1d24d62403f']),
    ('resolve_sample_size', (0.001, 100000, None), {}, [100000, '61ca84e30e45423f']),
    ('resolve_sample_size', (0.001, None, 0.0004), {}, [48189, '2d431cebe2363a3f']),
    ('default_estimation_samples', (1000000, 3e-05), {}, 250000),
]


def _bits(value):
  if isinstance(value, tuple):
    return [v if isinstance(v, int) else _hex(v) for v in value]
  return value if isinstance(value, int) else _hex(value)


@pytest.mark.parametrize('name, args, kwargs, expected', PINS,
                         ids=[f'{p[0]}-{i}' for i, p in enumerate(PINS)])
def test_support_one_keeps_every_bit(name, args, kwargs, expected):
  function = getattr(evr, name)
  assert _bits(function(*args, **kwargs)) == expected  # the support-free call
  assert _bits(function(*args, **kwargs, support=1.0)) == expected
  if kwargs.get('earlier'):  # an earlier pair is a plain run: the triple (N_j, δ_b,j, 1)
    triples = tuple((n_j, b_j, 1.0) for n_j, b_j in kwargs['earlier'])
    assert _bits(function(*args, **{**kwargs, 'earlier': triples}, support=1)) == expected


# ---------------------------------------------------------------- one support M: scaling
GRID = [(n, base, m) for n in (50, 3_000, 10**5, 10**7) for base in (2e-3, 5e-6, 1e-8)
        for m in (0.5, 1e-2, 3e-4) if base < m]


@pytest.mark.parametrize('n, base, m', GRID)
def test_overall_delta_is_m_times_today_at_the_scaled_threshold(n, base, m):
  value = evr.overall_delta(n, base, support=m)
  assert value == pytest.approx(m * evr.overall_delta(n, base / m), rel=1e-9)
  assert value == pytest.approx(oracle.overall_delta(n, base, m, 'refined'), rel=1e-9)
  assert base <= value <= m
  for attempts in (2, 3):  # k identical runs: k·q at the scaled threshold
    assert evr.overall_delta(n, base, support=m, attempts=attempts) == pytest.approx(
        m * evr.overall_delta(n, base / m, attempts=attempts), rel=1e-9)


@pytest.mark.parametrize('n, base, m', GRID[::3])
def test_overall_delta_at_is_the_objective(n, base, m):
  for tau in (1.0, 1.01, 2.0, 10.0, 0.5 * m / base, m / base, 1.0 / base):
    level = tau * base
    if level < m:
      q = math.exp(-n * evr.bernoulli_kl(base / m, level / m))
      expected = level + q * (m - level)
    else:
      expected = m  # q = 0: no candidate with terms in [0, M] has δ > M
    assert evr.overall_delta_at(n, base, tau, support=m) == pytest.approx(expected, rel=1e-12)
    assert evr.overall_delta(n, base, support=m) <= evr.overall_delta_at(n, base, tau,
                                                                         support=m) + 1e-18


@pytest.mark.parametrize('target, m, expected', [
    # docs/proofs/tilting.md (c), the "refined" column (δ_b = δ_t/2).
    (1e-5, 1e-2, 75_013), (1e-5, 1e-3, 5_788), (1e-5, 1e-4, 372), (1e-5, 5e-5, 143),
    (1e-8, 1e-6, 5_788), (1e-8, 1e-7, 372),
])
def test_minimum_samples_reproduce_the_derivation_table(target, m, expected):
  n = evr.minimum_samples(target / 2, target, support=m)
  assert n == expected
  assert n == evr.minimum_samples(target / 2 / m, target / m)  # scale-free
  assert evr.overall_delta(n, target / 2, support=m) <= target
  assert evr.overall_delta(n - 1, target / 2, support=m) > target


def test_fixed_sample_values_of_the_derivation():
  # tilting.md (c): N = 1e5, δ_b = 5e-6 — today 1.47e-4; M = 1e-3: 6.11e-6; M = 1e-4: 5.31e-6.
  assert evr.overall_delta(10**5, 5e-6) == pytest.approx(1.47e-4, rel=5e-3)
  assert evr.overall_delta(10**5, 5e-6, support=1e-3) == pytest.approx(6.11e-6, rel=1e-3)
  assert evr.overall_delta(10**5, 5e-6, support=1e-4) == pytest.approx(5.31e-6, rel=1e-3)


@pytest.mark.parametrize('n, target, m', [(10**4, 1e-5, 1e-3), (10**6, 1e-6, 3e-3),
                                          (2_000, 1e-3, 0.2), (10**5, 1e-7, 1e-5)])
def test_base_delta_round_trips_and_scales(n, target, m):
  base = evr.base_delta(n, target, support=m)
  assert evr.overall_delta(n, base, support=m) <= target  # never above the target
  assert evr.overall_delta(n, base * (1 + 1e-6), support=m) > target
  assert base == pytest.approx(m * evr.base_delta(n, target / m), rel=1e-6)


def test_monotone_in_support_threshold_and_samples():
  supports = np.geomspace(2e-5, 1.0, 25)
  values = [evr.overall_delta(10**5, 1e-5, support=m) for m in supports]
  assert np.all(np.diff(values) >= 0)  # a larger M only loosens
  bases = np.geomspace(1e-9, 9e-4, 25)
  values = [evr.overall_delta(10**5, b, support=1e-3) for b in bases]
  assert np.all(np.diff(values) >= 0)
  counts = [10, 100, 10**3, 10**4, 10**5, 10**6]
  values = [evr.overall_delta(n, 1e-6, support=1e-3) for n in counts]
  assert np.all(np.diff(values) <= 0)


# ---------------------------------------------------------------- Fact 4.2 on [0, M]
@pytest.mark.parametrize('n, base, true, m', [(500, 1e-3, 3e-3, 1e-2), (20_000, 2e-5, 5e-5, 1e-3),
                                              (40, 0.01, 0.05, 0.2), (10**5, 1e-6, 2e-6, 1e-4)])
def test_scaled_fact_bounds_the_exact_acceptance_of_the_extremal_law(n, base, true, m):
  exact, bound = oracle.scaled_binomial_acceptance(n, base, true, m)
  ours = evr.false_acceptance_bound(n, base, true, support=m)
  assert ours == pytest.approx(bound, rel=1e-12)
  assert exact <= ours
  assert evr.hoeffding(n, true / base, base, support=m) == pytest.approx(ours, rel=1e-12)
  # A smaller range gives a smaller bound (KL(a/M ‖ b/M) decreases in M).
  assert ours <= evr.false_acceptance_bound(n, base, true)


def test_no_law_on_zero_to_m_has_a_mean_above_m():
  assert evr.false_acceptance_bound(10, 1e-3, 2e-2, support=1e-2) == 0.0
  assert evr.false_acceptance_bound(10, 1e-3, 1e-2, support=1e-2) == 0.0  # X ≡ M: δ̂ = M
  assert evr.false_acceptance_bound(10, 2e-2, 1e-2, support=1e-2) == 1.0
  assert evr.hoeffding(10, 3.0, 1e-2, support=1e-2) == 0.0   # δ ≥ M, τδ > M
  assert evr.hoeffding(10, 1.0, 1e-2, support=1e-2) == 1.0   # δ = M = τδ


# ---------------------------------------------------------------- no sample when M ≤ δ_b
def test_support_at_most_the_threshold_needs_no_sample():
  assert not evr.needs_samples(1e-4, support=1e-4)
  assert evr.needs_samples(1e-4, support=2e-4)
  assert evr.overall_delta(0, 1e-4, support=5e-5) == 1e-4
  assert evr.overall_delta(10**6, 1e-4, support=5e-5) == 1e-4  # samples change nothing
  assert evr.overall_delta_at(0, 1e-4, 3.0, support=1e-4) == 1e-4
  assert evr.minimum_samples(1e-4, 2e-4, support=1e-4) == 0
  assert evr.base_delta(0, 1e-4, support=3e-5) == 1e-4  # the target itself
  assert evr.resolve_sample_size(1e-4, None, None, support=3e-5) == (0, 1e-4)
  assert evr.resolve_sample_size(1e-4, None, 6e-5, support=3e-5) == (0, 6e-5)
  assert evr.resolve_sample_size(1e-4, 0, 6e-5, support=3e-5) == (0, 6e-5)
  # M between δ_b and the target: samples are needed, and far fewer than ~1/δ.
  n, base = evr.resolve_sample_size(1e-5, None, None, support=1e-3)
  assert (n, base) == (5_788, 5e-6)
  with pytest.raises(InputError, match='num_samples'):
    evr.overall_delta(0, 1e-4, support=2e-4)


# ---------------------------------------------------------------- earlier runs, own supports
def _union_objective(n, base, m, level, earlier, attempts):
  """L + min(1, Σ q_j(L))·(D − L), written from formula 3 of evr.py's docstring."""
  runs = [(n, base, m)] * (attempts - len(earlier)) + list(earlier)
  top = max(max(m_j, b_j) for _, b_j, m_j in runs)

  def q(n_j, b_j, m_j):
    if b_j >= level:
      return 1.0
    if level >= m_j:
      return 0.0
    return math.exp(-n_j * oracle.bernoulli_kl(b_j / m_j, level / m_j))

  return level + min(1.0, sum(q(*run) for run in runs)) * max(top - level, 0.0), top


@pytest.mark.parametrize('earlier', [
    ((10**5, 2e-6, 1e-3),),                       # same support, other N and δ_b
    ((10**5, 5e-6, 1.0),),                        # a plain earlier run: D = 1
    ((3_000, 5e-6, 1e-4), (10**6, 1e-6, 1.0)),
    ((100, 8e-6, 7e-6),),                         # certified earlier run (M_j ≤ δ_b,j)
    ((10**4, 2e-5, 1e-2),),                       # δ_b,j above some levels: charged 1 there
])
def test_union_over_runs_with_their_own_supports(earlier):
  n, base, m = 20_000, 5e-6, 1e-3
  attempts = len(earlier) + 1
  value = evr.overall_delta(n, base, attempts=attempts, earlier=earlier, support=m)
  levels = base * (1.0 + np.geomspace(1e-9, 1e6, 4001))
  objective = [_union_objective(n, base, m, level, earlier, attempts) for level in levels]
  top = objective[0][1]
  feasible = min(f for (f, _), level in zip(objective, levels) if level <= top)
  assert value <= feasible * (1 + 1e-12)           # the minimiser is at least as good as a scan
  assert value >= feasible * (1 - 1e-3)            # and is a value of the objective
  assert base <= value <= top
  assert value >= evr.overall_delta(n, base, support=m)  # more runs never help


def test_the_union_charges_what_formula_three_says():
  n, base, m = 20_000, 5e-6, 1e-3
  # An earlier run whose support is below every level it could be charged at costs nothing.
  free = evr.overall_delta(n, base, attempts=2, earlier=((1, 4e-6, 4.5e-6),), support=m)
  alone = evr.overall_delta(n, base, support=m)
  assert free == pytest.approx(alone, rel=1e-6) and free >= alone
  # An earlier plain run makes D = 1: the top factor is 1 − L, not M − L.
  plain = evr.overall_delta(n, base, attempts=2, earlier=((10**9, 1e-6, 1.0),), support=m)
  assert plain > alone
  # Identical triples are charged as this run: attempts·q.
  assert evr.overall_delta(n, base, attempts=3, earlier=((n, base, m), (n, base, m)),
                           support=m) == evr.overall_delta(n, base, attempts=3, support=m)


# ---------------------------------------------------------------- refusals and sizes
@pytest.mark.parametrize('call, message', [
    (lambda: evr.overall_delta(100, 1e-3, support=1.5), 'support = 1.5 > 1'),
    (lambda: evr.overall_delta(100, 1e-3, support=0.0), 'support must be in'),
    (lambda: evr.overall_delta(100, 1e-3, support=math.nan), 'support'),
    (lambda: evr.minimum_samples(1e-4, 2e-4, support=-1.0), 'support'),
    (lambda: evr.overall_delta(100, 1e-3, attempts=2, earlier=((10, 1e-3, 2.0),)),
     'earlier support'),
    (lambda: evr.overall_delta(100, 1e-3, attempts=2, earlier=((10, 1e-3, 0.5, 1),)),
     'triples'),
    (lambda: evr.overall_delta(100, 1e-3, attempts=2, earlier=((0, 1e-3, 0.5),)),
     'earlier num_samples'),
    (lambda: evr.base_delta(0, 1e-4, support=2e-4), 'num_samples'),
    (lambda: evr.resolve_sample_size(1e-4, 0, None, support=2e-4), 'num_samples'),
])
def test_bad_supports_are_refused(call, message):
  with pytest.raises(InputError, match=message):
    call()


def test_estimation_samples_scale_with_the_support():
  base, m = 2.0**-20, 2.0**-10  # exact binary fractions: ⌈50·M/δ_b⌉ = 51,200
  assert evr.default_estimation_samples(10**9, base, support=m) == 51_200
  assert evr.default_estimation_samples(10**9, base) == 52_428_800
  assert evr.default_estimation_samples(0, base, support=m) == 1000
