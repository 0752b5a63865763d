"""Each strategy's options for the small offline experiments, in one place.

Used by configs/mnist1d.py, configs/digits.py and configs/default.py, so that
every strategy runs with the same model, data, seed and inner optimizer.
"""

import ml_collections

# Options passed to the strategy factory (see odsgd_jax/strategies).
STRATEGY_OPTIONS = {
    "ssgd": {},
    "asgd": {"delay_compensation": 0.0},
    "ssp": {"staleness": 2},
    # Authors' setting is local 0.5 with a 1/(B N) rescale: 0.5 / N here (N = 8).
    "odsgd": {"local_lr": 0.0625, "local_optimizer": "sgd", "warmup_steps": 200,
              "dc_lambda": 2.0},
    "pseudo_sync": {"confidence": "adaptive", "phi": 0.9, "alpha_min": 0.1},
    "local_sgd": {"period": 4},
    "oscars": {"period": 4, "adapt": "fixed"},
}

# asgd applies every worker's gradient on its own: N server steps per tick, so
# its server learning rate is the synchronous one divided by N.
LEARNING_RATE_DIVIDED_BY_WORKERS = ("asgd",)


def use_strategy(config: ml_collections.ConfigDict, name: str) -> ml_collections.ConfigDict:
  """`config` with strategy `name` and its options (and its learning-rate rule)."""
  if name not in STRATEGY_OPTIONS:
    raise ValueError(f"unknown strategy {name!r}; choose one of {sorted(STRATEGY_OPTIONS)}")
  config.strategy = ml_collections.ConfigDict({"name": name, **STRATEGY_OPTIONS[name]})
  if name in LEARNING_RATE_DIVIDED_BY_WORKERS:
    config.optimizer.learning_rate /= config.cluster.num_workers
  return config
