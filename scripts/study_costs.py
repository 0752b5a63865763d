"""What a study costs on this machine: each study's runs split into training, evaluation and
start-up, read from its run records.

  python scripts/study_costs.py --study "MNIST-1D Results table=records/compare_default" \\
      --fashion_fixed records/costs/fashion_fixed --fashion_grid records/costs/fashion_grid

Each --study is "title=records folder" (its subfolders included; several folders separated
by commas, e.g. a claims study's defaults without its tuning): the runs, their wall time
in the study's process (`seconds`, start-up included; `summary.wall_time_s` for records
without it), training (the loop less its evaluations), evaluation, start-up (the rest), the
evaluations' share, the records' size and the study's wall-clock minutes. A run copied
from a study listed before it (a tuned setting that is the default: the same record) is
counted there only; the study that copied it says how many it copied. --fashion_fixed and
--fashion_grid hold one Fashion-MNIST ssgd run each, evaluated every 4 steps and on the
growing grid until its last target (made by the commands in docs/results.md, "What a study
costs"): their split.
"""

import datetime
import os

from odsgd_jax import study
from odsgd_jax.study import _records as records_lib


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
             for p in records_lib.record_files(folder, recursive=True)) / 2**20


def _row(title: str, records: list[dict], folder: str) -> list[str]:
  splits = [_split(r) for r in records]
  total = sum(s["total"] for s in splits)
  part = lambda name: sum(s[name] for s in splits)
  return [title, str(len(records)), f"{total / 60:.1f}", f"{part('training') / 60:.1f}",
          f"{part('evaluation') / 60:.1f}", f"{part('startup') / 60:.1f}",
          f"{100 * part('evaluation') / total:.0f}%", f"{_size(folder):.1f}"]


def _key(record: dict) -> tuple:
  """What makes two records the same run: a copy is the same file under another study."""
  return record["config_digest"], record["seed"], record["written"]


def main() -> None:
  parser = study.script_parser(__doc__)
  parser.add_argument("--study", action="append", default=[], metavar="TITLE=FOLDER")
  parser.add_argument("--fashion_fixed", required=True)
  parser.add_argument("--fashion_grid", required=True)
  study.add_section_flags(parser, "study_costs")
  args = parser.parse_args()
  rows, counted = [], set()
  for entry in args.study:
    title, _, folder = entry.partition("=")
    records = _records(folder)
    trained = [r for r in records if _key(r) not in counted]
    counted.update(map(_key, records))
    if not trained:
      raise study.StudyInputError(f"--study {entry!r}: every run in it is a copy of an "
                                  "earlier study's; list it before the studies that copy it")
    rows.append(_row(title, trained, folder))
    if len(trained) < len(records):
      rows[-1][1] += f" (+{len(records) - len(trained)} copied)"
    rows[-1].append(f"{_wall_minutes(trained):.0f}")
  fixed, grid = _records(args.fashion_fixed)[0], _records(args.fashion_grid)
  grid = next(r for r in grid if r["summary"].get("evaluations", 0) > 1)  # not its pilot
  rows.append(_row("Fashion-MNIST ssgd, every 4 steps", [fixed], args.fashion_fixed) + ["-"])
  rows.append(_row("Fashion-MNIST ssgd, growing grid until the last target", [grid],
                   args.fashion_grid) + ["-"])
  text = (
      f"Produced by `{study.command_line('scripts/study_costs.py')}` ({study.environment()}; "
      f"minutes of wall time summed over the runs, each in its study's process, start-up "
      f"included; a run copied from a study above is counted there):\n\n"
      + study.markdown(["study", "runs", "run minutes", "training", "evaluation", "start-up",
                        "evaluation share", "records (MB)", "wall-clock minutes"], rows))
  print(text)
  if args.readme:
    study.replace_section("study_costs", text, check=args.check)


if __name__ == "__main__":
  study.run_main(main)
