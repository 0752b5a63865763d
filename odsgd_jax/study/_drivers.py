"""The studies the scripts run: strategies, compressors and config grids, over seeds."""

import itertools
from typing import Any, Mapping, Sequence

import ml_collections

from odsgd_jax.comm import parse_communication
from odsgd_jax.study import verdicts
from odsgd_jax.study._aggregate import Group, summarize
from odsgd_jax.study._grid import RunSpec, StudyInputError, grid
from odsgd_jax.study._report import (accuracy_table, bits_per_step, caption,
                                     clock_robustness, markdown, noninferiority,
                                     noninferiority_cells, noninferiority_header, rules,
                                     sweep_table, time_table)
from odsgd_jax.study._robustness import ROBUSTNESS
from odsgd_jax.study._runner import RunResult, timed_metric
from odsgd_jax.study._targets import PRIMARY, resolution

Overrides = Sequence[tuple[str, Any]]


def with_strategy(config: str, strategy: str) -> str:
  """`file.py[:variant]` -> `file.py:<strategy>[,variant]`: the config files take a
  strategy (and variants such as `runlocal`) after ':'."""
  path, _, arg = config.partition(":")
  return f"{path}:{strategy}" + (f",{arg}" if arg else "")


def strategy_specs(config: str, strategies: Sequence[str], seeds: Sequence[int],
                   common: Overrides = ()) -> list[RunSpec]:
  """Each strategy of `config` (`with_strategy`), with every seed."""
  return grid({name: (with_strategy(config, name), ()) for name in strategies}, seeds, common)


def compression_specs(config: str, strategy: str, compressions: Sequence[str],
                      seeds: Sequence[int], common: Overrides = ()) -> list[RunSpec]:
  """One strategy under each compression spec ("none" for plain float32). A spec with
  momentum correction runs plain SGD inside (optimizer.momentum=0): the momentum is
  the compressor's."""
  if not compressions:
    raise StudyInputError("no compression specs given: e.g. none;topk:0.01;qsgd:8")
  labels = {}
  for spec in compressions:
    overrides: list[tuple[str, Any]] = [("strategy.compression", "" if spec == "none" else spec)]
    try:
      communication = parse_communication(None if spec == "none" else spec)
    except ValueError as error:
      raise StudyInputError(str(error)) from error  # it names the spec
    if communication is not None and communication.momentum:
      overrides.append(("optimizer.momentum", 0.0))
    labels[spec] = (with_strategy(config, strategy), overrides)
  return grid(labels, seeds, common)


def sweep_specs(config: str, fields: dict[str, Sequence[Any]], seeds: Sequence[int],
                common: Overrides = ()) -> list[RunSpec]:
  """Every combination of the fields' values (labelled "field=value,...")."""
  labels = {}
  for values in itertools.product(*fields.values()):
    overrides = list(zip(fields, values, strict=True))
    labels[",".join(f"{f}={v}" for f, v in overrides) or "config"] = (config, overrides)
  return grid(labels, seeds, common)


def strategy_report(results: Sequence[RunResult], config: ml_collections.ConfigDict,
                    command: str, baseline: str, goals: Mapping[str, float] | None = None,
                    primary: str = PRIMARY, pilots: Group | None = None,
                    equal_time: bool = False) -> tuple[list[Group], str]:
  """The accuracy table (non-inferiority to `baseline`) and, with `goals` ({name:
  accuracy}), the time table: speedups to each target with `primary` deciding "faster".
  `pilots`: the baseline's pilot runs the targets were fixed on, named in the text;
  `equal_time`: the runs had equal-time budgets (`equal_time_specs`), said in the text."""
  seeds = sorted({r.spec.seed for r in results})
  groups = summarize(results, baseline)
  target = groups[0].target
  text = (f"{caption(config, seeds, command, results)}\n\nFinal test {target.name}; "
          f"{rules(target)}.\n\n{accuracy_table(groups, baseline)}")
  if goals:
    robust = clock_robustness(groups, baseline, goals, primary)
    metric = timed_metric(groups[0].runs[0].evaluations, target).replace("_", " ")
    values = ", ".join(f"{name}: {value:.4f}" for name, value in goals.items())
    fixed = (f"; the shares are of {baseline}'s mean final {metric} on pilot seeds "
             f"{', '.join(str(r.spec.seed) for r in pilots.runs)}, not among the compared ones"
             if pilots is not None else "")
    budget = (f"Each strategy trained until it had spent {baseline}'s simulated time with the "
              f"same seed, or for its own steps if more (the steps column), its learning-rate "
              f"schedule spanning them; final {target.name} is that run's. "
              if equal_time else "")
    known = max(resolution(g, goals[primary]) for g in groups)
    text += (f"\n\nSimulated time to {metric} targets ({values}{fixed}), {primary} primary, "
             f"each known to within {100 * known:.1f}% of itself (the worst run's span between "
             f"evaluations at its arrival). {budget}{verdicts.speed_rule(baseline)} Each seed "
             f"draws its own cluster noise; a figure printed without an interval has one "
             f"narrower than its last digit. "
             f"{ROBUSTNESS}\n\n"
             f"{time_table(groups, baseline, goals, primary, robust)}")
  return groups, text


def compression_report(results: Sequence[RunResult], config: ml_collections.ConfigDict,
                       command: str) -> tuple[list[Group], str]:
  """Bits per step, the reduction against "none", accuracy against "none" (non-inferiority)."""
  labels = {r.spec.label for r in results}
  baseline = "none" if "none" in labels else None
  groups = summarize(results, baseline)
  metric = groups[0].target
  turn = 1.0 if metric.higher_is_better else -1.0  # a loss's score turned back
  tested = noninferiority(groups, baseline) if baseline else {}
  dense = next((bits_per_step(g) for g in groups if g.label == "none"), None)
  rows = []
  for g in groups:
    bits = bits_per_step(g)
    rows.append([
        g.label, f"{bits:,.0f}", f"{dense / bits:.1f}x" if dense else "-",
        g.score.format(4, turn) + (f" ({g.diverged} diverged)" if g.diverged else ""),
        *noninferiority_cells(tested.get(g.label), metric), g.sim_time.format(1)])
  header = ["compression", "bits per step (per worker)", "fewer bits than none",
            f"final test {metric.name}", *noninferiority_header("none", metric),
            "simulated time (s)"]
  seeds = sorted({r.spec.seed for r in results})
  text = (f"{config.strategy.name}; {caption(config, seeds, command, results)} Bits per step "
          f"include dense warm-up steps; {rules(metric)}.\n\n{markdown(header, rows)}")
  return groups, text


def sweep_report(results: Sequence[RunResult], config: ml_collections.ConfigDict,
                 command: str) -> tuple[list[Group], str]:
  """Validation and test accuracy per combination, paired against the first one; the
  combination with the best mean validation accuracy is the one chosen."""
  groups = summarize(results, results[0].spec.label)
  seeds = sorted({r.spec.seed for r in results})
  return groups, f"{caption(config, seeds, command, results)}\n\n{sweep_table(groups)}"
