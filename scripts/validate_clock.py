"""The simulated clock against published scaling measurements (docs/clock.md).

  python scripts/validate_clock.py [--readme] [--fit] [--first-look] [--cross-validate]

Predicts, for every case of odsgd_jax/cluster/measurements/cases.csv, the scaling efficiency of
synchronous SGD from the setup's own numbers, and writes a table: case, source, published,
the first look (for cases scored under the protocol), the prediction now, its error in
points, the row's role, and the clock before validation beside it; then the summaries
docs/clock.md reports: the held-out error (first looks), the fitted rows, the cases seen
while the model was built, a constant prediction for comparison, and the
leave-one-family-out error. Seconds, but for --fit and --cross-validate.

--first-look scores the cases of a batch that have no first look yet, with the clock as it
stands, and writes each into its row of cases.csv (the protocol: once, in the commit that
scores the batch; a first look already there is never changed).

--fit refits the constants marked fitted in odsgd_jax/cluster/_calibration.py on the
fitted rows (coordinate descent over fixed grids until no constant moves, about 10
minutes on 2 cores) and prints them.

--cross-validate refits them once per family of the fitted set without it (about an hour
on 2 cores) and stores the folds in odsgd_jax/study/clock_error.json, which the table and
every scaling figure read.
"""

import csv
import dataclasses
import json
import os

import numpy as np

from odsgd_jax import study
from odsgd_jax.cluster import calibration
from odsgd_jax.study import clock_validation as cv

WITHIN = 10.0  # points


def summary(errors: np.ndarray, label: str) -> str:
  within = int(np.sum(np.abs(errors) <= WITHIN))
  return (f"{label}: within {WITHIN:g} points {within} of {len(errors)} "
          f"({within / len(errors):.0%}), mean absolute error {np.mean(np.abs(errors)):.1f} "
          f"points, mean error {np.mean(errors):+.1f}")


def role(index: int) -> str:
  case = cv.CASES[index]
  if case.batch_name:
    return f"batch {case.batch_name}"
  return "fitted" if cv.is_fitted(index) else "seen"


def validation_table() -> str:
  calibrated, ideal = cv.errors(), cv.errors(cv.IDEAL)
  rows = []
  for index, (case, error, before) in enumerate(zip(cv.CASES, calibrated, ideal, strict=True)):
    first = "-" if case.first_look is None else f"{case.first_look:.1%}"
    rows.append([str(index + 1), f"{case.model}, batch {case.batch}, {case.gpus} GPUs"
                 + (f" (vs {case.baseline_gpus})" if case.baseline_gpus > 1 else ""),
                 case.where, case.source, f"{case.published:.1%}", first,
                 f"{case.published + error / 100:.1%}", f"{error:+.1f}", role(index),
                 f"{before:+.1f}"])
  header = ["#", "case", "setup", "source", "published", "first look", "predicted",
            "error (points)", "row", "error before"]
  roles = [role(i) for i in range(len(cv.CASES))]
  scored = np.array([case.first_look is not None for case in cv.CASES])
  fitted = np.array([r == "fitted" for r in roles])
  seen = np.array([r == "seen" for r in roles])
  published = np.array([case.published for case in cv.CASES])
  lines = [
      "Produced by `python scripts/validate_clock.py --readme`: scaling efficiency of "
      "synchronous SGD, published vs predicted by the ssgd timeline (mean of 64 noisy "
      "ticks), each case configured from its own setup: weak scaling T(base) / T(N), and "
      "strong scaling where the source's gradient accumulation falls as GPUs are added "
      "(the time of a micro-batch). 'first look': the prediction when the case was first "
      "scored, under the protocol; 'row': fitted (the constants were chosen on it), seen "
      "(before the protocol, while the model was built) or the protocol's batch; 'error "
      "before': the clock before validation as its options reach it (links at line rate, "
      "noiseless workers, no interference or node contention; each setup's topology, "
      "shards and buckets as in 'predicted'). Fitted constants: "
      + ", ".join(f"{name} = {value:g}" for name, value in calibration.fitted_values().items())
      + ".", "",
      study.markdown(header, rows), ""]
  if scored.any():
    first = np.array([100 * (case.first_look - case.published) for case in cv.CASES
                      if case.first_look is not None])
    mean = published[fitted].mean()
    constant = f"the same cases, one constant for all (the fitted rows' mean, {mean:.1%})"
    lines += [f"- {summary(first, 'held out (first looks of the protocol batches)')}",
              f"- {summary(calibrated[scored], 'the same cases, predicted now')}",
              f"- {summary(100 * (mean - published[scored]), constant)}"]
  folds = cv.stored_folds()
  if folds:
    out = np.array([e for fold in folds for e in fold.errors.values()])
    label = (f"out of family (each of the {len(folds)} fitted families predicted by the "
             f"constants fitted without it)")
    lines.append(f"- {summary(out, label)}")
    blind = cv.single_family_transports()
    known = np.array([e for fold in folds if fold.family not in blind.values()
                      for e in fold.errors.values()])
    label = ("the families whose transport another family or a citation informs: the band "
             "the scripts print")
    lines.append(f"  - {summary(known, label)}")
    lines.append("  - by family left out: " + "; ".join(
        f"{fold.family}: mean absolute error {np.mean(np.abs(list(fold.errors.values()))):.1f}"
        + "".join(f" ({t} unconstrained)" for t, f in blind.items() if f == fold.family)
        for fold in folds))
  lines += [f"- {summary(calibrated[fitted], 'fitted rows')}",
            f"- {summary(calibrated[seen], 'seen while the model was built, not fitted')}",
            f"- {summary(ideal[scored | seen], 'held-out and seen rows, clock before validation')}",
            "", "Sources: " + "; ".join(f"**{key}**: {text}" for key, text in cv.SOURCES.items())]
  return "\n".join(lines)


