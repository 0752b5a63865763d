"""Each strategy as the small offline experiments run it, from its registration.

A strategy's file registers the options the experiments use (`StrategyDef.defaults`; none:
its factory's defaults) and
the inner-optimizer fields they set otherwise for it (`StrategyDef.optimizer_changes`),
with why; configs/default.py, mnist1d.py, digits.py and the catalog configs read them here,
so that every strategy runs with the same model, data and seed.
"""

import ml_collections

from odsgd_jax.strategies import STRATEGIES


def use_odsgd_authors_settings(config: ml_collections.ConfigDict) -> ml_collections.ConfigDict:
  """odsgd with the OD-SGD authors' local rate and warm-up (configs/odsgd_*.py).

  Their scripts use local lr 0.5, but their local step carries the server's 1/(B N)
  rescale, so it is `local_lr = 0.5 / N` here; N is read from the config, so set
  cluster.num_workers in the config file rather than on the command line.
  """
  config = use_strategy(config, "odsgd")
  config.strategy.local_lr = 0.5 / config.cluster.num_workers
  config.strategy.warmup_steps = 200  # synchronous steps first
  config.strategy.local_optimizer = "sgd"
  config.strategy.correction = "none"  # theirs: no delay correction
  return config


def use_strategy(config: ml_collections.ConfigDict, name: str) -> ml_collections.ConfigDict:
  """`config` with strategy `name`, the options it is registered with and its
  inner-optimizer changes.

  Raises:
    ValueError: no strategy is registered as `name`, or an inner-optimizer change names a
      field `config.optimizer` does not have.
  """
  if name not in STRATEGIES:
    raise ValueError(f"unknown strategy {name!r}; choose one of {sorted(STRATEGIES)}")
  definition = STRATEGIES[name]
  config.strategy = ml_collections.ConfigDict({"name": name, **definition.config_options()})
  for field, value in definition.optimizer_changes.items():
    if field not in config.optimizer:
      raise ValueError(f"strategy {name!r} changes optimizer.{field}, which the config does "
                       f"not have (fields: {', '.join(sorted(config.optimizer))})")
    config.optimizer[field] = value
  return config


def runlocal(config: ml_collections.ConfigDict) -> ml_collections.ConfigDict:
  """A quick look (tests, a first try on a laptop): 20 steps of a smaller global batch,
  evaluated and checkpointed every 10, every step logged, no progress bar."""
  config.data.batch_size = 64
  config.data.eval_batch_size = 500
  return with_steps(config, 20, every=10)


def with_steps(config: ml_collections.ConfigDict, steps: int,
               every: int | None = None) -> ml_collections.ConfigDict:
  """`steps` steps, evaluated and checkpointed every `every` (default: at the end), with
  the learning-rate warm-up cut to fit."""
  config.train.num_steps = steps
  config.train.eval_every = config.train.checkpoint_every = every or steps
  config.train.log_every = 1
  config.train.progress_bar = False
  config.optimizer.warmup_steps = min(config.optimizer.warmup_steps, steps // 4)
  return config


def with_arg(config: ml_collections.ConfigDict, arg: str | None) -> ml_collections.ConfigDict:
  """`config` changed by the text after ":" in `--config file.py:<arg>`, comma-separated
  (big_vision style): a strategy name (its options and inner-optimizer changes from its
  registration), `runlocal` (a quick look), `steps=<n>`; e.g.
  `configs/mnist1d.py:odsgd,runlocal`."""
  for token in [t.strip() for t in (arg or "").split(",") if t.strip()]:
    if token == "runlocal":
      config = runlocal(config)
    elif token.startswith("steps="):
      config = with_steps(config, int(token.removeprefix("steps=")))
    else:
      config = use_strategy(config, token)
  return config
