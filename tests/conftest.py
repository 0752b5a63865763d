"""Tests run on simulated CPU devices, the way JAX users set them:
`XLA_FLAGS=--xla_force_host_platform_device_count=N` when given, else 8, set before the
JAX backend starts. Most tests lay their workers on as many devices as the workers fill
evenly (8 workers: on 8 of 16 devices, 4 of 4, 2 of 3), so they adapt to N; a test that
needs a certain count says so with `@pytest.mark.devices(n)` and is skipped, with the
reason, when fewer are visible.

Compiled programs are shared through JAX's persistent compilation cache, by the
xdist workers and by the processes tests start (through the environment), so a
program that several tests build (the same step of the same small config)
compiles once per test session.
"""

import atexit
import os
import shutil
import tempfile

# One cache folder per test session, made by the process that starts the session (its
# xdist workers and the processes tests start inherit it), removed at its end. The cache
# is size-limited for its file lock, and then reads every entry's access time on each
# write: a folder kept across sessions (thousands of entries, most of other flags or
# code) made the suite 13:34 instead of 8:37 on 2 cores.
if "JAX_COMPILATION_CACHE_DIR" not in os.environ:
  os.environ["JAX_COMPILATION_CACHE_DIR"] = tempfile.mkdtemp(prefix="odsgd_jax_test_cache_")
  atexit.register(shutil.rmtree, os.environ["JAX_COMPILATION_CACHE_DIR"], ignore_errors=True)
os.environ.setdefault("JAX_PERSISTENT_CACHE_MIN_COMPILE_TIME_SECS", "0")
os.environ.setdefault("JAX_PERSISTENT_CACHE_MIN_ENTRY_SIZE_BYTES", "0")
os.environ.setdefault("JAX_COMPILATION_CACHE_MAX_SIZE", str(2**30))  # with it, a file lock

from odsgd_jax import xla_flags  # noqa: E402
from tests.helpers import FAST_COMPILE_FLAGS  # noqa: E402

# Set before the backend starts, each unless XLA_FLAGS sets it already and only if this
# JAX's XLA knows it (an unknown flag aborts every process at start; probed once per
# session, the answer inherited by xdist's workers); passed on to the processes tests start.
xla_flags.add(FAST_COMPILE_FLAGS)
# As `python -m experiments.train` does: on a GPU, runs that resume bit for bit.
xla_flags.request_deterministic_ops()

import jax  # noqa: E402

TEST_DEVICES = 8
if "xla_force_host_platform_device_count" not in os.environ.get("XLA_FLAGS", ""):
  jax.config.update("jax_num_cpu_devices", TEST_DEVICES)

import pytest  # noqa: E402

from configs import default  # noqa: E402

# A strategy written inside a test registers itself on import: imported here, before any
# test module is collected, it is in every table parametrized over the registry.
from tests import test_new_strategy  # noqa: E402, F401


# Files of the longest tests (each starts processes that train): collected first, they
# start while the other xdist worker runs the many short tests, instead of leaving one
# worker alone at the end of the suite.
LONGEST_FIRST = ("tests/test_multiprocess.py", "tests/test_scripts.py", "tests/test_notebook.py")


def pytest_collection_modifyitems(config, items):
  del config
  items.sort(key=lambda item: item.nodeid.split("::")[0] not in LONGEST_FIRST)


def pytest_configure(config):
  config.addinivalue_line("markers", "devices(n): the test needs n devices (skipped with fewer)")


@pytest.fixture(scope="session", autouse=True)
def _subprocesses_choose_their_own_devices():
  """The processes tests start choose their own devices, as a user's command would: the
  device count flag leaves the environment once this process's backend has read it (in
  the process that runs the tests: xdist's workers inherit the flag)."""
  jax.device_count()
  flags = [flag for flag in os.environ.get("XLA_FLAGS", "").split()
           if "xla_force_host_platform_device_count" not in flag]
  os.environ["XLA_FLAGS"] = " ".join(flags)


def pytest_runtest_setup(item):
  for mark in item.iter_markers("devices"):
    if jax.device_count() < mark.args[0]:
      pytest.skip(f"needs {mark.args[0]} devices; {jax.device_count()} visible (set "
                  f"XLA_FLAGS=--xla_force_host_platform_device_count={mark.args[0]})")


@pytest.fixture(scope="session")
def data_dir(tmp_path_factory):
  """The TFDS folder of this test session, shared by its xdist workers: each offline data
  set is prepared in it once (one worker prepares it, the library's lock makes the other
  wait)."""
  base = tmp_path_factory.getbasetemp()
  if os.environ.get("PYTEST_XDIST_WORKER"):
    base = base.parent  # the session's folder, above each worker's own
  path = base / "tensorflow_datasets"
  path.mkdir(exist_ok=True)
  return str(path)


@pytest.fixture
def small_config(data_dir):
  """The default config's quick variant (`runlocal`: 20 steps): same model and strategy,
  in this session's data folder, on mnist1d's standard split: the same training signals,
  whose 1000 test signals evaluate in a fraction of the time of mnist1d_heldout's 2,000
  validation and 10,000 test signals (tests of the held-out split's own behaviour set it)."""
  config = default.get_config("runlocal")
  config.data.data_dir = data_dir
  config.data.name = "mnist1d"
  return config
