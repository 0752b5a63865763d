"""The claims' decision rules (odsgd_jax/study/verdicts.py) on synthetic data with known
answers."""

import math

import numpy as np
import pytest
from scipy import stats

from odsgd_jax.study import verdicts
from odsgd_jax.study.verdicts import (DOES_NOT_HOLD, HOLDS, INCONCLUSIVE, Arrival,
                                       accuracy_test, accuracy_verdicts, arrival, figure_verdict,
                                       level_verdict,
                                       holm, seeds_for_power, signed_rank, speed_test,
                                       speed_verdicts)

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
  [verdict] = accuracy_verdicts([accuracy_test(*_accuracies(0.0, 0.002), chance=0.1)])
  assert verdict.outcome == HOLDS


def test_a_loss_of_one_and_a_half_points_with_small_noise_does_not_hold():
  [verdict] = accuracy_verdicts([accuracy_test(*_accuracies(-0.015, 0.002), chance=0.1)])
  assert verdict.outcome == DOES_NOT_HOLD


def test_large_noise_is_inconclusive():
  test = accuracy_test(*_accuracies(-0.005, 0.03), chance=0.1)
  [verdict] = accuracy_verdicts([test])
  assert verdict.outcome == INCONCLUSIVE
  assert test.difference.half_width > 0.01  # the interval straddles both the margin and 0


def test_the_lower_bound_is_the_one_sided_t_bound():
  strategy, baseline = _accuracies(-0.003, 0.004)
  test = accuracy_test(strategy, baseline, chance=0.1)
  differences = np.asarray([strategy[s] - baseline[s] for s in SEEDS])
  sem = differences.std(ddof=1) / math.sqrt(len(differences))
  t95 = 1.7958848187036696  # Student t, 11 degrees of freedom, 0.95 quantile
  assert test.lower_bound == pytest.approx(differences.mean() - t95 * sem, rel=1e-9)
  assert test.difference.mean == pytest.approx(differences.mean())


def test_a_diverged_seed_counts_at_chance_accuracy_on_either_side():
  """Baseline 0.94 on every seed; the strategy equal on 11 and diverged on one: the
  differences are 0 and 0.1 - 0.94 = -0.84, mean -0.07 (7 points down, by hand)."""
  baseline = _seeds([0.94] * 12)
  strategy = dict(baseline)
  strategy[0] = None
  test = accuracy_test(strategy, baseline, chance=0.1)
  assert test.diverged == 1 and test.difference.n == len(SEEDS)
  assert test.difference.mean == pytest.approx(-0.84 / 12)
  [verdict] = accuracy_verdicts([test])
  assert verdict.outcome != HOLDS
  both = accuracy_test({**strategy, 1: None}, {**baseline, 1: None}, chance=0.1)
  assert both.difference.mean == pytest.approx(-0.84 / 12)  # seed 1: chance - chance


def test_a_strategy_that_diverges_on_most_seeds_does_not_hold():
  """Diverged on 10 of 12 seeds (was: those seeds left out, two seeds left, inconclusive):
  the mean difference is 10 x (0.1 - 0.94) / 12 = -0.70, far below the margin."""
  baseline = _seeds(0.94 + np.random.default_rng(3).normal(0, 0.003, 12))
  strategy = {seed: (None if seed < 10 else value) for seed, value in baseline.items()}
  test = accuracy_test(strategy, baseline, chance=0.1)
  assert test.diverged == 10
  assert test.difference.mean == pytest.approx(sum(0.1 - baseline[s] for s in range(10)) / 12)
  [verdict] = accuracy_verdicts([test])
  assert verdict.outcome == DOES_NOT_HOLD


def test_holm_can_turn_a_row_inconclusive():
  """A row just non-inferior on its own (p between 0.025 and 0.05) is not once a second
  row, with a larger p, joins the table: Holm doubles the smaller p."""
  for shift in np.linspace(-0.009, 0.0, 200):
    test = accuracy_test(*_accuracies(shift, 0.006, seed=1), chance=0.1)
    if 0.025 < test.p_noninferior < 0.05:
      break
  else:
    pytest.fail("no row with 0.025 < p < 0.05 found")
  noisy = accuracy_test(*_accuracies(0.0, 0.05, seed=2), chance=0.1)
  assert noisy.p_noninferior > test.p_noninferior
  alone, = accuracy_verdicts([test])
  beside, _ = accuracy_verdicts([test, noisy])
  assert (alone.outcome, beside.outcome) == (HOLDS, INCONCLUSIVE)


