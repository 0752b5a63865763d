"""The schedule a strategy assumes when none is passed: a homogeneous cluster."""

import jax.numpy as jnp

from odsgd_jax.cluster import Schedule


def default_schedule(num_workers: int) -> Schedule:
  """All workers active, arriving in index order."""
  return Schedule(active=jnp.ones((num_workers,), bool),
                  arrival_order=jnp.arange(num_workers, dtype=jnp.int32))
