"""Do the papers' claims hold here? Runs the studies behind each claim and writes the
generated section "claims" of README.md.

  python scripts/claims.py [--data mnist1d,fashion_mnist,kjv] [--seeds 0-11] [--resume]
                           [--readme] [--replication_seeds 40-51] [--replicate mnist1d]

One row per claim of the seed papers (OD-SGD; pseudo-synchronous SGD; Oscars) and a
verdict (holds / does not hold / inconclusive) decided by the rules of
odsgd_jax/study/verdicts.py, written down in docs/results.md ("How a claim is decided",
with the history of their revisions): non-inferiority at a 1-point margin for "similar
accuracy" (and at 0.5 points beside it), time to targets for "faster" (every strategy
trained for at least ssgd's simulated time, each seed scored by its real bounds, a relevant
difference of at least 5% either way), Holm across the rows, a paper's figure within 2 points.
The defaults' claims are decided again on --replication_seeds (fixed before any run,
disjoint from --seeds and the pilots) for the workloads of --replicate, beside the primary
seeds; each accuracy verdict states its chance of coming out the same on a fresh seed set.

The trained claims are decided on each workload of --data (mnist1d: MNIST-1D with CNN1D,
configs/default.py; fashion_mnist: Fashion-MNIST with LeNet-5, configs/fashion_mnist_lenet.py)
twice: with every strategy's defaults, and tuned, with the settings scripts/tune.py chose
(read from <output>/tuned.json; mnist1d's runs are in --output, another workload's in a
folder of its name inside it), each evaluated every tuning.CLAIMS_EVAL_EVERY steps of its
workload unless --eval_every says otherwise. Final accuracy is read on test, targets and times on
validation; the targets are fractions of ssgd's final validation accuracy on pilot seeds
that are not among the compared ones. Times come from the simulated clock timing a real
model's step and message (--workload) on a named network (--preset), the same for every
strategy. The language model (kjv: the King James Bible with a transformer and AdamW,
configs/kjv_transformer.py) is decided at its defaults only, on its own fresh seeds, by its
final validation loss and times to fixed loss levels, timed by its config's clock (GPT-2
small on 10 GbE); its rules were fixed before its runs (docs/results.md, "The language
model's column"). Writes README.md's section "claims" and docs/results.md's "claims_detail".
"""

import dataclasses
import json
import os

import numpy as np

from odsgd_jax import study
from odsgd_jax.cluster import PRESETS, WORKLOADS, Overlap
from odsgd_jax.study import _tuning as tuning
from odsgd_jax.cluster import validation as clock_validation
from odsgd_jax.study import verdicts

PAPER_SCALING = {64: 0.934, 128: 0.905}  # pseudo-sync paper: weak-scaling efficiency on Tianhe-2
# "Near-linear" strong scaling at 128 nodes, read as an efficiency of at least the paper's
# own weak-scaling figure there, rounded down (docs/results.md, "How a claim is decided").
NEAR_LINEAR = 0.90


def flags(overrides) -> str:
  return " ".join(f"--set {field}={value}" for field, value in overrides)


def accuracy_cell(group: study.Group, base: study.Group, test: verdicts.AccuracyTest,
                  split: str = "test") -> str:
  """The final values compared for "similar" (`split`'s) and their paired difference, in
  the task's unit (a loss's difference: + is lower)."""
  metric = group.target
  note = f" ({group.diverged} of {len(group.runs)} diverged)" if group.diverged else ""
  if split == "test" and metric.higher_is_better:  # the image columns, as they always read
    return (f"test accuracy {group.label} {group.score.format(4)}{note} vs {base.label} "
            f"{base.score.format(4)}: {test.difference.format(1, 100, sign=True)} points")

  def final(g: study.Group) -> str:
    values = [metric.oriented(v) for v in split_values(g, split).values() if v is not None]
    return study.mean_ci(values).format(metric.digits + 1)

  lower = "" if metric.higher_is_better else f", + = {metric.name} lower"
  return (f"{split} {metric.name} {group.label} {final(group)}{note} vs {base.label} "
          f"{final(base)}: {test.difference.format(metric.digits, metric.scale, sign=True)} "
          f"{metric.unit}{lower}")


def split_values(group: study.Group, split: str) -> dict[int, float | None]:
  """{seed: final score on `split`} ("test" or "validation"), oriented as the verdicts read."""
  return group.per_seed if split == "test" else group.validation


