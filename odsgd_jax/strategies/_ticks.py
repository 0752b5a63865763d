"""A strategy's rules for particular ticks: conditions on its tick count against fixed ticks.

Some rules hold only on the first ticks: odsgd's synchronous warm-up, a first delayed tick
that has nothing pending, pseudo_sync's first gradient that has no history to smooth with.
Written with these functions,

  in_warmup = ticks.before(state.count, warmup_steps)       # count < warmup_steps
  params, state = ticks.cond(in_warmup, synchronous_step, delayed_step, grads, state,
                             axis_name=axis_name)
  W = ticks.where(ticks.after(state.count, warmup_steps), new_W, state.W)

each condition is an array in the program every tick runs, or a Python bool where the
caller knows which way it goes. `count` must be a count that never goes back (the ticks
taken since the start, not a round's ticks): it is never negative, and a caller that knows
how many ticks have passed may say so (`known_from`), which drops the branches and selects
those ticks never take from the program. The train step runs the ticks from which every such
condition is decided in a program of its own (odsgd_jax/train/_programs.py), and reads
that tick with `settled_from`. Plain comparisons are correct too: they are only never
decided in advance.
"""

import contextlib
import threading
from typing import Any, Callable, Iterator

import jax
import optax

from odsgd_jax import comm

_context = threading.local()


def _known_from() -> int:
  return getattr(_context, "known_from", 0)


def _note(tick: int) -> None:
  """Records that a condition is decided from `tick` on (see `settled_from`)."""
  notes = getattr(_context, "notes", None)
  if notes is not None:
    notes.append(tick)


def before(count: jax.Array, tick: int) -> jax.Array | bool:
  """`count < tick`; False where every tick it can be is at least `tick`."""
  _note(tick)
  return False if _known_from() >= tick else count < tick


def after(count: jax.Array, tick: int) -> jax.Array | bool:
  """`count > tick`; True where every tick it can be is past `tick`."""
  _note(tick + 1)
  return True if _known_from() > tick else count > tick


def at(count: jax.Array, tick: int) -> jax.Array | bool:
  """`count == tick`; False where every tick it can be is past `tick`."""
  _note(tick + 1)
  return False if _known_from() > tick else count == tick


def where(condition: jax.Array | bool, new: Any, old: Any) -> Any:
  """`new` where `condition` holds, else `old`, leaf by leaf (`optax.tree.where`)."""
  if isinstance(condition, bool):
    return new if condition else old
  return optax.tree.where(condition, new, old)


def cond(condition: jax.Array | bool, true_fn: Callable[..., Any], false_fn: Callable[..., Any],
         *operands: Any, axis_name: comm.AxisName) -> Any:
  """`true_fn(*operands)` if `condition` else `false_fn(*operands)`: one branch runs (a
  `lax.cond` on a flag that every worker computes alike, `comm.uniform`, so that its
  collectives run only where it is taken)."""
  if isinstance(condition, bool):
    return (true_fn if condition else false_fn)(*operands)
  # Fresh functions: `lax.cond` keeps the trace of a branch it has seen, which would keep
  # the conditions inside it as decided (or not) for the ticks of another program.
  return jax.lax.cond(comm.uniform(condition, axis_name), lambda *args: true_fn(*args),
                      lambda *args: false_fn(*args), *operands)


@contextlib.contextmanager
def known_from(tick: int) -> Iterator[None]:
  """Inside: the conditions are taken for a tick count of at least `tick` (trace a
  program for those ticks only)."""
  previous = _known_from()
  _context.known_from = tick
  try:
    yield
  finally:
    _context.known_from = previous


def settled_from(trace: Callable[[], Any]) -> int:
  """The first tick from which every condition that `trace()` (a trace of a strategy's
  update, e.g. under `jax.eval_shape`) evaluates is decided: the program traced under
  `known_from(that tick)` then runs every later tick. 0 when it has none."""
  previous = getattr(_context, "notes", None)
  _context.notes = []
  try:
    with known_from(0):
      trace()
    return max(_context.notes, default=0)
  finally:
    _context.notes = previous
