"""Strategy names -> factories, so that a config can name a strategy by string."""

import dataclasses
import inspect
from typing import Any, Callable

import optax

from odsgd_jax.strategies._asgd import asgd, asgd_log, asgd_model_params
from odsgd_jax.strategies._local_sgd import (local_sgd, local_sgd_log, local_sgd_model_params,
                                             oscars)
from odsgd_jax.strategies._odsgd import odsgd, odsgd_model_params
from odsgd_jax.strategies._pseudo_sync import pseudo_sync, pseudo_sync_log, pseudo_sync_model_params
from odsgd_jax.strategies._ssgd import ssgd, ssgd_model_params
from odsgd_jax.strategies._ssp import ssp, ssp_log, ssp_model_params


SET_BY_TRAINER = ("axis_name", "inner_momentum")


@dataclasses.dataclass(frozen=True)
class StrategyDef:
  """How to build a strategy and which parameters are its model.

  Attributes:
    make: factory `make(inner, *, axis_name, **options)` returning an
      `optax.GradientTransformationExtraArgs` that runs once per worker.
    model_params: `model_params(worker_params, worker_opt_state) -> params`;
      both inputs carry a leading worker dimension; the result is the single
      model that is evaluated and saved as the run's result.
    log: `log(worker_opt_state) -> {name: array of shape (N,)}`, the strategy's own
      metrics (staleness, confidence, period, ...), per worker, logged with every
      step as their mean over workers. Per worker, because picking worker 0 of a
      sharded array would cost a cross-device collective on every step.
    inner_updates_per_tick: `f(num_workers)`, how many times a tick steps the
      inner optimizer (asgd: once per arriving gradient, N on a full tick). A
      learning-rate schedule written in ticks divides the inner count by it.
  """

  make: Callable[..., optax.GradientTransformationExtraArgs]
  model_params: Callable[[Any, Any], Any]
  log: Callable[[Any], dict[str, Any]] = lambda worker_opt_state: {}
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

  def takes(self, option: str) -> bool:
    return option in inspect.signature(self.make).parameters


STRATEGIES: dict[str, StrategyDef] = {
    "ssgd": StrategyDef(make=ssgd, model_params=ssgd_model_params),
    "asgd": StrategyDef(make=asgd, model_params=asgd_model_params, log=asgd_log,
                        inner_updates_per_tick=lambda num_workers: num_workers),
    "ssp": StrategyDef(make=ssp, model_params=ssp_model_params, log=ssp_log),
    "odsgd": StrategyDef(make=odsgd, model_params=odsgd_model_params),
    "pseudo_sync": StrategyDef(make=pseudo_sync, model_params=pseudo_sync_model_params,
                               log=pseudo_sync_log),
    "local_sgd": StrategyDef(make=local_sgd, model_params=local_sgd_model_params,
                             log=local_sgd_log),
    "oscars": StrategyDef(make=oscars, model_params=local_sgd_model_params, log=local_sgd_log),
}


def get_strategy(name: str) -> StrategyDef:
  if name not in STRATEGIES:
    raise KeyError(f"unknown strategy {name!r}; choose one of {sorted(STRATEGIES)}")
  return STRATEGIES[name]
