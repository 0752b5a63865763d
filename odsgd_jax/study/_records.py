"""Run records: what a finished run of a study leaves in the repository, so that a study
survives its machine (a fresh checkout resumes it) and its tables regenerate without
training (docs/results.md, "Run records").

A record holds the run's label and seed, its resolved config and that config's digest, the
summary, the evaluation rows, the simulated clock's charges (what `retime` replays), the
environment, and which code made it: the trajectory code's digest (below), the JAX
versions and the platform, and the commit. A record is reused only where both the config's
digest and the code's identity match; one made by other code is "stale", and a study
refuses to start on stale records until told to retrain them or to accept them.

The trajectory code is every module of the package but `odsgd_jax.study` (which turns
finished runs into tables and cannot move a run), each read as its syntax tree without
docstrings: an edit to a comment, a docstring or the layout keeps the records, any other
edit makes them stale. That errs on the safe side: a refactor that moves no trajectory
makes them stale too, and is then accepted by name (`--stale accept`, which writes both
identities into each record).
"""

import ast
import atexit
import datetime
import functools
import glob
import gzip
import hashlib
import json
import os
import re
import subprocess
from typing import Any

import jax
import jaxlib

from odsgd_jax import xla_flags
from odsgd_jax.strategies import STRATEGIES
from odsgd_jax.train._schema import ADDED_FIELDS

RECORDS_FOLDER = "records"  # at the repository's root, one folder per generated table
FORMAT = 1
# a record's file: its JSON, gzip-compressed (issue 76: the evaluation rows' full-precision
# floats had the records outgrow the 50 MB they may take; compressed they take a quarter)
SUFFIX = ".json.gz"
STALE_POLICIES = ("refuse", "retrain", "accept")
_PACKAGE = os.path.dirname(os.path.dirname(os.path.abspath(__file__)))  # odsgd_jax/
_NOT_TRAJECTORY = ("study",)  # subpackages that only read finished runs


def environment() -> str:
  """What produced the numbers: JAX versions and the devices."""
  devices = jax.devices()
  gpu = (f", deterministic GPU ops {'on' if xla_flags.deterministic_ops() else 'off'}"
         if devices[0].platform == "gpu" else "")  # CPU programs are deterministic anyway
  return (f"jax {jax.__version__}, jaxlib {jaxlib.__version__}, {len(devices)} x "
          f"{devices[0].device_kind}{gpu}")


def devices_of(environment_text: str) -> int | None:
  """The device count an `environment()` text names ("... 8 x cpu"), or None."""
  found = re.search(r"(\d+) x ", environment_text or "")
  return int(found.group(1)) if found else None


def config_digest(config: dict[str, Any]) -> str:
  """The digest of a resolved config (`ConfigDict.to_dict()`), independent of key order, of
  the fields added since records were made at their value then (`ADDED_FIELDS`: a config
  holding one at it is the same run as one of before without it), and of the
  strategy options written at their factory's default: an option a config leaves
  out runs that default (the factory and its timeline fill it in), so both write the same
  run. (Issue 75 registered odsgd's `correction`: every earlier odsgd config had left it
  out, and a study pinning the former "none" would not have found their records.)"""
  config = json.loads(json.dumps(config))
  for (section, field), default in ADDED_FIELDS.items():
    if isinstance(config.get(section), dict) and config[section].get(field, default) == default:
      config[section].pop(field, None)
  strategy = config.get("strategy")
  if isinstance(strategy, dict):
    config["strategy"] = _without_factory_defaults(strategy)
  text = json.dumps(config, sort_keys=True)
  return hashlib.sha256(text.encode()).hexdigest()[:16]


def _without_factory_defaults(strategy: dict[str, Any]) -> dict[str, Any]:
  definition = STRATEGIES.get(strategy.get("name"))
  if definition is None:
    return strategy
  defaults = definition.options()
  return {key: value for key, value in strategy.items()
          if key == "name" or key not in defaults or not _same_value(value, defaults[key])}


