"""Asynchronous SGD on a simulated parameter server, and DC-ASGD."""

from typing import Any, NamedTuple

import jax
import jax.numpy as jnp
import optax

from odsgd_jax import cluster, comm, domains
from odsgd_jax.strategies import _delay as delay
from odsgd_jax.strategies._registry import EVERY_TICK, Example, StrategyDef, register


class AsgdState(NamedTuple):
  """State of `asgd`. Server fields are identical on every worker."""

  server_params: Any  # the server's weights W
  server_inner_state: Any  # the inner optimizer's state at the server
  server_version: jax.Array  # shape=(), int32: server updates applied so far
  pulled_version: jax.Array  # shape=(), int32: server_version when this worker last pulled
  staleness_mean: jax.Array  # shape=(), float32: mean staleness of this tick's gradients
  staleness_max: jax.Array  # shape=(), int32: max staleness of this tick's gradients
  communication: Any  # compression state (error feedback, ...) or None
  spike: Any = None  # the server's spike compensation state (correction "spike"), or None


@domains.declared(delay_compensation=domains.real(0), correction=delay.CORRECTION,
                  inner_momentum=domains.FRACTION, compression=comm.COMPRESSION)
def asgd(
    inner: optax.GradientTransformation, *, axis_name: comm.AxisName,
    delay_compensation: float = 0.0,
    correction: str = "none",
    inner_momentum: float = 0.9,
    compression: "str | comm.Communication | None" = None,
) -> optax.GradientTransformationExtraArgs:
  """Asynchronous SGD: arriving gradients are applied one at a time on a server copy.

  Every worker holds the server state (W, s). On each tick the `schedule` says
  which workers' gradients arrive (`active`) and in which order
  (`arrival_order`). For each arriving worker k, in order:

    g = g_k + lambda * g_k * g_k * (W - x_k)     # DC-ASGD term, if lambda > 0
    (u, s) = inner(g, s, W) ;  W <- W + u ;  x_k <- W   (worker k pulls)

  Workers whose gradient did not arrive keep their stale copy x_i. The staleness
  of a gradient is the number of server updates between its worker's pull and
  its application; with every worker arriving in a rotating order it is N - 1.

  Delay corrections (`correction`, odsgd_jax/strategies/_delay.py): "spike" feeds the
  server's optimizer each gradient spike-compensated for its own staleness
  (`inner_momentum`: the inner optimizer's); "predict" gives a pulling worker the server
  weights moved by the inner optimizer's motion over the N - 1 updates expected before
  its next gradient lands.

  Memory: the gradients (and, for DC-ASGD, the workers' parameters) are
  all-gathered, O(N x model) per device: fine for research models.

  Args:
    inner: the server's optimizer.
    axis_name: the worker axis (or tuple of axes).
    delay_compensation: lambda of DC-ASGD (Zheng et al. 2017); 0 is plain ASGD.
    correction: "none", "predict", "spike" or "predict+spike".
    inner_momentum: the inner optimizer's momentum (spike compensation needs it).
    compression: how a pushed gradient travels (None, a spec such as "topk:0.01", or a
      `Communication`). Each worker's decompressed gradient is then all-gathered
      densely: the simulated server applies them one by one, and the bits charged
      are the compressed ones.

  Returns:
    An `optax.GradientTransformationExtraArgs`; `update` takes `schedule=`
    (default: all arrive in rotating order).

  Examples:
    >>> import jax, jax.numpy as jnp, optax
    >>> tx = asgd(optax.sgd(1.0), axis_name="w")
    >>> def step(g, x):
    ...   u, _ = tx.update(g, tx.init(x), x)
    ...   return x + u
    >>> jax.vmap(step, axis_name="w")(jnp.array([[1.0], [2.0]]), jnp.zeros((2, 1)))[:, 0].tolist()
    [-1.0, -3.0]

  References:
    Dean et al., Large Scale Distributed Deep Networks (NIPS 2012);
    Zheng et al., Asynchronous SGD with Delay Compensation, arXiv:1609.08326.
  """
  inner = optax.with_extra_args_support(inner)
  communication = comm.parse_communication(compression)
  prediction_mode, spike = delay.parse_correction(correction, inner_momentum)
  if prediction_mode == "replay":
    raise ValueError("asgd has no one-step replay: use correction='predict' or 'spike'")

  def init_fn(params):
    return AsgdState(
        server_params=params, server_inner_state=inner.init(params),
        server_version=jnp.zeros((), jnp.int32), pulled_version=jnp.zeros((), jnp.int32),
        staleness_mean=jnp.zeros((), jnp.float32), staleness_max=jnp.zeros((), jnp.int32),
        communication=comm.init_state(communication, params),
        spike=delay.spike_init(params) if spike else None,
    )

  def update_fn(grads, state, params=None, *, schedule=None, **extra_args):
    del extra_args
    num_workers = comm.num_workers(axis_name)
    me = comm.worker_index(axis_name)
    schedule = cluster.schedule_or_default(schedule, num_workers)
    # Every arriving worker's gradient as the server receives it (compressed or not);
    # a worker whose gradient does not land on this tick sends nothing.
    all_grads, comm_state = comm.exchange(communication, grads, state.communication, axis_name,
                                          sending=schedule.active[me], gather=True)
    # Delay compensation reads the weights each worker pulled: the server keeps a copy
    # per worker (DC-ASGD's backup), so no message carries them; here every worker holds
    # the server, and the gather stands for that memory (not charged by the clock).
    all_params = comm.all_gather(params, axis_name) if delay_compensation else None
    pulled_versions = comm.all_gather(state.pulled_version, axis_name)

    def arrive(carry, worker):
      server, inner_state, spike_state, version, mine, my_version, stale_sum, stale_max = carry
      grad = jax.tree.map(lambda g: g[worker], all_grads)
      if delay_compensation:
        snapshot = jax.tree.map(lambda x: x[worker], all_params)
        grad = jax.tree.map(lambda g, w, x: g + delay_compensation * g * g * (w - x),
                            grad, server, snapshot)
      arrived = schedule.active[worker]
      staleness = version - pulled_versions[worker]
      new_spike_state = spike_state
      if spike:
        grad, new_spike_state = delay.spike(grad, spike_state, staleness, inner_momentum)
        new_spike_state = optax.tree.where(arrived, new_spike_state, spike_state)
      step, new_inner_state = inner.update(grad, inner_state, server)
      server = optax.tree.where(arrived, optax.apply_updates(server, step), server)
      inner_state = optax.tree.where(arrived, new_inner_state, inner_state)
      version = version + arrived.astype(jnp.int32)
      pulls = arrived & (worker == me)
      pulled = server
      if prediction_mode == "predict":  # where the others' N - 1 updates will carry it
        pulled = delay.predicted(inner, inner_state, server, num_workers - 1)
      mine = optax.tree.where(pulls, pulled, mine)
      my_version = jnp.where(pulls, version, my_version)
      stale_sum = stale_sum + jnp.where(arrived, staleness, 0)
      stale_max = jnp.maximum(stale_max, jnp.where(arrived, staleness, 0))
      return (server, inner_state, new_spike_state, version, mine, my_version, stale_sum,
              stale_max), None

    carry = (state.server_params, state.server_inner_state, state.spike, state.server_version,
             params, state.pulled_version, jnp.zeros((), jnp.int32), jnp.zeros((), jnp.int32))
    carry, _ = jax.lax.scan(arrive, carry, schedule.arrival_order)
    server, inner_state, spike_state, version, mine, my_version, stale_sum, stale_max = carry
    arrivals = jnp.maximum(jnp.sum(schedule.active.astype(jnp.int32)), 1)
    new_state = AsgdState(
        server_params=server, server_inner_state=inner_state, server_version=version,
        pulled_version=my_version, staleness_mean=(stale_sum / arrivals).astype(jnp.float32),
        staleness_max=stale_max, communication=comm_state, spike=spike_state,
    )
    return optax.tree.sub(mine, params), new_state

  return optax.GradientTransformationExtraArgs(init_fn, update_fn)


