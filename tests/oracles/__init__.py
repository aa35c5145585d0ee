"""Independent numpy/scipy test oracles for jaxacct (no jax, no jaxacct imports)."""
