"""Every bad config stops before compiling, with one message naming the field."""

import glob
import importlib.util
import os
import re
import subprocess
import sys

import pytest

from odsgd_jax.train import (SCHEMA, ConfigError, base_config, train_and_evaluate,
                             validate_config)
from odsgd_jax.train._schema import Field
from configs import default, digits, kjv_transformer, mnist1d
from odsgd_jax import domains, parallel
from odsgd_jax.strategies import STRATEGIES

REPO = os.path.dirname(os.path.dirname(os.path.abspath(__file__)))


def _with(**changes):
  config = default.get_config()
  for path, value in changes.items():
    section, field = path.split("__")
    config[section][field] = value
  return config


@pytest.mark.parametrize(
    "changes,expected",
    [
        ({"data__name": "mnits"}, ["data.name", "mnist1d", "cifar10"]),
        ({"model__name": "resnet21"}, ["model.name", "resnet20", "cnn1d"]),
        ({"strategy__name": "sgd"}, ["strategy.name", "ssgd"]),
        ({"cluster__num_workers": 12, "parallel__num_devices": 8},
         ["cluster.num_workers=12", "multiple of the 8"]),
        ({"data__batch_size": 100}, ["data.batch_size=100", "cluster.num_workers=8"]),
        ({"optimizer__learning_rate": 0.0}, ["optimizer.learning_rate=0.0", "(0, inf)"]),
        ({"optimizer__learning_rate": -0.1}, ["optimizer.learning_rate=-0.1", "(0, inf)"]),
        ({"train__num_steps": 0}, ["train.num_steps=0", "an integer in [1, inf)"]),
        ({"optimizer__schedule": "linear"}, ["optimizer.schedule", "cosine", "step"]),
        ({"parallel__num_devices": 16}, ["parallel.num_devices=16", "8 devices"]),
        ({"strategy__compression": "topk:0.01,momentum=0.9"},  # inner momentum 0.9 too
         ["momentum correction", "optimizer.momentum=0"]),
        ({"strategy__compression": "topk:0.01,momentum=1.5"},
         ["strategy.compression=", "momentum=1.5 is out of range", "[0, 1)"]),
    ],
)
def test_bad_value_names_field_and_allowed_values(changes, expected):
  with pytest.raises(ConfigError) as error:
    validate_config(_with(**changes), num_available_devices=8)
  for text in expected:
    assert text in str(error.value)


@pytest.mark.parametrize("workers,available,per_worker,in_use", [
    (8, 8, 1, 8), (8, 16, 1, 8), (8, 3, 1, 2), (8, 1, 1, 1), (12, 8, 1, 6), (8, 16, 2, 16),
    (8, 12, 2, 8), (5, 4, 1, 1)])
def test_devices_0_uses_as_many_devices_as_the_workers_fill_evenly(workers, available,
                                                                   per_worker, in_use):
  assert parallel.devices_in_use(workers, available, per_worker) == in_use
  config = _with(cluster__num_workers=workers, parallel__devices_per_worker=per_worker,
                 data__batch_size=16 * workers)
  validate_config(config, num_available_devices=available)  # the default config fits


def test_misspelt_key_is_named_with_a_suggestion():
  config = default.get_config()
  config.train.num_step = 10  # a variant config file with a typo
  with pytest.raises(ConfigError, match=r"train\.num_step.*did you mean train\.num_steps"):
    validate_config(config, num_available_devices=8)


def test_the_library_owns_the_schema_and_checks_each_field_in_its_domain(monkeypatch):
  """Every field of the fixed sections is the library's (`train.SCHEMA`: its default and
  its domain, the default in it); configs/default.py is `train.base_config()` plus its
  choices; a field added to the schema is a field of every config, checked in its
  domain, and a config without it names it. The library imports nothing from configs/."""
  for section, fields in SCHEMA.items():
    for name, field in fields.items():
      value = base_config()[section][name]
      assert field.domain.problem(value) is None, (section, name)
  assert set(default.get_config().keys()) == set(base_config().keys())
  config = default.get_config()
  config.train.new_field = 1
  with pytest.raises(ConfigError, match=r"unknown config field train\.new_field"):
    validate_config(config, num_available_devices=8)
  monkeypatch.setitem(SCHEMA["train"], "new_field", Field(1, domains.integer(0)))
  validate_config(default.get_config(), num_available_devices=8)  # now a known field
  config = default.get_config()
  config.train.new_field = -1
  with pytest.raises(ConfigError, match=r"^train\.new_field=-1 is out of range"):
    validate_config(config, num_available_devices=8)
  del config.train.new_field
  with pytest.raises(ConfigError, match=r"config field train\.new_field is missing"):
    validate_config(config, num_available_devices=8)
  library = os.path.join(REPO, "odsgd_jax")
  importing = [path for path in glob.glob(f"{library}/**/*.py", recursive=True)
               if re.search(r"^\s*(from|import) configs", open(path).read(), re.MULTILINE)]
  assert importing == []


