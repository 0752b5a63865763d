"""Default experiment: MNIST-1D (held-out splits), CNN1D, 8 workers, OD-SGD.

Builds its data offline and runs in about a minute on a 2-core CPU:

  python -m experiments.train --config configs/default.py --workdir runs/default

Any field can be overridden, e.g. --config.optimizer.learning_rate=0.05, and
another strategy chosen after a colon: --config configs/default.py:ssgd.

Every field, its default and what it may be: the library's schema
(odsgd_jax/train/_schema.py, `train.base_config()`); this file makes its choices on it.
"""

import ml_collections

from configs import _strategies
from odsgd_jax.train import base_config


def get_config(arg: str | None = None) -> ml_collections.ConfigDict:
  config = base_config()
  # mnist1d_heldout: the standard 4000 training signals, 2,000 validation and 10,000 test
  # (docs/data.md). Others: mnist1d | digits | fashion_mnist | mnist | cifar10 | imagenet2012.
  config.data.name = "mnist1d_heldout"
  config.model.name = "cnn1d"  # mlp | cnn1d | lenet5 | resnet20 | resnet50; other fields go to it
  # OD-SGD with the options it is registered with (configs/_strategies.py)
  config = _strategies.use_strategy(config, "odsgd")
  return _strategies.with_arg(config, arg)
