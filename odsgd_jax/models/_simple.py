"""Small models for the offline data sets: MLP, CNN1D (mnist1d) and LeNet-5."""

from typing import Sequence

import flax.linen as nn


class MLP(nn.Module):
  """A ReLU multilayer perceptron on the flattened input."""

  num_classes: int
  hidden_sizes: Sequence[int] = (256, 256)
  dropout_rate: float = 0.0

  @nn.compact
  def __call__(self, x, *, train: bool):
    x = x.reshape((x.shape[0], -1))
    for width in self.hidden_sizes:
      x = nn.relu(nn.Dense(width)(x))
      x = nn.Dropout(self.dropout_rate, deterministic=not train)(x)
    return nn.Dense(self.num_classes)(x)


class CNN1D(nn.Module):
  """The 1-D convnet of the mnist1d paper (Greydanus 2020): three strided convs.

  Input (batch, length) or (batch, length, 1). Kernel 5, stride 2, padding 1 and
  25 channels as in the paper's `ConvBase`.
  """

  num_classes: int
  channels: int = 25
  dropout_rate: float = 0.0

  @nn.compact
  def __call__(self, x, *, train: bool):
    if x.ndim == 2:
      x = x[..., None]
    for _ in range(3):
      x = nn.relu(nn.Conv(self.channels, (5,), strides=(2,), padding=((1, 1),))(x))
    x = x.reshape((x.shape[0], -1))
    x = nn.Dropout(self.dropout_rate, deterministic=not train)(x)
    return nn.Dense(self.num_classes)(x)


class LeNet5(nn.Module):
  """LeNet-5 (LeCun et al. 1998) with ReLU and max pooling.

  Both convolutions use SAME padding so that the same network fits 28x28 MNIST
  and 8x8 scikit-learn digits (the original pads MNIST to 32x32 instead).
  """

  num_classes: int

  @nn.compact
  def __call__(self, x, *, train: bool):
    del train  # no dropout or normalization
    for features in (6, 16):
      x = nn.relu(nn.Conv(features, (5, 5), padding="SAME")(x))
      x = nn.max_pool(x, (2, 2), strides=(2, 2))
    x = x.reshape((x.shape[0], -1))
    x = nn.relu(nn.Dense(120)(x))
    x = nn.relu(nn.Dense(84)(x))
    return nn.Dense(self.num_classes)(x)


