"""Command-line flags and helpers that every study script shares."""

import argparse
import dataclasses
import os
import re
import shlex
import sys
import time
from typing import Any, Callable, Sequence

from odsgd_jax import xla_flags
from odsgd_jax.data import DataError
from odsgd_jax.strategies import STRATEGIES
from odsgd_jax.study import _records as records_lib
from odsgd_jax.study._grid import RunSpec, StudyInputError, parse_seeds, parse_value
from odsgd_jax.study._readme import SectionError, repository_root, section_page
from odsgd_jax.study._targets import PilotsDivergedError
from odsgd_jax.study._runner import (Keeping, RunResult, StudyPaused, check_output,
                                     default_processes, run_study, share_accelerator_memory)
from odsgd_jax.train import ConfigError, WorkdirError, abandoned_save_noise_hidden


class _ScriptParser(argparse.ArgumentParser):
  """An unknown flag or a value of the wrong type is one line and exit status 1, as every
  other bad input of the scripts (argparse's own: a usage block and status 2)."""

  def error(self, message: str):
    self.exit(1, f"error: {message} (see {self.prog} --help)\n")


def script_parser(doc: str) -> argparse.ArgumentParser:
  """A script's parser: its docstring's first paragraph as the description, the rest
  (usage examples) as the epilog."""
  description, _, epilog = doc.partition("\n\n")
  return _ScriptParser(description=description, epilog=epilog or None,
                       formatter_class=argparse.RawDescriptionHelpFormatter)


def add_study_flags(parser: argparse.ArgumentParser, output: str,
                    section: str | None = None) -> None:
  """--seeds, --eval_every, --set, --processes, --output, --resume, the records' flags and
  the section's (`add_section_flags`)."""
  parser.add_argument("--seeds", default="0-11",
                      help="e.g. 0-11 or 0,1,2 (at least 10 for a verdict; docs/results.md)")
  parser.add_argument("--eval_every", type=int, default=4,
                      help="the smallest span between evaluations, in steps (0: only at the "
                      "end)")
  parser.add_argument("--eval_growth", type=float, default=EVAL_GROWTH,
                      help="spans between evaluations grow to this share of the step, so that "
                      "a time to target is known to within about it (docs/results.md, \"The "
                      "evaluation grid\"); 0: every --eval_every steps")
  parser.add_argument("--set", action="append", default=[], metavar="FIELD=VALUE",
                      help="override a config field in every run, e.g. cluster.preset=10gbe")
  parser.add_argument("--processes", type=int, default=default_processes(),
                      help="runs trained at once (default: one per core)")
  parser.add_argument("--output", default=output, help="folder for the runs and the report")
  parser.add_argument("--resume", action="store_true",
                      help="keep runs that already finished with the same config: their "
                      "records, or their folders in --output")
  parser.add_argument("--records", default=None,
                      help=f"folder of the study's run records (default: "
                      f"{records_lib.RECORDS_FOLDER}/<the --readme section> in the checkout, "
                      f"none without --readme; docs/results.md, \"Run records\")")
  parser.add_argument("--from_records", action="store_true",
                      help="regenerate the tables from the records alone: no training, an "
                      "error if a run has none")
  parser.add_argument("--stale", default="refuse", choices=records_lib.STALE_POLICIES,
                      help="records of the same config made by other code: refuse to start "
                      "(default), retrain them, or accept them as this code's")
  parser.add_argument("--stop_after", default="",
                      help="launch no run after this long (e.g. 90m, 2h, 3600s): the runs in "
                      "flight finish and keep their records, then the study exits 0 saying "
                      "how to continue")
  add_section_flags(parser, section)


def add_section_flags(parser: argparse.ArgumentParser, section: str | None = None) -> None:
  """--readme (the generated section to write: a name, or, for a script with one `section`,
  a switch) and --check (compare it instead of writing it)."""
  if section:
    parser.add_argument("--readme", action="store_const", const=section, default="",
                        help=f"also write the generated section {section!r} (in README.md or "
                        f"a docs/ page)")
  else:
    parser.add_argument("--readme", default="", help="also write the result into the generated "
                        "section of this name (in README.md or a docs/ page; plot copied to "
                        "docs/)")
  parser.add_argument("--check", action="store_true",
                      help="with --readme: write no page, exit 1 if the generated section is "
                      "not what this command gives")


# The evaluation grid's growth (docs/results.md, "The evaluation grid"): spans of 1.9% of the
# step, so that a time to target is known to within 2% of itself where spans exceed 4 steps.
EVAL_GROWTH = 0.019


