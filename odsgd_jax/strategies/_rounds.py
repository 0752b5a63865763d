"""The round-based core of local SGD and Oscars: workers step alone, and average every
round (`round_based`); the model they evaluate, what they log and when a round ends."""

from typing import Any, Iterator, Mapping, NamedTuple

import jax
import jax.numpy as jnp
import optax

from odsgd_jax import cluster, comm, domains

ADAPT_MODES = ("fixed", "linear", "loss")
SGD_ARGUMENTS = ("learning_rate", "momentum", "nesterov")


def _outer_problem(outer: Any) -> str | None:
  if isinstance(outer, optax.GradientTransformation):
    return None
  if not isinstance(outer, Mapping):
    return "is not an optimizer"
  unknown = sorted(set(outer) - set(SGD_ARGUMENTS))
  if unknown:
    return f"names {', '.join(map(repr, unknown))}, which is not an argument of sgd"
  if "learning_rate" not in outer:
    return "lacks sgd's learning_rate"
  return None


OUTER = domains.Domain(
    "other", optional=True, check=_outer_problem,
    text="an optax optimizer; in a config, sgd's arguments as a dict, e.g. "
         "{'learning_rate': 0.7, 'momentum': 0.9, 'nesterov': True}")


def outer_optimizer(outer: "optax.GradientTransformation | Mapping[str, Any] | None"):
  """An outer optimizer as given (None: plain averaging), or sgd's arguments built."""
  return optax.sgd(**outer) if isinstance(outer, Mapping) else outer


class LocalSgdState(NamedTuple):
  """State of `local_sgd` and `oscars`; all but the local fields are identical on workers."""

  inner_state: Any  # local: this worker's own inner optimizer state
  anchor: Any  # the parameters after the last round's synchronization
  outer_state: Any  # the outer optimizer's state (None for plain averaging)
  tick: jax.Array  # shape=(), int32: ticks since the round started
  period: jax.Array  # shape=(), int32: ticks in the current round, H
  local_steps: jax.Array  # local, shape=(), int32: steps this worker did this round
  last_round_steps: jax.Array  # local, shape=(), int32: steps it did in the last finished round
  loss_sum: jax.Array  # local, shape=(), float32: sum of this worker's losses this round
  first_round_loss: jax.Array  # shape=(), float32: mean loss of round 0 (0 until known)
  last_round_loss: jax.Array  # shape=(), float32: mean loss of the last finished round
  communication: Any  # compression state of the round-end exchange, or None


def _next_period(adapt: str, period: int, state: LocalSgdState, round_loss: jax.Array):
  """H of the next round: the same ("fixed"), one more ("linear"), or AdaComm's
  H_r = ceil(H_0 sqrt(L_r / L_0)), which shrinks as the loss falls ("loss")."""
  if adapt == "linear":
    return state.period + 1
  if adapt == "loss":
    first = jnp.where(state.first_round_loss > 0, state.first_round_loss, round_loss)
    ratio = jnp.sqrt(round_loss / jnp.maximum(first, 1e-12))
    return jnp.maximum(1, jnp.ceil(period * ratio).astype(jnp.int32))
  return state.period


def _weighted_average(anchor: Any, local_params: Any, weight: jax.Array, communication: Any,
                      comm_state: Any, axis_name) -> tuple[Any, Any]:
  """The workers' parameters averaged with weights w_i. What travels is each worker's
  weighted move away from the anchor:
  xbar = anchor - mean_i(w_i (anchor - x_i)) / mean_i(w_i)."""
  mean_weight = comm.mean(weight, axis_name)
  moves = jax.tree.map(lambda a, x: weight * (a - x), anchor, local_params)
  mean_move, comm_state = comm.exchange(communication, moves, comm_state, axis_name)
  average = jax.tree.map(
      lambda a, m: jnp.where(mean_weight > 0, a - m / jnp.maximum(mean_weight, 1e-12), a)
      .astype(a.dtype), anchor, mean_move)
  return average, comm_state


