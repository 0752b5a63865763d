"""A message held for one tick: what a delayed strategy keeps in its state to send at the
next tick, beside that tick's compute (odsgd's and pseudo_sync's pending gradients).

Kept as a tree, each small tensor was a buffer of its own that the next tick's all-reduce
read while the same tick replaced it: XLA copied each aside, two kernels per tensor and
tick (odsgd on CNN1D: 22 copies), which cost more than the arithmetic. So a strategy keeps
such a message with `hold`, which keeps the tensors under SMALL_TENSOR_BYTES (per worker)
as one vector, and `exchange` sends that vector as one operand of the all-reduce: the
same sum, element by element. Where the workers share a device their sum is a reduction
over the vmapped axis, which XLA may order differently for one vector than for separate
tensors (1 ulp). A compressed exchange works per tensor: its message is held as the tree.

Checkpoints store the tree (`as_trees`), so the threshold can change between a save and
its restore.
"""

import math
from typing import Any, NamedTuple

import jax
import jax.numpy as jnp

# Per worker, the size under which a tensor costs more as a buffer of its own than as
# bytes (measured on 8 CPU devices when it was chosen: CNN1D's tensors are all under
# 13 KiB; the wide MLP's reach 4 MiB).
SMALL_TENSOR_BYTES = 64 * 1024


class _Layout(NamedTuple):
  """Static: the tree's structure, each tensor's shape (per worker) and which are packed."""

  treedef: Any
  shapes: tuple[tuple[int, ...], ...]
  packed: tuple[bool, ...]


@jax.tree_util.register_pytree_node_class
class Held:
  """A held message: its small tensors as one vector (`vector`, in the tree's order), the
  others as they are (`large`). Arrays may carry leading axes (the workers'), the same on
  every part. `tree()` gives the message back."""

  def __init__(self, vector: jax.Array, large: tuple[jax.Array, ...], layout: _Layout):
    self.vector, self.large, self.layout = vector, tuple(large), layout

  def tree_flatten(self):
    return (self.vector, self.large), self.layout

  @classmethod
  def tree_unflatten(cls, layout, children):
    vector, large = children
    return cls(vector, large, layout)

  def tree(self) -> Any:
    """The message as the tree it was held from."""
    batch = jnp.shape(self.vector)[:-1]
    large, tensors, start = iter(self.large), [], 0
    for shape, packed in zip(self.layout.shapes, self.layout.packed, strict=True):
      if packed:
        size = math.prod(shape)
        tensors.append(self.vector[..., start:start + size].reshape(batch + shape))
        start += size
      else:
        tensors.append(next(large))
    return jax.tree.unflatten(self.layout.treedef, tensors)


def _is_small(leaf: Any) -> bool:
  return leaf.size * jnp.dtype(leaf.dtype).itemsize < SMALL_TENSOR_BYTES


def _pack(leaves: list[Any], layout: _Layout, batch: tuple[int, ...] = ()) -> Held:
  """`leaves` (of `layout.treedef`, each with leading axes `batch`) held as `layout` says."""
  vector = jnp.concatenate(
      [jnp.reshape(leaf, batch + (-1,))
       for leaf, packed in zip(leaves, layout.packed, strict=True) if packed], axis=-1)
  large = tuple(leaf for leaf, packed in zip(leaves, layout.packed, strict=True) if not packed)
  return Held(vector, large, layout)


def hold(tree: Any, communication: Any = None) -> Any:
  """`tree` (this worker's message, e.g. this tick's gradients) as the strategy keeps it
  for the next tick's `exchange`: a `Held` whose small tensors are one vector, or `tree`
  itself when it travels compressed (`communication`), has no small tensor, or its small
  tensors differ in dtype (one vector would promote them)."""
  leaves, treedef = jax.tree.flatten(tree)
  small = [_is_small(leaf) for leaf in leaves]
  dtypes = {jnp.dtype(leaf.dtype) for leaf, s in zip(leaves, small, strict=True) if s}
  if communication is not None or len(dtypes) != 1:
    return tree
  return _pack(leaves, _Layout(treedef, tuple(tuple(leaf.shape) for leaf in leaves),
                               tuple(small)))


def held_mean(held: Held, axis_name) -> Any:
  """The mean over workers of a held message, as its tree: the vector and each large
  tensor are the operands of one all-reduce."""
  vector, *large = jax.lax.pmean([held.vector, *held.large], axis_name)
  return Held(vector, tuple(large), held.layout).tree()


def _is_held(x: Any) -> bool:
  return isinstance(x, Held)


def as_trees(state: Any) -> Any:
  """`state` with every held message as its tree: what a checkpoint stores."""
  return jax.tree.map(lambda x: x.tree() if _is_held(x) else x, state, is_leaf=_is_held)


def held_like(trees: Any, like: Any) -> Any:
  """`trees` (`as_trees` of a state shaped like `like`) held again as `like` holds them."""
  def again(target, tree):
    if not _is_held(target):
      return tree
    return _pack(jax.tree.leaves(tree), target.layout, jnp.shape(target.vector)[:-1])

  return jax.tree.map(again, like, trees, is_leaf=_is_held)
