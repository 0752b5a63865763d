"""A study as markdown tables (with the environment in the caption) and plots."""

import math
import os
import shutil
from typing import Callable, Mapping, Sequence

import matplotlib

matplotlib.use("Agg")
import matplotlib.pyplot as plt  # noqa: E402
import ml_collections  # noqa: E402
import numpy as np  # noqa: E402

from odsgd_jax.study import verdicts  # noqa: E402
from odsgd_jax.study._aggregate import Group, converged  # noqa: E402
from odsgd_jax.study._readme import replace_section, repository_root  # noqa: E402
from odsgd_jax.study._robustness import robustness  # noqa: E402
from odsgd_jax.study._records import environment  # noqa: E402
from odsgd_jax.study._runner import RunResult, timed_metric  # noqa: E402
from odsgd_jax.tasks import CLASSIFICATION, Metric  # noqa: E402
from odsgd_jax.study._stats import CONFIDENCE, Interval, mean_ci, paired  # noqa: E402
from odsgd_jax.study._targets import reached, speed_row  # noqa: E402


def environment_of(runs: Sequence[RunResult] = ()) -> str:
  """The environment that made `runs` (their records'; several joined by "; "), or, with
  none, this process's."""
  made = sorted({run.environment for run in runs if run.environment})
  return "; ".join(made) if made else environment()


def describe_cluster(config: ml_collections.ConfigDict) -> str:
  cluster = config.cluster
  speeds = tuple(cluster.speeds) or "all 1"
  if cluster.preset:
    network = f"preset {cluster.preset}"
  else:
    network = (f"{cluster.topology} at {cluster.bandwidth:.3g} B/s, latency "
               f"{cluster.latency:g} s")
  if cluster.get("transport"):
    network += f" at {cluster.transport}'s achieved share"
  message = (f", message {cluster.message_bytes:.4g} B" if cluster.message_bytes else "")
  step = f"{cluster.step_time or 'measured'} s per step"
  if cluster.get("workload"):
    message, step = "", f"workload {cluster.workload}"
  overlap = ("ssgd all-reduce overlapped with the backward pass in "
             f"{cluster.bucket_bytes / 2**20:g} MiB buckets" if cluster.overlap == "buckets"
             else "no overlap of ssgd's all-reduce")
  terms = (f"step-time noise sigma {cluster.jitter:g}, interference "
           f"{cluster.get('interference', 0.0):g}, node contention "
           f"{cluster.get('node_contention', 0.0):g} s per sample (docs/clock.md)")
  return (f"{cluster.num_workers} workers, speeds {speeds}, {network}{message}, {step}, "
          f"{overlap}, {terms}")


def _near(train: ml_collections.ConfigDict, metric: Metric) -> str:
  """`train.eval_near` in the metric's unit ("3 points", "0.1 nats")."""
  return f"{metric.scale * train.eval_near:g} {metric.unit}"


def evaluation_grid(train: ml_collections.ConfigDict,
                    metric: Metric = CLASSIFICATION.target) -> str:
  """How a config's runs evaluate, for a caption (`metric`: what its targets read)."""
  if not train.eval_every:
    return "evaluated at the end"
  if not train.get("eval_growth"):
    text = f"evaluated every {train.eval_every} steps"
  elif not train.get("eval_targets"):
    text = (f"evaluated on a growing grid (spans of {100 * train.eval_growth:g}% of the step, "
            f"at least {train.eval_every} steps)")
  else:
    text = (f"evaluated on a growing grid (spans of {100 * train.eval_growth:g}% of the step, "
            f"at least {train.eval_every} steps; within {_near(train, metric)} "
            f"{'below' if metric.higher_is_better else 'above'} a target not yet reached, at "
            f"most {train.eval_every} and down to one)")
  return text + (" until the last target, and at the end" if train.get("eval_targets") else "")


