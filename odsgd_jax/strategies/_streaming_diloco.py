"""Streaming DiLoCo: workers step alone; the model's fragments are synchronized in turn,
each every `period` steps, its exchange overlapping `delay` steps of compute."""

from typing import Any, Mapping, NamedTuple

import jax
import jax.numpy as jnp
import numpy as np
import optax
from jax.flatten_util import ravel_pytree

from odsgd_jax import cluster, comm, domains
from odsgd_jax.strategies._registry import Example, StrategyDef, register
from odsgd_jax.strategies._rounds import OUTER, outer_optimizer


class StreamingDilocoState(NamedTuple):
  """State of `streaming_diloco`; all but the local fields are identical on workers."""

  inner_state: Any  # local: this worker's own inner optimizer state
  anchor: jax.Array  # (n,): the flat parameters; fragment p's slice is its global copy
  outer_states: tuple  # per fragment: the outer optimizer's state on its slice
  in_flight: jax.Array | None  # (n,): a fragment's mean outer gradient on its way (delay > 0)
  step: jax.Array  # shape=(), int32: local steps taken since the start
  compression: tuple  # per fragment: its compression state (Nones without compression)
  communication: comm.Traffic  # the last exchange: what the clock charges
  sent: jax.Array  # shape=(), bool: this tick sent a fragment


