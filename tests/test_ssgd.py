"""ssgd through the worker mesh equals single-device optax on the global batch."""

import jax
import jax.numpy as jnp
import numpy as np
import optax
import pytest

from odsgd_jax import parallel
from odsgd_jax.cluster import synchronous_schedule
from odsgd_jax.models import make_model
from odsgd_jax.strategies import ssgd
from odsgd_jax.train import init_state, make_train_step
from tests.helpers import assert_trees_close

NUM_STEPS = 5
BATCH_PER_WORKER = 4


def _batches(num_workers, seed=0):
  rng = np.random.default_rng(seed)
  return [
      {"image": rng.normal(size=(num_workers, BATCH_PER_WORKER, 40)).astype(np.float32),
       "label": rng.integers(0, 10, size=(num_workers, BATCH_PER_WORKER)).astype(np.int32)}
      for _ in range(NUM_STEPS)
  ]


def _single_device_reference(model, params, batches, inner):
  """Plain optax on one device, on the concatenation of the workers' batches."""
  opt_state = inner.init(params)

  @jax.jit
  def step(params, opt_state, images, labels):
    def loss_fn(p):
      logits = model.apply({"params": p}, images, train=True)
      return optax.softmax_cross_entropy_with_integer_labels(logits, labels).mean()
    grads = jax.grad(loss_fn)(params)
    updates, opt_state = inner.update(grads, opt_state, params)
    return optax.apply_updates(params, updates), opt_state

  for batch in batches:
    images = batch["image"].reshape(-1, *batch["image"].shape[2:])
    params, opt_state = step(params, opt_state, images, batch["label"].reshape(-1))
  return params


@pytest.mark.parametrize("num_workers,num_devices", [
    pytest.param(8, 8, marks=pytest.mark.devices(8)),
    pytest.param(16, 8, marks=pytest.mark.devices(8)), (8, 1)])
def test_ssgd_equals_single_device_optax_on_global_batch(num_workers, num_devices):
  model = make_model("mlp", 10, hidden_sizes=(32,))
  inner = optax.sgd(0.1, momentum=0.9)
  tx = ssgd(inner, axis_name=parallel.WORKER_AXES)
  worker_mesh = parallel.make_worker_mesh(num_workers, num_devices)
  state = init_state(model, tx, worker_mesh, (40,), seed=0)
  initial_params = jax.tree.map(lambda x: np.asarray(x[0]), state.params)

  train_step = make_train_step(model, tx, worker_mesh)
  batches = _batches(num_workers)
  for step, batch in enumerate(batches):
    batch = jax.device_put(batch, worker_mesh.sharding(parallel.BATCH))
    state, _ = train_step(state, batch, synchronous_schedule(step, num_workers))

  expected = _single_device_reference(model, initial_params, batches, inner)
  worker_params = jax.device_get(state.params)
  for worker in range(num_workers):
    assert_trees_close(jax.tree.map(lambda x, w=worker: x[w], worker_params), expected,
                       rtol=1e-5, atol=1e-6)


def test_ssgd_replicas_stay_identical():
  num_workers = 8
  model = make_model("cnn1d", 10)
  tx = ssgd(optax.sgd(0.05, momentum=0.9), axis_name=parallel.WORKER_AXES)
  worker_mesh = parallel.make_worker_mesh(num_workers)
  state = init_state(model, tx, worker_mesh, (40,), seed=1)
  train_step = make_train_step(model, tx, worker_mesh)
  for step, batch in enumerate(_batches(num_workers, seed=1)):
    batch = jax.device_put(batch, worker_mesh.sharding(parallel.BATCH))
    state, _ = train_step(state, batch, synchronous_schedule(step, num_workers))
  for leaf in jax.tree.leaves(jax.device_get((state.params, state.opt_state))):
    if np.ndim(leaf):
      for worker in range(1, num_workers):
        np.testing.assert_array_equal(leaf[worker], leaf[0])


@pytest.mark.devices(8)
def test_ssgd_averages_over_vmap_and_mesh_axes_alike():
  """The mean over ("workers", "local") is the mean over all logical workers."""
  worker_mesh = parallel.make_worker_mesh(16, 8)
  grads = jnp.arange(16.0)[:, None] ** 2
  tx = ssgd(optax.sgd(1.0), axis_name=parallel.WORKER_AXES)

  def worker(g):
    updates, _ = tx.update(g, tx.init(g), g)
    return updates

  run = jax.jit(worker_mesh.per_worker(worker, in_layouts=(parallel.PER_WORKER,)))
  updates = run(jax.device_put(grads, worker_mesh.sharding(parallel.PER_WORKER)))
  np.testing.assert_allclose(updates, -np.full((16, 1), np.mean(np.arange(16.0) ** 2)))
