"""Step time, memory, compile time and state of every strategy against plain data parallelism.

  python scripts/benchmark.py [--models cnn1d,resnet20] [--steps 50] [--readme benchmark]

On the available devices (here: 8 simulated CPU devices; a GPU or TPU host runs it
as is), one worker per device, random input of the model's size (no data needed).
The baseline is written below: `jax.jit` data parallelism, replicated parameters,
`optax.sgd(momentum=0.9)` and a `pmean` of the gradients in a `shard_map`. Each
strategy's step is timed alternately with the baseline's (one of each, blocking on
both), so slow drifts of a shared machine hit both; the ratio is of the medians over
`--steps` steps after 3 warm-up steps. Also: compiled memory (arguments +
temporaries, `compiled.memory_analysis()`), compile time, strategy state in model
copies, and the backend compilations after the first step (must be 0). Finally the
default experiment's time waiting for data: how much longer its training loop runs
with the input pipeline than with one batch kept on the devices.

Writes <output>/benchmark.json and benchmark.md.
"""

import argparse
import json
import os
import shutil
import statistics
import time

import jax

jax.config.update("jax_num_cpu_devices", 8)  # CPU only; ignored where accelerators are

import jax.numpy as jnp  # noqa: E402
import numpy as np  # noqa: E402
import optax  # noqa: E402
from jax.sharding import Mesh, NamedSharding  # noqa: E402
from jax.sharding import PartitionSpec as P  # noqa: E402

from configs import default  # noqa: E402
from odsgd_jax import parallel  # noqa: E402
from odsgd_jax.cluster import synchronous_schedule  # noqa: E402
from odsgd_jax.models import make_model  # noqa: E402
from odsgd_jax.strategies import get_strategy, state_model_copies  # noqa: E402
from odsgd_jax.study import replace_section  # noqa: E402
from odsgd_jax.train import (build_experiment, init_state, make_train_step,  # noqa: E402
                             train_and_evaluate)

INPUT_SHAPES = {"cnn1d": (40,), "resnet20": (32, 32, 3)}
# (row name, strategy, options). odsgd without warm-up: its delayed step is what runs
# after the first 200 steps; local_sgd with an endless period: only non-sync steps.
ENTRIES = [
    ("ssgd", "ssgd", {}),
    ("asgd", "asgd", {}),
    ("ssp", "ssp", {"staleness": 2}),
    ("odsgd", "odsgd", {"local_lr": 0.1, "warmup_steps": 0}),
    ("pseudo_sync", "pseudo_sync", {}),
    ("local_sgd (period 4)", "local_sgd", {"period": 4}),
    ("local_sgd (non-sync steps)", "local_sgd", {"period": 10**9}),
    ("oscars (period 4)", "oscars", {"period": 4}),
    ("ssgd + topk:0.01", "ssgd", {"compression": "topk:0.01"}),
    ("ssgd + qsgd:8", "ssgd", {"compression": "qsgd:8"}),
    ("ssgd + powersgd:2", "ssgd", {"compression": "powersgd:2"}),
    ("ssgd + cast:bfloat16", "ssgd", {"compression": "cast:bfloat16"}),
]
INNER = optax.sgd(0.1, momentum=0.9)


class CompileCounter:
  """Counts XLA backend compilations (JAX reports each one's duration)."""

  def __init__(self):
    self.count = 0
    jax.monitoring.register_event_duration_secs_listener(self._on_event)

  def _on_event(self, event, duration, **kwargs):
    del duration, kwargs
    if event == "/jax/core/compile/backend_compile_duration":
      self.count += 1


def _loss(model, variables, images, labels):
  logits, new_state = model.apply(variables, images, train=True, mutable=["batch_stats"])
  one_hot = jax.nn.one_hot(labels, logits.shape[-1])
  return optax.softmax_cross_entropy(logits, one_hot).mean(), new_state


