"""The registry: strategy names -> their definitions, so that a config can name a strategy
by string. A strategy is its file plus one `register(StrategyDef(...))` call (below, or in
any module imported before the config is read: a test registers its own)."""

import dataclasses
import inspect
from typing import Any, Callable, Mapping

import optax

from odsgd_jax import cluster
from odsgd_jax.strategies._asgd import asgd, asgd_log, asgd_model_params
from odsgd_jax.strategies._gossip import gossip, gossip_model_params
from odsgd_jax.strategies._local_sgd import (local_sgd, local_sgd_log, local_sgd_model_params,
                                             local_sgd_round_end, oscars)
from odsgd_jax.strategies._odsgd import odsgd, odsgd_model_params, odsgd_steady_from
from odsgd_jax.strategies._pseudo_sync import (pseudo_sync, pseudo_sync_log,
                                               pseudo_sync_model_params, pseudo_sync_steady_from)
from odsgd_jax.strategies._ssgd import ssgd, ssgd_model_params
from odsgd_jax.strategies._ssp import ssp, ssp_log, ssp_model_params


SET_BY_TRAINER = ("axis_name", "inner_momentum")


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
class StepHints:
  """How the train step compiles a strategy's tick: buffer donation and steady programs.
  Not part of the math; the default (donate everything, one program) is always correct.

  Attributes:
    replaced_each_tick: dotted fields of the train state ("params",
      "opt_state.pending_grads") that a tick replaces whole while other work of the
      tick still reads their old values: the pending gradients (the all-reduce reads
      them) and, where the update of one tensor does not wait for the gradients of
      the others (as ssgd's all-reduce of every gradient makes it), the parameters
      (the backward pass reads them), and the state that a select keeps (odsgd's
      first delayed tick and pseudo_sync's first two, in the general program; oscars'
      inactive workers: XLA fuses the state's update into the select and into the
      parameter update, which reads the old values). The train step does not donate
      their large tensors (odsgd_jax/train/_donation.py): donated, XLA copies their
      old values aside at the start of the step (scripts/benchmark.py).
    steady_from: `f(options) -> tick` from which every tick takes the same path (odsgd:
      the delayed step after the warm-up and its first delayed tick; pseudo_sync: once
      two gradients arrived); the train step then calls `update(..., steady=True)`, a
      program without the conditional and the selects of the earlier ticks. None: one
      program throughout.
  """

  replaced_each_tick: tuple[str, ...] = ()
  steady_from: Callable[[dict[str, Any]], int] | None = None


@dataclasses.dataclass(frozen=True)
class StrategyDef:
  """Everything the rest of the package knows about a strategy.

  Training, the config checks, the simulated clock, the studies and the tests read a
  strategy only through these fields.

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
      `odsgd_jax.cluster` built as `timeline(workers, network, message_bytes,
      overlap, **options)`: the schedule it consumes and what a tick costs.
    log: `log(worker_opt_state) -> {name: array of shape (N,)}`, the strategy's own
      metrics (staleness, confidence, period, ...), per worker, logged with every
      step as their mean over workers. Per worker, because picking worker 0 of a
      sharded array would cost a cross-device collective on every step.
    communication_state: `f(worker_opt_state)`, the state of its exchange
      (`odsgd_jax.comm.CommunicationState`, None without compression): the bits it
      sent, and how, are charged by the simulated clock.
    round_end: `f(worker_opt_state) -> (N,) bool`, whether this tick ended a
      synchronization round (local SGD); None: every tick synchronizes.
    inner_updates_per_tick: `f(num_workers)`, how many times a tick steps the
      inner optimizer (asgd: once per arriving gradient, N on a full tick). A
      learning-rate schedule written in ticks divides the inner count by it.
    step_hints: buffer donation and steady programs of the train step (`StepHints`).
  """

  name: str
  make: Callable[..., optax.GradientTransformationExtraArgs]
  model_params: Callable[[Any, Any], Any]
  examples: tuple[Example, ...]
  timeline: type[cluster.Timeline] = cluster.SynchronousTimeline
  log: Callable[[Any], dict[str, Any]] = _no_log
  communication_state: Callable[[Any], Any] = communication_field
  round_end: Callable[[Any], Any] | None = None
  inner_updates_per_tick: Callable[[int], int] = lambda num_workers: 1
  step_hints: StepHints = StepHints()

  def options(self) -> dict[str, Any]:
    """The factory's keyword options that a config sets, and their defaults (not
    `axis_name`, nor `inner_momentum`: the trainer passes the inner optimizer's own)."""
    signature = inspect.signature(self.make)
    return {
        name: p.default
        for name, p in signature.parameters.items()
        if p.kind is inspect.Parameter.KEYWORD_ONLY and name not in SET_BY_TRAINER
    }

  def steady_tick(self, options: Mapping[str, Any]) -> int | None:
    """`step_hints.steady_from` for these options (the factory's defaults filling the rest)."""
    if self.step_hints.steady_from is None:
      return None
    return self.step_hints.steady_from({**self.options(), **options})

  def takes(self, option: str) -> bool:
    return option in inspect.signature(self.make).parameters

  def make_timeline(self, workers: cluster.Workers, network: cluster.Network,
                    message_bytes: float, overlap: cluster.Overlap | None = None,
                    **options: Any) -> cluster.Timeline:
    """Its timeline rule, the factory's defaults filling the options not given."""
    return self.timeline(workers, network, message_bytes, overlap,
                         **{**self.options(), **options})


