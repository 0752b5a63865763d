"""Orbax checkpoints of a run: train state (strategy state inside) and progress."""

import contextlib
import logging
import re
import sys
from typing import Any, Iterator

import jax
import orbax.checkpoint as ocp
from etils import epath

from odsgd_jax import comm, parallel
from odsgd_jax.train._schema import ADDED_FIELDS

_ADDED = {f"{section}.{field}": value for (section, field), value in ADDED_FIELDS.items()}

# How a file system says no, in the words of OSError and of TensorStore (which orbax
# writes arrays with, and which reports errno's text inside a ValueError).
_STORAGE_WORDS = re.compile(
    r"No space left|Disk quota|Permission denied|Read-only file system|Not a directory|"
    r"Is a directory|No such file|File exists|Input/output error|Stale file handle",
    re.IGNORECASE)


@contextlib.contextmanager
def abandoned_save_noise_hidden() -> Iterator[None]:
  """Inside the block, hides the tracebacks that a failed save or restore leaves behind,
  which the run says in one line: "Exception ignored in <coroutine ...>" of orbax's and
  TensorStore's abandoned coroutines, and TensorStore's callbacks into an event loop orbax
  has closed ("RuntimeError: Event loop is closed", dozens on a full disk), and asyncio's
  "Task exception was never retrieved" of orbax's abandoned tasks. Every other error is
  printed as before, and on leaving the block the process's hook and asyncio's log are as
  they were. For entry points (the train command, the study scripts), around the run and
  its exit after an error, not for a library user's process."""
  default = sys.unraisablehook
  asyncio_log = logging.getLogger("asyncio")

  def hook(unraisable):
    code = getattr(unraisable.object, "cr_code", None)
    where = getattr(code, "co_filename", "") or ""
    if "orbax" in where or "tensorstore" in where or _closed_loop_callback(unraisable):
      return
    default(unraisable)

  asyncio_log.addFilter(_not_an_abandoned_orbax_task)
  sys.unraisablehook = hook
  try:
    yield
  finally:
    sys.unraisablehook = default
    asyncio_log.removeFilter(_not_an_abandoned_orbax_task)


def _not_an_abandoned_orbax_task(record: logging.LogRecord) -> bool:
  """False for asyncio's report of an orbax task whose failure nobody awaited (the run has
  already said why the save failed); it names the task's coroutine and where it is defined."""
  message = record.getMessage()
  return not (message.startswith("Task exception was never retrieved") and "orbax" in message)


def _closed_loop_callback(unraisable) -> bool:
  """A callback into asyncio's event loop after it closed (TensorStore's, reported
  without an object)."""
  last = unraisable.exc_traceback
  while last is not None and last.tb_next is not None:
    last = last.tb_next
  return (unraisable.exc_type is RuntimeError and last is not None
          and "asyncio" in last.tb_frame.f_code.co_filename
          and str(unraisable.exc_value) == "Event loop is closed")


def save_model(path: epath.Path, variables: Any) -> None:
  """The run's result on its own, loadable without knowing the strategy's state: its
  model's variables, as host arrays (loadable anywhere)."""
  with ocp.StandardCheckpointer() as checkpointer:
    checkpointer.save(path, parallel.fetch(variables), force=True)


class CheckpointError(RuntimeError):
  """A checkpoint that cannot be resumed with this config; it is left untouched."""


