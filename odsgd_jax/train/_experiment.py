"""An experiment: what a config builds before the first step (mesh, data, model,
strategy, compiled steps), in one object the loop, the drivers and the benchmark share."""

import dataclasses
import functools
import json
import math
from typing import Any

import jax
import ml_collections
from jax.experimental import multihost_utils
from jax.sharding import NamedSharding
from jax.sharding import PartitionSpec as P

from odsgd_jax import parallel
from odsgd_jax.data import (DATASETS, DatasetSpec, Splits, TrainBatches, open_splits,
                            resolve_data_dir)
from odsgd_jax.models import make_model
from odsgd_jax.strategies import StrategySpec
from odsgd_jax.tasks import TASKS, Task
from odsgd_jax.train._evaluate import Evaluator
from odsgd_jax.train._optimizer import make_inner_optimizer, make_lr_schedule
from odsgd_jax.train._programs import TrainStep, make_train_step
from odsgd_jax.train._step import TrainState, make_eval_step
from odsgd_jax.train._validate import ConfigError, validate_config


@dataclasses.dataclass(frozen=True)
class Experiment:
  """A config, built: everything a run needs besides its state and progress."""

  config: ml_collections.ConfigDict
  worker_mesh: parallel.WorkerMesh
  spec: DatasetSpec
  splits: Splits
  strategy: StrategySpec  # the config's strategy and options, resolved once
  task: Task  # what the model learns: the data set's
  steps_per_epoch: int
  train_step: TrainStep  # (state, batch, schedule, tick, norms) -> (state, packed metrics)
  eval_step: Any  # jitted (state, batch) -> {metric: sum, "count": examples or tokens}

  @property
  def num_workers(self) -> int:
    return self.worker_mesh.num_workers

  @property
  def batch_per_worker(self) -> int:
    return self.config.data.batch_size // self.num_workers

  def init_state(self) -> TrainState:
    return self.train_step.init_state(self.spec.input_shape, self.config.train.seed)

  def train_batches(self) -> TrainBatches:
    """This process's workers' batches, from the start of the data order."""
    return TrainBatches(
        self.splits.train, self.spec, workers=parallel.local_workers(self.worker_mesh),
        num_workers=self.num_workers, batch_size=self.batch_per_worker,
        seed=self.config.train.seed, num_threads=self.config.data.num_threads,
        prefetch=self.config.data.prefetch)

  def evaluator(self, name: str = "test") -> Evaluator:
    """Evaluates the split `name` ("test" or "validation")."""
    devices = self.worker_mesh.num_devices
    batch_size = math.ceil(self.config.data.eval_batch_size / devices) * devices
    sharding = NamedSharding(self.worker_mesh.mesh, P((parallel.WORKERS, parallel.INTRA)))
    return Evaluator(self.eval_step, getattr(self.splits, name), self.spec, batch_size, sharding,
                     name)

  def evaluators(self) -> tuple[Evaluator, Evaluator | None]:
    """(what a run evaluates every `train.eval_every` steps, what it evaluates at the end
    besides): the validation split where the data set has one (targets are timed and
    choices made on it) and the test split at the end (the run's final accuracy), else
    the test split alone."""
    if self.splits.validation is None:
      return self.evaluator("test"), None
    return self.evaluator("validation"), self.evaluator("test")

  def identity(self) -> dict[str, Any]:
    """What a checkpoint must share with the config that resumes it: everything that
    decides the trajectory, so that a resumed run ends where an uninterrupted one would.
    The data order is decided by the seed, the data set, the batch and the workers; the
    schedule of who steps when by the cluster. Left out: train.num_steps (a finished run
    may be extended; its learning-rate schedule then changes from the resumed step on,
    as the user asked), intervals of evaluation, logging and checkpoints, and where and
    how the data is read and the devices laid out."""
    config = self.config
    # "compression" and "num_workers" repeat fields of strategy_options and cluster: they
    # are the keys checkpoints of earlier versions hold, compared when only they are there.
    identity = {"dataset": config.data.name, "batch_size": config.data.batch_size,
                "model": config.model.to_dict(), "strategy": self.strategy.name,
                "strategy_options": dict(self.strategy.options),
                "compression": self.strategy.options.get("compression") or "none",
                "num_workers": config.cluster.num_workers, "seed": config.train.seed,
                "task": self.task.name,
                "optimizer": config.optimizer.to_dict(), "cluster": config.cluster.to_dict()}
    return json.loads(json.dumps(identity, default=str))  # as it reads from the checkpoint


