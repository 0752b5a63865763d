"""The schedule a strategy assumes when none is passed: a homogeneous cluster."""

import jax.numpy as jnp

from odsgd_jax.cluster import Schedule


def default_schedule(num_workers: int) -> Schedule:
  """All workers active, arriving in index order, no round end, equal weights."""
  return Schedule(
      active=jnp.ones((num_workers,), bool),
      arrival_order=jnp.arange(num_workers, dtype=jnp.int32),
      round_end=jnp.zeros((), bool),
      weights=jnp.ones((num_workers,), jnp.float32),
  )
