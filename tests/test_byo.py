"""Bring your own model and task (docs/running.md): tests/byo_parity.py defines both outside
odsgd_jax, registers them, and is the config that `python -m experiments.train` trains."""

import json
import os
import subprocess
import sys

import pytest

REPO = os.path.dirname(os.path.dirname(os.path.abspath(__file__)))


@pytest.mark.parametrize("strategy", ["odsgd", "local_sgd"])
def test_a_users_model_and_task_train_with_a_strategy_from_their_own_file(tmp_path, strategy):
  workdir = tmp_path / "run"
  result = subprocess.run(
      [sys.executable, "-m", "experiments.train", f"--config=tests/byo_parity.py:{strategy}",
       f"--workdir={workdir}", "--config.train.num_steps=120", "--config.train.eval_every=60",
       "--config.train.progress_bar=False"],
      cwd=REPO, capture_output=True, text=True, timeout=300)
  assert result.returncode == 0, result.stderr[-2000:]
  rows = [json.loads(line) for line in (workdir / "metrics.jsonl").read_text().splitlines()]
  losses = [row["loss"] for row in rows if "loss" in row]
  assert all(loss == loss for loss in losses) and losses[-1] < losses[0]  # finite, falling
  summary = json.loads((workdir / "summary.json").read_text())
  assert summary["model"] == "residual_mlp"
  assert summary["test_accuracy"] > 0.6  # of even against odd digits, where chance is 0.5
  config = json.loads((workdir / "config.json").read_text())
  assert config["data"]["task"] == "digit_parity"


def test_an_unregistered_task_is_refused_with_the_registered_ones_named(tmp_path):
  result = subprocess.run(
      [sys.executable, "-m", "experiments.train", "--config=configs/default.py:ssgd",
       f"--workdir={tmp_path / 'run'}", "--config.data.task=parity"],
      cwd=REPO, capture_output=True, text=True, timeout=300)
  assert result.returncode != 0
  assert "data.task" in result.stderr and "classification" in result.stderr
  assert not (tmp_path / "run").exists()
