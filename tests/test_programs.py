"""The train step's speed seam (odsgd_jax/train/_programs.py): the tick from which a
strategy's tick conditions are decided, read off the strategy; and a delayed strategy's
messages held as one vector between ticks (`comm.hold`), with the same states as held as
trees. (Donation: tests/test_train.py;
the settled ticks' program against the general one: tests/test_identities.py.)"""

import jax
import jax.numpy as jnp
import numpy as np
import optax
import pytest

from odsgd_jax import comm, parallel
from odsgd_jax.cluster import synchronous_schedule
from odsgd_jax.models import make_model
from odsgd_jax.strategies import get_strategy
from odsgd_jax.train import make_train_step
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
  held = comm.hold(TREE)
  assert isinstance(held, comm.Held)
  assert held.vector.shape == (512 + 10,)  # bias, then kernel: the tree's order
  assert len(held.large) == 1 and held.large[0] is TREE["b"]
  back = held.tree()
  assert jax.tree.structure(back) == jax.tree.structure(TREE)
  for got, want in zip(jax.tree.leaves(back), jax.tree.leaves(TREE), strict=True):
    np.testing.assert_array_equal(got, want)
  stacked = jax.vmap(comm.hold)(jax.tree.map(lambda x: jnp.stack([x, -x]), TREE))
  assert stacked.vector.shape == (2, 522)  # the workers' axis first, as in a train state
  assert_trees_equal(comm.as_trees({"m": stacked}),
                     {"m": jax.tree.map(lambda x: jnp.stack([x, -x]), TREE)})
  assert_trees_equal(comm.held_like(comm.as_trees({"m": stacked}), {"m": stacked}),
                     {"m": stacked})


def test_a_message_is_held_as_one_vector_only_for_a_plain_exchange_of_one_dtype():
  assert isinstance(comm.hold(TREE), comm.Held)
  assert not isinstance(comm.hold(TREE, comm.parse_communication("topk:0.1")), comm.Held)
  assert not isinstance(comm.hold({**TREE, "c": jnp.zeros(3, jnp.bfloat16)}), comm.Held)
  assert isinstance(comm.hold({**TREE, "c": jnp.zeros((256, 256), jnp.bfloat16)}),
                    comm.Held)  # large: apart
  assert not isinstance(comm.hold({"b": TREE["b"]}), comm.Held)  # nothing small to pack


def test_a_held_message_travels_only_as_a_plain_mean():
  """Held with one exchange's communication and sent through another's is an error, not a
  silent per-tensor mean."""
  held = comm.hold(TREE)
  with pytest.raises(TypeError, match="plain mean only"):
    jax.vmap(lambda x: comm.exchange(None, x, None, "w", gather=True), axis_name="w")(
        jax.tree.map(lambda x: x[None], held))


@pytest.mark.parametrize("name,options", [("odsgd", {"local_lr": 0.1, "warmup_steps": 0}),
                                          ("pseudo_sync", {})])
@pytest.mark.parametrize("compression", [None, "topk:0.5"])
@pytest.mark.parametrize("num_devices", [pytest.param(2, marks=pytest.mark.devices(2)), 1])
def test_held_messages_stay_packed_and_holding_them_as_trees_changes_no_number(
    name, options, compression, num_devices, monkeypatch):
  """Three ticks of 2 workers: the state holds this tick's gradients as one vector (the
  large kernel apart) exactly when the exchange is plain, and the states are those of the
  step that holds them as trees (no tensor small enough to pack): bit for bit with one
  worker per device; with both workers on one device, where their mean is a sum over the
  vmapped axis that XLA orders differently for one vector and for separate tensors, to
  float32 rounding."""
  steps, states = {}, {}
  for held in (True, False):
    monkeypatch.setattr(comm._held, "SMALL_TENSOR_BYTES", 64 * 1024 if held else 0)
    steps[held] = _train_step(name, {**options, "compression": compression},
                              num_devices=num_devices)[0]
    states[held] = steps[held].init_state((40,), seed=0)
  worker_mesh = steps[True].setup.worker_mesh
  assert worker_mesh.num_devices == num_devices
  same = (assert_trees_equal if num_devices == 2
          else lambda a, b: assert_trees_close(a, b, rtol=1e-5, atol=1e-7))
  rng = np.random.default_rng(0)
  for tick in range(3):
    batch = random_batch(worker_mesh, rng)
    for held in (True, False):  # each program traces under its own threshold
      monkeypatch.setattr(comm._held, "SMALL_TENSOR_BYTES", 64 * 1024 if held else 0)
      states[held] = steps[held](states[held], batch, synchronous_schedule(tick, 2), tick)[0]
    pending = states[True].opt_state.pending_grads
    assert isinstance(pending, comm.Held) == (compression is None)
    assert not isinstance(states[False].opt_state.pending_grads, comm.Held)
    if compression is None:  # Dense_0's kernel (80 KiB) apart; the rest in one vector
      assert pending.vector.shape == (2, 512 + 5120 + 10)  # bias, kernel, bias
      same(pending.tree(), states[False].opt_state.pending_grads)
  same(states[True].params, states[False].params)
  same(states[True].opt_state.inner_state, states[False].opt_state.inner_state)
