"""Weak scaling on the simulated cluster, 1 to 128 workers.

  python scripts/scaling.py [--config configs/default.py] [--strategies ssgd,odsgd,...]

Each worker keeps its batch (weak scaling); N logical workers share this host's
devices. For every N and strategy a short real run gives the simulated time per
step; throughput = N x batch / (time per step), efficiency = throughput(N) /
(N x throughput(1)). The pseudo-synchronous paper reports 93.4% at 64 nodes and
90.5% at 128 nodes on its own cluster; they are printed alongside for reference.
"""

import argparse
import os
import shutil
import sys

sys.path.insert(0, os.path.dirname(os.path.dirname(os.path.abspath(__file__))))
from configs import _strategies  # noqa: E402
from odsgd_jax.train import train_and_evaluate  # noqa: E402
from scripts._readme import replace_section  # noqa: E402
from scripts.results import load_config_module  # noqa: E402

PAPER = {64: "93.4%", 128: "90.5%"}  # Wen et al., weak scaling efficiency


def main() -> None:
  parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
  parser.add_argument("--config", default="configs/default.py")
  parser.add_argument("--strategies", default="ssgd,odsgd,pseudo_sync,local_sgd")
  parser.add_argument("--workers", default="1,2,4,8,16,32,64,128")
  parser.add_argument("--batch_per_worker", type=int, default=16)
  parser.add_argument("--steps", type=int, default=20, help="steps per run (after warm-up)")
  parser.add_argument("--output", default="runs/scaling")
  parser.add_argument("--readme", action="store_true", help="write README's scaling table")
  args = parser.parse_args()
  module = load_config_module(args.config)
  names = [n for n in args.strategies.split(",") if n]
  sizes = [int(n) for n in args.workers.split(",")]

  per_step = {}
  for name in names:
    for workers in sizes:
      config = _strategies.use_strategy(module.get_config(), name)
      config.cluster.num_workers = workers
      config.cluster.speeds = ()
      config.data.batch_size = workers * args.batch_per_worker
      config.parallel.num_devices = 1  # any N runs as N logical workers on one device
      config.train.num_steps = args.steps
      config.train.eval_every = config.train.checkpoint_every = args.steps
      config.train.progress_bar = False
      config.train.target_accuracy = 0.0
      config.optimizer.warmup_steps = 0
      if "warmup_steps" in config.strategy:
        config.strategy.warmup_steps = 0  # steady state: the pipelined rule
      workdir = os.path.join(args.output, f"{name}_{workers}")
      shutil.rmtree(workdir, ignore_errors=True)
      summary = train_and_evaluate(config, workdir)
      per_step[name, workers] = summary["sim_time_s"] / summary["steps"]
      print(f"{name} N={workers}: {per_step[name, workers] * 1e3:.2f} ms per step", flush=True)

  config = module.get_config()
  lines = [
      f"Weak scaling, {args.batch_per_worker} examples per worker, {config.cluster.topology} at "
      f"{config.cluster.bandwidth:.3g} B/s, latency {config.cluster.latency:g} s, "
      f"{config.cluster.step_time} s per step; produced by `python scripts/scaling.py`. "
      f"Efficiency = throughput(N) / (N x throughput(1)); the paper's figures are for its "
      f"own cluster (Tianhe II), printed for reference.",
      "",
      "| workers | " + " | ".join(f"{n} efficiency" for n in names) + " | paper (pseudo-sync) |",
      "|---|" + "---|" * (len(names) + 1),
  ]
  for workers in sizes:
    cells = [f"{per_step[name, sizes[0]] / per_step[name, workers]:.1%}" for name in names]
    lines.append(f"| {workers} | " + " | ".join(cells) + f" | {PAPER.get(workers, '')} |")
  text = "\n".join(lines)
  print(text)
  if args.readme:
    replace_section("scaling", text)


if __name__ == "__main__":
  main()
