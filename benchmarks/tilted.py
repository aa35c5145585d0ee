"""Samples and seconds, plain vs tilted remove-direction Monte Carlo, for DP-SGD at a small δ.

DP-SGD: Poisson q = 0.01, n = 1000, σ = 1, C = I (the tilted estimator's DP-SGD goal), at
the ε where dp_accounting's PLD (jaxacct's "pld" accountant, remove direction) gives δ = 10⁻⁸
(or ``--delta``). It prints, for the remove direction:

* the order α of the smallest support bound M(α, ε) (``tilt_bound.choose_order``, α ≤ 8) and M;
* samples N by Fact 4.2 arithmetic (``evr.bounds.minimum_samples`` at δ_b = δ/2 for an overall
  δ, one attempt): plain (terms in [0, 1]) and tilted (terms in [0, M]) — plain's N is not run;
* samples for a 10 % relative standard error of an estimate: plain (1 − δ)/(δ·0.01) and tilted
  from the measured s.e. (s.e. ∝ 1/√N);
* a tilted estimate from ``--samples`` draws (default 10⁴): δ̂ ± s.e., its distance to the PLD's
  δ in standard errors, and its seconds (a second, compiled call; host tuple draws included);
* plain seconds per sample measured on ``--plain-samples`` draws (compiled), and the seconds
  plain's N would take at that rate (projected, not run);
* a verified release (``account`` with the tilted proposal) at that ε for δ' = 2δ, δ_b = 1.2δ:
  its samples per direction (the add direction certified by its Rényi bound) and seconds.

Nothing here is timed inside the tests. Usage (from the repository root):

  PYTHONPATH=. python benchmarks/tilted.py [--delta 1e-8] [--samples 10000]

Results: benchmarks/RESULTS.md ("the tilted remove direction").
"""

from __future__ import annotations

import argparse
import math
import time

import jax

import jaxacct
from jaxacct.deterministic import tilt_bound
from jaxacct.montecarlo.evr import bounds


def _timed(call):
  start = time.perf_counter()
  result = call()
  return result, time.perf_counter() - start


def main() -> None:
  parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
  parser.add_argument('--delta', type=float, default=1e-8)
  parser.add_argument('--samples', type=int, default=10_000)
  parser.add_argument('--plain-samples', type=int, default=1 << 17)
  args = parser.parse_args()

  mechanism = jaxacct.MatrixMechanism(jaxacct.Poisson(sampling_prob=0.01, iterations=1000),
                                      jaxacct.BandedToeplitz([1.0]), 1.0)
  delta = args.delta
  epsilon = jaxacct.epsilon_for_delta(mechanism, delta, accountant='pld', direction='remove')
  pld = jaxacct.delta_for_epsilon(mechanism, epsilon, accountant='pld', direction='remove')
  choice = tilt_bound.choose_order(mechanism, epsilon)
  support = math.exp(choice.log_bound)
  print(f'DP-SGD q=0.01 n=1000 sigma=1: PLD remove delta={pld:.4g} at epsilon={epsilon:.6f}')
  print(f'order alpha={choice.alpha}  ln Z={choice.log_z:.6f}  M={support:.4g}  '
        f'M/delta={support / delta:.3g}')

  plain_n = bounds.minimum_samples(delta / 2, delta)
  tilted_n = bounds.minimum_samples(delta / 2, delta, support=min(1.0, support))
  print(f'Fact 4.2 samples (delta_b = delta/2, one attempt, remove): plain {plain_n:,}  '
        f'tilted {tilted_n:,}  ratio {plain_n / max(tilted_n, 1):.3g}')

  options = jaxacct.MonteCarloOptions(proposal='tilted', tilt_order=choice.alpha)
  key = jax.random.key(0)
  jaxacct.estimate_delta(key, mechanism, [epsilon], 2048, monte_carlo=options)  # compile
  result, tilted_seconds = _timed(lambda: jaxacct.estimate_delta(
      key, mechanism, [epsilon], args.samples, monte_carlo=options))
  estimate, error = result.delta_hat['remove'][0], result.standard_error['remove'][0]
  print(f'tilted estimate, N={args.samples:,}: {estimate:.4g} ± {error:.2g} '
        f'(relative s.e. {error / estimate:.3g}; {(estimate - pld) / error:+.2f} s.e. from the '
        f'PLD); largest X/M {result.largest_scaled_term[0]:.6f}; {tilted_seconds:.2f} s for '
        'both directions (add plain)')

  jaxacct.estimate_delta(key, mechanism, [epsilon], 2048)  # compile
  _, plain_seconds = _timed(lambda: jaxacct.estimate_delta(key, mechanism, [epsilon],
                                                           args.plain_samples))
  per_sample = plain_seconds / args.plain_samples
  tilted_per_sample = tilted_seconds / args.samples
  rse_plain_n = math.ceil((1 - delta) / (delta * 0.1**2))
  rse_tilted_n = math.ceil(args.samples * (error / estimate / 0.1)**2)
  print(f'plain: {per_sample * 1e6:.2f} µs per sample (both directions, measured on '
        f'{args.plain_samples:,}); tilted: {tilted_per_sample * 1e6:.2f} µs')
  print('| | plain | tilted |')
  print('|---|---:|---:|')
  print(f'| samples, Fact 4.2 (δ_b = δ/2) | {plain_n:,} | {tilted_n:,} |')
  print(f'| seconds, Fact 4.2 samples | {plain_n * per_sample:,.0f} (projected) | '
        f'{tilted_n * tilted_per_sample:,.1f} (projected) |')
  print(f'| samples, 10 % relative s.e. | {rse_plain_n:,} | {rse_tilted_n:,} |')
  print(f'| seconds, 10 % relative s.e. | {rse_plain_n * per_sample:,.0f} (projected) | '
        f'{rse_tilted_n * tilted_per_sample:,.1f} (projected) |')
  print(f'| measured run | — | N = {args.samples:,}: {tilted_seconds:.2f} s, '
        f'{(estimate - pld) / error:+.2f} s.e. from the PLD |')

  # A verified release at this ε: the PLD's δ is `delta`, so the claim is δ' = 2δ with
  # δ_b = 1.2δ (the candidate passes when δ̂ < δ_b); the add direction is certified by its
  # Rényi bound (evr.tilted.add_bound), the remove direction verified on tilted draws.
  start = time.perf_counter()
  guarantee = jaxacct.account(
      mechanism, epsilon=epsilon, delta=2 * delta, key=jax.random.key(1),
      accountant='monte_carlo', run=jaxacct.RunOptions(ledger=jaxacct.VerificationLedger()),
      monte_carlo=jaxacct.MonteCarloOptions(proposal='tilted', tilt_order=choice.alpha,
                                            base_delta=1.2 * delta))
  seconds = time.perf_counter() - start
  sizes = guarantee.tilt['directions']
  plain_verify = bounds.minimum_samples(1.2 * delta, 2 * delta)
  print(f'verified: {guarantee!r} in {seconds:.1f} s (host bounds included); samples per '
        f'direction remove {sizes["remove"][0]:,} (tilted), add {sizes["add"][0]:,} '
        f'({guarantee.tilt["proposal"]["add"]}); plain would need {plain_verify:,} per '
        f'direction; delta_hat remove {guarantee.delta_hat["remove"]:.4g} vs PLD {pld:.4g}')


if __name__ == '__main__':
  main()
