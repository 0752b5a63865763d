"""Compares strategies on one config and one simulated cluster: same seed, same data order.

  python scripts/compare.py --config configs/default.py \\
      --strategies ssgd,asgd,ssp,odsgd,pseudo_sync,local_sgd,oscars [--target 0.9|ssgd]

Writes <output>/compare.md (final accuracy, steps, simulated time, simulated time to
the target accuracy, speedup over ssgd to the target, idle fraction) and PNG plots:
(`--target ssgd`: ssgd's final test accuracy, so the table says who gets there first)
test accuracy vs epoch, test accuracy vs simulated time, training loss vs simulated time.
Each strategy takes its options from configs/_strategies.py.

  python scripts/compare.py --config configs/default.py --strategies odsgd \
      --compressions "none;topk:0.01;qsgd:8;sign;powersgd:2;cast:bfloat16"

compares compressors instead (one strategy; specs separated by ";"; --seeds 0,1,2
averages the accuracy over seeds): bits per step, the reduction against no
compression, accuracy and simulated time, with plots of test accuracy against bits
sent and against simulated time.
"""

import argparse
import os
import shutil
import sys

import matplotlib

matplotlib.use("Agg")
import matplotlib.pyplot as plt  # noqa: E402

sys.path.insert(0, os.path.dirname(os.path.dirname(os.path.abspath(__file__))))
from configs import _strategies  # noqa: E402
from odsgd_jax.strategies import STRATEGIES, parse_communication  # noqa: E402
from odsgd_jax.train import read_metrics, train_and_evaluate  # noqa: E402
from scripts._readme import replace_section  # noqa: E402
from scripts.results import load_config_module  # noqa: E402


def time_to(rows, target):
  """Simulated time of the first evaluation at or above `target`, or None."""
  for row in rows:
    if "test_accuracy" in row and row["test_accuracy"] >= target:
      return row["sim_time"]
  return None


