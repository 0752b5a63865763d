"""Equal-time budgets: the clock counted before training agrees with the clock of a real
run, tick for tick, for every kind of timeline the claims compare."""

import itertools

import pytest

from odsgd_jax import study
from odsgd_jax.strategies._rounds import round_ends

CLUSTER = [("cluster.preset", "10gbe"), ("cluster.workload", "resnet50_v100")]


def test_rounds_end_on_each_rounds_last_tick():
  assert list(itertools.islice(round_ends(3), 7)) == [False, False, True] * 2 + [False]
  # "linear": rounds of 2, 3, 4 ticks
  assert [i for i, end in enumerate(itertools.islice(round_ends(2, "linear"), 9)) if end] \
      == [1, 4, 8]
  with pytest.raises(ValueError, match="follow the loss"):
    round_ends(4, "loss")


@pytest.mark.parametrize("strategy,options", [
    ("ssgd", CLUSTER), ("odsgd", CLUSTER), ("asgd", CLUSTER), ("local_sgd", CLUSTER),
    ("oscars", (*CLUSTER, ("strategy.adapt", "linear"), ("strategy.period", 2))),
    # no workload: the config's step time and the trained model's message (Results tables)
    ("ssgd", ()), ("ssp", ()), ("pseudo_sync", ()), ("gossip", ()),
    ("easgd", (("strategy.period", 3),)), ("oscars", ()),
])
def test_the_counted_time_is_the_time_a_real_run_spends(strategy, options, data_dir, tmp_path):
  """A short run on the heterogeneous cluster (asgd's, ssp's and oscars' schedules follow
  the clock; local SGD's and oscars' rounds decide when messages travel): its simulated
  time after training equals the time counted before it."""
  common = [("data.data_dir", data_dir), ("data.name", "mnist1d"), ("train.eval_every", 100),
            *options]
  [spec] = study.strategy_specs("configs/oscars_heterogeneous.py:steps=11", [strategy], [3],
                                common)
  [result] = study.run_study([spec], str(tmp_path))
  assert result.summary["sim_time_s"] == pytest.approx(study.simulated_time(spec.build(), 11),
                                                       rel=1e-9)


def test_a_cheaper_strategy_gets_the_ticks_the_baselines_time_buys():
  """On the heterogeneous cluster ssgd waits for the slowest worker every tick; oscars
  does not, so in ssgd's time it takes several times the steps. asgd's per-tick time is
  shorter too. Each budget is the fewest ticks that reach ssgd's time, never fewer than
  the run's own steps."""
  specs = study.strategy_specs("configs/oscars_heterogeneous.py:steps=40",
                               ["ssgd", "oscars", "odsgd"], [0, 1], CLUSTER)
  budgeted = {(s.label, s.seed): s.build() for s in study.equal_time_specs(specs)}
  for seed in (0, 1):
    ssgd = budgeted["ssgd", seed]
    assert ssgd.train.num_steps == 40
    seconds = study.simulated_time(ssgd, 40)
    oscars = budgeted["oscars", seed]
    steps = oscars.train.num_steps
    assert steps > 2 * 40
    assert study.simulated_time(oscars, steps) >= seconds > study.simulated_time(oscars, steps - 1)
    # odsgd is no cheaper per tick than overlapped ssgd here: it keeps its own 40 steps
    assert budgeted["odsgd", seed].train.num_steps == 40
  # each seed its own noise, so its own time
  assert study.simulated_time(budgeted["ssgd", 0], 40) != study.simulated_time(
      budgeted["ssgd", 1], 40)


def test_a_time_unknown_before_training_is_refused_by_name():
  base = study.strategy_specs("configs/default.py:steps=5", ["ssgd"], [0], CLUSTER)
  measured = study.strategy_specs("configs/default.py:steps=5", ["ssgd", "odsgd"], [0],
                                  [("cluster.step_time", 0.0)])
  with pytest.raises(study.StudyInputError, match="set cluster.workload"):
    study.equal_time_specs(measured)
  compressed = study.strategy_specs("configs/default.py:steps=5", ["odsgd"], [0],
                                    CLUSTER + [("strategy.compression", "topk:0.01")])
  with pytest.raises(study.StudyInputError, match="compression"):
    study.equal_time_specs(base + compressed)
  by_loss = study.strategy_specs("configs/oscars_heterogeneous.py:steps=5", ["oscars"], [0],
                                 CLUSTER + [("strategy.adapt", "loss")])
  with pytest.raises(study.StudyInputError, match="follow the loss"):
    study.equal_time_specs(base + by_loss)
  with pytest.raises(study.StudyInputError, match="no ssgd run of seed 1"):
    study.equal_time_specs(base + study.strategy_specs("configs/default.py:steps=5",
                                                       ["odsgd"], [1], CLUSTER))
