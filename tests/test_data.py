"""Offline builders, clear errors for missing data, and the per-worker pipeline."""

import json
import os
import shutil
import subprocess
import sys

import numpy as np
import pytest

from configs import default
from odsgd_jax.data import DATASETS, DataError, DatasetSpec, TrainBatches, eval_batches, open_splits
from odsgd_jax.data._builders import mnist1d_raw_signals
from odsgd_jax.train import read_metrics, train_and_evaluate
from tests.catalog_standins import prepare_standin

REPO = os.path.dirname(os.path.dirname(os.path.abspath(__file__)))


class IndexSplit:
  """A split whose image is the example's own index: batches show what was read."""

  def __init__(self, size):
    self.size = size

  def __len__(self):
    return self.size

  def read(self, indices):
    return {"image": np.asarray(indices, np.float32)[:, None],
            "label": np.asarray(indices, np.int32) % 10}


INDEX_SPEC = DatasetSpec(num_classes=10, input_shape=(1,))


def _indices(batch):
  return batch["image"][..., 0].astype(np.int64)  # (workers, batch)


@pytest.mark.parametrize("name,train_size,test_size,shape",
                         [("mnist1d", 4000, 1000, (40,)), ("digits", 1437, 360, (8, 8, 1))])
def test_offline_datasets_build_with_published_splits(data_dir, name, train_size, test_size,
                                                      shape):
  train, test, validation = open_splits(name, data_dir)
  assert (len(train), len(test), validation) == (train_size, test_size, None)
  batch = train.read(np.arange(5))
  assert batch["image"].shape == (5, *shape) and batch["label"].shape == (5,)
  assert set(np.unique(test.read(np.arange(test_size))["label"])) == set(range(10))


def test_mnist1d_heldout_keeps_the_training_set_and_adds_validation_and_test(data_dir):
  standard = open_splits("mnist1d", data_dir)
  heldout = open_splits("mnist1d_heldout", data_dir)
  assert [len(split) for split in heldout] == [4000, 10_000, 2_000]  # train, test, validation
  np.testing.assert_array_equal(heldout.train.images, standard.train.images)
  np.testing.assert_array_equal(heldout.train.labels, standard.train.labels)
  seen = {signal.tobytes() for signal in standard.train.images}
  for split in (heldout.test, heldout.validation):
    assert not any(signal.tobytes() in seen for signal in split.images)  # fresh signals
    assert np.bincount(split.labels, minlength=10).min() >= len(split) // 10 - 40
  # standardized like the standard set: the fresh signals follow its distribution
  assert abs(heldout.test.images.mean()) < 0.02 and abs(heldout.test.images.std() - 1) < 0.02
  assert not set(map(bytes, heldout.test.images)) & set(map(bytes, heldout.validation.images))


def test_mnist1d_signals_are_the_packages_before_standardizing():
  from mnist1d.data import get_dataset_args, make_dataset
  args = get_dataset_args()
  args.num_samples = 200
  made = make_dataset(args)
  signals, labels = mnist1d_raw_signals(200, seed=42)
  standardized = (signals - signals.mean()) / signals.std()
  np.testing.assert_array_equal(standardized, np.concatenate([made["x"], made["x_test"]]))
  np.testing.assert_array_equal(labels, np.concatenate([made["y"], made["y_test"]]))


def test_a_run_with_a_validation_split_times_targets_on_it_and_ends_on_test(small_config,
                                                                          tmp_path):
  small_config.data.name = "mnist1d_heldout"
  small_config.train.target_accuracy = 0.2
  workdir = str(tmp_path / "run")
  summary = train_and_evaluate(small_config, workdir)
  evaluations = [row for row in read_metrics(workdir) if "sim_time" in row and "loss" not in row]
  assert [sorted(k for k in row if k.endswith("accuracy")) for row in evaluations] == [
      ["validation_accuracy"], ["test_accuracy", "validation_accuracy"]]  # steps 10, 20
  first = next(row for row in evaluations if row["validation_accuracy"] >= 0.2)
  assert summary["sim_time_to_target_s"] == first["sim_time"]
  assert summary["test_accuracy"] == evaluations[-1]["test_accuracy"]
  assert summary["validation_accuracy"] == evaluations[-1]["validation_accuracy"]


def test_missing_catalog_dataset_says_how_to_prepare(tmp_path):
  with pytest.raises(DataError) as error:
    open_splits("mnist", str(tmp_path))
  message = str(error.value)
  assert "'mnist' is not prepared in" in message and str(tmp_path) in message
  assert f"tfds build mnist --file_format=array_record --data_dir={tmp_path}" in message


def test_dataset_in_tfrecord_format_is_refused_with_instructions(data_dir, tmp_path):
  open_splits("digits", data_dir)
  fake = tmp_path / "cifar10" / "3.0.2"
  shutil.copytree(os.path.join(data_dir, "digits", "1.0.0"), fake)
  info_path = fake / "dataset_info.json"
  info = json.loads(info_path.read_text())
  info["fileFormat"] = "tfrecord"
  info_path.write_text(json.dumps(info))
  with pytest.raises(DataError, match="stored as tfrecord.*needs array_record"):
    open_splits("cifar10", str(tmp_path))


