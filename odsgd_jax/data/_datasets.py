"""Data sets by name: where their prepared array_record files are, and how to read them.

Offline data sets (`mnist1d`, `digits`, and `fashion_mnist` from its original files) are
TFDS builders in this package and are prepared on first use. Catalog data sets (`mnist`,
`cifar10`, `imagenet2012`) must be prepared by the user in array_record format; this
module never downloads at training time, and says how to prepare a data set that is
missing.
"""

import dataclasses
import logging
import os
from typing import Any, NamedTuple

import filelock
import tensorflow_datasets as tfds

from odsgd_jax.data._builders import Digits, Mnist1d, Mnist1dHeldout
from odsgd_jax.data._fashion_mnist import FashionMnist, SourceFilesError
from odsgd_jax.data._kjv import VOCABULARY_SIZE, KingJamesBible, TinyKingJamesBible
from odsgd_jax.data._splits import InMemorySplit, RecordSplit


class DataError(ValueError):
  """A data set is missing, unreadable or in the wrong format; the message says how to fix it."""


@dataclasses.dataclass(frozen=True)
class DatasetSpec:
  """How to find, decode and normalize one data set.

  Attributes:
    num_classes: number of labels.
    input_shape: shape of one preprocessed input.
    scale: raw values are multiplied by this first (e.g. 1/255 for uint8 images).
    mean, std: then normalized per channel as (x - mean) / std.
    augment: "none", "crop_flip" (CIFAR: pad 4, random 32x32 crop, flip) or
      "imagenet" (random resized crop to 224 + flip; eval: resize 256, center 224).
    builder: the package's TFDS builder class, or None for a TFDS catalog data set.
    test_split: the split evaluated as "test".
    validation_split: the split that targets and choices are made on (evaluated during
      the run; then the test split only at its end), or None: the test split throughout.
    in_memory: decode the splits into memory once (small data sets), instead of
      reading records batch by batch.
    task: the name of what a model learns from it (`odsgd_jax.tasks.TASKS`).
  """

  num_classes: int
  input_shape: tuple[int, ...]
  scale: float = 1.0
  mean: tuple[float, ...] = (0.0,)
  std: tuple[float, ...] = (1.0,)
  augment: str = "none"
  builder: Any = None
  test_split: str = "test"
  validation_split: str | None = None
  in_memory: bool = True
  task: str = "classification"


DATASETS: dict[str, DatasetSpec] = {
    # mnist1d signals are already standardized by their generator.
    "mnist1d": DatasetSpec(num_classes=10, input_shape=(40,), builder=Mnist1d),
    # the same training signals; 2,000 validation and 10,000 test signals (Mnist1dHeldout)
    "mnist1d_heldout": DatasetSpec(num_classes=10, input_shape=(40,), builder=Mnist1dHeldout,
                                   validation_split="validation"),
    "digits": DatasetSpec(
        num_classes=10, input_shape=(8, 8, 1), scale=1 / 16, mean=(0.3053,), std=(0.3760,),
        builder=Digits,
    ),
    # the authors' files (Debian's dataset-fashion-mnist); 6,000 training images held out
    # for validation (FashionMnist); mean and std of the 60,000 training images
    "fashion_mnist": DatasetSpec(
        num_classes=10, input_shape=(28, 28, 1), scale=1 / 255, mean=(0.2860,), std=(0.3530,),
        builder=FashionMnist, validation_split="validation",
    ),
    # the King James Bible (Debian's bible-kjv), characters as tokens, split by book
    # (odsgd_jax/data/_kjv.py); a model reads windows of 128 and predicts each next one
    "kjv": DatasetSpec(num_classes=VOCABULARY_SIZE, input_shape=(KingJamesBible.WINDOW,),
                       builder=KingJamesBible, validation_split="validation",
                       task="next_token"),
    # a generated text of the same form and vocabulary, in windows of 32: for tests
    "kjv_tiny": DatasetSpec(num_classes=VOCABULARY_SIZE,
                            input_shape=(TinyKingJamesBible.WINDOW,),
                            builder=TinyKingJamesBible, validation_split="validation",
                            task="next_token"),
    "mnist": DatasetSpec(
        num_classes=10, input_shape=(28, 28, 1), scale=1 / 255, mean=(0.1307,), std=(0.3081,)
    ),
    "cifar10": DatasetSpec(
        num_classes=10, input_shape=(32, 32, 3), scale=1 / 255,
        mean=(0.4914, 0.4822, 0.4465), std=(0.2470, 0.2435, 0.2616), augment="crop_flip",
    ),
    "imagenet2012": DatasetSpec(
        num_classes=1000, input_shape=(224, 224, 3), scale=1 / 255,
        mean=(0.485, 0.456, 0.406), std=(0.229, 0.224, 0.225), augment="imagenet",
        test_split="validation", in_memory=False,
    ),
}


def resolve_data_dir(data_dir: str | None) -> str:
  """The TFDS data folder: `data_dir`, else $TFDS_DATA_DIR, else ~/tensorflow_datasets."""
  if data_dir:
    return os.path.abspath(os.path.expanduser(data_dir))
  return os.path.expanduser(os.environ.get("TFDS_DATA_DIR", "~/tensorflow_datasets"))


