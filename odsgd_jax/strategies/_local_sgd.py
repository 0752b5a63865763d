"""Local SGD: workers step alone, and average every `period` steps."""

import optax

from odsgd_jax import cluster, comm, domains
from odsgd_jax.strategies._registry import Example, StrategyDef, register
from odsgd_jax.strategies._rounds import (OUTER, local_sgd_log, local_sgd_model_params,
                                          local_sgd_round_end, round_based)


@domains.declared(period=domains.integer(1), outer=OUTER, average_inner_state=domains.FLAG,
                  compression=comm.COMPRESSION)
def local_sgd(
    inner: optax.GradientTransformation,
    *,
    axis_name: comm.AxisName,
    period: int,
    outer: optax.GradientTransformation | None = None,
    average_inner_state: bool = False,
    compression: "str | comm.Communication | None" = None,
) -> optax.GradientTransformationExtraArgs:
  """Local SGD: every worker steps alone; every `period` steps they average.

    x_i <- x_i + inner(g_i, s_i, x_i)                         every step, own state s_i
    every `period` steps:  xbar = mean_i x_i
      outer=None:  x_anchor <- xbar                           (plain averaging)
      otherwise:   x_anchor <- x_anchor + outer(x_anchor - xbar)   (DiLoCo-style)
      x_i <- x_anchor ;  s_i <- mean_i s_i if average_inner_state

  `period=1` with SGD inner and plain averaging is ssgd. The collectives run only
  on round-end steps (inside `lax.cond`).

  Args:
    inner: each worker's local optimizer.
    axis_name: the worker axis (or tuple of axes).
    period: local steps per round, H.
    outer: optimizer applied to the pseudo-gradient x_anchor - xbar, e.g.
      `optax.sgd(0.7, momentum=0.9, nesterov=True)`; None is plain averaging.
    average_inner_state: also average the inner optimizer states at a round end.
    compression: how the round-end model deltas travel (None, "topk:0.01", ...).

  Returns:
    An `optax.GradientTransformationExtraArgs`.

  References:
    Stich, Local SGD Converges Fast and Communicates Little, arXiv:1805.09767;
    Douillard et al., DiLoCo, arXiv:2311.08105.
  """
  return round_based(inner, axis_name=axis_name, period=period, outer=outer,
                     average_inner_state=average_inner_state, adapt="fixed",
                     heterogeneous=False, compression=compression)


register(StrategyDef(
    "local_sgd", local_sgd, local_sgd_model_params, timeline=cluster.LocalSgdTimeline,
    sends=local_sgd_round_end, log=local_sgd_log, defaults={"period": 4},
    examples=(Example({"period": 3}, 1, "anchor"),
              Example({"period": 4, "outer": optax.sgd(0.7, momentum=0.9)}, 2,
                      "+ outer momentum"))))
