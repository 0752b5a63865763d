"""Studies that survive their machine: the evaluation grid, run records, slices, and tables
regenerated from committed records (docs/results.md, "Run records")."""

import dataclasses
import os
import re
import shlex
import shutil
import signal
import subprocess
import sys
import time

import numpy as np
import jax
import pytest

from odsgd_jax import study
from odsgd_jax.study import _records as records
from odsgd_jax.train import read_metrics, train_and_evaluate
from odsgd_jax.train._evaluation_grid import evaluation_steps, next_evaluation

REPO = os.path.dirname(os.path.dirname(os.path.abspath(__file__)))


def test_the_growing_grid_is_a_subset_of_the_fixed_one_with_spans_a_share_of_the_step():
  fixed, grown = evaluation_steps(1500, 4), evaluation_steps(1500, 4, 0.019)
  assert len(fixed) == 375 and grown <= fixed and 1500 in grown
  assert len(grown) == 184 and len(evaluation_steps(5600, 4, 0.019)) == 256
  steps = sorted(grown)
  for before, after in zip(steps, steps[1:], strict=False):
    span = after - before
    assert span % 4 == 0 or after == 1500
    assert span == 4 or span <= 0.019 * before  # a time read at `after`: within 1.9%
  assert evaluation_steps(30, 0) == {30}  # only at the end


def test_the_grid_and_its_targets_do_not_move_the_trajectory(small_config, tmp_path):
  small_config.train.eval_every = 4
  dense = train_and_evaluate(small_config, str(tmp_path / "dense"))
  dense_rows = [r for r in read_metrics(str(tmp_path / "dense")) if "test_accuracy" in r]
  accuracies = [r["test_accuracy"] for r in dense_rows[:-1]]
  until = float(np.median(accuracies))
  sparse_config = small_config.copy_and_resolve_references()
  sparse_config.train.eval_growth = 0.9
  sparse_config.train.eval_targets = (until,)
  sparse_config.train.eval_near = 0.0
  sparse = train_and_evaluate(sparse_config, str(tmp_path / "sparse"))
  rows = [r for r in read_metrics(str(tmp_path / "sparse")) if "test_accuracy" in r]
  assert (sparse["test_accuracy"], sparse["test_loss"]) == (dense["test_accuracy"],
                                                            dense["test_loss"])
  losses = lambda run: [r["loss"] for r in read_metrics(str(tmp_path / run)) if "loss" in r]
  assert losses("sparse") == losses("dense")  # every logged training step
  by_step = {r["step"]: r for r in dense_rows}
  for row in rows:  # each evaluation the one the dense grid made at that step
    assert row["test_accuracy"] == by_step[row["step"]]["test_accuracy"]
    assert row["sim_time"] == by_step[row["step"]]["sim_time"]
  reached = next(r["step"] for r in rows if r["test_accuracy"] >= until)
  assert [r["step"] for r in rows if r["step"] > reached] == [20]  # then only the last one
  assert sparse["evaluations"] == len(rows) < dense["evaluations"] == len(dense_rows)
  assert 0 < sparse["evaluation_time_s"] < sparse["loop_time_s"]


def test_near_a_target_not_yet_reached_the_grid_is_dense_again():
  # far below the target: the growing span; within `near` below it: 1.9% of the step, down
  # to single steps (an arrival at step 100 known to within 1%, not the 4 steps' 4%), and
  # never more than the fixed grid's 4 steps (not 19 at step 1000: spikes cross unseen)
  assert next_evaluation(1000, 3000, 4, 0.019, 0.80, 0.80, (0.90,), 0.03) == 1016
  assert next_evaluation(1000, 3000, 4, 0.019, 0.88, 0.88, (0.90,), 0.03) == 1004
  assert next_evaluation(100, 3000, 4, 0.019, 0.88, 0.88, (0.90,), 0.03) == 101
  assert next_evaluation(100, 3000, 4, 0.019, 0.80, 0.80, (0.90,), 0.03) == 104
  # reached once (best), though the last evaluation fell back: only the end is left
  assert next_evaluation(1000, 3000, 4, 0.019, 0.88, 0.91, (0.90,), 0.03) == 3000
  # the lower target reached, the next one far: growing again
  assert next_evaluation(1000, 3000, 4, 0.019, 0.86, 0.86, (0.85, 0.95), 0.03) == 1016
  assert next_evaluation(8, 20, 0) == 20  # only at the end


