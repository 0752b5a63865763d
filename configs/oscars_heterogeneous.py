"""Oscars on a heterogeneous cluster: MNIST-1D, CNN1D, 8 workers at speeds
1,1,1,1,0.5,0.5,0.25,0.25 (offline, CPU). Compare with local SGD and ssgd on the
same simulated cluster:

  python scripts/compare.py --config configs/oscars_heterogeneous.py \\
      --strategies ssgd,local_sgd,oscars

  python -m experiments.train --config configs/oscars_heterogeneous.py --workdir runs/oscars
"""

from configs import _strategies, default

# the heterogeneous cluster's worker speeds, shared by every workload's heterogeneous config
SPEEDS = (1.0, 1.0, 1.0, 1.0, 0.5, 0.5, 0.25, 0.25)


def get_config(arg=None):
  config = _strategies.use_strategy(default.get_config(), "oscars")
  config.cluster.speeds = SPEEDS
  return _strategies.with_arg(config, arg)
