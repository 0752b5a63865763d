"""The train step's speed seam: which compiled programs run which ticks and which buffers
of the state each donates, all read off the programs themselves. None of it changes the
math (tests switch each off).

Two things, each measured with scripts/benchmark.py:

- **A program for the settled ticks.** A strategy's rules for its first ticks (odsgd's
  warm-up and its first delayed tick, pseudo_sync's ticks 0 and 1) are conditions on its
  tick count (`strategies.ticks`). The ticks from which every condition is decided run the
  strategy wrapped by `ticks.from_tick`: its update evaluated with them decided, without
  the warm-up's conditional and the first ticks' selects, which made XLA fuse the momentum
  update twice, into the select and into the parameter update. That tick is read off the
  strategy's traced update (`ticks.settled_from`), never declared. XLA may round the
  momentum update differently in the two programs (a fused multiply-add in one, 1 ulp), so
  a run's numbers depend on the program each tick ran, which is fixed by the tick alone
  (resuming reproduces them); at XLA:CPU's optimization level 0 the two agree bit for bit
  (tests/test_identities.py).
- **Donation.** The step donates its input state so that XLA updates it in place. Where a
  tick replaces a tensor whole while the step still reads its old value (odsgd's pending
  gradients, which the all-reduce reads before this tick's replace them; parameters
  computed from W rather than from themselves), XLA copies the donated buffer aside at the
  start of every step. The program is compiled donating everything, its copies of input
  buffers are read off the compiled program (`copied_inputs`), and where a tensor of at
  least SMALL_TENSOR_BYTES per worker is among them the program is compiled again with
  those tensors as a separate, non-donated argument: their new values go to fresh buffers.
  What XLA copies out of a conditional's results (the first ticks' program) is not traced
  back to an input, and is left as it is.

A delayed strategy's message held for a tick travels as one vector of its small tensors
(`comm.hold`): that is the strategy's own, explicit in its state.

`TrainStep(setup, settle=False, split_donation=False)` runs every tick in one program that
donates everything: the same states, bit for bit without `split_donation`, and without
`settle` at XLA:CPU's optimization level 0.
"""

import dataclasses
import re
from typing import Any

import jax
import numpy as np

from odsgd_jax import comm, parallel, strategies
from odsgd_jax.strategies import ticks
from odsgd_jax.strategies import _tracing as tracing
from odsgd_jax.tasks import CLASSIFICATION, Task
from odsgd_jax.train._step import StepSetup, TrainState, init_state, metric_names, train_step

# In a compiled program's text (HLO): an instruction `%name = <type> op(%operand, ...)`, and
# the name JAX gives an entry parameter in its metadata (the argument's path).
_INSTRUCTION = re.compile(r"^\s*(?:ROOT )?%([\w.\-]+) = .*? ([\w\-]+)\((.*)$")
_ARGUMENT_PATH = re.compile(r'metadata=\{[^}]*?op_name="((?:[^"\\]|\\.)*)"')


def copied_inputs(hlo_text: str) -> set[str]:
  """The inputs that the compiled program `hlo_text` copies, each by the path JAX names
  its entry parameter with (`state.params['Dense_0']['bias']`: the argument's name and
  `jax.tree_util.keystr` of the leaf): a `copy` (or `copy-start`) of a parameter, or of a
  bitcast of one, in its entry computation. Named, not numbered: the inputs a program
  does not read are not its parameters."""
  entry = hlo_text[hlo_text.index("\nENTRY"):]
  entry = entry[:entry.index("\n}")]
  parameters: dict[str, str] = {}
  bitcasts: dict[str, str] = {}
  copied: set[str] = set()
  for line in entry.splitlines()[1:]:
    match = _INSTRUCTION.match(line)
    if match is None:
      continue
    name, op, rest = match.groups()
    operand = rest.split(")")[0].split(",")[0].strip().lstrip("%")
    if op == "parameter":
      path = _ARGUMENT_PATH.search(line)
      # unnamed (a JAX that names none): its copy goes unseen, and the input stays donated
      parameters[name] = re.sub(r"\\(.)", r"\1", path.group(1)) if path else f"#{operand}"
    elif op == "bitcast":
      bitcasts[name] = operand
    elif op in ("copy", "copy-start"):
      operand = bitcasts.get(operand, operand)
      if operand in parameters:
        copied.add(parameters[operand])
  return copied


