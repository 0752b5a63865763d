"""Every declared option domain refuses values outside it with one line naming the field."""

import math

import ml_collections
import pytest

from configs import default
from odsgd_jax import domains
from odsgd_jax.comm import _compressors, _exchange
from odsgd_jax.strategies import STRATEGIES
from odsgd_jax.strategies._definition import SET_BY_TRAINER
from odsgd_jax.train import SCHEMA, ConfigError, validate_config
from odsgd_jax.train._optimizer import DOMAINS as OPTIMIZER_DOMAINS


def bad_values(domain: domains.Domain) -> list:
  """Values just outside the domain, and values of the wrong type."""
  if domain.kind in ("real", "int"):
    values = ["x", True]
    if domain.low is not None:
      values.append(domain.low if domain.low_open else domain.low - 1)
    if domain.high is not None:
      values.append(domain.high if domain.high_open else domain.high + 1)
    values += [1.5] if domain.kind == "int" else [math.nan, math.inf]
    return values
  if domain.kind == "choice":
    return ["no-such-choice", 3]
  if domain.kind == "bool":
    return ["yes", 1]
  return [12345]  # "other": a number is never a spec, an optimizer or a list of epochs


def config_with(section: str, field: str, value, strategy: str = "odsgd"):
  config = default.get_config(strategy)
  fields = config[section].to_dict()
  fields[field] = value
  config[section] = ml_collections.ConfigDict(fields)
  return config


def assert_one_line_naming(config, expected: str) -> None:
  with pytest.raises(ConfigError) as error:
    validate_config(config, 8)
  message = str(error.value)
  assert "\n" not in message and message.startswith(expected), message


STRATEGY_CASES = [(strategy, name, value)
                  for strategy, definition in STRATEGIES.items()
                  for name, domain in definition.make.domains.items()
                  if name not in SET_BY_TRAINER
                  for value in bad_values(domain)]


def test_every_strategy_option_is_declared():
  for name, definition in STRATEGIES.items():
    assert set(definition.make.domains) == set(definition.options()) | (
        set(SET_BY_TRAINER) & set(definition.make.domains)) - {"axis_name"}, name


@pytest.mark.parametrize("strategy,name,value", STRATEGY_CASES)
def test_strategy_option_outside_its_domain(strategy, name, value):
  assert_one_line_naming(config_with("strategy", name, value, strategy),
                         f"strategy.{name}={value!r}")


@pytest.mark.parametrize("name,value", [(name, value) for name, domain in OPTIMIZER_DOMAINS.items()
                                        for value in bad_values(domain)])
def test_optimizer_option_outside_its_domain(name, value):
  assert_one_line_naming(config_with("optimizer", name, value), f"optimizer.{name}={value!r}")


@pytest.mark.parametrize("section,name,value", [
    (section, name, value) for section, fields in SCHEMA.items() if section != "optimizer"
    for name, field in fields.items() for value in bad_values(field.domain)])
def test_config_field_outside_its_domain(section, name, value):
  """Every field of the library's schema (`train.SCHEMA`), by the one loop that checks them."""
  assert_one_line_naming(config_with(section, name, value), f"{section}.{name}={value!r}")


@pytest.mark.parametrize("spec", [f"{name}:{value}" for name, domain
                                  in _compressors.ARGUMENTS.items()
                                  for value in bad_values(domain) if value is not True]
                         + [f"topk:0.01,{key}={value}" for key, (_, domain)
                            in _exchange.SETTINGS.items() for value in bad_values(domain)
                            if value is not True])
def test_compression_outside_its_domain(spec):
  assert_one_line_naming(config_with("strategy", "compression", spec),
                         f"strategy.compression={spec!r}")


# Options whose upper bound is a share of the workers (`Domain.per_worker`: at most high/N).
PER_WORKER_CASES = [(strategy, name, domain.high)
                    for strategy, definition in STRATEGIES.items()
                    for name, domain in definition.make.domains.items() if domain.per_worker]


def test_a_bound_that_depends_on_the_workers_reads_the_config():
  """`Domain.per_worker`: checked against cluster.num_workers when it is known, and only
  then (a factory is built without it)."""
  rate = domains.real(0, 1, low_open=True, per_worker=True)
  assert rate.problem(0.5) is None and rate.problem(0.5, num_workers=2) is None
  assert rate.problem(0.5, num_workers=4) == "is out of range"
  assert rate.problem(1.5) == "is out of range"  # above `high` whatever N is
  assert rate.describe(8) == "a finite number in (0, 1/N = 0.125 with 8 workers]"
  assert rate.describe() == "a finite number in (0, 1/N]"


@pytest.mark.parametrize("strategy,name,high", PER_WORKER_CASES)
def test_a_per_worker_bound_is_checked_with_the_number_of_workers(strategy, name, high):
  config = config_with("strategy", name, high / 4, strategy)  # fits 4 workers, not 8
  assert_one_line_naming(config, f"strategy.{name}={high / 4!r} is out of range; allowed: "
                                 f"a finite number in (0, {high:g}/N = {high / 8:g} with 8")
  config.cluster.num_workers, config.data.batch_size = 4, 64
  validate_config(config, 4)


def test_values_inside_the_domains_pass():
  for spec in ("topk:0.01,error_feedback=false,warmup=100", "qsgd:8", "cast:float16",
               "powersgd:2", "randomk:1"):
    validate_config(config_with("strategy", "compression", spec), 8)
  validate_config(config_with("strategy", "alpha_min", 0.0, "pseudo_sync"), 8)
  validate_config(config_with("optimizer", "decay_epochs", (80, 120)), 8)


def test_every_model_option_has_a_domain_and_its_default_is_in_it():
  from odsgd_jax import models
  for name in models.MODELS:
    options = models.model_options(name)
    assert set(models.DOMAINS[name]) == set(options), name
    for option, value in options.items():
      assert models.DOMAINS[name][option].problem(value) is None, (name, option)
  sizes = models.DOMAINS["resnet20"]["widths"]
  assert sizes.problem((16, 0)) and sizes.problem(()) and sizes.problem(16)
  assert models.DOMAINS["mlp"]["hidden_sizes"].problem(()) is None  # a linear model
