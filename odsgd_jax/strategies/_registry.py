"""The registry: strategy names -> their definitions, so that a config can name a strategy
by string. A strategy is its file, which ends with its one `register(StrategyDef(...))`
(the package imports every module of odsgd_jax/strategies; a test registers its own)."""

import dataclasses
import inspect
from typing import Any, Callable, Mapping

import jax
import optax

from odsgd_jax import cluster, domains
from odsgd_jax.strategies import _overlap

SET_BY_TRAINER = ("axis_name", "inner_momentum")

# `StrategyDef.sends` of a strategy that sends its message on every tick.
EVERY_TICK = "every tick"


def _no_log(worker_opt_state: Any) -> dict[str, Any]:
  del worker_opt_state
  return {}


def communication_field(worker_opt_state: Any) -> Any:
  """The state's `communication` field (None if it has none): where every registered
  strategy keeps the state of its exchange."""
  return getattr(worker_opt_state, "communication", None)


@dataclasses.dataclass(frozen=True)
class Example:
  """Options a strategy is tested with, and what its state then holds.

  Attributes:
    options: keyword options of the factory (the rest take their defaults).
    state_copies: floating-point state of one worker, in copies of the model, with a
      plain SGD inner optimizer (heavy ball adds one); tests/test_state_size.py measures it.
    why: what those copies are, as docs/strategies.md lists them.
  """

  options: Mapping[str, Any]
  state_copies: int
  why: str


