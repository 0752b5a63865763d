"""Identities between strategies (docs/DESIGN.md), and replicas staying identical."""

import jax
import jax.numpy as jnp
import numpy as np
import optax
import pytest

from odsgd_jax.cluster import synchronous_schedule
from odsgd_jax.strategies import AXIS, STRATEGIES, init_workers, worker_ticks

from tests import numpy_reference as ref
from tests.helpers import run_compiled_with
from tests.least_squares import (FEATURES, N, T, TARGETS, X0, exact_loss_and_grad,
                                 heterogeneous_schedules, homogeneous_schedules, numpy_grad,
                                 run_jax, settled_tick)

EXACT = 1e-6
INNERS = {"sgd": lambda: optax.sgd(0.1), "momentum": lambda: optax.sgd(0.05, momentum=0.9)}


def _history(name, inner, schedules=None, **options):
  return run_jax(name, inner, schedules or homogeneous_schedules(), **options)[0]


@pytest.mark.parametrize("inner", sorted(INNERS))
def test_odsgd_with_warmup_covering_the_run_is_ssgd(inner):
  np.testing.assert_allclose(_history("odsgd", INNERS[inner](), local_lr=0.3, warmup_steps=T),
                             _history("ssgd", INNERS[inner]()), atol=EXACT)


def test_local_sgd_with_period_1_and_sgd_is_ssgd():
  np.testing.assert_allclose(_history("local_sgd", optax.sgd(0.1), period=1),
                             _history("ssgd", optax.sgd(0.1)), atol=EXACT)


@pytest.mark.parametrize("inner", sorted(INNERS))
def test_ssp_with_staleness_0_is_ssgd(inner):
  np.testing.assert_allclose(_history("ssp", INNERS[inner](), staleness=0),
                             _history("ssgd", INNERS[inner]()), atol=EXACT)


@pytest.mark.parametrize("inner", sorted(INNERS))
def test_gossip_stepping_first_on_the_complete_graph_is_ssgd(inner):
  """The mean of the workers' SGD or heavy-ball steps is the step on the mean gradient;
  mixing first (Lian et al.'s order) is not: each worker steps on its own gradient."""
  gossip = _history("gossip", INNERS[inner](), graph="complete", order="step_first")
  np.testing.assert_allclose(gossip, _history("ssgd", INNERS[inner]()), atol=EXACT)
  combined_first = _history("gossip", INNERS[inner](), graph="complete")
  assert np.abs(combined_first - gossip).max() > 1e-3


@pytest.mark.parametrize("staleness", [0, 2])
def test_ssp_bounds_the_clock_gap_on_a_heterogeneous_cluster(staleness):
  """A worker at most `staleness` clocks ahead may push, so after a tick the gap is
  at most staleness + 1; with a loose bound the random schedule does open gaps."""
  schedules = heterogeneous_schedules(seed=7)
  _, _, logs = run_jax("ssp", optax.sgd(0.1), schedules, with_logs=True, staleness=staleness)
  gaps = [log["clock_gap"] for log in logs]
  assert max(gaps) == staleness + 1
  assert any(log["blocked"] > 0 for log in logs), "the bound must have held someone back"


@pytest.mark.parametrize("inner", sorted(INNERS))
def test_asgd_with_one_worker_is_plain_optax(inner):
  history, model = run_jax("asgd", INNERS[inner](), homogeneous_schedules(), num_workers=1)
  tx, x = INNERS[inner](), np.asarray(X0, np.float32)
  state = tx.init(x)
  for t in range(T):
    updates, state = tx.update(numpy_grad(t, 0, x)[0].astype(np.float32), state, x)
    x = optax.apply_updates(x, updates)
    np.testing.assert_allclose(history[t, 0], x, atol=EXACT)
  np.testing.assert_allclose(model, x, atol=EXACT)


