"""Weak and strong scaling on the simulated cluster: every preset up to 4096 workers, from
the timelines.

  python scripts/scaling.py [--workload resnet50_v100] [--readme]

The default computes, from each strategy's timeline alone (no training, seconds), the
weak-scaling efficiency T(1) / T(N) of every strategy on every preset of
odsgd_jax/cluster/_presets.py, for a workload whose message is a real model's size and
whose compute time a real accelerator's, and the strong-scaling efficiency of the same
workload's global batch of study.STRONG_GLOBAL_BATCH split over N workers; writes two
tables (N = 64, 128, 4096) and a plot of efficiency against N (log axis). Every
efficiency carries the clock's error band: its leave-one-family-out error on published
measurements (docs/clock.md). The pseudo-synchronous paper's 93.4% (64 nodes) and 90.5%
(128 nodes) on Tianhe-2 are printed beside the tianhe2 preset.

(A training run's clock is the same timeline advanced tick by tick: that agreement is a
test (tests/test_new_strategy.py, tests/test_cluster.py), not a table: training runs
here could not disagree with it.)
"""

import os

import matplotlib

matplotlib.use("Agg")
import matplotlib.pyplot as plt  # noqa: E402

from odsgd_jax import study  # noqa: E402
from odsgd_jax.cluster import PRESETS, WORKLOADS, Overlap  # noqa: E402
from odsgd_jax.cluster import validation as clock_validation  # noqa: E402

PAPER = {64: 0.934, 128: 0.905}  # Wen et al., pseudo-synchronous SGD on Tianhe-2
SIZES = [2**k for k in range(13)]  # 1 .. 4096
SHOWN = (64, 128, 4096)


def efficiency_table(efficiency, band: float, paper: dict[int, float] | None = None) -> str:
  """{preset: {label: {N: efficiency}}} as a markdown table, each cell "x% ± band"; a
  preset on a transport whose share one fitted family alone informs is marked †."""
  blind = clock_validation.single_family_transports()
  header = ["strategy"] + [
      f"{name}{' †' if {p.transport, p.intra_transport} & set(blind) else ''} "
      f"(N = {' / '.join(map(str, SHOWN))})" for name, p in PRESETS.items()]
  rows = [[label] + [" / ".join(f"{efficiency[p][label][n]:.1%} ± {band:.1f}" for n in SHOWN)
                     for p in PRESETS] for label in study.SCALING_STRATEGIES]
  if paper:
    rows.append(["paper: pseudo-sync on Tianhe-2"] + [
        " / ".join(f"{paper[n]:.1%}" if n in paper else "-" for n in SHOWN)
        if p == "tianhe2" else "-" for p in PRESETS])
  return study.markdown(header, rows)


def timeline_study(workload_name: str, output: str) -> tuple[str, str]:
  workload = WORKLOADS[workload_name]
  weak = {name: study.weak_scaling(preset.network, workload, SIZES, Overlap())
          for name, preset in PRESETS.items()}
  strong = {name: study.strong_scaling(preset.network, workload, SIZES, overlap=Overlap())
            for name, preset in PRESETS.items()}
  band = clock_validation.known_transport_error()
  blind = ", ".join(f"{transport} ({family})" for transport, family
                    in clock_validation.single_family_transports().items())
  plot_path = os.path.join(output, "scaling.png")
  _plot({"weak": weak, "strong": strong}, plot_path)
  return (f"From the timelines: efficiency of a tick (mean of 64), homogeneous workers with "
          f"the validated clock's noise, interference and node contention and each preset's "
          f"transport (docs/clock.md), workload {workload_name}: {workload.description}; "
          f"ssgd's all-reduce overlaps the backward pass in DDP's 25 MiB buckets filled in "
          f"ResNet-50's backward order unless marked; asgd and ssp model a sharded parameter "
          f"server (each worker's own link, no server contention), so they scale perfectly by "
          f"construction. ± {band:.1f}: the clock's leave-one-family-out error in points on "
          f"the families whose transport another family or a citation informs "
          f"(docs/clock.md), the error to expect on a setup it has not seen. †: the preset "
          f"runs on a transport whose share one fitted family alone informs ({blind}); left "
          f"out, nothing constrains it, so its column's error is not bounded by the band. "
          f"Produced by `python scripts/scaling.py`.\n\n"
          f"**Weak scaling**, T(1) / T(N): every worker keeps its batch.\n\n"
          f"{efficiency_table(weak, band, PAPER)}\n\n"
          f"**Strong scaling**, T(1) / (N T(N)): a global batch of "
          f"{study.STRONG_GLOBAL_BATCH} (Goyal et al.'s ResNet-50 batch) split over N workers, "
          f"each worker's compute shrinking with its share (linearly: a GPU's lower "
          f"throughput at small batches is left out, so these are upper bounds) while its "
          f"message stays the whole model.\n\n{efficiency_table(strong, band)}", plot_path)


def _plot(by_kind, path: str) -> None:
  presets = list(PRESETS)
  figure, axes = plt.subplots(len(by_kind), len(presets),
                              figsize=(4 * len(presets), 3.6 * len(by_kind)), sharey=True)
  for row, (kind, efficiency) in zip(axes, by_kind.items(), strict=True):
    for axis, preset in zip(row, presets, strict=True):
      for label, values in efficiency[preset].items():
        axis.plot(list(values), list(values.values()), marker=".", label=label)
      if preset == "tianhe2" and kind == "weak":
        axis.plot(list(PAPER), list(PAPER.values()), "k*", markersize=10,
                  label="paper (pseudo-sync)")
      axis.set(xlabel="workers N", title=f"{preset}, {kind} scaling")
      axis.set_xscale("log", base=2)
      axis.grid(alpha=0.3)
    row[0].set_ylabel(f"{kind}-scaling efficiency")
  axes[0][-1].legend(fontsize=8, loc="lower left")
  figure.tight_layout()
  figure.savefig(path, dpi=110)
  plt.close(figure)


def main() -> None:
  parser = study.script_parser(__doc__)
  parser.add_argument("--workload", default="resnet50_v100", choices=sorted(WORKLOADS))
  parser.add_argument("--output", default="runs/scaling")
  parser.add_argument("--readme", action="store_true", help="write the sections of docs/cluster.md")
  args = parser.parse_args()
  os.makedirs(args.output, exist_ok=True)
  text, plot_path = timeline_study(args.workload, args.output)
  print(study.presets_table(), text, sep="\n\n")
  if args.readme:
    study.replace_section("presets", study.presets_table())
    docs = os.path.join(study.repository_root(), "docs")
    os.replace(plot_path, os.path.join(docs, "scaling.png"))
    study.replace_section("scaling", f"{text}\n\n![scaling](docs/scaling.png)")


if __name__ == "__main__":
  study.run_main(main)
