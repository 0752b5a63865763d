"""The simulated clock against published scaling measurements of data-parallel training.

Each case is a measurement as published (its source, table or figure, and setup), a row of
odsgd_jax/cluster/measurements/cases.csv (what each column holds: that folder's README.md);
the clock is configured from the setup's own numbers only: gradient bytes and their
backward order from the model (`odsgd_jax.models.gradient_profile`), per-step compute
from the one-GPU throughput at the stated batch, links at line rate (links.csv) with their
transport's achieved fraction, the library's topology and bucket size. It predicts the
weak-scaling efficiency T(base) / T(N) of synchronous SGD (the ssgd timeline, averaged
over ticks with noisy workers) and is compared with the published figure.

The 31 cases before the protocol of docs/clock.md were all seen while the model was built;
of them the 1st, 3rd, 5th, ... are fitted (the constants in
odsgd_jax/cluster/_calibration.py marked fitted were chosen on them). Later cases come in
batches, each scored once with the clock as it stood (its first look, written into its row
by the commit that scores the batch); their first-look error is the held-out error
(docs/clock.md, "The protocol"). A new batch is new rows, not code.
"""

import csv
import dataclasses
import functools
import json
import math
import os
from typing import Sequence

import numpy as np

from odsgd_jax.cluster import Network, Overlap, SynchronousTimeline, Workers, calibration

MEASUREMENTS = os.path.join(os.path.dirname(os.path.abspath(__file__)), "measurements")

# The clock's revisions so far (docs/clock.md). A case's first look was computed at a
# revision; while none has been made since, its prediction is its first look
# (tests/test_clock_terms.py).
REVISION = 3


def _rows(name: str) -> list[dict[str, str]]:
  with open(os.path.join(MEASUREMENTS, name), encoding="utf-8", newline="") as f:
    return list(csv.DictReader(f))


SOURCES: dict[str, str] = {row["source"]: row["what"] for row in _rows("sources.csv")}
# Line rates in bytes/s, one direction, by name (links.csv says where each comes from).
LINKS: dict[str, float] = {row["link"]: float(row["bytes_per_s"]) for row in _rows("links.csv")}

# Bytes of a gradient message: a float32 copy of the parameters.
_PROFILES = {  # name: (flax model, options) for odsgd_jax.models.gradient_profile
    "resnet50": ("resnet50", ()),
    "resnet101": ("resnet50", (("stage_sizes", (3, 4, 23, 3)),)),
    "resnet152": ("resnet50", (("stage_sizes", (3, 8, 36, 3)),)),
    "vgg16": ("vgg16", ()),
}
# Models with no flax model here: (parameters, layers), their layers taken as equal in size
# and in backward work.
_EQUAL_LAYERS = {
    "inception_v3": (23_851_784, 95),  # Keras InceptionV3 with its 1000-class top: 94
    # convolutions and the classifier
    "transformer_xl_large": (257_000_000, 18),  # Dai et al. 2019, Table 1 (WikiText-103
    # large); its 18 layers (the adaptive embedding shared with the softmax not apart)
    "bert_large": (340_000_000, 24),  # Devlin et al. 2019: BERT-large, 24 layers
    "bert_base": (110_000_000, 12),  # Devlin et al. 2019: BERT-base, 12 layers
    "efficientnet_b0": (5_300_000, 18),  # Tan & Le 2019, Table 2; stem, 16 MBConv, head
    "efficientnet_b4": (19_000_000, 34),  # Tan & Le 2019, Table 2; stem, 32 MBConv, head
}
# Bucket bytes by library: DDP's bucket_cap_mb=25; Horovod's fusion buffer (64 MiB);
# TensorFlow's parameter-server modes and Caffe2 send each variable on its own as soon as
# it is ready; TensorFlow's replicated mode all-reduces the gradients once the backward
# pass is done, and so do DeepLearningExamples' BERT scripts after the last accumulated
# micro-batch (None: no overlap); PaddlePaddle's fused all-reduce sends groups of 32 MiB
# (its BuildStrategy's fuse_grad_size_in_MB).
BUCKETS = {"ddp": 25 * 2**20, "horovod": 64 * 2**20, "per_variable": 1.0,
           "tf_replicated": None, "post_accumulation": None, "paddle_fused": 32 * 2**20}
