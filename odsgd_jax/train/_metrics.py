"""Metrics to JSONL and TensorBoard event files (no TensorFlow needed)."""

import json
import os
from typing import Any

import tensorboardX


class MetricsWriter:
  """Appends one JSON object per logged step to `workdir/metrics.jsonl`, and
  writes the same scalars as TensorBoard events under `workdir/tensorboard`.

  Only one process writes (`enabled`). On resume from step k, lines of steps
  after k (from the interrupted run) are dropped, so the file tells one history.
  """

  def __init__(self, workdir: str, *, enabled: bool, resumed_step: int | None = None):
    self.enabled = enabled
    self.path = os.path.join(workdir, "metrics.jsonl")
    if not enabled:
      return
    if resumed_step is not None:
      _truncate_after(self.path, resumed_step)
    elif os.path.exists(self.path):
      os.remove(self.path)  # a fresh run in a workdir without checkpoints
    self._file = open(self.path, "a", encoding="utf-8")
    self._tensorboard = tensorboardX.SummaryWriter(os.path.join(workdir, "tensorboard"),
                                                   purge_step=resumed_step)

  def write(self, step: int, scalars: dict[str, Any]) -> None:
    if not self.enabled:
      return
    row = {"step": int(step), **{k: float(v) for k, v in scalars.items()}}
    self._file.write(json.dumps(row) + "\n")
    self._file.flush()
    for name, value in row.items():
      if name != "step":
        self._tensorboard.add_scalar(name, value, step)

  def close(self) -> None:
    if self.enabled:
      self._file.close()
      self._tensorboard.close()


def _truncate_after(path: str, step: int) -> None:
  if not os.path.exists(path):
    return
  with open(path, encoding="utf-8") as f:
    kept = [line for line in f if line.strip() and json.loads(line)["step"] <= step]
  with open(path, "w", encoding="utf-8") as f:
    f.writelines(kept)


def read_metrics(workdir: str) -> list[dict[str, float]]:
  """All rows of a run's metrics.jsonl."""
  with open(os.path.join(workdir, "metrics.jsonl"), encoding="utf-8") as f:
    return [json.loads(line) for line in f if line.strip()]
