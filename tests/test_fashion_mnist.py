"""Fashion-MNIST's builder: small IDX files written here (with their own digests) stand in
for the authors' files; one test reads the real ones where Debian's package installed
them (CI installs it)."""

import gzip
import os
import subprocess
import sys

import numpy as np
import pytest

from odsgd_jax.data import DataError, open_splits
from odsgd_jax.data import _fashion_mnist
from odsgd_jax.data._fashion_mnist import (DEBIAN_FOLDER, FILES, FashionMnist, SourceFilesError,
                                           find_files, manual_folder, read_idx, sha256)

REPO = os.path.dirname(os.path.dirname(os.path.abspath(__file__)))
PER_CLASS_TRAIN, PER_CLASS_TEST, VALIDATION = 20, 5, 40


def _write_idx(path, values: np.ndarray) -> None:
  header = bytes([0, 0, 8, values.ndim]) + np.asarray(values.shape, ">i4").tobytes()
  with gzip.open(path, "wb") as f:
    f.write(header + values.astype(np.uint8).tobytes())


@pytest.fixture
def source(tmp_path):
  """A folder with four small IDX files: image i of a split is filled with i % 256 in its
  first pixel row, so an image can be traced back to its index; labels cycle 0..9."""
  folder = tmp_path / "source"
  folder.mkdir()
  arrays = {}
  for split, per_class in (("train", PER_CLASS_TRAIN), ("test", PER_CLASS_TEST)):
    count = 10 * per_class
    images = np.zeros((count, 28, 28), np.uint8)
    images[:, 0, :] = (np.arange(count) % 256)[:, None]
    arrays[f"{split}_images"], arrays[f"{split}_labels"] = images, np.arange(count) % 10
  for role, (name, _) in FILES.items():
    _write_idx(folder / name, arrays[role])
  digests = {role: sha256(str(folder / name)) for role, (name, _) in FILES.items()}
  return folder, digests, arrays


def test_idx_files_read_back_as_written(source):
  folder, _, arrays = source
  for role, (name, _) in FILES.items():
    np.testing.assert_array_equal(read_idx(str(folder / name)), arrays[role])


def test_a_file_that_is_not_idx_is_refused(tmp_path):
  path = tmp_path / "x.gz"
  with gzip.open(path, "wb") as f:
    f.write(b"\x1f\x8bnot idx")
  with pytest.raises(SourceFilesError, match="not an IDX file"):
    read_idx(str(path))


def test_builds_train_validation_and_untouched_test_from_a_named_folder(source, tmp_path):
  folder, digests, arrays = source
  builder = FashionMnist(data_dir=str(tmp_path / "tfds"), file_format="array_record",
                         source=str(folder), digests=digests, validation_size=VALIDATION)
  builder.download_and_prepare()
  data = builder.as_data_source()
  sizes = {split: len(data[split]) for split in ("train", "validation", "test")}
  assert sizes == {"train": 10 * PER_CLASS_TRAIN - VALIDATION, "validation": VALIDATION,
                   "test": 10 * PER_CLASS_TEST}
  read = lambda split: data[split].__getitems__(list(range(len(data[split]))))
  validation, train, test = read("validation"), read("train"), read("test")
  # stratified: 4 of each class's 20; the two splits are disjoint and cover training
  assert np.bincount([e["label"] for e in validation], minlength=10).tolist() == [4] * 10
  held = {int(e["image"][0, 0, 0]) for e in validation}
  kept = {int(e["image"][0, 0, 0]) for e in train}
  assert not held & kept and held | kept == set(range(10 * PER_CLASS_TRAIN))
  # each image keeps its label; the test split is the file's, whole (TFDS stores each
  # split in its own fixed shuffled order)
  assert all(e["label"] == int(e["image"][0, 0, 0]) % 10 for e in validation + train + test)
  assert sorted(int(e["image"][0, 0, 0]) for e in test) == list(range(10 * PER_CLASS_TEST))
  assert test[0]["image"].shape == (28, 28, 1)


def test_a_file_with_another_digest_is_named_and_nothing_is_written(source, tmp_path):
  folder, digests, _ = source
  name = FILES["train_labels"][0]
  wrong = dict(digests, train_labels="0" * 64)
  builder = FashionMnist(data_dir=str(tmp_path / "tfds"), file_format="array_record",
                         source=str(folder), digests=wrong)
  with pytest.raises(SourceFilesError) as error:
    builder.source_files()
  message = str(error.value)
  assert f"{folder / name} is not Fashion-MNIST's original file" in message
  assert digests["train_labels"] in message and "0" * 64 in message
  assert "\n" not in message
  with pytest.raises(SourceFilesError):
    builder.download_and_prepare()
  assert not any(p.is_file() for p in (tmp_path / "tfds").rglob("*.array_record*"))


def test_the_first_folder_holding_all_four_files_is_used(source, tmp_path):
  folder, digests, _ = source
  partial = tmp_path / "partial"
  partial.mkdir()
  (partial / FILES["train_images"][0]).write_bytes(b"")  # one file of four: skipped
  paths = find_files([str(partial), str(folder)], digests)
  assert paths["test_labels"] == str(folder / FILES["test_labels"][0])
  assert manual_folder("/d") == "/d/downloads/manual/fashion-mnist"


def test_missing_files_stop_with_one_line_naming_the_debian_package(tmp_path, monkeypatch):
  monkeypatch.setattr(_fashion_mnist, "DEBIAN_FOLDER", str(tmp_path / "no-package"))
  with pytest.raises(DataError) as error:
    open_splits("fashion_mnist", str(tmp_path / "tfds"))
  message = str(error.value)
  assert "\n" not in message
  assert "apt-get install dataset-fashion-mnist" in message
  assert manual_folder(str(tmp_path / "tfds")) in message  # a folder of one's own
  assert "python -m odsgd_jax.data fashion_mnist --download" in message
  assert not (tmp_path / "tfds" / FashionMnist.name).exists()


def test_the_prepare_command_refuses_files_that_are_not_the_authors_in_one_line(source,
                                                                                tmp_path):
  folder, _, _ = source  # the small files: not the authors' digests
  result = subprocess.run(
      [sys.executable, "-m", "odsgd_jax.data", "fashion_mnist", "--source", str(folder),
       "--data_dir", str(tmp_path / "tfds")],
      cwd=REPO, capture_output=True, text=True, timeout=120)
  assert result.returncode == 1
  assert result.stderr.startswith("error: ") and "is not Fashion-MNIST's original" in result.stderr
  assert "Traceback" not in result.stderr


@pytest.mark.skipif(not os.path.isdir(DEBIAN_FOLDER),
                    reason="needs `apt-get install dataset-fashion-mnist` (CI installs it)")
def test_the_real_files_have_the_authors_digests_and_split_54000_6000_10000(data_dir):
  assert set(find_files([DEBIAN_FOLDER])) == set(FILES)  # every digest checked
  splits = open_splits("fashion_mnist", data_dir)
  assert (len(splits.train), len(splits.validation), len(splits.test)) == (54_000, 6_000, 10_000)
  assert np.bincount(splits.validation.labels, minlength=10).tolist() == [600] * 10
  assert np.bincount(splits.train.labels, minlength=10).tolist() == [5400] * 10
  assert np.bincount(splits.test.labels, minlength=10).tolist() == [1000] * 10
  assert splits.train.images.shape[1:] == (28, 28, 1)
