"""experiments.train with one process of the run stopped at a chosen point.

  python -m tests.peer_fault --die_at=kill:step:45 --die_note=FILE <experiments.train's flags>

`kill:step:N` kills the process (SIGKILL: no chance to save or say goodbye) before step
N is dispatched, once the steps before it have run, between checkpoint saves;
`kill:save:N` kills it `--die_delay_s` into its save of step N's checkpoint, so the others
are inside that save when it dies;
`freeze:step:N` stops it (SIGSTOP) before step N: alive to the operating system, its
sockets open, silent. Just before, the time (time.time()) is written to `--die_note`.
"""

import functools
import os
import signal
import time

import jax
from absl import app, flags

from experiments import train
from odsgd_jax.train import Hook

_DIE_AT = flags.DEFINE_string("die_at", None, "kill:step:N, kill:save:N or freeze:step:N")
_DIE_PROCESS = flags.DEFINE_integer("die_process", 1, "The process that stops.")
_DIE_DELAY = flags.DEFINE_float("die_delay_s", 2.0, "Seconds into the save before it dies.")
_DIE_NOTE = flags.DEFINE_string("die_note", None, "File that gets the time it stopped.")
_SETTLE_S = 2.0  # before a kill between steps: the others finish reading (see before_step)


class _Stop(Hook):

  def __init__(self, how: str, where: str, step: int):
    self.signal = {"kill": signal.SIGKILL, "freeze": signal.SIGSTOP}[how]
    self.where, self.step = where, step

  def _stop(self) -> None:
    with open(_DIE_NOTE.value, "w") as note:
      note.write(repr(time.time()))
    os.kill(os.getpid(), self.signal)

  def before_step(self, step):
    if self.where == "step" and step == self.step:
      # Finish the steps already dispatched (their collectives need this process): the
      # others then fail in step N's work, not, by a race, in the step before it. Then
      # give them time to read what this process sent them last (step N-2's metrics,
      # gathered after step N-1 was dispatched): a kill resets its connections, and
      # Linux drops data the survivor has received but not read yet (seen on a loaded
      # 2-core machine: the survivor failed in step N-1's fetch, 2 times in 3).
      for array in jax.live_arrays():
        array.block_until_ready()
      time.sleep(_SETTLE_S)
      self._stop()

  def before_save(self, step):
    if self.where == "save" and step == self.step:
      time.sleep(_DIE_DELAY.value)  # the others wait inside the save meanwhile
      self._stop()


def main(argv):
  how, where, step = _DIE_AT.value.split(":")
  if train._PROCESS_ID.value == _DIE_PROCESS.value:  # before JAX starts: no process_index()
    train.train_and_evaluate = functools.partial(train.train_and_evaluate,
                                                 hooks=[_Stop(how, where, int(step))])
  train.main(argv)


if __name__ == "__main__":
  app.run(main, flags_parser=train._parse_flags)
