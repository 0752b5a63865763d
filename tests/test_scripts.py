"""The drivers in scripts/ run end to end (shrunk), and a measured step time works."""

import importlib.util
import json
import os
import subprocess
import sys

import numpy as np
import pytest

from configs import _strategies
from odsgd_jax.cluster import validation as clock_validation
from odsgd_jax.cluster import PRESETS
from odsgd_jax.train import read_metrics, train_and_evaluate

REPO = os.path.dirname(os.path.dirname(os.path.abspath(__file__)))


@pytest.fixture(autouse=True)
def _scripts_read_the_sessions_data(data_dir, monkeypatch):
  """Scripts run without a data folder read TFDS_DATA_DIR: this session's, where the data
  sets are prepared once, not ~/tensorflow_datasets (on a fresh machine each script would
  prepare them again there)."""
  monkeypatch.setenv("TFDS_DATA_DIR", data_dir)


def _script(*args, timeout=600):
  result = subprocess.run([sys.executable, *args], cwd=REPO, capture_output=True, text=True,
                          timeout=timeout)
  assert result.returncode == 0, result.stderr[-2000:]
  return result


def test_compare_writes_tables_with_intervals_and_a_plot(data_dir, tmp_path):
  _script("scripts/compare.py", "--config", "configs/oscars_heterogeneous.py:steps=24",
          "--strategies", "ssgd,oscars", "--eval_every", "8", "--targets", "50%,0.5",
          "--primary", "50%", "--pilot_seeds", "7", "--seeds", "0,1", "--processes", "2",
          "--set", f"data.data_dir={data_dir}", "--set", "data.name=mnist1d",
          "--output", str(tmp_path))
  table = (tmp_path / "compare.md").read_text()
  assert "| ssgd |" in table and "| oscars |" in table and " ± " in table
  assert "non-inferior to ssgd at -1 point" in table
  assert "speedup to 50% (primary)" in table and "speedup to 0.5" in table  # both targets
  assert "on pilot seeds 7, not among the compared ones" in table
  assert "2 seeds (0, 1)" in table and "jax " in table
  # equal time: oscars, cheaper per tick on this cluster, takes more than ssgd's 24 steps
  assert "trained until it had spent ssgd's simulated time" in table
  assert "| ssgd | 24 |" in table and "| oscars | 24 |" not in table
  assert "known to within " in table
  assert (tmp_path / "compare.png").stat().st_size > 10_000
  runs = json.loads((tmp_path / "study.json").read_text())["runs"]
  assert sorted((r["label"], r["seed"]) for r in runs) == [
      ("oscars", 0), ("oscars", 1), ("ssgd", 0), ("ssgd", 1)]
  pilots = json.loads((tmp_path / "pilot" / "study.json").read_text())["runs"]
  assert [(r["label"], r["seed"]) for r in pilots] == [("ssgd", 7)]


def test_results_and_sweep_take_seeds(tmp_path):
  _script("scripts/results.py", "--config", "configs/mnist1d.py:steps=6", "--strategies", "ssgd",
          "--seeds", "0,1", "--eval_every", "3", "--processes", "1", "--output",
          str(tmp_path / "results"))
  assert "| ssgd |" in (tmp_path / "results" / "compare.md").read_text()
  _script("scripts/sweep.py", "--config", "configs/default.py:ssgd,steps=6", "--grid",
          "optimizer.learning_rate=0.05,0.1", "--seeds", "0", "--eval_every", "3",
          "--processes", "1", "--output", str(tmp_path / "sweep"))
  table = (tmp_path / "sweep" / "compare.md").read_text()
  assert "| optimizer.learning_rate=0.05 |" in table and "| optimizer.learning_rate=0.1 |" in table
  assert "final validation accuracy" in table and "best on validation" in table


