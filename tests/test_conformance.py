"""Checks every registered strategy must pass (docs/DESIGN.md "Checks").

Strategies run once per worker on the shared harness (`strategies.worker_ticks`), with the
options each declares (`StrategyDef.examples`: the first for the optimization checks, all
of them for the clock's). Every registered strategy is checked, a test's own included; the
last tests register broken copies and show that the checks catch them.
"""

import dataclasses
import subprocess
import sys

import jax
import jax.numpy as jnp
import numpy as np
import optax
import pytest

from configs import _strategies, default
from odsgd_jax import cluster, comm, domains, strategies
from odsgd_jax.cluster import synchronous_schedule
from odsgd_jax.strategies import AXIS, STRATEGIES, init_workers, worker_ticks
from odsgd_jax.strategies import _tracing as tracing
from odsgd_jax.train import SimulatedClock, clock_record
from tests.helpers import REPO

NUM_WORKERS = 4

# Worker i's loss is a |x - c_i|^2 / 2 with the same curvature a for every worker and a
# minimum c_i of its own: the workers' mean loss is least at the mean of the c_i, which
# no worker reaches alone. A strategy that never communicates leaves worker i at c_i.
CURVATURE = jnp.asarray([0.5, 1.0, 1.5])
MINIMA = jnp.asarray([[2.0, -2.0, 0.5], [0.0, -1.0, 1.5], [1.0, -3.0, -0.5], [1.0, -2.0, 0.5]])
OPTIMUM = MINIMA.mean(axis=0)  # [1.0, -2.0, 0.5]


def _quadratic_grad(x, worker):
  return CURVATURE * (x - MINIMA[worker])


def _make(definition, inner, options=None):
  options = definition.examples[0].options if options is None else options
  return definition.make(inner, axis_name=AXIS, **options)


def _run(tx, params_N, grad_fn, num_steps):
  """`num_steps` ticks of `tx` on every worker (`strategies.worker_ticks`); returns
  per-worker params and state."""
  step = jax.jit(worker_ticks(tx, lambda x, t, worker: (0.0, grad_fn(x, worker))))
  opt_state = init_workers(tx, params_N)
  for t in range(num_steps):
    params_N, opt_state = step(params_N, opt_state, t, synchronous_schedule(t, NUM_WORKERS))
  return params_N, opt_state


# A decaying rate: gradients applied stale and in turn (asgd) settle a distance of the order
# of a constant rate away from the optimum.
RATE = optax.exponential_decay(0.05, transition_steps=200, decay_rate=0.5)


def distance_to_optimum(definition, inner=None, num_steps=1000) -> float:
  """How far the strategy's model ends from the workers' joint optimum (first example)."""
  inner = inner or optax.sgd(RATE, momentum=0.5)
  params_N, opt_state = _run(_make(definition, inner), jnp.zeros((NUM_WORKERS, 3)),
                             _quadratic_grad, num_steps)
  return float(jnp.abs(definition.model_params(params_N, opt_state) - OPTIMUM).max())


@pytest.mark.parametrize("name", sorted(STRATEGIES))
def test_converges_to_the_optimum_of_the_workers_mean_loss(name):
  assert distance_to_optimum(STRATEGIES[name]) < 1e-4


@pytest.mark.parametrize("name", sorted(STRATEGIES))
def test_state_types_are_stable_under_jit(name):
  tx = _make(STRATEGIES[name], optax.sgd(0.1, momentum=0.9))
  params_N = {"w": jnp.ones((NUM_WORKERS, 2, 3)), "b": jnp.zeros((NUM_WORKERS, 3))}
  initial = jax.vmap(tx.init)(params_N)
  _, final = _run(tx, params_N, lambda p, i: jax.tree.map(lambda x: x * (i + 1.0), p), 3)
  shape_dtype = lambda tree: [(x.shape, x.dtype, type(x)) for x in jax.tree.leaves(tree)]
  assert jax.tree.structure(final) == jax.tree.structure(initial)
  assert shape_dtype(final) == shape_dtype(initial)


