"""A strategy's rules for particular ticks: conditions on its tick count against fixed ticks.

Some rules hold only on the first ticks: odsgd's synchronous warm-up, a first delayed tick
that has nothing pending, pseudo_sync's first gradient that has no history to smooth with.
Written with these functions,

  def update_fn(grads, state, params=None, **extra_args):
    in_warmup = ticks.before(state.count, warmup_steps)              # count < warmup_steps
    params, state = ticks.cond(in_warmup, synchronous_step, delayed_step, grads, state,
                               axis_name=axis_name)
    W = ticks.where(ticks.after(state.count, warmup_steps), new_W, state.W)

each condition is a small call in the program, named for its rule (`tick_before_200`), so
that the program itself says where its conditions are decided: `settled_from(tx)` reads
the tick from which all are, and `from_tick(tx, tick)` is `tx` for the ticks from `tick`
on, its update evaluated again with them decided (odsgd_jax/strategies/_tracing.py), so
that those ticks run a program without a branch or select they never take (the train step
runs them in a program of their own: odsgd_jax/train/_programs.py). A strategy writes its
math only. `count` must be a count that never goes back (the ticks taken since the start,
not a round's ticks). Plain comparisons are correct too: they are only never decided in
advance.
"""

import functools
import operator
from typing import Any, Callable

import jax
import optax

from odsgd_jax import comm
from odsgd_jax.strategies import _tracing as tracing

_RELATIONS = {"before": operator.lt, "after": operator.gt, "at": operator.eq}


@functools.cache
def _condition(relation: str, tick: int) -> Callable[[jax.Array], jax.Array]:
  """`count <relation> tick` as a call named for it (`tracing.condition_name`)."""
  compare = _RELATIONS[relation]

  def condition(count):
    return compare(count, tick)

  condition.__name__ = condition.__qualname__ = tracing.condition_name(relation, tick)
  return jax.jit(condition)


def before(count: jax.Array, tick: int) -> jax.Array | bool:
  """`count < tick` (False where `tick` is at most 0: a count is never negative)."""
  return False if tick <= 0 else _condition("before", tick)(count)


def after(count: jax.Array, tick: int) -> jax.Array | bool:
  """`count > tick` (True where `tick` is negative)."""
  return True if tick < 0 else _condition("after", tick)(count)


def at(count: jax.Array, tick: int) -> jax.Array | bool:
  """`count == tick` (False where `tick` is negative)."""
  return False if tick < 0 else _condition("at", tick)(count)


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
  return jax.lax.cond(comm.uniform(condition, axis_name), true_fn, false_fn, *operands)


def from_tick(tx: optax.GradientTransformationExtraArgs,
              tick: int) -> optax.GradientTransformationExtraArgs:
  """`tx` for the ticks from `tick` on: its update's program evaluated with its tick
  conditions decided for them (`tracing.run`). The same transformation where `tick` is 0."""
  if tick == 0:
    return tx

  def update_fn(updates, state, params=None, **extra_args):
    def update(updates, state, params, extra_args):
      return tx.update(updates, state, params, **extra_args)

    arguments = (updates, state, params, extra_args)
    closed, out_shape = jax.make_jaxpr(update, return_shape=True)(*arguments)
    outputs = tracing.run(closed, *jax.tree.leaves(arguments), known_from=tick)
    return jax.tree.unflatten(jax.tree.structure(out_shape), outputs)

  return optax.GradientTransformationExtraArgs(tx.init, update_fn)


def settled_from(tx: optax.GradientTransformationExtraArgs, state: Any,
                 axis_sizes: dict[str, int] | None = None, params: Any = tracing.STAND_IN,
                 **extra_args: Any) -> int:
  """The first tick from which every tick condition of `tx`'s update is decided, read off
  its program (`tracing.update_jaxpr`: traced on `params`, the stand-in model by default,
  `state` its state's shapes, with `axis_sizes` and `extra_args`): `from_tick(tx, that
  tick)` runs every later tick. 0 when it has none."""
  return tracing.settled_from(tracing.update_jaxpr(tx, state, axis_sizes, params,
                                                   extra_args).jaxpr)