def _same_value(a: Any, b: Any) -> bool:
  """Equal as options: of one kind (True is not 1), numbers by value (2 is 2.0)."""
  def kind(x):
    return "number" if isinstance(x, (int, float)) and not isinstance(x, bool) else type(x)
  return kind(a) == kind(b) and a == b


def _without_docstrings(tree: ast.AST) -> ast.AST:
  for node in ast.walk(tree):
    if isinstance(node, (ast.Module, ast.ClassDef, ast.FunctionDef, ast.AsyncFunctionDef)):
      body = node.body
      if (body and isinstance(body[0], ast.Expr) and isinstance(body[0].value, ast.Constant)
          and isinstance(body[0].value.value, str)):
        node.body = body[1:] or [ast.Pass()]
  return tree


def trajectory_files() -> list[str]:
  """The package's modules that can move a trajectory, as paths relative to the package."""
  files = []
  for folder, subfolders, names in os.walk(_PACKAGE):
    subfolders[:] = sorted(s for s in subfolders if s != "__pycache__" and not (
        folder == _PACKAGE and s in _NOT_TRAJECTORY))
    files += [os.path.relpath(os.path.join(folder, n), _PACKAGE) for n in names
              if n.endswith(".py")]
  return sorted(files)


@functools.lru_cache(maxsize=1)
def trajectory_digest() -> str:
  """The digest of the trajectory code's syntax trees (comments, docstrings and layout
  left out)."""
  digest = hashlib.sha256()
  for name in trajectory_files():
    with open(os.path.join(_PACKAGE, name), encoding="utf-8") as f:
      tree = _without_docstrings(ast.parse(f.read()))
    digest.update(name.encode() + b"\0" + ast.dump(tree).encode() + b"\0")
  return digest.hexdigest()[:16]


def code_identity() -> dict[str, str]:
  """What must match for a record to be reused: the trajectory code, the JAX versions and
  the platform (a CPU's and a GPU's floats differ)."""
  return {"trajectory": trajectory_digest(), "jax": jax.__version__,
          "jaxlib": jaxlib.__version__, "platform": jax.default_backend()}


@functools.lru_cache(maxsize=1)  # the code this process runs: read once, not per record
def commit() -> str:
  """The checkout's commit, "+changes" where the trajectory code differs from it; "unknown"
  outside a git checkout."""
  root = os.path.dirname(_PACKAGE)
  try:
    head = subprocess.run(["git", "rev-parse", "--short=12", "HEAD"], cwd=root, check=True,
                          capture_output=True, text=True, timeout=30).stdout.strip()
    changed = subprocess.run(["git", "status", "--porcelain", "--", "odsgd_jax"], cwd=root,
                             check=True, capture_output=True, text=True, timeout=30).stdout
  except (OSError, subprocess.SubprocessError):
    return "unknown"
  changed = [line for line in changed.splitlines() if "odsgd_jax/study/" not in line]
  return head + ("+changes" if changed else "")


def record_path(folder: str, name: str) -> str:
  return os.path.join(folder, name + SUFFIX)


def read_json(path: str) -> Any:
  """The JSON value in `path`, gzip-compressed where its name ends in ".gz".

  Raises:
    OSError: no such file, or a compressed one cut short.
    ValueError: not JSON.
  """
  opener = gzip.open if path.endswith(".gz") else open
  with opener(path, "rt", encoding="utf-8") as f:
    return json.load(f)


def read_record(path: str) -> dict[str, Any] | None:
  """The record at `path`, or None: none there, or one cut short (a kill while writing it
  leaves the previous one, as records are written by renaming). Where none is at a
  compressed record's path, an uncompressed one of the same name (records before issue 76
  were plain `<name>.json`) is read instead."""
  for candidate in (path, path.removesuffix(".gz")) if path.endswith(SUFFIX) else (path,):
    try:
      record = read_json(candidate)
    except (OSError, ValueError, EOFError):
      continue
    return record if isinstance(record, dict) and record.get("format") == FORMAT else None
  return None


