"""The measurement driver's phases: compute times, first looks, shaped measurements, and
the overlap probe; each phase's results kept as JSON in a records folder so that a
session that stops loses only the network in flight, and the first looks are on disk
(and committed) before any measurement they predict is taken.

  <records>/compute/<model>_p<P>.json      compute per step, communication removed
  <records>/first_looks.json               the predictions, append-only
  <records>/measured/<network>.json        the shaped runs
  <records>/overlap.json                   which overlap is real
"""

import contextlib
import dataclasses
import datetime
import json
import os
import subprocess
import sys
import tempfile
import time
from typing import Any, Iterator, Sequence

import numpy as np

from odsgd_jax.study._records import write_record
from odsgd_jax.study.network import _cases
from odsgd_jax.study.network._namespace import shaped_namespace

REPEATS = 3  # timed windows of a measured case (the median is its step time)
COMPUTE_REPEATS = 5  # and of a compute-only run, each window 4 times as long
COMPUTE_STEPS = 4
PORT = 12355  # inside a fresh namespace nothing else listens


class MeasureError(RuntimeError):
  """A launch failed, or a phase's inputs are missing or would be overwritten."""


def _now() -> str:
  return datetime.datetime.now(datetime.timezone.utc).isoformat(timespec="seconds")


def read_json(path: str) -> Any:
  with open(path, encoding="utf-8") as f:
    return json.load(f)


def _write(path: str, value: Any) -> None:
  """Whole or nothing (a stopped session leaves the old file or the new one), indented so
  that a commit's diff shows each case."""
  write_record(path, value, indent=1)


def _environment() -> dict[str, Any]:
  import jax
  import platform
  return {"jax": jax.__version__, "cpus": os.cpu_count(), "platform": platform.platform(),
          "python": platform.python_version()}


def _worker_env(devices: int = 1) -> dict[str, str]:
  env = {k: v for k, v in os.environ.items() if k != "XLA_FLAGS"}
  return {**env, "JAX_PLATFORMS": "cpu", "JAX_NUM_CPU_DEVICES": str(devices),
          "PYTHONUNBUFFERED": "1"}


@contextlib.contextmanager
def _processes(commands: Sequence[Sequence[str]], logs: Sequence[str],
               devices: int = 1) -> Iterator[list]:
  """Starts `commands`, each logging to its file; kills every one still running on exit."""
  started = []
  try:
    for command, log in zip(commands, logs, strict=True):
      handle = open(log, "w", encoding="utf-8")  # noqa: SIM115 - closed with the process
      started.append((subprocess.Popen(list(command), stdout=handle, stderr=subprocess.STDOUT,
                                       env=_worker_env(devices)), handle))
    yield [process for process, _ in started]
  finally:
    for process, handle in started:
      if process.poll() is None:
        process.kill()
      process.wait(timeout=30)
      handle.close()


def launch(module: str, spec: dict[str, Any], processes: int, distributed: bool,
           prefix: Sequence[str] = (), timeout_s: float = 600,
           coordinator: str | None = None, devices: int = 1) -> list[Any]:
  """Runs `python -m <module> <spec>` `processes` times at once (with `prefix`: inside a
  namespace), as one jax.distributed job or as independent processes; each stops by
  itself within `timeout_s` or is killed. Returns what each wrote (process 0's alone when
  distributed); `devices`: CPU devices per process."""
  with tempfile.TemporaryDirectory(prefix="odsgd_measure_") as folder:
    commands, logs, outputs = [], [], []
    for index in range(processes):
      output = os.path.join(folder, f"out{index}.json")
      path = os.path.join(folder, f"spec{index}.json")
      with open(path, "w", encoding="utf-8") as f:
        json.dump({**spec, "distributed": distributed, "processes": processes,
                   "process_id": index, "output": output, "barrier_folder": folder,
                   "coordinator": coordinator or f"127.0.0.1:{PORT}"}, f)
      commands.append([*prefix, sys.executable, "-m", module, path])
      logs.append(os.path.join(folder, f"process{index}.log"))
      outputs.append(output)
    deadline = time.monotonic() + timeout_s
    with _processes(commands, logs, devices) as running:
      while any(p.poll() is None for p in running) and time.monotonic() < deadline:
        if any(p.poll() not in (None, 0) for p in running):
          break
        time.sleep(0.2)
      codes = [p.poll() for p in running]
    if codes != [0] * processes:
      failed = next((i for i, c in enumerate(codes) if c not in (None, 0)), 0)
      with open(logs[failed], encoding="utf-8") as f:
        tail = [line.rstrip() for line in f if line.strip()][-3:]
      reason = ("did not finish within its time limit" if codes[failed] is None
                else f"exited with status {codes[failed]}")
      raise MeasureError(f"{module}: process {failed} of {processes} {reason}: "
                         + " | ".join(tail))
    return [read_json(path) for path in (outputs[:1] if distributed else outputs)]


def _model_spec(model: str) -> dict[str, Any]:
  name, options, shape, batch = _cases.MODELS[model]
  return {"model": name, "model_options": options, "input_shape": list(shape),
          "batch_per_worker": batch}