def test_missing_dataset_stops_the_run_with_one_message(tmp_path):
  result = subprocess.run(
      [sys.executable, "-m", "experiments.train", "--config", "configs/mnist_lenet.py",
       "--workdir", str(tmp_path / "run"), f"--config.data.data_dir={tmp_path / 'empty'}"],
      cwd=REPO, capture_output=True, text=True, timeout=120,
  )
  assert result.returncode == 1
  assert "error: data set 'mnist' is not prepared" in result.stderr
  assert "Traceback" not in result.stderr
  assert not (tmp_path / "run" / "checkpoints").exists()


def test_library_call_raises_before_compiling(tmp_path):
  config = default.get_config()
  config.data.name = "cifar10"
  config.model.name = "resnet20"
  config.data.data_dir = str(tmp_path)
  with pytest.raises(DataError, match="cifar10"):
    train_and_evaluate(config, str(tmp_path / "run"))


def test_each_worker_reads_its_own_shard_once_per_epoch():
  num_workers, batch, size = 4, 5, 103  # 103 // 4 = 25 per shard: 5 steps an epoch
  batches = TrainBatches(IndexSplit(size), INDEX_SPEC, workers=range(num_workers),
                         num_workers=num_workers, batch_size=batch, seed=0)
  for epoch in range(2):
    seen = np.concatenate([_indices(next(batches)) for _ in range(5)], axis=1)
    for worker in range(num_workers):
      expected_shard = np.arange(worker, 100, num_workers)
      np.testing.assert_array_equal(np.sort(seen[worker]), expected_shard)
    if epoch == 0:
      first_epoch = seen
  assert not np.array_equal(first_epoch, seen), "each epoch must be reshuffled"
  assert not np.array_equal(np.argsort(seen[0]), np.argsort(seen[1])), "own shuffle per worker"


def test_batches_are_a_function_of_seed_and_step():
  make = lambda seed: TrainBatches(IndexSplit(200), INDEX_SPEC, workers=range(4),
                                   num_workers=4, batch_size=8, seed=seed)
  first, second = make(0), make(0)
  run_a = [_indices(next(first)) for _ in range(12)]
  run_b = [_indices(next(second)) for _ in range(12)]
  np.testing.assert_array_equal(run_a, run_b)
  assert not np.array_equal(run_a[0], _indices(next(make(1))))
  resumed = make(0)
  resumed.seek(7)
  np.testing.assert_array_equal(_indices(next(resumed)), run_a[7])
  assert resumed.position == 8


def test_a_process_feeding_some_workers_gets_exactly_their_batches():
  everyone = TrainBatches(IndexSplit(200), INDEX_SPEC, workers=range(4), num_workers=4,
                          batch_size=8, seed=3)
  second_half = TrainBatches(IndexSplit(200), INDEX_SPEC, workers=[2, 3], num_workers=4,
                             batch_size=8, seed=3)
  for _ in range(3):
    np.testing.assert_array_equal(_indices(next(everyone))[2:], _indices(next(second_half)))


def test_too_small_shard_is_reported():
  with pytest.raises(ValueError, match="fewer than its batch of 64"):
    TrainBatches(IndexSplit(100), INDEX_SPEC, workers=range(4), num_workers=4, batch_size=64,
                 seed=0)


def test_eval_batches_cover_the_split_once_with_a_mask():
  batches = list(eval_batches(IndexSplit(23), INDEX_SPEC, batch_size=10))
  assert [b["image"].shape[0] for b in batches] == [10, 10, 10]
  real = np.concatenate([b["image"][b["mask"], 0] for b in batches])
  np.testing.assert_array_equal(real, np.arange(23))


def test_cifar_augmentation_crops_and_flips_deterministically():
  spec = DATASETS["cifar10"]
  rng_images = np.random.default_rng(0).integers(0, 255, size=(64, 32, 32, 3), dtype=np.uint8)

  class ImageSplit:
    def __len__(self):
      return 64

    def read(self, indices):
      return {"image": rng_images[indices], "label": np.zeros(len(indices), np.int32)}

  make = lambda: TrainBatches(ImageSplit(), spec, workers=range(2), num_workers=2,
                              batch_size=8, seed=0)
  a, b = next(make()), next(make())
  assert a["image"].shape == (2, 8, 32, 32, 3) and a["image"].dtype == np.float32
  np.testing.assert_array_equal(a["image"], b["image"])
  plain = (rng_images.astype(np.float32) / 255 - np.asarray(spec.mean)) / np.asarray(spec.std)
  matches = [any(np.allclose(img, ref, atol=1e-5) for ref in plain) for img in a["image"][0]]
  assert not all(matches), "random crops/flips should change most images"


@pytest.mark.parametrize("name,shape", [("mnist", (28, 28, 1)), ("cifar10", (32, 32, 3)),
                                        ("imagenet2012", (224, 224, 3))])
def test_prepared_catalog_datasets_load_through_the_same_code(data_dir, name, shape):
  prepare_standin(name, data_dir)
  train, test, _ = open_splits(name, data_dir)
  assert (len(train), len(test)) == (64, 32)
  spec = DATASETS[name]
  batch = next(TrainBatches(train, spec, workers=range(2), num_workers=2, batch_size=4, seed=0))
  assert batch["image"].shape == (2, 4, *shape) and batch["image"].dtype == np.float32
  assert batch["label"].shape == (2, 4)
  evaluation = next(eval_batches(test, spec, batch_size=8))
  assert evaluation["image"].shape == (8, *shape)
