"""The run's simulated clock: the cluster timeline, its totals, and step-time calibration;
and the same run timed again with the clock's constants changed (`retime`)."""

import json
import math
import os
import time
from typing import Any, Callable, Mapping

import jax
import jax.numpy as jnp
import ml_collections
import numpy as np

from odsgd_jax import cluster, models, parallel
from odsgd_jax.cluster import Schedule, Timeline, synchronous_schedule
from odsgd_jax.strategies import StrategySpec
from odsgd_jax.train._optimizer import strategy_spec


def message_bytes(worker_params: Any) -> float:
  """Bytes one worker sends per synchronization: a float copy of its parameters
  (gradients, or model deltas for local SGD)."""
  leaves = jax.tree.leaves(worker_params)
  return float(sum(math.prod(x.shape[1:]) * x.dtype.itemsize for x in leaves))


def calibrate_step_time(train_step: Callable, state: Any, batch: Any, schedule: Schedule,
                        workers_per_device: int, repeats: int = 10) -> float:
  """Median seconds of the compiled step on this host, per worker.

  Runs on a copy of `state` (the step donates its input). A device runs its
  `workers_per_device` workers one after another, so one worker's step is the
  median divided by that.
  """
  state = jax.tree.map(jnp.copy, state)
  times = []
  for i in range(repeats + 2):
    started = time.perf_counter()
    state, metrics = train_step(state, batch, schedule)
    jax.block_until_ready((state, metrics))
    if i >= 2:  # the first calls compile and warm up
      times.append(time.perf_counter() - started)
  return float(np.median(times)) / workers_per_device


def run_clock(experiment: Any, saved: dict[str, Any], state: Any) -> "SimulatedClock":
  """The clock of a run of `experiment` (an `Experiment`) from `state`, where a checkpoint
  left it (`saved`: its `state_dict`, empty for a fresh run). Its step time: the config's,
  the resumed run's own measurement, or this host's compiled step measured once."""
  config = experiment.config
  step_time = saved.get("step_time") or config.cluster.step_time
  if not step_time:
    probe = parallel.put_batch(experiment.worker_mesh, experiment.train_batches().take())
    step_time = config.cluster.compute_scale * calibrate_step_time(
        experiment.train_step, state, probe, synchronous_schedule(0, experiment.num_workers),
        experiment.worker_mesh.workers_per_device)
  clock = simulated_clock(config, experiment.strategy, step_time, message_bytes(state.params),
                          experiment.batch_per_worker, experiment.spec.input_shape,
                          experiment.spec.num_classes)
  if saved:
    clock.load_state_dict(saved)
  return clock


def simulated_clock(config: ml_collections.ConfigDict, strategy: StrategySpec,
                    step_time: float, model_bytes: float, samples_per_step: int,
                    input_shape: tuple[int, ...], num_classes: int,
                    shares: Mapping[str, float] | None = None) -> "SimulatedClock":
  """The clock of a config's `cluster` section, with `strategy`'s timeline; the one place
  a run turns its cluster section into cluster objects (`cluster.from_config`), once
  `step_time` is known. `model_bytes`: the trained model's float bytes; a worker's step
  takes `samples_per_step` samples of `input_shape`; `shares`: transports' achieved
  shares other than the fitted ones."""
  cluster_config = config.cluster
  spec = cluster.from_config(cluster_config, step_time, samples_per_step,
                             gradient_order(config, input_shape, num_classes, model_bytes),
                             shares)
  num_bytes = spec.message_bytes or model_bytes
  timeline = strategy.make_timeline(spec.workers, spec.network, num_bytes, spec.overlap)
  return SimulatedClock(timeline, spec.workers.step_time, model_bytes, num_bytes,
                        inputs={"step_time": step_time, "model_bytes": model_bytes,
                                "samples_per_step": samples_per_step,
                                "input_shape": list(input_shape), "num_classes": num_classes})


