"""Faults around a run's workdir: a half-written metrics file, two runs in one workdir, a
diverged run's advice, a resume that changes the seed, a read-only or full file system.
Each ends in one line that names the culprit (or is repaired), and leaves what was saved
as it was."""

import hashlib
import json
import os
import pathlib
import signal
import subprocess
import sys
import time

import pytest

from odsgd_jax.train import (CheckpointError, Hook, NonFiniteLossError, WorkdirError,
                             read_metrics, train_and_evaluate)
from odsgd_jax.train._workdir import WorkdirLock

REPO = pathlib.Path(__file__).resolve().parent.parent
DEFAULT = str(REPO / "configs" / "default.py")


def tree_hash(folder: pathlib.Path, skip: tuple[str, ...] = ()) -> str:
  digest = hashlib.sha256()
  for path in sorted(folder.rglob("*")):
    if path.name in skip:
      continue
    digest.update(str(path.relative_to(folder)).encode())
    if path.is_file():
      digest.update(path.read_bytes())
  return digest.hexdigest()


def test_a_metrics_file_cut_mid_line_is_trimmed_on_resume(small_config, tmp_path):
  small_config.train.num_steps, small_config.train.checkpoint_every = 10, 5
  small_config.train.log_every = 1
  whole = train_and_evaluate(small_config, str(tmp_path / "whole"))
  workdir = tmp_path / "cut"

  class Killed(Exception):
    pass

  class Crash(Hook):
    def before_step(self, step):
      if step == 6:
        raise Killed  # after the checkpoint of step 5

  with pytest.raises(Killed):
    train_and_evaluate(small_config, str(workdir), hooks=[Crash()])
  with open(workdir / "metrics.jsonl", "a", encoding="utf-8") as f:
    f.write('{"step": 6, "loss": 0.5, "accur')  # killed while writing step 6's row
  assert [row["step"] for row in read_metrics(workdir)][-1] == 5  # plot_metrics' reading
  resumed = train_and_evaluate(small_config, str(workdir))
  steps = [row["step"] for row in read_metrics(workdir) if "loss" in row]
  assert steps == list(range(1, 11))  # every step once, none duplicated
  assert resumed["test_accuracy"] == whole["test_accuracy"]


def test_a_second_run_in_a_workdir_in_use_stops_at_once(small_config, tmp_path):
  workdir = tmp_path / "run"
  train_and_evaluate(small_config, str(workdir))
  before = tree_hash(workdir, skip=(".lock.process0",))
  other = WorkdirLock(workdir)  # another run holds the workdir (its own open file)
  try:
    small_config.train.num_steps = 40
    with pytest.raises(WorkdirError) as error:
      train_and_evaluate(small_config, str(workdir))
  finally:
    other.release()
  message = str(error.value)
  assert "\n" not in message and "is in use by another run" in message
  assert f"process {os.getpid()}" in message  # names the other process
  assert tree_hash(workdir, skip=(".lock.process0",)) == before


def test_a_crashed_runs_lock_is_not_stuck(tmp_path):
  """A process killed while holding the lock leaves its file, not its lock."""
  holder = subprocess.Popen(
      [sys.executable, "-c", "import sys, time, pathlib\n"
       "from odsgd_jax.train._workdir import WorkdirLock\n"
       "lock = WorkdirLock(pathlib.Path(sys.argv[1]))\nprint('held', flush=True)\n"
       "time.sleep(120)", str(tmp_path)], stdout=subprocess.PIPE, text=True)
  try:
    assert holder.stdout.readline().strip() == "held"
    with pytest.raises(WorkdirError, match=f"process {holder.pid} on"):
      WorkdirLock(tmp_path)
  finally:
    holder.send_signal(signal.SIGKILL)
    holder.wait(timeout=30)
  assert f"process {holder.pid}" in (tmp_path / ".lock.process0").read_text()  # stale file
  WorkdirLock(tmp_path).release()  # taken at once


def test_divergence_advice_works_when_followed(small_config, tmp_path):
  small_config.optimizer.learning_rate = 1e6
  small_config.train.checkpoint_every = 1
  with pytest.raises(NonFiniteLossError) as error:
    train_and_evaluate(small_config, str(tmp_path / "diverged"))
  message = str(error.value)
  assert "\n" not in message and "in a new --workdir" in message
  # Resuming there would start from parameters on the way to diverging: it is refused,
  # naming the changed field, and the advice (a new workdir) trains to the end.
  small_config.optimizer.learning_rate = 0.1
  with pytest.raises(CheckpointError, match="optimizer.learning_rate: checkpoint 1000000.0"):
    train_and_evaluate(small_config, str(tmp_path / "diverged"))
  summary = train_and_evaluate(small_config, str(tmp_path / "new"))
  assert summary["steps"] == small_config.train.num_steps and summary["test_accuracy"] > 0.1