def caption(config: ml_collections.ConfigDict, seeds: Sequence[int], command: str,
            runs: Sequence[RunResult] = ()) -> str:
  """`runs`: the results the caption is of (their records' environment is named)."""
  metric = runs[0].target if runs else CLASSIFICATION.target
  return (f"{config.data.name}, {config.model.name}, {config.train.num_steps} steps, "
          f"{evaluation_grid(config.train, metric)}; {describe_cluster(config)}; "
          f"{len(seeds)} seeds ({', '.join(map(str, seeds))}), means ± "
          f"{100 * CONFIDENCE:.0f}% Student-t intervals, differences paired by seed; "
          f"{environment_of(runs)}; produced by `{command}`.")


def _final(group: Group) -> str:
  """The group's final test value of its target metric (a loss turned back from its score)."""
  text = group.score.format(4, 1.0 if group.target.higher_is_better else -1.0)
  if group.diverged:
    text += f" ({group.diverged} of {len(group.per_seed)} diverged)"
  return text


def _per_seed(values: dict[int, float | None], metric: Metric) -> str:
  return ", ".join("diverged" if v is None else f"{metric.oriented(v):.3f}"
                   for v in values.values())


def markdown(header: Sequence[str], rows: Sequence[Sequence[str]]) -> str:
  lines = ["| " + " | ".join(header) + " |", "|" + "---|" * len(header)]
  lines += ["| " + " | ".join(row) + " |" for row in rows]
  return "\n".join(lines)


def _margin(metric: Metric, margin: float) -> str:
  """A margin as a header names it: "-1 point", "-0.05 nats"."""
  unit = "point" if metric.unit == "points" else metric.unit
  return f"-{metric.scale * margin:g} {unit}"


def noninferiority(groups: Sequence[Group], baseline: str, margin: float | None = None
                   ) -> dict[str, tuple[verdicts.AccuracyTest, verdicts.Verdict]]:
  """Each group but the baseline: its final test score against the baseline's, paired
  by seed, and the non-inferiority verdict at `margin` (default: the task's), Holm-adjusted
  across the groups."""
  base = next(g for g in groups if g.label == baseline)
  metric = base.target
  margin = metric.margin if margin is None else margin
  compared = [g for g in groups if g.label != baseline]
  tests = [verdicts.accuracy_test(g.per_seed, base.per_seed, g.chance, margin)
           for g in compared]
  return {g.label: pair for g, pair in
          zip(compared, zip(tests, verdicts.accuracy_verdicts(tests, metric=metric),
                            strict=True), strict=True)}


def _versus(baseline: str, metric: Metric) -> str:
  """The header of a paired difference: positive is better (a loss lower)."""
  better = "" if metric.higher_is_better else f", + = {metric.name} lower"
  return f"vs {baseline} ({metric.unit}{better})"


def noninferiority_header(baseline: str, metric: Metric = CLASSIFICATION.target) -> list[str]:
  return [_versus(baseline, metric), "one-sided 95% lower bound",
          f"non-inferior to {baseline} at {_margin(metric, metric.margin)}"]


def noninferiority_cells(tested: tuple[verdicts.AccuracyTest, verdicts.Verdict] | None,
                         metric: Metric = CLASSIFICATION.target) -> list[str]:
  if tested is None:
    return ["-", "-", "-"]
  test, verdict = tested
  scale, digits = metric.scale, metric.digits
  bound = "-" if math.isnan(test.lower_bound) else f"{scale * test.lower_bound:+.{digits}f}"
  return [test.difference.format(digits, scale, sign=True), bound, verdict.brief()]


def rules(metric: Metric = CLASSIFICATION.target) -> str:
  """How a table's non-inferiority verdicts are decided, in the metric's unit."""
  margin = _margin(metric, metric.margin).replace(" ", "-", 1) if metric.unit == "points" \
      else f"{_margin(metric, metric.margin)}"
  return (f"non-inferior: the paired difference's one-sided 95% t-test against a "
          f"{margin} margin, Holm-adjusted across the table's rows; "
          f"the p of a \"does not hold\" is that of inferiority (rules: "
          f"docs/results.md#how-a-claim-is-decided)")



