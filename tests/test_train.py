"""The whole loop: outputs, devices, resume bit for bit, divergence, BatchNorm."""

import importlib
import json
from collections import Counter
import os
import subprocess
import sys

import jax
import numpy as np
import optax
import orbax.checkpoint as ocp
import pytest

from odsgd_jax import comm, parallel
from odsgd_jax.cluster import synchronous_schedule
from odsgd_jax.models import make_model
from configs import _strategies
from odsgd_jax.strategies import STRATEGIES, get_strategy, ssgd
from odsgd_jax.train import (Hook, NonFiniteLossError, init_state, make_eval_step,
                             make_lr_schedule, make_train_step, model_variables, read_metrics,
                             train_and_evaluate)
from odsgd_jax.train._programs import copied_inputs, leaf_paths
from tests.catalog_standins import prepare_standin
from tests.helpers import (Compilations, assert_trees_close, assert_trees_equal, random_batch,
                           saved_state)

REPO = os.path.dirname(os.path.dirname(os.path.abspath(__file__)))
STEP_METRICS = {"loss", "accuracy", "learning_rate", "steps_per_s", "examples_seen", "epoch"}
NORMS = {"grad_norm", "update_norm", "param_norm"}  # every train.norms_every (10) steps


def test_run_writes_metrics_checkpoints_and_summary(small_config, tmp_path):
  workdir = str(tmp_path / "run")
  summary = train_and_evaluate(small_config, workdir)

  with open(os.path.join(workdir, "summary.json")) as f:
    assert json.load(f) == summary
  assert summary["steps"] == 20 and summary["examples_seen"] == 20 * 64
  # 20 steps of CNN1D (odsgd's synchronous warm-up) reach 0.22 on mnist1d; chance is 0.10
  assert summary["test_accuracy"] > 0.18 and summary["wall_time_s"] > 0
  assert 0.0 < summary["input_host_fraction"] < 1.0 and summary["loop_time_s"] > 0
  rows = read_metrics(workdir)
  step_rows = [r for r in rows if "loss" in r]
  assert [r["step"] for r in step_rows] == list(range(1, 21))
  assert all(STEP_METRICS <= set(r) for r in step_rows)
  assert [r["step"] for r in step_rows if NORMS <= set(r)] == [10, 20]
  assert all(r["grad_norm"] > 0 and r["param_norm"] > 0 for r in step_rows if NORMS <= set(r))
  assert [r["step"] for r in rows if "test_accuracy" in r] == [10, 20]
  assert step_rows[0]["loss"] > step_rows[-1]["loss"]  # it learns
  assert sorted(os.listdir(os.path.join(workdir, "checkpoints"))) == ["10", "20"]
  with ocp.StandardCheckpointer() as checkpointer:
    model = checkpointer.restore(os.path.join(workdir, "model"))
  global_weights = saved_state(workdir, 20)["opt_state"]["global_params"]
  assert_trees_equal(model["params"], jax.tree.map(lambda x: x[0], global_weights))  # odsgd: W
  assert any(name.startswith("events") for name in os.listdir(os.path.join(workdir, "tensorboard")))
  with open(os.path.join(workdir, "config.json")) as f:
    assert json.load(f)["strategy"]["name"] == "odsgd"
  plot = str(tmp_path / "curves.png")
  subprocess.run([sys.executable, os.path.join(REPO, "scripts", "plot_metrics.py"), workdir,
                  "--out", plot], check=True, capture_output=True, timeout=120)
  assert os.path.getsize(plot) > 10_000


@pytest.mark.devices(8)
def test_same_config_on_1_and_8_devices_gives_same_parameters(small_config, tmp_path):
  states = []
  for num_devices in (1, 8):
    small_config.parallel.num_devices = num_devices
    train_and_evaluate(small_config, str(tmp_path / f"devices{num_devices}"))
    states.append(saved_state(str(tmp_path / f"devices{num_devices}"), 20))
  assert_trees_close(states[0]["params"], states[1]["params"], rtol=1e-4, atol=1e-5)


