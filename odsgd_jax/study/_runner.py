"""Runs a study's grid, one fresh workdir per run, several runs at once on a multi-core host."""

import concurrent.futures
import ctypes
import dataclasses
import json
import multiprocessing
import os
import shutil
import signal
import time
from typing import Any, Callable, Sequence

import jax

from odsgd_jax.study._grid import RunSpec, StudyInputError
from odsgd_jax.train import (CLOCK_FILE, ConfigError, NonFiniteLossError, read_metrics,
                             train_and_evaluate, use_compilation_cache, validate_config)


@dataclasses.dataclass
class RunResult:
  """What one run of a study produced.

  Attributes:
    spec: the run.
    summary: its summary.json, or None when it diverged.
    evaluations: the evaluation rows (step, sim_time and the split's loss and accuracy:
      `validation_...` during a run on a data set with a validation split, `test_...`
      otherwise and at its end).
    error: why it stopped early ("diverged: ..."), or None.
    workdir: its folder (metrics.jsonl, checkpoints, model).
  """

  spec: RunSpec
  summary: dict[str, Any] | None
  evaluations: list[dict[str, float]]
  error: str | None
  workdir: str

  @property
  def accuracy(self) -> float | None:
    return None if self.summary is None else self.summary["test_accuracy"]

  def row(self) -> dict[str, Any]:
    """The tidy record of the run (one row of the study's table)."""
    return {"label": self.spec.label, "seed": self.spec.seed, "config": self.spec.config,
            "overrides": [list(o) for o in self.spec.overrides], "workdir": self.workdir,
            "error": self.error, "summary": self.summary, "evaluations": self.evaluations}


def run_one(spec: RunSpec, workdir: str, resume: bool = False,
            cache: str | None = None, twins: Sequence[str] = ()) -> RunResult:
  """Trains `spec` in `workdir` (afresh, unless `resume` and it finished with the same
  config) and collects its result. A diverging run is a result, not an error.
  `cache`: a compilation cache folder shared by the study's runs. `twins`: folders of
  runs in other studies; the first that finished with the same config is copied instead
  of trained (a run is a pure function of its config and seed)."""
  if cache:
    use_compilation_cache(cache)
  config = spec.build()
  config.train.progress_bar = False
  summary = _finished_summary(workdir, config.to_dict()) if resume else None
  if summary is None:
    shutil.rmtree(workdir, ignore_errors=True)  # the study's own output: always fresh
    twin = next((t for t in twins if _finished_summary(t, config.to_dict())), None)
    if twin:
      shutil.copytree(twin, workdir)
      summary = _finished_summary(workdir, config.to_dict())
  if summary is None:
    try:
      summary = train_and_evaluate(config, workdir)
    except NonFiniteLossError as error:
      return RunResult(spec, None, _evaluations(workdir), f"diverged: {error}", workdir)
  return RunResult(spec, summary, _evaluations(workdir), None, workdir)


def _finished_summary(workdir: str, config: dict[str, Any]) -> dict[str, Any] | None:
  """The summary of a run that finished in `workdir` with `config`, or None: not run,
  another config, a config.json or summary.json cut short by a kill, or no clock.json (a
  run of a version before it: its times cannot be replayed; run again)."""
  if not os.path.exists(os.path.join(workdir, CLOCK_FILE)):
    return None
  try:
    with open(os.path.join(workdir, "config.json"), encoding="utf-8") as f:
      saved = json.load(f)
    if json.loads(json.dumps(config)) != saved:
      return None
    with open(os.path.join(workdir, "summary.json"), encoding="utf-8") as f:
      summary = json.load(f)
  except (OSError, ValueError):  # missing, or half-written (JSONDecodeError)
    return None
  return summary if isinstance(summary, dict) and "test_accuracy" in summary else None


def _evaluations(workdir: str) -> list[dict[str, float]]:
  if not os.path.exists(os.path.join(workdir, "metrics.jsonl")):
    return []
  fields = ("step", "sim_time", "test_loss", "test_accuracy", "validation_loss",
            "validation_accuracy")
  return [{k: row[k] for k in fields if k in row} for row in read_metrics(workdir)
          if "test_accuracy" in row or "validation_accuracy" in row]


def timed_accuracy(evaluations: list[dict[str, float]]) -> str:
  """The accuracy a run's evaluations track over time: validation where the data set
  has that split (targets are timed on it), else test."""
  return ("validation_accuracy" if any("validation_accuracy" in row for row in evaluations)
          else "test_accuracy")


def _end_with_parent() -> None:
  """A worker process is killed when the study's process dies (Linux), instead of
  training on alone through the runs left in its queue (`--resume` reruns the study)."""
  try:
    libc = ctypes.CDLL("libc.so.6", use_errno=True)
    libc.prctl(1, signal.SIGKILL)  # PR_SET_PDEATHSIG
  except (OSError, AttributeError):  # not Linux: the worker finishes its run first
    pass