def compute_path(records: str, model: str, processes: int) -> str:
  return os.path.join(records, "compute", f"{model}_p{processes}.json")


def measure_compute(records: str, model: str, processes: int, timeout_s: float = 600,
                    at_once: int | None = None) -> None:
  """Each strategy's step with one worker per process (no collective), `processes` of them
  at once (`at_once`, if given: a host of a real cluster runs its one process): its compute
  time per step (the mean over processes of each one's median)."""
  path = compute_path(records, model, processes)
  if os.path.exists(path):
    return
  spec = {**_model_spec(model), "repeats": COMPUTE_REPEATS,
          "entries": [[e.label, e.strategy, dict(e.options), COMPUTE_STEPS * e.steps]
                      for e in _cases.ENTRIES]}
  outputs = launch("odsgd_jax.study.network.timing", spec, at_once or processes,
                   distributed=False, timeout_s=timeout_s)
  entries = {}
  for index, entry in enumerate(_cases.ENTRIES):
    per_process = [float(np.median(out["entries"][index]["seconds_per_step"]))
                   for out in outputs]
    first = outputs[0]["entries"][index]
    entries[entry.label] = {"compute_s": float(np.mean(per_process)),
                            "per_process_s": per_process, "model_bytes": first["model_bytes"],
                            "charges": first["charges"], "timed_from": first["timed_from"]}
  _write(path, {"model": model, "processes": processes, "entries": entries,
                "environment": _environment(), "written": _now()})


FIRST_LOOKS = "first_looks.json"


def first_looks(records: str, networks: Sequence[_cases.Network]) -> int:
  """Adds the first look of every case of `networks` that has none to FIRST_LOOKS (never
  changing one already there); outside the first grid, with the revised loopback
  (`_cases.REVISION`) too, where there is one. Returns how many were added."""
  path = os.path.join(records, FIRST_LOOKS)
  looks = read_json(path) if os.path.exists(path) else {}
  first_grid = {n.key for n in _cases.networks(**_cases.GRIDS["first"])}
  added = 0
  for network in networks:
    compute = read_json(compute_path(records, network.model, network.processes))["entries"]
    for entry in _cases.ENTRIES:
      key = _cases.case_key(network, entry.label)
      if key in looks:
        continue
      inputs = compute[entry.label]
      timed_from = inputs["timed_from"]
      charges = inputs["charges"][:timed_from + entry.steps * REPEATS]
      revised = _cases.REVISION if network.key not in first_grid else None
      looks[key] = {
          "inputs": {"compute_s": inputs["compute_s"], "model_bytes": inputs["model_bytes"],
                     "processes": network.processes, "rate_mbit": network.rate_mbit,
                     "delay_ms": network.delay_ms,
                     "sent_bytes_per_step": float(np.mean(
                         [(c[1] or inputs["model_bytes"]) if c[0] else 0.0
                          for c in charges[timed_from:]]))},
          "first_look": _cases.predictions(entry, network, inputs["compute_s"],
                                           inputs["model_bytes"], charges, timed_from,
                                           revised),
          "written": _now()}
      added += 1
  if added:
    _write(path, looks)
  return added


WINDOW_S = 0.6  # a timed window lasts about this long, by the first look


def window_rounds(look: dict[str, Any], entry: _cases.Entry) -> int:
  """How many of `entry.steps` ticks a timed window takes: enough for WINDOW_S seconds by
  the case's first look (decided before it is measured, the same on every process),
  between 1 and 32."""
  return int(min(32, max(1, np.ceil(WINDOW_S / (look["first_look"]["clock"] * entry.steps)))))


def measured_path(records: str, network: _cases.Network) -> str:
  return os.path.join(records, "measured", f"{network.key}.json")


def measure_network(records: str, network: _cases.Network, timeout_s: float = 600,
                    plain: dict[str, Any] | None = None) -> None:
  """Every strategy on `network`: its processes in a shaped namespace (or, `plain`, this
  host's one process of a real cluster: {"coordinator", "process_id"}). Refuses a case
  without a first look."""
  path = measured_path(records, network)
  if os.path.exists(path):
    return
  looks_path = os.path.join(records, FIRST_LOOKS)
  looks = read_json(looks_path) if os.path.exists(looks_path) else {}
  missing = [e.label for e in _cases.ENTRIES if _cases.case_key(network, e.label) not in looks]
  if missing:
    raise MeasureError(f"{network.key}: {', '.join(missing)} have no first look in "
                       f"{looks_path}; run --phase first_looks (and commit it) before measuring")
  spec = {**_model_spec(network.model), "repeats": REPEATS,
          "entries": [[e.label, e.strategy, dict(e.options),
                       e.steps * window_rounds(looks[_cases.case_key(network, e.label)], e)]
                      for e in _cases.ENTRIES]}
  module = "odsgd_jax.study.network.timing"
  if plain is None:
    with shaped_namespace(f"odsgd_{os.getpid()}", network.rate_mbit,
                          network.delay_ms) as inside:
      [output] = launch(module, spec, network.processes, True, inside, timeout_s)
  else:
    output = _plain(module, spec, network.processes, plain, timeout_s)
    if output is None:
      return
  entries = {}
  for entry, result in zip(_cases.ENTRIES, output["entries"], strict=True):
    entries[entry.label] = {"seconds_per_step": result["seconds_per_step"],
                            "median_s": float(np.median(result["seconds_per_step"])),
                            "loopback_bytes_per_step": result["loopback_bytes_per_step"]}
  _write(path, {"network": network.key, "entries": entries, "environment": _environment(),
                "emulated": plain is None, "written": _now()})


