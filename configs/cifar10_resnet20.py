"""CIFAR-10, ResNet-20, 8 workers, synchronous SGD: the OD-SGD authors' CIFAR setting.

Needs CIFAR-10 prepared in array_record format (see docs/data.md) and an
accelerator: 160 epochs of ResNet-20 take days on a CPU.
Batch 32 per worker, lr 0.1 with momentum 0.9, weight decay 1e-4, x0.1 at
epochs 80 and 120, as in the authors' scripts.

  python -m experiments.train --config configs/cifar10_resnet20.py --workdir runs/cifar10 \
      --config.data.data_dir=/path/to/tensorflow_datasets
"""

from configs import _strategies, default


def get_config(arg=None):
  config = _strategies.use_strategy(default.get_config(), "ssgd")
  config.data.name = "cifar10"
  config.data.batch_size = 256  # 32 per worker
  config.data.num_threads = 8
  config.model.name = "resnet20"
  config.optimizer.learning_rate = 0.1
  config.optimizer.weight_decay = 1e-4
  config.optimizer.schedule = "step"
  config.optimizer.decay_epochs = (80, 120)
  config.train.num_steps = 31250  # 160 epochs of 50000 / 256
  config.train.eval_every = 1950
  config.train.checkpoint_every = 1950
  config.train.log_every = 50
  return _strategies.with_arg(config, arg)