CLOCK_FILE = "clock.json"  # in a finished run's workdir: what `retime` replays

# The clock's fitted constants (odsgd_jax/cluster/_calibration.py FITTED) as the config
# fields that carry them; the transports' shares are not fields (`cluster.from_config`).
CONSTANT_FIELDS = {"noise": "jitter", "interference": "interference",
                   "node_contention": "node_contention"}


def retime(workdir: str, constants: Mapping[str, float]) -> np.ndarray:
  """`retime_record` of the finished run in `workdir` (its config.json and CLOCK_FILE)."""
  with open(os.path.join(workdir, "config.json"), encoding="utf-8") as f:
    config = json.load(f)
  with open(os.path.join(workdir, CLOCK_FILE), encoding="utf-8") as f:
    record = json.load(f)
  return retime_record(config, record, constants, workdir)


def retime_record(config_dict: Mapping[str, Any], record: Mapping[str, Any],
                  constants: Mapping[str, float], source: str = "the run") -> np.ndarray:
  """The simulated time after each tick of a finished run (its config as a dict, and what
  its clock recorded, `SimulatedClock.record`), its clock rebuilt with the fitted
  `constants` ({name: value}, e.g. noise or tcp) changed and charged the same messages tick
  by tick as the run's was. For a strategy whose schedule follows the clock (asgd, ssp,
  oscars), the schedule is the new clock's while the training that the times are read
  against ran on the old one's: an approximation. `source` names the run in errors."""
  config = ml_collections.ConfigDict(json.loads(json.dumps(config_dict)))
  for name, field in CONSTANT_FIELDS.items():
    if name in constants:
      config.cluster[field] = constants[name]
  shares = {name: value for name, value in constants.items() if name not in CONSTANT_FIELDS}
  inputs = record["inputs"]
  clock = simulated_clock(config, strategy_spec(config), inputs["step_time"],
                          inputs["model_bytes"], inputs["samples_per_step"],
                          tuple(inputs["input_shape"]), inputs["num_classes"], shares)
  ticks = sum(run[0] for run in record["charges"])
  if ticks != config.train.num_steps:
    raise ValueError(f"{source}: its clock records {ticks} ticks of a run of "
                     f"{config.train.num_steps}: it was not written by a finished run of this "
                     f"version; run it again to retime it")
  times = []
  for count, sends, sent_bytes, gathers in record["charges"]:
    for _ in range(count):
      tick = len(times)
      clock.schedule(tick)
      times.append(clock.charge(tick, bool(sends), sent_bytes or None, bool(gathers)))
  return np.asarray(times)


def gradient_order(config: ml_collections.ConfigDict, input_shape: tuple[int, ...],
                   num_classes: int, model_bytes: float) -> tuple[tuple[float, float], ...]:
  """The timed model's gradients in backward order, for the overlap's buckets: the
  workload's model when one is named, else the trained model's. Empty (an even rate,
  which is the same thing) when the message fits in one bucket or nothing overlaps."""
  cluster_config = config.cluster
  if cluster_config.overlap == "none":
    return ()
  if cluster_config.get("workload"):
    load = cluster.WORKLOADS[cluster_config.workload]
    name, shape = load.model
    return models.gradient_profile(name, shape, load.num_classes, **dict(load.model_options))
  if model_bytes <= cluster_config.bucket_bytes:
    return ()
  options = {k: tuple(v) if isinstance(v, list) else v
             for k, v in config.model.to_dict().items() if k != "name"}
  return models.gradient_profile(config.model.name, tuple(input_shape), num_classes,
                                 **options)


