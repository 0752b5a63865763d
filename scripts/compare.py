"""Compares strategies (or compressors) on one config and simulated cluster, over seeds.

  python scripts/compare.py --config configs/default.py \\
      --strategies ssgd,asgd,ssp,odsgd,pseudo_sync,local_sgd,oscars --seeds 0-4 --target ssgd

Every strategy runs `<config>:<strategy>` with each seed (same seed: same initial
parameters and data order), evaluated every --eval_every steps. Writes
<output>/compare.md: final test accuracy (mean and 95% Student-t interval over the
seeds, difference from ssgd paired by seed, paired t-test), and time to the target
accuracy on the simulated cluster (`--target ssgd`: ssgd's mean final accuracy; how
many seeds reach it, when, and the speedup over ssgd); <output>/compare.png (test
accuracy against steps and simulated time); <output>/study.json (every run).

  python scripts/compare.py --config configs/default.py --strategies odsgd --seeds 0-4 \\
      --compressions "none;topk:0.01;qsgd:8;sign;powersgd:2;cast:bfloat16"

compares compressors on one strategy instead (specs separated by ";"): bits per step,
the reduction against no compression, accuracy (paired against "none") and simulated
time. A spec with momentum correction ("topk:0.01,momentum=0.9") runs with plain SGD
inside (optimizer.momentum=0): the momentum is the compressor's.
"""

import sys

from odsgd_jax import study
from odsgd_jax.strategies import STRATEGIES


def main() -> None:
  parser = study.script_parser(__doc__)
  parser.add_argument("--config", default="configs/default.py",
                      help="config file; each run uses <config>:<strategy>")
  parser.add_argument("--strategies", default=",".join(STRATEGIES))
  parser.add_argument("--target", default="ssgd",
                      help="test accuracies to time, comma-separated; 'ssgd' for ssgd's mean "
                      "final accuracy (e.g. ssgd,0.9)")
  parser.add_argument("--compressions", default="",
                      help="compare these compression specs (';'-separated) on one strategy")
  study.add_study_flags(parser, "runs/compare")
  args = parser.parse_args()
  names = [n for n in args.strategies.split(",") if n]
  unknown = [n for n in names if n not in STRATEGIES]
  if unknown:
    sys.exit(f"error: unknown strategies {unknown}; choose from {list(STRATEGIES)}")
  if args.compressions and len(names) != 1:
    sys.exit("error: --compressions compares one strategy; pass exactly one in --strategies")
  targets = [float("nan") if t == "ssgd" else float(t) for t in args.target.split(",") if t]
  if not args.compressions and "ssgd" in args.target.split(",") and "ssgd" not in names:
    sys.exit("error: --target ssgd needs ssgd among --strategies")
  command = study.command_line("scripts/compare.py")
  seeds, common = study.parse_seeds(args.seeds), study.common_overrides(args)
  if args.compressions:
    compressions = [spec for spec in args.compressions.split(";") if spec]
    specs = study.compression_specs(args.config, names[0], compressions, seeds, common)
  else:
    specs = study.strategy_specs(args.config, names, seeds, common)
  results = study.run_study(specs, args.output, processes=args.processes, resume=args.resume,
                            report=study.print_result)
  config = specs[0].build()
  if args.compressions:
    groups, text = study.compression_report(results, config, command)
    target = None
  else:
    baseline = "ssgd" if "ssgd" in names else names[0]
    groups, target, text = study.strategy_report(results, config, command, baseline, targets)
  study.write_outputs(text, groups, args.output, args.readme, target)


if __name__ == "__main__":
  study.run_main(main)
