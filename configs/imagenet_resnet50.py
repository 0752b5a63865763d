"""ImageNet (ILSVRC 2012), ResNet-50, 8 workers, synchronous SGD.

Needs imagenet2012 prepared in array_record format (manual download; see
docs/data.md) and accelerators. Batch 32 per worker, lr 0.1 with momentum 0.9, weight
decay 1e-4, x0.1 at epochs 30, 60 and 80, 90 epochs.

  python -m experiments.train --config configs/imagenet_resnet50.py --workdir runs/imagenet \
      --config.data.data_dir=/path/to/tensorflow_datasets
"""

from configs import _strategies, default


def get_config(arg=None):
  config = _strategies.use_strategy(default.get_config(), "ssgd")
  config.data.name = "imagenet2012"
  config.data.batch_size = 256  # 32 per worker
  config.data.eval_batch_size = 256
  config.data.num_threads = 16
  config.data.prefetch = 4
  config.model.name = "resnet50"
  config.optimizer.learning_rate = 0.1
  config.optimizer.weight_decay = 1e-4
  config.optimizer.schedule = "step"
  config.optimizer.decay_epochs = (30, 60, 80)
  config.train.num_steps = 450_360  # 90 epochs of 1281167 / 256
  config.train.eval_every = 5004
  config.train.checkpoint_every = 5004
  config.train.log_every = 50
  return _strategies.with_arg(config, arg)
