"""Verdicts on the papers' claims, by rules fixed before any number is looked at.

The rules (docs/results.md, "How a claim is decided", says them in words):

- "Similar / comparable accuracy" is non-inferiority: the mean over seeds of the paired
  difference (strategy - baseline, final test accuracy) is above -MARGIN, tested one-sided
  at ALPHA (Student t). Across the rows of a table the p-values are Holm-adjusted. A row
  holds when its adjusted non-inferiority p is below ALPHA; it does not hold when the
  opposite test (the difference is below -MARGIN), adjusted the same way, is; otherwise it
  is inconclusive: the seeds cannot tell. A seed that diverged failed: it counts at chance
  accuracy in both tests, and a strategy that diverged on any seed cannot hold.
- "Faster" is time to a target accuracy on the validation split, at several targets (a
  primary one and others), every seed counted. Each seed's ratio is scored by its real
  bounds: an arm that arrived has its time (even after the other arm's run ended), one
  that never arrived needs more than its run's end, perhaps forever; a seed where neither
  arm ever arrived is a tie, left out of every test. Each test takes the end of those
  bounds least favourable to the conclusion it can draw (a strategy that never arrived
  counts as never arriving in the tests that can make it hold; a baseline that never
  arrived, likewise, in those that can make it not hold). The tests are exact
  one-sided Wilcoxon signed-rank tests on the log ratios (baseline / strategy), which take
  "never" as a rank. A row holds when it is faster by more than MIN_SPEEDUP at the primary
  target (Holm across the rows), no seed of the strategy never reached a target the
  baseline reached (at any target: its expected time is then unbounded, whatever the
  other seeds do), and no target shows it slower by more than MIN_SPEEDUP before
  adjustment. It does not hold when it is not faster by MIN_SPEEDUP at the primary target
  or slower by more than MIN_SPEEDUP at another one, Holm across all those tests of the
  table; otherwise it is inconclusive. The minimum relevant difference applies on both
  sides: a 0.1% slowdown is no evidence of "slower". Where the tests of several targets
  decide "does not hold" with the same p, the cell names the primary target's and lists
  every test that fired. The speedup printed is the geometric mean of the ratios with both
  runs cut at the common horizon (the shorter run's end, a time beyond it standing there)
  and its paired-t interval: a description, not the test.
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
from odsgd_jax.tasks import CLASSIFICATION, Metric

MARGIN = CLASSIFICATION.target.margin  # accuracy, as a fraction: 1 point
# The sensitivity margin beside the registered one: half of it (docs/results.md, "How a
# claim is decided"), so a reader sees which "holds" survive a stricter margin.
SENSITIVITY_MARGIN = 0.005
ALPHA = 0.05  # one-sided, family-wise across a table's rows (Holm)
TOLERANCE = 0.02  # a paper's figure, as a fraction: 2 points
MIN_SPEEDUP = 1.05  # the smallest speedup that counts as "faster"
POWER = 0.8

HOLDS, DOES_NOT_HOLD, INCONCLUSIVE = "holds", "does not hold", "inconclusive"


def speed_rule(baseline: str) -> str:
  """The "faster" rule in a sentence, for a table's caption."""
  return (f"Speedup: geometric mean over all seeds of {baseline}'s time over the strategy's "
          f"with its 95% interval, each pair of runs cut at the shorter one's end (a time "
          f"beyond it standing there; the count of seeds that never reach is given). The "
          f"tests score each seed by its real bounds (an arrival after the other run's end "
          f"is known; an arm that never arrives needs more than its run's end; a seed that "
          f"neither arm ever reaches is a tie, left out). \"Faster\" holds when an exact "
          f"one-sided signed-rank test finds it faster by more than "
          f"{100 * (MIN_SPEEDUP - 1):g}% at the primary target (Holm across the rows, a "
          f"seed that never reaches counting as never arriving), no seed of the strategy "
          f"never reaches a target {baseline} reached, and no target shows it slower by more "
          f"than {100 * (MIN_SPEEDUP - 1):g}% before adjustment; it does not hold when it is "
          f"not faster by {100 * (MIN_SPEEDUP - 1):g}% at the primary target or slower by more "
          f"than {100 * (MIN_SPEEDUP - 1):g}% at another (Holm across all those tests of the "
          f"table).")