def leaf_paths(argument: str, tree: Any) -> list[str]:
  """The path of each leaf of `tree` passed as `argument`, as `copied_inputs` names it: as
  JAX names a jitted function's inputs (`keystr`, a pytree's unkeyed children by number)."""
  return [argument + re.sub(r"<flat index ([^>]+)>", r"\1", jax.tree_util.keystr(path))
          for path, _ in jax.tree_util.tree_leaves_with_path(tree)]


class StepProgram:
  """`step(state, batch, schedule) -> (state, metrics)`: `train_step` jitted for one
  program (its `setup`, `norms`), its input state donated; with `split_donation`, but for
  the tensors of at least SMALL_TENSOR_BYTES per worker that XLA copies aside when
  donated (read off the program compiled donating everything, once per state structure).
  Those travel as a separate, non-donated argument (JAX donates whole arguments): the
  state is flattened, split, and joined again around the call."""

  def __init__(self, setup: StepSetup, norms: bool, split_donation: bool = True,
               name: str = "train_step"):
    """`name`: the program's, as JAX names its compilations (`jax_log_compiles`, and
    `jax.monitoring`'s events: how the tests count them)."""
    self.name, self.split_donation = name, split_donation

    def step(state, batch, schedule):
      return train_step(state, batch, schedule, setup=setup, norms=norms)

    self._layouts: dict[Any, tuple[bool, ...] | None] = {}

    def split_step(layout, donated, kept_leaves, batch, schedule):
      treedef, mask = layout
      new_state, metrics = step(treedef.unflatten(_merge(donated, kept_leaves, mask)),
                                batch, schedule)
      # The donated leaves come first, in the input's order: JAX gives a donated input's
      # buffer to the first output of its shape, so each gets its own new value.
      return (*_split(treedef.flatten_up_to(new_state), mask), metrics)

    step.__name__, split_step.__name__ = name, f"{name}_split"
    self.whole = jax.jit(step, donate_argnums=0)
    self.split = jax.jit(split_step, static_argnums=0, donate_argnums=1)

  def _layout(self, state: TrainState, batch: Any,
              schedule: Any) -> tuple[Any, tuple[bool, ...]] | None:
    """(treedef, which leaves are kept out of the donation), or None when every leaf is
    donated."""
    if not self.split_donation:
      return None
    treedef = jax.tree.structure(state)
    if treedef not in self._layouts:
      # compiled here once (jit keeps it: the call that follows does not compile again)
      copied = copied_inputs(self.whole.lower(state, batch, schedule).compile().as_text())
      mask = tuple(path in copied and _bytes_per_worker(leaf) >= comm.SMALL_TENSOR_BYTES
                   for path, leaf in zip(leaf_paths("state", state), jax.tree.leaves(state),
                                         strict=True))
      self._layouts[treedef] = mask if any(mask) else None
    mask = self._layouts[treedef]
    return None if mask is None else (treedef, mask)

  def kept_out(self, state: TrainState, batch: Any, schedule: Any) -> TrainState:
    """Which leaves of `state` the program keeps out of the donation (a tree of bools)."""
    layout = self._layout(state, batch, schedule)
    leaves = jax.tree.leaves(state)
    mask = layout[1] if layout else (False,) * len(leaves)
    return jax.tree.unflatten(jax.tree.structure(state), list(mask))

  def __call__(self, state: TrainState, batch: Any, schedule: Any):
    layout = self._layout(state, batch, schedule)
    if layout is None:
      return self.whole(state, batch, schedule)
    treedef, mask = layout
    donated, kept_leaves, metrics = self.split(layout, *_split(jax.tree.leaves(state), mask),
                                               batch, schedule)
    return treedef.unflatten(_merge(donated, kept_leaves, mask)), metrics

  def lower(self, state: TrainState, batch: Any, schedule: Any):
    layout = self._layout(state, batch, schedule)
    if layout is None:
      return self.whole.lower(state, batch, schedule)
    return self.split.lower(layout, *_split(jax.tree.leaves(state), layout[1]), batch,
                            schedule)


