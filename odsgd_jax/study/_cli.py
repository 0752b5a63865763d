"""Command-line flags and helpers that every study script shares."""

import argparse
import shlex
import sys
from typing import Any, Callable

from odsgd_jax import xla_flags
from odsgd_jax.data import DataError
from odsgd_jax.strategies import STRATEGIES
from odsgd_jax.study._grid import StudyInputError, parse_seeds, parse_value
from odsgd_jax.study._readme import SectionError, section_page
from odsgd_jax.study._targets import PilotsDivergedError
from odsgd_jax.study._runner import (RunResult, check_output, default_processes,
                                     share_accelerator_memory)
from odsgd_jax.train import ConfigError, WorkdirError, hide_abandoned_save_noise


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
  """--seeds, --eval_every, --set, --processes, --output, --resume and --readme (the
  generated section to write: a name, or, for a script with one `section`, a switch)."""
  parser.add_argument("--seeds", default="0-11",
                      help="e.g. 0-11 or 0,1,2 (at least 10 for a verdict; docs/results.md)")
  parser.add_argument("--eval_every", type=int, default=4,
                      help="steps between evaluations: a time to target is known to within "
                      "this span (4 steps: 1.7%% of the earliest arrival of MNIST-1D's ssgd "
                      "at its primary target, step 235, finer than the 5%% that counts as "
                      "faster)")
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


def check_study_flags(args: argparse.Namespace) -> tuple[list[int], list[tuple[str, Any]]]:
  """The seeds and common overrides of `add_study_flags`' flags, each flag checked before
  anything is trained or written: distinct seeds, --processes >= 1, an --output that is
  not a file, a --readme section some page holds, --set entries of the form
  section.field=value.

  Raises:
    StudyInputError, SectionError: naming the flag, its value and what is allowed.
  """
  seeds = parse_seeds(args.seeds)
  if args.processes < 1:
    raise StudyInputError(f"--processes {args.processes}: runs trained at once must be at "
                          f"least 1")
  if args.eval_every is not None and args.eval_every < 1:
    raise StudyInputError(f"--eval_every {args.eval_every}: steps between evaluations must be "
                          f"at least 1")
  check_output(args.output, "--output")
  if args.readme:
    section_page(args.readme)
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


def evaluation_overrides(every: int) -> list[tuple[str, Any]]:
  """Evaluate every `every` steps and log training metrics as often: a study reads the
  evaluations and the summaries, and writing every step's row costs host time."""
  return [("train.eval_every", every), ("train.log_every", every)]


def common_overrides(args: argparse.Namespace) -> list[tuple[str, Any]]:
  """The overrides the flags ask for, applied to every run of the study (no evaluation
  interval when --eval_every is None: a script that sets one per workload adds it)."""
  overrides = evaluation_overrides(args.eval_every) if args.eval_every is not None else []
  for entry in args.set:
    field, equals, value = entry.partition("=")
    if not equals or "." not in field:
      raise StudyInputError(f"--set {entry!r} must look like section.field=value")
    overrides.append((field, parse_value(value)))
  return overrides


def command_line(script: str) -> str:
  """How this script was called, to print under the tables it writes."""
  return f"python {script} " + " ".join(shlex.quote(a) for a in sys.argv[1:])


def print_result(result: RunResult) -> None:
  status = result.error or f"accuracy {result.accuracy:.4f}"
  print(f"{result.spec.label}, seed {result.spec.seed}: {status}", flush=True)


def run_main(main: Callable[[], None]) -> None:
  """Runs a script's `main`; a bad flag, config, data set, config file or section ends it
  with one line (exit status 1) instead of a traceback, before any run starts; so does a
  folder that cannot be written, and pilots that all diverged (no target to time)."""
  hide_abandoned_save_noise()
  # Before JAX's backend starts: the study's runs are compared, so they resume bit for bit
  # on a GPU too (XLA_FLAGS=--xla_gpu_deterministic_ops=false measures without), and
  # several processes share one GPU (each would otherwise take 75% of its memory).
  xla_flags.request_deterministic_ops()
  share_accelerator_memory()
  try:
    main()
  except (ConfigError, DataError, FileNotFoundError, PilotsDivergedError, SectionError,
          StudyInputError, WorkdirError) as error:
    sys.exit(f"error: {error}")
  except OSError as error:  # e.g. a read-only --output or a full disk
    where = f" {error.filename}" if error.filename else ""
    sys.exit(f"error: cannot write{where}: {error.strerror or error}; give a folder you can "
             f"write to (or free space) and rerun with --resume")
