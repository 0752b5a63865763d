"""Config checks that run before any data is read or anything is compiled.

Each problem gets one message naming the field, what is wrong, and the allowed
values, so that a bad `--config.a.b=v` fails in a second, not after compiling.
"""

import difflib
from typing import Any

import jax
import ml_collections

from odsgd_jax.domains import check_value
from odsgd_jax.models import DOMAINS as MODEL_DOMAINS
from odsgd_jax.models import MODELS, model_options
from odsgd_jax.parallel import devices_in_use
from odsgd_jax.strategies import STRATEGIES, StrategySpec
from odsgd_jax.train._optimizer import strategy_spec
from odsgd_jax.train._schema import OPEN_SECTIONS, SCHEMA


class ConfigError(ValueError):
  """The config is invalid; the message names the field and how to fix it."""


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
  for section, fields in SCHEMA.items():  # every field of the fixed sections, one domain each
    for name, field in fields.items():
      _check_domain(f"{section}.{name}", config[section][name], field.domain)
  strategy = _check_model_and_strategy(config)
  _check_relations(config)
  _check_layout(config, num_available_devices)
  return strategy


def _check_sections(config: ml_collections.ConfigDict) -> None:
  """Every section and field there, none unknown."""
  sections = set(SCHEMA) | set(OPEN_SECTIONS)
  _check_keys("config", config.keys(), sections)
  for section in sections:
    if section not in config:
      raise ConfigError(f"config section {section!r} is missing; start from configs/default.py")
  for section, allowed in SCHEMA.items():
    _check_keys(section, config[section].keys(), allowed)
    missing = [key for key in allowed if key not in config[section]]
    if missing:
      raise ConfigError(f"config field {section}.{missing[0]} is missing; see configs/default.py")


def _check_model_and_strategy(config: ml_collections.ConfigDict) -> StrategySpec:
  """Model and strategy names, and the options of the chosen model and strategy (their
  domains, and the rules between them, are the model's and the strategy factory's)."""
  model, strategy = config.model, config.strategy
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


def _check_relations(config: ml_collections.ConfigDict) -> None:
  """What holds between fields, each in its domain."""
  optimizer, cluster, train = config.optimizer, config.cluster, config.train
  if optimizer.warmup_steps >= train.num_steps:
    raise ConfigError(f"optimizer.warmup_steps={optimizer.warmup_steps} must be smaller than "
                      f"train.num_steps={train.num_steps}")
  if cluster.speeds and len(cluster.speeds) != cluster.num_workers:
    raise ConfigError(f"cluster.speeds={tuple(cluster.speeds)} must hold one positive speed per "
                      f"worker ({cluster.num_workers}), or be () for all 1.0")


def _check_layout(config: ml_collections.ConfigDict, num_available_devices: int) -> None:
  """Workers, devices and batches that divide."""
  data, cluster, parallel = config.data, config.cluster, config.parallel
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
