"""Step time, memory, compile time and state of every strategy against plain data parallelism.

  python scripts/benchmark.py [--models cnn1d,mlp,mlp_wide,resnet20] [--steps 40] \
      [--entries odsgd,...] [--readme benchmark]
  python scripts/benchmark.py --models transformer --data_repeats 0 --readme benchmark_lm

On the available devices (here: 8 simulated CPU devices; a GPU or TPU host runs it as
is, and adds ResNet-20 at batch 128), one worker per device, input of zeros of the model's
size (no data needed). `transformer` is the language model of configs/kjv_transformer.py
(next-token prediction on 128 characters, AdamW inside every step, the baselines too).
On a GPU, XLA's deterministic ops are on, as in a training run
(`XLA_FLAGS=--xla_gpu_deterministic_ops=false` times without them); the caption says
which. Two plain formulations of data parallelism are written below, each with the
model's inner optimizer (`optax.sgd(momentum=0.9)`; AdamW for the transformer) and
returning the batch's loss and accuracy, as every strategy's step does for the loop:
`jax.jit` over arrays placed with `NamedSharding` (parameters replicated, the batch split
over a `data` axis, XLA inserting the all-reduce: what most JAX users write first), and a
`shard_map` with an explicit `pmean`. Both are timed; the faster is the baseline (1.00x).
Every entry's step is timed alternately with the baseline's (one of each, blocking on
both), so slow drifts of a shared machine hit both; the ratio is of the medians over
`--steps` steps after 3 warm-up steps. The strategy steps are the training loop's: the
schedule already on the devices, the gradient/update/parameter norms left to the steps of
their own interval (`train.norms_every`, a program of their own: one row times it). Also:
compiled memory (arguments + temporaries), compile time, the operations of the compiled
step's entry computation and how many of them are copies (on a small model each is a
kernel launch per device that costs more than its arithmetic), strategy state in model
copies, and the backend compilations after the first step (must be 0). Finally the default
experiment's time waiting for data (--data_repeats 0: not measured).

Writes <output>/benchmark.json and benchmark.md.
"""

import dataclasses
import json
import os
import re
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
from odsgd_jax.study import (StudyInputError, environment, markdown,  # noqa: E402
                             replace_section, run_main, script_parser)
from odsgd_jax.tasks import CLASSIFICATION, NEXT_TOKEN, Task  # noqa: E402
from odsgd_jax.train import (build_experiment, make_train_step,  # noqa: E402
                             train_and_evaluate)

INNER = optax.sgd(0.1, momentum=0.9)


@dataclasses.dataclass(frozen=True)
class Bench:
  """A model the benchmark times: its input shape, options, batch per device, task,
  outputs and the inner optimizer of its steps."""

  model: str
  input_shape: tuple[int, ...]
  options: dict
  batch: int
  task: Task = CLASSIFICATION
  num_classes: int = 10
  inner: optax.GradientTransformation = INNER