def test_scaling_from_timelines(tmp_path):
  result = _script("scripts/scaling.py", "--output", str(tmp_path))
  assert (tmp_path / "scaling.png").stat().st_size > 10_000
  assert "| ssgd |" in result.stdout and "93.4%" in result.stdout
  assert "**Weak scaling**" in result.stdout and "**Strong scaling**" in result.stdout
  band = f"± {clock_validation.known_transport_error():.1f}"
  assert "| 10gbe † (N" in result.stdout  # TCP's share: one fitted family
  cells = [line for line in result.stdout.splitlines() if line.startswith("| ssgd |")]
  assert len(cells) == 2 and all(line.count(band) == 3 * len(PRESETS) for line in cells)


def test_claims_report_has_a_verdict_for_every_claim_defaults_and_tuned(data_dir, tmp_path):
  claims = ("scripts/claims.py", "--data", "mnist1d", "--variant", "steps=6", "--eval_every",
            "3", "--seeds", "0,1", "--pilot_seeds", "100", "--processes", "1",
            "--replication_seeds", "2,3",
            "--set", f"data.data_dir={data_dir}",
            # the standard split: 1,000 test signals evaluate faster than 12,000
            "--set", "data.name=mnist1d", "--output", str(tmp_path))
  result = _script(*claims)
  table, _, detail = result.stdout.partition("**MNIST-1D, CNN1D: defaults** (")
  rows = [line for line in table.splitlines() if line.startswith("| ") and
          line.split(" | ")[0] in ("| OD-SGD", "| Pseudo-sync", "| Oscars")]
  assert len(rows) == 9
  assert ("| paper | claim | MNIST-1D, CNN1D: defaults | MNIST-1D, CNN1D: defaults, "
          "replication seeds 2,3 | MNIST-1D, CNN1D: tuned |") in table
  assert all(any(v in row for v in ("**holds", "**does not hold", "**inconclusive"))
             for row in rows)
  assert sum("not tuned yet: `python scripts/tune.py --data mnist1d`" in row
             for row in rows) == 6
  assert "near-linear (strong) scalability using 128 nodes" in table
  speed = [row for row in detail.splitlines() if "speedup over" in row]
  assert len(speed) == 8 and all("robust to the clock: " in row for row in speed)  # 2 columns
  # each arm's simulated time; every target's resolution, per arm and per ratio
  assert all("simulated time of the runs (s) " in row for row in speed)
  for target in ("90%", "95%", "99%"):
    assert detail.count(f"- resolution at {target} (") == 4  # 2 columns x 2 clusters
  assert "ratios odsgd/ssgd " in detail and "ratios oscars/ssgd " in detail
  # the chance that each accuracy verdict replicates, and the timing noise's size
  assert "| same verdict on 2 fresh seeds | command |" in detail
  # whether the replication seeds behave like the primary ones, once per accuracy claim
  agree = detail.partition("Do the seed sets agree?")[2]
  assert agree.count("on seeds 0,1, ") == 4 and agree.count("Welch two-sided p") == 4
  assert "the runs' simulated times vary by at most " in result.stdout
  assert "targets (homogeneous: " in detail and "Holm" in table
  # the caption above the table: at most five lines, the detail in docs
  caption = table[table.index("Produced by"):].partition("\n\n| paper |")[0].splitlines()
  assert len(caption) <= 5 and "docs/results.md" in caption[-1]
  assert "| at a 0.5-point margin |" in detail and "known to within" in detail
  # equal time: oscars (heterogeneous cluster) takes more steps than ssgd's 6
  steps = detail.partition("steps at equal time, seed 0: ")[2].partition(" (heterogeneous)")[0]
  assert steps.startswith("ssgd 6/") and "oscars 6" not in steps.partition("(homogeneous)")[2]
  assert " ± 0.0 " not in result.stdout and "±0.0" not in result.stdout
  # tuned settings (as scripts/tune.py writes them): the tuned column is decided too
  tuned = {"homogeneous": {"ssgd": {"optimizer.learning_rate": 0.05},
                           "odsgd": {"strategy.correction": "spike"},
                           "asgd": {}, "pseudo_sync": {}},
           "heterogeneous": {"ssgd": {}, "local_sgd": {"strategy.period": 2}, "oscars": {}}}
  (tmp_path / "tuned.json").write_text(json.dumps(tuned))
  result = _script(*claims, "--resume")
  table = result.stdout.partition("**MNIST-1D, CNN1D: defaults** (")[0]
  assert "not tuned yet" not in table
  assert "odsgd correction=spike" in table and "local_sgd period=2" in table
  assert ("homogeneous cluster: ssgd learning_rate=0.05;" in table
          and "heterogeneous cluster: ssgd defaults;" in table)
  assert (tmp_path / "homogeneous_tuned" / "runs" / "odsgd_seed1" / "summary.json").exists()
  # asgd tuned to its defaults: its default run copied (a retrained one has its own wall time)
  summaries = [(tmp_path / folder / "runs" / "asgd_seed1" / "summary.json").read_text()
               for folder in ("homogeneous", "homogeneous_tuned")]
  assert summaries[0] == summaries[1]


