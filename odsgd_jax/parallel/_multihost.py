"""Several processes, one program: jax.distributed start-up, per-process data, fetching.

Each process runs the same train loop (JAX's multi-controller model). A process
feeds only the workers whose devices it owns and reads back globally sharded
results through `fetch`; nothing here talks over the network except JAX itself.
"""

import os
from typing import Any

import jax
import numpy as np
from jax.experimental import multihost_utils

from odsgd_jax.parallel._mesh import BATCH, PER_WORKER, WORKERS, WorkerMesh

# Environment variables of launchers whose settings jax.distributed.initialize()
# reads by itself (its cluster auto-detection), with the value that means "more
# than one process".
_LAUNCHERS = {
    "SLURM_NTASKS": "SLURM",
    "OMPI_COMM_WORLD_SIZE": "Open MPI",
    "TPU_WORKER_HOSTNAMES": "Cloud TPU pod slice",
    "MEGASCALE_NUM_SLICES": "Cloud TPU multislice",
}


def detected_launcher() -> str | None:
  """The multi-process launcher this process was started by, if any."""
  for variable, launcher in _LAUNCHERS.items():
    value = os.environ.get(variable, "")
    if variable == "TPU_WORKER_HOSTNAMES":
      if "," in value:  # one hostname: a single-host TPU VM
        return launcher
    elif value.isdigit() and int(value) > 1:
      return launcher
  return None


def initialize(coordinator_address: str | None = None, num_processes: int | None = None,
               process_id: int | None = None, heartbeat_timeout_s: int = 100,
               join_timeout_s: int = 300) -> bool:
  """Starts jax.distributed when asked to or when a launcher is detected.

  Explicit: all of `coordinator_address` ("host:port" of process 0),
  `num_processes` and `process_id`. Otherwise jax.distributed.initialize()
  detects SLURM, Open MPI and Cloud TPU pods by itself; a plain single process
  starts nothing. Must run before the first JAX computation. On CPU, collectives
  between processes go through gloo. The processes wait up to `join_timeout_s` for
  each other to start. JAX's runtime ends the run (aborting from C++) when a process
  is silent for twice `heartbeat_timeout_s`: a `PeerWatch` with `heartbeat_timeout_s`
  says it in words first.

  Returns:
    Whether this is a multi-process run.

  Raises:
    ValueError: only some of the explicit settings were given.
  """
  explicit = (coordinator_address, num_processes, process_id)
  if any(value is not None for value in explicit) and None in explicit:
    raise ValueError("--coordinator_address, --num_processes and --process_id go together: "
                     f"got {coordinator_address!r}, {num_processes!r}, {process_id!r}")
  if coordinator_address is None and detected_launcher() is None:
    return False
  # A CPU-only process needs gloo for collectives across processes; accelerators
  # bring their own, and the setting is ignored there.
  jax.config.update("jax_cpu_collectives_implementation", "gloo")
  jax.distributed.initialize(coordinator_address=coordinator_address,
                             num_processes=num_processes, process_id=process_id,
                             heartbeat_timeout_seconds=2 * heartbeat_timeout_s,
                             initialization_timeout=join_timeout_s)
  return True


def local_workers(worker_mesh: WorkerMesh) -> range:
  """The workers whose devices belong to this process: the data it must feed."""
  sharding = worker_mesh.sharding(PER_WORKER)
  indices = sharding.addressable_devices_indices_map((worker_mesh.num_workers,)).values()
  owned = sorted({w for index in indices for w in range(worker_mesh.num_workers)[index[0]]})
  if owned != list(range(owned[0], owned[-1] + 1)):
    raise ValueError(f"this process's workers {owned} are not contiguous; lay the mesh's "
                     f"'{WORKERS}' axis out by process")
  return range(owned[0], owned[-1] + 1)


def put_batch(worker_mesh: WorkerMesh, local_batch: Any) -> Any:
  """This process's workers' batches (leading dimension: its workers) as global arrays."""
  sharding = worker_mesh.sharding(BATCH)
  if jax.process_count() == 1:
    return jax.device_put(local_batch, sharding)
  return jax.tree.map(
      lambda x: jax.make_array_from_process_local_data(
          sharding, x, (worker_mesh.num_workers, *x.shape[1:])), local_batch)


def put_global(tree: Any, sharding: jax.sharding.Sharding) -> Any:
  """Host values that every process holds whole (evaluation batches, the schedule)
  as arrays laid out by `sharding`."""
  if jax.process_count() == 1:
    return jax.device_put(tree, sharding)
  return jax.tree.map(lambda x: jax.make_array_from_callback(
      np.shape(x), sharding, lambda index: np.asarray(x)[index]), tree)


def fetch(tree: Any) -> Any:
  """Host NumPy copies of (possibly globally sharded) arrays, on every process."""
  if jax.process_count() == 1:
    return jax.device_get(tree)
  return jax.tree.map(np.asarray, multihost_utils.process_allgather(tree, tiled=True))
