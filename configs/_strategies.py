"""Each strategy's options for the small offline experiments, in one place.

Used by configs/mnist1d.py, configs/digits.py and the catalog configs, so that
every strategy runs with the same model, data and seed; the inner optimizer is
the synchronous one except where OPTIMIZER_CHANGES says otherwise, and why.
"""

import ml_collections

from odsgd_jax.strategies import STRATEGIES

# Options passed to the strategy factory (see odsgd_jax/strategies).
STRATEGY_OPTIONS = {
    "ssgd": {},
    "asgd": {"delay_compensation": 0.0},
    "ssp": {"staleness": 2},
    # The authors' local 0.5 carries a 1/(B N) rescale: 0.5 / N = 0.0625 here (N = 8).
    # On mnist1d 0.1 does better on validation (docs/strategies.md):
    #   python scripts/sweep.py --config configs/default.py:odsgd \
    #       --grid strategy.local_lr=0.1,0.0625,0.0
    "odsgd": {"local_lr": 0.1, "local_optimizer": "sgd", "warmup_steps": 200,
              "dc_lambda": 2.0},
    # The reconstruction's adaptive smoothing, with the delay corrections that make
    # ssgd's own optimizer stable for it (docs/delays.md):
    #   python scripts/sweep.py --config configs/default.py:pseudo_sync \
    #       --grid strategy.correction=none,replay,replay+spike
    "pseudo_sync": {"confidence": "adaptive", "phi": 0.9, "alpha_min": 0.5,
                    "correction": "replay+spike"},
    "local_sgd": {"period": 4},
    "oscars": {"period": 4, "adapt": "fixed"},
}

# Inner-optimizer settings that differ from the synchronous ones, and why.
OPTIMIZER_CHANGES = {
    # N server steps per tick (one per arriving gradient), each with stale
    # gradients: momentum 0.9 diverges, and without momentum the synchronous rate (0.1)
    # is the best on validation (docs/delays.md, "options_asgd"):
    #   python scripts/sweep.py --config configs/default.py:asgd \
    #       --grid optimizer.momentum=0.0,0.9 --grid optimizer.learning_rate=0.1,0.05,0.025,0.2
    "asgd": {"momentum": 0.0},
}


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
  return config


def _factory_defaults(name: str) -> dict:
  """A registered strategy's options with plain defaults (a strategy without an entry
  above runs with its factory's defaults)."""
  options = STRATEGIES[name].options()
  return {k: v for k, v in options.items() if isinstance(v, (bool, int, float, str))}


def use_strategy(config: ml_collections.ConfigDict, name: str) -> ml_collections.ConfigDict:
  """`config` with strategy `name`, its options and its inner-optimizer changes."""
  if name not in STRATEGIES:
    raise ValueError(f"unknown strategy {name!r}; choose one of {sorted(STRATEGIES)}")
  options = STRATEGY_OPTIONS[name] if name in STRATEGY_OPTIONS else _factory_defaults(name)
  config.strategy = ml_collections.ConfigDict({"name": name, **options})
  for field, value in OPTIMIZER_CHANGES.get(name, {}).items():
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
  (big_vision style): a strategy name (its options and inner-optimizer changes from this
  file), `runlocal` (a quick look), `steps=<n>`; e.g. `configs/mnist1d.py:odsgd,runlocal`."""
  for token in [t.strip() for t in (arg or "").split(",") if t.strip()]:
    if token == "runlocal":
      config = runlocal(config)
    elif token.startswith("steps="):
      config = with_steps(config, int(token.removeprefix("steps=")))
    else:
      config = use_strategy(config, token)
  return config
