"""The worker mesh: N logical workers on D devices, each worker one or more devices.

Mesh axes:
  "workers": devices that hold different workers;
  "intra":   devices inside one worker (plain synchronous data parallelism, as the
             4 GPUs of one node in the papers); size 1 unless configured.
A device holds k = N / size("workers") logical workers, run by `jax.vmap` under the
axis name "local". A strategy's collectives therefore run over the axes
("workers", "local"), in that order: worker index = device_index * k + local_index,
which is the order of the leading dimension of every per-worker array.

With one worker per device (k = 1, the common case on accelerators) the worker function
gets the device's block without its leading dimension, so the model's forward and
backward pass compile as the plain per-device program (under a vmap of size 1 XLA copies
transposed gradients). Only the strategy's update runs under a vmap of size 1
(`WorkerMesh.per_worker_update`): an elementwise update written in the stacked shape
updates the donated state in place, while the same update on the unstacked block and
reshaped back costs one copy of the parameters and of every state tree per step.
"""

import dataclasses
import math
from typing import Any, Callable, Sequence

import jax
import numpy as np
from jax.sharding import Mesh, NamedSharding
from jax.sharding import PartitionSpec as P

WORKERS = "workers"
INTRA = "intra"
LOCAL = "local"
WORKER_AXES = (WORKERS, LOCAL)  # the axis_name every strategy reduces over

# How an argument of a per-worker function is laid out across the mesh.
PER_WORKER = "per_worker"  # leading dimension N, one slice per worker
BATCH = "batch"  # (N, batch, ...): per worker, and split over "intra" devices
REPLICATED = "replicated"  # the same on every worker (e.g. the cluster schedule)
_SPECS = {PER_WORKER: P(WORKERS), BATCH: P(WORKERS, INTRA), REPLICATED: P()}


@dataclasses.dataclass(frozen=True)
class WorkerMesh:
  """A device mesh together with the number of logical workers it runs."""

  mesh: Mesh
  num_workers: int

  @property
  def num_devices(self) -> int:
    return self.mesh.devices.size

  @property
  def workers_per_device(self) -> int:
    return self.num_workers // self.mesh.shape[WORKERS]

  @property
  def vmapped(self) -> bool:
    """Whether several workers share a device (then `vmap` binds the "local" axis)."""
    return self.workers_per_device > 1

  @property
  def devices_per_worker(self) -> int:
    return self.mesh.shape[INTRA]

  def sharding(self, layout: str) -> NamedSharding:
    """Where arrays of `layout` live. Mesh axes of size 1 are left out of the spec, as
    XLA leaves them out of a compiled step's outputs: a state placed with them would
    differ in sharding from the state the step returns, so the step would compile a
    second time and could not donate the state on its first call."""
    entries = [axes if self._size(axes) > 1 else None for axes in _SPECS[layout]]
    while entries and entries[-1] is None:
      entries.pop()
    return NamedSharding(self.mesh, P(*entries))

  def _size(self, axes: str | tuple[str, ...]) -> int:
    return math.prod(self.mesh.shape[axis] for axis in ((axes,) if isinstance(axes, str) else axes))

  def per_worker(
      self, worker_fn: Callable[..., Any], in_layouts: Sequence[str], out_layouts: Any = PER_WORKER
  ) -> Callable[..., Any]:
    """Runs `worker_fn` once per logical worker, with the worker axes bound.

    Args:
      worker_fn: function of one worker's arguments; may use collectives over
        `WORKER_AXES` (between workers) and `INTRA` (inside a worker).
      in_layouts: one of PER_WORKER, BATCH, REPLICATED for each positional argument.
      out_layouts: PER_WORKER or REPLICATED, for every output (a pytree prefix).

    Returns:
      A function of the global arrays (leading dimension N for per-worker ones).
    """
    if self.vmapped:
      in_axes = tuple(None if layout == REPLICATED else 0 for layout in in_layouts)
      out_axes = jax.tree.map(lambda layout: None if layout == REPLICATED else 0, out_layouts)
      per_device = jax.vmap(worker_fn, in_axes=in_axes, out_axes=out_axes, axis_name=LOCAL)
    else:
      per_device = _one_worker(worker_fn, in_layouts, out_layouts)
    return jax.shard_map(
        per_device,
        mesh=self.mesh,
        in_specs=tuple(_SPECS[layout] for layout in in_layouts),
        out_specs=jax.tree.map(lambda layout: _SPECS[layout], out_layouts),
        # Collectives over the vmap axis inside shard_map fail the varying-axes
        # check in JAX 0.10; the reductions are correct without it.
        check_vma=False,
    )