def how_to_prepare(name: str, data_dir: str) -> str:
  """Instructions for preparing a catalog data set in array_record format."""
  steps = (
      f"On a machine with internet access run:\n"
      f"  pip install tensorflow tensorflow-datasets\n"
      f"  tfds build {name} --file_format=array_record --data_dir={data_dir}\n"
  )
  if name == "imagenet2012":
    steps = (
        f"ImageNet needs a manual download: put ILSVRC2012_img_train.tar and "
        f"ILSVRC2012_img_val.tar in {data_dir}/downloads/manual, then\n" + steps
    )
  return steps + "(or copy a prepared array_record copy of it into that folder)."


def _prepared_dirs(name: str, data_dir: str) -> list[str]:
  """Version folders under data_dir/name (optionally one config level deeper)."""
  root = os.path.join(data_dir, name)
  found = []
  for base, _, files in os.walk(root):
    depth = os.path.relpath(base, root).count(os.sep) + 1
    if "dataset_info.json" in files and depth <= 2:
      found.append(base)
  return sorted(found, key=lambda d: tfds.core.Version(os.path.basename(d))
                if tfds.core.Version.is_valid(os.path.basename(d)) else tfds.core.Version("0.0.0"))


def _open_catalog_dataset(name: str, data_dir: str) -> tfds.core.DatasetBuilder:
  prepared = _prepared_dirs(name, data_dir)
  if not prepared:
    raise DataError(
        f"data set {name!r} is not prepared in {data_dir} and is never downloaded during "
        f"training.\n{how_to_prepare(name, data_dir)}\n"
        f"If it is prepared elsewhere, set --config.data.data_dir to that folder."
    )
  builder = tfds.builder_from_directory(prepared[-1])
  if builder.info.file_format != tfds.core.FileFormat.ARRAY_RECORD:
    raise DataError(
        f"data set {name!r} in {prepared[-1]} is stored as {builder.info.file_format.value}, "
        f"but reading without TensorFlow needs array_record.\n{how_to_prepare(name, data_dir)}"
    )
  return builder


def _without_unprepared_folder_warnings(record: logging.LogRecord) -> bool:
  """TFDS warns of a version folder without dataset_info.json: while this process (or
  another, waiting on the lock) prepares the data set, that is every such folder."""
  return "has no dataset_info.json" not in record.getMessage()


def _prepare_offline_dataset(spec: DatasetSpec, name: str, data_dir: str):
  tfds.disable_progress_bar()  # preparing takes a second; its bars only clutter the log
  absl_logger = logging.getLogger("absl")
  absl_logger.addFilter(_without_unprepared_folder_warnings)
  try:
    return _prepare(spec, name, data_dir)
  finally:
    absl_logger.removeFilter(_without_unprepared_folder_warnings)


def _prepare(spec: DatasetSpec, name: str, data_dir: str):
  builder = spec.builder(data_dir=data_dir, file_format="array_record")
  if builder.is_prepared():  # read-only folders with the data set in them work too
    return builder
  if hasattr(builder, "source_files"):  # original files: there, and the authors'?
    try:
      builder.source_files()
    except SourceFilesError as error:
      raise DataError(f"data set {name!r}: {error}") from error
  try:
    os.makedirs(data_dir, exist_ok=True)
    # The processes of a study (or of a test session) may open a data set in a fresh
    # folder at once: one prepares it, the others wait here and find it prepared.
    with filelock.FileLock(os.path.join(data_dir, f".{name}.lock")):
      builder = spec.builder(data_dir=data_dir, file_format="array_record")
      builder.download_and_prepare()
  except OSError as error:
    raise DataError(
        f"cannot prepare data set {name!r} in {data_dir}: {error}. "
        f"Set --config.data.data_dir to a writable folder."
    ) from error
  return builder


class Splits(NamedTuple):
  """A data set's splits, each with `len()` and `read(indices)` returning (images, labels)."""

  train: Any
  test: Any
  validation: Any = None  # None: the data set has none


def open_splits(name: str, data_dir: str | None) -> Splits:
  """Train, test and validation splits of data set `name` (prepared first if it builds
  offline).

  Args:
    name: a key of `DATASETS`.
    data_dir: TFDS data folder; None for the TFDS default.

  Returns:
    Its `Splits`.

  Raises:
    DataError: the data set is unknown, not prepared, not array_record, or its
      folder is not writable; the message says what to do.
  """
  if name not in DATASETS:
    raise DataError(f"unknown data set {name!r}; choose one of {sorted(DATASETS)}")
  spec = DATASETS[name]
  data_dir = resolve_data_dir(data_dir)
  if spec.builder is not None:
    builder = _prepare_offline_dataset(spec, name, data_dir)
  else:
    builder = _open_catalog_dataset(name, data_dir)
  try:
    sources = builder.as_data_source()
    wrap = InMemorySplit if spec.in_memory else RecordSplit
    return Splits(wrap(sources["train"]), wrap(sources[spec.test_split]),
                  wrap(sources[spec.validation_split]) if spec.validation_split else None)
  except Exception as error:  # a truncated or foreign file: say which folder
    raise DataError(
        f"cannot read data set {name!r} from {builder.data_dir}: {error}. "
        f"Delete that folder and prepare the data set again.\n{how_to_prepare(name, data_dir)}"
    ) from error