@pytest.mark.devices(8)
def test_a_worker_on_two_devices_equals_one_device_with_the_doubled_batch(small_config,
                                                                          tmp_path):
  """4 workers x 2 devices (a worker's gradient averaged over its devices) == 4
  workers x 1 device, each device holding twice the batch: the papers' multi-GPU node."""
  small_config.cluster.num_workers = 4
  states = []
  for devices, per_worker in ((8, 2), (4, 1)):
    small_config.parallel.num_devices = devices
    small_config.parallel.devices_per_worker = per_worker
    workdir = str(tmp_path / f"{devices}x{per_worker}")
    summary = train_and_evaluate(small_config, workdir)
    assert summary["num_devices"] == devices
    states.append(saved_state(workdir, 20))
  assert_trees_close(states[0]["params"], states[1]["params"], rtol=1e-5, atol=1e-6)
  assert_trees_close(states[0]["opt_state"], states[1]["opt_state"], rtol=1e-5, atol=1e-6)


class _CrashAtStep(Hook):
  def __init__(self, step):
    self.step = step

  def before_step(self, step):
    if step == self.step:
      raise KeyboardInterrupt("simulated crash")


class _KeepExperiment(Hook):
  """Keeps the run's experiment, to look at its compiled programs afterwards."""

  def on_start(self, experiment, state):
    self.experiment = experiment


def _crash_at_step_15_then_resume(config, tmp_path):
  """Runs `config` straight, and with a crash at tick 15 and a resume; both must agree."""
  straight = str(tmp_path / "straight")
  train_and_evaluate(config, straight)

  resumed = str(tmp_path / "resumed")
  with pytest.raises(KeyboardInterrupt):
    train_and_evaluate(config, resumed, hooks=[_CrashAtStep(15)])
  assert sorted(os.listdir(os.path.join(resumed, "checkpoints"))) == ["10"]
  summary = train_and_evaluate(config, resumed)

  # the whole state: parameters, strategy state (pending gradients, global or
  # server weights, smoothing buffers, anchors, clocks, counters), rng
  assert_trees_equal(saved_state(resumed, 20), saved_state(straight, 20))
  without_timing = lambda rows: [{k: v for k, v in r.items() if k != "steps_per_s"} for r in rows]
  assert without_timing(read_metrics(resumed)) == without_timing(read_metrics(straight))
  with open(os.path.join(straight, "summary.json")) as f:
    assert summary["test_accuracy"] == json.load(f)["test_accuracy"]
  # what the clock charged each tick, replayed by `retime`: the same across the crash
  clocks = []
  for workdir in (straight, resumed):
    with open(os.path.join(workdir, "clock.json")) as f:
      clocks.append(json.load(f))
  assert clocks[0] == clocks[1]
  return straight


@pytest.mark.parametrize("strategy", sorted(STRATEGIES))
def test_crash_then_resume_equals_uninterrupted_run_bit_for_bit(small_config, tmp_path,
                                                                strategy):
  config = _strategies.use_strategy(small_config, strategy)
  if strategy == "odsgd":
    config.strategy.warmup_steps = 5  # both phases before the checkpoint
  config.optimizer.warmup_steps = min(config.optimizer.warmup_steps, 5)
  _crash_at_step_15_then_resume(config, tmp_path)


@pytest.mark.parametrize("strategy,compression", [("odsgd", "topk:0.05,momentum=0.9"),
                                                  ("local_sgd", "powersgd:2")])
def test_compression_state_survives_resume_bit_for_bit(small_config, tmp_path, strategy,
                                                       compression):
  """Error-feedback residuals, momentum correction's velocities and PowerSGD's
  warm-start Q are in the checkpoint."""
  config = _strategies.use_strategy(small_config, strategy)
  if strategy == "odsgd":
    config.strategy.warmup_steps = 5
    config.optimizer.momentum = 0.0  # the momentum is the compression's
    config.strategy.correction = "none"  # spike corrects heavy ball, which DGC replaces
  config.strategy.compression = compression
  _crash_at_step_15_then_resume(config, tmp_path)