# A case's inputs that its source does not state, each marked in the validation table:
# the links or their line rates (taken from the hardware's documentation, or a bound),
# the number of nodes, the batch per GPU, one GPU's rate (another table's or another
# batch's), the library's bucketing.
INFERRED = ("interconnect", "nodes", "batch", "compute", "library")


@dataclasses.dataclass(frozen=True)
class Case:
  """A published scaling measurement and its setup."""

  source: str
  where: str
  model: str
  batch: int  # per GPU (a micro-batch, with gradient accumulation)
  images_per_s: float  # one GPU at that batch, measured (`compute_from` says where)
  gpus: int
  per_node: int
  intra: tuple[float, str]  # (line rate bytes/s, transport) inside a node
  library: str  # key of BUCKETS
  published: float  # scaling efficiency (weak; strong where the accumulation falls)
  baseline_gpus: int = 1
  inter: tuple[float, str, str] | None = None  # (line rate, transport, topology)
  servers: int = 1  # parameter-server shards (a "ps" topology)
  colocated: bool = False  # the shards run on the workers' nodes
  round_robin: bool = False  # variables dealt to the shards in turn (TensorFlow's default)
  latency: float = 5e-6
  compute_from: str = "same table"
  family: str = ""  # the source and setup: docs/clock.md's families
  # Gradient accumulation: micro-batches per step at `gpus` and at `baseline_gpus` (strong
  # scaling: the global batch fixed, so fewer of them on more GPUs); the all-reduce runs
  # once per step.
  accumulation: int = 1
  baseline_accumulation: int = 1
  half_message: bool = False  # the gradients travel in half precision
  batch_name: str = ""  # the protocol's batch it came in ("": before the protocol)
  first_look: float | None = None  # the predicted efficiency when first scored, or None
  first_look_revision: int | None = None  # the clock's REVISION then
  inferred: tuple[str, ...] = ()  # of INFERRED: inputs the source does not state

  @property
  def name(self) -> str:
    return f"{self.source}: {self.model}, {self.gpus} GPUs ({self.where})"


def _efficiency(row: dict[str, str], gpus: int, images_per_s: float,
                baseline_gpus: int) -> float:
  """The scaling efficiency a row's measurement gives, by its `efficiency_from`: a
  throughput on `gpus` against one GPU's ("throughput"), against the baseline's
  ("throughput_vs_baseline"), a speedup over the baseline ("speedup"), or the figure as
  published ("published"); rounded to 4 places."""
  measured, rule = float(row["measured"]), row["efficiency_from"]
  if rule == "throughput":
    return round(measured / (gpus * images_per_s), 4)
  if rule == "throughput_vs_baseline":
    return round(measured / float(row["measured_baseline"]) / (gpus / baseline_gpus), 4)
  if rule == "speedup":
    return round(measured / (gpus / baseline_gpus), 4)
  if rule == "published":
    return measured
  raise ValueError(f"cases.csv: efficiency_from={rule!r} is not one of throughput, "
                   f"throughput_vs_baseline, speedup, published")


def _case(row: dict[str, str]) -> Case:
  gpus, images_per_s = int(row["gpus"]), float(row["images_per_s"])
  baseline_gpus = int(row["baseline_gpus"])
  flag = lambda name: row[name] == "1"
  return Case(
      source=row["source"], where=row["where"], model=row["model"], batch=int(row["batch"]),
      images_per_s=images_per_s, gpus=gpus, per_node=int(row["per_node"]),
      intra=(LINKS[row["intra_link"]], row["intra_transport"]), library=row["library"],
      published=_efficiency(row, gpus, images_per_s, baseline_gpus),
      baseline_gpus=baseline_gpus,
      inter=((LINKS[row["inter_link"]], row["inter_transport"], row["inter_topology"])
             if row["inter_link"] else None),
      servers=int(row["servers"]), colocated=flag("colocated"), round_robin=flag("round_robin"),
      latency=float(row["latency"]), compute_from=row["compute_from"], family=row["family"],
      accumulation=int(row["accumulation"]),
      baseline_accumulation=int(row["baseline_accumulation"]),
      half_message=flag("half_message"), batch_name=row["batch_name"],
      first_look=float(row["first_look"]) if row["first_look"] else None,
      first_look_revision=int(row["first_look_revision"]) if row["first_look"] else None,
      inferred=_inferred(row["inferred"]))