@dataclasses.dataclass(frozen=True)
class Verdict:
  """An outcome, why, and the Holm-adjusted p-value that decided it (of the claim: non-
  inferiority, faster; of its opposite for "does not hold"; nan where none did)."""

  outcome: str  # HOLDS, DOES_NOT_HOLD or INCONCLUSIVE
  reason: str
  p_value: float = math.nan
  decided_by: str = ""  # for a table cell: the figure, and the rule when not the primary test

  def format(self) -> str:
    return f"**{self.outcome}**: {self.reason}"

  def brief(self) -> str:
    """The outcome and its p-value, for a table cell."""
    if math.isnan(self.p_value):
      return self.outcome
    return f"{self.outcome} (Holm {format_p(self.p_value)})"

  def cell(self) -> str:
    """A table cell: the outcome in bold and what decided it."""
    return f"**{self.outcome}**: {self.decided_by or self.reason}"


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
    diverged: seeds on which the strategy diverged (counted at chance accuracy).
  """

  difference: Interval
  lower_bound: float
  p_noninferior: float
  p_inferior: float
  margin: float
  diverged: int = 0
  sd: float = math.nan  # the paired differences' standard deviation over the seeds
  seeds: int = 0


def accuracy_test(strategy: Mapping[int, float | None], baseline: Mapping[int, float | None],
                  chance: float, margin: float = MARGIN) -> AccuracyTest:
  """Non-inferiority of `strategy` to `baseline` ({seed: accuracy, None if it diverged})
  on their common seeds. A diverged seed failed: it counts at `chance` accuracy (one over
  the number of classes), on either side."""
  seeds = sorted(set(strategy) & set(baseline))
  diverged = sum(strategy[s] is None for s in seeds)
  failed = lambda value: chance if value is None else value
  differences = np.asarray([failed(strategy[s]) - failed(baseline[s]) for s in seeds],
                           np.float64)
  interval = mean_ci(differences)
  if len(differences) >= 2:
    sem = differences.std(ddof=1) / math.sqrt(len(differences))
    lower = float(differences.mean() - stats.t.ppf(1 - ALPHA, len(differences) - 1) * sem)
  else:
    lower = math.nan
  p_noninferior, p_inferior = _one_sided_t(differences, -margin)
  sd = float(differences.std(ddof=1)) if len(differences) >= 2 else math.nan
  return AccuracyTest(interval, lower, p_noninferior, p_inferior, margin, diverged, sd,
                      len(differences))


@dataclasses.dataclass(frozen=True)
class Replication:
  """How an accuracy verdict would come out on a fresh set of as many seeds, were the
  paired differences normal with the observed mean and SD: the chance of each outcome,
  with each test at Holm's strictest level (alpha / rows, so a lower bound for the row
  with the smallest p), and the seeds "holds" would need to come out with probability
  POWER (None where the observed mean is not above -margin: no count would)."""

  holds: float
  does_not_hold: float
  seeds_for_holds: int | None

  @property
  def inconclusive(self) -> float:
    return max(0.0, 1.0 - self.holds - self.does_not_hold)

  def of(self, outcome: str) -> float:
    return {HOLDS: self.holds, DOES_NOT_HOLD: self.does_not_hold,
            INCONCLUSIVE: self.inconclusive}[outcome]

  def format(self, outcome: str) -> str:
    need = (f"{self.seeds_for_holds} seeds for {POWER:.0%}" if self.seeds_for_holds
            else "no seed count")
    return f"{_chance(self.of(outcome))} (holds {_chance(self.holds)}; {need})"


def _chance(p: float) -> str:
  """A probability in whole percent, never rounded to a certainty it is not."""
  return "> 99%" if p > 0.99 else "< 1%" if p < 0.01 else f"{p:.0%}"


def replication(test: AccuracyTest, rows: int, alpha: float = ALPHA) -> Replication:
  """`Replication` of `test`'s verdict in a table of `rows` accuracy rows (noncentral t)."""
  n = test.seeds
  if n < 2 or not test.sd > 0:
    return Replication(math.nan, math.nan, None)
  critical = stats.t.ppf(1 - alpha / rows, n - 1)
  shift = (test.difference.mean + test.margin) / (test.sd / math.sqrt(n))
  holds = float(stats.nct.sf(critical, n - 1, shift))
  does_not_hold = float(stats.nct.cdf(-critical, n - 1, shift))
  try:
    need = (seeds_for_power(test.sd, test.margin, rows, alpha,
                            true_difference=test.difference.mean)
            if test.difference.mean > -test.margin else None)
  except ValueError:
    need = None
  return Replication(holds, does_not_hold, need)


def seed_sets_differ(primary: AccuracyTest, again: AccuracyTest) -> float:
  """Two-sided p of a Welch t-test that two seed sets' mean paired differences are the same
  (a replication's check that its seeds draw from the primary set's distribution: a small p
  says the seed set itself moves the result, which no interval on one set shows)."""
  if min(primary.seeds, again.seeds) < 2:
    return math.nan
  return float(stats.ttest_ind_from_stats(
      primary.difference.mean, primary.sd, primary.seeds, again.difference.mean, again.sd,
      again.seeds, equal_var=False).pvalue)


