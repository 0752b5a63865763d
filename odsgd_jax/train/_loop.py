"""train_and_evaluate: the whole run, from config to summary.json, resumable."""

import signal
import threading
import time
from typing import Any, Protocol, Sequence

import jax
import ml_collections
import numpy as np
import orbax.checkpoint as ocp
import tqdm
from etils import epath
from jax.experimental import multihost_utils

from odsgd_jax import parallel
from odsgd_jax.cluster import synchronous_schedule
from odsgd_jax.train._checkpoint import Checkpoints
from odsgd_jax.train._experiment import Experiment, build_experiment
from odsgd_jax.train._metrics import MetricsWriter
from odsgd_jax.train._simulation import (SimulatedClock, calibrate_step_time, message_bytes,
                                         simulated_clock)
from odsgd_jax.train._step import TrainState, model_variables
from odsgd_jax.train._workdir import (WorkdirLock, prepare_workdir, storage_error,
                                      write_json_atomically)


class NonFiniteLossError(RuntimeError):
  """Training diverged; nothing was saved, the checkpoints are left as they were."""


class Preempted(Exception):
  """SIGTERM arrived: a checkpoint of `step` was saved; rerunning resumes from it."""

  def __init__(self, step: int, directory: str):
    super().__init__(f"preempted: saved a checkpoint of step {step} in {directory}; run the "
                     f"same command again to resume")
    self.step = step


class Hook:
  """Watches a run from inside the loop; subclass and override what you need.

  The loop calls every hook's methods in order. A hook may raise to stop the run
  (a test simulates a crash this way); it must not change the state it is shown.
  """

  def on_start(self, experiment: Experiment, state: TrainState) -> None:
    """Before the first step of this session (after a resume: of the remaining ones)."""

  def before_step(self, step: int) -> None:
    """Before step `step` (1-based) is dispatched."""

  def after_step(self, step: int, metrics: dict[str, float]) -> None:
    """Step `step`'s metrics (means over workers), once fetched from the devices."""

  def after_eval(self, step: int, evaluation: dict[str, float]) -> None:
    """The test loss and accuracy after step `step`."""

  def before_save(self, step: int) -> None:
    """Before the checkpoint of step `step` is saved (a test kills a process here)."""


class BatchSource(Protocol):
  """Where the loop takes each tick's batches from (default: the config's data)."""

  def seek(self, positions: Sequence[int]) -> None:
    """Moves this process's workers to their saved data positions."""

  def take(self, active: np.ndarray) -> Any:
    """The next tick's batches of this process's workers; inactive ones keep theirs."""


_MAX_CACHED_SCHEDULES = 4096


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


class _Progress:
  """Where a run stands besides its train state: each worker's data position, the
  simulated clock, the first evaluation that reached the target, and wall time."""

  def __init__(self, experiment: Experiment, clock: SimulatedClock, saved: dict[str, Any]):
    self.clock = clock
    if "clock" in saved:
      clock.load_state_dict(saved["clock"])
    self.data_positions = np.broadcast_to(np.asarray(saved.get("data_positions", 0), np.int64),
                                          (experiment.num_workers,)).copy()
    self.reached_target = saved.get("reached_target")  # (step, sim_time) or None
    self.wall_time_before = saved.get("wall_time_s", 0.0)  # of earlier sessions
    self.started = time.perf_counter()

  @property
  def wall_time(self) -> float:
    return self.wall_time_before + time.perf_counter() - self.started

  def state_dict(self, identity: dict[str, Any]) -> dict[str, Any]:
    return {"data_positions": self.data_positions.tolist(), "wall_time_s": self.wall_time,
            "clock": self.clock.state_dict(), "reached_target": self.reached_target,
            "identity": identity}