# The MLP at the model's default widths (256, 256) and batch 64; the wide MLP's parameters
# dominate its compute, so optimizer and communication overhead shows most there; ResNet-20
# at batch 128 is a realistic per-GPU batch, whose step on a GPU is bound by kernel launches
# (minutes a step on a CPU: run by default on accelerators only). The transformer is
# configs/kjv_transformer.py's, at its batch and with its AdamW (without the schedule).
MODELS = {
    "cnn1d": Bench("cnn1d", (40,), {}, 16),
    "mlp": Bench("mlp", (40,), {}, 64),
    "mlp_wide": Bench("mlp", (40,), {"hidden_sizes": (1024, 1024)}, 16),
    "resnet20": Bench("resnet20", (32, 32, 3), {}, 8),
    "resnet20_b128": Bench("resnet20", (32, 32, 3), {}, 128),
    "transformer": Bench("transformer", (128,),
                         {"width": 64, "depth": 2, "heads": 4, "max_length": 128}, 8,
                         NEXT_TOKEN, 64, optax.chain(optax.clip_by_global_norm(1.0),
                                                     optax.adamw(0.01, weight_decay=0.1))),
}
# run only when named (--models): its rows are a section of their own (benchmark_lm)
OWN_SECTION = ("transformer",)
ACCELERATOR_ONLY = ("resnet20_b128",)
# Lines of the compiled HLO's entry computation that run nothing: the rest are kernels.
_NOT_RUN = ("parameter", "constant", "get-tuple-element", "bitcast", "tuple")
NEVER = 2**30  # a local SGD period no run reaches: only non-sync steps
# (row name, strategy, options, the norms steps' program). odsgd without warm-up: the
# program of its settled ticks, which every tick after the warm-up runs, does not depend
# on the warm-up's length and starts sooner; an endless period: only non-sync steps.
ENTRIES = [
    ("ssgd", "ssgd", {}, False),
    ("ssgd (norms step)", "ssgd", {}, True),
    ("asgd", "asgd", {}, False),
    ("ssp", "ssp", {"staleness": 2}, False),
    ("odsgd", "odsgd", {"local_lr": 0.1, "warmup_steps": 0}, False),
    ("odsgd (replay + spike)", "odsgd", {"local_lr": 0.1, "warmup_steps": 0,
                                         "local_optimizer": "replay", "correction": "spike"},
     False),
    ("pseudo_sync", "pseudo_sync", {}, False),
    # Without the tracking signal: the difference is what the adaptive confidence's sums cost.
    ("pseudo_sync (fixed confidence)", "pseudo_sync", {"confidence": "fixed"}, False),
    # as the experiments run it (its registered defaults)
    ("pseudo_sync (as shipped: replay + spike)", "pseudo_sync",
     {"alpha_min": 0.5, "correction": "replay+spike"}, False),
    ("local_sgd (period 4)", "local_sgd", {"period": 4}, False),
    ("local_sgd (non-sync steps)", "local_sgd", {"period": NEVER}, False),
    ("oscars (period 4)", "oscars", {"period": 4}, False),
    ("oscars (non-sync steps)", "oscars", {"period": NEVER}, False),
    ("easgd (period 1)", "easgd", {}, False),
    ("easgd (non-sync steps)", "easgd", {"period": NEVER}, False),
    ("ssgd + topk:0.01", "ssgd", {"compression": "topk:0.01"}, False),
    ("ssgd + qsgd:8", "ssgd", {"compression": "qsgd:8"}, False),
    ("ssgd + powersgd:2", "ssgd", {"compression": "powersgd:2"}, False),
    ("ssgd + cast:bfloat16", "ssgd", {"compression": "cast:bfloat16"}, False),
]


class CompileCounter:
  """Counts XLA backend compilations (JAX reports each one's duration)."""

  def __init__(self):
    self.count = 0
    jax.monitoring.register_event_duration_secs_listener(self._on_event)

  def _on_event(self, event, duration, **kwargs):
    del duration, kwargs
    if event == "/jax/core/compile/backend_compile_duration":
      self.count += 1


class Step:
  """A jitted step, its state and inputs: `run()` takes one step and blocks on it."""

  def __init__(self, step, state, inputs, tx=None):
    self.step, self.state, self.inputs, self.tx = step, state, inputs, tx
    self.compile_s = self.memory_mb = self.operations = None

  def compile(self):
    started = time.perf_counter()
    compiled = self.step.lower(*self.state, *self.inputs).compile()
    self.compile_s = time.perf_counter() - started
    stats = compiled.memory_analysis()
    if stats is not None:
      self.memory_mb = (stats.argument_size_in_bytes + stats.temp_size_in_bytes) / 2**20
    self.operations = entry_operations(compiled.as_text())

  def run(self) -> float:
    started = time.perf_counter()
    outputs = self.step(*self.state, *self.inputs)
    jax.block_until_ready(outputs)
    self.state = tuple(outputs[:len(self.state)])
    return time.perf_counter() - started


def entry_operations(hlo_text: str) -> dict[str, int]:
  """{"run": operations the compiled program's entry computation runs (branches of a
  conditional count as the one conditional), "copies": how many of them are copies}."""
  entry = hlo_text[hlo_text.index("\nENTRY"):]
  entry = entry[:entry.index("\n}")]
  opcodes = re.findall(r"^\s*(?:ROOT )?%\S+ = .*? ([a-z][a-z0-9\-]*)\(", entry, re.MULTILINE)
  run = [op for op in opcodes if op not in _NOT_RUN]
  return {"run": len(run), "copies": run.count("copy")}


