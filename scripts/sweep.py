"""Grid search over config fields, over seeds: accuracy per combination with intervals.

  python scripts/sweep.py --config configs/mnist1d.py:odsgd \\
      --grid strategy.local_lr=0,0.0625,0.1 --grid optimizer.momentum=0.5,0.9

Every combination runs with every seed (default 0-11), afresh under --output; values are
read as Python literals. The table gives each combination's final validation accuracy,
on which a setting is chosen (the table marks the highest mean), and its final test
accuracy (means and 95% Student-t intervals over the seeds), each with its difference
from the first combination, paired by seed.
"""


from odsgd_jax import study


def parse_grid(entries: list[str]) -> dict[str, list]:
  grid = {}
  for entry in entries:
    field, equals, values = entry.partition("=")
    if not equals or "." not in field or not values.strip():
      raise study.StudyInputError(f"--grid {entry!r} must look like section.field=v1,v2")
    if field in grid:
      raise study.StudyInputError(f"--grid {entry!r}: {field} is given twice; list its values "
                                  f"in one --grid")
    grid[field] = [study.parse_value(v) for v in values.split(",")]
  return grid


def main() -> None:
  parser = study.script_parser(__doc__)
  parser.add_argument("--config", required=True, help="config file, optionally with :argument")
  parser.add_argument("--grid", action="append", default=[], help="section.field=v1,v2,...")
  study.add_study_flags(parser, "runs/sweep")
  args = parser.parse_args()
  seeds, common = study.check_study_flags(args)
  specs = study.sweep_specs(args.config, parse_grid(args.grid), seeds, common)
  results = study.run_with_flags(args, specs)
  groups, text = study.sweep_report(results, specs[0].build(),
                                    study.command_line("scripts/sweep.py"))
  study.write_outputs(text, groups, args.output, args.readme, check=args.check)


if __name__ == "__main__":
  study.run_main(main)
