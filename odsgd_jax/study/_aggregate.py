"""A study's runs, grouped by label and reduced to means, intervals and paired tests."""

import dataclasses
import math
from typing import Sequence

import numpy as np

from odsgd_jax.study._runner import RunResult, timed_accuracy
from odsgd_jax.study._stats import (Interval, Paired, Reached, mean_ci, paired, reached,
                                    time_to_target)


@dataclasses.dataclass(frozen=True)
class Group:
  """The seeds of one label, reduced.

  Attributes:
    label: the group's label.
    runs: its runs, by seed.
    accuracy: final test accuracy over the seeds that did not diverge.
    per_seed: {seed: final test accuracy, None if diverged}.
    versus: accuracy minus the baseline's, paired by seed (None for the baseline
      itself or without one).
    times: {seed: simulated time to the target, None if not reached}.
    reached: how many seeds reach the target, and when.
    speedup: the baseline's mean time to the target over this group's, on the seeds
      where both reach it (None if there are none).
    time_versus: time to target minus the baseline's, paired by seed.
    sim_time: simulated time of the whole run.
    communication, idle: shares of the simulated time (mean over workers).
  """

  label: str
  runs: tuple[RunResult, ...]
  accuracy: Interval
  per_seed: dict[int, float | None]
  versus: Paired | None
  times: dict[int, float | None]
  reached: Reached | None
  speedup: float | None
  time_versus: Paired | None
  sim_time: Interval
  communication: Interval
  idle: Interval

  @property
  def diverged(self) -> int:
    return sum(value is None for value in self.per_seed.values())


def _fraction(results: Sequence[RunResult], name: str) -> Interval:
  return mean_ci([float(np.mean(r.summary["sim_time_fractions"][name]))
                  for r in results if r.summary is not None])


def _accuracies(results: Sequence[RunResult]) -> dict[int, float | None]:
  return {r.spec.seed: r.accuracy for r in results}


def _converged(values: dict[int, float | None]) -> dict[int, float]:
  return {seed: value for seed, value in values.items() if value is not None}


def summarize(results: Sequence[RunResult], baseline: str | None = None,
              target: float | None = None) -> tuple[list[Group], float | None]:
  """Groups `results` by label (in order of appearance) and reduces each.

  Args:
    results: a study's runs.
    baseline: the label every group is compared with, seed by seed.
    target: the accuracy to time (validation where the data set has that split, else
      test); None to skip. With a baseline, nan means the baseline's mean final value
      of that accuracy.

  Returns:
    The groups, and the target used.
  """
  labels = list(dict.fromkeys(r.spec.label for r in results))
  by_label = {label: [r for r in results if r.spec.label == label] for label in labels}
  if baseline is not None and baseline not in by_label:
    raise ValueError(f"baseline {baseline!r} is not among the study's labels {labels}")
  base_accuracy = _converged(_accuracies(by_label[baseline])) if baseline else {}
  if target is not None and math.isnan(target):
    target = float(np.mean([r.summary[timed_accuracy(r.evaluations)]
                            for r in by_label[baseline] if r.summary is not None]))
  base_times = ({r.spec.seed: time_to_target(r.evaluations, target, timed_accuracy(r.evaluations))
                 for r in by_label[baseline]} if baseline and target is not None else {})
  groups = []
  for label, runs in by_label.items():
    per_seed = _accuracies(runs)
    times = ({r.spec.seed: (time_to_target(r.evaluations, target, timed_accuracy(r.evaluations))
                            if r.summary else None)
              for r in runs} if target is not None else {})
    both = [s for s, t in times.items() if t is not None and base_times.get(s) is not None]
    compared = baseline is not None and label != baseline
    groups.append(Group(
        label=label, runs=tuple(runs), accuracy=mean_ci(list(_converged(per_seed).values())),
        per_seed=per_seed,
        versus=paired(_converged(per_seed), base_accuracy) if compared else None,
        times=times, reached=reached(times) if target is not None else None,
        speedup=(float(np.mean([base_times[s] for s in both]) / np.mean([times[s] for s in both]))
                 if both else None),
        time_versus=(paired({s: times[s] for s in both}, {s: base_times[s] for s in both})
                     if compared and both else None),
        sim_time=mean_ci([r.summary["sim_time_s"] for r in runs if r.summary]),
        communication=_fraction(runs, "communication"), idle=_fraction(runs, "idle"),
    ))
  return groups, target
