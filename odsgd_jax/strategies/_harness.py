"""A strategy on a small problem: every worker's tick at once, under `jax.vmap` over a
worker axis. What the exact-math and conformance tests and the stability study run (the
train step does the same over a device mesh, with a model and data)."""

from typing import Any, Callable

import jax
import optax

from odsgd_jax import comm
from odsgd_jax.cluster import Schedule
from odsgd_jax.strategies import _ticks as ticks

AXIS = "workers"  # the axis the workers are mapped over

# loss_and_grad(x, t, worker) -> (loss, gradient): worker `worker`'s on tick `t`, at x
LossAndGrad = Callable[[Any, Any, Any], tuple[Any, Any]]


def worker_ticks(tx: optax.GradientTransformationExtraArgs, loss_and_grad: LossAndGrad,
                 from_tick: int = 0) -> Callable[[Any, Any, Any, Schedule], tuple[Any, Any]]:
  """`tick(x, opt_state, t, schedule) -> (x, opt_state)` of every worker: x and opt_state
  carry a leading worker dimension, `t` and `schedule` are shared. Each worker takes its
  gradient at its own x, and `tx` (built with `axis_name=AXIS`) updates it. `from_tick`:
  the strategy's tick conditions taken as decided for the ticks from it on
  (`odsgd_jax.strategies.ticks.from_tick`), as the train step's program for those ticks
  traces them. Not jitted: jit it, or call it inside a jitted loop."""
  tx = ticks.from_tick(tx, from_tick)

  def worker_tick(x, opt_state, t, schedule):
    loss, grads = loss_and_grad(x, t, comm.worker_index(AXIS))
    updates, opt_state = tx.update(grads, opt_state, x, schedule=schedule, loss=loss)
    return optax.apply_updates(x, updates), opt_state

  return jax.vmap(worker_tick, in_axes=(0, 0, None, None), axis_name=AXIS)


def init_workers(tx: optax.GradientTransformationExtraArgs, x: Any) -> Any:
  """Every worker's initial state; `x` carries a leading worker dimension."""
  return jax.vmap(tx.init)(x)
