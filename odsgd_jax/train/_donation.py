"""The jitted train step, and which buffers of the state it donates."""

from typing import Any, Callable

import jax
import numpy as np

from odsgd_jax.strategies import SMALL_TENSOR_BYTES


class StepProgram:
  """`step(state, batch, schedule) -> (state, metrics)`, jitted, the input state donated
  except the large tensors of the fields `kept` (dotted paths of the train state,
  `StepHints.replaced_each_tick`): those a tick replaces whole while the step still
  reads their old values, so that a donated buffer would be copied aside at the start
  of the step. Not donated, their new values go to fresh buffers.

  The kept tensors travel as a separate, non-donated argument (JAX donates whole
  arguments): the state is flattened, split, and joined again around the call.
  """

  def __init__(self, train_step: Callable[..., Any], kept: tuple[str, ...] = ()):
    self.kept = tuple(kept)
    self.whole = jax.jit(train_step, donate_argnums=0)
    self._layouts: dict[Any, tuple[bool, ...]] = {}

    def split_step(layout, donated, kept_leaves, batch, schedule):
      treedef, mask = layout
      new_state, metrics = train_step(treedef.unflatten(_merge(donated, kept_leaves, mask)),
                                      batch, schedule)
      # The donated leaves come first, in the input's order: JAX gives a donated input's
      # buffer to the first output of its shape, so each gets its own new value.
      return (*_split(treedef.flatten_up_to(new_state), mask), metrics)

    self.split = jax.jit(split_step, static_argnums=0, donate_argnums=1)

  def _layout(self, state: Any) -> tuple[Any, tuple[bool, ...]] | None:
    """(treedef, which leaves are kept), or None when every leaf is donated."""
    if not self.kept:
      return None
    treedef = jax.tree.structure(state)
    if treedef not in self._layouts:
      paths = jax.tree_util.tree_flatten_with_path(state)[0]
      self._layouts[treedef] = tuple(
          _under(path, self.kept) and _bytes_per_worker(leaf) >= SMALL_TENSOR_BYTES
          for path, leaf in paths)
    mask = self._layouts[treedef]
    return (treedef, mask) if any(mask) else None

  def __call__(self, state: Any, batch: Any, schedule: Any):
    layout = self._layout(state)
    if layout is None:
      return self.whole(state, batch, schedule)
    treedef, mask = layout
    donated, kept_leaves, metrics = self.split(layout, *_split(jax.tree.leaves(state), mask),
                                               batch, schedule)
    return treedef.unflatten(_merge(donated, kept_leaves, mask)), metrics

  def lower(self, state: Any, batch: Any, schedule: Any):
    layout = self._layout(state)
    if layout is None:
      return self.whole.lower(state, batch, schedule)
    return self.split.lower(layout, *_split(jax.tree.leaves(state), layout[1]), batch,
                            schedule)

  def compilations(self) -> int:
    """Programs compiled so far (one per state structure and input shapes)."""
    return self.whole._cache_size() + self.split._cache_size()


def _under(path: tuple[Any, ...], fields: tuple[str, ...]) -> bool:
  names = ".".join(getattr(key, "name", str(key)) for key in path)
  return any(names == field or names.startswith(field + ".") for field in fields)


def _bytes_per_worker(leaf: Any) -> int:
  shape = np.shape(leaf)
  return int(np.prod(shape[1:], dtype=np.int64)) * np.dtype(leaf.dtype).itemsize


def _split(leaves: list[Any], mask: tuple[bool, ...]) -> tuple[list[Any], list[Any]]:
  return ([leaf for leaf, kept in zip(leaves, mask, strict=True) if not kept],
          [leaf for leaf, kept in zip(leaves, mask, strict=True) if kept])


def _merge(donated: list[Any], kept: list[Any], mask: tuple[bool, ...]) -> list[Any]:
  donated, kept = iter(donated), iter(kept)
  return [next(kept) if is_kept else next(donated) for is_kept in mask]
