"""Checks the growing evaluation grid against a dense one: the same claims runs trained on
both, is a time to target read the same?

  python scripts/claims.py --data mnist1d --seeds 0-3 --eval_growth 0 --output runs/dense
  python scripts/grid_check.py --dense runs/dense --grid records/claims

--dense: a claims study evaluated every --eval_every steps (--eval_growth 0; its --output,
whose study.json files are read, or its records); --grid: the same study on the growing
grid (docs/results.md, "The evaluation grid"), usually its records. The runs of the same
strategy, cluster and seed in both train the same trajectory (the grid does not move it,
tests/test_records.py), so their arrivals differ only by where they were read. For every
such pair and target (the targets fixed on each study's pilots, which must agree): the
arrival on each grid, whether it is the same step, whether the growing grid's lies within
the dense grid's span before its arrival (where the finer grid only resolves the dense one
better), the largest difference, each grid's worst resolution, and the evaluations each
needed up to the run's last target. And, read off the dense runs alone, two variants whose
steps are a subset of the dense ones: the growing grid without its dense stretches near a
target, and with them at spans of at most --eval_every steps (`capped`): how many of their
arrivals would have been the dense ones, and how many evaluations each needs.
"""

import json
import math
import os

import numpy as np

from odsgd_jax import study
from odsgd_jax.study import _records as records_lib
from odsgd_jax.study import _tuning as tuning


def _rows(folder: str) -> list[dict]:
  """A study's runs: its study.json, or its records."""
  summary = os.path.join(folder, "study.json")
  if os.path.exists(summary):
    with open(summary, encoding="utf-8") as f:
      return json.load(f)["runs"]
  rows = records_lib.records_in(folder)
  if not rows:
    raise study.StudyInputError(f"{folder} holds neither a study.json nor run records: give "
                                f"a claims study's --output or records folder")
  return rows


def _arrival(evaluations: list[dict], target: float) -> dict | None:
  """The first evaluation whose validation accuracy reaches `target`, the evaluation before
  it, and the span between them as a share of the arrival's time; and how many evaluations
  came before it."""
  before = {"step": 0, "sim_time": 0.0}
  for count, row in enumerate(evaluations, start=1):
    if row["validation_accuracy"] >= target:
      return {"step": row["step"], "time": row["sim_time"], "before": before["sim_time"],
              "share": (row["sim_time"] - before["sim_time"]) / row["sim_time"],
              "count": count}
    before = row
  return None


def _goals(folder: str, kind: str) -> list[float]:
  pilots = [r for r in _rows(os.path.join(folder, f"pilot_{kind}")) if r["summary"]]
  level = float(np.mean([r["summary"]["validation_accuracy"] for r in pilots]))
  return [float(name[:-1]) / 100 * level for name in study.TARGET_LEVELS]