@functools.lru_cache(maxsize=4)
def _open_splits_once(name: str, data_dir: str) -> Splits:
  """The splits, read and decoded once per process: a study trains many runs of the
  same data set in one process, and the splits are never written to."""
  return open_splits(name, data_dir)


def _open_splits_in_turn(name: str, data_dir: str | None) -> Splits:
  """`open_splits`, with process 0 first: an offline data set is prepared by one
  process while the others wait, not by all of them at once into the same folder."""
  if jax.process_count() == 1:
    return _open_splits_once(name, resolve_data_dir(data_dir))
  if jax.process_index() == 0:
    splits = open_splits(name, data_dir)
  multihost_utils.sync_global_devices("odsgd_jax: data set prepared")
  if jax.process_index() != 0:
    splits = open_splits(name, data_dir)
  return splits


def _model_options(section: ml_collections.ConfigDict) -> dict[str, Any]:
  return {k: v for k, v in section.to_dict().items() if k != "name"}


def _check_model_fits(model: Any, config: ml_collections.ConfigDict,
                      input_shape: tuple[int, ...], task: Task) -> None:
  """The model takes the data set's inputs: traced on shapes alone, nothing compiled."""
  try:
    jax.eval_shape(lambda x: model.init(jax.random.key(0), x, train=False),
                   jax.ShapeDtypeStruct((1, *input_shape), task.input_dtype))
  except Exception as error:  # noqa: BLE001 -- any failure to trace means it does not fit
    text = str(error).strip()
    reason = text.splitlines()[0][:200] if text else type(error).__name__
    raise ConfigError(
        f"model.name={config.model.name!r} does not take data.name={config.data.name!r}'s inputs "
        f"of shape {tuple(input_shape)} ({reason}); choose a model for this data set "
        f"(see configs/)") from error


def build_experiment(config: ml_collections.ConfigDict) -> Experiment:
  """Checks `config`, then builds its mesh, data, model, strategy and steps.

  Raises:
    ConfigError: invalid config (before anything is read or compiled).
    DataError: the data set is missing or unreadable.
  """
  strategy = validate_config(config, jax.device_count())  # the strategy, resolved once
  worker_mesh = parallel.make_worker_mesh(
      config.cluster.num_workers, config.parallel.num_devices, config.parallel.devices_per_worker)
  spec = DATASETS[config.data.name]
  splits = _open_splits_in_turn(config.data.name, config.data.data_dir)
  batch_per_worker = config.data.batch_size // worker_mesh.num_workers
  steps_per_epoch = max(1, (len(splits.train) // worker_mesh.num_workers) // batch_per_worker)
  model = make_model(config.model.name, spec.num_classes, **_model_options(config.model))
  task = TASKS[config.data.task or spec.task]
  _check_model_fits(model, config, spec.input_shape, task)
  lr_schedule = make_lr_schedule(config.optimizer, config.train.num_steps, steps_per_epoch)
  # The schedule is written in ticks; a strategy may step its inner optimizer
  # several times per tick (asgd: once per arriving gradient).
  updates_per_tick = strategy.definition.inner_updates_per_tick(worker_mesh.num_workers)
  inner_schedule = (lr_schedule if updates_per_tick == 1
                    else lambda count: lr_schedule(count // updates_per_tick))
  tx = strategy.make(make_inner_optimizer(config.optimizer, inner_schedule),
                     parallel.WORKER_AXES)
  train_step = make_train_step(model, tx, worker_mesh, strategy.definition, lr_schedule, task)
  return Experiment(
      config=config, worker_mesh=worker_mesh, spec=spec, splits=splits, strategy=strategy,
      task=task, steps_per_epoch=steps_per_epoch, train_step=train_step,
      eval_step=make_eval_step(model, strategy.definition, task))