def _arrivals(times, reached=None, end=None):
  """{seed: Arrival}: reached at `times` (or, where not `reached`, censored there: the
  run's end), every run ending at `end` (default: the time itself for a censored seed,
  else twice the largest time)."""
  reached = reached or [True] * len(times)
  end = end or 2 * max(times)
  return {seed: Arrival(t, r, end if r else t)
          for seed, (t, r) in enumerate(zip(times, reached, strict=True))}


def test_arrival_is_the_first_evaluation_at_the_target_or_the_end_censored():
  rows = [{"sim_time": 1.0, "validation_accuracy": 0.5},
          {"sim_time": 2.0, "validation_accuracy": 0.91},
          {"sim_time": 3.0, "validation_accuracy": 0.95}]
  assert arrival(rows, 0.9, end_time=5.0) == Arrival(2.0, True, 5.0)
  assert arrival(rows, 0.99, end_time=5.0) == Arrival(5.0, False, 5.0)


def test_signed_rank_counts_sign_flips_by_hand():
  """[1, 2, -3]: ranks 1, 2, 3, W+ = 3; over the 8 sign flips W+ is 0, 1, 2, 3, 3, 4, 5,
  6, so P(W+ >= 3) = 5/8 and P(W+ <= 3) = 5/8 too (scipy's exact Wilcoxon agrees)."""
  assert signed_rank([1.0, 2.0, -3.0]) == pytest.approx((5 / 8, 5 / 8))
  assert signed_rank([1.0, 2.0, -3.0])[0] == pytest.approx(
      stats.wilcoxon([1.0, 2.0, -3.0], alternative="greater", method="exact").pvalue)
  assert signed_rank([math.inf, 1.0, 2.0]) == pytest.approx((1 / 8, 1.0))  # "never": a rank
  assert signed_rank([0.0, 0.0, 1.0]) == pytest.approx((1 / 2, 1.0))  # ties left out
  assert signed_rank([0.0]) == (1.0, 1.0)
  assert signed_rank([0.01] * 12)[0] == pytest.approx(2 ** -12)


def test_speedup_is_the_geometric_mean_with_censored_times_at_the_common_horizon():
  """The baseline's fourth seed never reaches by its end, 80; the strategy's run lasts
  longer (100) and reaches at 20: cut at 80, the ratio is 80 / 20 = 4, a lower bound."""
  baseline = _arrivals([10.0, 20.0, 40.0, 80.0], [True, True, True, False])
  strategy = _arrivals([5.0, 10.0, 20.0, 20.0], end=100.0)
  test = speed_test(strategy, baseline)
  # log ratios log 2, log 2, log 2, log 4: geometric mean 2^(5/4)
  assert test.speedup == pytest.approx(2 ** 1.25)
  assert (test.seeds, test.baseline_censored, test.strategy_censored, test.both_censored) \
      == (4, 1, 0, 0)
  logs = np.log([2, 2, 2, 4])
  half = 3.182446305284263 * logs.std(ddof=1) / 2  # t(3) 0.975 quantile x sem
  assert (test.low, test.high) == pytest.approx((math.exp(logs.mean() - half),
                                                 math.exp(logs.mean() + half)))
  # all four seeds faster by more than 5%: W+ is every rank, p = 1/16 (n = 4)
  assert test.p_faster == pytest.approx(1 / 16)


def _speed_row(strategy_times, baseline_times, strategy_reached=None, baseline_reached=None,
               strategy_end=None, baseline_end=None):
  return speed_test(_arrivals(strategy_times, strategy_reached, strategy_end),
                    _arrivals(baseline_times, baseline_reached, baseline_end))


FAST = [5.0, 5.2, 4.9, 5.1, 5.0, 4.8, 5.3, 5.0, 5.1, 4.9, 5.0, 5.2]
BASE = [10.0, 10.3, 9.8, 10.1, 10.0, 9.9, 10.2, 10.0, 9.7, 10.1, 10.0, 9.9]


def test_clearly_faster_at_every_target_holds():
  row = {target: _speed_row(FAST, BASE) for target in ("90%", "95%", "99%")}
  [verdict] = speed_verdicts([row], primary="95%")
  assert verdict.outcome == HOLDS
  assert row["95%"].p_faster == pytest.approx(2 ** -12)  # every seed faster: one flip of 4096
  assert verdict.p_value == pytest.approx(2 ** -12)


