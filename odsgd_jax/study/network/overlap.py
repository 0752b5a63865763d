"""Which overlap of communication and compute is real: one process of the probe.

  python -m odsgd_jax.study.network.overlap <spec.json>

Two processes (jax.distributed over gloo, in a shaped namespace) time an all-reduce of a
message (`message_bytes` per process, a `psum` in a `shard_map`, as the strategies send
theirs) and an independent compute (a chain of matrix products of about the same length),
each alone and together in four ways:

- one program holding both (as a train step holds its gradient's all-reduce, ssgd's
  buckets and the pipelined strategies' held exchange alike);
- two programs dispatched one after the other from one thread (the held exchange as a
  program of its own, JAX's asynchronous dispatch);
- two programs dispatched from two threads;
- two programs on two devices of the process (the exchange on a device of its own).

Overlap is real where "together" takes about the longer of the two, not their sum.
Process 0 writes {way: median seconds} to `output`.
"""

import json
import sys
import threading
import time

import jax
import numpy as np


def main(spec_path: str) -> None:
  with open(spec_path, encoding="utf-8") as f:
    spec = json.load(f)
  from odsgd_jax import parallel
  parallel.initialize(spec["coordinator"], spec["processes"], spec["process_id"],
                      heartbeat_timeout_s=30, join_timeout_s=120)
  import jax.numpy as jnp
  from jax.sharding import Mesh, NamedSharding
  from jax.sharding import PartitionSpec as P

  first = [min((d for d in jax.devices() if d.process_index == p), key=lambda d: d.id)
           for p in range(jax.process_count())]
  mesh = Mesh(np.asarray(first), ("workers",))
  size = int(spec["message_bytes"]) // 4
  message = jax.make_array_from_callback(
      (len(first), size), NamedSharding(mesh, P("workers")),
      lambda index: np.ones((1, size), np.float32))
  allreduce = jax.jit(jax.shard_map(lambda v: jax.lax.psum(v, "workers"), mesh=mesh,
                                    in_specs=P("workers"), out_specs=P("workers")))
  width, depth = spec["matrix"], spec["products"]

  def chain(a):
    for _ in range(depth):
      a = jnp.tanh(a @ a)
    return a

  mine = jax.local_devices()
  matrix = jax.device_put(jnp.full((width, width), 1.0 / width), mine[0])
  compute = jax.jit(chain)
  both = jax.jit(jax.shard_map(
      lambda v, a: (jax.lax.psum(v, "workers"), chain(a[0])[None]), mesh=mesh,
      in_specs=(P("workers"), P("workers")), out_specs=(P("workers"), P("workers"))))
  matrices = jax.make_array_from_callback(
      (len(first), width, width), NamedSharding(mesh, P("workers")),
      lambda index: np.full((1, width, width), 1.0 / width, np.float32))

  def threaded():
    done = {}
    thread = threading.Thread(target=lambda: done.setdefault(
        "sum", jax.block_until_ready(allreduce(message))))
    thread.start()
    product = jax.block_until_ready(compute(matrix))
    thread.join()
    return product

  ways = {"all-reduce alone": lambda: allreduce(message),
          "compute alone": lambda: compute(matrix),
          "one program": lambda: both(message, matrices),
          "two programs, one thread": lambda: (allreduce(message), compute(matrix)),
          "two programs, two threads": threaded}
  if len(mine) > 1:
    other = jax.device_put(matrix, mine[1])
    ways["two programs, two devices"] = lambda: (allreduce(message), compute(other))
  from jax.experimental import multihost_utils
  results = {}
  for name, run in ways.items():
    times = []
    for repeat in range(spec["repeats"] + 1):
      multihost_utils.sync_global_devices(f"{name} {repeat}")
      started = time.perf_counter()
      jax.block_until_ready(run())
      times.append(time.perf_counter() - started)
    results[name] = float(np.median(times[1:]))  # the first compiles
  if spec["process_id"] == 0:
    with open(spec["output"], "w", encoding="utf-8") as f:
      json.dump(results, f)
  jax.distributed.shutdown()


if __name__ == "__main__":
  main(sys.argv[1])
