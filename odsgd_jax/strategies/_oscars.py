"""Oscars: semi-synchronous local SGD for heterogeneous clusters (a reconstruction)."""

import optax

from odsgd_jax import cluster, comm, domains
from odsgd_jax.strategies._registry import Example, StrategyDef, register
from odsgd_jax.strategies._rounds import (ADAPT_MODES, OUTER, local_sgd_log,
                                          local_sgd_model_params, local_sgd_round_end,
                                          round_based)


@domains.declared(period=domains.integer(1), adapt=domains.choice(*ADAPT_MODES), outer=OUTER,
                  compression=comm.COMPRESSION)
def oscars(
    inner: optax.GradientTransformation,
    *,
    axis_name: comm.AxisName,
    period: int,
    adapt: str = "fixed",
    outer: optax.GradientTransformation | None = None,
    compression: "str | comm.Communication | None" = None,
) -> optax.GradientTransformationExtraArgs:
  """Oscars: semi-synchronous local SGD for heterogeneous clusters (reconstruction).

  Only the paper's abstract is public (Huang, arXiv:2102.08550); this rule is a
  reconstruction. A round lasts H ticks of the cluster's clock; on a tick worker
  i steps only if the schedule marks it `active` (a slow worker finishes fewer
  steps; its update is zero otherwise). At the round's end the workers average
  with weights equal to the local steps they did (x their equal batches):

    xbar = sum_i n_i x_i / sum_i n_i ;  x_anchor <- xbar, or an outer step on
    x_anchor - xbar ;  x_i <- x_anchor

  and H adapts with the global view of the round:
    "fixed":  H stays `period`;
    "linear": H grows by one tick per round;
    "loss":   H_r = ceil(period * sqrt(L_r / L_0)), L_r the round's mean training
              loss over all workers' steps (AdaComm-style: H shrinks as loss falls).

  With every worker active on every tick and "fixed", this is `local_sgd`.

  Args:
    inner: each worker's local optimizer.
    axis_name: the worker axis (or tuple of axes).
    period: ticks in the first round, H_0.
    adapt: "fixed", "linear" or "loss".
    outer: optimizer on the pseudo-gradient; None is plain weighted averaging.
    compression: how the round-end model deltas travel (None, "topk:0.01", ...).

  Returns:
    An `optax.GradientTransformationExtraArgs`; `update` takes `schedule=` and
    `loss=` (this worker's training loss, for "loss").

  References:
    Huang, Oscars: Adaptive Semi-Synchronous Parallel Model for Distributed Deep
    Learning with Global View, arXiv:2102.08550; Wang & Joshi, Adaptive
    Communication Strategies to Achieve the Best Error-Runtime Trade-off in
    Local-Update SGD (AdaComm), arXiv:1810.08313.
  """
  return round_based(inner, axis_name=axis_name, period=period, outer=outer,
                     average_inner_state=False, adapt=adapt, heterogeneous=True,
                     compression=compression)


register(StrategyDef(
    "oscars", oscars, local_sgd_model_params, timeline=cluster.OscarsTimeline,
    sends=local_sgd_round_end, log=local_sgd_log, defaults={"period": 4, "adapt": "fixed"},
    examples=(Example({"period": 3, "adapt": "linear"}, 1, "anchor"),
              Example({"period": 4}, 1, "anchor"))))
