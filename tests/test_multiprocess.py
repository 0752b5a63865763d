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
  """Overrides of configs/default.py: odsgd, 4 workers, seconds of work."""
  values = {"data.data_dir": data_dir, "cluster.num_workers": 4, "data.batch_size": 32,
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
def _launch(workdir, values, num_processes, devices_per_process, logs):
  """Starts `num_processes` trainers (one plain process when 1); kills them on exit."""
  env = {**os.environ, "JAX_PLATFORMS": "cpu", "JAX_NUM_CPU_DEVICES": str(devices_per_process),
         "PYTHONUNBUFFERED": "1"}
  port = _free_port()
  processes = []
  try:
    for index in range(num_processes):
      command = [sys.executable, "-m", "experiments.train", "--config", "configs/default.py",
                 "--workdir", str(workdir), *[f"--config.{k}={v}" for k, v in values.items()]]
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


def test_a_killed_process_ends_the_other_with_a_message_and_a_rerun_resumes(data_dir, tmp_path):
  values = _small(data_dir, **{"train.num_steps": 160, "train.eval_every": 160,
                               "train.checkpoint_every": 20})
  workdir = tmp_path / "run"
  with _launch(workdir, values, 2, 2, tmp_path) as processes:
    _wait_for(lambda: (workdir / "checkpoints" / "40").exists())
    processes[1].kill()  # SIGKILL: no chance to save or say goodbye
    started = time.monotonic()
    assert processes[0].wait(timeout=60) != 0
    assert time.monotonic() - started < 60
  log = (tmp_path / "process0.log").read_text()
  # Usually the survivor's collective fails and it says so in one line. When the peer dies
  # in the middle of a message, gloo itself may abort the survivor first (C++
  # "Received data size doesn't match"): still a bounded, non-zero exit, but gloo's words.
  named = ("another process of this run has probably died", "heartbeat",
           "Received data size doesn't match")
  assert any(words in log for words in named), log[-3000:]
  saved = sorted(int(name) for name in os.listdir(workdir / "checkpoints") if name.isdigit())
  assert saved and saved[-1] < 160
  with _launch(workdir, values, 2, 2, tmp_path) as processes:
    assert _wait_all(processes) == [0, 0], (tmp_path / "process0.log").read_text()[-3000:]
  assert _metric_steps(workdir) == list(range(1, 161))  # resumed where the checkpoint was
  assert json.loads((workdir / "summary.json").read_text())["steps"] == 160


def _lines(path):
  return path.read_text().splitlines() if path.exists() else []
