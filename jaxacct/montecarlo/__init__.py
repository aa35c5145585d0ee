"""Monte Carlo accounting of matrix mechanisms (device kernels + host drivers).

Where the code runs: ``kernels/`` (one module per scheme family behind one protocol),
``noise``, ``binomial`` and ``keys`` are JAX device code (pure functions, composed under
``jit``, ``vmap`` and ``lax.scan``; batch-major ``(num_samples, iterations)`` except inside
the scans over rounds, which are time-major). ``sampling`` jits the kernels into block
programs and is the thin host layer of the plain samplers; ``stream`` is the one host driver
that turns block programs into block-ordered float64 sums (estimation, σ sweeps and
verification); ``estimator``, ``candidates``, ``verification`` and ``calibration`` are host
code on top of it; ``evr`` is the failure-bound arithmetic (NumPy/SciPy). Two small host
helpers build constants for the kernels: ``kernels.truncated.batch_size_table`` (CDF tables
for the truncated schemes' batch-size draws) and ``binomial.inversion_table``.
"""
