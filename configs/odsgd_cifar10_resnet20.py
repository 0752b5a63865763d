"""OD-SGD reproduction on CIFAR-10 with ResNet-20, the authors' settings.

Needs CIFAR-10 prepared in array_record format (docs/data.md) and an accelerator.
From the authors' MXNet scripts: batch 32 per GPU, global lr 0.1 with momentum 0.9,
local lr 0.5, 200 warm-up (synchronous) steps, weight decay 1e-4, lr x0.1 at epochs
80 and 120. Their local step carries the server's 1/(B N) rescale, so local 0.5 is
`local_lr = 0.5 / N` here, computed from cluster.num_workers (configs/_strategies.py):
set the worker count in this file rather than on the command line.

  python -m experiments.train --config configs/odsgd_cifar10_resnet20.py \
      --workdir runs/odsgd_cifar10 --config.data.data_dir=/path/to/tensorflow_datasets
"""

from configs import _strategies, cifar10_resnet20


def get_config(arg=None):
  config = _strategies.use_odsgd_authors_settings(cifar10_resnet20.get_config())
  return _strategies.with_arg(config, arg)
