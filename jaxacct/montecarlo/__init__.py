"""Monte Carlo accounting of matrix mechanisms (device kernels + host drivers).

Where the code runs: ``participation``, ``losses``, ``noise`` and ``keys`` are
JAX device code (pure functions, composed under ``jit``, ``vmap`` and
``lax.scan``; batch-major ``(num_samples, iterations)`` except inside the scans
over rounds, which are time-major). ``sampling``
is the thin host layer that validates arguments, derives keys, chunks the work
and returns batch-major float64 results.
"""
