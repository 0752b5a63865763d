"""Fashion-MNIST (Xiao, Rasul & Vollgraf 2017) from its four original IDX files.

The files come from Debian's package `dataset-fashion-mnist` (offline), from a folder the
user names, or from the authors' site by TFDS's download manager. Their sha256 digests
are checked before anything is written. 6,000 of the 60,000 training images (600 per
class, chosen by a stratified split with seed 0) are held out for validation; the
10,000 test images are the authors' test set, untouched.
"""

import gzip
import hashlib
import os
from typing import Mapping, Sequence

import numpy as np
import tensorflow_datasets as tfds

FILES = {  # role: (file name, sha256 of the authors' files, as Debian ships them)
    "train_images": ("train-images-idx3-ubyte.gz",
                     "b0564c3eedabfbf835052cff8503ea422014ce006caf5b757f851416ee8300c7"),
    "train_labels": ("train-labels-idx1-ubyte.gz",
                     "0ae29f65d86684f32d1b9c85147786c547b9c6aebcaf235f0400a0cce308b056"),
    "test_images": ("t10k-images-idx3-ubyte.gz",
                    "cc1d090a38ace84dfa1aa66e3ada7c336ef481a96936906477e6dd344da56eaa"),
    "test_labels": ("t10k-labels-idx1-ubyte.gz",
                    "8d3605d196f4be44669e46906da9733c8131fef761fdbfec72c424d5222f1a05"),
}
DEBIAN_FOLDER = "/usr/share/datasets/fashion-mnist"  # `apt-get install dataset-fashion-mnist`
DOWNLOAD_URL = "http://fashion-mnist.s3-website.eu-central-1.amazonaws.com/"
DOWNLOAD = "download"  # as a source: TFDS's download manager fetches the files
CLASSES = ("T-shirt/top", "Trouser", "Pullover", "Dress", "Coat", "Sandal", "Shirt",
           "Sneaker", "Bag", "Ankle boot")


class SourceFilesError(ValueError):
  """The original files are missing or are not the authors' (a digest differs)."""


def manual_folder(data_dir: str) -> str:
  """Where the user may put the four files: TFDS's folder for manual downloads."""
  return os.path.join(data_dir, "downloads", "manual", "fashion-mnist")


def sha256(path: str) -> str:
  digest = hashlib.sha256()
  with open(path, "rb") as f:
    for block in iter(lambda: f.read(1 << 20), b""):
      digest.update(block)
  return digest.hexdigest()


def find_files(folders: Sequence[str], digests: Mapping[str, str] | None = None
               ) -> dict[str, str]:
  """{role: path} in the first of `folders` that holds all four files, each checked
  against its sha256 (`digests`: {role: hex}, default the authors' files').

  Raises:
    SourceFilesError: no folder holds all four (the message says how to get them), or a
      file's digest differs (it names the file and both digests).
  """
  for folder in folders:
    paths = {role: os.path.join(folder, name) for role, (name, _) in FILES.items()}
    if all(os.path.isfile(path) for path in paths.values()):
      return checked(paths, digests)
  names = ", ".join(name for name, _ in FILES.values())
  raise SourceFilesError(
      f"Fashion-MNIST's files ({names}) are in none of {', '.join(folders)}: install them "
      f"with `apt-get install dataset-fashion-mnist`, or put them in {folders[0]}, or "
      f"download them with `python -m odsgd_jax.data fashion_mnist --download` (needs "
      f"internet)")


def checked(paths: Mapping[str, os.PathLike | str], digests: Mapping[str, str] | None = None
            ) -> dict[str, str]:
  """`paths` ({role: path}) as strings, once each file's sha256 is `digests`' (default the
  authors' files').

  Raises:
    SourceFilesError: naming the first file whose digest differs, and both digests.
  """
  digests = digests or {role: digest for role, (_, digest) in FILES.items()}
  for role, path in paths.items():
    found = sha256(os.fspath(path))
    if found != digests[role]:
      raise SourceFilesError(
          f"{path} is not Fashion-MNIST's original file: its sha256 is {found}, expected "
          f"{digests[role]}; replace it (apt-get install --reinstall dataset-fashion-mnist, "
          f"or the authors' file from {DOWNLOAD_URL})")
  return {role: os.fspath(path) for role, path in paths.items()}


