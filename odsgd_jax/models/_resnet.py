"""ResNets with BatchNorm: ResNet-20 for CIFAR-10 and ResNet-50 for ImageNet.

BatchNorm statistics live in the `batch_stats` collection. The runner keeps one
copy per worker (each worker normalizes with its own batch, as in the papers'
clusters); the evaluated model uses the mean of the workers' running statistics.
"""

import functools
from typing import Sequence

import flax.linen as nn
import jax.numpy as jnp


def _norm(train: bool):
  return functools.partial(
      nn.BatchNorm, use_running_average=not train, momentum=0.9, epsilon=1e-5
  )


class _BasicBlock(nn.Module):
  features: int
  strides: int

  @nn.compact
  def __call__(self, x, *, train: bool):
    norm = _norm(train)
    y = nn.Conv(self.features, (3, 3), (self.strides, self.strides), use_bias=False)(x)
    y = nn.relu(norm()(y))
    y = nn.Conv(self.features, (3, 3), use_bias=False)(y)
    y = norm(scale_init=nn.initializers.zeros)(y)
    if x.shape != y.shape:  # projection shortcut ("option B") when shape changes
      x = nn.Conv(self.features, (1, 1), (self.strides, self.strides), use_bias=False)(x)
      x = norm()(x)
    return nn.relu(x + y)


class _Bottleneck(nn.Module):
  features: int
  strides: int

  @nn.compact
  def __call__(self, x, *, train: bool):
    norm = _norm(train)
    y = nn.relu(norm()(nn.Conv(self.features, (1, 1), use_bias=False)(x)))
    y = nn.Conv(self.features, (3, 3), (self.strides, self.strides), use_bias=False)(y)
    y = nn.relu(norm()(y))
    y = nn.Conv(self.features * 4, (1, 1), use_bias=False)(y)
    y = norm(scale_init=nn.initializers.zeros)(y)
    if x.shape != y.shape:
      x = nn.Conv(self.features * 4, (1, 1), (self.strides, self.strides), use_bias=False)(x)
      x = norm()(x)
    return nn.relu(x + y)


class ResNet20(nn.Module):
  """ResNet-20 of He et al. 2016 for 32x32 inputs: 3 stages x 3 basic blocks."""

  num_classes: int
  widths: Sequence[int] = (16, 32, 64)
  blocks_per_stage: int = 3

  @nn.compact
  def __call__(self, x, *, train: bool):
    x = nn.Conv(self.widths[0], (3, 3), use_bias=False)(x)
    x = nn.relu(_norm(train)()(x))
    for stage, width in enumerate(self.widths):
      for block in range(self.blocks_per_stage):
        strides = 2 if stage > 0 and block == 0 else 1
        x = _BasicBlock(width, strides)(x, train=train)
    x = jnp.mean(x, axis=(1, 2))
    return nn.Dense(self.num_classes)(x)


class ResNet50(nn.Module):
  """ResNet-50 of He et al. 2016 for 224x224 inputs: bottleneck stages 3-4-6-3."""

  num_classes: int
  stage_sizes: Sequence[int] = (3, 4, 6, 3)

  @nn.compact
  def __call__(self, x, *, train: bool):
    x = nn.Conv(64, (7, 7), (2, 2), padding=((3, 3), (3, 3)), use_bias=False)(x)
    x = nn.relu(_norm(train)()(x))
    x = nn.max_pool(x, (3, 3), strides=(2, 2), padding="SAME")
    for stage, num_blocks in enumerate(self.stage_sizes):
      for block in range(num_blocks):
        strides = 2 if stage > 0 and block == 0 else 1
        x = _Bottleneck(64 * 2**stage, strides)(x, train=train)
    x = jnp.mean(x, axis=(1, 2))
    return nn.Dense(self.num_classes)(x)
