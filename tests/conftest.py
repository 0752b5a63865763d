"""Tests run on simulated CPU devices, the way JAX users set them:
`XLA_FLAGS=--xla_force_host_platform_device_count=N` when given (N >= 8: the tests lay
8 workers on 8 devices), else 8, set before the JAX backend starts.

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

TEST_DEVICES = 8
if "xla_force_host_platform_device_count" not in os.environ.get("XLA_FLAGS", ""):
  jax.config.update("jax_num_cpu_devices", TEST_DEVICES)

import pytest  # noqa: E402

from configs import default  # noqa: E402


def pytest_sessionstart(session):
  del session
  if jax.default_backend() == "cpu" and jax.device_count() < TEST_DEVICES:
    pytest.exit(f"the tests lay {TEST_DEVICES} workers on {TEST_DEVICES} simulated devices, but "
                f"XLA_FLAGS gives {jax.device_count()}: set "
                f"XLA_FLAGS=--xla_force_host_platform_device_count={TEST_DEVICES} (or more)",
                returncode=1)
  # The processes tests start choose their own devices, as a user's command would.
  flags = [flag for flag in os.environ.get("XLA_FLAGS", "").split()
           if "xla_force_host_platform_device_count" not in flag]
  os.environ["XLA_FLAGS"] = " ".join(flags)


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
