"""The largest stable step size of a strategy, found by running it on a noiseless quadratic.

Every worker holds the same 1-D quadratic f(x) = h x^2 / 2 (h = 1): the gradient at
x is h x, with no noise and no disagreement between workers, so what is left is the
strategy's own dynamics (delays, smoothing, corrections) and the inner optimizer's.
The iteration is linear; it is stable when its spectral radius is below 1. This
harness does not compute the radius: it runs the optax transformation itself, on the
shared harness (`strategies.worker_ticks`), and calls a step size stable when the iterate has not
grown over the second half of the run. Bisection on the step size then finds the
largest stable eta * h, to a relative precision of 0.1%.

Known values (heavy ball, momentum mu): synchronous 2 (1 + mu) (3.8 at mu = 0.9); the
gradient one step late, x_{t+1} = x_t + mu (x_t - x_{t-1}) - eta h x_{t-1}: 1 - mu
(0.1 at mu = 0.9, 1 for plain SGD).
"""

import functools
from typing import Any

import jax
import jax.numpy as jnp
import numpy as np
import optax

from odsgd_jax import cluster, strategies


@functools.lru_cache(maxsize=None)
def _runner(strategy: str, options: tuple[tuple[str, Any], ...], momentum: float,
            num_workers: int, steps: int):
  """A jitted function of the step size: (|x| at steps / 2, |x| at the end)."""

  def run(learning_rate):
    inner = optax.sgd(learning_rate, momentum=momentum or None)
    given = dict(options)
    spec = strategies.resolve(strategy, given, given.pop("inner_momentum", None))
    tx = spec.make(inner, strategies.AXIS)
    schedule = cluster.synchronous_schedule(0, num_workers)
    # the gradient of h x^2 / 2, h = 1, on every worker and tick
    tick = strategies.worker_ticks(tx, lambda x, t, worker: (0.5 * jnp.sum(x * x), x))
    x = jnp.ones((num_workers, 1), jnp.float32)

    def size(x, state):
      model = spec.definition.model_params(x, state)
      return jnp.maximum(jnp.max(jnp.abs(x)), jnp.max(jnp.abs(model)))

    def body(carry, _):
      x, state = carry
      x, state = tick(x, state, 0, schedule)
      return (x, state), size(x, state)

    _, sizes = jax.lax.scan(body, (x, strategies.init_workers(tx, x)), None, length=steps)
    return sizes[steps // 2 - 1], sizes[-1]

  return jax.jit(run)


def is_stable(strategy: str, options: dict[str, Any], learning_rate: float, momentum: float,
              num_workers: int = 2, steps: int = 4000) -> bool:
  """Whether the iterate (workers' parameters and the strategy's model) stops growing."""
  middle, end = _runner(strategy, tuple(sorted(options.items())), momentum, num_workers,
                        steps)(jnp.asarray(learning_rate, jnp.float32))
  middle, end = float(middle), float(end)
  return bool(np.isfinite(end) and end <= max(middle, 1e-30))


def largest_stable_step(strategy: str, options: dict[str, Any] | None = None,
                        momentum: float = 0.9, num_workers: int = 2, low: float = 1e-3,
                        high: float = 10.0, precision: float = 1e-3) -> float:
  """The largest eta * h (h = 1) at which `strategy` is stable, by bisection.

  Assumes stability below the threshold and instability above it (one crossing in
  [low, high]); returns `low` if even `low` is unstable and `high` if `high` is stable.
  """
  options = options or {}
  if not is_stable(strategy, options, low, momentum, num_workers):
    return low
  if is_stable(strategy, options, high, momentum, num_workers):
    return high
  while high / low > 1 + precision:
    middle = float(np.sqrt(low * high))
    if is_stable(strategy, options, middle, momentum, num_workers):
      low = middle
    else:
      high = middle
  return low
