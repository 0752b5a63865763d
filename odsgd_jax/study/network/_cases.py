"""The measured cases: which strategies, models and networks, and what the clock, the
timeline that matches what ran, and a naive model predict for each, from inputs known
before the case is measured (its compute time, the shaped rate and delay, the process
count and the message bytes)."""

import dataclasses
import math
from typing import Any, Mapping, Sequence

import numpy as np

from odsgd_jax import cluster
from odsgd_jax.cluster import calibration

# name: (model, its options, input shape, batch per worker). The wide MLP's 4.4 MB message
# and 4 ms of compute make its steps communication-bound; LeNet-5 on 28 x 28 images at
# batch 128 (0.43 MB, about 20 ms a step on one core) makes compute weigh more. CNN1D's
# step (2 ms on 90 kB) was too light for it.
MODELS = {
    "mlp_wide": ("mlp", {"hidden_sizes": [1024, 1024]}, (40,), 16),
    "lenet5": ("lenet5", {}, (28, 28, 1), 128),
}

ODSGD = {"local_lr": 0.1, "warmup_steps": 0}  # timed in its settled, pipelined ticks


@dataclasses.dataclass(frozen=True)
class Entry:
  """A strategy as measured: `steps` ticks per timed window (a whole number of rounds)."""

  label: str
  strategy: str
  options: Mapping[str, Any]
  family: str
  steps: int = 2


ENTRIES = (
    Entry("ssgd", "ssgd", {}, "synchronous"),
    Entry("local_sgd p2", "local_sgd", {"period": 2}, "periodic", 2),
    Entry("local_sgd p4", "local_sgd", {"period": 4}, "periodic", 4),
    Entry("local_sgd p8", "local_sgd", {"period": 8}, "periodic", 8),
    Entry("easgd", "easgd", {}, "periodic"),
    Entry("odsgd", "odsgd", ODSGD, "pipelined"),
    Entry("pseudo_sync", "pseudo_sync", {}, "pipelined"),
    Entry("gossip", "gossip", {}, "gossip"),
    Entry("ssgd + topk", "ssgd", {"compression": "topk:0.01"}, "compressed"),
    Entry("ssgd + powersgd", "ssgd", {"compression": "powersgd:2"}, "compressed"),
    Entry("odsgd + topk", "odsgd", {**ODSGD, "compression": "topk:0.01"}, "compressed"),
    Entry("odsgd + powersgd", "odsgd", {**ODSGD, "compression": "powersgd:2"}, "compressed"),
)
ENTRY = {entry.label: entry for entry in ENTRIES}
FAMILIES = ("periodic", "pipelined", "gossip", "compressed")


@dataclasses.dataclass(frozen=True)
class Network:
  """An emulated network: the loopback's rate, a one-way delay per packet, and how many
  processes share it."""

  model: str
  processes: int
  rate_mbit: float
  delay_ms: float

  @property
  def key(self) -> str:
    return f"{self.model}_p{self.processes}_r{self.rate_mbit:g}_d{self.delay_ms:g}"


# The first grid (first looks before any measurement) and the second, on which a revision
# is judged (other rates and a process count the first never used).
GRIDS = {
    "first": {"models": tuple(MODELS), "processes": (2, 4), "rates_mbit": (50, 300, 2000),
              "delays_ms": (0,)},
    "second": {"models": tuple(MODELS), "processes": (3,), "rates_mbit": (100, 1000),
               "delays_ms": (0,)},
}


def networks(models: Sequence[str], processes: Sequence[int], rates_mbit: Sequence[float],
             delays_ms: Sequence[float]) -> list[Network]:
  return [Network(m, p, r, d) for m in models for p in processes for r in rates_mbit
          for d in delays_ms]


def overlaps_compute(entry: Entry) -> bool:
  """Whether the entry's timeline runs its exchange beside the compute."""
  from odsgd_jax.strategies import get_strategy
  definition = get_strategy(entry.strategy)
  return definition.timeline.overlaps_compute(**definition.timeline_options(**entry.options))


def case_key(network: Network, label: str) -> str:
  return f"{network.key}/{label}"


@dataclasses.dataclass(frozen=True)
class Loopback:
  """What a message over gloo on the shaped loopback costs beyond the rate: `latency_s` per
  message hop (added to the delay) and the achieved share of the rate (`efficiency`).
  The first looks take neither (0 and 1); a revision fits them (`fit_loopback`)."""

  latency_s: float = 0.0
  efficiency: float = 1.0


# The revision of the loopback's terms, fitted on the first grid's measured cases after
# their first looks were committed (`python scripts/measure_network.py --fit`: the cases
# whose timeline runs the exchange after the compute); judged by the second grid's first
# looks, taken before it was measured. A message hop costs 9.7 ms beyond the bytes: gloo's
# TCP messages between processes that share 2 cores with their own compute.
REVISION: Loopback | None = Loopback(latency_s=0.0097, efficiency=1.0)


def clock_network(network: Network, loopback: Loopback = Loopback()) -> cluster.Network:
  """The clock's network for an emulated one: a ring whose links each carry 1/P of the
  loopback's rate (every process's traffic shares the one loopback, so a ring all-reduce
  of S bytes moves 2(P-1) S over it: 2(P-1)/P S / (rate/P)), and the delay as the latency
  of each message; the rate is taken as achieved (transport "measured") unless `loopback`
  says otherwise."""
  return cluster.Network(bandwidth=network.rate_mbit * 1e6 / 8 / network.processes,
                         latency=network.delay_ms / 1e3 + loopback.latency_s, topology="ring",
                         efficiency=loopback.efficiency)