def accuracy_table(groups: Sequence[Group], baseline: str, first_column: str = "strategy") -> str:
  """The final test value of the task's target metric per group and its non-inferiority to
  the baseline."""
  metric = groups[0].target
  tested = noninferiority(groups, baseline)
  stricter = noninferiority(groups, baseline, metric.margin / 2)  # the sensitivity margin
  header = [first_column, f"final test {metric.name}", *noninferiority_header(baseline, metric),
            f"at {_margin(metric, metric.margin / 2)} (sensitivity)", "per seed"]
  rows = [[g.label, _final(g), *noninferiority_cells(tested.get(g.label), metric),
           stricter[g.label][1].brief() if g.label in stricter else "-",
           _per_seed(g.per_seed, metric)] for g in groups]
  return markdown(header, rows)


def faster_verdicts(groups: Mapping[str, Group], baseline: str, goals: Mapping[str, float],
                    primary: str) -> dict[str, verdicts.Verdict]:
  """{label: the verdict on "faster" than `baseline` at `primary`}, Holm across the labels."""
  rows = {label: speed_row(g, groups[baseline], goals) for label, g in groups.items()
          if label != baseline}
  return dict(zip(rows, verdicts.speed_verdicts(list(rows.values()), primary), strict=True))


def clock_robustness(groups: Sequence[Group], baseline: str, goals: Mapping[str, float],
                     primary: str) -> dict[str, str]:
  """{label: whether its "faster" verdict survives the clock's uncertainty}: each run's
  times replayed from its workdir (`robustness`)."""
  decide = lambda studies: list(faster_verdicts(studies[0], baseline, goals, primary).values())
  by_label = {g.label: g for g in groups}
  return dict(zip([label for label in by_label if label != baseline],
                  robustness([by_label], decide), strict=True))


def time_table(groups: Sequence[Group], baseline: str, goals: Mapping[str, float],
               primary: str, robust: Mapping[str, str] | None = None) -> str:
  """Simulated times: the run's, the seeds reaching each target, the speedup over the
  baseline per target (censored seeds counted), the verdict on "faster" at `primary`,
  Holm-adjusted across the rows, and, given `robust` (`clock_robustness`), whether that
  verdict survives the clock's uncertainty."""
  by_label = {g.label: g for g in groups}
  speeds = {label: speed_row(g, by_label[baseline], goals) for label, g in by_label.items()
            if label != baseline}
  faster = faster_verdicts(by_label, baseline, goals, primary)
  names = list(goals)
  header = ["strategy", "steps", "simulated time of the run (s)",
            f"seeds reaching {' / '.join(names)}",
            *[f"speedup to {name}{' (primary)' if name == primary else ''}" for name in names],
            f"faster than {baseline}", *(["robust to the clock"] if robust else []),
            "communication share", "idle share"]
  rows = []
  for g in groups:
    counts = [reached(g, goals[name]) for name in names]
    steps = sorted({r.summary["steps"] for r in g.runs if r.summary})
    rows.append([
        g.label, "-".join(map(str, steps[::max(1, len(steps) - 1)])), g.sim_time.format(1),
        " / ".join(str(hits) for hits, _ in counts) + f" of {counts[0][1]}",
        *([speeds[g.label][name].format() for name in names] if g.label in speeds
          else ["-"] * len(names)),
        faster[g.label].cell() if g.label in faster else "-",
        *([robust.get(g.label, "-")] if robust else []), g.communication.format(3),
        g.idle.format(3)])
  return markdown(header, rows)


def sweep_table(groups: Sequence[Group]) -> str:
  """Each setting's final validation accuracy (the split a setting is chosen on: the best
  is the highest mean among those that never diverged) and final test accuracy, both paired with the
  first setting's by seed."""
  first = groups[0]
  if not first.validation:  # a data set without a validation split: test is all there is
    return accuracy_table(groups, first.label, first_column="setting")

  metric = first.target

  def versus(values: dict[int, float | None], base: dict[int, float | None], g: Group) -> str:
    if g is first:
      return "-"
    return paired(converged(values), converged(base)).difference.format(
        metric.digits, metric.scale, sign=True)

  def validation(g: Group) -> Interval:
    return mean_ci(list(converged(g.validation).values()))

  # A setting that diverged on a seed is not chosen over one that never did.
  best = max(groups, key=lambda g: (g.diverged == 0, np.nan_to_num(validation(g).mean,
                                                                     nan=-np.inf)))
  turn = 1.0 if metric.higher_is_better else -1.0  # a loss's score turned back
  header = ["setting", f"final validation {metric.name}", _versus(first.label, metric),
            "best on validation", f"final test {metric.name}", _versus(first.label, metric),
            "per seed (test)"]
  rows = [[g.label, validation(g).format(4, turn),
           versus(g.validation, first.validation, g), "yes" if g is best else "",
           _final(g), versus(g.per_seed, first.per_seed, g), _per_seed(g.per_seed, metric)]
          for g in groups]
  return markdown(header, rows)