def parse_duration(text: str, flag: str = "--stop_after") -> float:
  """"90m", "2h", "45s" or "3600" -> seconds (positive)."""
  match = re.fullmatch(r"\s*(\d+(?:\.\d+)?)\s*([smh]?)\s*", text)
  if not match or float(match.group(1)) <= 0:
    raise StudyInputError(f"{flag} {text!r}: give a positive duration such as 90m, 2h or "
                          f"3600s")
  return float(match.group(1)) * {"": 1, "s": 1, "m": 60, "h": 3600}[match.group(2)]


def records_folder(args: argparse.Namespace, *parts: str) -> str | None:
  """The records of one of the script's studies: `--records`, else the checkout's
  records/<--readme section>, then `parts` (the study's folder inside the script's
  output); None where the script keeps none."""
  root = args.records if args.records is not None else (
      os.path.join(repository_root(), records_lib.RECORDS_FOLDER, args.readme)
      if args.readme else "")
  return os.path.join(root, *parts) if root else None


def keeping(args: argparse.Namespace) -> Keeping:
  """The records and slice flags as `run_study` takes them."""
  return Keeping(args.from_records, args.stale, args.stop_at)


def run_with_flags(args: argparse.Namespace, specs: Sequence[RunSpec], folder: str = "",
                   reuse: Sequence[str] = ()) -> list[RunResult]:
  """`run_study` of `specs` as the script's flags ask: in `--output`/`folder`, its records
  in the script's records/`folder`, reusing the runs and records of the sibling studies
  `reuse` (folders of `--output`) where their configs match."""
  return run_study(specs, os.path.join(args.output, folder), processes=args.processes,
                   resume=args.resume, reuse=[os.path.join(args.output, r) for r in reuse],
                   report=print_result, records=records_folder(args, folder),
                   reuse_records=[f for r in reuse if (f := records_folder(args, r))],
                   keeping=keeping(args))


def check_study_flags(args: argparse.Namespace) -> tuple[list[int], list[tuple[str, Any]]]:
  """The seeds and common overrides of `add_study_flags`' flags, each flag checked before
  anything is trained or written: distinct seeds, --processes >= 1, an --output that is
  not a file, a --readme section some page holds, --set entries of the form
  section.field=value, a --stop_after duration (its deadline set on `args.stop_at`).

  Raises:
    StudyInputError, SectionError: naming the flag, its value and what is allowed.
  """
  seeds = parse_seeds(args.seeds)
  if args.processes < 1:
    raise StudyInputError(f"--processes {args.processes}: runs trained at once must be at "
                          f"least 1")
  if args.eval_every is not None and args.eval_every < 0:
    raise StudyInputError(f"--eval_every {args.eval_every}: steps between evaluations must be "
                          f"at least 1 (0: only at the end)")
  if args.eval_growth is not None and not 0 <= args.eval_growth < 1:
    raise StudyInputError(f"--eval_growth {args.eval_growth}: a share of the step in [0, 1)")
  check_output(args.output, "--output")
  if args.readme:
    section_page(args.readme)
  if args.records is not None and args.records:
    check_output(args.records, "--records")
  if args.from_records and records_folder(args) is None:
    raise StudyInputError("--from_records: the study keeps no records; give --readme (its "
                          "records are records/<section>) or --records")
  args.stop_at = time.time() + parse_duration(args.stop_after) if args.stop_after else None
  return seeds, common_overrides(args)


def parse_strategies(text: str, flag: str = "--strategies") -> list[str]:
  """Comma-separated strategy names: known, distinct, at least one."""
  names = [name.strip() for name in text.split(",") if name.strip()]
  unknown = [name for name in names if name not in STRATEGIES]
  if not names or unknown:
    what = f"unknown strategies {unknown}" if unknown else "no strategy"
    raise StudyInputError(f"{flag} {text!r}: {what}; choose from {', '.join(STRATEGIES)}")
  if len(set(names)) != len(names):
    raise StudyInputError(f"{flag} {text!r} names a strategy twice")
  return names


def evaluation_overrides(every: int, growth: float = 0.0) -> list[tuple[str, Any]]:
  """Evaluate on the grid of `every` and `growth` (train/_evaluation_grid.py) and log training
  metrics every `every` steps (a study reads the evaluations and the summaries, and writing
  every step's row costs host time); `every` 0: only at the end, logging every 100 steps."""
  return [("train.eval_every", every), ("train.eval_growth", growth),
          ("train.log_every", every or 100)]


