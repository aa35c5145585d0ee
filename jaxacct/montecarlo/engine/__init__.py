"""The Monte Carlo engine: device programs (kernels, noise, binomials, the 32-bit program and
its margin, the tilted draws) and the host code that runs them (keys, sampling, the block-sum
stream, sharding, the distributed watchdog). Nothing here knows what the sums certify
(``montecarlo/evr``).

Device code is pure JAX (``jit``, ``vmap``, ``lax.scan``; batch-major ``(num_samples,
iterations)`` except inside the scans over rounds, which are time-major). Two small host helpers
build constants for the kernels: ``kernels.truncated.batch_size_table`` (CDF tables for the
truncated schemes' batch-size draws) and ``binomial.inversion_table``; ``tilted`` draws its
α-tuples on the host, block by block, with a callable it is given (``minsep_chain`` in EVR).
"""
