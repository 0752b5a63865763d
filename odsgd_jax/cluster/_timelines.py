"""Timeline rules: the schedule a strategy consumes and the time each tick takes.

Each strategy names its rule (`StrategyDef.timeline`, one of the classes here). The
same object drives the math and the clock: `schedule(t)` is handed to the strategy
before tick t, `cost(t, round_end, message_bytes, gathers)` charges the tick afterwards,
so the staleness a strategy sees is the staleness its timeline implies. Both must be
called once per tick, in order; `state_dict()` holds what a checkpoint needs. A rule is
built as `Rule(workers, network, message_bytes, overlap, *, <options>)`: the options it
reads are keyword parameters, each an option of the strategy's factory of the same name
(its registration refuses a rule that reads one the factory does not have).
`overlaps_compute(<options>)` says whether a tick's exchange runs beside that tick's
compute: then it must not wait for that tick's gradient, which a strategy's registration
checks on its traced update (odsgd_jax/strategies/_overlap.py).
"""

import dataclasses
import math
from typing import Any

import numpy as np

from odsgd_jax.cluster._hardware import Network, Workers
from odsgd_jax.cluster._schedule import Schedule, synchronous_schedule

# What `odsgd_jax.cluster` exports from here: a new rule listed here is `cluster.<Rule>`
# with no other edit.
__all__ = ["Overlap", "TickCost", "Timeline", "SynchronousTimeline", "PipelinedTimeline",
           "WarmupPipelinedTimeline", "LocalSgdTimeline", "OscarsTimeline",
           "AsynchronousTimeline", "GOSSIP_GRAPHS", "gossip_offsets", "GossipTimeline"]

_EPS = 1e-12


@dataclasses.dataclass(frozen=True)
class Overlap:
  """How a synchronous step's all-reduce overlaps its own backward pass, as PyTorch
  DDP and Horovod do with gradient buckets (and XLA with asynchronous collectives).

  A step is a forward pass, (1 - backward_share) of its compute, then a backward
  pass that produces the gradients last layers first. With `gradients` (a model's
  ((bytes, ready), ...) in backward order, `odsgd_jax.models.gradient_profile`) they
  are packed in that order into buckets of up to `bucket_bytes` (a larger gradient
  is a bucket of its own), a bucket ready once the backward pass has done `ready` of
  its work for its last gradient; without, the gradients appear at an even rate and
  are cut into equal buckets. A bucket's all-reduce starts once every worker has
  produced it and the previous bucket's all-reduce is done. Only what is left after
  the slowest backward pass adds to the tick, and communication that runs beside the
  compute delays it (`Workers.interference`).

  Defaults: DDP's `bucket_cap_mb=25` (25 MiB) and forward:backward = 1:2 (a
  backward pass costs about twice the forward one: two matrix products per layer
  instead of one). A model smaller than one bucket gets no overlap, as in DDP.
  """

  backward_share: float = 2 / 3
  bucket_bytes: float = 25 * 2**20
  gradients: tuple[tuple[float, float], ...] = ()

  def __post_init__(self):
    if not 0 <= self.backward_share <= 1 or self.bucket_bytes <= 0:
      raise ValueError(f"backward_share must be in [0, 1] and bucket_bytes positive, got "
                       f"{self.backward_share}, {self.bucket_bytes}")
    if any(size < 0 or not 0 <= ready <= 1 for size, ready in self.gradients):
      raise ValueError("gradients must be (bytes >= 0, ready in [0, 1]) pairs")

  def buckets(self, message_bytes: float) -> list[tuple[float, float]]:
    """(bytes, ready) of each bucket in the order they are all-reduced; `ready` is the
    fraction of the backward pass done when the bucket is complete. A message of another
    size than the profile's (a compressed one) scales every gradient alike."""
    if not self.gradients:
      count = max(1, math.ceil(message_bytes / self.bucket_bytes))
      sizes = [min(self.bucket_bytes, message_bytes - i * self.bucket_bytes)
               for i in range(count)]
      done = np.cumsum(sizes)
      return [(size, float(d / message_bytes)) for size, d in zip(sizes, done, strict=True)]
    scale = message_bytes / sum(size for size, _ in self.gradients)
    buckets, size, ready = [], 0.0, 0.0
    for grad_bytes, grad_ready in self.gradients:
      if size and size + grad_bytes * scale > self.bucket_bytes:
        buckets.append((size, ready))
        size = 0.0
      size, ready = size + grad_bytes * scale, grad_ready
    buckets.append((size, ready))
    return buckets


@dataclasses.dataclass
class TickCost:
  """Simulated seconds of one tick, and how each worker spent them (each (N,))."""

  duration: float
  compute: np.ndarray
  communication: np.ndarray
  idle: np.ndarray