class TrainStep:
  """The train step as the loop calls it: `step(state, batch, schedule, tick, norms)`,
  each tick in its program (`program`), each program compiled at its first call.

  Attributes:
    settled_from: the tick from which the strategy's tick conditions are all decided;
      from it on (when it is above 0) ticks run the program traced with them decided.
    metric_names: {norms: the rows of the step's metrics}, known before the first step.
  """

  def __init__(self, setup: StepSetup, settle: bool = True, split_donation: bool = True):
    """`settle`: the ticks from `settled_from` on run a program of their own;
    `split_donation`: the tensors XLA would copy aside when donated are not donated."""
    self.setup = setup
    self.settled_from = _settled_from(setup) if settle else 0
    self.split_donation = split_donation
    opt_state = _stand_in_strategy_state(setup)
    self.metric_names = {norms: metric_names(setup, opt_state, norms) for norms in (False, True)}
    self.programs: dict[tuple[bool, int], StepProgram] = {}  # by (norms, program_tick)

  def init_state(self, input_shape: tuple[int, ...], seed: int) -> TrainState:
    """A run's first state (`train.init_state`)."""
    return init_state(self.setup.model, self.setup.tx, self.setup.worker_mesh, input_shape,
                      seed, self.setup.task)

  def program_tick(self, tick: int) -> int:
    """From which tick on the program of tick `tick` (0-based: the state's step) is valid:
    `settled_from` for the settled ticks, else 0."""
    return self.settled_from if self.settled_from and tick >= self.settled_from else 0

  def program(self, norms: bool = False, tick: int = 0) -> StepProgram:
    """The program of tick `tick`, with or without the norms."""
    key = (norms, self.program_tick(tick))
    if key not in self.programs:
      setup = dataclasses.replace(self.setup, tx=ticks.from_tick(self.setup.tx, key[1]))
      name = f"train_step{'_norms' if norms else ''}_from_tick_{key[1]}"
      self.programs[key] = StepProgram(setup, norms, self.split_donation, name)
    return self.programs[key]

  def __call__(self, state: TrainState, batch: Any, schedule: Any, tick: int = 0,
               norms: bool = False):
    return self.program(norms, tick)(state, batch, schedule)

  def metrics(self, packed: Any, norms: bool = False) -> dict[str, Any]:
    """{name: row} of a step's metrics (host or device array)."""
    return dict(zip(self.metric_names[norms], packed, strict=True))


def make_train_step(model, tx, worker_mesh: parallel.WorkerMesh,
                    strategy: strategies.StrategyDef | None = None, lr_schedule=None,
                    task: Task = CLASSIFICATION, **seam: bool) -> TrainStep:
  """The train step of `tx` (a strategy built over `parallel.WORKER_AXES`) on `model`
  learning `task`; `strategy` adds its log and the clock's record to the metrics;
  `lr_schedule` (of the tick) the learning rate. `seam`: `TrainStep`'s switches (both on by
  default)."""
  return TrainStep(StepSetup(model, tx, worker_mesh, strategy, lr_schedule, task), **seam)


def _stand_in_strategy_state(setup: StepSetup) -> Any:
  """The strategy's state of every worker on the stand-in model (shapes only): the
  strategy's options, not the model's shapes, decide the names of its metrics."""
  return tracing.stand_in_worker_states(setup.tx, setup.worker_mesh.num_workers)


def _settled_from(setup: StepSetup) -> int:
  """`ticks.settled_from` of the strategy's update, traced on the stand-in model over the
  run's workers (only the update: nothing of the model is traced)."""
  num_workers = setup.worker_mesh.num_workers
  state = jax.eval_shape(setup.tx.init, tracing.STAND_IN)
  return ticks.settled_from(setup.tx, state, {parallel.WORKERS: num_workers, parallel.LOCAL: 1},
                            **tracing.stand_in_extra_args(num_workers))


def _bytes_per_worker(leaf: Any) -> int:
  shape = np.shape(leaf)
  return int(np.prod(shape[1:], dtype=np.int64)) * np.dtype(leaf.dtype).itemsize


def _split(leaves: list[Any], mask: tuple[bool, ...]) -> tuple[list[Any], list[Any]]:
  return ([leaf for leaf, kept in zip(leaves, mask, strict=True) if not kept],
          [leaf for leaf, kept in zip(leaves, mask, strict=True) if kept])


def _merge(donated: list[Any], kept: list[Any], mask: tuple[bool, ...]) -> list[Any]:
  donated, kept = iter(donated), iter(kept)
  return [next(kept) if is_kept else next(donated) for is_kept in mask]
