"""train_and_evaluate: the whole run, from config to summary.json, resumable."""

import time
from typing import Any, Protocol, Sequence

import jax
import ml_collections
from absl import logging
import numpy as np
import tqdm
from etils import epath

from odsgd_jax import parallel, xla_flags
from odsgd_jax.train._checkpoint import Checkpoints, save_model
from odsgd_jax.train._evaluation_grid import evaluation_steps, next_evaluation
from odsgd_jax.train._experiment import Experiment, build_experiment
from odsgd_jax.train._metrics import MetricsWriter
from odsgd_jax.train._progress import (DeviceSchedules, NonFiniteLossError, PreemptionNotice,
                                       Progress, StepLog, run_summary)
from odsgd_jax.train._simulation import CLOCK_FILE, run_clock
from odsgd_jax.train._step import TrainState, model_variables
from odsgd_jax.train._workdir import (WorkdirLock, prepare_workdir, storage_error,
                                      write_json_atomically)

__all__ = ["BatchSource", "Hook", "NonFiniteLossError", "Preempted", "train_and_evaluate"]


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

  def inspect(self, step: int, state: TrainState) -> None:
    """The state after step `step`, before the next step takes it (its buffers are given
    to that step: copy what you keep). For probes of the dynamics
    (scripts/switch_dynamics.py); reading it costs the run its overlap of steps."""

  def after_eval(self, step: int, evaluation: dict[str, float]) -> None:
    """The task's metrics on the test split after step `step`."""

  def before_save(self, step: int) -> None:
    """Before the checkpoint of step `step` is saved (a test kills a process here)."""


class BatchSource(Protocol):
  """Where the loop takes each tick's batches from (default: the config's data)."""

  def seek(self, positions: Sequence[int]) -> None:
    """Moves this process's workers to their saved data positions."""

  def take(self, active: np.ndarray) -> Any:
    """The next tick's batches of this process's workers; inactive ones keep theirs."""


