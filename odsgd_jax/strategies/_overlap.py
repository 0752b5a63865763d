"""Whether a tick's exchange waits for that tick's gradient, read off the traced update.

A strategy timed by a rule that runs a tick's exchange beside that tick's compute
(`Timeline.overlaps_compute`: odsgd, pseudo_sync, gossip mixing before its step) must send
only what it knew before the tick's gradient: the pending gradients of the tick before,
the parameters the gradient is taken at. An exchange of anything computed from this tick's
gradient (ssgd's all-reduce, or a mean inside a conditional that reads this tick's updated
parameters) cannot start before the backward pass ends, and timing it as overlapped would
flatter the strategy. `settled_update` traces one worker's update of its settled ticks
(`ticks.settled_from`; a warm-up is timed as synchronous) with the worker axis bound, and
`gradient_exchanges` follows the gradient through its equations into its collectives.
"""

from typing import Any

import jax
import optax

from odsgd_jax.strategies import _ticks as ticks
from odsgd_jax.strategies import _tracing as tracing


def make_tx(make: Any, options: dict[str, Any]) -> optax.GradientTransformationExtraArgs:
  """`make` with `options` over the stand-in's worker axis, on a heavy-ball inner optimizer."""
  return make(optax.sgd(0.1, momentum=0.9), axis_name=tracing.AXIS, **options)


def settled_update(make: Any, options: dict[str, Any]) -> Any:
  """The program of one worker's update of `make(inner, axis_name, **options)` (a heavy-ball
  inner optimizer) on its settled ticks, traced on the stand-in model with the worker axis
  bound: what registration reads (the overlap check, what it sends)."""
  tx = make_tx(make, options)
  state = jax.eval_shape(tx.init, tracing.STAND_IN)
  extra_args = tracing.stand_in_extra_args()
  settled = ticks.settled_from(tx, state, **extra_args)
  return tracing.update_jaxpr(ticks.from_tick(tx, settled), state, extra_args=extra_args)


def gradient_exchanges(update: Any) -> list[str]:
  """The collectives of `update` (a settled update's program, `settled_update`) whose
  operands depend on the tick's gradient."""
  gradient = len(jax.tree.leaves(tracing.STAND_IN))  # the first inputs: this tick's gradient
  return tracing.collectives_reading(update, [i < gradient for i in range(len(update.invars))])
