"""grain pipelines: one shard, one seeded shuffle and one batch per worker, over epochs.

Worker i of N reads examples i, i+N, i+2N, ... of the training split (the split is
first cut to a multiple of N so that every shard has the same size), shuffles its
shard anew every epoch with its own seed, batches, reads and augments. The batches of
this process's workers are stacked into one array of shape (workers, batch, ...)
per step. A batch is a pure function of (seed, worker, step), so the iterator's
position is one integer, saved with every checkpoint.
"""

import collections
from typing import Any, Iterator, Sequence

import numpy as np
from PIL import Image

from odsgd_jax.data._datasets import DatasetSpec
from odsgd_jax.data._grain import grain


def _normalize(spec: DatasetSpec, image: np.ndarray) -> np.ndarray:
  image = image.astype(np.float32) * spec.scale
  return (image - np.asarray(spec.mean, np.float32)) / np.asarray(spec.std, np.float32)


def _crop_flip(image: np.ndarray, rng: np.random.Generator, padding: int = 4) -> np.ndarray:
  height, width = image.shape[:2]
  padded = np.pad(image, ((padding, padding), (padding, padding), (0, 0)), mode="reflect")
  top, left = rng.integers(0, 2 * padding + 1, size=2)
  image = padded[top:top + height, left:left + width]
  return image[:, ::-1] if rng.random() < 0.5 else image


def _imagenet_train(image: np.ndarray, rng: np.random.Generator, size: int = 224) -> np.ndarray:
  """Inception-style random resized crop (area 8%-100%, aspect 3/4-4/3) and flip."""
  height, width = image.shape[:2]
  for _ in range(10):
    area = height * width * rng.uniform(0.08, 1.0)
    aspect = np.exp(rng.uniform(np.log(3 / 4), np.log(4 / 3)))
    crop_w, crop_h = int(round(np.sqrt(area * aspect))), int(round(np.sqrt(area / aspect)))
    if 0 < crop_w <= width and 0 < crop_h <= height:
      top, left = rng.integers(0, height - crop_h + 1), rng.integers(0, width - crop_w + 1)
      break
  else:  # fall back to the central square
    crop_h = crop_w = min(height, width)
    top, left = (height - crop_h) // 2, (width - crop_w) // 2
  crop = Image.fromarray(image[top:top + crop_h, left:left + crop_w])
  image = np.asarray(crop.resize((size, size), Image.BICUBIC))
  return image[:, ::-1] if rng.random() < 0.5 else image


def _imagenet_eval(image: np.ndarray, size: int = 224, resize: int = 256) -> np.ndarray:
  height, width = image.shape[:2]
  ratio = resize / min(height, width)
  resized = Image.fromarray(image).resize(
      (max(resize, round(width * ratio)), max(resize, round(height * ratio))), Image.BICUBIC
  )
  image = np.asarray(resized)
  top, left = (image.shape[0] - size) // 2, (image.shape[1] - size) // 2
  return image[top:top + size, left:left + size]


def _augment(spec: DatasetSpec, images: np.ndarray, rng: np.random.Generator) -> np.ndarray:
  if spec.augment == "crop_flip":
    return np.stack([_crop_flip(image, rng) for image in images])
  if spec.augment == "imagenet":
    return np.stack([_imagenet_train(image, rng) for image in images])
  return images


def train_batch(spec: DatasetSpec, split: Any, indices: np.ndarray, rng: np.random.Generator):
  """One worker's training batch: read; images augmented (per the data set) and
  normalized, other features (labels, tokens) as they are."""
  batch = split.read(indices)
  if "image" in batch:
    batch["image"] = _normalize(spec, _augment(spec, batch["image"], rng))
  return batch