def test_a_resume_that_changes_the_seed_is_refused(small_config, tmp_path):
  workdir = tmp_path / "run"
  small_config.train.num_steps = 10
  train_and_evaluate(small_config, str(workdir))
  before = tree_hash(workdir, skip=(".lock.process0",))
  small_config.train.num_steps, small_config.train.seed = 20, 7
  with pytest.raises(CheckpointError) as error:
    train_and_evaluate(small_config, str(workdir))
  assert "seed: checkpoint 0, config 7" in str(error.value) and "\n" not in str(error.value)
  assert tree_hash(workdir, skip=(".lock.process0",)) == before  # config.json too
  assert json.loads((workdir / "config.json").read_text())["train"]["seed"] == 0


@pytest.fixture
def tmpfs(tmp_path):
  """Mounts a small tmpfs (as root, where mount is allowed): a disk that fills, or one
  that is read-only; unmounted afterwards."""
  mounted = []

  def mount(name: str, options: str) -> pathlib.Path:
    path = tmp_path / name
    path.mkdir()
    result = subprocess.run(["mount", "-t", "tmpfs", "-o", options, "tmpfs", str(path)],
                            capture_output=True, text=True, check=False)
    if result.returncode:
      pytest.skip(f"cannot mount a tmpfs here: {result.stderr.strip()}")
    mounted.append(path)
    return path

  yield mount
  for path in mounted:
    subprocess.run(["umount", "-l", str(path)], check=False)


def run_cli(*args: str) -> subprocess.CompletedProcess:
  return subprocess.run([sys.executable, "-m", "experiments.train", "--config", DEFAULT,
                         *args], cwd=REPO, capture_output=True, text=True, timeout=300)


def test_a_full_disk_is_one_line_and_the_saved_checkpoints_stay(data_dir, tmpfs):
  disk = tmpfs("disk", "size=1m")
  workdir = disk / "run"
  started = time.monotonic()
  result = run_cli("--workdir", str(workdir), f"--config.data.data_dir={data_dir}",
                   "--config.data.name=mnist1d", "--config.train.num_steps=2000",
                   "--config.train.checkpoint_every=10")
  lines = result.stderr.strip().splitlines()
  assert result.returncode == 1 and len(lines) == 1, result.stderr[-3000:]
  assert lines[0].startswith(("error: cannot write", "error: saving a checkpoint")), lines
  assert "No space left" in lines[0] or "RESOURCE_EXHAUSTED" in lines[0], lines
  assert time.monotonic() - started < 240
  assert "\r" not in result.stderr  # no progress-bar updates in a log (stderr not a tty)
  saved = sorted(p.name for p in (workdir / "checkpoints").iterdir() if p.name.isdigit())
  assert saved  # what was saved before the disk filled


def test_a_read_only_workdir_is_one_line(small_config, data_dir, tmp_path, tmpfs):
  disk = tmpfs("readonly", "size=4m")
  train_and_evaluate(small_config, str(disk / "run"))
  before = tree_hash(disk / "run")
  subprocess.run(["mount", "-o", "remount,ro", str(disk)], check=True)
  result = run_cli("--workdir", str(disk / "run"), f"--config.data.data_dir={data_dir}",
                   "--config.data.name=mnist1d", "--config.train.num_steps=40")
  lines = result.stderr.strip().splitlines()
  assert result.returncode == 1 and len(lines) == 1, result.stderr[-3000:]
  assert lines[0].startswith(f"error: cannot write {disk / 'run'}") and "Read-only" in lines[0]
  assert tree_hash(disk / "run") == before


def test_a_metrics_file_that_cannot_be_written_is_one_line(data_dir, tmp_path):
  """A full disk at the metrics file, without a mount: the file is /dev/full."""
  workdir = tmp_path / "run"
  workdir.mkdir()
  (workdir / "metrics.jsonl").symlink_to("/dev/full")
  result = run_cli("--workdir", str(workdir), f"--config.data.data_dir={data_dir}",
                   "--config.data.name=mnist1d", "--config.train.num_steps=20")
  lines = result.stderr.strip().splitlines()
  assert result.returncode == 1 and len(lines) == 1, result.stderr[-3000:]
  assert lines[0].startswith(f"error: cannot write {workdir / 'metrics.jsonl'}: No space left")
  assert "\r" not in result.stderr  # and no progress bar updates in a log
