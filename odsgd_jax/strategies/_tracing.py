"""A strategy read off its traced update: the one tracing utility of registration, the
train step's programs and the tests.

A strategy's update is traced once per question, on a stand-in model (shapes only:
nothing here starts JAX's backend, since a strategy registers on import and
jax.distributed must start before the backend does), with its worker axes bound. Its
program (a jaxpr) then answers, without the strategy declaring any of it:

- **its tick conditions** (`tick_conditions`, `settled_from`): the comparisons of its tick
  count that `strategies.ticks` writes (`before`, `after`, `at`), each a small jitted call
  named for its rule, e.g. `tick_before_200`, and the tick from which all are decided;
- **the update of its settled ticks** (`run`, with `known_from`): the program evaluated
  again equation by equation with those conditions decided, so a `lax.cond` on a decided
  flag becomes the branch it takes and a select on one the value it picks (what
  `ticks.from_tick` runs);
- **what reads this tick's gradient** (`collectives_reading`): the collectives whose
  operands depend on chosen inputs (the overlap check, `strategies/_overlap.py`);
- **what it sends** (`is_message`, `sends_every_tick`, `sends_ever`): the collectives that
  `comm.exchange` and `comm.neighbour_mean` run, found by their name scope
  (`comm.MESSAGE_SCOPE`), and whether every path of the update runs one;
- **which messages a concrete tick sent** (`run` with `visit`): evaluated on concrete
  values, a conditional runs only the branch its flag takes, and `visit` sees each
  equation that ran with its name scope (tests/test_conformance.py).
"""

import contextlib
import functools
import re
from typing import Any, Callable, Iterator, Mapping

import jax
import jax.numpy as jnp
import numpy as np
from jax.extend import core

from odsgd_jax import cluster, comm

# The model a strategy is traced on at registration. Its options, not the model's shapes,
# decide its tick conditions and what it sends.
STAND_IN = {"kernel": jax.ShapeDtypeStruct((2, 3), jnp.float32),
            "bias": jax.ShapeDtypeStruct((3,), jnp.float32)}
AXIS, NUM_WORKERS = "workers", 4


def stand_in_extra_args(num_workers: int = NUM_WORKERS) -> dict[str, Any]:
  """The shapes of the extra arguments the train step gives a strategy's update: a tick's
  schedule for `num_workers` workers, and the loss."""
  schedule = jax.eval_shape(
      lambda: jax.tree.map(jnp.asarray, cluster.synchronous_schedule(0, num_workers)))
  return {"schedule": schedule, "loss": jax.ShapeDtypeStruct((), jnp.float32)}


def stand_in_worker_states(tx: Any, num_workers: int = NUM_WORKERS) -> Any:
  """The shapes of `num_workers` workers' states of `tx` on the stand-in model, stacked
  (the leading axis: the worker), as the train step holds them."""
  stacked = jax.tree.map(lambda x: jax.ShapeDtypeStruct((num_workers, *x.shape), x.dtype),
                         STAND_IN)
  return jax.eval_shape(jax.vmap(tx.init), stacked)

# Primitives that move data between workers.
COLLECTIVES = ("psum", "pmax", "pmin", "all_gather", "all_to_all", "ppermute",
               "psum_scatter", "reduce_scatter", "pbroadcast", "ragged_all_to_all")
_CALLS = ("pjit", "jit", "closed_call", "core_call")

# strategies.ticks' conditions: the relation, the tick; decided from which tick on and to
# what value there.
_CONDITION = re.compile(r"tick_(before|after|at)_(\d+)$")
_DECIDED = {"before": (0, False), "after": (1, True), "at": (1, False)}


def condition_name(relation: str, tick: int) -> str:
  """The name of a tick condition's call in the program (`strategies.ticks`)."""
  return f"tick_{relation}_{tick}"


