"""The train step's speed seam: which compiled programs run which ticks, which buffers of
the state each donates, and how a message that waits a tick is kept. None of it changes
the math (tests switch each off).

Three things, each measured with scripts/benchmark.py:

- **A program for the settled ticks.** A strategy's rules for its first ticks (odsgd's
  warm-up and its first delayed tick, pseudo_sync's ticks 0 and 1) are conditions on its
  tick count (`strategies.ticks`). The ticks from which every condition is decided run a
  program traced with them decided (`ticks.known_from`): without the warm-up's conditional
  and the first ticks' selects, which made XLA fuse the momentum update twice, into the
  select and into the parameter update. That tick is read off the strategy itself
  (`ticks.settled_from`), never declared. XLA may round the momentum update differently in
  the two programs (a fused multiply-add in one, 1 ulp), so a run's numbers depend on the
  program each tick ran, which is fixed by the tick alone (resuming reproduces them); at
  XLA:CPU's optimization level 0 the two agree bit for bit (tests/test_identities.py).
- **Donation.** The step donates its input state so that XLA updates it in place, except
  the large tensors of the fields a tick replaces whole while the step still reads their
  old values (`REPLACED_EACH_TICK`, by the strategy state's type): donated, XLA copied
  them aside at the start of every step. Their new values go to fresh buffers.
- **Messages held as one vector.** A delayed strategy's pending gradients wait one tick in
  its state and travel at the next (`HELD_MESSAGES`, by the state's type). Kept as a tree,
  each small tensor was a buffer of its own that the tick's all-reduce read while the same
  tick replaced it: two kernels per tensor and tick (odsgd on CNN1D: 22 copies), which
  cost more than the arithmetic. Between ticks their tensors under SMALL_TENSOR_BYTES are
  one vector (`PackedTensors`, uncompressed exchanges only: compressors work per tensor):
  the strategy sees the tree, and its exchange of it travels as that vector
  (`comm.held_as_one_vector`), one operand of the all-reduce. The mean is the same sum,
  element by element; on one device, where the workers' sum is a reduction over the
  vmapped axis, XLA sums a vector and separate tensors in different orders (1 ulp).

`TrainStep(setup, settle=False, split_donation=False, hold_messages=False)` runs every tick
in one program that donates everything and keeps the state as the strategy writes it: the
same states, bit for bit without `split_donation`, without `hold_messages` where each
worker has a device of its own, and without `settle` at XLA:CPU's optimization level 0.
"""

import dataclasses
from typing import Any, Callable, NamedTuple

import jax
import jax.numpy as jnp
import numpy as np
import optax

from odsgd_jax import comm, parallel, strategies
from odsgd_jax.cluster import synchronous_schedule
from odsgd_jax.strategies import ticks
from odsgd_jax.train._step import StepSetup, TrainState, init_state, metric_names, train_step

# Per worker, the size under which a tensor costs more as a buffer of its own than as
# bytes: such tensors are donated even where the step copies them aside (a fresh buffer
# costs a fixed amount per tensor and device, a copy costs per byte; measured on 8 CPU
# devices when it was chosen: keeping CNN1D's tensors, all under 13 KiB, out of the
# donation made odsgd's step slower, keeping the wide MLP's, up to 4 MiB, out made it faster).
SMALL_TENSOR_BYTES = 64 * 1024


def _delayed_strategy(state: TrainState) -> tuple[Any, ...]:
  # The all-reduce reads the pending gradients; a tensor's update does not wait for the
  # other tensors' gradients, so the backward pass may still read the old parameters; the
  # first ticks' selects keep the inner optimizer's and spike compensation's state, which
  # the parameter update also reads.
  opt_state = state.opt_state
  return state.params, opt_state.pending_grads, opt_state.inner_state, opt_state.spike


# The fields of a train state that a tick replaces whole while the step still reads their
# old values, by the type of the strategy's state.
REPLACED_EACH_TICK: dict[type, Callable[[TrainState], tuple[Any, ...]]] = {
    strategies.OdsgdState: _delayed_strategy,
    strategies.PseudoSyncState: _delayed_strategy,
    # the select that keeps an inactive worker's momentum, read after the update
    strategies.OscarsState: lambda state: (state.opt_state.inner_state,),
}


@dataclasses.dataclass(frozen=True)
class Field:
  """A field of a strategy's state, read and written through its attribute."""

  get: Callable[[Any], Any]
  set: Callable[[Any, Any], Any]


_PENDING = Field(lambda state: state.pending_grads,
                 lambda state, value: state._replace(pending_grads=value))

# The message a strategy's state holds for the next tick, by the type of the state.
HELD_MESSAGES: dict[type, Field] = {
    strategies.OdsgdState: _PENDING,
    strategies.PseudoSyncState: _PENDING,
}


class PackedTensors(NamedTuple):
  """A held message in the state: its tensors under SMALL_TENSOR_BYTES as one vector, the
  others as they are."""

  small: jax.Array  # the small tensors, raveled and concatenated in the tree's order
  large: tuple[jax.Array, ...]  # the others, in the tree's order


def _is_small(leaf: Any) -> bool:
  return leaf.size * jnp.dtype(leaf.dtype).itemsize < SMALL_TENSOR_BYTES


def _packs(tree: Any, opt_state: Any) -> bool:
  """Whether a held message is kept packed: it travels uncompressed, and its small
  tensors, at least one, share a dtype (one vector would have to promote them)."""
  dtypes = {jnp.dtype(x.dtype) for x in jax.tree.leaves(tree) if _is_small(x)}
  return strategies.communication_field(opt_state) is None and len(dtypes) == 1


