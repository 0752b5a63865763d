"""What a run keeps besides its train state: progress (data positions, the simulated clock,
the target, wall time), the record of each finished step, the schedules on the devices,
whether it was asked to stop, and its summary."""

import signal
import threading
import time
from typing import Any, Sequence

import jax
import numpy as np
from jax.experimental import multihost_utils

from odsgd_jax import parallel, xla_flags
from odsgd_jax.train._experiment import Experiment
from odsgd_jax.train._metrics import MetricsWriter
from odsgd_jax.train._simulation import SimulatedClock

_MAX_CACHED_SCHEDULES = 4096


class NonFiniteLossError(RuntimeError):
  """Training diverged; nothing was saved, the checkpoints are left as they were."""


class Progress:
  """Where a run stands besides its train state: each worker's data position, the
  simulated clock, the first evaluation that reached the target, and wall time."""

  def __init__(self, experiment: Experiment, clock: SimulatedClock, saved: dict[str, Any]):
    """`clock`: the run's, where the checkpoint left it; `saved`: what the checkpoint holds
    of the progress (empty for a fresh run)."""
    self.clock = clock
    self.data_positions = np.broadcast_to(np.asarray(saved.get("data_positions", 0), np.int64),
                                          (experiment.num_workers,)).copy()
    self.reached_target = saved.get("reached_target")  # (step, sim_time) or None
    # the best score evaluated (the task's target metric turned so that higher is better,
    # `Metric.oriented`: the targets at or below it are reached), and the step of the next
    # evaluation (`next_evaluation`); None: from the start, or a checkpoint of a version
    # before them (its next step on the grid without targets). Checkpoints before issue 76
    # kept it as best_accuracy (an accuracy is its own score).
    self.best_score = saved.get("best_score", saved.get("best_accuracy"))
    self.next_evaluation = saved.get("next_evaluation")
    self.wall_time_before = saved.get("wall_time_s", 0.0)  # of earlier sessions
    self.started = time.perf_counter()

  @property
  def wall_time(self) -> float:
    return self.wall_time_before + time.perf_counter() - self.started

  def state_dict(self, identity: dict[str, Any]) -> dict[str, Any]:
    return {"data_positions": self.data_positions.tolist(), "wall_time_s": self.wall_time,
            "clock": self.clock.state_dict(), "reached_target": self.reached_target,
            "best_score": self.best_score, "next_evaluation": self.next_evaluation,
            "identity": identity}


class StepLog:
  """Finished steps: their metrics fetched (the means over workers), checked, charged to
  the clock, shown to the hooks and written every `train.log_every` steps."""

  def __init__(self, experiment: Experiment, clock: SimulatedClock, writer: MetricsWriter,
               hooks: Sequence[Any], bar: Any, checkpoints: str):
    self.x, self.clock, self.writer, self.hooks, self.bar = (experiment, clock, writer, hooks,
                                                             bar)
    self.checkpoints = checkpoints  # the folder of the run's checkpoints
    self.last_row = (0, time.perf_counter())  # (step, time) of the last row

  def start(self, step: int) -> None:
    """Steps per second are counted from here, after step `step`."""
    self.last_row = (step, time.perf_counter())

  def record(self, step: int, norms: bool, packed: Any) -> None:
    rows = self.x.train_step.metrics(parallel.fetch(packed), norms)
    metrics = {name: float(np.mean(row)) for name, row in rows.items()}
    if not (np.isfinite(metrics["loss"]) and np.isfinite(metrics.get("param_norm", 0.0))):
      norm = f" (parameter norm {metrics['param_norm']})" if "param_norm" in metrics else ""
      # Only NaN and inf are caught, so a checkpoint saved on the way there may hold a
      # loss that had already blown up: resuming from it diverges again. The advice is
      # the one that works whatever the checkpoints hold.
      raise NonFiniteLossError(
          f"loss is {metrics['loss']}{norm} at step {step}: training diverged and stopped "
          f"without saving. Lower optimizer.learning_rate (now "
          f"{self.x.config.optimizer.learning_rate}) and rerun in a new --workdir: the "
          f"checkpoints in {self.checkpoints} may already be on the way to diverging and "
          f"would be resumed.")
    sim_time = self.clock.advance(step - 1, metrics)
    for hook in self.hooks:
      hook.after_step(step, metrics)
    train_cfg, data_cfg = self.x.config.train, self.x.config.data
    if step % train_cfg.log_every == 0 or step == train_cfg.num_steps:
      now = time.perf_counter()
      steps_per_s = (step - self.last_row[0]) / max(now - self.last_row[1], 1e-9)
      self.last_row = (step, now)
      self.writer.write(step, {**metrics, "steps_per_s": steps_per_s,
                               "examples_seen": step * data_cfg.batch_size,
                               "epoch": step / self.x.steps_per_epoch, "sim_time": sim_time})
      self.bar.set_postfix({name: f"{metrics[name]:.4f}" for name in self.x.task.metrics
                            if name in metrics})


