"""The claims' decision rules (odsgd_jax/study/verdicts.py) on synthetic data with known
answers."""

import math

import numpy as np
import pytest

from odsgd_jax.study import verdicts
from odsgd_jax.study.verdicts import (DOES_NOT_HOLD, HOLDS, INCONCLUSIVE, Arrival,
                                       accuracy_test, accuracy_verdicts, arrival, figure_verdict,
                                       level_verdict,
                                       holm, seeds_for_power, speed_test, speed_verdicts)

SEEDS = range(12)


def _seeds(values):
  return dict(zip(SEEDS, values, strict=True))


def _accuracies(mean_difference, noise, seed=0):
  """A baseline around 0.94 and a strategy `mean_difference` off it, paired by seed."""
  rng = np.random.default_rng(seed)
  base = 0.94 + rng.normal(0, 0.003, len(SEEDS))
  return _seeds(base + mean_difference + rng.normal(0, noise, len(SEEDS))), _seeds(base)


def test_holm_matches_hand_computed_adjustments():
  # sorted 0.01, 0.03, 0.04 -> 3 x 0.01, max(0.03, 2 x 0.03), max(0.06, 1 x 0.04)
  assert holm([0.01, 0.04, 0.03]) == pytest.approx([0.03, 0.06, 0.06])
  assert holm([0.5, 0.001]) == pytest.approx([0.5, 0.002])
  assert holm([0.4, 0.9]) == pytest.approx([0.8, 0.9])  # monotone, capped at 1
  assert holm([0.6, 0.7, 0.01]) == pytest.approx([1.0, 1.0, 0.03])


def test_equal_strategies_are_non_inferior():
  [verdict] = accuracy_verdicts([accuracy_test(*_accuracies(0.0, 0.002))])
  assert verdict.outcome == HOLDS


def test_a_loss_of_one_and_a_half_points_with_small_noise_does_not_hold():
  [verdict] = accuracy_verdicts([accuracy_test(*_accuracies(-0.015, 0.002))])
  assert verdict.outcome == DOES_NOT_HOLD


def test_large_noise_is_inconclusive():
  test = accuracy_test(*_accuracies(-0.005, 0.03))
  [verdict] = accuracy_verdicts([test])
  assert verdict.outcome == INCONCLUSIVE
  assert test.difference.half_width > 0.01  # the interval straddles both the margin and 0


def test_the_lower_bound_is_the_one_sided_t_bound():
  strategy, baseline = _accuracies(-0.003, 0.004)
  test = accuracy_test(strategy, baseline)
  differences = np.asarray([strategy[s] - baseline[s] for s in SEEDS])
  sem = differences.std(ddof=1) / math.sqrt(len(differences))
  t95 = 1.7958848187036696  # Student t, 11 degrees of freedom, 0.95 quantile
  assert test.lower_bound == pytest.approx(differences.mean() - t95 * sem, rel=1e-9)
  assert test.difference.mean == pytest.approx(differences.mean())


def test_a_strategy_that_diverged_on_a_seed_cannot_hold():
  strategy, baseline = _accuracies(0.0, 0.002)
  strategy[0] = None  # diverged: no final accuracy
  test = accuracy_test(strategy, baseline)
  assert test.diverged == 1 and test.difference.n == len(SEEDS) - 1
  assert test.p_noninferior < 0.05  # the other seeds alone would make it hold
  [verdict] = accuracy_verdicts([test])
  assert verdict.outcome == INCONCLUSIVE and "1 seed(s) diverged" in verdict.reason


def test_holm_can_turn_a_row_inconclusive():
  """A row just non-inferior on its own (p between 0.025 and 0.05) is not once a second
  row, with a larger p, joins the table: Holm doubles the smaller p."""
  for shift in np.linspace(-0.009, 0.0, 200):
    test = accuracy_test(*_accuracies(shift, 0.006, seed=1))
    if 0.025 < test.p_noninferior < 0.05:
      break
  else:
    pytest.fail("no row with 0.025 < p < 0.05 found")
  noisy = accuracy_test(*_accuracies(0.0, 0.05, seed=2))
  assert noisy.p_noninferior > test.p_noninferior
  alone, = accuracy_verdicts([test])
  beside, _ = accuracy_verdicts([test, noisy])
  assert (alone.outcome, beside.outcome) == (HOLDS, INCONCLUSIVE)


def _arrivals(times, reached=None):
  reached = reached or [True] * len(times)
  return {seed: Arrival(t, r) for seed, (t, r) in enumerate(zip(times, reached, strict=True))}


def test_arrival_is_the_first_evaluation_at_the_target_or_the_end_censored():
  rows = [{"sim_time": 1.0, "validation_accuracy": 0.5},
          {"sim_time": 2.0, "validation_accuracy": 0.91},
          {"sim_time": 3.0, "validation_accuracy": 0.95}]
  assert arrival(rows, 0.9, end_time=5.0) == Arrival(2.0, True)
  assert arrival(rows, 0.99, end_time=5.0) == Arrival(5.0, False)


