"""Streaming DiLoCo worked by hand (in the manner of torchft's DiLoCo regression test),
and its replicas starting from identical weights.

Two replicas of a model of two parameters, each its own fragment; weights all 1, every
gradient 2, inner SGD at learning rate 1 (each local step subtracts 2), outer SGD at
learning rate 2 (theta <- theta - 2 Delta, Delta = theta - x), a period of 6 steps: the
fragments are sent at steps 3, 9, ... (fragment 0) and 6, 12, ... (fragment 1), and
applied `delay` steps later as x <- mixing x + (1 - mixing) theta.
"""

import jax
import jax.numpy as jnp
import numpy as np
import optax
import pytest
from jax.flatten_util import ravel_pytree

from odsgd_jax import cluster, parallel, strategies, tasks
from odsgd_jax.models import make_model
from odsgd_jax.strategies import STRATEGIES
from odsgd_jax.train import init_state

AXIS = parallel.WORKER_AXES[0]

# The parameters after each of 12 steps, worked by hand. Delay 0, mixing 0:
#   steps 1-3: 1 - 2 = -1, -3, -5; fragment 0 sent: Delta = 1 - (-5) = 6,
#   theta_0 = 1 - 2 * 6 = -11, x_0 = -11;  steps 4-6: x_0 = -13, -15, -17, x_1 = -7, -9, -11;
#   fragment 1 sent: Delta = 1 - (-11) = 12, theta_1 = 1 - 24 = -23 = x_1;
#   steps 7-9: x_0 = -19, -21, -23; Delta = -11 - (-23) = 12, theta_0 = -11 - 24 = -35; ...
# Delay 1 applies the same Delta a step later, to the parameters one more step on: at step
# 4, x_0 = -7 becomes mixing (-7) + (1 - mixing) (-11). Mixing 1 keeps the local steps.
HAND_WORKED = {
    (0, 0.0): [(-1, -1), (-3, -3), (-11, -5), (-13, -7), (-15, -9), (-17, -23),
               (-19, -25), (-21, -27), (-35, -29), (-37, -31), (-39, -33), (-41, -47)],
    (0, 0.5): [(-1, -1), (-3, -3), (-8, -5), (-10, -7), (-12, -9), (-14, -17),
               (-16, -19), (-18, -21), (-24.5, -23), (-26.5, -25), (-28.5, -27), (-30.5, -32)],
    (0, 1.0): [(1 - 2 * s, 1 - 2 * s) for s in range(1, 13)],
    (1, 0.0): [(-1, -1), (-3, -3), (-5, -5), (-11, -7), (-13, -9), (-15, -11),
               (-17, -23), (-19, -25), (-21, -27), (-31, -29), (-33, -31), (-35, -33)],
    (1, 0.5): [(-1, -1), (-3, -3), (-5, -5), (-9, -7), (-11, -9), (-13, -11),
               (-15, -18), (-17, -20), (-19, -22), (-24, -24), (-26, -26), (-28, -28)],
    (1, 1.0): [(1 - 2 * s, 1 - 2 * s) for s in range(1, 13)],
}
# The global copy theta after step 12. Mixing 0, delay 0: the last values above (-35, -47).
# Mixing 1, delay 0: fragment 0 is sent at x_0 = -5 (Delta 6, theta_0 = -11) and at x_0 = -17
# (Delta -11 + 17 = 6, theta_0 = -23); fragment 1 at -11 (Delta 12, theta_1 = -23) and at -23
# (Delta 0): (-23, -23). Delay 1, mixing 0: theta_0 = -11, then Delta = -11 - (-21) = 10 sent
# at step 9 gives -31 at step 10; fragment 1's second result arrives only at step 13.
GLOBAL_AFTER_12 = {(0, 0.0): (-35, -47), (0, 0.5): (-29, -35), (0, 1.0): (-23, -23),
                   (1, 0.0): (-31, -23), (1, 0.5): (-27, -23), (1, 1.0): (-23, -23)}

def _run(delay, mixing, steps=12):
  tx = STRATEGIES["streaming_diloco"].make(
      optax.sgd(1.0), axis_name=AXIS, period=6, fragments=2, delay=delay, mixing=mixing,
      outer=optax.sgd(2.0))
  params = jnp.ones((2, 2), jnp.float32)  # 2 replicas of 2 parameters
  state = jax.vmap(tx.init)(params)
  update = jax.jit(jax.vmap(tx.update, axis_name=AXIS))
  history = []
  for _ in range(steps):
    updates, state = update(jnp.full_like(params, 2.0), state, params)
    params = optax.apply_updates(params, updates)
    history.append(np.asarray(params))
  return np.stack(history), state


@pytest.mark.parametrize("delay", [0, 1])
@pytest.mark.parametrize("mixing", [0.0, 0.5, 1.0])
def test_streaming_diloco_matches_the_hand_worked_steps(delay, mixing):
  history, state = _run(delay, mixing)
  expected = np.asarray(HAND_WORKED[delay, mixing], np.float32)
  for replica in range(2):
    np.testing.assert_array_equal(history[:, replica], expected)
  for replica in range(2):
    np.testing.assert_array_equal(np.asarray(state.anchor)[replica],
                                  GLOBAL_AFTER_12[delay, mixing])
  # fragments travel on steps 3, 6, 9 and 12 only, each one parameter (32 bits)
  assert int(state.communication.count[0]) == 4
  assert float(state.communication.bits[0]) == 32