class _Run:
  """One session of a run in `workdir`: resumed when made; then `run` loops, saves and
  reports. What it opens (checkpoints, metrics, progress bar, the SIGTERM handler) is
  closed by `run`, or by the constructor when it fails."""

  def __init__(self, experiment: Experiment, workdir: epath.Path, batches: BatchSource | None,
               hooks: Sequence[Hook]):
    self.x, self.workdir, self.hooks = experiment, workdir, list(hooks)
    self.train_cfg = experiment.config.train
    self.is_writer = jax.process_index() == 0
    self.workers = parallel.local_workers(experiment.worker_mesh)
    self.batches = batches if batches is not None else experiment.train_batches()
    self.replicated = experiment.worker_mesh.sharding(parallel.REPLICATED)
    self.schedules: dict[bytes, Any] = {}  # the schedules already on the devices
    self.identity = experiment.identity()
    self.evaluation: dict[str, float] | None = None
    # (step, norms computed, metrics on device): fetched after the next step is dispatched
    self.pending = None
    self.input_s = self.loop_s = 0.0  # of this session's loop: reading input, and in all
    self.checkpoints = self.writer = self.bar = None
    self.preemption = _PreemptionNotice()  # from the start: a SIGTERM while resuming counts
    try:
      parallel.now_doing("opening the checkpoints")
      self.checkpoints = Checkpoints(workdir, self.train_cfg.max_checkpoints)
      self.state, self.resumed_step, self.progress = self._resume()
      self.start_step = int(self.state.step)
      # Evaluated every eval_every steps: the validation split, where the data set has
      # one (targets are timed and choices made on it), else the test split; the test
      # split at the end in any case (the run's final accuracy).
      has_validation = experiment.splits.validation is not None
      self.evaluator = experiment.evaluator("validation" if has_validation else "test")
      self.final_evaluator = experiment.evaluator("test") if has_validation else None
      self.writer = MetricsWriter(workdir, enabled=self.is_writer, resumed_step=self.resumed_step)
      self.bar = tqdm.tqdm(total=self.train_cfg.num_steps, initial=self.start_step, unit="step",
                           dynamic_ncols=True,
                           # None: shown only on a terminal, not as thousands of
                           # carriage-return updates in a log file
                           disable=(None if self.is_writer and self.train_cfg.progress_bar
                                    else True))
      self.last_log = (self.start_step, time.perf_counter())  # (step, time) of the last row
    except BaseException:
      self.close()
      raise

  def _resume(self) -> tuple[TrainState, int | None, _Progress]:
    """The latest checkpoint's state, its step and the progress with the clock, or a fresh
    start; the data pipeline moved to the saved positions."""
    parallel.now_doing("resuming from the latest checkpoint")
    state = self.x.init_state()
    saved: dict[str, Any] = {}
    resumed_step = self.checkpoints.latest_step()
    if resumed_step is not None:
      state, saved = self.checkpoints.restore(resumed_step, state, self.identity)
    if self.is_writer:  # only once the checkpoint is known to belong to this config
      write_json_atomically(self.workdir / "config.json", self.x.config.to_dict())
    clock = simulated_clock(self.x.config, self.x.strategy, self._step_time(saved, state),
                            message_bytes(state.params), self.x.batch_per_worker,
                            self.x.spec.input_shape, self.x.spec.num_classes)
    progress = _Progress(self.x, clock, saved)
    self.batches.seek(progress.data_positions[self.workers.start:self.workers.stop])
    return state, resumed_step, progress

  def _step_time(self, saved: dict[str, Any], state: TrainState) -> float:
    """Seconds of one simulated step: the config's, or this host's compiled step
    measured once (a resumed run keeps its measurement)."""
    step_time = saved.get("clock", {}).get("step_time") or self.x.config.cluster.step_time
    if step_time:
      return step_time
    probe = parallel.put_batch(self.x.worker_mesh, self.x.train_batches().take())
    return self.x.config.cluster.compute_scale * calibrate_step_time(
        self.x.train_step, state, probe, synchronous_schedule(0, self.x.num_workers),
        self.x.worker_mesh.workers_per_device)

  def finish_step(self) -> None:
    """Fetches the pending step's metrics, checks them, advances the clock, logs."""
    step, norms, metrics = self.pending
    self.pending = None
    rows = self.x.train_step.metrics(parallel.fetch(metrics), norms)
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
          f"checkpoints in {self.checkpoints.directory} may already be on the way to "
          f"diverging and would be resumed."
      )
    sim_time = self.progress.clock.advance(step - 1, metrics)
    for hook in self.hooks:
      hook.after_step(step, metrics)
    if step % self.train_cfg.log_every == 0 or step == self.train_cfg.num_steps:
      now = time.perf_counter()
      steps_per_s = (step - self.last_log[0]) / max(now - self.last_log[1], 1e-9)
      self.last_log = (step, now)
      data_cfg = self.x.config.data
      self.writer.write(step, {**metrics, "steps_per_s": steps_per_s,
                               "examples_seen": step * data_cfg.batch_size,
                               "epoch": step / self.x.steps_per_epoch, "sim_time": sim_time})
      self.bar.set_postfix(loss=f"{metrics['loss']:.4f}", acc=f"{metrics['accuracy']:.3f}")

  def evaluation_at(self, step: int) -> dict[str, float]:
    evaluation = self.evaluator(self.state)
    if self.final_evaluator is not None and step == self.train_cfg.num_steps:
      evaluation.update(self.final_evaluator(self.state))
    return evaluation

  def evaluate(self, step: int) -> None:
    parallel.now_doing(f"evaluating after step {step}")
    self.evaluation = self.evaluation_at(step)
    self.writer.write(step, {**self.evaluation, "sim_time": self.progress.clock.time})
    target = self.train_cfg.target_accuracy
    if (self.progress.reached_target is None and target
        and self.evaluation[f"{self.evaluator.name}_accuracy"] >= target):
      self.progress.reached_target = (step, self.progress.clock.time)
    for hook in self.hooks:
      hook.after_eval(step, self.evaluation)

  def save(self, step: int) -> None:
    parallel.now_doing(f"saving the checkpoint of step {step}")
    for hook in self.hooks:
      hook.before_save(step)
    self.checkpoints.save(step, self.state, self.progress.state_dict(self.identity))

  def device_schedule(self, schedule: Any) -> Any:
    """The schedule as arrays on the devices, transferred once per distinct schedule: a
    homogeneous cluster has N of them (the rotating arrival order), and a host-to-device
    copy on every step costs a small model's step 10% (scripts/benchmark.py)."""
    key = np.asarray(schedule.active).tobytes() + np.asarray(schedule.arrival_order).tobytes()
    if key not in self.schedules:
      if len(self.schedules) >= _MAX_CACHED_SCHEDULES:
        self.schedules.clear()
      self.schedules[key] = parallel.put_global(schedule, self.replicated)
    return self.schedules[key]

  def tick(self, step: int) -> None:
    """Dispatches step `step`: the schedule, the batches, the compiled step."""
    parallel.now_doing(f"running step {step}")
    for hook in self.hooks:
      hook.before_step(step)
    schedule = self.progress.clock.schedule(step - 1)
    active = np.asarray(schedule.active)
    reading = time.perf_counter()
    batch = parallel.put_batch(self.x.worker_mesh,
                               self.batches.take(active[self.workers.start:self.workers.stop]))
    self.input_s += time.perf_counter() - reading
    self.progress.data_positions += active.astype(np.int64)
    schedule = self.device_schedule(schedule)
    norms = step % self.train_cfg.norms_every == 0
    self.state, metrics = self.x.train_step(self.state, batch, schedule, norms=norms,
                                            steady=self.x.train_step.steady(step - 1))
    if self.pending is not None:
      self.finish_step()
    self.pending = (step, norms, metrics)

  def loop(self) -> None:
    """Steps to the end, evaluating, checkpointing, and saving on SIGTERM."""
    for step in range(self.start_step + 1, self.train_cfg.num_steps + 1):
      self.tick(step)
      self.bar.update(1)
      eval_due = step % self.train_cfg.eval_every == 0 or step == self.train_cfg.num_steps
      save_due = step % self.train_cfg.checkpoint_every == 0 or step == self.train_cfg.num_steps
      parallel.now_doing(f"agreeing whether the run was preempted at step {step}")
      if self.preemption.requested(step):
        self.finish_step()
        self.save(step)
        raise Preempted(step, self.checkpoints.directory)
      if eval_due or save_due:
        self.finish_step()  # never save or report a step that diverged
      if eval_due:
        self.evaluate(step)
      if save_due:
        self.save(step)
    if self.pending is not None:
      self.finish_step()

  def run(self) -> dict[str, Any]:
    """The session: train to the end, save the model, return the summary.

    Raises:
      parallel.PeerLostError: a collective between the processes failed (another
        process has probably died); the checkpoints being written are not waited for.
    """
    try:
      with parallel.across_processes():
        self.session()
        parallel.now_doing("writing the last checkpoint")
        self.checkpoints.close()
    except parallel.PeerLostError:
      self.checkpoints.abandon()  # finishing its saves needs the dead process: it would hang
      raise
    finally:
      self.close()
    return self.summary()

  def session(self) -> None:
    """Trains to the end and saves the model."""
    for hook in self.hooks:
      hook.on_start(self.x, self.state)
    started = time.perf_counter()
    self.last_log = (self.start_step, started)
    self.loop()
    self.loop_s = time.perf_counter() - started  # the training loop, evaluations included
    if self.evaluation is None:  # resumed a finished run: report it again
      parallel.now_doing("evaluating the finished run")
      self.evaluation = self.evaluation_at(self.train_cfg.num_steps)
    # The run's result on its own, loadable without knowing the strategy's state.
    parallel.now_doing("saving the model")
    with ocp.StandardCheckpointer() as checkpointer:
      checkpointer.save(self.workdir / "model",
                        parallel.fetch(model_variables(self.state, self.x.strategy.definition)),
                        force=True)  # host arrays: load anywhere

  def close(self) -> None:
    """Closes what the session opened; after an error, the last save is kept intact."""
    self.preemption.close()
    for closable in (self.bar, self.writer, self.checkpoints):
      if closable is not None:
        closable.close()

  def summary(self) -> dict[str, Any]:
    steps, data_cfg = int(self.state.step), self.x.config.data
    clock, reached = self.progress.clock, self.progress.reached_target
    return {
        **self.evaluation,
        "steps": steps,
        "epochs": steps / self.x.steps_per_epoch,
        "examples_seen": steps * data_cfg.batch_size,
        "wall_time_s": (self.progress.wall_time if self.start_step < self.train_cfg.num_steps
                        else self.progress.wall_time_before),
        "strategy": self.x.strategy.name, "dataset": data_cfg.name,
        "model": self.x.config.model.name, "num_workers": self.x.num_workers,
        "num_devices": self.x.worker_mesh.num_devices,
        "sim_time_s": clock.time, "sim_step_time_s": clock.step_time,
        "sim_message_bytes": clock.message_bytes,
        # bits one worker sent per step (the trained model's messages; dense float32
        # where nothing is compressed)
        "bits_sent_per_step": clock.bits_sent / max(steps, 1),
        "target_accuracy": self.train_cfg.target_accuracy,
        "sim_time_to_target_s": reached[1] if reached else None,
        "steps_to_target": reached[0] if reached else None,
        "sim_time_fractions": clock.fractions(),
        # Of this session's training loop (a resumed run: since the resume). The host
        # reads the next batch while the devices run the previous step, so this is an
        # upper bound on the time the devices wait for data (scripts/benchmark.py
        # measures that by running the loop without the input pipeline).
        "loop_time_s": self.loop_s,
        "input_host_fraction": self.input_s / max(self.loop_s, 1e-9),
    }