def speed_cell(row: dict[str, verdicts.SpeedTest], goals: dict[str, float], versus: str,
               arms: tuple[study.Group, study.Group]) -> str:
  times = " vs ".join(f"{g.label} {g.sim_time.format(1)}" for g in arms)
  return f"simulated time of the runs (s) {times}; speedup over {versus} " + "; ".join(
      f"to {name} ({goals[name]:.4f}): {row[name].format()}" for name in goals)


def time_spread(group: study.Group) -> float:
  """How much a group's runs' simulated times vary over the seeds (SD over mean): the
  cluster noise each seed draws, the part of it that the speedup intervals carry."""
  times = [r.summary["sim_time_s"] for r in group.runs if r.summary]
  return float(np.std(times, ddof=1) / np.mean(times)) if len(times) > 1 else 0.0


def timing_noise(groups: dict[str, study.Group]) -> str:
  return ", ".join(f"{name} {100 * time_spread(g):.2f}%" for name, g in groups.items())


@dataclasses.dataclass
class Column:
  """One workload under one setting (defaults or tuned): a short cell per trained claim, in
  TRAINED_CLAIMS' order, and the detailed rows (measured, verdict, at the sensitivity
  margin, chance of replicating, command); `resolution`: the worst relative resolution of
  a time to the primary target among its runs; `resolutions`: at every target, each arm's
  and each compared ratio's (`study.resolution_lines`)."""

  title: str
  cells: list[str]
  details: list[list[str]]
  note: str
  resolution: float = float("nan")
  resolutions: list[str] = dataclasses.field(default_factory=list)
  spread: float = 0.0  # the largest `time_spread` of its groups
  accuracy_tests: list[verdicts.AccuracyTest] = dataclasses.field(default_factory=list)
  agreement: list[str] = dataclasses.field(default_factory=list)  # a replication's, per row
  seed_count: int = 0
  sensitivity_header: str = ""
  rule: str = ""  # how a workload not read as the image columns are is decided


TRAINED_CLAIMS = [
    ("OD-SGD", "accuracy similar to or slightly better than SSGD"),
    ("OD-SGD", "training faster than SSGD"),
    ("OD-SGD", "training even faster than ASGD"),
    ("Pseudo-sync", "accuracy comparable to SSGD"),
    ("Oscars", "better use of a heterogeneous cluster than synchronous SGD"),
    ("Oscars", "better use of a heterogeneous cluster than local SGD"),
]
# The replication seed set, fixed before any of its runs (issue 62): disjoint from the
# compared seeds 0-11, the pilots 100-102, the tuning seeds 300, 301 and the Fashion-MNIST
# recipe's 200, 201.
REPLICATION_SEEDS = "40-51"
DATA_TITLES = {"mnist1d": "MNIST-1D, CNN1D", "fashion_mnist": "Fashion-MNIST, LeNet-5",
               "kjv": "King James Bible, transformer (AdamW)"}


@dataclasses.dataclass(frozen=True)
class Workload:
  """How one workload's claims are decided: its configs on each cluster, the targets its
  speed reads ("95%": a share of ssgd's pilots' final value; "1.8": a fixed level), the
  split "similar" reads, its own seeds ("": --seeds), steps between evaluations (0: the
  tuning's), whether its config's clock times it (else --preset and --workload) and whether
  it has a tuning."""

  configs: dict[str, str]
  targets: tuple[str, ...] = study.TARGET_LEVELS
  primary: str = study.PRIMARY
  similar_split: str = "test"
  seeds: str = ""
  eval_every: int = 0
  own_clock: bool = False
  tunable: bool = True
  power_sd: float = 0.0  # the paired SD its seed count was powered for (0: the image columns')


WORKLOADS_OF_CLAIMS = {
    **{data: Workload(configs) for data, configs in tuning.CLAIMS_CONFIGS.items()},
    # fixed before its runs (docs/results.md, "The language model's column"): fresh seeds,
    # the Results table's loss levels and evaluation, the config's GPT-2 clock; defaults only
    "kjv": Workload({"homogeneous": "configs/kjv_transformer.py",
                     "heterogeneous": "configs/kjv_transformer_heterogeneous.py"},
                    targets=("2.0", "1.8", "1.7"), primary="1.8",
                    similar_split="validation", seeds="4000-4012", eval_every=25,
                    own_clock=True, tunable=False, power_sd=0.052),
}


