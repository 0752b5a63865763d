"""Fashion-MNIST and LeNet-5 (configs/fashion_mnist_lenet.py) on the heterogeneous cluster
of configs/oscars_heterogeneous.py: 8 workers at speeds 1,1,1,1,0.5,0.5,0.25,0.25.

  python -m experiments.train --config configs/fashion_mnist_lenet_heterogeneous.py:oscars \\
      --workdir runs/fm_oscars
"""

from configs import fashion_mnist_lenet, oscars_heterogeneous


def get_config(arg: str = "oscars"):
  config = fashion_mnist_lenet.get_config(arg)
  config.cluster.speeds = oscars_heterogeneous.SPEEDS
  return config