def cross_validate() -> None:
  """Runs the leave-one-family-out cross-validation and stores its folds (ERROR_FILE)."""
  fitted = [cv.is_fitted(i) for i in range(len(cv.CASES))]
  folds = cv.cross_validate(cv.CASES, fitted)
  with open(cv.ERROR_FILE, "w", encoding="utf-8") as f:
    json.dump({"folds": [dataclasses.asdict(fold) for fold in folds]}, f, indent=1)
    f.write("\n")
  print(f"out-of-family mean absolute error {cv.out_of_family_error(folds):.2f} points; "
        f"ranges {cv.constant_ranges(folds)}")


def score_first_looks() -> list[str]:
  """Fills the empty first look of every case of a protocol batch (its prediction now, to
  4 places, and the clock's REVISION) in cases.csv, never changing one already there;
  returns a line for each filled."""
  path = os.path.join(cv.MEASUREMENTS, "cases.csv")
  with open(path, encoding="utf-8", newline="") as f:
    reader = csv.DictReader(f)
    fields, rows = reader.fieldnames, list(reader)
  filled = []
  for row, case in zip(rows, cv.CASES, strict=True):
    if case.batch_name and not row["first_look"]:
      row["first_look"] = repr(round(cv.predict(case), 4))
      row["first_look_revision"] = str(cv.REVISION)
      filled.append(f"{case.name}: {row['first_look']} (revision {cv.REVISION})")
  with open(path, "w", encoding="utf-8", newline="") as f:
    writer = csv.DictWriter(f, fields, lineterminator="\n")
    writer.writeheader()
    writer.writerows(rows)
  return filled


def main() -> None:
  parser = study.script_parser(__doc__)
  parser.add_argument("--readme", action="store_true",
                      help="write the clock_validation section of docs/clock.md")
  parser.add_argument("--fit", action="store_true",
                      help="refit the fitted constants on the fitted rows and print them")
  parser.add_argument("--first-look", action="store_true",
                      help="score the cases without a first look and write their first "
                      "looks into cases.csv")
  parser.add_argument("--cross-validate", action="store_true",
                      help="leave each fitted family out in turn; store the folds")
  args = parser.parse_args()
  if args.cross_validate:
    cross_validate()
  if args.first_look:
    print("\n".join(score_first_looks()) or "no case without a first look")
    return
  if args.fit:
    values = cv.fit()
    print("fitted:", values, f"fitted-rows MAE {cv.fitted_error(values):.2f} points")
  text = validation_table()
  print(text)
  if args.readme:
    study.replace_section("clock_validation", text)


if __name__ == "__main__":
  study.run_main(main)