def round_based(inner, *, axis_name, period, outer, average_inner_state, adapt, heterogeneous,
                compression=None) -> optax.GradientTransformationExtraArgs:
  """Workers step alone and average every round: local_sgd (`heterogeneous=False`, every
  worker steps on every tick, plain averages) and oscars (`heterogeneous=True`: only the
  workers the schedule marks active step, and the average is weighted by their steps)."""
  inner = optax.with_extra_args_support(inner)
  outer = outer_optimizer(outer)
  communication = comm.parse_communication(compression)

  def init_fn(params):
    zero_i, zero_f = jnp.zeros((), jnp.int32), jnp.zeros((), jnp.float32)
    return LocalSgdState(
        inner_state=inner.init(params), anchor=params,
        outer_state=outer.init(params) if outer is not None else None,
        tick=zero_i, period=jnp.asarray(period, jnp.int32), local_steps=zero_i,
        last_round_steps=zero_i,
        loss_sum=zero_f, first_round_loss=zero_f, last_round_loss=zero_f,
        communication=comm.init_state(communication, params),
    )

  def update_fn(grads, state, params=None, *, schedule=None, loss=None, **extra_args):
    del extra_args
    me = comm.worker_index(axis_name)
    if heterogeneous:
      schedule = cluster.schedule_or_default(schedule, comm.num_workers(axis_name))
      active = schedule.active[me]
    else:
      active = jnp.ones((), bool)
    step, inner_state = inner.update(grads, state.inner_state, params)
    local_params = optax.tree.where(active, optax.apply_updates(params, step), params)
    inner_state = optax.tree.where(active, inner_state, state.inner_state)
    local_steps = state.local_steps + active.astype(jnp.int32)
    loss_sum = state.loss_sum + jnp.where(active, 0.0 if loss is None else loss, 0.0)
    tick = state.tick + 1

    def synchronize(_):
      weight = local_steps.astype(jnp.float32) if heterogeneous else jnp.ones((), jnp.float32)
      average, comm_state = _weighted_average(state.anchor, local_params, weight, communication,
                                              state.communication, axis_name)
      if outer is None:
        anchor, outer_state = average, state.outer_state
      else:  # DiLoCo-style: an outer optimizer step on the pseudo-gradient
        pseudo_grad = optax.tree.sub(state.anchor, average)
        outer_step, outer_state = outer.update(pseudo_grad, state.outer_state, state.anchor)
        anchor = optax.apply_updates(state.anchor, outer_step)
      synced_inner = inner_state
      if average_inner_state:  # its floating leaves (momentum, not counters), uncompressed
        leaves, treedef = jax.tree.flatten(inner_state)
        floating = [jnp.issubdtype(s.dtype, jnp.floating) for s in leaves]
        averaged, comm_state = comm.exchange(
            communication, [s for s, f in zip(leaves, floating, strict=True) if f], comm_state,
            axis_name, exact=True)
        averaged = iter(averaged)
        synced_inner = jax.tree.unflatten(
            treedef, [next(averaged) if f else s for s, f in zip(leaves, floating, strict=True)])
      round_loss = comm.total(loss_sum, axis_name) / jnp.maximum(
          comm.total(local_steps, axis_name), 1).astype(jnp.float32)
      new_state = LocalSgdState(
          inner_state=synced_inner, anchor=anchor, outer_state=outer_state,
          tick=jnp.zeros((), jnp.int32), period=_next_period(adapt, period, state, round_loss),
          local_steps=jnp.zeros((), jnp.int32), last_round_steps=local_steps,
          loss_sum=jnp.zeros((), jnp.float32),
          first_round_loss=jnp.where(state.first_round_loss > 0, state.first_round_loss,
                                     round_loss),
          last_round_loss=round_loss, communication=comm_state,
      )
      return anchor, new_state

    def keep_going(_):
      return local_params, state._replace(inner_state=inner_state, tick=tick,
                                          local_steps=local_steps, loss_sum=loss_sum)

    # Non-sync ticks send nothing: the collectives live in one branch only.
    new_params, new_state = jax.lax.cond(comm.uniform(tick >= state.period, axis_name),
                                         synchronize, keep_going, None)
    return optax.tree.sub(new_params, params), new_state

  return optax.GradientTransformationExtraArgs(init_fn, update_fn)


def local_sgd_model_params(worker_params: Any, worker_opt_state: LocalSgdState) -> Any:
  """The model of a local_sgd/oscars run: the workers' parameters averaged as a round
  end would (weighted by this round's local steps; uniformly if none were done).
  Right after a round end this is the anchor, which every worker holds."""
  steps = worker_opt_state.local_steps.astype(jnp.float32)
  weights = jnp.where(jnp.sum(steps) > 0, steps, jnp.ones_like(steps))
  weights = weights / jnp.sum(weights)
  # HIGHEST: the weighted mean in full float32 (a GPU's default multiplies in TF32)
  return jax.tree.map(
      lambda x: jnp.tensordot(weights, x.astype(jnp.float32), axes=1,
                              precision=jax.lax.Precision.HIGHEST).astype(x.dtype),
      worker_params)


def local_sgd_log(worker_opt_state: LocalSgdState) -> dict[str, jax.Array]:
  """The period and the last round's loss."""
  return {"period": worker_opt_state.period.astype(jnp.float32),
          "round_loss": worker_opt_state.last_round_loss}


def round_ends(period: int, adapt: str = "fixed") -> Iterator[bool]:
  """Whether each tick ends a round, tick after tick, as `round_based` decides in the
  graph: a round of H ticks ends on its H-th tick, H starting at `period` and staying
  ("fixed") or growing by one a round ("linear"). "loss" follows the training loss: it
  has no schedule before training.

  Raises:
    ValueError: `adapt` is "loss" or unknown.
  """
  if adapt not in ("fixed", "linear"):
    raise ValueError(f"adapt={adapt!r}: rounds that follow the loss cannot be scheduled "
                     f"before training; only 'fixed' and 'linear' can")

  def ticks(period: int) -> Iterator[bool]:
    while True:
      yield from (tick == period - 1 for tick in range(period))
      period += adapt == "linear"

  return ticks(period)


def local_sgd_round_end(worker_opt_state: LocalSgdState) -> jax.Array:
  """Whether this tick ended a round (the cluster charges the round's all-reduce)."""
  return worker_opt_state.tick == 0
