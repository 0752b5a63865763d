"""What keeps a strategy from being registered: each field of its `StrategyDef` checked
against its factory and its traced update (odsgd_jax/strategies/_tracing.py), in one line
that says what to change. Everything here traces shapes only (nothing is compiled: a
strategy registers on import, before JAX's backend may start)."""

import inspect
from typing import Any, Mapping

import jax

from odsgd_jax import cluster, domains
from odsgd_jax.strategies import _overlap
from odsgd_jax.strategies import _tracing as tracing
from odsgd_jax.strategies._definition import EVERY_TICK, StrategyDef, timeline_keywords


def problems(definition: StrategyDef) -> str | None:
  """What keeps `definition` from being registered, in one line, or None."""
  options = definition.options()
  declared = set(getattr(definition.make, "domains", {}))
  undeclared = sorted(set(options) - declared)
  if undeclared:
    return (f"its factory declares no domain for {undeclared}; decorate it with "
            f"@odsgd_jax.domains.declared({undeclared[0]}=...)")
  if not definition.examples:
    return "it has no examples: give the options it is tested with"
  if not (isinstance(definition.timeline, type)
          and issubclass(definition.timeline, cluster.Timeline)):
    return (f"timeline={definition.timeline!r}: name the rule it is timed by, a "
            f"cluster.Timeline such as cluster.SynchronousTimeline (docs/cluster.md lists them)")
  if not (definition.sends == EVERY_TICK or callable(definition.sends)):
    return (f"sends={definition.sends!r}: say when it sends its messages, "
            f"strategies.EVERY_TICK or a function of its state (local SGD's round ends)")
  if definition.sends != EVERY_TICK and not definition.timeline.honours_round_ends:
    return (f"sends={_name(definition.sends)!r} sends on some "
            f"ticks only, but timeline {definition.timeline.__name__} charges a message on "
            f"every tick (it does not honour round ends): register a timeline that does "
            f"(cluster.LocalSgdTimeline, cluster.OscarsTimeline) or sends=EVERY_TICK")
  for where, given in [("defaults", definition.defaults or {})] + [
      (f"example {i}", example.options) for i, example in enumerate(definition.examples)]:
    problem = _options_problem(where, given, options, definition.make.domains)
    if problem is not None:
      return problem
  # the first example's settled update, traced once: what it sends, and its overlap
  first = _overlap.settled_update(definition.make, dict(definition.examples[0].options))
  return _timeline_problem(definition, options, first) or _sends_problem(definition, first)


def _name(function: Any) -> str:
  return getattr(function, "__name__", repr(function))


def _options_problem(where: str, given: Mapping[str, Any], options: Mapping[str, Any],
                     option_domains: Mapping[str, domains.Domain]) -> str | None:
  """Why options `given` (its defaults, an example's) are not the factory's: an option it
  does not take, or a value outside its domain."""
  for key, value in given.items():
    if key not in options:
      return (f"{where}: {key!r} is not an option of its factory (options: "
              f"{', '.join(sorted(options)) or 'none'})")
    try:
      domains.check_value(f"{where}: {key}", value, option_domains[key])
    except domains.OptionError as error:
      return str(error)
  return None


def _timeline_problem(definition: StrategyDef, options: dict[str, Any],
                      first: Any) -> str | None:
  """Why its timeline cannot time it: an option the rule reads that the factory lacks, a
  rule that takes options by `**`, or an exchange timed beside the compute that waits
  for the tick's gradient (with the options of any example; `first`: the first example's
  settled update, already traced)."""
  timeline = definition.timeline
  parameters = inspect.signature(timeline.__init__).parameters.values()
  if any(p.kind is inspect.Parameter.VAR_KEYWORD for p in parameters):
    return (f"timeline {timeline.__name__} takes **options: name each option it reads as a "
            f"keyword parameter")
  lacking = [name for name in timeline_keywords(timeline) if name not in options]
  if lacking:
    return (f"timeline {timeline.__name__} reads option {lacking[0]!r}, which its factory does "
            f"not take (options: {', '.join(sorted(options)) or 'none'}); give the factory "
            f"that option or register another timeline")
  for i, example in enumerate(definition.examples):
    problem = overlap_problem(definition, example.options, first if i == 0 else None)
    if problem is not None:
      return problem
  return None


def overlap_problem(definition: StrategyDef, options: Mapping[str, Any],
                    update: Any = None) -> str | None:
  """Why `definition` with `options` cannot be timed by its timeline, if that rule runs a
  tick's exchange beside the tick's compute: an exchange of its update (`update`, its
  settled update's program, traced here if not given) that waits for the tick's gradient
  (odsgd_jax/strategies/_overlap.py)."""
  timeline = definition.timeline
  if not timeline.overlaps_compute(**definition.timeline_options(**options)):
    return None
  if update is None:
    update = _overlap.settled_update(definition.make, dict(options))
  waiting = _overlap.gradient_exchanges(update.jaxpr)
  if not waiting:
    return None
  return (f"timeline {timeline.__name__} runs a tick's exchange beside that tick's compute, "
          f"but with options {dict(options)} its update's {waiting[0]} reads this tick's "
          f"gradient, so it cannot start before the backward pass ends; send only what the "
          f"tick before left (pending gradients, the parameters the gradient is taken at), "
          f"or register a timeline that waits (cluster.SynchronousTimeline)")


def _sends_problem(definition: StrategyDef, settled: Any) -> str | None:
  """Why `sends` does not say when its update sends (its settled ticks' update with the
  first example's options): `EVERY_TICK` where its messages are all inside conditionals
  (some ticks send nothing), a function where a message goes on every path, or no message
  through `comm` at all. A function must give one flag per worker. `settled`: that
  update's program."""
  options = dict(definition.examples[0].options)
  update = settled.jaxpr
  if not tracing.sends_ever(update):
    return ("its update sends no message through odsgd_jax.comm (exchange, neighbour_mean): "
            "send what the workers share through them, which the clock charges")
  every_tick = tracing.sends_every_tick(update)
  if definition.sends == EVERY_TICK and not every_tick:
    return ("sends=EVERY_TICK, but its update sends its messages only inside a conditional "
            "(some ticks send nothing): give sends a function of its state that says which "
            "ticks sent (local SGD's local_sgd_round_end)")
  if definition.sends != EVERY_TICK:
    if every_tick:
      return (f"sends={_name(definition.sends)!r} says some ticks send nothing, but its "
              f"update sends a message on every tick: sends=EVERY_TICK")
    state = tracing.stand_in_worker_states(_overlap.make_tx(definition.make, options))
    flags = jax.eval_shape(definition.sends, state)
    if getattr(flags, "shape", None) != (tracing.NUM_WORKERS,) or flags.dtype != bool:
      return (f"sends={_name(definition.sends)!r} gives {flags} for {tracing.NUM_WORKERS} "
              f"workers' states: give one bool per worker, whether its last tick sent")
  return None