@pytest.mark.parametrize("inner", sorted(INNERS))
def test_fixed_confidence_1_and_zero_local_lr_are_one_step_delayed_sgd(inner):
  numpy_inner = ref.SGD(0.1) if inner == "sgd" else ref.SGD(0.05, momentum=0.9)
  delayed, _ = ref.delayed_sgd(numpy_grad, X0, N, T, numpy_inner)
  pseudo = _history("pseudo_sync", INNERS[inner](), confidence="fixed", alpha=1.0)
  odsgd_history, odsgd_model = run_jax("odsgd", INNERS[inner](), homogeneous_schedules(),
                                       local_lr=0.0, warmup_steps=0)
  np.testing.assert_allclose(pseudo, delayed, atol=1e-5)
  np.testing.assert_allclose(odsgd_history, delayed, atol=1e-5)
  np.testing.assert_allclose(pseudo, odsgd_history, atol=EXACT)
  assert np.abs(delayed[-1] - X0).max() > 1e-2


@pytest.mark.parametrize("name,options", [("ssgd", {}), ("pseudo_sync", {}),
                                          ("pseudo_sync", {"confidence": "fixed"})])
def test_replicas_stay_identical(name, options):
  history = _history(name, optax.sgd(0.05, momentum=0.9), **options)
  for worker in range(1, N):
    np.testing.assert_array_equal(history[:, worker], history[:, 0])


@pytest.mark.parametrize("name,options,schedules", [
    ("local_sgd", {"period": 3}, None),
    ("oscars", {"period": 3}, heterogeneous_schedules(seed=3)),
])
def test_local_replicas_are_identical_right_after_each_round_end(name, options, schedules):
  """Equal up to one rounding: a strategy moves x to the anchor a through the optax
  update a - x, and x + (a - x) may differ from a in the last bit."""
  history = _history(name, optax.sgd(0.05, momentum=0.9), schedules, **options)
  for t in range(T):
    spread = np.abs(history[t] - history[t, 0]).max()
    if (t + 1) % 3 == 0:
      assert spread <= 4 * np.finfo(np.float32).eps * np.abs(history[t]).max(), f"tick {t}"
    elif t % 3 == 1:
      assert spread > 0.0, f"tick {t} is inside a round: the workers drift apart"


@pytest.mark.parametrize("name,options", [
    ("odsgd", {"local_lr": 0.05, "warmup_steps": 3}),
    ("odsgd", {"local_lr": 0.05, "warmup_steps": 1, "local_optimizer": "replay",
               "correction": "spike"}),
    ("odsgd", {"local_lr": 0.05, "warmup_steps": 2, "local_optimizer": "momentum",
               "correction": "predict", "compression": "topk:0.5"}),
    ("pseudo_sync", {}),
    ("pseudo_sync", {"correction": "replay+spike"}),
    ("pseudo_sync", {"correction": "predict", "confidence": "fixed", "alpha": 0.7}),
])
def test_the_settled_ticks_program_continues_the_general_one_bit_for_bit(name, options):
  """Bit for bit as XLA:CPU compiles at optimization level 0 with its fusion emitters,
  where the two programs round alike; with LLVM's optimizations (the default), or with
  the tests' fast-compile emitters, they may differ in the last bit (docs/DESIGN.md)."""
  run_compiled_with(("--xla_backend_optimization_level=0",), "tests.test_identities",
                    "settled_continues_general", name, options)


