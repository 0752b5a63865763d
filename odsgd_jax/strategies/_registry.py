"""Strategy names -> factories, so that a config can name a strategy by string."""

import dataclasses
import inspect
from typing import Any, Callable

import optax

from odsgd_jax.strategies._ssgd import ssgd, ssgd_model_params


@dataclasses.dataclass(frozen=True)
class StrategyDef:
  """How to build a strategy and which parameters are its model.

  Attributes:
    make: factory `make(inner, *, axis_name, **options)` returning an
      `optax.GradientTransformationExtraArgs` that runs once per worker.
    model_params: `model_params(worker_params, worker_opt_state) -> params`;
      both inputs carry a leading worker dimension; the result is the single
      model that is evaluated and saved as the run's result.
  """

  make: Callable[..., optax.GradientTransformationExtraArgs]
  model_params: Callable[[Any, Any], Any]

  def options(self) -> dict[str, Any]:
    """The factory's keyword options (besides `axis_name`) and their defaults."""
    signature = inspect.signature(self.make)
    return {
        name: p.default
        for name, p in signature.parameters.items()
        if p.kind is inspect.Parameter.KEYWORD_ONLY and name != "axis_name"
    }


STRATEGIES: dict[str, StrategyDef] = {
    "ssgd": StrategyDef(make=ssgd, model_params=ssgd_model_params),
}


def get_strategy(name: str) -> StrategyDef:
  if name not in STRATEGIES:
    raise KeyError(f"unknown strategy {name!r}; choose one of {sorted(STRATEGIES)}")
  return STRATEGIES[name]
