"""Compares strategies (or compressors) on one config and simulated cluster, over seeds.

  python scripts/compare.py --config configs/default.py \\
      --strategies ssgd,asgd,ssp,odsgd,pseudo_sync,local_sgd,oscars --seeds 0-11

Every strategy runs `<config>:<strategy>` with each seed (same seed: same initial
parameters, data order and cluster noise), evaluated every --eval_every steps, and (--budget
time, the default) trains until it has spent the baseline's simulated time with the same
seed, or for its own steps if more. Writes
<output>/compare.md with two tables, decided by the rules of odsgd_jax/study/verdicts.py
(docs/results.md, "How a claim is decided"): final test accuracy (mean and 95%
Student-t interval over the seeds; the difference from the baseline, ssgd, paired by
seed, and whether it is non-inferior at a 1-point margin, Holm across the rows), and
simulated time to target accuracies on the validation split (--targets: "95%" is 95% of
the baseline's mean final validation accuracy on --pilot_seeds, run under <output>/pilot
after the compared runs; "0.9" is 0.9): the seeds reaching each, the speedup over the
baseline (geometric mean over all seeds, each pair of runs cut at the shorter one's end)
and whether it is faster at the --primary target (docs/results.md, "How a claim is
decided"). Also <output>/compare.png (accuracy
against steps and simulated time) and <output>/study.json (every run).

  python scripts/compare.py --config configs/default.py --strategies odsgd --seeds 0-11 \\
      --compressions "none;topk:0.01;qsgd:8;sign;powersgd:2;cast:bfloat16"

compares compressors on one strategy instead (specs separated by ";"): bits per step,
the reduction against no compression, accuracy (non-inferiority to "none") and simulated
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
  parser.add_argument("--targets", default=",".join(study.TARGET_LEVELS),
                      help="accuracies to time, comma-separated: a share of the baseline's "
                      "pilot accuracy (95%%) or an accuracy (0.9); '' for none")
  parser.add_argument("--primary", default=study.PRIMARY,
                      help="the target that decides \"faster\" (one of --targets)")
  parser.add_argument("--pilot_seeds", default=",".join(map(str, study.PILOT_SEEDS)),
                      help="seeds of the baseline's pilot runs, on which shares are fixed")
  parser.add_argument("--compressions", default="",
                      help="compare these compression specs (';'-separated) on one strategy")
  parser.add_argument("--budget", default="time", choices=("time", "steps"),
                      help="time: every strategy trains for the baseline's simulated time "
                      "with the same seed, or its own steps if more (docs/results.md); "
                      "steps: every strategy for the config's steps")
  study.add_study_flags(parser, "runs/compare")
  args = parser.parse_args()
  seeds, common = study.check_study_flags(args)
  names = study.parse_strategies(args.strategies)
  if args.compressions and len(names) != 1:
    sys.exit("error: --compressions compares one strategy; pass exactly one in --strategies")
  command = study.command_line("scripts/compare.py")
  if args.compressions:
    compressions = [spec for spec in args.compressions.split(";") if spec.strip()]
    specs = study.compression_specs(args.config, names[0], compressions, seeds, common)
    results = study.run_with_flags(args, specs)
    groups, text = study.compression_report(results, specs[0].build(), command)
    study.write_outputs(text, groups, args.output, args.readme, check=args.check)
    return

  baseline = "ssgd" if "ssgd" in names else names[0]
  target_names = [t for t in args.targets.split(",") if t]
  if target_names:
    try:
      metric = study.target_metric(study.strategy_specs(args.config, [baseline], seeds[:1],
                                                        common)[0].build().to_dict())
      study.check_targets(target_names, args.primary, metric)
    except ValueError as error:
      sys.exit(f"error: --targets {args.targets!r} / --primary {args.primary!r}: {error}")
  pilot_seeds = (study.parse_seeds(args.pilot_seeds, "--pilot_seeds")
                 if study.needs_pilots(target_names) else [])
  if set(pilot_seeds) & set(seeds):
    sys.exit(f"error: --pilot_seeds {args.pilot_seeds} overlaps --seeds {args.seeds}: targets "
             f"are fixed on seeds that are not compared; choose other seeds")
  specs = study.strategy_specs(args.config, names, seeds, common)
  equal_time = args.budget == "time" and len(names) > 1
  if equal_time:  # the budgets counted before kept beside the records
    kept = study.records_folder(args)
    specs = study.equal_time_specs(
        specs, baseline, study.Derived(kept, accept=args.stale == "accept") if kept else None)
  study.check_specs(specs, args.output, args.processes)  # before the pilots train
  pilots = None
  if pilot_seeds:  # the baseline on seeds of its own, first: the targets' level
    pilot_specs = study.final_evaluation_only(
        study.strategy_specs(args.config, [baseline], pilot_seeds, common))
    pilots = study.summarize(study.run_with_flags(args, pilot_specs, "pilot"))[0]
  goals = study.targets(target_names, pilots) if target_names else None
  # evaluated until each run has reached the last target, and at its end
  results = study.run_with_flags(args, study.until_targets(specs, goals))
  groups, text = study.strategy_report(results, results[0].spec.build(), command, baseline,
                                       goals, args.primary, pilots, equal_time)
  if goals:  # the achieved resolution at each target, per arm and per ratio to the baseline
    base = next(g for g in groups if g.label == baseline)
    text += ("\n\nResolution of the times at every target (worst seed; a ratio's: the width "
             "of what it can be):\n\n" + "\n".join(
                 f"- {line}" for line in study.resolution_lines(
                     [(g, base) for g in groups if g.label != baseline], goals)))
  study.write_outputs(text, groups, args.output, args.readme,
                      goals[args.primary] if goals else None, check=args.check)


if __name__ == "__main__":
  study.run_main(main)