def test_measured_step_time_drives_the_clock(small_config, tmp_path):
  config = _strategies.use_strategy(small_config, "ssgd")
  config.cluster.step_time = 0.0  # measure this host's compiled step
  config.cluster.compute_scale = 2.0
  summary = train_and_evaluate(config, str(tmp_path / "run"))
  assert 0 < summary["sim_step_time_s"] < 10
  assert summary["sim_time_s"] > summary["steps"] * summary["sim_step_time_s"]  # + all-reduces


def test_compare_compressors_writes_bits_table(tmp_path):
  _script("scripts/compare.py", "--config", "configs/default.py:steps=12", "--strategies", "ssgd",
          "--compressions", "none;topk:0.05,momentum=0.9", "--eval_every", "6",
          "--seeds", "0", "--processes", "1", "--set", "data.name=mnist1d",
          "--output", str(tmp_path))
  table = (tmp_path / "compare.md").read_text()
  assert "| none | 238,720 | 1.0x |" in table and "| topk:0.05,momentum=0.9 |" in table
  assert len(list((tmp_path / "runs").glob("*_seed0"))) == 2
  assert (tmp_path / "compare.png").stat().st_size > 10_000


def test_benchmark_writes_its_table_and_nothing_recompiles(tmp_path):
  result = subprocess.run(
      [sys.executable, "scripts/benchmark.py", "--models", "cnn1d", "--steps", "3",
       "--entries", "ssgd,local_sgd (non-sync steps),ssgd + topk:0.01", "--data_steps", "20",
       "--data_repeats", "1",
       "--output", str(tmp_path)],
      cwd=REPO, capture_output=True, text=True, timeout=600,
  )
  assert result.returncode == 0, result.stderr[-2000:]
  report = json.loads((tmp_path / "benchmark.json").read_text())
  rows = {row["entry"]: row for row in report["rows"]}
  baselines = ["baseline: jit + NamedSharding", "baseline: shard_map + pmean"]
  assert set(rows) == {*baselines, "ssgd", "local_sgd (non-sync steps)", "ssgd + topk:0.01"}
  # The faster plain formulation is the 1.00x that every ratio is taken against.
  faster = min(baselines, key=lambda name: rows[name]["step_ms"])
  assert [rows[name]["baseline"] for name in baselines] == [name == faster for name in baselines]
  assert rows[faster]["ratio"] == 1.0
  strategies = [row for row in report["rows"] if "baseline" not in row]
  assert all(row["compiles_after_first_step"] == 0 for row in strategies)
  assert rows["ssgd"]["state_copies"] == 1.0  # momentum; topk adds its residual (+ 2 scalars)
  assert rows["ssgd + topk:0.01"]["state_copies"] == pytest.approx(2.0, abs=1e-3)
  assert all(row["step_ms"] > 0 and row["compile_s"] > 0 for row in report["rows"])
  # The compiled entry computation's operations: convolutions, fusions, the all-reduce...
  assert all(0 <= row["operations"]["copies"] < row["operations"]["run"] and
             row["operations"]["run"] >= 8 for row in report["rows"])  # CNN1D: 4 layers
  assert 0 <= report["data_wait_fraction"] < 1 and 0 < report["input_host_fraction"] < 1
  assert "| cnn1d | ssgd |" in (tmp_path / "benchmark.md").read_text()


