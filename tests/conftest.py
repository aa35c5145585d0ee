"""Shared test configuration.

The library must give float64 results without the global x64 flag, so tests
run with JAX's default configuration and never flip it at import time (a test
that needs it uses the ``jax.enable_x64`` context manager). Hypothesis is
derandomised so every run checks the same examples.
"""

import hypothesis

hypothesis.settings.register_profile(
    'jaxacct', derandomize=True, deadline=None, max_examples=25, print_blob=True)
hypothesis.settings.load_profile('jaxacct')