def test_the_trajectory_digest_ignores_comments_and_docstrings_only():
  def digest(source):
    return records.ast.dump(records._without_docstrings(records.ast.parse(source)))

  plain = "def f(x):\n  return x + 1\n"
  assert digest(plain) == digest('def f(x):\n  """Adds."""\n  # one\n  return (x +\n 1)\n')
  assert digest(plain) != digest("def f(x):\n  return x + 2\n")
  files = records.trajectory_files()
  assert "train/_loop.py" in files and not any(f.startswith("study/") for f in files)


def test_a_config_that_leaves_an_option_at_its_factory_default_writes_the_same_run():
  """An option a config leaves out runs its factory's default, so a record of the config
  without it is the record of the config that writes that default (issue 75 registered
  odsgd's `correction`: the earlier odsgd records had left it out); any other value, or a
  value of another kind, is another run."""
  former = {"strategy": {"name": "odsgd", "local_lr": 0.1, "warmup_steps": 200},
            "train": {"seed": 0}}
  pinned = {"train": {"seed": 0}, "strategy": {"name": "odsgd", "local_lr": 0.1,
                                               "warmup_steps": 200.0, "correction": "none"}}
  assert records.config_digest(former) == records.config_digest(pinned)
  for other in ({"correction": "spike"}, {"warmup_steps": 0}, {"local_lr": 0.05}):
    changed = {**pinned, "strategy": {**pinned["strategy"], **other}}
    assert records.config_digest(changed) != records.config_digest(former)
  flagged = {"strategy": {"name": "ssgd", "compression": None}}
  assert records.config_digest(flagged) == records.config_digest({"strategy": {"name": "ssgd"}})
  plain = records.config_digest({"strategy": {"name": "odsgd"}})  # local_weight_decay 0.0
  assert records.config_digest({"strategy": {"name": "odsgd", "local_weight_decay": 0}}) == plain
  assert records.config_digest({"strategy": {"name": "odsgd",
                                             "local_weight_decay": False}}) != plain


def _tiny_spec(small_config, seed=0):
  return study.RunSpec("ssgd", "configs/default.py:ssgd,runlocal", seed,
                       (("data.name", "mnist1d"), ("data.data_dir", small_config.data.data_dir)))


def test_a_record_of_other_code_is_refused_retrained_or_accepted(small_config, tmp_path):
  spec, folder = _tiny_spec(small_config), str(tmp_path / "records")
  first = study.run_study([spec], str(tmp_path / "a"), records=folder)[0]
  path = records.record_path(folder, spec.name)
  made = records.read_record(path)
  assert made["config_digest"] == records.config_digest(first.config)
  assert made["code"] == records.code_identity() and made["summary"] == first.summary
  reused = study.run_study([spec], str(tmp_path / "b"), records=folder, resume=True)[0]
  assert reused.summary == first.summary and not os.path.exists(tmp_path / "b" / "runs")
  # the same config made by other code: not reused silently
  records.write_record(path, {**made, "code": {**made["code"], "trajectory": "0" * 16}})
  with pytest.raises(study.StudyInputError, match="made by other code.*--stale retrain"):
    study.run_study([spec], str(tmp_path / "c"), records=folder, resume=True)
  assert not os.path.exists(tmp_path / "c")  # refused before anything was written
  accepted = study.run_study([spec], str(tmp_path / "d"), records=folder, resume=True,
                             keeping=study.Keeping(stale="accept"))[0]
  assert accepted.summary == first.summary
  kept = records.read_record(path)
  assert kept["code"] == records.code_identity()
  assert kept["accepted_from"][0]["trajectory"] == "0" * 16
  # a record of another config is another run's: under --from_records, missing
  other = dataclasses.replace(spec, seed=1)
  with pytest.raises(study.StudyInputError, match="1 of the 2 runs have no record"):
    study.run_study([spec, other], str(tmp_path / "e"), records=folder,
                    keeping=study.Keeping(from_records=True))


