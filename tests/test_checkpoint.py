"""A checkpoint that is another run's, or damaged, stops the run with one message
and is left exactly as it was."""

import hashlib
import os
import shutil
import subprocess
import sys

import pytest

from configs import _strategies
from odsgd_jax.train import CheckpointError, train_and_evaluate

REPO = os.path.dirname(os.path.dirname(os.path.abspath(__file__)))


def _fingerprint(directory):
  """Every file under `directory` with the hash of its bytes."""
  found = {}
  for root, _, files in os.walk(directory):
    for name in files:
      path = os.path.join(root, name)
      with open(path, "rb") as f:
        found[os.path.relpath(path, directory)] = hashlib.sha256(f.read()).hexdigest()
  return found


@pytest.fixture
def finished_run(small_config, tmp_path):
  config = _strategies.use_strategy(small_config, "odsgd")
  config.train.num_steps = config.train.checkpoint_every = config.train.eval_every = 4
  workdir = str(tmp_path / "run")
  train_and_evaluate(config, workdir)
  return config, workdir


def _change(config, change):
  if change == "strategy":
    return _strategies.use_strategy(config, "ssgd")
  if change == "model":
    config.model.channels = 8
  elif change == "workers":
    config.cluster.num_workers = 16
  elif change == "compression":
    config.strategy.compression = "topk:0.1"
  return config


@pytest.mark.parametrize("change,expected", [
    ("strategy", "strategy: checkpoint 'odsgd', config 'ssgd'"),
    ("model", "model.channels: checkpoint None, config 8"),
    ("workers", "num_workers: checkpoint 8, config 16"),
    ("compression", "compression: checkpoint 'none', config 'topk:0.1'"),
])
def test_a_checkpoint_of_another_run_is_named_and_kept(finished_run, change, expected):
  config, workdir = finished_run
  config.train.num_steps = 8  # would train on and save, were the checkpoint accepted
  before = _fingerprint(workdir + "/checkpoints")
  with pytest.raises(CheckpointError) as error:
    train_and_evaluate(_change(config, change), workdir)
  assert expected in str(error.value) and "another --workdir" in str(error.value)
  assert _fingerprint(workdir + "/checkpoints") == before


def _damage(workdir: str, damage: str) -> None:
  """Damages the run's checkpoint of step 4 (or its folder) the way `damage` says."""
  step_dir = os.path.join(workdir, "checkpoints", "4")
  state_dir = os.path.join(step_dir, "state")
  victim = max((os.path.join(root, name) for root, _, files in os.walk(state_dir)
                for name in files), key=os.path.getsize)  # the array data
  if damage == "truncate":
    with open(victim, "r+b") as f:
      f.truncate(os.path.getsize(victim) // 3)
  elif damage == "delete":
    os.remove(victim)
  elif damage == "garbled progress":
    for root, _, files in os.walk(os.path.join(step_dir, "progress")):
      for name in files:
        with open(os.path.join(root, name), "w") as f:
          f.write("{not json")
  elif damage == "state is a file":
    shutil.rmtree(state_dir)
    with open(state_dir, "w") as f:
      f.write("not a folder")
  elif damage == "checkpoints is a file":
    shutil.rmtree(os.path.dirname(step_dir))
    with open(os.path.dirname(step_dir), "w") as f:
      f.write("not a folder")


DAMAGES = {
    "truncate": r"checkpoints/4 (does not fit|is unreadable)",
    "delete": r"checkpoints/4 (does not fit|is unreadable)",
    "garbled progress": r"checkpoints/4 is unreadable",
    "state is a file": r"checkpoints/4 (does not fit|is unreadable)",
    "checkpoints is a file": r"checkpoints is a file, not the run's checkpoint folder",
}


# A truncated array leaves orbax's read coroutines abandoned: the command hides their
# "Exception ignored" noise (abandoned_save_noise_hidden, checked below), a library call not.
@pytest.mark.filterwarnings("ignore::pytest.PytestUnraisableExceptionWarning")
@pytest.mark.parametrize("damage", sorted(DAMAGES))
def test_a_damaged_checkpoint_is_named_and_kept(finished_run, damage):
  config, workdir = finished_run
  _damage(workdir, damage)
  before = _tree(workdir)
  config.train.num_steps = 8
  with pytest.raises(CheckpointError, match=DAMAGES[damage]):
    train_and_evaluate(config, workdir)
  assert _tree(workdir) == before


def _tree(workdir):
  checkpoints = os.path.join(workdir, "checkpoints")
  if os.path.isfile(checkpoints):
    with open(checkpoints, "rb") as f:
      return hashlib.sha256(f.read()).hexdigest()
  with open(os.path.join(workdir, "config.json"), "rb") as f:
    return _fingerprint(checkpoints), hashlib.sha256(f.read()).hexdigest()


@pytest.mark.parametrize("damage", [None, "truncate"])
def test_the_command_line_says_it_in_one_line(finished_run, damage):
  config, workdir = finished_run
  if damage:
    _damage(workdir, damage)
  result = subprocess.run(
      [sys.executable, "-m", "experiments.train", "--config",
       "configs/default.py:odsgd" if damage else "configs/mnist1d.py:ssgd",
       "--workdir", workdir, "--config.train.progress_bar=False",
       f"--config.data.data_dir={config.data.data_dir}"],
      cwd=REPO, capture_output=True, text=True, timeout=300,
      env={**os.environ, "JAX_PLATFORMS": "cpu", "JAX_NUM_CPU_DEVICES": "8"})
  assert result.returncode == 1
  lines = result.stderr.strip().splitlines()  # orbax's own tracebacks are not shown
  expected = "checkpoints/4" if damage else "strategy: checkpoint 'odsgd', config 'ssgd'"
  assert len(lines) == 1 and lines[0].startswith("error:") and expected in lines[0], \
      result.stderr[-3000:]


def test_an_abandoned_orbax_tasks_report_is_hidden_and_others_are_not(caplog):
  """asyncio reports a failed task nobody awaited through its logger: the run's entry
  points hide orbax's (the run said in one line why the save failed), not any other."""
  import logging

  from odsgd_jax.train import abandoned_save_noise_hidden
  log = logging.getLogger("asyncio")
  orbax_task = ("Task exception was never retrieved\nfuture: <Task finished coro=<create() "
                "defined at /site-packages/orbax/checkpoint/_src/path/atomicity.py:499>>")
  hook = sys.unraisablehook
  with caplog.at_level(logging.ERROR, logger="asyncio"):
    with abandoned_save_noise_hidden():
      assert sys.unraisablehook is not hook
      log.error(orbax_task)
      log.error("Task exception was never retrieved\nfuture: <Task finished coro=<mine()>>")
    log.error(orbax_task)  # outside the block: reported as before
  assert sys.unraisablehook is hook
  assert [r.getMessage().splitlines()[1] for r in caplog.records] == [
      "future: <Task finished coro=<mine()>>", orbax_task.splitlines()[1]]
