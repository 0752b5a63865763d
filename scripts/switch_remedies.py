r"""OD-SGD's remedies for the collapse at the end of its warm-up, read off run records
(issue 75; docs/delays.md, "OD-SGD at the end of its warm-up").

  python scripts/switch_remedies.py --records records/switch_dev --readme switch_dev

For each setting (a record folder below --records and the record's label), over its seeds:
the final validation and test accuracy (means with 95% Student-t intervals), and the
collapse: the largest drawdown of validation accuracy in steps 100-1000 (how far it falls
below the best it had reached since step 100), its worst seed, and how many seeds fall by
more than `--collapse` (0.2, fixed before the remedies' runs ended: above every strategy's
worst drawdown on the Results table's seeds but asgd's and OD-SGD's, local SGD's 0.172).
Differences are paired by seed against the setting named by --baseline.
"""

import argparse
import os
import shlex
import sys

import numpy as np
from scipy import stats

from odsgd_jax import study
from odsgd_jax.study import _records as records_lib

WINDOW = (100, 1000)


def drawdown(evaluations: list[dict[str, float]]) -> float:
  """The largest fall of validation accuracy below its running best, within WINDOW."""
  best, worst = -1.0, 0.0
  for row in evaluations:
    if WINDOW[0] <= row["step"] <= WINDOW[1] and "validation_accuracy" in row:
      best = max(best, row["validation_accuracy"])
      worst = max(worst, best - row["validation_accuracy"])
  return worst


def settings(records: str) -> dict[str, dict[int, dict]]:
  """{"folder: label": {seed: record}} for every record below `records`."""
  found: dict[str, dict[int, dict]] = {}
  for path in records_lib.record_files(records, recursive=True):
    record = records_lib.read_record(path)
    if record is None or "label" not in record or record.get("summary") is None:
      continue
    folder = os.path.relpath(os.path.dirname(path), records)
    if folder.endswith("pilot"):
      continue
    found.setdefault(f"{folder}: {record['label']}", {})[record["seed"]] = record
  return found


def noninferiority_p(differences: np.ndarray, margin: float) -> float:
  """One-sided paired t test of "no worse than the baseline by more than `margin` points"."""
  return float(stats.ttest_1samp(differences + margin, 0.0, alternative="greater").pvalue)


def report(found: dict[str, dict[int, dict]], baseline: str, collapse: float,
           margin: float | None = None) -> str:
  margin_column = ([f"validation: no worse by > {margin:g} point (one-sided paired t)"]
                   if margin is not None else [])
  header = ["setting", "seeds", "final validation accuracy", "vs baseline (points)",
            "final test accuracy", "vs baseline (points)",
            "largest drawdown, steps 100-1000: mean, worst", f"seeds falling > {collapse}",
            *margin_column]
  lines = ["| " + " | ".join(header) + " |", "|" + "---|" * len(header)]
  base = found.get(baseline, {})
  for name, runs in found.items():
    seeds = sorted(runs)
    validation = np.array([runs[s]["summary"]["validation_accuracy"] for s in seeds])
    test = np.array([runs[s]["summary"]["test_accuracy"] for s in seeds])
    falls = np.array([drawdown(runs[s]["evaluations"]) for s in seeds])
    cells = [name, ",".join(map(str, seeds))]
    for values, key in ((validation, "validation_accuracy"), (test, "test_accuracy")):
      cells.append(study.mean_ci(values).format(4))
      if name != baseline and len(set(seeds) & set(base)) > 1:
        difference = study.paired({s: runs[s]["summary"][key] for s in seeds},
                                  {s: base[s]["summary"][key] for s in base}).difference
        cells.append(difference.format(1, scale=100, sign=True))
      else:
        cells.append("-")
    cells.append(f"{falls.mean():.3f}, {falls.max():.3f} (seed {seeds[int(falls.argmax())]})")
    cells.append(f"{int((falls > collapse).sum())} of {len(seeds)}")
    if margin is not None:
      paired = [s for s in seeds if s in base]
      if name == baseline or len(paired) < 2:
        cells.append("-")
      else:
        diff = 100 * np.array([runs[s]["summary"]["validation_accuracy"]
                               - base[s]["summary"]["validation_accuracy"] for s in paired])
        p = noninferiority_p(diff, margin)
        cells.append(f"{'yes' if p < 0.05 else 'not shown'} (p = {p:.3g})")
    lines.append("| " + " | ".join(cells) + " |")
  return "\n".join(lines)


def main() -> None:
  parser = argparse.ArgumentParser(description=__doc__,
                                   formatter_class=argparse.RawDescriptionHelpFormatter)
  parser.add_argument("--records", required=True)
  parser.add_argument("--baseline", default="", help="'folder: label' of the paired baseline")
  parser.add_argument("--collapse", type=float, default=0.2)
  parser.add_argument("--margin", type=float, default=None,
                      help="points: also test non-inferiority to the baseline at this margin")
  parser.add_argument("--readme", default="", help="generated section to write")
  parser.add_argument("--check", action="store_true")
  args = parser.parse_args()
  found = settings(args.records)
  if not found:
    raise SystemExit(f"no run records below {args.records}")
  text = report(found, args.baseline or next(iter(found)), args.collapse, args.margin)
  print(text)
  if args.readme:
    command = shlex.join(["python", "scripts/switch_remedies.py", *(
        a for a in sys.argv[1:] if a != "--check")])
    study.replace_section(args.readme, f"Produced by `{command}`.\n\n{text}", check=args.check)


if __name__ == "__main__":
  study.run_main(main)