@pytest.mark.parametrize("name", ["streaming_diloco", "local_sgd"])
def test_every_replica_starts_from_identical_weights(name):
  """DiLoCo's replicas start from one set of weights: the train state's workers (8, on
  the devices there are) hold the same parameters, and the same global copy, bit for bit,
  before any step."""
  model = make_model("transformer", 16, width=8, depth=1, heads=2, max_length=8)
  spec = strategies.resolve(name, {"period": 4}, None)
  tx = spec.make(optax.adamw(1e-3), parallel.WORKER_AXES)
  worker_mesh = parallel.make_worker_mesh(8, min(8, jax.device_count()))
  state = init_state(model, tx, worker_mesh, (8,), seed=3, task=tasks.NEXT_TOKEN)
  params = [np.asarray(leaf) for leaf in jax.tree.leaves(state.params)]
  anchor = jax.tree.leaves(state.opt_state.anchor)
  assert params and all(leaf.shape[0] == 8 for leaf in params)
  for leaf in params + [np.asarray(leaf) for leaf in anchor]:
    for worker in range(1, 8):
      np.testing.assert_array_equal(leaf[worker], leaf[0])
  first = jax.tree.map(lambda x: np.asarray(x[0]), state.params)
  np.testing.assert_array_equal(  # and the global copy is those weights
      np.asarray(ravel_pytree(jax.tree.map(lambda x: np.asarray(x[0]),
                                           state.opt_state.anchor))[0]),
      np.asarray(ravel_pytree(first)[0]))


@pytest.mark.parametrize("delay", [0, 1, 2])
def test_the_timeline_hides_a_fragment_behind_the_delay_steps(delay):
  """Two workers of 10 ms steps, one of them half as fast (20 ms); a fragment sent after
  tick 0 takes E seconds. With delay tau it runs beside ticks 1..tau and holds the
  workers up only past them: on tick tau the clock reaches max(0.02 (tau + 1), 0.02 + E)
  (the slow worker sets the start, 0.02 s), plus the interference of the overlap; then each
  worker has waited for the exchange's end from where its own steps reached."""
  workers = cluster.Workers(speeds=(1.0, 0.5), step_time=0.01, interference=0.1)
  network = cluster.Network(bandwidth=1e6, latency=0.0)
  exchange = network.allreduce_time(2, 30_000)  # the message: 30 kB
  assert 0.02 < exchange < 0.04
  timeline = STRATEGIES["streaming_diloco"].make_timeline(
      workers, network, 60_000, None, period=12, fragments=2, delay=delay)
  time = 0.0
  for tick in range(delay + 1):
    cost = timeline.cost(tick, round_end=tick == 0, message_bytes=30_000)
    time += cost.duration
  overlapped = min(exchange, 0.02 * delay)
  expected = max(0.02 * (delay + 1) + 0.1 * overlapped, 0.02 + exchange)
  assert time == pytest.approx(expected, rel=1e-12)
  # on tick tau each worker waits for the exchange's end from where its own steps reach
  ready = np.array([0.01, 0.02]) * (delay + 1) + 0.1 * overlapped
  wait = np.maximum(0.0, 0.02 + exchange - ready)
  np.testing.assert_allclose(cost.communication, 0.1 * overlapped + wait, rtol=0, atol=1e-12)
  # every worker's compute, communication and idle add up to the clock, with noisy steps
  # too (a worker that catches up idles less than nothing on that tick)
  totals = np.zeros(2)
  noisy = cluster.Workers(speeds=(1.0, 0.5), step_time=0.01, interference=0.1, jitter=0.5)
  timeline = STRATEGIES["streaming_diloco"].make_timeline(
      noisy, network, 60_000, None, period=12, fragments=2, delay=delay)
  time = 0.0
  for tick in range(30):
    cost = timeline.cost(tick, round_end=tick % 6 == 2, message_bytes=30_000)
    time += cost.duration
    totals += cost.compute + cost.communication + cost.idle
  np.testing.assert_allclose(totals, time, rtol=1e-12)


def test_low_bit_fragments_travel_through_the_compressors():
  """With compression each fragment's outer gradient goes through the exchange's
  compressor, with its own state: a bfloat16 cast sends 16 bits a parameter of the
  fragment, and the global copy moves by the bfloat16-rounded mean."""
  tx = STRATEGIES["streaming_diloco"].make(
      optax.sgd(1.0), axis_name=AXIS, period=4, fragments=2, compression="cast:bfloat16")
  params = jnp.ones((2, 6), jnp.float32)
  state = jax.vmap(tx.init)(params)
  update = jax.jit(jax.vmap(tx.update, axis_name=AXIS))
  grads = jnp.full_like(params, 1.0 / 3.0)  # 2 steps of 1/3: an outer gradient of 2/3
  for _ in range(2):
    updates, state = update(grads, state, params)
    params = optax.apply_updates(params, updates)
  assert int(state.communication.count[0]) == 1
  assert float(state.communication.bits[0]) == 3 * 16  # fragment 0: 3 of the 6 parameters
  sent = float(jnp.asarray(2.0 / 3.0, jnp.bfloat16))
  np.testing.assert_array_equal(np.asarray(state.anchor)[0, :3], np.float32(1.0 - sent))
  np.testing.assert_array_equal(np.asarray(state.anchor)[0, 3:], 1.0)
