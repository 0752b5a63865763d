"""Verdicts on the papers' claims, by rules fixed before any number is looked at.

The rules (docs/results.md, "How a claim is decided", says them in words):

- "Similar / comparable accuracy" is non-inferiority: the mean over seeds of the paired
  difference (strategy - baseline, final test accuracy) is above -MARGIN, tested one-sided
  at ALPHA (Student t). Across the rows of a table the p-values are Holm-adjusted. A row
  holds when its adjusted non-inferiority p is below ALPHA; it does not hold when the
  opposite test (the difference is below -MARGIN), adjusted the same way, is; otherwise it
  is inconclusive: the seeds cannot tell. A strategy that diverged on a seed cannot hold.
- "Faster" is time to a target accuracy on the validation split, at several targets (a
  primary one and others). Every seed counts: a seed that never reaches a target is
  censored at the end of its run, whose simulated time stands in for its time to the
  target (a lower bound of the true one). The speedup is the geometric mean over all seeds
  of the baseline's time over the strategy's, with the 95% interval of a paired t on the
  log ratios. A row holds when, at the primary target, the one-sided p of "faster"
  (Holm-adjusted across the rows) is below ALPHA and no seed of the strategy is censored
  where the baseline's reached (its capped time would flatter it), and it is not
  significantly slower at any other target. It does not hold when it is significantly
  slower at some target (the baseline then not censored where the strategy reached);
  otherwise it is inconclusive.
- A paper's numeric figure is reproduced when every measured value is within TOLERANCE
  of the paper's; otherwise the verdict states the gaps, and says so when the measurement
  is only an upper bound of what the paper measured.
"""

import dataclasses
import math
from typing import Mapping, Sequence

import numpy as np
from scipy import stats

from odsgd_jax.study._stats import Interval, mean_ci

MARGIN = 0.01  # accuracy, as a fraction: 1 point
ALPHA = 0.05  # one-sided, family-wise across a table's rows (Holm)
TOLERANCE = 0.02  # a paper's figure, as a fraction: 2 points
POWER = 0.8

HOLDS, DOES_NOT_HOLD, INCONCLUSIVE = "holds", "does not hold", "inconclusive"


@dataclasses.dataclass(frozen=True)
class Verdict:
  """An outcome, why, and the Holm-adjusted p-value that decided it (of the claim: non-
  inferiority, faster; of its opposite for "does not hold"; nan where none did)."""

  outcome: str  # HOLDS, DOES_NOT_HOLD or INCONCLUSIVE
  reason: str
  p_value: float = math.nan

  def format(self) -> str:
    return f"**{self.outcome}**: {self.reason}"

  def brief(self) -> str:
    """The outcome and its p-value, for a table cell."""
    return self.outcome if math.isnan(self.p_value) else f"{self.outcome} (Holm {_p(self.p_value)})"


def holm(p_values: Sequence[float]) -> list[float]:
  """Holm's step-down adjustment: the i-th smallest of m p-values is multiplied by
  m - i + 1 (i from 1), kept monotone and capped at 1; returned in the input order."""
  p = np.asarray(p_values, np.float64)
  order = np.argsort(p, kind="stable")
  adjusted = np.empty_like(p)
  running = 0.0
  for rank, index in enumerate(order):
    running = max(running, min(1.0, (len(p) - rank) * p[index]))
    adjusted[index] = running
  return adjusted.tolist()


def _one_sided_t(differences: np.ndarray, shift: float) -> tuple[float, float]:
  """p-values of mean(differences) > shift and of mean(differences) < shift."""
  centred = differences - shift
  if len(centred) < 2:
    return math.nan, math.nan
  if np.ptp(centred) <= 1e-12:  # no spread: the sign decides
    mean = float(centred.mean())
    return (0.0, 1.0) if mean > 1e-12 else (1.0, 0.0) if mean < -1e-12 else (1.0, 1.0)
  greater = float(stats.ttest_1samp(centred, 0.0, alternative="greater").pvalue)
  less = float(stats.ttest_1samp(centred, 0.0, alternative="less").pvalue)
  return greater, less


@dataclasses.dataclass(frozen=True)
class AccuracyTest:
  """A strategy's final accuracy against the baseline's, paired by seed.

  Attributes:
    difference: mean of (strategy - baseline) with its two-sided 95% interval.
    lower_bound: the one-sided 95% lower bound of the mean difference.
    p_noninferior: one-sided p of "mean difference > -margin".
    p_inferior: one-sided p of "mean difference < -margin".
    margin: the margin, as a fraction.
    diverged: seeds on which the strategy diverged (left out of the difference).
  """

  difference: Interval
  lower_bound: float
  p_noninferior: float
  p_inferior: float
  margin: float
  diverged: int = 0


