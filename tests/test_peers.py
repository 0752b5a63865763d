"""Telling a dead peer from other failures, in one process: the error's cause decides the
message (a failed collective, a storage error, anything else), and the watch of the
processes' beats reports silence, a finished process and a lost coordinator rightly.
The same paths end to end, with real processes: tests/test_multiprocess.py."""

import errno
import threading
import time

import jax
import pytest

from odsgd_jax import parallel
from odsgd_jax.train import CheckpointError, Checkpoints

GLOO = "UNKNOWN: Gloo AllGather failed: [pair.cc:538] Read error: Connection reset by peer"


@pytest.fixture
def two_processes(monkeypatch):
  """This process, counted as one of two."""
  monkeypatch.setattr(jax, "process_count", lambda: 2)


def _wrapped(error):
  """`error` as orbax passes it on: raised from inside another one."""
  try:
    try:
      raise error
    except Exception as inner:
      raise ValueError("the save failed") from inner
  except ValueError as outer:
    return outer


def _raising(error):
  """A stand-in for orbax's save that fails with `error`."""
  def save(*args, **kwargs):
    raise error
  return save


def test_a_failed_collective_is_a_peer_failure_only_between_processes(two_processes, monkeypatch):
  assert parallel.is_peer_failure(jax.errors.JaxRuntimeError(GLOO))
  assert parallel.is_peer_failure(_wrapped(jax.errors.JaxRuntimeError(GLOO)))
  assert not parallel.is_peer_failure(jax.errors.JaxRuntimeError("RESOURCE_EXHAUSTED: Out of "
                                                                  "memory allocating 4 GiB"))
  assert not parallel.is_peer_failure(_wrapped(OSError(errno.ENOSPC, "No space left")))
  monkeypatch.setattr(jax, "process_count", lambda: 1)
  assert not parallel.is_peer_failure(jax.errors.JaxRuntimeError(GLOO))


def test_across_processes_names_what_was_being_done_and_for_how_long(two_processes):
  activity = parallel.Activity()
  activity.now("saving the checkpoint of step 60")
  time.sleep(0.2)
  with pytest.raises(parallel.PeerLostError) as lost:
    with parallel.across_processes(activity):
      raise _wrapped(jax.errors.JaxRuntimeError(GLOO))
  message = str(lost.value)
  assert message.startswith("a collective between the 2 processes failed while saving the "
                            "checkpoint of step 60, after waiting 0."), message
  assert "Connection reset by peer" in message and "probably died" in message
  assert "\n" not in message
  with pytest.raises(KeyError):  # anything else passes unchanged
    with parallel.across_processes(activity):
      raise KeyError("not a peer")


@pytest.mark.parametrize("error, expected", [
    (OSError(errno.ENOSPC, "No space left on device"), "fix the folder"),
    (ValueError("Error writing local file: [Errno 30] Read-only file system"), "fix the folder"),
    (RuntimeError("an orbax invariant broke"), "Checkpoints saved before are intact: rerun"),
])
def test_a_failed_save_blames_the_folder_only_for_a_storage_error(tmp_path, monkeypatch, error,
                                                                   expected):
  checkpoints = Checkpoints(tmp_path, max_to_keep=2)
  monkeypatch.setattr(checkpoints._manager, "save", _raising(error))
  with pytest.raises(CheckpointError, match=expected) as failed:
    checkpoints.save(1, {"x": 1.0}, {})
  assert ("fix the folder" in str(failed.value)) == (expected == "fix the folder")


def test_a_save_whose_collective_failed_is_passed_on_as_the_peer_failure_it_is(
    tmp_path, monkeypatch):
  checkpoints = Checkpoints(tmp_path, max_to_keep=2)
  monkeypatch.setattr(jax, "process_count", lambda: 2)  # once orbax has opened the folder
  gloo = _wrapped(jax.errors.JaxRuntimeError(GLOO))
  monkeypatch.setattr(checkpoints._manager, "save", _raising(gloo))
  activity = parallel.Activity()
  with pytest.raises(parallel.PeerLostError, match="while saving the checkpoint of step 3"):
    with parallel.across_processes(activity):
      activity.now("saving the checkpoint of step 3")
      checkpoints.save(3, {"x": 1.0}, {})
  checkpoints.close()  # returns at once: a failed save is not waited for


class _Store:
  """The coordination service's key-value store, in memory; `gone` as if its process died."""

  def __init__(self):
    self.values, self.gone, self.lock = {}, False, threading.Lock()

  def key_value_set(self, key, value, allow_overwrite=False):
    del allow_overwrite
    if self.gone:
      raise RuntimeError("UNAVAILABLE: failed to connect to all addresses")
    with self.lock:
      self.values[key] = value

  def key_value_dir_get(self, prefix):
    if self.gone:
      raise RuntimeError("UNAVAILABLE: failed to connect to all addresses")
    with self.lock:
      return [(k, v) for k, v in self.values.items() if k.startswith(prefix)]


class _Reports:
  def __init__(self):
    self.errors = []

  def __call__(self, error):
    self.errors.append(str(error))


TIMEOUT_S = 0.5


def _watch(store, process, reports):
  return parallel.PeerWatch(TIMEOUT_S, reports, parallel.Activity("training"), client=store,
                            process=process, processes=2)


def test_the_watch_reports_a_silent_process_and_only_it():
  store, reports = _Store(), [_Reports(), _Reports()]
  watches = [_watch(store, process, reports[process]) for process in (0, 1)]
  time.sleep(4 * TIMEOUT_S)
  assert reports[0].errors == reports[1].errors == []  # both beat
  watches[1]._stopped.set()  # process 1 goes silent without saying it finished: it died
  time.sleep(4 * TIMEOUT_S)
  assert len(reports[0].errors) == 1
  assert reports[0].errors[0].startswith("process 1 of this run has given no sign of life for")
  watches[0].finished()


def test_the_watch_lets_a_finished_process_go_and_reports_a_lost_coordinator():
  store, reports = _Store(), [_Reports(), _Reports()]
  watches = [_watch(store, process, reports[process]) for process in (0, 1)]
  time.sleep(2 * TIMEOUT_S)
  watches[1].finished()  # process 1 ended on purpose
  time.sleep(4 * TIMEOUT_S)
  assert reports[0].errors == []
  store.gone = True  # process 0 with it
  time.sleep(2 * TIMEOUT_S)
  assert len(reports[0].errors) == 1 and reports[0].errors[0].startswith(
      "the coordinator of this run (process 0) stopped answering")
  assert reports[1].errors == []  # it had finished: it stopped watching
