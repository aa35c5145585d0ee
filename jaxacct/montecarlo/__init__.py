"""Monte Carlo accounting of matrix mechanisms (device kernels + host drivers).

Where the code runs: ``participation``, ``losses``, ``noise``, ``binomial``
and ``keys`` are JAX device code (pure functions, composed under ``jit``, ``vmap`` and
``lax.scan``; batch-major ``(num_samples, iterations)`` except inside the scans
over rounds, which are time-major). ``sampling``
is the thin host layer that validates arguments, derives keys, chunks the work
and returns batch-major float64 results. Two small host helpers build
constants for the kernels: ``participation.batch_size_table`` (CDF tables for
the truncated schemes' batch-size draws, scipy) and ``binomial.inversion_table``.
"""
