"""The measurement driver: predictions against hand formulas, its records' rules, and two
processes on a shaped loopback (skipped, with the reason, without root or tc)."""

import json
import math
import os
import subprocess
import sys

import numpy as np
import pytest

from odsgd_jax.cluster import calibration
from odsgd_jax.study.network import _cases, measure
from odsgd_jax.study.network._namespace import can_emulate, shaped_namespace

REPO = os.path.dirname(os.path.dirname(os.path.abspath(__file__)))


def _charges(entry, ticks, model_bytes):
  del model_bytes
  period = entry.options.get("period", 1)
  return [[int((t + 1) % period == 0), 0.0, 0] for t in range(ticks)]


def test_predictions_follow_the_ring_on_a_shared_loopback_and_the_naive_formula():
  network = _cases.Network("mlp_wide", 4, 80, 0)
  size, compute = 4e6, 0.01
  ssgd = _cases.ENTRY["ssgd"]
  look = _cases.predictions(ssgd, network, compute, size, _charges(ssgd, 8, size), 2)
  # 4 processes share 80 Mbit/s: a ring all-reduce moves 2 (P - 1) S bytes over it
  wire = 2 * 3 * size * 8 / 80e6
  assert look["naive"] == pytest.approx(compute + 4 * size * 8 / 80e6)
  # the clock: the slowest of 4 noisy workers (noise 1%), then the all-reduce (one bucket)
  assert wire + compute < look["clock"] < wire + compute * math.exp(3 * calibration.NOISE.value)
  assert look["sequential"] == pytest.approx(look["clock"], rel=1e-9)
  odsgd = _cases.ENTRY["odsgd"]
  piped = _cases.predictions(odsgd, network, compute, size, _charges(odsgd, 8, size), 2)
  # the claims' pipelined tick: the all-reduce beside the compute; what ran: one after
  assert piped["clock"] == pytest.approx(wire, rel=1e-6)
  assert piped["sequential"] == pytest.approx(look["sequential"], rel=1e-9)
  local = _cases.ENTRY["local_sgd p4"]
  periodic = _cases.predictions(local, network, compute, size, _charges(local, 2 + 12, size), 2)
  assert periodic["naive"] == pytest.approx(compute + 4 * size * 8 / 80e6 / 4)


def test_scores_read_ratios_to_ssgd_on_the_same_network():
  def case(measured, clock):
    return {"measured": measured, "first_look": {"clock": clock, "sequential": measured,
                                                 "naive": clock}}
  cases = {"n/ssgd": case(1.0, 1.0), "n/odsgd": case(1.0, 0.5),
           "n/local_sgd p2": case(0.5, 0.55), "m/ssgd": case(2.0, 2.0),
           "m/gossip": case(2.0, 2.0)}
  scores = _cases.scores(cases)["ratio"]
  assert scores["pipelined"]["clock"]["mean_abs_log"] == pytest.approx(math.log(2))
  assert scores["pipelined"]["sequential"]["within"] == 1.0
  assert scores["periodic"]["clock"]["mean_abs_log"] == pytest.approx(math.log(1.1))
  # the constant ratio 1 errs by log 2 on local SGD: the clock's skill over it
  assert scores["periodic"]["clock"]["skill_vs_constant"] == pytest.approx(
      1 - math.log(1.1) / math.log(2))
  assert scores["all"]["cases"] == 3


def _compute_record(records, network):
  entries = {}
  for entry in _cases.ENTRIES:
    ticks = 2 + entry.steps * measure.REPEATS
    entries[entry.label] = {"compute_s": 0.01, "per_process_s": [0.01], "model_bytes": 1e6,
                            "charges": _charges(entry, ticks, 1e6), "timed_from": 2}
  path = measure.compute_path(records, network.model, network.processes)
  os.makedirs(os.path.dirname(path), exist_ok=True)
  with open(path, "w") as f:
    json.dump({"entries": entries}, f)


def test_first_looks_are_never_changed_and_a_case_without_one_is_not_measured(tmp_path):
  records = str(tmp_path)
  network = _cases.Network("mlp_wide", 2, 100, 0)
  with pytest.raises(measure.MeasureError, match="have no first look.*--phase first_looks"):
    measure.measure_network(records, network)
  _compute_record(records, network)
  assert measure.first_looks(records, [network]) == len(_cases.ENTRIES)
  path = os.path.join(records, measure.FIRST_LOOKS)
  with open(path) as f:
    looks = json.load(f)
  looks[f"{network.key}/ssgd"]["first_look"]["clock"] = 123.0  # as committed before
  with open(path, "w") as f:
    json.dump(looks, f)
  os.remove(measure.compute_path(records, network.model, network.processes))
  _compute_record(records, network)  # a new compute record changes nothing
  assert measure.first_looks(records, [network]) == 0
  with open(path) as f:
    assert json.load(f)[f"{network.key}/ssgd"]["first_look"]["clock"] == 123.0
  # a window lasts about 0.6 s by its first look: 0.1 s steps of 2 ticks, 3 rounds
  assert measure.window_rounds({"first_look": {"clock": 0.1}}, _cases.ENTRY["ssgd"]) == 3
  assert measure.window_rounds({"first_look": {"clock": 1e-6}}, _cases.ENTRY["ssgd"]) == 32


def test_the_driver_says_in_one_line_what_it_needs():
  def run(*flags):
    return subprocess.run([sys.executable, "scripts/measure_network.py", *flags], cwd=REPO,
                          capture_output=True, text=True, timeout=120)
  done = run("--phase", "measure")
  assert done.returncode == 1
  assert done.stderr.strip().splitlines() == [
      "error: --phase measure measures: give --emulate (root, here) or --plain"]
  done = run("--plain", "--num_processes", "2")
  assert done.returncode == 1 and "--plain needs --coordinator" in done.stderr


def _shaping_problem() -> str | None:
  problem = can_emulate()
  if problem:
    return problem
  try:
    with shaped_namespace(f"odsgd_test_{os.getpid()}", 100, 0):
      pass
  except Exception as error:  # noqa: BLE001 -- any failure to shape: the reason to skip
    return f"cannot make a shaped namespace here: {error}"
  return None


def test_two_processes_on_a_shaped_loopback_take_about_the_formulas_time(tmp_path):
  problem = _shaping_problem()
  if problem:
    pytest.skip(problem)
  name = f"odsgd_test_{os.getpid()}"
  rate_mbit = 40
  spec = {"model": "mlp", "model_options": {}, "input_shape": [40], "batch_per_worker": 8,
          "repeats": 2, "entries": [["ssgd", "ssgd", {}, 3]]}
  with shaped_namespace(name, rate_mbit, 0) as inside:
    [output] = measure.launch("odsgd_jax.study.network.timing", spec, 2, True, inside,
                              timeout_s=240)
  listed = subprocess.run(["ip", "netns", "list"], capture_output=True, text=True).stdout
  assert name not in listed  # removed afterwards
  [result] = output["entries"]
  size = result["model_bytes"]
  wire = 2 * size * 8 / (rate_mbit * 1e6)  # both processes' halves of the ring over one link
  step = float(np.median(result["seconds_per_step"]))
  assert wire < step < 2 * wire + 0.05, (step, wire)
  # the loopback carried each process's message once, and little else
  assert 2 * size < result["loopback_bytes_per_step"] < 2.2 * size


def test_the_docs_section_is_what_the_committed_records_give(monkeypatch):
  from odsgd_jax import study
  from odsgd_jax.study import network
  monkeypatch.chdir(REPO)
  study.replace_section("network_cases", network.report_text("records/network"), check=True)