def _made_on(path, count):
  """The record at `path` rewritten as made on `count` devices."""
  made = records.read_record(path)
  here = records.devices_of(made["environment"])
  records.write_record(path, {**made, "environment": made["environment"].replace(
      f"{here} x ", f"{count} x ")})


def test_runs_made_on_different_device_counts_are_never_mixed(small_config, tmp_path):
  """The device count moves a study's numbers: a study never mixes runs made on different
  counts, whatever --stale says, and the message says how to match; records that all name
  one count, though another than this process's, still rebuild the tables with nothing
  trained (a rebuild on a one-GPU box)."""
  specs = [_tiny_spec(small_config, seed) for seed in (0, 1)]
  folder = str(tmp_path / "records")
  study.run_study(specs, str(tmp_path / "a"), records=folder)
  paths = [records.record_path(folder, spec.name) for spec in specs]
  assert records.devices_of(records.read_record(paths[0])["environment"]) == jax.device_count()
  other = jax.device_count() + 1
  _made_on(paths[0], other)
  for stale in records.STALE_POLICIES:  # one record of another count among this count's
    with pytest.raises(study.StudyInputError,
                       match=f"made on {other} devices.*others there were made on "
                             f"{jax.device_count()}.*xla_force_host_platform_device_count"):
      study.run_study(specs, str(tmp_path / stale), records=folder,
                      keeping=study.Keeping(from_records=True, stale=stale))
  _made_on(paths[1], other)  # all of another count: read, nothing trained
  rebuilt = study.run_study(specs, str(tmp_path / "rebuilt"), records=folder,
                            keeping=study.Keeping(from_records=True))
  assert all(result.summary for result in rebuilt)
  os.remove(paths[1])  # one to train here, beside a record of another count: refused
  with pytest.raises(study.StudyInputError,
                     match=f"made on {other} devices.*this process, which trains the rest, "
                           f"has {jax.device_count()}"):
    study.run_study(specs, str(tmp_path / "mixed"), records=folder, resume=True)
  assert not os.path.exists(paths[1])  # refused before anything ran


def _compare(cwd, data_dir, records_folder, *extra):
  return [sys.executable, os.path.join(REPO, "scripts", "compare.py"),
          "--config", "configs/default.py:steps=24", "--strategies", "ssgd,odsgd",
          "--seeds", "0,1", "--pilot_seeds", "7", "--set", "data.name=mnist1d",
          "--set", f"data.data_dir={data_dir}", "--output", os.path.join(cwd, "runs"),
          "--records", records_folder, *extra]


def _git(*args, cwd):
  subprocess.run(["git", *args], cwd=cwd, check=True, capture_output=True, timeout=60,
                 env={**os.environ, "GIT_AUTHOR_NAME": "t", "GIT_AUTHOR_EMAIL": "t@t",
                      "GIT_COMMITTER_NAME": "t", "GIT_COMMITTER_EMAIL": "t@t"})


def test_a_study_killed_between_runs_resumes_from_a_fresh_clone_of_its_records(
    data_dir, tmp_path):
  """The whole promise: kill a study, commit its records, clone them elsewhere and resume
  there with nothing else (no runs/ folder): only the missing runs train, and the table is
  the uninterrupted study's."""
  whole = tmp_path / "whole"
  whole.mkdir()
  subprocess.run(_compare(str(whole), data_dir, str(whole / "records"), "--processes", "2"),
                 cwd=whole, check=True, capture_output=True, timeout=600)
  # the first machine: killed once two runs have their records (the pilot and one more)
  first = tmp_path / "first"
  (first / "records").mkdir(parents=True)
  kept = first / "records" / "tiny"
  process = subprocess.Popen(_compare(str(first), data_dir, str(kept), "--processes", "1"),
                             cwd=first, stdout=subprocess.DEVNULL, stderr=subprocess.DEVNULL)
  deadline = time.time() + 600
  while (len(list(kept.rglob("*.json.gz"))) < 2 and process.poll() is None
         and time.time() < deadline):
    time.sleep(0.2)
  process.send_signal(signal.SIGKILL)
  process.wait(timeout=60)
  made = {str(p.relative_to(kept)): p.read_bytes() for p in kept.rglob("*.json.gz")}
  assert 2 <= len(made) < 5, "the study was not killed part way"
  _git("init", "-q", cwd=first)
  _git("add", "records", cwd=first)
  _git("commit", "-qm", "records", cwd=first)
  # the second machine: a fresh clone, the same command with --resume
  second = tmp_path / "second"
  _git("clone", "-q", str(first), str(second), cwd=tmp_path)
  resumed = subprocess.run(
      _compare(str(second), data_dir, str(second / "records" / "tiny"), "--processes", "1",
               "--resume"), cwd=second, capture_output=True, text=True, timeout=600)
  assert resumed.returncode == 0, resumed.stderr[-2000:]
  trained = sorted(p.name for p in (second / "runs").rglob("*_seed*") if p.is_dir())
  expected = sorted(os.path.basename(name).removesuffix(records.SUFFIX) for name in
                    ("pilot/ssgd_seed7.json.gz", "ssgd_seed0.json.gz", "ssgd_seed1.json.gz",
                     "odsgd_seed0.json.gz", "odsgd_seed1.json.gz") if name not in made)
  assert trained == expected  # only the missing runs trained
  for name, content in made.items():  # the committed records reused as they were
    assert (second / "records" / "tiny" / name).read_bytes() == content
  assert ((second / "runs" / "compare.md").read_text()
          == (whole / "runs" / "compare.md").read_text())


