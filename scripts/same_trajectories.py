r"""Whether a change moved any trajectory: 21 configurations, each strategy and the options
that take other paths through its code, trained for 60 steps, their metrics.jsonl and
clock.json compared field by field with another checkout's (the fields that time the
machine aside). For a change that must preserve behaviour (issue 48's check, issue 63's).

  python scripts/same_trajectories.py --output /tmp/after                    # this checkout
  python scripts/same_trajectories.py --output /tmp/before --repo ../before  # the other
  python scripts/same_trajectories.py --compare /tmp/before /tmp/after

Each run is `python -m experiments.train` in its own process, with `--devices` simulated CPU
devices (8: one worker each; 1: all 8 on one device).
"""

import argparse
import json
import os
import subprocess
import sys

REPO = os.path.dirname(os.path.dirname(os.path.abspath(__file__)))

# name: (config, overrides). Warm-ups shortened so that each strategy reaches its settled
# ticks' program within the 60 steps.
CONFIGURATIONS = {
    "ssgd": ("configs/default.py:ssgd", []),
    "ssgd_topk": ("configs/default.py:ssgd", ["strategy.compression=topk:0.1"]),
    "ssgd_powersgd": ("configs/default.py:ssgd", ["strategy.compression=powersgd:2"]),
    "asgd": ("configs/default.py:asgd", []),
    "asgd_dc": ("configs/default.py:asgd", ["strategy.delay_compensation=2.0"]),
    "ssp": ("configs/default.py:ssp", []),
    "odsgd": ("configs/default.py:odsgd", ["strategy.warmup_steps=20"]),
    "odsgd_momentum": ("configs/default.py:odsgd", ["strategy.warmup_steps=10",
                                                    "strategy.local_optimizer=momentum"]),
    "odsgd_dcasgd_predict_spike": ("configs/default.py:odsgd", [
        "strategy.warmup_steps=10", "strategy.local_optimizer=dcasgd",
        "strategy.correction=predict+spike"]),
    "odsgd_replay_spike": ("configs/default.py:odsgd", [
        "strategy.warmup_steps=10", "strategy.local_optimizer=replay",
        "strategy.correction=spike"]),
    "odsgd_qsgd": ("configs/default.py:odsgd", ["strategy.warmup_steps=10",
                                                "strategy.compression=qsgd:4"]),
    "pseudo_sync": ("configs/default.py:pseudo_sync", []),
    "pseudo_sync_none": ("configs/default.py:pseudo_sync", ["strategy.correction=none"]),
    "pseudo_sync_predict_fixed": ("configs/default.py:pseudo_sync", [
        "strategy.correction=predict", "strategy.confidence=fixed"]),
    "local_sgd": ("configs/default.py:local_sgd", []),
    "local_sgd_heterogeneous": ("configs/oscars_heterogeneous.py:local_sgd", []),
    "oscars_heterogeneous": ("configs/oscars_heterogeneous.py:oscars", []),
    "oscars_linear": ("configs/oscars_heterogeneous.py:oscars", ["strategy.adapt=linear"]),
    "gossip": ("configs/default.py:gossip", []),
    "gossip_step_first": ("configs/default.py:gossip", ["strategy.order=step_first"]),
    "easgd": ("configs/default.py:easgd", []),
}
STEPS = 60
# Fields that time the machine, not the run.
MACHINE_FIELDS = ("wall_time", "steps_per_s", "time_s", "input_s", "loop_s", "evaluation_s",
                  "eval_s", "compile")


def run_all(output: str, devices: int, names: list[str], repo: str) -> None:
  for name in names:
    config, overrides = CONFIGURATIONS[name]
    workdir = os.path.join(output, name)
    command = [sys.executable, "-m", "experiments.train", "--config", config,
               "--workdir", workdir, f"--config.train.num_steps={STEPS}",
               "--config.train.eval_every=20", "--config.train.eval_growth=0",
               "--config.train.progress_bar=False", "--config.optimizer.warmup_steps=0",
               *[f"--config.{o}" for o in overrides]]
    env = {**os.environ, "XLA_FLAGS": f"--xla_force_host_platform_device_count={devices}"}
    result = subprocess.run(command, cwd=repo, env=env, capture_output=True, text=True)
    status = "ok" if result.returncode == 0 else f"failed: {result.stderr[-500:]}"
    print(f"{name}: {status}", flush=True)


def _is_machine(key: str) -> bool:
  return any(part in key for part in MACHINE_FIELDS)


def _rows(path: str) -> list[dict]:
  with open(path, encoding="utf-8") as f:
    return [{k: v for k, v in json.loads(line).items() if not _is_machine(k)}
            for line in f if line.strip()]


def _clock(path: str) -> dict:
  with open(path, encoding="utf-8") as f:
    return json.load(f)


def compare(before: str, after: str, names: list[str]) -> int:
  differing = 0
  for name in names:
    a, b = os.path.join(before, name), os.path.join(after, name)
    problems = []
    for file, read in (("metrics.jsonl", _rows), ("clock.json", _clock)):
      try:
        if read(os.path.join(a, file)) != read(os.path.join(b, file)):
          problems.append(f"{file} differs")
      except FileNotFoundError as error:
        problems.append(f"missing {error.filename}")
    differing += bool(problems)
    print(f"{name}: {'; '.join(problems) or 'identical'}")
  print(f"{len(names) - differing} of {len(names)} identical")
  return 1 if differing else 0


def main() -> int:
  parser = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
  parser.add_argument("--output", help="train every configuration into this folder")
  parser.add_argument("--devices", type=int, default=8)
  parser.add_argument("--repo", default=REPO, help="the checkout whose code trains them")
  parser.add_argument("--compare", nargs=2, metavar=("BEFORE", "AFTER"))
  parser.add_argument("--only", default="", help="comma-separated configuration names")
  args = parser.parse_args()
  names = [n for n in args.only.split(",") if n] or list(CONFIGURATIONS)
  if args.compare:
    return compare(*args.compare, names)
  if not args.output:
    parser.error("give --output or --compare")
  run_all(os.path.abspath(args.output), args.devices, names, os.path.abspath(args.repo))
  return 0


if __name__ == "__main__":
  sys.exit(main())