def _variant(evaluations: list[dict], num_steps: int, goals: list[float], capped: bool
             ) -> set[int]:
  """The steps (multiples of 4) a dense run would have been evaluated at under the growing
  grid without dense stretches, or (`capped`) with them at 4-step spans."""
  by_step = {row["step"]: row["validation_accuracy"] for row in evaluations}
  steps, step, accuracy, best = set(), 0, None, None
  while step < num_steps:
    unreached = [g for g in goals if best is None or best < g]
    if not unreached:
      break
    near = capped and accuracy is not None and any(accuracy >= g - 0.03 for g in unreached)
    span = 4 if near else max(4, 4 * (int(study.EVAL_GROWTH * step) // 4))
    step = min(step + span, num_steps)
    steps.add(step)
    accuracy = by_step.get(step)
    if accuracy is None:
      break
    best = accuracy if best is None else max(best, accuracy)
  return steps


def _largest(differences: list[float]) -> str:
  finite = [d for d in differences if math.isfinite(d)]
  never = len(differences) - len(finite)
  return (f"largest difference {100 * max(finite):+.2f}%"
          + (f", {never} never seen" if never else ""))


def main() -> None:
  parser = study.script_parser(__doc__)
  parser.add_argument("--dense", required=True,
                      help="the claims study evaluated densely: its --output, or its records")
  parser.add_argument("--grid", required=True,
                      help="the same study on the growing grid: its records, or its --output")
  study.add_section_flags(parser, "grid_check")
  args = parser.parse_args()
  pairs, counts = [], {"dense": [], "grid": [], "plain": [], "capped": []}
  variants = {"plain": [], "capped": []}
  for kind, strategies in tuning.CLAIMS_STRATEGIES.items():
    goals = _goals(args.dense, kind)
    if not np.allclose(goals, _goals(args.grid, kind), rtol=0, atol=1e-9):
      raise study.StudyInputError(f"the two studies' {kind} pilots give other targets: they "
                                  f"are not the same study on two grids")
    grid = {(r["label"], r["seed"]): r for r in _rows(os.path.join(args.grid, kind))
            if r["summary"]}
    for run in _rows(os.path.join(args.dense, kind)):
      other = grid.get((run["label"], run["seed"]))
      if run["label"] not in strategies or not run["summary"] or other is None:
        continue
      last = (_arrival(run["evaluations"], goals[-1]), _arrival(other["evaluations"], goals[-1]))
      chosen = {name: _variant(run["evaluations"], run["summary"]["steps"], goals,
                               name == "capped") for name in variants}
      if None not in last:
        counts["dense"].append(last[0]["count"])
        counts["grid"].append(last[1]["count"])
        for name, steps in chosen.items():
          counts[name].append(len([s for s in steps if s <= last[0]["step"]]))
      for name, goal in zip(study.TARGET_LEVELS, goals, strict=True):
        dense, grown = _arrival(run["evaluations"], goal), _arrival(other["evaluations"], goal)
        if dense is not None and grown is not None:
          pairs.append((kind, run["label"], run["seed"], name, dense, grown))
          for name, steps in chosen.items():
            sparse = _arrival([r for r in run["evaluations"] if r["step"] in steps], goal)
            variants[name].append(math.inf if sparse is None
                                  else sparse["time"] / dense["time"] - 1)
  if not pairs:
    raise study.StudyInputError(f"no run of {args.grid} matches one of {args.dense} that "
                                f"reaches a target")
  same = sum(d["step"] == g["step"] for *_, d, g in pairs)
  inside = sum(d["before"] < g["time"] <= d["time"] for *_, d, g in pairs)
  worst = max(pairs, key=lambda p: abs(p[5]["time"] / p[4]["time"] - 1))
  over = sum(abs(g["time"] / d["time"] - 1) > 0.02 for *_, d, g in pairs)
  seeds = sorted({p[2] for p in pairs})
  text = (
      f"Produced by `{study.command_line('scripts/grid_check.py')}`: of {len(pairs)} "
      f"arrivals ({len({(p[0], p[1]) for p in pairs})} strategies on their clusters, seeds "
      f"{', '.join(map(str, seeds))}, targets {', '.join(study.TARGET_LEVELS)}), **{same} are "
      f"read at the same step** on the growing grid and the dense one, and {inside} lie "
      f"within the dense grid's span before its arrival (the growing grid, finer there, "
      f"resolves it better); the largest difference is "
      f"{100 * (worst[5]['time'] / worst[4]['time'] - 1):+.2f}% ({worst[1]}, {worst[0]}, seed "
      f"{worst[2]}, to {worst[3]}: step {worst[5]['step']} against {worst[4]['step']}), and "
      f"{over} differ by more than 2%. Worst resolution of an arrival: "
      f"{100 * max(g['share'] for *_, d, g in pairs):.2f}% on the growing grid, "
      f"{100 * max(d['share'] for *_, d, g in pairs):.2f}% on the dense one. Evaluations up "
      f"to a run's last target, mean over the runs: {np.mean(counts['grid']):.0f} growing, "
      f"{np.mean(counts['dense']):.0f} dense. Read off the dense runs: the growing grid "
      f"without its stretches near a target would read {sum(v == 0 for v in variants['plain'])} "
      f"of the {len(variants['plain'])} arrivals at the dense step "
      f"({_largest(variants['plain'])}, {np.mean(counts['plain']):.0f} evaluations), and "
      f"with them at spans of at most 4 steps {sum(v == 0 for v in variants['capped'])} "
      f"({_largest(variants['capped'])}, {np.mean(counts['capped']):.0f} evaluations).")
  print(text)
  if args.readme:
    study.replace_section("grid_check", text, check=args.check)


if __name__ == "__main__":
  study.run_main(main)
