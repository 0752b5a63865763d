"""The registry: strategy names -> their definitions, so that a config can name a strategy
by string. A strategy is its file, which ends with its one `register(StrategyDef(...))`
(the package imports every module of odsgd_jax/strategies; a test registers its own)."""

from odsgd_jax.strategies import _validation
from odsgd_jax.strategies._definition import EVERY_TICK as EVERY_TICK
from odsgd_jax.strategies._definition import Example as Example
from odsgd_jax.strategies._definition import StrategyDef as StrategyDef

STRATEGIES: dict[str, StrategyDef] = {}


def register(definition: StrategyDef) -> StrategyDef:
  """Makes `definition` a strategy that configs, studies and the tests can name.

  Raises:
    ValueError: the name is taken by another definition, or the definition has a problem
      (odsgd_jax/strategies/_validation.py): a factory option without a domain
      (`odsgd_jax.domains.declared`); no example; no timeline, or no `sends`, or `sends`
      that does not match the messages its update sends, or sends on some ticks only under
      a timeline that charges every tick; a timeline that reads an option the factory
      lacks, or times as overlapped an exchange that waits for the tick's gradient; an
      option of its defaults or of an example that the factory does not take, or a value
      outside its domain. The message names the strategy.
  """
  name = definition.name
  if STRATEGIES.get(name, definition) is not definition:
    raise ValueError(f"strategy {name!r} is already registered; choose another name")
  problem = _validation.problems(definition)
  if problem is not None:
    raise ValueError(f"strategy {name!r}: {problem}")
  STRATEGIES[name] = definition
  return definition


def get_strategy(name: str) -> StrategyDef:
  if name not in STRATEGIES:
    raise KeyError(f"unknown strategy {name!r}; choose one of {sorted(STRATEGIES)}")
  return STRATEGIES[name]