def final_evaluation_only(specs: Sequence[RunSpec]) -> list[RunSpec]:
  """`specs` evaluated only at the end: runs of which only the final accuracy is read
  (pilots, tuning by final accuracy)."""
  return [dataclasses.replace(spec, overrides=spec.overrides + tuple(evaluation_overrides(0)))
          for spec in specs]


def until_targets(specs: Sequence[RunSpec], goals: dict[str, float] | None) -> list[RunSpec]:
  """`specs` told the targets they are timed at (`goals`, `train.eval_targets`): evaluated
  densely near one not yet reached, and not during the run once all are reached (the
  evaluation at the end stays)."""
  if not goals:
    return list(specs)
  return [dataclasses.replace(spec, overrides=spec.overrides + (
      ("train.eval_targets", tuple(sorted(goals.values()))),)) for spec in specs]


def common_overrides(args: argparse.Namespace) -> list[tuple[str, Any]]:
  """The overrides the flags ask for, applied to every run of the study (no evaluation
  interval when --eval_every is None: a script that sets one per workload adds it)."""
  overrides = (evaluation_overrides(args.eval_every, args.eval_growth)
               if args.eval_every is not None else [])
  for entry in args.set:
    field, equals, value = entry.partition("=")
    if not equals or "." not in field:
      raise StudyInputError(f"--set {entry!r} must look like section.field=value")
    overrides.append((field, parse_value(value)))
  return overrides


# Flags that choose how a study is carried out, not what it computes: left out of the command
# a table names, so that its regeneration from records (--from_records) writes the same text.
_HOW_FLAGS = {"--resume": 0, "--from_records": 0, "--check": 0, "--processes": 1,
              "--stop_after": 1, "--stale": 1, "--records": 1, "--output": 1}


def command_line(script: str, argv: Sequence[str] | None = None) -> str:
  """How this script was called, to print under the tables it writes, without the flags
  that do not change its results (`_HOW_FLAGS`)."""
  argv, kept, skip = list(sys.argv[1:] if argv is None else argv), [], 0
  for arg in argv:
    name = arg.partition("=")[0]
    if skip:
      skip -= 1
    elif name in _HOW_FLAGS:
      skip = _HOW_FLAGS[name] if "=" not in arg else 0
    else:
      kept.append(arg)
  return " ".join([f"python {script}", *(shlex.quote(a) for a in kept)])


def continue_command() -> str:
  """This script's command line with --resume: what continues a study stopped part way."""
  argv = sys.argv[1:] + ([] if "--resume" in sys.argv else ["--resume"])
  return " ".join([f"python {sys.argv[0]}", *(shlex.quote(a) for a in argv)])


def print_result(result: RunResult) -> None:
  status = result.error or (f"{result.target.name} "
                            f"{result.summary[f'test_{result.target.name}']:.4f}")
  print(f"{result.spec.label}, seed {result.spec.seed}: {status}", flush=True)


def run_main(main: Callable[[], None]) -> None:
  """Runs a script's `main`; a bad flag, config, data set, config file or section ends it
  with one line (exit status 1) instead of a traceback, before any run starts; so does a
  folder that cannot be written, and pilots that all diverged (no target to time)."""
  # Before JAX's backend starts: the study's runs are compared, so they resume bit for bit
  # on a GPU too (XLA_FLAGS=--xla_gpu_deterministic_ops=false measures without), and
  # several processes share one GPU (each would otherwise take 75% of its memory). On a CPU
  # host the runs get the fastest layout, one simulated device per worker, unless XLA_FLAGS
  # sets a device count.
  xla_flags.request_deterministic_ops()
  xla_flags.simulate_host_devices()
  share_accelerator_memory()
  try:
    with abandoned_save_noise_hidden():  # a run's failed save is said in one line
      main()
  except StudyPaused as paused:
    print(f"stopped launching runs at --stop_after: {paused}, and any later studies of this "
          f"script; commit the records, then continue with: {continue_command()}", flush=True)
    sys.exit(0)
  except (ConfigError, DataError, FileNotFoundError, PilotsDivergedError, SectionError,
          StudyInputError, WorkdirError) as error:
    sys.exit(f"error: {error}")
  except OSError as error:  # e.g. a read-only --output or a full disk
    where = f" {error.filename}" if error.filename else ""
    sys.exit(f"error: cannot write{where}: {error.strerror or error}; give a folder you can "
             f"write to (or free space) and rerun with --resume")
