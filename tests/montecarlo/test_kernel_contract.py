"""Every registered Monte Carlo scheme kernel under the kernel contract (``kernel_contract.py``).

One class per kernel family, each with one small mechanism (n ≤ 4 rounds, the band
c = (1, 0.5), σ = 1) and its exact dominating pair from the brute-force oracles of
``tests/oracles``. A new kernel adds its class here: the imported
``test_every_registered_kernel_has_a_contract_class`` names a registered kernel that has none.
"""

import numpy as np

import jaxacct
from jaxacct.montecarlo.engine import kernels
from oracles import brute_force, multi_attribution, truncated_brute_force

from kernel_contract import (Component, KernelContract, Mixture, untruncated,
                             test_bitwise_identical_on_one_and_several_devices,
                             test_every_registered_kernel_has_a_contract_class)

__all__ = ['test_bitwise_identical_on_one_and_several_devices',
           'test_every_registered_kernel_has_a_contract_class']


class TestBMinSepKernel(KernelContract):
  # Warm start (Algorithm 2) with b = 2: the renewal chain, its stationary start and the
  # b-min-sep recursion; Poisson (b = 1) and cold start are special cases of the same code.
  kernel = kernels.bminsep.BMinSepKernel
  iterations = 3

  def scheme(self, iterations):
    return jaxacct.BMinSep(sampling_prob=0.5, iterations=iterations, min_sep=2, warm_start=True)

  def components(self):
    return untruncated(brute_force.participation_law(
        'bminsep', iterations=self.iterations, sampling_prob=0.5, min_sep=2, warm_start=True),
        self.c_col)


class TestTruncatedBMinSepKernel(KernelContract):
  # Seed 000 App. D with 3 other examples and B = 1: most rounds truncate, both directions
  # have a signal, and the warm-start history bars some of the others. p > 1/2 keeps the
  # batch sizes on the general binomial sampler (the inversion table's program takes twice
  # as long to compile; test_truncated_bminsep.py covers it).
  kernel = kernels.truncated.TruncatedBMinSepKernel
  iterations = 2
  sampling_prob, truncated_batch_size, dataset_size = 0.6, 1, 4

  def scheme(self, iterations):
    return jaxacct.BMinSep(sampling_prob=self.sampling_prob, iterations=iterations, min_sep=2,
                           warm_start=True, truncated_batch_size=self.truncated_batch_size,
                           dataset_size=self.dataset_size)

  def components(self):
    matrix = brute_force.strategy_matrix(self.c_col, self.iterations)
    law = truncated_brute_force.rest_batch_size_law(self.dataset_size, self.sampling_prob, 2,
                                                    self.iterations, True)
    components = []
    for rest, probability in law.items():
      x_p, x_q, log_probs = truncated_brute_force.truncated_participation_law(
          rest, self.sampling_prob, 2, self.truncated_batch_size, True)
      components.append(Component(probability, rest, matrix, Mixture(x_p, log_probs),
                                  Mixture(x_q, log_probs)))
    return components


class TestCyclicPoissonKernel(KernelContract):
  # A uniform phase of 2 (independent partition): phase 0 has two rounds, phase 1 one.
  kernel = kernels.cyclic_poisson.CyclicPoissonKernel
  iterations = 3

  def scheme(self, iterations):
    return jaxacct.CyclicPoisson(sampling_prob=0.5, iterations=iterations, cycle_length=2)

  def components(self):
    return untruncated(brute_force.participation_law(
        'cyclic_poisson', iterations=self.iterations, sampling_prob=0.5, cycle_length=2),
        self.c_col)


class TestBallsInBinsKernel(KernelContract):
  # Two bins of two rounds each; the band overlaps the next bin's rounds.
  kernel = kernels.balls_in_bins.BallsInBinsKernel
  iterations = 4

  def scheme(self, iterations):
    return jaxacct.BallsInBins(iterations=iterations, cycle_length=2)

  def components(self):
    return untruncated(brute_force.participation_law(
        'balls_in_bins', iterations=self.iterations, cycle_length=2), self.c_col)


class TestMultiAttributionKernel(KernelContract):
  # Theorem 6.1 with k_u = 2 examples per user (k_u = 1 is the b-min-sep kernel's).
  kernel = kernels.multi_attribution.MultiAttributionKernel
  iterations = 3

  def scheme(self, iterations):
    return jaxacct.MultiAttributionBMinSep(sampling_prob=0.3, iterations=iterations, min_sep=2,
                                           max_examples_per_user=2)

  def components(self):
    patterns, probabilities = multi_attribution.pattern_law(self.iterations, 2, 0.3, 2)
    return untruncated((patterns, np.log(probabilities)), self.c_col)
