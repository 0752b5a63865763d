"""The study driver: intervals, paired tests, time to target and grouping, against
values computed by hand; and a small grid run end to end."""

import json
import os
import math

import pytest

from odsgd_jax import study
from odsgd_jax.study import RunResult, RunSpec, verdicts

T_975_DF4 = 2.7764451051977987  # Student t quantile, 5 seeds


def test_mean_and_interval_by_hand():
  values = [0.94, 0.95, 0.93, 0.96, 0.92]
  interval = study.mean_ci(values)
  sd = math.sqrt(sum((v - 0.94) ** 2 for v in values) / 4)  # 0.015811
  assert interval.mean == pytest.approx(0.94)
  assert interval.half_width == pytest.approx(T_975_DF4 * sd / math.sqrt(5))
  assert interval.half_width == pytest.approx(0.019632, abs=1e-6)
  assert interval.format(4) == "0.9400 ± 0.0196"
  single = study.mean_ci([0.5])
  assert single.n == 1 and math.isnan(single.half_width) and single.format(2) == "0.50"
  # a figure that varies only by float rounding (a noiseless clock's time) prints plainly
  rounding = study.mean_ci([30.0, 30.0 + 1e-6, 30.0 - 1e-6])
  assert 0 < rounding.half_width and rounding.format(1) == "30.0"
  assert study.mean_ci([30.0, 30.2, 29.9]).format(1) == "30.0 ± 0.4"


def test_paired_test_by_hand():
  a = {0: 0.95, 1: 0.96, 2: 0.94, 3: 0.97, 4: 0.95}
  b = {0: 0.94, 1: 0.94, 2: 0.93, 3: 0.95, 4: 0.94}
  comparison = study.paired(a, b)
  # d = (0.01, 0.02, 0.01, 0.02, 0.01): mean 0.014, sample sd sqrt(120e-6 / 4) = 0.0054772,
  # standard error 0.0054772 / sqrt(5) = 0.0024495, t = 5.7155, t_{0.975, 4} = 2.7764
  assert comparison.difference.mean == pytest.approx(0.014)
  assert comparison.difference.half_width == pytest.approx(2.7764 * 0.0024495, rel=1e-4)
  assert comparison.p_value == pytest.approx(0.004636, abs=1e-5)  # 2 * P(T_4 > 5.7155)
  assert comparison.significant
  noisy = study.paired({0: 0.95, 1: 0.93, 2: 0.96}, {0: 0.94, 1: 0.95, 2: 0.95})
  assert not noisy.significant  # differences +1, -2, +1 points: p = 1.0
  assert noisy.p_value == pytest.approx(1.0)
  same = study.paired({0: 0.9, 1: 0.8}, {0: 0.9, 1: 0.8})
  assert same.p_value == 1.0 and not same.significant
  assert study.paired({0: 0.9, 3: 0.8}, {0: 0.8, 1: 0.7}).difference.n == 1  # seeds in common


def _run(label, seed, accuracy, curve, sim_time=10.0, idle=0.0, validation=None):
  """A finished run with evaluation rows (sim_time, accuracy) and a summary; with
  `validation`, the rows and the summary are those of a data set with that split."""
  metric = "test_accuracy" if validation is None else "validation_accuracy"
  evaluations = [{"step": 10 * (i + 1), "sim_time": t, metric: acc}
                 for i, (t, acc) in enumerate(curve)]
  summary = None if accuracy is None else {
      "test_accuracy": accuracy, "sim_time_s": sim_time, "steps": 100,
      "sim_time_fractions": {"communication": [0.5, 0.5], "idle": [idle, idle]}}
  if summary is not None and validation is not None:
    summary["validation_accuracy"] = validation
  return RunResult(RunSpec(label, "configs/default.py", seed), summary, evaluations,
                   None if accuracy else "diverged", "/nowhere")


