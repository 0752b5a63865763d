"""OD-SGD reproduction on ImageNet with ResNet-50 (authors' rates and warm-up).

Needs imagenet2012 prepared in array_record format (manual download, docs/data.md)
and accelerators. `local_lr = 0.5 / N` as in configs/odsgd_cifar10_resnet20.py.

  python -m experiments.train --config configs/odsgd_imagenet_resnet50.py \
      --workdir runs/odsgd_imagenet --config.data.data_dir=/path/to/tensorflow_datasets
"""

from configs import _strategies, imagenet_resnet50


def get_config(arg=None):
  config = _strategies.use_odsgd_authors_settings(imagenet_resnet50.get_config())
  return _strategies.with_arg(config, arg)
