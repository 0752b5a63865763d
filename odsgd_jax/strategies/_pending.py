"""The pending gradients of the one-step-delay strategies (odsgd, pseudo_sync): their
small tensors kept as one vector when they travel uncompressed.

A worker's gradient P_i waits one tick in the state and is all-reduced at the next. Kept
as a tree, each tensor is a buffer of its own that the tick's all-reduce reads while the
same tick replaces it: XLA copies a donated one aside before the all-reduce and copies
the new gradient in after it, two kernels per tensor and tick, which for small tensors
cost more than their arithmetic (scripts/benchmark.py, "operations (copies)": odsgd on
CNN1D ran 22 copies). Packed, the small tensors are one buffer: one operand of the
all-reduce, two copies at most, the new gradient written by one concatenation. A large
tensor stays a buffer of its own (the train step gives it a fresh buffer instead of
donating it, so it is not copied; packing it would copy it once more). The arithmetic is
unchanged: each element's mean over the workers is the same sum in the same order.

A compressed exchange keeps the tree: compressors work per tensor (top-k per tensor,
PowerSGD's matrices). So do small tensors of more than one dtype (one vector would have
to promote them).
"""

from typing import Any, NamedTuple

import jax
import jax.numpy as jnp

from odsgd_jax import comm

# Per worker, the size under which a tensor costs more as a kernel or buffer of its own
# than as bytes. The train step donates such tensors even where the step copies them aside
# (odsgd_jax/train/_donation.py: a fresh buffer costs a fixed amount per tensor and device,
# a copy costs per byte; measured on 8 CPU devices while choosing it, keeping CNN1D's
# tensors, all under 13 KiB, out of the donation made odsgd's step slower, keeping the wide
# MLP's, up to 4 MiB, out made it faster), and the pending gradients pack exactly those:
# a larger tensor goes to a fresh buffer, which packing would replace by one more copy.
SMALL_TENSOR_BYTES = 64 * 1024


class Packed(NamedTuple):
  """Pending gradients in the state: the small tensors as one vector, the others as they
  are."""

  small: jax.Array  # the tensors under SMALL_TENSOR_BYTES, raveled and concatenated
  large: tuple[jax.Array, ...]  # the others, in the tree's order


def _is_small(leaf: Any) -> bool:
  return leaf.size * jnp.dtype(leaf.dtype).itemsize < SMALL_TENSOR_BYTES


def init(communication: Any, params: Any) -> Any:
  """The pending gradients before the first tick: zeros, packed when `packs` says so."""
  return pack(jax.tree.map(jnp.zeros_like, params), packs(communication, params))


def exchange(communication: Any, pending: Any, communication_state: Any, grads: Any,
             axis_name: Any) -> tuple[Any, Any, Any]:
  """The tick's exchange of the pending gradients: (their mean over the workers, as a tree
  like `grads`; the exchange's new state; `grads` as the state keeps them)."""
  packed = packs(communication, grads)
  mean, communication_state = comm.exchange(communication, pending, communication_state,
                                            axis_name)
  return unpack(mean, grads, packed), communication_state, pack(grads, packed)


def packs(communication: Any, params: Any) -> bool:
  """Whether the pending gradients of `params` are packed: the exchange is uncompressed
  (`communication` None) and the small tensors, at least one, share a dtype."""
  dtypes = {jnp.dtype(x.dtype) for x in jax.tree.leaves(params) if _is_small(x)}
  return communication is None and len(dtypes) == 1


def pack(grads: Any, packed: bool) -> Any:
  """The pending gradients as the state keeps them (`packed`: a `Packed`)."""
  if not packed:
    return grads
  leaves = jax.tree.leaves(grads)
  return Packed(small=jnp.concatenate([jnp.ravel(x) for x in leaves if _is_small(x)]),
                large=tuple(x for x in leaves if not _is_small(x)))


def unpack(pending: Any, like: Any, packed: bool) -> Any:
  """The tree of `like`'s structure and shapes that `pack` made `pending` from."""
  if not packed:
    return pending
  leaves, treedef = jax.tree.flatten(like)
  large = iter(pending.large)
  tensors, start = [], 0
  for leaf in leaves:
    if _is_small(leaf):
      tensors.append(pending.small[start:start + leaf.size].reshape(leaf.shape))
      start += leaf.size
    else:
      tensors.append(next(large))
  return jax.tree.unflatten(treedef, tensors)
