"""Checks every registered strategy must pass (docs/DESIGN.md "Checks").

Strategies run once per worker on the shared harness (`strategies.worker_ticks`), with the first
options each declares (`StrategyDef.examples`); the cluster schedule is the homogeneous
default. Every registered strategy is checked, a test's own included.
"""

import jax
import jax.numpy as jnp
import numpy as np
import optax
import pytest

from odsgd_jax.cluster import synchronous_schedule
from odsgd_jax.strategies import AXIS, STRATEGIES, init_workers, worker_ticks

NUM_WORKERS = 4


def _make(name, inner):
  """The strategy with the first options it declares as an example (`StrategyDef.examples`)."""
  return STRATEGIES[name].make(inner, axis_name=AXIS, **STRATEGIES[name].examples[0].options)


def _run(tx, params_N, grad_fn, num_steps):
  """`num_steps` ticks of `tx` on every worker (`strategies.worker_ticks`); returns
  per-worker params and state."""
  step = jax.jit(worker_ticks(tx, lambda x, t, worker: (0.0, grad_fn(x, worker))))
  opt_state = init_workers(tx, params_N)
  for t in range(num_steps):
    params_N, opt_state = step(params_N, opt_state, t, synchronous_schedule(t, NUM_WORKERS))
  return params_N, opt_state


TARGET = jnp.asarray([1.0, -2.0, 0.5])
CURVATURE = jnp.asarray([0.5, 1.0, 1.5, 2.0])  # per worker: different data, same minimum


def _quadratic_grad(x, worker):
  """Gradient of worker i's loss a_i |x - c|^2 / 2."""
  return CURVATURE[worker] * (x - TARGET)


@pytest.mark.parametrize("name", sorted(STRATEGIES))
def test_converges_on_a_quadratic(name):
  tx = _make(name, optax.sgd(0.1, momentum=0.5))
  params_N, opt_state = _run(tx, jnp.zeros((NUM_WORKERS, 3)), _quadratic_grad, num_steps=600)
  model = STRATEGIES[name].model_params(params_N, opt_state)
  np.testing.assert_allclose(model, TARGET, atol=1e-3)


@pytest.mark.parametrize("name", sorted(STRATEGIES))
def test_state_types_are_stable_under_jit(name):
  tx = _make(name, optax.sgd(0.1, momentum=0.9))
  params_N = {"w": jnp.ones((NUM_WORKERS, 2, 3)), "b": jnp.zeros((NUM_WORKERS, 3))}
  initial = jax.vmap(tx.init)(params_N)
  _, final = _run(tx, params_N, lambda p, i: jax.tree.map(lambda x: x * (i + 1.0), p), 3)
  shape_dtype = lambda tree: jax.tree.map(lambda x: (x.shape, x.dtype, type(x)), tree)
  assert jax.tree.structure(final) == jax.tree.structure(initial)
  assert shape_dtype(final) == shape_dtype(initial)


@pytest.mark.parametrize("name", sorted(STRATEGIES))
def test_works_with_inject_hyperparams(name):
  inner = optax.inject_hyperparams(optax.sgd)(learning_rate=0.1, momentum=0.5)
  tx = _make(name, inner)
  params_N, opt_state = _run(tx, jnp.zeros((NUM_WORKERS, 3)), _quadratic_grad, num_steps=600)
  np.testing.assert_allclose(STRATEGIES[name].model_params(params_N, opt_state), TARGET,
                             atol=1e-3)
  # the learning rate stays reachable (and changeable) inside the strategy state
  learning_rates = [s.hyperparams["learning_rate"]
                    for s in jax.tree.leaves(opt_state, is_leaf=lambda s: hasattr(s, "hyperparams"))
                    if hasattr(s, "hyperparams")]
  assert learning_rates and all(np.allclose(lr, 0.1) for lr in learning_rates)


@pytest.mark.parametrize("name", sorted(STRATEGIES))
def test_bfloat16_params_keep_their_dtype(name):
  tx = _make(name, optax.sgd(0.1, momentum=0.9))
  params_N = jnp.ones((NUM_WORKERS, 4), jnp.bfloat16)
  final, _ = _run(tx, params_N, lambda x, i: x * (i + 1), num_steps=3)
  assert final.dtype == jnp.bfloat16
  assert bool(jnp.all(jnp.isfinite(final)))