def test_summarize_groups_and_pairs_by_hand():
  results = [
      _run("ssgd", 0, 0.90, [(1.0, 0.5), (2.0, 0.90)]),
      _run("ssgd", 1, 0.92, [(1.0, 0.6), (2.0, 0.92)]),
      _run("fast", 0, 0.91, [(0.5, 0.91), (1.0, 0.91)], idle=0.1),
      _run("fast", 1, 0.93, [(0.5, 0.80), (1.0, 0.93)], idle=0.3),
      _run("lost", 0, None, [(1.0, 0.3)]),
      _run("lost", 1, 0.20, [(1.0, 0.2)]),
  ]
  groups = study.summarize(results, "ssgd")
  ssgd, fast, lost = groups
  assert [g.label for g in groups] == ["ssgd", "fast", "lost"]
  assert fast.versus.difference.mean == pytest.approx(0.01)
  assert fast.idle.mean == pytest.approx(0.2) and ssgd.validation == {}
  assert lost.diverged == 1 and lost.score.n == 1
  table = study.accuracy_table(groups, "ssgd")
  # every seed's difference is +1.0 point: no interval on a figure that does not vary;
  # no spread and above the margin: non-inferior (p 0, exactly)
  assert ("| fast | 0.9200 ± 0.1271 | +1.0 | +1.0 | holds (Holm p < 0.001) | holds (Holm "
          "p < 0.001) | 0.910, 0.930 |") in table  # at 1 point and at the 0.5-point sensitivity
  # lost diverged on seed 0, which counts at chance (0.1 on digits' 10 classes): -80 and
  # -72 points, mean -76.0; t(1) 12.706 x sem 4.0 = 50.8; lower bound -76 - 6.314 x 4.0;
  # inferior by t = -18.75 on 1 degree of freedom, p 0.017, Holm x 2 = 0.034
  assert ("| lost | 0.2000 (1 of 2 diverged) | -76.0 ± 50.8 | -101.3 | does not hold (Holm "
          "p = 0.034)") in table
  assert "diverged, 0.200" in table


def test_targets_are_shares_of_the_pilots_and_times_are_censored_by_hand():
  pilots = study.summarize([_run("ssgd", 100, 0.9, [(1.0, 0.7)], validation=0.80),
                            _run("ssgd", 101, 0.9, [(1.0, 0.7)], validation=0.90)])[0]
  goals = study.targets(["50%", "0.7"], pilots)
  assert goals == {"50%": pytest.approx(0.425), "0.7": 0.7}
  with pytest.raises(ValueError, match="primary target '95%' is not among"):
    study.check_targets(["90%"], "95%")
  with pytest.raises(ValueError, match="'150%' must be a share"):
    study.check_targets(["150%"], "150%")
  results = [  # validation rows: the timed split
      _run("ssgd", 0, 0.9, [(1.0, 0.5), (2.0, 0.75)], sim_time=2.0, validation=0.75),
      _run("ssgd", 1, 0.9, [(1.0, 0.5), (2.0, 0.6)], sim_time=2.0, validation=0.6),
      _run("fast", 0, 0.9, [(0.5, 0.72), (1.0, 0.75)], sim_time=1.0, validation=0.75),
      _run("fast", 1, 0.9, [(0.5, 0.71), (1.0, 0.75)], sim_time=1.0, validation=0.75),
  ]
  ssgd, fast = study.summarize(results, "ssgd")
  assert study.arrivals(ssgd, 0.7) == {0: verdicts.Arrival(2.0, True, 2.0),
                                       1: verdicts.Arrival(2.0, False, 2.0)}  # censored
  assert study.reached(ssgd, 0.7) == (1, 2) and study.reached(fast, 0.7) == (2, 2)
  row = study.speed_row(fast, ssgd, {"0.7": 0.7})
  # both pairs cut at fast's end, 1.0: ssgd has not arrived by then, fast has at 0.5, so
  # each ratio is at least 1.0 / 0.5 = 2 (not 2.0 / 0.5: ssgd's time past the horizon)
  assert row["0.7"].speedup == pytest.approx(2.0)
  assert row["0.7"].baseline_censored == 1
  assert row["0.7"].p_faster == pytest.approx(1 / 4)  # two seeds, both faster: 1 of 4 flips
  table = study.time_table([ssgd, fast], "ssgd", {"0.7": 0.7}, "0.7")
  assert "| ssgd | 100 | 2.0 | 1 of 2 | - | - | 0.500 | 0.000 |" in table
  assert ("| fast | 100 | 1.0 | 2 of 2 | 2.00x (1 never reached by the baseline of 2) | "
          "**inconclusive**: 2.00x (1 never reached by the baseline of 2) to 0.7") in table
  table = study.time_table([ssgd, fast], "ssgd", {"0.7": 0.7}, "0.7", robust={"fast": "yes"})
  assert ("robust to the clock" in table
          and "| ssgd | 100 | 2.0 | 1 of 2 | - | - | - | 0.500 |" in table)
  assert "(Holm p = 0.250 for faster) | yes | 0.500 |" in table


