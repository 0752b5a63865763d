"""Strategy names -> their definitions, so that a config can name a strategy by string."""

import dataclasses
import inspect
from typing import Any, Callable

import optax

from odsgd_jax.strategies._asgd import asgd, asgd_log, asgd_model_params
from odsgd_jax import cluster
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


def _no_communication(worker_opt_state: Any) -> None:
  del worker_opt_state


def _communication_field(worker_opt_state: Any) -> Any:
  return worker_opt_state.communication


@dataclasses.dataclass(frozen=True)
class StrategyDef:
  """Everything the rest of the package knows about a strategy.

  A new strategy is its file (factory, model, log) plus one entry in `STRATEGIES`:
  training, the config checks, the simulated clock and the studies read it only
  through these fields.

  Attributes:
    make: factory `make(inner, *, axis_name, **options)` returning an
      `optax.GradientTransformationExtraArgs` that runs once per worker. Its keyword
      options (with their defaults) are the config fields of `config.strategy`.
    model_params: `model_params(worker_params, worker_opt_state) -> params`;
      both inputs carry a leading worker dimension; the result is the single
      model that is evaluated and saved as the run's result.
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
    replaced_each_tick: dotted fields of the train state ("params",
      "opt_state.pending_grads") that a tick replaces whole while other work of the
      tick still reads their old values: the pending gradients (the all-reduce reads
      them) and, where the update of one tensor does not wait for the gradients of
      the others (as ssgd's all-reduce of every gradient makes it), the parameters
      (the backward pass reads them), and the state that a select keeps (odsgd's
      first delayed tick and pseudo_sync's first two, in the general program; oscars'
      inactive workers: XLA fuses the state's update into the select and into the
      parameter update, which reads the old values). The train step does not donate
      their large
      tensors (odsgd_jax/train/_donation.py): donated, XLA copies their old values
      aside at the start of the step (scripts/benchmark.py).
    steady_from: `f(options) -> tick` from which every tick takes the same path (odsgd:
      the delayed step after the warm-up and its first delayed tick; pseudo_sync: once
      two gradients arrived); the train step then calls `update(..., steady=True)`, a
      program without the conditional and the selects of the earlier ticks. None: one
      program throughout.
  """

  make: Callable[..., optax.GradientTransformationExtraArgs]
  model_params: Callable[[Any, Any], Any]
  timeline: type[cluster.Timeline] = cluster.SynchronousTimeline
  log: Callable[[Any], dict[str, Any]] = _no_log
  communication_state: Callable[[Any], Any] = _no_communication
  round_end: Callable[[Any], Any] | None = None
  inner_updates_per_tick: Callable[[int], int] = lambda num_workers: 1
  replaced_each_tick: tuple[str, ...] = ()
  steady_from: Callable[[dict[str, Any]], int] | None = None

  def options(self) -> dict[str, Any]:
    """The factory's keyword options that a config sets, and their defaults (not
    `axis_name`, nor `inner_momentum`: the trainer passes the inner optimizer's own)."""
    signature = inspect.signature(self.make)
    return {
        name: p.default
        for name, p in signature.parameters.items()
        if p.kind is inspect.Parameter.KEYWORD_ONLY and name not in SET_BY_TRAINER
    }

  def steady_tick(self, options: dict[str, Any]) -> int | None:
    """`steady_from` for these options (the factory's defaults filling the rest)."""
    if self.steady_from is None:
      return None
    return self.steady_from({**self.options(), **options})

  def takes(self, option: str) -> bool:
    return option in inspect.signature(self.make).parameters

  def make_timeline(self, workers: cluster.Workers, network: cluster.Network,
                    message_bytes: float, overlap: cluster.Overlap | None = None,
                    **options: Any) -> cluster.Timeline:
    """Its timeline rule, the factory's defaults filling the options not given."""
    return self.timeline(workers, network, message_bytes, overlap,
                         **{**self.options(), **options})


# One-step-delay strategies: the all-reduce reads the pending gradients, a tensor's
# update does not wait for the other tensors' gradients, and the inner optimizer's (and
# spike compensation's) state that the first ticks' selects keep is also read by the
# parameter update.
_DELAYED_REPLACED = ("params", "opt_state.pending_grads", "opt_state.inner_state",
                     "opt_state.spike")

STRATEGIES: dict[str, StrategyDef] = {
    "ssgd": StrategyDef(make=ssgd, model_params=ssgd_model_params,
                        timeline=cluster.SynchronousTimeline,
                        communication_state=_communication_field),
    "asgd": StrategyDef(make=asgd, model_params=asgd_model_params,
                        timeline=cluster.AsynchronousTimeline, log=asgd_log,
                        communication_state=_communication_field,
                        inner_updates_per_tick=lambda num_workers: num_workers),
    "ssp": StrategyDef(make=ssp, model_params=ssp_model_params,
                       timeline=cluster.AsynchronousTimeline, log=ssp_log,
                       communication_state=_communication_field),
    "odsgd": StrategyDef(make=odsgd, model_params=odsgd_model_params,
                         timeline=cluster.PipelinedTimeline,
                         communication_state=_communication_field,
                         replaced_each_tick=_DELAYED_REPLACED, steady_from=odsgd_steady_from),
    "pseudo_sync": StrategyDef(make=pseudo_sync, model_params=pseudo_sync_model_params,
                               timeline=cluster.PipelinedTimeline, log=pseudo_sync_log,
                               communication_state=_communication_field,
                               replaced_each_tick=_DELAYED_REPLACED,
                               steady_from=pseudo_sync_steady_from),
    "local_sgd": StrategyDef(make=local_sgd, model_params=local_sgd_model_params,
                             timeline=cluster.LocalSgdTimeline, log=local_sgd_log,
                             communication_state=_communication_field,
                             round_end=local_sgd_round_end),
    "oscars": StrategyDef(make=oscars, model_params=local_sgd_model_params,
                          timeline=cluster.OscarsTimeline, log=local_sgd_log,
                          communication_state=_communication_field,
                          round_end=local_sgd_round_end,
                          # the select that keeps an inactive worker's momentum: as the
                          # delayed strategies' first-tick selects, read after the update
                          replaced_each_tick=("opt_state.inner_state",)),
}


def get_strategy(name: str) -> StrategyDef:
  if name not in STRATEGIES:
    raise KeyError(f"unknown strategy {name!r}; choose one of {sorted(STRATEGIES)}")
  return STRATEGIES[name]
