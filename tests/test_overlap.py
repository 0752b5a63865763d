"""What the compiled train step moves. Overlap is possible: in the step of odsgd and
pseudo_sync no collective depends on the step's batch (its all-reduce can run while the
gradient is computed); in ssgd one does. A tick runs only its branch's collectives. Gossip
sends each worker's model to its peers (collective-permutes), never every model to
everyone."""

import re

import jax
import numpy as np
import optax
import pytest

from odsgd_jax import parallel
from odsgd_jax.cluster import synchronous_schedule
from odsgd_jax.models import make_model
from odsgd_jax.strategies import get_strategy
from odsgd_jax.train import make_train_step

COLLECTIVES = ("all-reduce", "all-gather", "reduce-scatter", "collective-permute", "all-to-all")
_INSTRUCTION = re.compile(r"^\s*(?:ROOT\s+)?(%[\w.\-]+)\s*=\s*.*?\s([\w\-]+)\((.*)$")
_NAME = re.compile(r"%[\w.\-]+")
pytestmark = pytest.mark.devices(8)  # the compiled step of 8 workers, one per device


def _computations(hlo_text):
  """{computation name: [instruction lines]}, and the entry computation's name."""
  computations, current, entry = {}, None, None
  for line in hlo_text.splitlines():
    header = re.match(r"^(ENTRY\s+)?(%[\w.\-]+)\s.*\{\s*$", line)
    if header:
      current = header.group(2)
      computations[current] = []
      entry = current if header.group(1) else entry
    elif current and line.strip() and line.strip() != "}":
      computations[current].append(line)
  return computations, entry


def collectives_on_batch(hlo_text):
  """Names of collectives whose inputs depend (transitively) on a `batch[...]` parameter.

  Walks the def-use graph of the entry computation. A call into other
  computations (fusion, while, conditional) taints its outputs if any operand is
  tainted, and any collective inside it counts as dependent (conservative).
  """
  computations, entry = _computations(hlo_text)
  tainted, dependent = set(), []

  def collectives_inside(name, seen):
    found = []
    for line in computations.get(name, []):
      match = _INSTRUCTION.match(line)
      if match and match.group(2).startswith(COLLECTIVES):
        found.append(match.group(1))
      for callee in re.findall(r"(?:calls|body|condition|branch_computations|to_apply)=\{?"
                               r"([%\w.\-, ]+)\}?", line):
        for sub in _NAME.findall(callee):
          if sub not in seen:
            seen.add(sub)
            found += collectives_inside(sub, seen)
    return found

  for line in computations[entry]:
    match = _INSTRUCTION.match(line)
    if not match:
      continue
    name, opcode, rest = match.groups()
    if opcode == "parameter":
      if 'op_name="batch[' in line:
        tainted.add(name)
      continue
    operands = set(_NAME.findall(rest.split("metadata=")[0]))
    if operands & tainted:
      tainted.add(name)
      if opcode.startswith(COLLECTIVES):
        dependent.append(name)
      elif opcode in ("while", "conditional", "call"):
        dependent += collectives_inside(name, set()) or []
        for callee in _NAME.findall(rest):
          dependent += collectives_inside(callee, set())
  return dependent


def _compiled_step(name, settled=False, model=None, num_workers=8, **options):
  """The compiled step's HLO text: of the first tick, or with `settled` of the ticks from
  which the strategy's tick conditions are decided (`TrainStep.settled_from`)."""
  worker_mesh = parallel.make_worker_mesh(num_workers, 8)
  model = model or make_model("cnn1d", 10)
  strategy = get_strategy(name)
  tx = strategy.make(optax.sgd(0.1, momentum=0.9), axis_name=parallel.WORKER_AXES, **options)
  batch = jax.device_put({"image": np.zeros((num_workers, 4, 40), np.float32),
                          "label": np.zeros((num_workers, 4), np.int32)},
                         worker_mesh.sharding(parallel.BATCH))
  train_step = make_train_step(model, tx, worker_mesh, strategy)
  state = train_step.init_state((40,), seed=0)
  if settled:
    assert train_step.settled_from > 0, "the strategy has tick conditions to decide"
  step = train_step.program(tick=train_step.settled_from if settled else 0)
  return step.lower(state, batch, synchronous_schedule(0, num_workers)).compile().as_text()