def baseline(model, input_shape, batch_per_device, devices):
  """Plain data parallelism: the step and its state (what every strategy is held to)."""
  mesh = Mesh(np.asarray(devices), ("data",))
  n = len(devices)
  variables = model.init(jax.random.key(0), jnp.zeros((1, *input_shape)), train=False)
  params = variables["params"]
  batch_stats = variables.get("batch_stats", {})
  stacked_stats = jax.tree.map(lambda x: jnp.broadcast_to(x, (n, *x.shape)), batch_stats)

  def device_step(params, opt_state, stats, images, labels):
    def loss_fn(p):
      return _loss(model, {"params": p, "batch_stats": jax.tree.map(lambda s: s[0], stats)},
                   images, labels)
    (loss, new_state), grads = jax.value_and_grad(loss_fn, has_aux=True)(params)
    grads = jax.lax.pmean(grads, "data")
    updates, opt_state = INNER.update(grads, opt_state, params)
    new_stats = jax.tree.map(lambda s: s[None], new_state.get("batch_stats", {}))
    return optax.apply_updates(params, updates), opt_state, new_stats, loss[None]

  step = jax.jit(jax.shard_map(
      device_step, mesh=mesh, in_specs=(P(), P(), P("data"), P("data"), P("data")),
      out_specs=(P(), P(), P("data"), P("data"))), donate_argnums=(0, 1, 2))
  replicated, split = NamedSharding(mesh, P()), NamedSharding(mesh, P("data"))
  state = (jax.device_put(params, replicated), jax.device_put(INNER.init(params), replicated),
           jax.device_put(stacked_stats, split))
  batch = (jax.device_put(np.zeros((n * batch_per_device, *input_shape), np.float32), split),
           jax.device_put(np.zeros((n * batch_per_device,), np.int32), split))

  def run(state):
    new = step(*state, *batch)
    jax.block_until_ready(new)
    return new[:3]

  return step, state, batch, run, params


def strategy_step(model, input_shape, batch_per_device, worker_mesh, name, options):
  strategy = get_strategy(name)
  tx = strategy.make(INNER, axis_name=parallel.WORKER_AXES, **options)
  state = init_state(model, tx, worker_mesh, input_shape, seed=0)
  n = worker_mesh.num_workers
  batch = jax.device_put({"image": np.zeros((n, batch_per_device, *input_shape), np.float32),
                          "label": np.zeros((n, batch_per_device), np.int32)},
                         worker_mesh.sharding(parallel.BATCH))
  step = make_train_step(model, tx, worker_mesh, strategy)
  tick = [0]

  def run(state):
    new, metrics = step(state, batch, synchronous_schedule(tick[0], n))
    tick[0] += 1
    jax.block_until_ready((new, metrics))
    return new

  return step, state, batch, run, tx


def _memory_mb(compiled):
  stats = compiled.memory_analysis()
  if stats is None:
    return None
  return (stats.argument_size_in_bytes + stats.temp_size_in_bytes) / 2**20


def _timed(run, state):
  started = time.perf_counter()
  state = run(state)
  return state, time.perf_counter() - started


def measure(model_name, batch_per_device, steps, counter, entries):
  devices = jax.devices()
  model = make_model(model_name, 10)
  shape = INPUT_SHAPES[model_name]
  worker_mesh = parallel.make_worker_mesh(len(devices), len(devices))
  b_step, b_state, b_batch, b_run, params = baseline(model, shape, batch_per_device, devices)
  started = time.perf_counter()
  b_compiled = b_step.lower(*b_state, *b_batch).compile()
  rows = [{"model": model_name, "entry": "baseline (jit + pmean, optax.sgd momentum)",
           "compile_s": time.perf_counter() - started, "memory_mb": _memory_mb(b_compiled),
           "state_copies": 1.0}]
  base_times = []
  for entry, name, options in entries:
    step, state, batch, run, tx = strategy_step(model, shape, batch_per_device, worker_mesh,
                                                name, options)
    schedule = synchronous_schedule(0, worker_mesh.num_workers)
    started = time.perf_counter()
    compiled = step.lower(state, batch, schedule).compile()
    compile_s = time.perf_counter() - started
    state = run(state)  # the first step
    compiles_before = counter.count
    times, paired = [], []
    for i in range(steps + 3):
      b_state, b_time = _timed(b_run, b_state)
      state, s_time = _timed(run, state)
      if i >= 3:
        paired.append(b_time)
        times.append(s_time)
    base_times += paired
    copies = state_model_copies(jax.eval_shape(tx.init, params), params)
    rows.append({
        "model": model_name, "entry": entry, "strategy": name, "options": options,
        "step_ms": 1e3 * statistics.median(times),
        "baseline_step_ms": 1e3 * statistics.median(paired),
        "ratio": statistics.median(times) / statistics.median(paired),
        "compile_s": compile_s, "memory_mb": _memory_mb(compiled), "state_copies": copies,
        "compiles_after_first_step": counter.count - compiles_before,
    })
    print(f"{model_name:8s} {entry:28s} {rows[-1]['step_ms']:8.2f} ms  "
          f"{rows[-1]['ratio']:.3f}x  compile {compile_s:5.1f} s  "
          f"recompiles {rows[-1]['compiles_after_first_step']}", flush=True)
  rows[0]["step_ms"] = 1e3 * statistics.median(base_times)
  rows[0]["ratio"] = 1.0
  return rows


