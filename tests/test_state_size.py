"""Strategy state, in model copies, is what docs/strategies.md documents (per worker)."""

import jax
import jax.numpy as jnp
import optax
import pytest

from odsgd_jax.models import make_model
from odsgd_jax.strategies import STRATEGIES, state_model_copies

# (strategy, options) -> copies with plain SGD inner; momentum adds one per inner state.
EXPECTED = [
    ("ssgd", {}, 0, "nothing: the inner state only"),
    ("asgd", {}, 1, "server W"),
    ("ssp", {"staleness": 2}, 1, "server W"),
    ("odsgd", {"local_lr": 0.1}, 2, "global W + pending gradient"),
    ("odsgd", {"local_lr": 0.1, "local_optimizer": "dcasgd"}, 2, "W_prev is W before update"),
    ("odsgd", {"local_lr": 0.1, "local_optimizer": "momentum"}, 3, "+ local momentum"),
    ("odsgd", {"local_lr": 0.1, "local_optimizer": "replay", "correction": "spike"}, 4,
     "+ spike's velocity and compensated velocity"),
    ("pseudo_sync", {}, 2, "pending, prediction S (of A and M only their sums per tensor)"),
    ("pseudo_sync", {"correction": "replay+spike"}, 5, "+ the model W + spike's two velocities"),
    ("asgd", {"correction": "predict+spike"}, 3, "+ spike's two velocities"),
    ("local_sgd", {"period": 4}, 1, "anchor"),
    ("local_sgd", {"period": 4, "outer": optax.sgd(0.7, momentum=0.9)}, 2, "+ outer momentum"),
    ("oscars", {"period": 4}, 1, "anchor"),
]


def _params():
  model = make_model("cnn1d", 10)
  return jax.eval_shape(lambda: model.init(jax.random.key(0), jnp.zeros((1, 40)),
                                           train=False))["params"]


def test_every_strategy_is_measured():
  assert {name for name, *_ in EXPECTED} == set(STRATEGIES)


@pytest.mark.parametrize("name,options,copies,why", EXPECTED)
@pytest.mark.parametrize("momentum", [0.0, 0.9])
def test_state_size_in_model_copies(name, options, copies, why, momentum):
  params = _params()
  inner = optax.sgd(0.1, momentum=momentum or None)
  tx = STRATEGIES[name].make(inner, axis_name="workers", **options)
  expected = copies + (1 if momentum else 0)
  measured = state_model_copies(jax.eval_shape(tx.init, params), params)
  assert measured == pytest.approx(expected, abs=0.01), why
