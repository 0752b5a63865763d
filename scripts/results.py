"""Final test accuracy of every strategy on one config, over seeds (paired against ssgd).

  python scripts/results.py --config configs/mnist1d.py --seeds 0-11 [--strategies a,b]

Each strategy runs `<config>:<strategy>` with every seed (same seed: same initial
parameters and data order). Writes <output>/compare.md (mean and 95% Student-t
interval over the seeds, the difference from ssgd paired by seed and whether it is
non-inferior at a 1-point margin, Holm across the rows; the per-seed values),
compare.png and study.json. For the simulated time to a
target accuracy as well, use scripts/compare.py.
"""

from odsgd_jax import study
from odsgd_jax.strategies import STRATEGIES


def main() -> None:
  parser = study.script_parser(__doc__)
  parser.add_argument("--config", default="configs/mnist1d.py",
                      help="config file; each run uses <config>:<strategy>")
  parser.add_argument("--strategies", default=",".join(STRATEGIES),
                      help="comma-separated strategy names")
  study.add_study_flags(parser, "runs/results")
  args = parser.parse_args()
  seeds, common = study.check_study_flags(args)
  names = study.parse_strategies(args.strategies)
  specs = study.strategy_specs(args.config, names, seeds, common)
  results = study.run_with_flags(args, specs)
  baseline = "ssgd" if "ssgd" in names else names[0]
  groups, text = study.strategy_report(results, specs[0].build(),
                                       study.command_line("scripts/results.py"), baseline)
  study.write_outputs(text, groups, args.output, args.readme, check=args.check)


if __name__ == "__main__":
  study.run_main(main)