def test_faster_to_the_primary_target_but_slower_to_another_does_not_hold():
  row = {"95%": _speed_row(FAST, BASE), "99%": _speed_row(BASE, FAST)}
  [verdict] = speed_verdicts([row], primary="95%")
  assert verdict.outcome == DOES_NOT_HOLD and "slower by > 5% to the 99%" in verdict.reason
  # Holm over the row's two "against" tests: 2 x 2^-12
  assert verdict.p_value == pytest.approx(2 * 2 ** -12)


SAME = [10.0] * 7  # seven seeds reaching at the same time


def test_a_double_miss_is_a_tie_not_a_ratio_of_run_ends():
  """Seven equal seeds and five where neither arm reaches, the strategy's runs ending at
  100 and the baseline's at 150 (the old rule: 1.5 on those five, "holds", 1.19x). Cut at
  100, they are ties, left out of the tests: the speedup is exactly 1, and with the seven
  measured seeds below the minimum relevant 5% the claim is refuted: P(W+ <= 0) = 2^-7."""
  row = {"95%": _speed_row(SAME + [100.0] * 5, SAME + [150.0] * 5,
                           [True] * 7 + [False] * 5, [True] * 7 + [False] * 5,
                           strategy_end=100.0, baseline_end=150.0)}
  assert row["95%"].speedup == pytest.approx(1.0) and row["95%"].both_censored == 5
  assert row["95%"].p_faster == 1.0 and row["95%"].p_not_faster == pytest.approx(2 ** -7)
  [verdict] = speed_verdicts([row], primary="95%")
  assert verdict.outcome == DOES_NOT_HOLD and "not faster by > 5%" in verdict.reason


def test_double_misses_with_the_run_ends_reversed_do_not_make_a_faster_row_fail():
  """1.48x faster to the primary target on every seed; at 99% seven near-equal seeds and
  five double misses whose strategy runs end later (150 against 100: the old rule read
  them as 0.67x and found the row "does not hold")."""
  near = [10.0, 10.2, 9.8, 10.1, 9.9, 10.0, 10.3]
  row = {"95%": _speed_row([t / 1.48 for t in BASE], BASE),
         "99%": _speed_row(near + [150.0] * 5, SAME + [100.0] * 5,
                           [True] * 7 + [False] * 5, [True] * 7 + [False] * 5,
                           strategy_end=150.0, baseline_end=100.0)}
  ratios = np.log([10.0 / t for t in near])
  assert row["99%"].speedup == pytest.approx(math.exp(ratios.sum() / 12))
  assert row["95%"].speedup == pytest.approx(1.48)
  [verdict] = speed_verdicts([row], primary="95%")
  assert verdict.outcome == HOLDS


def test_a_censored_strategy_against_a_later_baseline_arrival_is_scored_by_its_real_bounds():
  """The review's case: the strategy's run ends at 80 s without arriving; the baseline's
  100 s run arrives at 90 s. The strategy needs more than 80 s, so the ratio 90 / T lies
  below 1.125 and may be anything under it: up to 12.5% faster, or never arriving. The
  old rule put the baseline at the horizon, a tie at best, and said "does not hold"
  (p < 0.001) on 12 such seeds; the real bounds say the seeds cannot tell."""
  censored = _speed_row([80.0] * 12, [90.0] * 12, [False] * 12, [True] * 12,
                        strategy_end=80.0, baseline_end=100.0)
  assert censored.strategy_censored == 12 and censored.both_censored == 0
  assert censored.p_not_faster == 1.0 and censored.p_faster == 1.0
  [verdict] = speed_verdicts([{"95%": censored}], primary="95%")
  assert verdict.outcome == INCONCLUSIVE
  # had the baseline arrived within 5% of the strategy's end, its best case is below the
  # minimum relevant speedup on every seed: "not faster" is shown, as it should be
  close = _speed_row([80.0] * 12, [83.0] * 12, [False] * 12, [True] * 12,
                     strategy_end=80.0, baseline_end=100.0)
  [verdict] = speed_verdicts([{"95%": close}], primary="95%")
  assert verdict.outcome == DOES_NOT_HOLD and verdict.p_value == pytest.approx(2 ** -12)


def test_targets_tied_on_p_name_the_primary_and_list_every_test_that_fired():
  """Uniformly 0.45x at every target: the three "against" tests have the same p (every
  seed slower, 2^-12, Holm x 3). The cell names the primary target's test, as the
  primary test decides, and lists all three; the old rule named the first, 90%."""
  slow = [t / 0.45 for t in BASE]
  row = {target: _speed_row(slow, BASE, strategy_end=100.0, baseline_end=100.0)
         for target in ("90%", "95%", "99%")}
  [verdict] = speed_verdicts([row], primary="95%")
  assert verdict.outcome == DOES_NOT_HOLD
  assert verdict.p_value == pytest.approx(3 * 2 ** -12)
  assert verdict.cell().startswith("**does not hold**: 0.45x to 95%, not faster by > 5%")
  assert verdict.cell().endswith("; also slower by > 5% to the 90% target (Holm p < 0.001) "
                                 "and slower by > 5% to the 99% target (Holm p < 0.001)")


