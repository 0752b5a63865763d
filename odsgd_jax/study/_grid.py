"""A study's runs: which config, which changes to it, which seed, under which name."""

import ast
import dataclasses
import importlib.util
import itertools
import os
import re
from typing import Any, Sequence

import ml_collections


def _config_file(path: str) -> str:
  """`path`, or where it names one of this project's configs ("configs/default.py") and
  the working directory is not the checkout, that file of the installed `configs`
  package: a study runs from any folder."""
  if os.path.isfile(path):
    return path
  folder, name = os.path.split(os.path.normpath(path))
  if os.path.basename(folder) == "configs" and (installed := importlib.util.find_spec("configs")):
    for location in installed.submodule_search_locations or []:
      if os.path.isfile(os.path.join(location, name)):
        return os.path.join(location, name)
  raise FileNotFoundError(f"config file {path!r} does not exist")


def load_config(spec: str) -> ml_collections.ConfigDict:
  """The config of "path/to/file.py" or "path/to/file.py:arg", as `--config` loads it
  (the file's `get_config()`, or `get_config(arg)`). "configs/<file>.py" is found in the
  installed package when the working directory has no such file."""
  path, _, arg = spec.partition(":")
  module_spec = importlib.util.spec_from_file_location("study_config", _config_file(path))
  module = importlib.util.module_from_spec(module_spec)
  module_spec.loader.exec_module(module)
  return module.get_config(arg) if arg else module.get_config()


def parse_value(text: str) -> Any:
  """A grid or override value as Python reads it; text that is no literal stays text."""
  try:
    return ast.literal_eval(text)
  except (ValueError, SyntaxError):
    return text


@dataclasses.dataclass(frozen=True)
class RunSpec:
  """One run of a study.

  Attributes:
    label: the group it belongs to, e.g. "odsgd" or "topk:0.01": runs of one group
      differ only in their seed, and groups are compared seed by seed.
    config: "file.py" or "file.py:arg" (a strategy name for the configs here).
    seed: `train.seed`: initial parameters and data order.
    overrides: (dotted field, value) pairs set after loading, in order.
  """

  label: str
  config: str
  seed: int = 0
  overrides: tuple[tuple[str, Any], ...] = ()

  @property
  def name(self) -> str:
    """A folder name for the run, unique within a study."""
    return re.sub(r"[^A-Za-z0-9_.=+-]+", "_", f"{self.label}_seed{self.seed}")

  def build(self) -> ml_collections.ConfigDict:
    config = load_config(self.config)
    for field, value in self.overrides:
      section, _, name = field.rpartition(".")
      target = config
      for part in section.split(".") if section else ():
        target = target[part]
      target[name] = value
    config.train.seed = self.seed
    return config


def grid(labels: dict[str, tuple[str, Sequence[tuple[str, Any]]]], seeds: Sequence[int],
         common: Sequence[tuple[str, Any]] = ()) -> list[RunSpec]:
  """Every (group, seed) pair: `labels` maps a group's label to its config and
  overrides; `common` overrides go first in every run."""
  return [RunSpec(label, config, seed, tuple(common) + tuple(overrides))
          for (label, (config, overrides)), seed in itertools.product(labels.items(), seeds)]


def parse_seeds(text: str) -> list[int]:
  """"0,1,2,3,4" or "0-4" -> [0, 1, 2, 3, 4]."""
  seeds = []
  for part in text.split(","):
    first, dash, last = part.strip().partition("-")
    seeds += list(range(int(first), int(last) + 1)) if dash else [int(first)]
  if not seeds:
    raise ValueError("no seeds given")
  return seeds