class DeviceSchedules:
  """Each distinct cluster schedule as arrays on the devices, transferred once: a
  homogeneous cluster has N of them (the rotating arrival order), and a host-to-device
  copy on every step costs a small model's step 10% (scripts/benchmark.py)."""

  def __init__(self, experiment: Experiment):
    self.replicated = experiment.worker_mesh.sharding(parallel.REPLICATED)
    self.placed: dict[bytes, Any] = {}

  def __call__(self, schedule: Any) -> Any:
    key = np.asarray(schedule.active).tobytes() + np.asarray(schedule.arrival_order).tobytes()
    if key not in self.placed:
      if len(self.placed) >= _MAX_CACHED_SCHEDULES:
        self.placed.clear()
      self.placed[key] = parallel.put_global(schedule, self.replicated)
    return self.placed[key]


class PreemptionNotice:
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


def run_summary(experiment: Experiment, steps: int, evaluation: dict[str, float],
                progress: Progress, finished_before: bool, loop_s: float,
                input_s: float, evaluation_s: float = 0.0,
                evaluations: int = 0) -> dict[str, Any]:
  """What summary.json says of a run after `steps` steps; `finished_before`: this session
  resumed a finished run (its wall time is that of the earlier sessions)."""
  data_cfg, clock, reached = experiment.config.data, progress.clock, progress.reached_target
  return {
      **evaluation,
      "steps": steps,
      "epochs": steps / experiment.steps_per_epoch,
      "examples_seen": steps * data_cfg.batch_size,
      "wall_time_s": progress.wall_time_before if finished_before else progress.wall_time,
      "strategy": experiment.strategy.name, "dataset": data_cfg.name,
      "model": experiment.config.model.name, "num_workers": experiment.num_workers,
      "num_devices": experiment.worker_mesh.num_devices,
      "sim_time_s": clock.time, "sim_step_time_s": clock.step_time,
      "sim_message_bytes": clock.message_bytes,
      # bits one worker sent per step (the trained model's messages; dense float32
      # where nothing is compressed)
      "bits_sent_per_step": clock.bits_sent / max(steps, 1),
      "target_accuracy": experiment.config.train.target_accuracy,
      "sim_time_to_target_s": reached[1] if reached else None,
      "steps_to_target": reached[0] if reached else None,
      "sim_time_fractions": clock.fractions(),
      # XLA_FLAGS asked for deterministic GPU ops (train.deterministic; docs/running.md)
      "deterministic_ops": xla_flags.deterministic_ops(),
      # Of this session's training loop (a resumed run: since the resume). The host
      # reads the next batch while the devices run the previous step, so this is an
      # upper bound on the time the devices wait for data (scripts/benchmark.py
      # measures that by running the loop without the input pipeline).
      "loop_time_s": loop_s,
      "input_host_fraction": input_s / max(loop_s, 1e-9),
      # Of this session's loop too: the evaluations it ran (train.eval_every, eval_growth,
      # eval_targets) and the wall time they took; the rest of loop_time_s is training, and
      # wall_time_s - loop_time_s starting up (data, compiling, the clock's probe) and
      # closing (the model, the last checkpoint).
      "evaluation_time_s": evaluation_s,
      "evaluations": evaluations,
  }
