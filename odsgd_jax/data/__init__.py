"""Data sets (TFDS array_record) and per-worker grain pipelines."""

from odsgd_jax.data import _grain  # noqa: F401  -- first: before anything imports grain

from odsgd_jax.data._builders import Digits as Digits
from odsgd_jax.data._builders import Mnist1d as Mnist1d
from odsgd_jax.data._builders import Mnist1dHeldout as Mnist1dHeldout
from odsgd_jax.data._datasets import DATASETS as DATASETS
from odsgd_jax.data._datasets import DataError as DataError
from odsgd_jax.data._datasets import DatasetSpec as DatasetSpec
from odsgd_jax.data._datasets import Splits as Splits
from odsgd_jax.data._datasets import open_splits as open_splits
from odsgd_jax.data._datasets import resolve_data_dir as resolve_data_dir
from odsgd_jax.data._pipeline import TrainBatches as TrainBatches
from odsgd_jax.data._pipeline import WorkerBatches as WorkerBatches
from odsgd_jax.data._pipeline import eval_batches as eval_batches
