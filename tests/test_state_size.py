"""Strategy state, in model copies, is what docs/strategies.md documents (per worker)."""

import jax
import jax.numpy as jnp
import optax
import pytest

from odsgd_jax.models import make_model
from odsgd_jax.strategies import STRATEGIES, state_model_copies

# (strategy, options, copies, why) from each strategy's examples (`StrategyDef.examples`):
# copies with a plain SGD inner optimizer; momentum adds one per inner state.
EXPECTED = [(name, example.options, example.state_copies, example.why)
            for name, definition in STRATEGIES.items() for example in definition.examples]


def _params():
  model = make_model("cnn1d", 10)
  return jax.eval_shape(lambda: model.init(jax.random.key(0), jnp.zeros((1, 40)),
                                           train=False))["params"]


@pytest.mark.parametrize("name,options,copies,why", EXPECTED,
                         ids=[f"{name}-{i}" for i, (name, *_) in enumerate(EXPECTED)])
@pytest.mark.parametrize("momentum", [0.0, 0.9])
def test_state_size_in_model_copies(name, options, copies, why, momentum):
  params = _params()
  inner = optax.sgd(0.1, momentum=momentum or None)
  tx = STRATEGIES[name].make(inner, axis_name="workers", **options)
  expected = copies + (1 if momentum else 0)
  measured = state_model_copies(jax.eval_shape(tx.init, params), params)
  assert measured == pytest.approx(expected, abs=0.01), why
