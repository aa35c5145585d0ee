"""Bridges to other libraries' objects (optional extras; host code only).

``jaxacct.interop.jax_privacy`` translates jax_privacy 2.0's batch selection strategies and
BandMF strategy matrices into jaxacct schemes and strategies and back (install with
``pip install 'jax-privacy>=2.0,<2.1'``, the ``jaxprivacy`` extra). Importing this package
imports no optional dependency: each bridge imports its library when one of its functions is
first called, and raises ``jaxacct.MissingExtraError`` with the install command when it is missing.
"""
