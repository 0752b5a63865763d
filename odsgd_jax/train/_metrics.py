"""Metrics to JSONL and TensorBoard event files (no TensorFlow needed)."""

import json
from typing import Any

import tensorboardX
from etils import epath


class MetricsWriter:
  """Appends one JSON object per logged step to `workdir/metrics.jsonl`, and
  writes the same scalars as TensorBoard events under `workdir/tensorboard`.

  Only one process writes (`enabled`). On resume from step k, lines of steps
  after k (from the interrupted run) are dropped, so the file tells one history.
  In a bucket (gs://), where a file cannot be appended to, the rows are kept and the
  file rewritten every `_REMOTE_FLUSH_ROWS` rows and at the end.
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
    self.path.write_text("".join(kept))  # a fresh run in a workdir without checkpoints: empty
    self._file = None if self._remote else self.path.open("a")
    self._tensorboard = tensorboardX.SummaryWriter(str(epath.Path(workdir) / "tensorboard"),
                                                   purge_step=resumed_step)

  def write(self, step: int, scalars: dict[str, Any]) -> None:
    if not self.enabled:
      return
    row = {"step": int(step), **{k: float(v) for k, v in scalars.items()}}
    line = json.dumps(row) + "\n"
    if self._file is not None:
      self._file.write(line)
      self._file.flush()
    else:
      self._lines.append(line)
      if len(self._lines) % self._REMOTE_FLUSH_ROWS == 0:
        self.path.write_text("".join(self._lines))
    for name, value in row.items():
      if name != "step":
        self._tensorboard.add_scalar(name, value, step)

  def close(self) -> None:
    if self.enabled:
      if self._file is not None:
        self._file.close()
      else:
        self.path.write_text("".join(self._lines))
      self._tensorboard.close()


def _rows_until(path: epath.Path, step: int) -> list[str]:
  if not path.exists():
    return []
  return [line if line.endswith("\n") else line + "\n"
          for line in path.read_text().splitlines(keepends=True)
          if line.strip() and json.loads(line)["step"] <= step]


def read_metrics(workdir: "str | epath.Path") -> list[dict[str, float]]:
  """All rows of a run's metrics.jsonl."""
  text = (epath.Path(workdir) / "metrics.jsonl").read_text()
  return [json.loads(line) for line in text.splitlines() if line.strip()]
