"""How much memory a strategy's state takes, in copies of the model."""

from typing import Any

import jax
import jax.numpy as jnp
import numpy as np


def _float_bytes(tree: Any) -> int:
  return sum(int(np.prod(x.shape)) * jnp.dtype(x.dtype).itemsize
             for x in jax.tree.leaves(tree) if jnp.issubdtype(x.dtype, jnp.floating))


def state_model_copies(opt_state: Any, params: Any) -> float:
  """Floating-point bytes of one worker's strategy state, in units of the model's bytes.

  Counters and flags (integer leaves) are left out. Works on arrays or on
  `jax.ShapeDtypeStruct`s, e.g. `jax.eval_shape(tx.init, params)`.
  """
  return _float_bytes(opt_state) / _float_bytes(params)
