"""A study as markdown tables (with the environment in the caption) and plots."""

import math
import os
import shutil
from typing import Callable, Sequence

import jax
import jaxlib
import matplotlib

matplotlib.use("Agg")
import matplotlib.pyplot as plt  # noqa: E402
import ml_collections  # noqa: E402
import numpy as np  # noqa: E402

from odsgd_jax.study._aggregate import Group  # noqa: E402
from odsgd_jax.study._readme import replace_section, repository_root  # noqa: E402
from odsgd_jax.study._runner import timed_accuracy  # noqa: E402
from odsgd_jax.study._stats import CONFIDENCE, SIGNIFICANCE, Paired  # noqa: E402


def environment() -> str:
  """What produced the numbers: JAX versions and the devices."""
  devices = jax.devices()
  return (f"jax {jax.__version__}, jaxlib {jaxlib.__version__}, {len(devices)} x "
          f"{devices[0].device_kind}")


def describe_cluster(config: ml_collections.ConfigDict) -> str:
  cluster = config.cluster
  speeds = tuple(cluster.speeds) or "all 1"
  if cluster.preset:
    network = f"preset {cluster.preset}"
  else:
    network = (f"{cluster.topology} at {cluster.bandwidth:.3g} B/s, latency "
               f"{cluster.latency:g} s")
  message = (f", message {cluster.message_bytes:.4g} B" if cluster.message_bytes else "")
  overlap = ("ssgd all-reduce overlapped with the backward pass in "
             f"{cluster.bucket_bytes / 2**20:g} MiB buckets" if cluster.overlap == "buckets"
             else "no overlap of ssgd's all-reduce")
  return (f"{cluster.num_workers} workers, speeds {speeds}, {network}{message}, "
          f"{cluster.step_time or 'measured'} s per step, {overlap}")


def caption(config: ml_collections.ConfigDict, seeds: Sequence[int], command: str) -> str:
  return (f"{config.data.name}, {config.model.name}, {config.train.num_steps} steps, "
          f"evaluated every {config.train.eval_every} steps; {describe_cluster(config)}; "
          f"{len(seeds)} seeds ({', '.join(map(str, seeds))}), means ± "
          f"{100 * CONFIDENCE:.0f}% Student-t intervals, differences paired by seed; "
          f"{environment()}; produced by `{command}`.")


def format_p(comparison: Paired | None) -> str:
  if comparison is None or math.isnan(comparison.p_value):
    return "-"
  return "<0.001" if comparison.p_value < 0.001 else f"{comparison.p_value:.3f}"


def format_significant(comparison: Paired | None) -> str:
  if comparison is None or math.isnan(comparison.p_value):
    return "-"
  return "yes" if comparison.significant else "not significant"


def _accuracy(group: Group) -> str:
  text = group.accuracy.format(4)
  if group.diverged:
    text += f" ({group.diverged} of {len(group.per_seed)} diverged)"
  return text


def _per_seed(group: Group) -> str:
  return ", ".join("diverged" if v is None else f"{v:.3f}" for v in group.per_seed.values())


def markdown(header: Sequence[str], rows: Sequence[Sequence[str]]) -> str:
  lines = ["| " + " | ".join(header) + " |", "|" + "---|" * len(header)]
  lines += ["| " + " | ".join(row) + " |" for row in rows]
  return "\n".join(lines)


def accuracy_table(groups: Sequence[Group], baseline: str, first_column: str = "strategy") -> str:
  header = [first_column, "final test accuracy", f"vs {baseline} (points)", "p (paired t)",
            f"significant (p < {SIGNIFICANCE})", "per seed"]
  rows = [[g.label, _accuracy(g),
           "-" if g.versus is None else g.versus.difference.format(1, 100, sign=True),
           format_p(g.versus), format_significant(g.versus), _per_seed(g)] for g in groups]
  return markdown(header, rows)


def time_table(groups: Sequence[Group], baseline: str, target: float) -> str:
  header = ["strategy", "simulated time of the run (s)", f"seeds reaching {target:.4g}",
            f"time to {target:.4g} (s)", f"speedup vs {baseline}", "p (paired t)",
            f"significant (p < {SIGNIFICANCE})", "communication share", "idle share"]
  rows = []
  for g in groups:
    hits, total = g.reached.fraction
    rows.append([
        g.label, g.sim_time.format(1), f"{hits}/{total}",
        g.reached.time.format(2) if hits else "not reached",
        f"{g.speedup:.2f}x" if g.speedup else "-", format_p(g.time_versus),
        format_significant(g.time_versus), g.communication.format(3), g.idle.format(3)])
  return markdown(header, rows)


def bits_per_step(group: Group) -> float:
  """Bits a worker sent per step, dense warm-ups included (the same for every seed)."""
  return next(r.summary["bits_sent_per_step"] for r in group.runs if r.summary)


def _mean_curve(group: Group, x: Callable[[dict], float]):
  """Per evaluation step: x (first seed's), mean and min/max accuracy over seeds."""
  curves = [r.evaluations for r in group.runs if r.evaluations]
  length = min(len(c) for c in curves)
  xs = np.asarray([x(row) for row in curves[0][:length]])
  metric = timed_accuracy(curves[0])
  accuracy = np.asarray([[row[metric] for row in c[:length]] for c in curves])
  return xs, accuracy.mean(0), accuracy.min(0), accuracy.max(0)


def plot_curves(groups: Sequence[Group], path: str, target: float | None = None) -> None:
  """Accuracy (validation where the data set has that split, else test) against steps
  and simulated time: the mean over seeds, with the range of the seeds shaded."""
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
    metric = next(timed_accuracy(r.evaluations) for g in groups for r in g.runs if r.evaluations)
    axis.set(xlabel=xlabel,
             ylabel=f"{metric.replace('_', ' ')} (mean over seeds; range shaded)")
    axis.grid(alpha=0.3)
    axis.legend(fontsize=9, loc="lower right")
  figure.tight_layout()
  os.makedirs(os.path.dirname(os.path.abspath(path)), exist_ok=True)
  figure.savefig(path, dpi=110)
  plt.close(figure)


def write_outputs(text: str, groups: Sequence[Group], output: str, readme_section: str = "",
                  target: float | None = None) -> None:
  """`output`/compare.md and compare.png; with `readme_section`, the generated section of
  that name in README.md or a docs/ page (table and plot, the plot copied to
  docs/<section>.png)."""
  with open(os.path.join(output, "compare.md"), "w", encoding="utf-8") as f:
    f.write(text + "\n")
  plot_path = os.path.join(output, "compare.png")
  plot_curves(groups, plot_path, target)
  print(text)
  print(f"wrote {output}/compare.md and {plot_path}")
  if readme_section:
    docs = os.path.join(repository_root(), "docs")
    os.makedirs(docs, exist_ok=True)
    shutil.copy(plot_path, os.path.join(docs, f"{readme_section}.png"))
    replace_section(readme_section, f"{text}\n\n![{readme_section}](docs/{readme_section}.png)")
