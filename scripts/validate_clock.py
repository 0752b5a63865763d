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
on 2 cores) and stores the folds in odsgd_jax/cluster/clock_error.json, which the table and
every scaling figure read.
"""

import csv
import dataclasses
import json
import os

import numpy as np

from odsgd_jax import study
from odsgd_jax.cluster import calibration
from odsgd_jax.cluster import validation as cv

WITHIN = 10.0  # points


def summary(errors: np.ndarray, label: str) -> str:
  within = int(np.sum(np.abs(errors) <= WITHIN))
  return (f"{label}: within {WITHIN:g} points {within} of {len(errors)} "
          f"({within / len(errors):.0%}), mean absolute error {np.mean(np.abs(errors)):.1f} "
          f"points, mean error {np.mean(errors):+.1f}")


def pearson(predicted: np.ndarray, published: np.ndarray) -> float:
  """Pearson's r between predictions and published values (nan where either is constant)."""
  if len(predicted) < 2 or np.ptp(predicted) == 0 or np.ptp(published) == 0:
    return float("nan")
  return float(np.corrcoef(predicted, published)[0, 1])


def scores(predicted: np.ndarray, published: np.ndarray) -> dict[str, float]:
  """{"mae": mean absolute error in points, "within": cases within WITHIN points, "r"}."""
  errors = 100 * (predicted - published)
  return {"mae": float(np.mean(np.abs(errors))),
          "within": int(np.sum(np.abs(errors) <= WITHIN)), "r": pearson(predicted, published)}


def skill(predicted: np.ndarray, published: np.ndarray, constant: float) -> float:
  """1 - MAE / MAE of predicting `constant` for every case: 0 is no better than the
  constant, 1 is exact."""
  return 1 - scores(predicted, published)["mae"] / scores(
      np.full(len(published), constant), published)["mae"]


def batches() -> list[str]:
  """The protocol's batches, in the order their cases are listed."""
  return list(dict.fromkeys(case.batch_name for case in cv.CASES if case.batch_name))


def prior_median(batch: str) -> float:
  """The constant fixed before a batch: the median published efficiency of every case
  listed before the batch's first case."""
  first = next(i for i, case in enumerate(cv.CASES) if case.batch_name == batch)
  return float(np.median([case.published for case in cv.CASES[:first]]))


def _skill_line(label: str, first: np.ndarray, ideal: np.ndarray, published: np.ndarray,
                constant: float) -> str:
  n = len(published)
  ours, uncalibrated = scores(first, published), scores(ideal, published)
  flat = scores(np.full(n, constant), published)
  return (f"{label} ({n} cases): first looks MAE {ours['mae']:.1f} points, "
          f"{ours['within']} of {n} within {WITHIN:g}, r {ours['r']:.2f}; the constant "
          f"{constant:.1%}: MAE {flat['mae']:.1f}, {flat['within']} of {n}; the clock before "
          f"calibration: MAE {uncalibrated['mae']:.1f}, {uncalibrated['within']} of {n}, "
          f"r {uncalibrated['r']:.2f}; skill over the constant "
          f"{skill(first, published, constant):+.2f}")


def skill_table(ideal_errors: np.ndarray) -> str:
  """For each protocol batch's first looks: MAE, cases within 10 points and Pearson r,
  beside the constant fixed before the batch (the median of every earlier case) and the
  clock before calibration (`ideal_errors`: its error on every case, in points); the skill
  over the constant; the same per source."""
  ideal = np.array([case.published for case in cv.CASES]) + ideal_errors / 100
  lines = ["Produced by `python scripts/validate_clock.py --readme`. Each protocol batch's "
           "first looks (the clock's predictions before any change they could inform) "
           "against two references: a constant fixed before the batch (the median "
           "published efficiency of every case listed before it) and the clock before "
           "calibration (line rates, no fitted terms, each setup's topology, shards and "
           "buckets). Skill: 1 - MAE / MAE of that constant (0: no better than it). "
           "Targets for batch 2: MAE at most 0.6 x the constant's (skill at least 0.40) "
           "and r at least 0.6.", ""]
  for batch in batches():
    index = [i for i, case in enumerate(cv.CASES)
             if case.batch_name == batch and case.first_look is not None]
    if not index:
      continue
    constant = prior_median(batch)
    first = np.array([cv.CASES[i].first_look for i in index])
    published = np.array([cv.CASES[i].published for i in index])
    line = _skill_line(f"batch {batch}", first, ideal[index], published, constant)
    lines.append(f"- {line}")
    sources = list(dict.fromkeys(cv.CASES[i].source for i in index))
    for source in sources:
      mine = [k for k, i in enumerate(index) if cv.CASES[i].source == source]
      line = _skill_line(source, first[mine], ideal[index][mine], published[mine], constant)
      lines.append(f"  - {line}")
  return "\n".join(lines)


def role(index: int) -> str:
  case = cv.CASES[index]
  if case.batch_name:
    return f"batch {case.batch_name}"
  return "fitted" if cv.is_fitted(index) else "seen"


def validation_table(ideal: np.ndarray) -> str:
  """The validation table and its summaries; `ideal`: the uncalibrated clock's error on
  every case, in points (`cv.errors(cv.IDEAL)`)."""
  calibrated = cv.errors()
  rows = []
  for index, (case, error, before) in enumerate(zip(cv.CASES, calibrated, ideal, strict=True)):
    first = "-" if case.first_look is None else f"{case.first_look:.1%}"
    rows.append([str(index + 1), f"{case.model}, batch {case.batch}, {case.gpus} GPUs"
                 + (f" (vs {case.baseline_gpus})" if case.baseline_gpus > 1 else ""),
                 case.where, case.source, f"{case.published:.1%}", first,
                 f"{case.published + error / 100:.1%}", f"{error:+.1f}", role(index),
                 f"{before:+.1f}", ", ".join(case.inferred) or "-"])
  header = ["#", "case", "setup", "source", "published", "first look", "predicted",
            "error (points)", "row", "error before", "inferred"]
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
      "shards and buckets as in 'predicted'); 'inferred': the inputs the source does not "
      "state (interconnect: a link or its rate from the hardware's documentation, or a "
      "bound; nodes; batch; compute: one GPU's rate from another table or batch; library: "
      "its bucketing). Fitted constants: "
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
  ideal = cv.errors(cv.IDEAL)
  text, skill_text = validation_table(ideal), skill_table(ideal)
  print(text + "\n\n" + skill_text)
  if args.readme:
    study.replace_section("clock_validation", text)
    study.replace_section("clock_skill", skill_text)


if __name__ == "__main__":
  study.run_main(main)
