"""OD-SGD reproduction on MNIST with LeNet-5 (authors' global/local rates and warm-up).

Needs MNIST prepared in array_record format (docs/data.md); `local_lr = 0.5 / N`
(the authors' local 0.5 with their 1/(B N) rescale, see configs/odsgd_cifar10_resnet20.py).

  python -m experiments.train --config configs/odsgd_mnist_lenet.py --workdir runs/odsgd_mnist \
      --config.data.data_dir=/path/to/tensorflow_datasets
"""

from configs import _strategies, mnist_lenet


def get_config(arg=None):
  config = _strategies.use_odsgd_authors_settings(mnist_lenet.get_config())
  config.optimizer.learning_rate = 0.1  # the authors' global rate
  return _strategies.with_arg(config, arg)
