"""Linear least squares on N workers: the shared problem of the exact-math tests.

Each worker has its own batches; `run_jax` runs a registered strategy on the shared
harness (`odsgd_jax.strategies.worker_ticks`) and returns every worker's parameters
after every tick.
"""

import jax
import jax.numpy as jnp
import numpy as np
import optax

from odsgd_jax.cluster import Schedule, synchronous_schedule
from odsgd_jax import strategies
from odsgd_jax.strategies import _tracing as tracing

N, T, DIM, BATCH = 4, 12, 5, 8

_rng = np.random.default_rng(42)
FEATURES = _rng.normal(size=(T, N, BATCH, DIM))
TARGETS = FEATURES @ _rng.normal(size=DIM) + 0.1 * _rng.normal(size=(T, N, BATCH))
X0 = _rng.normal(size=DIM) * 0.1


def exact_loss_and_grad(features, targets, x):
  """Least squares' loss and gradient on one batch, in full float32: compared with a
  float64 NumPy reference at 1e-5, so the matmuls ask for HIGHEST precision (a GPU's
  default multiplies float32 in TF32, about 3 decimal digits)."""
  residual = jnp.matmul(features, x, precision=jax.lax.Precision.HIGHEST) - targets
  gradient = jnp.matmul(features.T, residual, precision=jax.lax.Precision.HIGHEST) / BATCH
  return 0.5 * jnp.mean(residual**2), gradient


def numpy_grad(t, i, x):
  residual = FEATURES[t, i] @ x - TARGETS[t, i]
  return FEATURES[t, i].T @ residual / BATCH, 0.5 * float(np.mean(residual**2))


def heterogeneous_schedules(seed):
  rng = np.random.default_rng(seed)
  return [(rng.random(N) < 0.6, rng.permutation(N)) for _ in range(T)]


def homogeneous_schedules():
  return [(np.ones(N, bool), np.asarray(synchronous_schedule(t, N).arrival_order))
          for t in range(T)]


def run_jax(name, inner, schedules, num_workers=N, with_logs=False, settled_from=None,
            switch_at=None, **options):
  """The registered strategy on the shared harness (`strategies.worker_ticks`): per-tick
  params (T, N, DIM) and the model (and, `with_logs`, the strategy's logged metrics after
  every tick). `options` as a config writes them, `inner_momentum` among them if given.
  From tick `settled_from` on (or `switch_at`), the update traced with its tick conditions
  decided for the ticks from `settled_from` on (`strategies.ticks.from_tick`), as the
  train step's program for them."""
  inner_momentum = options.pop("inner_momentum", None)
  spec = strategies.resolve(name, options, inner_momentum)
  tx = spec.make(inner, strategies.AXIS)
  features = jnp.asarray(FEATURES[:, :num_workers], jnp.float32)
  targets = jnp.asarray(TARGETS[:, :num_workers], jnp.float32)

  def loss_and_grad(x, t, worker):
    a, b = features[t, worker], targets[t, worker]
    return exact_loss_and_grad(a, b, x)

  general_tick = jax.jit(strategies.worker_ticks(tx, loss_and_grad))
  settled_tick = jax.jit(strategies.worker_ticks(tx, loss_and_grad, settled_from or 0))
  x = jnp.tile(jnp.asarray(X0, jnp.float32), (num_workers, 1))
  opt_state = strategies.init_workers(tx, x)
  history, logs = [], []
  for t, (active, order) in enumerate(schedules):
    schedule = Schedule(active=jnp.asarray(active[:num_workers]),
                        arrival_order=jnp.asarray(order, jnp.int32)[order < num_workers])
    switch = settled_from if switch_at is None else switch_at
    tick = settled_tick if switch is not None and t >= switch else general_tick
    x, opt_state = tick(x, opt_state, t, schedule)
    history.append(np.asarray(x))
    logs.append({k: float(np.mean(v)) for k, v in spec.definition.log(opt_state).items()})
  model = np.asarray(spec.definition.model_params(x, opt_state))
  return (np.stack(history), model, logs) if with_logs else (np.stack(history), model)


def settled_tick(name, **options):
  """The tick from which the strategy's tick conditions are all decided
  (`strategies.ticks.settled_from` of its update on the harness)."""
  inner_momentum = options.pop("inner_momentum", None)
  tx = strategies.resolve(name, options, inner_momentum).make(optax.sgd(0.1), strategies.AXIS)
  x = jax.ShapeDtypeStruct((DIM,), jnp.float32)
  return strategies.ticks.settled_from(tx, jax.eval_shape(tx.init, x), {strategies.AXIS: N}, x,
                                       **tracing.stand_in_extra_args(N))
