"""The cluster a config describes: its `cluster` section turned into workers, a network
and the all-reduce overlap, in one place (the clock, the scripts and the studies read
these, never the fields)."""

import dataclasses
from typing import Any, Mapping, NamedTuple

from odsgd_jax.cluster._calibration import TRANSPORTS
from odsgd_jax.cluster._hardware import Network, Workers
from odsgd_jax.cluster._presets import WORKLOADS, get_preset
from odsgd_jax.cluster._timelines import Overlap


class ClusterSpec(NamedTuple):
  """The simulated cluster of a run.

  Attributes:
    workers: speeds, step time, jitter, stragglers, what a node's workers share.
    network: `cluster.preset`'s when one is named (its numbers win over the fields).
    overlap: how a synchronous all-reduce overlaps the backward pass (None: not at all).
    message_bytes: the bytes a message is timed as when the clock times a larger model
      than the one trained (`cluster.message_bytes`, or `cluster.workload`'s); 0: the
      trained model's.
  """

  workers: Workers
  network: Network
  overlap: Overlap | None
  message_bytes: float


def network_from_config(cluster: Any, shares: Mapping[str, float] | None = None) -> Network:
  """The configured network: `cluster.preset`'s when one is named, else the fields';
  `cluster.transport`, when set, gives the links' achieved share of line rate (else a
  preset's own transports', or line rate for a network given by its fields). `shares`:
  transports' shares other than the fitted ones ({"tcp": 0.9}: the clock's robustness)."""
  def share(transport: str | None, default: float) -> float:
    if transport is None:
      return default
    return (shares or {}).get(transport, TRANSPORTS[transport].value)

  if cluster.get("preset"):
    preset = get_preset(cluster.preset)
    network = preset.network
    network = dataclasses.replace(
        network, efficiency=share(preset.transport, network.efficiency),
        intra_efficiency=share(preset.intra_transport, network.intra_efficiency))
  else:
    network = Network(bandwidth=cluster.bandwidth, latency=cluster.latency,
                      topology=cluster.topology, intra_bandwidth=cluster.intra_bandwidth,
                      workers_per_node=cluster.workers_per_node,
                      inter_topology=cluster.get("inter_topology", "ring"))
  if cluster.get("transport"):
    achieved = share(cluster.transport, 1.0)
    network = dataclasses.replace(network, efficiency=achieved, intra_efficiency=achieved)
  return network


def transports_of(cluster: Any) -> set[str]:
  """The transports whose shares time the configured network."""
  if cluster.get("transport"):
    return {cluster.transport}
  if cluster.get("preset"):
    preset = get_preset(cluster.preset)
    return {t for t in (preset.transport, preset.intra_transport) if t is not None}
  return set()


def overlap_from_config(cluster: Any,
                        gradients: tuple[tuple[float, float], ...] = ()) -> Overlap | None:
  """How a synchronous all-reduce overlaps the backward pass (None: not at all);
  `gradients`: the timed model's in backward order (`models.gradient_profile`)."""
  if cluster.get("overlap", "none") == "none":
    return None
  return Overlap(backward_share=cluster.backward_share, bucket_bytes=cluster.bucket_bytes,
                 gradients=gradients)


def from_config(cluster: Any, step_time: float, samples_per_step: int = 1,
                gradients: tuple[tuple[float, float], ...] = (),
                shares: Mapping[str, float] | None = None) -> ClusterSpec:
  """The cluster of a config's `cluster` section, its workers taking `step_time` seconds
  per step at speed 1 on `samples_per_step` samples (a named `cluster.workload`'s
  step time, batch and message win); `shares`: as `network_from_config`'s."""
  message_bytes = cluster.get("message_bytes") or 0
  if cluster.get("workload"):
    load = WORKLOADS[cluster.workload]
    step_time, samples_per_step = load.step_time, load.samples_per_step
    message_bytes = load.message_bytes
  network = network_from_config(cluster, shares)
  speeds = tuple(cluster.speeds) or (1.0,) * cluster.num_workers
  workers = Workers(speeds=speeds, step_time=step_time, jitter=cluster.jitter,
                    straggler_prob=cluster.straggler_prob,
                    straggler_slowdown=cluster.straggler_slowdown, seed=cluster.seed,
                    node_size=network.workers_per_node,
                    node_contention=cluster.get("node_contention", 0.0),
                    interference=cluster.get("interference", 0.0),
                    samples_per_step=samples_per_step)
  return ClusterSpec(workers, network, overlap_from_config(cluster, gradients), message_bytes)
