"""The train step's speed seam (odsgd_jax/train/_programs.py): the tick from which a
strategy's tick conditions are decided, read off the strategy; messages held as one vector
between ticks; each switch off gives the same states. (Donation: tests/test_train.py;
the settled ticks' program against the general one: tests/test_identities.py.)"""

import jax
import jax.numpy as jnp
import numpy as np
import optax
import pytest

from odsgd_jax import parallel
from odsgd_jax.cluster import synchronous_schedule
from odsgd_jax.models import make_model
from odsgd_jax.strategies import get_strategy
from odsgd_jax.train import make_train_step
from odsgd_jax.train._programs import PackedTensors, _pack, _packs, _unpack
from tests.helpers import assert_trees_close, assert_trees_equal, random_batch

# 2 KiB, 256 KiB (large) and 40 B tensors.
TREE = {"a": {"kernel": jnp.arange(512.0).reshape(16, 32), "bias": jnp.arange(10.0)},
        "b": jnp.arange(64 * 1024.0).reshape(256, 256)}


def _train_step(name, options, model=None, num_workers=2, num_devices=0, **seam):
  """The train step of 2 workers, on as many devices as they fill evenly (0) or on
  `num_devices`."""
  model = model or make_model("mlp", 10, hidden_sizes=(512,))
  tx = get_strategy(name).make(optax.sgd(0.1, momentum=0.9), axis_name=parallel.WORKER_AXES,
                               **options)
  worker_mesh = parallel.make_worker_mesh(num_workers, num_devices)
  return make_train_step(model, tx, worker_mesh, get_strategy(name), **seam), worker_mesh


@pytest.mark.parametrize("name,options,tick", [
    ("odsgd", {"local_lr": 0.1, "warmup_steps": 7}, 8),  # after the first delayed tick
    ("odsgd", {"local_lr": 0.1, "warmup_steps": 0}, 1),
    ("pseudo_sync", {}, 2),
    ("ssgd", {}, 0), ("local_sgd", {"period": 3}, 0), ("asgd", {}, 0),
])
def test_the_settled_tick_is_read_off_the_strategy_every_time(name, options, tick):
  """Traced again (a second train step of the same transformation), the strategy's
  conditions are seen again: `lax.cond` keeps the traces of branches it has seen."""
  first, _ = _train_step(name, options)
  second, _ = _train_step(name, options)
  assert first.settled_from == second.settled_from == tick


def test_small_tensors_become_one_vector_and_come_back_exactly():
  packed = _pack(TREE)
  assert packed.small.shape == (512 + 10,)  # bias, then kernel: the tree's order
  assert len(packed.large) == 1 and packed.large[0] is TREE["b"]
  back = _unpack(packed, TREE)
  assert jax.tree.structure(back) == jax.tree.structure(TREE)
  for got, want in zip(jax.tree.leaves(back), jax.tree.leaves(TREE), strict=True):
    np.testing.assert_array_equal(got, want)


def test_packing_needs_a_plain_exchange_and_one_dtype_among_the_small_tensors():
  plain, compressed = get_strategy("odsgd").make(
      optax.sgd(0.1), axis_name="w", local_lr=0.1), get_strategy("odsgd").make(
          optax.sgd(0.1), axis_name="w", local_lr=0.1, compression="topk:0.1")
  assert _packs(TREE, plain.init(TREE))
  assert not _packs(TREE, compressed.init(TREE))
  assert not _packs({**TREE, "c": jnp.zeros(3, jnp.bfloat16)}, plain.init(TREE))
  assert _packs({**TREE, "c": jnp.zeros((256, 256), jnp.bfloat16)}, plain.init(TREE))  # large
  assert not _packs({"b": TREE["b"]}, plain.init(TREE))  # nothing small to pack


@pytest.mark.parametrize("name,options", [("odsgd", {"local_lr": 0.1, "warmup_steps": 0}),
                                          ("pseudo_sync", {})])
@pytest.mark.parametrize("compression", [None, "topk:0.5"])
@pytest.mark.parametrize("num_devices", [pytest.param(2, marks=pytest.mark.devices(2)), 1])
def test_held_messages_stay_packed_and_switching_it_off_changes_no_number(name, options,
                                                                         compression,
                                                                         num_devices):
  """Three ticks of 2 workers: the state holds this tick's gradients as one vector (the
  large kernel apart) exactly when the exchange is plain, and the states are those of the
  step that keeps the tree: bit for bit with one worker per device; with both workers on
  one device, where their mean is a sum over the vmapped axis that XLA orders differently
  for one vector and for separate tensors, to float32 rounding."""
  steps = {held: _train_step(name, {**options, "compression": compression},
                             num_devices=num_devices, hold_messages=held)[0]
           for held in (True, False)}
  worker_mesh = steps[True].setup.worker_mesh
  assert worker_mesh.num_devices == num_devices
  same = (assert_trees_equal if num_devices == 2
          else lambda a, b: assert_trees_close(a, b, rtol=1e-5, atol=1e-7))
  states = {held: step.init_state((40,), seed=0) for held, step in steps.items()}
  rng = np.random.default_rng(0)
  for tick in range(3):
    batch = random_batch(worker_mesh, rng)
    states = {held: step(states[held], batch, synchronous_schedule(tick, 2), tick)[0]
              for held, step in steps.items()}
    pending = states[True].opt_state.pending_grads
    assert isinstance(pending, PackedTensors) == (compression is None)
    assert not isinstance(states[False].opt_state.pending_grads, PackedTensors)
    if compression is None:  # Dense_0's kernel (80 KiB) apart; the rest in one vector
      assert pending.small.shape == (2, 512 + 5120 + 10)  # bias, kernel, bias
      like = jax.tree.map(lambda x: x[0], states[False].params)  # one worker's shapes
      tree = jax.vmap(_unpack, in_axes=(0, None))(pending, like)
      same(tree, states[False].opt_state.pending_grads)
  same(states[True].params, states[False].params)
  same(states[True].opt_state.inner_state, states[False].opt_state.inner_state)
