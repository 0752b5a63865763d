"""The drivers in scripts/ run end to end (shrunk), and a measured step time works."""

import json
import os
import subprocess
import sys

import pytest

from configs import _strategies
from odsgd_jax.train import train_and_evaluate

REPO = os.path.dirname(os.path.dirname(os.path.abspath(__file__)))


def test_compare_writes_table_and_plot(tmp_path):
  result = subprocess.run(
      [sys.executable, "scripts/compare.py", "--config", "configs/oscars_heterogeneous.py",
       "--strategies", "ssgd,oscars", "--steps", "24", "--eval_every", "8", "--target", "ssgd",
       "--output", str(tmp_path)],
      cwd=REPO, capture_output=True, text=True, timeout=600,
  )
  assert result.returncode == 0, result.stderr[-2000:]
  table = (tmp_path / "compare.md").read_text()
  assert "| ssgd |" in table and "| oscars |" in table and "1.00x" in table
  assert (tmp_path / "compare.png").stat().st_size > 10_000


def test_measured_step_time_drives_the_clock(small_config, tmp_path):
  config = _strategies.use_strategy(small_config, "ssgd")
  config.cluster.step_time = 0.0  # measure this host's compiled step
  config.cluster.compute_scale = 2.0
  summary = train_and_evaluate(config, str(tmp_path / "run"))
  assert 0 < summary["sim_step_time_s"] < 10
  assert summary["sim_time_s"] > summary["steps"] * summary["sim_step_time_s"]  # + all-reduces


def test_compare_compressors_writes_bits_table(tmp_path):
  result = subprocess.run(
      [sys.executable, "scripts/compare.py", "--config", "configs/default.py",
       "--strategies", "ssgd", "--compressions", "none;topk:0.05,momentum=0.9", "--steps",
       "12", "--eval_every", "6", "--seeds", "0,1", "--output", str(tmp_path)],
      cwd=REPO, capture_output=True, text=True, timeout=600,
  )
  assert result.returncode == 0, result.stderr[-2000:]
  table = (tmp_path / "compare.md").read_text()
  assert "| none | 238,720 | 1.0x |" in table and "| topk:0.05,momentum=0.9 |" in table
  assert "2 seed(s)" in table and len(list(tmp_path.glob("none_seed*"))) == 2
  assert (tmp_path / "compare.png").stat().st_size > 10_000


def test_benchmark_writes_its_table_and_nothing_recompiles(tmp_path):
  result = subprocess.run(
      [sys.executable, "scripts/benchmark.py", "--models", "cnn1d", "--steps", "3",
       "--entries", "ssgd,local_sgd (non-sync steps),ssgd + topk:0.01", "--data_steps", "20",
       "--output", str(tmp_path)],
      cwd=REPO, capture_output=True, text=True, timeout=600,
  )
  assert result.returncode == 0, result.stderr[-2000:]
  report = json.loads((tmp_path / "benchmark.json").read_text())
  rows = {row["entry"]: row for row in report["rows"]}
  assert set(rows) == {"baseline (jit + pmean, optax.sgd momentum)", "ssgd",
                       "local_sgd (non-sync steps)", "ssgd + topk:0.01"}
  assert all(row["compiles_after_first_step"] == 0 for row in report["rows"][1:])
  assert rows["ssgd"]["state_copies"] == 1.0  # momentum; topk adds its residual (+ 2 scalars)
  assert rows["ssgd + topk:0.01"]["state_copies"] == pytest.approx(2.0, abs=1e-3)
  assert all(row["step_ms"] > 0 and row["compile_s"] > 0 for row in report["rows"])
  assert 0 <= report["data_wait_fraction"] < 1 and 0 < report["input_host_fraction"] < 1
  assert "| cnn1d | ssgd |" in (tmp_path / "benchmark.md").read_text()
