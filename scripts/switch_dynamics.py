r"""What a run does around OD-SGD's switch from its synchronous warm-up to the one-step delay
(issue 75): per tick in a window, read off the run's own state between its steps.

  python scripts/switch_dynamics.py --config configs/default.py:odsgd --seeds 43,60 \
      --window 150,600 --readme

Per tick t of the window (the state after step t; W: the model the run evaluates, x_i: the
parameters worker i takes its next gradient at):

- the training loss at W and at each x_i, on a fixed probe of training signals (the first
  `--probe` of the training split);
- the validation loss and accuracy of W (the whole validation split);
- |W|, |x_i - W| (mean and largest over workers), |W_t - W_{t-1}| (the global update) and
  the norm of the inner optimizer's momentum buffer;
- the cosine between the averaged gradient that the next global update applies, taken at
  x_i(t-1) on step t's batches (odsgd's pending gradient), and a fresh one at W_t on the same
  batches: how much the delay alone turns the gradient;
- the learning rate of the tick;
- every `--hessian_every` ticks (and at the first tick of the window), the top eigenvalue h
  of the Hessian of the probe loss at W, by power iteration, and lr * h, to be set against
  the largest stable lr * h of the strategy's update on a quadratic (docs/delays.md: 3.8 for
  synchronous heavy ball at momentum 0.9, 0.12 for one-step-delayed heavy ball with OD-SGD's
  local step).

Nothing here changes the run: the probes read the state between steps (`Hook.inspect`) and
the run stops after the window. It writes `<records>/<label>_seed<S>.json` (one row per
tick) and prints a table of chosen ticks. `--label` names the variant; `--set` overrides
config fields like the study scripts do; `--only_accuracy` keeps W's validation accuracy
and loss alone (the figure's other strategies); `--figure` draws every label's accuracy.
"""

import argparse
import os
import shlex
import sys
import tempfile
from typing import Any

import jax
import jax.numpy as jnp
import numpy as np
import optax

from odsgd_jax import data, study, train
from odsgd_jax.study import _records as records_lib


class _WindowDone(Exception):
  """Raised by the probe's hook before the first step after the window."""


class RecordingBatches:
  """The experiment's batches, the last one taken kept (the batch the step just used)."""

  def __init__(self, batches: Any):
    self.batches, self.last = batches, None

  def seek(self, positions):
    self.batches.seek(positions)

  def take(self, active):
    self.last = self.batches.take(active)
    return self.last


def _norm(tree: Any) -> float:
  return float(optax.global_norm(tree))


def _momentum_buffers(opt_state: Any) -> list[Any]:
  """Every heavy-ball trace in a strategy's state, worker 0's copy (odsgd: the global
  optimizer's; ssgd: its own)."""
  found = [node for node in jax.tree.leaves(opt_state, is_leaf=lambda n: isinstance(
      n, optax.TraceState)) if isinstance(node, optax.TraceState)]
  return [jax.tree.map(lambda x: x[0], node.trace) for node in found]