@dataclasses.dataclass(frozen=True)
class StrategyDef:
  """Everything the rest of the package knows about a strategy.

  Training, the config checks, the simulated clock, the studies and the tests read a
  strategy only through these fields. `timeline` and `sends` have no default: both decide
  what the clock charges, and a silent default times a strategy wrongly.

  Attributes:
    name: what `config.strategy.name` calls it.
    make: factory `make(inner, *, axis_name, **options)` returning an
      `optax.GradientTransformationExtraArgs` that runs once per worker, decorated with
      `odsgd_jax.domains.declared(...)`: a domain for each keyword option. Its keyword
      options (with their defaults) are the config fields of `config.strategy`.
    model_params: `model_params(worker_params, worker_opt_state) -> params`;
      both inputs carry a leading worker dimension; the result is the single
      model that is evaluated and saved as the run's result.
    examples: options it is tested with (the first: by every check of
      tests/test_conformance.py), each with the state it keeps.
    timeline: the strategy's rule on the simulated cluster, a class of
      `odsgd_jax.cluster` built as `timeline(workers, network, message_bytes, overlap,
      *, <options>)`: the schedule it consumes and what a tick costs. Each keyword it
      takes must be an option of the factory (odsgd's warm-up: `warmup_steps`), and a
      rule that runs a tick's exchange beside that tick's compute
      (`overlaps_compute`) needs an update whose exchanges do not wait for the tick's
      gradient (odsgd_jax/strategies/_overlap.py); both are checked here.
    sends: when its messages travel: `EVERY_TICK`, or `f(worker_opt_state) -> (N,) bool`,
      whether the tick just taken sent the round's message (local SGD's round ends; logged
      as `round_end`). The clock charges communication, and counts bits, on those ticks
      only; tests/test_conformance.py checks it against the messages the strategy sends.
    defaults: the options the experiments run it with (configs/_strategies.py reads them
      through `config_options`; the factory's defaults fill the rest), each checked
      against its domain here; None: the factory's defaults.
    optimizer_changes: fields of `config.optimizer` the experiments set otherwise for it,
      and why in a comment where it is registered (asgd: no momentum).
    log: `log(worker_opt_state) -> {name: array of shape (N,)}`, the strategy's own
      metrics (staleness, confidence, period, ...), per worker, logged with every
      step as their mean over workers. Per worker, because picking worker 0 of a
      sharded array would cost a cross-device collective on every step.
    communication_state: `f(worker_opt_state)`, the state of its exchange
      (`odsgd_jax.comm.CommunicationState`, None without compression): the bits it
      sent, and how, are charged by the simulated clock.
    inner_updates_per_tick: `f(num_workers)`, how many times a tick steps the
      inner optimizer (asgd: once per arriving gradient, N on a full tick). A
      learning-rate schedule written in ticks divides the inner count by it.
    replaced_each_tick: the fields of its state (and "params", the worker's parameters)
      that a tick replaces whole while it still reads their old values (odsgd: W, the
      pending gradients, the inner state and spike's velocities, since the all-reduce reads
      the pending gradients before this tick's replace them; oscars: the momentum, which a
      select keeps for the workers the schedule leaves out). An algorithmic fact the train
      step reads to choose what it donates (odsgd_jax/train/_programs.py); each name is
      checked against the state's fields when it is registered.
  """

  name: str
  make: Callable[..., optax.GradientTransformationExtraArgs]
  model_params: Callable[[Any, Any], Any]
  examples: tuple[Example, ...] = ()
  timeline: type[cluster.Timeline] | None = None
  sends: str | Callable[[Any], Any] | None = None
  defaults: Mapping[str, Any] | None = None
  optimizer_changes: Mapping[str, Any] = dataclasses.field(default_factory=dict)
  log: Callable[[Any], dict[str, Any]] = _no_log
  communication_state: Callable[[Any], Any] = communication_field
  inner_updates_per_tick: Callable[[int], int] = lambda num_workers: 1
  replaced_each_tick: tuple[str, ...] = ()

  def options(self) -> dict[str, Any]:
    """The factory's keyword options that a config sets, and their defaults (not
    `axis_name`, nor `inner_momentum`: the trainer passes the inner optimizer's own)."""
    signature = inspect.signature(self.make)
    return {
        name: p.default
        for name, p in signature.parameters.items()
        if p.kind is inspect.Parameter.KEYWORD_ONLY and name not in SET_BY_TRAINER
    }

  def config_options(self) -> dict[str, Any]:
    """The options a config of the experiments sets (`config.strategy`): `defaults`, or
    without them the factory's defaults that are plain values."""
    if self.defaults is not None:
      return dict(self.defaults)
    return {k: v for k, v in self.options().items() if isinstance(v, (bool, int, float, str))}

  def round_end(self, worker_opt_state: Any) -> Any | None:
    """Whether the tick just taken sent its message, per worker; None: every tick does."""
    return None if self.sends == EVERY_TICK else self.sends(worker_opt_state)

  def takes(self, option: str) -> bool:
    return option in inspect.signature(self.make).parameters

  def timeline_options(self, **options: Any) -> dict[str, Any]:
    """The options its timeline reads, from `options` (the factory's defaults filling the
    rest)."""
    given = {**self.options(), **options}
    return {name: given[name] for name in timeline_keywords(self.timeline)}

  def make_timeline(self, workers: cluster.Workers, network: cluster.Network,
                    message_bytes: float, overlap: cluster.Overlap | None = None,
                    **options: Any) -> cluster.Timeline:
    """Its timeline rule, built with the options it reads (`options`, as the factory
    takes them; its defaults fill the rest)."""
    return self.timeline(workers, network, message_bytes, overlap,
                         **self.timeline_options(**options))


STRATEGIES: dict[str, StrategyDef] = {}


def timeline_keywords(timeline: type[cluster.Timeline]) -> tuple[str, ...]:
  """The strategy options a timeline rule reads: the keyword-only parameters it is built
  with."""
  return tuple(name for name, p in inspect.signature(timeline.__init__).parameters.items()
               if p.kind is inspect.Parameter.KEYWORD_ONLY)


