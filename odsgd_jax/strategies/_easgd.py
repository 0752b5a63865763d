"""Elastic averaging SGD (EASGD): workers tied to a center variable by an elastic force."""

from typing import Any, NamedTuple

import jax
import jax.numpy as jnp
import optax

from odsgd_jax import cluster, comm, domains
from odsgd_jax.strategies._registry import Example, StrategyDef, register

# The moving rate alpha = eta * rho: the center moves by beta = N * alpha of the workers'
# mean distance, which must not overshoot (beta <= 1), so alpha <= 1/N.
MOVING_RATE = domains.Domain("real", 0, 1, low_open=True, optional=True, per_worker=True)
PAPER_BETA = 0.9  # the paper's choice of beta = N * alpha


class EasgdState(NamedTuple):
  """State of `easgd`; the center is identical on every worker."""

  inner_state: Any  # local: this worker's inner optimizer state
  center: Any  # x~, the center variable (the model)
  tick: jax.Array  # shape=(), int32: ticks since the last elastic step
  communication: Any  # compression state of the elastic exchange, or None


@domains.declared(alpha=MOVING_RATE, period=domains.integer(1), compression=comm.COMPRESSION)
def easgd(
    inner: optax.GradientTransformation,
    *,
    axis_name: comm.AxisName,
    alpha: float | None = None,
    period: int = 1,
    compression: "str | comm.Communication | None" = None,
) -> optax.GradientTransformationExtraArgs:
  """Synchronous elastic averaging SGD: each worker is pulled towards a center variable,
  and the center towards the workers, every `period` ticks.

  The paper's synchronous update, its eq. (5)-(6), with alpha = eta * rho: on a tick
  that ends a period, from the same x_i and x~,

    x_i <- x_i + inner_i(g_i(x_i)) - alpha (x_i - x~)
    x~  <- x~ + alpha sum_i (x_i - x~)              (= x~ + beta mean_i (x_i - x~))

  and on the other ticks x_i <- x_i + inner_i(g_i(x_i)). Each worker keeps its own inner
  state (EAMSGD's momentum is the inner optimizer's). The elastic terms cancel in the sum
  of all N + 1 variables: the forces are internal. Of the paper's two orderings this is
  eq. (5): every worker's pull and the center's move read the same x^t and x~^t.
  Algorithms 1 and 2 are asynchronous: a worker's exchange meets the center as the workers
  before it left it, which a synchronous cluster does not do.

  The model is the center x~. What travels at a period's end is each worker's distance
  x_i - x~ (its mean over the workers; compressed with `compression`).

  With N workers the center moves by beta = N alpha of the mean distance; beta <= 1, so
  alpha is in (0, 1/N] (checked with the config, and when the update is traced). None:
  the paper's beta = 0.9, alpha = 0.9 / N.

  Args:
    inner: each worker's optimizer, with its own state.
    axis_name: the worker axis (or tuple of axes).
    alpha: the moving rate alpha (None: 0.9 / N).
    period: ticks between elastic steps, tau (1: every tick, eq. 5).
    compression: how the distances travel (None, "topk:0.01", ...).

  Returns:
    An `optax.GradientTransformationExtraArgs`; `update` ignores the cluster schedule
    (every worker takes every step).

  References:
    Zhang, Choromanska, LeCun, Deep learning with Elastic Averaging SGD, NeurIPS 2015
    (arXiv:1412.6651).
  """
  inner = optax.with_extra_args_support(inner)
  communication = comm.parse_communication(compression)

  def init_fn(params):
    return EasgdState(inner_state=inner.init(params), center=params,
                      tick=jnp.zeros((), jnp.int32),
                      communication=comm.init_state(communication, params))

  def update_fn(grads, state, params=None, **extra_args):
    del extra_args  # synchronous: every worker steps on every tick
    num_workers = comm.num_workers(axis_name)
    rate = PAPER_BETA / num_workers if alpha is None else alpha
    domains.check_value("alpha", rate, MOVING_RATE, num_workers)
    step, inner_state = inner.update(grads, state.inner_state, params)
    tick = state.tick + 1

    def elastic(_):
      distance = optax.tree.sub(params, state.center)
      mean_distance, comm_state = comm.exchange(communication, distance, state.communication,
                                                axis_name)
      new_params = jax.tree.map(lambda x, u, d: (x + u - rate * d).astype(x.dtype),
                                params, step, distance)
      center = jax.tree.map(lambda c, m: (c + rate * num_workers * m).astype(c.dtype),
                            state.center, mean_distance)
      return new_params, EasgdState(inner_state, center, jnp.zeros((), jnp.int32), comm_state)

    def local(_):
      return optax.apply_updates(params, step), state._replace(inner_state=inner_state,
                                                               tick=tick)

    # Ticks inside a period send nothing: the exchange lives in one branch only.
    new_params, new_state = jax.lax.cond(comm.uniform(tick >= period, axis_name), elastic,
                                         local, None)
    return optax.tree.sub(new_params, params), new_state

  return optax.GradientTransformationExtraArgs(init_fn, update_fn)


def easgd_model_params(worker_params: Any, worker_opt_state: EasgdState) -> Any:
  """The model of an easgd run: the center variable x~."""
  del worker_params
  return comm.first_worker(worker_opt_state.center)


def easgd_elastic_step(worker_opt_state: EasgdState) -> jax.Array:
  """Whether this tick took the elastic step (its exchange): the cluster charges it."""
  return worker_opt_state.tick == 0


register(StrategyDef(
    "easgd", easgd, easgd_model_params,
    # a round of `period` local steps, then the exchange: local SGD's timeline
    timeline=cluster.LocalSgdTimeline, sends=easgd_elastic_step,
    examples=(Example({"period": 2}, 1, "the center x~"),
              Example({"alpha": 0.2}, 1, "the center x~"))))