@pytest.mark.parametrize("strategy", ["odsgd", "pseudo_sync"])
def test_a_checkpoint_saved_with_one_packing_threshold_restores_under_another(
    small_config, tmp_path, monkeypatch, strategy):
  """A checkpoint holds a held message as its tree (`comm.as_trees`): saved while the small
  pending tensors travel as one vector, it restores where none is packed, and the run
  ends where the uninterrupted one does (to float rounding: where workers share a device,
  XLA sums one vector and separate tensors in different orders)."""
  config = _strategies.use_strategy(small_config, strategy)
  if strategy == "odsgd":
    config.strategy.warmup_steps = 5
  straight, resumed = str(tmp_path / "straight"), str(tmp_path / "resumed")
  train_and_evaluate(config, straight)
  with pytest.raises(KeyboardInterrupt):
    train_and_evaluate(config, resumed, hooks=[_CrashAtStep(15)])
  saved = saved_state(resumed, 10)  # the pending gradients as a tree, shaped as the params
  assert jax.tree.map(np.shape, saved["opt_state"]["pending_grads"]) == jax.tree.map(
      np.shape, saved["params"])
  kept = _KeepExperiment()
  monkeypatch.setattr(comm._held, "SMALL_TENSOR_BYTES", 0)  # nothing small: trees
  train_and_evaluate(config, resumed, hooks=[kept])
  assert not isinstance(kept.experiment.init_state().opt_state.pending_grads, comm.Held)
  final = [saved_state(workdir, 20) for workdir in (resumed, straight)]
  assert_trees_close(final[0]["params"], final[1]["params"], rtol=1e-5, atol=1e-6)
  assert jax.tree.structure(final[0]) == jax.tree.structure(final[1])


def test_heterogeneous_resume_keeps_each_workers_data_position(small_config, tmp_path):
  """Slow workers do not consume batches on ticks they are not active: after 20
  ticks at speeds 1, 0.5, 0.25 (oscars) they have read 20, 10 and 5 batches."""
  config = _strategies.use_strategy(small_config, "oscars")
  config.cluster.num_workers = 4
  config.cluster.speeds = (1.0, 1.0, 0.5, 0.25)
  config.cluster.jitter = config.cluster.node_contention = 0.0  # the hand-counted schedule
  config.parallel.num_devices = 1
  straight = _crash_at_step_15_then_resume(config, tmp_path)
  progress = os.path.join(straight, "checkpoints", "20", "progress", "metadata")
  with open(progress) as f:
    assert json.load(f)["data_positions"] == [20, 20, 10, 5]


def test_rerunning_a_finished_run_reports_it_again(small_config, tmp_path):
  workdir = str(tmp_path / "run")
  first = train_and_evaluate(small_config, workdir)
  saved = saved_state(workdir, 20)
  again = train_and_evaluate(small_config, workdir)
  assert again["test_accuracy"] == first["test_accuracy"] and again["steps"] == 20
  assert sorted(os.listdir(os.path.join(workdir, "checkpoints"))) == ["10", "20"]
  assert_trees_equal(saved_state(workdir, 20), saved)


def test_non_finite_loss_stops_and_keeps_last_good_checkpoint(small_config, tmp_path):
  small_config.optimizer.learning_rate = 1e4
  small_config.optimizer.schedule = "constant"
  small_config.train.checkpoint_every = 1
  small_config.train.num_steps = 200
  workdir = str(tmp_path / "run")
  with pytest.raises(NonFiniteLossError,
                     match=r"at step \d+: training diverged.*in a new --workdir"):
    train_and_evaluate(small_config, workdir)
  steps = sorted(int(s) for s in os.listdir(os.path.join(workdir, "checkpoints")))
  assert steps, "the steps before divergence were checkpointed"
  last_good = saved_state(workdir, steps[-1])
  assert all(np.all(np.isfinite(leaf)) for leaf in jax.tree.leaves(last_good))
  assert not os.path.exists(os.path.join(workdir, "summary.json"))
  assert all(np.isfinite(r["loss"]) for r in read_metrics(workdir) if "loss" in r)


def test_batchnorm_statistics_are_per_worker_and_averaged_for_eval():
  num_workers = 8
  model = make_model("resnet20", 10, widths=(4, 8, 8), blocks_per_stage=1)
  tx = ssgd(optax.sgd(0.1), axis_name=parallel.WORKER_AXES)
  worker_mesh = parallel.make_worker_mesh(num_workers)
  state = init_state(model, tx, worker_mesh, (32, 32, 3), seed=0)
  images = np.random.default_rng(0).normal(size=(num_workers, 4, 32, 32, 3)).astype(np.float32)
  images += np.arange(num_workers, dtype=np.float32)[:, None, None, None, None]  # per-worker shift
  batch = jax.device_put({"image": images, "label": np.zeros((num_workers, 4), np.int32)},
                         worker_mesh.sharding(parallel.BATCH))
  state, _ = make_train_step(model, tx, worker_mesh)(state, batch,
                                                     synchronous_schedule(0, num_workers))
  means = jax.device_get(state.batch_stats["BatchNorm_0"]["mean"])
  assert means.shape[0] == num_workers
  assert not np.allclose(means[0], means[-1]), "each worker keeps its own statistics"
  evaluated = jax.device_get(model_variables(state, get_strategy("ssgd")))
  np.testing.assert_allclose(evaluated["batch_stats"]["BatchNorm_0"]["mean"], means.mean(0),
                             rtol=1e-6)
  eval_batch = {"image": images[0], "label": np.zeros(4, np.int32), "mask": np.ones(4, bool)}
  sums = make_eval_step(model, get_strategy("ssgd"))(state, eval_batch)
  assert np.isfinite(sums["loss"]) and 0 <= sums["accuracy"] <= 4 and sums["count"] == 4