def _plain(module: str, spec: dict[str, Any], processes: int, plain: dict[str, Any],
           timeout_s: float) -> Any | None:
  """This host's process of a plain (real cluster) measurement; process 0's result."""
  with tempfile.TemporaryDirectory(prefix="odsgd_measure_") as folder:
    output, path = os.path.join(folder, "out.json"), os.path.join(folder, "spec.json")
    with open(path, "w", encoding="utf-8") as f:
      json.dump({**spec, "distributed": True, "processes": processes,
                 "process_id": plain["process_id"], "output": output,
                 "coordinator": plain["coordinator"]}, f)
    done = subprocess.run([sys.executable, "-m", module, path], env=_worker_env(),
                          timeout=timeout_s, check=False)
    if done.returncode:
      raise MeasureError(f"{module}: this host's process exited with status {done.returncode}")
    return read_json(output) if plain["process_id"] == 0 else None


def load_cases(records: str) -> dict[str, dict[str, Any]]:
  """{case key: {"network", "label", "measured", "first_look", "inputs", "bytes"}} of every
  measured case that has a first look."""
  looks = read_json(os.path.join(records, FIRST_LOOKS))
  cases = {}
  folder = os.path.join(records, "measured")
  for name in sorted(os.listdir(folder)) if os.path.isdir(folder) else []:
    measured = read_json(os.path.join(folder, name))
    for label, result in measured["entries"].items():
      key = f"{measured['network']}/{label}"
      if key in looks:
        cases[key] = {**looks[key], "measured": result["median_s"],
                      "windows": result["seconds_per_step"],
                      "loopback_bytes_per_step": result["loopback_bytes_per_step"]}
  return cases


OVERLAP = "overlap.json"


def measure_overlap(records: str, rate_mbit: float = 200, message_bytes: float = 8 * 2**20,
                    timeout_s: float = 300) -> dict[str, float]:
  """The overlap probe (odsgd_jax/study/network/overlap.py): 2 processes, each with 2 CPU
  devices, on a loopback of `rate_mbit`, an all-reduce of `message_bytes`; kept in
  OVERLAP."""
  spec = {"message_bytes": message_bytes, "matrix": 1400, "products": 6, "repeats": 5}
  with shaped_namespace(f"odsgd_{os.getpid()}", rate_mbit, 0) as inside:
    [result] = launch("odsgd_jax.study.network.overlap", spec, 2, True, inside, timeout_s,
                      devices=2)
  _write(os.path.join(records, OVERLAP), {"rate_mbit": rate_mbit, "message_bytes": message_bytes,
                                          "seconds": result, "environment": _environment(),
                                          "written": _now()})
  return result


def fit_loopback(records: str, networks: Sequence[_cases.Network]) -> tuple[_cases.Loopback, float]:
  """The loopback's latency per message and achieved share of the rate that minimize the
  mean |log(predicted / measured)| step time over the measured cases of `networks` whose
  timeline runs its exchange after the compute (ssgd, periodic, ssgd compressed: there the
  clock and the sequential timeline agree): coordinate descent over fixed grids, until a
  whole round moves neither. Returns the fit and its loss."""
  fitted = []
  for network in networks:
    path = measured_path(records, network)
    if not os.path.exists(path):
      continue
    compute = read_json(compute_path(records, network.model, network.processes))["entries"]
    for label, result in read_json(path)["entries"].items():
      entry, inputs = _cases.ENTRY[label], compute[label]
      if _cases.overlaps_compute(entry):
        continue  # whether the exchange hides behind the compute is not the loopback's term
      charges = inputs["charges"][:inputs["timed_from"] + entry.steps * REPEATS]
      fitted.append((entry, network, inputs, charges, result["median_s"]))
  if not fitted:
    raise MeasureError("no measured case to fit the loopback on: run --phase measure first")

  def loss(loopback):
    return float(np.mean([abs(np.log(_cases.sequential_step(
        entry, network, inputs["compute_s"], inputs["model_bytes"], charges,
        inputs["timed_from"], loopback) / measured))
        for entry, network, inputs, charges, measured in fitted]))

  grids = {"latency_s": np.round(np.arange(0, 20e-3 + 1e-9, 1e-4), 6),
           "efficiency": np.round(np.arange(0.3, 1.0 + 1e-9, 0.02), 2)}
  best = _cases.Loopback()
  best_loss = loss(best)
  moved = True
  while moved:
    moved = False
    for name, values in grids.items():
      for value in values:
        trial = dataclasses.replace(best, **{name: float(value)})
        trial_loss = loss(trial)
        if trial_loss < best_loss - 1e-12:
          best, best_loss, moved = trial, trial_loss, True
  return best, best_loss
