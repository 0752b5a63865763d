"""Pseudo-synchronous SGD with an adaptive exponential-smoothing predicted gradient."""

from typing import Any, NamedTuple

import jax
import jax.numpy as jnp
import optax

from odsgd_jax import cluster, comm, domains
from odsgd_jax.strategies import _delay as delay
from odsgd_jax.strategies import _ticks as ticks
from odsgd_jax.strategies._registry import EVERY_TICK, Example, StrategyDef, register

CONFIDENCE_MODES = ("adaptive", "fixed")
_EPSILON = 1e-12


class PseudoSyncState(NamedTuple):
  """State of `pseudo_sync`; everything but `pending_grads` is identical on every worker."""

  inner_state: Any  # the inner optimizer's state
  pending_grads: Any  # this worker's gradient of the previous step, P_i
  prediction: Any  # S: the smoothed gradient the last update used
  # One entry per tensor, in the tree's order (shape=(tensors,), float32):
  error_sum: jax.Array  # sum A, A the smoothed prediction error (Trigg-Leach numerator)
  abs_error_sum: jax.Array  # sum M, M the smoothed absolute prediction error ("fixed": 0)
  alpha: jax.Array  # confidence in the newest gradient last used
  count: jax.Array  # shape=(), int32: steps taken
  communication: Any  # compression state (error feedback, ...) or None
  weights: Any = None  # W, the model ("predict": the workers compute at W + a shift), or None
  spike: Any = None  # spike compensation's state ("spike"), or None


def _error_sums(mean: jax.Array, previous: jax.Array) -> tuple[jax.Array, jax.Array]:
  """(sum e, sum |e|) in float32 over the tensor, e = mean - previous: one reduction with
  two results, so that e is computed inside it and never stored."""
  error = (mean - previous).astype(jnp.float32)
  zero = jnp.zeros((), jnp.float32)
  return jax.lax.reduce((error, jnp.abs(error)), (zero, zero),
                        lambda x, y: (x[0] + y[0], x[1] + y[1]), tuple(range(error.ndim)))


@domains.declared(
    confidence=domains.choice(*CONFIDENCE_MODES), phi=domains.FRACTION,
    alpha_min=domains.real(0, 1), alpha=domains.real(0, 1), correction=delay.CORRECTION,
    inner_momentum=domains.FRACTION, compression=comm.COMPRESSION)
