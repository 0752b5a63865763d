"""Train state, the pure train step, and evaluation of the strategy's model."""

import dataclasses
from typing import Any, Callable, NamedTuple

import flax.linen as nn
import jax
import jax.numpy as jnp
import optax

from odsgd_jax import parallel
from odsgd_jax.cluster import Schedule
from odsgd_jax.strategies import StrategyDef
from odsgd_jax.tasks import CLASSIFICATION, Task
from odsgd_jax.train._run_schedule import at_tick


class TrainState(NamedTuple):
  """Everything a run needs to continue. Per-worker leaves have a leading dim N."""

  step: jax.Array  # shape=(), int32: steps taken
  params: Any  # per worker: the parameters worker i computes its gradient at
  batch_stats: Any  # per worker: BatchNorm running statistics ({} without BatchNorm)
  opt_state: Any  # per worker: the strategy's state (inner optimizer state inside)
  rng: jax.Array  # shape=(2,), uint32: base key; step and worker are folded in


def init_state(model: nn.Module, tx: optax.GradientTransformation, worker_mesh: parallel.WorkerMesh,
               input_shape: tuple[int, ...], seed: int,
               task: Task = CLASSIFICATION) -> TrainState:
  """Same initial parameters on every worker; strategy state from `tx.init`.

  Two programs: the model's initialization, with the key an argument rather than a
  constant, is the same program for every strategy and seed of a model (compiled once,
  then found in the compilation cache); the second lays it out on the workers and
  initializes the strategy.
  """
  per_worker = worker_mesh.sharding(parallel.PER_WORKER)
  replicated = worker_mesh.sharding(parallel.REPLICATED)
  num_workers = worker_mesh.num_workers

  def init_model(key):
    init_key, rng = jax.random.split(key)
    return model.init(init_key, task.example_input(input_shape), train=False), rng

  def place(variables, rng):
    broadcast = lambda x: jnp.broadcast_to(x, (num_workers, *x.shape))
    params = jax.tree.map(broadcast, variables["params"])
    batch_stats = jax.tree.map(broadcast, variables.get("batch_stats", {}))
    return TrainState(
        step=jnp.zeros((), jnp.int32), params=params, batch_stats=batch_stats,
        opt_state=jax.vmap(tx.init)(params), rng=rng,
    )

  variables, rng = jax.jit(init_model)(jax.random.PRNGKey(seed))
  abstract = jax.eval_shape(place, variables, rng)
  shardings = state_shardings(abstract, per_worker, replicated)
  return jax.jit(place, out_shardings=shardings)(variables, rng)


def state_shardings(state: TrainState, per_worker, replicated) -> TrainState:
  """Per-worker leaves are sharded over the workers; step and rng are replicated."""
  shard = lambda tree: jax.tree.map(lambda _: per_worker, tree)
  return TrainState(step=replicated, params=shard(state.params),
                    batch_stats=shard(state.batch_stats), opt_state=shard(state.opt_state),
                    rng=replicated)


NORMS = ("grad_norm", "update_norm", "param_norm")


@dataclasses.dataclass(frozen=True, eq=False)
class StepSetup:
  """What a train step is built from; a static argument of the jitted step (hashed by
  identity: one setup, one set of programs)."""

  model: nn.Module
  tx: optax.GradientTransformationExtraArgs  # the strategy, built over parallel.WORKER_AXES
  worker_mesh: parallel.WorkerMesh
  strategy: StrategyDef | None = None  # its log and the clock's record; None: neither
  lr_schedule: optax.Schedule | None = None  # of the tick: logged as learning_rate
  task: Task = CLASSIFICATION  # the batch's input, the loss and the logged metrics


