"""DiLoCo on the language model (issue 77): three experiments over one set of seeds.

  python scripts/diloco.py --seeds 3000-3011 --readme

trains every run once (records in records/diloco) and writes three generated sections of
docs/results.md, each with its rule (docs/results.md, "DiLoCo on the language model"):

- diloco_vs_sync (D1): DiLoCo (local_sgd: the config's AdamW inside, Nesterov 0.7 / 0.9
  outside, H = 25) against ssgd at equal tokens: both the config's steps with the global
  batch split across its 8 workers. Final validation loss paired by seed, non-inferior at
  the task's margin (0.05 nats); the outer rounds and the bytes each worker sends.
- diloco_outer (D2): Nesterov against plain averaging (outer SGD at rate 1, no momentum: the
  workers' mean) at the same H; better, worse or inconclusive by the paired difference's
  95% interval.
- diloco_period (D3): ssgd (H = 1), DiLoCo at H = 10, 25, 50, 100 and 200, ssgd with
  QSGD at 8 bits, and streaming DiLoCo; final validation loss against the bytes a worker
  sends and against the simulated time on the config's network (10 GbE) and on a slow one
  (1 Gbit/s), each run retimed there (the runs' ticks do not follow the clock); a figure.
"""

import dataclasses
import os
import shutil

import matplotlib
import matplotlib.ticker

matplotlib.use("Agg")
import matplotlib.pyplot as plt  # noqa: E402
import numpy as np  # noqa: E402

from odsgd_jax import cluster, study  # noqa: E402
from odsgd_jax.study import verdicts  # noqa: E402
from odsgd_jax.study._aggregate import converged  # noqa: E402
from odsgd_jax.study._stats import mean_ci, paired  # noqa: E402
from odsgd_jax.train import retime_record  # noqa: E402

CONFIG = "configs/kjv_transformer.py"
NESTEROV = {"learning_rate": 0.7, "momentum": 0.9, "nesterov": True}  # DiLoCo's outer step
PERIOD = 25  # H of D1 and D2: 20 outer rounds in the config's 500 steps
PERIODS = (10, 25, 50, 100, 200)  # D3
COMPRESSED = "qsgd:8"
STREAMING = {"period": PERIOD, "fragments": 4, "delay": 1, "mixing": 0.5,
             "outer": NESTEROV}
# D3's slow network: a 1 Gbit/s ring, 100 us a hop (the config's is 10 GbE)
SLOW_NETWORK = {"preset": "", "topology": "ring", "bandwidth": 1.25e8, "latency": 1e-4}
SECTIONS = ("diloco_vs_sync", "diloco_outer", "diloco_period")


def diloco(period: int, outer=NESTEROV) -> tuple[str, list]:
  return (f"{CONFIG}:local_sgd", [("strategy.period", period), ("strategy.outer", outer)])


def labels() -> dict[str, tuple[str, list]]:
  """Every run's group: (config, overrides)."""
  runs = {"ssgd": (f"{CONFIG}:ssgd", [])}
  runs.update({f"diloco H={h}": diloco(h) for h in PERIODS})
  runs[f"averaging H={PERIOD}"] = diloco(PERIOD, None)
  runs[f"ssgd {COMPRESSED}"] = (f"{CONFIG}:ssgd", [("strategy.compression", COMPRESSED)])
  runs["streaming H={period} P={fragments} tau={delay}".format(**STREAMING)] = (
      f"{CONFIG}:streaming_diloco", [(f"strategy.{k}", v) for k, v in STREAMING.items()])
  return runs


@dataclasses.dataclass(frozen=True)
class Summary:
  """One group's figures: final validation loss (nats) per seed, bytes a worker sends,
  the outer rounds, and the simulated time on each network."""

  label: str
  validation: dict[int, float | None]
  test: dict[int, float | None]
  megabytes: float
  rounds: int
  largest: float  # the largest message, as a share of the model's
  time: dict[str, list[float]]


