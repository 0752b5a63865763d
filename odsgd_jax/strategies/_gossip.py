"""Decentralized gossip SGD (D-PSGD): each worker averages its parameters with its
neighbours' on a fixed graph and steps; no global all-reduce."""

from typing import Any, NamedTuple

import jax
import jax.numpy as jnp
import optax

from odsgd_jax import cluster, comm, domains
from odsgd_jax.strategies._registry import EVERY_TICK, Example, StrategyDef, register

ORDERS = ("combine_first", "step_first")


class GossipState(NamedTuple):
  """State of `gossip`: each worker its own inner optimizer state (the replicas differ)."""

  inner_state: Any  # local: this worker's inner optimizer state
  communication: comm.Traffic  # what this worker sent on the last tick


@domains.declared(graph=domains.choice(*cluster.GOSSIP_GRAPHS), order=domains.choice(*ORDERS))
def gossip(
    inner: optax.GradientTransformation, *, axis_name: comm.AxisName,
    graph: str = "ring", order: str = "combine_first",
) -> optax.GradientTransformationExtraArgs:
  """Gossip SGD: every worker keeps its own model and mixes it with its neighbours'.

  With W the mixing matrix of `graph` (worker i averages itself and the workers
  i + k mod N, k in `cluster.gossip_offsets(graph, N)`, with equal weights: a
  doubly stochastic circulant matrix) and g_i the gradient at worker i's x_i:

    combine_first (Lian et al.):  x_i <- sum_j W_ij x_j + inner_i(g_i)
    step_first:                   x_i <- sum_j W_ij (x_j + inner_j(g_j))

  combine_first mixes the parameters the gradient was taken at, so the exchange can
  run during the backward pass (the timeline overlaps them); step_first mixes after
  the step. On the complete graph step_first with SGD or heavy ball equals ssgd: the
  mean of the steps is the step on the mean gradient (the inner update is linear, and
  every worker starts from the same x).

  Args:
    inner: the optimizer each worker applies to its own gradient, with its own state.
    axis_name: the worker axis (or tuple of axes).
    graph: "ring" (the two neighbours), "exponential" (the workers 2^k ahead, k <
      log2 N) or "complete" (everyone: a global average).
    order: "combine_first" or "step_first", as above.

  Returns:
    An `optax.GradientTransformationExtraArgs`; `update` ignores the cluster schedule
    (every worker takes every step).

  References:
    Lian, Zhang, Zhang, Hsieh, Zhang, Liu, Can Decentralized Algorithms Outperform
    Centralized Algorithms? A Case Study for Decentralized Parallel Stochastic Gradient
    Descent, NeurIPS 2017.
  """
  inner = optax.with_extra_args_support(inner)

  def init_fn(params):
    return GossipState(inner_state=inner.init(params), communication=comm.init_traffic())

  def update_fn(grads, state, params=None, **extra_args):
    del extra_args  # synchronous: every worker steps on every tick
    offsets = cluster.gossip_offsets(graph, comm.num_workers(axis_name))
    step, inner_state = inner.update(grads, state.inner_state, params)
    if order == "combine_first":
      mixed, traffic = comm.neighbour_mean(params, state.communication, axis_name, offsets)
      new_params = optax.apply_updates(mixed, step)
    else:
      new_params, traffic = comm.neighbour_mean(optax.apply_updates(params, step),
                                                state.communication, axis_name, offsets)
    return optax.tree.sub(new_params, params), GossipState(inner_state, traffic)

  return optax.GradientTransformationExtraArgs(init_fn, update_fn)


def gossip_model_params(worker_params: Any, worker_opt_state: GossipState) -> Any:
  """The model of a gossip run: the workers' average (what consensus converges to)."""
  del worker_opt_state
  return jax.tree.map(lambda x: jnp.mean(x.astype(jnp.float32), axis=0).astype(x.dtype),
                      worker_params)


register(StrategyDef(
    "gossip", gossip, gossip_model_params, timeline=cluster.GossipTimeline, sends=EVERY_TICK,
    examples=(Example({"graph": "ring"}, 0, "nothing: the inner state only (its own)"),
              Example({"graph": "exponential", "order": "step_first"}, 0,
                      "nothing: the inner state only (its own)"))))