def pseudo_sync(
    inner: optax.GradientTransformation,
    *,
    axis_name: comm.AxisName,
    confidence: str = "adaptive",
    phi: float = 0.9,
    alpha_min: float = 0.1,
    alpha: float = 0.5,
    correction: str = "none",
    inner_momentum: float = 0.9,
    compression: "str | comm.Communication | None" = None,
) -> optax.GradientTransformationExtraArgs:
  """Updates with a gradient predicted from synchronized history (reconstruction).

  What comes from where. Only the paper's abstract is public (Wen et al., IJPP
  2023). From it: the update uses the previous step's synchronized gradient, whose
  all-reduce overlaps this step's compute, through "adaptive exponential smoothing"
  with an adaptively adjusted "confidence coefficient of the history gradient". Ours:
  the smoothing form and its adaptive coefficient, a Trigg-Leach tracking signal per
  tensor (Trigg & Leach 1967, the classic adaptive-response-rate smoothing), below.
  From other papers, as options: the delay corrections (spike compensation, Kosson
  et al. 2021; weight prediction, SpecTrain / Chen et al. 2018; the replay of the
  next update with the worker's own gradient, as OD-SGD's local step does).

    G_prev = mean_i P_i                               # all-reduce of step t-1
    e = G_prev - S_prev                               # last prediction's error
    A = phi A + (1 - phi) e ;  M = phi M + (1 - phi) |e|
    alpha = clip(|sum A| / (sum M + eps), alpha_min, 1)   ("adaptive"; "fixed": alpha)
    S = alpha G_prev + (1 - alpha) S_prev ;  (u, s) = inner(S, s, x) ;  P_i = g_i

  A and M enter alpha only through their sums over the tensor, and a sum is linear, so
  the state keeps the sums (sum A = phi sum A + (1 - phi) sum e, and likewise sum M):
  two scalars per tensor instead of two tensors, and one reduction over e per tick
  instead of two passes that write A and M (the same alpha in exact arithmetic).

  No update at the first step (nothing is pending); at the second, S_prev =
  G_prev. All replicas stay identical. `confidence="fixed", alpha=1` is plain
  one-step-delayed SGD.

  Delay corrections (`correction`, odsgd_jax/strategies/_delay.py): "spike" feeds the
  inner optimizer the spike-compensated S for a delay of one update (`inner_momentum`: the
  inner optimizer's); "predict" keeps the model W in the state and lets the workers
  compute their gradients at W moved by the inner optimizer's pending motion;
  "replay" at W moved by the next update as this rule would make it were every
  worker's gradient this worker's (the replicas then differ; the model is W).

  Args:
    inner: the optimizer applied to the predicted gradient S.
    axis_name: the worker axis (or tuple of axes).
    confidence: "adaptive" (tracking signal) or "fixed" (constant `alpha`).
    phi: smoothing factor of the tracking signal.
    alpha_min: lower bound of the adaptive confidence.
    alpha: the constant confidence of "fixed".
    correction: "none", "predict", "replay", "spike", "predict+spike" or "replay+spike".
    inner_momentum: the inner optimizer's momentum (spike compensation needs it).
    compression: how the all-reduce travels: None (plain float32), a spec such as
      "topk:0.01" / "qsgd:4,error_feedback=false,warmup=100", or a `Communication`.

  Returns:
    An `optax.GradientTransformationExtraArgs`.

  References:
    Wen et al., Accelerating Massively Distributed Deep Learning Through
    Efficient Pseudo-Synchronous Update Method, IJPP 2023; Kosson et al.,
    Pipelined Backpropagation at Scale, MLSys 2021 (spike compensation); Chen et
    al., Efficient and Robust Parallel DNN Training through Model Parallelism on
    Multi-GPU Platform (SpecTrain), arXiv:1809.02839 (weight prediction).
  """
  prediction_mode, spike = delay.parse_correction(correction, inner_momentum)
  keeps_weights = prediction_mode != "none"
  inner = optax.with_extra_args_support(inner)
  communication = comm.parse_communication(compression)

  def init_fn(params):
    zeros = optax.tree.zeros_like(params)
    scalars = lambda value: jnp.full(len(jax.tree.leaves(params)), value, jnp.float32)
    return PseudoSyncState(
        inner_state=inner.init(params),
        pending_grads=comm.hold(zeros, communication),
        prediction=zeros,
        error_sum=scalars(0.0), abs_error_sum=scalars(0.0), alpha=scalars(1.0),
        count=jnp.zeros((), jnp.int32), communication=comm.init_state(communication, params),
        weights=params if keeps_weights else None,
        spike=delay.spike_init(params) if spike else None,
    )

  def update_fn(grads, state, params=None, **extra_args):
    del extra_args
    previous_mean, comm_state = comm.exchange(communication, state.pending_grads,
                                             state.communication, axis_name)
    # the first gradient (count 1) has no history to smooth with
    previous = ticks.where(ticks.at(state.count, 1), previous_mean, state.prediction)
    if confidence == "adaptive":
      sums = jnp.array([_error_sums(g, s) for g, s in zip(
          jax.tree.leaves(previous_mean), jax.tree.leaves(previous), strict=True)])
      # sum A and sum M from their last sums (a sum is linear); every tensor's in one vector.
      error_sum = phi * state.error_sum + (1 - phi) * sums[:, 0]
      abs_error_sum = phi * state.abs_error_sum + (1 - phi) * sums[:, 1]
      alphas = jnp.clip(jnp.abs(error_sum) / (abs_error_sum + _EPSILON), alpha_min, 1.0)
    else:  # no tracking signal: no pass over the error (it cost one, and a copy of S_prev)
      error_sum, abs_error_sum = state.error_sum, state.abs_error_sum
      alphas = jnp.full_like(state.alpha, alpha)
    per_tensor = lambda vector: jax.tree.unflatten(jax.tree.structure(grads), list(vector))
    prediction = jax.tree.map(lambda g, s, a: (a * g + (1 - a) * s).astype(g.dtype),
                              previous_mean, previous, per_tensor(alphas))
    fed, spike_state = prediction, state.spike
    if spike:
      fed, spike_state = delay.spike(prediction, state.spike, 1, inner_momentum)
    weights = state.weights if keeps_weights else params
    step, inner_state = inner.update(fed, state.inner_state, weights)
    # nothing is pending at count 0: no update, the state stays
    started = ticks.after(state.count, 0)
    keep = lambda new, old: ticks.where(started, new, old)
    step = keep(step, optax.tree.zeros_like(step))
    inner_state = keep(inner_state, state.inner_state)
    weights = optax.apply_updates(weights, step)
    new_state = PseudoSyncState(
        inner_state=inner_state, pending_grads=comm.hold(grads, communication),
        prediction=keep(prediction, state.prediction),
        error_sum=keep(error_sum, state.error_sum),
        abs_error_sum=keep(abs_error_sum, state.abs_error_sum),
        alpha=keep(alphas, state.alpha), count=optax.safe_increment(state.count),
        communication=comm_state, weights=weights if keeps_weights else None,
        spike=keep(spike_state, state.spike) if spike else None,
    )
    if prediction_mode == "predict":  # the next gradient is taken where W is going
      return optax.tree.sub(delay.predicted(inner, inner_state, weights, 1), params), new_state
    if prediction_mode == "replay":  # ... with this worker's gradient as the pending mean
      guess = jax.tree.map(lambda g, s, a: (a * g + (1 - a) * s).astype(g.dtype),
                           grads, new_state.prediction, per_tensor(new_state.alpha))
      if spike:
        guess, _ = delay.spike(guess, new_state.spike, 1, inner_momentum)
      next_step, _ = inner.update(guess, inner_state, weights)
      return optax.tree.sub(optax.apply_updates(weights, next_step), params), new_state
    return step, new_state

  return optax.GradientTransformationExtraArgs(init_fn, update_fn)