def _init(model, bench):
  return model.init(jax.random.key(0), bench.task.example_input(bench.input_shape),
                    train=False)


def _loss(model, variables, batch, task):
  """(loss, (new BatchNorm state, the batch's accuracy)): the loss and accuracy a train
  step returns to be logged, as the flax examples' steps and the training loop's do."""
  outputs, new_state = model.apply(variables, task.inputs(batch), train=True,
                                   mutable=["batch_stats"])
  accuracy = task.train_metrics(outputs, batch)["accuracy"]
  return task.loss(outputs, batch), (new_state, accuracy)


def _global_batch(mesh, n, bench):
  split = NamedSharding(mesh, P("data"))
  return (jax.device_put(bench.task.example_batch(bench.input_shape, (n * bench.batch,)),
                         split),)


def jit_baseline(model, bench, devices) -> Step:
  """`jax.jit` over NamedSharding-placed arrays: replicated parameters and optimizer state,
  the batch split over `data`; XLA inserts the all-reduce (BatchNorm: global statistics)."""
  mesh = Mesh(np.asarray(devices), ("data",))
  variables = _init(model, bench)
  params, stats = variables["params"], variables.get("batch_stats", {})

  def step(params, opt_state, stats, batch):
    def loss_fn(p):
      return _loss(model, {"params": p, "batch_stats": stats}, batch, bench.task)
    (loss, (new_state, accuracy)), grads = jax.value_and_grad(loss_fn, has_aux=True)(params)
    updates, opt_state = bench.inner.update(grads, opt_state, params)
    return (optax.apply_updates(params, updates), opt_state,
            new_state.get("batch_stats", stats), jnp.stack([loss, accuracy]))

  replicated = NamedSharding(mesh, P())
  state = jax.device_put((params, bench.inner.init(params), stats), replicated)
  return Step(jax.jit(step, donate_argnums=(0, 1, 2)), state,
              _global_batch(mesh, len(devices), bench))


def shard_map_baseline(model, bench, devices) -> Step:
  """A `shard_map` over `data` with an explicit `pmean` of the gradients (per-device
  BatchNorm statistics, as the strategies keep them)."""
  mesh = Mesh(np.asarray(devices), ("data",))
  n = len(devices)
  variables = _init(model, bench)
  params = variables["params"]
  stats = jax.tree.map(lambda x: jnp.broadcast_to(x, (n, *x.shape)),
                       variables.get("batch_stats", {}))

  def device_step(params, opt_state, stats, batch):
    def loss_fn(p):
      return _loss(model, {"params": p, "batch_stats": jax.tree.map(lambda s: s[0], stats)},
                   batch, bench.task)
    (loss, (new_state, accuracy)), grads = jax.value_and_grad(loss_fn, has_aux=True)(params)
    grads = jax.lax.pmean(grads, "data")
    updates, opt_state = bench.inner.update(grads, opt_state, params)
    new_stats = jax.tree.map(lambda s: s[None], new_state.get("batch_stats", {}))
    metrics = jnp.stack([loss, accuracy])[None]  # this device's, as the strategies log them
    return optax.apply_updates(params, updates), opt_state, new_stats, metrics

  step = jax.jit(jax.shard_map(
      device_step, mesh=mesh, in_specs=(P(), P(), P("data"), P("data")),
      out_specs=(P(), P(), P("data"), P("data"))), donate_argnums=(0, 1, 2))
  replicated, split = NamedSharding(mesh, P()), NamedSharding(mesh, P("data"))
  state = (jax.device_put(params, replicated),
           jax.device_put(bench.inner.init(params), replicated), jax.device_put(stats, split))
  return Step(step, state, _global_batch(mesh, n, bench))


