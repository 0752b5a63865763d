"""scikit-learn 8x8 digits, LeNet-5, 8 workers, synchronous SGD (offline, ~1 minute on CPU).

  python -m experiments.train --config configs/digits_ssgd.py --workdir runs/digits_ssgd
"""

from configs import _strategies, default


def get_config(arg=None):
  config = _strategies.use_strategy(default.get_config(), "ssgd")
  config.data.name = "digits"
  config.data.batch_size = 64  # 1437 training images: 8 per worker per step
  config.model.name = "lenet5"
  config.optimizer.learning_rate = 0.05
  config.train.num_steps = 1500
  config.train.eval_every = 500
  config.train.checkpoint_every = 500
  return _strategies.with_arg(config, arg)
