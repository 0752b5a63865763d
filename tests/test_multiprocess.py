"""Beyond one process: jax.distributed on 127.0.0.1 (gloo), SIGTERM, a killed peer.

Every process started here is killed on every path out of its test, and every
wait has a timeout.
"""

import contextlib
import json
import os
import signal
import socket
import subprocess
import sys
import time

import jax
import numpy as np
import orbax.checkpoint as ocp
import pytest

from odsgd_jax.train import train_and_evaluate

REPO = os.path.dirname(os.path.dirname(os.path.abspath(__file__)))
WAIT_S = 180  # longest any one process may take


def _small(data_dir, **changes):
  """Overrides of configs/default.py: odsgd, 4 workers, seconds of work, on mnist1d's
  standard split (1000 test signals to evaluate, not 12,000 held-out ones)."""
  values = {"data.data_dir": data_dir, "data.name": "mnist1d", "cluster.num_workers": 4,
            "data.batch_size": 32,
            "train.num_steps": 6, "train.eval_every": 3, "train.checkpoint_every": 3,
            "train.progress_bar": False, "strategy.warmup_steps": 2}
  values.update(changes)
  return values


def _config(values):
  from configs import default
  config = default.get_config()
  for path, value in values.items():
    section, field = path.split(".")
    config[section][field] = value
  return config


def _free_port():
  with socket.socket() as s:
    s.bind(("127.0.0.1", 0))
    return s.getsockname()[1]


@contextlib.contextmanager
def _launch(workdir, values, num_processes, devices_per_process, logs, fault=()):
  """Starts `num_processes` trainers (one plain process when 1); kills them on exit.
  `fault`: flags of tests/peer_fault.py, which stops one of them at a chosen point."""
  env = {**os.environ, "JAX_PLATFORMS": "cpu", "JAX_NUM_CPU_DEVICES": str(devices_per_process),
         "PYTHONUNBUFFERED": "1"}
  port = _free_port()
  processes = []
  try:
    for index in range(num_processes):
      command = [sys.executable, "-m", "tests.peer_fault" if fault else "experiments.train",
                 *fault, "--config", "configs/default.py", "--workdir", str(workdir),
                 *[f"--config.{k}={v}" for k, v in values.items()]]
      if num_processes > 1:
        command += [f"--coordinator_address=127.0.0.1:{port}",
                    f"--num_processes={num_processes}", f"--process_id={index}",
                    "--heartbeat_timeout_s=5"]
      log = open(logs / f"process{index}.log", "w")  # noqa: SIM115 - closed with the process
      processes.append((subprocess.Popen(command, cwd=REPO, env=env, stdout=log,
                                         stderr=subprocess.STDOUT), log))
    yield [process for process, _ in processes]
  finally:
    for process, log in processes:
      if process.poll() is None:
        process.kill()
      process.wait(timeout=30)
      log.close()


def _wait_all(processes):
  return [process.wait(timeout=WAIT_S) for process in processes]


def _wait_for(path_exists, timeout=WAIT_S):
  deadline = time.monotonic() + timeout
  while not path_exists():
    if time.monotonic() > deadline:
      raise TimeoutError("the run never got there")
    time.sleep(0.05)


def _model(workdir):
  with ocp.StandardCheckpointer() as checkpointer:
    return checkpointer.restore(os.path.join(str(workdir), "model"))


def _metric_steps(workdir):
  with open(os.path.join(str(workdir), "metrics.jsonl")) as f:
    return [row["step"] for row in map(json.loads, f) if "loss" in row]


@pytest.mark.devices(4)  # the one-process run it is compared with
def test_two_processes_train_like_one(data_dir, tmp_path):
  """2 processes x 2 devices (gloo) == 1 process x 4 devices, odsgd, 4 workers."""
  values = _small(data_dir)
  train_and_evaluate(_config({**values, "parallel.num_devices": 4}), str(tmp_path / "one"))
  with _launch(tmp_path / "two", values, 2, 2, tmp_path) as processes:
    assert _wait_all(processes) == [0, 0], (tmp_path / "process0.log").read_text()[-3000:]
  one, two = _model(tmp_path / "one"), _model(tmp_path / "two")
  for a, b in zip(jax.tree.leaves(one), jax.tree.leaves(two), strict=True):
    np.testing.assert_allclose(a, b, atol=1e-6, rtol=0)
  assert _metric_steps(tmp_path / "two") == list(range(1, 7))  # process 0 alone wrote them


