"""Weak and strong scaling from the timelines alone: seconds per tick of N workers, no
training.

Every strategy's timeline (odsgd_jax/cluster) gives the simulated duration of a tick. Weak
scaling: each worker keeps its batch, a tick processes N of them, and the efficiency is
T(1) / T(N). Strong scaling: a global batch is split over the N workers, each worker's
compute shrinks with its share while its message does not, and the efficiency is
T(1) / (N T(N)). Seconds for thousands of workers, on any preset.
"""

import dataclasses
from typing import Any, Sequence

from odsgd_jax.cluster import PRESETS, Network, Overlap, Workers, Workload, calibration
from odsgd_jax.models import gradient_profile
from odsgd_jax.strategies import get_strategy

DDP_OVERLAP = Overlap()  # DDP's defaults: 25 MiB buckets, backward 2/3 of a step

# Labelled strategy settings whose ticks differ on a homogeneous cluster.
SCALING_STRATEGIES: dict[str, tuple[str, dict[str, Any], bool]] = {
    # label: (strategy, timeline options, ssgd-style all-reduce overlapped with backward)
    "ssgd": ("ssgd", {}, True),
    "ssgd (no overlap)": ("ssgd", {}, False),
    "odsgd, pseudo_sync": ("odsgd", {"warmup_steps": 0}, True),
    "local_sgd, oscars (H=4)": ("local_sgd", {"period": 4}, True),
    "asgd, ssp": ("asgd", {}, True),
}


def seconds_per_tick(strategy: str, options: dict[str, Any], workers: Workers, network: Network,
                     message_bytes: float, overlap: Overlap | None, ticks: int = 64) -> float:
  """Mean simulated seconds of a tick over `ticks` ticks in steady state (local SGD:
  whole rounds of `options["period"]` ticks, the last one synchronizing)."""
  timeline = get_strategy(strategy).make_timeline(workers, network, message_bytes, overlap,
                                                  **options)
  period = options.get("period")
  total = 0.0
  for tick in range(ticks):
    timeline.schedule(tick)
    round_end = period is not None and (tick + 1) % period == 0
    total += timeline.cost(tick, round_end).duration
  return total / ticks


def workers_for(n: int, workload: Workload, network: Network, ideal: bool = False) -> Workers:
  """n homogeneous workers running `workload`, with the calibrated clock's noise,
  interference and node contention (`ideal`: none of them, the clock before validation)."""
  terms = {} if ideal else {"jitter": calibration.NOISE.value,
                            "interference": calibration.INTERFERENCE.value,
                            "node_contention": calibration.NODE_CONTENTION.value}
  return Workers((1.0,) * n, workload.step_time, node_size=network.workers_per_node,
                 samples_per_step=workload.samples_per_step, **terms)


def weak_scaling(network: Network, workload: Workload, sizes: Sequence[int],
                 overlap: Overlap | None = DDP_OVERLAP,
                 strategies: dict[str, tuple[str, dict[str, Any], bool]] = SCALING_STRATEGIES,
                 ideal: bool = False) -> dict[str, dict[int, float]]:
  """{label: {N: efficiency}} with efficiency = T(1) / T(N), T the seconds per tick, the
  overlap's buckets following the workload's model (`ideal`: the clock before validation:
  noiseless workers, links at line rate, even gradient rate, no interference)."""
  if ideal:
    network = dataclasses.replace(network, efficiency=1.0, intra_efficiency=1.0)
  elif overlap is not None:
    overlap = dataclasses.replace(overlap, gradients=gradient_profile(*workload.model))
  efficiency = {}
  for label, (strategy, options, overlapped) in strategies.items():
    times = {n: seconds_per_tick(strategy, options, workers_for(n, workload, network, ideal),
                                 network, workload.message_bytes,
                                 overlap if overlapped else None)
             for n in sorted(set(sizes) | {1})}
    efficiency[label] = {n: float(times[1] / times[n]) for n in sizes}
  return efficiency


# The global batch of strong scaling: Goyal et al.'s ResNet-50 batch (arXiv 1706.02677),
# the largest cited one that keeps its accuracy. The pseudo-synchronous paper does not give
# its own.
STRONG_GLOBAL_BATCH = 8192


def strong_scaling(network: Network, workload: Workload, sizes: Sequence[int],
                   global_batch: int = STRONG_GLOBAL_BATCH,
                   overlap: Overlap | None = DDP_OVERLAP,
                   strategies: dict[str, tuple[str, dict[str, Any], bool]] = SCALING_STRATEGIES,
                   ) -> dict[str, dict[int, float]]:
  """{label: {N: efficiency}} with efficiency = T(1) / (N T(N)), T the seconds of a tick
  that processes `global_batch` samples over N workers: each worker's compute is the
  workload's step time scaled to its share of the batch (linear in the batch: a GPU's
  loss of efficiency at small batches is not modelled), its message the whole model."""
  if overlap is not None:
    overlap = dataclasses.replace(overlap, gradients=gradient_profile(*workload.model))
  efficiency = {}
  for label, (strategy, options, overlapped) in strategies.items():
    times = {}
    for n in sorted(set(sizes) | {1}):
      share = global_batch / n
      load = dataclasses.replace(workload, samples_per_step=share,
                                 step_time=workload.step_time * share / workload.samples_per_step)
      times[n] = seconds_per_tick(strategy, options, workers_for(n, load, network), network,
                                  workload.message_bytes, overlap if overlapped else None)
    efficiency[label] = {n: float(times[1] / (n * times[n])) for n in sizes}
  return efficiency


def presets_table() -> str:
  """The table of presets (docs/cluster.md), each number with its source."""
  rows = []
  for name, preset in PRESETS.items():
    net = preset.network
    inside = (f"; {net.workers_per_node} per node at {net.intra_bandwidth / 1e9:g} GB/s, "
              f"{net.inter_topology} across nodes" if net.topology == "hierarchical" else "")
    rows.append(f"| `{name}` | {preset.description} | {net.topology}{inside} | "
                f"{net.bandwidth / 1e9:g} GB/s | {net.latency * 1e6:g} us | {preset.sources} |")
  return "\n".join(["Each preset's numbers with their sources; produced by "
                    "`python scripts/scaling.py --readme`.", "",
                    "| preset | what | topology | bandwidth | latency | sources |",
                    "|---|---|---|---|---|---|", *rows])
