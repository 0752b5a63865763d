"""The clock against this codebase's own runs on a shaped network: compute times, first
looks, measurements and scores (docs/clock.md, "Measured on a shaped network").

  # as root: every phase of the first grid, then the scores into docs/clock.md
  python scripts/measure_network.py --emulate --grid first --readme
  # one phase at a time (commit first_looks.json before measuring)
  python scripts/measure_network.py --emulate --grid first --phase compute
  python scripts/measure_network.py --emulate --grid first --phase first_looks
  python scripts/measure_network.py --emulate --grid first --phase measure
  python scripts/measure_network.py --emulate --phase overlap
  python scripts/measure_network.py --phase report --readme
  python scripts/measure_network.py --fit     # a revision's loopback terms, first grid
  # a real cluster: the same command on every host, one process each (docs/multihost.md)
  python scripts/measure_network.py --plain --coordinator 10.0.0.1:1234 \
      --num_processes 4 --process_id 0 --rate_mbit 10000 --delay_ms 0.05 --models mlp_wide

--emulate runs P processes of jax.distributed over gloo inside a network namespace whose
loopback is shaped with tc (tbf for the rate; netem for a delay, where the kernel has it),
removed afterwards, also on failure; root and iproute2 are needed, and it says so at once
where they are missing. Each network's measurements are kept as soon as they are taken
(records/network/), so a stopped run loses only the network in flight and continues
where it stopped. A first look is never changed once written.
"""

import os
import sys

sys.path.insert(0, os.path.dirname(os.path.dirname(os.path.abspath(__file__))))

from odsgd_jax import study  # noqa: E402
from odsgd_jax.study.network import (GRIDS, MeasureError, NamespaceError, Network,  # noqa: E402
                                     can_emulate, measure, networks, report_text)

PHASES = ("all", "compute", "first_looks", "measure", "overlap", "report")


def main() -> None:
  parser = study.script_parser(__doc__)
  where = parser.add_mutually_exclusive_group()
  where.add_argument("--emulate", action="store_true",
                     help="shaped network namespaces on this machine (root)")
  where.add_argument("--plain", action="store_true",
                     help="this host's process of a real cluster (one per host)")
  parser.add_argument("--grid", choices=sorted(GRIDS), default="first")
  parser.add_argument("--phase", choices=PHASES, default="all")
  parser.add_argument("--records", default="records/network")
  parser.add_argument("--readme", action="store_true",
                      help="write the report into docs/clock.md (section network_cases)")
  parser.add_argument("--fit", action="store_true",
                      help="fit the loopback's latency and achieved share on the first grid's "
                           "measured cases and print them (the revision's constants)")
  parser.add_argument("--models", default="", help="comma-separated; default: the grid's")
  parser.add_argument("--timeout_s", type=float, default=900,
                      help="the longest one launch (one network, every strategy) may take")
  parser.add_argument("--coordinator", default=None)
  parser.add_argument("--num_processes", type=int, default=0)
  parser.add_argument("--process_id", type=int, default=0)
  parser.add_argument("--rate_mbit", type=float, default=0.0,
                      help="--plain: the network's rate per process as measured (iperf)")
  parser.add_argument("--delay_ms", type=float, default=0.0,
                      help="--plain: the one-way delay per message")
  args = parser.parse_args()
  grid = dict(GRIDS[args.grid])
  if args.models:
    grid["models"] = tuple(args.models.split(","))
  if args.plain:
    plain(args, grid)
    return
  if args.fit:
    loopback, loss = measure.fit_loopback(args.records, networks(**GRIDS["first"]))
    print(f"loopback: latency_s={loopback.latency_s:g}, efficiency={loopback.efficiency:g} "
          f"(mean |log error| of the sequential step time on the first grid: {loss:.4f})")
    return
  measuring = args.phase in ("all", "compute", "measure", "overlap")
  if measuring and not args.emulate:
    raise MeasureError(f"--phase {args.phase} measures: give --emulate (root, here) or --plain")
  if args.emulate and (problem := can_emulate()):
    raise NamespaceError(problem)
  cases = networks(**grid)
  if args.phase in ("all", "compute"):
    for model in grid["models"]:
      for processes in grid["processes"]:
        print(f"compute: {model}, {processes} processes", flush=True)
        measure.measure_compute(args.records, model, processes, args.timeout_s)
  if args.phase in ("all", "first_looks"):
    added = measure.first_looks(args.records, cases)
    print(f"first looks: {added} added to {os.path.join(args.records, measure.FIRST_LOOKS)}")
  if args.phase in ("all", "measure"):
    for network in cases:
      print(f"measure: {network.key}", flush=True)
      measure.measure_network(args.records, network, args.timeout_s)
  if args.phase in ("all", "overlap"):
    print(f"overlap: {measure.measure_overlap(args.records)}")
  if args.phase in ("all", "report"):
    text = report_text(args.records)
    if args.readme:
      study.replace_section("network_cases", text)
    else:
      print(text)


def plain(args, grid) -> None:
  """One host's process: its compute (alone on the host), first looks (process 0), then
  every strategy timed with the other hosts."""
  if not (args.coordinator and args.num_processes > 1 and args.rate_mbit > 0):
    raise MeasureError("--plain needs --coordinator, --num_processes (> 1), --process_id and "
                       "--rate_mbit (the link's measured rate)")
  for model in grid["models"]:
    network = Network(model, args.num_processes, args.rate_mbit, args.delay_ms)
    measure.measure_compute(args.records, model, args.num_processes, args.timeout_s, at_once=1)
    if args.process_id == 0:
      measure.first_looks(args.records, [network])
    measure.measure_network(args.records, network, args.timeout_s,
                            plain={"coordinator": args.coordinator,
                                   "process_id": args.process_id})
  if args.process_id == 0:
    print(report_text(args.records))


if __name__ == "__main__":
  try:
    study.run_main(main)
  except (MeasureError, NamespaceError) as error:
    sys.exit(f"error: {error}")