@pytest.mark.devices(4)  # the one-process run it is compared with
def test_sigterm_saves_a_checkpoint_exits_0_and_the_rerun_ends_as_if_never_stopped(
    data_dir, tmp_path):
  values = _small(data_dir, **{"train.num_steps": 400, "train.eval_every": 400,
                               "train.checkpoint_every": 400, "train.log_every": 1})
  workdir = tmp_path / "run"
  with _launch(workdir, values, 1, 4, tmp_path) as [process]:
    _wait_for(lambda: len(_lines(workdir / "metrics.jsonl")) > 20)
    process.send_signal(signal.SIGTERM)
    assert process.wait(timeout=60) == 0
  log = (tmp_path / "process0.log").read_text()
  assert "preempted: saved a checkpoint of step" in log
  saved = [int(name) for name in os.listdir(workdir / "checkpoints") if name.isdigit()]
  assert len(saved) == 1 and 20 < saved[0] < 400
  with _launch(workdir, values, 1, 4, tmp_path) as processes:
    assert _wait_all(processes) == [0]
  train_and_evaluate(_config({**values, "parallel.num_devices": 4}), str(tmp_path / "whole"))
  for a, b in zip(jax.tree.leaves(_model(workdir)), jax.tree.leaves(_model(tmp_path / "whole")),
                  strict=True):
    np.testing.assert_array_equal(a, b)
  assert _metric_steps(workdir) == list(range(1, 401))


# Where the peer stops, and what the survivor was doing when it found out. Killed between
# saves, the survivor's next collective fails at once; killed while the survivor waits
# inside a checkpoint save, that save's collective fails (not the folder: no advice to
# fix it); frozen, its sockets stay open, the survivor's collective never fails by
# itself, and the watch of the processes' beats speaks before JAX's runtime aborts.
PEER_STOPS = {
    "killed between saves": ("kill:step:45", "a collective between the 2 processes failed "
                             "while running step 45"),
    "killed during a save": ("kill:save:60", "a collective between the 2 processes failed "
                             "while saving the checkpoint of step 60"),
    "frozen": ("freeze:step:45", "process 1 of this run has given no sign of life for"),
}


@pytest.mark.parametrize("stop", PEER_STOPS)
def test_a_killed_or_frozen_process_ends_the_other_with_a_message_and_a_rerun_resumes(
    data_dir, tmp_path, stop):
  die_at, words = PEER_STOPS[stop]
  values = _small(data_dir, **{"train.num_steps": 80, "train.eval_every": 80,
                               "train.checkpoint_every": 20})
  workdir, note = tmp_path / "run", tmp_path / "stopped_at"
  with _launch(workdir, values, 2, 2, tmp_path,
               fault=[f"--die_at={die_at}", f"--die_note={note}"]) as processes:
    assert processes[0].wait(timeout=WAIT_S) == 1
    ended = time.time()
    stopped = float(note.read_text())
    if die_at.startswith("kill"):
      assert processes[1].wait(timeout=10) == -signal.SIGKILL
  assert ended - stopped < 30, "heartbeat 5 s: the survivor must not wait on the dead"
  log = (tmp_path / "process0.log").read_text()
  ours = [line for line in log.splitlines() if line.startswith("error:")]
  assert len(ours) == 1 and log.strip().splitlines()[-1] == ours[0], log[-3000:]
  assert ours[0].startswith(f"error: {words}"), ours[0]
  assert ours[0].endswith(f"Restart every process with the same command; the run resumes from "
                          f"its last complete checkpoint in {workdir}/checkpoints"), ours[0]
  assert "fix the folder" not in log
  saved = sorted(int(name) for name in os.listdir(workdir / "checkpoints") if name.isdigit())
  assert saved and saved[-1] <= 40
  with _launch(workdir, values, 2, 2, tmp_path) as processes:
    assert _wait_all(processes) == [0, 0], (tmp_path / "process0.log").read_text()[-3000:]
  assert _metric_steps(workdir) == list(range(1, 81))  # resumed where the checkpoint was
  assert json.loads((workdir / "summary.json").read_text())["steps"] == 80


def test_a_process_whose_peers_never_start_says_so_in_one_line(tmp_path):
  """Process 0 of 2, alone: the first barrier (joining) times out with one line, not
  with JAX's abort from C++."""
  command = [sys.executable, "-m", "experiments.train", "--config", "configs/default.py",
             "--workdir", str(tmp_path / "run"), f"--coordinator_address=127.0.0.1:{_free_port()}",
             "--num_processes=2", "--process_id=0", "--join_timeout_s=2"]
  result = subprocess.run(command, cwd=REPO, capture_output=True, text=True, timeout=WAIT_S,
                          env={**os.environ, "JAX_PLATFORMS": "cpu"})
  assert result.returncode == 1, result.stderr[-3000:]
  assert result.stderr.strip().splitlines()[-1].startswith(
      "error: waited 2 s for the other processes of this run to start"), result.stderr[-3000:]
  assert not (tmp_path / "run").exists()  # nothing was written


def _lines(path):
  return path.read_text().splitlines() if path.exists() else []
