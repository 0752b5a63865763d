"""A strategy with its options, resolved once: what training, the config check, the
clock and the summary read instead of the config's `strategy` section."""

import dataclasses
import difflib
from typing import Any, Mapping

import optax

from odsgd_jax import cluster, domains
from odsgd_jax.strategies._definition import StrategyDef
from odsgd_jax.strategies._registry import get_strategy


@dataclasses.dataclass(frozen=True)
class StrategySpec:
  """A registered strategy and the keyword options its factory is called with.

  Attributes:
    definition: the registered `StrategyDef`.
    options: the factory's keyword options as given (the factory's defaults fill the
      rest; an `outer` optimizer as sgd's arguments stays a dict, which the factory builds,
      so that a checkpoint's identity can hold it), `inner_momentum` set where the factory
      takes it.
  """

  definition: StrategyDef
  options: Mapping[str, Any]

  @property
  def name(self) -> str:
    return self.definition.name

  def make(self, inner: optax.GradientTransformation,
           axis_name: Any) -> optax.GradientTransformationExtraArgs:
    return self.definition.make(inner, axis_name=axis_name, **self.options)

  def make_timeline(self, workers: cluster.Workers, network: cluster.Network,
                    message_bytes: float, overlap: cluster.Overlap | None) -> cluster.Timeline:
    return self.definition.make_timeline(workers, network, message_bytes, overlap, **self.options)


def resolve(name: str, options: Mapping[str, Any], inner_momentum: float | None = None,
            num_workers: int | None = None) -> StrategySpec:
  """The strategy `name` with `options` (as a config writes them), checked; with
  `num_workers`, also the bounds that depend on the number of workers.

  An `outer` optimizer given as sgd's arguments ({"learning_rate": 0.7, "momentum":
  0.9}) is built by the factory (`optax.sgd(**outer)`); `inner_momentum` (the inner
  optimizer's heavy-ball momentum, which delay corrections need) is passed where the
  factory takes it.

  Raises:
    KeyError: no strategy is registered as `name`.
    ValueError: an option the factory does not take, or a value outside its domain
      or at odds with another option (the message names the option: strategy.<name>).
  """
  definition = get_strategy(name)
  allowed = definition.options()
  for key in options:
    if key not in allowed:
      close = difflib.get_close_matches(key, list(allowed), n=1)
      hint = f"; did you mean strategy.{close[0]}?" if close else ""
      raise ValueError(f"unknown config field strategy.{key} for strategy {name!r}{hint} "
                       f"(allowed: {', '.join(sorted(allowed)) or 'none'})")
  options = dict(options)
  if inner_momentum is not None and definition.takes("inner_momentum"):
    options["inner_momentum"] = float(inner_momentum)
  # The factory checks each option's domain (`domains.declared`) and what involves
  # several options; building it is cheap and pure, so this is the one check.
  try:
    definition.make(optax.identity(), axis_name="workers", **options)
    if num_workers is not None:
      given = {**definition.options(), **options}
      for option, domain in definition.make.domains.items():
        if option in given:
          domains.check_value(option, given[option], domain, num_workers)
  except domains.OptionError as error:
    raise ValueError(f"strategy.{error}") from error
  except (ValueError, TypeError) as error:
    raise ValueError(f"strategy: {error}") from error
  return StrategySpec(definition, options)