def test_a_strategy_that_never_reaches_another_target_cannot_hold_or_look_faster():
  """Twice as fast to 95%. At 99% it never arrives on 6 of 12 seeds, its runs ending at
  60, where the baseline arrives at 80 (the old rule: capped times 60 against 80, 1.33x
  "faster" on those seeds, and "holds"). Cut at 60 those seeds are ties (the speedup is
  2^(6/12) = 1.41x), and never arriving where the baseline did blocks "holds"."""
  row = {"95%": _speed_row(FAST, BASE),
         "99%": _speed_row([20.0] * 6 + [60.0] * 6, [40.0] * 6 + [80.0] * 6,
                           [True] * 6 + [False] * 6, strategy_end=60.0, baseline_end=100.0)}
  assert row["99%"].speedup == pytest.approx(math.sqrt(2.0))
  assert row["99%"].strategy_censored == 6
  [verdict] = speed_verdicts([row], primary="95%")
  assert verdict.outcome == INCONCLUSIVE and "6 at 99%" in verdict.reason


def test_a_tiny_constant_gain_is_not_faster():
  """0.1% faster on every seed, deterministically (the old rule: "holds", p < 0.001):
  below the minimum relevant speedup on every seed, so the claim is refuted."""
  assert verdicts.MIN_SPEEDUP == 1.05
  row = {"95%": _speed_row([t / 1.001 for t in BASE], BASE)}
  assert row["95%"].format() == "1.00x" and row["95%"].p_faster == 1.0
  [verdict] = speed_verdicts([row], primary="95%")
  assert verdict.outcome == DOES_NOT_HOLD
  assert verdict.p_value == pytest.approx(2 ** -12)


def test_slower_at_another_target_needs_holm_to_refute_and_blocks_holding_alone():
  """At 99%, beyond the 5% minimum, the log ratios are 0.02 x rank, positive only at
  ranks 2 and 12: W+ = 14, P(W+ <= 14) = 107 / 4096 = 0.026 unadjusted. Holm over the
  row's two "against" tests doubles it to 0.052: not "does not hold" (an older rule said
  it was); unadjusted it still keeps the row from holding."""
  relevant = math.log(verdicts.MIN_SPEEDUP)
  logs = [0.02 * rank * (1 if rank in (2, 12) else -1) - relevant for rank in range(1, 13)]
  row = {"95%": _speed_row(FAST, BASE),
         "99%": _speed_row([10.0 * math.exp(-v) for v in logs], [10.0] * 12)}
  assert row["99%"].p_slower == pytest.approx(107 / 4096)
  [verdict] = speed_verdicts([row], primary="95%")
  assert verdict.outcome == INCONCLUSIVE and "before adjustment" in verdict.reason


def test_a_tiny_slowdown_at_another_target_is_no_evidence_of_slower():
  """Twice as fast to the primary and 99% targets on every seed, and 0.1% slower to the
  90% target on every seed, deterministically. 0.1% is below the minimum relevant
  difference, which applies to "slower" as to "faster": no test finds it slower (the old
  rule: p_slower 2^-12, "does not hold")."""
  row = {"90%": _speed_row([t * 1.001 for t in BASE], BASE),
         "95%": _speed_row([t / 2 for t in BASE], BASE),
         "99%": _speed_row([t / 2 for t in BASE], BASE)}
  assert row["90%"].p_slower == 1.0 and row["90%"].p_slower_worst == 1.0
  [verdict] = speed_verdicts([row], primary="95%")
  assert verdict.outcome == HOLDS and verdict.p_value == pytest.approx(2 ** -12)
  # 10% slower there is slower by more than the minimum, on every seed: refuted
  row["90%"] = _speed_row([t * 1.1 for t in BASE], BASE)
  [verdict] = speed_verdicts([row], primary="95%")
  assert verdict.outcome == DOES_NOT_HOLD and "slower by > 5% to the 90%" in verdict.reason


