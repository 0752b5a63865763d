"""What a strategy is to the rest of the package: its `StrategyDef`, the options it is
tested with (`Example`), and what its fields mean. Registration checks a definition
(odsgd_jax/strategies/_validation.py) and records it (odsgd_jax/strategies/_registry.py)."""

import dataclasses
import inspect
from typing import Any, Callable, Mapping

import optax

from odsgd_jax import cluster

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
  strategy only through these fields. `timeline` and `sends` must be given: both default to
  None, which registration refuses, since both decide what the clock charges and a silent
  default would time a strategy wrongly. Registration (odsgd_jax/strategies/_validation.py)
  checks every field it can against the strategy's traced update.

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
      tests/test_conformance.py), each with the state it keeps; each option is checked
      against the factory's at registration.
    timeline: the strategy's rule on the simulated cluster, a class of
      `odsgd_jax.cluster` built as `timeline(workers, network, message_bytes, overlap,
      *, <options>)`: the schedule it consumes and what a tick costs. Each keyword it
      takes must be an option of the factory (odsgd's warm-up: `warmup_steps`), and a
      rule that runs a tick's exchange beside that tick's compute
      (`overlaps_compute`) needs an update whose exchanges do not wait for the tick's
      gradient (odsgd_jax/strategies/_overlap.py); both are checked at registration,
      the second on every example.
    sends: when its messages travel: `EVERY_TICK`, or `f(worker_opt_state) -> (N,) bool`,
      whether the tick just taken sent the round's message (local SGD's round ends; logged
      as `round_end`). The clock charges communication, and counts bits, on those ticks
      only. Registration checks it against its traced update: `EVERY_TICK` needs a
      message on every path of it (outside any conditional), a function one that sends
      only inside conditionals; tests/test_conformance.py checks it tick by tick.
    defaults: the options the experiments run it with (configs/_strategies.py reads them
      through `config_options`; the factory's defaults fill the rest), each checked
      against its domain at registration; None: the factory's defaults.
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


def timeline_keywords(timeline: type[cluster.Timeline]) -> tuple[str, ...]:
  """The strategy options a timeline rule reads: the keyword-only parameters it is built
  with."""
  return tuple(name for name, p in inspect.signature(timeline.__init__).parameters.items()
               if p.kind is inspect.Parameter.KEYWORD_ONLY)
