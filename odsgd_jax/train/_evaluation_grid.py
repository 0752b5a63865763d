"""The steps a run evaluates after: a fixed span, or spans that grow with the step so that a
time read off them is known to within a fixed share of itself, dense again wherever the
target metric comes near a target not yet reached, and none but the last once every target is
reached (docs/results.md, "The evaluation grid")."""

import math
from typing import Sequence


def next_evaluation(step: int, num_steps: int, every: int, growth: float = 0.0,
                    score: float | None = None, best: float | None = None,
                    targets: Sequence[float] = (), near: float = 0.0) -> int:
  """The step (1-based) of the evaluation after the one at `step` (0: the start).

  Args:
    step: the step just evaluated (0 before the first).
    num_steps: the run's steps; the last is always evaluated.
    every: the smallest span between evaluations; 0: only at the end.
    growth: 0 for spans of `every`; else max(every, every * floor(growth * step / every))
      steps (multiples of `every`: the grid is a subset of the fixed one), so that an
      arrival read at step s' is known to within max(every / s', growth) of itself.
    score: the task's target metric evaluated at `step`, turned so that higher is better
      (`Metric.oriented`: an accuracy, a negated loss; None before the first evaluation).
    best: the highest score evaluated so far: a target at or below it is reached.
    targets: the scores the run is timed at. While `score` lies within `near` below one
      not yet reached, the span is max(1, min(every, floor(growth * step))) steps (`every`
      on a fixed grid): a noisy curve may cross in a spike that a long span skips, so near a
      target the grid is never coarser than the fixed one (an arrival there is read where a
      grid of `every` steps reads it), and finer from step 1 / growth on, known to within
      `growth` of itself. Once all are reached, only the last step is left.
    near: see `targets`.
  """
  if every <= 0:
    return num_steps
  unreached = [t for t in targets if best is None or best < t]
  if targets and not unreached:
    return num_steps
  close = score is not None and any(score >= t - near for t in unreached)
  if growth <= 0:
    span = every
  elif close:  # at most `every`: the grid check found spikes the growing spans stepped over
    span = max(1, min(every, math.floor(growth * step)))
  else:
    span = max(every, every * math.floor(growth * step / every))
  return min(step + span, num_steps)


def evaluation_steps(num_steps: int, every: int, growth: float = 0.0) -> frozenset[int]:
  """The steps a run of `num_steps` evaluates after when it times no target (`next_evaluation`
  without scores), the last one included."""
  steps, step = set(), 0
  while step < num_steps:
    step = next_evaluation(step, num_steps, every, growth)
    steps.add(step)
  return frozenset(steps)
