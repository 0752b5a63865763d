"""Speed verdicts recomputed under other clocks: the fitted constants that time a study's
runs (docs/clock.md), each moved to the ends of its leave-one-family-out range, one at a
time and all together. A verdict that changes is reported as depending on the clock.

Accuracy never moves (the training is the same); only the simulated times do, replayed
from each run's clock.json by `train.retime`. For a strategy whose schedule follows the
clock (asgd, ssp, oscars) the replay keeps the run's training, which ran on the fitted
clock's schedule: an approximation, stated where the column is shown.
"""

import dataclasses
import functools
import json
import os
from typing import Callable, Mapping, Sequence

import numpy as np

from odsgd_jax import cluster
from odsgd_jax.cluster import calibration
from odsgd_jax.study import _records as records_lib
from odsgd_jax.cluster import validation as clock_validation
from odsgd_jax.study._aggregate import Group
from odsgd_jax.study._runner import RunResult
from odsgd_jax.study._stats import mean_ci
from odsgd_jax.study.verdicts import Verdict
from odsgd_jax.train import CLOCK_FILE, CONSTANT_FIELDS, retime_record

# What a "robust to the clock" column means, for a table's caption.
ROBUSTNESS = ("Robust to the clock: the verdict is the same with every fitted constant that "
              "times the runs at each end of its leave-one-family-out range, one at a time "
              "and all at their slow or fast ends together (docs/clock.md); the replayed "
              "times of asgd, ssp and oscars keep the schedule their training ran on.")


@functools.lru_cache(maxsize=None)
def _constants_of(spec) -> frozenset[str]:
  config = spec.build()
  fitted = calibration.fitted_values()
  names = {name for name, field in CONSTANT_FIELDS.items()
           if config.cluster.get(field, 0.0) and config.cluster[field] == fitted[name]}
  names |= cluster.transports_of(config.cluster) & set(calibration.FITTED)
  return frozenset(names)


def clock_constants(result: RunResult) -> frozenset[str]:
  """The fitted constants that time `result`'s run: a term its config sets to the fitted
  value (a config's own value is not the clock's uncertainty) and the fitted shares of
  the transports its network runs on."""
  return _constants_of(result.spec)


# A constant's end that makes the simulated cluster slower: more noise, interference and
# contention; a smaller share of line rate.
def _slow_end(name: str, low: float, high: float) -> float:
  return low if name in calibration.TRANSPORTS else high


def clock_variants(names: Sequence[str],
                   ranges: Mapping[str, tuple[float, float]] | None = None
                   ) -> dict[str, dict[str, float]]:
  """{description: constants}: each of `names` at each end of its range (where the end is
  not the fitted value), then, with more than one, all at their slow ends and all at
  their fast ones."""
  ranges = clock_validation.constant_ranges() if ranges is None else ranges
  fitted = calibration.fitted_values()
  variants = {}
  for name in sorted(names):
    for end in ranges[name]:
      if end != fitted[name]:
        variants[f"{name} {end:g}"] = {name: end}
  if len(names) > 1:
    slow = {n: _slow_end(n, *ranges[n]) for n in sorted(names)}
    fast = {n: (ranges[n][0] if slow[n] == ranges[n][1] else ranges[n][1]) for n in slow}
    for label, ends in (("all slow ends", slow), ("all fast ends", fast)):
      if ends != {n: fitted[n] for n in ends} and ends not in variants.values():
        variants[label] = ends
  return variants


_REPLAYS: dict[tuple[str, str, tuple], np.ndarray] = {}


def _replayed_times(result: RunResult, constants: Mapping[str, float]) -> np.ndarray:
  """`retime_record`'s times, shared by runs that differ only in their training seed, which
  the clock never reads: runs whose records are the same (the seeds of a strategy whose
  ticks do not depend on the parameters) replay once, not once per seed. A result without
  its config and clock (made by hand) is read from its workdir."""
  config, clock = result.config, result.clock
  if config is None or clock is None:
    with open(os.path.join(result.workdir, "config.json"), encoding="utf-8") as f:
      config = json.load(f)
    with open(os.path.join(result.workdir, CLOCK_FILE), encoding="utf-8") as f:
      clock = json.load(f)
  unseeded = json.loads(json.dumps(config))
  unseeded["train"].pop("seed", None)
  key = (json.dumps(unseeded, sort_keys=True), json.dumps(clock, sort_keys=True),
         tuple(sorted(constants.items())))
  if key not in _REPLAYS:
    _REPLAYS[key] = retime_record(config, clock, constants, result.workdir)
  return _REPLAYS[key]


def retimed_result(result: RunResult, constants: Mapping[str, float]) -> RunResult:
  """`result` with its simulated times as the clock with `constants` gives them (only those
  that time its run); a diverged run has no times to replay."""
  used = {name: value for name, value in constants.items() if name in clock_constants(result)}
  if result.summary is None or not used:
    return result
  steps = [int(row["step"]) for row in result.evaluations]
  key = kept = None
  if result.derived is not None and result.config is not None:  # replayed before: kept
    key = result.derived.key("replay", records_lib.config_digest(result.config),
                             sorted(used.items()), steps)
    kept = result.derived.get(key, lineage=result.lineage)
  if kept is None:
    times = _replayed_times(result, used)
    kept = {"at": [float(times[s - 1]) if s else 0.0 for s in steps], "end": float(times[-1])}
    if key is not None:
      result.derived.put(key, kept)
  evaluations = [{**row, "sim_time": at} for row, at in zip(result.evaluations, kept["at"],
                                                             strict=True)]
  summary = {**result.summary, "sim_time_s": kept["end"]}
  return dataclasses.replace(result, summary=summary, evaluations=evaluations)


def retimed_group(group: Group, constants: Mapping[str, float]) -> Group:
  runs = tuple(retimed_result(run, constants) for run in group.runs)
  return dataclasses.replace(group, runs=runs, sim_time=mean_ci(
      [r.summary["sim_time_s"] for r in runs if r.summary is not None]))


def robustness(studies: Sequence[Mapping[str, Group]],
               decide: Callable[[Sequence[Mapping[str, Group]]], Sequence[Verdict]],
               ranges: Mapping[str, tuple[float, float]] | None = None) -> list[str]:
  """For each verdict `decide(studies)` gives: "yes" when every clock variant
  (`clock_variants` of the constants timing the studies' runs) gives the same, else
  "depends on the clock" with the variants that change it and the ranges."""
  ranges = clock_validation.constant_ranges() if ranges is None else ranges
  names = sorted(set().union(*[clock_constants(run) for groups in studies
                               for group in groups.values() for run in group.runs]))
  fitted = list(decide(studies))
  changes: list[list[str]] = [[] for _ in fitted]
  for label, constants in clock_variants(names, ranges).items():
    retimed = [{key: retimed_group(group, constants) for key, group in groups.items()}
               for groups in studies]
    for i, (before, after) in enumerate(zip(fitted, decide(retimed), strict=True)):
      if after.outcome != before.outcome:
        changes[i].append(f"{after.outcome} with {label}")
  spans = ", ".join(f"{name} {ranges[name][0]:g}-{ranges[name][1]:g}" for name in names)
  return ["yes" if not changed else
          f"depends on the clock: {'; '.join(changed)} (ranges {spans})"
          for changed in changes]
