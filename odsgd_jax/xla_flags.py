"""XLA flags set before JAX's backend starts, and only those this JAX's XLA knows.

XLA reads `XLA_FLAGS` once, when JAX's backend starts, and aborts the process on a flag
it does not know (`Unknown flag in XLA_FLAGS: ...`). Flags come and go between releases:
the XLA of jaxlib 0.11 no longer knows `--xla_cpu_use_fusion_emitters`, which every
earlier release the project allows accepts. So a flag the project sets but can do without
is probed first: a short process starts the CPU backend with it, and a flag it rejects is
dropped with a warning that names it. The answers are kept in the environment, per jaxlib
version, so the processes a run, a study or a test session starts do not probe again.

Deterministic GPU ops (`request_deterministic_ops`): XLA's GPU backend may pick
non-deterministic kernels (atomics in scatter-add and some reductions, autotuned
convolution algorithms), so the same step on the same inputs can differ in the last bits
from run to run, and a resumed run from the run it continues. XLA's flag makes them
deterministic; CPU programs are deterministic without it, and TPU programs ignore it.
"""

import json
import os
import subprocess
import sys
import warnings
from importlib import metadata
from typing import Sequence

# Where the answers of earlier probes are kept (a JSON object: jaxlib's version and
# {flag: accepted}), inherited by the processes this one starts.
_PROBED = "ODSGD_JAX_PROBED_XLA_FLAGS"

# XLA's flag for deterministic GPU ops, and the narrower one that newer XLA also knows (it
# keeps autotuning): the first of them this XLA accepts is set.
DETERMINISTIC_GPU_FLAGS = ("--xla_gpu_deterministic_ops=true",
                           "--xla_gpu_exclude_nondeterministic_ops=true")


def _jaxlib_version() -> str:
  try:
    return metadata.version("jaxlib")
  except metadata.PackageNotFoundError:  # a source build: its answers are not kept
    return ""


def _probed() -> dict[str, bool]:
  try:
    kept = json.loads(os.environ.get(_PROBED, "{}"))
  except json.JSONDecodeError:
    return {}
  if not isinstance(kept, dict) or kept.get("jaxlib") != _jaxlib_version():
    return {}
  return dict(kept.get("flags", {}))


def _keep(answers: dict[str, bool]) -> None:
  os.environ[_PROBED] = json.dumps({"jaxlib": _jaxlib_version(), "flags": answers})


def starts_with(flags: Sequence[str]) -> bool:
  """Whether JAX's CPU backend starts with `XLA_FLAGS` holding `flags` (a new process)."""
  environment = {**os.environ, "XLA_FLAGS": " ".join(flags), "JAX_PLATFORMS": "cpu"}
  try:
    result = subprocess.run([sys.executable, "-c", "import jax; jax.devices()"],
                            env=environment, capture_output=True, timeout=300, check=False)
  except subprocess.TimeoutExpired:
    return False
  return result.returncode == 0


def accepted(flags: Sequence[str]) -> tuple[str, ...]:
  """The flags of `flags` that this JAX's XLA accepts, in their order; each one it rejects
  is dropped with a warning. Probed in a new process (all together first, then one at a
  time if that fails); the answers are kept for this process and the ones it starts."""
  answers = _probed()
  unknown = [flag for flag in flags if flag not in answers]
  if unknown:
    if starts_with(unknown):
      answers.update(dict.fromkeys(unknown, True))
    else:
      answers.update({flag: starts_with([flag]) for flag in unknown})
    _keep(answers)
  for flag in flags:
    if not answers[flag]:
      warnings.warn(f"XLA flag {flag} left out: the XLA of this jaxlib "
                    f"({_jaxlib_version() or 'unknown version'}) does not know it",
                    stacklevel=2)
  return tuple(flag for flag in flags if answers[flag])


def _name(flag: str) -> str:
  return flag.partition("=")[0]


def backend_started() -> bool:
  """Whether JAX's backend has started in this process (XLA_FLAGS is then read)."""
  from jax._src import xla_bridge  # noqa: PLC0415 -- JAX's own record, no public API

  started = getattr(xla_bridge, "backends_are_initialized", None)
  return bool(started()) if started is not None else bool(getattr(xla_bridge, "_backends", {}))


def add(flags: Sequence[str]) -> tuple[str, ...]:
  """Adds to `XLA_FLAGS` each flag of `flags` that it does not set yet (by name) and that
  this XLA accepts (`accepted`); returns those added. Call it before JAX's backend starts:
  later, XLA does not read them."""
  present = os.environ.get("XLA_FLAGS", "").split()
  names = {_name(flag) for flag in present}
  added = accepted([flag for flag in flags if _name(flag) not in names])
  if added:
    os.environ["XLA_FLAGS"] = " ".join([*present, *added])
  return added


def deterministic_ops() -> bool:
  """Whether `XLA_FLAGS` asks for deterministic GPU ops (one of DETERMINISTIC_GPU_FLAGS)."""
  present = os.environ.get("XLA_FLAGS", "").split()
  return any(flag in present for flag in DETERMINISTIC_GPU_FLAGS)


def request_deterministic_ops() -> bool:
  """Asks XLA for deterministic GPU ops, with the first of DETERMINISTIC_GPU_FLAGS that it
  accepts, unless `XLA_FLAGS` already sets one of them (either way, true or false). Before
  JAX's backend starts; afterwards only reports. Returns `deterministic_ops()`."""
  present = {_name(flag) for flag in os.environ.get("XLA_FLAGS", "").split()}
  if not backend_started() and not present & {_name(f) for f in DETERMINISTIC_GPU_FLAGS}:
    for flag in DETERMINISTIC_GPU_FLAGS:
      with warnings.catch_warnings():  # the next one is tried
        warnings.simplefilter("ignore")
        if add([flag]):
          break
    else:
      warnings.warn("no XLA flag for deterministic GPU ops is known to this jaxlib's XLA: a "
                    "resumed run on a GPU may differ from an uninterrupted one in the last bits",
                    stacklevel=2)
  return deterministic_ops()


# The CPU devices a study simulates where the user set none: one per worker of the
# studies' 8-worker configs, the fastest layout on a CPU host (docs/results.md, "What a
# study costs": an ssgd step 48-52 CPU-ms on 8 devices, 108-113 with 8 workers on 1).
STUDY_HOST_DEVICES = 8
_HOST_DEVICES = "--xla_force_host_platform_device_count"


def simulate_host_devices(count: int = STUDY_HOST_DEVICES) -> bool:
  """Splits the CPU into `count` devices (XLA's flag), unless `XLA_FLAGS` already sets a
  count or JAX's backend has started. An accelerator's devices are not affected. Returns
  whether it was set here."""
  if backend_started():
    return False
  return bool(add([f"{_HOST_DEVICES}={count}"]))
