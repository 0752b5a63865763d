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
  """The default config's quick variant (`runlocal`: 20 steps): same data, model and
  strategy, in this session's data folder."""
  config = default.get_config("runlocal")
  config.data.data_dir = data_dir
  return config
