"""Every bad command line ends in one line on stderr and exit status 1, before any long
work, with the run already in the workdir left exactly as it was."""

import hashlib
import pathlib

import ast
import subprocess
import sys
import time

import ml_collections
import pytest

from configs import default
from odsgd_jax.strategies import STRATEGIES
from odsgd_jax.train import ConfigError, train_and_evaluate

REPO = pathlib.Path(__file__).resolve().parent.parent
DEFAULT = str(REPO / "configs" / "default.py")


def tree_hash(folder: pathlib.Path) -> str:
  digest = hashlib.sha256()
  for path in sorted(folder.rglob("*")):
    digest.update(str(path.relative_to(folder)).encode())
    if path.is_file():
      digest.update(path.read_bytes())
  return digest.hexdigest()


@pytest.fixture
def existing_run(tmp_path):
  """A workdir holding another run's files: nothing here may change."""
  workdir = tmp_path / "run"
  (workdir / "checkpoints" / "20").mkdir(parents=True)
  (workdir / "checkpoints" / "20" / "state").write_bytes(b"\x00" * 64)
  (workdir / "config.json").write_text('{"strategy": {"name": "odsgd"}}')
  (workdir / "metrics.jsonl").write_text('{"step": 20}\n')
  return workdir


def run_cli(argv: list[str]) -> tuple[int, str]:
  """Exit status and stderr; nothing may reach stdout (the start line comes after the
  checks)."""
  result = subprocess.run([sys.executable, "-m", "experiments.train", *argv], cwd=REPO,
                          capture_output=True, text=True, timeout=120)
  assert result.stdout == "", result.stdout
  return result.returncode, result.stderr


def bad_files(tmp_path: pathlib.Path) -> dict[str, pathlib.Path]:
  syntax = tmp_path / "syntax_error.py"
  syntax.write_text("def get_config(:\n")
  raises = tmp_path / "raises.py"
  raises.write_text("def get_config():\n  raise RuntimeError('no config here')\n")
  a_file = tmp_path / "a_file"
  a_file.write_text("not a folder")
  noget = tmp_path / "no_get_config.py"
  noget.write_text("def config():\n  return None\n")
  return {"syntax": syntax, "raises": raises, "a_file": a_file, "noget": noget}


# The config file and flags, each case in its own process as a user meets it.
FLAG_CASES = [
    ("missing config file", "{tmp}/nope.py", [], "--config does not load: [Errno 2]"),
    ("config syntax error", "{syntax}", [], "--config does not load: invalid syntax"),
    ("config file raises", "{raises}", [],
     "--config does not load: RuntimeError: no config here"),
    ("unknown strategy argument", DEFAULT + ":fastsgd", [],
     "--config does not load: ValueError: unknown strategy 'fastsgd'"),
    ("misspelt field", DEFAULT, ["--config.train.num_step=5"],
     "unknown config field train.num_step; did you mean train.num_steps?"),
    ("unknown flag", DEFAULT, ["--no_such_flag=1"], "Unknown command line flag"),
    ("zero join timeout", DEFAULT, ["--join_timeout_s=0"],
     "flag --join_timeout_s=0: 0 is not a positive integer"),
    ("no get_config", "{noget}", [], "--config {noget} has no get_config() function"),
    # checked before the start line ("devices: ..."), which would describe a run that
    # cannot start
    ("more devices than there are", DEFAULT, ["--config.parallel.num_devices=16"],
     "parallel.num_devices=16"),
    ("model option out of range", DEFAULT, ["--config.model.channels=0"],
     "model.channels=0 is out of range"),
] + [  # an option bounded by 1/N (EASGD's moving rate): 0.5 is out of range for 8 workers
    (f"{strategy}.{name} above {domain.high:g}/N", f"{DEFAULT}:{strategy}",
     [f"--config.strategy.{name}=0.5"], f"strategy.{name}=0.5 is out of range")
    for strategy, definition in STRATEGIES.items()
    for name, domain in definition.make.domains.items()
    if domain.per_worker and domain.high / 8 < 0.5
]


@pytest.mark.parametrize("case,config,extra,expected", FLAG_CASES,
                         ids=[c[0] for c in FLAG_CASES])
def test_bad_command_line_is_one_line_and_exit_1(tmp_path, existing_run, case, config, extra,
                                                 expected):
  del case
  names = {"tmp": tmp_path, **bad_files(tmp_path)}
  before = tree_hash(existing_run)
  code, stderr = run_cli(["--config", config.format(**names), "--workdir", str(existing_run),
                          *extra])
  lines = stderr.strip().splitlines()
  expected = expected.format(**names)
  assert code == 1 and len(lines) == 1 and lines[0].startswith(f"error: {expected}"), stderr[-2000:]
  assert tree_hash(existing_run) == before


