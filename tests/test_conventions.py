"""The conventions module: enum values equal the strings the API accepts; stream codes unique."""

import enum

import pytest

from jaxacct import conventions
from jaxacct.conventions import (CANDIDATE_TAG, BinomialStream, Direction, DirectionStream,
                                 Purpose, RestStream, Stream)

# Every level of the key tree (conventions module docstring) and the codes folded there.
LEVELS = {
    'purpose': Purpose, 'direction': DirectionStream, 'sample stream': Stream,
    'rest batch sizes': RestStream, 'binomial': BinomialStream,
}


@pytest.mark.parametrize('level', sorted(LEVELS))
def test_codes_of_one_level_are_unique(level):
  members = list(LEVELS[level])
  codes = [int(m) for m in members]
  # IntEnum would silently alias two names with one value: compare names to distinct codes.
  assert len(set(codes)) == len(LEVELS[level].__members__) == len(members)
  assert all(0 <= c < 2**32 for c in codes)  # fold_in takes 32-bit data


def test_candidate_keys_never_meet_purpose_streams():
  # Candidate j of an independent-keys sweep folds CANDIDATE_TAG + j into the run key, like
  # the purposes do: the ranges must not overlap for any realistic number of candidates.
  assert max(int(p) for p in Purpose) < CANDIDATE_TAG
  assert len(set(conventions.RUN_KEY_CODES.values())) == len(conventions.RUN_KEY_CODES)


def test_binomial_tags_do_not_overlap():
  # The fallback's extra rounds use FALLBACK + round with round < 2²⁰.
  assert BinomialStream.TABLE < BinomialStream.FALLBACK


@pytest.mark.parametrize('enum_type', [Direction, conventions.Adjacency, conventions.Method])
def test_string_enums_equal_their_values(enum_type):
  for member in enum_type:
    assert member == member.value and str(member) == member.value
    assert enum_type(member.value) is member


def test_tuples_list_every_member():
  assert conventions.DIRECTIONS == ('remove', 'add')
  assert conventions.ADJACENCIES == ('zero_out', 'add_remove', 'replace_one')
  assert set(conventions.PROVEN_METHODS) < set(conventions.METHODS)


def test_direction_codes_follow_directions():
  assert [d.name for d in Direction] == [d.name for d in DirectionStream]
  assert issubclass(Direction, enum.Enum)
