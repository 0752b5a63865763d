"""The experiment config's schema, owned by the library: every field of the sections whose
fields are fixed, with its default and the one domain its values must be in.

`model` and `strategy` are open sections: their fields are the chosen model's and
strategy's options, whose domains the models and the strategy factories declare
(`odsgd_jax.domains`). `base_config()` is a config of these defaults with CNN1D and ssgd;
configs/default.py is it plus its choices, and every other config file starts from that.
`validate_config` checks each field against its domain in one loop, then the relations
between fields.
"""

from typing import Any, NamedTuple

import ml_collections
from ml_collections import config_dict

from odsgd_jax import domains
from odsgd_jax.cluster import (INTER_TOPOLOGIES, PRESETS, TOPOLOGIES, TRANSPORTS, WORKLOADS,
                               calibration)
from odsgd_jax.data import DATASETS
from odsgd_jax.tasks import TASKS
from odsgd_jax.train._optimizer import DOMAINS as OPTIMIZER_DOMAINS

OVERLAPS = ("buckets", "none")
# Sections whose fields depend on the chosen model or strategy (their constructor's options).
OPEN_SECTIONS = ("model", "strategy")


class Field(NamedTuple):
  default: Any  # or, called, a new one for each config (a placeholder: never shared)
  domain: domains.Domain


def _other(text: str, check) -> domains.Domain:
  return domains.Domain("other", check=check, text=text)


def _folder_problem(value: Any) -> str | None:
  return None if isinstance(value, str) else "is not a folder"


def _task_problem(value: Any) -> str | None:
  if value == "" or value in TASKS:  # read when checked: a task registered after import
    return None
  return f"is not a registered task (one of {sorted(TASKS)}, or \"\": the data set's)"


def _speeds_problem(value: Any) -> str | None:
  if not isinstance(value, (tuple, list)) or any(
      isinstance(s, bool) or not isinstance(s, (int, float)) or not s > 0 for s in value):
    return "is not a tuple of positive speeds"
  return None


def _levels_problem(value: Any) -> str | None:
  if not isinstance(value, (tuple, list)) or any(
      isinstance(a, bool) or not isinstance(a, (int, float)) or not 0 < a < float("inf")
      for a in value):
    return "is not a tuple of positive levels of the task's target metric"
  return None


_POSITIVE = domains.real(0, low_open=True)
_NON_NEGATIVE = domains.real(0)
_COUNT = domains.integer(1)
_OR_UNSET = lambda *choices: domains.choice("", *choices)  # "" : not set

# Fields added after runs were recorded and checkpoints written (issue 76), with the value
# every earlier run had: a record's config or a checkpoint without one held it at that value.
ADDED_FIELDS = {("data", "task"): "", ("optimizer", "b1"): 0.9, ("optimizer", "b2"): 0.999,
                ("optimizer", "eps"): 1e-8, ("optimizer", "clip_norm"): 0.0}