# Every generated table that training made: (page, section, the records it is made from)
STUDY_TABLES = [
    ("README.md", "claims", "claims"),
    (os.path.join("docs", "results.md"), "tuning_mnist1d", "claims"),
    (os.path.join("docs", "results.md"), "tuning_fashion_mnist", "claims"),
    (os.path.join("docs", "results.md"), "compare_default", "compare_default"),
    (os.path.join("docs", "results.md"), "compare_fashion_mnist", "compare_fashion_mnist"),
    (os.path.join("docs", "results.md"), "compare_kjv", "compare_kjv"),
    (os.path.join("docs", "cluster.md"), "compare_heterogeneous", "compare_heterogeneous"),
    (os.path.join("docs", "compression.md"), "compression", "compression"),
    (os.path.join("docs", "strategies.md"), "options_odsgd", "options_odsgd"),
    (os.path.join("docs", "delays.md"), "corrections_odsgd", "corrections_odsgd"),
    (os.path.join("docs", "delays.md"), "corrections_pseudo_sync", "corrections_pseudo_sync"),
    (os.path.join("docs", "delays.md"), "corrections_asgd", "corrections_asgd"),
    (os.path.join("docs", "delays.md"), "options_asgd", "options_asgd"),
]


@pytest.mark.parametrize("page,section,records_folder", STUDY_TABLES,
                         ids=[section for _, section, _ in STUDY_TABLES])
def test_every_study_table_regenerates_from_its_committed_records(tmp_path, page, section,
                                                                  records_folder):
  """Each table is what the records committed in records/<folder> give, by the command it
  names, with no training (--from_records), in under a minute: as documented, with no
  --stale flag, where this JAX and platform made them (a change of the code lands with its
  records retrained or accepted); where another JAX or platform made them, they are read
  from a copy and accepted, and what is checked here is the table (the records' code is
  checked by the test below)."""
  with open(os.path.join(REPO, page), encoding="utf-8") as f:
    text = f.read().split(f"<!-- {section}:start -->")[1].split(f"<!-- {section}:end -->")[0]
  script, command = re.search(r"[Pp]roduced by `python (scripts/\w+\.py) ([^`]*)`",
                              text).groups()
  copy = tmp_path / "records"
  shutil.copytree(os.path.join(REPO, "records", records_folder), copy)
  started = time.perf_counter()
  identity = records.code_identity()
  made_here = all({**record["code"], "trajectory": identity["trajectory"]} == identity
                  for record in records.records_in(str(copy), recursive=True))
  stale = [] if made_here else ["--stale", "accept"]
  result = subprocess.run(
      [sys.executable, script, *shlex.split(command), "--from_records", "--check", *stale,
       "--records", str(copy), "--output", str(tmp_path / "out")],
      cwd=REPO, capture_output=True, text=True, timeout=300)
  assert result.returncode == 0, result.stderr[-2000:]
  assert time.perf_counter() - started < 60
  assert not list((tmp_path / "out").rglob("runs/*"))  # nothing trained