def test_option_of_another_strategy_or_model_is_rejected():
  config = default.get_config()
  config.strategy.period = 4  # a local_sgd option given to odsgd
  with pytest.raises(ConfigError, match=r"strategy\.period for strategy 'odsgd'"):
    validate_config(config, num_available_devices=8)
  config = default.get_config()
  config.model.channels = 32  # cnn1d option: fine
  validate_config(config, num_available_devices=8)
  config.model.hidden_sizes = (10,)  # an mlp option: not for cnn1d
  with pytest.raises(ConfigError, match=r"model\.hidden_sizes for model 'cnn1d'"):
    validate_config(config, num_available_devices=8)


def test_bad_config_fails_before_any_work(tmp_path):
  config = _with(cluster__num_workers=3)
  with pytest.raises(ConfigError):
    train_and_evaluate(config, str(tmp_path / "run"))
  assert not (tmp_path / "run").exists()  # nothing created, nothing compiled


@pytest.mark.parametrize("path", sorted(glob.glob(os.path.join(REPO, "configs", "[!_]*.py"))))
def test_every_shipped_config_is_valid(path):
  module_spec = importlib.util.spec_from_file_location("shipped_config", path)
  module = importlib.util.module_from_spec(module_spec)
  module_spec.loader.exec_module(module)
  config = module.get_config()
  validate_config(config, num_available_devices=8)
  validate_config(config, num_available_devices=1)


@pytest.mark.parametrize("strategy", sorted(STRATEGIES))
def test_every_strategy_config_is_valid(strategy):
  validate_config(mnist1d.get_config(strategy), num_available_devices=8)
  validate_config(digits.get_config(strategy), num_available_devices=1)
  # the language model, AdamW inside: odsgd and pseudo_sync with corrections AdamW takes
  validate_config(kjv_transformer.get_config(strategy), num_available_devices=8)


@pytest.mark.parametrize("field,value,expected", [
    ("local_optimizer", "adam", "strategy.local_optimizer='adam' is not allowed"),
    ("warmup_steps", -1, "strategy.warmup_steps=-1 is out of range"),
])
def test_bad_strategy_option_value_is_a_config_error(field, value, expected):
  config = default.get_config()
  config.strategy[field] = value
  with pytest.raises(ConfigError, match=re.escape(expected)):
    validate_config(config, num_available_devices=8)


@pytest.mark.parametrize(
    "override,expected",
    [
        ("--config.train.num_step=5", "train.num_step; did you mean train.num_steps?"),
        ("--config.trian.num_steps=5",
         "names no config field ('trian' does not exist); did you mean 'train'?"),
        ("--config.model.hidden_sizes=(8,)", "model.hidden_sizes for model 'cnn1d'"),
        ("--config.optimizer.learning_rate=-1", "optimizer.learning_rate=-1"),
    ],
)
def test_command_line_errors_are_one_message(tmp_path, override, expected):
  result = subprocess.run(
      [sys.executable, "-m", "experiments.train", "--config", "configs/default.py",
       "--workdir", str(tmp_path / "run"), override],
      cwd=REPO, capture_output=True, text=True, timeout=120,
  )
  assert result.returncode == 1
  assert expected in result.stderr
  assert "Traceback" not in result.stderr


def test_outer_optimizer_options_are_checked_like_the_run_builds_them():
  config = mnist1d.get_config("local_sgd")
  config.strategy.outer = {"learning_rate": 0.7, "momentum": 0.9, "nesterov": True}
  validate_config(config, num_available_devices=8)
  config.strategy.outer = {"learning_rate": 0.7, "momentun": 0.9}
  with pytest.raises(ConfigError, match="strategy.outer=.*'momentun', which is not an argument"):
    validate_config(config, num_available_devices=8)
