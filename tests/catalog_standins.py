"""Small stand-ins for the TFDS catalog data sets, prepared in their real layout.

The real mnist, cifar10 and imagenet2012 need downloads; these have the same
feature names, image encodings (PNG, PNG, JPEG of varying size), splits and
folder layout (<data_dir>/<name>/<version>), with random pixels, so the loading
code runs exactly as it would on the prepared originals.
"""

import io
import os
import shutil
import tempfile

import numpy as np
import tensorflow_datasets as tfds
from PIL import Image

# name -> (version, test split, image shape (None: random size), encoding, classes)
STANDINS = {
    "mnist": ("3.0.1", "test", (28, 28, 1), "png", 10),
    "cifar10": ("3.0.2", "test", (32, 32, 3), "png", 10),
    "imagenet2012": ("5.1.0", "validation", (None, None, 3), "jpeg", 1000),
}


def _encoded(pixels: np.ndarray, encoding: str) -> io.BytesIO:
  buffer = io.BytesIO()
  image = Image.fromarray(pixels[..., 0] if pixels.shape[-1] == 1 else pixels)
  image.save(buffer, format=encoding.upper())
  buffer.seek(0)
  return buffer


class _Standin(tfds.core.GeneratorBasedBuilder):
  """Random images with the features of catalog data set `CATALOG_NAME`."""

  VERSION = tfds.core.Version("1.0.0")
  CATALOG_NAME = ""
  SIZES = (64, 32)

  def _info(self):
    _, _, shape, encoding, classes = STANDINS[self.CATALOG_NAME]
    return tfds.core.DatasetInfo(
        builder=self,
        features=tfds.features.FeaturesDict({
            "image": tfds.features.Image(shape=shape, encoding_format=encoding),
            "label": tfds.features.ClassLabel(num_classes=classes),
        }),
    )

  def _split_generators(self, dl_manager):
    del dl_manager
    test_split = STANDINS[self.CATALOG_NAME][1]
    return {"train": self._generate_examples(0, self.SIZES[0]),
            test_split: self._generate_examples(1, self.SIZES[1])}

  def _generate_examples(self, seed, count):
    _, _, shape, encoding, classes = STANDINS[self.CATALOG_NAME]
    rng = np.random.default_rng(seed)
    for index in range(count):
      height, width = shape[:2] if shape[0] else rng.integers(60, 120, size=2)
      pixels = rng.integers(0, 256, size=(height, width, shape[2]), dtype=np.uint8)
      yield index, {"image": _encoded(pixels, encoding), "label": int(rng.integers(classes))}


class StandinMnist(_Standin):
  CATALOG_NAME = "mnist"


class StandinCifar10(_Standin):
  CATALOG_NAME = "cifar10"


class StandinImagenet2012(_Standin):
  CATALOG_NAME = "imagenet2012"


def prepare_standin(name: str, data_dir: str) -> str:
  """Prepares the stand-in for catalog data set `name` as <data_dir>/<name>/<version>."""
  builder_cls = {"mnist": StandinMnist, "cifar10": StandinCifar10,
                 "imagenet2012": StandinImagenet2012}[name]
  target = os.path.join(data_dir, name, STANDINS[name][0])
  if not os.path.exists(target):
    with tempfile.TemporaryDirectory() as scratch:
      tfds.disable_progress_bar()
      builder = builder_cls(data_dir=scratch, file_format="array_record")
      builder.download_and_prepare()
      shutil.copytree(builder.data_dir, target)
  return target
