"""Every test runs on 8 simulated CPU devices, set before the JAX backend starts.

Compiled programs are shared through JAX's persistent compilation cache, by the
xdist workers and by the processes tests start (through the environment), so a
program that several tests build (the same step of the same small config)
compiles once per test session.
"""

import os
import tempfile

os.environ.setdefault("JAX_COMPILATION_CACHE_DIR",
                      os.path.join(tempfile.gettempdir(), "odsgd_jax_test_compilation_cache"))
os.environ.setdefault("JAX_PERSISTENT_CACHE_MIN_COMPILE_TIME_SECS", "0")
os.environ.setdefault("JAX_PERSISTENT_CACHE_MIN_ENTRY_SIZE_BYTES", "0")
os.environ.setdefault("JAX_COMPILATION_CACHE_MAX_SIZE", str(2**30))  # with it, a file lock

import jax  # noqa: E402

jax.config.update("jax_num_cpu_devices", 8)

import pytest  # noqa: E402

from configs import default  # noqa: E402


@pytest.fixture(scope="session")
def data_dir(tmp_path_factory):
  """A TFDS folder of this test session; offline data sets are prepared in it once."""
  return str(tmp_path_factory.mktemp("tensorflow_datasets"))


@pytest.fixture
def small_config(data_dir):
  """The default config shrunk to seconds: same data, model and strategy."""
  config = default.get_config()
  config.data.data_dir = data_dir
  config.data.batch_size = 64
  config.data.eval_batch_size = 500
  config.train.num_steps = 20
  config.train.eval_every = 10
  config.train.checkpoint_every = 10
  config.train.log_every = 1
  config.train.progress_bar = False
  return config