class Checkpoints:
  """A run's checkpoints under `workdir/checkpoints`, one folder per saved step.

  Each holds "state" (the whole `TrainState`: parameters, BatchNorm statistics,
  strategy and inner-optimizer state, rng; a message held for a tick as its tree,
  `comm.as_trees`) and "progress" (each worker's data
  position, the wall time spent so far, the simulated clock, and the run's
  identity: what must not change between a run and its resumption). Saves are
  asynchronous; `close` waits for the last one, so a run that stops on an error
  keeps it intact.
  """

  def __init__(self, workdir: epath.Path, max_to_keep: int):
    self.directory = epath.Path(workdir) / "checkpoints"
    if self.directory.exists() and not self.directory.is_dir():
      raise CheckpointError(f"{self.directory} is a file, not the run's checkpoint folder; move "
                            f"it away or use another --workdir")
    self._done = False  # closed, failed or abandoned: no save left to wait for
    try:
      self._manager = ocp.CheckpointManager(
          self.directory,
          options=ocp.CheckpointManagerOptions(
              max_to_keep=max_to_keep, create=True, enable_async_checkpointing=True
          ),
      )
    except Exception as error:  # noqa: BLE001 - any failure to open means the same to the user
      _raise_if_peer_failure(error)
      raise CheckpointError(f"the checkpoint folder {self.directory} cannot be opened "
                            f"({_first_line(error)}); repair or move it, or use another "
                            f"--workdir") from error

  def latest_step(self) -> int | None:
    return self._manager.latest_step()

  def save(self, step: int, state: Any, progress: dict[str, Any]) -> None:
    """Starts saving `step` (asynchronously); an earlier save that failed raises here."""
    try:
      self._manager.save(
          step,
          args=ocp.args.Composite(
              state=ocp.args.StandardSave(comm.as_trees(state)),
              progress=ocp.args.JsonSave(progress)
          ),
      )
    except Exception as error:  # noqa: BLE001
      raise self._save_failed(error) from error

  def _save_failed(self, error: Exception) -> CheckpointError:
    """What a failed save means to the user, decided by its cause: a peer's failed
    collective is raised again as it is (the caller knows what it was doing), and only
    a storage error is blamed on the folder."""
    self._done = True  # orbax's threads of the failed save never finish: do not wait on them
    _raise_if_peer_failure(error)
    fix = ("fix the folder (space, permissions) and rerun the same command to resume"
           if _is_storage_failure(error) else "rerun the same command to resume")
    return CheckpointError(f"saving a checkpoint in {self.directory} failed "
                           f"({_first_line(error)}); the run stopped. Checkpoints saved before "
                           f"are intact: {fix}")

  def abandon(self) -> None:
    """Stops waiting for the saves in flight (their finishing needs a process that died);
    the checkpoints completed before are intact."""
    self._done = True

  def restore(self, step: int, abstract_state: Any,
              identity: dict[str, Any]) -> tuple[Any, dict[str, Any]]:
    """Restores step `step` into the structure, shapes and shardings of `abstract_state`.

    Raises:
      CheckpointError: the checkpoint was written by a run with another `identity`
        (strategy, model, workers, ...), does not fit `abstract_state`, or is
        unreadable; the message names what and how to go on.
    """
    where = self.directory / str(step)
    advice = ("resume with the config that wrote it, or start this config in another "
              "--workdir (the checkpoint is left as it is)")
    try:
      progress = self._manager.restore(
          step, args=ocp.args.Composite(progress=ocp.args.JsonRestore())).progress
    except Exception as error:  # noqa: BLE001 - any failure to read means the same to the user
      _raise_if_peer_failure(error)
      raise CheckpointError(f"checkpoint {where} is unreadable ({_first_line(error)}); delete "
                            f"that folder to resume from an earlier one, or use another "
                            f"--workdir") from error
    # A checkpoint of an earlier version may lack a field: only the fields it holds are
    # compared (each named, with both values).
    saved = progress.get("identity", identity)
    changed = [f"{name}: checkpoint {old!r}, config {new!r}"
               for key in identity if key in saved
               for name, old, new in _differences(key, saved[key], identity[key])]
    if changed:
      raise CheckpointError(f"checkpoint {where} is from another run ({'; '.join(changed)}); "
                            f"{advice}")
    # Saved as trees (a held message's tensors each on its own), held again as this run's
    # step holds them: the layout may change between a save and its restore.
    target = jax.tree.map(lambda x: jax.ShapeDtypeStruct(x.shape, x.dtype, sharding=x.sharding),
                          comm.as_trees(abstract_state))
    try:
      state = self._manager.restore(
          step, args=ocp.args.Composite(state=ocp.args.StandardRestore(target))).state
    except Exception as error:  # noqa: BLE001
      _raise_if_peer_failure(error)
      raise CheckpointError(f"checkpoint {where} does not fit this config or is damaged "
                            f"({_first_line(error)}); {advice}") from error
    return comm.held_like(state, abstract_state), progress

  def close(self) -> None:
    """Waits for the last save; a failed one raises `CheckpointError`. Once is enough:
    later calls do nothing."""
    if self._done:
      return
    self._done = True
    try:
      self._manager.wait_until_finished()
    except Exception as error:  # noqa: BLE001
      raise self._save_failed(error) from error
    self._manager.close()


def _differences(name: str, old: Any, new: Any) -> list[tuple[str, Any, Any]]:
  """The fields in which `old` and `new` differ, by dotted name (sections compared field
  by field, so that a changed learning rate is named as optimizer.learning_rate). A field
  added since `old` was written (`ADDED_FIELDS`) that `old` lacks held its value then."""
  if isinstance(old, dict) and isinstance(new, dict):
    return [d for key in sorted(set(old) | set(new), key=str)
            for d in _differences(f"{name}.{key}", old.get(key, _ADDED.get(f"{name}.{key}")),
                                  new.get(key))]
  return [] if old == new else [(name, old, new)]


def _raise_if_peer_failure(error: Exception) -> None:
  """Raises `error` again as it is when another process's death caused it: the folder is
  not to blame, and the caller knows what it was doing (`parallel.across_processes`)."""
  if parallel.is_peer_failure(error):
    raise error


def _is_storage_failure(error: BaseException) -> bool:
  """Whether the file system refused (space, permissions, a missing or read-only folder),
  judged from `error` and the errors that caused it."""
  return any(isinstance(cause, OSError) or _STORAGE_WORDS.search(str(cause))
             for cause in parallel.causes(error))


def _first_line(error: Exception) -> str:
  text = str(error).strip().splitlines()
  return f"{type(error).__name__}: {text[0] if text else ''}"[:300]
