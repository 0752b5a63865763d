"""Checks the growing evaluation grid against a dense one: where on the claims' runs would a
time to target read off the growing grid differ from the dense grid's?

  python scripts/claims.py --data mnist1d --seeds 0-3 --eval_growth 0 --output runs/dense
  python scripts/grid_check.py --study runs/dense

Reads a claims study evaluated densely (--eval_growth 0: every --eval_every steps; its
study.json files, or its run records with --study pointing at a records folder), fixes
the targets on its pilots as scripts/claims.py does, and for every compared run and target
finds the first evaluation that reaches the target on the dense grid and on the growing
grid as a study runs it (`train.next_evaluation` with --eval_every, --eval_growth, the
run's targets and --eval_near; its steps are multiples of --eval_every, so both are read
off the same evaluations: the trajectory does not depend on when it is evaluated,
tests/test_records.py), and on the growing grid alone (--eval_near 0). Prints how many
arrivals are identical, the largest difference, each grid's worst resolution and the
evaluations each needs up to the last target.
"""

import glob
import json
import os

import numpy as np

from odsgd_jax import study
from odsgd_jax.study import _tuning as tuning
from odsgd_jax.train._evaluation_grid import next_evaluation


def _rows(folder: str) -> list[dict]:
  """A study's runs: its study.json, or its records."""
  summary = os.path.join(folder, "study.json")
  if os.path.exists(summary):
    with open(summary, encoding="utf-8") as f:
      return json.load(f)["runs"]
  rows = []
  for path in sorted(glob.glob(os.path.join(folder, "*.json"))):
    with open(path, encoding="utf-8") as f:
      rows.append(json.load(f))
  if not rows:
    raise study.StudyInputError(f"{folder} holds neither a study.json nor run records: give "
                                f"a claims study's --output or records folder")
  return rows


def _arrival(evaluations: list[dict], target: float, steps=None) -> dict | None:
  """The first evaluation (of `steps`, if given) whose validation accuracy reaches `target`,
  with the span before it as a share of its time."""
  before = 0.0
  for row in evaluations:
    if steps is not None and row["step"] not in steps:
      continue
    if row["validation_accuracy"] >= target:
      return {"step": row["step"], "time": row["sim_time"],
              "share": (row["sim_time"] - before) / row["sim_time"]}
    before = row["sim_time"]
  return None


def _grid(evaluations: list[dict], num_steps: int, every: int, growth: float,
          targets: list[float], near: float) -> set[int]:
  """The steps a run evaluated densely would have evaluated under the rule."""
  by_step = {row["step"]: row["validation_accuracy"] for row in evaluations}
  steps, step, accuracy, best = set(), 0, None, None
  while step < num_steps:
    step = next_evaluation(step, num_steps, every, growth, accuracy, best, targets, near)
    steps.add(step)
    accuracy = by_step.get(step)
    if accuracy is None:  # past the dense run's last interim evaluation: the end
      break
    best = accuracy if best is None else max(best, accuracy)
  return steps


