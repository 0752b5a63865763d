"""One process of a measured case: this codebase's train step of each strategy, timed.

  python -m odsgd_jax.study.network.timing <spec.json>

Started P times by the driver (`odsgd_jax.study.network.measure`), once per process, with
`jax.distributed` over gloo (`"distributed": true`, one worker per process), or alone
with one worker and no collective to run (the compute time: the same step with the
communication removed, P such processes running at once so that they share the CPU as
the measured ones do). Each strategy's step is the training loop's (`make_train_step`),
on random inputs of the model's size; the first ticks compile and warm up, then
`repeats` windows of `steps` ticks are timed, each window started together by every
process (a barrier outside the window) and ended by blocking on the state. Process 0
(every process, alone) writes what it measured to `output`:

  {"entries": [{"label", "seconds_per_step": [per window], "loopback_bytes_per_step",
                "model_bytes", "charges": [[sends, bytes sent or 0, gathered], per tick],
                "timed_from": the first timed tick}]}

`loopback_bytes_per_step`: what the namespace's loopback carried per step (all processes
together, read from /proc/net/dev); `charges`: what the clock would be charged for every
tick, warm-up included (the run's `clock_record`), the input of the first looks.
"""

import json
import os
import sys
import time
from typing import Any

import jax
import numpy as np


def loopback_bytes() -> int:
  """Bytes sent over `lo` in this process's network namespace so far."""
  with open("/proc/net/dev", encoding="utf-8") as f:
    for line in f:
      name, _, counters = line.partition(":")
      if name.strip() == "lo":
        return int(counters.split()[8])  # transmit bytes
  return 0


class Barrier:
  """Every process reaches the same point before any goes on: JAX's own barrier when
  distributed, else files in a shared folder (the compute-only processes share no
  runtime, but their windows must overlap to share the CPU as the measured ones do)."""

  def __init__(self, distributed: bool, folder: str | None, processes: int, process_id: int,
               timeout_s: float = 300):
    self.distributed, self.folder = distributed, folder
    self.processes, self.process_id, self.timeout_s = processes, process_id, timeout_s
    self.count = 0

  def __call__(self) -> None:
    self.count += 1
    if self.distributed:
      from jax.experimental import multihost_utils
      multihost_utils.sync_global_devices(f"odsgd_jax window {self.count}")
      return
    if not self.folder or self.processes == 1:
      return
    prefix = os.path.join(self.folder, f"barrier{self.count}.")
    open(prefix + str(self.process_id), "w").close()  # noqa: SIM115 - an empty marker
    deadline = time.monotonic() + self.timeout_s
    while sum(os.path.exists(prefix + str(i)) for i in range(self.processes)) < self.processes:
      if time.monotonic() > deadline:
        raise TimeoutError(f"the other processes did not reach window {self.count} within "
                           f"{self.timeout_s:g} s")
      time.sleep(0.002)


def clock_charges(rows: list[dict[str, Any]], model_bytes: float) -> list[list[float]]:
  """[sends, bytes sent (0: the dense message), gathered] of each tick whose step metrics
  are `rows`, as a run's clock charges them (`SimulatedClock.advance`, worker 0's row)."""
  from odsgd_jax import cluster
  from odsgd_jax.train._simulation import SimulatedClock

  timeline = cluster.SynchronousTimeline(cluster.Workers((1.0,), 1.0), cluster.Network(1.0),
                                         model_bytes)  # any rule: only the charges are read
  clock = SimulatedClock(timeline, 1.0, model_bytes, model_bytes)
  for tick, row in enumerate(rows):
    clock.advance(tick, {name: float(np.asarray(value).reshape(-1)[0])
                         for name, value in row.items()})
  return [list(charge) for count, *charge in clock.charges for _ in range(count)]


def time_entry(label: str, strategy_name: str, options: dict[str, Any], model: Any,
               input_shape: tuple[int, ...], batch_per_worker: int, steps: int,
               repeats: int, barrier: Barrier) -> dict[str, Any]:
  """Times `steps` ticks `repeats` times of strategy `strategy_name` with `options`."""
  import optax

  from odsgd_jax import parallel
  from odsgd_jax.cluster import synchronous_schedule
  from odsgd_jax.strategies import get_strategy
  from odsgd_jax.train import make_train_step
  from odsgd_jax.train._simulation import message_bytes

  definition = get_strategy(strategy_name)
  tx = definition.make(optax.sgd(0.1, momentum=0.9), axis_name=parallel.WORKER_AXES,
                       **options)
  worker_mesh = parallel.make_worker_mesh(jax.device_count())
  n = worker_mesh.num_workers
  rng = np.random.default_rng(jax.process_index())
  local = {"image": rng.standard_normal((1, batch_per_worker, *input_shape)).astype(np.float32),
           "label": rng.integers(0, 10, (1, batch_per_worker)).astype(np.int32)}
  batch = parallel.put_batch(worker_mesh, local)
  schedule = parallel.put_global(synchronous_schedule(0, n),
                                 worker_mesh.sharding(parallel.REPLICATED))
  train_step = make_train_step(model, tx, worker_mesh, definition)
  state = train_step.init_state(input_shape, seed=0)
  tick, packed = 0, []
  for _ in range(train_step.settled_from + 2):  # compile, first ticks, warm up
    state, metrics = train_step(state, batch, schedule, tick)
    packed.append(metrics)
    tick += 1
  jax.block_until_ready((state, metrics))
  timed_from = tick
  seconds, sent = [], []
  for _ in range(repeats):
    barrier()
    before, started = loopback_bytes(), time.perf_counter()
    for _ in range(steps):
      state, metrics = train_step(state, batch, schedule, tick)
      packed.append(metrics)
      tick += 1
    jax.block_until_ready((state, metrics))
    seconds.append((time.perf_counter() - started) / steps)
    sent.append((loopback_bytes() - before) / steps)
  model_bytes = message_bytes(state.params)
  rows = [train_step.metrics(np.asarray(parallel.fetch(m))) for m in packed]
  charges = clock_charges(rows, model_bytes)
  return {"label": label, "seconds_per_step": seconds,
          "loopback_bytes_per_step": float(np.median(sent)), "model_bytes": model_bytes,
          "charges": charges, "timed_from": timed_from}


def main(spec_path: str) -> None:
  with open(spec_path, encoding="utf-8") as f:
    spec = json.load(f)
  distributed = spec["distributed"]
  process_id = spec.get("process_id", 0)
  if distributed:
    from odsgd_jax import parallel
    parallel.initialize(spec["coordinator"], spec["processes"], process_id,
                        heartbeat_timeout_s=30, join_timeout_s=120)
  from odsgd_jax.models import make_model
  model = make_model(spec["model"], 10, **spec.get("model_options", {}))
  barrier = Barrier(distributed, spec.get("barrier_folder"), spec["processes"], process_id)
  results = []
  for label, strategy_name, options, steps in spec["entries"]:
    results.append(time_entry(label, strategy_name, options, model, tuple(spec["input_shape"]),
                              spec["batch_per_worker"], steps, spec["repeats"], barrier))
  if process_id == 0 or not distributed:
    with open(spec["output"], "w", encoding="utf-8") as f:
      json.dump({"entries": results}, f)
  if distributed:
    jax.distributed.shutdown()


if __name__ == "__main__":
  main(sys.argv[1])
