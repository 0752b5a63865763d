"""Grid search over config fields: one run per combination, a markdown table of results.

  python scripts/sweep.py --config configs/mnist1d.py:odsgd \\
      --grid strategy.local_lr=0,0.0625,0.1 --grid optimizer.momentum=0.5,0.9

Every run starts fresh under --output; values are parsed as Python literals.
"""

import argparse
import ast
import itertools
import os
import shutil
import sys

sys.path.insert(0, os.path.dirname(os.path.dirname(os.path.abspath(__file__))))
from odsgd_jax.train import train_and_evaluate  # noqa: E402
from scripts.results import load_config_module  # noqa: E402


def parse_grid(entries: list[str]) -> dict[str, list]:
  grid = {}
  for entry in entries:
    if "=" not in entry or "." not in entry.split("=")[0]:
      sys.exit(f"error: --grid {entry!r} must look like section.field=v1,v2")
    field, values = entry.split("=", 1)
    grid[field] = [ast.literal_eval(v) if v not in ("True", "False") else v == "True"
                   for v in values.split(",")]
  return grid


def main() -> None:
  parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
  parser.add_argument("--config", required=True, help="config file, optionally with :argument")
  parser.add_argument("--grid", action="append", default=[], help="section.field=v1,v2,...")
  parser.add_argument("--output", default="runs/sweep", help="folder for the runs")
  args = parser.parse_args()
  path, _, argument = args.config.partition(":")
  module = load_config_module(path)
  grid = parse_grid(args.grid)

  rows = []
  for values in itertools.product(*grid.values()):
    config = module.get_config(argument) if argument else module.get_config()
    config.train.progress_bar = False
    for field, value in zip(grid, values, strict=True):
      section, name = field.split(".", 1)
      config[section][name] = value
    label = ",".join(f"{f}={v}" for f, v in zip(grid, values, strict=True)) or "config"
    workdir = os.path.join(args.output, label.replace("/", "_"))
    shutil.rmtree(workdir, ignore_errors=True)
    summary = train_and_evaluate(config, workdir)
    rows.append((values, summary))
    print(f"{label}: test accuracy {summary['test_accuracy']:.4f}", flush=True)

  print(f"\n`python scripts/sweep.py --config {args.config} "
        + " ".join(f"--grid {e}" for e in args.grid) + "`\n")
  print("| " + " | ".join(grid) + " | test accuracy |")
  print("|" + "---|" * (len(grid) + 1))
  for values, summary in rows:
    print("| " + " | ".join(str(v) for v in values) + f" | {summary['test_accuracy']:.4f} |")


if __name__ == "__main__":
  main()
