"""Runs a study's grid, one fresh workdir per run, several runs at once on a multi-core host;
keeps a record of each finished run (`_records`) and reuses the records that match."""

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
import ml_collections

from odsgd_jax import xla_flags
from odsgd_jax.data import DATASETS
from odsgd_jax.study import _records as records_lib
from odsgd_jax.study._grid import RunSpec, StudyInputError
from odsgd_jax.tasks import TASKS, Metric, Task
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
    workdir: its folder (metrics.jsonl, checkpoints, model); absent where the result
      came from a record.
    config: its resolved config (`ConfigDict.to_dict()`).
    clock: what its simulated clock charged (clock.json, what `retime` replays); None for a
      run that diverged.
    environment: the JAX versions and devices that trained it.
    seconds: the wall time of the run in its study's process, start-up (config, data,
      compiling) included: what the study spent on it (`summary["wall_time_s"]` counts
      from the train state's start). None where it was not measured.
  """

  spec: RunSpec
  summary: dict[str, Any] | None
  evaluations: list[dict[str, float]]
  error: str | None
  workdir: str
  config: dict[str, Any] | None = None
  clock: dict[str, Any] | None = None
  environment: str = ""
  seconds: float | None = None
  derived: records_lib.Derived | None = None  # the study's kept figures (its replays)
  lineage: tuple[str, ...] = ()  # its record's `records_lib.lineage`: whose figures hold

  @property
  def target(self) -> Metric:
    """The metric its task's targets and verdicts read (`target_metric`)."""
    return target_metric(self.config or self.spec.build().to_dict())

  @property
  def score(self) -> float | None:
    """Its final test value of the target metric, turned so that higher is better
    (`Metric.oriented`: an accuracy, a negated loss); None where it diverged."""
    if self.summary is None:
      return None
    return self.target.oriented(self.summary[f"test_{self.target.name}"])

  def row(self) -> dict[str, Any]:
    """The tidy record of the run (one row of the study's table)."""
    return {"label": self.spec.label, "seed": self.spec.seed, "config": self.spec.config,
            "overrides": [list(o) for o in self.spec.overrides], "workdir": self.workdir,
            "error": self.error, "summary": self.summary, "evaluations": self.evaluations}


def run_one(spec: RunSpec, workdir: str, resume: bool = False,
            cache: str | None = None, twins: Sequence[str] = ()) -> RunResult:
  """`_run_one`, its wall time in this process (`RunResult.seconds`) measured around it."""
  started = time.perf_counter()
  result = _run_one(spec, workdir, resume, cache, twins)
  return dataclasses.replace(result, seconds=time.perf_counter() - started)


def _run_one(spec: RunSpec, workdir: str, resume: bool, cache: str | None,
             twins: Sequence[str]) -> RunResult:
  """Trains `spec` in `workdir` (afresh, unless `resume` and it finished with the same
  config) and collects its result. A diverging run is a result, not an error.
  `cache`: a compilation cache folder shared by the study's runs. `twins`: folders of
  runs in other studies; the first that finished with the same config is copied instead
  of trained (a run is a pure function of its config and seed)."""
  if cache:
    use_compilation_cache(cache)
  config = _trained_config(spec)
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
      return RunResult(spec, None, _evaluations(workdir), f"diverged: {error}", workdir,
                       config.to_dict(), None, records_lib.environment())
  with open(os.path.join(workdir, CLOCK_FILE), encoding="utf-8") as f:
    clock = json.load(f)
  return RunResult(spec, summary, _evaluations(workdir), None, workdir, config.to_dict(), clock,
                   records_lib.environment())


def _record_of(result: RunResult) -> dict[str, Any]:
  return records_lib.make_record(result.spec.label, result.spec.seed, result.config,
                                 result.summary, result.evaluations, result.error, result.clock,
                                 result.environment, result.seconds)


def _from_record(spec: RunSpec, record: dict[str, Any], workdir: str) -> RunResult:
  return RunResult(spec, record["summary"], record["evaluations"], record["error"], workdir,
                   record["config"], record["clock"], record["environment"],
                   record.get("seconds"), lineage=records_lib.lineage(record))


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
  return summary if isinstance(summary, dict) and "test_loss" in summary else None


def _evaluations(workdir: str) -> list[dict[str, float]]:
  if not os.path.exists(os.path.join(workdir, "metrics.jsonl")):
    return []
  splits = ("test_", "validation_")  # every metric of the task on a split
  return [{k: v for k, v in row.items() if k in ("step", "sim_time") or k.startswith(splits)}
          for row in read_metrics(workdir) if any(k.startswith(splits) for k in row)]


def task_of(config: dict[str, Any]) -> Task:
  """A run's task: its `data.task`, else its data set's."""
  data = config["data"]
  return TASKS[data.get("task") or DATASETS[data["name"]].task]


def target_metric(config: dict[str, Any]) -> Metric:
  """The target metric of a run's task."""
  return task_of(config).target


def timed_metric(evaluations: list[dict[str, float]], metric: Metric) -> str:
  """The column of `metric` a run's evaluations track over time: validation where the data
  set has that split (targets are timed on it), else test."""
  validation = f"validation_{metric.name}"
  return validation if any(validation in row for row in evaluations) else f"test_{metric.name}"


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


@dataclasses.dataclass(frozen=True)
class Keeping:
  """How a study's runs are kept and when it stops launching them (the flags every study
  script shares; docs/results.md, "Run records" and "Studies in slices").

  Attributes:
    from_records: the results come from the records alone: nothing is trained, and a run
      without a matching record is an error before anything is written.
    stale: what to do with a record of the run's config made by other code
      (`_records.is_stale`): "refuse" to start, naming them; "retrain" them; or "accept"
      them as made by this code (the record keeps its own identity beside).
    stop_at: a `time.time()` after which no further run is launched: the runs in flight
      finish and keep their records, then the study raises `StudyPaused`.
  """

  from_records: bool = False
  stale: str = "refuse"
  stop_at: float | None = None


class StudyPaused(Exception):
  """The study stopped launching runs at its time limit (`Keeping.stop_at`); every run that
  finished has its record, and `remaining` runs of this study have not been trained."""

  def __init__(self, remaining: int, records: str | None):
    kept = f" (its records in {os.path.normpath(records)})" if records else ""
    super().__init__(f"{remaining} runs of this study remain untrained{kept}")
    self.remaining = remaining


def _trained_config(spec: RunSpec) -> ml_collections.ConfigDict:
  """The config a run of `spec` trains with (its record's digest is of this one)."""
  config = spec.build()
  config.train.progress_bar = False
  return config


def _reused(specs: Sequence[RunSpec], workdirs: Sequence[str], records: str,
            reuse_records: Sequence[str], stale_policy: str) -> list[RunResult | None]:
  """Each spec's result from a record of its config (this study's, else one of
  `reuse_records`, copied into this study's), or None where it must be trained."""
  results: list[RunResult | None] = [None] * len(specs)
  stale = []
  for i, spec in enumerate(specs):
    digest = records_lib.config_digest(_trained_config(spec).to_dict())
    for folder in (records, *reuse_records):
      record = records_lib.read_record(records_lib.record_path(folder, spec.name))
      # the digest of the record's config as this code writes it (the field written with
      # the record may be of an earlier rule: see `records_lib.config_digest`)
      if record is None or records_lib.config_digest(record.get("config") or {}) != digest:
        continue
      if records_lib.is_stale(record):
        if folder == records:
          stale.append((i, record))
        continue
      if folder != records:
        records_lib.write_record(records_lib.record_path(records, spec.name), record)
      results[i] = _from_record(spec, record, workdirs[i])
      break
  if stale and stale_policy == "refuse":
    first = stale[0][1]
    raise StudyInputError(
        f"{len(stale)} records in {records} (first: "
        f"{specs[stale[0][0]].name}{records_lib.SUFFIX}, commit "
        f"{first.get('commit')}) were made by other code than this checkout's (trajectory "
        f"code {first.get('code', {}).get('trajectory')} against "
        f"{records_lib.trajectory_digest()}, or another JAX or platform): they are not reused "
        f"silently. Rerun with --stale retrain to train them again, or, if the change cannot "
        f"move a trajectory, --stale accept to keep them (docs/results.md, \"Run records\")")
  if stale_policy == "accept":
    for i, record in stale:
      if results[i] is None:
        record = records_lib.accepted(record)
        records_lib.write_record(records_lib.record_path(records, specs[i].name), record)
        results[i] = _from_record(specs[i], record, workdirs[i])
  return results


def _check_one_device_count(specs: Sequence[RunSpec], results: Sequence[RunResult | None],
                            records: str | None, training: bool) -> None:
  """A run's numbers depend on the device count (the pilots' targets moved by 0.2 points
  without 8 simulated devices): a study never mixes runs made on different counts, neither
  among its records nor with runs this process would train. Records that all name one
  count are read on any machine (a rebuild with --from_records trains nothing).

  Raises:
    StudyInputError: the reused records name another count than the others, or than this
      process's where it trains.
  """
  here = jax.device_count()
  counts = [(i, records_lib.devices_of(result.environment)) for i, result in enumerate(results)
            if result is not None]
  counts = [(i, count) for i, count in counts if count is not None]
  reference = (here if training or any(count == here for _, count in counts)
               else counts[0][1] if counts else None)
  elsewhere = [(i, count) for i, count in counts if count != reference]
  if not elsewhere:
    return
  i, count = elsewhere[0]
  against = (f"this process, which trains the rest, has {here}" if training
             else f"others there were made on {reference}")
  raise StudyInputError(
      f"{len(elsewhere)} records in {records} (first: {specs[i].name}{records_lib.SUFFIX}) "
      f"were made on "
      f"{count} devices ({results[i].environment}); {against}: a study does not mix device "
      f"counts. Run it with the records' count (XLA_FLAGS="
      f"--xla_force_host_platform_device_count=N on a CPU host; the study scripts set "
      f"{xla_flags.STUDY_HOST_DEVICES} unless XLA_FLAGS names a count), or train them again "
      f"in another --records folder")


def run_study(specs: Sequence[RunSpec], output: str, *, processes: int = 1,
              resume: bool = False, reuse: Sequence[str] = (),
              report: Callable[[RunResult], None] | None = None, records: str | None = None,
              reuse_records: Sequence[str] = (), keeping: Keeping = Keeping()
              ) -> list[RunResult]:
  """Runs every spec in its own folder `output/runs/<spec.name>` and writes
  `output/study.json` (one row per run, per-seed values included).

  Args:
    specs: the runs, e.g. from `grid`.
    output: the study's folder.
    processes: runs trained at the same time, each in its own process (1: in this
      one). Results do not depend on it: every run is a pure function of its config.
    resume: keep runs that already finished with the same config (after a crash of
      a long study), in `records` or in `output`; by default every run starts afresh.
    reuse: folders of other studies: a run there of the same name that finished with the
      same config is copied, not trained again (e.g. a tuned setting that is the default).
    report: called with each result as it arrives (e.g. to print progress).
    records: the folder of the study's run records (`_records`): each finished run writes
      `<records>/<spec.name>.json.gz`; with `resume` (or `keeping.from_records`) a record of
      the same config made by this code is its result. None: no records.
    reuse_records: record folders of other studies, searched like `reuse`.
    keeping: reading only records, stale records, a time to stop launching runs.

  Returns:
    The results, in the order of `specs`.

  Raises:
    StudyInputError, ConfigError: no runs, a run given twice, `processes` < 1, `output`
      a file, a run's config invalid (`check_specs`), stale records refused, or a run
      without a record under `keeping.from_records`; before any run starts and before
      anything is written.
    StudyPaused: `keeping.stop_at` passed before every run was launched; the runs that
      finished kept their records.
  """
  check_specs(specs, output, processes)
  if keeping.stale not in records_lib.STALE_POLICIES:
    raise StudyInputError(f"stale={keeping.stale!r}: choose one of "
                          f"{', '.join(records_lib.STALE_POLICIES)}")
  if keeping.from_records and not records:
    raise StudyInputError("results from records alone, but the study keeps no records: give "
                          "--records or --readme (whose section names its records' folder)")
  workdirs = [os.path.join(output, "runs", spec.name) for spec in specs]
  results: list[RunResult | None] = [None] * len(specs)
  if records and (resume or keeping.from_records):
    results = _reused(specs, workdirs, records, reuse_records, keeping.stale)
  todo = [i for i, result in enumerate(results) if result is None]
  _check_one_device_count(specs, results, records, training=bool(todo))
  if keeping.from_records and todo:
    raise StudyInputError(
        f"{len(todo)} of the {len(specs)} runs have no record of their config made by this "
        f"code in {records} (first: {specs[todo[0]].name}{records_lib.SUFFIX}): train them "
        f"(the same "
        f"command with --resume instead of --from_records), or see --stale")
  os.makedirs(output, exist_ok=True)
  twins = [[os.path.join(folder, "runs", spec.name) for folder in reuse] for spec in specs]
  # The seeds of a strategy compile once: in the cache the user named through JAX's own
  # variable (shared with other studies and runs), else in the study's folder.
  cache = os.environ.get("JAX_COMPILATION_CACHE_DIR") or os.path.join(output, "jax_cache")
  started = time.perf_counter()
  for result in results:
    if result is not None and report:
      report(result)

  def finished(i: int, result: RunResult) -> None:
    results[i] = result
    if records:  # at once: a kill later loses only the runs in flight
      records_lib.write_record(records_lib.record_path(records, specs[i].name),
                               _record_of(result))
    if report:
      report(result)

  def may_launch() -> bool:
    return keeping.stop_at is None or time.time() < keeping.stop_at

  queue = list(todo)
  if processes <= 1 or len(queue) <= 1:
    while queue and may_launch():
      i = queue.pop(0)
      finished(i, run_one(specs[i], workdirs[i], resume, cache, twins[i]))
  elif queue:
    share_accelerator_memory()  # the worker processes inherit it
    # spawn: a fresh JAX in each worker process (forking a started runtime is unsafe)
    context = multiprocessing.get_context("spawn")
    with concurrent.futures.ProcessPoolExecutor(processes, mp_context=context,
                                                initializer=_end_with_parent) as pool:
      running: dict[concurrent.futures.Future, int] = {}
      while queue or running:
        while queue and len(running) < processes and may_launch():  # launched as slots free
          i = queue.pop(0)
          running[pool.submit(run_one, specs[i], workdirs[i], resume, cache, twins[i])] = i
        if not running:
          break
        done, _ = concurrent.futures.wait(running, return_when=concurrent.futures.FIRST_COMPLETED)
        for future in done:
          finished(running.pop(future), future.result())
  if queue:
    raise StudyPaused(len(queue), records)
  if records:  # figures computed from these runs later (the clock's replays) are kept
    derived = records_lib.Derived(records, prune=keeping.from_records)
    results = [dataclasses.replace(result, derived=derived) for result in results]
  with open(os.path.join(output, "study.json"), "w", encoding="utf-8") as f:
    json.dump({"wall_time_s": time.perf_counter() - started,
               "runs": [result.row() for result in results]}, f, indent=1)
  return results
