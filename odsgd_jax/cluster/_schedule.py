"""The per-tick schedule that the cluster decides and every strategy receives.

A strategy runs once per worker inside the worker mesh; the schedule is the global
view of the cluster for this tick and is identical on every worker.
"""

from typing import NamedTuple

import jax
import jax.numpy as jnp
import numpy as np


class Schedule(NamedTuple):
  """What the cluster decided for one tick (replicated on every worker)."""

  active: jax.Array  # shape=(N,), bool: worker finished a step on this tick
  arrival_order: jax.Array  # shape=(N,), int32: order in which workers' messages arrive
  round_end: jax.Array  # shape=(), bool: this tick ends a local-SGD round
  weights: jax.Array  # shape=(N,), float32: per-worker weight for averaging


def synchronous_schedule(step: int, num_workers: int, period: int = 1) -> Schedule:
  """Homogeneous cluster: every worker active, arrival order rotates by one each tick.

  Args:
    step: the tick index (0-based).
    num_workers: N.
    period: a round ends on every tick whose index + 1 is a multiple of `period`.

  Returns:
    A `Schedule` of NumPy arrays, ready to be put on the devices.
  """
  if num_workers < 1 or period < 1:
    raise ValueError(f"num_workers and period must be >= 1, got {num_workers}, {period}")
  return Schedule(
      active=np.ones((num_workers,), np.bool_),
      arrival_order=np.roll(np.arange(num_workers, dtype=np.int32), -(step % num_workers)),
      round_end=np.asarray((step + 1) % period == 0),
      weights=np.ones((num_workers,), np.float32),
  )


def abstract_schedule(num_workers: int) -> Schedule:
  """Shapes and dtypes of a schedule, for tracing without a concrete tick."""
  return Schedule(
      active=jax.ShapeDtypeStruct((num_workers,), jnp.bool_),
      arrival_order=jax.ShapeDtypeStruct((num_workers,), jnp.int32),
      round_end=jax.ShapeDtypeStruct((), jnp.bool_),
      weights=jax.ShapeDtypeStruct((num_workers,), jnp.float32),
  )