def _condition(eqn: Any) -> tuple[int, bool] | None:
  """(the tick from which it is decided, its value from there) of a tick condition's call,
  None for any other equation."""
  if eqn.primitive.name not in _CALLS:
    return None
  match = _CONDITION.match(str(eqn.params.get("name", "")))
  if match is None:
    return None
  offset, value = _DECIDED[match.group(1)]
  return int(match.group(2)) + offset, value


def sub_jaxprs(eqn: Any) -> list[Any]:
  """The jaxprs inside an equation (a call's body, a conditional's branches, a loop's)."""
  found = []
  for value in eqn.params.values():
    for item in value if isinstance(value, (tuple, list)) else (value,):
      if isinstance(item, core.ClosedJaxpr):
        found.append(item.jaxpr)
      elif isinstance(item, core.Jaxpr):
        found.append(item)
  return found


def _equations(jaxpr: Any) -> Iterator[Any]:
  for eqn in jaxpr.eqns:
    yield eqn
    for sub in sub_jaxprs(eqn):
      yield from _equations(sub)


def update_jaxpr(tx: Any, state: Any, axis_sizes: Mapping[str, int] | None = None,
                 params: Any = STAND_IN, extra_args: Mapping[str, Any] | None = None) -> Any:
  """The program of one worker's `tx.update(grads, state, params, **extra_args)` on
  `params` (the gradient has their shapes; `state` its shapes, e.g. from `jax.eval_shape`
  of `tx.init`), its worker axes bound (`axis_sizes`: {axis: size}, the stand-in's
  {"workers": 4} by default). The gradient is the program's first inputs."""
  axis_sizes = axis_sizes or {AXIS: NUM_WORKERS}

  def update(grads, state, params, extra_args):
    return tx.update(grads, state, params, **extra_args)

  return jax.make_jaxpr(update, axis_env=list(axis_sizes.items()))(
      params, state, params, dict(extra_args or {}))


def tick_conditions(jaxpr: Any) -> list[int]:
  """The tick from which each tick condition of `jaxpr` is decided, in every branch."""
  return [decided[0] for eqn in _equations(jaxpr) if (decided := _condition(eqn))]


def settled_from(jaxpr: Any) -> int:
  """The first tick from which every tick condition of the update `jaxpr` is decided; 0
  when it has none."""
  return max(tick_conditions(jaxpr), default=0)


class Decided:
  """A value the program computes that is known while tracing (a decided tick condition
  and what follows from it alone)."""

  def __init__(self, value: Any):
    self.value = value


# Primitives evaluated at trace time on decided inputs. A decided flag is the same on
# every worker (it depends on the tick alone), so a max or min over workers is itself.
_FOLDED = {
    "convert_element_type": lambda x, new_dtype, **_: np.asarray(x).astype(new_dtype),
    "not": lambda x: np.logical_not(x) if np.asarray(x).dtype == bool else np.invert(x),
    "and": np.logical_and, "or": np.logical_or,
    "gt": np.greater, "lt": np.less, "ge": np.greater_equal, "le": np.less_equal,
    "eq": np.equal, "ne": np.not_equal,
    "pmax": lambda x, **_: x, "pmin": lambda x, **_: x,
    "broadcast_in_dim": lambda x, shape, broadcast_dimensions, **_: np.broadcast_to(
        np.expand_dims(x, tuple(i for i in range(len(shape)) if i not in broadcast_dimensions)),
        shape),
}


def _value(x: Any, aval: Any) -> Any:
  """`x` as the program holds it: a decided value as a constant of its type."""
  return np.asarray(x.value, aval.dtype) if isinstance(x, Decided) else x


def _is_known(x: Any) -> bool:
  return isinstance(x, Decided) or not isinstance(x, jax.core.Tracer)


def _known(x: Any) -> Any:
  return np.asarray(x.value if isinstance(x, Decided) else x)


Visit = Callable[[Any, str], None]


