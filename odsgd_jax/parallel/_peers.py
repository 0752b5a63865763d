"""When another process of a run dies: saying so, in one line, whatever this one was doing.

A process killed mid-run (SIGKILL, a lost host) shows itself to the others in two
ways. Usually their next collective (a gloo all-reduce of the step, the all-gather
of the metrics or of a checkpoint save) fails at once with a `JaxRuntimeError`:
`across_processes` turns that into `PeerLostError`, decided by the error's cause,
not by where in the loop it surfaced. Sometimes the collective never fails by
itself (the gloo ranks of one process wait on each other), and only JAX's
coordination service notices the silence, after its heartbeat timeout, by aborting
every process from C++ with a stack trace. `PeerWatch` listens for the same silence
a little sooner and says it in words.
"""

import atexit
import contextlib
import re
import threading
import time
from typing import Callable, Iterator

import jax
from jax._src import distributed  # the runtime's client: its key-value store carries the beats

# Words of the errors that a lost peer causes, from gloo ("Connection reset by peer",
# "Connection closed by peer", "Gloo AllGather failed", "Timed out waiting") and from
# the coordination service (barriers and the heartbeat: "DEADLINE_EXCEEDED",
# "UNAVAILABLE: The following tasks are unhealthy", "Barrier failed"). A JaxRuntimeError
# without them (out of memory, a bad program) is not blamed on a peer.
_PEER_WORDS = re.compile(
    r"gloo|peer|connection|socket|barrier|heartbeat|coordination|unhealthy|"
    r"DEADLINE_EXCEEDED|UNAVAILABLE|ABORTED|CANCELLED|preemption", re.IGNORECASE)

class Activity:
  """What this process is doing ("saving the checkpoint of step 60") and since when: what
  a message names if another process turns out to be dead while it is at it. One per
  run, kept by its loop, which notes each thing it starts (`now`), and read by
  `across_processes` and `PeerWatch`."""

  def __init__(self, what: str = "starting"):
    self._what, self._since = what, time.monotonic()

  def now(self, what: str) -> None:
    """Notes what this process starts now."""
    self._what, self._since = what, time.monotonic()

  def doing(self) -> tuple[str, float]:
    """What this process is doing, and for how many seconds it has been."""
    return self._what, time.monotonic() - self._since


def causes(error: BaseException) -> Iterator[BaseException]:
  """`error`, then the error it was raised from or while handling, and so on: libraries
  (orbax) wrap the error that tells what happened."""
  seen = set()
  while error is not None and id(error) not in seen:
    seen.add(id(error))
    yield error
    error = error.__cause__ or error.__context__


def _failed_collective(error: BaseException) -> BaseException | None:
  """The error, among `error` and its causes, of a collective or barrier between the
  processes of this run that failed."""
  if jax.process_count() == 1:
    return None
  return next((cause for cause in causes(error) if isinstance(cause, jax.errors.JaxRuntimeError)
               and _PEER_WORDS.search(str(cause))), None)


def is_peer_failure(error: BaseException) -> bool:
  """Whether `error`, or an error that caused it, is a collective or barrier between the
  processes of this run that failed: a sign that another process has died."""
  return _failed_collective(error) is not None


def _first_line(error: BaseException) -> str:
  """The error's type and the first line of its message: what a one-line report quotes."""
  lines = str(error).strip().splitlines()
  return f"{type(error).__name__}: {lines[0] if lines else ''}"[:300]


_RERUN = ("Restart every process with the same command; the run resumes from its last "
          "complete checkpoint")