def decide(home: dict[str, study.Group], hetero: dict[str, study.Group], goals, title: str,
           commands: tuple[str, str], workload: Workload) -> Column:
  """The trained claims' verdicts on one workload and setting: the 4 accuracy rows one
  Holm family, the 4 speed rows another; "similar" at the task's margin (and at half of it,
  the sensitivity margin) on `workload`'s split, "faster" at its primary target."""
  home_goals, hetero_goals = goals
  metric, split, primary = home["ssgd"].target, workload.similar_split, workload.primary
  accuracy_pairs = [("odsgd", home, "ssgd"), ("pseudo_sync", home, "ssgd"),
                    ("oscars", hetero, "ssgd"), ("oscars", hetero, "local_sgd")]

  def accuracy_tests_at(margin: float) -> list[verdicts.AccuracyTest]:
    return [verdicts.accuracy_test(split_values(group[a], split), split_values(group[b], split),
                                   group[a].chance, margin) for a, group, b in accuracy_pairs]

  accuracy_tests = accuracy_tests_at(metric.margin)
  accuracy_verdicts = verdicts.accuracy_verdicts(accuracy_tests, metric=metric)
  replicates = [verdicts.replication(t, len(accuracy_tests)).format(v.outcome)
                for t, v in zip(accuracy_tests, accuracy_verdicts, strict=True)]
  sensitivity = [v.cell() for v in verdicts.accuracy_verdicts(
      accuracy_tests_at(metric.margin / 2), metric=metric)]
  speed_pairs = [("odsgd", 0, "ssgd"), ("odsgd", 0, "asgd"), ("oscars", 1, "ssgd"),
                 ("oscars", 1, "local_sgd")]  # (strategy, study: home or hetero, baseline)

  def speed_rows_of(studies) -> list[dict[str, verdicts.SpeedTest]]:
    return [study.speed_row(studies[i][a], studies[i][b], goals[i]) for a, i, b in speed_pairs]

  speed_rows = speed_rows_of((home, hetero))
  speed_verdicts = verdicts.speed_verdicts(speed_rows, primary)
  robust = study.robustness((home, hetero), lambda studies: verdicts.speed_verdicts(
      speed_rows_of(studies), primary))
  speed_full = [f"{v.format()}; robust to the clock: {r}"
                for v, r in zip(speed_verdicts, robust, strict=True)]
  speed_short = [f"{v.cell()}; robust to the clock: {r.split(':')[0]}"
                 for v, r in zip(speed_verdicts, robust, strict=True)]
  accuracy_short = [v.cell() for v in accuracy_verdicts]
  compare_home, compare_hetero = commands
  details = [
      [accuracy_cell(home["odsgd"], home["ssgd"], accuracy_tests[0], split),
       accuracy_verdicts[0].format(), sensitivity[0], replicates[0], compare_home],
      [speed_cell(speed_rows[0], home_goals, "ssgd", (home["odsgd"], home["ssgd"])),
       speed_full[0], "-", "-", compare_home],
      [speed_cell(speed_rows[1], home_goals, "asgd", (home["odsgd"], home["asgd"])),
       speed_full[1], "-", "-", compare_home],
      [accuracy_cell(home["pseudo_sync"], home["ssgd"], accuracy_tests[1], split),
       accuracy_verdicts[1].format(), sensitivity[1], replicates[1], compare_home],
  ]
  cells = [accuracy_short[0], speed_short[0], speed_short[1], accuracy_short[1]]
  for index, other in enumerate(("ssgd", "local_sgd"), start=2):  # compound: speed, accuracy
    accuracy = accuracy_cell(hetero["oscars"], hetero[other], accuracy_tests[index], split)
    details.append([
        f"speeds 1,1,1,1,0.5,0.5,0.25,0.25; "
        f"{speed_cell(speed_rows[index], hetero_goals, other, (hetero['oscars'], hetero[other]))}"
        f"; {accuracy}; idle share "
        f"oscars {hetero['oscars'].idle.mean:.3f} vs {other} {hetero[other].idle.mean:.3f}",
        f"speed {speed_full[index]}; accuracy {accuracy_verdicts[index].format()}",
        f"accuracy {sensitivity[index]}", f"accuracy {replicates[index]}", compare_hetero])
    cells.append(f"speed {speed_short[index]}; accuracy {accuracy_short[index]}")
  resolution = max(study.resolution(groups[name], group_goals[primary])
                   for groups, group_goals in ((home, home_goals), (hetero, hetero_goals))
                   for name in groups)
  # every target can decide a speed verdict: each arm's resolution there, and each ratio's
  home_pairs = [(home["odsgd"], home[b]) for b in ("ssgd", "asgd")]
  hetero_pairs = [(hetero["oscars"], hetero[b]) for b in ("ssgd", "local_sgd")]
  resolutions = (study.resolution_lines(home_pairs, home_goals)
                 + study.resolution_lines(hetero_pairs, hetero_goals))
  steps = lambda groups: "/".join(f"{name} {groups[name].runs[0].summary['steps']}"
                                  for name in groups)
  note = (f"targets (homogeneous: {', '.join(f'{v:.4f}' for v in home_goals.values())}; "
          f"heterogeneous: {', '.join(f'{v:.4f}' for v in hetero_goals.values())}); steps "
          f"at equal time, seed {home['ssgd'].runs[0].spec.seed}: {steps(home)} "
          f"(homogeneous), {steps(hetero)} (heterogeneous); a time to the {primary} "
          f"target is known to within {100 * resolution:.1f}% of itself; the runs' simulated "
          f"times vary over the seeds by (SD / mean) {timing_noise(home)} (homogeneous), "
          f"{timing_noise(hetero)} (heterogeneous)")
  spread = max(time_spread(g) for groups in (home, hetero) for g in groups.values())
  half = metric.scale * metric.margin / 2
  sensitivity_header = (f"at a {half:g}-point margin" if metric.unit == "points" else
                        f"at a margin of {half:g} {metric.unit}")
  rule = ""
  if split != "test" or not metric.higher_is_better:
    clock = home["ssgd"].runs[0].config["cluster"]
    rule = (f"{title}: \"similar\" reads the final {split} {metric.name}, non-inferior at "
            f"{metric.scale * metric.margin:g} {metric.unit} ({half:g} for sensitivity); "
            f"\"faster\": simulated time to {split} {metric.name} "
            f"{', '.join(home_goals)} {metric.unit} ({primary} primary), fixed levels; its "
            f"config's clock: the {clock['preset']} preset and the workload "
            f"{clock['workload']} ({WORKLOADS[clock['workload']].description}); "
            f"{verdicts.seeds_for_power(workload.power_sd, metric.margin, rows=4)} seeds give "
            f"80% power at a paired SD of {workload.power_sd:g} {metric.unit}")
  return Column(title, cells, details, note, resolution, resolutions, spread, accuracy_tests,
                seed_count=len(home["ssgd"].runs), sensitivity_header=sensitivity_header,
                rule=rule)