@pytest.mark.parametrize("name", sorted(STRATEGIES))
def test_works_with_inject_hyperparams(name):
  inner = optax.inject_hyperparams(optax.sgd)(learning_rate=RATE, momentum=0.5)
  assert distance_to_optimum(STRATEGIES[name], inner) < 1e-4
  # the learning rate stays reachable (and changeable) inside the strategy state: the
  # schedule's value at the inner optimizer's last update
  _, opt_state = _run(_make(STRATEGIES[name], inner), jnp.zeros((NUM_WORKERS, 3)),
                      _quadratic_grad, num_steps=3)
  injected = [s for s in jax.tree.leaves(opt_state, is_leaf=lambda s: hasattr(s, "hyperparams"))
              if hasattr(s, "hyperparams")]
  assert injected and all(np.allclose(s.hyperparams["learning_rate"], RATE(s.count - 1))
                          for s in injected)


@pytest.mark.parametrize("name", sorted(STRATEGIES))
def test_bfloat16_params_keep_their_dtype(name):
  tx = _make(STRATEGIES[name], optax.sgd(0.1, momentum=0.9))
  params_N = jnp.ones((NUM_WORKERS, 4), jnp.bfloat16)
  final, _ = _run(tx, params_N, lambda x, i: x * (i + 1), num_steps=3)
  assert final.dtype == jnp.bfloat16
  assert bool(jnp.all(jnp.isfinite(final)))


# A cluster whose messages take long (the 3-float model timed as a 1 MB message over 1 MB/s,
# steps of 10 ms): every message the clock charges shows as communication, even where it
# overlaps the compute.
_WORKERS = cluster.Workers(speeds=(1.0,) * NUM_WORKERS, step_time=0.01)
_NETWORK = cluster.Network(bandwidth=1e6, latency=1e-3)
_MODEL_BYTES, _MESSAGE_BYTES = 3 * 4, 1e6


def sent_a_message(tick, *args):
  """`tick(*args)`, run on concrete values equation by equation from its traced program
  (`tracing.run`: a conditional runs only the branch it takes), and whether a message's
  collective ran: an equation under the name scope that every message of `comm` carries
  (`comm.MESSAGE_SCOPE`: `exchange`, `neighbour_mean`), however the strategy calls it."""
  closed, out_shape = jax.make_jaxpr(tick, return_shape=True)(*args)
  sent = []
  outputs = tracing.run(closed, *jax.tree.leaves(args),
                        visit=lambda eqn, scope: sent.append(tracing.in_message(scope)))
  return jax.tree.unflatten(jax.tree.structure(out_shape), outputs), any(sent)


def timing_mismatches(definition, options, num_ticks=10) -> list[str]:
  """The ticks on which the clock's charge and the strategy's messages disagree.

  Each tick runs on concrete values (`sent_a_message`: whether a message of `comm` ran);
  after each tick its metrics go to a `SimulatedClock` with its timeline, as the training
  loop's do. A tick that sent a message must be charged communication time (on the tick
  its timeline says the exchange can first hold the workers up, `exposed_after` ticks
  later); a tick that sent none must not.
  """
  tx = definition.make(optax.sgd(0.05, momentum=0.5), axis_name=AXIS, **options)
  timeline = definition.make_timeline(_WORKERS, _NETWORK, _MESSAGE_BYTES, None, **options)
  clock = SimulatedClock(timeline, _WORKERS.step_time, _MODEL_BYTES, _MESSAGE_BYTES)
  tick = worker_ticks(tx, lambda x, t, worker: (0.0, _quadratic_grad(x, worker)))
  x = jnp.zeros((NUM_WORKERS, 3))
  opt_state = init_workers(tx, x)
  lag = definition.timeline.exposed_after(**definition.timeline_options(**options))
  sent_on, charged_on = [], []
  for t in range(num_ticks + lag):
    schedule = jax.tree.map(jnp.asarray, clock.schedule(t))
    old_state = opt_state
    (x, opt_state), sent = sent_a_message(tick, x, opt_state, jnp.int32(t), schedule)
    record = clock_record(definition, old_state, opt_state)
    before = clock.totals["communication"].max()
    clock.advance(t, {k: float(np.mean(v)) for k, v in record.items()})
    sent_on.append(sent)
    charged_on.append(clock.totals["communication"].max() > before)
  mismatches = []
  for t in range(num_ticks):  # an exchange is charged where it can hold the workers up
    sent, charged = sent_on[t], charged_on[t + lag]
    if charged != sent:
      mismatches.append(f"tick {t}: {'sent' if sent else 'sent nothing'} but "
                        f"{'charged' if charged else 'not charged'}"
                        + (f" {lag} ticks later" if lag else ""))
  return mismatches