def _timeline_problem(definition: StrategyDef, options: dict[str, Any]) -> str | None:
  """Why its timeline cannot time it: an option the rule reads that the factory lacks, a
  rule that takes options by `**`, or an exchange timed beside the compute that waits
  for the tick's gradient."""
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
  # The first example here (a trace of its update, a fraction of a second on the first
  # strategy); every example in tests/test_conformance.py.
  return overlap_problem(definition, definition.examples[0].options)


def overlap_problem(definition: StrategyDef, options: Mapping[str, Any]) -> str | None:
  """Why `definition` with `options` cannot be timed by its timeline, if that rule runs a
  tick's exchange beside the tick's compute: an exchange of its update that waits for the
  tick's gradient (odsgd_jax/strategies/_overlap.py)."""
  timeline = definition.timeline
  if not timeline.overlaps_compute(**definition.timeline_options(**options)):
    return None
  waiting = _overlap.gradient_exchanges(definition.make, dict(options))
  if not waiting:
    return None
  return (f"timeline {timeline.__name__} runs a tick's exchange beside that tick's compute, "
          f"but with options {dict(options)} its update's {waiting[0]} reads this tick's "
          f"gradient, so it cannot start before the backward pass ends; send only what the "
          f"tick before left (pending gradients, the parameters the gradient is taken at), "
          f"or register a timeline that waits (cluster.SynchronousTimeline)")


def _problems(definition: StrategyDef) -> str | None:
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
    return (f"sends={getattr(definition.sends, '__name__', definition.sends)!r} sends on some "
            f"ticks only, but timeline {definition.timeline.__name__} charges a message on "
            f"every tick (it does not honour round ends): register a timeline that does "
            f"(cluster.LocalSgdTimeline, cluster.OscarsTimeline) or sends=EVERY_TICK")
  problem = _timeline_problem(definition, options)
  if problem is not None:
    return problem
  named = set(definition.replaced_each_tick) - {"params"}
  missing = sorted(named - set(_state_fields(definition))) if named else []
  if missing:
    return (f"replaced_each_tick names {missing}, which its state does not have (fields: "
            f"{', '.join(_state_fields(definition))}; 'params': the worker's parameters)")
  for key, value in (definition.defaults or {}).items():
    if key not in options:
      return f"defaults: {key!r} is not an option of its factory (options: {sorted(options)})"
    try:
      domains.check_value(f"defaults: {key}", value, definition.make.domains[key])
    except domains.OptionError as error:
      return str(error)
  return None


def _state_fields(definition: StrategyDef) -> tuple[str, ...]:
  """The fields of the strategy's state (its first example's), read off its `init` traced
  on a stand-in model (shapes only: nothing is computed, JAX's backend does not start)."""
  tx = definition.make(optax.identity(), axis_name="workers", **definition.examples[0].options)
  state = jax.eval_shape(tx.init, _overlap.STAND_IN)
  return tuple(getattr(state, "_fields", ()))


def register(definition: StrategyDef) -> StrategyDef:
  """Makes `definition` a strategy that configs, studies and the tests can name.

  Raises:
    ValueError: the name is taken by another definition; the factory does not declare a
      domain for each of its options (`odsgd_jax.domains.declared`); it has no example; its
      timeline or when it sends is not given, or it sends on some ticks only under a
      timeline that charges every tick; its timeline reads an option the factory
      lacks, or times as overlapped an exchange that waits for the tick's gradient; a
      default is not an option or not allowed; a field it declares replaced each tick is
      not in its state.
  """
  name = definition.name
  if STRATEGIES.get(name, definition) is not definition:
    raise ValueError(f"strategy {name!r} is already registered; choose another name")
  problem = _problems(definition)
  if problem is not None:
    raise ValueError(f"strategy {name!r}: {problem}")
  STRATEGIES[name] = definition
  return definition


def get_strategy(name: str) -> StrategyDef:
  if name not in STRATEGIES:
    raise KeyError(f"unknown strategy {name!r}; choose one of {sorted(STRATEGIES)}")
  return STRATEGIES[name]