def test_speedup_is_the_geometric_mean_over_all_seeds_censored_ones_included():
  baseline = _arrivals([10.0, 20.0, 40.0, 80.0], [True, True, True, False])
  strategy = _arrivals([5.0, 10.0, 20.0, 20.0])
  test = speed_test(strategy, baseline)
  # log ratios log 2, log 2, log 2, log 4: geometric mean 2^(5/4)
  assert test.speedup == pytest.approx(2 ** 1.25)
  assert (test.seeds, test.baseline_censored, test.strategy_censored, test.both_censored) \
      == (4, 1, 0, 0)
  logs = np.log([2, 2, 2, 4])
  half = 3.182446305284263 * logs.std(ddof=1) / 2  # t(3) 0.975 quantile x sem
  assert (test.low, test.high) == pytest.approx((math.exp(logs.mean() - half),
                                                 math.exp(logs.mean() + half)))


def _speed_row(strategy_times, baseline_times, strategy_reached=None, baseline_reached=None):
  return speed_test(_arrivals(strategy_times, strategy_reached),
                    _arrivals(baseline_times, baseline_reached))


FAST = [5.0, 5.2, 4.9, 5.1, 5.0, 4.8, 5.3, 5.0, 5.1, 4.9]
BASE = [10.0, 10.3, 9.8, 10.1, 10.0, 9.9, 10.2, 10.0, 9.7, 10.1]


def test_clearly_faster_at_every_target_holds():
  row = {target: _speed_row(FAST, BASE) for target in ("90%", "95%", "99%")}
  [verdict] = speed_verdicts([row], primary="95%")
  assert verdict.outcome == HOLDS


def test_faster_to_the_primary_target_but_slower_to_another_does_not_hold():
  row = {"95%": _speed_row(FAST, BASE), "99%": _speed_row(BASE, FAST)}
  [verdict] = speed_verdicts([row], primary="95%")
  assert verdict.outcome == DOES_NOT_HOLD and "99%" in verdict.reason


def test_a_strategy_whose_seeds_never_reach_cannot_be_called_faster():
  """Two of its seeds are censored early (capped times that flatter it): even a
  significant speedup is inconclusive."""
  reached = [True] * 8 + [False, False]
  row = {"95%": _speed_row(FAST, BASE, strategy_reached=reached)}
  assert row["95%"].p_faster < 0.05 and row["95%"].strategy_censored == 2
  [verdict] = speed_verdicts([row], primary="95%")
  assert verdict.outcome == INCONCLUSIVE and "never reached" in verdict.reason


def test_when_neither_reaches_the_speed_claim_is_inconclusive():
  never = [False] * 10
  row = {"95%": _speed_row(BASE, BASE, never, never)}
  [verdict] = speed_verdicts([row], primary="95%")
  assert verdict.outcome == INCONCLUSIVE and "neither" in verdict.reason


def test_no_difference_in_time_is_inconclusive_not_does_not_hold():
  rng = np.random.default_rng(0)
  noisy = list(np.asarray(BASE) * np.exp(rng.normal(0, 0.2, 10)))
  [verdict] = speed_verdicts([{"95%": _speed_row(noisy, BASE)}], primary="95%")
  assert verdict.outcome == INCONCLUSIVE


def test_a_papers_figure_is_reproduced_within_two_points_only():
  assert figure_verdict({64: 0.92, 128: 0.91}, {64: 0.934, 128: 0.905}).outcome == HOLDS
  missed = figure_verdict({64: 1.0, 128: 0.995}, {64: 0.934, 128: 0.905}, upper_bound=True)
  assert missed.outcome == DOES_NOT_HOLD
  assert "+6.6 points at 64" in missed.reason and "+9.0 points at 128" in missed.reason
  assert "upper bound" in missed.reason


def test_a_gap_inside_the_clocks_error_is_inconclusive():
  """Gaps of +0.6 and +3.3 points: beyond the 2-point tolerance, but inside a clock error
  of ±4 points (inconclusive) and outside one of ±3 (not reproduced)."""
  measured, paper = {64: 0.940, 128: 0.938}, {64: 0.934, 128: 0.905}
  inside = figure_verdict(measured, paper, band=0.04)
  assert inside.outcome == INCONCLUSIVE and "±4.0 points" in inside.reason
  beyond = figure_verdict(measured, paper, band=0.03)
  assert beyond.outcome == DOES_NOT_HOLD and "beyond the clock's error of ±3.0" in beyond.reason


def test_a_level_claim_with_the_clocks_error():
  """"Near-linear" as at least 90%: 95% ± 4 holds (91% >= 90%), 85% ± 4 does not (89% <
  90%), 92% ± 4 cannot be told."""
  assert level_verdict(0.95, 0.90, 0.04, "x").outcome == HOLDS
  assert level_verdict(0.85, 0.90, 0.04, "x").outcome == DOES_NOT_HOLD
  assert level_verdict(0.92, 0.90, 0.04, "x").outcome == INCONCLUSIVE


@pytest.mark.parametrize("effect,expected", [(1.0, 8), (0.5, 27)])
def test_seeds_for_power_matches_the_textbook_one_sample_t(effect, expected):
  """One-sided one-sample t at alpha 0.05, power 0.8: n = 8 for an effect of 1 sd and
  27 for 0.5 sd (Cohen 1988; G*Power gives the same)."""
  assert seeds_for_power(sd=1.0, margin=effect) == expected


def test_more_rows_need_more_seeds():
  assert seeds_for_power(0.008, rows=8) > seeds_for_power(0.008, rows=1)
  assert verdicts.MARGIN == 0.01 and verdicts.ALPHA == 0.05
