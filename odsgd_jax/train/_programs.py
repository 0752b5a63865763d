"""The train step's speed seam: which compiled programs run which ticks and which buffers
of the state each donates, derived from what the strategy declares. None of it changes
the math (tests switch each off).

Two things, each measured with scripts/benchmark.py:

- **A program for the settled ticks.** A strategy's rules for its first ticks (odsgd's
  warm-up and its first delayed tick, pseudo_sync's ticks 0 and 1) are conditions on its
  tick count (`strategies.ticks`). The ticks from which every condition is decided run the
  strategy wrapped by `ticks.from_tick`: its update traced with them decided, without the
  warm-up's conditional and the first ticks' selects, which made XLA fuse the momentum
  update twice, into the select and into the parameter update. That tick is read off the
  strategy itself (`ticks.settled_from`), never declared. XLA may round the momentum
  update differently in the two programs (a fused multiply-add in one, 1 ulp), so a run's
  numbers depend on the program each tick ran, which is fixed by the tick alone (resuming
  reproduces them); at XLA:CPU's optimization level 0 the two agree bit for bit
  (tests/test_identities.py).
- **Donation.** The step donates its input state so that XLA updates it in place, except
  the large tensors of what a tick replaces whole while the step still reads its old
  values (`StrategyDef.replaced_each_tick`, the strategy's declaration): donated, XLA
  copied them aside at the start of every step. Their new values go to fresh buffers.

A delayed strategy's message held for a tick travels as one vector of its small tensors
(`comm.hold`): that is the strategy's own, explicit in its state.

`TrainStep(setup, settle=False, split_donation=False)` runs every tick in one program that
donates everything: the same states, bit for bit without `split_donation`, and without
`settle` at XLA:CPU's optimization level 0.
"""

import dataclasses
from typing import Any, Callable

import jax
import jax.numpy as jnp
import numpy as np

from odsgd_jax import comm, parallel, strategies
from odsgd_jax.cluster import synchronous_schedule
from odsgd_jax.strategies import ticks
from odsgd_jax.train._step import StepSetup, TrainState, init_state, metric_names, train_step


def replaced_each_tick(strategy: strategies.StrategyDef | None
                       ) -> Callable[[TrainState], tuple[Any, ...]] | None:
  """The parts of a train state that `strategy` declares a tick replaces whole while the
  step still reads them (`StrategyDef.replaced_each_tick`), as a selector; None: none."""
  fields = () if strategy is None else strategy.replaced_each_tick
  if not fields:
    return None
  return lambda state: tuple(state.params if field == "params" else getattr(state.opt_state, field)
                             for field in fields)


class StepProgram:
  """`step(state, batch, schedule) -> (state, metrics)`: `train_step` jitted for one
  program (its `setup`, `norms`), the input state donated but for the leaves `kept(state)`
  selects of at least SMALL_TENSOR_BYTES per worker. Those travel as a separate,
  non-donated argument (JAX donates whole arguments): the state is flattened, split, and
  joined again around the call."""

  def __init__(self, setup: StepSetup, norms: bool,
               kept: Callable[[TrainState], tuple[Any, ...]] | None):
    self.kept = kept
    step = lambda state, batch, schedule: train_step(state, batch, schedule, setup=setup,
                                                     norms=norms)
    self.whole = jax.jit(step, donate_argnums=0)
    self._layouts: dict[Any, tuple[bool, ...]] = {}

    def split_step(layout, donated, kept_leaves, batch, schedule):
      treedef, mask = layout
      new_state, metrics = step(treedef.unflatten(_merge(donated, kept_leaves, mask)),
                                batch, schedule)
      # The donated leaves come first, in the input's order: JAX gives a donated input's
      # buffer to the first output of its shape, so each gets its own new value.
      return (*_split(treedef.flatten_up_to(new_state), mask), metrics)

    self.split = jax.jit(split_step, static_argnums=0, donate_argnums=1)

  def _layout(self, state: TrainState) -> tuple[Any, tuple[bool, ...]] | None:
    """(treedef, which leaves are kept), or None when every leaf is donated."""
    if self.kept is None:
      return None
    leaves, treedef = jax.tree.flatten(state)
    if treedef not in self._layouts:
      # the leaves' positions, read through the typed fields
      chosen = set(jax.tree.leaves(self.kept(treedef.unflatten(range(len(leaves))))))
      self._layouts[treedef] = tuple(
          i in chosen and _bytes_per_worker(leaf) >= comm.SMALL_TENSOR_BYTES
          for i, leaf in enumerate(leaves))
    mask = self._layouts[treedef]
    return (treedef, mask) if any(mask) else None

  def __call__(self, state: TrainState, batch: Any, schedule: Any):
    layout = self._layout(state)
    if layout is None:
      return self.whole(state, batch, schedule)
    treedef, mask = layout
    donated, kept_leaves, metrics = self.split(layout, *_split(jax.tree.leaves(state), mask),
                                               batch, schedule)
    return treedef.unflatten(_merge(donated, kept_leaves, mask)), metrics

  def lower(self, state: TrainState, batch: Any, schedule: Any):
    layout = self._layout(state)
    if layout is None:
      return self.whole.lower(state, batch, schedule)
    return self.split.lower(layout, *_split(jax.tree.leaves(state), layout[1]), batch,
                            schedule)

  def compilations(self) -> int:
    """Programs compiled so far (one per state structure and input shapes)."""
    return self.whole._cache_size() + self.split._cache_size()


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
    `split_donation`: what the strategy declares `replaced_each_tick` is not donated."""
    opt_state = _stand_in_strategy_state(setup)
    self.setup = setup
    self.settled_from = _settled_from(setup, opt_state) if settle else 0
    self.kept = replaced_each_tick(setup.strategy) if split_donation else None
    self.metric_names = {norms: metric_names(setup, opt_state, norms) for norms in (False, True)}
    self.programs: dict[tuple[bool, int], StepProgram] = {}  # by (norms, program_tick)

  def init_state(self, input_shape: tuple[int, ...], seed: int) -> TrainState:
    """A run's first state (`train.init_state`)."""
    return init_state(self.setup.model, self.setup.tx, self.setup.worker_mesh, input_shape,
                      seed)

  def program_tick(self, tick: int) -> int:
    """From which tick on the program of tick `tick` (0-based: the state's step) is valid:
    `settled_from` for the settled ticks, else 0."""
    return self.settled_from if self.settled_from and tick >= self.settled_from else 0

  def program(self, norms: bool = False, tick: int = 0) -> StepProgram:
    """The program of tick `tick`, with or without the norms."""
    key = (norms, self.program_tick(tick))
    if key not in self.programs:
      setup = dataclasses.replace(self.setup, tx=ticks.from_tick(self.setup.tx, key[1]))
      self.programs[key] = StepProgram(setup, norms, self.kept)
    return self.programs[key]

  def __call__(self, state: TrainState, batch: Any, schedule: Any, tick: int = 0,
               norms: bool = False):
    return self.program(norms, tick)(state, batch, schedule)

  def metrics(self, packed: Any, norms: bool = False) -> dict[str, Any]:
    """{name: row} of a step's metrics (host or device array)."""
    return dict(zip(self.metric_names[norms], packed, strict=True))