class _OneBatchKept:
  """A batch source that reads one tick's batches and hands out the same device
  arrays on every tick: the loop without its input pipeline."""

  def __init__(self, source):
    self._source, self._kept = source, None

  def seek(self, positions):
    self._source.seek(positions)

  def take(self, active=None):
    if self._kept is None:
      self._kept = self._source.take(active)
    return self._kept


def data_wait(steps, output, repeats=3):
  """How much longer the default experiment's training loop runs with its input
  pipeline than with one batch read once and kept on the devices: the time the
  devices wait for data. (The summary's `input_host_fraction`, host time spent
  reading and transferring, overlaps the devices' work and is an upper bound.)

  Returns (devices' wait fraction, host input fraction), from the fastest of
  `repeats` alternating runs of each kind.
  """
  config = default.get_config(f"steps={steps}")
  workdir = os.path.join(output, "default_run")

  def run(batches=None):
    shutil.rmtree(workdir, ignore_errors=True)
    return train_and_evaluate(config, workdir, batches=batches)

  with_pipeline, without = [], []
  for _ in range(repeats):
    summary = run()
    with_pipeline.append((summary["loop_time_s"], summary["input_host_fraction"]))
    kept = _OneBatchKept(build_experiment(config).train_batches())
    without.append(run(kept)["loop_time_s"])
  fastest, host_fraction = min(with_pipeline)
  return max(0.0, 1.0 - min(without) / fastest), host_fraction


def table(rows, wait, command, devices):
  lines = [
      f"{devices}; one worker per device; batch per device as shown; median of the steps "
      f"after 3 warm-ups, each step timed alternately with the baseline's; produced by "
      f"`{command}`.",
      "",
      "| model | entry | step (ms) | vs baseline | compile (s) | memory (MB, args + temps) | "
      "state (model copies) | compilations after step 1 |",
      "|---|---|---|---|---|---|---|---|",
  ]
  for row in rows:
    memory = "-" if row["memory_mb"] is None else f"{row['memory_mb']:.1f}"
    lines.append(
        f"| {row['model']} | {row['entry']} | {row['step_ms']:.2f} | {row['ratio']:.3f}x | "
        f"{row['compile_s']:.1f} | {memory} | {row['state_copies']:.2f} | "
        f"{row.get('compiles_after_first_step', '-')} |")
  lines += ["", f"Default experiment (`configs/default.py`), waiting for data: the training "
                f"loop runs {100 * wait[0]:.1f}% longer with its input pipeline than with one "
                f"batch kept on the devices; the host spends {100 * wait[1]:.1f}% of the loop "
                f"reading and transferring batches, overlapped with the devices' work."]
  return "\n".join(lines)


def main() -> None:
  parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
  parser.add_argument("--models", default="cnn1d,resnet20")
  parser.add_argument("--steps", type=int, default=50, help="timed steps per entry (>= 50)")
  parser.add_argument("--batch_per_device", default="cnn1d=16,resnet20=8")
  parser.add_argument("--entries", default="", help="row names to run (comma-separated); "
                      "default: all")
  parser.add_argument("--data_steps", type=int, default=1000,
                      help="steps of the default run that measures waiting for data")
  parser.add_argument("--output", default="runs/benchmark")
  parser.add_argument("--readme", default="", help="also write README.md's section of this name")
  args = parser.parse_args()
  batches = dict(item.split("=") for item in args.batch_per_device.split(","))
  wanted = [e for e in args.entries.split(",") if e]
  entries = [e for e in ENTRIES if not wanted or e[0] in wanted]
  os.makedirs(args.output, exist_ok=True)
  counter = CompileCounter()
  rows = []
  for model_name in [m for m in args.models.split(",") if m]:
    rows += measure(model_name, int(batches[model_name]), args.steps, counter, entries)
  wait = data_wait(args.data_steps, args.output)
  devices = f"{jax.device_count()} x {jax.devices()[0].device_kind}"
  command = "python scripts/benchmark.py" + (f" --models {args.models}"
                                             if args.models != "cnn1d,resnet20" else "")
  text = table(rows, wait, command, devices)
  with open(os.path.join(args.output, "benchmark.json"), "w", encoding="utf-8") as f:
    json.dump({"devices": devices, "rows": rows, "data_wait_fraction": wait[0],
               "input_host_fraction": wait[1]}, f, indent=2)
  with open(os.path.join(args.output, "benchmark.md"), "w", encoding="utf-8") as f:
    f.write(text + "\n")
  print(text)
  if args.readme:
    replace_section(args.readme, text)


if __name__ == "__main__":
  main()
