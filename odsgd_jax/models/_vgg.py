"""VGG-16 (Simonyan & Zisserman 2015, configuration D) for 224x224 inputs.

Here mainly as a workload of the simulated clock: ~90% of its 138M parameters are in
the three fully connected layers at the top, whose gradients the backward pass
produces first, so it shows why gradient readiness must follow the model's layers.
"""

import flax.linen as nn

# Output channels of each 3x3 convolution; "M": 2x2 max pooling.
_CONFIG_D = (64, 64, "M", 128, 128, "M", 256, 256, 256, "M", 512, 512, 512, "M",
             512, 512, 512, "M")


class VGG16(nn.Module):
  """13 3x3 convolutions in 5 blocks, then 4096-4096-classes fully connected layers."""

  num_classes: int
  dropout_rate: float = 0.5

  @nn.compact
  def __call__(self, x, *, train: bool):
    for width in _CONFIG_D:
      if width == "M":
        x = nn.max_pool(x, (2, 2), strides=(2, 2))
      else:
        x = nn.relu(nn.Conv(width, (3, 3))(x))
    x = x.reshape((x.shape[0], -1))
    for width in (4096, 4096):
      x = nn.relu(nn.Dense(width)(x))
      x = nn.Dropout(self.dropout_rate, deterministic=not train)(x)
    return nn.Dense(self.num_classes)(x)