def test_pilots_that_all_diverged_end_a_study_in_one_line(capsys):
  pilots = study.summarize([_run("ssgd", 100, None, [(1.0, 0.3)]),
                            _run("ssgd", 101, None, [(1.0, 0.2)])])[0]
  with pytest.raises(study.PilotsDivergedError) as error:
    study.targets(["95%"], pilots)
  message = str(error.value)
  assert "\n" not in message and "every pilot run of ssgd diverged (seeds 100, 101)" in message
  assert "learning_rate" in message
  with pytest.raises(SystemExit) as stop:
    study.run_main(lambda: study.targets(["95%"], pilots))
  assert stop.value.code == f"error: {message}"


def test_a_sweep_chooses_on_validation_and_reports_test():
  results = [
      _run("lr=0.1", 0, 0.90, [(1.0, 0.9)], validation=0.80),
      _run("lr=0.1", 1, 0.92, [(1.0, 0.9)], validation=0.82),
      _run("lr=0.2", 0, 0.95, [(1.0, 0.9)], validation=0.79),  # better on test only
      _run("lr=0.2", 1, 0.97, [(1.0, 0.9)], validation=0.81),
  ]
  table = study.sweep_table(study.summarize(results, "lr=0.1"))
  assert "| lr=0.1 | 0.8100 ± 0.1271 | - | yes | 0.9100 ± 0.1271 | - | 0.900, 0.920 |" in table
  assert "| lr=0.2 | 0.8000 ± 0.1271 | -1.0 |  | 0.9600 ± 0.1271 | +5.0 | 0.950, 0.970 |" in table


def test_grid_names_seeds_and_overrides():
  specs = study.grid({"a": ("configs/default.py:ssgd", [("optimizer.learning_rate", 0.05)])},
                     study.parse_seeds("0-2"), [("train.num_steps", 7)])
  assert [s.name for s in specs] == ["a_seed0", "a_seed1", "a_seed2"]
  config = specs[2].build()
  assert (config.strategy.name, config.optimizer.learning_rate, config.train.num_steps,
          config.train.seed) == ("ssgd", 0.05, 7, 2)
  assert config.cluster.seed == 2  # each seed resamples the cluster's noise
  pinned = study.RunSpec("a", "configs/default.py:ssgd", 2, (("cluster.seed", 9),)).build()
  assert (pinned.train.seed, pinned.cluster.seed) == (2, 9)  # unless an override pins it
  assert study.parse_seeds("0,3,5-6") == [0, 3, 5, 6]
  assert study.parse_value("(1, 2)") == (1, 2) and study.parse_value("ring") == "ring"


def test_a_project_config_loads_from_any_working_directory(tmp_path, monkeypatch):
  here = study.load_config("configs/default.py:pseudo_sync,runlocal")
  monkeypatch.chdir(tmp_path)  # no configs/ here: the installed package's is used
  assert study.load_config("configs/default.py:pseudo_sync,runlocal") == here
  with pytest.raises(FileNotFoundError, match="'configs/nosuch.py' does not exist"):
    study.load_config("configs/nosuch.py")


def test_a_study_runs_its_grid_and_writes_every_seed(data_dir, tmp_path):
  common = [("data.data_dir", data_dir), ("train.eval_every", 3)]
  specs = study.strategy_specs("configs/default.py:steps=6", ["ssgd"], [0, 1], common)
  results = study.run_study(specs, str(tmp_path))
  assert [(r.spec.label, r.spec.seed) for r in results] == [("ssgd", 0), ("ssgd", 1)]
  assert results[0].score != results[1].score  # another seed, another run
  assert [row["step"] for row in results[0].evaluations] == [3, 6]
  saved = json.loads((tmp_path / "study.json").read_text())
  assert [(row["label"], row["seed"]) for row in saved["runs"]] == [("ssgd", 0), ("ssgd", 1)]
  assert saved["runs"][1]["summary"]["test_accuracy"] == results[1].score
  again = study.run_study(specs[:1], str(tmp_path), resume=True)  # finished: kept as it was
  assert again[0].summary == results[0].summary


