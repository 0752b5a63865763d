"""train_and_evaluate: the whole run, from config to summary.json, resumable."""

import json
import math
import os
import signal
import threading
import time
from typing import Any

import jax
import ml_collections
import numpy as np
import orbax.checkpoint as ocp
import tqdm
from jax.experimental import multihost_utils
from jax.sharding import NamedSharding
from jax.sharding import PartitionSpec as P

from odsgd_jax import parallel
from odsgd_jax.cluster import synchronous_schedule
from odsgd_jax.data import DATASETS, TrainBatches, eval_batches, open_splits
from odsgd_jax.models import make_model
from odsgd_jax.strategies import get_strategy
from odsgd_jax.train._checkpoint import Checkpoints
from odsgd_jax.train._metrics import MetricsWriter
from odsgd_jax.train._optimizer import make_inner_optimizer, make_lr_schedule, strategy_options
from odsgd_jax.train._simulation import SimulatedClock, calibrate_step_time, message_bytes
from odsgd_jax.train._step import init_state, make_eval_step, make_train_step, model_variables
from odsgd_jax.train._validate import validate_config


class NonFiniteLossError(RuntimeError):
  """Training diverged; the last good checkpoint is left as it was."""


class Preempted(Exception):
  """SIGTERM arrived: a checkpoint of `step` was saved; rerunning resumes from it."""

  def __init__(self, step: int, directory: str):
    super().__init__(f"preempted: saved a checkpoint of step {step} in {directory}; run the "
                     f"same command again to resume")
    self.step = step


class _PreemptionNotice:
  """Whether the run was asked to stop (SIGTERM), agreed on by all processes.

  One process: a SIGTERM handler sets a flag, checked after every step. Several:
  JAX's preemption service (which owns SIGTERM there) picks the step at which
  every process saves.
  """

  def __init__(self):
    self._requested = False
    self._previous = None
    if jax.process_count() == 1 and threading.current_thread() is threading.main_thread():
      self._previous = signal.signal(signal.SIGTERM, self._on_sigterm)

  def _on_sigterm(self, signum, frame):
    del signum, frame
    self._requested = True

  def requested(self, step: int) -> bool:
    if jax.process_count() > 1:
      return multihost_utils.reached_preemption_sync_point(step)
    return self._requested

  def close(self) -> None:
    if self._previous is not None:
      signal.signal(signal.SIGTERM, self._previous)
      self._previous = None


def _options(section: ml_collections.ConfigDict) -> dict[str, Any]:
  return {k: v for k, v in section.to_dict().items() if k != "name"}


def _evaluate(eval_step, state, split, spec, batch_size, sharding) -> dict[str, float]:
  total_loss, correct = 0.0, 0.0
  for batch in eval_batches(split, spec, batch_size):
    loss, num_correct = eval_step(state, parallel.put_global(batch, sharding))
    total_loss += float(loss)
    correct += float(num_correct)
  return {"test_loss": total_loss / len(split), "test_accuracy": correct / len(split)}


def _write_json_atomically(path: str, payload: dict[str, Any]) -> None:
  tmp = path + ".tmp"
  with open(tmp, "w", encoding="utf-8") as f:
    json.dump(payload, f, indent=2, sort_keys=True)
    f.write("\n")
  os.replace(tmp, path)


def _open_splits_in_turn(name: str, data_dir: str | None) -> tuple[Any, Any]:
  """`open_splits`, with process 0 first: an offline data set is prepared by one
  process while the others wait, not by all of them at once into the same folder."""
  if jax.process_count() == 1:
    return open_splits(name, data_dir)
  if jax.process_index() == 0:
    splits = open_splits(name, data_dir)
  multihost_utils.sync_global_devices("odsgd_jax: data set prepared")
  if jax.process_index() != 0:
    splits = open_splits(name, data_dir)
  return splits


def _identity(config: ml_collections.ConfigDict) -> dict[str, Any]:
  """What a checkpoint must share with the config that resumes it."""
  identity = {"dataset": config.data.name, "model": config.model.to_dict(),
              "strategy": config.strategy.name,
              "compression": config.strategy.get("compression") or "none",
              "num_workers": config.cluster.num_workers}
  return json.loads(json.dumps(identity))  # as it reads back from the checkpoint