class _Run:
  """One session of a run in `workdir`: resumed when made; then `run` trains to the end,
  saves and reports. What it opens (checkpoints, metrics, progress bar, the SIGTERM
  handler) is closed by `run`, or by the constructor when it fails."""

  def __init__(self, experiment: Experiment, workdir: epath.Path, batches: BatchSource | None,
               hooks: Sequence[Hook], activity: parallel.Activity):
    self.x, self.workdir, self.hooks = experiment, workdir, list(hooks)
    self.activity = activity  # what this process is doing, for a lost peer's message
    self.cfg = experiment.config.train
    self.is_writer = jax.process_index() == 0
    self.workers = parallel.local_workers(experiment.worker_mesh)
    self.batches = batches if batches is not None else experiment.train_batches()
    self.schedules = DeviceSchedules(experiment)
    self.identity = experiment.identity()
    self.evaluation: dict[str, float] | None = None
    # of this session's loop: reading input, evaluating, and in all
    self.input_s = self.evaluation_s = self.loop_s = 0.0
    self.evaluations = 0  # of this session
    self.checkpoints = self.writer = self.bar = None  # closed by `close`
    self.preemption = PreemptionNotice()  # from the start: a SIGTERM while resuming counts
    try:
      self.activity.now("opening the checkpoints")
      self.checkpoints = Checkpoints(workdir, self.cfg.max_checkpoints)
      self.resumed_step = self.checkpoints.latest_step()
      self.state, self.progress = self._resume()
      self.start_step = int(self.state.step)
      if self.progress.next_evaluation is None:
        grid = evaluation_steps(self.cfg.num_steps, self.cfg.eval_every, self.cfg.eval_growth)
        self.progress.next_evaluation = min(s for s in grid | {self.cfg.num_steps}
                                            if s > self.start_step or s == self.cfg.num_steps)
      self.evaluator, self.final_evaluator = experiment.evaluators()
      self.task_target = experiment.task.target
      self.writer = MetricsWriter(workdir, enabled=self.is_writer, resumed_step=self.resumed_step)
      self.bar = tqdm.tqdm(total=self.cfg.num_steps, initial=self.start_step, unit="step",
                           dynamic_ncols=True,  # None: on a terminal only, not in a log file
                           disable=None if self.is_writer and self.cfg.progress_bar else True)
      self.log = StepLog(experiment, self.progress.clock, self.writer, self.hooks, self.bar,
                         self.checkpoints.directory)
    except BaseException:
      self.close()
      raise

  def _resume(self) -> tuple[TrainState, Progress]:
    """The latest checkpoint's state and progress, or a fresh start; data moved there."""
    self.activity.now("resuming from the latest checkpoint")
    state, saved = self.x.init_state(), {}
    if self.resumed_step is not None:
      state, saved = self.checkpoints.restore(self.resumed_step, state, self.identity)
    if self.is_writer:  # only once the checkpoint is known to belong to this config
      write_json_atomically(self.workdir / "config.json", self.x.config.to_dict())
    progress = Progress(self.x, run_clock(self.x, saved.get("clock", {}), state), saved)
    self.batches.seek(progress.data_positions[self.workers.start:self.workers.stop])
    return state, progress

  def step(self, step: int) -> tuple[int, bool, Any]:
    """Dispatches step `step` (1-based); returns what `StepLog.record` takes."""
    self.activity.now(f"running step {step}")
    for hook in self.hooks:
      hook.before_step(step)
    schedule = self.progress.clock.schedule(step - 1)
    active = np.asarray(schedule.active)
    reading = time.perf_counter()
    batch = parallel.put_batch(self.x.worker_mesh,
                               self.batches.take(active[self.workers.start:self.workers.stop]))
    self.input_s += time.perf_counter() - reading
    self.progress.data_positions += active.astype(np.int64)
    norms = step % self.cfg.norms_every == 0
    self.state, metrics = self.x.train_step(self.state, batch, self.schedules(schedule),
                                            tick=step - 1, norms=norms)
    for hook in self.hooks:
      hook.inspect(step, self.state)
    return step, norms, metrics

  def loop(self) -> None:
    """Steps to the end; step t's metrics are fetched once step t+1 is dispatched, or
    before t is evaluated or saved (never save or report a step that diverged)."""
    in_flight = None
    for step in range(self.start_step + 1, self.cfg.num_steps + 1):
      dispatched = self.step(step)
      if in_flight is not None:
        self.log.record(*in_flight)
      in_flight = dispatched
      self.bar.update(1)
      eval_due = step == self.cfg.num_steps or step == self.progress.next_evaluation
      save_due = step % self.cfg.checkpoint_every == 0 or step == self.cfg.num_steps
      self.activity.now(f"agreeing whether the run was preempted at step {step}")
      preempted = self.preemption.requested(step)
      if preempted or eval_due or save_due:
        self.log.record(*in_flight)
        in_flight = None
      if preempted:
        self.save(step)
        raise Preempted(step, self.checkpoints.directory)
      if eval_due:
        self.evaluate(step)
      if save_due:
        self.save(step)
    if in_flight is not None:
      self.log.record(*in_flight)

  def evaluated(self, step: int) -> dict[str, float]:
    self.activity.now(f"evaluating after step {step}")
    evaluation = self.evaluator(self.state)
    if self.final_evaluator is not None and step == self.cfg.num_steps:
      evaluation.update(self.final_evaluator(self.state))
    return evaluation

  def evaluate(self, step: int) -> None:
    started = time.perf_counter()
    self.evaluation = self.evaluated(step)
    self.evaluation_s += time.perf_counter() - started
    self.evaluations += 1
    self.writer.write(step, {**self.evaluation, "sim_time": self.progress.clock.time})
    # the task's target metric, turned so that higher is better (a loss negated)
    metric = self.task_target
    score = metric.oriented(self.evaluation[f"{self.evaluator.name}_{metric.name}"])
    target = self.cfg.target_accuracy
    if (self.progress.reached_target is None and target
        and score >= metric.oriented(target)):
      self.progress.reached_target = (step, self.progress.clock.time)
    best = self.progress.best_score
    self.progress.best_score = score if best is None else max(best, score)
    self.progress.next_evaluation = next_evaluation(  # saved: a resumed run goes on alike
        step, self.cfg.num_steps, self.cfg.eval_every, self.cfg.eval_growth, score,
        self.progress.best_score, tuple(metric.oriented(t) for t in self.cfg.eval_targets),
        self.cfg.eval_near)
    for hook in self.hooks:
      hook.after_eval(step, self.evaluation)

  def save(self, step: int) -> None:
    self.activity.now(f"saving the checkpoint of step {step}")
    for hook in self.hooks:
      hook.before_save(step)
    self.checkpoints.save(step, self.state, self.progress.state_dict(self.identity))

  def run(self) -> dict[str, Any]:
    """The session: train to the end, save the model, return the summary.

    Raises:
      parallel.PeerLostError: a collective between the processes failed (another
        process has probably died); the checkpoints being written are not waited for.
    """
    try:
      with parallel.across_processes(self.activity):
        for hook in self.hooks:
          hook.on_start(self.x, self.state)
        started = time.perf_counter()
        self.log.start(self.start_step)
        self.loop()
        self.loop_s = time.perf_counter() - started  # the training loop, evaluations included
        if self.evaluation is None:  # resumed a finished run: report it again
          self.evaluation = self.evaluated(self.cfg.num_steps)
        self.activity.now("saving the model")
        save_model(self.workdir / "model", model_variables(self.state, self.x.strategy.definition))
        self.activity.now("writing the last checkpoint")
        self.checkpoints.close()
    except parallel.PeerLostError:
      self.checkpoints.abandon()  # finishing its saves needs the dead process: it would hang
      raise
    finally:
      self.close()
    return run_summary(self.x, int(self.state.step), self.evaluation, self.progress,
                       self.start_step >= self.cfg.num_steps, self.loop_s, self.input_s,
                       self.evaluation_s, self.evaluations)

  def close(self) -> None:
    """Closes what the session opened; after an error, the last save is kept intact."""
    self.preemption.close()
    for closable in (self.bar, self.writer, self.checkpoints):
      if closable is not None:
        closable.close()