class SimulatedClock:
  """Simulated time of a run on the configured cluster.

  `schedule(t)` before tick t gives the strategy its schedule; `advance(t, metrics)`
  after the tick's metrics are known adds its duration and how every worker spent
  it (computing, communicating, idle).
  """

  def __init__(self, timeline: Timeline, step_time: float, model_bytes: float,
               message_bytes: float, inputs: dict[str, Any] | None = None):
    """`model_bytes`: the trained model's float bytes; `message_bytes`: what a message is
    timed as (larger, when the clock times a larger model than the one trained);
    `inputs`: what rebuilds it from the run's config (`simulated_clock`'s arguments)."""
    self.timeline, self.step_time = timeline, step_time
    self.model_bytes, self.message_bytes = model_bytes, message_bytes
    self.inputs = inputs or {}
    n = timeline.workers.num_workers
    self.time = 0.0
    self.totals = {"compute": np.zeros(n), "communication": np.zeros(n), "idle": np.zeros(n)}
    self.bits_sent = 0.0  # bits one worker sent over the run
    # What each tick was charged, run-length encoded: [[ticks, sends, bytes (0: the
    # dense message), gathers], ...]; `retime` charges the same under other constants.
    self.charges: list[list] = []

  def schedule(self, tick: int) -> Schedule:
    return self.timeline.schedule(tick)

  def advance(self, tick: int, metrics: dict[str, float]) -> float:
    """Charges tick `tick` from its metrics (`train.clock_record`): the strategy sent its
    message on it unless `round_end` (a strategy that does not send on every tick) says it
    did not. Returns the simulated time after it."""
    # A compressed tick is charged what was really sent (as a share of the model,
    # when the clock times a larger one), in the way it travels; a dense one
    # (warm-ups, no compression) as a plain all-reduce of the message, a dense float32
    # message whenever the strategy sends.
    sends = metrics.get("round_end", 1.0) > 0.5
    self.bits_sent += metrics.get("bits_sent", 8 * self.model_bytes if sends else 0.0)
    sent = metrics.get("bits_sent", 0.0) / 8 * self.message_bytes / self.model_bytes
    compressed = 0 < sent < self.message_bytes
    return self.charge(tick, sends, sent if compressed else None,
                       compressed and metrics.get("gathered", 0.0) > 0.5)

  def charge(self, tick: int, sends: bool, sent_bytes: float | None, gathers: bool) -> float:
    """Adds tick `tick`'s duration: a message sent (`sends`) as the dense message
    (`sent_bytes` None) or as `sent_bytes` compressed, gathered or reduced. Returns the
    simulated time after it."""
    cost = self.timeline.cost(tick, round_end=sends, message_bytes=sent_bytes,
                              gathers=gathers)
    self.time += cost.duration
    for name in self.totals:
      self.totals[name] = self.totals[name] + getattr(cost, name)
    charged = [int(sends), float(sent_bytes or 0.0), int(gathers)]
    if self.charges and self.charges[-1][1:] == charged:
      self.charges[-1][0] += 1
    else:
      self.charges.append([1, *charged])
    return self.time

  def record(self) -> dict[str, Any]:
    """What `retime` needs to charge the run again (the run writes it as CLOCK_FILE)."""
    return {"inputs": self.inputs, "charges": self.charges}

  def fractions(self) -> dict[str, list[float]]:
    """Per worker: share of the simulated time spent computing, communicating, idle."""
    total = max(self.time, 1e-12)
    return {name: (values / total).round(4).tolist() for name, values in self.totals.items()}

  def state_dict(self) -> dict[str, Any]:
    return {"time": self.time, "timeline": self.timeline.state_dict(), "step_time": self.step_time,
            "totals": {k: v.tolist() for k, v in self.totals.items()},
            # a copy: the checkpoint may be written after the next ticks add to the record
            "bits_sent": self.bits_sent, "charges": [list(run) for run in self.charges]}

  def load_state_dict(self, state: dict[str, Any]) -> None:
    self.time = float(state["time"])
    self.timeline.load_state_dict(state["timeline"])
    self.totals = {k: np.asarray(v, np.float64) for k, v in state["totals"].items()}
    self.bits_sent = float(state.get("bits_sent", 0.0))
    self.charges = [list(run) for run in state.get("charges", [])]
