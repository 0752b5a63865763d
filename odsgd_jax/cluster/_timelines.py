"""One timeline rule per strategy: the schedule it consumes and the time each tick takes.

The same object drives the math and the clock: `schedule(t)` is handed to the
strategy before tick t, `cost(t, round_end)` charges the tick afterwards, so the
staleness a strategy sees is the staleness its timeline implies. Both must be
called once per tick, in order; `state_dict()` holds what a checkpoint needs.
"""

import dataclasses
from typing import Any

import numpy as np

from odsgd_jax.cluster._hardware import Network, Workers
from odsgd_jax.cluster._schedule import Schedule, synchronous_schedule

_EPS = 1e-12


@dataclasses.dataclass
class TickCost:
  """Simulated seconds of one tick, and how each worker spent them (each (N,))."""

  duration: float
  compute: np.ndarray
  communication: np.ndarray
  idle: np.ndarray


class Timeline:
  """Base: every worker active on every tick; subclasses say what a tick costs."""

  def __init__(self, workers: Workers, network: Network, message_bytes: float):
    self.workers, self.network, self.message_bytes = workers, network, float(message_bytes)
    self.num_workers = workers.num_workers
    self.gathers = False  # compressed messages that are all-gathered, not all-reduced

  def schedule(self, tick: int) -> Schedule:
    return synchronous_schedule(tick, self.num_workers)

  def cost(self, tick: int, round_end: bool = False) -> TickCost:
    raise NotImplementedError

  def allreduce_time(self) -> float:
    """The synchronization of one message per worker (`message_bytes` each)."""
    if self.gathers:
      return self.network.allgather_time(self.num_workers, self.message_bytes)
    return self.network.allreduce_time(self.num_workers, self.message_bytes)

  def state_dict(self) -> dict[str, Any]:
    return {}

  def load_state_dict(self, state: dict[str, Any]) -> None:
    del state


class SynchronousTimeline(Timeline):
  """ssgd: compute, then all-reduce; everyone waits for the slowest.

  duration = max_i c_i + allreduce(S)
  """

  def cost(self, tick, round_end=False):
    del round_end
    compute = self.workers.compute_times(tick)
    slowest, comm = compute.max(), self.allreduce_time()
    return TickCost(slowest + comm, compute, np.full(self.num_workers, comm), slowest - compute)


class PipelinedTimeline(Timeline):
  """odsgd, pseudo_sync: step t's all-reduce overlaps step t+1's compute.

  duration = max(max_i c_i, allreduce(S)) (synchronous during `warmup_steps`);
  only communication that outlasts the compute is exposed.
  """

  def __init__(self, workers, network, message_bytes, warmup_steps: int = 0):
    super().__init__(workers, network, message_bytes)
    self.warmup_steps = warmup_steps

  def cost(self, tick, round_end=False):
    del round_end
    compute = self.workers.compute_times(tick)
    slowest, comm = compute.max(), self.allreduce_time()
    duration = slowest + comm if tick < self.warmup_steps else max(slowest, comm)
    exposed = duration - slowest
    return TickCost(duration, compute, np.full(self.num_workers, exposed), slowest - compute)


class LocalSgdTimeline(Timeline):
  """local_sgd: every worker does each local step; a round ends when the slowest
  has done all of its steps, then the average is all-reduced.

  round duration = max_i sum_t c_i(t) + allreduce(S); a tick advances the clock
  by how much the slowest worker's running total grew.
  """

  def __init__(self, workers, network, message_bytes):
    super().__init__(workers, network, message_bytes)
    self.busy = np.zeros(self.num_workers)  # compute seconds since the round started

  def cost(self, tick, round_end=False):
    compute = self.workers.compute_times(tick)
    before = self.busy.max()
    self.busy = self.busy + compute
    duration = self.busy.max() - before
    comm, idle = np.zeros(self.num_workers), np.zeros(self.num_workers)
    if round_end:
      idle = self.busy.max() - self.busy
      comm[:] = self.allreduce_time()
      duration += comm[0]
      self.busy = np.zeros(self.num_workers)
    return TickCost(duration, compute, comm, idle)

  def state_dict(self):
    return {"busy": self.busy.tolist()}

  def load_state_dict(self, state):
    self.busy = np.asarray(state["busy"], np.float64)


