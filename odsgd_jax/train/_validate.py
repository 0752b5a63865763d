"""Config checks that run before any data is read or anything is compiled.

Each problem gets one message naming the field, what is wrong, and the allowed
values, so that a bad `--config.a.b=v` fails in a second, not after compiling.
"""

import difflib
import functools
from typing import Any

import jax
import ml_collections

from odsgd_jax.cluster import INTER_TOPOLOGIES, PRESETS, TOPOLOGIES, TRANSPORTS, WORKLOADS
from odsgd_jax.data import DATASETS
from odsgd_jax.domains import FLAG, check_value, integer
from odsgd_jax.models import DOMAINS as MODEL_DOMAINS
from odsgd_jax.models import MODELS, model_options
from odsgd_jax.parallel import devices_in_use
from odsgd_jax.comm import parse_communication
from odsgd_jax.strategies import STRATEGIES
from odsgd_jax.train._optimizer import DOMAINS as OPTIMIZER_DOMAINS
from odsgd_jax.strategies import StrategySpec
from odsgd_jax.train._optimizer import strategy_spec


OVERLAPS = ("buckets", "none")


class ConfigError(ValueError):
  """The config is invalid; the message names the field and how to fix it."""


# Sections whose fields depend on the chosen model or strategy (their constructor's options).
OPEN_SECTIONS = ("model", "strategy")


@functools.cache
def schema() -> dict[str, tuple[str, ...]]:
  """The fields of every section but `model` and `strategy`: those of configs/default.py,
  which every config starts from (a field added there is known here, nothing to copy)."""
  from configs import default  # the config files import the library, not the other way

  config = default.get_config()
  return {section: tuple(config[section].keys()) for section in config.keys()
          if section not in OPEN_SECTIONS}


def _check_keys(section: str, present: Any, allowed: Any, context: str = "") -> None:
  for key in present:
    if key not in allowed:
      close = difflib.get_close_matches(key, list(allowed), n=1)
      hint = f"; did you mean {section}.{close[0]}?" if close else ""
      raise ConfigError(
          f"unknown config field {section}.{key}{context}{hint} "
          f"(allowed: {', '.join(sorted(allowed)) or 'none'})"
      )


def _check_choice(field: str, value: Any, choices: Any) -> None:
  if value not in choices:
    raise ConfigError(f"{field}={value!r} is not one of: {', '.join(sorted(choices))}")


def _check_domain(field: str, value: Any, domain: Any) -> None:
  try:
    check_value(field, value, domain)
  except ValueError as error:
    raise ConfigError(str(error)) from error


def _check_positive(field: str, value: Any, *, allow_zero: bool = False) -> None:
  ok = isinstance(value, (int, float)) and not isinstance(value, bool) and (
      value >= 0 if allow_zero else value > 0)
  if not ok:
    raise ConfigError(f"{field}={value!r} must be a {'non-negative' if allow_zero else 'positive'}"
                      f" number")


def validate_config(config: ml_collections.ConfigDict,
                    num_available_devices: int) -> StrategySpec:
  """Raises `ConfigError` for the first problem found in `config`.

  Args:
    config: the experiment config (see configs/default.py).
    num_available_devices: devices JAX sees (all processes together).

  Returns:
    The config's strategy, resolved while checking it (the run uses this one).
  """
  _check_sections(config)
  for name, domain in OPTIMIZER_DOMAINS.items():
    _check_domain(f"optimizer.{name}", config.optimizer[name], domain)
  strategy = _check_names_and_options(config)
  _check_optimizer(config)
  _check_numbers(config)
  _check_layout(config, num_available_devices)
  return strategy


def _check_sections(config: ml_collections.ConfigDict) -> None:
  """Every section and field there, none unknown."""
  fields = schema()
  sections = set(fields) | set(OPEN_SECTIONS)
  _check_keys("config", config.keys(), sections)
  for section in sections:
    if section not in config:
      raise ConfigError(f"config section {section!r} is missing; start from configs/default.py")
  for section, allowed in fields.items():
    _check_keys(section, config[section].keys(), allowed)
    missing = [key for key in allowed if key not in config[section]]
    if missing:
      raise ConfigError(f"config field {section}.{missing[0]} is missing; see configs/default.py")


def _check_names_and_options(config: ml_collections.ConfigDict) -> StrategySpec:
  """Data set, model and strategy names, and the options of the chosen model and strategy."""
  data, model, strategy = config.data, config.model, config.strategy
  _check_choice("data.name", data.name, DATASETS)
  _check_choice("model.name", model.get("name"), MODELS)
  options = model_options(model.name)
  _check_keys("model", [k for k in model.keys() if k != "name"], options,
              f" for model {model.name!r}")
  for name, domain in MODEL_DOMAINS[model.name].items():
    if name in model:
      _check_domain(f"model.{name}", model[name], domain)
  _check_choice("strategy.name", strategy.get("name"), STRATEGIES)
  try:  # its options: checked where they are resolved, once
    return strategy_spec(config)
  except ValueError as error:
    raise ConfigError(str(error)) from error