@pytest.mark.parametrize("config_name,model_options", [
    ("mnist_lenet", {}),
    ("cifar10_resnet20", {"widths": (4, 8, 8), "blocks_per_stage": 1}),  # shrunk to compile fast
])
def test_catalog_configs_train_end_to_end_once_data_is_prepared(data_dir, tmp_path, config_name,
                                                                model_options):
  config = importlib.import_module(f"configs.{config_name}").get_config()
  prepare_standin(config.data.name, data_dir)
  config.data.data_dir = data_dir
  config.data.batch_size = 16
  config.data.eval_batch_size = 16
  for key, value in model_options.items():
    config.model[key] = value
  config.optimizer.decay_epochs = ()
  config.train.num_steps = 3
  config.train.progress_bar = False
  summary = train_and_evaluate(config, str(tmp_path / config_name))
  assert summary["steps"] == 3 and summary["dataset"] == config.data.name
  evaluations = [r for r in read_metrics(str(tmp_path / config_name)) if "test_accuracy" in r]
  assert evaluations[-1]["step"] == 3  # the summary reports the run's last evaluation
  assert summary["test_accuracy"] == evaluations[-1]["test_accuracy"]
  assert np.isfinite(summary["test_loss"])


def test_command_line_overrides_of_every_kind_reach_the_run(data_dir, tmp_path):
  workdir = tmp_path / "run"
  result = subprocess.run(
      [sys.executable, "-m", "experiments.train", "--config", "configs/default.py",
       "--workdir", str(workdir), f"--config.data.data_dir={data_dir}",  # None placeholder
       "--config.train.num_steps=6", "--config.train.progress_bar=False",  # int, bool
       "--config.optimizer.schedule=step", "--config.optimizer.decay_epochs=(1,2)",  # str, tuple
       "--config.optimizer.learning_rate=0.02", "--config.model.channels=8",  # float, model option
       "--config.cluster.num_workers=4", "--config.data.batch_size=32"],
      cwd=REPO, capture_output=True, text=True, timeout=300,
  )
  assert result.returncode == 0, result.stderr[-2000:]
  with open(workdir / "config.json") as f:
    used = json.load(f)
  assert used["data"]["data_dir"] == data_dir and used["train"]["num_steps"] == 6
  assert used["optimizer"]["decay_epochs"] == [1, 2] and used["model"]["channels"] == 8
  with open(workdir / "summary.json") as f:
    summary = json.load(f)
  assert summary["num_workers"] == 4 and summary["examples_seen"] == 6 * 32
  # train.deterministic (default True): XLA's deterministic GPU ops asked for before JAX
  # started, so that the run resumes bit for bit on a GPU too
  assert used["train"]["deterministic"] is True and summary["deterministic_ops"] is True


def test_a_run_that_need_not_resume_exactly_leaves_xla_flags_alone(data_dir, tmp_path):
  workdir = tmp_path / "run"
  result = subprocess.run(
      [sys.executable, "-m", "experiments.train", "--config", "configs/default.py",
       "--workdir", str(workdir), f"--config.data.data_dir={data_dir}",
       "--config.data.name=mnist1d", "--config.train.num_steps=2",
       "--config.train.progress_bar=False", "--config.train.deterministic=False",
       "--config.cluster.num_workers=2", "--config.data.batch_size=8"],
      cwd=REPO, capture_output=True, text=True, timeout=300,
      env={**os.environ, "XLA_FLAGS": ""})
  assert result.returncode == 0, result.stderr[-2000:]
  with open(workdir / "summary.json") as f:
    assert json.load(f)["deterministic_ops"] is False