def _loss(values: dict[int, float | None]) -> dict[int, float | None]:
  return {s: None if v is None else -v for s, v in values.items()}  # scores are negated


def summarize_group(group: study.Group) -> Summary:
  runs = [r for r in group.runs if r.summary]
  steps = runs[0].config["train"]["num_steps"]
  bits = study.bits_per_step(group) * steps
  charges = runs[0].clock["charges"]
  rounds = sum(count for count, sends, *_ in charges if sends)
  # a charge's bytes are the timed model's share (0: the whole message)
  load = runs[0].config["cluster"].get("workload")
  timed = (cluster.WORKLOADS[load].message_bytes if load else
           runs[0].clock["inputs"]["model_bytes"])
  largest = max((sent / timed if sent else 1.0) for _, sends, sent, _ in charges if sends) \
      if rounds else 0.0
  slow = {**runs[0].config, "cluster": {**runs[0].config["cluster"], **SLOW_NETWORK}}
  time = {"10 GbE": [r.summary["sim_time_s"] for r in runs],
          "1 Gbit/s": [float(retime_record({**slow, "train": r.config["train"]}, r.clock,
                                           {})[-1]) for r in runs]}
  return Summary(group.label, _loss(group.validation), _loss(group.per_seed),
                 bits / 8 / 1e6, rounds, largest, time)


def _interval(values: dict[int, float | None], digits: int = 3) -> str:
  return mean_ci(list(converged(values).values())).format(digits)


def _difference(a: dict, b: dict) -> study.Interval:
  """b - a paired by seed (positive: a lower loss than b)."""
  return paired(converged(b), converged(a)).difference


def vs_sync(summaries: dict[str, Summary], groups: dict[str, study.Group]) -> str:
  base, dil = summaries["ssgd"], summaries[f"diloco H={PERIOD}"]
  metric = groups["ssgd"].target
  test = verdicts.accuracy_test(groups[dil.label].validation, groups["ssgd"].validation,
                                groups["ssgd"].chance, metric.margin)
  (verdict,) = verdicts.accuracy_verdicts([test], metric=metric)
  rows = []
  for s in (base, dil):
    cells = (["-", "-", "-"] if s is base else
             [test.difference.format(3, sign=True), f"{test.lower_bound:+.3f}",
              verdict.brief()])
    rows.append([s.label, _interval(s.validation), *cells, _interval(s.test), str(s.rounds),
                 f"{s.megabytes:,.1f}", mean_ci(s.time["10 GbE"]).format(1)])
  header = ["", "final validation loss", "vs ssgd (nats, + = loss lower)",
            "one-sided 95% lower bound", f"non-inferior to ssgd at -{metric.margin} nats",
            "final test loss", "rounds", "MB sent a worker", "simulated time, 10 GbE (s)"]
  return study.markdown(header, rows)


def outer(summaries: dict[str, Summary]) -> str:
  nesterov, plain = summaries[f"diloco H={PERIOD}"], summaries[f"averaging H={PERIOD}"]
  gain = _difference(nesterov.validation, plain.validation)
  low, high = gain.mean - gain.half_width, gain.mean + gain.half_width
  verdict = ("Nesterov better" if low > 0 else "Nesterov worse" if high < 0 else
             "inconclusive")
  rows = [[s.label, _interval(s.validation), _interval(s.test)] for s in (nesterov, plain)]
  table = study.markdown(["outer optimizer", "final validation loss", "final test loss"], rows)
  return (f"{table}\n\nPlain averaging minus Nesterov, paired by seed: "
          f"{gain.format(3, sign=True)} nats of validation loss: **{verdict}**.")


