"""The inner optimizer and its learning-rate schedule, from `config.optimizer`."""

from typing import Any

import ml_collections
import optax

from odsgd_jax import domains
from odsgd_jax.comm import parse_communication
from odsgd_jax.strategies import StrategySpec, resolve
from odsgd_jax.train._run_schedule import scale_by_run_schedule

OPTIMIZERS = ("sgd", "adam", "adamw")
LR_SCHEDULES = ("constant", "cosine", "step")


def _epochs_problem(epochs: Any) -> str | None:
  if not isinstance(epochs, (tuple, list)) or any(
      isinstance(e, bool) or not isinstance(e, (int, float)) or e < 0 for e in epochs):
    return "is not a tuple of epochs >= 0"
  return None


# config.optimizer's fields, what each may be (the config check reads this table).
DOMAINS: dict[str, domains.Domain] = {
    "name": domains.choice(*OPTIMIZERS),
    "learning_rate": domains.real(0, low_open=True),
    "momentum": domains.FRACTION,
    "nesterov": domains.FLAG,
    "b1": domains.FRACTION,
    "b2": domains.FRACTION,
    "eps": domains.real(0, low_open=True),
    "weight_decay": domains.real(0),
    "clip_norm": domains.real(0),
    "schedule": domains.choice(*LR_SCHEDULES),
    "warmup_steps": domains.integer(0),
    "decay_epochs": domains.Domain("other", check=_epochs_problem, text="a tuple of epochs >= 0"),
    "decay_factor": domains.real(0, low_open=True),
}


def make_lr_schedule(cfg: ml_collections.ConfigDict, num_steps: int,
                     steps_per_epoch: int) -> optax.Schedule:
  """Linear warm-up for `warmup_steps`, then constant, cosine to 0, or step decay.

  `step` multiplies the rate by `decay_factor` at each epoch in `decay_epochs`
  (the OD-SGD authors' CIFAR-10 scripts: x0.1 at epochs 80 and 120).
  """
  if cfg.schedule == "constant":
    main = optax.constant_schedule(cfg.learning_rate)
  elif cfg.schedule == "cosine":
    main = optax.cosine_decay_schedule(cfg.learning_rate, max(1, num_steps - cfg.warmup_steps))
  else:
    boundaries = {
        int(epoch * steps_per_epoch) - cfg.warmup_steps: cfg.decay_factor
        for epoch in cfg.decay_epochs
    }
    main = optax.piecewise_constant_schedule(cfg.learning_rate, boundaries)
  if cfg.warmup_steps <= 0:
    return main
  warmup = optax.linear_schedule(0.0, cfg.learning_rate, cfg.warmup_steps)
  return optax.join_schedules([warmup, main], [cfg.warmup_steps])


def make_inner_optimizer(cfg: ml_collections.ConfigDict,
                         lr_schedule: optax.Schedule) -> optax.GradientTransformation:
  """The optimizer a strategy applies to the gradient it chooses.

  sgd and adam: weight decay is added to the gradient before momentum (coupled L2, as in
  the papers' MXNet code), so the strategy's all-reduce carries the raw gradient. adamw:
  decoupled weight decay (optax.adamw's: the decay times the parameters added to Adam's
  step, both scaled by the rate). `clip_norm` > 0 first clips the gradient the strategy
  chose to that global norm. Each reads its learning rate at the run's tick
  (`_run_schedule`), not at this worker's own count of updates.
  """
  learning_rate = scale_by_run_schedule(lr_schedule)
  adam = lambda: optax.scale_by_adam(b1=cfg.b1, b2=cfg.b2, eps=cfg.eps)
  if cfg.name == "sgd":
    base = optax.chain(optax.trace(decay=cfg.momentum, nesterov=cfg.nesterov)
                       if cfg.momentum else optax.identity(), learning_rate)
  elif cfg.name == "adam":
    base = optax.chain(adam(), learning_rate)
  else:
    base = optax.chain(adam(), optax.add_decayed_weights(cfg.weight_decay), learning_rate)
  if cfg.weight_decay and cfg.name != "adamw":
    base = optax.chain(optax.add_decayed_weights(cfg.weight_decay), base)
  if cfg.clip_norm:
    return optax.chain(optax.clip_by_global_norm(cfg.clip_norm), base)
  return base


def strategy_spec(config: ml_collections.ConfigDict) -> StrategySpec:
  """`config.strategy` resolved (`odsgd_jax.strategies.resolve`): its options, and the
  inner optimizer's heavy-ball momentum where the factory takes it (delay corrections
  need it). An `outer` optimizer (local SGD, DiLoCo-style) is given as sgd's arguments,
  e.g. {"learning_rate": 0.7, "momentum": 0.9, "nesterov": True}.

  Raises:
    KeyError: an unknown strategy name. ValueError: an option it does not take, a value it
      does not accept (the message names the field), or a compression with momentum
      correction over an optimizer that is not plain SGD (the correction is its momentum).
  """
  options = {k: v for k, v in config.strategy.to_dict().items() if k != "name"}
  optimizer = config.optimizer
  heavy_ball = optimizer.name == "sgd"
  inner_momentum = float(optimizer.momentum) if heavy_ball else 0.0
  num_workers = config.cluster.get("num_workers")
  known = isinstance(num_workers, int) and not isinstance(num_workers, bool) and num_workers > 0
  spec = resolve(config.strategy.name, options, inner_momentum, num_workers if known else None)
  communication = parse_communication(spec.options.get("compression"))  # checked: parses
  if communication is not None and communication.momentum and (inner_momentum or not heavy_ball):
    raise ValueError(
        f"strategy.compression={options['compression']!r} applies momentum before the "
        f"exchange (momentum correction), so the inner optimizer must be plain SGD: set "
        f"optimizer.name='sgd' and optimizer.momentum=0 (now {optimizer.name!r}, "
        f"{optimizer.momentum})")
  return spec