def _timeline(entry: Entry, network: Network, step_time: float, model_bytes: float,
              overlap: bool, loopback: Loopback):
  from odsgd_jax.strategies import get_strategy
  workers = cluster.Workers(speeds=(1.0,) * network.processes, step_time=step_time,
                            jitter=calibration.NOISE.value, seed=0,
                            interference=calibration.INTERFERENCE.value)
  # the claims' overlap: DDP's buckets (a message under one bucket is not overlapped)
  return get_strategy(entry.strategy).make_timeline(
      workers, clock_network(network, loopback), model_bytes,
      cluster.Overlap() if overlap else None, **entry.options)


def _durations(timeline, charges: Sequence[Sequence[float]]) -> np.ndarray:
  durations = []
  for tick, (sends, sent, gathers) in enumerate(charges):
    timeline.schedule(tick)
    durations.append(timeline.cost(tick, round_end=bool(sends), message_bytes=sent or None,
                                   gathers=bool(gathers)).duration)
  return np.asarray(durations)


def _compute_draws(network: Network, compute_s: float, ticks: int) -> np.ndarray:
  """The slowest of the P workers' noisy compute times on each tick, as the clock draws them."""
  workers = cluster.Workers(speeds=(1.0,) * network.processes, step_time=compute_s,
                            jitter=calibration.NOISE.value, seed=0)
  return np.asarray([workers.compute_times(t).max() for t in range(ticks)])


def sequential_step(entry: Entry, network: Network, compute_s: float, model_bytes: float,
                    charges: Sequence[Sequence[float]], timed_from: int,
                    loopback: Loopback = Loopback()) -> float:
  """The sequential prediction alone (see `predictions`)."""
  communication = _durations(
      _timeline(entry, network, 1e-12, model_bytes, False, loopback), charges)
  steps = _compute_draws(network, compute_s, len(charges)) + communication
  return float(steps[timed_from:].mean())


def predictions(entry: Entry, network: Network, compute_s: float, model_bytes: float,
                charges: Sequence[Sequence[float]], timed_from: int,
                revised: Loopback | None = None) -> dict[str, float]:
  """Seconds per step of the timed ticks (`charges[timed_from:]`), by three models:

  - clock: the strategy's timeline with the claims' terms (noise, interference, DDP's
    overlap), the step time the measured compute;
  - sequential: every tick's communication after its compute, as one XLA:CPU program runs
    them (compute as the clock draws it, plus what the same timeline charges with no
    compute);
  - naive: compute + P x (bytes a process sends) / rate;

  and, given a `revised` loopback, the first two again on it ("clock revised",
  "sequential revised").
  """
  def clock(loopback):
    durations = _durations(_timeline(entry, network, compute_s, model_bytes, True, loopback),
                           charges)
    return float(durations[timed_from:].mean())

  sent = np.asarray([(sent or model_bytes) if sends else 0.0 for sends, sent, _ in charges])
  naive = compute_s + network.processes * sent * 8 / (network.rate_mbit * 1e6)
  arguments = (entry, network, compute_s, model_bytes, charges, timed_from)
  looks = {"clock": clock(Loopback()), "sequential": sequential_step(*arguments),
           "naive": float(naive[timed_from:].mean())}
  if revised is not None:
    looks["clock revised"] = clock(revised)
    looks["sequential revised"] = sequential_step(*arguments, revised)
  return looks


MODELS_OF_PREDICTION = ("clock", "sequential", "naive", "clock revised", "sequential revised")


def scores(cases: Mapping[str, Mapping[str, Any]], within: float = 0.10) -> dict[str, Any]:
  """Per family and model of prediction: the error of the predicted step-time ratio to ssgd
  on the same network (log(predicted / measured)), the share within `within`, the mean
  |log error|, and the skill against the constant ratio 1 and against the naive model
  (1 - mean |log error| / theirs). `cases`: {case key: {"network", "label", "measured",
  "first_look": {model: seconds}}}."""
  models = [m for m in MODELS_OF_PREDICTION
            if all(m in case["first_look"] for case in cases.values())]
  ratios: dict[str, list[dict[str, float]]] = {family: [] for family in FAMILIES}
  absolute: dict[str, list[float]] = {model: [] for model in models}
  for key, case in cases.items():
    network, label = key.split("/", 1)
    baseline = cases.get(f"{network}/ssgd")
    for model in models:
      absolute[model].append(math.log(case["first_look"][model] / case["measured"]))
    if label == "ssgd" or baseline is None:
      continue
    measured = case["measured"] / baseline["measured"]
    row = {"measured": measured, "constant": math.log(1 / measured)}
    for model in models:
      row[model] = math.log(case["first_look"][model] / baseline["first_look"][model] / measured)
    ratios[ENTRY[label].family].append(row)
  table = {}
  everything = [row for family_rows in ratios.values() for row in family_rows]
  for family, rows in [*ratios.items(), ("all", everything)]:
    if not rows:
      continue
    errors = {m: np.abs([r[m] for r in rows]) for m in (*models, "constant")}
    table[family] = {
        "cases": len(rows),
        **{m: {"within": float(np.mean(errors[m] <= math.log1p(within))),
               "mean_abs_log": float(errors[m].mean()),
               "skill_vs_constant": _skill(errors[m], errors["constant"]),
               "skill_vs_naive": _skill(errors[m], errors["naive"])}
           for m in models}}
  return {"ratio": table, "models": models,
          "absolute": {m: {"mean_abs_log": float(np.mean(np.abs(v))),
                           "within": float(np.mean(np.abs(v) <= math.log1p(within)))}
                       for m, v in absolute.items() if v}}


def _skill(errors: np.ndarray, reference: np.ndarray) -> float:
  return float(1 - errors.mean() / reference.mean()) if reference.mean() > 0 else float("nan")
