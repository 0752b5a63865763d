"""A study's runs, grouped by label and reduced to means, intervals and paired tests."""

import dataclasses
from typing import Sequence

import numpy as np

from odsgd_jax.data import DATASETS
from odsgd_jax.study._runner import RunResult, task_of
from odsgd_jax.study._stats import Interval, Paired, mean_ci, paired
from odsgd_jax.tasks import Metric


@dataclasses.dataclass(frozen=True)
class Group:
  """The seeds of one label, reduced.

  Attributes:
    label: the group's label.
    runs: its runs, by seed.
    score: the final test value of the task's target metric over the seeds that did not
      diverge, turned so that higher is better (`Metric.oriented`: an accuracy, a negated
      loss); `target.oriented` turns it back.
    per_seed: {seed: final test score, None if diverged}.
    validation: {seed: final validation score, None if diverged}; empty on a data set
      without a validation split.
    versus: score minus the baseline's, paired by seed (None for the baseline
      itself or without one): positive is better (a gain in accuracy, a loss lower).
    sim_time: simulated time of the whole run.
    communication, idle: shares of the simulated time (mean over workers).
  """

  label: str
  runs: tuple[RunResult, ...]
  score: Interval
  per_seed: dict[int, float | None]
  validation: dict[int, float | None]
  versus: Paired | None
  sim_time: Interval
  communication: Interval
  idle: Interval

  @property
  def diverged(self) -> int:
    return sum(value is None for value in self.per_seed.values())

  @property
  def target(self) -> Metric:
    return self.runs[0].target

  @property
  def chance(self) -> float:
    """A uniform guess's score on the group's data set: what a diverged seed counts as."""
    config = self.runs[0].config or self.runs[0].spec.build().to_dict()
    task = task_of(config)
    return task.target.oriented(task.chance_level(DATASETS[config["data"]["name"]].num_classes))


def _fraction(results: Sequence[RunResult], name: str) -> Interval:
  return mean_ci([float(np.mean(r.summary["sim_time_fractions"][name]))
                  for r in results if r.summary is not None])


def _scores(results: Sequence[RunResult]) -> dict[int, float | None]:
  return {r.spec.seed: r.score for r in results}


def _validation(results: Sequence[RunResult]) -> dict[int, float | None]:
  metric = results[0].target
  key = f"validation_{metric.name}"
  if not any(r.summary and key in r.summary for r in results):
    return {}
  return {r.spec.seed: metric.oriented(r.summary[key]) if r.summary else None for r in results}


def converged(values: dict[int, float | None]) -> dict[int, float]:
  return {seed: value for seed, value in values.items() if value is not None}


def summarize(results: Sequence[RunResult], baseline: str | None = None) -> list[Group]:
  """Groups `results` by label (in order of appearance) and reduces each; with a
  `baseline` label, every other group's score is paired with it by seed."""
  labels = list(dict.fromkeys(r.spec.label for r in results))
  by_label = {label: [r for r in results if r.spec.label == label] for label in labels}
  if baseline is not None and baseline not in by_label:
    raise ValueError(f"baseline {baseline!r} is not among the study's labels {labels}")
  base_score = converged(_scores(by_label[baseline])) if baseline else {}
  groups = []
  for label, runs in by_label.items():
    per_seed = _scores(runs)
    compared = baseline is not None and label != baseline
    groups.append(Group(
        label=label, runs=tuple(runs), score=mean_ci(list(converged(per_seed).values())),
        per_seed=per_seed, validation=_validation(runs),
        versus=paired(converged(per_seed), base_score) if compared else None,
        sim_time=mean_ci([r.summary["sim_time_s"] for r in runs if r.summary]),
        communication=_fraction(runs, "communication"), idle=_fraction(runs, "idle"),
    ))
  return groups
