"""Delay corrections: one mechanism for the strategies whose gradients arrive late.

pseudo_sync and odsgd apply each gradient one update after it was computed; asgd
applies it after the other workers' updates since its worker pulled (its staleness).
A late gradient costs heavy ball most of its stable step size (eta h < 1 - mu instead
of 2 (1 + mu) on a quadratic; `odsgd_jax.study.largest_stable_step` measures it).
Two published corrections, each an option of those strategies (`correction=`):

"predict" (weight prediction; SpecTrain, Chen et al. 2018; the MSNAG form of pipelined
training): a worker computes its gradient at the weights extrapolated by the `delay`
updates that will happen before the gradient is applied, estimated as the inner
optimizer's own motion with no new gradient:

  x = W + sum of `delay` inner updates of a zero gradient from the current state
    = W - lr (mu - mu^(D+1)) / (1 - mu) m      for heavy ball (shift gamma for D = 1)

"replay" (one-step delays): the pending update estimated with the worker's own fresh
gradient in place of the mean still being all-reduced, through the strategy's whole rule:
x_i = W + (the next update, had every worker sent g_i). For heavy ball in odsgd this is
W + mu (W - W_prev) - lr g_i, the local step that replays the global momentum; the workers'
parameters then differ, the model W does not.

"spike" (spike compensation; Kosson et al., Pipelined Backpropagation at Scale, MLSys
2021): a gradient that arrives D updates late is given at once what it missed, so that
its total weight stays 1 / (1 - mu) and its later contributions are those it would have
had on time. With heavy ball the update becomes

  v = mu v + g ;  u = -lr (a v + b g),  a = mu^D,  b = (1 - mu^D) / (1 - mu)

(D = 1: Nesterov's update with the late gradient). Here the inner optimizer is left as
it is and fed g_hat = v_hat - mu v_hat_prev with v_hat = a v + b g: the momentum it then
accumulates is v_hat, and its update -lr v_hat is the compensated one. For a constant
D = 1, g_hat = (1 + mu) g - mu g_prev: a linear extrapolation of the gradients. `momentum`
must be the inner optimizer's mu (with plain SGD, mu = 0, nothing changes).
"""

from typing import Any, NamedTuple

import jax
import jax.numpy as jnp
import optax

from odsgd_jax import domains

CORRECTIONS = ("none", "predict", "replay", "spike", "predict+spike", "replay+spike")
CORRECTION = domains.choice(*CORRECTIONS)


def parse_correction(correction: str, inner_momentum: float) -> tuple[str, bool]:
  """(prediction: "none", "predict" or "replay"; spike compensation: bool).

  Raises:
    ValueError: spike compensation asked for without heavy-ball momentum to correct.
  """
  prediction = correction.removesuffix("+spike").removesuffix("spike") or "none"
  spike = "spike" in correction
  if spike and not inner_momentum:
    raise ValueError(
        f"correction={correction!r}: spike compensation corrects heavy-ball momentum, and "
        f"the inner optimizer has none (inner_momentum={inner_momentum}): use SGD with "
        f"momentum (optimizer.name='sgd', optimizer.momentum > 0), or another correction")
  return prediction, spike


class SpikeState(NamedTuple):
  """Spike compensation's memory (per tensor, like the parameters)."""

  velocity: Any  # v: the momentum of the late gradients as they arrive
  compensated: Any  # v_hat of the last update: the inner optimizer's momentum


def spike_init(params: Any) -> SpikeState:
  zeros = optax.tree.zeros_like(params)
  return SpikeState(velocity=zeros, compensated=zeros)


def spike(grads: Any, state: SpikeState, delay: jax.Array | int,
          momentum: float) -> tuple[Any, SpikeState]:
  """The gradient to feed a heavy-ball optimizer (momentum `momentum`) so that its
  update is the spike-compensated one for `grads` arriving `delay` updates late."""
  delay = jnp.asarray(delay, jnp.float32)
  a = jnp.power(momentum, delay)
  b = (1.0 - a) / (1.0 - momentum) if momentum != 1.0 else delay
  velocity = jax.tree.map(lambda v, g: momentum * v + g, state.velocity, grads)
  compensated = jax.tree.map(lambda v, g: (a * v + b * g).astype(g.dtype), velocity, grads)
  fed = jax.tree.map(lambda c, c_prev: c - momentum * c_prev, compensated, state.compensated)
  return fed, SpikeState(velocity=velocity, compensated=compensated)


def drift(inner: optax.GradientTransformationExtraArgs, inner_state: Any, params: Any,
          steps: int) -> Any:
  """The sum of the inner optimizer's next `steps` updates from `inner_state` with a
  zero gradient: where its momentum alone carries the weights (nothing is committed)."""
  zeros = optax.tree.zeros_like(params)
  total = zeros
  for _ in range(steps):
    update, inner_state = inner.update(zeros, inner_state, optax.apply_updates(params, total))
    total = optax.tree.add(total, update)
  return total


def predicted(inner: optax.GradientTransformationExtraArgs, inner_state: Any, weights: Any,
              steps: int) -> Any:
  """Weight prediction: `weights` moved by the `steps` pending updates' estimate."""
  shift = drift(inner, inner_state, weights, steps)
  return jax.tree.map(lambda w, s: (w + s).astype(w.dtype), weights, shift)
