"""odsgd_jax: distributed data-parallel update strategies as optax transformations."""