@pytest.mark.parametrize("name,example", [(name, i) for name in sorted(STRATEGIES)
                                          for i in range(len(STRATEGIES[name].examples))])
def test_the_clock_charges_communication_on_the_ticks_that_send_and_no_others(name, example):
  definition = STRATEGIES[name]
  assert timing_mismatches(definition, definition.examples[example].options) == []


# Broken copies of registered strategies: each regression is caught.


@pytest.fixture
def registry(monkeypatch):
  """`strategies.register` into a copy of the registry, dropped after the test."""
  monkeypatch.setattr(strategies._registry, "STRATEGIES", dict(STRATEGIES))
  return strategies._registry.STRATEGIES


def test_a_copy_of_local_sgd_without_its_round_marker_is_refused_and_timed_wrongly(registry):
  """Registration reads off its update that it sends inside a conditional only; were it
  registered, the clock would charge every tick, and the tick-by-tick check says which."""
  local_sgd = STRATEGIES["local_sgd"]
  copy = dataclasses.replace(local_sgd, name="local_sgd_copy", sends=strategies.EVERY_TICK)
  with pytest.raises(ValueError, match="strategy 'local_sgd_copy': sends=EVERY_TICK, but its "
                                       "update sends its messages only inside a conditional"):
    strategies.register(copy)
  assert timing_mismatches(local_sgd, {"period": 3}) == []
  mismatches = timing_mismatches(copy, {"period": 3})
  assert mismatches == [f"tick {t}: sent nothing but charged" for t in range(10)
                        if (t + 1) % 3]


@domains.declared(period=domains.integer(1), compression=comm.COMPRESSION)
def _ssgd_with_a_period(inner, *, axis_name, period=4, compression=None):
  """ssgd that takes a period (which local SGD's timeline reads) and ignores it."""
  del period
  return strategies.ssgd(inner, axis_name=axis_name, compression=compression)


def test_a_round_marker_on_a_strategy_that_sends_every_tick_is_refused(registry):
  local_sgd = STRATEGIES["local_sgd"]
  with pytest.raises(ValueError, match="strategy 'ssgd_in_rounds': sends='local_sgd_round_end' "
                                       "says some ticks send nothing, but its update sends a "
                                       "message on every tick: sends=EVERY_TICK"):
    strategies.register(dataclasses.replace(local_sgd, name="ssgd_in_rounds",
                                            make=_ssgd_with_a_period, defaults=None,
                                            examples=(strategies.Example({}, 1, "momentum"),)))


def test_a_misspelled_option_of_an_example_or_a_default_is_refused(registry):
  ssgd = STRATEGIES["ssgd"]
  with pytest.raises(ValueError, match=r"strategy 'typo': example 1: 'compresion' is not an "
                                       r"option of its factory \(options: compression"):
    strategies.register(dataclasses.replace(ssgd, name="typo", examples=(
        ssgd.examples[0], strategies.Example({"compresion": "topk:0.1"}, 1, "momentum"))))
  with pytest.raises(ValueError, match=r"strategy 'typo': defaults: 'compresion' is not an "
                                       r"option"):
    strategies.register(dataclasses.replace(ssgd, name="typo",
                                            defaults={"compresion": "topk:0.1"}))
  with pytest.raises(ValueError, match=r"strategy 'typo': example 0: compression"):
    strategies.register(dataclasses.replace(ssgd, name="typo", examples=(
        strategies.Example({"compression": "topk:2"}, 1, "momentum"),)))
  assert "typo" not in registry