def test_ties_carry_no_evidence_in_the_shifted_tests():
  """One seed twice as fast and eleven where neither arm reaches by the common horizon.
  The eleven ties are left out of every test (the old rule put them at -log 1.05 in the
  shifted tests: p_not_faster 0.017 and "does not hold"); one seed cannot decide."""
  reached = [True] + [False] * 11
  row = {"95%": _speed_row([5.0] + [100.0] * 11, [10.0] + [100.0] * 11, reached, reached,
                           strategy_end=100.0, baseline_end=100.0)}
  assert row["95%"].both_censored == 11
  assert row["95%"].p_faster == pytest.approx(1 / 2) and row["95%"].p_not_faster == 1.0
  assert row["95%"].p_slower == 1.0
  [verdict] = speed_verdicts([row], primary="95%")
  assert verdict.outcome == INCONCLUSIVE


def test_a_cell_names_the_rule_that_decided_it():
  """A row faster at the primary target but blocked by seeds that never reach 99% says
  so, not the primary test's p alone."""
  row = {"95%": _speed_row(FAST, BASE),
         "99%": _speed_row([20.0] * 9 + [60.0] * 3, [40.0] * 12,
                           [True] * 9 + [False] * 3, strategy_end=60.0, baseline_end=100.0)}
  [verdict] = speed_verdicts([row], primary="95%")
  assert verdict.outcome == INCONCLUSIVE
  assert verdict.cell().startswith("**inconclusive**: 3 of 12 seeds never reach the 99% target")


def test_when_neither_reaches_the_speed_claim_is_inconclusive():
  never = [False] * 12
  row = {"95%": _speed_row(BASE, BASE, never, never)}
  [verdict] = speed_verdicts([row], primary="95%")
  assert verdict.outcome == INCONCLUSIVE and "neither" in verdict.reason


def test_no_difference_in_time_with_noise_is_inconclusive():
  rng = np.random.default_rng(0)
  noisy = list(np.asarray(BASE) * np.exp(rng.normal(0, 0.2, 12)))
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


def test_replication_chance_matches_simulated_fresh_seed_sets():
  """The chance that a fresh set of 12 seeds gives "holds" (or "does not hold") again,
  against 20,000 simulated sets of normal paired differences with the observed mean and
  SD, each t-tested at Holm's strictest level for 4 rows."""
  strategy, baseline = _accuracies(-0.004, 0.008, seed=3)
  test = accuracy_test(strategy, baseline, chance=0.1)
  chance = verdicts.replication(test, rows=4)
  rng = np.random.default_rng(0)
  draws = rng.normal(test.difference.mean, test.sd, (20_000, test.seeds))
  t = (draws.mean(1) + test.margin) / (draws.std(1, ddof=1) / math.sqrt(test.seeds))
  critical = stats.t.ppf(1 - 0.05 / 4, test.seeds - 1)
  assert chance.holds == pytest.approx(np.mean(t > critical), abs=0.01)
  assert chance.does_not_hold == pytest.approx(np.mean(t < -critical), abs=0.01)
  assert 0.2 < chance.holds < 0.9  # a case that can land either way
  # the seeds that "holds" needs for 80% are those of the power analysis at this difference
  assert chance.seeds_for_holds == seeds_for_power(test.sd, rows=4,
                                                   true_difference=test.difference.mean)
  assert verdicts.replication(accuracy_test(*_accuracies(-0.015, 0.003), chance=0.1),
                              rows=4).seeds_for_holds is None  # beyond the margin: never


def test_two_seed_sets_differ_by_a_welch_test_of_their_paired_differences():
  """The replication's check that its seed set behaves like the primary one: Welch's t on
  the two sets' paired differences, against the formula written out in NumPy."""
  primary = accuracy_test(*_accuracies(0.0, 0.006, seed=1), chance=0.1)
  shifted = accuracy_test(*_accuracies(-0.009, 0.008, seed=2), chance=0.1)
  (m1, s1, n1), (m2, s2, n2) = [(t.difference.mean, t.sd, t.seeds) for t in (primary, shifted)]
  v1, v2 = s1**2 / n1, s2**2 / n2
  t = (m1 - m2) / math.sqrt(v1 + v2)
  df = (v1 + v2) ** 2 / (v1**2 / (n1 - 1) + v2**2 / (n2 - 1))
  expected = 2 * stats.t.sf(abs(t), df)
  assert verdicts.seed_sets_differ(primary, shifted) == pytest.approx(expected, rel=1e-9)
  assert verdicts.seed_sets_differ(primary, shifted) < 0.05  # 0.9 points apart: they differ
  assert verdicts.seed_sets_differ(primary, primary) == pytest.approx(1.0)