def main() -> None:
  parser = study.script_parser(__doc__)
  parser.add_argument("--study", required=True,
                      help="a densely evaluated claims study: its --output, or its records")
  parser.add_argument("--eval_every", type=int, default=4, help="the grids' smallest span")
  parser.add_argument("--eval_growth", type=float, default=study.EVAL_GROWTH,
                      help="the growing grid's share of the step")
  parser.add_argument("--eval_near", type=float, default=0.03,
                      help="dense within this accuracy below a target not yet reached")
  parser.add_argument("--readme", action="store_true",
                      help="also write the generated section grid_check of docs/results.md")
  args = parser.parse_args()
  arrivals, shares = [], {"dense": [], "growing": [], "plain": []}
  counts = {"dense": [], "growing": [], "plain": []}
  plain_same = 0
  for kind, strategies in tuning.CLAIMS_STRATEGIES.items():
    pilots = [r for r in _rows(os.path.join(args.study, f"pilot_{kind}")) if r["summary"]]
    level = float(np.mean([r["summary"]["validation_accuracy"] for r in pilots]))
    goals = {name: float(name[:-1]) / 100 * level for name in study.TARGET_LEVELS}
    for run in _rows(os.path.join(args.study, kind)):
      if run["label"] not in strategies or not run["summary"]:
        continue
      num_steps = run["summary"]["steps"]
      targets = sorted(goals.values())
      steps = _grid(run["evaluations"], num_steps, args.eval_every, args.eval_growth, targets,
                    args.eval_near)
      plain = _grid(run["evaluations"], num_steps, args.eval_every, args.eval_growth, targets,
                    0.0)
      last = _arrival(run["evaluations"], targets[-1])
      if last is not None:  # evaluations up to the last target, each grid
        counts["dense"].append(last["step"] // args.eval_every)
        counts["growing"].append(len([s for s in steps if s <= last["step"]]))
        counts["plain"].append(len([s for s in plain if s <= last["step"]]))
      seen = {row["step"] for row in run["evaluations"]} - {run["summary"]["steps"]}
      if seen and set(range(args.eval_every, max(seen) + 1, args.eval_every)) - seen:
        raise study.StudyInputError(f"{run['label']} seed {run['seed']} was not evaluated every "
                                    f"{args.eval_every} steps: run the study with --eval_growth 0")
      for name, goal in goals.items():
        dense = _arrival(run["evaluations"], goal)
        grown = _arrival(run["evaluations"], goal, steps)
        alone = _arrival(run["evaluations"], goal, plain)
        if dense is None or grown is None or alone is None:
          continue
        arrivals.append((kind, run["label"], run["seed"], name, dense, grown))
        plain_same += alone["step"] == dense["step"]
        shares["dense"].append(dense["share"])
        shares["growing"].append(grown["share"])
        shares["plain"].append(alone["share"])
  if not arrivals:
    raise study.StudyInputError(f"no run of {args.study} reaches a target")
  same = sum(d["step"] == g["step"] for *_, d, g in arrivals)
  over = sum(g["time"] / d["time"] - 1 > 0.02 for *_, d, g in arrivals)
  worst = max(arrivals, key=lambda a: a[5]["time"] / a[4]["time"])
  seeds = sorted({a[2] for a in arrivals})
  text = (
      f"Produced by `{study.command_line('scripts/grid_check.py')}` on "
      f"the runs of `python scripts/claims.py --data mnist1d --seeds "
      f"{','.join(map(str, seeds))} --eval_growth 0` (the claims' default runs, evaluated "
      f"every {args.eval_every} steps): of {len(arrivals)} arrivals (targets "
      f"{', '.join(study.TARGET_LEVELS)}; {len({(a[0], a[1]) for a in arrivals})} strategies "
      f"on their clusters; seeds {', '.join(map(str, seeds))}), **{same} are identical** on "
      f"the growing grid and the dense one; the largest difference is "
      f"{100 * (worst[5]['time'] / worst[4]['time'] - 1):.2f}% ({worst[1]}, {worst[0]}, seed "
      f"{worst[2]}, to {worst[3]}: step {worst[5]['step']} against {worst[4]['step']}), and "
      f"{over} differ by more than 2%. The growing grid evaluates every "
      f"{args.eval_every} steps within {100 * args.eval_near:g} points below a target not yet "
      f"reached; without that (--eval_near 0) {plain_same} of the {len(arrivals)} would be "
      f"identical. Evaluations up to a run's last target, mean over the runs: "
      f"{np.mean(counts['growing']):.0f} on the growing grid ({np.mean(counts['plain']):.0f} "
      f"without the dense stretches), {np.mean(counts['dense']):.0f} on the dense one. The "
      f"worst resolution of an arrival (the span before it, a share of its time) is "
      f"{100 * max(shares['growing']):.2f}% on the growing grid, "
      f"{100 * max(shares['dense']):.2f}% on the dense one.")
  print(text)
  if args.readme:
    study.replace_section("grid_check", text)


if __name__ == "__main__":
  study.run_main(main)
