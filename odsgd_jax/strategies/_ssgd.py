"""Synchronous data-parallel SGD: all-reduce the gradients, then step."""

from typing import Any, NamedTuple

import optax

from odsgd_jax import cluster, comm, domains
from odsgd_jax.strategies._registry import EVERY_TICK, Example, StrategyDef, register


class SsgdState(NamedTuple):
  """State of `ssgd`: only the inner optimizer's."""

  inner_state: Any  # the inner optimizer's state, same on every worker
  communication: Any  # compression state (error feedback, ...) or None


@domains.declared(compression=comm.COMPRESSION)
def ssgd(
    inner: optax.GradientTransformation, *, axis_name: comm.AxisName,
    compression: "str | comm.Communication | None" = None,
) -> optax.GradientTransformationExtraArgs:
  """Synchronizes gradients with a mean over `axis_name`, then applies `inner`.

  The baseline every other strategy is compared with:

    G = mean_i g_i ;  (u, s) = inner(G, s, x) ;  x <- x + u

  Every worker sees the same G and starts from the same x, so the replicas stay
  identical and the result equals single-device `inner` on the global batch (the
  concatenation of the workers' batches, when they have equal sizes).

  Args:
    inner: the optimizer applied to the averaged gradient, e.g.
      `optax.sgd(0.1, momentum=0.9)`.
    axis_name: the worker axis (or tuple of axes) to average over. Must be bound
      by the caller, e.g. by `jax.shard_map` or `jax.vmap(..., axis_name=...)`.
    compression: how the all-reduce travels: None (plain float32), a spec such as
      "topk:0.01" / "qsgd:4,error_feedback=false,warmup=100", or a `Communication`.

  Returns:
    An `optax.GradientTransformationExtraArgs`; `update` ignores extra arguments
    such as the cluster `schedule` (every worker takes every step).

  Examples:
    >>> import jax, jax.numpy as jnp, optax
    >>> tx = ssgd(optax.sgd(0.1), axis_name="workers")
    >>> grads = jnp.arange(4.0)[:, None]   # one gradient per worker
    >>> params = jnp.zeros((4, 1))
    >>> def step(g, p):
    ...   u, _ = tx.update(g, tx.init(p), p)
    ...   return optax.apply_updates(p, u)
    >>> jax.vmap(step, axis_name="workers")(grads, params)[:, 0].tolist()
    [-0.15000000596046448, -0.15000000596046448, -0.15000000596046448, -0.15000000596046448]
  """
  inner = optax.with_extra_args_support(inner)
  communication = comm.parse_communication(compression)

  def init_fn(params):
    return SsgdState(inner_state=inner.init(params),
                     communication=comm.init_state(communication, params))

  def update_fn(updates, state, params=None, **extra_args):
    del extra_args  # synchronous: the schedule does not change the math
    mean_grads, comm_state = comm.exchange(communication, updates, state.communication,
                                                  axis_name)
    updates, inner_state = inner.update(mean_grads, state.inner_state, params)
    return updates, SsgdState(inner_state=inner_state, communication=comm_state)

  return optax.GradientTransformationExtraArgs(init_fn, update_fn)


def ssgd_model_params(worker_params: Any, worker_opt_state: Any) -> Any:
  """The model of an ssgd run: worker 0's parameters (all replicas are identical)."""
  del worker_opt_state
  return comm.first_worker(worker_params)


register(StrategyDef(
    "ssgd", ssgd, ssgd_model_params, timeline=cluster.SynchronousTimeline, sends=EVERY_TICK,
    examples=(Example({}, 0, "nothing: the inner state only"),)))