def share_accelerator_memory() -> None:
  """Several processes share one GPU: each takes the memory it needs as it needs it
  (`XLA_PYTHON_CLIENT_PREALLOCATE=false`) instead of 75% of the GPU's at start, which
  leaves the second one out of memory. For the processes started after this, and this one
  if its backend has not started; unless the user's environment says otherwise."""
  os.environ.setdefault("XLA_PYTHON_CLIENT_PREALLOCATE", "false")


def default_processes() -> int:
  """One run per core, and one more: a small model's step uses about one core of a
  CPU host, and one run's host work (data, logging) fills another's device time
  (on 2 cores, 2 runs at once: 1.4x one at a time; 3: 1.6x)."""
  try:
    cores = len(os.sched_getaffinity(0))
  except AttributeError:  # not on Linux
    cores = os.cpu_count() or 1
  return cores + 1


def check_output(output: str, flag: str = "output") -> None:
  """A study's folder: new, or a folder (of a study to redo or resume), not a file."""
  if not str(output).strip():
    raise StudyInputError(f"{flag} is empty: give the folder for the study's runs and report")
  if os.path.exists(output) and not os.path.isdir(output):
    raise StudyInputError(f"{flag} {output!r} is a file, not a folder: give a new folder or "
                          f"one that holds a study")


def check_specs(specs: Sequence[RunSpec], output: str | None = None,
                processes: int = 1) -> None:
  """Everything `run_study` checks before its first run: at least one run, distinct
  names (a seed given twice), each config building and valid, `processes` >= 1, an
  `output` that is a folder. A script with several studies calls it on all of them
  first, so that none starts before the last one is known to be runnable.

  Raises:
    StudyInputError, ConfigError: naming the run, the field or the value.
  """
  if not specs:
    raise StudyInputError("the study has no runs: give at least one seed and one group")
  if processes < 1:
    raise StudyInputError(f"processes={processes}: runs trained at once must be at least 1")
  if output is not None:
    check_output(output)
  names = [spec.name for spec in specs]
  repeated = sorted({name for name in names if names.count(name) > 1})
  if repeated:
    raise StudyInputError(f"two runs of the study share a name ({', '.join(repeated)}): a seed "
                          f"or a group is given twice")
  for spec in specs:  # every config is checked before the first run starts
    try:
      validate_config(spec.build(), jax.device_count())
    except (ConfigError, StudyInputError) as error:
      raise type(error)(f"run {spec.name} ({spec.config}): {error}") from error


def run_study(specs: Sequence[RunSpec], output: str, *, processes: int = 1,
              resume: bool = False, reuse: Sequence[str] = (),
              report: Callable[[RunResult], None] | None = None) -> list[RunResult]:
  """Runs every spec in its own folder `output/runs/<spec.name>` and writes
  `output/study.json` (one row per run, per-seed values included).

  Args:
    specs: the runs, e.g. from `grid`.
    output: the study's folder.
    processes: runs trained at the same time, each in its own process (1: in this
      one). Results do not depend on it: every run is a pure function of its config.
    resume: keep runs that already finished with the same config (after a crash of
      a long study); by default every run starts afresh.
    reuse: folders of other studies: a run there of the same name that finished with the
      same config is copied, not trained again (e.g. a tuned setting that is the default).
    report: called with each result as it arrives (e.g. to print progress).

  Returns:
    The results, in the order of `specs`.

  Raises:
    StudyInputError, ConfigError: no runs, a run given twice, `processes` < 1, `output`
      a file, or a run's config invalid (`check_specs`, before any run starts and before
      anything is written).
  """
  check_specs(specs, output, processes)
  os.makedirs(output, exist_ok=True)
  workdirs = [os.path.join(output, "runs", spec.name) for spec in specs]
  twins = [[os.path.join(folder, "runs", spec.name) for folder in reuse] for spec in specs]
  # The seeds of a strategy compile once: in the cache the user named through JAX's own
  # variable (shared with other studies and runs), else in the study's folder.
  cache = os.environ.get("JAX_COMPILATION_CACHE_DIR") or os.path.join(output, "jax_cache")
  results: list[RunResult | None] = [None] * len(specs)
  started = time.perf_counter()
  if processes <= 1 or len(specs) == 1:
    for i, (spec, workdir) in enumerate(zip(specs, workdirs, strict=True)):
      results[i] = run_one(spec, workdir, resume, cache, twins[i])
      if report:
        report(results[i])
  else:
    share_accelerator_memory()  # the worker processes inherit it
    # spawn: a fresh JAX in each worker process (forking a started runtime is unsafe)
    context = multiprocessing.get_context("spawn")
    with concurrent.futures.ProcessPoolExecutor(processes, mp_context=context,
                                                initializer=_end_with_parent) as pool:
      futures = {pool.submit(run_one, spec, workdir, resume, cache, twins[i]): i
                 for i, (spec, workdir) in enumerate(zip(specs, workdirs, strict=True))}
      for future in concurrent.futures.as_completed(futures):
        results[futures[future]] = future.result()
        if report:
          report(results[futures[future]])
  with open(os.path.join(output, "study.json"), "w", encoding="utf-8") as f:
    json.dump({"wall_time_s": time.perf_counter() - started,
               "runs": [result.row() for result in results]}, f, indent=1)
  return results
