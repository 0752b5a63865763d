"""Small shared helpers for the tests."""

import os
import subprocess
import sys

import jax
import numpy as np
import orbax.checkpoint as ocp
import pytest

from odsgd_jax import xla_flags as odsgd_xla_flags

REPO = os.path.dirname(os.path.dirname(os.path.abspath(__file__)))

# Tests check behaviour, not speed, and the suite is mostly compilation: without LLVM's
# optimizations and with XLA:CPU's older elemental emitters in place of its MLIR fusion
# emitters, programs compile in under a third of the time (a 12-step pseudo_sync run's
# twenty compilations: 12.0 s with the defaults, 6.9 s at level 0, 3.5 s with both).
# tests/conftest.py adds those this JAX's XLA knows to XLA_FLAGS (jaxlib 0.11's XLA no longer
# knows the second: `odsgd_jax.xla_flags` probes them); scripts/benchmark.py measures speed
# with the default flags.
FAST_COMPILE_FLAGS = ("--xla_backend_optimization_level=0", "--xla_cpu_use_fusion_emitters=false")


class Compilations:
  """The names of the programs JAX compiles inside the block (each `jax.monitoring` event
  of a backend compilation, named by the function it compiles)."""

  EVENT = "/jax/core/compile/backend_compile_duration"

  def __enter__(self) -> "Compilations":
    self.names: list[str] = []
    jax.monitoring.register_event_duration_secs_listener(self._record)
    return self

  def _record(self, event: str, duration_s: float, **kwargs) -> None:
    del duration_s
    if event == self.EVENT:  # named "jit(<name>)" by some JAX versions, "<name>" by others
      name = kwargs.get("fun_name", "")
      self.names.append(name[4:-1] if name.startswith("jit(") else name)

  def __exit__(self, *exc_info) -> None:
    jax.monitoring.unregister_event_duration_listener(self._record)


def assert_trees_close(actual, expected, rtol=1e-6, atol=1e-6):
  actual_leaves, actual_def = jax.tree.flatten(actual)
  expected_leaves, expected_def = jax.tree.flatten(expected)
  assert actual_def == expected_def, f"{actual_def} != {expected_def}"
  for a, e in zip(actual_leaves, expected_leaves, strict=True):
    np.testing.assert_allclose(np.asarray(a, np.float64), np.asarray(e, np.float64),
                               rtol=rtol, atol=atol)


def assert_trees_equal(actual, expected):
  actual_leaves, actual_def = jax.tree.flatten(actual)
  expected_leaves, expected_def = jax.tree.flatten(expected)
  assert actual_def == expected_def, f"{actual_def} != {expected_def}"
  for a, e in zip(actual_leaves, expected_leaves, strict=True):
    np.testing.assert_array_equal(np.asarray(a), np.asarray(e))


def random_batch(worker_mesh, rng: np.random.Generator, per_worker: int = 8,
                 features: int = 40) -> dict:
  """A batch of random 40-float signals and labels for every worker of `worker_mesh`, placed
  as the train step takes it."""
  from odsgd_jax import parallel
  n = worker_mesh.num_workers
  return jax.device_put({"image": rng.normal(size=(n, per_worker, features)).astype(np.float32),
                         "label": rng.integers(0, 10, (n, per_worker)).astype(np.int32)},
                        worker_mesh.sharding(parallel.BATCH))


def saved_state(workdir: str, step: int):
  """The train state saved at `step`, as NumPy arrays in nested dicts/lists."""
  path = os.path.join(os.path.abspath(workdir), "checkpoints", str(step), "state")
  with ocp.StandardCheckpointer() as checkpointer:
    return checkpointer.restore(path)


def run_compiled_with(xla_flags: tuple[str, ...], module: str, function: str, *args) -> None:
  """Calls `module.function(*args)` (literal arguments) in a new process whose XLA_FLAGS
  hold `xla_flags` in place of FAST_COMPILE_FLAGS: for a property of the programs that
  depends on how XLA compiles them. Its failure fails the caller, with its traceback; a
  flag this JAX's XLA does not know skips the caller."""
  unknown = set(xla_flags) - set(odsgd_xla_flags.accepted(xla_flags))
  if unknown:
    pytest.skip(f"this jaxlib's XLA does not know {', '.join(sorted(unknown))}")
  kept = [flag for flag in os.environ.get("XLA_FLAGS", "").split()
          if flag not in FAST_COMPILE_FLAGS]
  code = f"from {module} import {function}; {function}(*{args!r})"
  result = subprocess.run([sys.executable, "-c", code], cwd=REPO, capture_output=True,
                          text=True, timeout=300,
                          env={**os.environ, "XLA_FLAGS": " ".join([*kept, *xla_flags]),
                               "JAX_PLATFORMS": "cpu"})
  assert result.returncode == 0, result.stderr[-3000:]
