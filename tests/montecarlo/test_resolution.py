"""What an estimate resolves at a δ (montecarlo/evr/resolution.py) when its directions have
different floors: a tilted remove direction (terms in [0, M], floor 3·M(α, ε)/N) beside a plain
add direction (floor 3/N). Host arithmetic on hand-made estimates: every expected number is
worked out in the comments (the plain rule is pinned by tests/test_cli.py and
tests/test_estimate_json.py on real runs)."""

import numpy as np
import pytest

from jaxacct.errors import InputError
from jaxacct.montecarlo.evr import tilted


def _estimate(epsilons, support, remove, remove_error, add, add_error, num_samples=1000):
  """A ``TiltedDeltaEstimate`` with these per-ε values (nothing is sampled)."""
  arrays = [np.asarray(v, np.float64) for v in (epsilons, support, remove, remove_error, add,
                                                add_error)]
  epsilons, support, remove, remove_error, add, add_error = arrays
  return tilted.TiltedDeltaEstimate(
      epsilons=epsilons, delta_hat={'remove': remove, 'add': add},
      standard_error={'remove': remove_error, 'add': add_error},
      proposal={'remove': 'tilted', 'add': 'plain'}, order=3, log_z=1.5, method='chain',
      support=support, largest_scaled_term=np.ones_like(epsilons), num_samples=num_samples,
      key_data=(0, 7), tables_digest='0' * 32)


def test_a_delta_below_the_add_floor_is_not_resolved_whatever_the_remove_direction_resolves():
  # N = 1000: the add floor 3/N = 3e-3 is above δ = 1e-3; the remove floors 3·M/N = 3e-4 and
  # 3e-5 are below it, and δ̂ + 2·s.e. = 1.2e-4 < δ at ε = 2 (the plain rule's answer).
  result = _estimate([1.0, 2.0], [0.1, 0.01], [5e-3, 1e-4], [1e-4, 1e-5], [2e-3, 0.0],
                     [1e-3, 0.0]).resolved_epsilon(1e-3)
  assert result.epsilon is None
  assert result.needed_samples == 3001  # ⌈3/δ⌉ + 1 for the add direction; the remove needs 31
  assert result.reason.startswith('δ = 0.001 is below the resolution of N = 1,000 samples')
  assert "the plain add direction's 3/N = 0.003 (needs N ≥ 3,001)" in result.reason
  assert ("the tilted remove direction's 3·M(α = 3, ε)/N = 3e-05 at ε = 2 (needs N ≥ 31) "
          'resolves it') in result.reason


def test_the_remove_floor_moves_the_resolved_epsilon_up_where_m_is_large():
  # δ = 1e-2, N = 1000: at ε = 1, M = 5 puts the remove floor at 1.5e-2 > δ although
  # δ̂ + 2·s.e. = 4.2e-3 < δ there; at ε = 2, M = 0.5 (floor 1.5e-3) and 3/N = 3e-3 are below δ.
  estimate = _estimate([1.0, 2.0], [5.0, 0.5], [4e-3, 1e-3], [1e-4, 1e-5], [1e-3, 0.0],
                       [1e-4, 0.0])
  assert estimate.resolved_epsilon(1e-2) == (2.0, None, None)
  # With ε = 1 alone, the remove floor limits: ⌈3·5/δ⌉ + 1 = 1501 samples (the add needs 301).
  alone = _estimate([1.0], [5.0], [4e-3], [1e-4], [1e-3], [1e-4]).resolved_epsilon(1e-2)
  assert alone.epsilon is None and alone.needed_samples == 1501
  assert alone.reason == (
      'δ = 0.01 is below the resolution of N = 1,000 samples per direction: the tilted remove '
      "direction's 3·M(α = 3, ε)/N = 0.015 (needs N ≥ 1,501); the plain add direction's "
      '3/N = 0.003 (needs N ≥ 301) resolves it')


def test_the_first_epsilon_below_delta_counts_its_floor_in_the_samples_it_needs():
  # δ = 1e-2, N = 1000. ε = 1: δ̂ + 2·s.e. = 4.2e-3 < δ but M = 5 (floor 1.5e-2 ≥ δ);
  # ε = 2: floors below δ but δ̂ + 2·s.e. = 9e-3 + 2·1e-3 = 1.1e-2 ≥ δ. The first ε with δ̂ < δ
  # is ε = 1, where the s.e. needs ⌈1000·(2·1e-4/5.8e-3)²⌉ + 1 = 3 samples and the floor 1501.
  result = _estimate([1.0, 2.0], [5.0, 0.5], [4e-3, 9e-3], [1e-4, 1e-3], [1e-3, 0.0],
                     [1e-4, 0.0]).resolved_epsilon(1e-2)
  assert result.epsilon is None and result.needed_samples == 1501
  assert "the tilted remove direction's 3·M(α = 3, ε)/N = 0.015 at ε = 1" in result.reason
  # Both floors below δ and no ε resolved: the band limits, and the reason names each
  # direction's δ̂ + 2·s.e. at the first ε below δ.
  band = _estimate([1.0, 2.0], [0.5, 0.1], [9e-3, 8e-3], [1e-3, 1e-3], [1e-3, 0.0],
                   [1e-4, 0.0]).resolved_epsilon(1e-2)
  assert band.epsilon is None and band.needed_samples == 4001  # ⌈1000·(2e-3/1e-3)²⌉ + 1
  assert band.reason.endswith("(at ε = 1: the tilted remove direction's δ̂ + 2·s.e. = 0.011, "
                              "the plain add direction's δ̂ + 2·s.e. = 0.0012)")


def test_rows_of_the_table_are_rows_of_every_per_epsilon_field():
  estimate = _estimate([1.0, 2.0, 3.0], [0.5, 0.1, 0.01], [4e-3, 1e-3, 1e-4],
                       [1e-4, 1e-5, 1e-6], [1e-3, 0.0, 0.0], [1e-4, 0.0, 0.0])
  rows = estimate.to_dict([3.0, 1.0])
  assert rows['epsilons'] == [3.0, 1.0] and rows['support'] == [0.01, 0.5]
  assert rows['delta_hat'] == {'remove': [1e-4, 4e-3], 'add': [0.0, 1e-3]}
  assert rows['largest_scaled_term'] == [1.0, 1.0]
  assert {k: rows[k] for k in ('proposal', 'tilt_order', 'log_z', 'log_z_method',
                               'num_samples')} == {
      'proposal': {'remove': 'tilted', 'add': 'plain'}, 'tilt_order': 3, 'log_z': 1.5,
      'log_z_method': 'chain', 'num_samples': 1000}
  assert estimate.to_dict(None) == estimate.to_dict()
  with pytest.raises(InputError, match=r'epsilons \[1.5\] are not on this estimate'):
    estimate.to_dict([1.5])