def asgd_model_params(worker_params: Any, worker_opt_state: AsgdState) -> Any:
  """The model of an asgd run: the server's weights W."""
  del worker_params
  return comm.first_worker(worker_opt_state.server_params)


def asgd_log(worker_opt_state: AsgdState) -> dict[str, jax.Array]:
  return {"staleness_mean": worker_opt_state.staleness_mean,
          "staleness_max": worker_opt_state.staleness_max}


register(StrategyDef(
    "asgd", asgd, asgd_model_params, timeline=cluster.AsynchronousTimeline,
    # every tick some worker's gradient lands (the fastest worker's cycle is a tick)
    sends=EVERY_TICK, log=asgd_log,
    inner_updates_per_tick=lambda num_workers: num_workers,
    defaults={"delay_compensation": 0.0},
    # N server steps per tick (one per arriving gradient), each with stale gradients:
    # momentum 0.9 diverges, and without momentum the synchronous rate (0.1) is the best
    # on validation (docs/delays.md, "options_asgd"):
    #   python scripts/sweep.py --config configs/default.py:asgd \
    #       --grid optimizer.momentum=0.0,0.9 --grid optimizer.learning_rate=0.1,0.05,0.025,0.2
    optimizer_changes={"momentum": 0.0},
    examples=(Example({"delay_compensation": 0.1}, 1, "server W"),
              Example({"correction": "predict+spike"}, 3, "+ spike's two velocities"))))