def accuracy_verdicts(tests: Sequence[AccuracyTest], alpha: float = ALPHA,
                      metric: Metric = CLASSIFICATION.target) -> list[Verdict]:
  """The verdicts of a table's rows of final scores (`metric`'s: accuracy by default),
  Holm-adjusted across them; the differences are written in its unit."""
  noninferior = holm([t.p_noninferior for t in tests])
  inferior = holm([t.p_inferior for t in tests])
  verdicts = []
  scale, digits, unit = metric.scale, metric.digits, metric.unit
  for test, p_ok, p_bad in zip(tests, noninferior, inferior, strict=True):
    points = (f"{test.difference.format(digits, scale, sign=True)} {unit} (one-sided 95% lower "
              f"bound {scale * test.lower_bound:+.{digits}f}), margin -{scale * test.margin:g}")
    figure = f"{test.difference.format(digits, scale, sign=True)} {unit}"
    if p_ok < alpha and test.diverged:  # no score there: it cannot be called similar
      verdicts.append(Verdict(INCONCLUSIVE, f"non-inferior, {points}, Holm {format_p(p_ok)}, but "
                                            f"{test.diverged} seed(s) diverged", p_ok,
                              f"{test.diverged} seed(s) diverged ({figure})"))
    elif p_ok < alpha:
      verdicts.append(Verdict(HOLDS, f"non-inferior, {points}, Holm {format_p(p_ok)}", p_ok,
                              f"{figure}, non-inferior (Holm {format_p(p_ok)})"))
    elif p_bad < alpha:
      verdicts.append(Verdict(DOES_NOT_HOLD, f"{metric.worse} by more than the margin, "
                                             f"{points}, Holm {format_p(p_bad)}", p_bad,
                              f"{figure}, {metric.worse} by > {scale * test.margin:g} "
                              f"(Holm {format_p(p_bad)})"))
    else:
      verdicts.append(Verdict(INCONCLUSIVE, f"{points}; neither non-inferior nor inferior at "
                                            f"Holm p < {alpha:g} (non-inferior: {format_p(p_ok)})",
                              p_ok, f"{figure}, neither shown non-inferior nor inferior (Holm "
                                    f"{format_p(p_ok)} for non-inferior)"))
  return verdicts


@dataclasses.dataclass(frozen=True)
class Arrival:
  """When one seed first reached a target (`time`, `reached`), and when its run ended
  (`end`, simulated seconds). A seed that never reached has `time` == `end`: censored."""

  time: float
  reached: bool
  end: float


def arrival(evaluations: Sequence[Mapping[str, float]], target: float, end_time: float,
            metric: str = "validation_accuracy", higher_is_better: bool = True) -> Arrival:
  """The first evaluation of `metric` at or above `target` (at or below, for a metric such
  as a loss that falls), else censored at `end_time`."""
  for row in evaluations:
    if (row[metric] >= target) if higher_is_better else (row[metric] <= target):
      return Arrival(float(row["sim_time"]), True, float(end_time))
  return Arrival(float(end_time), False, float(end_time))


@dataclasses.dataclass(frozen=True)
class _Cut:
  """One seed's log ratio (baseline time / strategy time), scored by its real bounds: an
  arm that arrived has its time, even after the other arm's run ended; one that never
  arrived in its run needs more than its run's end, perhaps forever. `worst` and `best`
  are the ends of what the ratio can be for the strategy ("never arriving" gives -inf or
  +inf); where neither arm ever arrived nothing is known either way: a tie, left out of
  every test. `capped` cuts both runs at the common horizon, the shorter run's end, and
  puts a time beyond it there (what the printed speedup averages, a description)."""

  worst: float
  best: float
  capped: float
  tie: bool = False  # neither arm ever reached: no evidence either way


def _bounds(side: Arrival) -> tuple[float, float]:
  """The time an arm needs: known where it arrived, else more than its run's end."""
  return (side.time, side.time) if side.reached else (side.end, math.inf)


def _cut(strategy: Arrival, baseline: Arrival) -> _Cut:
  horizon = min(strategy.end, baseline.end)
  capped = math.log(min(baseline.time, horizon) / min(strategy.time, horizon))
  if not strategy.reached and not baseline.reached:
    return _Cut(-math.inf, math.inf, capped, tie=True)
  (strategy_low, strategy_high), (baseline_low, baseline_high) = map(_bounds, (strategy,
                                                                              baseline))
  worst = -math.inf if math.isinf(strategy_high) else math.log(baseline_low / strategy_high)
  best = math.inf if math.isinf(baseline_high) else math.log(baseline_high / strategy_low)
  return _Cut(worst, best, capped)