def run(closed: Any, *args: Any, known_from: int = 0, visit: Visit | None = None) -> list[Any]:
  """The outputs of the program `closed` (a ClosedJaxpr) on `args` (flat), evaluated
  equation by equation under the current trace (inside jit or shard_map: the same program
  again; on concrete values: eagerly).

  `known_from`: every tick condition is evaluated as for a tick count of at least it;
  what they decide is folded away (a conditional on a decided flag runs the branch it
  takes, a select picks its case). `visit(eqn, scope)`: called for each equation that runs,
  with its name scope; a conditional whose flag is concrete runs only its branch (and
  every call is entered), so a concrete run visits exactly what that tick executed.
  """
  outputs = _run(closed.jaxpr, closed.consts, list(args), known_from, visit, "")
  return [_value(x, var.aval) for x, var in zip(outputs, closed.jaxpr.outvars, strict=True)]


def _run(jaxpr: Any, consts: list[Any], args: list[Any], known_from: int, visit: Visit | None,
         scope: str) -> list[Any]:
  env: dict[Any, Any] = {}

  def read(atom):
    return atom.val if isinstance(atom, core.Literal) else env[atom]

  for var, value in zip(jaxpr.constvars, consts, strict=True):
    env[var] = value
  for var, value in zip(jaxpr.invars, args, strict=True):
    env[var] = value
  for eqn in jaxpr.eqns:
    inputs = [read(atom) for atom in eqn.invars]
    eqn_scope = f"{scope}/{eqn.source_info.name_stack}".strip("/")
    outputs = _equation(eqn, inputs, known_from, visit, eqn_scope)
    for var, value in zip(eqn.outvars, outputs, strict=True):
      env[var] = value
  return [read(atom) for atom in jaxpr.outvars]


def _equation(eqn: Any, inputs: list[Any], known_from: int, visit: Visit | None,
              scope: str) -> list[Any]:
  """The outputs of one equation (see `run`)."""
  name = eqn.primitive.name
  condition = _condition(eqn)
  if condition is not None and known_from >= condition[0]:
    return [Decided(condition[1])]
  decided_input = any(isinstance(x, Decided) for x in inputs)
  if name in _CALLS and (visit is not None or decided_input
                         or (known_from and tick_conditions(eqn.params["jaxpr"].jaxpr))):
    body = eqn.params["jaxpr"]
    return _run(body.jaxpr, body.consts, inputs, known_from, visit, scope)
  if name == "cond":
    branches = eqn.params["branches"]
    if _is_known(inputs[0]):
      index = int(np.clip(_known(inputs[0]), 0, len(branches) - 1))
      return _run(branches[index].jaxpr, branches[index].consts, inputs[1:], known_from, visit,
                  scope)
    if known_from and tick_conditions(branches[0].jaxpr) + tick_conditions(
        branches[-1].jaxpr):
      operands = [_value(x, var.aval) for x, var in zip(inputs[1:], eqn.invars[1:],
                                                         strict=True)]
      functions = [functools.partial(_branch, branch, known_from) for branch in branches]
      return jax.tree.leaves(jax.lax.switch(inputs[0], functions, *operands))
  if name == "select_n" and isinstance(inputs[0], Decided) and len(
      set(np.ravel(inputs[0].value).tolist())) == 1:
    return [inputs[1 + int(np.ravel(inputs[0].value)[0])]]
  if name in _FOLDED and decided_input and all(
      isinstance(x, Decided) or isinstance(atom, core.Literal)
      for x, atom in zip(inputs, eqn.invars, strict=True)):
    return [Decided(_FOLDED[name](*[_known(x) for x in inputs], **eqn.params))]
  if visit is not None:
    visit(eqn, scope)
  values = [_value(x, var.aval) for x, var in zip(inputs, eqn.invars, strict=True)]
  # as jax.core.eval_jaxpr binds it, under the name scope it was traced in (a message's
  # collectives keep comm.MESSAGE_SCOPE when the program is traced again)
  with eqn.ctx.manager, (jax.named_scope(scope) if scope else contextlib.nullcontext()):
    outputs = eqn.primitive.bind(*values, **eqn.primitive.get_bind_params(eqn.params))
  return list(outputs) if eqn.primitive.multiple_results else [outputs]


