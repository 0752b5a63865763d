"""The studies the scripts run: strategies, compressors and config grids, over seeds."""

import itertools
import math
from typing import Any, Sequence

import ml_collections

from odsgd_jax.comm import parse_communication
from odsgd_jax.study._aggregate import Group, summarize
from odsgd_jax.study._grid import RunSpec, grid
from odsgd_jax.study._report import (accuracy_table, bits_per_step, caption, format_p,
                                     format_significant, markdown, time_table)
from odsgd_jax.study._runner import RunResult

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
  labels = {}
  for spec in compressions:
    overrides: list[tuple[str, Any]] = [("strategy.compression", "" if spec == "none" else spec)]
    communication = parse_communication(None if spec == "none" else spec)
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
                    command: str, baseline: str, targets: Sequence[float] = (),
                    ) -> tuple[list[Group], float | None, str]:
  """The accuracy table and, per target (nan: the baseline's mean final accuracy), the
  time-to-target table. Returns (groups of the first target, that target, markdown)."""
  seeds = sorted({r.spec.seed for r in results})
  groups, _ = summarize(results, baseline)
  text = f"{caption(config, seeds, command)}\n\n{accuracy_table(groups, baseline)}"
  first = None
  for target in targets:
    named = math.isnan(target)
    target_groups, target = summarize(results, baseline, target)
    if first is None:
      groups, first = target_groups, target
    which = f" ({baseline}'s mean final accuracy)" if named else ""
    text += (f"\n\nTime to test accuracy {target:.4g}{which} on the simulated cluster:\n\n"
             f"{time_table(target_groups, baseline, target)}")
  return groups, first, text


def compression_report(results: Sequence[RunResult], config: ml_collections.ConfigDict,
                       command: str) -> tuple[list[Group], str]:
  """Bits per step, the reduction against "none", accuracy paired against "none"."""
  labels = {r.spec.label for r in results}
  groups, _ = summarize(results, "none" if "none" in labels else None)
  dense = next((bits_per_step(g) for g in groups if g.label == "none"), None)
  rows = []
  for g in groups:
    bits = bits_per_step(g)
    rows.append([
        g.label, f"{bits:,.0f}", f"{dense / bits:.1f}x" if dense else "-",
        g.accuracy.format(4) + (f" ({g.diverged} diverged)" if g.diverged else ""),
        "-" if g.versus is None else g.versus.difference.format(1, 100, sign=True),
        format_p(g.versus), format_significant(g.versus), g.sim_time.format(1)])
  header = ["compression", "bits per step (per worker)", "fewer bits than none",
            "final test accuracy", "vs none (points)", "p (paired t)", "significant (p < 0.05)",
            "simulated time (s)"]
  seeds = sorted({r.spec.seed for r in results})
  text = (f"{config.strategy.name}; {caption(config, seeds, command)} Bits per step include "
          f"dense warm-up steps.\n\n{markdown(header, rows)}")
  return groups, text


def sweep_report(results: Sequence[RunResult], config: ml_collections.ConfigDict,
                 command: str) -> tuple[list[Group], str]:
  """Accuracy per combination, paired against the first one."""
  first = results[0].spec.label
  groups, _ = summarize(results, first)
  seeds = sorted({r.spec.seed for r in results})
  return groups, (f"{caption(config, seeds, command)}\n\n"
                  f"{accuracy_table(groups, first, first_column='setting')}")
