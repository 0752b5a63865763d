"""Plots a run's training loss and test accuracy from its metrics.jsonl.

  python scripts/plot_metrics.py runs/default [runs/other ...] --out curves.png
"""

import os
import sys

import matplotlib

matplotlib.use("Agg")
import matplotlib.pyplot as plt  # noqa: E402

from odsgd_jax import study  # noqa: E402
from odsgd_jax.train import read_metrics  # noqa: E402


def main() -> None:
  parser = study.script_parser(__doc__)
  parser.add_argument("workdirs", nargs="+", help="run folders holding metrics.jsonl")
  parser.add_argument("--out", default="curves.png", help="PNG file to write")
  args = parser.parse_args()
  folder = os.path.dirname(os.path.abspath(args.out))
  if not os.path.isdir(folder):
    sys.exit(f"error: --out {args.out}: the folder {folder} does not exist; create it or "
             f"write elsewhere")
  for workdir in args.workdirs:
    if not os.path.exists(os.path.join(workdir, "metrics.jsonl")):
      sys.exit(f"error: {workdir} has no metrics.jsonl; is it a run folder?")

  figure, (loss_axis, accuracy_axis) = plt.subplots(1, 2, figsize=(10, 4))
  for workdir in args.workdirs:
    rows = read_metrics(workdir)  # a last line cut short by a kill is skipped
    label = os.path.basename(os.path.normpath(workdir))
    train = [r for r in rows if "loss" in r]
    test = [r for r in rows if "test_accuracy" in r]
    loss_axis.plot([r["step"] for r in train], [r["loss"] for r in train], label=label)
    accuracy_axis.plot([r["step"] for r in test], [r["test_accuracy"] for r in test], "o-",
                       label=label)
  loss_axis.set(xlabel="step", ylabel="training loss", yscale="log")
  accuracy_axis.set(xlabel="step", ylabel="test accuracy")
  for axis in (loss_axis, accuracy_axis):
    axis.grid(alpha=0.3)
    axis.legend()
  figure.tight_layout()
  figure.savefig(args.out, dpi=120)
  print(f"wrote {args.out}")


if __name__ == "__main__":
  study.run_main(main)