def test_asgd_learning_rate_schedule_runs_in_ticks_not_server_updates(small_config, tmp_path):
  """asgd steps its server optimizer N times a tick; a cosine schedule over the run's
  ticks must not reach zero after 1/N of them (the model would freeze)."""
  config = _strategies.use_strategy(small_config, "asgd")
  config.optimizer.schedule = "cosine"
  config.train.norms_every = 1
  workdir = str(tmp_path / "asgd")
  train_and_evaluate(config, workdir)
  rows = {r["step"]: r for r in read_metrics(workdir) if "loss" in r}
  assert all(rows[step]["update_norm"] > 1e-4 for step in range(3, 17))


@pytest.mark.parametrize("strategy", sorted(STRATEGIES))
def test_the_train_step_compiles_once_per_run(small_config, tmp_path, strategy):
  """Schedules change every tick (arrival orders, active masks, round ends); the
  step must not recompile for them: each program that ran was compiled once (and its
  variant that keeps what XLA would copy out of the donation, once)."""
  kept = _KeepExperiment()
  config = _strategies.use_strategy(small_config, strategy)
  config.cluster.speeds = (1.0, 1.0, 0.5, 0.5, 1.0, 1.0, 0.25, 1.0)
  config.cluster.jitter = 0.2
  config.optimizer.warmup_steps = 0
  config.train.norms_every = 5
  # 20 steps, as test_crash_then_resume_...: the same programs, compiled once per suite
  with Compilations() as compiled:
    train_and_evaluate(config, str(tmp_path / "run"), hooks=[kept])
  train_step = kept.experiment.train_step
  used = {train_step.program(step % 5 == 0, step - 1).name
          for step in range(1, config.train.num_steps + 1)}
  programs = Counter(name for name in compiled.names if name.startswith("train_step"))
  assert {name.removesuffix("_split") for name in programs} == used
  assert set(programs.values()) == {1}, programs


def _schedule_counts(workdir: str, step: int) -> dict[str, np.ndarray]:
  """Every learning-rate schedule's count in the state saved at `step`, per worker (not an
  exchange's record, whose count is its messages: `communication`, `compression`)."""
  opt_state = saved_state(workdir, step)["opt_state"]
  return {jax.tree_util.keystr(path): leaf for path, leaf in
          jax.tree_util.tree_leaves_with_path(opt_state)
          if path[-1].key == "count"
          and not {"communication", "compression"} & {getattr(k, "key", None) for k in path}}


@pytest.mark.parametrize("strategy", sorted(STRATEGIES))
def test_every_step_reads_the_learning_rate_of_the_runs_tick(small_config, tmp_path, strategy):
  """However often a worker (or a server) steps on a heterogeneous, jittered cluster, the
  inner optimizer's schedule stands at the run's tick (times the inner updates a tick
  makes) when it steps: after T ticks every count is between (T - 1) and T of them."""
  config = _strategies.use_strategy(small_config, strategy)
  config.cluster.speeds = (1.0, 1.0, 0.5, 0.5, 1.0, 1.0, 0.25, 1.0)
  config.cluster.jitter = 0.2
  config.optimizer.warmup_steps = 0
  train_and_evaluate(config, str(tmp_path / "run"))
  steps = config.train.num_steps
  per_tick = get_strategy(strategy).inner_updates_per_tick(config.cluster.num_workers)
  counts = _schedule_counts(str(tmp_path / "run"), steps)
  assert counts, "no learning-rate schedule found in the state"
  for where, count in counts.items():
    assert np.all((count >= (steps - 1) * per_tick) & (count <= steps * per_tick)), (where, count)