STRATEGIES: dict[str, StrategyDef] = {}


def register(definition: StrategyDef) -> StrategyDef:
  """Makes `definition` a strategy that configs, studies and the tests can name.

  Raises:
    ValueError: the name is taken by another definition, the factory does not declare a
      domain for each of its options (`odsgd_jax.domains.declared`), or it has no example.
  """
  name = definition.name
  if STRATEGIES.get(name, definition) is not definition:
    raise ValueError(f"strategy {name!r} is already registered; choose another name")
  declared = set(getattr(definition.make, "domains", {}))
  undeclared = sorted(set(definition.options()) - declared)
  if undeclared:
    raise ValueError(f"strategy {name!r}: its factory declares no domain for {undeclared}; "
                     f"decorate it with @odsgd_jax.domains.declared({undeclared[0]}=...)")
  if not definition.examples:
    raise ValueError(f"strategy {name!r} has no examples: give the options it is tested with")
  STRATEGIES[name] = definition
  return definition


def get_strategy(name: str) -> StrategyDef:
  if name not in STRATEGIES:
    raise KeyError(f"unknown strategy {name!r}; choose one of {sorted(STRATEGIES)}")
  return STRATEGIES[name]


# One-step-delay strategies: the all-reduce reads the pending gradients, a tensor's
# update does not wait for the other tensors' gradients, and the inner optimizer's (and
# spike compensation's) state that the first ticks' selects keep is also read by the
# parameter update.
_DELAYED_REPLACED = ("params", "opt_state.pending_grads", "opt_state.inner_state",
                     "opt_state.spike")

register(StrategyDef(
    "ssgd", ssgd, ssgd_model_params, timeline=cluster.SynchronousTimeline,
    examples=(Example({}, 0, "nothing: the inner state only"),)))
register(StrategyDef(
    "asgd", asgd, asgd_model_params, timeline=cluster.AsynchronousTimeline, log=asgd_log,
    inner_updates_per_tick=lambda num_workers: num_workers,
    examples=(Example({"delay_compensation": 0.1}, 1, "server W"),
              Example({"correction": "predict+spike"}, 3, "+ spike's two velocities"))))
register(StrategyDef(
    "ssp", ssp, ssp_model_params, timeline=cluster.AsynchronousTimeline, log=ssp_log,
    examples=(Example({"staleness": 2}, 1, "server W"),)))
register(StrategyDef(
    "odsgd", odsgd, odsgd_model_params, timeline=cluster.PipelinedTimeline,
    step_hints=StepHints(_DELAYED_REPLACED, odsgd_steady_from),
    examples=(Example({"local_lr": 0.05, "warmup_steps": 2, "local_optimizer": "momentum"}, 3,
                      "global W + pending gradient + local momentum"),
              Example({"local_lr": 0.1}, 2, "global W + pending gradient"),
              Example({"local_lr": 0.1, "local_optimizer": "dcasgd"}, 2,
                      "W_prev is W before update"),
              Example({"local_lr": 0.1, "local_optimizer": "replay", "correction": "spike"}, 4,
                      "+ spike's velocity and compensated velocity"))))
register(StrategyDef(
    "pseudo_sync", pseudo_sync, pseudo_sync_model_params, timeline=cluster.PipelinedTimeline,
    log=pseudo_sync_log, step_hints=StepHints(_DELAYED_REPLACED, pseudo_sync_steady_from),
    examples=(Example({"correction": "replay+spike"}, 5,
                      "pending, prediction S, the model W and spike's two velocities"),
              Example({}, 2, "pending, prediction S (of A and M only their sums per tensor)"))))
register(StrategyDef(
    "local_sgd", local_sgd, local_sgd_model_params, timeline=cluster.LocalSgdTimeline,
    log=local_sgd_log, round_end=local_sgd_round_end,
    examples=(Example({"period": 3}, 1, "anchor"),
              Example({"period": 4, "outer": optax.sgd(0.7, momentum=0.9)}, 2,
                      "+ outer momentum"))))
register(StrategyDef(
    "oscars", oscars, local_sgd_model_params, timeline=cluster.OscarsTimeline,
    log=local_sgd_log, round_end=local_sgd_round_end,
    # the select that keeps an inactive worker's momentum: as the delayed strategies'
    # first-tick selects, read after the update
    step_hints=StepHints(replaced_each_tick=("opt_state.inner_state",)),
    examples=(Example({"period": 3, "adapt": "linear"}, 1, "anchor"),
              Example({"period": 4}, 1, "anchor"))))
register(StrategyDef(
    "gossip", gossip, gossip_model_params, timeline=cluster.GossipTimeline,
    examples=(Example({"graph": "ring"}, 0, "nothing: the inner state only (its own)"),
              Example({"graph": "exponential", "order": "step_first"}, 0,
                      "nothing: the inner state only (its own)"))))