def eval_batch(spec: DatasetSpec, split: Any, indices: np.ndarray):
  """An evaluation batch: images deterministically resized only, then normalized."""
  batch = split.read(indices)
  if "image" in batch:
    images = batch["image"]
    if spec.augment == "imagenet":
      images = np.stack([_imagenet_eval(image) for image in images])
    batch["image"] = _normalize(spec, np.asarray(images))
  return batch


def worker_seed(seed: int, worker: int) -> int:
  """A per-worker seed that does not collide across (seed, worker) pairs."""
  return int(np.random.SeedSequence([seed, worker]).generate_state(1)[0])


class _ShardOrder:
  """Indices in the split of worker `worker`'s batches: a pure function of the step.

  Each epoch the worker visits its shard in a fresh permutation drawn from
  (seed, worker, epoch); batches run across epoch boundaries. (A NumPy
  permutation per epoch: grain's index shuffle costs ~100 us per index.)
  """

  def __init__(self, *, worker: int, num_workers: int, shard_size: int, batch_size: int,
               seed: int):
    self._worker, self._num_workers = worker, num_workers
    self._shard_size, self._batch_size, self._seed = shard_size, batch_size, seed
    self._latest = (-1, np.empty(0, np.int64))  # (epoch, permutation): steps run in order

  def _permutation(self, epoch: int) -> np.ndarray:
    cached_epoch, permutation = self._latest
    if cached_epoch != epoch:
      permutation = np.random.default_rng([self._seed, self._worker, epoch]).permutation(
          self._shard_size)
      self._latest = (epoch, permutation)  # one assignment: safe across reader threads
    return permutation

  def __call__(self, step: int) -> np.ndarray:
    epoch, offset = divmod(step * self._batch_size, self._shard_size)
    if offset + self._batch_size <= self._shard_size:  # inside one epoch: a slice
      in_shard = self._permutation(epoch)[offset:offset + self._batch_size]
      return self._worker + in_shard * self._num_workers
    positions = np.arange(step * self._batch_size, (step + 1) * self._batch_size)
    epochs, offsets = np.divmod(positions, self._shard_size)
    in_shard = np.empty_like(positions)
    for epoch in np.unique(epochs):
      here = epochs == epoch
      in_shard[here] = self._permutation(int(epoch))[offsets[here]]
    return self._worker + in_shard * self._num_workers


class WorkerBatches:
  """Worker `worker`'s endless sequence of batches: batch t is `self[t]`.

  Worker i reads examples i, i+N, i+2N, ... of the split, cut to a multiple of N.
  Augmentation draws from a generator seeded by (seed, worker, t). Plain Python
  (no grain dataset per worker): grain's per-element machinery cost more than the
  reading itself for small models; grain prefetches chunks of steps instead.
  """

  def __init__(self, split: Any, spec: DatasetSpec, *, worker: int, num_workers: int,
               batch_size: int, seed: int):
    shard_size = len(split) // num_workers
    if shard_size < batch_size:
      raise ValueError(
          f"each of {num_workers} workers holds {shard_size} training examples, "
          f"fewer than its batch of {batch_size}; lower data.batch_size or cluster.num_workers"
      )
    self._split, self._spec = split, spec
    self._order = _ShardOrder(worker=worker, num_workers=num_workers, shard_size=shard_size,
                              batch_size=batch_size, seed=seed)
    self._seed = worker_seed(seed, worker)
    self._augmented = spec.augment != "none"

  def __len__(self) -> int:
    return 2**62  # endless: the run's length decides

  def __getitem__(self, step: int) -> dict[str, np.ndarray]:
    rng = np.random.default_rng([self._seed, step]) if self._augmented else None
    return train_batch(self._spec, self._split, self._order(step), rng)


