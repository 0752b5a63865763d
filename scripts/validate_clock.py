"""The simulated clock against published scaling measurements (docs/clock.md).

  python scripts/validate_clock.py [--readme] [--fit]

Predicts, for every case of odsgd_jax/study/clock_validation.py, the weak-scaling
efficiency of synchronous SGD from the setup's own numbers, and writes a table: case,
source, published, predicted, error in points, whether the row was fitted or held out,
and the clock before validation (line rate, noiseless, no interference) beside it; then a
summary per half: within 10 points (k of n) and mean absolute error. Seconds.

--fit refits the constants marked fitted in odsgd_jax/cluster/_calibration.py on the
fitted half (coordinate descent over fixed grids until no constant moves, about 10
minutes on 2 cores) and prints them.
"""

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


def validation_table() -> str:
  calibrated, ideal = cv.errors(), cv.errors(cv.IDEAL)
  rows = []
  for index, (case, error, before) in enumerate(zip(cv.CASES, calibrated, ideal, strict=True)):
    rows.append([str(index + 1), f"{case.model}, batch {case.batch}, {case.gpus} GPUs"
                 + (f" (vs {case.baseline_gpus})" if case.baseline_gpus > 1 else ""),
                 case.where, case.source, f"{case.published:.1%}",
                 f"{case.published + error / 100:.1%}", f"{error:+.1f}",
                 "fitted" if cv.is_fitted(index) else "held out", f"{before:+.1f}"])
  header = ["#", "case", "setup", "source", "published", "predicted", "error (points)",
            "row", "error before"]
  held = np.array([not cv.is_fitted(i) for i in range(len(cv.CASES))])
  fitted = ", ".join(f"{name} = {value:g}" for name, value in calibration.fitted_values().items())
  lines = [
      "Produced by `python scripts/validate_clock.py --readme`: weak-scaling efficiency "
      "T(base) / T(N) of synchronous SGD, published vs predicted by the ssgd timeline "
      "(mean of 64 noisy ticks), each case configured from its own setup; 'error before': "
      "the clock before validation as its options reach it (links at line rate, noiseless "
      "workers, no interference or node contention; each setup's topology, shards and "
      "backward-order buckets as in 'predicted'). Fitted constants (on the fitted "
      f"rows only): {fitted}.", "",
      study.markdown(header, rows), "",
      f"- {summary(calibrated[held], 'held-out rows')}",
      f"- {summary(calibrated[~held], 'fitted rows')}",
      f"- {summary(ideal[held], 'held-out rows, clock before validation')}",
      f"- {summary(ideal, 'all rows, clock before validation')}",
      "", "Sources: " + "; ".join(f"**{key}**: {text}" for key, text in cv.SOURCES.items()),
  ]
  return "\n".join(lines)


def main() -> None:
  parser = study.script_parser(__doc__)
  parser.add_argument("--readme", action="store_true",
                      help="write the clock_validation section of docs/clock.md")
  parser.add_argument("--fit", action="store_true",
                      help="refit the fitted constants on the fitted half and print them")
  args = parser.parse_args()
  if args.fit:
    values = cv.fit()
    print("fitted:", values, f"fitted-half MAE {cv.fitted_error(values):.2f} points")
  text = validation_table()
  print(text)
  if args.readme:
    study.replace_section("clock_validation", text)


if __name__ == "__main__":
  study.run_main(main)