def test_every_committed_record_was_made_or_accepted_by_this_trajectory_code():
  """A change to the trajectory code lands with the records it cannot move accepted
  (`--stale accept`) and the others trained again, so that every documented rebuild works
  on a fresh clone as written (issue 75: one landed without, and every rebuild refused).
  The grid check's and the costs' records are read as measurements of the code named in
  them, not reused by a study: they are not held to this."""
  digest = records.trajectory_digest()
  stale = {}
  for folder in sorted({folder for _, _, folder in STUDY_TABLES}):
    for record in records.records_in(os.path.join(REPO, "records", folder), recursive=True):
      if record["code"]["trajectory"] != digest:
        stale[folder] = stale.get(folder, 0) + 1
  assert not stale, (f"records of other trajectory code than {digest} in records/: {stale}; "
                     f"rebuild each table by its command with --from_records --stale accept "
                     f"(a change that moves no trajectory), or train them again")


@pytest.mark.parametrize("section", ["grid_check", "study_costs"])
def test_the_tables_read_off_records_regenerate_by_their_command(section):
  """The grid check and the study costs are read off committed records (no study runs):
  the command each names gives the section as it stands (--check writes nothing)."""
  with open(os.path.join(REPO, "docs", "results.md"), encoding="utf-8") as f:
    text = f.read().split(f"<!-- {section}:start -->")[1]
  script, command = re.search(r"Produced by `python (scripts/\w+\.py) ([^`]*)`", text).groups()
  result = subprocess.run([sys.executable, script, *shlex.split(command), "--check"],
                          cwd=REPO, capture_output=True, text=True, timeout=300)
  assert result.returncode == 0, result.stderr[-2000:]



@pytest.mark.parametrize("section", ["switch_dynamics", "switch_dev", "switch_confirm"])
def test_the_switch_tables_regenerate_from_their_records(section):
  """docs/delays.md's tables of OD-SGD's switch (issue 75) are what their committed records
  give, by the command each names (--check writes nothing; the probe trains nothing)."""
  with open(os.path.join(REPO, "docs", "delays.md"), encoding="utf-8") as f:
    text = f.read().split(f"<!-- {section}:start -->")[1]
  script, command = re.search(r"Produced by `python (scripts/\w+\.py) ([^`]*)`", text).groups()
  extra = ["--readme", "--from_records"] if script.endswith("switch_dynamics.py") else []
  result = subprocess.run([sys.executable, script, *shlex.split(command), *extra, "--check"],
                          cwd=REPO, capture_output=True, text=True, timeout=300)
  assert result.returncode == 0, result.stderr[-2000:]


def test_a_rebuild_from_records_keeps_only_the_derived_figures_it_used(tmp_path):
  """derived.json.gz is a cache keyed by the trajectory code: a --from_records rebuild keeps
  the figures it read or computed and drops the rest (those of earlier code), where a study
  that trains merges what it computed into the file."""
  here = records.trajectory_digest()
  records.write_record(str(tmp_path / records.Derived.FILE),
                       {records.Derived._stored(here, records.Derived.key("old")): 1,
                        records.Derived._stored(here, records.Derived.key("read")): 2})
  merged = records.Derived(str(tmp_path))
  merged.put(records.Derived.key("new"), 3)
  merged.save()
  assert len(records.Derived(str(tmp_path)).values) == 3
  records.Derived._used_in.clear()  # a rebuild in a new process
  pruned = records.Derived(str(tmp_path), prune=True)
  assert pruned.get(pruned.key("read")) == 2 and pruned.get(pruned.key("missing")) is None
  pruned.put(pruned.key("computed"), 4)
  budgets = records.Derived(str(tmp_path))  # another user of the file in the same process
  assert budgets.get(budgets.key("old")) == 1
  pruned.save()
  kept = records.Derived(str(tmp_path))
  assert sorted(kept.values.values()) == [1, 2, 4]
  records.Derived._used_in.clear()  # another new process: only what it uses is kept
  again = records.Derived(str(tmp_path), prune=True)
  assert again.get(again.key("computed")) == 4
  again.save()
  assert list(records.Derived(str(tmp_path)).values.values()) == [4]