def pseudo_sync_model_params(worker_params: Any, worker_opt_state: PseudoSyncState) -> Any:
  """The model of a pseudo_sync run: worker 0's parameters (all replicas are identical),
  or the weights W under weight prediction."""
  if worker_opt_state.weights is not None:
    return comm.first_worker(worker_opt_state.weights)
  return comm.first_worker(worker_params)


def pseudo_sync_log(worker_opt_state: PseudoSyncState) -> dict[str, jax.Array]:
  """The confidence coefficient alpha, averaged over tensors."""
  return {"alpha": jnp.mean(worker_opt_state.alpha, axis=-1)}


register(StrategyDef(
    "pseudo_sync", pseudo_sync, pseudo_sync_model_params, timeline=cluster.PipelinedTimeline,
    sends=EVERY_TICK, log=pseudo_sync_log,
    # The reconstruction's adaptive smoothing, with the delay corrections that make
    # ssgd's own optimizer stable for it (docs/delays.md):
    #   python scripts/sweep.py --config configs/default.py:pseudo_sync \
    #       --grid strategy.correction=none,replay,replay+spike
    defaults={"confidence": "adaptive", "phi": 0.9, "alpha_min": 0.5,
              "correction": "replay+spike"},
    examples=(Example({"correction": "replay+spike"}, 5,
                      "pending, prediction S, the model W and spike's two velocities"),
              Example({}, 2, "pending, prediction S (of A and M only their sums per tensor)"))))