def _warn_if_not_deterministic(config: ml_collections.ConfigDict) -> None:
  """A GPU run that asks for deterministic ops in a process whose XLA started without
  them (a notebook, a script of one's own): XLA reads its flags only when JAX starts."""
  if (config.train.deterministic and jax.default_backend() == "gpu"
      and not xla_flags.deterministic_ops()):
    logging.warning(
        "train.deterministic=True, but JAX started without deterministic GPU ops: a resumed "
        "run may differ from an uninterrupted one in the last bits. Set XLA_FLAGS=%s before "
        "JAX starts (python -m experiments.train does), or train.deterministic=False",
        xla_flags.DETERMINISTIC_GPU_FLAGS[0])


def train_and_evaluate(config: ml_collections.ConfigDict, workdir: str, *,
                       batches: BatchSource | None = None, hooks: Sequence[Hook] = (),
                       activity: parallel.Activity | None = None) -> dict[str, Any]:
  """Trains `config`'s model with its strategy, evaluating and checkpointing.

  A workdir that already holds a checkpoint resumes from its latest step and
  ends exactly where an uninterrupted run would. On SIGTERM the run saves a
  checkpoint of the step it is at and raises `Preempted`. Under jax.distributed
  every process calls this; each feeds only its own workers, process 0 writes.

  Args:
    config: experiment config (see configs/default.py); checked before any work.
    workdir: where checkpoints/, model/ (the evaluated model's variables),
      metrics.jsonl, tensorboard/, config.json, summary.json and clock.json (what the
      simulated clock charged each tick, for `retime`) go.
    batches: where the tick's batches come from instead of the config's data
      pipeline (e.g. one batch kept on the devices, to time the loop without input).
    hooks: `Hook`s called around every step and evaluation.
    activity: where the loop notes what it is doing (a step, an evaluation, a save), which
      a lost peer's message names; a `parallel.PeerWatch` of the run reads the same one.

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
  activity = activity or parallel.Activity()
  # the data set's barrier: process 0 prepares it while the others wait
  activity.now("building the experiment (process 0 prepares the data set first)")
  with parallel.across_processes(activity):  # the data set's barrier
    experiment = build_experiment(config)
    path = prepare_workdir(workdir)
  _warn_if_not_deterministic(config)
  lock = WorkdirLock(path)  # before anything in the workdir is read or written
  try:
    with parallel.across_processes(activity):  # opening the checkpoints
      run = _Run(experiment, path, batches, hooks, activity)
    summary = run.run()
    if jax.process_index() == 0:
      write_json_atomically(path / CLOCK_FILE, run.progress.clock.record())
      write_json_atomically(path / "summary.json", summary)
  except OSError as error:  # metrics, events, the model: the file system refused
    raise storage_error(error) from error
  finally:
    lock.release()
  return summary