def test_every_oscars_worker_ends_its_schedule_with_the_run(small_config, tmp_path):
  """On the claims' cluster (speeds 1, 1, 1, 1, 0.5, 0.5, 0.25, 0.25) the slow workers
  take a half and a quarter of the steps, yet each reads the cosine schedule at the run's
  tick: its last step is at most 1 / speed ticks before the end, at the rate the run logs
  there, not at its own share of the schedule (a quarter-speed worker counting its own 5
  steps of 20 would still be near the peak rate)."""
  config = _strategies.use_strategy(small_config, "oscars")
  config.cluster.speeds = (1.0, 1.0, 1.0, 1.0, 0.5, 0.5, 0.25, 0.25)
  config.cluster.jitter = config.cluster.node_contention = 0.0  # the hand-counted schedule
  config.optimizer.schedule, config.optimizer.warmup_steps = "cosine", 0
  workdir = str(tmp_path / "run")
  train_and_evaluate(config, workdir)
  steps = config.train.num_steps
  (count,) = _schedule_counts(workdir, steps).values()
  last_tick = np.asarray(count) - 1  # the tick each worker last stepped on
  speeds = np.asarray(config.cluster.speeds)
  assert np.all(last_tick >= steps - 1 / speeds), last_tick
  schedule = make_lr_schedule(config.optimizer, steps, steps_per_epoch=1)
  peak = config.optimizer.learning_rate
  assert all(float(schedule(t)) < 0.15 * peak for t in last_tick)
  logged = [r["learning_rate"] for r in read_metrics(workdir) if "learning_rate" in r]
  assert logged[-1] == pytest.approx(float(schedule(steps - 1)))


def test_on_one_device_the_train_step_compiles_once(small_config, tmp_path):
  """The state is placed with the sharding the step returns it in (mesh axes of size 1
  left out of the spec): otherwise the second step compiles again."""
  kept = _KeepExperiment()
  small_config.parallel.num_devices = 1
  small_config.train.num_steps = 3
  with Compilations() as compiled:
    train_and_evaluate(small_config, str(tmp_path / "run"), hooks=[kept])
  name = kept.experiment.train_step.program().name
  assert compiled.names.count(name) + compiled.names.count(f"{name}_split") == 1


@pytest.mark.parametrize("name", sorted(STRATEGIES))
def test_what_xla_would_copy_is_not_donated_and_the_step_is_unchanged(name):
  """Every strategy (its first example, heavy ball): the tensors of at least
  SMALL_TENSOR_BYTES per worker that XLA copies aside when donated (read off the program
  that donates everything) stay out of the donation, so that the program that runs copies
  no large donated input; everything else is donated, and the states are bit for bit those
  of the program that donates everything."""
  model = make_model("mlp", 10, hidden_sizes=(512,))  # kernel 40 x 512: 80 KiB per worker
  strategy = get_strategy(name)
  tx = strategy.make(optax.sgd(0.1, momentum=0.9), axis_name=parallel.WORKER_AXES,
                     **strategy.examples[0].options)
  worker_mesh = parallel.make_worker_mesh(2, 1)
  steps = {donation: make_train_step(model, tx, worker_mesh, strategy,
                                     split_donation=donation == "split")
           for donation in ("split", "whole")}
  states = {donation: step.init_state((40,), seed=0) for donation, step in steps.items()}
  rng = np.random.default_rng(0)
  schedule = synchronous_schedule(0, 2)
  kept_any = False
  for tick in range(steps["split"].settled_from + 1):  # every program
    batch = random_batch(worker_mesh, rng)
    before = states["split"]
    program = steps["split"].program(tick=tick)
    kept = jax.tree.leaves(program.kept_out(before, batch, schedule))
    kept_any |= any(kept)
    # the donated inputs, as the program names them: the whole state, or the split's list
    donated = ([f"donated[{i}]" for i in range(len(kept) - sum(kept))] if any(kept)
               else leaf_paths("state", before))
    sizes = [leaf.nbytes // 2 for leaf, out in zip(jax.tree.leaves(before), kept, strict=True)
             if not out]  # per worker: 2 workers
    large = {path for path, size in zip(donated, sizes, strict=True)
             if size >= comm.SMALL_TENSOR_BYTES}
    hlo = program.lower(before, batch, schedule).compile().as_text()
    assert not copied_inputs(hlo) & large
    states = {donation: step(states[donation], batch, schedule, tick)[0]
              for donation, step in steps.items()}
    for leaf, out in zip(jax.tree.leaves(before), kept, strict=True):
      # kept out: never deleted; donated: deleted, but for a small one the step never reads
      # (JAX drops an unread input, donated or not)
      assert not (out and leaf.is_deleted())
      assert out or leaf.is_deleted() or leaf.nbytes // 2 < comm.SMALL_TENSOR_BYTES
  assert_trees_equal(states["split"], states["whole"])
  # the delayed strategies' pending gradients, read by the all-reduce before this tick's
  # replace them, are copied when donated: something is kept out
  assert kept_any or name not in ("odsgd", "pseudo_sync")
