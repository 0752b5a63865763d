"""The cluster a config describes: its `cluster` section turned into workers, a network
and the all-reduce overlap, in one place (the clock, the scripts and the studies read
these, never the fields)."""

from typing import Any, NamedTuple

from odsgd_jax.cluster._hardware import Network, Workers
from odsgd_jax.cluster._presets import get_preset
from odsgd_jax.cluster._timelines import Overlap


class ClusterSpec(NamedTuple):
  """The simulated cluster of a run.

  Attributes:
    workers: speeds, step time, jitter and stragglers.
    network: `cluster.preset`'s when one is named (its numbers win over the fields).
    overlap: how a synchronous all-reduce overlaps the backward pass (None: not at all).
    message_bytes: the bytes a message is timed as when the clock times a larger model
      than the one trained (`cluster.message_bytes`); 0: the trained model's.
  """

  workers: Workers
  network: Network
  overlap: Overlap | None
  message_bytes: float


def network_from_config(cluster: Any) -> Network:
  """The configured network: `cluster.preset`'s when one is named, else the fields'."""
  if cluster.get("preset"):
    return get_preset(cluster.preset).network
  return Network(bandwidth=cluster.bandwidth, latency=cluster.latency,
                 topology=cluster.topology, intra_bandwidth=cluster.intra_bandwidth,
                 workers_per_node=cluster.workers_per_node,
                 inter_topology=cluster.get("inter_topology", "ring"))


def overlap_from_config(cluster: Any) -> Overlap | None:
  """How a synchronous all-reduce overlaps the backward pass (None: not at all)."""
  if cluster.get("overlap", "none") == "none":
    return None
  return Overlap(backward_share=cluster.backward_share, bucket_bytes=cluster.bucket_bytes)


def from_config(cluster: Any, step_time: float) -> ClusterSpec:
  """The cluster of a config's `cluster` section, its workers taking `step_time` seconds
  per step at speed 1."""
  speeds = tuple(cluster.speeds) or (1.0,) * cluster.num_workers
  workers = Workers(speeds=speeds, step_time=step_time, jitter=cluster.jitter,
                    straggler_prob=cluster.straggler_prob,
                    straggler_slowdown=cluster.straggler_slowdown, seed=cluster.seed)
  return ClusterSpec(workers, network_from_config(cluster), overlap_from_config(cluster),
                     cluster.get("message_bytes") or 0)
