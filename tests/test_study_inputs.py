"""A study script's bad input is one line and exit status 1, before any run, with nothing
written: no output folder, no docs page or plot changed. The scripts run in this process
(runpy), as `python scripts/<name>.py` runs them: a traceback would fail the test as an
uncaught exception, and SystemExit carries the line the interpreter prints."""

import argparse
import dataclasses
import hashlib
import json
import pathlib
import runpy
import subprocess
import sys

import pytest

from odsgd_jax import study
from odsgd_jax.study import _runner
from odsgd_jax.train import ConfigError

REPO = pathlib.Path(__file__).resolve().parent.parent


def tree_hash(*folders: pathlib.Path) -> str:
  digest = hashlib.sha256()
  for folder in folders:
    for path in sorted(folder.rglob("*")):
      if ".git" in path.parts or "__pycache__" in path.parts or ".ruff_cache" in path.parts:
        continue
      digest.update(str(path).encode())
      if path.is_file():
        digest.update(path.read_bytes())
  return digest.hexdigest()


def run_script(monkeypatch, capsys, script: str, *args: str) -> tuple[object, str]:
  """(SystemExit's code, stderr) of scripts/<script>.py run with `args`."""
  monkeypatch.setattr(sys, "argv", [f"scripts/{script}.py", *args])
  with pytest.raises(SystemExit) as stopped:
    runpy.run_path(str(REPO / "scripts" / f"{script}.py"), run_name="__main__")
  return stopped.value.code, capsys.readouterr().err


CASES = [  # (script, arguments, what the line names)
    ("compare", ["--seeds", "5-2"], "--seeds '5-2': the range '5-2' runs backwards"),
    ("compare", ["--seeds", "3-1"], "--seeds '3-1': the range '3-1' runs backwards"),
    ("compare", ["--seeds", "abc"], "--seeds 'abc': 'abc' is not a seed"),
    ("compare", ["--seeds", "0,0"], "--seeds '0,0': seed 0 is given twice"),
    ("compare", ["--seeds", ""], "--seeds '': no seeds"),
    ("compare", ["--strategies", ""], "--strategies '': no strategy"),
    ("compare", ["--strategies", "nosuch"], "--strategies 'nosuch': unknown strategies"),
    ("compare", ["--seeds", "0-2", "--pilot_seeds", "2"], "--pilot_seeds 2 overlaps --seeds"),
    ("claims", ["--seeds", "0-1", "--pilot_seeds", "1"], "--pilot_seeds 1, on which"),
    ("claims", ["--seeds", "0-1", "--replication_seeds", "1-2"],
     "--replication_seeds 1-2 overlaps --seeds 0-1"),
    ("claims", ["--data", "mnist1d", "--replicate", "fashion_mnist"],
     "--replicate 'fashion_mnist': choose among"),
    ("compare", ["--targets", "abc"], "--targets 'abc' / --primary '95%': target 'abc'"),
    ("compare", ["--output", "{a_file}"], "--output '{a_file}' is a file"),
    ("compare", ["--set", "nosuch.field=1"], "the config 'configs/default.py:ssgd' has no "
     "section 'nosuch'"),
    ("compare", ["--set", "nofield"], "--set 'nofield' must look like section.field=value"),
    ("compare", ["--strategies", "odsgd", "--compressions", "none;topk:2.0"],
     "compression 'topk:2.0': topk=2.0 is out of range"),
    ("compare", ["--config", "configs/default.py:bogus"],
     "does not load: ValueError: unknown strategy 'bogus'"),
    ("compare", ["--config", "{noget}"], "has no get_config() function"),
    ("compare", ["--readme", "nosuch"], "--readme 'nosuch': the generated section 'nosuch'"),
    ("compare", ["--processes", "0"], "--processes 0: runs trained at once must be at least 1"),
    ("compare", ["--processes", "x"], "argument --processes: invalid int value: 'x'"),
    ("compare", ["--no_such_flag"], "unrecognized arguments: --no_such_flag"),
    ("compare", ["--config.data.name=x"], "unrecognized arguments"),
    ("sweep", ["--config", "configs/default.py", "--grid", "nosuch.x=1,2"],
     "has no section 'nosuch'"),
    ("sweep", ["--config", "configs/default.py", "--grid", "train.seed"],
     "--grid 'train.seed' must look like section.field=v1,v2"),
    ("sweep", ["--config", "configs/default.py", "--grid", "model.channels=0,4"],
     "model.channels=0 is out of range"),
    ("results", ["--seeds", "2-1"], "--seeds '2-1'"),
    ("claims", ["--processes", "0"], "--processes 0"),
    ("claims", ["--seeds", "0-1", "--set", "model.dropout_rate=1.5"],
     "model.dropout_rate=1.5 is out of range"),
    ("claims", ["--seeds", "0-1", "--variant", "bogus"], "unknown strategy 'bogus'"),
    ("claims", ["--data", "cifar10"], "--data 'cifar10': choose among mnist1d, fashion_mnist"),
    ("tune", ["--seeds", "0,300"], "--seeds 0,300 overlaps the pilot or compared seeds"),
    ("tune", ["--data", "cifar10"], "argument --data: invalid choice: 'cifar10'"),
    ("tune", ["--readme", "nosuch"], "--readme 'nosuch': the generated section 'nosuch'"),
    ("scaling", ["--workers", "1,abc"], "unrecognized arguments: --workers 1,abc"),
    ("plot_metrics", ["{run}", "--out", "{tmp}/missing/curves.png"],
     "--out {tmp}/missing/curves.png: the folder {tmp}/missing does not exist"),
    ("plot_metrics", ["{tmp}"], "{tmp} has no metrics.jsonl"),
]