def accuracy_test(strategy: Mapping[int, float | None], baseline: Mapping[int, float | None],
                  margin: float = MARGIN) -> AccuracyTest:
  """Non-inferiority of `strategy` to `baseline` ({seed: accuracy, None if it diverged})
  on the seeds where both finished."""
  diverged = sum(strategy[s] is None for s in set(strategy) & set(baseline))
  seeds = sorted(s for s in set(strategy) & set(baseline)
                 if strategy[s] is not None and baseline[s] is not None)
  differences = np.asarray([strategy[s] - baseline[s] for s in seeds], np.float64)
  interval = mean_ci(differences)
  if len(differences) >= 2:
    sem = differences.std(ddof=1) / math.sqrt(len(differences))
    lower = float(differences.mean() - stats.t.ppf(1 - ALPHA, len(differences) - 1) * sem)
  else:
    lower = math.nan
  p_noninferior, p_inferior = _one_sided_t(differences, -margin)
  return AccuracyTest(interval, lower, p_noninferior, p_inferior, margin, diverged)


def accuracy_verdicts(tests: Sequence[AccuracyTest], alpha: float = ALPHA) -> list[Verdict]:
  """The verdicts of a table's accuracy rows, Holm-adjusted across them."""
  noninferior = holm([t.p_noninferior for t in tests])
  inferior = holm([t.p_inferior for t in tests])
  verdicts = []
  for test, p_ok, p_bad in zip(tests, noninferior, inferior, strict=True):
    points = (f"{test.difference.format(1, 100, sign=True)} points (one-sided 95% lower bound "
              f"{100 * test.lower_bound:+.1f}), margin -{100 * test.margin:g}")
    if p_ok < alpha and test.diverged:  # no accuracy there: it cannot be called similar
      verdicts.append(Verdict(INCONCLUSIVE, f"non-inferior, {points}, Holm {_p(p_ok)}, but "
                                            f"{test.diverged} seed(s) diverged", p_ok))
    elif p_ok < alpha:
      verdicts.append(Verdict(HOLDS, f"non-inferior, {points}, Holm {_p(p_ok)}", p_ok))
    elif p_bad < alpha:
      verdicts.append(Verdict(DOES_NOT_HOLD, f"lower by more than the margin, {points}, "
                                             f"Holm {_p(p_bad)}", p_bad))
    else:
      verdicts.append(Verdict(INCONCLUSIVE, f"{points}; neither non-inferior nor inferior at "
                                            f"Holm p < {alpha:g} (non-inferior: {_p(p_ok)})",
                              p_ok))
  return verdicts


@dataclasses.dataclass(frozen=True)
class Arrival:
  """When one seed first reached a target: its simulated time, or (never reached) the
  end of its run, censored."""

  time: float
  reached: bool


def arrival(evaluations: Sequence[Mapping[str, float]], target: float, end_time: float,
            metric: str = "validation_accuracy") -> Arrival:
  """The first evaluation of `metric` at or above `target`, else censored at `end_time`."""
  for row in evaluations:
    if row[metric] >= target:
      return Arrival(float(row["sim_time"]), True)
  return Arrival(float(end_time), False)


@dataclasses.dataclass(frozen=True)
class SpeedTest:
  """A strategy's time to a target against the baseline's, over all their common seeds.

  Attributes:
    speedup: geometric mean of baseline time / strategy time (censored times at the end
      of the run), nan without seeds.
    low, high: its two-sided 95% interval (paired t on the log ratios).
    p_faster, p_slower: one-sided p-values of "the strategy is faster" / "slower".
    seeds: number of seeds compared.
    strategy_censored: seeds where the strategy never reached but the baseline did.
    baseline_censored: seeds where the baseline never reached but the strategy did.
    both_censored: seeds where neither reached.
  """

  speedup: float
  low: float
  high: float
  p_faster: float
  p_slower: float
  seeds: int
  strategy_censored: int
  baseline_censored: int
  both_censored: int

  def format(self) -> str:
    if self.seeds == 0:
      return "-"
    text = f"{self.speedup:.2f}x"
    if not math.isnan(self.low) and self.low != self.high:  # equal: every seed alike
      text += f" [{self.low:.2f}, {self.high:.2f}]"
    censored = []
    if self.strategy_censored:
      censored.append(f"{self.strategy_censored} never reached")
    if self.baseline_censored:
      censored.append(f"{self.baseline_censored} never reached by the baseline")
    if self.both_censored:
      censored.append(f"{self.both_censored} by neither")
    return text + (f" ({'; '.join(censored)} of {self.seeds})" if censored else "")


def speed_test(strategy: Mapping[int, Arrival], baseline: Mapping[int, Arrival]) -> SpeedTest:
  """Paired comparison of the times to one target ({seed: Arrival}) on the common seeds."""
  seeds = sorted(set(strategy) & set(baseline))
  logs = np.asarray([math.log(baseline[s].time / strategy[s].time) for s in seeds], np.float64)
  if len(logs) == 0:
    return SpeedTest(math.nan, math.nan, math.nan, math.nan, math.nan, 0, 0, 0, 0)
  interval = mean_ci(logs)
  p_faster, p_slower = _one_sided_t(logs, 0.0)
  return SpeedTest(
      speedup=math.exp(interval.mean),
      low=math.exp(interval.mean - interval.half_width) if len(logs) >= 2 else math.nan,
      high=math.exp(interval.mean + interval.half_width) if len(logs) >= 2 else math.nan,
      p_faster=p_faster, p_slower=p_slower, seeds=len(seeds),
      strategy_censored=sum(baseline[s].reached and not strategy[s].reached for s in seeds),
      baseline_censored=sum(strategy[s].reached and not baseline[s].reached for s in seeds),
      both_censored=sum(not strategy[s].reached and not baseline[s].reached for s in seeds))


