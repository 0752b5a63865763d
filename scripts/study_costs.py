"""What a study costs on this machine: each study's runs split into training, evaluation and
start-up, read from its run records; and the Fashion-MNIST claims' total estimated from
measured Fashion-MNIST runs.

  python scripts/study_costs.py --study "MNIST-1D Results table=records/compare_default" \\
      --fashion_fixed records/costs/fashion_fixed --fashion_grid records/costs/fashion_grid

Each --study is "title=records folder" (its subfolders included; several folders separated
by commas, e.g. a claims study's defaults without its tuning): the runs, their wall time
in the study's process (`seconds`, start-up included; `summary.wall_time_s` for records
without it), training (the loop less its evaluations), evaluation, start-up (the rest), the
evaluations' share, and the records' size. --fashion_fixed and --fashion_grid hold one
Fashion-MNIST ssgd run each, evaluated every 4 steps and on the growing grid until its last
target (made by the commands in docs/results.md, "What a study costs"): their split, and
the estimate for the Fashion-MNIST claims (defaults and tuned, 12 seeds, their pilots), run
by run: the steps each run trains at equal time (`study.equal_time_specs`, counted on the
clock) at the measured training cost per step; the measured run's evaluations, scaled by
the growing grid's evaluations (without its dense stretches) up to the same share of the
run's steps as the measured run stopped evaluating at, at the measured cost per
evaluation; and the measured start-up; at the concurrency (runs' wall time per minute of
the study's, the time at least one of its runs was in flight) the --study studies achieved
(their mean).
"""

import datetime
import glob
import os

import numpy as np

from odsgd_jax import study
from odsgd_jax.study import _records as records_lib
from odsgd_jax.study import _tuning as tuning
from odsgd_jax.train._evaluation_grid import evaluation_steps


def _records(folders: str) -> list[dict]:
  """The finished runs' records in each folder of `folders` (comma-separated) and below."""
  found = []
  for folder in folders.split(","):
    here = [r for r in records_lib.records_in(folder, recursive=True) if r.get("summary")]
    if not here:
      raise study.StudyInputError(f"{folder} holds no run records")
    found += here
  return found


def _split(record: dict) -> dict[str, float]:
  summary = record["summary"]
  total = record.get("seconds") or summary["wall_time_s"]
  evaluation = summary.get("evaluation_time_s", 0.0)
  return {"total": total, "training": summary["loop_time_s"] - evaluation,
          "evaluation": evaluation, "startup": total - summary["loop_time_s"],
          "evaluations": summary.get("evaluations", 0), "steps": summary["steps"]}


def _wall_minutes(records: list[dict]) -> float:
  """The study's wall-clock time read off its records: the time at least one of its runs
  was in flight (each run from its record's time less its own wall time to that time, the
  spans merged), so the pauses between a study's slices, sessions apart, are not counted."""
  spans = sorted((written - _split(r)["total"], written) for r in records
                 for written in [datetime.datetime.fromisoformat(r["written"]).timestamp()])
  busy, (start, end) = 0.0, spans[0]
  for begin, finish in spans[1:]:
    if begin > end:  # a gap: nothing of this study ran
      busy, start = busy + end - start, begin
    end = max(end, finish)
  return (busy + end - start) / 60


def _size(folders: str) -> float:
  return sum(os.path.getsize(p) for folder in folders.split(",")
             for p in glob.glob(os.path.join(folder, "**", "*.json"), recursive=True)) / 2**20


def _row(title: str, records: list[dict], folder: str) -> list[str]:
  splits = [_split(r) for r in records]
  total = sum(s["total"] for s in splits)
  part = lambda name: sum(s[name] for s in splits)
  return [title, str(len(records)), f"{total / 60:.1f}", f"{part('training') / 60:.1f}",
          f"{part('evaluation') / 60:.1f}", f"{part('startup') / 60:.1f}",
          f"{100 * part('evaluation') / total:.0f}%", f"{_size(folder):.1f}"]