class Timeline:
  """Base: every worker active on every tick; subclasses say what a tick costs.

  `honours_round_ends`: whether `cost` charges a message only on the ticks that end a round
  (`round_end`); a rule that charges every tick as if it sent (False) cannot time a
  strategy that sends on some ticks only, and registration refuses that pairing.
  """

  honours_round_ends = False

  def __init__(self, workers: Workers, network: Network, message_bytes: float,
               overlap: Overlap | None = None):
    self.workers, self.network, self.message_bytes = workers, network, float(message_bytes)
    self.overlap = overlap
    self.num_workers = workers.num_workers

  @classmethod
  def overlaps_compute(cls) -> bool:
    """Whether a tick's exchange runs beside that tick's compute, as this rule times it
    (after a warm-up, if it has one). A rule that reads options takes the same keywords
    here as when it is built."""
    return False

  @classmethod
  def exposed_after(cls, **options: Any) -> int:
    """How many ticks after the tick that sends a message its exchange can first hold the
    workers up (0: on that tick; streaming DiLoCo's: `delay` ticks later, its exchange
    running beside the ticks between). Takes the rule's keywords, as it is built."""
    del options
    return 0

  def schedule(self, tick: int) -> Schedule:
    return synchronous_schedule(tick, self.num_workers)

  def cost(self, tick: int, round_end: bool = False, message_bytes: float | None = None,
           gathers: bool = False) -> TickCost:
    """Tick `tick`'s duration and how each worker spent it.

    Args:
      tick: the tick (0-based), after `schedule(tick)`.
      round_end: the tick ended a synchronization round (local SGD's).
      message_bytes: what a worker sent on this tick, if not a whole message (a
        compressed one); None: `self.message_bytes`.
      gathers: the (compressed) messages travelled as an all-gather, not an all-reduce.
    """
    raise NotImplementedError

  def allreduce_time(self, num_bytes: float, gathers: bool = False) -> float:
    """The synchronization of one message of `num_bytes` per worker."""
    if gathers:
      return self.network.allgather_time(self.num_workers, num_bytes)
    return self.network.allreduce_time(self.num_workers, num_bytes)

  def synchronous_duration(self, compute: np.ndarray, message_bytes: float,
                           gathers: bool = False) -> float:
    """Compute, then the all-reduce of the gradients: overlapped with the backward
    pass bucket by bucket (`overlap`), or after it (`overlap=None`). Communication
    that runs before the slowest worker's compute ends delays that end by
    `interference` times its length."""
    slowest = float(compute.max())
    if self.overlap is None or message_bytes <= 0:
      return slowest + self.allreduce_time(message_bytes, gathers)
    beta = self.overlap.backward_share
    end, overlapped = 0.0, 0.0
    for size, ready_share in self.overlap.buckets(message_bytes):
      # every worker has produced this bucket once the slowest has: c (1 - beta + beta q)
      start = max(slowest * (1 - beta + beta * ready_share), end)
      end = start + self.allreduce_time(size, gathers)
      overlapped += max(0.0, min(end, slowest) - start)
    return max(end, slowest + self.workers.interference * overlapped)

  def beside_compute(self, slowest: float, communication: float) -> float:
    """A tick whose communication runs beside the whole compute (a pipelined or
    gossiping step): the longer of the two, the compute delayed by the overlap."""
    return max(communication, slowest + self.workers.interference * min(communication, slowest))

  def _message(self, message_bytes: float | None) -> float:
    return self.message_bytes if message_bytes is None else message_bytes

  def state_dict(self) -> dict[str, Any]:
    return {}

  def load_state_dict(self, state: dict[str, Any]) -> None:
    del state


class SynchronousTimeline(Timeline):
  """ssgd: everyone computes and all-reduces; everyone waits for the slowest.

  duration = the end of the last gradient bucket's all-reduce, each started as the
  backward pass produces it (`Overlap`); without overlap max_i c_i + allreduce(S).
  """

  def cost(self, tick, round_end=False, message_bytes=None, gathers=False):
    del round_end
    compute = self.workers.compute_times(tick)
    slowest = compute.max()
    duration = self.synchronous_duration(compute, self._message(message_bytes), gathers)
    return TickCost(duration, compute, np.full(self.num_workers, duration - slowest),
                    slowest - compute)


class PipelinedTimeline(Timeline):
  """pseudo_sync: step t's all-reduce overlaps step t+1's compute.

  duration = max(max_i c_i + interference * min(allreduce(S), max_i c_i), allreduce(S)).
  Only communication that outlasts the compute is exposed, and the compute pays for
  running beside it.
  """

  warmup_steps = 0  # synchronous ticks first (`WarmupPipelinedTimeline`)

  @classmethod
  def overlaps_compute(cls) -> bool:
    return True

  def cost(self, tick, round_end=False, message_bytes=None, gathers=False):
    del round_end
    compute = self.workers.compute_times(tick)
    slowest = compute.max()
    message = self._message(message_bytes)
    if tick < self.warmup_steps:
      duration = self.synchronous_duration(compute, message, gathers)
    else:
      duration = self.beside_compute(slowest, self.allreduce_time(message, gathers))
    exposed = duration - slowest
    return TickCost(duration, compute, np.full(self.num_workers, exposed), slowest - compute)


