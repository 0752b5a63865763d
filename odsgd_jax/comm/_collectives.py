"""Collectives over a worker axis that may be a tuple of axes.

A worker axis can be several named axes, e.g. ("workers", "local"): a device mesh
axis and, inside it, a `jax.vmap` axis for several workers per device. `pmean` and
`psum` accept such tuples directly; `all_gather` and `axis_index` do not (JAX 0.10
rejects a mesh axis and a vmap axis together), so they are composed axis by axis
here. Worker index = row-major position over the axes, outermost first.
"""

from typing import Any

import jax
import jax.numpy as jnp

AxisName = str | tuple[str, ...]


def _axes(axis_name: AxisName) -> tuple[str, ...]:
  return axis_name if isinstance(axis_name, tuple) else (axis_name,)


def num_workers(axis_name: AxisName) -> int:
  """Total number of workers over all the axes."""
  size = 1
  for axis in _axes(axis_name):
    size *= jax.lax.axis_size(axis)
  return size


def worker_index(axis_name: AxisName) -> jax.Array:
  """This worker's index in [0, N), int32."""
  index = jnp.zeros((), jnp.int32)
  for axis in _axes(axis_name):
    index = index * jax.lax.axis_size(axis) + jax.lax.axis_index(axis)
  return index


def all_gather(tree: Any, axis_name: AxisName) -> Any:
  """Every worker's copy of `tree`, stacked on a new leading axis of size N. For what a
  simulated server holds or small bookkeeping values (not charged by the clock); a
  message goes through `exchange` or `neighbour_mean`."""

  def gather(x):
    for axis in reversed(_axes(axis_name)):  # innermost first
      x = jax.lax.all_gather(x, axis)
    leading = x.shape[:len(_axes(axis_name))]
    return x.reshape((-1, *x.shape[len(leading):]))

  return jax.tree.map(gather, tree)


def from_worker_ahead(tree: Any, offset: int, axis_name: AxisName) -> Any:
  """Worker i gets worker (i + offset) mod N's `tree`, by `jax.lax.ppermute`: each worker
  sends its tree to one peer, and receives one.

  Over several axes (a device axis, and a vmap axis of the workers a device holds) the
  shift is done axis by axis, innermost last: offset = q * inner + r moves every block q
  places over the outer axes and then r places inside; the workers for which the inner
  move wraps around take the block moved q + 1 places instead. A device then sends its
  block once per distinct outer move (once for a ring or an exponential graph whose
  offsets are multiples of the inner size or smaller than it, at most twice), and the
  inner moves stay inside the device.
  """
  *outer, inner = _axes(axis_name)
  size = jax.lax.axis_size(inner)
  total = num_workers(axis_name)
  q, r = divmod(offset % total, size)

  def inner_move(x, places):
    if places % size == 0:
      return x
    return jax.lax.ppermute(x, inner, [((i + places) % size, i) for i in range(size)])

  def outer_move(x, places):
    return from_worker_ahead(x, places, tuple(outer)) if outer else x

  moved = jax.tree.map(lambda x: inner_move(outer_move(x, q), r), tree)
  if r == 0 or not outer:
    return moved
  wrapped = jax.lax.axis_index(inner) + r >= size  # these take the next block over
  further = jax.tree.map(lambda x: inner_move(outer_move(x, q + 1), r), tree)
  return jax.tree.map(lambda a, b: jnp.where(wrapped, b, a), moved, further)


def first_worker(tree: Any) -> Any:
  """Worker 0's copy of a per-worker tree (leading dimension N), outside the
  per-worker function: the model of strategies whose copies agree."""
  return jax.tree.map(lambda x: x[0], tree)


def uniform(flag: jax.Array, axis_name: AxisName) -> jax.Array:
  """`flag`, which every worker computes alike, as one value per device.

  Under `jax.vmap` a flag read from per-worker state is batched, and `lax.cond` on a
  batched flag becomes a select that runs both branches, collectives included. A max
  over the innermost axis (the in-device vmap axis of `WorkerMesh.per_worker`) costs
  no communication and makes the flag unbatched, so the cond stays a branch.
  """
  return jax.lax.pmax(jnp.asarray(flag, jnp.int32), _axes(axis_name)[-1]) > 0


def total(x: Any, axis_name: AxisName) -> Any:
  """The sum over workers of bookkeeping values (counts, losses: a few bytes, not charged
  by the clock). A model-sized message goes through `exchange`."""
  return jax.lax.psum(x, axis_name)


def mean(x: Any, axis_name: AxisName) -> Any:
  """The mean over workers of bookkeeping values (weights: a few bytes, not charged)."""
  return jax.lax.pmean(x, axis_name)