class SwitchProbe(train.Hook):
  """Measures the state after each step of [first, last] (1-based steps)."""

  def __init__(self, batches: RecordingBatches, first: int, last: int, probe: int,
               hessian_every: int, power_iterations: int, only_accuracy: bool = False):
    self.batches, self.first, self.last = batches, first, last
    self.only_accuracy = only_accuracy  # W's validation accuracy and loss alone
    self.probe_size, self.hessian_every = probe, hessian_every
    self.power_iterations = power_iterations
    self.rows: list[dict[str, float]] = []
    self.previous: Any = None  # (W, x_i) after the step before, on the host

  def on_start(self, experiment: train.Experiment, state: train.TrainState) -> None:
    model = experiment.train_step.setup.model
    self.lr_schedule = experiment.train_step.setup.lr_schedule  # of the 0-based tick
    self.definition = experiment.strategy.definition
    probe = next(data.eval_batches(experiment.splits.train, experiment.spec, self.probe_size))
    validation = experiment.splits.validation or experiment.splits.test
    whole = next(data.eval_batches(validation, experiment.spec, len(validation)))
    self.probe = (jnp.asarray(probe["image"]), jnp.asarray(probe["label"]))
    self.validation = (jnp.asarray(whole["image"]), jnp.asarray(whole["label"]))

    def loss(params, images, labels):
      logits = model.apply({"params": params}, images, train=False)
      return optax.softmax_cross_entropy_with_integer_labels(logits, labels).mean(), logits

    def loss_only(params, images, labels):
      return loss(params, images, labels)[0]

    def accuracy_and_loss(params, images, labels):
      value, logits = loss(params, images, labels)
      return jnp.mean(jnp.argmax(logits, -1) == labels), value

    def hvp(params, vector, images, labels):
      return jax.jvp(lambda p: jax.grad(loss_only)(p, images, labels), (params,), (vector,))[1]

    def mean_worker_grad(per_worker_params, images, labels):
      # each worker's gradient on its own batch, averaged: what the all-reduce gives
      grads = jax.vmap(jax.grad(loss_only))(per_worker_params, images, labels)
      return jax.tree.map(lambda g: g.mean(0), grads)

    self.loss = jax.jit(loss_only)
    self.worker_losses = jax.jit(jax.vmap(loss_only, in_axes=(0, None, None)))
    self.accuracy_and_loss = jax.jit(accuracy_and_loss)
    self.hvp = jax.jit(hvp)
    self.mean_worker_grad = jax.jit(mean_worker_grad)
    del state

  def before_step(self, step: int) -> None:
    if step > self.last:
      raise _WindowDone()

  def top_eigenvalue(self, params: Any) -> float:
    """The largest Hessian eigenvalue of the probe loss at `params` (power iteration from
    a fixed random direction; the Hessian's top eigenvalue is positive near a trained
    model's minimum valley, and the iteration finds the largest in magnitude)."""
    leaves, treedef = jax.tree.flatten(params)
    keys = jax.random.split(jax.random.PRNGKey(0), len(leaves))
    vector = treedef.unflatten([jax.random.normal(k, x.shape, x.dtype)
                                for k, x in zip(keys, leaves, strict=True)])
    eigenvalue = 0.0
    for _ in range(self.power_iterations):
      length = optax.global_norm(vector)
      vector = jax.tree.map(lambda v, length=length: v / length, vector)
      product = self.hvp(params, vector, *self.probe)
      eigenvalue = float(sum(jnp.vdot(a, b) for a, b in zip(
          jax.tree.leaves(vector), jax.tree.leaves(product), strict=True)))
      vector = product
    return eigenvalue

  def inspect(self, step: int, state: train.TrainState) -> None:
    if step < self.first - 1:
      return
    model = train.model_variables(state, self.definition)["params"]
    if self.only_accuracy:
      if step >= self.first:
        accuracy, loss = self.accuracy_and_loss(model, *self.validation)
        self.rows.append({"step": step, "learning_rate": float(self.lr_schedule(step - 1)),
                          "validation_accuracy": float(accuracy),
                          "validation_loss": float(loss)})
      return
    workers = state.params
    host = jax.device_get((model, workers))
    if step >= self.first and self.previous is not None:
      self.rows.append(self._row(step, model, workers, host, state.opt_state))
    self.previous = host

  def _row(self, step: int, model: Any, workers: Any, host: Any,
           opt_state: Any) -> dict[str, float]:
    previous_model, previous_workers = self.previous
    batch = self.batches.last
    images, labels = jnp.asarray(batch["image"]), jnp.asarray(batch["label"])
    num_workers = images.shape[0]
    broadcast = lambda tree: jax.tree.map(
        lambda x: jnp.broadcast_to(x, (num_workers, *x.shape)), tree)
    delayed = self.mean_worker_grad(previous_workers, images, labels)
    fresh = self.mean_worker_grad(broadcast(model), images, labels)
    cosine = float(sum(jnp.vdot(a, b) for a, b in zip(
        jax.tree.leaves(delayed), jax.tree.leaves(fresh), strict=True))
        / (_norm(delayed) * _norm(fresh)))
    distances = np.array([_norm(jax.tree.map(lambda x, w, i=i: x[i] - w, host[1], host[0]))
                          for i in range(num_workers)])
    worker_losses = np.asarray(self.worker_losses(workers, *self.probe))
    accuracy, validation_loss = self.accuracy_and_loss(model, *self.validation)
    momentum = _momentum_buffers(opt_state)
    row = {
        "step": step,
        "learning_rate": float(self.lr_schedule(step - 1)),
        "validation_accuracy": float(accuracy), "validation_loss": float(validation_loss),
        "loss_W": float(self.loss(model, *self.probe)),
        "loss_x_mean": float(worker_losses.mean()), "loss_x_max": float(worker_losses.max()),
        "norm_W": _norm(host[0]),
        "distance_x_mean": float(distances.mean()), "distance_x_max": float(distances.max()),
        "global_update_norm": _norm(jax.tree.map(lambda a, b: a - b, host[0], previous_model)),
        "momentum_norm": _norm(momentum) if momentum else float("nan"),
        "cosine_delayed_fresh": cosine,
        "delayed_grad_norm": _norm(delayed), "fresh_grad_norm": _norm(fresh),
    }
    if (step - self.first) % self.hessian_every == 0:
      row["top_hessian_eigenvalue"] = self.top_eigenvalue(model)
      row["lr_times_h"] = row["learning_rate"] * row["top_hessian_eigenvalue"]
    return row


