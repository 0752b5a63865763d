"""Orbax checkpoints of a run: train state (strategy state inside) and progress."""

import os
from typing import Any

import jax
import orbax.checkpoint as ocp


class Checkpoints:
  """A run's checkpoints under `workdir/checkpoints`, one folder per saved step.

  Each holds "state" (the whole `TrainState`: parameters, BatchNorm statistics,
  strategy and inner-optimizer state, rng) and "progress" (each worker's data
  position, the wall time spent so far and the simulated clock). Saves are asynchronous; `close`
  waits for the last one, so a run that stops on an error keeps it intact.
  """

  def __init__(self, workdir: str, max_to_keep: int):
    self.directory = os.path.join(os.path.abspath(workdir), "checkpoints")
    self._manager = ocp.CheckpointManager(
        self.directory,
        options=ocp.CheckpointManagerOptions(
            max_to_keep=max_to_keep, create=True, enable_async_checkpointing=True
        ),
    )

  def latest_step(self) -> int | None:
    return self._manager.latest_step()

  def save(self, step: int, state: Any, progress: dict[str, Any]) -> None:
    self._manager.save(
        step,
        args=ocp.args.Composite(
            state=ocp.args.StandardSave(state), progress=ocp.args.JsonSave(progress)
        ),
    )

  def restore(self, step: int, abstract_state: Any) -> tuple[Any, dict[str, Any]]:
    """Restores step `step` into the structure, shapes and shardings of `abstract_state`."""
    target = jax.tree.map(
        lambda x: jax.ShapeDtypeStruct(x.shape, x.dtype, sharding=x.sharding), abstract_state
    )
    restored = self._manager.restore(
        step,
        args=ocp.args.Composite(
            state=ocp.args.StandardRestore(target), progress=ocp.args.JsonRestore()
        ),
    )
    return restored.state, restored.progress

  def close(self) -> None:
    self._manager.wait_until_finished()
    self._manager.close()