def record_files(folder: str, recursive: bool = False) -> list[str]:
  """The JSON files in `folder` (and the folders below it, if `recursive`), by name: a
  compressed one where an uncompressed one of the same name is beside it."""
  paths = {}
  for suffix in (".json", SUFFIX):  # the compressed one last: it replaces its namesake
    pattern = os.path.join(folder, "**" if recursive else "", "*" + suffix)
    paths.update({path.removesuffix(suffix): path
                  for path in glob.glob(pattern, recursive=recursive)})
  return [paths[name] for name in sorted(paths)]


def records_in(folder: str, recursive: bool = False) -> list[dict[str, Any]]:
  """Every record in `folder` (and the folders below it, if `recursive`), by file name."""
  found = (read_record(path) for path in record_files(folder, recursive))
  return [record for record in found if record is not None and "label" in record]


def write_record(path: str, record: Any, indent: int | None = None) -> None:
  """Writes `record` whole or not at all (a temporary file renamed into place): compact and
  gzip-compressed where `path` ends in ".gz" (no time in the header: the same record gives
  the same bytes), else plain, with `indent` for a file read in diffs."""
  os.makedirs(os.path.dirname(path) or ".", exist_ok=True)
  temporary = f"{path}.tmp{os.getpid()}"
  text = json.dumps(record, separators=None if indent else (",", ":"), indent=indent,
                    sort_keys=True) + "\n"
  if path.endswith(".gz"):
    with open(temporary, "wb") as f:
      f.write(gzip.compress(text.encode("utf-8"), compresslevel=9, mtime=0))
  else:
    with open(temporary, "w", encoding="utf-8") as f:
      f.write(text)
  os.replace(temporary, path)


def make_record(label: str, seed: int, config: dict[str, Any], summary: dict[str, Any] | None,
                evaluations: list[dict[str, float]], error: str | None,
                clock: dict[str, Any] | None, environment: str,
                seconds: float | None = None) -> dict[str, Any]:
  """`seconds`: the run's wall time in its study's process, start-up included."""
  return {"format": FORMAT, "label": label, "seed": seed, "config_digest": config_digest(config),
          "config": config, "summary": summary, "evaluations": evaluations, "error": error,
          "clock": clock, "environment": environment, "seconds": seconds,
          "code": code_identity(),
          "commit": commit(), "written": datetime.datetime.now(datetime.timezone.utc)
          .isoformat(timespec="seconds")}


def is_stale(record: dict[str, Any]) -> bool:
  """Made by other code (or JAX, or platform) than this checkout's."""
  return record.get("code") != code_identity()


def accepted(record: dict[str, Any]) -> dict[str, Any]:
  """`record` declared made by this code (`--stale accept`): its own identity kept beside."""
  return {**record, "code": code_identity(),
          "accepted_from": [*record.get("accepted_from", []), record.get("code")]}


def lineage(record: dict[str, Any]) -> tuple[str, ...]:
  """The trajectory digests of the code a record was made by and of every code it was
  accepted under since (`--stale accept`): code declared to make the same runs."""
  codes = [record.get("code") or {}, *record.get("accepted_from", [])]
  return tuple(dict.fromkeys(code.get("trajectory") for code in codes
                             if isinstance(code, dict) and code.get("trajectory")))