def probe_run(config: Any, workdir: str, first: int, last: int, probe: int, hessian_every: int,
              power_iterations: int, only_accuracy: bool = False) -> list[dict[str, float]]:
  """The probe's rows for one run of `config`, trained to step `last` in `workdir`."""
  experiment = train.build_experiment(config)
  batches = RecordingBatches(experiment.train_batches())
  hook = SwitchProbe(batches, first, last, probe, hessian_every, power_iterations,
                     only_accuracy)
  try:
    train.train_and_evaluate(config, workdir, batches=batches, hooks=[hook])
  except _WindowDone:
    pass
  return hook.rows


SHOWN = ("step", "learning_rate", "validation_accuracy", "loss_W", "loss_x_mean", "norm_W",
         "distance_x_mean", "global_update_norm", "momentum_norm", "cosine_delayed_fresh",
         "top_hessian_eigenvalue", "lr_times_h")
SECTION = "switch_dynamics"


def table(rows: list[dict[str, float]], steps: set[int]) -> str:
  lines = ["| " + " | ".join(SHOWN) + " |", "|" + "---|" * len(SHOWN)]
  for row in rows:
    if row["step"] in steps:
      cells = [str(row["step"])] + [
          "" if row.get(name) is None else f"{row[name]:.3g}" for name in SHOWN[1:]]
      lines.append("| " + " | ".join(cells) + " |")
  return "\n".join(lines)


def shown_steps(shown: str) -> set[int]:
  """The ticks of --shown (first,last): every tenth, and the first after the switch one by
  one."""
  first, last = (int(v) for v in shown.split(","))
  return {*range(first, last + 1, 10), *range(200, 206)}


def record_path(records: str, label: str, seed: int) -> str:
  return records_lib.record_path(records, f"{label}_seed{seed}")


def probe(args: argparse.Namespace, seed: int) -> dict[str, Any]:
  """Trains `args.config` with `seed` through the window and returns its record."""
  first, last = (int(v) for v in args.window.split(","))
  config = study.load_config(args.config)
  for entry in args.set:
    field, _, value = entry.partition("=")
    section, name = field.split(".", 1)
    config[section][name] = study.parse_value(value)
  config.train.seed = seed
  config.train.eval_every = config.train.checkpoint_every = config.train.num_steps
  config.train.progress_bar = False
  with tempfile.TemporaryDirectory() as workdir:
    rows = probe_run(config, workdir, first, last, args.probe,
                     args.hessian_every or last + 1, args.power_iterations, args.only_accuracy)
  return {"config": args.config, "set": args.set, "seed": seed, "label": args.label,
          "window": [first, last], "environment": study.environment(), "rows": rows}