def _branch(branch: Any, known_from: int, *operands: Any) -> list[Any]:
  outputs = _run(branch.jaxpr, branch.consts, list(operands), known_from, None, "")
  return [_value(x, var.aval) for x, var in zip(outputs, branch.jaxpr.outvars, strict=True)]


def collectives_reading(jaxpr: Any, tainted_inputs: list[bool]) -> list[str]:
  """The collectives of `jaxpr` whose operands depend on an input marked tainted."""
  found: list[str] = []
  _taint(jaxpr, tainted_inputs, found)
  return found


def _taint(jaxpr: Any, tainted_inputs: list[bool], found: list[str]) -> list[bool]:
  """Which outputs of `jaxpr` depend on an input marked tainted; appends to `found` each
  collective whose operands do."""
  tainted: dict[Any, bool] = dict(zip(jaxpr.invars, tainted_inputs, strict=True))
  is_tainted = lambda atom: isinstance(atom, core.Var) and tainted.get(atom, False)
  for eqn in jaxpr.eqns:
    inputs = [is_tainted(atom) for atom in eqn.invars]
    name = eqn.primitive.name
    if name in COLLECTIVES and any(inputs):
      found.append(name)
    subs = sub_jaxprs(eqn)
    if name == "cond":  # operands after the branch index go to every branch
      outputs = [inputs[0]] * len(eqn.outvars)
      for branch in subs:
        outputs = [a or b for a, b in zip(outputs, _taint(branch, inputs[1:], found),
                                           strict=True)]
    elif len(subs) == 1 and len(subs[0].invars) == len(inputs):  # a call (pjit, custom_jvp)
      outputs = _taint(subs[0], inputs, found)
    else:  # anything else, loops included: every output depends on every input
      for sub in subs:
        _taint(sub, [any(inputs)] * len(sub.invars), found)
      outputs = [any(inputs)] * len(eqn.outvars)
    tainted.update(zip(eqn.outvars, outputs, strict=True))
  return [is_tainted(atom) for atom in jaxpr.outvars]


def in_message(scope: str) -> bool:
  """Whether the name scope `scope` (e.g. "vmap(message)/jit(pmean)") is a message's
  (`comm.MESSAGE_SCOPE`), under whatever transformation."""
  return re.search(rf"(^|[/(]){re.escape(comm.MESSAGE_SCOPE)}([/)]|$)", scope) is not None


def is_message(eqn: Any, scope: str = "") -> bool:
  """Whether `eqn` (under the name scope `scope`) is a collective of a message
  (`comm.exchange`, `comm.neighbour_mean`), not of bookkeeping."""
  return (eqn.primitive.name in COLLECTIVES
          and in_message(f"{scope}/{eqn.source_info.name_stack}"))


def sends_every_tick(jaxpr: Any, scope: str = "") -> bool:
  """Whether every path through `jaxpr` runs a message's collective: one outside any
  conditional, or one on each branch of a conditional."""
  for eqn in jaxpr.eqns:
    eqn_scope = f"{scope}/{eqn.source_info.name_stack}"
    if is_message(eqn, scope):
      return True
    subs = sub_jaxprs(eqn)
    if eqn.primitive.name == "cond":
      if all(sends_every_tick(branch, eqn_scope) for branch in subs):
        return True
    elif eqn.primitive.name in _CALLS and subs and sends_every_tick(subs[0], eqn_scope):
      return True
  return False


def sends_ever(jaxpr: Any, scope: str = "") -> bool:
  """Whether some path through `jaxpr` runs a message's collective."""
  for eqn in jaxpr.eqns:
    eqn_scope = f"{scope}/{eqn.source_info.name_stack}"
    if is_message(eqn, scope) or any(sends_ever(sub, eqn_scope) for sub in sub_jaxprs(eqn)):
      return True
  return False
