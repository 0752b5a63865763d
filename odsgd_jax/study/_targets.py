"""Targets of the task's metric (accuracies fixed on pilot seeds, or stated levels such as a
loss), and the censored times at which runs reach them.

"Faster" is judged by the rules of `verdicts`: time to several targets, a primary one
among them, every seed counted (one that never reaches is censored at the end of its run,
and each pair of runs compared up to the shorter one's end).
A share target is a fraction of the baseline's final accuracy on pilot seeds, which are not
among the compared seeds, so the level a strategy is timed against is not read off the
runs it is judged on; a falling metric (a loss) is timed at levels stated before the runs.
"""

import math
from typing import Mapping, Sequence

import numpy as np

from odsgd_jax.study import verdicts
from odsgd_jax.study._aggregate import Group
from odsgd_jax.study._runner import timed_metric
from odsgd_jax.tasks import CLASSIFICATION, Metric

PILOT_SEEDS = (100, 101, 102)
TARGET_LEVELS = ("90%", "95%", "99%")  # of the baseline's final validation accuracy
PRIMARY = "95%"


def check_targets(names: Sequence[str], primary: str,
                  metric: Metric = CLASSIFICATION.target) -> None:
  """Checks target names: for a rising metric (accuracy), "<p>%" (a share of the
  baseline's pilot value, 0 < p <= 100) or a value in (0, 1]; for a falling one (a loss),
  a positive level; `primary` among them."""
  if not names:
    raise ValueError("no targets given; e.g. 90%,95%,99% or 0.9 (accuracy), 1.9 (a loss)")
  for name in names:
    try:
      value = float(name[:-1]) / 100 if name.endswith("%") else float(name)
    except ValueError:
      value = float("nan")
    if not metric.higher_is_better:
      if name.endswith("%") or not 0 < value < math.inf:
        raise ValueError(f"target {name!r} must be a level of the {metric.name}, which falls "
                         f"as a model learns: a positive number such as 1.9 (a share of a "
                         f"pilot's {metric.name} is not a level to reach)")
    elif not 0 < value <= 1:
      raise ValueError(f"target {name!r} must be a share of the baseline's pilot "
                       f"{metric.name} such as 95% or a value in (0, 1] such as 0.9")
  if len(set(names)) != len(names):
    raise ValueError(f"targets {list(names)} repeat one")
  if primary not in names:
    raise ValueError(f"the primary target {primary!r} is not among the targets {list(names)}")


def needs_pilots(names: Sequence[str]) -> bool:
  return any(name.endswith("%") for name in names)


class PilotsDivergedError(ValueError):
  """Every pilot run diverged: no target can be fixed, so no time can be compared."""


def pilot_level(pilots: Group) -> float:
  """The pilot runs' mean final value of the target metric on the split targets are timed
  on.

  Raises:
    PilotsDivergedError: every pilot diverged.
  """
  values = [r.summary[timed_metric(r.evaluations, r.target)] for r in pilots.runs
            if r.summary]
  if not values:
    seeds = ", ".join(str(r.spec.seed) for r in pilots.runs)
    raise PilotsDivergedError(
        f"every pilot run of {pilots.label} diverged (seeds {seeds}): no target level can "
        f"be fixed; lower its learning rate (--set optimizer.learning_rate=...) or see "
        f"{pilots.runs[0].workdir if pilots.runs else 'the pilots workdirs'}")
  return float(np.mean(values))


def targets(names: Sequence[str], pilots: Group | None) -> dict[str, float]:
  """{name: level of the target metric}: "95%" is 0.95 x the pilots' mean final value,
  "0.9" is 0.9."""
  goals = {}
  for name in names:
    if name.endswith("%"):
      if pilots is None:
        raise ValueError(f"target {name!r} is a share of the pilots' final value: pass pilots")
      goals[name] = float(name[:-1]) / 100 * pilot_level(pilots)
    else:
      goals[name] = float(name)
  return goals


def arrivals(group: Group, target: float) -> dict[int, verdicts.Arrival]:
  """Each seed's time to `target` on the timed split. A seed that diverged never
  arrives: it is censored at the end of the group's finished runs (the same number of
  steps)."""
  ends = [r.summary["sim_time_s"] for r in group.runs if r.summary is not None]
  end = max(ends) if ends else float("nan")
  metric = group.target
  return {run.spec.seed: (verdicts.arrival(run.evaluations, target, run.summary["sim_time_s"],
                                           timed_metric(run.evaluations, metric),
                                           metric.higher_is_better)
                          if run.summary is not None else verdicts.Arrival(end, False, end))
          for run in group.runs}


def speed_row(strategy: Group, baseline: Group,
              goals: Mapping[str, float]) -> dict[str, verdicts.SpeedTest]:
  """{target name: the strategy's censored times against the baseline's}."""
  return {name: verdicts.speed_test(arrivals(strategy, goal), arrivals(baseline, goal))
          for name, goal in goals.items()}


def _arrival_share(run, target: float) -> float | None:
  """The share of a run's time to `target` that lies between the evaluation that first saw
  it and the one before (the arrival is known only to within that span); None where the
  run never reaches it or diverged."""
  if run.summary is None:
    return None
  metric = run.target
  key, before = timed_metric(run.evaluations, metric), 0.0
  for row in run.evaluations:
    if metric.oriented(row[key]) >= metric.oriented(target):
      return (row["sim_time"] - before) / row["sim_time"]
    before = row["sim_time"]
  return None


def resolution(group: Group, target: float) -> float:
  """The worst relative resolution of the group's times to `target`: over the seeds that
  reach it, the largest `_arrival_share`; nan where no seed reaches it."""
  shares = [s for run in group.runs if (s := _arrival_share(run, target)) is not None]
  return max(shares) if shares else float("nan")


def ratio_resolution(strategy: Group, baseline: Group, target: float) -> float:
  """The worst relative resolution of the ratio of two arms' times to `target`, over the
  seeds where both arrive: the true ratio lies between (1 - e_s) and 1 / (1 - e_b) times the
  one read, e_s and e_b the arms' `_arrival_share`s; this is that interval's width (inf
  where the baseline arrived at its first evaluation). nan where no seed has both."""
  base = {run.spec.seed: run for run in baseline.runs}
  widths = []
  for run in strategy.runs:
    own = _arrival_share(run, target)
    other = _arrival_share(base[run.spec.seed], target) if run.spec.seed in base else None
    if own is not None and other is not None:
      # an arrival at the first evaluation (share 1) may lie anywhere before it: unbounded
      widths.append(math.inf if other >= 1 else 1 / (1 - other) - (1 - own))
  return max(widths) if widths else float("nan")


def resolution_lines(pairs: Sequence[tuple[Group, Group]], goals: Mapping[str, float]
                     ) -> list[str]:
  """What a study prints of its achieved resolution: for each target, each arm's worst
  share and each compared pair's worst ratio width."""
  lines = []
  for name, goal in goals.items():
    arms = {g.label: g for pair in pairs for g in pair}
    per_arm = ", ".join(f"{label} {100 * resolution(g, goal):.2f}%" for label, g in arms.items())
    ratios = ", ".join(f"{s.label}/{b.label} {100 * ratio_resolution(s, b, goal):.2f}%"
                       for s, b in pairs)
    lines.append(f"resolution at {name} ({goal:.4f}): per arm {per_arm}; ratios {ratios}")
  return lines


def reached(group: Group, target: float) -> tuple[int, int]:
  """(seeds that reach `target`, seeds)."""
  times = arrivals(group, target)
  return sum(a.reached for a in times.values()), len(times)
