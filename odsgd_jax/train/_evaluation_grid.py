"""The steps a run evaluates after: a fixed span, or a grid whose spans grow with the step so
that a time read off it is known to within a fixed share of itself (docs/results.md)."""

import math


def evaluation_steps(num_steps: int, every: int, growth: float = 0.0) -> frozenset[int]:
  """The steps (1-based) after which a run of `num_steps` evaluates, the last one included.

  Args:
    num_steps: the run's steps.
    every: the span between evaluations; on a growing grid the smallest one; 0: only at
      the end.
    growth: 0 for a fixed span; else after step s the next evaluation comes
      max(every, every * floor(growth * s / every)) steps later (spans stay multiples of
      `every`, so the grid is a subset of the fixed one), and an arrival read off it at
      step s' is known to within (span / s') <= max(every / s', growth) of itself.
  """
  if every <= 0:
    return frozenset({num_steps})
  if growth <= 0:
    return frozenset(range(every, num_steps + 1, every)) | {num_steps}
  steps, step = set(), 0
  while step < num_steps:
    step += max(every, every * math.floor(growth * step / every))
    steps.add(min(step, num_steps))
  return frozenset(steps | {num_steps})
