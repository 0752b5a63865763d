"""Random access to a prepared split, one batch of indices at a time."""

from typing import Any

import numpy as np


class InMemorySplit:
  """A whole split decoded once into arrays; `read` gathers a batch by index.

  Used for data sets that fit in memory, where reading record by record would
  cost more host time per step than the model itself.
  """

  def __init__(self, source: Any):
    examples = source.__getitems__(list(range(len(source))))
    self.images = np.stack([np.asarray(e["image"]) for e in examples])
    self.labels = np.asarray([e["label"] for e in examples], np.int32)

  def __len__(self) -> int:
    return len(self.labels)

  def read(self, indices: np.ndarray) -> tuple[np.ndarray, np.ndarray]:
    return self.images[indices], self.labels[indices]


class RecordSplit:
  """A split read from its array_record files batch by batch (ImageNet-sized data).

  Images of different sizes stay a list until augmentation crops them.
  """

  def __init__(self, source: Any):
    self._source = source

  def __len__(self) -> int:
    return len(self._source)

  def read(self, indices: np.ndarray) -> tuple[Any, np.ndarray]:
    examples = self._source.__getitems__([int(i) for i in indices])
    images = [np.asarray(e["image"]) for e in examples]
    labels = np.asarray([e["label"] for e in examples], np.int32)
    return images, labels