def _one_worker(worker_fn: Callable[..., Any], in_layouts: Sequence[str],
                out_layouts: Any) -> Callable[..., Any]:
  """`worker_fn` on a device's block that holds one worker: its leading dimension of
  size 1 dropped on the way in and restored on the way out."""

  def per_device(*args):
    args = [arg if layout == REPLICATED else jax.tree.map(lambda x: x[0], arg)
            for arg, layout in zip(args, in_layouts, strict=True)]
    outputs = worker_fn(*args)
    return jax.tree.map(
        lambda layout, out: out if layout == REPLICATED else jax.tree.map(lambda x: x[None], out),
        out_layouts, outputs, is_leaf=lambda x: isinstance(x, str))

  return per_device


def per_worker_update(worker_mesh: WorkerMesh, update_fn: Callable[..., Any],
                      in_axes: Sequence[int | None]) -> Callable[..., Any]:
  """`update_fn` (a strategy's update, inside `worker_mesh.per_worker`) with the
  "local" axis bound: as is when `vmap` already binds it, else under a vmap of size 1
  over the arguments marked 0 in `in_axes` (why: the module docstring)."""
  if worker_mesh.vmapped:
    return update_fn

  def stacked(*args):
    args = [arg if axis is None else jax.tree.map(lambda x: x[None], arg)
            for arg, axis in zip(args, in_axes, strict=True)]
    outputs = jax.vmap(update_fn, in_axes=tuple(in_axes), axis_name=LOCAL)(*args)
    return jax.tree.map(lambda x: x[0], outputs)

  return stacked


def devices_in_use(num_workers: int, num_available: int, devices_per_worker: int = 1,
                   num_devices: int = 0) -> int:
  """How many devices a run uses: `num_devices`, or when 0, the most of the
  `num_available` that the workers fill evenly (all of them when they divide the workers:
  8 workers on 16 devices use 8, on 3 devices use 2). Without a layout that fits, all:
  the layout check then names the problem.
  """
  if num_devices:
    return num_devices
  for count in range(num_available, 0, -1):
    groups, rest = divmod(count, max(devices_per_worker, 1))
    if not rest and groups and num_workers % groups == 0:
      return count
  return num_available


def make_worker_mesh(
    num_workers: int, num_devices: int = 0, devices_per_worker: int = 1,
    devices: Sequence[jax.Device] | None = None,
) -> WorkerMesh:
  """Lays out `num_workers` logical workers on the first `num_devices` devices.

  Args:
    num_workers: N, the number of logical workers.
    num_devices: devices to use; 0 means as many of `devices` (default `jax.devices()`)
      as the workers fill evenly (`devices_in_use`).
    devices_per_worker: devices inside one worker (the "intra" axis).
    devices: the devices to choose from.

  Raises:
    ValueError: the counts do not divide; the message names the fix.
  """
  devices = list(jax.devices() if devices is None else devices)
  num_devices = devices_in_use(num_workers, len(devices), devices_per_worker, num_devices)
  if num_devices > len(devices):
    raise ValueError(
        f"parallel.num_devices={num_devices} but only {len(devices)} devices are visible"
    )
  if devices_per_worker < 1 or num_devices % devices_per_worker:
    raise ValueError(
        f"parallel.devices_per_worker={devices_per_worker} must divide the "
        f"{num_devices} devices in use"
    )
  worker_groups = num_devices // devices_per_worker
  if num_workers < 1 or num_workers % worker_groups:
    raise ValueError(
        f"cluster.num_workers={num_workers} must be a positive multiple of the "
        f"{worker_groups} device groups ({num_devices} devices / {devices_per_worker} per "
        f"worker); change cluster.num_workers or set parallel.num_devices"
    )
  grid = np.asarray(devices[:num_devices], dtype=object).reshape(worker_groups, devices_per_worker)
  return WorkerMesh(mesh=Mesh(grid, (WORKERS, INTRA)), num_workers=num_workers)
