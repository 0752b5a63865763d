"""A run's folder: made, claimed by one run at a time, written atomically, and a file
system that refuses said in one line."""

import errno
import fcntl
import json
import os
import socket
import time
from typing import Any

import jax
from etils import epath

from odsgd_jax.train._validate import ConfigError


class WorkdirError(RuntimeError):
  """The workdir cannot be used now: another run holds it, or its file system refuses
  (read-only, full, no permission). What it holds is left as it was."""


def storage_error(error: OSError, path: "str | epath.Path | None" = None) -> WorkdirError:
  """`error` of writing a run's file, as one line naming the file and the cause."""
  where = error.filename or path or "the workdir"
  cause = error.strerror or str(error)
  fix = ("free space on that file system" if error.errno in (errno.ENOSPC, errno.EDQUOT)
         else "make it writable or use another --workdir")
  return WorkdirError(f"cannot write {where}: {cause}. The run stopped; checkpoints saved "
                      f"before are intact: {fix}, then rerun the same command to resume")


def prepare_workdir(workdir: str) -> epath.Path:
  """The run's folder, created; one line if it cannot be. Any path etils.epath knows:
  a local folder (made absolute) or a bucket (gs://, with gcsfs installed)."""
  if not str(workdir).strip():
    raise ConfigError("--workdir is empty: give the folder for the run's checkpoints, "
                      "metrics and summary")
  try:
    path = epath.Path(workdir)
    if path.exists() and not path.is_dir():
      raise ConfigError(f"--workdir {workdir} is a file, not a folder: give a folder (new or "
                        f"one that holds a run to resume)")
    path.mkdir(parents=True, exist_ok=True)
    return path if "://" in str(workdir) else epath.Path(os.path.abspath(workdir))
  except ConfigError:
    raise
  except (ImportError, NotImplementedError, ValueError) as error:
    raise ConfigError(f"--workdir {workdir}: its file system is not available here ({error}); "
                      f"for gs:// install gcsfs (pip install gcsfs)") from error
  except OSError as error:
    raise ConfigError(f"--workdir {workdir} cannot be created ({error.strerror or error}): "
                      f"give a folder you can write to") from error


class WorkdirLock:
  """One run per workdir: each process of a run holds an advisory lock (flock) on
  `workdir/.lock.process<index>` while it trains. The kernel releases it when the process
  ends, however it ends, so a crashed run leaves no stuck lock: the file stays, with the
  last holder's pid, host and start time, and the next run takes it. A second run
  while the first holds it stops at once, naming the first. Buckets (gs://) are not
  locked: they have no such lock.
  """

  def __init__(self, workdir: epath.Path):
    self._file = None
    if "://" in str(workdir):
      return
    path = os.path.join(str(workdir), f".lock.process{jax.process_index()}")
    try:
      self._file = open(path, "a+", encoding="utf-8")  # noqa: SIM115 -- held until release
    except OSError as error:
      raise storage_error(error, path) from error
    try:
      fcntl.flock(self._file, fcntl.LOCK_EX | fcntl.LOCK_NB)
    except OSError as error:
      self._file.seek(0)
      holder = self._file.read().strip() or "another process"
      self._file.close()
      self._file = None
      if error.errno not in (errno.EAGAIN, errno.EACCES):
        raise storage_error(error, path) from error
      raise WorkdirError(f"--workdir {workdir} is in use by another run ({holder}): wait for "
                         f"it to finish, or stop it, or use another --workdir") from error
    try:
      self._file.seek(0)
      self._file.truncate()
      self._file.write(f"process {os.getpid()} on {socket.gethostname()}, started "
                       f"{time.strftime('%Y-%m-%d %H:%M:%S')}\n")
      self._file.flush()
    except OSError as error:
      self.release()
      raise storage_error(error, path) from error

  def release(self) -> None:
    if self._file is not None:
      self._file.close()  # closing the file releases the lock
      self._file = None


def write_json_atomically(path: epath.Path, payload: dict[str, Any]) -> None:
  """`payload` to `path` through a temporary file renamed over it: a kill leaves the old
  file or the new one, never half of one."""
  tmp = path.parent / (path.name + ".tmp")
  try:
    tmp.write_text(json.dumps(payload, indent=2, sort_keys=True) + "\n")
    tmp.replace(path)
  except OSError as error:
    raise storage_error(error, tmp) from error