def signed_rank(values: Sequence[float]) -> tuple[float, float]:
  """Exact one-sided p-values (greater than 0, less than 0) of Wilcoxon's signed-rank
  test, over all 2^n sign flips. Zeros (ties) carry no sign and are left out (Wilcoxon's
  own rule); tied magnitudes get their mean rank; an infinite value ranks above every
  finite one, so only its sign and that rank count."""
  values = np.asarray(values, np.float64)
  values = values[np.abs(values) > 1e-12]
  if len(values) == 0:
    return 1.0, 1.0
  doubled = np.rint(2 * stats.rankdata(np.abs(values))).astype(np.int64)  # mean ranks: halves
  counts = np.zeros(int(doubled.sum()) + 1)
  counts[0] = 1.0
  for rank in doubled:  # the null distribution of the sum of positive (doubled) ranks
    shifted = np.zeros_like(counts)
    shifted[rank:] = counts[:-rank]
    counts = counts + shifted
  counts /= counts.sum()
  observed = int(doubled[values > 0].sum())
  return float(counts[observed:].sum()), float(counts[:observed + 1].sum())


@dataclasses.dataclass(frozen=True)
class SpeedTest:
  """A strategy's time to a target against the baseline's, paired by seed, each seed
  scored by its real bounds (`_Cut`).

  Attributes:
    speedup: geometric mean of baseline time / strategy time, a censored time standing at
      the horizon (an upper bound of the speedup where the strategy never arrived, a lower
      one where the baseline never did); nan without seeds.
    low, high: its two-sided 95% interval (paired t on the log ratios), describing only.
    p_faster: one-sided p of "faster by more than `min_speedup`" (signed rank; a strategy
      that never arrived counts as never arriving, the worst case).
    p_not_faster: one-sided p of "faster by less than `min_speedup`" (a baseline that never
      arrived counts as never arriving, the strategy's best case).
    p_slower: one-sided p of "slower by more than `min_speedup`" (the strategy's best
      case, as `p_not_faster`).
    p_slower_worst: the same with the worst case (a strategy that never arrived never
      does): the veto that keeps a row from holding.
    min_speedup: the smallest speedup that counts as faster.
    seeds: number of seeds compared.
    strategy_censored: seeds where the strategy never reached (in its whole run) but the
      baseline did.
    baseline_censored: seeds where the baseline never reached but the strategy did.
    both_censored: seeds where neither reached.
  """

  speedup: float
  low: float
  high: float
  p_faster: float
  p_not_faster: float
  p_slower: float
  p_slower_worst: float
  min_speedup: float
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


def speed_test(strategy: Mapping[int, Arrival], baseline: Mapping[int, Arrival],
               min_speedup: float = MIN_SPEEDUP) -> SpeedTest:
  """Paired comparison of the times to one target ({seed: Arrival}) on the common seeds,
  each seed scored by its real bounds (the printed speedup: both runs cut at the shorter
  one's end)."""
  seeds = sorted(set(strategy) & set(baseline))
  if not seeds:
    return SpeedTest(*[math.nan] * 6, min_speedup, 0, 0, 0, 0)
  cut = [_cut(strategy[s], baseline[s]) for s in seeds]
  capped = np.asarray([c.capped for c in cut])
  # A tie says nothing about either direction: it is left out of every test (the shifted
  # ones too, where it would otherwise stand at -relevant and vote "not faster").
  evidence = [c for c in cut if not c.tie]
  worst = np.asarray([c.worst for c in evidence])
  best = np.asarray([c.best for c in evidence])
  reached = [(strategy[s].reached, baseline[s].reached) for s in seeds]
  interval = mean_ci(capped)
  relevant = math.log(min_speedup)  # the minimum relevant difference, on both sides
  p_faster, _ = signed_rank(worst - relevant)
  _, p_not_faster = signed_rank(best - relevant)
  _, p_slower = signed_rank(best + relevant)
  _, p_slower_worst = signed_rank(worst + relevant)
  return SpeedTest(
      speedup=math.exp(interval.mean),
      low=math.exp(interval.mean - interval.half_width) if len(seeds) >= 2 else math.nan,
      high=math.exp(interval.mean + interval.half_width) if len(seeds) >= 2 else math.nan,
      p_faster=p_faster, p_not_faster=p_not_faster, p_slower=p_slower,
      p_slower_worst=p_slower_worst, min_speedup=min_speedup, seeds=len(seeds),
      strategy_censored=reached.count((False, True)),
      baseline_censored=reached.count((True, False)), both_censored=reached.count((False, False)))