class WarmupPipelinedTimeline(PipelinedTimeline):
  """odsgd: `PipelinedTimeline` after `warmup_steps` synchronous ticks, each timed as
  ssgd's (its overlapped all-reduce)."""

  def __init__(self, workers, network, message_bytes, overlap=None, *, warmup_steps: int):
    super().__init__(workers, network, message_bytes, overlap)
    self.warmup_steps = warmup_steps

  @classmethod
  def overlaps_compute(cls, *, warmup_steps: int) -> bool:
    del warmup_steps  # synchronous ticks first, then each beside the next tick's compute
    return True


class LocalSgdTimeline(Timeline):
  """local_sgd: every worker does each local step; a round ends when the slowest
  has done all of its steps, then the average is all-reduced.

  round duration = max_i sum_t c_i(t) + allreduce(S); a tick advances the clock
  by how much the slowest worker's running total grew.
  """

  honours_round_ends = True

  def __init__(self, workers, network, message_bytes, overlap=None):
    super().__init__(workers, network, message_bytes, overlap)
    self.busy = np.zeros(self.num_workers)  # compute seconds since the round started

  def cost(self, tick, round_end=False, message_bytes=None, gathers=False):
    compute = self.workers.compute_times(tick)
    before = self.busy.max()
    self.busy = self.busy + compute
    duration = self.busy.max() - before
    comm, idle = np.zeros(self.num_workers), np.zeros(self.num_workers)
    if round_end:
      idle = self.busy.max() - self.busy
      comm[:] = self.allreduce_time(self._message(message_bytes), gathers)
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

  honours_round_ends = True

  def __init__(self, workers, network, message_bytes, overlap=None):
    super().__init__(workers, network, message_bytes, overlap)
    self.tick_length = workers.step_time
    self.progress = np.zeros(self.num_workers)  # time banked towards the next step

  def schedule(self, tick):
    compute = self.workers.compute_times(tick)
    self.progress = self.progress + self.tick_length
    active = self.progress >= compute - _EPS
    self.progress = np.where(active, self.progress - compute, self.progress)
    return Schedule(active=active, arrival_order=np.arange(self.num_workers, dtype=np.int32))

  def cost(self, tick, round_end=False, message_bytes=None, gathers=False):
    del tick
    sync = self.allreduce_time(self._message(message_bytes), gathers) if round_end else 0.0
    comm = np.full(self.num_workers, sync)
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

  def __init__(self, workers, network, message_bytes, overlap=None):
    super().__init__(workers, network, message_bytes, overlap)
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

  def cost(self, tick, round_end=False, message_bytes=None, gathers=False):
    del round_end, message_bytes, gathers  # the messages' time is in the tick's length
    compute = self.workers.compute_times(tick)
    cycle = compute + 2 * self.message
    busy = self.tick_length * compute / cycle
    return TickCost(self.tick_length, busy, self.tick_length - busy, np.zeros(self.num_workers))

  def state_dict(self):
    return {"lands": self.lands.tolist()}

  def load_state_dict(self, state):
    self.lands = np.asarray(state["lands"], np.float64)


GOSSIP_GRAPHS = ("ring", "exponential", "complete")


def gossip_offsets(graph: str, num_workers: int) -> tuple[int, ...]:
  """The peers of worker i on a gossip `graph`: the workers i + k mod N for these k."""
  if num_workers <= 1:
    return ()
  if graph == "ring":
    return tuple(sorted({1, num_workers - 1}))
  if graph == "exponential":
    return tuple(sorted({2**j % num_workers for j in range(math.ceil(math.log2(num_workers)))}))
  if graph == "complete":
    return tuple(range(1, num_workers))
  raise ValueError(f"graph={graph!r} is not one of {GOSSIP_GRAPHS}")


class GossipTimeline(Timeline):
  """gossip: every worker exchanges its parameters with its peers on each tick; no
  global all-reduce, but everyone still moves in step (a tick ends with the slowest).

  exchange = peers x message(S): a worker sends one copy to each peer, one after
  another over its own link (and receives as many at the same time); on the complete
  graph the mean is an all-reduce. combine_first mixes the parameters the gradient is
  taken at, so the exchange runs beside the compute: duration = max(max_i c_i (+ its
  interference), exchange); step_first mixes after the step: max_i c_i + exchange.
  """

  def __init__(self, workers, network, message_bytes, overlap=None, *, graph: str,
               order: str):
    super().__init__(workers, network, message_bytes, overlap)
    self.graph, self.order = graph, order
    self.peers = len(gossip_offsets(graph, self.num_workers))

  @classmethod
  def overlaps_compute(cls, *, graph: str, order: str) -> bool:
    del graph
    return order == "combine_first"

  def exchange_time(self, message_bytes: float) -> float:
    if self.peers == 0:
      return 0.0
    if self.graph == "complete":
      return self.allreduce_time(message_bytes)
    return self.peers * self.network.message_time(message_bytes)

  def cost(self, tick, round_end=False, message_bytes=None, gathers=False):
    del round_end, gathers  # messages to single peers
    compute = self.workers.compute_times(tick)
    slowest = compute.max()
    exchange = self.exchange_time(self._message(message_bytes))
    duration = (self.beside_compute(slowest, exchange) if self.order == "combine_first"
                else slowest + exchange)
    return TickCost(duration, compute, np.full(self.num_workers, duration - slowest),
                    slowest - compute)
