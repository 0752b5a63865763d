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

_LAYERS = (nn.Conv, nn.Dense, nn.BatchNorm)


@functools.lru_cache(maxsize=None)
def gradient_profile(name: str, input_shape: tuple[int, ...], num_classes: int = 1000,
                     bytes_per_value: int = 4, **options) -> tuple[tuple[float, float], ...]:
  """((bytes, ready), ...) per layer with parameters, last layer first: `bytes` of its
  gradients, `ready` the fraction of the backward pass done once they exist (the
  cumulative FLOP share of the layers from the top down to it; 1 for the first layer).

  Shapes only (`jax.eval_shape`): no parameters are materialized.
  """
  model = models.make_model(name, num_classes, **dict(options))
  calls: list[tuple[tuple[str, ...], float]] = []  # (module path, forward FLOPs), in order

  def record(next_fun, args, kwargs, context):
    out = next_fun(*args, **kwargs)
    module = context.module
    if isinstance(module, _LAYERS) and context.method_name == "__call__":
      flops = 0.0
      if isinstance(module, (nn.Conv, nn.Dense)):
        kernel = module.variables["params"]["kernel"]
        positions = math.prod(out.shape[1:-1]) if out.ndim > 2 else 1
        flops = 2.0 * math.prod(kernel.shape) * positions
      calls.append((tuple(module.scope.path), flops))
    return out

  def init(rng):
    with nn.intercept_methods(record):
      return model.init(rng, jnp.zeros((1, *input_shape), jnp.float32), train=False)

  variables = jax.eval_shape(init, jax.random.key(0))
  layers = []
  for path, flops in calls:
    node = variables["params"]
    for key in path:
      node = node[key]
    size = sum(math.prod(leaf.shape) for leaf in jax.tree.leaves(node)) * bytes_per_value
    layers.append((float(size), flops))
  total_flops = sum(flops for _, flops in layers) or 1.0
  profile, done = [], 0.0
  for size, flops in reversed(layers):
    done += flops
    profile.append((size, min(1.0, done / total_flops)))
  return tuple(profile)