def period(summaries: dict[str, Summary]) -> str:
  base = summaries["ssgd"]
  rows = []
  for s in summaries.values():
    if s.label.startswith("averaging"):
      continue
    versus = "-" if s is base else _difference(s.validation, base.validation).format(
        3, sign=True)
    rows.append([s.label, f"{s.megabytes:,.2f}", f"{s.megabytes / base.megabytes:.3f}",
                 str(s.rounds), f"{s.largest:.3f}", _interval(s.validation),
                 versus, mean_ci(s.time["10 GbE"]).format(1),
                 mean_ci(s.time["1 Gbit/s"]).format(1)])
  header = ["", "MB sent a worker", "share of ssgd's bytes", "rounds",
            "largest message (share of the model)", "final validation loss",
            "vs ssgd (nats, + = loss lower)", "simulated time, 10 GbE (s)",
            "simulated time, 1 Gbit/s (s)"]
  return study.markdown(header, rows)


def plot(summaries: dict[str, Summary], path: str) -> None:
  """Final validation loss against the bytes a worker sends and against the simulated
  time on each network: mean over seeds, the 95% interval as error bars."""
  kept = [s for s in summaries.values() if not s.label.startswith("averaging")]
  dense = summaries["ssgd"].megabytes
  panels = [("bytes a worker sends, share of ssgd's (log)", lambda s: [s.megabytes / dense])]
  panels += [(f"simulated time, {net} (s, log)", lambda s, n=net: s.time[n])
             for net in ("10 GbE", "1 Gbit/s")]
  figure, axes = plt.subplots(1, len(panels), figsize=(5.2 * len(panels), 4.2), sharey=True)
  for axis, (xlabel, x) in zip(axes, panels, strict=True):
    for s in kept:
      loss = mean_ci(list(converged(s.validation).values()))
      axis.errorbar(np.mean(x(s)), loss.mean, yerr=loss.half_width, fmt="o", capsize=3,
                    label=s.label)
    axis.set(xscale="log", xlabel=xlabel)
    axis.xaxis.set_minor_formatter(matplotlib.ticker.NullFormatter())
    axis.grid(alpha=0.3)
  axes[0].set_ylabel("final validation loss (nats; 95% interval)")
  axes[-1].legend(fontsize=8)
  figure.tight_layout()
  figure.savefig(path, dpi=110)
  plt.close(figure)


def write(sections: dict[str, str], figure: str, readme: bool, check: bool) -> None:
  for name, text in sections.items():
    print(f"## {name}\n\n{text}\n")
    if readme:
      body = text + (f"\n\n![{name}](docs/{name}.png)" if name == "diloco_period" else "")
      if name == "diloco_period" and not check:
        shutil.copy(figure, os.path.join(study.repository_root(), "docs", f"{name}.png"))
      study.replace_section(name, body, check=check)


def main() -> None:
  parser = study.script_parser(__doc__)
  study.add_study_flags(parser, "runs/diloco", section="diloco_vs_sync")
  args = parser.parse_args()
  if args.readme and args.records is None:  # one study, three sections: records/diloco
    args.records = os.path.join(study.repository_root(), "records", "diloco")
  seeds, common = study.check_study_flags(args)
  # every figure here is read at the end of a run (final loss, bytes, simulated time): no
  # evaluation during it, which would cost more than a third of a run's wall time
  specs = study.final_evaluation_only(study.grid(labels(), seeds, common))
  results = study.run_with_flags(args, specs)
  groups = {g.label: g for g in study.summarize(results, "ssgd")}
  summaries = {label: summarize_group(g) for label, g in groups.items()}
  command = study.command_line("scripts/diloco.py")
  caption = study.caption(specs[0].build(), seeds, command, results)
  sections = {"diloco_vs_sync": f"{caption}\n\n{vs_sync(summaries, groups)}",
              "diloco_outer": f"{caption}\n\n{outer(summaries)}",
              "diloco_period": f"{caption}\n\n{period(summaries)}"}
  figure = os.path.join(args.output, "diloco_period.png")
  os.makedirs(args.output, exist_ok=True)
  plot(summaries, figure)
  write(sections, figure, bool(args.readme), args.check)


if __name__ == "__main__":
  study.run_main(main)
