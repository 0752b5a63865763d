"""A model's gradients in the order its backward pass produces them.

The simulated clock packs gradients into all-reduce buckets in this order (as PyTorch
DDP and Horovod do) and starts a bucket once the backward pass has produced its last
gradient. Sizes come from the flax model's parameters; when a layer's gradient is ready
comes from the layers' forward FLOPs (a layer's backward pass costs about twice its
forward one, so its share of the backward pass is its share of the FLOPs).
"""

import functools
import math

import flax.linen as nn
import jax
import jax.numpy as jnp

from odsgd_jax import models

_LAYERS = (nn.Conv, nn.Dense, nn.DenseGeneral, nn.BatchNorm, nn.LayerNorm, nn.Embed)
_MATMULS = (nn.Conv, nn.Dense, nn.DenseGeneral)


@functools.lru_cache(maxsize=None)
def gradient_profile(name: str, input_shape: tuple[int, ...], num_classes: int = 1000,
                     bytes_per_value: int = 4, **options) -> tuple[tuple[float, float], ...]:
  """((bytes, ready), ...) per layer with parameters, last layer first: `bytes` of its
  gradients, `ready` the fraction of the backward pass done once they exist (the
  cumulative FLOP share of the layers from the top down to it; 1 for the first layer).

  Shapes only (`jax.eval_shape`): no parameters are materialized.
  """
  model = models.make_model(name, num_classes, **dict(options))
  # (module path, forward FLOPs, whether the call's parameters are counted there), in order
  calls: list[tuple[tuple[str, ...], float, bool]] = []

  def record(next_fun, args, kwargs, context):
    out = next_fun(*args, **kwargs)
    module = context.module
    if not isinstance(module, _LAYERS):
      return out
    path = tuple(module.scope.path)
    if context.method_name == "__call__":
      flops = 0.0
      if isinstance(module, _MATMULS):
        kernel = module.variables["params"]["kernel"]
        features = math.prod(module.features if isinstance(module.features, tuple)
                             else (module.features,))
        positions = out.size / out.shape[0] / features  # per example
        flops = 2.0 * math.prod(kernel.shape) * positions
      calls.append((path, flops, True))
    elif isinstance(module, nn.Embed) and context.method_name == "attend":
      # a tied output projection: its FLOPs come first in the backward pass, but the
      # embedding's gradient is complete only with the lookup's, at the end
      calls.append((path, 2.0 * out.size / out.shape[0] * module.features, False))
    return out

  def init(rng):
    with nn.intercept_methods(record):
      return model.init(rng, jnp.zeros((1, *input_shape), jnp.float32), train=False)

  variables = jax.eval_shape(init, jax.random.key(0))
  layers = []
  for path, flops, owns in calls:
    node = variables["params"]
    for key in path:
      node = node[key]
    size = sum(math.prod(leaf.shape) for leaf in jax.tree.leaves(node)) * bytes_per_value
    layers.append((float(size) if owns else 0.0, flops))
  total_flops = sum(flops for _, flops in layers) or 1.0
  profile, done = [], 0.0
  for size, flops in reversed(layers):
    done += flops
    profile.append((size, min(1.0, done / total_flops)))
  return tuple(profile)
