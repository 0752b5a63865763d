"""Metrics to JSONL and TensorBoard event files (no TensorFlow needed)."""

import contextlib
import json
import os
import time
from typing import Any

from etils import epath
from tensorboardX.event_file_writer import EventsWriter
from tensorboardX.proto import event_pb2
from tensorboardX.summary import scalar


class MetricsWriter:
  """Appends one JSON object per logged step to `workdir/metrics.jsonl`, and
  writes the same scalars as TensorBoard events under `workdir/tensorboard`.

  Only one process writes (`enabled`). On resume from step k, lines of steps
  after k (from the interrupted run) are dropped, so the file tells one history.
  In a bucket (gs://), where a file cannot be appended to, the rows are kept and the
  file rewritten every `_REMOTE_FLUSH_ROWS` rows and at the end.

  Both are written in the calling thread, each row flushed: a file system that refuses
  (a full disk) raises `OSError` at that row, where tensorboardX's background writer
  would die silently and leave the training loop blocked on its full queue.
  """

  _REMOTE_FLUSH_ROWS = 100

  def __init__(self, workdir: "str | epath.Path", *, enabled: bool,
               resumed_step: int | None = None):
    self.enabled = enabled
    self.path = epath.Path(workdir) / "metrics.jsonl"
    self._remote = "://" in str(workdir)
    if not enabled:
      return
    kept = _rows_until(self.path, resumed_step) if resumed_step is not None else []
    self._lines = kept if self._remote else []  # kept only where the file is rewritten
    with _naming(self.path):
      self.path.write_text("".join(kept))  # a fresh run in a workdir without checkpoints: empty
      self._file = None if self._remote else self.path.open("a")
    self._tensorboard = _events_file(epath.Path(workdir) / "tensorboard", resumed_step)

  def write(self, step: int, scalars: dict[str, Any]) -> None:
    """Appends a row; `OSError` (naming the file) where the file system refuses."""
    if not self.enabled:
      return
    with _naming(self.path):
      self._write(step, scalars)

  def _write(self, step: int, scalars: dict[str, Any]) -> None:
    row = {"step": int(step), **{k: float(v) for k, v in scalars.items()}}
    line = json.dumps(row) + "\n"
    if self._file is not None:
      self._file.write(line)
      self._file.flush()
    else:
      self._lines.append(line)
      if len(self._lines) % self._REMOTE_FLUSH_ROWS == 0:
        self.path.write_text("".join(self._lines))
    now = time.time()
    for name, value in row.items():
      if name != "step":
        self._tensorboard.write_event(event_pb2.Event(wall_time=now, step=int(step),
                                                      summary=scalar(name, value)))
    self._tensorboard.flush()

  def close(self) -> None:
    if self.enabled:
      with _naming(self.path):
        if self._file is not None:
          self._file.close()
        else:
          self.path.write_text("".join(self._lines))
        self._tensorboard.close()


@contextlib.contextmanager
def _naming(path: epath.Path):
  """An `OSError` inside names `path` where it names no file (a write to an open file)."""
  try:
    yield
  except OSError as error:
    if error.filename:
      raise
    raise OSError(error.errno, error.strerror or str(error), str(path)) from error


def _events_file(folder: epath.Path, resumed_step: int | None) -> EventsWriter:
  """A new TensorBoard event file in `folder`; on resume from step k it starts with
  TensorBoard's purge marker, so that the events after k of the interrupted session
  are hidden (as `SummaryWriter(purge_step=k)` does)."""
  os.makedirs(folder, exist_ok=True)
  writer = EventsWriter(os.path.join(folder, "events"))
  if resumed_step is not None:
    writer.write_event(event_pb2.Event(
        wall_time=time.time(), step=resumed_step,
        session_log=event_pb2.SessionLog(status=event_pb2.SessionLog.START)))
  writer.flush()
  return writer


def _whole_lines(text: str) -> list[str]:
  """The rows of a metrics file that were written whole: a last line cut by a kill (no
  newline, not JSON) is left out."""
  lines = text.splitlines(keepends=True)
  if lines and not lines[-1].endswith("\n"):
    try:
      json.loads(lines[-1])
      lines[-1] += "\n"
    except ValueError:
      lines.pop()
  return [line for line in lines if line.strip()]


def _rows_until(path: epath.Path, step: int) -> list[str]:
  """The whole lines of steps up to `step` (those of a resumed run's checkpoint)."""
  if not path.exists():
    return []
  return [line for line in _whole_lines(path.read_text()) if json.loads(line)["step"] <= step]


def read_metrics(workdir: "str | epath.Path") -> list[dict[str, float]]:
  """All rows of a run's metrics.jsonl (a last line cut short by a kill is skipped)."""
  text = (epath.Path(workdir) / "metrics.jsonl").read_text()
  return [json.loads(line) for line in _whole_lines(text)]