@domains.declared(compression=comm.COMPRESSION)
def _never_communicates(inner, *, axis_name, compression=None):
  """ssgd with its all-reduce left out: each worker steps on its own gradient."""
  del axis_name, compression
  inner = optax.with_extra_args_support(inner)
  return optax.GradientTransformationExtraArgs(
      lambda params: strategies.SsgdState(inner.init(params), None),
      lambda grads, state, params=None, **extra: (
          lambda step: (step[0], strategies.SsgdState(step[1], None)))(
              inner.update(grads, state.inner_state, params)))


def test_a_copy_of_ssgd_that_never_communicates_is_refused_and_fails_the_checks(registry):
  ssgd = STRATEGIES["ssgd"]
  copy = dataclasses.replace(ssgd, name="lonely_ssgd", make=_never_communicates)
  with pytest.raises(ValueError, match="strategy 'lonely_ssgd': its update sends no message "
                                       "through odsgd_jax.comm"):
    strategies.register(copy)
  assert distance_to_optimum(ssgd) < 1e-3
  assert distance_to_optimum(copy) > 0.5  # worker 0 sits at its own minimum
  assert len(timing_mismatches(copy, {})) == 10  # charged an all-reduce it never sent


def test_a_strategy_without_a_timeline_or_its_sending_rule_is_refused(registry):
  ssgd = STRATEGIES["ssgd"]
  with pytest.raises(ValueError, match="strategy 'untimed': timeline=None: name the rule"):
    strategies.register(dataclasses.replace(ssgd, name="untimed", timeline=None))
  with pytest.raises(ValueError, match="strategy 'unsaid': sends=None: say when it sends"):
    strategies.register(dataclasses.replace(ssgd, name="unsaid", sends=None))
  with pytest.raises(ValueError, match="timeline='synchronous'"):  # a class, not its name
    strategies.register(dataclasses.replace(ssgd, name="named", timeline="synchronous"))
  assert {"untimed", "unsaid", "named"}.isdisjoint(registry)


def test_a_misspelled_experiment_setting_fails_where_it_is_written(registry, monkeypatch):
  """What the experiments run a strategy with is registered with it, and read by
  configs/_strategies.py: a misspelled option, strategy or optimizer field is an error."""
  odsgd = STRATEGIES["odsgd"]
  with pytest.raises(ValueError, match="'warmup_step' is not an option of its factory"):
    strategies.register(dataclasses.replace(odsgd, name="odsgd_typo",
                                            defaults={"warmup_step": 100}))
  with pytest.raises(ValueError, match=r"defaults: local_lr=-1 is out of range"):
    strategies.register(dataclasses.replace(odsgd, name="odsgd_typo", defaults={"local_lr": -1}))
  with pytest.raises(ValueError, match="unknown strategy 'pseudo-sync'"):
    default.get_config("pseudo-sync")
  registry["asgd_typo"] = dataclasses.replace(STRATEGIES["asgd"], name="asgd_typo",
                                              optimizer_changes={"momentm": 0.0})
  monkeypatch.setattr(_strategies, "STRATEGIES", registry)
  with pytest.raises(ValueError, match="changes optimizer.momentm, which the config does not"):
    default.get_config("asgd_typo")
  odsgd_config = default.get_config("odsgd").strategy  # the registered ones (issue 75)
  assert (odsgd_config.warmup_steps, odsgd_config.correction) == (0, "spike")


@pytest.mark.parametrize("name,example", [(name, i) for name in sorted(STRATEGIES)
                                          for i in range(len(STRATEGIES[name].examples))])