class TrainBatches:
  """This process's workers' batches, tick by tick, stacked, with prefetch.

  `take(active)` returns {"image": (W, B, ...), "label": (W, B)}, W = len(workers),
  each worker's batch at its own position; only workers marked `active` move on,
  so a worker that did not finish a step on a tick gets the same batch again
  (its batch is not consumed). While all workers are in step the batches come
  from grain's prefetching iterator; once they drift apart, by random access.
  `positions` (per worker) is what a checkpoint saves; `seek` restores it.
  """

  def __init__(
      self,
      split: Any,
      spec: DatasetSpec,
      *,
      workers: Sequence[int],
      num_workers: int,
      batch_size: int,
      seed: int,
      num_threads: int = 4,
      prefetch: int = 8,
  ):
    self._per_worker = [
        WorkerBatches(split, spec, worker=w, num_workers=num_workers,
                      batch_size=batch_size, seed=seed)
        for w in workers
    ]
    self._num_steps = len(self._per_worker[0])
    self._read_options = grain.ReadOptions(num_threads=num_threads, prefetch_buffer_size=prefetch)
    self._positions = np.zeros(len(self._per_worker), np.int64)
    self._iterator, self._iterator_at = None, -1
    self._ready = collections.deque()  # batches of the current chunk not yet taken

  @property
  def positions(self) -> list[int]:
    """Index of each worker's next batch."""
    return self._positions.tolist()

  @property
  def position(self) -> int:
    """The common position of workers that are in step."""
    if np.any(self._positions != self._positions[0]):
      raise ValueError(f"workers are at different positions {self.positions}")
    return int(self._positions[0])

  def seek(self, positions: int | Sequence[int]) -> None:
    self._positions = np.broadcast_to(np.asarray(positions, np.int64),
                                      self._positions.shape).copy()
    self._iterator = None

  def take(self, active: Sequence[bool] | None = None) -> dict[str, np.ndarray]:
    """The next tick's batches; workers not `active` keep theirs for the next tick."""
    if np.all(self._positions == self._positions[0]):
      start = int(self._positions[0])
      if self._iterator is None or self._iterator_at != start:
        # Chunks of consecutive steps: grain's per-element cost (~0.3 ms) is paid
        # once per chunk, not once per step of a small model.
        chunks = grain.MapDataset.range(start, self._num_steps, _STEPS_PER_CHUNK).map(
            self._chunk)
        self._iterator = iter(chunks.to_iter_dataset(self._read_options))
        self._ready.clear()
        self._iterator_at = start
      if not self._ready:
        self._ready.extend(next(self._iterator))
      batch = self._ready.popleft()
      self._iterator_at += 1
    else:
      batch = _stack([ds[int(p)] for ds, p in zip(self._per_worker, self._positions,
                                                   strict=True)])
    moves = np.ones_like(self._positions) if active is None else np.asarray(active, np.int64)
    self._positions = self._positions + moves
    return batch

  def _chunk(self, first: int) -> list[dict[str, np.ndarray]]:
    last = min(first + _STEPS_PER_CHUNK, self._num_steps)
    return [_stack([ds[step] for ds in self._per_worker]) for step in range(first, last)]

  def __iter__(self) -> Iterator[dict[str, np.ndarray]]:
    return self

  def __next__(self) -> dict[str, np.ndarray]:
    return self.take()


_STEPS_PER_CHUNK = 8


def _stack(batches: list[dict[str, np.ndarray]]) -> dict[str, np.ndarray]:
  return {key: np.stack([b[key] for b in batches]) for key in batches[0]}


def eval_batches(split: Any, spec: DatasetSpec, batch_size: int) -> Iterator[dict[str, np.ndarray]]:
  """The whole split in order, in batches of exactly `batch_size`.

  The last batch is padded; its "mask" marks the real examples.
  """
  for start in range(0, len(split), batch_size):
    indices = np.arange(start, min(start + batch_size, len(split)))
    batch = eval_batch(spec, split, indices)
    pad = batch_size - len(indices)
    yield {**{key: np.pad(value, [(0, pad)] + [(0, 0)] * (value.ndim - 1))
              for key, value in batch.items()},
           "mask": np.arange(batch_size) < len(indices)}