class OscarsTimeline(Timeline):
  """oscars: ticks of fixed length tau (a nominal step); worker i is active on a
  tick when its accumulated time covers its next step, so a worker at speed s
  does s steps per tick on average. Nobody waits; a round end adds the all-reduce.
  """

  def __init__(self, workers, network, message_bytes):
    super().__init__(workers, network, message_bytes)
    self.tick_length = workers.step_time
    self.progress = np.zeros(self.num_workers)  # time banked towards the next step

  def schedule(self, tick):
    compute = self.workers.compute_times(tick)
    self.progress = self.progress + self.tick_length
    active = self.progress >= compute - _EPS
    self.progress = np.where(active, self.progress - compute, self.progress)
    return Schedule(active=active, arrival_order=np.arange(self.num_workers, dtype=np.int32))

  def cost(self, tick, round_end=False):
    del tick
    comm = np.full(self.num_workers, self.allreduce_time() if round_end else 0.0)
    compute = np.full(self.num_workers, self.tick_length)
    return TickCost(self.tick_length + comm[0], compute, comm, np.zeros(self.num_workers))

  def state_dict(self):
    return {"progress": self.progress.tolist()}

  def load_state_dict(self, state):
    self.progress = np.asarray(state["progress"], np.float64)


class AsynchronousTimeline(Timeline):
  """asgd, ssp: each worker computes, pushes its gradient, pulls the weights, repeats.

  A tick is a window of one cycle of the fastest worker (compute + push + pull);
  the workers whose push lands inside it arrive, in the order they land (ties
  rotate). A slow worker arrives on fewer ticks, so the server moves on between
  its pull and its push: its staleness follows from the speeds.
  """

  def __init__(self, workers, network, message_bytes):
    super().__init__(workers, network, message_bytes)
    message = network.message_time(self.message_bytes)
    self.message = message
    self.tick_length = workers.step_time / max(workers.speeds) + 2 * message
    self.lands = workers.compute_times(0) + message  # when each worker's push lands

  def schedule(self, tick):
    window_end = (tick + 1) * self.tick_length
    active = self.lands <= window_end + _EPS
    rotation = (np.arange(self.num_workers) - tick) % self.num_workers
    order = np.lexsort((rotation, self.lands, ~active))  # arrived first, by landing time
    restart = self.lands + self.message  # after pulling the new weights
    next_compute = self.workers.compute_times(tick + 1)
    self.lands = np.where(active, restart + next_compute + self.message, self.lands)
    return Schedule(active=active, arrival_order=order.astype(np.int32))

  def cost(self, tick, round_end=False):
    del round_end
    compute = self.workers.compute_times(tick)
    cycle = compute + 2 * self.message
    busy = self.tick_length * compute / cycle
    return TickCost(self.tick_length, busy, self.tick_length - busy, np.zeros(self.num_workers))

  def state_dict(self):
    return {"lands": self.lands.tolist()}

  def load_state_dict(self, state):
    self.lands = np.asarray(state["lands"], np.float64)


def make_timeline(strategy: str, options: dict[str, Any], workers: Workers, network: Network,
                  message_bytes: float) -> Timeline:
  """The timeline rule of strategy `strategy` (a name from the strategy registry)."""
  if strategy == "ssgd":
    return SynchronousTimeline(workers, network, message_bytes)
  if strategy in ("odsgd", "pseudo_sync"):
    warmup = options.get("warmup_steps", 200 if strategy == "odsgd" else 0)
    return PipelinedTimeline(workers, network, message_bytes, warmup_steps=warmup)
  if strategy == "local_sgd":
    return LocalSgdTimeline(workers, network, message_bytes)
  if strategy == "oscars":
    return OscarsTimeline(workers, network, message_bytes)
  if strategy in ("asgd", "ssp"):
    return AsynchronousTimeline(workers, network, message_bytes)
  raise KeyError(f"no timeline rule for strategy {strategy!r}")