def train_step(state: TrainState, batch: dict[str, jax.Array], schedule: Schedule, *,
               setup: StepSetup, norms: bool = False) -> tuple[TrainState, Any]:
  """One tick of every worker: `(state, batch, schedule) -> (state, metrics)`. Pure.

  Every worker computes its loss and gradient on its own batch; the gradient is averaged
  over the devices of one worker (the "intra" axis), then the strategy `setup.tx` decides
  what every worker's parameters become (it gets the cluster `schedule` and the worker's
  `loss` as extra arguments). Metrics come back per worker, one row per name of
  `metric_names` and a column per worker (one output buffer, fetched in one transfer),
  and are averaged on the host: a mean over workers inside the step would be one more
  collective on this step's batch.

  Args:
    norms: also the gradient, update and parameter norms (three passes over the model).
  """
  worker_mesh, model, task = setup.worker_mesh, setup.model, setup.task

  def apply_strategy(grads, opt_state, params, schedule, loss, progress):
    # every worker's learning rate at the run's tick, however often it stepped (_run_schedule)
    opt_state = at_tick(opt_state, progress)
    updates, opt_state = setup.tx.update(grads, opt_state, params, schedule=schedule, loss=loss)
    return optax.apply_updates(params, updates), updates, opt_state

  strategy_update = parallel.per_worker_update(worker_mesh, apply_strategy,
                                               in_axes=(0, 0, 0, None, 0, None))

  def worker_step(params, batch_stats, opt_state, batch, rng, schedule, progress):
    def loss_fn(p):
      outputs, new_model_state = model.apply(
          {"params": p, "batch_stats": batch_stats}, task.inputs(batch), train=True,
          mutable=["batch_stats"], rngs={"dropout": rng},
      )
      return task.loss(outputs, batch), (outputs, new_model_state)

    (loss, (outputs, new_model_state)), grads = jax.value_and_grad(loss_fn, has_aux=True)(params)
    logged = task.train_metrics(outputs, batch)
    if worker_mesh.devices_per_worker > 1:  # XLA keeps even a trivial all-reduce
      grads, loss, logged = jax.lax.pmean((grads, loss, logged), parallel.INTRA)
    params, updates, opt_state = strategy_update(grads, opt_state, params, schedule, loss,
                                                 progress)
    metrics = {"loss": loss, **logged}
    if norms:
      metrics.update(zip(NORMS, (optax.global_norm(t) for t in (grads, updates, params)),
                         strict=True))
    batch_stats = new_model_state.get("batch_stats", batch_stats)
    return params, batch_stats, opt_state, metrics

  run_workers = worker_mesh.per_worker(
      worker_step,
      in_layouts=(parallel.PER_WORKER,) * 3 + (parallel.BATCH,)
      + (parallel.PER_WORKER, parallel.REPLICATED, parallel.REPLICATED),
  )
  worker_rngs = jax.random.split(jax.random.fold_in(state.rng, state.step),
                                 worker_mesh.num_workers)
  params, batch_stats, opt_state, metrics = run_workers(
      state.params, state.batch_stats, state.opt_state, batch, worker_rngs, schedule,
      state.step * _inner_updates_per_tick(setup))
  new_state = TrainState(step=state.step + 1, params=params, batch_stats=batch_stats,
                         opt_state=opt_state, rng=state.rng)
  if setup.strategy is not None:
    metrics = {**metrics, **clock_record(setup.strategy, state.opt_state, opt_state)}
  if setup.lr_schedule is not None:
    metrics["learning_rate"] = setup.lr_schedule(state.step)
  return new_state, jnp.stack([jnp.broadcast_to(metrics[name], (worker_mesh.num_workers,))
                               .astype(jnp.float32) for name in sorted(metrics)])


def _inner_updates_per_tick(setup: StepSetup) -> int:
  """How many times a tick steps the strategy's inner optimizer when every worker's
  gradient lands (asgd: once per gradient), the unit of its schedule's count."""
  if setup.strategy is None:
    return 1
  return setup.strategy.inner_updates_per_tick(setup.worker_mesh.num_workers)


def metric_names(setup: StepSetup, opt_state: Any, norms: bool = False) -> list[str]:
  """The rows of `train_step`'s metrics, in order, from the strategy state's structure
  (arrays or their shapes, per worker): known before the first step."""
  names = {*setup.task.metrics, *(NORMS if norms else ())}  # `Task.train_metrics` and loss
  if setup.strategy is not None:
    names |= set(jax.eval_shape(
        lambda s: clock_record(setup.strategy, s, s), opt_state))
  if setup.lr_schedule is not None:
    names.add("learning_rate")
  return sorted(names)


def clock_record(strategy: StrategyDef, old_opt_state: Any,
                 opt_state: Any) -> dict[str, jax.Array]:
  """The strategy's own metrics (`strategy.log`), and what the simulated clock reads:
  whether the tick sent the round's message (`round_end`, for a strategy that does not
  send on every tick) and, for a compressed exchange, the bits this worker sent on the
  tick (0 if none) and whether they travelled as an all-gather (`gathered`)."""
  metrics = dict(strategy.log(opt_state))
  round_end = strategy.round_end(opt_state)
  if round_end is not None:
    metrics["round_end"] = round_end.astype(jnp.float32)
  old, new = strategy.communication_state(old_opt_state), strategy.communication_state(opt_state)
  if new is not None:
    sent = new.count > old.count
    metrics["bits_sent"] = jnp.where(sent, new.bits, 0.0)
    metrics["gathered"] = (sent & new.gathered).astype(jnp.float32)
  return metrics


def model_variables(state: TrainState, strategy: StrategyDef) -> dict[str, Any]:
  """The single model a run evaluates and saves.

  Parameters: the strategy's choice (`strategy.model_params`). BatchNorm
  statistics: the mean over workers of their running statistics (each worker
  normalizes with its own batches during training).
  """
  params = strategy.model_params(state.params, state.opt_state)
  batch_stats = jax.tree.map(lambda x: jnp.mean(x, axis=0), state.batch_stats)
  return {"params": params, "batch_stats": batch_stats}


def make_eval_step(model: nn.Module, strategy: StrategyDef,
                   task: Task = CLASSIFICATION) -> Callable[..., Any]:
  """Returns `eval_step(state, batch) -> {metric: sum over the batch, "count": ...}`
  (`Task.eval_sums`), jitted."""

  def eval_step(state: TrainState, batch: dict[str, jax.Array]):
    outputs = model.apply(model_variables(state, strategy), task.inputs(batch), train=False)
    return task.eval_sums(outputs, batch, batch["mask"])

  return jax.jit(eval_step)
