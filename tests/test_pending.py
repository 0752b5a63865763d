"""The one-step-delay strategies' pending gradients: small tensors packed into one vector
when the exchange is uncompressed, given back exactly; the tree kept otherwise."""

import jax
import jax.numpy as jnp
import numpy as np
import optax
import pytest

from odsgd_jax import comm, parallel
from odsgd_jax.strategies import get_strategy
from odsgd_jax.strategies import _pending as pending

# 2 KiB, 256 KiB (large) and 40 B tensors.
TREE = {"a": {"kernel": jnp.arange(512.0).reshape(16, 32), "bias": jnp.arange(10.0)},
        "b": jnp.arange(64 * 1024.0).reshape(256, 256)}


def test_small_tensors_become_one_vector_and_come_back_exactly():
  packed = pending.pack(TREE, True)
  assert packed.small.shape == (512 + 10,)  # bias, then kernel: the tree's order
  assert len(packed.large) == 1 and packed.large[0] is TREE["b"]
  back = pending.unpack(packed, TREE, True)
  assert jax.tree.structure(back) == jax.tree.structure(TREE)
  for got, want in zip(jax.tree.leaves(back), jax.tree.leaves(TREE), strict=True):
    np.testing.assert_array_equal(got, want)


def test_packing_needs_a_plain_exchange_and_one_dtype_among_the_small_tensors():
  assert pending.packs(None, TREE)
  assert not pending.packs(comm.parse_communication("topk:0.1"), TREE)
  mixed = {**TREE, "c": jnp.zeros(3, jnp.bfloat16)}
  assert not pending.packs(None, mixed)
  assert pending.packs(None, {**TREE, "c": jnp.zeros((256, 256), jnp.bfloat16)})  # large
  assert not pending.packs(None, {"b": TREE["b"]})  # nothing small to pack
  assert pending.pack(TREE, False) is TREE and pending.unpack(TREE, TREE, False) is TREE


@pytest.mark.parametrize("name,options", [("odsgd", {"local_lr": 0.1, "warmup_steps": 0}),
                                          ("pseudo_sync", {})])
@pytest.mark.parametrize("compression", [None, "topk:0.5"])
def test_the_state_keeps_the_layout_and_the_step_what_it_was_sent(name, options, compression):
  """Three ticks on 2 workers (vmap over the worker axis): the state's pending gradients
  are this tick's gradients, packed exactly when the exchange is plain."""
  tx = get_strategy(name).make(optax.sgd(0.1, momentum=0.9), axis_name=parallel.WORKER_AXES[0],
                               compression=compression, **options)
  params = jax.tree.map(lambda x: jnp.stack([x, x]), TREE)
  state = jax.vmap(tx.init)(params)
  step = jax.vmap(lambda g, s, p: tx.update(g, s, p), axis_name=parallel.WORKER_AXES[0])
  packed = compression is None
  for tick in range(3):
    grads = jax.tree.map(lambda x, t=tick: jnp.stack([x * (t + 1), -x]) / x.size, TREE)
    _, state = step(grads, state, params)
    assert isinstance(state.pending_grads, pending.Packed) == packed
    kept = jax.vmap(lambda p: pending.unpack(p, TREE, packed))(state.pending_grads)
    for got, want in zip(jax.tree.leaves(kept), jax.tree.leaves(grads), strict=True):
      np.testing.assert_array_equal(got, want)
