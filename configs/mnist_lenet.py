"""MNIST, LeNet-5, 8 workers, synchronous SGD.

Needs MNIST prepared in array_record format (see docs/data.md); an accelerator
is recommended (about 10 minutes on a 2-core CPU).

  python -m experiments.train --config configs/mnist_lenet.py --workdir runs/mnist_lenet \
      --config.data.data_dir=/path/to/tensorflow_datasets
"""

from configs import _strategies, default


def get_config(arg=None):
  config = _strategies.use_strategy(default.get_config(), "ssgd")
  config.data.name = "mnist"
  config.data.batch_size = 256  # 32 per worker
  config.model.name = "lenet5"
  config.optimizer.learning_rate = 0.05
  config.optimizer.weight_decay = 1e-4
  config.train.num_steps = 4690  # 20 epochs of 60000 / 256
  config.train.eval_every = 1000
  config.train.checkpoint_every = 1000
  config.train.log_every = 50
  return _strategies.with_arg(config, arg)
