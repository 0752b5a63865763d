"""The per-tick schedule that the cluster decides and every strategy receives.

A strategy runs once per worker inside the worker mesh; the schedule is the global
view of the cluster for this tick and is identical on every worker. (Round ends
of local SGD and Oscars' averaging weights are decided by those strategies from
their own state, so they are not part of the schedule.)
"""

from typing import NamedTuple

import jax
import jax.numpy as jnp
import numpy as np


class Schedule(NamedTuple):
  """What the cluster decided for one tick (replicated on every worker)."""

  active: jax.Array  # shape=(N,), bool: worker finished a step on this tick
  arrival_order: jax.Array  # shape=(N,), int32: order in which workers' messages arrive


def synchronous_schedule(step: int, num_workers: int) -> Schedule:
  """Homogeneous cluster: every worker active, arrival order rotates by one each tick.

  Args:
    step: the tick index (0-based).
    num_workers: N.

  Returns:
    A `Schedule` of NumPy arrays, ready to be put on the devices.
  """
  if num_workers < 1:
    raise ValueError(f"num_workers must be >= 1, got {num_workers}")
  return Schedule(
      active=np.ones((num_workers,), np.bool_),
      arrival_order=np.roll(np.arange(num_workers, dtype=np.int32), -(step % num_workers)),
  )


def schedule_or_default(schedule: Schedule | None, num_workers: int) -> Schedule:
  """Inside a strategy: `schedule` as JAX arrays (a worker indexes it with its traced
  index), or, when none was passed, tick 0's homogeneous one (every worker active, in
  index order)."""
  if schedule is None:
    schedule = synchronous_schedule(0, num_workers)
  return Schedule(*(jnp.asarray(x) for x in schedule))