def _inferred(text: str) -> tuple[str, ...]:
  marks = tuple(mark for mark in text.split(";") if mark)
  unknown = sorted(set(marks) - set(INFERRED))
  if unknown:
    raise ValueError(f"cases.csv: inferred={text!r}: {unknown[0]!r} is not one of "
                     f"{', '.join(INFERRED)}")
  return marks


CASES: tuple[Case, ...] = tuple(_case(row) for row in _rows("cases.csv"))


def is_fitted(index: int) -> bool:
  """The constants' fit set: of the 31 cases before the protocol, the 1st, 3rd, 5th, ...
  (index 0, 2, 4, ...); no case of a later batch (none has been fitted on)."""
  return not CASES[index].batch_name and index % 2 == 0


@functools.lru_cache(maxsize=None)
def _profile(model: str) -> tuple[tuple[float, float], ...]:
  if model in _EQUAL_LAYERS:  # no flax model here: equal layers, in size and in work
    parameters, layers = _EQUAL_LAYERS[model]
    return tuple((4.0 * parameters / layers, (i + 1) / layers) for i in range(layers))
  from odsgd_jax.models import gradient_profile  # flax: only when a case needs it
  name, options = _PROFILES[model]
  return gradient_profile(name, (224, 224, 3), **dict(options))


def message_bytes(model: str) -> float:
  return sum(size for size, _ in _profile(model))


_RESNET_STAGES = {"resnet50": (3, 4, 6, 3), "resnet101": (3, 4, 23, 3),
                  "resnet152": (3, 8, 36, 3)}