def bits_per_step(group: Group) -> float:
  """Bits a worker sent per step, dense warm-ups included (the same for every seed)."""
  return next(r.summary["bits_sent_per_step"] for r in group.runs if r.summary)


def _mean_curve(group: Group, x: Callable[[dict], float]):
  """Per evaluation step: x (first seed's), mean and min/max of the target metric over
  seeds."""
  curves = [r.evaluations for r in group.runs if r.evaluations]
  length = min(len(c) for c in curves)
  xs = np.asarray([x(row) for row in curves[0][:length]])
  key = timed_metric(curves[0], group.target)
  values = np.asarray([[row[key] for row in c[:length]] for c in curves])
  return xs, values.mean(0), values.min(0), values.max(0)


def plot_curves(groups: Sequence[Group], path: str, target: float | None = None) -> None:
  """The task's target metric (validation where the data set has that split, else test)
  against steps and simulated time: the mean over seeds, with the range of the seeds
  shaded."""
  panels = [("step", lambda row: row["step"]), ("simulated time (s)", lambda row: row["sim_time"])]
  figure, axes = plt.subplots(1, len(panels), figsize=(6.5 * len(panels), 4.5), squeeze=False)
  for axis, (xlabel, x) in zip(axes[0], panels, strict=True):
    for group in groups:
      if not any(r.evaluations for r in group.runs):
        continue
      xs, mean, low, high = _mean_curve(group, x)
      line, = axis.plot(xs, mean, label=group.label, linewidth=1.2)
      axis.fill_between(xs, low, high, color=line.get_color(), alpha=0.15, linewidth=0)
    if target is not None:
      axis.axhline(target, color="black", linestyle=":", linewidth=1, label=f"target {target:.4g}")
    run = next(r for g in groups for r in g.runs if r.evaluations)
    key = timed_metric(run.evaluations, run.target)
    axis.set(xlabel=xlabel,
             ylabel=f"{key.replace('_', ' ')} (mean over seeds; range shaded)")
    axis.grid(alpha=0.3)
    axis.legend(fontsize=9, loc="lower right" if run.target.higher_is_better else "upper right")
  figure.tight_layout()
  os.makedirs(os.path.dirname(os.path.abspath(path)), exist_ok=True)
  figure.savefig(path, dpi=110)
  plt.close(figure)


def write_outputs(text: str, groups: Sequence[Group], output: str, readme_section: str = "",
                  target: float | None = None, check: bool = False) -> None:
  """`output`/compare.md and compare.png; with `readme_section`, the generated section of
  that name in README.md or a docs/ page (table and plot, the plot copied to
  docs/<section>.png); `check`: the section only compared (`replace_section`)."""
  with open(os.path.join(output, "compare.md"), "w", encoding="utf-8") as f:
    f.write(text + "\n")
  plot_path = os.path.join(output, "compare.png")
  plot_curves(groups, plot_path, target)
  print(text)
  print(f"wrote {output}/compare.md and {plot_path}")
  if readme_section and check:
    replace_section(readme_section, f"{text}\n\n![{readme_section}](docs/{readme_section}.png)",
                    check=True)
  elif readme_section:
    docs = os.path.join(repository_root(), "docs")
    os.makedirs(docs, exist_ok=True)
    shutil.copy(plot_path, os.path.join(docs, f"{readme_section}.png"))
    replace_section(readme_section, f"{text}\n\n![{readme_section}](docs/{readme_section}.png)")
