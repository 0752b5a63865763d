"""Whether a tick's exchange waits for that tick's gradient, read off the traced update.

A strategy timed by a rule that runs a tick's exchange beside that tick's compute
(`Timeline.overlaps_compute`: odsgd, pseudo_sync, gossip mixing before its step) must send
only what it knew before the tick's gradient: the pending gradients of the tick before,
the parameters the gradient is taken at. An exchange of anything computed from this tick's
gradient (ssgd's all-reduce, or a mean inside a conditional that reads this tick's updated
parameters) cannot start before the backward pass ends, and timing it as overlapped would
flatter the strategy. `gradient_exchanges` traces one worker's update of its settled ticks
(`ticks.settled_from`; a warm-up is timed as synchronous) with the worker axis bound, and
follows the gradient through the program's equations into its collectives.
"""

from typing import Any

import jax
import jax.numpy as jnp
import optax
from jax.extend import core

from odsgd_jax import cluster
from odsgd_jax.strategies import _ticks as ticks

# Primitives that move data between workers.
COLLECTIVES = ("psum", "pmax", "pmin", "all_gather", "all_to_all", "ppermute",
               "psum_scatter", "reduce_scatter", "pbroadcast", "ragged_all_to_all")

_AXIS, _NUM_WORKERS = "workers", 4
# The model the registration checks trace a strategy on. Shapes only: nothing here may
# start JAX's backend (a strategy registers on import, and jax.distributed must start
# before the backend does).
STAND_IN = {"kernel": jax.ShapeDtypeStruct((2, 3), jnp.float32),
            "bias": jax.ShapeDtypeStruct((3,), jnp.float32)}


def _sub_jaxprs(eqn: Any) -> list[Any]:
  found = []
  for value in eqn.params.values():
    for item in value if isinstance(value, (tuple, list)) else (value,):
      if isinstance(item, core.ClosedJaxpr):
        found.append(item.jaxpr)
      elif isinstance(item, core.Jaxpr):
        found.append(item)
  return found


def _walk(jaxpr: Any, tainted_inputs: list[bool], found: list[str]) -> list[bool]:
  """Which outputs of `jaxpr` depend on an input marked tainted; appends to `found` each
  collective whose operands do."""
  tainted: dict[Any, bool] = dict(zip(jaxpr.invars, tainted_inputs, strict=True))
  is_tainted = lambda atom: isinstance(atom, core.Var) and tainted.get(atom, False)
  for eqn in jaxpr.eqns:
    inputs = [is_tainted(atom) for atom in eqn.invars]
    name = eqn.primitive.name
    if name in COLLECTIVES and any(inputs):
      found.append(name)
    subs = _sub_jaxprs(eqn)
    if name == "cond":  # operands after the branch index go to every branch
      outputs = [inputs[0]] * len(eqn.outvars)
      for branch in subs:
        outputs = [a or b for a, b in zip(outputs, _walk(branch, inputs[1:], found),
                                           strict=True)]
    elif len(subs) == 1 and len(subs[0].invars) == len(inputs):  # a call (pjit, custom_jvp)
      outputs = _walk(subs[0], inputs, found)
    else:  # anything else, loops included: every output depends on every input
      for sub in subs:
        _walk(sub, [any(inputs)] * len(sub.invars), found)
      outputs = [any(inputs)] * len(eqn.outvars)
    tainted.update(zip(eqn.outvars, outputs, strict=True))
  return [is_tainted(atom) for atom in jaxpr.outvars]


def gradient_exchanges(make: Any, options: dict[str, Any]) -> list[str]:
  """The collectives of the settled ticks' update of `make(inner, axis_name, **options)`
  (one worker's, with the worker axis bound) whose operands depend on the tick's gradient."""
  tx = make(optax.sgd(0.1, momentum=0.9), axis_name=_AXIS, **options)
  state = jax.eval_shape(tx.init, STAND_IN)
  schedule = jax.tree.map(lambda x: jax.ShapeDtypeStruct(x.shape, x.dtype),
                          cluster.synchronous_schedule(0, _NUM_WORKERS))
  loss = jax.ShapeDtypeStruct((), jnp.float32)

  def traced(known_from):
    def update(grads, state, params, schedule, loss):
      return tx.update(grads, state, params, schedule=schedule, loss=loss,
                       known_from=known_from)
    return jax.make_jaxpr(update, axis_env=[(_AXIS, _NUM_WORKERS)])(
        STAND_IN, state, STAND_IN, schedule, loss)

  settled = ticks.settled_from(traced)
  closed = traced(settled)
  gradient = len(jax.tree.leaves(STAND_IN))  # the first inputs: this tick's gradient
  found: list[str] = []
  _walk(closed.jaxpr, [i < gradient for i in range(len(closed.jaxpr.invars))], found)
  return found
