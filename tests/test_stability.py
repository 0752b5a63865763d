"""The stability harness finds the analytic stable step sizes (within 2%), and the delay
corrections widen them."""

import pytest

from odsgd_jax import study


@pytest.mark.parametrize("momentum,expected", [(0.9, 3.8), (0.5, 3.0), (0.0, 2.0)])
def test_synchronous_heavy_ball_is_stable_to_2_1_plus_mu(momentum, expected):
  assert study.largest_stable_step("ssgd", {}, momentum) == pytest.approx(expected, rel=0.02)


@pytest.mark.parametrize("strategy,options", [
    ("odsgd", {"local_lr": 0.0, "warmup_steps": 0, "inner_momentum": 0.9}),
    ("pseudo_sync", {"confidence": "fixed", "alpha": 1.0}),
    ("asgd", {}),  # two workers: each gradient lands one update late
])
@pytest.mark.parametrize("momentum,expected", [(0.9, 0.1), (0.5, 0.5), (0.0, 1.0)])
def test_a_one_step_delay_leaves_1_minus_mu(strategy, options, momentum, expected):
  options = {**options, "inner_momentum": momentum} if strategy != "ssgd" else options
  assert study.largest_stable_step(strategy, options, momentum) == pytest.approx(expected,
                                                                                 rel=0.02)


def test_smoothing_lowers_the_limit_and_replay_restores_the_synchronous_one():
  lagging = study.largest_stable_step("pseudo_sync", {"confidence": "fixed", "alpha": 0.5})
  assert lagging == pytest.approx(0.055, rel=0.02)
  for strategy, options in [("odsgd", {"local_lr": 0.0, "warmup_steps": 0,
                                       "local_optimizer": "replay"}),
                            ("pseudo_sync", {"confidence": "fixed", "alpha": 1.0,
                                             "correction": "replay"})]:
    assert study.largest_stable_step(strategy, options) == pytest.approx(3.8, rel=0.02)


def test_prediction_and_spike_compensation_widen_the_delayed_range():
  delayed = {"confidence": "fixed", "alpha": 1.0}
  plain = study.largest_stable_step("pseudo_sync", delayed)
  for correction in ("predict", "spike", "predict+spike"):
    corrected = study.largest_stable_step("pseudo_sync", {**delayed, "correction": correction})
    assert corrected > 2 * plain, correction
