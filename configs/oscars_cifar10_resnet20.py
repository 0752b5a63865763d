"""Oscars on a heterogeneous cluster, CIFAR-10 with ResNet-20 (speeds
1,1,1,1,0.5,0.5,0.25,0.25). Needs CIFAR-10 prepared (docs/data.md) and an
accelerator. Compare on the same simulated cluster with:

  python scripts/compare.py --config configs/oscars_cifar10_resnet20.py \
      --strategies ssgd,local_sgd,oscars
"""

from configs import _strategies, cifar10_resnet20


def get_config(arg=None):
  config = _strategies.use_strategy(cifar10_resnet20.get_config(), "oscars")
  config.cluster.speeds = (1.0, 1.0, 1.0, 1.0, 0.5, 0.5, 0.25, 0.25)
  config.strategy.period = 8
  config.strategy.adapt = "loss"
  return _strategies.with_arg(config, arg)