def strategy_step(model, bench, worker_mesh, name, options, norms) -> Step:
  """The training loop's step of strategy `name`, the schedule already on the devices;
  with `norms`, the program of the steps that compute the norms. A strategy whose first
  ticks differ (`TrainStep.settled_from`) takes them as the loop does and is timed in the
  program of the settled ticks, which every later tick runs."""
  strategy = get_strategy(name)
  tx = strategy.make(bench.inner, axis_name=parallel.WORKER_AXES, **options)
  n = worker_mesh.num_workers
  batch = jax.device_put(bench.task.example_batch(bench.input_shape, (n, bench.batch)),
                         worker_mesh.sharding(parallel.BATCH))
  schedule = jax.device_put(synchronous_schedule(0, n), worker_mesh.sharding(parallel.REPLICATED))
  train_step = make_train_step(model, tx, worker_mesh, strategy, task=bench.task)
  state = train_step.init_state(bench.input_shape, seed=0)
  for tick in range(train_step.settled_from):  # the first ticks, in their program
    state, _ = train_step(state, batch, schedule, tick)
  return _StrategyStep(train_step.program(norms, train_step.settled_from), state, batch,
                       schedule, tx)


class _StrategyStep(Step):
  """A strategy step: its state is one TrainState; its metrics are blocked on too."""

  def __init__(self, step, state, batch, schedule, tx):
    super().__init__(step, (state,), (batch, schedule), tx)

  def run(self) -> float:
    started = time.perf_counter()
    state, metrics = self.step(*self.state, *self.inputs)
    jax.block_until_ready((state, metrics))
    self.state = (state,)
    return time.perf_counter() - started


def _alternate(a: Step, b: Step, steps: int) -> tuple[list[float], list[float]]:
  """Times of `steps` steps of each, taken one of a, one of b, after 3 of each."""
  times_a, times_b = [], []
  for i in range(steps + 3):
    time_a, time_b = a.run(), b.run()
    if i >= 3:
      times_a.append(time_a)
      times_b.append(time_b)
  return times_a, times_b


def measure(model_name, steps, counter, entries) -> list[dict]:
  bench = MODELS[model_name]
  devices = jax.devices()
  model = make_model(bench.model, bench.num_classes, **bench.options)
  params = _init(model, bench)["params"]
  baselines = {"jit + NamedSharding": jit_baseline(model, bench, devices),
               "shard_map + pmean": shard_map_baseline(model, bench, devices)}
  for step in baselines.values():
    step.compile()
  jit_times, shard_map_times = _alternate(*baselines.values(), steps)
  medians = dict(zip(baselines, map(statistics.median, (jit_times, shard_map_times)),
                     strict=True))
  fastest = min(medians, key=medians.get)
  rows = [{"model": model_name, "entry": f"baseline: {label}", "step_ms": 1e3 * medians[label],
           "ratio": medians[label] / medians[fastest], "compile_s": step.compile_s,
           "memory_mb": step.memory_mb, "operations": step.operations, "state_copies": 1.0,
           "baseline": label == fastest}
          for label, step in baselines.items()]
  reference = baselines[fastest]
  worker_mesh = parallel.make_worker_mesh(len(devices), len(devices))
  for entry, strategy, strategy_options, norms in entries:
    step = strategy_step(model, bench, worker_mesh, strategy, strategy_options, norms)
    step.compile()
    step.run()  # the first step
    compiles_before = counter.count
    times, paired = _alternate(step, reference, steps)
    rows.append({
        "model": model_name, "entry": entry, "strategy": strategy, "options": strategy_options,
        "step_ms": 1e3 * statistics.median(times),
        "ratio": statistics.median(times) / statistics.median(paired),
        "compile_s": step.compile_s, "memory_mb": step.memory_mb, "operations": step.operations,
        "state_copies": state_model_copies(jax.eval_shape(step.tx.init, params), params),
        "compiles_after_first_step": counter.count - compiles_before,
    })
    print(f"{model_name:9s} {entry:30s} {rows[-1]['step_ms']:8.2f} ms  "
          f"{rows[-1]['ratio']:.3f}x  recompiles {rows[-1]['compiles_after_first_step']}",
          flush=True)
  return rows


class _OneBatchKept:
  """A batch source that reads one tick's batches and hands out the same arrays on every
  tick: the loop without its input pipeline."""

  def __init__(self, source):
    self._source, self._kept = source, None

  def seek(self, positions):
    self._source.seek(positions)

  def take(self, active=None):
    if self._kept is None:
      self._kept = self._source.take(active)
    return self._kept


