"""Trains every strategy on one config (same seed, same data order) and writes the
README's results table.

  python scripts/results.py [--config configs/mnist1d.py] [--strategies a,b] [--no-readme]

Each strategy runs `get_config(strategy)` of the config file in a fresh folder under
--output; the table lists final test accuracy, steps, wall time and the gap to ssgd.
"""

import argparse
import importlib.util
import json
import os
import shutil
import sys
import time

import jax

sys.path.insert(0, os.path.dirname(os.path.dirname(os.path.abspath(__file__))))
from odsgd_jax.strategies import STRATEGIES  # noqa: E402
from odsgd_jax.train import train_and_evaluate  # noqa: E402
from scripts._readme import replace_section  # noqa: E402


def load_config_module(path: str):
  spec = importlib.util.spec_from_file_location("experiment_config", path)
  module = importlib.util.module_from_spec(spec)
  spec.loader.exec_module(module)
  return module


def main() -> None:
  parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
  parser.add_argument("--config", default="configs/mnist1d.py",
                      help="config file whose get_config(strategy) names the strategy")
  parser.add_argument("--strategies", default=",".join(STRATEGIES),
                      help="comma-separated strategy names")
  parser.add_argument("--output", default="runs/results", help="folder for the runs")
  parser.add_argument("--no-readme", action="store_true", help="print the table only")
  args = parser.parse_args()
  names = [n for n in args.strategies.split(",") if n]
  unknown = [n for n in names if n not in STRATEGIES]
  if unknown:
    sys.exit(f"error: unknown strategies {unknown}; choose from {list(STRATEGIES)}")
  module = load_config_module(args.config)

  summaries = {}
  for name in names:
    config = module.get_config(name)
    config.train.progress_bar = False
    workdir = os.path.join(args.output, name)
    shutil.rmtree(workdir, ignore_errors=True)  # this script's own output: always fresh
    started = time.perf_counter()
    summaries[name] = train_and_evaluate(config, workdir)
    print(f"{name}: test accuracy {summaries[name]['test_accuracy']:.4f} "
          f"({time.perf_counter() - started:.0f} s)", flush=True)

  baseline = summaries.get("ssgd", {}).get("test_accuracy")
  config = module.get_config(names[0])
  lines = [
      f"{config.data.name}, {config.model.name}, {config.cluster.num_workers} workers, "
      f"{config.train.num_steps} steps, seed {config.train.seed}, on "
      f"{jax.device_count()} {jax.devices()[0].platform.upper()} device(s); produced by "
      f"`python scripts/results.py --config {args.config}`. Wall time is this machine's, "
      f"not a cluster's.",
      "",
      "| strategy | test accuracy | vs ssgd (points) | steps | wall time (s) |",
      "|---|---|---|---|---|",
  ]
  for name, summary in summaries.items():
    gap = ("-" if baseline is None or name == "ssgd"
           else f"{100 * (summary['test_accuracy'] - baseline):+.1f}")
    lines.append(f"| {name} | {summary['test_accuracy']:.4f} | {gap} | {summary['steps']} | "
                 f"{summary['wall_time_s']:.1f} |")
  table = "\n".join(lines)
  print(table)
  with open(os.path.join(args.output, "results.json"), "w", encoding="utf-8") as f:
    json.dump(summaries, f, indent=2)
  if not args.no_readme:
    replace_section("results", table)


if __name__ == "__main__":
  main()
