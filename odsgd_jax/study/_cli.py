"""Command-line flags and helpers that every study script shares."""

import argparse
import shlex
import sys
from typing import Any, Callable

from odsgd_jax.data import DataError
from odsgd_jax.study._grid import parse_value
from odsgd_jax.study._readme import SectionError
from odsgd_jax.study._runner import RunResult, default_processes
from odsgd_jax.train import ConfigError


def script_parser(doc: str) -> argparse.ArgumentParser:
  """A script's parser: its docstring's first paragraph as the description, the rest
  (usage examples) as the epilog."""
  description, _, epilog = doc.partition("\n\n")
  return argparse.ArgumentParser(description=description, epilog=epilog or None,
                                 formatter_class=argparse.RawDescriptionHelpFormatter)


def add_study_flags(parser: argparse.ArgumentParser, output: str,
                    section: str | None = None) -> None:
  """--seeds, --eval_every, --set, --processes, --output, --resume and --readme (the
  generated section to write: a name, or, for a script with one `section`, a switch)."""
  parser.add_argument("--seeds", default="0-11",
                      help="e.g. 0-11 or 0,1,2 (at least 10 for a verdict; docs/results.md)")
  parser.add_argument("--eval_every", type=int, default=30,
                      help="steps between evaluations (time to target resolves this finely)")
  parser.add_argument("--set", action="append", default=[], metavar="FIELD=VALUE",
                      help="override a config field in every run, e.g. cluster.preset=10gbe")
  parser.add_argument("--processes", type=int, default=default_processes(),
                      help="runs trained at once (default: one per core)")
  parser.add_argument("--output", default=output, help="folder for the runs and the report")
  parser.add_argument("--resume", action="store_true",
                      help="keep runs that already finished with the same config")
  if section:
    parser.add_argument("--readme", action="store_const", const=section, default="",
                        help=f"also write the generated section {section!r} (in README.md or "
                        f"a docs/ page)")
  else:
    parser.add_argument("--readme", default="", help="also write the result into the generated "
                        "section of this name (in README.md or a docs/ page; plot copied to "
                        "docs/)")


def common_overrides(args: argparse.Namespace) -> list[tuple[str, Any]]:
  """The overrides the flags ask for, applied to every run of the study."""
  # Training metrics are logged as often as the model is evaluated: a study reads the
  # evaluations and the summaries, and writing every step's row costs host time.
  overrides: list[tuple[str, Any]] = [("train.eval_every", args.eval_every),
                                      ("train.log_every", args.eval_every)]
  for entry in args.set:
    field, equals, value = entry.partition("=")
    if not equals or "." not in field:
      raise SystemExit(f"error: --set {entry!r} must look like section.field=value")
    overrides.append((field, parse_value(value)))
  return overrides


def command_line(script: str) -> str:
  """How this script was called, to print under the tables it writes."""
  return f"python {script} " + " ".join(shlex.quote(a) for a in sys.argv[1:])


def print_result(result: RunResult) -> None:
  status = result.error or f"accuracy {result.accuracy:.4f}"
  print(f"{result.spec.label}, seed {result.spec.seed}: {status}", flush=True)


def run_main(main: Callable[[], None]) -> None:
  """Runs a script's `main`; a bad config, data set or config file ends it with one
  line (exit status 1) instead of a traceback, before any run starts."""
  try:
    main()
  except (ConfigError, DataError, FileNotFoundError, SectionError) as error:
    sys.exit(f"error: {error}")