def read_idx(path: str) -> np.ndarray:
  """An IDX file (gzip): big-endian magic (0, 0, type 0x08 = uint8, rank), then the
  dimensions as big-endian int32, then the values."""
  with gzip.open(path, "rb") as f:
    data = f.read()
  if len(data) < 4 or data[:3] != b"\x00\x00\x08":
    raise SourceFilesError(f"{path} is not an IDX file of unsigned bytes")
  rank = data[3]
  shape = tuple(int(d) for d in np.frombuffer(data, ">i4", rank, offset=4))
  values = np.frombuffer(data, np.uint8, offset=4 + 4 * rank)
  if values.size != int(np.prod(shape)):
    raise SourceFilesError(f"{path} holds {values.size} values, its header says {shape}")
  return values.reshape(shape)


def validation_indices(labels: np.ndarray, size: int, seed: int) -> np.ndarray:
  """`size` indices of the training images, stratified by label (sorted)."""
  from sklearn.model_selection import train_test_split  # pylint: disable=g-import-not-at-top

  _, held = train_test_split(np.arange(len(labels)), test_size=size, stratify=labels,
                             random_state=seed)
  return np.sort(held)


class FashionMnist(tfds.core.GeneratorBasedBuilder):
  """Fashion-MNIST: 28x28 grey images of ten kinds of clothing; 54,000 training, 6,000
  validation (stratified, seed 0) and the 10,000 original test images.

  Named `odsgd_fashion_mnist` so that its prepared folder is not mistaken for TFDS's
  catalog `fashion_mnist` (which has no validation split).

  Args (besides TFDS's):
    source: a folder holding the four original files, DOWNLOAD, or None: the first of
      `manual_folder(data_dir)` and DEBIAN_FOLDER that holds them.
    digests: {role: sha256} the files must have (the authors' by default; tests pass
      those of small files they write).
    validation_size: images held out of training for validation.
  """

  name = "odsgd_fashion_mnist"
  VERSION = tfds.core.Version("1.0.0")
  VALIDATION, SPLIT_SEED = 6_000, 0

  def __init__(self, *, source: str | None = None, digests: Mapping[str, str] | None = None,
               validation_size: int = VALIDATION, **kwargs):
    super().__init__(**kwargs)
    self._source, self._digests, self._validation_size = source, digests, validation_size

  def _info(self) -> tfds.core.DatasetInfo:
    return tfds.core.DatasetInfo(
        builder=self,
        description=(f"Fashion-MNIST's original files; {self.VALIDATION} training images held "
                     f"out for validation by a stratified split with seed {self.SPLIT_SEED}."),
        features=tfds.features.FeaturesDict({
            "image": tfds.features.Tensor(shape=(28, 28, 1), dtype=np.uint8),
            "label": tfds.features.ClassLabel(names=CLASSES),
        }),
        supervised_keys=("image", "label"),
        homepage="https://github.com/zalandoresearch/fashion-mnist",
    )

  def source_files(self, dl_manager: tfds.download.DownloadManager | None = None
                   ) -> dict[str, str]:
    """{role: path} of the four checked files (downloading them where asked to)."""
    if self._source == DOWNLOAD:
      if dl_manager is None:
        return {}  # checked once downloaded
      paths = dl_manager.download({role: DOWNLOAD_URL + name
                                   for role, (name, _) in FILES.items()})
      return checked(paths, self._digests)
    root = os.path.dirname(os.path.dirname(self.data_dir))  # data_dir is <root>/<name>/<version>
    folders = [self._source] if self._source else [manual_folder(root), DEBIAN_FOLDER]
    return find_files(folders, self._digests)

  def _split_generators(self, dl_manager):
    paths = self.source_files(dl_manager)
    train_images, train_labels = read_idx(paths["train_images"]), read_idx(paths["train_labels"])
    test_images, test_labels = read_idx(paths["test_images"]), read_idx(paths["test_labels"])
    held = validation_indices(train_labels, self._validation_size, self.SPLIT_SEED)
    kept = np.setdiff1d(np.arange(len(train_labels)), held)
    return {
        "train": self._generate_examples(train_images[kept], train_labels[kept]),
        "validation": self._generate_examples(train_images[held], train_labels[held]),
        "test": self._generate_examples(test_images, test_labels),
    }

  def _generate_examples(self, images, labels):
    for index, (image, label) in enumerate(zip(images, labels, strict=True)):
      yield index, {"image": image[..., None], "label": int(label)}