SCHEMA: dict[str, dict[str, Field]] = {
    "data": {
        # mnist1d_heldout: the standard 4000 training signals, 2,000 validation and 10,000
        # test (docs/data.md); mnist1d is the standard 4000/1000 split
        "name": Field("mnist1d_heldout", domains.choice(*DATASETS)),
        # what the model learns: "" the data set's task (classification, next_token), else
        # a task registered by name (odsgd_jax.tasks.register_task; docs/running.md)
        "task": Field("", _other("\"\" or a registered task", _task_problem)),
        # None: $TFDS_DATA_DIR or ~/tensorflow_datasets
        "data_dir": Field(lambda: config_dict.placeholder(str),
                          domains.Domain("other", optional=True, check=_folder_problem,
                                         text="a folder")),
        "batch_size": Field(128, _COUNT),  # global: split evenly over the workers
        "eval_batch_size": Field(1000, _COUNT),
        "num_threads": Field(2, _COUNT),  # host threads preparing batches ahead of the step
        "prefetch": Field(8, _COUNT),  # batches prepared ahead
    },
    # The inner optimizer: what each strategy applies to the gradient it chooses.
    "optimizer": {
        "name": Field("sgd", OPTIMIZER_DOMAINS["name"]),  # sgd | adam | adamw
        "learning_rate": Field(0.1, OPTIMIZER_DOMAINS["learning_rate"]),  # peak rate
        "momentum": Field(0.9, OPTIMIZER_DOMAINS["momentum"]),  # sgd only; 0: plain SGD
        "nesterov": Field(False, OPTIMIZER_DOMAINS["nesterov"]),
        # adam and adamw: the moments' decay rates and the denominator's epsilon
        "b1": Field(0.9, OPTIMIZER_DOMAINS["b1"]),
        "b2": Field(0.999, OPTIMIZER_DOMAINS["b2"]),
        "eps": Field(1e-8, OPTIMIZER_DOMAINS["eps"]),
        # sgd and adam: coupled L2, added to the gradient; adamw: decoupled
        "weight_decay": Field(0.0, OPTIMIZER_DOMAINS["weight_decay"]),
        "clip_norm": Field(0.0, OPTIMIZER_DOMAINS["clip_norm"]),  # > 0: global-norm clipping
        "schedule": Field("cosine", OPTIMIZER_DOMAINS["schedule"]),  # constant | cosine | step
        "warmup_steps": Field(0, OPTIMIZER_DOMAINS["warmup_steps"]),  # linear from 0
        # step schedule: multiply by decay_factor at these epochs
        "decay_epochs": Field((), OPTIMIZER_DOMAINS["decay_epochs"]),
        "decay_factor": Field(0.1, OPTIMIZER_DOMAINS["decay_factor"]),
    },
    # The simulated cluster: its clock (sim_time) and, for asgd/ssp/oscars, the schedule.
    "cluster": {
        "num_workers": Field(8, _COUNT),  # logical workers N; a multiple of the device groups
        # speed factor per worker; () = all 1.0
        "speeds": Field((), _other("a tuple of positive speeds, one per worker, or () for "
                                   "all 1.0", _speeds_problem)),
        # seconds of one step at speed 1; 0: measure this host's
        "step_time": Field(0.01, _NON_NEGATIVE),
        "compute_scale": Field(1.0, _POSITIVE),  # multiplies a measured step time
        # The clock's terms validated against published scaling measurements
        # (docs/clock.md); jitter=0, interference=0, node_contention=0,
        # transport=line_rate: the clock before.
        "jitter": Field(calibration.NOISE.value, _NON_NEGATIVE),  # sigma of lognormal noise
        # compute lost per second of communication beside it
        "interference": Field(calibration.INTERFERENCE.value, _NON_NEGATIVE),
        # s per sample of a further worker on the node (workers_per_node) lost to the host
        "node_contention": Field(calibration.NODE_CONTENTION.value, _NON_NEGATIVE),
        # achieved share of line rate: "" = a preset's own (the fields' bandwidth: as
        # given), or one of docs/clock.md's transports
        "transport": Field("", _OR_UNSET(*TRANSPORTS)),
        # a reference workload (docs/cluster.md): its step time, batch and message win over
        # step_time and message_bytes
        "workload": Field("", _OR_UNSET(*WORKLOADS)),
        "straggler_prob": Field(0.0, domains.real(0, 1)),  # probability a step straggles ...
        "straggler_slowdown": Field(1.0, _POSITIVE),  # ... and by how much
        # a named network (docs/cluster.md): its numbers win over the 6 below
        "preset": Field("", _OR_UNSET(*PRESETS)),
        "topology": Field("ring", domains.choice(*TOPOLOGIES)),
        # bytes/s: CNN1D's all-reduce is ~37% of an ssgd tick
        "bandwidth": Field(1e7, _POSITIVE),
        "latency": Field(5e-5, _NON_NEGATIVE),  # seconds per message
        "intra_bandwidth": Field(1e9, _POSITIVE),  # bytes/s inside a node (hierarchical)
        "workers_per_node": Field(4, _COUNT),  # workers sharing a node (hierarchical)
        # ring | tree: across nodes (hierarchical)
        "inter_topology": Field("ring", domains.choice(*INTER_TOPOLOGIES)),
        # bytes a worker sends per sync; 0: the model's own
        "message_bytes": Field(0, _NON_NEGATIVE),
        # How ssgd's all-reduce overlaps its backward pass (and odsgd's synchronous
        # warm-up): "buckets" as PyTorch DDP (25 MiB buckets, backward 2/3 of a step)
        "overlap": Field("buckets", domains.choice(*OVERLAPS)),
        # of a step's compute (forward:backward = 1:2)
        "backward_share": Field(2 / 3, domains.real(0, 1)),
        "bucket_bytes": Field(25 * 2**20, _POSITIVE),  # DDP's bucket_cap_mb=25
        "seed": Field(0, domains.integer(0)),  # jitter and stragglers
    },
    "parallel": {
        # 0: all visible devices, or as many as the workers fill evenly
        "num_devices": Field(0, domains.integer(0)),
        "devices_per_worker": Field(1, _COUNT),  # >1: a worker spans several devices
    },
    "train": {
        "num_steps": Field(3000, _COUNT),
        # steps between evaluations (the smallest span on a growing grid); also at the end;
        # 0: only at the end
        "eval_every": Field(500, domains.integer(0)),
        # a growing (geometric) grid: after step s the next evaluation comes
        # max(eval_every, eval_every * floor(eval_growth * s / eval_every)) steps later, so a
        # time read off it is known to within about eval_growth of itself; 0: every
        # eval_every steps
        "eval_growth": Field(0.0, domains.real(0, 1, high_open=True)),
        # levels of the task's target metric (accuracy, a loss) a study times this run at:
        # spans of eval_growth of the step, down to one step, while the metric is within
        # eval_near short of one not yet reached, and no evaluation but the last once all
        # are reached; (): none
        "eval_targets": Field((), _other("a tuple of positive levels of the task's target "
                                         "metric (accuracies, losses), or () for none",
                                         _levels_problem)),
        "eval_near": Field(0.03, domains.real(0, 1)),
        "checkpoint_every": Field(1000, _COUNT),  # also at the end
        "log_every": Field(1, _COUNT),
        # gradient, update, parameter norms: 3 passes over the model
        "norms_every": Field(10, _COUNT),
        "seed": Field(0, domains.integer(0)),  # initial parameters, data order, augmentation
        "max_checkpoints": Field(2, _COUNT),
        "progress_bar": Field(True, domains.FLAG),
        # XLA's GPU ops deterministic (set by `python -m experiments.train` before JAX
        # starts), so that a resumed run is bit-identical to an uninterrupted one on a GPU
        # too; False: faster GPU steps, resume equal up to float rounding. CPU runs are
        # deterministic either way.
        "deterministic": Field(True, domains.FLAG),
        # summary.json: simulated time to reach it (0: skip)
        "target_accuracy": Field(0.9, domains.real(0, 1)),
    },
}


def base_config() -> ml_collections.ConfigDict:
  """Every field at its default: CNN1D trained with ssgd, the open sections holding only
  their `name` (the model's and strategy's own defaults fill the rest)."""
  config = ml_collections.ConfigDict()
  for section in ("data", "model", "strategy", "optimizer", "cluster", "parallel", "train"):
    config[section] = ml_collections.ConfigDict()
    for name, field in SCHEMA.get(section, {}).items():
      config[section][name] = field.default() if callable(field.default) else field.default
  config.model.name = "cnn1d"
  config.strategy.name = "ssgd"
  return config
