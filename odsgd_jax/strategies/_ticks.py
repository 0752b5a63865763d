"""A strategy's rules for particular ticks: conditions on its tick count against fixed ticks.

Some rules hold only on the first ticks: odsgd's synchronous warm-up, a first delayed tick
that has nothing pending, pseudo_sync's first gradient that has no history to smooth with.
Written with these functions, each given what is known of the tick (`known_from`, the
update's keyword argument of that name),

  def update_fn(grads, state, params=None, *, known_from=0, **extra_args):
    in_warmup = ticks.before(state.count, warmup_steps, known_from)   # count < warmup_steps
    params, state = ticks.cond(in_warmup, synchronous_step, delayed_step, grads, state,
                               axis_name=axis_name)
    W = ticks.where(ticks.after(state.count, warmup_steps, known_from), new_W, state.W)

each condition is an array in the program every tick runs, or a Python bool where the
tick count is known to be at least `known_from`: the program traced for those ticks then
has no branch or select that they never take. `count` must be a count that never goes
back (the ticks taken since the start, not a round's ticks). `from_tick(tx, tick)` is `tx`
traced for the ticks from `tick` on; `settled_from(trace)` reads, off a trace of the
update, the tick from which every condition is decided (the train step runs the ticks from
it on in a program of their own: odsgd_jax/train/_programs.py). Plain comparisons are
correct too: they are only never decided in advance.
"""

from typing import Any, Callable

import jax
import optax

from odsgd_jax import comm


class Decisions:
  """What a trace passes as `known_from` to learn where its conditions are decided: each
  condition records the first tick from which it is, and is taken as undecided."""

  def __init__(self):
    self.ticks: list[int] = []


KnownFrom = int | Decisions


def _decided(known_from: KnownFrom, tick: int) -> bool:
  """Whether every tick count of at least `known_from` is at least `tick`."""
  if isinstance(known_from, Decisions):
    known_from.ticks.append(tick)
    return False
  return known_from >= tick


def before(count: jax.Array, tick: int, known_from: KnownFrom = 0) -> jax.Array | bool:
  """`count < tick`; False where every tick it can be is at least `tick`."""
  return False if _decided(known_from, tick) else count < tick


def after(count: jax.Array, tick: int, known_from: KnownFrom = 0) -> jax.Array | bool:
  """`count > tick`; True where every tick it can be is past `tick`."""
  return True if _decided(known_from, tick + 1) else count > tick


def at(count: jax.Array, tick: int, known_from: KnownFrom = 0) -> jax.Array | bool:
  """`count == tick`; False where every tick it can be is past `tick`."""
  return False if _decided(known_from, tick + 1) else count == tick


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
  # Fresh functions: `lax.cond` keeps the trace of a branch function it has seen, which
  # would keep the conditions inside it as decided (or not) for another program's ticks.
  return jax.lax.cond(comm.uniform(condition, axis_name), lambda *args: true_fn(*args),
                      lambda *args: false_fn(*args), *operands)


def from_tick(tx: optax.GradientTransformationExtraArgs,
              tick: int) -> optax.GradientTransformationExtraArgs:
  """`tx` for the ticks from `tick` on: its update traced with its tick conditions decided
  for them (`known_from=tick`). The same transformation where `tick` is 0."""
  if tick == 0:
    return tx

  def update_fn(updates, state, params=None, **extra_args):
    return tx.update(updates, state, params, **{**extra_args, "known_from": tick})

  return optax.GradientTransformationExtraArgs(tx.init, update_fn)


def settled_from(trace: Callable[[Decisions], Any]) -> int:
  """The first tick from which every condition that `trace(known_from)` (a trace of a
  strategy's update that passes `known_from` on, e.g. under `jax.eval_shape`) evaluates is
  decided: `from_tick(tx, that tick)` then runs every later tick. 0 when it has none."""
  decisions = Decisions()
  trace(decisions)
  return max(decisions.ticks, default=0)
