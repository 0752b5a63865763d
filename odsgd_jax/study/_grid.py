"""A study's runs: which config, which changes to it, which seed, under which name."""

import ast
import dataclasses
import importlib.util
import itertools
import os
import re
from typing import Any, Sequence

import ml_collections


class StudyInputError(ValueError):
  """A study's input that cannot run (a flag, a seed list, an override, a config): the
  message names it, its value and what is allowed. Raised before any run starts."""


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
  try:
    module_spec.loader.exec_module(module)
  except Exception as error:  # noqa: BLE001 -- the file's own code: said in one line
    raise StudyInputError(f"config {spec!r} does not load: {_last_line(error)}") from error
  if not callable(getattr(module, "get_config", None)):
    raise StudyInputError(f"config file {path!r} has no get_config() function: a config file "
                          f"defines get_config() returning an ml_collections.ConfigDict "
                          f"(see configs/default.py)")
  try:
    return module.get_config(arg) if arg else module.get_config()
  except Exception as error:  # noqa: BLE001 -- e.g. an unknown variant after ':'
    raise StudyInputError(f"config {spec!r} does not load: {_last_line(error)}") from error


def _last_line(error: BaseException) -> str:
  lines = [line.strip() for line in str(error).splitlines() if line.strip()]
  return f"{type(error).__name__}: {lines[-1] if lines else ''}"


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
    seed: `train.seed`: initial parameters and data order; and `cluster.seed`, the
      cluster's noise and stragglers, unless an override sets it: each seed resamples the
      timing noise, so intervals over seeds cover it, and the runs of one seed (the
      strategies compared) share one draw.
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
    """The config with the overrides and the seed set (`train.seed`, and `cluster.seed`
    unless an override sets it).

    Raises:
      StudyInputError: the config does not load, or an override names a section it does
        not have (a misspelt field inside a section is `validate_config`'s to name).
    """
    config = load_config(self.config)
    for field, value in self.overrides:
      section, _, name = field.rpartition(".")
      target = config
      for part in section.split(".") if section else ():
        if not isinstance(target, ml_collections.ConfigDict) or part not in target:
          known = sorted(target.keys()) if isinstance(target, ml_collections.ConfigDict) else []
          raise StudyInputError(f"override {field}={value!r}: the config {self.config!r} has "
                                f"no section {part!r}" + (f"; its sections: {', '.join(known)}"
                                                          if known else ""))
        target = target[part]
      target[name] = value
    config.train.seed = self.seed
    if "cluster.seed" not in dict(self.overrides) and "cluster" in config:
      config.cluster.seed = self.seed
    return config


def grid(labels: dict[str, tuple[str, Sequence[tuple[str, Any]]]], seeds: Sequence[int],
         common: Sequence[tuple[str, Any]] = ()) -> list[RunSpec]:
  """Every (group, seed) pair: `labels` maps a group's label to its config and
  overrides; `common` overrides go first in every run."""
  return [RunSpec(label, config, seed, tuple(common) + tuple(overrides))
          for (label, (config, overrides)), seed in itertools.product(labels.items(), seeds)]


def parse_seeds(text: str, flag: str = "--seeds") -> list[int]:
  """"0,1,2,3,4" or "0-4" -> [0, 1, 2, 3, 4]: distinct non-negative integers, at least one.

  Raises:
    StudyInputError: naming `flag`, the text and what is allowed.
  """
  def bad(why: str) -> StudyInputError:
    return StudyInputError(f"{flag} {text!r}: {why}; give seeds such as 0-11 or 0,1,2")

  seeds: list[int] = []
  for part in (p.strip() for p in text.split(",")):
    if not part:
      continue
    if not re.fullmatch(r"\d+(-\d+)?", part):
      raise bad(f"{part!r} is not a seed or a range of seeds")
    first, _, last = part.partition("-")
    if last and int(last) < int(first):
      raise bad(f"the range {part!r} runs backwards")
    seeds += list(range(int(first), int(last) + 1)) if last else [int(first)]
  if not seeds:
    raise bad("no seeds")
  repeated = sorted({s for s in seeds if seeds.count(s) > 1})
  if repeated:
    raise bad(f"seed {repeated[0]} is given twice (each seed runs once)")
  return seeds