def _check_optimizer(config: ml_collections.ConfigDict) -> None:
  """The inner optimizer, and what the strategy's compression or correction needs of it."""
  strategy, optimizer = config.strategy, config.optimizer
  communication = parse_communication(strategy.get("compression"))
  if communication is not None and communication.momentum and (
      optimizer.name != "sgd" or optimizer.momentum):
    raise ConfigError(
        f"strategy.compression={strategy.compression!r} applies momentum before the exchange "
        f"(momentum correction), so the inner optimizer must be plain SGD: set "
        f"optimizer.name='sgd' and optimizer.momentum=0 (now {optimizer.name!r}, "
        f"{optimizer.momentum})")
  if "spike" in str(strategy.get("correction", "")) and (optimizer.name != "sgd"
                                                        or not optimizer.momentum):
    raise ConfigError(
        f"strategy.correction={strategy.correction!r}: spike compensation corrects heavy-ball "
        f"momentum; the inner optimizer is {optimizer.name!r} with momentum "
        f"{optimizer.momentum}: use optimizer.name='sgd' with optimizer.momentum > 0, or "
        f"another correction")


def _check_numbers(config: ml_collections.ConfigDict) -> None:
  """Ranges of the train, data and cluster fields."""
  data, optimizer, cluster, train = config.data, config.optimizer, config.cluster, config.train
  for name in ("num_steps", "eval_every", "checkpoint_every", "log_every", "norms_every",
               "max_checkpoints"):
    _check_positive(f"train.{name}", train[name])
  if optimizer.warmup_steps >= train.num_steps:
    raise ConfigError(f"optimizer.warmup_steps={optimizer.warmup_steps} must be smaller than "
                      f"train.num_steps={train.num_steps}")
  for name in ("batch_size", "eval_batch_size", "num_threads", "prefetch"):
    _check_positive(f"data.{name}", data[name])
  _check_positive("cluster.num_workers", cluster.num_workers)
  _check_choice("cluster.topology", cluster.topology, TOPOLOGIES)
  _check_choice("cluster.inter_topology", cluster.inter_topology, INTER_TOPOLOGIES)
  _check_choice("cluster.overlap", cluster.overlap, OVERLAPS)
  if cluster.preset:
    _check_choice("cluster.preset", cluster.preset, PRESETS)
  if cluster.transport:
    _check_choice("cluster.transport", cluster.transport, TRANSPORTS)
  if cluster.workload:
    _check_choice("cluster.workload", cluster.workload, WORKLOADS)
  if not 0 <= cluster.backward_share <= 1:
    raise ConfigError(f"cluster.backward_share={cluster.backward_share} must be in [0, 1]")
  if cluster.speeds and (len(cluster.speeds) != cluster.num_workers
                         or min(cluster.speeds) <= 0):
    raise ConfigError(f"cluster.speeds={tuple(cluster.speeds)} must hold one positive speed per "
                      f"worker ({cluster.num_workers}), or be () for all 1.0")
  for name in ("bandwidth", "compute_scale", "intra_bandwidth", "workers_per_node",
               "straggler_slowdown", "bucket_bytes"):
    _check_positive(f"cluster.{name}", cluster[name])
  for name in ("step_time", "jitter", "latency", "message_bytes", "interference",
               "node_contention"):
    _check_positive(f"cluster.{name}", cluster[name], allow_zero=True)
  if not 0 <= cluster.straggler_prob <= 1:
    raise ConfigError(f"cluster.straggler_prob={cluster.straggler_prob} must be in [0, 1]")
  for name in ("seed",):
    _check_domain(f"train.{name}", train[name], integer(0))
  for name in ("progress_bar", "deterministic"):
    _check_domain(f"train.{name}", train[name], FLAG)
  _check_domain("cluster.seed", cluster.seed, integer(0))
  if not 0 <= train.target_accuracy <= 1:
    raise ConfigError(f"train.target_accuracy={train.target_accuracy} must be in [0, 1]")


def _check_layout(config: ml_collections.ConfigDict, num_available_devices: int) -> None:
  """Workers, devices and batches that divide."""
  data, cluster, parallel = config.data, config.cluster, config.parallel
  _check_positive("parallel.num_devices", parallel.num_devices, allow_zero=True)
  _check_positive("parallel.devices_per_worker", parallel.devices_per_worker)

  num_devices = devices_in_use(cluster.num_workers, num_available_devices,
                               parallel.devices_per_worker, parallel.num_devices)
  if num_devices < num_available_devices and jax.process_count() > 1:
    raise ConfigError(f"cluster.num_workers={cluster.num_workers} cannot be laid evenly on all "
                      f"{num_available_devices} devices of this run's {jax.process_count()} "
                      f"processes; use a multiple of them")
  if num_devices > num_available_devices:
    raise ConfigError(f"parallel.num_devices={parallel.num_devices} but only "
                      f"{num_available_devices} devices are visible; set it to 0 (all) or fewer")
  if num_devices % parallel.devices_per_worker:
    raise ConfigError(f"parallel.devices_per_worker={parallel.devices_per_worker} must divide "
                      f"the {num_devices} devices in use (parallel.num_devices)")
  worker_groups = num_devices // parallel.devices_per_worker
  if cluster.num_workers % worker_groups:
    raise ConfigError(
        f"cluster.num_workers={cluster.num_workers} is not a multiple of the {worker_groups} "
        f"device groups in use ({num_devices} devices, {parallel.devices_per_worker} per worker);"
        f" use a multiple of {worker_groups} or set parallel.num_devices to a divisor of "
        f"{cluster.num_workers}"
    )
  per_worker, remainder = divmod(data.batch_size, cluster.num_workers)
  if remainder:
    raise ConfigError(f"data.batch_size={data.batch_size} (global) is not divisible by "
                      f"cluster.num_workers={cluster.num_workers}")
  if per_worker % parallel.devices_per_worker:
    raise ConfigError(f"the per-worker batch {per_worker} (data.batch_size / "
                      f"cluster.num_workers) is not divisible by parallel.devices_per_worker="
                      f"{parallel.devices_per_worker}")