class PeerLostError(RuntimeError):
  """Another process of the run has probably died; the message says how this one knows,
  what it was doing, how long it waited, and how to go on."""

  @classmethod
  def collective_failed(cls, error: BaseException, activity: Activity) -> "PeerLostError":
    what, waited_s = activity.doing()
    return cls(f"a collective between the {jax.process_count()} processes failed while "
               f"{what}, after waiting {waited_s:.1f} s "
               f"({_first_line(_failed_collective(error) or error)}): "
               f"another process of this run has probably died. {_RERUN}")

  @classmethod
  def silent(cls, process: int, silent_s: float, activity: Activity) -> "PeerLostError":
    what, _ = activity.doing()
    return cls(f"process {process} of this run has given no sign of life for {silent_s:.0f} s "
               f"(this one was {what}): it has probably died. {_RERUN}")

  @classmethod
  def coordinator_gone(cls, cause: BaseException, activity: Activity) -> "PeerLostError":
    what, waited_s = activity.doing()
    return cls(f"the coordinator of this run (process 0) stopped answering while this process "
               f"was {what}, after {waited_s:.1f} s ({_first_line(cause)}): it has probably "
               f"died. {_RERUN}")


@contextlib.contextmanager
def across_processes(activity: Activity) -> Iterator[None]:
  """Raises `PeerLostError` for a collective between the processes that fails inside the
  block (naming what `activity` says this process was doing); other errors pass
  unchanged."""
  try:
    yield
  except Exception as error:
    if isinstance(error, PeerLostError) or not is_peer_failure(error):
      raise
    raise PeerLostError.collective_failed(error, activity) from error


_BEATS = "odsgd_jax/beats/"
_FINISHED = "odsgd_jax/finished/"


class PeerWatch:
  """A thread that notices another process of the run going silent.

  Every `timeout_s / 5` each process writes a beat into the coordination service's
  key-value store and reads the others'. A process whose beat has not moved for
  `timeout_s`, and that has not said it finished, is reported to `on_lost` (which
  must end this process: the run cannot go on), and so is a coordinator that stops
  answering. JAX's own heartbeat timeout must be longer (see `initialize`) for this
  one to speak first. A process that exits through the interpreter (a normal end, an
  error of its own) says it finished; one that is killed cannot.
  """

  def __init__(self, timeout_s: float, on_lost: Callable[[PeerLostError], None],
               activity: Activity, *, client=None, process: int | None = None,
               processes: int | None = None):
    """`activity`: what this process is doing (the run's, which its loop notes);
    `client`, `process`, `processes`: JAX's distributed client, this process's index and
    the count of processes (a test gives stand-ins)."""
    self._timeout_s, self._on_lost, self._noted = timeout_s, on_lost, activity
    self._client = distributed.global_state.client if client is None else client
    self._me = jax.process_index() if process is None else process
    self._processes = jax.process_count() if processes is None else processes
    self._stopped = threading.Event()
    atexit.register(self.finished)  # before jax.distributed's shutdown, registered earlier
    self._thread = threading.Thread(target=self._watch, name="odsgd_jax peer watch",
                                    daemon=True)
    self._thread.start()

  def finished(self) -> None:
    """Stops watching and tells the others that this process stops on purpose: its
    silence is no failure."""
    if self._stopped.is_set():
      return
    self._stopped.set()
    with contextlib.suppress(Exception):  # a coordinator already gone has no one to tell
      self._client.key_value_set(f"{_FINISHED}{self._me}", "1", allow_overwrite=True)

  def _watch(self) -> None:
    last_seen: dict[str, tuple[str, float]] = {}  # key -> (beat, when it last moved)
    beat = 0
    while True:
      beat += 1
      try:
        self._client.key_value_set(f"{_BEATS}{self._me}", str(beat), allow_overwrite=True)
        beats = dict(self._client.key_value_dir_get(_BEATS))
        finished = {key.rsplit("/", 1)[-1] for key, _ in self._client.key_value_dir_get(_FINISHED)}
      except Exception as error:  # noqa: BLE001 - the store is gone with the coordinator
        if not self._stopped.is_set():
          self._on_lost(PeerLostError.coordinator_gone(error, self._noted))
        return
      now = time.monotonic()
      for process in range(self._processes):
        key = f"{_BEATS}{process}"
        if process == self._me or str(process) in finished:
          continue
        value, moved = last_seen.setdefault(key, (None, now))
        if beats.get(key) != value:
          last_seen[key] = (beats.get(key), now)
        elif now - moved > self._timeout_s and not self._stopped.is_set():
          self._on_lost(PeerLostError.silent(process, now - moved, self._noted))
          return
      if self._stopped.wait(self._timeout_s / 5):
        return