def _listed(names: Sequence[str]) -> str:
  return " and ".join([", ".join(names[:-1]), names[-1]] if len(names) > 1 else names)


def speed_verdicts(rows: Sequence[Mapping[str, SpeedTest]], primary: str,
                   alpha: float = ALPHA) -> list[Verdict]:
  """The verdicts of a table's speed rows ({target name: SpeedTest}, `primary` among
  them). "Holds": faster by more than the minimum relevant speedup at `primary`, Holm
  across the rows, with no seed of the strategy that never reached a target the baseline
  reached and no unadjusted sign of "slower by more than the minimum" at any target. "Does
  not hold": not faster by the minimum at `primary`, or slower by more than it at another
  target, Holm across every such test of
  the table. Otherwise inconclusive; always so where neither ever reaches `primary`."""
  faster = holm([row[primary].p_faster for row in rows])
  against = [(i, name, test.p_not_faster if name == primary else test.p_slower)
             for i, row in enumerate(rows) for name, test in row.items()]
  adjusted_against = holm([p for _, _, p in against])
  verdicts = []
  for i, (row, p_faster) in enumerate(zip(rows, faster, strict=True)):
    main = row[primary]
    mine = [(name, p) for (j, name, _), p in zip(against, adjusted_against, strict=True)
            if j == i and p < alpha]
    relevant = f"{100 * (main.min_speedup - 1):g}%"
    detail = (f"{main.format()} to the {primary} target, Holm {format_p(p_faster)} for faster by > "
              f"{relevant}")
    figure = f"{main.format()} to {primary}"
    if main.seeds == main.both_censored:  # no arrival to compare: no verdict either way
      verdicts.append(Verdict(INCONCLUSIVE, f"neither reaches the {primary} target",
                              decided_by=f"neither arm reaches the {primary} target"))
      continue
    if mine:
      # the smallest p decides; on a tie the primary target is named (then the others in
      # the row's order), and the cell lists every test that fired
      name, p = min(mine, key=lambda pair: (pair[1], pair[0] != primary))
      fired = {n: (f"not faster by > {relevant} to the {n} target" if n == primary
                   else f"slower by > {relevant} to the {n} target") + f" (Holm {format_p(q)})"
               for n, q in mine}
      reasons = list(fired.values())
      decided = (f"{figure}, not faster by > {relevant} (Holm {format_p(p)})" if name == primary
                 else f"slower by > {relevant} to the {name} target, {row[name].format()} "
                      f"(Holm {format_p(p)})")
      if len(mine) > 1:
        decided += f"; also {_listed([text for n, text in fired.items() if n != name])}"
      verdicts.append(Verdict(DOES_NOT_HOLD, f"{detail}; {_listed(reasons)}", p, decided))
      continue
    never = [name for name, test in row.items() if test.strategy_censored]
    hinted = [name for name, test in row.items() if test.p_slower_worst < alpha]
    if p_faster < alpha and not never and not hinted:
      verdicts.append(Verdict(HOLDS, detail, p_faster,
                              f"{figure}, faster by > {relevant} (Holm {format_p(p_faster)})"))
    elif p_faster < alpha and never:
      counts = ", ".join(f"{row[n].strategy_censored} at {n}" for n in never)
      first = never[-1]
      decided = (f"{row[first].strategy_censored} of {row[first].seeds} seeds never reach the "
                 f"{first} target the baseline reached ({figure}, Holm {format_p(p_faster)})")
      verdicts.append(Verdict(INCONCLUSIVE, f"{detail}, but seeds never reached a target "
                                            f"the baseline reached ({counts})", p_faster,
                              decided))
    elif p_faster < alpha:
      decided = (f"slower by > {relevant} to the {_listed(hinted)} target before adjustment "
                 f"({figure}, Holm {format_p(p_faster)})")
      verdicts.append(Verdict(INCONCLUSIVE, f"{detail}, but slower by > {relevant} to the "
                                            f"{_listed(hinted)} "
                                            f"target{'s' if len(hinted) > 1 else ''} before "
                                            f"adjustment", p_faster, decided))
    else:
      verdicts.append(Verdict(INCONCLUSIVE, detail, p_faster,
                              f"{figure}, neither shown faster by > {relevant} nor refuted "
                              f"(Holm {format_p(p_faster)} for faster)"))
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


def format_p(p_value: float) -> str:
  if math.isnan(p_value):
    return "p undefined"
  return "p < 0.001" if p_value < 0.001 else f"p = {p_value:.3f}"