def fragment_bounds(size: int, fragments: int) -> tuple[tuple[int, int], ...]:
  """Fragment p: the flat parameters [size p / P, size (p + 1) / P), rounded down, in the
  order `jax.flatten_util.ravel_pytree` lays them out (a fragment may cut a tensor)."""
  if size < fragments:
    raise ValueError(f"fragments={fragments}: the model has only {size} parameters")
  cuts = [size * p // fragments for p in range(fragments + 1)]
  return tuple(zip(cuts[:-1], cuts[1:], strict=True))


def fragment_offset(period: int, fragments: int, fragment: int) -> int:
  """The step (counted from 1) of fragment `fragment`'s first exchange: the fragments are
  staggered evenly over a period, the last one on the period's end (torchft's offsets)."""
  return period * (fragment + 1) // fragments


def fragment_sends(step, period: int, fragments: int, fragment: int, delay: int = 0):
  """Whether local step `step` (from 1; an int or an int array) ends with `fragment`'s
  exchange (delay=0) or, delay later, with its result applied."""
  start = fragment_offset(period, fragments, fragment) + delay
  return (step >= start) & ((step - start) % period == 0)


def _check(period: int, fragments: int, delay: int) -> None:
  if period < fragments:
    raise ValueError(f"streaming_diloco: period={period} < fragments={fragments}: each "
                     f"fragment is exchanged once a period, on a step of its own")
  if delay >= period // fragments:
    raise ValueError(f"streaming_diloco: delay={delay} must be below period // fragments = "
                     f"{period // fragments}, so that a fragment's result arrives before "
                     f"the next fragment is sent")


def _with(items: tuple, p: int, item: Any) -> tuple:
  return items[:p] + (item,) + items[p + 1:]


def _send(communication, axis_name, p: int, start: int, end: int, local: Any,
          state: StreamingDilocoState) -> tuple[jax.Array, StreamingDilocoState]:
  """Fragment p's outer gradient averaged over the workers, and the new state."""
  flat, _ = ravel_pytree(local)
  outer_gradient = state.anchor[start:end] - flat[start:end]
  mean, compression_p = comm.exchange(communication, outer_gradient, state.compression[p],
                                      axis_name)
  count = state.communication.count + 1
  if compression_p is None:  # plain float32: the clock charges the fragment's bytes
    traffic = comm.Traffic(count, jnp.asarray(outer_gradient.size * 32, jnp.float32),
                           jnp.zeros((), bool))
  else:
    traffic = comm.Traffic(count, compression_p.bits, compression_p.gathered)
  return mean, state._replace(compression=_with(state.compression, p, compression_p),
                              communication=traffic, sent=jnp.ones((), bool))


def _apply(outer, mixing: float, p: int, start: int, end: int, mean: jax.Array, local: Any,
           state: StreamingDilocoState) -> tuple[Any, StreamingDilocoState]:
  """Fragment p's global copy stepped by the outer optimizer on the mean outer gradient,
  and mixed into the worker's parameters."""
  anchor = state.anchor[start:end]
  if outer is None:  # plain averaging
    new_global, outer_p = anchor - mean, state.outer_states[p]
  else:
    outer_step, outer_p = outer.update(mean, state.outer_states[p], anchor)
    new_global = optax.apply_updates(anchor, outer_step)
  flat, unravel = ravel_pytree(local)
  mixed = mixing * flat[start:end] + (1 - mixing) * new_global
  state = state._replace(anchor=state.anchor.at[start:end].set(new_global),
                         outer_states=_with(state.outer_states, p, outer_p))
  return unravel(flat.at[start:end].set(mixed.astype(flat.dtype))), state


@domains.declared(period=domains.integer(1), fragments=domains.integer(1),
                  delay=domains.integer(0), mixing=domains.real(0, 1), outer=OUTER,
                  compression=comm.COMPRESSION)
def streaming_diloco(
    inner: optax.GradientTransformation,
    *,
    axis_name: comm.AxisName,
    period: int,
    fragments: int = 1,
    delay: int = 0,
    mixing: float = 0.0,
    outer: "optax.GradientTransformation | Mapping[str, Any] | None" = None,
    compression: "str | comm.Communication | None" = None,
) -> optax.GradientTransformationExtraArgs:
  """Streaming DiLoCo: every worker steps alone; fragment p of the model is synchronized
  every `period` steps, from step o_p = period (p + 1) // fragments on.

    x_i <- x_i + inner(g_i, s_i, x_i)                      every step, own state s_i
    step o_p + k period (fragment p's slice of each):
      send  Delta_p = mean_i (theta_p - x_{i,p})            the outer gradient
    `delay` steps later (tau), its mean arrived:
      theta_p <- theta_p + outer_p(Delta_p)                 plain averaging: theta_p - Delta_p
      x_{i,p} <- mixing x_{i,p} + (1 - mixing) theta_p      the local steps taken meanwhile
                                                            are kept in proportion `mixing`

  theta is the global model (`anchor`), each fragment with its own outer state. One
  fragment, delay 0 and mixing 0 is DiLoCo: `local_sgd` with the same `outer`
  (tests/test_identities.py). The exchange of a fragment runs in the tick that sends it;
  the simulated clock charges it as running beside the next `delay` ticks of compute
  (`StreamingDilocoTimeline`).

  Args:
    inner: each worker's local optimizer.
    axis_name: the worker axis (or tuple of axes).
    period: local steps between two exchanges of a fragment, H.
    fragments: P, contiguous equal slices of the flat parameters (`fragment_bounds`).
    delay: tau, the steps an exchange overlaps; below period // fragments.
    mixing: alpha, the share of the worker's own fragment kept when the result arrives.
    outer: optimizer of each fragment's outer gradient, e.g. DiLoCo's
      `optax.sgd(0.7, momentum=0.9, nesterov=True)` (or sgd's arguments as a dict, as a
      config gives them); None is plain averaging.
    compression: how the outer gradients travel (None, "cast:bfloat16", "qsgd:4", ...).

  Returns:
    An `optax.GradientTransformationExtraArgs`.

  References:
    Douillard et al., DiLoCo: Distributed Low-Communication Training of Language Models,
    arXiv:2311.08105; Douillard et al., Streaming DiLoCo with overlapping communication,
    arXiv:2501.18512.
  """
  _check(period, fragments, delay)
  inner = optax.with_extra_args_support(inner)
  outer = outer_optimizer(outer)
  communication = comm.parse_communication(compression)

  def init_fn(params):
    flat, _ = ravel_pytree(params)
    bounds = fragment_bounds(flat.size, fragments)
    slices = [flat[start:end] for start, end in bounds]
    return StreamingDilocoState(
        inner_state=inner.init(params), anchor=flat,
        outer_states=tuple(() if outer is None else outer.init(s) for s in slices),
        in_flight=jnp.zeros_like(flat) if delay else None,
        step=jnp.zeros((), jnp.int32),
        compression=tuple(comm.init_state(communication, s) for s in slices),
        communication=comm.init_traffic(), sent=jnp.zeros((), bool))

  def update_fn(grads, state, params=None, **extra_args):
    del extra_args  # synchronous: every worker steps on every tick
    inner_step, inner_state = inner.update(grads, state.inner_state, params)
    local = optax.apply_updates(params, inner_step)
    step = state.step + 1
    state = state._replace(inner_state=inner_state, step=step, sent=jnp.zeros((), bool))
    bounds = fragment_bounds(state.anchor.size, fragments)
    for p, (start, end) in enumerate(bounds):
      def keep(local, state):
        return local, state

      def start_sync(local, state, p=p, start=start, end=end):
        mean, state = _send(communication, axis_name, p, start, end, local, state)
        if delay == 0:  # applied at once
          return _apply(outer, mixing, p, start, end, mean, local, state)
        return local, state._replace(in_flight=state.in_flight.at[start:end].set(mean))

      def finish_sync(local, state, p=p, start=start, end=end):
        return _apply(outer, mixing, p, start, end, state.in_flight[start:end], local, state)

      local, state = jax.lax.cond(
          comm.uniform(fragment_sends(step, period, fragments, p), axis_name),
          start_sync, keep, local, state)
      if delay:
        local, state = jax.lax.cond(
            comm.uniform(fragment_sends(step, period, fragments, p, delay), axis_name),
            finish_sync, keep, local, state)
    return optax.tree.sub(local, params), state

  return optax.GradientTransformationExtraArgs(init_fn, update_fn)


def streaming_diloco_model_params(worker_params: Any,
                                  worker_opt_state: StreamingDilocoState) -> Any:
  """The model of a run: the workers' average (right after a fragment's exchange with
  mixing 0, that fragment is its global copy, which every worker holds)."""
  del worker_opt_state
  return jax.tree.map(
      lambda x: jnp.mean(x.astype(jnp.float32), axis=0).astype(x.dtype), worker_params)


def streaming_diloco_sends(worker_opt_state: StreamingDilocoState) -> jax.Array:
  """Whether the tick just taken sent a fragment (the clock charges its bytes)."""
  return worker_opt_state.sent


class StreamingDilocoTimeline(cluster.Timeline):
  """streaming_diloco: every worker does each local step; a fragment's all-reduce starts
  once the slowest worker has sent it and runs beside the next `delay` steps of compute;
  a worker that reaches the step that applies it before it has arrived waits.

  Each worker's clock runs on its own (`ready`, the end of its work so far); a tick
  advances the simulated time by how much the latest of them moved. Communication that
  runs beside compute delays that compute by `interference` times the overlap, which is
  charged as communication with the wait for the exchange's end.
  """

  honours_round_ends = True

  def __init__(self, workers, network, message_bytes, overlap=None, *, delay: int):
    super().__init__(workers, network, message_bytes, overlap)
    self.delay = delay
    self.ready = np.zeros(self.num_workers)
    self.pending: list[float] | None = None  # [tick it is applied, start, end of the exchange]

  @classmethod
  def overlaps_compute(cls, *, delay: int) -> bool:
    """A fragment is sent after its tick's step, so its exchange can only run beside the
    ticks after it (`delay` of them), never beside its own tick's compute."""
    del delay
    return False

  @classmethod
  def exposed_after(cls, *, delay: int) -> int:
    return delay

  def cost(self, tick, round_end=False, message_bytes=None, gathers=False):
    compute = self.workers.compute_times(tick)
    before = float(self.ready.max())
    lag = before - self.ready
    self.ready = self.ready + compute
    communication = np.zeros(self.num_workers)
    if self.pending is not None and self.pending[0] == tick:  # applied after this step
      communication = self._arrive()
    if round_end:  # a fragment sent at the end of this tick's step
      start = float(self.ready.max())
      end = start + self.allreduce_time(self._message(message_bytes), gathers)
      self.pending = [tick + self.delay, start, end]
      if self.delay == 0:
        communication = self._arrive()
    after = float(self.ready.max())
    # idle: how much further each worker fell behind the latest (negative where it caught
    # up), so that compute + communication + idle add up to the clock for every worker
    return cluster.TickCost(after - before, compute, communication,
                            (after - self.ready) - lag)

  def _arrive(self) -> np.ndarray:
    """The pending exchange applied: the compute it ran beside slowed by `interference`,
    then every worker waits for its end. Returns what that added to each worker's time."""
    _, start, end = self.pending
    self.pending = None
    before = self.ready
    overlapped = max(0.0, min(end, float(self.ready.max())) - start)
    self.ready = np.maximum(self.ready + self.workers.interference * overlapped, end)
    return self.ready - before

  def state_dict(self):
    return {"ready": self.ready.tolist(), "pending": self.pending}

  def load_state_dict(self, state):
    self.ready = np.asarray(state["ready"], np.float64)
    self.pending = state["pending"]


register(StrategyDef(
    "streaming_diloco", streaming_diloco, streaming_diloco_model_params,
    timeline=StreamingDilocoTimeline, sends=streaming_diloco_sends,
    # the paper's outer Nesterov (Douillard et al. 2023 and 2025: learning rate 0.7,
    # momentum 0.9), its mixing 0.5 and a delay of one step; a short period for the
    # short offline runs (local_sgd's 4, for each of the 2 fragments)
    defaults={"period": 8, "fragments": 2, "delay": 1, "mixing": 0.5,
              "outer": {"learning_rate": 0.7, "momentum": 0.9, "nesterov": True}},
    examples=(Example({"period": 6, "fragments": 2, "delay": 1, "mixing": 0.5}, 2,
                      "the global copy, and the outer gradient on its way"),
              Example({"period": 4, "outer": optax.sgd(0.7, momentum=0.9, nesterov=True)}, 2,
                      "the global copy, + outer momentum"))))
