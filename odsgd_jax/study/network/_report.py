"""The generated section of docs/clock.md: the overlap probe, the scores and every case."""

import math
from typing import Any, Mapping

_NAMES = {"clock": "clock (the claims' timelines)", "sequential": "sequential (what ran)",
          "naive": "naive (compute + bytes / rate)",
          "clock revised": "clock, revised loopback", "sequential revised":
          "sequential, revised loopback"}


def _pct(value: float) -> str:
  return f"{100 * value:.0f}%"


def _skill(value: float) -> str:
  return "n/a" if math.isnan(value) else f"{value:+.2f}"


def scores_table(scores: Mapping[str, Any], grid: str) -> list[str]:
  lines = [f"**Scores, {grid} grid** (error of the predicted step-time ratio to ssgd on the "
           "same network, log(predicted / measured); within 10%: |error| <= log 1.1; skill: "
           "1 - mean |error| / that of the constant ratio 1 or of the naive model):", "",
           "| family | cases | model | within 10% | mean abs log error | skill vs constant | "
           "skill vs naive |", "|---|---|---|---|---|---|---|"]
  for family, row in scores["ratio"].items():
    for model in scores["models"]:
      r = row[model]
      lines.append(f"| {family} | {row['cases']} | {_NAMES[model]} | {_pct(r['within'])} | "
                   f"{r['mean_abs_log']:.3f} | {_skill(r['skill_vs_constant'])} | "
                   f"{_skill(r['skill_vs_naive'])} |")
  lines += ["", "Step time itself (every case, ssgd included): " + "; ".join(
      f"{_NAMES[m]}: mean abs log error {v['mean_abs_log']:.3f}, {_pct(v['within'])} within 10%"
      for m, v in scores["absolute"].items()) + ".", ""]
  return lines


def overlap_table(overlap: Mapping[str, Any]) -> list[str]:
  seconds = overlap["seconds"]
  alone = seconds["all-reduce alone"], seconds["compute alone"]
  lines = [f"**Which overlap is real** (2 processes, {overlap['rate_mbit']:g} Mbit/s loopback, "
           f"an all-reduce of {overlap['message_bytes'] / 2**20:g} MiB per process and an "
           "independent chain of matrix products; median of 5; `overlapped`: how much of the "
           "shorter one was hidden, 1 - (together - longer) / shorter):", "",
           "| way | seconds | overlapped |", "|---|---|---|"]
  for way, value in seconds.items():
    hidden = "" if "alone" in way else _pct(
        min(1.0, max(0.0, 1 - (value - max(alone)) / min(alone))))
    lines.append(f"| {way} | {value:.3f} | {hidden} |")
  return lines + [""]


def cases_table(cases: Mapping[str, Mapping[str, Any]]) -> list[str]:
  lines = ["**Every case** (ms per step; `sent`: bytes one process sends per step as the clock "
           "counts them; `loopback`: bytes the loopback carried per step, all processes, "
           "measured; first looks written before the case was measured):", "",
           "| network | strategy | compute | sent | loopback | clock | sequential | naive | "
           "measured | ratio to ssgd: clock / measured |",
           "|---|---|---|---|---|---|---|---|---|---|"]
  for key, case in cases.items():
    network, label = key.split("/", 1)
    inputs, look = case["inputs"], case["first_look"]
    baseline = cases.get(f"{network}/ssgd")
    ratio = ""
    if baseline and label != "ssgd":
      ratio = (f"{look['clock'] / baseline['first_look']['clock']:.2f} / "
               f"{case['measured'] / baseline['measured']:.2f}")
    lines.append(
        f"| {network} | {label} | {1e3 * inputs['compute_s']:.1f} | "
        f"{inputs['sent_bytes_per_step'] / 1e6:.3f} MB | "
        f"{case['loopback_bytes_per_step'] / 1e6:.3f} MB | {1e3 * look['clock']:.1f} | "
        f"{1e3 * look['sequential']:.1f} | {1e3 * look['naive']:.1f} | "
        f"{1e3 * case['measured']:.1f} | {ratio} |")
  return lines + [""]
