"""What a simulated cluster is made of: workers that compute, a network that moves bytes."""

import dataclasses
import math

import numpy as np

TOPOLOGIES = ("ring", "tree", "torus", "ps", "hierarchical")
INTER_TOPOLOGIES = ("ring", "tree", "ps")  # the stage across nodes of "hierarchical"


@dataclasses.dataclass(frozen=True)
class Workers:
  """Per-worker compute time of one step, deterministic in (seed, tick).

  c_i(t) = step_time / speeds[i] * lognormal(0, jitter) * (straggler_slowdown with
  probability straggler_prob, else 1)
           + node_contention * samples_per_step * (node_size - 1).

  The last term is what workers sharing a node share (host CPU, PCIe, input pipeline):
  every sample a further worker on the node processes costs each of them
  `node_contention` seconds.

  Attributes:
    speeds: speed factor per worker (1 = nominal; 0.5 takes twice as long).
    step_time: seconds of one step at speed 1.
    jitter: sigma of the lognormal noise per step (0: none).
    straggler_prob: probability that a worker straggles on a step.
    straggler_slowdown: factor a straggling step takes longer.
    seed: seed of the noise.
    node_size: workers sharing a node (1: none share).
    node_contention: seconds a worker loses per sample of a further worker on its node.
    samples_per_step: a worker's batch.
    interference: seconds a worker's compute is delayed per second of communication that
      runs beside it (collectives compete with compute for the chip's cores and memory).
  """

  speeds: tuple[float, ...]
  step_time: float
  jitter: float = 0.0
  straggler_prob: float = 0.0
  straggler_slowdown: float = 1.0
  seed: int = 0
  node_size: int = 1
  node_contention: float = 0.0
  interference: float = 0.0
  samples_per_step: int = 1

  def __post_init__(self):
    if not self.speeds or min(self.speeds) <= 0:
      raise ValueError(f"speeds must be positive, got {self.speeds}")
    if self.step_time <= 0:
      raise ValueError(f"step_time must be positive, got {self.step_time}")
    if self.node_size < 1 or self.node_contention < 0 or self.interference < 0:
      raise ValueError(f"node_size must be >= 1, node_contention and interference >= 0, got "
                       f"{self.node_size}, {self.node_contention}, {self.interference}")

  @property
  def num_workers(self) -> int:
    return len(self.speeds)

  def compute_times(self, tick: int) -> np.ndarray:
    """Seconds each worker needs for the step it starts on tick `tick`, shape (N,)."""
    times = self.step_time / np.asarray(self.speeds, np.float64)
    if self.jitter or self.straggler_prob:
      rng = np.random.default_rng([self.seed, tick])
      times = times * np.exp(self.jitter * rng.standard_normal(self.num_workers))
      stragglers = rng.random(self.num_workers) < self.straggler_prob
      times = np.where(stragglers, times * self.straggler_slowdown, times)
    neighbours = min(self.node_size, self.num_workers) - 1
    return times + self.node_contention * self.samples_per_step * neighbours


