"""MNIST-1D, CNN1D, 8 workers, any strategy (offline, CPU):

  python -m experiments.train --config configs/mnist1d.py:asgd --workdir runs/mnist1d_asgd

The text after ":" names the strategy (default odsgd); its options come from
configs/_strategies.py and can be overridden, e.g. --config.strategy.period=8.
"""

from configs import _strategies, default


def get_config(arg: str = "odsgd"):
  return _strategies.with_arg(default.get_config(), arg)