def test_an_exchange_timed_beside_the_compute_does_not_wait_for_the_gradient(name, example):
  """Every example whose timeline overlaps a tick's exchange with its compute (its
  registration checks the first)."""
  definition = STRATEGIES[name]
  assert strategies.overlap_problem(definition, definition.examples[example].options) is None


def test_a_synchronous_exchange_timed_as_overlapped_is_refused(registry):
  """ssgd's all-reduce of this tick's gradient under the pipelined rule, and the mistake a
  trial of CoCoD-SGD made: its mean of this tick's updated parameters inside a `lax.cond`
  (the exchange is in a branch, and reads the gradient through the parameters)."""
  ssgd = STRATEGIES["ssgd"]
  with pytest.raises(ValueError, match=r"'pipelined_ssgd': timeline PipelinedTimeline runs a "
                                       r"tick's exchange beside .* psum reads this tick's"):
    strategies.register(dataclasses.replace(ssgd, name="pipelined_ssgd",
                                            timeline=cluster.PipelinedTimeline))

  @domains.declared(period=domains.integer(1))
  def averages_updated_params(inner, *, axis_name, period=2):
    def update(grads, state, params=None, **extra):
      del extra
      step, inner_state = inner.update(grads, state[0], params)
      moved = optax.apply_updates(params, step)
      averaged = jax.lax.cond(state[1] % period == period - 1,
                              lambda x: jax.lax.pmean(x, axis_name), lambda x: x, moved)
      return optax.tree.sub(averaged, params), (inner_state, state[1] + 1)
    return optax.GradientTransformationExtraArgs(
        lambda params: (inner.init(params), jnp.zeros((), jnp.int32)), update)

  with pytest.raises(ValueError, match="psum reads this tick's gradient"):
    strategies.register(dataclasses.replace(
        ssgd, name="cocod_trial", make=averages_updated_params,
        timeline=cluster.PipelinedTimeline, examples=(strategies.Example({}, 1, "count"),)))
  assert {"pipelined_ssgd", "cocod_trial"}.isdisjoint(registry)


def test_a_timeline_reading_an_option_the_factory_lacks_is_refused(registry):
  """odsgd's warm-up is read by its timeline by name: renamed in one place only, it is an
  error, not a run timed as pipelined from the first tick."""
  with pytest.raises(ValueError, match="'ssgd_warm': timeline WarmupPipelinedTimeline reads "
                                       "option 'warmup_steps', which its factory does not take"):
    strategies.register(dataclasses.replace(STRATEGIES["ssgd"], name="ssgd_warm",
                                            timeline=cluster.WarmupPipelinedTimeline))

  class SwallowsOptions(cluster.SynchronousTimeline):
    def __init__(self, workers, network, message_bytes, overlap=None, **options):
      del options
      super().__init__(workers, network, message_bytes, overlap)

  with pytest.raises(ValueError, match="takes \\*\\*options: name each option"):
    strategies.register(dataclasses.replace(STRATEGIES["ssgd"], name="ssgd_swallows",
                                            timeline=SwallowsOptions))
  odsgd = STRATEGIES["odsgd"]
  timeline = odsgd.make_timeline(cluster.Workers((1.0,) * 2, 0.1), cluster.Network(1e9), 100,
                                 warmup_steps=7)
  assert timeline.warmup_steps == 7
  assert {"ssgd_warm", "ssgd_swallows"}.isdisjoint(registry)


def test_registering_the_strategies_does_not_start_jaxs_backend():
  """Registration traces shapes only: jax.distributed must start before the backend, and
  the train command imports every strategy first."""
  code = ("import experiments.train, odsgd_jax.strategies\n"
          "from odsgd_jax import xla_flags\n"
          "assert not xla_flags.backend_started()\n")
  result = subprocess.run([sys.executable, "-c", code], cwd=REPO, capture_output=True,
                          text=True, timeout=300)
  assert result.returncode == 0, result.stderr[-2000:]