@dataclasses.dataclass(frozen=True)
class Network:
  """Time to move bytes between workers (an alpha-beta model: latency + bytes / B).

  B is the achieved bandwidth, `bandwidth * efficiency` (inside a node
  `intra_bandwidth * intra_efficiency`): links are given at line rate and the transport
  says how much of it a collective reaches (odsgd_jax/cluster/_calibration.py).

  All-reduce of S bytes over N workers, by topology:
    ring:  2(N-1)/N * S/B + 2(N-1) * latency          (bandwidth-optimal, latency ~ N)
    tree:  2(N-1)/N * S/B + 2 ceil(log2 N) * latency  (NCCL's double binary tree: the
           ring's bandwidth term, latency ~ log N)
    torus: 2(N-1)/N * S/B + 2 sum_d (n_d - 1) * latency, a ring along each dimension of
           a 3-D torus n_1 x n_2 x n_3 = N (TPU ICI)
    ps:    max(N / servers, 1) * S/B + latency  (a parameter server sharded over
           `servers` links, each receiving its 1/servers of every push while sending
           the same of every pull (full duplex); a worker's own link carries S)
    ps, colocated: (N + k - 2)/k * S/B + latency for k = min(servers, N) shards run
           on k of the workers' own nodes (TensorFlow's benchmarks on EC2): a node
           holding a shard carries its shard's pushes from the N-1 other workers and
           its own push to the k-1 other shards on one full-duplex link
    ps, uneven shards: variables are placed whole, so a shard may hold a share s of the
           bytes above 1/servers (`shard_share`): max(N s, 1) * S/B + latency, and
           colocated (1 + (N - 2) s) * S/B + latency on the busiest shard's node (both
           are the even formulas at s = 1/servers)
    hierarchical: a ring inside each node of k workers at the intra-node bandwidth,
           then a ring, tree or sharded server (`inter_topology`) across the N/k nodes.

  Attributes:
    bandwidth: bytes/s of a link at line rate (between nodes; the server's link for
      "ps"; a chip's all-reduce bandwidth for "torus").
    latency: seconds per message (per hop).
    topology: one of TOPOLOGIES.
    intra_bandwidth: bytes/s inside a node at line rate ("hierarchical").
    workers_per_node: workers sharing a node ("hierarchical").
    inter_topology: "ring", "tree" or "ps", the stage across nodes ("hierarchical").
    efficiency: achieved fraction of `bandwidth`.
    intra_efficiency: achieved fraction of `intra_bandwidth`.
    servers: parameter-server shards ("ps", or a "ps" stage across nodes).
    colocated: the shards run on the workers' nodes and share their links.
    shard_share: the busiest shard's share of the bytes, in [1/servers, 1] (how the
      variables were placed: e.g. TensorFlow's round robin); None: an even split.
  """

  bandwidth: float
  latency: float = 0.0
  topology: str = "ring"
  intra_bandwidth: float = 0.0
  workers_per_node: int = 1
  inter_topology: str = "ring"
  efficiency: float = 1.0
  intra_efficiency: float = 1.0
  servers: int = 1
  colocated: bool = False
  shard_share: float | None = None

  def __post_init__(self):
    if self.topology not in TOPOLOGIES:
      raise ValueError(f"topology={self.topology!r} is not one of {TOPOLOGIES}")
    if self.inter_topology not in INTER_TOPOLOGIES:
      raise ValueError(f"inter_topology={self.inter_topology!r} is not one of "
                       f"{INTER_TOPOLOGIES}")
    if self.bandwidth <= 0 or self.latency < 0:
      raise ValueError("bandwidth must be positive and latency non-negative")
    if self.topology == "hierarchical" and (self.intra_bandwidth <= 0
                                            or self.workers_per_node < 1):
      raise ValueError("hierarchical needs intra_bandwidth > 0 and workers_per_node >= 1")
    if not (0 < self.efficiency <= 1 and 0 < self.intra_efficiency <= 1):
      raise ValueError(f"efficiency and intra_efficiency must be in (0, 1], got "
                       f"{self.efficiency}, {self.intra_efficiency}")
    if self.servers < 1:
      raise ValueError(f"servers must be >= 1, got {self.servers}")
    if self.shard_share is not None and not 1 / self.servers <= self.shard_share <= 1:
      raise ValueError(f"shard_share must be in [1/servers, 1] = [{1 / self.servers:g}, 1], "
                       f"got {self.shard_share}")

  @property
  def achieved(self) -> float:
    """Bytes/s a link reaches: `bandwidth * efficiency`."""
    return self.bandwidth * self.efficiency

  def allreduce_time(self, num_workers: int, num_bytes: float) -> float:
    """Averaging `num_bytes` over `num_workers` workers (formulas in the class docstring)."""
    if num_workers <= 1:
      return 0.0
    if self.topology == "ps":
      return _ps(num_workers, num_bytes, self.achieved, self.latency, self.servers,
                 self.colocated, self.shard_share)
    if self.topology == "hierarchical":
      per_node = min(self.workers_per_node, num_workers)
      nodes = -(-num_workers // per_node)
      inside = _ring(per_node, num_bytes, self.intra_bandwidth * self.intra_efficiency,
                     self.latency)
      if self.inter_topology == "ps":
        return inside + _ps(nodes, num_bytes, self.achieved, self.latency, self.servers,
                            self.colocated, self.shard_share)
      return inside + _STAGES[self.inter_topology](nodes, num_bytes, self.achieved,
                                                   self.latency)
    return _STAGES[self.topology](num_workers, num_bytes, self.achieved, self.latency)

  def allgather_time(self, num_workers: int, num_bytes: float) -> float:
    """Every worker receiving every other worker's `num_bytes` message: (N-1) * S/B
    plus the topology's latency term of one pass (ring (N-1), tree ceil(log2 N),
    torus sum_d (n_d - 1)); ps: the server relays N messages to N workers."""
    if num_workers <= 1:
      return 0.0
    if self.topology == "ps":
      return 2 * num_workers * num_bytes / self.achieved + 2 * self.latency
    hops = {"tree": math.ceil(math.log2(num_workers)),
            "torus": sum(n - 1 for n in torus_dims(num_workers))}.get(self.topology,
                                                                         num_workers - 1)
    return (num_workers - 1) * num_bytes / self.achieved + hops * self.latency

  def message_time(self, num_bytes: float) -> float:
    """One worker's message to (or from) a parameter server: S/B + latency."""
    return num_bytes / self.achieved + self.latency


def torus_dims(n: int) -> tuple[int, int, int]:
  """A 3-D torus of n chips with the fewest hops along its rings (n = 128: 4 x 4 x 8)."""
  best = (1, 1, n)
  for a in range(1, round(n ** (1 / 3)) + 2):
    if n % a:
      continue
    for b in range(a, math.isqrt(n // a) + 1):
      if (n // a) % b == 0 and a + b + n // a // b < sum(best):
        best = (a, b, n // a // b)
  return best


def _bandwidth_term(n: int, num_bytes: float, bandwidth: float) -> float:
  return 2 * (n - 1) / n * num_bytes / bandwidth


def _ring(n: int, num_bytes: float, bandwidth: float, latency: float) -> float:
  if n <= 1:
    return 0.0
  return _bandwidth_term(n, num_bytes, bandwidth) + 2 * (n - 1) * latency


def _tree(n: int, num_bytes: float, bandwidth: float, latency: float) -> float:
  if n <= 1:
    return 0.0
  return _bandwidth_term(n, num_bytes, bandwidth) + 2 * math.ceil(math.log2(n)) * latency


def _torus(n: int, num_bytes: float, bandwidth: float, latency: float) -> float:
  if n <= 1:
    return 0.0
  hops = sum(d - 1 for d in torus_dims(n))
  return _bandwidth_term(n, num_bytes, bandwidth) + 2 * hops * latency


def _ps(n: int, num_bytes: float, bandwidth: float, latency: float, servers: int,
        colocated: bool = False, shard_share: float | None = None) -> float:
  if n <= 1:
    return 0.0
  if colocated:  # k = min(servers, n) nodes hold the shards; the busiest holds share s
    share = max(shard_share or 0.0, 1 / min(servers, n))
    return (1 + (n - 2) * share) * num_bytes / bandwidth + latency
  share = 1 / servers if shard_share is None else shard_share
  return max(n * share, 1.0) * num_bytes / bandwidth + latency


_STAGES = {"ring": _ring, "tree": _tree, "torus": _torus}