def _shorten(config, steps):
  """A quick look: fewer steps, and warm-ups that fit in them."""
  if not steps:
    return
  config.train.num_steps = steps
  config.optimizer.warmup_steps = min(config.optimizer.warmup_steps, steps // 4)
  if "warmup_steps" in config.strategy:
    config.strategy.warmup_steps = min(config.strategy.warmup_steps, steps // 4)


def _train(config, workdir, eval_every, steps):
  """(summary, metric rows) of `config` trained afresh in `workdir`."""
  config.train.progress_bar = False
  config.train.eval_every = eval_every
  _shorten(config, steps)
  shutil.rmtree(workdir, ignore_errors=True)  # this script's own output: always fresh
  return train_and_evaluate(config, workdir), read_metrics(workdir)


def run_all(config_path, names, eval_every, output, steps=None):
  module = load_config_module(config_path)
  runs = {}
  for name in names:
    config = _strategies.use_strategy(module.get_config(), name)
    runs[name] = _train(config, os.path.join(output, name), eval_every, steps)
    summary = runs[name][0]
    print(f"{name}: accuracy {summary['test_accuracy']:.4f}, simulated "
          f"{summary['sim_time_s']:.1f} s", flush=True)
  return runs, module.get_config()


def run_compressions(config_path, strategy, specs, eval_every, output, steps=None, seeds=(0,)):
  """{spec: [(summary, metric rows) per seed]}. A spec with momentum correction
  ("topk:0.01,momentum=0.9") takes the inner optimizer's momentum: plain SGD inside."""
  module = load_config_module(config_path)
  runs = {}
  for spec in specs:
    runs[spec] = []
    for seed in seeds:
      config = _strategies.use_strategy(module.get_config(), strategy)
      config.strategy.compression = "" if spec == "none" else spec
      communication = parse_communication(config.strategy.compression)
      if communication is not None and communication.momentum:
        config.optimizer.momentum = 0.0
      config.train.seed = seed
      name = spec.replace(":", "_").replace(",", "_").replace("=", "")
      runs[spec].append(_train(config, os.path.join(output, f"{name}_seed{seed}"), eval_every,
                               steps))
      print(f"{spec}, seed {seed}: accuracy {runs[spec][-1][0]['test_accuracy']:.4f}",
            flush=True)
  return runs, module.get_config()


def _bits_per_step(summary, rows):
  """Bits each worker sent per step, on average (dense model when nothing is logged)."""
  sent = [r.get("bits_sent", summary["sim_message_bytes"] * 8) for r in rows if "accuracy" in r]
  return sum(sent) / max(len(sent), 1), sent


def compression_table(runs, strategy, config, command):
  """Bits and simulated time from the first seed (they do not depend on it), accuracy
  per seed and its mean, and the mean's distance to no compression."""
  seeds = len(next(iter(runs.values())))
  mean_accuracy = {spec: sum(s["test_accuracy"] for s, _ in per_seed) / seeds
                   for spec, per_seed in runs.items()}
  dense = None
  lines = [
      f"{config.data.name}, {config.model.name}, {strategy}, {config.cluster.num_workers} "
      f"workers, {config.cluster.topology} at {config.cluster.bandwidth:.3g} B/s, {seeds} "
      f"seed(s); produced by `{command}`. Bits per step include dense warm-up steps.",
      "",
      "| compression | bits per step (per worker) | fewer bits than none | test accuracy "
      "(mean) | vs none (points) | per seed | simulated time (s) |",
      "|---|---|---|---|---|---|---|",
  ]
  for spec, per_seed in runs.items():
    summary, rows = per_seed[0]
    per_step, _ = _bits_per_step(summary, rows)
    dense = dense or (per_step if spec == "none" else summary["sim_message_bytes"] * 8)
    versus = (f"{100 * (mean_accuracy[spec] - mean_accuracy['none']):+.1f}"
              if "none" in runs else "-")
    each = ", ".join(f"{s['test_accuracy']:.3f}" for s, _ in per_seed)
    lines.append(f"| {spec} | {per_step:,.0f} | {dense / per_step:.1f}x | "
                 f"{mean_accuracy[spec]:.4f} | {versus} | {each} | {summary['sim_time_s']:.1f} |")
  return "\n".join(lines)


def compression_plot(runs, path):
  """The first seed's curves."""
  figure, axes = plt.subplots(1, 2, figsize=(11, 4))
  for spec, [(summary, rows), *_] in runs.items():
    _, sent = _bits_per_step(summary, rows)
    cumulative, total = {}, 0.0
    for row, bits in zip([r for r in rows if "accuracy" in r], sent, strict=True):
      total += bits
      cumulative[row["step"]] = total
    evals = [r for r in rows if "test_accuracy" in r]
    axes[0].plot([cumulative[r["step"]] for r in evals], [r["test_accuracy"] for r in evals],
                 label=spec)
    axes[1].plot([r["sim_time"] for r in evals], [r["test_accuracy"] for r in evals], label=spec)
  axes[0].set(xlabel="bits sent per worker", ylabel="test accuracy", xscale="log")
  axes[1].set(xlabel="simulated time (s)", ylabel="test accuracy")
  for axis in axes:
    axis.set_ylim(0.5, 1.0)
    axis.grid(alpha=0.3)
    axis.legend(fontsize=8)
  figure.tight_layout()
  figure.savefig(path, dpi=110)
  plt.close(figure)


def table(runs, target, config, command):
  baseline = time_to(runs["ssgd"][1], target) if "ssgd" in runs else None
  lines = [
      f"{config.data.name}, {config.model.name}, {config.cluster.num_workers} workers, "
      f"speeds {tuple(config.cluster.speeds) or 'all 1'}, {config.cluster.topology} at "
      f"{config.cluster.bandwidth:.3g} B/s, {config.cluster.step_time or 'measured'} s per step; "
      f"produced by `{command}`.",
      "",
      f"| strategy | test accuracy | steps | simulated time (s) | time to {target:.4g} (s) | "
      f"speedup to {target:.4g} vs ssgd | communication fraction | idle fraction |",
      "|---|---|---|---|---|---|---|---|",
  ]
  for name, (summary, rows) in runs.items():
    to_target = time_to(rows, target)
    speedup = f"{baseline / to_target:.2f}x" if baseline and to_target else "-"
    fractions = summary["sim_time_fractions"]
    mean = lambda values: sum(values) / len(values)
    lines.append(
        f"| {name} | {summary['test_accuracy']:.4f} | {summary['steps']} | "
        f"{summary['sim_time_s']:.1f} | {'not reached' if to_target is None else f'{to_target:.1f}'}"
        f" | {speedup} | {mean(fractions['communication']):.3f} | {mean(fractions['idle']):.3f} |")
  return "\n".join(lines)


def plot(runs, path):
  figure, axes = plt.subplots(1, 3, figsize=(15, 4))
  for name, (_, rows) in runs.items():
    evals = [r for r in rows if "test_accuracy" in r]
    train = [r for r in rows if "loss" in r]
    epoch_of = {r["step"]: r["epoch"] for r in train}
    axes[0].plot([epoch_of[r["step"]] for r in evals], [r["test_accuracy"] for r in evals],
                 label=name)
    axes[1].plot([r["sim_time"] for r in evals], [r["test_accuracy"] for r in evals], label=name)
    axes[2].plot([r["sim_time"] for r in train], [r["loss"] for r in train], label=name,
                 linewidth=0.7)
  axes[0].set(xlabel="epoch", ylabel="test accuracy")
  axes[1].set(xlabel="simulated time (s)", ylabel="test accuracy")
  axes[2].set(xlabel="simulated time (s)", ylabel="training loss", yscale="log")
  for axis in axes[:2]:
    axis.set_ylim(0.5, 1.0)
  for axis in axes:
    axis.grid(alpha=0.3)
    axis.legend(fontsize=8)
  figure.tight_layout()
  figure.savefig(path, dpi=110)
  plt.close(figure)


def main() -> None:
  parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
  parser.add_argument("--config", default="configs/default.py")
  parser.add_argument("--strategies", default=",".join(STRATEGIES))
  parser.add_argument("--target", default="0.9",
                      help="test accuracy to time, or 'ssgd' for ssgd's final accuracy")
  parser.add_argument("--eval_every", type=int, default=100, help="steps between evaluations")
  parser.add_argument("--output", default="runs/compare")
  parser.add_argument("--steps", type=int, default=0, help="override the config's steps")
  parser.add_argument("--compressions", default="",
                      help="compare these compression specs (';'-separated) on one strategy")
  parser.add_argument("--seeds", default="0",
                      help="with --compressions: train seeds to average over, e.g. 0,1,2")
  parser.add_argument("--readme", default="", help="also write the table and plot into "
                      "README.md's section of this name (plot copied to docs/)")
  args = parser.parse_args()
  names = [n for n in args.strategies.split(",") if n]
  unknown = [n for n in names if n not in STRATEGIES]
  if unknown:
    sys.exit(f"error: unknown strategies {unknown}; choose from {list(STRATEGIES)}")
  os.makedirs(args.output, exist_ok=True)
  if args.compressions:
    if len(names) != 1:
      sys.exit("error: --compressions compares one strategy; pass exactly one in --strategies")
    specs = [spec for spec in args.compressions.split(";") if spec]
    seeds = [int(seed) for seed in args.seeds.split(",") if seed]
    command = (f"python scripts/compare.py --config {args.config} --strategies {names[0]} "
               f"--compressions \"{args.compressions}\" --seeds {args.seeds}")
    runs, config = run_compressions(args.config, names[0], specs, args.eval_every, args.output,
                                    args.steps, seeds)
    text = compression_table(runs, names[0], config, command)
    plot_path = os.path.join(args.output, "compare.png")
    compression_plot(runs, plot_path)
    _write(args, text, plot_path)
    return
  command = (f"python scripts/compare.py --config {args.config} --strategies "
             f"{','.join(names)} --target {args.target}")
  if args.target == "ssgd" and "ssgd" not in names:
    sys.exit("error: --target ssgd needs ssgd among --strategies")
  runs, config = run_all(args.config, names, args.eval_every, args.output, args.steps)
  target = runs["ssgd"][0]["test_accuracy"] if args.target == "ssgd" else float(args.target)
  text = table(runs, target, config, command)
  plot_path = os.path.join(args.output, "compare.png")
  plot(runs, plot_path)
  _write(args, text, plot_path)


def _write(args, text, plot_path):
  with open(os.path.join(args.output, "compare.md"), "w", encoding="utf-8") as f:
    f.write(text + "\n")
  print(text)
  print(f"wrote {args.output}/compare.md and {plot_path}")
  if args.readme:
    docs = os.path.join(os.path.dirname(os.path.dirname(os.path.abspath(__file__))), "docs")
    os.makedirs(docs, exist_ok=True)
    shutil.copy(plot_path, os.path.join(docs, f"{args.readme}.png"))
    replace_section(args.readme, f"{text}\n\n![{args.readme}](docs/{args.readme}.png)")


if __name__ == "__main__":
  main()