@pytest.mark.parametrize("users", [None, "true"])
def test_study_processes_take_gpu_memory_as_they_need_it(monkeypatch, users):
  """Several processes of a study share one GPU: each would otherwise take 75% of its
  memory at start. The scripts (`run_main`) set it before JAX starts, and the processes
  `run_study` starts inherit it; a user's own setting stays."""
  if users is None:
    monkeypatch.delenv("XLA_PYTHON_CLIENT_PREALLOCATE", raising=False)
  else:
    monkeypatch.setenv("XLA_PYTHON_CLIENT_PREALLOCATE", users)
  monkeypatch.setenv("XLA_FLAGS", os.environ.get("XLA_FLAGS", ""))
  seen = []
  study.run_main(lambda: seen.append(os.environ["XLA_PYTHON_CLIENT_PREALLOCATE"]))
  assert seen == [users or "false"]


def _lm_run(label, seed, loss, curve, sim_time=10.0):
  """A finished language-model run (configs/kjv_transformer.py: next-token prediction, its
  target the validation loss) with (sim_time, validation loss) rows."""
  evaluations = [{"step": 10 * (i + 1), "sim_time": t, "validation_loss": value}
                 for i, (t, value) in enumerate(curve)]
  summary = None if loss is None else {
      "test_loss": loss, "validation_loss": curve[-1][1], "sim_time_s": sim_time,
      "steps": 100, "sim_time_fractions": {"communication": [0.5, 0.5], "idle": [0.0, 0.0]}}
  return RunResult(RunSpec(label, "configs/kjv_transformer.py", seed), summary, evaluations,
                   None if loss else "diverged", "/nowhere")


def test_a_loss_task_is_compared_in_nats_with_lower_better_by_hand():
  results = [
      _lm_run("ssgd", 0, 1.60, [(1.0, 2.1), (2.0, 1.75)], sim_time=2.0),
      _lm_run("ssgd", 1, 1.62, [(1.0, 2.2), (2.0, 1.85)], sim_time=2.0),
      _lm_run("fast", 0, 1.58, [(0.5, 1.79), (1.0, 1.7)], sim_time=1.0),
      _lm_run("fast", 1, 1.61, [(0.5, 1.9), (1.0, 1.78)], sim_time=1.0),
      _lm_run("lost", 0, None, [(1.0, 3.0)]),
      _lm_run("lost", 1, 1.70, [(1.0, 2.0)]),
  ]
  ssgd, fast, lost = study.summarize(results, "ssgd")
  assert ssgd.target.name == "loss" and not ssgd.target.higher_is_better
  # scores are negated losses: fast is 0.02 and 0.01 nats lower, +0.015 nats better
  assert fast.versus.difference.mean == pytest.approx(0.015)
  assert fast.score.mean == pytest.approx(-1.595)
  # a diverged seed counts as a uniform guess over the 64 tokens: ln 64 = 4.159 nats
  assert lost.chance == pytest.approx(-math.log(64))
  table = study.accuracy_table([ssgd, fast, lost], "ssgd")
  assert ("| strategy | final test loss | vs ssgd (nats, + = loss lower) | one-sided 95% lower "
          "bound | non-inferior to ssgd at -0.05 nats | at -0.025 nats (sensitivity) |") in table
  # +0.020 and +0.010: mean +0.015, sd 0.00707, t(1) 12.706 x 0.005 = 0.064; lower bound
  # 0.015 - 6.314 x 0.005 = -0.017; against -0.05: t = 13, p = 0.024 one-sided, Holm x 2
  assert "| fast | 1.5950 ± 0.1906 | +0.015 ± 0.064 | -0.017 | holds (Holm p = 0.049) |" in table
  assert "| lost | 1.7000 (1 of 2 diverged) |" in table and "diverged, 1.700" in table
  # a loss target is a level reached from above; a share of a pilot's loss is refused
  study.check_targets(["2.0", "1.8"], "1.8", ssgd.target)
  with pytest.raises(ValueError, match="a level of the loss"):
    study.check_targets(["95%"], "95%", ssgd.target)
  assert study.arrivals(ssgd, 1.8) == {0: verdicts.Arrival(2.0, True, 2.0),
                                       1: verdicts.Arrival(2.0, False, 2.0)}  # censored
  assert study.arrivals(fast, 1.8) == {0: verdicts.Arrival(0.5, True, 1.0),
                                       1: verdicts.Arrival(1.0, True, 1.0)}
  text = study.time_table([ssgd, fast], "ssgd", {"1.8": 1.8}, "1.8")
  assert "| ssgd | 100 | 2.0 | 1 of 2 |" in text and "| fast | 100 | 1.0 | 2 of 2 |" in text
