"""Means with Student-t intervals and paired tests over seeds.

Runs of one study that share a seed share their initial parameters and data order,
so two strategies are compared seed by seed (a paired test): the spread that the
seed causes, about a point of accuracy on the default experiment, cancels out.
"""

import dataclasses
import math
from typing import Sequence

import numpy as np
from scipy import stats

CONFIDENCE = 0.95
SIGNIFICANCE = 0.05


@dataclasses.dataclass(frozen=True)
class Interval:
  """A mean over n values and the half-width of its 95% Student-t interval (nan for n < 2).
  Values that do not vary at the printed precision (a deterministic figure, such as a
  noiseless cluster's simulated time, up to float rounding) are formatted without an
  interval: "± 0.0" would say nothing."""

  mean: float
  half_width: float
  n: int

  def format(self, digits: int = 4, scale: float = 1.0, sign: bool = False) -> str:
    if self.n == 0:
      return "-"
    mean = f"{self.mean * scale:{'+' if sign else ''}.{digits}f}"
    width = abs(self.half_width * scale)  # a negative scale turns a score back into a loss
    if self.n < 2 or math.isnan(self.half_width) or round(width, digits) == 0:
      return mean
    return f"{mean} ± {width:.{digits}f}"


def mean_ci(values: Sequence[float], confidence: float = CONFIDENCE) -> Interval:
  """The mean of `values` and its two-sided Student-t confidence interval."""
  values = np.asarray(values, np.float64)
  n = len(values)
  if n == 0:
    return Interval(math.nan, math.nan, 0)
  if n == 1:
    return Interval(float(values[0]), math.nan, 1)
  sem = values.std(ddof=1) / math.sqrt(n)
  return Interval(float(values.mean()), float(stats.t.ppf((1 + confidence) / 2, n - 1) * sem), n)


@dataclasses.dataclass(frozen=True)
class Paired:
  """`a - b` over the seeds both have: the mean difference with its interval, and
  the two-sided paired t-test's p-value (1 when every difference is 0)."""

  difference: Interval
  p_value: float

  @property
  def significant(self) -> bool:
    return self.difference.n >= 2 and self.p_value < SIGNIFICANCE


def paired(a: dict[int, float], b: dict[int, float]) -> Paired:
  """Paired comparison of two strategies' per-seed values ({seed: value})."""
  seeds = sorted(set(a) & set(b))
  differences = np.asarray([a[s] - b[s] for s in seeds], np.float64)
  interval = mean_ci(differences)
  if len(seeds) < 2:
    p_value = math.nan
  elif np.ptp(differences) <= 1e-9:  # no spread but float noise: t is undefined
    p_value = 1.0 if abs(differences.mean()) <= 1e-9 else 0.0
  else:
    p_value = float(stats.ttest_1samp(differences, 0.0).pvalue)
  return Paired(interval, p_value)