@pytest.mark.parametrize("script,args,expected", CASES,
                         ids=[f"{c[0]} {' '.join(c[1])}" for c in CASES])
def test_a_bad_study_input_is_one_line_and_nothing_written(tmp_path, monkeypatch, capsys,
                                                           script, args, expected):
  names = {"tmp": tmp_path, "a_file": tmp_path / "a_file", "noget": tmp_path / "noget.py",
           "run": tmp_path / "run"}
  names["a_file"].write_text("not a folder")
  names["noget"].write_text("def config():\n  return None\n")
  names["run"].mkdir()
  (names["run"] / "metrics.jsonl").write_text('{"step": 1, "loss": 1.0}\n')
  args = [a.format(**names) for a in args]
  if "--output" not in args and script not in ("plot_metrics", "scaling"):
    args += ["--output", str(tmp_path / "study")]
  before = tree_hash(tmp_path, REPO / "docs") + (REPO / "README.md").read_text()
  monkeypatch.chdir(REPO)
  code, stderr = run_script(monkeypatch, capsys, script, *args)
  line = code if isinstance(code, str) else stderr.strip()
  assert code not in (0, None) and (code == 1 or isinstance(code, str)), (code, stderr)
  assert "\n" not in line.strip() and "Traceback" not in stderr, stderr
  assert line.startswith("error: ") and expected.format(**names) in line, line
  assert not (tmp_path / "study").exists()
  assert tree_hash(tmp_path, REPO / "docs") + (REPO / "README.md").read_text() == before


def test_a_script_says_it_in_one_line_on_stderr_with_exit_status_1(tmp_path):
  """End to end, as a user's shell sees it: stderr holds one line, the status is 1."""
  result = subprocess.run(
      [sys.executable, "scripts/compare.py", "--strategies", "ssgd", "--seeds", "0", "--set",
       "optimizer.learning_rate=-1.0", "--output", str(tmp_path / "study")],
      cwd=REPO, capture_output=True, text=True, timeout=300)
  assert result.returncode == 1 and result.stdout == "", result
  assert result.stderr.strip().splitlines() == [
      "error: run ssgd_seed0 (configs/default.py:ssgd): optimizer.learning_rate=-1.0 is out of "
      "range; allowed: a finite number in (0, inf)"]
  assert not (tmp_path / "study").exists()


def test_the_study_api_checks_before_any_run(tmp_path):
  specs = study.strategy_specs("configs/default.py:runlocal", ["ssgd"], [0])
  with pytest.raises(study.StudyInputError, match="has no runs"):
    study.run_study([], str(tmp_path / "empty"))
  with pytest.raises(study.StudyInputError, match="processes=0"):
    study.run_study(specs, str(tmp_path / "zero"), processes=0)
  with pytest.raises(study.StudyInputError, match=r"share a name \(ssgd_seed0\)"):
    study.run_study(specs + specs, str(tmp_path / "twice"))
  (tmp_path / "a_file").write_text("")
  with pytest.raises(study.StudyInputError, match="is a file"):
    study.run_study(specs, str(tmp_path / "a_file"))
  bad = study.grid({"x": ("configs/default.py:runlocal", [("model.channels", 0)])}, [0])
  with pytest.raises(ConfigError, match="model.channels=0 is out of range"):
    study.run_study(bad, str(tmp_path / "bad"))
  common = [("nosuch.field", 1)]
  with pytest.raises(study.StudyInputError, match="no section 'nosuch'"):
    study.check_specs(study.strategy_specs("configs/default.py", ["ssgd"], [0], common))
  with pytest.raises(study.StudyInputError, match="topk=2.0 is out of range"):
    study.compression_specs("configs/default.py", "odsgd", ["none", "topk:2.0"], [0])
  assert sorted(p.name for p in tmp_path.iterdir()) == ["a_file"]  # nothing written


