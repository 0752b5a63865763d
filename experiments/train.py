"""Trains one experiment.

  python -m experiments.train --config configs/default.py --workdir runs/default \
      [--config.optimizer.learning_rate=0.05 ...]

A workdir that holds a checkpoint resumes from it. A bad config, a missing data
set, a checkpoint of another run, a workdir another run is using or that cannot be
written (read-only, full) or a diverging run stops with one message (exit status 1),
never a traceback. SIGTERM saves a checkpoint and exits 0.

Several processes (one per host, or several on one host), JAX's own runtime:

  python -m experiments.train --config ... --workdir ... \
      --coordinator_address=10.0.0.1:1234 --num_processes=2 --process_id=0   # and =1

Under SLURM, Open MPI or on a Cloud TPU pod slice the three are detected. A process
that dies ends the others with one line each (exit status 1); rerunning every process
resumes from the last complete checkpoint.
"""

import logging as std_logging
import os
import re
import sys
import threading

import jax
from absl import app, flags, logging
from ml_collections import config_flags

from odsgd_jax import parallel, xla_flags
from odsgd_jax.data import DataError
from odsgd_jax.train import (CheckpointError, ConfigError, NonFiniteLossError, Preempted,
                             WorkdirError, abandoned_save_noise_hidden, train_and_evaluate,
                             validate_config)

# New attributes are accepted so that options of the chosen model or strategy can be
# set without being listed in the file (--config.model.hidden_sizes=(64,)); a
# misspelt field is caught by validate_config, which names it and suggests the fix.
_CONFIG = config_flags.DEFINE_config_file(
    "config", None, "Experiment config file (configs/*.py).", lock_config=False,
    accept_new_attributes=True,
)
_WORKDIR = flags.DEFINE_string("workdir", None, "Folder for checkpoints, metrics and summary.")
flags.mark_flags_as_required(["config", "workdir"])
_COORDINATOR = flags.DEFINE_string(
    "coordinator_address", None, "host:port of process 0, for a multi-process run.")
_NUM_PROCESSES = flags.DEFINE_integer("num_processes", None, "Processes in the run.")
_PROCESS_ID = flags.DEFINE_integer("process_id", None, "This process's index, 0-based.")
_HEARTBEAT = flags.DEFINE_integer(
    "heartbeat_timeout_s", 100, "A process that stops answering for this long ends the run.",
    lower_bound=1)
_JOIN_TIMEOUT = flags.DEFINE_integer(
    "join_timeout_s", 300, "How long the processes wait for each other to start.",
    lower_bound=1)


def _last_line(error: BaseException) -> str:
  """The line that says what went wrong: a config file's own traceback ends with it."""
  lines = [line.strip() for line in str(error).splitlines() if line.strip()]
  return lines[-1] if lines else type(error).__name__


def _parse_flags(argv):
  """absl's parser, with a misspelt --config.a.b=v and a config file that does not load
  (missing, a syntax error, an unknown strategy after ':') reported as one line."""
  try:
    return flags.FLAGS(argv)
  except SyntaxError as error:
    print(f"error: --config does not load: {error.msg} ({error.filename}, line "
          f"{error.lineno})", file=sys.stderr)
    sys.exit(1)
  except flags.Error as error:
    loading = "parsing config file" in str(error)
    print(f"error: --config does not load: {_last_line(error)}" if loading
          else f"error: {_last_line(error)} (see --helpshort)", file=sys.stderr)
    sys.exit(1)
  except AttributeError as error:
    if "get_config" in str(error):  # the file loaded but defines no get_config()
      print(f"error: --config {_config_path(argv)} has no get_config() function: a config file "
            f"defines get_config() returning an ml_collections.ConfigDict (see "
            f"configs/default.py)", file=sys.stderr)
      sys.exit(1)
    _unknown_override(argv, error)
  except KeyError as error:  # raised by the locked config override
    _unknown_override(argv, error)
  except Exception as error:  # noqa: BLE001 -- the config file's own code raised it
    print(f"error: --config does not load: {type(error).__name__}: {_last_line(error)}",
          file=sys.stderr)
    sys.exit(1)


def _config_path(argv) -> str:
  """The --config file named on the command line (--config F or --config=F)."""
  for flag, value in zip(argv, [*argv[1:], ""], strict=True):
    if flag.startswith("--config="):
      return flag.partition("=")[2]
    if flag == "--config":
      return value
  return "file"


def _unknown_override(argv, error):
  """A misspelt --config.a.b=v, as one line."""
  text = str(error).replace("\\'", "'")
  unknown = re.search(r"'(\w+)'", text)
  suggestion = re.search(r'Did you mean "(\w+)"', text)
  field = unknown.group(1) if unknown else text
  culprit = [a for a in argv[1:] if a.startswith("--config.") and field in a.split("=")[0]]
  hint = f"; did you mean {suggestion.group(1)!r}?" if suggestion else ""
  print(f"error: {culprit[0].split('=')[0] if culprit else '--config'} names no config field "
        f"({field!r} does not exist){hint}", file=sys.stderr)
  sys.exit(1)