def speed_verdicts(rows: Sequence[Mapping[str, SpeedTest]], primary: str,
                   alpha: float = ALPHA) -> list[Verdict]:
  """The verdicts of a table's speed rows ({target name: SpeedTest}, `primary` among
  them), the primary target's p-values Holm-adjusted across the rows."""
  faster = holm([row[primary].p_faster for row in rows])
  verdicts = []
  for row, p_faster in zip(rows, faster, strict=True):
    main = row[primary]
    slower = [name for name, test in row.items()
              if test.p_slower < alpha and not test.baseline_censored]
    detail = f"{main.format()} to the {primary} target, Holm {_p(p_faster)} for faster"
    if slower:
      targets = " and ".join([", ".join(slower[:-1]), slower[-1]] if len(slower) > 1 else slower)
      verdicts.append(Verdict(DOES_NOT_HOLD, f"{detail}; significantly slower to the {targets} "
                                             f"target{'s' if len(slower) > 1 else ''}"))
    elif main.seeds == main.both_censored:
      verdicts.append(Verdict(INCONCLUSIVE, f"neither reaches the {primary} target"))
    elif p_faster < alpha and not main.strategy_censored:
      verdicts.append(Verdict(HOLDS, detail, p_faster))
    elif p_faster < alpha:
      verdicts.append(Verdict(INCONCLUSIVE, f"{detail}, but {main.strategy_censored} seed(s) "
                                            f"never reached it (their times are capped)", p_faster))
    else:
      verdicts.append(Verdict(INCONCLUSIVE, detail, p_faster))
  return verdicts


def figure_verdict(measured: Mapping[int, float], paper: Mapping[int, float],
                   upper_bound: bool = False, tolerance: float = TOLERANCE,
                   band: float = 0.0) -> Verdict:
  """A paper's figures ({N: value}) against the measured ones: reproduced within
  `tolerance` at every N; not reproduced where a gap exceeds both the tolerance and the
  clock's own error `band` (its out-of-family error, a fraction); between the two, the
  clock cannot tell (inconclusive). `upper_bound`: the measurement can only bound the
  paper's setting from above (the model leaves out a cost the paper paid)."""
  gaps = {n: measured[n] - paper[n] for n in sorted(paper)}
  listed = ", ".join(f"{100 * gap:+.1f} points at {n}" for n, gap in gaps.items())
  if all(abs(gap) <= tolerance for gap in gaps.values()):
    return Verdict(HOLDS, f"reproduced within {100 * tolerance:g} points ({listed})")
  bound = "; the model gives only an upper bound here" if upper_bound else ""
  if any(abs(gap) > max(tolerance, band) for gap in gaps.values()):
    beyond = f", beyond the clock's error of ±{100 * band:.1f} points" if band else ""
    return Verdict(DOES_NOT_HOLD, f"not reproduced: {listed}{beyond}{bound}")
  return Verdict(INCONCLUSIVE, f"within the clock's error of ±{100 * band:.1f} points but not "
                               f"within {100 * tolerance:g}: {listed}{bound}")


def level_verdict(measured: float, level: float, band: float, what: str) -> Verdict:
  """A qualitative claim read as a level ("near-linear": at least `level`), decided with
  the clock's error `band`: holds when `measured` - band reaches the level, does not when
  `measured` + band falls short of it, otherwise the clock cannot tell."""
  detail = f"{what} {measured:.1%} ± {100 * band:.1f} points against {level:.0%}"
  if measured - band >= level:
    return Verdict(HOLDS, detail)
  if measured + band < level:
    return Verdict(DOES_NOT_HOLD, detail)
  return Verdict(INCONCLUSIVE, f"{detail}: within the clock's error")


def seeds_for_power(sd: float, margin: float = MARGIN, rows: int = 1, alpha: float = ALPHA,
                    power: float = POWER, true_difference: float = 0.0) -> int:
  """Seeds a non-inferiority test needs: the smallest n at which the one-sided t-test of
  "mean difference > -margin" at level alpha / rows (Holm's strictest step) rejects with
  probability `power` when the paired differences have mean `true_difference` and
  standard deviation `sd` (noncentral t)."""
  level = alpha / rows
  for n in range(2, 10_000):
    noncentrality = (true_difference + margin) / (sd / math.sqrt(n))
    critical = stats.t.ppf(1 - level, n - 1)
    if stats.nct.sf(critical, n - 1, noncentrality) >= power:
      return n
  raise ValueError(f"no seed count up to 10,000 reaches power {power} (sd {sd}, margin {margin})")


def _p(p_value: float) -> str:
  if math.isnan(p_value):
    return "p undefined"
  return "p < 0.001" if p_value < 0.001 else f"p = {p_value:.3f}"