def _pack(tree: Any) -> PackedTensors:
  leaves = jax.tree.leaves(tree)
  return PackedTensors(small=jnp.concatenate([jnp.ravel(x) for x in leaves if _is_small(x)]),
                       large=tuple(x for x in leaves if not _is_small(x)))


def _unpack(packed: PackedTensors, like: Any) -> Any:
  leaves, treedef = jax.tree.flatten(like)
  large, tensors, start = iter(packed.large), [], 0
  for leaf in leaves:
    if _is_small(leaf):
      tensors.append(packed.small[start:start + leaf.size].reshape(leaf.shape))
      start += leaf.size
    else:
      tensors.append(next(large))
  return jax.tree.unflatten(treedef, tensors)


def holding_messages(tx: optax.GradientTransformationExtraArgs,
                     field: Field) -> optax.GradientTransformationExtraArgs:
  """`tx` with the message its state holds for the next tick (`field`, shaped like the
  parameters) kept packed between ticks (`PackedTensors`) where `_packs` allows: the
  update sees the tree, and its exchange of it travels as the vector."""

  def init_fn(params):
    state = tx.init(params)
    held = field.get(state)
    return field.set(state, _pack(held)) if _packs(held, state) else state

  def update_fn(grads, state, params=None, **extra_args):
    held = field.get(state)
    if not isinstance(held, PackedTensors):
      return tx.update(grads, state, params, **extra_args)
    tree = _unpack(held, params)
    small = tuple(x for x in jax.tree.leaves(tree) if _is_small(x))
    with comm.held_as_one_vector(held.small, small):
      updates, state = tx.update(grads, field.set(state, tree), params, **extra_args)
    return updates, field.set(state, _pack(field.get(state)))

  return optax.GradientTransformationExtraArgs(init_fn, update_fn)


class StepProgram:
  """`step(state, batch, schedule) -> (state, metrics)`: `train_step` jitted for one
  program (`norms`, `from_tick`), the input state donated but for the leaves `kept(state)`
  selects of at least SMALL_TENSOR_BYTES per worker. Those travel as a separate,
  non-donated argument (JAX donates whole arguments): the state is flattened, split, and
  joined again around the call."""

  def __init__(self, setup: StepSetup, norms: bool, from_tick: int,
               kept: Callable[[TrainState], tuple[Any, ...]] | None):
    self.kept = kept
    step = lambda state, batch, schedule: train_step(state, batch, schedule, setup=setup,
                                                     norms=norms, from_tick=from_tick)
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
          i in chosen and _bytes_per_worker(leaf) >= SMALL_TENSOR_BYTES
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

  def __init__(self, setup: StepSetup, settle: bool = True, split_donation: bool = True,
               hold_messages: bool = True):
    """`settle`: the ticks from `settled_from` on run a program of their own;
    `split_donation`: `REPLACED_EACH_TICK` is not donated; `hold_messages`: the messages
    of `HELD_MESSAGES` are kept packed (`self.setup.tx` then wraps the strategy's)."""
    opt_state = _stand_in_strategy_state(setup)
    held = HELD_MESSAGES.get(type(opt_state)) if hold_messages else None
    if held is not None:
      setup = dataclasses.replace(setup, tx=holding_messages(setup.tx, held))
    self.setup = setup
    self.settled_from = _settled_from(setup, opt_state) if settle else 0
    self.kept = REPLACED_EACH_TICK.get(type(opt_state)) if split_donation else None
    self.metric_names = {norms: metric_names(setup, opt_state, norms) for norms in (False, True)}
    self.programs: dict[tuple[bool, int], StepProgram] = {}  # by (norms, program_tick)

  def init_state(self, input_shape: tuple[int, ...], seed: int) -> TrainState:
    """A run's first state, as this step keeps it (`train.init_state` with `setup.tx`)."""
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
      self.programs[key] = StepProgram(self.setup, norms, key[1], self.kept)
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
  `strategy` adds its log and the clock's record to the metrics, `lr_schedule` (of the
  tick) the learning rate. `seam`: `TrainStep`'s switches (both on by default)."""
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

  def update(grads, state, params, schedule, loss):
    return setup.tx.update(grads, state, params, schedule=schedule, loss=loss)

  run = worker_mesh.per_worker(
      parallel.per_worker_update(worker_mesh, update, in_axes=(0, 0, 0, None, 0)),
      in_layouts=(parallel.PER_WORKER,) * 3 + (parallel.REPLICATED, parallel.PER_WORKER))
  params = _stand_in_params(num_workers)
  schedule = jax.eval_shape(lambda: jax.tree.map(jnp.asarray,
                                                 synchronous_schedule(0, num_workers)))
  loss = jax.ShapeDtypeStruct((num_workers,), jnp.float32)
  return ticks.settled_from(lambda: jax.eval_shape(run, params, opt_state, params, schedule,
                                                   loss))


def _bytes_per_worker(leaf: Any) -> int:
  shape = np.shape(leaf)
  return int(np.prod(shape[1:], dtype=np.int64)) * np.dtype(leaf.dtype).itemsize


def _split(leaves: list[Any], mask: tuple[bool, ...]) -> tuple[list[Any], list[Any]]:
  return ([leaf for leaf, kept in zip(leaves, mask, strict=True) if not kept],
          [leaf for leaf, kept in zip(leaves, mask, strict=True) if kept])


def _merge(donated: list[Any], kept: list[Any], mask: tuple[bool, ...]) -> list[Any]:
  donated, kept = iter(donated), iter(kept)
  return [next(kept) if is_kept else next(donated) for is_kept in mask]