def test_study_flags_are_checked_together():
  args = argparse.Namespace(seeds="0-2", processes=1, eval_every=30, eval_growth=0.0,
                            output="runs/x", readme="claims", set=["train.num_steps=5"],
                            records=None, from_records=False, stale="refuse", stop_after="")
  seeds, common = study.check_study_flags(args)
  assert seeds == [0, 1, 2] and ("train.num_steps", 5) in common
  assert study.parse_seeds("0-2,5") == [0, 1, 2, 5]
  with pytest.raises(study.StudyInputError, match="--pilot_seeds '1,1'"):
    study.parse_seeds("1,1", "--pilot_seeds")
  with pytest.raises(study.SectionError, match="--readme 'nosuch'"):
    study.check_study_flags(argparse.Namespace(**{**vars(args), "readme": "nosuch"}))
  assert ("train.eval_every", 30) in common
  # no --eval_every (claims.py, tune.py): no interval here, each workload adds its own
  _, common = study.check_study_flags(argparse.Namespace(**{**vars(args), "eval_every": None}))
  assert not [field for field, _ in common if field.startswith("train.eval")]
  with pytest.raises(study.StudyInputError, match="--eval_every -1"):
    study.check_study_flags(argparse.Namespace(**{**vars(args), "eval_every": -1}))
  with pytest.raises(study.StudyInputError, match="--eval_growth 1.5"):
    study.check_study_flags(argparse.Namespace(**{**vars(args), "eval_growth": 1.5}))
  with pytest.raises(study.StudyInputError, match="--stop_after 'soon'"):
    study.check_study_flags(argparse.Namespace(**{**vars(args), "stop_after": "soon"}))
  assert study.parse_duration("90m") == 5400 and study.parse_duration("2h") == 7200
  with pytest.raises(study.StudyInputError, match="--from_records: the study keeps no records"):
    study.check_study_flags(argparse.Namespace(**{**vars(args), "readme": "",
                                                  "from_records": True}))


def test_a_half_written_summary_is_run_again_under_resume(small_config, tmp_path):
  spec = study.RunSpec("ssgd", "configs/default.py:ssgd,runlocal", 0,
                       (("data.name", "mnist1d"), ("data.data_dir", small_config.data.data_dir),
                        ("train.num_steps", 4), ("train.eval_every", 4)))
  first = study.run_study([spec], str(tmp_path))[0]
  summary = tmp_path / "runs" / spec.name / "summary.json"
  summary.write_text(summary.read_text()[:40])  # killed while writing it
  again = study.run_study([spec], str(tmp_path), resume=True)[0]
  assert again.summary["test_accuracy"] == first.summary["test_accuracy"]
  assert json.loads(summary.read_text())["steps"] == 4
  clock = tmp_path / "runs" / spec.name / "clock.json"
  clock.unlink()  # a run of a version before clock.json: its times cannot be replayed
  study.run_study([spec], str(tmp_path), resume=True)
  assert clock.exists()


def test_a_run_of_the_same_config_in_another_study_is_copied_not_trained(
    small_config, tmp_path, monkeypatch):
  common = (("data.name", "mnist1d"), ("data.data_dir", small_config.data.data_dir),
            ("train.num_steps", 4), ("train.eval_every", 4))
  spec = study.RunSpec("ssgd", "configs/default.py:ssgd,runlocal", 0, common)
  first = study.run_study([spec], str(tmp_path / "defaults"))[0]
  other = dataclasses.replace(spec, overrides=common + (("optimizer.learning_rate", 0.05),))
  trained = []
  real = _runner.train_and_evaluate
  monkeypatch.setattr(_runner, "train_and_evaluate",
                      lambda config, workdir: trained.append(workdir) or real(config, workdir))
  same = study.run_study([spec], str(tmp_path / "tuned"), reuse=[str(tmp_path / "defaults")])
  assert same[0].summary == first.summary and same[0].workdir != first.workdir
  assert (tmp_path / "tuned" / "runs" / spec.name / "clock.json").exists() and not trained
  # the same name with another config (here a rate) is trained
  changed = study.run_study([other], str(tmp_path / "other"), reuse=[str(tmp_path / "defaults")])
  assert trained == [changed[0].workdir]


def test_plot_metrics_skips_a_last_line_cut_by_a_kill(tmp_path, monkeypatch, capsys):
  run = tmp_path / "run"
  run.mkdir()
  (run / "metrics.jsonl").write_text(
      '{"step": 1, "loss": 2.0, "accuracy": 0.1}\n{"step": 2, "test_accuracy": 0.5}\n'
      '{"step": 3, "loss": 1.')
  monkeypatch.setattr(sys, "argv", ["scripts/plot_metrics.py", str(run), "--out",
                                    str(tmp_path / "curves.png")])
  runpy.run_path(str(REPO / "scripts" / "plot_metrics.py"), run_name="__main__")
  assert (tmp_path / "curves.png").stat().st_size > 1000
  assert "wrote" in capsys.readouterr().out
