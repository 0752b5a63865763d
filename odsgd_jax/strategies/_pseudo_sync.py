"""Pseudo-synchronous SGD with an adaptive exponential-smoothing predicted gradient."""

from typing import Any, NamedTuple

import jax
import jax.numpy as jnp
import optax

from odsgd_jax.strategies import _collectives as coll
from odsgd_jax.strategies import _compression as comp

CONFIDENCE_MODES = ("adaptive", "fixed")
_EPSILON = 1e-12


class PseudoSyncState(NamedTuple):
  """State of `pseudo_sync`; everything but `pending_grads` is identical on every worker."""

  inner_state: Any  # the inner optimizer's state
  pending_grads: Any  # this worker's gradient of the previous step, P_i
  prediction: Any  # S: the smoothed gradient the last update used
  error_mean: Any  # A: smoothed prediction error (Trigg-Leach numerator)
  error_abs_mean: Any  # M: smoothed absolute prediction error
  alpha: Any  # per tensor, float32: confidence in the newest gradient last used
  count: jax.Array  # shape=(), int32: steps taken
  communication: Any  # compression state (error feedback, ...) or None


def pseudo_sync(
    inner: optax.GradientTransformation,
    *,
    axis_name: coll.AxisName,
    confidence: str = "adaptive",
    phi: float = 0.9,
    alpha_min: float = 0.1,
    alpha: float = 0.5,
    compression: "str | comp.Communication | None" = None,
) -> optax.GradientTransformationExtraArgs:
  """Updates with a gradient predicted from synchronized history (reconstruction).

  Only the paper's abstract is public (Wen et al., IJPP 2023); this rule is a
  reconstruction from it: the update of step t uses the previous gradients,
  whose all-reduce overlaps this step's compute, smoothed exponentially with an
  adaptive confidence coefficient (a Trigg-Leach tracking signal, per tensor):

    G_prev = mean_i P_i                               # all-reduce of step t-1
    e = G_prev - S_prev                               # last prediction's error
    A = phi A + (1 - phi) e ;  M = phi M + (1 - phi) |e|
    alpha = clip(|sum A| / (sum M + eps), alpha_min, 1)   ("adaptive"; "fixed": alpha)
    S = alpha G_prev + (1 - alpha) S_prev ;  (u, s) = inner(S, s, x) ;  P_i = g_i

  No update at the first step (nothing is pending); at the second, S_prev =
  G_prev. All replicas stay identical. `confidence="fixed", alpha=1` is plain
  one-step-delayed SGD.

  Args:
    inner: the optimizer applied to the predicted gradient S.
    axis_name: the worker axis (or tuple of axes).
    confidence: "adaptive" (tracking signal) or "fixed" (constant `alpha`).
    phi: smoothing factor of the tracking signal.
    alpha_min: lower bound of the adaptive confidence.
    alpha: the constant confidence of "fixed".
    compression: how the all-reduce travels: None (plain float32), a spec such as
      "topk:0.01" / "qsgd:4,error_feedback=false,warmup=100", or a `Communication`.

  Returns:
    An `optax.GradientTransformationExtraArgs`.

  References:
    Wen et al., Accelerating Massively Distributed Deep Learning Through
    Efficient Pseudo-Synchronous Update Method, IJPP 2023.
  """
  if confidence not in CONFIDENCE_MODES:
    raise ValueError(f"confidence={confidence!r} is not one of {CONFIDENCE_MODES}")
  inner = optax.with_extra_args_support(inner)
  communication = comp.parse_communication(compression)

  def init_fn(params):
    zeros = optax.tree.zeros_like(params)
    return PseudoSyncState(
        inner_state=inner.init(params), pending_grads=zeros, prediction=zeros,
        error_mean=zeros, error_abs_mean=zeros,
        alpha=jax.tree.map(lambda _: jnp.ones((), jnp.float32), params),
        count=jnp.zeros((), jnp.int32), communication=comp.init_state(communication, params),
    )

  def update_fn(grads, state, params=None, **extra_args):
    del extra_args
    mean_pending, comm_state = comp.all_reduce_mean(communication, state.pending_grads,
                                                     state.communication, axis_name)
    first = state.count == 1  # the first gradient: no history to smooth with
    previous = optax.tree.where(first, mean_pending, state.prediction)
    error = optax.tree.sub(mean_pending, previous)
    error_mean = jax.tree.map(lambda a, e: phi * a + (1 - phi) * e, state.error_mean, error)
    error_abs_mean = jax.tree.map(lambda m, e: phi * m + (1 - phi) * jnp.abs(e),
                                  state.error_abs_mean, error)
    if confidence == "adaptive":
      alphas = jax.tree.map(
          lambda a, m: jnp.clip(jnp.abs(jnp.sum(a)) / (jnp.sum(m) + _EPSILON), alpha_min, 1.0)
          .astype(jnp.float32), error_mean, error_abs_mean)
    else:
      alphas = jax.tree.map(lambda _: jnp.asarray(alpha, jnp.float32), state.alpha)
    prediction = jax.tree.map(lambda g, s, a: (a * g + (1 - a) * s).astype(g.dtype),
                              mean_pending, previous, alphas)
    step, inner_state = inner.update(prediction, state.inner_state, params)
    has_pending = state.count > 0
    keep = lambda new, old: optax.tree.where(has_pending, new, old)
    new_state = PseudoSyncState(
        inner_state=keep(inner_state, state.inner_state), pending_grads=grads,
        prediction=keep(prediction, state.prediction),
        error_mean=keep(error_mean, state.error_mean),
        error_abs_mean=keep(error_abs_mean, state.error_abs_mean),
        alpha=keep(alphas, state.alpha), count=optax.safe_increment(state.count),
        communication=comm_state,
    )
    return optax.tree.where(has_pending, step, optax.tree.zeros_like(step)), new_state

  return optax.GradientTransformationExtraArgs(init_fn, update_fn)


def pseudo_sync_model_params(worker_params: Any, worker_opt_state: PseudoSyncState) -> Any:
  """The model of a pseudo_sync run: worker 0's parameters (all replicas are identical)."""
  del worker_opt_state
  return coll.first_worker(worker_params)


def pseudo_sync_log(worker_opt_state: PseudoSyncState) -> dict[str, jax.Array]:
  """The confidence coefficient alpha, averaged over tensors."""
  return {"alpha": jnp.mean(jnp.stack(jax.tree.leaves(worker_opt_state.alpha)), axis=0)}
