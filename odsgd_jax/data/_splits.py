"""Random access to a prepared split, one batch of indices at a time."""

from typing import Any

import numpy as np


def _gathered(examples: list[dict[str, Any]], stack: bool = True) -> dict[str, Any]:
  """Examples' features as arrays (a label: int32); where not `stack`, images of different
  sizes stay a list."""
  arrays = {}
  for key in examples[0]:
    values = [np.asarray(e[key]) for e in examples]
    if key == "label":
      arrays[key] = np.asarray(values, np.int32)
    else:
      arrays[key] = np.stack(values) if stack or key != "image" else values
  return arrays


class InMemorySplit:
  """A whole split decoded once into arrays; `read` gathers a batch by index.

  Used for data sets that fit in memory, where reading record by record would
  cost more host time per step than the model itself.
  """

  def __init__(self, source: Any):
    self.arrays = _gathered(source.__getitems__(list(range(len(source)))))

  @property
  def images(self) -> np.ndarray:
    return self.arrays["image"]

  @property
  def labels(self) -> np.ndarray:
    return self.arrays["label"]

  def __len__(self) -> int:
    return len(next(iter(self.arrays.values())))

  def read(self, indices: np.ndarray) -> dict[str, np.ndarray]:
    """{feature: its values at `indices`} ("image" and "label", or "tokens")."""
    return {key: values[indices] for key, values in self.arrays.items()}


class RecordSplit:
  """A split read from its array_record files batch by batch (ImageNet-sized data).

  Images of different sizes stay a list until augmentation crops them.
  """

  def __init__(self, source: Any):
    self._source = source

  def __len__(self) -> int:
    return len(self._source)

  def read(self, indices: np.ndarray) -> dict[str, Any]:
    return _gathered(self._source.__getitems__([int(i) for i in indices]), stack=False)