ACCURACY_ROWS = ("OD-SGD vs SSGD", "pseudo-sync vs SSGD", "Oscars vs SSGD",
                 "Oscars vs local SGD")  # decide()'s accuracy tests, in order


def agreement(primary: Column, again: Column, seeds: str, replication_seeds: str) -> list[str]:
  """Per accuracy claim: the two seed sets' mean paired differences and whether they differ
  (`verdicts.seed_sets_differ`)."""
  return [f"{row}: {a.difference.format(1, 100, sign=True)} points on seeds {seeds}, "
          f"{b.difference.format(1, 100, sign=True)} on seeds {replication_seeds}; the sets "
          f"differ by {100 * (b.difference.mean - a.difference.mean):+.1f} points, Welch "
          f"two-sided {verdicts.format_p(verdicts.seed_sets_differ(a, b))}"
          for row, a, b in zip(ACCURACY_ROWS, primary.accuracy_tests, again.accuracy_tests,
                               strict=True)]


def machine_hours(groups: list[dict[str, study.Group]]) -> float:
  """Training time summed over the runs (each run's own wall time, on its process), a run
  that two studies share (a tuned setting that is the default, copied) counted once."""
  trained = {(run.spec.seed, json.dumps(run.config, sort_keys=True)):
             run.summary.get("wall_time_s", 0.0)
             for group in groups for g in group.values() for run in g.runs if run.summary}
  return sum(trained.values()) / 3600