def figure(records: str, labels: list[str], path: str) -> None:
  """Validation accuracy of W per tick, one panel per seed, one line per label."""
  import matplotlib
  matplotlib.use("Agg")
  import matplotlib.pyplot as plt
  found = {}
  for label in labels:
    for path in records_lib.record_files(records):
      if os.path.basename(path).startswith(f"{label}_seed"):
        record = records_lib.read_json(path)
        found.setdefault(record["seed"], []).append(record)
  seeds = sorted(found)
  fig, axes = plt.subplots(1, len(seeds), figsize=(6 * len(seeds), 4), squeeze=False)
  for ax, seed in zip(axes[0], seeds, strict=True):
    for record in found[seed]:
      steps = [row["step"] for row in record["rows"]]
      accuracy = [row["validation_accuracy"] for row in record["rows"]]
      emphasis = record["label"].startswith("odsgd")
      ax.plot(steps, accuracy, label=record["label"], lw=1.8 if emphasis else 0.8,
              alpha=1.0 if emphasis else 0.7)
    ax.axvline(200, color="grey", ls=":", lw=1)
    ax.set(title=f"seed {seed}", xlabel="step", ylabel="validation accuracy of W", ylim=(0, 1))
    ax.legend(fontsize=7, ncol=2)
  fig.tight_layout()
  fig.savefig(path, dpi=110)


def main() -> None:
  parser = argparse.ArgumentParser(description=__doc__,
                                   formatter_class=argparse.RawDescriptionHelpFormatter)
  parser.add_argument("--config", default="configs/default.py:odsgd")
  parser.add_argument("--set", action="append", default=[], help="section.field=value")
  parser.add_argument("--seeds", default="43,60")
  parser.add_argument("--label", default="odsgd", help="names the variant in its records")
  parser.add_argument("--window", default="190,300", help="first,last step (1-based)")
  parser.add_argument("--shown", default="190,300", help="first,last step in the table")
  parser.add_argument("--probe", type=int, default=1024, help="training signals probed")
  parser.add_argument("--hessian_every", type=int, default=10, help="0: no Hessian")
  parser.add_argument("--power_iterations", type=int, default=30)
  parser.add_argument("--only_accuracy", action="store_true",
                      help="only W's validation accuracy and loss per tick (for the figure)")
  parser.add_argument("--records", default=os.path.join("records", SECTION),
                      help="where each run's rows are kept (one JSON per label and seed)")
  parser.add_argument("--from_records", action="store_true", help="train nothing")
  parser.add_argument("--readme", action="store_true",
                      help=f"write the tables into docs/delays.md ({SECTION})")
  parser.add_argument("--check", action="store_true", help="with --readme: compare only")
  parser.add_argument("--figure", default="", help="also plot validation accuracy to this "
                      "path, for the labels in --figure_labels, from the records")
  parser.add_argument("--figure_labels", default="")
  args = parser.parse_args()
  os.makedirs(args.records, exist_ok=True)
  parts = []
  for seed in study.parse_seeds(args.seeds):
    path = record_path(args.records, args.label, seed)
    if args.from_records:
      try:
        record = records_lib.read_json(path)
      except (OSError, ValueError, EOFError) as error:
        sys.exit(f"no readable record of {args.label}, seed {seed} at {path} ({error}): "
                 f"run without --from_records to train it")
    else:
      record = probe(args, seed)
      records_lib.write_record(path, record)
    parts.append(f"{args.label}, seed {seed}:\n\n" + table(record["rows"],
                                                          shown_steps(args.shown)))
  print("\n\n".join(parts))
  if args.readme:
    command = shlex.join(["python", "scripts/switch_dynamics.py", *(
        a for a in sys.argv[1:] if a not in ("--readme", "--check", "--from_records"))])
    text = (f"Produced by `{command}` ({record['environment']}); the state after each step, "
            f"probed between steps (W: the model evaluated; x_i: worker i's parameters; "
            f"losses on the first {args.probe} training signals; the Hessian's top "
            f"eigenvalue h at W by {args.power_iterations} power iterations on them).\n\n"
            + "\n\n".join(parts))
    study.replace_section(SECTION, text, check=args.check)
  if args.figure:
    figure(args.records, args.figure_labels.split(","), args.figure)


if __name__ == "__main__":
  study.run_main(main)
