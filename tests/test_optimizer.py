"""The inner optimizers (odsgd_jax/train/_optimizer.py) against NumPy."""

import jax.numpy as jnp
import numpy as np
import optax

from odsgd_jax.train import base_config
from odsgd_jax.train._optimizer import make_inner_optimizer


def test_adamw_is_optaxs_with_decoupled_decay_and_global_norm_clipping():
  """optimizer.name="adamw": optax.adamw's update (the decay added to Adam's step, both
  scaled by the rate), after clipping the gradient to `clip_norm`, checked against NumPy."""
  cfg = base_config().optimizer
  cfg.name, cfg.weight_decay, cfg.clip_norm, cfg.b2 = "adamw", 0.1, 1.0, 0.95
  rate = 0.01
  tx = make_inner_optimizer(cfg, optax.constant_schedule(rate))
  params = {"w": jnp.array([1.0, -2.0, 3.0])}
  grads = [np.array([3.0, 4.0, 0.0]), np.array([0.1, -0.2, 0.3])]
  state = tx.init(params)
  m = v = np.zeros(3)
  p = np.array([1.0, -2.0, 3.0])
  for t, g in enumerate(grads, start=1):
    updates, state = tx.update({"w": jnp.asarray(g)}, state, params)
    params = optax.apply_updates(params, updates)
    g = g * min(1.0, 1.0 / np.linalg.norm(g))  # clipped to norm 1
    m, v = 0.9 * m + 0.1 * g, 0.95 * v + 0.05 * g * g
    step = (m / (1 - 0.9**t)) / (np.sqrt(v / (1 - 0.95**t)) + 1e-8)
    p = p - rate * (step + 0.1 * p)
    np.testing.assert_allclose(params["w"], p, rtol=1e-5)
