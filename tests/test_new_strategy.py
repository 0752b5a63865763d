"""A strategy written in one place (this file) and registered with the public function
runs through training, the simulated clock, a study and every test parametrized over
the registry, with no other file changed.

It registers on import; tests/conftest.py imports this module before any test module is
collected, so the tables over `STRATEGIES` include it: tests/test_conformance.py (every
check), tests/test_state_size.py (its example's state), tests/test_exact_math.py (its
NumPy reference, added below), tests/test_domains.py (its declared options),
tests/test_config.py (its offline configs) and tests/test_train.py (resume bit for bit,
one compilation per run).
"""

from typing import Any, NamedTuple

import jax
import jax.numpy as jnp
import numpy as np
import optax
import pytest

from configs import default
from odsgd_jax import cluster, comm, domains, strategies, study
from odsgd_jax.train import train_and_evaluate
from tests import numpy_reference as ref


class ClipState(NamedTuple):
  inner_state: Any
  communication: Any  # compression state or None


@domains.declared(limit=domains.real(0, low_open=True), compression=comm.COMPRESSION)
def clip_ssgd(inner: optax.GradientTransformation, *, axis_name: comm.AxisName,
              limit: float = 1.0, compression: str | None = None):
  """Synchronous SGD on the mean of the workers' gradients, each clipped to [-limit, limit]
  coordinate by coordinate (near a minimum, where gradients are small: ssgd)."""
  inner = optax.with_extra_args_support(inner)
  communication = comm.parse_communication(compression)

  def init_fn(params):
    return ClipState(inner.init(params), comm.init_state(communication, params))

  def update_fn(grads, state, params=None, **extra_args):
    del extra_args
    clipped = jax.tree.map(lambda g: jnp.clip(g, -limit, limit), grads)
    mean, comm_state = comm.exchange(communication, clipped, state.communication, axis_name)
    updates, inner_state = inner.update(mean, state.inner_state, params)
    return updates, ClipState(inner_state, comm_state)

  return optax.GradientTransformationExtraArgs(init_fn, update_fn)


def clip_ssgd_reference(grad, x0, n, t, inner, schedules, limit=1.0):
  """NumPy: x <- x + inner(mean_i clip(g_i, -limit, limit)), every worker the same x."""
  del schedules
  x, s, history = x0.copy(), inner.init(x0), []
  for tick in range(t):
    g = np.mean([np.clip(grad(tick, i, x)[0], -limit, limit) for i in range(n)], axis=0)
    u, s = inner.update(g, s)
    x = x + u
    history.append([x.copy() for _ in range(n)])
  return np.array(history), x


strategies.register(strategies.StrategyDef(  # the one registration
    "clip_ssgd", clip_ssgd, strategies.ssgd_model_params, timeline=cluster.SynchronousTimeline,
    sends=strategies.EVERY_TICK,
    examples=(strategies.Example({"limit": 0.5}, 0, "nothing: the inner state only"),)))
ref.add_case("clip_ssgd", "clip_ssgd", {"limit": 0.2},  # clips some least-squares gradients
             lambda p, inner, sch: clip_ssgd_reference(*p, inner, sch, limit=0.2))


def test_registering_another_definition_under_a_taken_name_is_refused():
  again = strategies.StrategyDef("clip_ssgd", clip_ssgd, strategies.ssgd_model_params,
                                 examples=(strategies.Example({}, 0, ""),))
  with pytest.raises(ValueError, match="already registered"):
    strategies.register(again)
  undeclared = strategies.StrategyDef("plain_ssgd", lambda inner, *, axis_name, limit=1.0: inner,
                                      strategies.ssgd_model_params,
                                      examples=(strategies.Example({}, 0, ""),))
  with pytest.raises(ValueError, match=r"declares no domain for \['limit'\]"):
    strategies.register(undeclared)
  assert "plain_ssgd" not in strategies.STRATEGIES


def test_a_strategy_sending_on_some_ticks_is_refused_under_a_timeline_charging_every_tick():
  # local SGD's round ends under ssgd's timeline: every tick would be charged an all-reduce
  for timeline in (cluster.SynchronousTimeline, cluster.PipelinedTimeline):
    local_sgd = strategies.STRATEGIES["local_sgd"]
    periodic = strategies.StrategyDef(
        "periodic_ssgd", local_sgd.make, local_sgd.model_params, timeline=timeline,
        sends=local_sgd.sends,
        examples=(strategies.Example({"period": 2}, 0, ""),))
    with pytest.raises(ValueError, match=rf"strategy 'periodic_ssgd': sends='local_sgd_round_end'"
                                         rf".*{timeline.__name__} charges a message on every"):
      strategies.register(periodic)
  assert "periodic_ssgd" not in strategies.STRATEGIES
  assert [name for name, d in strategies.STRATEGIES.items()
          if d.sends != strategies.EVERY_TICK and not d.timeline.honours_round_ends] == []


def test_a_new_strategy_trains_and_is_timed_like_its_timeline(data_dir, tmp_path):
  config = default.get_config("clip_ssgd,runlocal")
  config.data.data_dir = data_dir
  assert config.strategy.to_dict() == {"name": "clip_ssgd", "limit": 1.0}  # its defaults
  summary = train_and_evaluate(config, str(tmp_path / "run"))
  # No gradient coordinate of these 20 steps exceeds 1: clip_ssgd is ssgd, bit for bit,
  # which learns (0.23 against chance 0.10)
  baseline = default.get_config("ssgd,runlocal")
  baseline.data.data_dir = data_dir
  ssgd_summary = train_and_evaluate(baseline, str(tmp_path / "ssgd"))
  assert summary["steps"] == 20 and summary["test_accuracy"] == ssgd_summary["test_accuracy"]
  assert ssgd_summary["test_accuracy"] > 0.18
  # its clock is its timeline's, noise and node contention included
  spec = cluster.from_config(config.cluster, config.cluster.step_time,
                             samples_per_step=config.data.batch_size // 8)
  timeline = cluster.SynchronousTimeline(spec.workers, spec.network,
                                         summary["sim_message_bytes"], spec.overlap)
  expected = sum(timeline.cost(tick).duration for tick in range(20))
  assert summary["sim_time_s"] == pytest.approx(expected)
  network = cluster.Network(bandwidth=config.cluster.bandwidth, latency=config.cluster.latency)
  noiseless = config.cluster.step_time + network.allreduce_time(8, summary["sim_message_bytes"])
  assert expected > 20 * noiseless  # the slowest of 8 noisy workers sets each tick
  compressed = default.get_config("clip_ssgd,runlocal")
  compressed.data.data_dir = data_dir
  compressed.strategy.compression = "topk:0.1"
  assert train_and_evaluate(compressed, str(tmp_path / "topk"))["bits_sent_per_step"] < (
      summary["bits_sent_per_step"] / 5)


def test_a_new_strategy_runs_in_a_study(data_dir, tmp_path):
  specs = study.strategy_specs("configs/default.py:steps=6", ["ssgd", "clip_ssgd"], [0, 1],
                               [("data.data_dir", data_dir), ("train.eval_every", 3)])
  results = study.run_study(specs, str(tmp_path))
  groups = study.summarize(results, "ssgd")
  assert [g.label for g in groups] == ["ssgd", "clip_ssgd"]
  assert groups[1].versus.difference.n == 2 and groups[1].score.n == 2
