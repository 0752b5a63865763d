"""Exact math asks for the precision it needs; the model's matmuls keep the platform's.

At JAX's default precision a GPU multiplies float32 matrices in TF32 (a 10-bit mantissa):
right for a model's forward and backward pass, wrong where the project promises exact
results. Each such place is read off its lowered program (StableHLO: the same text on a
CPU as on a GPU), and every dot in it must be at HIGHEST precision."""

import re

import jax
import jax.numpy as jnp
import numpy as np
import optax
import pytest

from odsgd_jax import parallel
from odsgd_jax.cluster import synchronous_schedule
from odsgd_jax.comm import parse_compressor
from odsgd_jax.models import make_model
from odsgd_jax.strategies import STRATEGIES, get_strategy
from odsgd_jax.train import make_train_step
from tests.least_squares import BATCH, DIM, exact_loss_and_grad

_DOT = re.compile(r"stablehlo\.dot_general [^\n]*")
_PRECISION = re.compile(r"precision = \[(\w+), (\w+)\]")


def dot_precisions(lowered) -> list[str]:
  """The precision of every dot of a lowered program (DEFAULT where none is written)."""
  precisions = []
  for dot in _DOT.findall(lowered.as_text()):
    found = _PRECISION.search(dot)
    pair = found.groups() if found else ("DEFAULT", "DEFAULT")
    assert pair[0] == pair[1], dot
    precisions.append(pair[0])
  return precisions


def _workers(n, *shape):
  return jnp.asarray(np.random.default_rng(0).normal(size=(n, *shape)), jnp.float32)


def test_powersgd_multiplies_at_highest_precision():
  """Its projections and rebuilt matrix (a full-rank PowerSGD is the plain mean)."""
  compressor = parse_compressor("powersgd:2")
  tree = {"kernel": _workers(4, 10, 20), "bias": _workers(4, 20)}

  def exchange(tree):
    def worker(x):
      return compressor.exchange(x, compressor.init(x), jax.random.PRNGKey(0), "w")[0]
    return jax.vmap(worker, axis_name="w")(tree)

  precisions = dot_precisions(jax.jit(exchange).lower(tree))
  assert len(precisions) == 3 and set(precisions) == {"HIGHEST"}


@pytest.mark.parametrize("name", ["local_sgd", "oscars"])
def test_the_workers_weighted_mean_is_taken_at_highest_precision(name):
  """The model a local_sgd or oscars run evaluates and saves: the workers' parameters
  weighted by their local steps."""
  definition = STRATEGIES[name]
  tx = definition.make(optax.sgd(0.1), axis_name="w", **definition.examples[0].options)
  params = {"kernel": _workers(4, 3, 5), "bias": _workers(4, 5)}
  opt_state = jax.vmap(tx.init)(params)
  precisions = dot_precisions(jax.jit(definition.model_params).lower(params, opt_state))
  assert len(precisions) == 2 and set(precisions) == {"HIGHEST"}


def test_the_references_least_squares_multiplies_at_highest_precision():
  """The JAX side of the exact-math and identity tests (tests/least_squares.py)."""
  lowered = jax.jit(exact_loss_and_grad).lower(
      jnp.zeros((BATCH, DIM)), jnp.zeros(BATCH), jnp.zeros(DIM))
  precisions = dot_precisions(lowered)
  assert len(precisions) == 2 and set(precisions) == {"HIGHEST"}


def _train_step_dots(compression):
  model = make_model("mlp", 10, hidden_sizes=(32,))
  tx = get_strategy("ssgd").make(optax.sgd(0.1), axis_name=parallel.WORKER_AXES,
                                 compression=compression)
  worker_mesh = parallel.make_worker_mesh(2, 1)
  train_step = make_train_step(model, tx, worker_mesh, get_strategy("ssgd"))
  state = train_step.init_state((40,), seed=0)
  batch = jax.device_put({"image": np.zeros((2, 4, 40), np.float32),
                          "label": np.zeros((2, 4), np.int32)},
                         worker_mesh.sharding(parallel.BATCH))
  return dot_precisions(train_step.program().lower(state, batch, synchronous_schedule(0, 2)))


def test_the_models_matmuls_keep_the_platforms_default_beside_exact_ones():
  """In a train step with PowerSGD, the model's forward and backward dots stay at the
  default precision (fast on a GPU); PowerSGD's own are the only ones at HIGHEST."""
  plain = _train_step_dots(None)
  compressed = _train_step_dots("powersgd:2")
  assert plain and set(plain) == {"DEFAULT"}
  assert compressed.count("DEFAULT") == len(plain)
  assert compressed.count("HIGHEST") == 3 * 2  # three per matrix, two matrices (kernels)