def data_wait(steps, output, repeats=3):
  """How much longer the default experiment's training loop runs with its input pipeline
  than with one batch read once and kept: the time the devices wait for data. (The
  summary's `input_host_fraction` overlaps the devices' work and is an upper bound.)

  Returns (devices' wait fraction, host input fraction), from the fastest of `repeats`
  alternating runs of each kind.
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


def table(rows, wait, command) -> str:
  header = ["model", "entry", "step (ms)", "vs baseline", "compile (s)",
            "memory (MB, args + temps)", "operations (copies)", "state (model copies)",
            "compilations after step 1"]
  lines = []
  for row in rows:
    memory = "-" if row["memory_mb"] is None else f"{row['memory_mb']:.1f}"
    entry = row["entry"] + (" (1.00x)" if row.get("baseline") else "")
    lines.append([row["model"], entry, f"{row['step_ms']:.2f}", f"{row['ratio']:.3f}x",
                  f"{row['compile_s']:.1f}", memory,
                  f"{row['operations']['run']} ({row['operations']['copies']})",
                  f"{row['state_copies']:.2f}",
                  str(row.get("compiles_after_first_step", "-"))])
  shown = dict.fromkeys(row["model"] for row in rows)
  batches = ", ".join(f"{name} {MODELS[name].batch}" for name in shown)
  text = (f"{environment()}; one worker per device; batch per device: {batches}; "
          f"median of the steps after 3 warm-ups, each step timed alternately with the "
          f"faster baseline's (marked 1.00x); produced by `{command}`.\n\n"
          f"{markdown(header, lines)}")
  if wait is None:
    return text
  return (f"{text}\n\nDefault experiment (`configs/default.py`), waiting "
          f"for data: the training loop runs {100 * wait[0]:.1f}% longer with its input "
          f"pipeline than with one batch kept on the devices; the host spends "
          f"{100 * wait[1]:.1f}% of the loop reading and transferring batches, overlapped "
          f"with the devices' work.")


def default_models() -> list[str]:
  on_cpu = jax.default_backend() == "cpu"
  return [name for name in MODELS
          if not (on_cpu and name in ACCELERATOR_ONLY) and name not in OWN_SECTION]


def main() -> None:
  parser = script_parser(__doc__)
  parser.add_argument("--models", default="", help="comma-separated, of "
                      f"{', '.join(MODELS)} (default: all; on a CPU all but "
                      f"{', '.join(ACCELERATOR_ONLY)})")
  parser.add_argument("--steps", type=int, default=40, help="timed steps per entry")
  parser.add_argument("--entries", default="", help="row names to run (comma-separated); "
                      "default: all")
  parser.add_argument("--data_repeats", type=int, default=3,
                      help="alternating runs of each kind for the data wait (the fastest "
                      "counts); 0: not measured")
  parser.add_argument("--data_steps", type=int, default=1000,
                      help="steps of the default run that measures waiting for data")
  parser.add_argument("--output", default="runs/benchmark")
  parser.add_argument("--readme", default="",
                      help="also write the generated section of this name (docs/performance.md)")
  args = parser.parse_args()
  models = [m for m in args.models.split(",") if m] or default_models()
  unknown = sorted(set(models) - set(MODELS))
  if unknown:
    raise StudyInputError(f"--models {args.models!r}: unknown model {unknown[0]!r}; choose "
                          f"from {', '.join(MODELS)}")
  wanted = [e for e in args.entries.split(",") if e]
  entries = [e for e in ENTRIES if not wanted or e[0] in wanted]
  os.makedirs(args.output, exist_ok=True)
  counter = CompileCounter()
  rows = []
  for model_name in models:
    rows += measure(model_name, args.steps, counter, entries)
  wait = (data_wait(args.data_steps, args.output, args.data_repeats) if args.data_repeats > 0
          else None)
  command = "python scripts/benchmark.py" + (f" --models {args.models}" if args.models else "")
  if args.data_repeats <= 0:
    command += " --data_repeats 0"
  text = table(rows, wait, command)
  with open(os.path.join(args.output, "benchmark.json"), "w", encoding="utf-8") as f:
    json.dump({"devices": environment(), "rows": rows,
               "data_wait_fraction": wait[0] if wait else None,
               "input_host_fraction": wait[1] if wait else None}, f, indent=2)
  with open(os.path.join(args.output, "benchmark.md"), "w", encoding="utf-8") as f:
    f.write(text + "\n")
  print(text)
  if args.readme:
    replace_section(args.readme, text)


if __name__ == "__main__":
  run_main(main)