def _exit_after_error(status: int) -> None:
  """Exits at once, the message said: the interpreter's shutdown would join the threads
  orbax and TensorStore leave behind (a failed asynchronous save leaves one waiting
  forever), and their event loops, closed under them, print tracebacks after our line."""
  logging.flush()
  sys.stdout.flush()
  sys.stderr.flush()
  os._exit(status)


def _without_orbax_errors(record) -> bool:
  """Orbax logs a failed save or restore as tracebacks; the run says it in one line."""
  return not ("orbax" in record.pathname and record.levelno < std_logging.CRITICAL)


def _start_processes(activity: parallel.Activity) -> None:
  """jax.distributed's start, if this is one process of several. When the others do not
  join in time, JAX's runtime aborts the process from C++ with a stack trace; a timer
  that goes off first says it in one line instead. Then a `PeerWatch` does the same for
  a process that goes silent later, naming what this one was doing (`activity`, which the
  run's loop notes)."""
  def others_did_not_join():
    print(f"error: waited {_JOIN_TIMEOUT.value} s for the other processes of this run to start "
          f"and connect to the coordinator: start every process with the same "
          f"--coordinator_address and --num_processes and its own --process_id (a process "
          f"that failed while starting is the usual cause; its output says why)",
          file=sys.stderr, flush=True)
    os._exit(1)

  timer = threading.Timer(_JOIN_TIMEOUT.value, others_did_not_join)
  timer.daemon = True
  timer.start()
  try:
    several = parallel.initialize(_COORDINATOR.value, _NUM_PROCESSES.value, _PROCESS_ID.value,
                                  _HEARTBEAT.value, join_timeout_s=_JOIN_TIMEOUT.value + 60)
  except ValueError as error:
    print(f"error: {error}", file=sys.stderr)
    sys.exit(1)
  finally:
    timer.cancel()
  if several:
    parallel.PeerWatch(_HEARTBEAT.value, _peer_lost, activity)


def _peer_lost(error: parallel.PeerLostError) -> None:
  """Ends this process of a run whose other process has died, in one line."""
  print(f"error: {error} in {_WORKDIR.value}/checkpoints", file=sys.stderr, flush=True)
  os._exit(1)  # the orderly shutdown would wait on the dead process and abort


def main(argv):
  if len(argv) > 1:
    raise app.UsageError(f"unexpected arguments: {' '.join(argv[1:])}")
  if not flags.FLAGS["verbosity"].present:
    logging.set_verbosity(logging.WARNING)  # orbax logs every save at INFO
    logging.get_absl_handler().addFilter(_without_orbax_errors)
  with abandoned_save_noise_hidden():  # a failed save is said in one line
    _train()


def _train() -> None:
  """Checks the config, starts the processes, trains, and says how it ended."""
  try:
    config = _CONFIG.value
    config.keys()  # a config file that failed to load raises its error on first use
  except Exception as error:  # noqa: BLE001 -- whatever the file raised, said in one line
    print(f"error: --config does not load: {_last_line(error)}", file=sys.stderr)
    sys.exit(1)
  # Before JAX's backend starts (jax.distributed's start or the first device query), the
  # only time XLA reads its flags: a run that must resume bit for bit on a GPU.
  if config.get("train", {}).get("deterministic", True) is True:
    xla_flags.request_deterministic_ops()
  activity = parallel.Activity()  # what this process is doing: the loop notes it
  _start_processes(activity)
  try:  # the start line below describes a config that can run on these devices
    validate_config(config, jax.device_count())
  except ConfigError as error:
    print(f"error: {error}", file=sys.stderr)
    sys.exit(1)
  if jax.process_index() == 0:  # a GPU user sees at once whether the run is on the CPU
    in_use = parallel.devices_in_use(config.cluster.num_workers, jax.device_count(),
                                     config.parallel.devices_per_worker,
                                     config.parallel.num_devices)
    of_all = f" of {jax.device_count()}" if in_use != jax.device_count() else ""
    print(f"devices: {in_use}{of_all} x {jax.devices()[0].device_kind} "
          f"({jax.default_backend()}), {jax.process_count()} process(es); "
          f"{config.strategy.name} on {config.model.name} / {config.data.name} with "
          f"{config.cluster.num_workers} workers; the whole config goes to "
          f"{_WORKDIR.value}/config.json", flush=True)
  try:
    summary = train_and_evaluate(config, _WORKDIR.value, activity=activity)
  except Preempted as notice:
    print(notice, file=sys.stderr)
    sys.exit(0)
  except (ConfigError, DataError, CheckpointError, NonFiniteLossError, WorkdirError) as error:
    print(f"error: {error}", file=sys.stderr, flush=True)
    _exit_after_error(1)
  except parallel.PeerLostError as error:
    _peer_lost(error)
  logging.info("finished: %s", summary)
  tested = ", ".join(f"{name.removeprefix('test_')} {value:.4f}"  # the task's metrics
                     for name, value in summary.items() if name.startswith("test_"))
  print(f"test {tested} after {summary['steps']} steps "
        f"({summary['wall_time_s']:.0f} s); summary in {_WORKDIR.value}/summary.json")


if __name__ == "__main__":
  app.run(main, flags_parser=_parse_flags)
