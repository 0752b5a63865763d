"""Equal-time budgets: each strategy trains for the simulated time the baseline spent on
its steps, or for its own steps, whichever is later.

A strategy that is cheaper per tick then gets the steps that time buys, and one that
never reaches a target is judged at equal time. The ticks are counted on the clock before
any training: with a named workload or a set step time the clock's schedule and costs need
no training (the cluster's noise follows `cluster.seed`, a round's end follows the
strategy's period, a message is the model's parameters), so
each run's learning-rate schedule can span its own budget from its first step.
"""

import dataclasses
import itertools
from typing import Iterator, Sequence

import jax
import jax.numpy as jnp
import ml_collections

from odsgd_jax import cluster, models
from odsgd_jax.data import DATASETS
from odsgd_jax.strategies._easgd import easgd_elastic_step
from odsgd_jax.strategies._rounds import local_sgd_round_end, round_ends
from odsgd_jax.study import _records as records_lib
from odsgd_jax.study._grid import RunSpec, StudyInputError
from odsgd_jax.train._optimizer import strategy_spec
from odsgd_jax.train._simulation import SimulatedClock, message_bytes, simulated_clock


def _ticking_clock(config: ml_collections.ConfigDict) -> tuple[SimulatedClock, Iterator[bool]]:
  """The run's clock as training would build it, and whether each tick sends."""
  spec = strategy_spec(config)
  name = config.strategy.name
  if not config.cluster.get("workload") and not config.cluster.get("step_time"):
    raise StudyInputError(f"equal-time budgets for {name}: the clock times this host's "
                          f"measured step (cluster.step_time=0), so its time is not known "
                          f"before training; set cluster.workload (e.g. resnet50_v100) or "
                          f"cluster.step_time")
  if spec.options.get("compression"):
    raise StudyInputError(f"equal-time budgets for {name}: a compressed message's size "
                          f"follows training (strategy.compression="
                          f"{spec.options['compression']!r}); compare it at equal steps")
  if config.cluster.get("workload"):  # its step time, batch and message win
    load = cluster.WORKLOADS[config.cluster.workload]
    clock = simulated_clock(config, spec, load.step_time, load.message_bytes,
                            load.samples_per_step, (1,), 1)
  else:  # the trained model's message, as the run measures it
    data = DATASETS[config.data.name]
    clock = simulated_clock(config, spec, config.cluster.step_time, _model_bytes(config),
                            config.data.batch_size // config.cluster.num_workers,
                            data.input_shape, data.num_classes)
  if spec.definition.sends in (local_sgd_round_end, easgd_elastic_step):  # every `period`
    options = {**spec.definition.options(), **spec.options}
    try:
      sends = round_ends(options["period"], options.get("adapt", "fixed"))
    except ValueError as error:
      raise StudyInputError(f"equal-time budgets for {name}: strategy.{error}") from error
  elif callable(spec.definition.sends):
    raise StudyInputError(f"equal-time budgets for {name}: when its messages travel is known "
                          f"only in training; compare it at equal steps")
  else:
    sends = iter(lambda: True, None)
  return clock, sends


def _model_bytes(config: ml_collections.ConfigDict) -> float:
  """The bytes of the message a run of `config` sends (`message_bytes` of its model's
  parameters, shaped without running it)."""
  data = DATASETS[config.data.name]
  options = {k: v for k, v in config.model.to_dict().items() if k != "name"}
  model = models.make_model(config.model.name, data.num_classes, **options)
  stacked = jax.eval_shape(  # one worker's parameters, as a run stacks them
      lambda x: jax.tree.map(lambda p: p[None], model.init(jax.random.key(0), x,
                                                           train=False)["params"]),
      jax.ShapeDtypeStruct((1, *data.input_shape), jnp.float32))
  return message_bytes(stacked)


def _times(config: ml_collections.ConfigDict) -> Iterator[float]:
  """The simulated time after each tick of the run of `config`, tick after tick."""
  clock, sends = _ticking_clock(config)
  for tick in itertools.count():
    clock.schedule(tick)
    yield clock.charge(tick, next(sends), None, False)


def simulated_time(config: ml_collections.ConfigDict, ticks: int) -> float:
  """The simulated seconds the run of `config` spends on its first `ticks` ticks."""
  return next(itertools.islice(_times(config), ticks - 1, None)) if ticks else 0.0


def ticks_within(config: ml_collections.ConfigDict, seconds: float) -> int:
  """The fewest ticks of the run of `config` whose simulated time reaches `seconds`."""
  if seconds <= 0:
    return 0
  return next(tick for tick, time in enumerate(_times(config), start=1) if time >= seconds)


def equal_time_specs(specs: Sequence[RunSpec], baseline: str = "ssgd",
                     derived: records_lib.Derived | None = None) -> list[RunSpec]:
  """`specs` with each run's `train.num_steps` set to its equal-time budget against the
  run of group `baseline` of the same seed (whose own budget stays). `derived`: the study's
  kept figures, where budgets counted before are read (and new ones kept).

  Raises:
    StudyInputError: a seed without a baseline run, or a run whose time cannot be known
      before training (no named workload, compression, rounds that follow the loss).
  """
  code = records_lib.source_digest("study/_budgets.py")

  def kept(compute, *parts):
    if derived is None:
      return compute()
    key = derived.key("equal time", code, *parts)
    if derived.get(key) is None:
      derived.put(key, compute())
    return derived.get(key)

  seconds = {spec.seed: kept(lambda c=config: simulated_time(c, c.train.num_steps),
                             config.to_dict())  # once per seed
             for spec in specs if spec.label == baseline for config in [spec.build()]}
  budgeted = []
  for spec in specs:
    if spec.label == baseline:
      budgeted.append(spec)
      continue
    if spec.seed not in seconds:
      raise StudyInputError(f"equal-time budget of {spec.name}: no {baseline} run of seed "
                            f"{spec.seed} to take the time from")
    config = spec.build()
    steps = kept(lambda c=config, s=seconds[spec.seed]: max(c.train.num_steps,
                                                             ticks_within(c, s)),
                 config.to_dict(), seconds[spec.seed])
    budgeted.append(dataclasses.replace(
        spec, overrides=spec.overrides + (("train.num_steps", steps),)))
  return budgeted
