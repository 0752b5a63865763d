"""Stale synchronous parallel (SSP): bounded staleness on a simulated parameter server."""

from typing import Any, NamedTuple

import jax
import jax.numpy as jnp
import optax

from odsgd_jax import cluster, comm, domains
from odsgd_jax.strategies._registry import EVERY_TICK, Example, StrategyDef, register


class SspState(NamedTuple):
  """State of `ssp`. Server fields are identical on every worker."""

  server_params: Any  # the server's weights W
  server_inner_state: Any  # the inner optimizer's state at the server
  clock: jax.Array  # shape=(), int32: steps this worker has pushed
  clock_gap: jax.Array  # shape=(), int32: fastest minus slowest clock after this tick
  blocked: jax.Array  # shape=(), int32: workers held back by the bound on this tick
  communication: Any  # compression state (error feedback, ...) or None


@domains.declared(staleness=domains.integer(0), compression=comm.COMPRESSION)
def ssp(
    inner: optax.GradientTransformation, *, axis_name: comm.AxisName, staleness: int,
    compression: "str | comm.Communication | None" = None,
) -> optax.GradientTransformationExtraArgs:
  """Stale synchronous parallel: a worker may run at most `staleness` clocks ahead.

  Every worker holds the server state (W, s) and a clock c_i (steps pushed). On a
  tick the schedule says which workers finished a step (`active`). A finished
  worker may push only if it is not too far ahead of the slowest one:

    A = {i : active_i and c_i - min_j c_j <= staleness}     # others wait
    G = sum_{i in A} g_i / N ;  (u, s) = inner(G, s, W) ;  W <- W + u  (if A non-empty)
    x_i <- W and c_i <- c_i + 1 for i in A ;  others keep their stale x_i

  Workers that did not push compute their next gradient at their stale copy, so
  the parameters a gradient was computed at are at most `staleness` clocks old.
  With every worker active on every tick (the homogeneous cluster) this is ssgd
  for any `staleness`; with `staleness=0` workers move in lockstep.

  Args:
    inner: the server's optimizer.
    axis_name: the worker axis (or tuple of axes).
    staleness: the bound s >= 0 on how many clocks a worker may lead the slowest.
    compression: how the pushes travel (only pushers send): None (plain float32), a spec such as
      "topk:0.01" / "qsgd:4,error_feedback=false,warmup=100", or a `Communication`.

  Returns:
    An `optax.GradientTransformationExtraArgs`; `update` takes `schedule=`.

  References:
    Ho et al., More Effective Distributed ML via a Stale Synchronous Parallel
    Parameter Server (NIPS 2013).
  """
  inner = optax.with_extra_args_support(inner)
  communication = comm.parse_communication(compression)

  def init_fn(params):
    zero = jnp.zeros((), jnp.int32)
    return SspState(server_params=params, server_inner_state=inner.init(params), clock=zero,
                    clock_gap=zero, blocked=zero,
                    communication=comm.init_state(communication, params))

  def update_fn(grads, state, params=None, *, schedule=None, **extra_args):
    del extra_args
    num_workers = comm.num_workers(axis_name)
    me = comm.worker_index(axis_name)
    schedule = cluster.schedule_or_default(schedule, num_workers)
    clocks = comm.all_gather(state.clock, axis_name)
    pushes_all = schedule.active & (clocks - jnp.min(clocks) <= staleness)
    pushes = pushes_all[me]
    # sum of pushed gradients / N: a mean over all workers where non-pushers send zeros
    mean_grads, comm_state = comm.exchange(communication, grads, state.communication,
                                                  axis_name, sending=pushes)
    step, inner_state = inner.update(mean_grads, state.server_inner_state, state.server_params)
    anyone = jnp.any(pushes_all)
    server = optax.tree.where(anyone, optax.apply_updates(state.server_params, step),
                              state.server_params)
    inner_state = optax.tree.where(anyone, inner_state, state.server_inner_state)
    new_params = optax.tree.where(pushes, server, params)
    new_clocks = clocks + pushes_all.astype(jnp.int32)
    new_state = SspState(
        server_params=server, server_inner_state=inner_state,
        clock=new_clocks[me], clock_gap=jnp.max(new_clocks) - jnp.min(new_clocks),
        blocked=jnp.sum((schedule.active & ~pushes_all).astype(jnp.int32)),
        communication=comm_state,
    )
    return optax.tree.sub(new_params, params), new_state

  return optax.GradientTransformationExtraArgs(init_fn, update_fn)


def ssp_model_params(worker_params: Any, worker_opt_state: SspState) -> Any:
  """The model of an ssp run: the server's weights W."""
  del worker_params
  return comm.first_worker(worker_opt_state.server_params)


def ssp_log(worker_opt_state: SspState) -> dict[str, jax.Array]:
  return {"clock_gap": worker_opt_state.clock_gap, "blocked": worker_opt_state.blocked}


register(StrategyDef(
    "ssp", ssp, ssp_model_params, timeline=cluster.AsynchronousTimeline, sends=EVERY_TICK,
    log=ssp_log, defaults={"staleness": 2},
    examples=(Example({"staleness": 2}, 1, "server W"),)))
