"""A strategy written in one place (this file) and registered with one line runs through
training, the simulated clock and a study, with no other file of the package changed."""

from typing import Any, NamedTuple

import jax
import jax.numpy as jnp
import optax
import pytest

from configs import default
from odsgd_jax import cluster, comm, study
from odsgd_jax.strategies import STRATEGIES, StrategyDef, ssgd_model_params
from odsgd_jax.train import train_and_evaluate


class SignState(NamedTuple):
  inner_state: Any
  communication: Any  # compression state or None


def sign_ssgd(inner: optax.GradientTransformation, *, axis_name: comm.AxisName,
              scale: float = 0.1, compression: str | None = None):
  """Synchronous SGD on the mean of the workers' gradient signs (times `scale`)."""
  inner = optax.with_extra_args_support(inner)
  communication = comm.parse_communication(compression)

  def init_fn(params):
    return SignState(inner.init(params), comm.init_state(communication, params))

  def update_fn(grads, state, params=None, **extra_args):
    del extra_args
    signs = jax.tree.map(lambda g: scale * jnp.sign(g), grads)
    mean, comm_state = comm.exchange(communication, signs, state.communication, axis_name)
    updates, inner_state = inner.update(mean, state.inner_state, params)
    return updates, SignState(inner_state, comm_state)

  return optax.GradientTransformationExtraArgs(init_fn, update_fn)


@pytest.fixture
def registered(monkeypatch):
  monkeypatch.setitem(STRATEGIES, "sign_ssgd", StrategyDef(  # the one registry line
      make=sign_ssgd, model_params=ssgd_model_params, timeline=cluster.SynchronousTimeline,
      communication_state=lambda state: state.communication))


def test_a_new_strategy_trains_and_is_timed_like_its_timeline(registered, data_dir, tmp_path):
  config = default.get_config("sign_ssgd,runlocal")
  config.data.data_dir = data_dir
  assert config.strategy.to_dict() == {"name": "sign_ssgd", "scale": 0.1}  # its defaults
  summary = train_and_evaluate(config, str(tmp_path / "run"))
  assert summary["steps"] == 20 and summary["test_accuracy"] > 0.15  # it learns
  network = cluster.Network(bandwidth=config.cluster.bandwidth, latency=config.cluster.latency)
  tick = config.cluster.step_time + network.allreduce_time(8, summary["sim_message_bytes"])
  assert summary["sim_time_s"] == pytest.approx(20 * tick)  # a model below one bucket: no overlap
  compressed = default.get_config("sign_ssgd,runlocal")
  compressed.data.data_dir = data_dir
  compressed.strategy.compression = "topk:0.1"
  assert train_and_evaluate(compressed, str(tmp_path / "topk"))["bits_sent_per_step"] < (
      summary["bits_sent_per_step"] / 5)


def test_a_new_strategy_runs_in_a_study(registered, data_dir, tmp_path):
  specs = study.strategy_specs("configs/default.py:steps=6", ["ssgd", "sign_ssgd"], [0, 1],
                               [("data.data_dir", data_dir), ("train.eval_every", 3)])
  results = study.run_study(specs, str(tmp_path))
  groups, _ = study.summarize(results, "ssgd")
  assert [g.label for g in groups] == ["ssgd", "sign_ssgd"]
  assert groups[1].versus.difference.n == 2 and groups[1].accuracy.n == 2
