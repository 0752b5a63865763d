"""Evaluation of the strategy's model on a held-out split (test or validation)."""

from typing import Any, Callable

import numpy as np

from odsgd_jax import parallel
from odsgd_jax.data import DatasetSpec, eval_batches

# Splits up to this size stay on the devices between evaluations: frequent
# evaluations (every few steps in a study) then cost only the forward passes.
_CACHE_BYTES = 256 * 2**20


class Evaluator:
  """The task's metrics of a train state's model over a whole split, named by the split
  (`test_loss`, `test_accuracy`; `validation_...`).

  The batches are read, padded and laid out once when they fit in `_CACHE_BYTES`
  (the offline data sets do); larger splits are read anew at every evaluation.
  The result is the same either way.
  """

  def __init__(self, eval_step: Callable[..., Any], split: Any, spec: DatasetSpec,
               batch_size: int, sharding: Any, name: str = "test"):
    self._eval_step, self._split, self._spec, self.name = eval_step, split, spec, name
    self._batch_size, self._sharding = batch_size, sharding
    self._cached = None
    first = next(eval_batches(split, spec, batch_size))
    per_batch = sum(np.asarray(x).nbytes for x in first.values())
    if per_batch * -(-len(split) // batch_size) <= _CACHE_BYTES:
      self._cached = [parallel.put_global(batch, sharding)
                      for batch in eval_batches(split, spec, batch_size)]

  def _device_batches(self):
    if self._cached is not None:
      return self._cached
    return (parallel.put_global(batch, self._sharding)
            for batch in eval_batches(self._split, self._spec, self._batch_size))

  def __call__(self, state: Any) -> dict[str, float]:
    totals: dict[str, float] = {}
    for batch in self._device_batches():
      for metric, value in self._eval_step(state, batch).items():
        totals[metric] = totals.get(metric, 0.0) + float(value)
    count = totals.pop("count")  # examples (or tokens): summed exactly, as integers
    return {f"{self.name}_{metric}": total / count for metric, total in sorted(totals.items())}