def train_and_evaluate(config: ml_collections.ConfigDict, workdir: str, *,
                       batches: BatchSource | None = None,
                       hooks: Sequence[Hook] = ()) -> dict[str, Any]:
  """Trains `config`'s model with its strategy, evaluating and checkpointing.

  A workdir that already holds a checkpoint resumes from its latest step and
  ends exactly where an uninterrupted run would. On SIGTERM the run saves a
  checkpoint of the step it is at and raises `Preempted`. Under jax.distributed
  every process calls this; each feeds only its own workers, process 0 writes.

  Args:
    config: experiment config (see configs/default.py); checked before any work.
    workdir: where checkpoints/, model/ (the evaluated model's variables),
      metrics.jsonl, tensorboard/, config.json and summary.json go.
    batches: where the tick's batches come from instead of the config's data
      pipeline (e.g. one batch kept on the devices, to time the loop without input).
    hooks: `Hook`s called around every step and evaluation.

  Returns:
    The summary also written to `workdir/summary.json`.

  Raises:
    ConfigError: invalid config. DataError: data set missing or unreadable.
    NonFiniteLossError: the loss or parameters became NaN/inf.
    CheckpointError: the workdir's checkpoint is another run's, or unreadable.
    WorkdirError: another run is using the workdir, or its file system refuses.
    Preempted: SIGTERM; the checkpoint is saved.
    parallel.PeerLostError: several processes, and a collective between them failed
      (another one has probably died); the complete checkpoints are intact.
  """
  parallel.now_doing("starting")
  with parallel.across_processes():  # the data set's barrier, opening the checkpoints
    experiment = build_experiment(config)
    path = prepare_workdir(workdir)
  lock = WorkdirLock(path)  # before anything in the workdir is read or written
  try:
    with parallel.across_processes():
      run = _Run(experiment, path, batches, hooks)
    summary = run.run()
    if jax.process_index() == 0:
      write_json_atomically(path / "summary.json", summary)
  except OSError as error:  # metrics, events, the model: the file system refused
    raise storage_error(error) from error
  finally:
    lock.release()
  return summary