def settled_continues_general(name, options):
  """From the tick where the strategy's tick conditions are all decided on, the update
  traced with them decided (the train step's program for those ticks: no conditional, no
  selects) is the general update exactly; a tick earlier it is not (the transitions it
  leaves out do something)."""
  inner = optax.sgd(0.05, momentum=0.9)
  settled_from = settled_tick(name, **options)
  expected = {"odsgd": options.get("warmup_steps", 200) + 1, "pseudo_sync": 2}[name]
  assert settled_from == expected  # after the warm-up and the first delayed tick; tick 2
  general, general_model = run_jax(name, inner, homogeneous_schedules(), **options)
  settled, settled_model = run_jax(name, inner, homogeneous_schedules(),
                                   settled_from=settled_from, **options)
  np.testing.assert_array_equal(settled, general)
  np.testing.assert_array_equal(settled_model, general_model)
  early, _ = run_jax(name, inner, homogeneous_schedules(), settled_from=settled_from,
                     switch_at=settled_from - 1, **options)
  assert np.abs(early - general).max() > 1e-6


def test_easgd_with_one_data_set_is_ssgd_with_negative_momentum():
  """EASGD (eq. 5, tau = 1, plain SGD) at the rate alpha = 1/N, where the center moves all
  the way (beta = N alpha = 1). With every worker on the same data the workers stay equal
  (x), and c' = c + N alpha (x - c) = x: the center is the workers one tick late, so
  x' = x - lr g(x) - alpha (x - x_prev), heavy ball with momentum -alpha. That is ssgd
  with optax.sgd(lr, momentum=-1/N), on every tick. With each worker's own data no
  rate makes it ssgd: after one tick the workers hold x0 - lr g_i(x0), which differ."""
  lr = 0.1
  features = jnp.asarray(FEATURES[:, 0], jnp.float32)  # worker 0's batches, for everyone
  targets = jnp.asarray(TARGETS[:, 0], jnp.float32)

  def same_data(x, t, worker):
    del worker
    return exact_loss_and_grad(features[t], targets[t], x)

  def run(name, inner, **options):
    tx = STRATEGIES[name].make(inner, axis_name=AXIS, **options)
    tick = jax.jit(worker_ticks(tx, same_data))
    x = jnp.tile(jnp.asarray(X0, jnp.float32), (N, 1))
    opt_state, history = init_workers(tx, x), []
    for t in range(T):
      x, opt_state = tick(x, opt_state, t, synchronous_schedule(t, N))
      history.append(np.asarray(x))
    return np.stack(history), np.asarray(STRATEGIES[name].model_params(x, opt_state))

  easgd, center = run("easgd", optax.sgd(lr), alpha=1 / N)
  heavy_ball, _ = run("ssgd", optax.sgd(lr, momentum=-1 / N))
  np.testing.assert_allclose(easgd, heavy_ball, atol=EXACT)
  np.testing.assert_allclose(center, easgd[-2, 0], atol=EXACT)  # one tick late
  assert np.abs(easgd - run("ssgd", optax.sgd(lr))[0]).max() > 1e-3  # not plain ssgd
  own_data = _history("easgd", optax.sgd(lr), alpha=1 / N)
  assert np.abs(own_data - _history("ssgd", optax.sgd(lr))).max() > 1e-3


@pytest.mark.parametrize("outer", [None, {"learning_rate": 0.7, "momentum": 0.9,
                                          "nesterov": True}])
def test_streaming_diloco_with_one_fragment_and_no_delay_is_diloco(outer):
  """One fragment, delay 0, mixing 0: every `period` steps the whole model steps by the
  outer optimizer on the mean outer gradient, as local_sgd's DiLoCo round end does."""
  options = {} if outer is None else {"outer": outer}
  np.testing.assert_allclose(
      _history("streaming_diloco", optax.adam(0.01), period=4, **options),
      _history("local_sgd", optax.adam(0.01), period=4, **options), atol=EXACT)


def test_streaming_diloco_with_mixing_1_never_moves_the_workers():
  """Mixing 1 keeps the workers' own fragments: each trains alone (its parameters are
  what local SGD with a period past the run gives), only the global copy moves."""
  np.testing.assert_allclose(
      _history("streaming_diloco", optax.sgd(0.1), period=4, fragments=2, mixing=1.0),
      _history("local_sgd", optax.sgd(0.1), period=T + 1), atol=EXACT)
