"""XLA flags are probed before they are set (odsgd_jax/xla_flags.py): XLA aborts a process
at start on a flag it does not know, and each release drops some (the XLA of jaxlib 0.11
no longer knows --xla_cpu_use_fusion_emitters, which the suite sets where it can)."""

import json
import os
import subprocess
import sys

import pytest

from odsgd_jax import xla_flags
from tests.helpers import FAST_COMPILE_FLAGS, REPO

UNKNOWN = "--xla_odsgd_jax_no_such_flag=true"


@pytest.fixture
def unprobed(monkeypatch):
  """No answers kept from earlier probes; this test's changes to XLA_FLAGS undone after."""
  monkeypatch.delenv("ODSGD_JAX_PROBED_XLA_FLAGS", raising=False)
  monkeypatch.setenv("XLA_FLAGS", os.environ.get("XLA_FLAGS", ""))
  return monkeypatch


def _jit_runs(flags) -> subprocess.CompletedProcess:
  code = "import jax, jax.numpy as jnp; print(int(jax.jit(lambda x: x + 1)(jnp.int32(41))))"
  return subprocess.run([sys.executable, "-c", code], cwd=REPO, capture_output=True, text=True,
                        timeout=300, env={**os.environ, "XLA_FLAGS": " ".join(flags),
                                          "JAX_PLATFORMS": "cpu"})


def test_an_unknown_flag_is_dropped_with_a_warning_and_jax_runs_with_the_rest(unprobed):
  del unprobed
  wanted = [*FAST_COMPILE_FLAGS, UNKNOWN]
  with pytest.warns(UserWarning, match="xla_odsgd_jax_no_such_flag.*does not know it"):
    kept = xla_flags.accepted(wanted)
  assert UNKNOWN not in kept
  assert set(kept) <= set(FAST_COMPILE_FLAGS)
  assert "--xla_backend_optimization_level=0" in kept  # known to every JAX the project allows
  ran = _jit_runs(kept)
  assert ran.returncode == 0 and ran.stdout.strip() == "42", ran.stderr[-2000:]
  unguarded = _jit_runs(wanted)  # what setting it unprobed does: the process aborts
  assert unguarded.returncode != 0 and "xla_odsgd_jax_no_such_flag" in unguarded.stderr


def test_answers_are_kept_for_the_processes_started_after(unprobed):
  """The probe's answers travel in the environment, per jaxlib version: a process started
  later (an xdist worker, a run a test starts) does not probe again, and another jaxlib's
  answers are not trusted."""
  with pytest.warns(UserWarning):
    xla_flags.accepted([UNKNOWN])
  kept = json.loads(os.environ["ODSGD_JAX_PROBED_XLA_FLAGS"])
  assert kept["flags"][UNKNOWN] is False
  unprobed.setattr(xla_flags, "starts_with", lambda flags: pytest.fail("probed again"))
  with pytest.warns(UserWarning):
    assert xla_flags.accepted([UNKNOWN]) == ()
  unprobed.setattr(xla_flags, "_jaxlib_version", lambda: "0.0.0-another")
  probes = []
  unprobed.setattr(xla_flags, "starts_with", lambda flags: probes.append(flags) or True)
  assert xla_flags.accepted([UNKNOWN]) == (UNKNOWN,) and probes == [[UNKNOWN]]


def test_the_suite_runs_with_the_compile_flags_this_xla_accepts():
  """tests/conftest.py set them through the probe: each accepted one is in XLA_FLAGS, no
  rejected one is."""
  present = os.environ["XLA_FLAGS"].split()
  kept = xla_flags.accepted(FAST_COMPILE_FLAGS)
  names = {flag.partition("=")[0] for flag in present}
  for flag in FAST_COMPILE_FLAGS:
    if flag in kept:
      assert flag.partition("=")[0] in names
    else:
      assert flag not in present


def test_a_flag_already_set_by_name_is_left_as_the_user_set_it(unprobed):
  unprobed.setenv("XLA_FLAGS", "--xla_backend_optimization_level=2")
  assert xla_flags.add(["--xla_backend_optimization_level=0"]) == ()
  assert os.environ["XLA_FLAGS"] == "--xla_backend_optimization_level=2"


@pytest.mark.parametrize("started", [False, True])
def test_deterministic_ops_are_asked_for_only_before_the_backend_starts(unprobed, started):
  unprobed.setenv("XLA_FLAGS", "--xla_backend_optimization_level=0")
  unprobed.setattr(xla_flags, "backend_started", lambda: started)
  assert xla_flags.request_deterministic_ops() is not started
  flags = os.environ["XLA_FLAGS"].split()
  assert (xla_flags.DETERMINISTIC_GPU_FLAGS[0] in flags) is not started
  assert "--xla_backend_optimization_level=0" in flags


def test_a_users_choice_of_deterministic_ops_is_kept(unprobed):
  unprobed.setenv("XLA_FLAGS", "--xla_gpu_deterministic_ops=false")
  unprobed.setattr(xla_flags, "backend_started", lambda: False)
  assert xla_flags.request_deterministic_ops() is False
  assert os.environ["XLA_FLAGS"] == "--xla_gpu_deterministic_ops=false"


def _devices_after_simulate(xla_flags_value: str) -> int:
  code = ("from odsgd_jax import xla_flags; xla_flags.simulate_host_devices(); import jax; "
          "print(jax.device_count())")
  result = subprocess.run([sys.executable, "-c", code], cwd=REPO, capture_output=True,
                          text=True, timeout=300, env={**os.environ, "XLA_FLAGS": xla_flags_value,
                                                       "JAX_PLATFORMS": "cpu"})
  assert result.returncode == 0, result.stderr[-2000:]
  return int(result.stdout.split()[-1])


def test_a_study_splits_the_cpu_into_8_devices_unless_the_user_set_a_count():
  assert _devices_after_simulate("") == xla_flags.STUDY_HOST_DEVICES == 8
  assert _devices_after_simulate("--xla_force_host_platform_device_count=2") == 2
