"""A learning-rate schedule that follows the run's progress, not each worker's own steps.

An optax schedule counts the updates of the optimizer that holds it. A worker that steps
less often than the others would read its rate from its own count and fall behind the run:
oscars' slow workers (at the claims' 11,206 ticks a quarter-speed worker would end near
85% of a cosine schedule's peak rate, where the run ends at 0), asgd's and ssp's server
on a tick where not every gradient lands, and odsgd's and pseudo_sync's global update,
one tick behind from their first delayed tick on (it has nothing to apply, so it does not
step). So the experiment's inner optimizer keeps
its count in a `ScheduleCount`, and the train step sets it to the run's tick (times the
inner updates a tick makes: asgd's server steps once per arriving gradient) before the
strategy updates (`at_tick`). Every step then reads the rate of the tick it is taken on,
the rate the run logs as `learning_rate`. An update within the tick that looks ahead
(odsgd's and pseudo_sync's predicted next step, delay corrections) counts on from there,
as optax's count would.
"""

from typing import Any, NamedTuple

import jax
import jax.numpy as jnp
import optax


class ScheduleCount(NamedTuple):
  """The schedule's position: the inner updates of the run so far, set every tick."""

  count: jax.Array  # shape=(), int32


def scale_by_run_schedule(schedule: optax.Schedule) -> optax.GradientTransformation:
  """`optax.scale_by_learning_rate(schedule)`, the same numbers, with its count in a
  `ScheduleCount` that the train step sets (`at_tick`)."""

  def init_fn(params):
    del params
    return ScheduleCount(jnp.zeros([], jnp.int32))

  def update_fn(updates, state, params=None):
    del params
    step_size = -1 * schedule(state.count)
    updates = jax.tree.map(lambda g: jnp.array(step_size, dtype=g.dtype) * g, updates)
    return updates, ScheduleCount(optax.safe_increment(state.count))

  return optax.GradientTransformation(init_fn, update_fn)


def _is_count(node: Any) -> bool:
  return isinstance(node, ScheduleCount)


def at_tick(opt_state: Any, count: jax.Array) -> Any:
  """`opt_state` with every `ScheduleCount` in it at `count` (the run's tick times the inner
  updates a tick makes); the rest unchanged."""
  return jax.tree.map(
      lambda node: ScheduleCount(jnp.asarray(count, node.count.dtype)) if _is_count(node)
      else node, opt_state, is_leaf=_is_count)


def schedule_counts(opt_state: Any) -> list[jax.Array]:
  """The counts of every `ScheduleCount` in `opt_state`, in tree order."""
  return [node.count for node in jax.tree.leaves(opt_state, is_leaf=_is_count)
          if _is_count(node)]