def make_train_step(model, tx, worker_mesh: parallel.WorkerMesh,
                    strategy: strategies.StrategyDef | None = None, lr_schedule=None,
                    **seam: bool) -> TrainStep:
  """The train step of `tx` (a strategy built over `parallel.WORKER_AXES`) on `model`;
  `strategy` adds its log and the clock's record to the metrics, and what it declares
  `replaced_each_tick`; `lr_schedule` (of the tick) the learning rate. `seam`:
  `TrainStep`'s switches (both on by default)."""
  return TrainStep(StepSetup(model, tx, worker_mesh, strategy, lr_schedule), **seam)


# A stand-in model: the strategy's options, not the model's shapes, decide its tick
# conditions and the names of its metrics.
_STAND_IN = {"kernel": jax.ShapeDtypeStruct((2, 3), jnp.float32),
             "bias": jax.ShapeDtypeStruct((3,), jnp.float32)}


def _stand_in_params(num_workers: int) -> Any:
  return jax.tree.map(lambda x: jax.ShapeDtypeStruct((num_workers, *x.shape), x.dtype),
                      _STAND_IN)


def _stand_in_strategy_state(setup: StepSetup) -> Any:
  return jax.eval_shape(jax.vmap(setup.tx.init),
                        _stand_in_params(setup.worker_mesh.num_workers))


def _settled_from(setup: StepSetup, opt_state: Any) -> int:
  """`ticks.settled_from` of the strategy's update, traced on the stand-in model over the
  run's workers (only the update: nothing of the model is traced)."""
  worker_mesh = setup.worker_mesh
  num_workers = worker_mesh.num_workers

  params = _stand_in_params(num_workers)
  schedule = jax.eval_shape(lambda: jax.tree.map(jnp.asarray,
                                                 synchronous_schedule(0, num_workers)))
  loss = jax.ShapeDtypeStruct((num_workers,), jnp.float32)

  def trace(known_from):
    def update(grads, state, params, schedule, loss):
      return setup.tx.update(grads, state, params, schedule=schedule, loss=loss,
                             known_from=known_from)

    run = worker_mesh.per_worker(
        parallel.per_worker_update(worker_mesh, update, in_axes=(0, 0, 0, None, 0)),
        in_layouts=(parallel.PER_WORKER,) * 3 + (parallel.REPLICATED, parallel.PER_WORKER))
    return jax.eval_shape(run, params, opt_state, params, schedule, loss)

  return ticks.settled_from(trace)


def _bytes_per_worker(leaf: Any) -> int:
  shape = np.shape(leaf)
  return int(np.prod(shape[1:], dtype=np.int64)) * np.dtype(leaf.dtype).itemsize


def _split(leaves: list[Any], mask: tuple[bool, ...]) -> tuple[list[Any], list[Any]]:
  return ([leaf for leaf, kept in zip(leaves, mask, strict=True) if not kept],
          [leaf for leaf, kept in zip(leaves, mask, strict=True) if kept])


def _merge(donated: list[Any], kept: list[Any], mask: tuple[bool, ...]) -> list[Any]:
  donated, kept = iter(donated), iter(kept)
  return [next(kept) if is_kept else next(donated) for is_kept in mask]