# Values: what `train.main` prints after "" (one line, exit 1; the CLI tests above
# check that mapping), raised before anything is read, compiled or written.
CASES = [
    ("workdir is a file", DEFAULT, [], "{a_file}", "--workdir {a_file} is a file"),
    ("workdir cannot be created", DEFAULT, [], "{a_file}/run",
     "--workdir {a_file}/run cannot be created"),
    ("empty workdir", DEFAULT, [], "", "--workdir is empty"),
    ("outer is a string", DEFAULT + ":local_sgd", ["--config.strategy.outer=nesterov"], None,
     "strategy.outer='nesterov' is not an optimizer"),
    ("negative seed", DEFAULT, ["--config.train.seed=-1"], None, "train.seed=-1 is out"),
    ("negative decay", DEFAULT, ["--config.optimizer.decay_factor=-0.1"], None,
     "optimizer.decay_factor=-0.1 is out"),
    ("infinite learning rate", DEFAULT, ["--config.optimizer.learning_rate=inf"], None,
     "optimizer.learning_rate=inf is not finite"),
    ("nan local_lr", DEFAULT + ":odsgd", ["--config.strategy.local_lr=nan"], None,
     "strategy.local_lr=nan is not finite"),
    ("negative dc_lambda", DEFAULT + ":odsgd", ["--config.strategy.dc_lambda=-1.0"], None,
     "strategy.dc_lambda=-1.0 is out"),
    ("alpha_min above 1", DEFAULT + ":pseudo_sync", ["--config.strategy.alpha_min=1.5"], None,
     "strategy.alpha_min=1.5 is out"),
    ("phi of 1", DEFAULT + ":pseudo_sync", ["--config.strategy.phi=1.0"], None,
     "strategy.phi=1.0 is out"),
    ("negative delay compensation", DEFAULT + ":asgd",
     ["--config.strategy.delay_compensation=-0.5"], None,
     "strategy.delay_compensation=-0.5 is out"),
    ("model does not fit the data", DEFAULT, ["--config.data.name=digits"], None,
     "model.name='cnn1d' does not take data.name='digits''s inputs"),
    ("no channels", DEFAULT, ["--config.model.channels=0"], None,
     "model.channels=0 is out of range; allowed: an integer in [1, inf)"),
    ("dropout of 1.5", DEFAULT, ["--config.model.dropout_rate=1.5"], None,
     "model.dropout_rate=1.5 is out of range; allowed: a finite number in [0, 1)"),
]


def configured(strategy: str, overrides: list[str]):
  config = default.get_config(strategy)
  for override in overrides:
    field, _, text = override.removeprefix("--config.").partition("=")
    section, name = field.split(".")
    fields = config[section].to_dict()
    fields[name] = ast.literal_eval(text) if text[:1].isdigit() or text[:1] in "-(" else (
        float(text) if text in ("inf", "nan") else text)
    config[section] = ml_collections.ConfigDict(fields)
  return config


@pytest.mark.parametrize("case,config,extra,workdir,expected", CASES, ids=[c[0] for c in CASES])
def test_bad_input_is_one_line_before_any_work(tmp_path, existing_run, case, config, extra,
                                               workdir, expected):
  del case
  names = {"tmp": tmp_path, **bad_files(tmp_path)}
  workdir = str(existing_run) if workdir is None else workdir.format(**names)
  before = tree_hash(existing_run)
  strategy = config.partition(":")[2] or "odsgd"
  with pytest.raises(ConfigError) as error:
    train_and_evaluate(configured(strategy, extra), workdir)
  message = str(error.value)
  assert "\n" not in message and message.startswith(expected.format(**names)), message
  assert tree_hash(existing_run) == before


def test_a_failed_checkpoint_save_stops_the_run_in_one_line(data_dir, tmp_path):
  """The folder under a running run's checkpoints disappears: the next asynchronous save
  fails, and the run says so and exits, instead of waiting forever on orbax's threads."""
  workdir = tmp_path / "run"
  run = subprocess.Popen(
      [sys.executable, "-m", "experiments.train", "--config", DEFAULT, "--workdir", str(workdir),
       "--config.train.num_steps=400", "--config.train.checkpoint_every=10",
       "--config.train.progress_bar=False", f"--config.data.data_dir={data_dir}"],
      cwd=REPO, stdout=subprocess.PIPE, stderr=subprocess.PIPE, text=True)
  try:
    deadline = time.monotonic() + 180
    while not (workdir / "checkpoints" / "10").exists():
      assert run.poll() is None and time.monotonic() < deadline, run.communicate()[1][-2000:]
      time.sleep(0.05)
    (workdir / "checkpoints").rename(workdir / "saved")
    (workdir / "checkpoints").write_text("in the way")
    _, stderr = run.communicate(timeout=120)
  finally:
    run.kill()
  # The run's own word is the only line: the tracebacks orbax's abandoned threads and
  # coroutines would print are hidden (train.abandoned_save_noise_hidden).
  ours = stderr.strip().splitlines()
  assert run.returncode == 1 and len(ours) == 1, stderr[-3000:]
  assert ours[0].startswith("error: saving a checkpoint in") and "resume" in ours[0]
  assert "fix the folder" in ours[0]  # a storage error: the folder is to blame
  assert (workdir / "saved" / "10").is_dir()  # what was saved before is intact