@functools.lru_cache(maxsize=None)
def tf_variables(model: str) -> tuple[float, ...]:
  """Bytes of each variable tf_cnn_benchmarks (at the benchmarks page's hash) puts on the
  parameter servers, in the order it creates them: the global step first, then per
  convolution its kernel and batch norm's beta (and gamma for the ResNets, whose batch
  norm scales), then the classifier's weights and biases. Inception V3's layers are
  `_profile`'s; its betas and biases are taken as 0 bytes (< 0.1%)."""
  variables = [8.0]  # int64 global step
  if model == "inception_v3":
    for size, _ in reversed(_profile(model)):  # the forward order
      variables.extend((size, 0.0))
    return tuple(variables)

  def conv(inputs, outputs, size):
    variables.extend((4.0 * size * size * inputs * outputs, 4.0 * outputs, 4.0 * outputs))

  conv(3, 64, 7)
  channels = 64
  for blocks, depth in zip(_RESNET_STAGES[model], (256, 512, 1024, 2048), strict=True):
    for _ in range(blocks):  # ResNet v1 bottleneck: the projection first
      if channels != depth:
        conv(channels, depth, 1)
      conv(channels, depth // 4, 1)
      conv(depth // 4, depth // 4, 3)
      conv(depth // 4, depth, 1)
      channels = depth
  variables.extend((4.0 * 2048 * 1000, 4.0 * 1000))
  return tuple(variables)


def round_robin_share(variables: Sequence[float], servers: int) -> float:
  """The busiest shard's share of the bytes when variables are dealt to `servers`
  shards in turn (replica_device_setter's default strategy)."""
  loads = [sum(variables[shard::servers]) for shard in range(servers)]
  return max(loads) / sum(loads)


def network(case: Case, values: dict[str, float], gpus: int) -> Network:
  """The case's network with transports' achieved fractions (`values` overrides the
  fitted ones)."""
  def achieved(transport: str) -> float:
    return values.get(transport, calibration.TRANSPORTS[transport].value)

  intra_rate, intra_transport = case.intra
  if case.inter is None or gpus <= case.per_node:
    topology = "ps" if case.library == "per_variable" and case.servers > 1 else "ring"
    return Network(bandwidth=intra_rate, latency=case.latency, topology=topology,
                   efficiency=achieved(intra_transport), servers=case.servers)
  rate, transport, inter_topology = case.inter
  share = (round_robin_share(tf_variables(case.model), case.servers)
           if case.round_robin else None)
  return Network(bandwidth=rate, latency=case.latency, topology="hierarchical",
                 intra_bandwidth=intra_rate, workers_per_node=case.per_node,
                 inter_topology=inter_topology, efficiency=achieved(transport),
                 intra_efficiency=achieved(intra_transport), servers=case.servers,
                 colocated=case.colocated, shard_share=share)


def seconds_per_step(case: Case, gpus: int, values: dict[str, float], ticks: int = 64,
                     accumulation: int = 1) -> float:
  """Mean simulated seconds of an ssgd step of `gpus` workers, each computing
  `accumulation` micro-batches before the step's one exchange (same noise draws for every
  case: seed 0)."""
  samples = accumulation * case.batch
  workers = Workers((1.0,) * gpus, samples / case.images_per_s,
                    jitter=values.get("noise", calibration.NOISE.value),
                    node_size=min(case.per_node, gpus),
                    node_contention=values.get("node_contention",
                                               calibration.NODE_CONTENTION.value),
                    samples_per_step=samples,
                    interference=values.get("interference", calibration.INTERFERENCE.value))
  bucket = BUCKETS[case.library]
  # the backward pass that produces the gradients is the last micro-batch's: the rest of
  # the step is "forward" work that no bucket can overlap
  overlap = None if bucket is None else Overlap(
      backward_share=Overlap.backward_share / accumulation, bucket_bytes=bucket,
      gradients=_profile(case.model))
  timeline = SynchronousTimeline(workers, network(case, values, gpus),
                                 message_bytes(case.model) / (2 if case.half_message else 1),
                                 overlap)
  return float(np.mean([timeline.cost(tick).duration for tick in range(ticks)]))


def predict(case: Case, values: dict[str, float] | None = None) -> float:
  """The clock's scaling efficiency for the case: the time a micro-batch takes on the
  baseline over the time it takes on N GPUs (T(base) / T(N) without accumulation)."""
  values = calibration.fitted_values() if values is None else values
  base = seconds_per_step(case, case.baseline_gpus, values,
                          accumulation=case.baseline_accumulation)
  many = seconds_per_step(case, case.gpus, values, accumulation=case.accumulation)
  return (base / case.baseline_accumulation) / (many / case.accumulation)


IDEAL = {"noise": 0.0, "interference": 0.0, "node_contention": 0.0,
         **{name: 1.0 for name in calibration.TRANSPORTS}}


def errors(values: dict[str, float] | None = None, cases: Sequence[Case] = CASES) -> np.ndarray:
  """Predicted minus published efficiency, in points, per case."""
  return np.array([100 * (predict(case, values) - case.published) for case in cases])


GRIDS = {
    "noise": np.round(np.arange(0, 0.1001, 0.005), 4),
    "interference": np.round(np.arange(0, 1.0001, 0.05), 4),
    "node_contention": np.round(np.arange(0, 30.01e-6, 1.5e-6), 8),
    "pcie": np.round(np.arange(0.1, 1.0001, 0.05), 4),
    "tcp": np.round(np.arange(0.05, 1.0001, 0.05), 4),
    "grpc": np.round(np.arange(0.05, 1.0001, 0.05), 4),
    "tf_nccl": np.round(np.arange(0.05, 1.0001, 0.05), 4),
}


def fitted_cases() -> list[Case]:
  return [case for i, case in enumerate(CASES) if is_fitted(i)]


def fitted_error(values: dict[str, float], cases: Sequence[Case] | None = None) -> float:
  """Mean absolute error in points on `cases` (default: the fitted rows)."""
  cases = fitted_cases() if cases is None else cases
  return float(np.mean(np.abs(errors(values, cases))))


def fit(max_rounds: int = 20, cases: Sequence[Case] | None = None) -> dict[str, float]:
  """Coordinate descent over GRIDS from the ideal clock's values, minimizing the mean
  absolute error on `cases` (default: the fitted rows; ties: the smaller value), until a
  whole round moves no constant: every constant is then the best on its grid given the
  others."""
  values = {name: float(GRIDS[name][-1] if name in calibration.TRANSPORTS
                  else GRIDS[name][0]) for name in calibration.FITTED}
  for _ in range(max_rounds):
    before = dict(values)
    for name in calibration.FITTED:
      scores = [(fitted_error({**values, name: float(v)}, cases), float(v))
                for v in GRIDS[name]]
      values[name] = min(scores)[1]
    if values == before:
      return values
  raise RuntimeError(f"the fit did not settle in {max_rounds} rounds: {values}")


@dataclasses.dataclass(frozen=True)
class Fold:
  """One fold of the leave-one-family-out cross-validation: the constants fitted without
  `family`, and that family's errors (points) under them, by case name."""

  family: str
  values: dict[str, float]
  errors: dict[str, float]


def cross_validate(cases: Sequence[Case], fitted: Sequence[bool], fit_on=None,
                   predict_error=None) -> list[Fold]:
  """Leave one family out: for each family with a fitted case, `fit_on(training cases)`
  on the fitted cases of the other families, then `predict_error(values, case)` for every
  case of the family left out. Defaults: this module's `fit` and `errors`; a test passes
  its own, to check the folds by hand."""
  fit_on = fit_on or (lambda training: fit(cases=training))
  predict_error = predict_error or (lambda values, case: float(errors(values, [case])[0]))
  families = list(dict.fromkeys(c.family for c, f in zip(cases, fitted, strict=True) if f))
  folds = []
  for family in families:
    training = [c for c, f in zip(cases, fitted, strict=True) if f and c.family != family]
    values = fit_on(training)
    folds.append(Fold(family, values, {c.name: predict_error(values, c)
                                       for c in cases if c.family == family}))
  return folds


# The folds of the cross-validation over the cases the constants are fitted on (`python
# scripts/validate_clock.py --cross-validate` writes this file; tests/test_clock_terms.py
# checks that each fold's constants are its fit's optimum).
ERROR_FILE = os.path.join(os.path.dirname(os.path.abspath(__file__)), "clock_error.json")


def stored_folds() -> list[Fold]:
  """The cross-validation's folds as stored in ERROR_FILE ([] when it has not been run)."""
  if not os.path.exists(ERROR_FILE):
    return []
  with open(ERROR_FILE, encoding="utf-8") as f:
    return [Fold(**fold) for fold in json.load(f)["folds"]]


def out_of_family_error(folds: Sequence[Fold] | None = None) -> float:
  """The clock's out-of-family error in points: the mean absolute error of every case
  predicted by the fold that left its family out (nan before the cross-validation)."""
  folds = stored_folds() if folds is None else folds
  values = [abs(e) for fold in folds for e in fold.errors.values()]
  return float(np.mean(values)) if values else math.nan


def _fitted_transports(case: Case) -> set[str]:
  used = {case.intra[1]} | ({case.inter[1]} if case.inter else set())
  return used & set(calibration.FITTED)


def single_family_transports() -> dict[str, str]:
  """{transport: family} for each fitted transport share that only one fitted family
  informs: left out, nothing constrains it, and its fold measures a setup on a transport
  the clock has never seen."""
  families: dict[str, set[str]] = {}
  for case in fitted_cases():
    for transport in _fitted_transports(case):
      families.setdefault(transport, set()).add(case.family)
  return {t: next(iter(f)) for t, f in families.items() if len(f) == 1}


def known_transport_error(folds: Sequence[Fold] | None = None) -> float:
  """The out-of-family error of the families whose transports another fitted family
  informs (or a citation gives): the error to expect on a new setup whose transport's
  share is known, the band every scaling efficiency carries (nan before the
  cross-validation)."""
  folds = stored_folds() if folds is None else folds
  blind = set(single_family_transports().values())
  return out_of_family_error([fold for fold in folds if fold.family not in blind])


def constant_ranges(folds: Sequence[Fold] | None = None) -> dict[str, tuple[float, float]]:
  """Each fitted constant's range over the folds and its fitted value: the ends at which
  a speed verdict is recomputed."""
  folds = stored_folds() if folds is None else folds
  if not folds:
    raise ValueError(f"{ERROR_FILE} holds no cross-validation: run `python "
                     f"scripts/validate_clock.py --cross-validate` (about 25 minutes) first")
  fitted = calibration.fitted_values()
  return {name: (min([fitted[name], *[f.values[name] for f in folds]]),
                 max([fitted[name], *[f.values[name] for f in folds]]))
          for name in calibration.FITTED}
