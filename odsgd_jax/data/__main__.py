"""Prepares one of the package's data sets ahead of training, from a source you choose.

Training prepares these data sets on first use from where they are found offline; this
command is for the other sources. For fashion_mnist: a folder holding the four original
files (--source), or the authors' site (--download, needs internet).

  python -m odsgd_jax.data fashion_mnist --source ~/Downloads/fashion-mnist
  python -m odsgd_jax.data fashion_mnist --download [--data_dir ~/tensorflow_datasets]
"""

import argparse
import sys

from odsgd_jax.data._datasets import resolve_data_dir
from odsgd_jax.data._fashion_mnist import DOWNLOAD, FashionMnist, SourceFilesError

SOURCED = {"fashion_mnist": FashionMnist}  # data sets prepared from original files


def main(argv: list[str] | None = None) -> None:
  parser = argparse.ArgumentParser(description=__doc__,
                                   formatter_class=argparse.RawDescriptionHelpFormatter)
  parser.add_argument("name", choices=sorted(SOURCED))
  where = parser.add_mutually_exclusive_group()
  where.add_argument("--source", help="a folder holding the original files")
  where.add_argument("--download", action="store_true",
                     help="fetch the original files with TFDS's download manager")
  parser.add_argument("--data_dir", help="TFDS data folder (default $TFDS_DATA_DIR or "
                                         "~/tensorflow_datasets)")
  args = parser.parse_args(argv)
  data_dir = resolve_data_dir(args.data_dir)
  builder = SOURCED[args.name](data_dir=data_dir, file_format="array_record",
                               source=DOWNLOAD if args.download else args.source)
  try:
    builder.source_files()
    builder.download_and_prepare()
  except (SourceFilesError, OSError) as error:
    sys.exit(f"error: {error}")
  print(f"prepared {args.name} in {builder.data_dir}")


if __name__ == "__main__":
  main()