def test_benchmark_times_the_language_model_with_adamw(tmp_path):
  """The transformer's rows: next-token batches, AdamW in the baselines and the strategy
  (its state is two model copies, Adam's moments), no data wait when told so."""
  result = subprocess.run(
      [sys.executable, "scripts/benchmark.py", "--models", "transformer", "--steps", "2",
       "--entries", "ssgd", "--data_repeats", "0", "--output", str(tmp_path)],
      cwd=REPO, capture_output=True, text=True, timeout=600,
  )
  assert result.returncode == 0, result.stderr[-2000:]
  report = json.loads((tmp_path / "benchmark.json").read_text())
  rows = {row["entry"]: row for row in report["rows"]}
  assert rows["ssgd"]["state_copies"] == pytest.approx(2.0, abs=1e-3)
  assert rows["ssgd"]["compiles_after_first_step"] == 0
  assert report["data_wait_fraction"] is None
  text = (tmp_path / "benchmark.md").read_text()
  assert "| transformer | ssgd |" in text and "--data_repeats 0" in text
  assert "waiting for data" not in text


def _load_script(name):
  spec = importlib.util.spec_from_file_location(name, os.path.join(REPO, "scripts", f"{name}.py"))
  module = importlib.util.module_from_spec(spec)
  spec.loader.exec_module(module)
  return module


def test_the_switch_probe_reads_each_tick_and_leaves_the_run_as_it_was(small_config, tmp_path):
  """scripts/switch_dynamics.py: a row per tick of the window, read between steps; the first
  delayed tick has nothing pending (no global update) and the workers leave W only from the
  switch on; the run's losses are those of a run without the probe."""
  switch = _load_script("switch_dynamics")
  small_config.strategy.warmup_steps = 5
  rows = switch.probe_run(small_config, str(tmp_path / "probed"), first=3, last=10, probe=64,
                          hessian_every=4, power_iterations=5)
  assert [row["step"] for row in rows] == list(range(3, 11))
  by_step = {row["step"]: row for row in rows}
  assert by_step[6]["global_update_norm"] == 0.0  # tick 5, the first delayed: nothing pending
  assert all(by_step[s]["distance_x_max"] < 1e-6 for s in (3, 4, 5))  # synchronous
  assert all(by_step[s]["distance_x_mean"] > 1e-4 for s in range(6, 11))
  assert all(np.isfinite(row["top_hessian_eigenvalue"]) and row["top_hessian_eigenvalue"] > 0
             for row in rows if "top_hessian_eigenvalue" in row)
  assert sorted(s for s, row in by_step.items() if "lr_times_h" in row) == [3, 7]
  train_and_evaluate(small_config, str(tmp_path / "plain"))
  losses = {name: {row["step"]: row["loss"] for row in read_metrics(str(tmp_path / name))
                   if "loss" in row} for name in ("probed", "plain")}
  assert len(losses["probed"]) >= 9
  assert all(losses["plain"][step] == loss for step, loss in losses["probed"].items())


def test_the_drawdown_is_the_largest_fall_below_the_best_so_far_within_its_window():
  remedies = _load_script("switch_remedies")
  rows = [{"step": s, "validation_accuracy": a} for s, a in
          [(50, 0.9), (100, 0.5), (200, 0.8), (240, 0.3), (300, 0.9), (1200, 0.0)]]
  assert remedies.drawdown(rows) == pytest.approx(0.5)  # 0.8 at 200, 0.3 at 240