def train_and_evaluate(config: ml_collections.ConfigDict, workdir: str) -> dict[str, Any]:
  """Trains `config`'s model with its strategy, evaluating and checkpointing.

  A workdir that already holds a checkpoint resumes from its latest step and
  ends exactly where an uninterrupted run would. On SIGTERM the run saves a
  checkpoint of the step it is at and raises `Preempted`. Under jax.distributed
  every process calls this; each feeds only its own workers, process 0 writes.

  Args:
    config: experiment config (see configs/default.py); checked before any work.
    workdir: where checkpoints/, model/ (the evaluated model's variables),
      metrics.jsonl, tensorboard/ and summary.json go.

  Returns:
    The summary also written to `workdir/summary.json`.

  Raises:
    ConfigError: invalid config. DataError: data set missing or unreadable.
    NonFiniteLossError: the loss or parameters became NaN/inf.
    CheckpointError: the workdir's checkpoint is another run's, or unreadable.
    Preempted: SIGTERM; the checkpoint is saved.
  """
  validate_config(config, jax.device_count())
  is_writer = jax.process_index() == 0
  data_cfg, train_cfg = config.data, config.train
  worker_mesh = parallel.make_worker_mesh(
      config.cluster.num_workers, config.parallel.num_devices, config.parallel.devices_per_worker
  )
  num_workers = worker_mesh.num_workers
  batch_per_worker = data_cfg.batch_size // num_workers

  spec = DATASETS[data_cfg.name]
  train_split, test_split = _open_splits_in_turn(data_cfg.name, data_cfg.data_dir)
  steps_per_epoch = max(1, (len(train_split) // num_workers) // batch_per_worker)

  model = make_model(config.model.name, spec.num_classes, **_options(config.model))
  lr_schedule = make_lr_schedule(config.optimizer, train_cfg.num_steps, steps_per_epoch)
  strategy = get_strategy(config.strategy.name)
  # The schedule is written in ticks; a strategy may step its inner optimizer
  # several times per tick (asgd: once per arriving gradient).
  updates_per_tick = strategy.inner_updates_per_tick(num_workers)
  inner_schedule = (lr_schedule if updates_per_tick == 1
                    else lambda count: lr_schedule(count // updates_per_tick))
  tx = strategy.make(make_inner_optimizer(config.optimizer, inner_schedule),
                     axis_name=parallel.WORKER_AXES, **strategy_options(config.strategy))

  os.makedirs(workdir, exist_ok=True)
  if is_writer:
    _write_json_atomically(os.path.join(workdir, "config.json"), config.to_dict())
  checkpoints = Checkpoints(workdir, train_cfg.max_checkpoints)
  state = init_state(model, tx, worker_mesh, spec.input_shape, train_cfg.seed)
  progress = {"data_positions": 0, "wall_time_s": 0.0}
  identity = _identity(config)
  resumed_step = checkpoints.latest_step()
  if resumed_step is not None:
    try:
      state, progress = checkpoints.restore(resumed_step, state, identity)
    except Exception:
      checkpoints.close()
      raise
  start_step = int(state.step)

  # This process feeds its own workers; every process follows every worker's data
  # position (the schedule says who consumed a batch), so any of them can save it.
  workers = parallel.local_workers(worker_mesh)
  data_positions = np.broadcast_to(np.asarray(progress["data_positions"], np.int64),
                                   (num_workers,)).copy()
  batches = TrainBatches(
      train_split, spec, workers=workers,
      num_workers=num_workers, batch_size=batch_per_worker, seed=train_cfg.seed,
      num_threads=data_cfg.num_threads, prefetch=data_cfg.prefetch,
  )
  batches.seek(data_positions[workers.start:workers.stop])
  replicated = worker_mesh.sharding(parallel.REPLICATED)
  eval_batch_size = math.ceil(data_cfg.eval_batch_size / worker_mesh.num_devices) * (
      worker_mesh.num_devices)
  eval_sharding = NamedSharding(worker_mesh.mesh, P((parallel.WORKERS, parallel.INTRA)))

  train_step = make_train_step(model, tx, worker_mesh, strategy)
  eval_step = make_eval_step(model, strategy)
  step_time = progress.get("clock", {}).get("step_time") or config.cluster.step_time
  if not step_time:  # measure this host's compiled step once; a resumed run keeps it
    probe = parallel.put_batch(worker_mesh, next(iter(TrainBatches(
        train_split, spec, workers=workers, num_workers=num_workers,
        batch_size=batch_per_worker, seed=train_cfg.seed))))
    step_time = config.cluster.compute_scale * calibrate_step_time(
        train_step, state, probe, synchronous_schedule(0, num_workers),
        worker_mesh.workers_per_device)
  clock = SimulatedClock(config, step_time, message_bytes(state.params))
  if "clock" in progress:
    clock.load_state_dict(progress["clock"])
  reached_target = progress.get("reached_target")  # (step, sim_time) of the first eval >= target
  writer = MetricsWriter(workdir, enabled=is_writer, resumed_step=resumed_step)
  bar = tqdm.tqdm(total=train_cfg.num_steps, initial=start_step, unit="step", dynamic_ncols=True,
                  disable=not (is_writer and train_cfg.progress_bar))

  started = time.perf_counter()
  input_s = 0.0  # host time spent reading and transferring batches
  last_log = (start_step, started)
  pending = None  # (step, metrics on device): fetched after the next step is dispatched
  evaluation = None

  def finish_step(step: int, metrics: Any) -> None:
    nonlocal last_log
    metrics = {name: float(np.mean(value)) for name, value in parallel.fetch(metrics).items()}
    if not (np.isfinite(metrics["loss"]) and np.isfinite(metrics["param_norm"])):
      raise NonFiniteLossError(
          f"loss is {metrics['loss']} (parameter norm {metrics['param_norm']}) at step {step}: "
          f"training diverged and stopped without saving. The last good checkpoint "
          f"(step {checkpoints.latest_step()}) in {checkpoints.directory} is intact; lower "
          f"optimizer.learning_rate (now {config.optimizer.learning_rate}) and rerun."
      )
    sim_time = clock.advance(step - 1, metrics)
    if step % train_cfg.log_every == 0 or step == train_cfg.num_steps:
      now = time.perf_counter()
      steps_per_s = (step - last_log[0]) / max(now - last_log[1], 1e-9)
      last_log = (step, now)
      writer.write(step, {
          **metrics, "learning_rate": lr_schedule(step - 1), "steps_per_s": steps_per_s,
          "examples_seen": step * data_cfg.batch_size, "epoch": step / steps_per_epoch,
          "sim_time": sim_time,
      })
      bar.set_postfix(loss=f"{metrics['loss']:.4f}", acc=f"{metrics['accuracy']:.3f}")

  def save(step: int) -> None:
    wall_time = progress["wall_time_s"] + time.perf_counter() - started
    checkpoints.save(step, state, {"data_positions": data_positions.tolist(),
                                   "wall_time_s": wall_time, "clock": clock.state_dict(),
                                   "reached_target": reached_target, "identity": identity})

  preemption = _PreemptionNotice()
  try:
    for step in range(start_step + 1, train_cfg.num_steps + 1):
      schedule = clock.schedule(step - 1)
      active = np.asarray(schedule.active)
      reading = time.perf_counter()
      batch = parallel.put_batch(worker_mesh, batches.take(active[workers.start:workers.stop]))
      input_s += time.perf_counter() - reading
      data_positions += active.astype(np.int64)
      if jax.process_count() > 1:  # host values must be global arrays in a multi-process jit
        schedule = parallel.put_global(schedule, replicated)
      state, metrics = train_step(state, batch, schedule)
      if pending is not None:
        finish_step(*pending)
      pending = (step, metrics)
      bar.update(1)
      eval_due = step % train_cfg.eval_every == 0 or step == train_cfg.num_steps
      save_due = step % train_cfg.checkpoint_every == 0 or step == train_cfg.num_steps
      if preemption.requested(step):
        finish_step(*pending)
        pending = None
        save(step)
        raise Preempted(step, checkpoints.directory)
      if eval_due or save_due:
        finish_step(*pending)  # never save or report a step that diverged
        pending = None
      if eval_due:
        evaluation = _evaluate(eval_step, state, test_split, spec, eval_batch_size, eval_sharding)
        writer.write(step, {**evaluation, "sim_time": clock.time})
        if (reached_target is None and train_cfg.target_accuracy
            and evaluation["test_accuracy"] >= train_cfg.target_accuracy):
          reached_target = (step, clock.time)
      if save_due:
        save(step)
    if pending is not None:
      finish_step(*pending)
    loop_s = time.perf_counter() - started  # the training loop, evaluations included
    if evaluation is None:  # resumed a finished run: report it again
      evaluation = _evaluate(eval_step, state, test_split, spec, eval_batch_size, eval_sharding)
    # The run's result on its own, loadable without knowing the strategy's state.
    with ocp.StandardCheckpointer() as checkpointer:
      checkpointer.save(os.path.join(os.path.abspath(workdir), "model"),  # host arrays:
                        parallel.fetch(model_variables(state, strategy)),  # load anywhere
                        force=True)
  finally:
    preemption.close()
    bar.close()
    writer.close()
    checkpoints.close()

  summary = {
      **evaluation,
      "steps": int(state.step),
      "epochs": int(state.step) / steps_per_epoch,
      "examples_seen": int(state.step) * data_cfg.batch_size,
      "wall_time_s": progress["wall_time_s"] + time.perf_counter() - started
      if start_step < train_cfg.num_steps else progress["wall_time_s"],
      "strategy": config.strategy.name, "dataset": data_cfg.name, "model": config.model.name,
      "num_workers": num_workers, "num_devices": worker_mesh.num_devices,
      "sim_time_s": clock.time, "sim_step_time_s": clock.step_time,
      "sim_message_bytes": clock.message_bytes,
      "target_accuracy": train_cfg.target_accuracy,
      "sim_time_to_target_s": reached_target[1] if reached_target else None,
      "steps_to_target": reached_target[0] if reached_target else None,
      "sim_time_fractions": clock.fractions(),
      # Of this session's training loop (a resumed run: since the resume). The host
      # reads the next batch while the devices run the previous step, so this is an
      # upper bound on the time the devices wait for data (scripts/benchmark.py
      # measures that by running the loop without the input pipeline).
      "loop_time_s": loop_s,
      "input_host_fraction": input_s / max(loop_s, 1e-9),
  }
  if is_writer:
    _write_json_atomically(os.path.join(workdir, "summary.json"), summary)
  return summary