def _fashion_estimate(grid: dict, concurrency: float) -> tuple[float, float]:
  """Wall-clock seconds of the Fashion-MNIST claims' 6 pilots and of one set of compared
  runs (12 seeds, every claims strategy at equal time), run by run (module docstring)."""
  split = _split(grid)
  per_step = split["training"] / split["steps"]
  per_evaluation = split["evaluation"] / max(split["evaluations"], 1)
  config = grid["config"]["train"]
  stopped = [row["step"] for row in grid["evaluations"]][-2] / split["steps"]  # before the end
  plain = lambda steps: len([s for s in evaluation_steps(steps, config["eval_every"],
                                                          config["eval_growth"])
                             if s <= stopped * steps])
  scale = split["evaluations"] / (plain(split["steps"]) + 1)
  seeds, pilots = range(12), study.PILOT_SEEDS
  cluster = tuning.cluster_overrides("10gbe", "resnet50_v100")
  common = study.evaluation_overrides(config["eval_every"], config["eval_growth"]) + cluster
  pilot_seconds, set_seconds = 0.0, 0.0
  for kind, strategies in tuning.CLAIMS_STRATEGIES.items():
    file = tuning.CLAIMS_CONFIGS["fashion_mnist"][kind]
    for spec in study.strategy_specs(file, ["ssgd"], pilots, common):
      steps = spec.build().train.num_steps
      pilot_seconds += split["startup"] + steps * per_step + per_evaluation
    compared = study.equal_time_specs(study.strategy_specs(file, list(strategies), seeds, common))
    for spec in compared:
      steps = spec.build().train.num_steps
      evaluations = scale * (plain(steps) + 1)
      set_seconds += split["startup"] + steps * per_step + evaluations * per_evaluation
  return pilot_seconds / concurrency, set_seconds / concurrency


def main() -> None:
  parser = study.script_parser(__doc__)
  parser.add_argument("--study", action="append", default=[], metavar="TITLE=FOLDER")
  parser.add_argument("--fashion_fixed", required=True)
  parser.add_argument("--fashion_grid", required=True)
  parser.add_argument("--copied", default="",
                      help="TITLE=LABEL: a claims study whose tuned half is estimated as its "
                      "measured defaults less the runs of LABEL (whose tuned setting is its "
                      "default: copied, not trained)")
  study.add_section_flags(parser, "study_costs")
  args = parser.parse_args()
  rows, concurrency, tuned = [], [], ""
  copied_title, _, copied_label = args.copied.partition("=")
  for entry in args.study:
    title, _, folder = entry.partition("=")
    records = _records(folder)
    rows.append(_row(title, records, folder))
    machine, wall = sum(_split(r)["total"] for r in records) / 60, _wall_minutes(records)
    concurrency.append(machine / wall)
    rows[-1].append(f"{wall:.0f}")
    if title == copied_title:
      trained = sum(_split(r)["total"] for r in records if r["label"] != copied_label
                    and r["seed"] not in study.PILOT_SEEDS) / 60
      tuned = (f" {title}: {wall:.0f} minutes measured; its tuned half, the same runs at the "
               f"tuned settings less {copied_label}'s (copied), about "
               f"{trained / concurrency[-1]:.0f} minutes more at its concurrency, so "
               f"**about {wall + trained / concurrency[-1]:.0f} minutes** for defaults and "
               f"tuned together.")
  fixed, grid = _records(args.fashion_fixed)[0], _records(args.fashion_grid)
  grid = next(r for r in grid if r["summary"].get("evaluations", 0) > 1)  # not its pilot
  rows.append(_row("Fashion-MNIST ssgd, every 4 steps", [fixed], args.fashion_fixed) + ["-"])
  rows.append(_row("Fashion-MNIST ssgd, growing grid until the last target", [grid],
                   args.fashion_grid) + ["-"])
  factor = float(np.mean(concurrency)) if concurrency else 1.0
  pilots, one_set = _fashion_estimate(grid, factor)
  runs = len(study.PILOT_SEEDS) * len(tuning.CLAIMS_STRATEGIES) + 2 * 12 * sum(
      map(len, tuning.CLAIMS_STRATEGIES.values()))
  text = (
      f"Produced by `{study.command_line('scripts/study_costs.py')}` ({study.environment()}; "
      f"minutes of wall time summed over the runs, each in its study's process, start-up "
      f"included):\n\n"
      + study.markdown(["study", "runs", "run minutes", "training", "evaluation", "start-up",
                        "evaluation share", "records (MB)", "wall-clock minutes"], rows)
      + f"\n\nThe Fashion-MNIST claims (defaults and tuned, 12 seeds, 6 pilots: {runs} runs), "
      f"estimated run by run from the growing-grid run's measured costs at {factor:.2f} runs' "
      f"worth of progress per wall-clock minute (the mean measured concurrency of the "
      f"studies above): **{(pilots + 2 * one_set) / 3600:.1f} hours** of wall-clock time, "
      f"{one_set / 3600:.1f} of them for each set of compared runs. Its tuning (42 "
      f"configurations on 2 seeds at the claims' budget, about one such set) and the "
      f"replication seeds' defaults (one set) are about {one_set / 3600:.1f} hours "
      f"each.{tuned}")
  print(text)
  if args.readme:
    study.replace_section("study_costs", text, check=args.check)


if __name__ == "__main__":
  study.run_main(main)