class Derived:
  """Figures computed from a study's runs that take long to compute again (the equal-time
  budgets, the clock's replays for the "robust to the clock" column), kept beside its
  records in `derived.json.gz`, each under a key of everything it is computed from and the
  code that computes it (the trajectory digest): a rebuild from records reads them instead
  of computing them again. A cache, not a record: deleting the file only makes the next
  rebuild slower.

  A figure kept under code that was declared to make the same runs as this code (the
  `lineage` of an accepted record; for the budgets, which read configs and no run, the
  lineages of the folder's records where `accept`, the study's --stale accept) is taken as
  this code's and kept again under it: accepting a change that moves no trajectory does
  not compute every figure again (issue 76: that took the claims 25 minutes).

  `prune`: a rebuild from records alone (`--from_records`) reads every figure its tables
  need, so when it ends the file keeps only those: figures of other code would otherwise
  pile up with every accepted change."""

  FILE = "derived" + SUFFIX
  # by file: the keys every `Derived` of this process read or wrote there (a study's budgets
  # and its replays are kept in the same file by two of them)
  _used_in: dict[str, set[str]] = {}

  def __init__(self, folder: str, prune: bool = False, accept: bool = False):
    self.path = os.path.join(folder, self.FILE)
    self.values: dict[str, Any] = {}
    self.added: set[str] = set()  # the keys this one put: what it merges into the file
    self.changed = False
    self.used = Derived._used_in.setdefault(os.path.abspath(self.path), set())
    self.prune = prune
    self.accepted = tuple(dict.fromkeys(
        digest for record in records_in(folder, recursive=True)
        for digest in lineage(record))) if accept else ()
    try:
      self.values = read_json(self.path)
    except (OSError, ValueError, EOFError):  # none yet, or cut short: computed again
      pass
    if prune:
      atexit.register(self.save)

  class Key(tuple):
    """What a figure is computed from (`Derived.key`); kept under a digest of it and of
    the code that computed it."""

  @staticmethod
  def key(*parts: Any) -> "Derived.Key":
    return Derived.Key(parts)

  @staticmethod
  def _stored(digest: str, key: "Derived.Key") -> str:
    text = json.dumps([digest, *key], sort_keys=True, default=str)
    return hashlib.sha256(text.encode()).hexdigest()[:24]

  def get(self, key: "Derived.Key", lineage: tuple[str, ...] = ()) -> Any:
    """The figure kept for `key` by this code, or by code of `lineage` or code the study
    accepts (then kept again under this code's); None if none is."""
    for digest in dict.fromkeys((trajectory_digest(), *lineage, *self.accepted)):
      stored = self._stored(digest, key)
      if stored in self.values:
        value = self.values[stored]
        if digest == trajectory_digest():
          self.used.add(stored)
        else:
          self.put(key, value)  # kept again under this code's
        return value
    return None

  def put(self, key: "Derived.Key", value: Any) -> None:
    if not self.changed and not self.prune:
      atexit.register(self.save)  # once, when the script ends, whatever the report needed
    stored = self._stored(trajectory_digest(), key)
    self.values[stored], self.changed = value, True
    self.used.add(stored)
    self.added.add(stored)

  def save(self) -> None:
    """Writes the figures, merged with what another `Derived` of the folder wrote since
    (pruned: only the figures this process used)."""
    if self.prune and self.used:
      values = {**Derived(os.path.dirname(self.path)).values, **self.values}
      write_record(self.path, {key: values[key] for key in sorted(self.used) if key in values})
      self.changed = False
    if self.changed:  # what this one put, into what the file holds now (another may have
      # pruned it since: what it read then is not written back)
      merged = Derived(os.path.dirname(self.path)).values
      merged.update({key: self.values[key] for key in self.added})
      write_record(self.path, merged)
      self.changed = False


def source_digest(*modules: str) -> str:
  """The digest of some modules' syntax trees (paths relative to the package), for the keys
  of `Derived` figures that code outside the trajectory code computes."""
  digest = hashlib.sha256()
  for name in modules:
    with open(os.path.join(_PACKAGE, name), encoding="utf-8") as f:
      digest.update(ast.dump(_without_docstrings(ast.parse(f.read()))).encode())
  return digest.hexdigest()[:16]