def test_figures_of_code_declared_to_make_the_same_runs_are_kept_not_computed_again(tmp_path):
  """An accepted record's figures (computed by the code it was made by) hold for this code,
  which was declared to make the same runs: they are read and kept again under this code.
  Figures of other code hold only under such a declaration: for a run, its record's
  lineage; for the budgets, the study's --stale accept."""
  here, before, unrelated = records.trajectory_digest(), "0" * 16, "f" * 16
  records.write_record(str(tmp_path / records.Derived.FILE),
                       {records.Derived._stored(before, records.Derived.key("replay", 1)): "kept",
                        records.Derived._stored(unrelated, records.Derived.key("replay", 2)):
                        "other code"})
  record = {"format": records.FORMAT, "label": "ssgd", "seed": 0,
            "code": {"trajectory": here}, "accepted_from": [{"trajectory": before}]}
  records.write_record(records.record_path(str(tmp_path), "ssgd_seed0"), record)
  assert records.lineage(record) == (here, before)
  records.Derived._used_in.clear()
  derived = records.Derived(str(tmp_path))
  first, second = derived.key("replay", 1), derived.key("replay", 2)
  assert derived.get(first) is None  # no declaration named
  assert derived.get(first, lineage=records.lineage(record)) == "kept"
  assert derived.values[records.Derived._stored(here, first)] == "kept"  # kept again
  assert derived.get(second, lineage=records.lineage(record)) is None
  accepting = records.Derived(str(tmp_path), accept=True)  # the folder's lineages
  assert accepting.get(first) == "kept"
  assert accepting.get(second) is None  # no record of the folder was made by it
  # a rebuild's pruned figures, then the budgets' (which put the figure again) saved after
  records.Derived._used_in.clear()
  pruned = records.Derived(str(tmp_path), prune=True)
  budgets = records.Derived(str(tmp_path), accept=True)
  assert budgets.get(first) == "kept"
  assert pruned.get(first, lineage=records.lineage(record)) == "kept"
  pruned.save()
  budgets.save()
  assert list(records.Derived(str(tmp_path)).values) == [records.Derived._stored(here, first)]


def test_a_record_is_written_compressed_the_same_bytes_each_time_and_read_back(tmp_path):
  """Records are gzip-compressed JSON (issue 76), with no time in the header, so that the
  same record gives the same file (a rebuild leaves the committed files as they were)."""
  record = {"format": records.FORMAT, "label": "ssgd", "seed": 3,
            "evaluations": [{"step": 4, "validation_accuracy": 0.5286666666666666}]}
  path = records.record_path(str(tmp_path), "ssgd_seed3")
  assert path.endswith(".json.gz")
  records.write_record(path, record)
  first = open(path, "rb").read()
  time.sleep(1.1)  # gzip's header would otherwise hold the second
  records.write_record(path, record)
  assert open(path, "rb").read() == first
  assert first[:2] == b"\x1f\x8b"
  assert records.read_record(path) == record
  assert records.records_in(str(tmp_path)) == [record]


def test_an_uncompressed_record_of_before_issue_76_is_still_read(tmp_path):
  """A records folder written before records were compressed (`<name>.json`) is read as it
  is; where a compressed record of the same name is beside it, that one counts."""
  old = {"format": records.FORMAT, "label": "odsgd", "seed": 0, "summary": {"steps": 1}}
  new = {**old, "summary": {"steps": 2}}
  records.write_record(str(tmp_path / "odsgd_seed0.json"), old)
  path = records.record_path(str(tmp_path), "odsgd_seed0")
  assert records.read_record(path) == old
  assert records.records_in(str(tmp_path)) == [old]
  records.write_record(path, new)
  assert records.read_record(path) == new
  assert records.records_in(str(tmp_path)) == [new]
  (tmp_path / "cut.json.gz").write_bytes(open(path, "rb").read()[:20])  # killed mid-write
  assert records.read_record(str(tmp_path / "cut.json.gz")) is None


def test_the_committed_records_take_at_most_50_mb():
  """What `du -s --apparent-size records` counts: every file below records/."""
  size = sum(os.path.getsize(os.path.join(folder, name))
             for folder, _, names in os.walk(os.path.join(REPO, "records")) for name in names)
  assert size <= 50 * 10**6, f"records/ takes {size / 10**6:.1f} MB, more than 50 MB"