@pytest.mark.parametrize("name,options", [
    ("odsgd", {"local_lr": 0.05, "warmup_steps": 0}),
    ("odsgd", {"local_lr": 0.05, "warmup_steps": 0, "local_optimizer": "dcasgd"}),
    ("pseudo_sync", {}),
])
@pytest.mark.parametrize("settled", [False, True])  # the first ticks' program and the later
def test_delayed_strategies_all_reduce_nothing_from_this_batch(name, options, settled):
  hlo = _compiled_step(name, settled, **options)
  assert re.search(r"all-reduce(-start)?\(", hlo), "the step must still synchronize"
  assert collectives_on_batch(hlo) == []


def test_ssgd_all_reduce_depends_on_this_batch():
  assert collectives_on_batch(_compiled_step("ssgd"))


def collectives_outside_branches(hlo_text):
  """Collectives the step runs on every tick: those reachable from the entry
  computation without entering a branch of a conditional."""
  computations, entry = _computations(hlo_text)
  found, seen, todo = [], {entry}, [entry]
  while todo:
    for line in computations.get(todo.pop(), []):
      match = _INSTRUCTION.match(line)
      if match and match.group(2).startswith(COLLECTIVES):
        found.append(match.group(1))
      for callee in re.findall(r"(?:calls|body|condition|to_apply)=\{?([%\w.\-, ]+)\}?", line):
        for sub in _NAME.findall(callee):
          if sub not in seen:
            seen.add(sub)
            todo.append(sub)
  return found


@pytest.mark.parametrize("name,options", [
    ("local_sgd", {"period": 4}),  # only a round's last tick averages
    # the warm-up's all-reduce or the delayed one, not both
    ("odsgd", {"local_lr": 0.05, "warmup_steps": 5}),
    # dense or compressed
    ("odsgd", {"local_lr": 0.05, "warmup_steps": 0, "compression": "topk:0.01,warmup=5"}),
])
def test_a_tick_runs_only_the_collectives_of_its_branch(name, options):
  """Under vmap a cond on per-worker state would become a select running both
  branches; the compiled step must keep real conditionals around the collectives."""
  hlo = _compiled_step(name, **options)
  assert re.search(r"all-(reduce|gather)(-start)?\(", hlo), "the step must still synchronize"
  assert collectives_outside_branches(hlo) == []


_SHAPE = re.compile(r"=\s*\(?([a-z0-9]+)\[([\d,]*)\]")


def _result_elements(line):
  """Elements of an HLO instruction's (first) result."""
  match = _SHAPE.search(line)
  return int(np.prod([int(d) for d in match.group(2).split(",") if d])) if match else 0


@pytest.mark.parametrize("num_workers", [8, 16])  # one worker per device, and two
@pytest.mark.parametrize("graph", ["ring", "exponential"])
def test_gossip_sends_its_model_to_its_peers_and_gathers_no_model(num_workers, graph):
  """Each worker's model goes to each of its peers by collective-permute; no all-gather
  carries a model (the clock charges peers x model, which is what moves)."""
  model = make_model("mlp", 10, hidden_sizes=(1024, 960))  # 1.03 M floats
  hlo = _compiled_step("gossip", model=model, num_workers=num_workers, graph=graph)
  lines = [line for line in hlo.splitlines() if _INSTRUCTION.match(line)]
  permutes = [line for line in lines if re.search(r" collective-permute(-start)?\(", line)]
  gathers = [line for line in lines if re.search(r" all-gather(-start)?\(", line)]
  assert permutes, "the peers' models must travel"
  assert max(map(_result_elements, permutes)) >= 960 * 1024  # a model's largest tensor
  assert all(_result_elements(line) < 1000 for line in gathers), gathers
