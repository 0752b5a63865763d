"""Equal tuning for the claims: every claims strategy, baselines included, gets the same
six configurations on tuning seeds, and the one the criterion fixed beforehand picks
(docs/results.md, "Equal tuning for the claims"; odsgd_jax/study/_tuning.py).

  python scripts/tune.py [--data mnist1d] [--resume]

--output is the claims' folder (runs/claims): mnist1d's runs go in it, another workload's
in a folder of its name inside it, as scripts/claims.py has them.
Runs each strategy of each cluster's claims (the homogeneous and the heterogeneous one,
on the claims' --preset and --workload) with the learning rate at half, once and twice the
default times its key option at two values, on --seeds (default 300,301), each for at
least the simulated time ssgd's default spends on its steps with the same seed, the
claims' budget (more steps where the configuration is faster per tick); the target is
the claims' primary one, fixed on ssgd's pilot runs (shared with scripts/claims.py when
both write to the same --output), evaluated every tuning.CLAIMS_EVAL_EVERY steps of
the workload unless --eval_every says otherwise. Writes <output>/tuned.json ({cluster: {strategy:
{field: value}}}), which scripts/claims.py reads for its tuned verdicts, and
<output>/tuning.md, every configuration's mean validation accuracy and time.
"""

import json
import os

from odsgd_jax import study
from odsgd_jax.study import _tuning as tuning


def main() -> None:
  parser = study.script_parser(__doc__)
  study.add_study_flags(parser, output="runs/claims")
  parser.set_defaults(seeds=",".join(map(str, tuning.TUNING_SEEDS)))
  parser.add_argument("--data", default="mnist1d", choices=sorted(tuning.CLAIMS_CONFIGS))
  tuning.add_claims_flags(parser)
  args = parser.parse_args()
  # the workload's folder inside the claims' (--output, and --records where given)
  workload = os.path.relpath(tuning.claims_output(args.data, args.output), args.output)
  args.output = os.path.join(args.output, workload)
  if args.records:
    args.records = os.path.join(args.records, workload)
  seeds, common = study.check_study_flags(args)
  common += study.evaluation_overrides(tuning.eval_every(args.data, args.eval_every),
                                       args.eval_growth)
  pilot_seeds = study.parse_seeds(args.pilot_seeds, "--pilot_seeds")
  if set(seeds) & (set(pilot_seeds) | set(range(12))):
    raise study.StudyInputError(f"--seeds {args.seeds} overlaps the pilot or compared seeds "
                                f"(0-11): tuning seeds must be disjoint from both")
  cluster = tuning.cluster_overrides(args.preset, args.workload)
  configs = tuning.CLAIMS_CONFIGS[args.data]
  kept = study.records_folder(args)  # the records, and the budgets counted with them
  budgets = study.Derived(kept, accept=args.stale == "accept") if kept else None
  studies = {}
  for kind, strategies in tuning.CLAIMS_STRATEGIES.items():
    config = f"{configs[kind]}:{args.variant}" if args.variant else configs[kind]
    studies[f"pilot_{kind}"] = study.final_evaluation_only(study.strategy_specs(
        config, ["ssgd"], pilot_seeds, common + cluster))
    studies[f"tuning_{kind}"] = tuning.tuning_specs(configs[kind], strategies, seeds,
                                                    common + cluster, args.variant, budgets)
  for folder, specs in studies.items():
    study.check_specs(specs, os.path.join(args.output, folder), args.processes)

  def run(folder: str, goals: dict[str, float] | None = None) -> dict[str, study.Group]:
    results = study.run_with_flags(args, study.until_targets(studies[folder], goals), folder)
    return {group.label: group for group in study.summarize(results)}

  tuned, sections = {}, []
  for kind, strategies in tuning.CLAIMS_STRATEGIES.items():
    target = study.targets([study.PRIMARY], run(f"pilot_{kind}")["ssgd"])[study.PRIMARY]
    groups = run(f"tuning_{kind}", {study.PRIMARY: target})
    tuned[kind], rows = {}, []
    for name in strategies:
      own = [g for label, g in groups.items() if label.split(" ")[0] == name]
      chosen = tuning.choose(own, target)
      tuned[kind][name] = tuning.tuned_overrides(chosen)
      rows += tuning.choice_rows(own, target, chosen)
    sections.append(f"{kind} cluster, primary target {target:.4f}:\n\n" + study.markdown(
        ["configuration", "mean final validation accuracy", "mean time to the target (s)",
         ""], rows))
  text = (f"Produced by `{study.command_line('scripts/tune.py')}`: {args.data}, seeds "
          f"{', '.join(map(str, seeds))}, the {args.preset} preset timing {args.workload}, "
          f"each configuration trained for at least ssgd's simulated time on its seed; "
          f"chosen: within {100 * study.verdicts.MARGIN:g} point of the strategy's best mean "
          f"validation accuracy, the shortest mean time to the primary target.\n\n"
          + "\n\n".join(sections))
  print(text)
  with open(os.path.join(args.output, "tuning.md"), "w", encoding="utf-8") as f:
    f.write(text + "\n")
  # beside the records, where claims.py reads it (not under --check, which writes nothing)
  for folder in [args.output] + ([kept] if kept and not args.check else []):
    os.makedirs(folder, exist_ok=True)
    with open(os.path.join(folder, "tuned.json"), "w", encoding="utf-8") as f:
      json.dump(tuned, f, indent=1)
  if args.readme:
    study.replace_section(args.readme, text, check=args.check)


if __name__ == "__main__":
  study.run_main(main)