def main() -> None:
  parser = study.script_parser(__doc__)
  study.add_study_flags(parser, output="runs/claims", section="claims")
  parser.add_argument("--data", default=",".join(WORKLOADS_OF_CLAIMS),
                      help=f"workloads, comma-separated: {', '.join(WORKLOADS_OF_CLAIMS)}")
  tuning.add_claims_flags(parser)
  parser.add_argument("--replication_seeds", default=REPLICATION_SEEDS,
                      help="seeds the defaults' claims are decided on again, beside --seeds")
  parser.add_argument("--kjv_seeds", default=WORKLOADS_OF_CLAIMS["kjv"].seeds,
                      help="the language model's compared seeds, its own (fixed before its "
                      "runs: docs/results.md, \"The language model's column\")")
  parser.add_argument("--replicate", default="mnist1d",
                      help="workloads of --data whose defaults are replicated, comma-separated "
                           "('' for none)")
  args = parser.parse_args()
  seeds, common = study.check_study_flags(args)
  data_names = [d.strip() for d in args.data.split(",") if d.strip()]
  unknown = [d for d in data_names if d not in WORKLOADS_OF_CLAIMS]
  if unknown or not data_names:
    raise study.StudyInputError(f"--data {args.data!r}: choose among "
                                f"{', '.join(WORKLOADS_OF_CLAIMS)}")
  workloads = {data: WORKLOADS_OF_CLAIMS[data] for data in data_names}
  if "kjv" in workloads:
    workloads["kjv"] = dataclasses.replace(workloads["kjv"], seeds=args.kjv_seeds)
  seeds_text = {data: w.seeds or args.seeds for data, w in workloads.items()}
  seeds_of = {data: study.parse_seeds(w.seeds, f"--{data}_seeds") if w.seeds else seeds
              for data, w in workloads.items()}
  # a target given as a share of ssgd's final value is fixed on pilot runs of its own seeds
  piloted = {data for data, w in workloads.items() if any(t.endswith("%") for t in w.targets)}
  pilot_seeds = study.parse_seeds(args.pilot_seeds, "--pilot_seeds")
  if any(set(seeds_of[data]) & set(pilot_seeds) for data in piloted):
    raise SystemExit(f"error: --seeds {args.seeds} overlaps --pilot_seeds {args.pilot_seeds}, "
                     f"on which the targets are fixed; choose other seeds")
  replicated = [d.strip() for d in args.replicate.split(",") if d.strip()]
  if set(replicated) - set(data_names):
    raise study.StudyInputError(f"--replicate {args.replicate!r}: choose among --data "
                                f"{args.data!r} (or '' for none)")
  replication_seeds = (study.parse_seeds(args.replication_seeds, "--replication_seeds")
                       if replicated else [])
  if any(set(replication_seeds) & (set(seeds_of[data]) | set(pilot_seeds))
         for data in replicated):
    raise study.StudyInputError(
        f"--replication_seeds {args.replication_seeds} overlaps --seeds {args.seeds} or "
        f"--pilot_seeds {args.pilot_seeds}: a replication needs seeds of its own")
  cluster = {data: [] if w.own_clock else tuning.cluster_overrides(args.preset, args.workload)
             for data, w in workloads.items()}
  variant = f":{args.variant}" if args.variant else ""
  every = {data: args.eval_every or w.eval_every or tuning.eval_every(data, None)
           for data, w in workloads.items()}
  studies, tuned = {}, {}
  for data in data_names:  # every run of every workload checked before the first starts
    output = tuning.claims_output(data, args.output)
    shared = (common + study.evaluation_overrides(every[data], args.eval_growth)
              + cluster[data])
    # scripts/tune.py's choice: kept with the records (--records of tune.py), else in --output
    kept = study.records_folder(args, os.path.relpath(output, args.output))
    for tuned_file in ([os.path.join(kept, "tuned.json")] if kept else []) + [
        os.path.join(output, "tuned.json")]:
      if workloads[data].tunable and os.path.exists(tuned_file):
        with open(tuned_file, encoding="utf-8") as f:
          tuned[data] = json.load(f)
        break
    # the budgets counted before, kept with the records
    budgets = study.Derived(kept, accept=args.stale == "accept") if kept else None
    for kind, strategies in tuning.CLAIMS_STRATEGIES.items():
      config = workloads[data].configs[kind] + variant
      if data in piloted:
        studies[data, f"pilot_{kind}"] = study.final_evaluation_only(
            study.strategy_specs(config, ["ssgd"], pilot_seeds, shared))
      # every compared run trains for ssgd's simulated time of the same seed (or its own
      # steps, if more): docs/results.md, "How a claim is decided"
      studies[data, kind] = study.equal_time_specs(study.strategy_specs(
          config, list(strategies), seeds_of[data], shared), "ssgd", budgets)
      if data in replicated:
        studies[data, f"{kind}_replication"] = study.equal_time_specs(study.strategy_specs(
            config, list(strategies), replication_seeds, shared), "ssgd", budgets)
      if data in tuned:
        studies[data, f"{kind}_tuned"] = study.equal_time_specs(study.grid(
            {name: (study.with_strategy(config, name), tuple(tuned[data][kind][name].items()))
             for name in strategies}, seeds, shared), "ssgd", budgets)
  for (data, folder), specs in studies.items():
    study.check_specs(specs, os.path.join(tuning.claims_output(data, args.output), folder),
                      args.processes)

  trained: list[dict[str, study.Group]] = []  # every study's groups, for the machine time

  def run(data: str, folder: str, goals: dict[str, float] | None = None
          ) -> dict[str, study.Group]:
    where = os.path.relpath(os.path.join(tuning.claims_output(data, args.output), folder),
                            args.output)
    # a tuned setting that is the default is the default's run: copied, not trained again
    defaults = [where.removesuffix("_tuned")] if folder.endswith("_tuned") else []
    # each compared run evaluated until it has reached the last target, and at its end
    results = study.run_with_flags(args, study.until_targets(studies[data, folder], goals),
                                   where, reuse=defaults)
    groups = {group.label: group for group in study.summarize(results)}
    trained.append(groups)
    return groups

  extra = "".join(f" --set {e}" for e in args.set)
  columns, notes = [], []
  for data in data_names:
    workload = workloads[data]
    seeds_flag = f"--seeds {seeds_text[data]} --eval_every {every[data]}"
    if data not in piloted:  # fixed levels, named in the compare command
      seeds_flag += f" --targets {','.join(workload.targets)} --primary {workload.primary}"
    goals = tuple(study.targets(workload.targets, run(data, f"pilot_{kind}")["ssgd"]
                                if data in piloted else None)
                  for kind in tuning.CLAIMS_STRATEGIES)
    commands = tuple(
        f"`python scripts/compare.py --config {workload.configs[kind]}{variant} --strategies "
        f"{','.join(strategies)} {seeds_flag}{extra}"
        + (f" {flags(cluster[data])}`" if cluster[data] else "`")
        for kind, strategies in tuning.CLAIMS_STRATEGIES.items())
    columns.append(decide(run(data, "homogeneous", goals[0]),
                          run(data, "heterogeneous", goals[1]), goals,
                          f"{DATA_TITLES[data]}: defaults", commands, workload))
    if data in replicated:
      again = f"--seeds {args.replication_seeds}"
      primary = columns[-1]
      columns.append(decide(run(data, "homogeneous_replication", goals[0]),
                            run(data, "heterogeneous_replication", goals[1]), goals,
                            f"{DATA_TITLES[data]}: defaults, replication seeds "
                            f"{args.replication_seeds}",
                            tuple(c.replace(f"--seeds {seeds_text[data]}", again)
                                  for c in commands), workload))
      columns[-1].agreement = agreement(primary, columns[-1], seeds_text[data],
                                        args.replication_seeds)
    if data in tuned:
      settings = "; ".join(  # ssgd is tuned on each cluster: say which
          f"{kind} cluster: " + "; ".join(
              f"{name} " + (", ".join(f"{field.rpartition('.')[2]}={value}"
                                      for field, value in fields.items()) or "defaults")
              for name, fields in tuned[data][kind].items())
          for kind in tuned[data])
      columns.append(decide(run(data, "homogeneous_tuned", goals[0]),
                            run(data, "heterogeneous_tuned", goals[1]),
                            goals, f"{DATA_TITLES[data]}: tuned", (
                                f"`python scripts/tune.py --data {data}`, then this command",) * 2,
                            workload))
      notes.append(f"{DATA_TITLES[data]} tuned (docs/results.md, \"Equal tuning for the "
                   f"claims\"; `python scripts/tune.py --data {data}`): {settings}")
    elif workload.tunable:
      columns.append(Column(f"{DATA_TITLES[data]}: tuned",
                            [f"not tuned yet: `python scripts/tune.py --data {data}`"] * 6,
                            [], ""))
      notes.append(f"{DATA_TITLES[data]}: not tuned yet")
  load = WORKLOADS[args.workload]
  scaling = study.weak_scaling(PRESETS["tianhe2"].network, load, sorted(PAPER_SCALING),
                               Overlap())
  ps_eff, ssgd_eff = scaling["odsgd, pseudo_sync"], scaling["ssgd"]
  strong = study.strong_scaling(PRESETS["tianhe2"].network, load, [128], overlap=Overlap())
  ps_strong = strong["odsgd, pseudo_sync"][128]
  # the clock's error on a setup whose transport is known (tianhe2: a measured bandwidth)
  band = clock_validation.known_transport_error() / 100

  clock_rows = [
      ["Pseudo-sync", "93.4% / 90.5% weak-scaling efficiency at 64 / 128 nodes (Tianhe-2)",
       f"tianhe2 preset, {args.workload}: pseudo_sync {ps_eff[64]:.1%} / {ps_eff[128]:.1%} "
       f"± {100 * band:.1f} points, the clock's leave-one-family-out error on published "
       f"measurements (docs/clock.md); timelines with noise and interference",
       verdicts.figure_verdict(ps_eff, PAPER_SCALING, band=band).format(),
       "`python scripts/scaling.py`"],
      ["Pseudo-sync", "near-linear (strong) scalability using 128 nodes",
       f"tianhe2 preset, {args.workload}, a global batch of {study.STRONG_GLOBAL_BATCH} split "
       f"over 128 workers: pseudo_sync's strong-scaling efficiency {ps_strong:.1%} ± "
       f"{100 * band:.1f} points (\"near-linear\": at least {NEAR_LINEAR:.0%})",
       verdicts.level_verdict(ps_strong, NEAR_LINEAR, band,
                              "strong-scaling efficiency at 128 nodes").format(),
       "`python scripts/scaling.py`"],
      ["Pseudo-sync", "weak scaling better than SSGD",
       f"tianhe2: pseudo_sync {ps_eff[64]:.1%} / {ps_eff[128]:.1%} vs overlapped ssgd "
       f"{ssgd_eff[64]:.1%} / {ssgd_eff[128]:.1%} at 64 / 128, each ± {100 * band:.1f} points "
       f"(deterministic; one clock times both, so the band bounds each figure, not their "
       f"difference)",
       "**holds** in the model" if all(ps_eff[n] > ssgd_eff[n] for n in PAPER_SCALING)
       else "**does not hold** in the model", "`python scripts/scaling.py`"],
    ]
  trained_rows = [[paper, claim, *(column.cells[i] for column in columns)]
                  for i, (paper, claim) in enumerate(TRAINED_CLAIMS)]
  header = ["paper", "claim", *(column.title for column in columns)]
  resolution = max(column.resolution for column in columns if column.details)
  spread = max(column.spread for column in columns if column.details)
  replicated_text = (f"; the defaults again on seeds {args.replication_seeds} for "
                     f"{', '.join(DATA_TITLES[d] for d in replicated)}" if replicated else "")
  own_seeds = "".join(f"; {DATA_TITLES[d]}: {len(seeds_of[d])} seeds of its own, "
                      f"{seeds_text[d]}" for d, w in workloads.items() if w.seeds)
  text = (
      f"Produced by `{study.command_line('scripts/claims.py')}` ({machine_hours(trained):.1f} "
      f"machine-hours of training over its runs; {study.environment()}): {len(seeds)} seeds"
      f"{replicated_text}{own_seeds}; rules and their history in "
      f"[docs/results.md](docs/results.md#how-a-claim-is-decided).\n"
      f"\"Similar\": non-inferior at a {100 * verdicts.MARGIN:g}-point margin, paired by seed "
      f"({100 * verdicts.SENSITIVITY_MARGIN:g}-point sensitivity in docs). \"Faster\": "
      f"simulated time to {study.PRIMARY} of ssgd's pilot accuracy, by more than "
      f"{100 * (verdicts.MIN_SPEEDUP - 1):g}%,\n"
      f"every strategy given at least ssgd's simulated time (each arm's in the detail), each "
      f"time to it known to within {100 * resolution:.1f}%; no power analysis for speed (the "
      f"seeds are the accuracy claims'). Holm across each column's rows.\n"
      + "".join(f"{column.rule}.\n" for column in columns if column.rule) +
      f"A cell: the verdict, the figure that decided it and, where another rule decided, "
      f"which. Targets, tuned settings, full verdicts and commands:\n"
      f"[docs/results.md, the claims in detail](docs/results.md#the-claims-in-detail).\n\n"
      f"{study.markdown(header, trained_rows)}\n\n"
      f"Claims decided by the clock alone (the same on every workload; deterministic "
      f"timelines, each efficiency with the clock's error band):\n\n"
      f"{study.markdown(['paper', 'claim', 'measured here', 'verdict', 'command'], clock_rows)}")
  setup = (
      f"Per workload: 8 workers; final accuracy on the test split, targets and times on the "
      f"validation split, read every "
      f"{'; '.join(f'{n} steps ({DATA_TITLES[d]})' for d, n in every.items())}. Targets: "
      f"{', '.join(study.TARGET_LEVELS)} of ssgd's final validation accuracy on pilot seeds "
      f"{', '.join(map(str, pilot_seeds))}, {study.PRIMARY} primary. "
      f"{verdicts.speed_rule('the baseline')} Each strategy trains for at least the "
      f"simulated time ssgd spent on its steps with the same seed: more steps where it is "
      f"faster per tick (each column's note gives the steps), its own steps where those take "
      f"longer, and then it runs longer than ssgd (each arm's time is in its row), its "
      f"learning-rate schedule spanning that budget, every worker reading it at the run's tick; "
      f"final accuracy is the run's. Each seed draws its own cluster noise, but the runs' "
      f"simulated times vary by at most {100 * spread:.2f}% over the seeds (SD / mean, each "
      f"column's note): the intervals carry the seeds' training noise (initial parameters, "
      f"data order, where the curve crosses a target) and almost none of the cluster's. "
      f"Accuracy power: "
      f"{verdicts.seeds_for_power(0.0086, rows=4)} seeds give 80% power for non-inferiority "
      f"at the margin with a paired SD of 0.86 points (the pilot comparison); speed: none. "
      f"Replication: beside each accuracy verdict, its chance of coming out the same on a "
      f"fresh set of as many seeds, were the paired differences normal with the observed "
      f"mean and SD (each test at Holm's strictest level), the chance of \"holds\" and the "
      f"seeds \"holds\" would need for {verdicts.POWER:.0%}; the observed mean stands in for "
      f"the true one, so these are estimates, not guarantees. "
      f"Defaults: each strategy as configs/_strategies.py sets it; tuned: {'; '.join(notes)}. "
      f"Times: the {args.preset} preset and the workload {args.workload} "
      f"({load.description}), ssgd's all-reduce overlapped with its backward pass. "
      f"{study.ROBUSTNESS}")
  detail = setup + "\n\n" + "\n\n".join(
      f"**{column.title}** ({column.note}):\n\n" + study.markdown(
          ["paper", "claim", "measured here", "verdict",
           column.sensitivity_header,
           f"same verdict on {column.seed_count} fresh seeds", "command"],
          [[paper, claim, *row] for (paper, claim), row in zip(TRAINED_CLAIMS, column.details,
                                                               strict=True)])
      + "\n\nResolution of the times at every target (worst seed; a ratio's: the width of "
        "what it can be):\n\n" + "\n".join(f"- {line}" for line in column.resolutions)
      + ("\n\nDo the seed sets agree? Each accuracy claim's mean paired difference on both "
         "(a small p: the seed set itself moves the result, more than either set's interval "
         "shows):\n\n" + "\n".join(f"- {line}" for line in column.agreement)
         if column.agreement else "")
      for column in columns if column.details)
  print(text + "\n\n" + detail)
  with open(os.path.join(args.output, "claims.md"), "w", encoding="utf-8") as f:
    f.write(text + "\n\n" + detail + "\n")
  if args.readme:
    study.replace_section(args.readme, text, check=args.check)
    command = study.command_line("scripts/claims.py")
    study.replace_section("claims_detail", f"Produced by `{command}` with the table in "
                                           f"README.md.\n\n{detail}", check=args.check)


if __name__ == "__main__":
  study.run_main(main)
